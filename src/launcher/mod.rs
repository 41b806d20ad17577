//! Starting and supervising jobs: what `gaspi-run`, `gaspi-bench` and
//! [`crate::testing`] use to run `N` ranks of a program on this machine.
//!
//! [`Launch::run`] creates the job's control block, starts the ranks with
//! `GASPI_RANK`, `GASPI_NRANKS`, `GASPI_PPN`, `GASPI_JOB` and
//! `GASPI_LAUNCHER` in their environment, and watches them through process
//! file descriptors. When a rank dies (non-zero exit or a signal) it is
//! marked failed in the control block at once, so that the other ranks'
//! waits fail with [`Error::RankFailed`](crate::Error::RankFailed) instead of
//! hanging; after a grace period the others are sent SIGTERM, then SIGKILL,
//! by pid (children only, before they are reaped, so a pid can never name
//! someone else's process). When every rank has exited, every
//! shared-memory object of the job is removed, also those of ranks killed
//! with SIGKILL. Ranks get SIGKILL if the launcher itself dies, and then
//! the job's reaper (a process forked by the launcher, see
//! `reaper.rs`) removes the objects once they have exited; a launcher also
//! removes the objects of earlier jobs whose processes are all gone.
//!
//! ```no_run
//! use gaspi::launcher::{Launch, Output};
//! let report = Launch::new("./my-gaspi-program", 4).ppn(2).output(Output::Tagged).run()?;
//! std::process::exit(report.exit_code());
//! # Ok::<(), std::io::Error>(())
//! ```

mod binding;
mod machines;
mod own;
mod pmi;
mod report;
mod setup;
mod snapshot;
mod supervisor;

pub use crate::sys::signal_name;
pub use binding::Binding;
pub use machines::{is_local_host, read_machinefile};
pub use own::launch_self;
pub use report::{Output, RankOutcome, Report, describe_status};

/// The exit status of `gaspi-run` and `gaspi-bench` when they could not
/// start a job at all (a usage error, a program that cannot be started):
/// 125, as `timeout(1)` and `env(1)` report their own failures, apart from
/// a rank's status (passed through), a timeout (124) and a signal (128+N).
pub const LAUNCH_FAILED: u8 = 125;

use crate::config::Engine;
use crate::engine::job::{self, JobBlock};
use crate::engine::shm;
use crate::env;
use crate::reaper::Reaper;
use crate::sys;
use crate::types::Rank;
use setup::EngineSetup;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use supervisor::{Limits, Running, Supervisor};

/// A job to start: `ranks` copies of a program.
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// use std::time::Duration;
/// // Any program can be a rank; GASPI programs find their rank in the environment.
/// let report = Launch::new("sh", 3)
///     .args(["-c", "exit $((GASPI_RANK == 2 ? 7 : 0))"])
///     .timeout(Duration::from_secs(60))
///     .output(Output::Capture)
///     .run()?;
/// assert!(!report.success());
/// assert_eq!(report.first_failure().map(|o| o.rank), Some(2));
/// assert_eq!(report.exit_code(), 7);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Launch {
    program: PathBuf,
    first_program: Option<PathBuf>,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    ranks: usize,
    ppn: Option<usize>,
    timeout: Option<Duration>,
    grace: Duration,
    output: Output,
    verbose: bool,
    backtraces: bool,
    forward_signals: bool,
    binding: Binding,
    engine: Engine,
    emulate_hosts: bool,
}

/// The variable that turns on [`Launch::emulate_hosts`] (also
/// [`env::EMULATE_HOSTS`]).
///
/// ```
/// // `GASPI_EMULATE_HOSTS=1 gaspi-run --engine gpi2 --ppn 2 ...` runs each
/// // node of 2 ranks as a host of its own.
/// assert_eq!(gaspi::launcher::EMULATE_HOSTS_VAR, "GASPI_EMULATE_HOSTS");
/// ```
pub const EMULATE_HOSTS_VAR: &str = env::EMULATE_HOSTS;

impl Launch {
    /// `ranks` copies of `program`.
    ///
    /// ```
    /// use gaspi::launcher::Launch;
    /// // Four copies of a GASPI program (built beforehand).
    /// let job = Launch::new("target/release/examples/ring", 4);
    /// # let _ = job;
    /// ```
    pub fn new(program: impl AsRef<Path>, ranks: usize) -> Launch {
        Launch {
            program: program.as_ref().to_path_buf(),
            first_program: None,
            args: Vec::new(),
            envs: Vec::new(),
            ranks,
            ppn: None,
            timeout: None,
            grace: Duration::from_secs(2),
            output: Output::Inherit,
            verbose: false,
            backtraces: false,
            forward_signals: false,
            binding: Binding::Block,
            engine: std::env::var(env::ENGINE)
                .ok()
                .and_then(|e| Engine::parse(&e))
                .unwrap_or_default(),
            emulate_hosts: std::env::var(EMULATE_HOSTS_VAR)
                .is_ok_and(|v| !v.is_empty() && v != "0"),
        }
    }

