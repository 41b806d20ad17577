//! Watching the ranks of a job: their exits (through process file
//! descriptors), failures marked at once, stopping the others after a
//! grace, timeouts and signals, and their output.

use super::report::{Output, RankOutcome, describe_status};
use super::snapshot;
use crate::engine::job::{self, JobBlock};
use crate::sys::{self, signal_name};
use crate::types::Rank;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::Ordering::SeqCst;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the supervision is allowed: how long the job may run, how long
/// the others may go on after a rank failed, and whether to say so.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub(super) timeout: Option<Duration>,
    pub(super) grace: Duration,
    pub(super) verbose: bool,
    /// When stopping ranks (a timeout, another rank's failure), attach
    /// `gdb` (if installed) to them first and keep their backtraces.
    pub(super) backtraces: bool,
}

impl Limits {
    /// Tell the user (with `verbose`) what the launcher does.
    pub(super) fn say(&self, msg: impl AsRef<str>) {
        if self.verbose {
            let _ = writeln!(io::stderr(), "gaspi-run: {}", msg.as_ref());
        }
    }
}

/// A started rank and the threads forwarding its output.
pub(super) struct Running {
    rank: usize,
    pub(super) pid: u32,
    child: Child,
    pidfd: OwnedFd,
    status: Option<ExitStatus>,
    stopped: bool,
    /// Where it was when the launcher stopped it.
    at_stop: Option<String>,
    /// The rank that ended it (`proc_kill`).
    killed_by: Option<Rank>,
    readers: Vec<JoinHandle<Vec<u8>>>,
}

impl Running {
    /// A descriptor that becomes readable when the rank exits.
    pub(super) fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    pub(super) fn start(mut cmd: Command, rank: usize, output: Output) -> io::Result<Running> {
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let pidfd = match sys::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) => {
                sys::signal_child(pid, libc::SIGKILL);
                let _ = child.wait();
                return Err(e);
            }
        };
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(forward(out, rank, output, false));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(forward(err, rank, output, true));
        }
        Ok(Running {
            rank,
            pid,
            child,
            pidfd,
            status: None,
            stopped: false,
            at_stop: None,
            killed_by: None,
            readers,
        })
    }

    pub(super) fn finish(mut self) -> RankOutcome {
        let status = match self.status {
            Some(s) => s,
            None => self
                .child
                .wait()
                .unwrap_or_else(|_| ExitStatus::from_raw(0xff00)),
        };
        let mut outs = self
            .readers
            .into_iter()
            .map(|h| h.join().unwrap_or_default());
        RankOutcome {
            rank: self.rank as Rank,
            pid: self.pid,
            status,
            stdout: outs.next().unwrap_or_default(),
            stderr: outs.next().unwrap_or_default(),
            stopped_by_launcher: self.stopped,
            at_stop: self.at_stop,
            killed_by: self.killed_by,
        }
    }
}

/// Read a rank's stream to its end: keep it ([`Output::Capture`]) or
/// forward it line by line with a rank prefix ([`Output::Tagged`]).
fn forward(
    stream: impl Read + Send + 'static,
    rank: usize,
    output: Output,
    is_err: bool,
) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut reader = BufReader::new(stream);
        if output == Output::Capture {
            let _ = reader.read_to_end(&mut kept);
            return kept;
        }
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            let mut tagged = format!("[{rank}] ").into_bytes();
            tagged.extend_from_slice(&line);
            if !tagged.ends_with(b"\n") {
                tagged.push(b'\n');
            }
            let _ = if is_err {
                io::stderr().lock().write_all(&tagged)
            } else {
                io::stdout().lock().write_all(&tagged)
            };
            line.clear();
        }
        kept
    })
}

/// The supervision loop's state.
pub(super) struct Supervisor<'a> {
    pub(super) limits: Limits,
    /// The control blocks, one per host of `host` ranks.
    pub(super) blocks: &'a [JobBlock],
    pub(super) host: usize,
    pub(super) running: &'a mut Vec<Running>,
    pub(super) exit_order: Vec<Rank>,
    pub(super) start: Instant,
    /// When to send SIGTERM to the ranks still running.
    pub(super) stop_at: Option<Instant>,
    /// When to send SIGKILL to the ranks still running.
    pub(super) kill_at: Option<Instant>,
    /// SIGTERM went out already.
    pub(super) term_sent: bool,
    pub(super) timed_out: bool,
    pub(super) interrupted: Option<i32>,
}

