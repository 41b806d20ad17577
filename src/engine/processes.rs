//! The processes of this host's ranks as the kernel's copies between
//! processes (`process_vm_readv`, `process_vm_writev`: see `crate::sys`)
//! and `proc_kill` reach them. Those calls name a process by its pid, and
//! a pid passes to a new process once the old one has exited and been
//! reaped: a copy aimed at a rank that has just died could land in another
//! program of the same user. (A kill goes through the pidfd itself, so it
//! never reaches another process.) So a rank's pid is taken from the job's
//! control block (which only the job's processes write), never from a word
//! in a window; a pidfd is opened for it on first use and kept only if the
//! process behind the pid then started when the rank recorded (a pidfd
//! names the process that held the pid when it was opened); and before
//! each copy the pidfd must say that this process has not exited. A process that has not exited
//! keeps its pid, so the copy reaches the rank unless it exits, is reaped
//! and its pid is taken again in the microseconds between the check and
//! the copy.

use super::job::{self, JobBlock};
use crate::types::Rank;
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::Ordering::SeqCst;

/// The processes of a host's ranks, each opened on first use.
#[derive(Debug)]
pub(crate) struct Processes {
    host: Range<Rank>,
    /// By rank of the host, from its first: its pid and a pidfd of its
    /// process, or `None` where none could be opened that is the rank's
    /// (exited already, no `pidfd_open` before Linux 5.3, or the job's
    /// pids are from another pid namespace).
    opened: Vec<OnceLock<Option<(u32, OwnedFd)>>>,
}

impl Processes {
    /// The processes of the ranks of `host`, none opened yet.
    pub(crate) fn new(host: Range<Rank>) -> Self {
        let opened = host.clone().map(|_| OnceLock::new()).collect();
        Processes { host, opened }
    }

    /// The pid by which a kernel copy reaches `rank`'s process now: `None`
    /// if `rank` is not of this host, its process has exited, or no pidfd
    /// of it could be opened.
    pub(crate) fn live_pid(&self, job: &JobBlock, rank: Rank) -> Option<u32> {
        let (pid, fd) = self.opened(job, rank)?;
        (!crate::sys::readable_now(fd.as_fd())).then_some(*pid)
    }

    /// Send SIGKILL to `rank`'s process (`proc_kill`), through its pidfd:
    /// never to another process that holds its pid now. False if `rank`
    /// is not of this host, its process has exited, or no pidfd of it
    /// could be opened.
    pub(crate) fn kill(&self, job: &JobBlock, rank: Rank) -> bool {
        self.opened(job, rank)
            .is_some_and(|(_, fd)| crate::sys::pidfd_kill(fd.as_fd()).is_ok())
    }

    /// `rank`'s pid and pidfd, opened on first use: `None` if `rank` is
    /// not of this host or no pidfd of its process could be opened.
    fn opened(&self, job: &JobBlock, rank: Rank) -> Option<&(u32, OwnedFd)> {
        if !self.host.contains(&rank) {
            return None;
        }
        let at = usize::from(rank - self.host.start);
        self.opened
            .get(at)?
            .get_or_init(|| open(job, rank))
            .as_ref()
    }
}

/// A pidfd of `rank`'s process, with its pid, if the process that holds
/// the rank's recorded pid is the one that recorded it.
fn open(job: &JobBlock, rank: Rank) -> Option<(u32, OwnedFd)> {
    if !job.pids_meaningful() {
        return None;
    }
    let slot = job.slot(usize::from(rank));
    let (pid, start) = (slot.pid.load(SeqCst), slot.start_time.load(SeqCst));
    let fd = crate::sys::pidfd_open(pid).ok()?;
    // Checked after opening: the process the pidfd names held the pid
    // then, and so did the rank's.
    job::process_alive(pid, start).then_some((pid, fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::job::{new_token, process_info, sweep};

    #[test]
    fn only_a_ranks_own_process_is_reached_and_only_while_it_runs() {
        let token = new_token().unwrap();
        let job = JobBlock::create(&token, 3, 3, None).unwrap();
        let record = |rank: usize, pid: u32, start: u64| {
            job.slot(rank).start_time.store(start, SeqCst);
            job.slot(rank).pid.store(pid, SeqCst);
        };
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let (mine, _) = process_info(me).unwrap();
        let (theirs, _) = process_info(child.id()).unwrap();
        record(0, me, mine);
        record(1, child.id(), theirs);
        // Rank 2 recorded this pid with another start time: another
        // process holds its pid now.
        record(2, me, mine + 1);
        let p = Processes::new(0..3);
        assert_eq!(p.live_pid(&job, 0), Some(me));
        assert_eq!(p.live_pid(&job, 1), Some(child.id()));
        assert_eq!(p.live_pid(&job, 2), None);
        assert_eq!(p.live_pid(&job, 3), None, "not of this host");
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(p.live_pid(&job, 1), None, "exited");
        assert_eq!(p.live_pid(&job, 0), Some(me));
        sweep(&token);
    }
}