    /// Run each node as if it were a host of its own (GPI-2 engine only,
    /// the native engine ignores it; default: `GASPI_EMULATE_HOSTS` set to
    /// anything but `0`): the ranks
    /// of different nodes then share no memory at all, not even the job's
    /// control block or a group's state, and meet only through GPI-2, as
    /// on a cluster. For testing cluster behaviour on one machine.
    ///
    /// ```no_run
    /// use gaspi::launcher::Launch;
    /// let report = Launch::new("target/release/examples/ring", 4)
    ///     .engine(gaspi::Engine::Gpi2)
    ///     .ppn(2)
    ///     .emulate_hosts(true)
    ///     .run()?;
    /// assert!(report.success());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn emulate_hosts(mut self, on: bool) -> Launch {
        self.emulate_hosts = on;
        self
    }

    /// The engine the ranks use (default: `GASPI_ENGINE` of the launcher's
    /// environment, else native). For [`Engine::Gpi2`] the launcher also
    /// gives each rank what GPI-2 reads (`GASPI_SOCKET`, `GASPI_MFILE`, a
    /// machine file naming this host once per rank) and a free port range,
    /// so a GPI-2-engine job starts on one machine without ssh.
    ///
    /// ```no_run
    /// use gaspi::launcher::Launch;
    /// // Needs a build with feature `gpi2` and GPI-2 installed.
    /// let report = Launch::new("target/release/examples/ring", 4).engine(gaspi::Engine::Gpi2).run()?;
    /// # let _ = report;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn engine(mut self, engine: Engine) -> Launch {
        self.engine = engine;
        self
    }

    /// How ranks are placed on CPUs (default [`Binding::Block`]).
    ///
    /// ```
    /// use gaspi::launcher::{Binding, Launch, Output};
    /// let report = Launch::new("sh", 2).args(["-c", "true"]).binding(Binding::Spread).output(Output::Capture).run()?;
    /// assert!(report.success());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn binding(mut self, binding: Binding) -> Launch {
        self.binding = binding;
        self
    }

    /// Arguments for every rank.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// let report = Launch::new("sh", 1).args(["-c", "echo \"$0\"", "arg0"]).output(Output::Capture).run()?;
    /// assert_eq!(report.ranks[0].stdout, b"arg0\n");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Launch {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// An extra environment variable for every rank.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// let report = Launch::new("sh", 1).args(["-c", "echo $GASPI_WAIT"]).env("GASPI_WAIT", "yield").output(Output::Capture).run()?;
    /// assert_eq!(report.ranks[0].stdout, b"yield\n");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Launch {
        self.envs
            .push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Run a different program as rank 0 (GPI-2's `gaspi_run -b`).
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// // Rank 0 runs `echo`, the others `sh`, with the same arguments.
    /// let report = Launch::new("sh", 2).first_program("echo").args(["-c", "exit 0"]).output(Output::Capture).run()?;
    /// assert_eq!(report.ranks[0].stdout, b"-c exit 0\n");
    /// assert!(report.success());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn first_program(mut self, program: impl AsRef<Path>) -> Launch {
        self.first_program = Some(program.as_ref().to_path_buf());
        self
    }

    /// Ranks per node: consecutive ranks form nodes of `ppn` (default: all
    /// ranks on one node).
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// let report = Launch::new("sh", 4).args(["-c", "echo $GASPI_PPN"]).ppn(2).output(Output::Capture).run()?;
    /// assert_eq!(report.ranks[3].stdout, b"2\n");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ppn(mut self, ppn: usize) -> Launch {
        self.ppn = Some(ppn);
        self
    }

    /// Stop the job if it runs longer than this.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// use std::time::Duration;
    /// let report = Launch::new("sh", 2).args(["-c", "exec sleep 30"]).timeout(Duration::from_millis(100)).output(Output::Capture).run()?;
    /// assert!(report.timed_out && report.ranks.iter().all(|o| o.stopped_by_launcher));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Launch {
        self.timeout = Some(timeout);
        self
    }

    /// After a rank fails, how long the others may run on before they are
    /// stopped (default 2 s).
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// use std::time::Duration;
    /// // Rank 0 fails; rank 1 is stopped 100 ms later instead of sleeping on.
    /// let report = Launch::new("sh", 2)
    ///     .args(["-c", "[ $GASPI_RANK = 0 ] && exit 1; exec sleep 30"])
    ///     .grace(Duration::from_millis(100))
    ///     .output(Output::Capture)
    ///     .run()?;
    /// assert!(report.ranks[1].stopped_by_launcher);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn grace(mut self, grace: Duration) -> Launch {
        self.grace = grace;
        self
    }

    /// Where the ranks' output goes.
    ///
    /// ```no_run
    /// use gaspi::launcher::{Launch, Output};
    /// // Every line as "[rank] line" on the launcher's own output.
    /// Launch::new("target/release/examples/ring", 4).output(Output::Tagged).run()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn output(mut self, output: Output) -> Launch {
        self.output = output;
        self
    }

    /// Report failures, timeouts and stops on stderr as they happen.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// // Says on stderr that rank 0 exited with status 3.
    /// let report = Launch::new("sh", 1).args(["-c", "exit 3"]).verbose(true).output(Output::Capture).run()?;
    /// assert_eq!(report.exit_code(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn verbose(mut self, verbose: bool) -> Launch {
        self.verbose = verbose;
        self
    }

    /// When the launcher stops the ranks still running (the job ran past
    /// its [timeout](Launch::timeout), or another rank failed and the
    /// [grace](Launch::grace) is over), attach `gdb` (if it is on `PATH`)
    /// to each of them first and keep every thread's backtrace in
    /// [`RankOutcome::at_stop`], beside the state and kernel wait of each
    /// thread that are always kept there.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// use std::time::Duration;
    /// let report = Launch::new("sh", 1)
    ///     .args(["-c", "exec sleep 30"])
    ///     .timeout(Duration::from_millis(200))
    ///     .backtraces_on_stop(false)
    ///     .output(Output::Capture)
    ///     .run()?;
    /// let at = report.ranks[0].at_stop.as_deref().unwrap_or_default();
    /// assert!(at.starts_with("thread "), "{at}");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn backtraces_on_stop(mut self, on: bool) -> Launch {
        self.backtraces = on;
        self
    }

    /// Catch SIGINT, SIGTERM and SIGHUP and stop the job cleanly instead of
    /// dying (for launcher programs; changes process-wide signal handling).
    ///
    /// ```no_run
    /// use gaspi::launcher::Launch;
    /// // A launcher program: Ctrl-C stops the ranks and cleans up.
    /// let report = Launch::new("target/release/examples/ring", 4).forward_signals(true).run()?;
    /// std::process::exit(report.exit_code());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn forward_signals(mut self, on: bool) -> Launch {
        self.forward_signals = on;
        self
    }

    fn limits(&self) -> Limits {
        Limits {
            timeout: self.timeout,
            grace: self.grace,
            verbose: self.verbose,
            backtraces: self.backtraces,
        }
    }

    fn command(
        &self,
        rank: usize,
        token: &str,
        ppn: usize,
        cpus: &[usize],
        setup: &EngineSetup,
    ) -> Command {
        let program = match (&self.first_program, rank) {
            (Some(p), 0) => p,
            _ => &self.program,
        };
        let mut cmd = Command::new(program);
        cmd.args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .env(env::RANK, rank.to_string())
            .env(env::NRANKS, self.ranks.to_string())
            .env(env::PPN, ppn.to_string())
            .env(env::SOCKET, (rank % ppn.max(1)).to_string())
            .env(env::JOB, token)
            .env(env::LAUNCHER, std::process::id().to_string())
            .env(env::CPUS, cpus.len().max(1).to_string());
        setup.rank_env(&mut cmd, rank);
        let piped = self.output != Output::Inherit;
        cmd.stdin(if rank == 0 && !piped {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
        if piped {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        sys::kill_with_parent(&mut cmd);
        let mine = self.binding.cpus(cpus, rank, self.ranks);
        if !mine.is_empty() {
            sys::bind_to(&mut cmd, &mine);
        }
        cmd
    }

    /// Start the job and supervise it until every rank has exited.
    ///
    /// Errors only if the job could not be set up or started (a missing
    /// program, no shared memory); how the ranks ended is in the [`Report`].
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// assert!(Launch::new("no-such-program-here", 1).output(Output::Capture).run().is_err());
    /// let report = Launch::new("sh", 2).args(["-c", "true"]).output(Output::Capture).run()?;
    /// assert_eq!(report.exit_order.len(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn run(&self) -> io::Result<Report> {
        if self.ranks == 0 || self.ranks > Rank::MAX as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a job has 1..={} ranks, not {}", Rank::MAX, self.ranks),
            ));
        }
        let ppn = self.ppn.unwrap_or(self.ranks).clamp(1, self.ranks);
        let signals = if self.forward_signals {
            Some(sys::forward_signals()?)
        } else {
            None
        };
        for t in job::sweep_stale() {
            self.limits().say(format!(
                "removed the shared memory of an abandoned job ({t})"
            ));
        }
        let token = job::new_token()?;
        let setup = EngineSetup::new(self.engine, &token, self.ranks)?;
        // One control block per host: all ranks, or each node when hosts
        // are emulated (its token names the host's objects).
        let emulate = self.emulate_hosts && setup.emulates_hosts();
        let host = if emulate { ppn } else { self.ranks };
        let tokens: Vec<String> = (0..self.ranks)
            .step_by(host)
            .map(|first| match emulate {
                true => job::host_token(&token, first),
                false => token.clone(),
            })
            .collect();
        let sweep_all = || {
            for t in &tokens {
                job::sweep(t);
            }
        };
        let mut blocks = Vec::with_capacity(tokens.len());
        for t in &tokens {
            match JobBlock::create(t, self.ranks, ppn, Some(std::process::id())) {
                Ok(b) => blocks.push(b),
                Err(e) => {
                    sweep_all();
                    return Err(e);
                }
            }
        }
        let mut running: Vec<Running> = Vec::with_capacity(self.ranks);
        let cpus = sys::allowed_cpus();
        for rank in 0..self.ranks {
            let mut cmd = self.command(rank, &tokens[rank / host], ppn, &cpus, &setup);
            if emulate {
                cmd.env(env::HOST_RANKS, host.to_string());
            }
            match Running::start(cmd, rank, self.output) {
                Ok(r) => running.push(r),
                Err(e) => {
                    for r in &running {
                        sys::signal_child(r.pid, libc::SIGKILL);
                    }
                    for r in running {
                        r.finish();
                    }
                    sweep_all();
                    let program = self
                        .first_program
                        .as_ref()
                        .filter(|_| rank == 0)
                        .unwrap_or(&self.program);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot start {}: {e}", program.display()),
                    ));
                }
            }
        }
        // Cleans up after the launcher if it is killed (SIGKILL) before
        // the job ends; without one, the next launcher sweeps the job.
        let reaper = {
            let pidfds: Vec<_> = running.iter().map(Running::pidfd).collect();
            let prefixes: Vec<String> = tokens.iter().map(|t| job::prefix(t)).collect();
            let prefixes: Vec<&str> = prefixes.iter().map(String::as_str).collect();
            match Reaper::spawn(&pidfds, Path::new(shm::SHM_DIR), &prefixes, &setup.files()) {
                Ok(r) => Some(r),
                Err(e) => {
                    self.limits().say(format!(
                        "no reaper for this job ({e}): if the launcher is killed, its shared \
                         memory stays until the next launcher runs"
                    ));
                    None
                }
            }
        };
        let mut sup = Supervisor {
            limits: self.limits(),
            blocks: &blocks,
            host,
            running: &mut running,
            exit_order: Vec::new(),
            start: Instant::now(),
            stop_at: None,
            kill_at: None,
            term_sent: false,
            timed_out: false,
            interrupted: None,
        };
        sup.supervise(signals.as_ref())?;
        let (exit_order, timed_out, interrupted) = (sup.exit_order, sup.timed_out, sup.interrupted);

        let ranks: Vec<RankOutcome> = running.into_iter().map(Running::finish).collect();
        let left = || {
            let mut all = shm::Owners::default();
            for t in &tokens {
                let o = shm::list_by_owner(&job::prefix(t));
                all.own.extend(o.own);
                all.others.extend(o.others);
            }
            all
        };
        let left_by_ranks: Vec<String> = left()
            .own
            .into_iter()
            .filter(|n| !tokens.iter().any(|t| *n == job::job_object(t)))
            .collect();
        sweep_all();
        if let Some(r) = reaper {
            r.finish();
        }
        let after = left();
        Ok(Report {
            token,
            ranks,
            exit_order,
            timed_out,
            interrupted,
            left_by_ranks,
            left_after_cleanup: after.own,
            other_users_objects: after.others,
        })
    }
}