impl Supervisor<'_> {
    fn alive(&self) -> impl Iterator<Item = &Running> {
        self.running.iter().filter(|r| r.status.is_none())
    }

    fn signal_all(&mut self, signal: i32) {
        for r in self.running.iter_mut().filter(|r| r.status.is_none()) {
            sys::signal_child(r.pid, signal);
            r.stopped = true;
        }
    }

    /// Begin stopping the job: SIGTERM at `when` (unless sent already),
    /// SIGKILL a second after it.
    fn stop(&mut self, when: Instant) {
        if !self.term_sent && self.stop_at.is_none_or(|t| when < t) {
            self.stop_at = Some(when);
        }
    }

    pub(super) fn supervise(&mut self, signals: Option<&sys::SignalPipe>) -> io::Result<()> {
        let deadline = self.limits.timeout.map(|t| self.start + t);
        while self.alive().next().is_some() {
            let next = [
                deadline.filter(|_| !self.timed_out),
                self.stop_at,
                self.kill_at,
            ]
            .into_iter()
            .flatten()
            .min();
            let wait = next.map(|t| t.saturating_duration_since(Instant::now()));
            let idx: Vec<usize> = (0..self.running.len())
                .filter(|&i| self.running[i].status.is_none())
                .collect();
            let mut fds: Vec<_> = idx.iter().map(|&i| self.running[i].pidfd.as_fd()).collect();
            fds.extend(signals.map(|s| s.fd()));
            let ready = sys::poll_readable(&fds, wait)?;
            for (k, &i) in idx.iter().enumerate() {
                if ready[k] {
                    self.reap(i)?;
                }
            }
            if let Some(s) = signals.filter(|_| ready[idx.len()]) {
                if let Some(&sig) = s.drain().first() {
                    self.limits
                        .say(format!("received {}: stopping the job", signal_name(sig)));
                    self.interrupted.get_or_insert(sig);
                    self.stop(Instant::now());
                }
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) && !self.timed_out {
                self.timed_out = true;
                self.limits.say(format!(
                    "the job ran past its timeout of {:?}: stopping it",
                    self.limits.timeout.unwrap_or_default()
                ));
                self.stop(now);
            }
            if self.stop_at.is_some_and(|t| now >= t) {
                self.stop_at = None;
                self.term_sent = true;
                if self.alive().next().is_some() {
                    self.limits
                        .say("sending SIGTERM to the ranks still running");
                }
                if self.interrupted.is_none() {
                    let backtraces = self.limits.backtraces;
                    for r in self.running.iter_mut().filter(|r| r.status.is_none()) {
                        r.at_stop = Some(snapshot::describe(r.pid, backtraces));
                    }
                }
                self.signal_all(libc::SIGTERM);
                self.kill_at = Some(now + Duration::from_secs(1));
            }
            if self.kill_at.is_some_and(|t| now >= t) {
                self.kill_at = None;
                if self.alive().next().is_some() {
                    self.limits
                        .say("sending SIGKILL to the ranks still running");
                }
                self.signal_all(libc::SIGKILL);
            }
        }
        Ok(())
    }

    /// Collect the status of rank index `i`, whose pidfd is readable.
    fn reap(&mut self, i: usize) -> io::Result<()> {
        let status = self.running[i].child.wait()?;
        let r = &mut self.running[i];
        r.status = Some(status);
        let rank = r.rank;
        let (pid, stopped) = (r.pid, r.stopped);
        self.exit_order.push(rank as Rank);
        let block = &self.blocks[rank / self.host];
        let state = block.slot(rank).state.load(SeqCst);
        if state != job::TERMINATED {
            // Died, or exited without proc_term: nobody may wait for it
            // (on its host: other hosts learn it from GPI-2, as on a
            // cluster).
            block.mark_failed(rank);
        }
        // Killed at another rank's request (SIGKILL from a rank of its
        // host; across emulated hosts GPI-2's service thread exits it with
        // status 255, and the request is in the killer's host's block): no
        // failure of the job.
        let killed = status.signal() == Some(libc::SIGKILL) || status.code() == Some(255);
        let killed_by = self
            .blocks
            .iter()
            .find_map(|b| b.killed_by(rank))
            .filter(|_| killed)
            .map(|k| k as Rank);
        self.running[i].killed_by = killed_by;
        if let Some(k) = killed_by {
            self.limits.say(format!(
                "rank {rank} (pid {pid}) was killed at rank {k}'s request (proc_kill)"
            ));
        } else if !status.success() && !stopped && self.interrupted.is_none() && !self.timed_out {
            let others = self.alive().count();
            let grace = self.limits.grace;
            let more = if others > 0 && self.stop_at.is_none() {
                format!("; stopping the {others} other rank(s) in {grace:?} unless they exit")
            } else {
                String::new()
            };
            self.limits.say(format!(
                "rank {rank} (pid {pid}) {}{more}",
                describe_status(status)
            ));
            self.stop(Instant::now() + grace);
        } else if state == job::RUNNING && status.success() {
            self.limits.say(format!(
                "rank {rank} (pid {pid}) exited without proc_term; it is marked failed"
            ));
        }
        Ok(())
    }
}
