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
//! with SIGKILL. Ranks get SIGKILL if the launcher itself dies, and a
//! launcher removes the objects of earlier jobs whose processes are all gone.
//!
//! ```no_run
//! use gaspi::launcher::{Launch, Output};
//! let report = Launch::new("./my-gaspi-program", 4).ppn(2).output(Output::Tagged).run()?;
//! std::process::exit(report.exit_code());
//! # Ok::<(), std::io::Error>(())
//! ```

pub(crate) mod sys;

pub use sys::signal_name;

use crate::config::Engine;
use crate::context::env;
use crate::engine::job::{self, JobBlock};
use crate::engine::remote::{PORT_SPAN, PORT_VAR};
use crate::types::Rank;
use std::ffi::{OsStr, OsString};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering::SeqCst;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What happens to the ranks' standard output and error.
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// let report = Launch::new("sh", 2).args(["-c", "echo rank $GASPI_RANK"]).output(Output::Capture).run()?;
/// assert_eq!(report.ranks[1].stdout, b"rank 1\n");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Output {
    /// Ranks write straight to the launcher's stdout/stderr (rank 0 also
    /// gets its stdin).
    #[default]
    Inherit,
    /// Every line is forwarded with a `[rank] ` prefix.
    Tagged,
    /// Kept in [`RankOutcome::stdout`] / [`RankOutcome::stderr`].
    Capture,
}

/// How the launcher places ranks on the CPUs it may use.
///
/// ```
/// use gaspi::launcher::{Binding, Launch, Output};
/// // 4 ranks on 2 CPUs: ranks 0 and 2 share CPU 0 under Spread.
/// assert_eq!(Binding::Spread.cpus(&[0, 1], 2, 4), vec![0]);
/// let report = Launch::new("sh", 2).args(["-c", "true"]).binding(Binding::None).output(Output::Capture).run()?;
/// assert!(report.success());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Binding {
    /// Let the kernel place and move the ranks.
    None,
    /// Cut the launcher's CPUs into equal consecutive groups, one per rank
    /// in rank order (MPI launchers' default, "compact"): with more ranks
    /// than CPUs, consecutive ranks share a CPU, so an emulated node's
    /// ranks sit together as on a real node; with fewer, each rank has its
    /// own group.
    #[default]
    Block,
    /// Deal the CPUs out round-robin (Intel MPI's placement of more ranks
    /// than cores): rank `r` runs on CPU `r % cpus`, so consecutive ranks,
    /// and a node's ranks, are spread over the CPUs.
    Spread,
}

impl Binding {
    /// Parse `none`, `block` or `spread`.
    ///
    /// ```
    /// use gaspi::launcher::Binding;
    /// assert_eq!(Binding::parse("block"), Some(Binding::Block));
    /// assert_eq!(Binding::parse("socket"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Binding> {
        match s {
            "none" => Some(Binding::None),
            "block" => Some(Binding::Block),
            "spread" => Some(Binding::Spread),
            _ => None,
        }
    }

    /// The CPUs of rank `rank` of `ranks` among `cpus` (empty: unbound).
    ///
    /// ```
    /// use gaspi::launcher::Binding;
    /// let cpus = [0, 1];
    /// assert_eq!(Binding::Block.cpus(&cpus, 1, 4), vec![0]); // ranks 0, 1 on CPU 0
    /// assert_eq!(Binding::Block.cpus(&cpus, 2, 4), vec![1]);
    /// assert_eq!(Binding::Block.cpus(&[0, 1, 2, 3], 1, 2), vec![2, 3]);
    /// assert_eq!(Binding::Spread.cpus(&cpus, 2, 4), vec![0]); // ranks 0, 2 on CPU 0
    /// assert!(Binding::None.cpus(&cpus, 0, 4).is_empty());
    /// ```
    pub fn cpus(self, cpus: &[usize], rank: usize, ranks: usize) -> Vec<usize> {
        match self {
            Binding::None => Vec::new(),
            _ if cpus.is_empty() || ranks == 0 => Vec::new(),
            Binding::Spread if ranks >= cpus.len() => vec![cpus[rank % cpus.len()]],
            Binding::Spread => Binding::Block.cpus(cpus, rank, ranks),
            Binding::Block => {
                let c = cpus.len();
                let first = rank * c / ranks;
                let end = ((rank + 1) * c / ranks).max(first + 1);
                cpus[first..end].to_vec()
            }
        }
    }
}

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
    forward_signals: bool,
    binding: Binding,
    engine: Engine,
    emulate_hosts: bool,
}

/// What the ranks of a GPI-2-engine job need besides our variables: the
/// machine file GPI-2 reads and the base of its ports.
struct Gpi2Setup {
    machinefile: PathBuf,
    port: u16,
    /// This job's reservation of its port range.
    mark: PathBuf,
}

impl Gpi2Setup {
    /// A machine file naming this host once per rank, and a port range
    /// reserved for this job among the launchers of this machine (a file
    /// per range under a lock, released when the job ends or when its
    /// launcher is gone), in which nothing listens now.
    fn new(token: &str, ranks: usize) -> io::Result<Gpi2Setup> {
        if ranks > 256 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "GPI-2 runs at most 256 ranks on one host",
            ));
        }
        let dir = std::env::temp_dir().join("gaspi-gpi2-ports");
        std::fs::create_dir_all(&dir)?;
        let guard = std::fs::File::create(dir.join("lock"))?;
        sys::lock_exclusive(&guard)?;
        let seed = u64::from_str_radix(&token[..8], 16).unwrap_or(0);
        let slots = (u16::MAX - PORT_SPAN - 20_000) as u64 / 1024;
        for attempt in 0..slots {
            let port = 20_000 + ((seed + attempt) % slots) as u16 * 1024;
            let mark = dir.join(port.to_string());
            if let Ok(pid) = std::fs::read_to_string(&mark) {
                let alive = pid
                    .trim()
                    .parse()
                    .is_ok_and(|p| job::process_info(p).is_some_and(|(_, zombie)| !zombie));
                if alive {
                    continue;
                }
            }
            let free = [0u16, 256, 512].iter().all(|&off| {
                (0..ranks as u16)
                    .all(|r| std::net::TcpListener::bind(("0.0.0.0", port + off + r)).is_ok())
            });
            if free {
                std::fs::write(&mark, std::process::id().to_string())?;
                let machinefile = std::env::temp_dir().join(format!("gaspi-{token}.machines"));
                std::fs::write(&machinefile, "localhost\n".repeat(ranks))?;
                return Ok(Gpi2Setup {
                    machinefile,
                    port,
                    mark,
                });
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "no free port range for GPI-2 found (ports 20000-64767)",
        ))
    }
}

impl Drop for Gpi2Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.machinefile);
        let _ = std::fs::remove_file(&self.mark);
    }
}

/// How one rank ended.
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// let report = Launch::new("sh", 2).args(["-c", "echo oops >&2; exit 1"]).output(Output::Capture).run()?;
/// let first = &report.ranks[0];
/// assert_eq!((first.rank, first.stderr.as_slice()), (0, &b"oops\n"[..]));
/// assert!(!first.status.success());
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct RankOutcome {
    /// The rank.
    pub rank: Rank,
    /// Its process id.
    pub pid: u32,
    /// Its exit status.
    pub status: ExitStatus,
    /// Its standard output, with [`Output::Capture`].
    pub stdout: Vec<u8>,
    /// Its standard error, with [`Output::Capture`].
    pub stderr: Vec<u8>,
    /// Whether the launcher stopped it (after another rank failed, a
    /// timeout or a signal).
    pub stopped_by_launcher: bool,
}

impl std::fmt::Debug for RankOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankOutcome")
            .field("rank", &self.rank)
            .field("pid", &self.pid)
            .field("status", &describe_status(self.status))
            .field("stopped_by_launcher", &self.stopped_by_launcher)
            .field("stdout", &String::from_utf8_lossy(&self.stdout))
            .field("stderr", &String::from_utf8_lossy(&self.stderr))
            .finish()
    }
}

/// How a job ended.
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// let report = Launch::new("sh", 2).args(["-c", "true"]).output(Output::Capture).run()?;
/// assert!(report.success() && !report.timed_out);
/// assert_eq!(report.ranks.len(), 2);
/// assert!(report.left_after_cleanup.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Report {
    /// The job's token (names its shared-memory objects).
    pub token: String,
    /// One entry per rank, in rank order.
    pub ranks: Vec<RankOutcome>,
    /// Ranks in the order they exited.
    pub exit_order: Vec<Rank>,
    /// The job ran past its timeout and was stopped.
    pub timed_out: bool,
    /// The launcher received this signal and stopped the job.
    pub interrupted: Option<i32>,
    /// Shared-memory objects of the job that the ranks left when they had
    /// all exited (before the launcher removed them): empty when every rank
    /// terminated cleanly.
    pub left_by_ranks: Vec<String>,
    /// Objects still present after the launcher's clean-up: always empty
    /// unless the system refused to remove them.
    pub left_after_cleanup: Vec<String>,
}

/// The variable that turns on [`Launch::emulate_hosts`].
///
/// ```
/// // `GASPI_EMULATE_HOSTS=1 gaspi-run --engine gpi2 --ppn 2 ...` runs each
/// // node of 2 ranks as a host of its own.
/// assert_eq!(gaspi::launcher::EMULATE_HOSTS_VAR, "GASPI_EMULATE_HOSTS");
/// ```
pub const EMULATE_HOSTS_VAR: &str = "GASPI_EMULATE_HOSTS";

/// The token of the host whose first rank is `first` in a job of emulated
/// hosts (what its ranks' shared-memory objects are named after).
pub(crate) fn host_token(token: &str, first: usize) -> String {
    format!("{token}h{first}")
}

/// "exited with status 3", "was killed by signal 9 (SIGKILL)".
///
/// ```
/// use std::os::unix::process::ExitStatusExt;
/// use gaspi::launcher::describe_status;
/// assert_eq!(describe_status(std::process::ExitStatus::from_raw(3 << 8)), "exited with status 3");
/// assert!(describe_status(std::process::ExitStatus::from_raw(9)).contains("SIGKILL"));
/// ```
pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s} ({})", signal_name(s)),
        _ => format!("ended with {status}"),
    }
}

fn status_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

impl Report {
    /// The first rank (in time) that exited unsuccessfully.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// let report = Launch::new("sh", 2).args(["-c", "exit $GASPI_RANK"]).output(Output::Capture).run()?;
    /// assert_eq!(report.first_failure().map(|o| o.rank), Some(1));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn first_failure(&self) -> Option<&RankOutcome> {
        self.exit_order
            .iter()
            .map(|&r| &self.ranks[r as usize])
            .find(|o| !o.status.success())
    }

    /// True if every rank exited with status 0.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// assert!(Launch::new("sh", 2).args(["-c", "exit 0"]).output(Output::Capture).run()?.success());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn success(&self) -> bool {
        !self.timed_out && self.ranks.iter().all(|o| o.status.success())
    }

    /// The launcher's exit code: 124 after a timeout, 128+N after signal N
    /// to the launcher, else the status of the first rank that failed
    /// (128+N if it was killed by signal N), else 0.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// use std::time::Duration;
    /// let slow = Launch::new("sh", 1).args(["-c", "exec sleep 30"]).timeout(Duration::from_millis(200)).output(Output::Capture).run()?;
    /// assert!(slow.timed_out);
    /// assert_eq!(slow.exit_code(), 124);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn exit_code(&self) -> i32 {
        if self.timed_out {
            124
        } else if let Some(s) = self.interrupted {
            128 + s
        } else {
            self.first_failure().map_or(0, |o| status_code(o.status))
        }
    }
}

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

    fn say(&self, msg: impl AsRef<str>) {
        if self.verbose {
            let _ = writeln!(io::stderr(), "gaspi-run: {}", msg.as_ref());
        }
    }

    fn command(
        &self,
        rank: usize,
        token: &str,
        ppn: usize,
        cpus: &[usize],
        gpi2: Option<&Gpi2Setup>,
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
            .env(env::JOB, token)
            .env(env::LAUNCHER, std::process::id().to_string())
            .env(env::CPUS, cpus.len().max(1).to_string());
        if let Some(g) = gpi2 {
            cmd.env(env::ENGINE, "gpi2")
                .env("GASPI_SOCKET", rank.to_string())
                .env("GASPI_MFILE", &g.machinefile)
                .env(PORT_VAR, g.port.to_string());
        }
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
            self.say(format!(
                "removed the shared memory of an abandoned job ({t})"
            ));
        }
        let token = job::new_token();
        let gpi2 = match self.engine {
            Engine::Gpi2 => Some(Gpi2Setup::new(&token, self.ranks)?),
            Engine::Native => None,
        };
        // One control block per host: all ranks, or each node when hosts
        // are emulated (its token names the host's objects).
        let emulate = self.emulate_hosts && gpi2.is_some();
        let host = if emulate { ppn } else { self.ranks };
        let tokens: Vec<String> = (0..self.ranks)
            .step_by(host)
            .map(|first| match emulate {
                true => host_token(&token, first),
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
            let mut cmd = self.command(rank, &tokens[rank / host], ppn, &cpus, gpi2.as_ref());
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
        let mut sup = Supervisor {
            launch: self,
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
        let left = || -> Vec<String> {
            tokens
                .iter()
                .flat_map(|t| crate::engine::shm::list(&job::prefix(t)))
                .collect()
        };
        let left_by_ranks: Vec<String> = left()
            .into_iter()
            .filter(|n| !tokens.iter().any(|t| *n == job::job_object(t)))
            .collect();
        sweep_all();
        let left_after_cleanup = left();
        Ok(Report {
            token,
            ranks,
            exit_order,
            timed_out,
            interrupted,
            left_by_ranks,
            left_after_cleanup,
        })
    }
}

/// A started rank and the threads forwarding its output.
struct Running {
    rank: usize,
    pid: u32,
    child: Child,
    pidfd: OwnedFd,
    status: Option<ExitStatus>,
    stopped: bool,
    readers: Vec<JoinHandle<Vec<u8>>>,
}

impl Running {
    fn start(mut cmd: Command, rank: usize, output: Output) -> io::Result<Running> {
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
            readers,
        })
    }

    fn finish(mut self) -> RankOutcome {
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
struct Supervisor<'a> {
    launch: &'a Launch,
    /// The control blocks, one per host of `host` ranks.
    blocks: &'a [JobBlock],
    host: usize,
    running: &'a mut Vec<Running>,
    exit_order: Vec<Rank>,
    start: Instant,
    /// When to send SIGTERM to the ranks still running.
    stop_at: Option<Instant>,
    /// When to send SIGKILL to the ranks still running.
    kill_at: Option<Instant>,
    /// SIGTERM went out already.
    term_sent: bool,
    timed_out: bool,
    interrupted: Option<i32>,
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

    fn supervise(&mut self, signals: Option<&OwnedFd>) -> io::Result<()> {
        let deadline = self.launch.timeout.map(|t| self.start + t);
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
            fds.extend(signals.map(|s| s.as_fd()));
            let ready = sys::poll_readable(&fds, wait)?;
            for (k, &i) in idx.iter().enumerate() {
                if ready[k] {
                    self.reap(i)?;
                }
            }
            if let Some(s) = signals.filter(|_| ready[idx.len()]) {
                if let Some(&sig) = sys::drain_signals(s.as_fd()).first() {
                    self.launch
                        .say(format!("received {}: stopping the job", signal_name(sig)));
                    self.interrupted.get_or_insert(sig);
                    self.stop(Instant::now());
                }
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) && !self.timed_out {
                self.timed_out = true;
                self.launch.say(format!(
                    "the job ran past its timeout of {:?}: stopping it",
                    self.launch.timeout.unwrap_or_default()
                ));
                self.stop(now);
            }
            if self.stop_at.is_some_and(|t| now >= t) {
                self.stop_at = None;
                self.term_sent = true;
                if self.alive().next().is_some() {
                    self.launch
                        .say("sending SIGTERM to the ranks still running");
                }
                self.signal_all(libc::SIGTERM);
                self.kill_at = Some(now + Duration::from_secs(1));
            }
            if self.kill_at.is_some_and(|t| now >= t) {
                self.kill_at = None;
                if self.alive().next().is_some() {
                    self.launch
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
        if !status.success() && !stopped && self.interrupted.is_none() && !self.timed_out {
            let others = self.alive().count();
            let grace = self.launch.grace;
            let more = if others > 0 && self.stop_at.is_none() {
                format!("; stopping the {others} other rank(s) in {grace:?} unless they exit")
            } else {
                String::new()
            };
            self.launch.say(format!(
                "rank {rank} (pid {pid}) {}{more}",
                describe_status(status)
            ));
            self.stop(Instant::now() + grace);
        } else if state == job::RUNNING && status.success() {
            self.launch.say(format!(
                "rank {rank} (pid {pid}) exited without proc_term; it is marked failed"
            ));
        }
        Ok(())
    }
}

/// The host names in a GPI-2 machinefile: one per line, `#` comments and
/// blank lines ignored.
///
/// ```
/// let path = std::env::temp_dir().join(format!("machinefile-doc-{}", std::process::id()));
/// std::fs::write(&path, "# two hosts\nnode01\n\nnode02 slots=2\n")?;
/// assert_eq!(gaspi::launcher::read_machinefile(&path)?, vec!["node01", "node02"]);
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_machinefile(path: &Path) -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or(l).to_string())
        .collect())
}

/// Whether `host` names this machine.
///
/// ```
/// use gaspi::launcher::is_local_host;
/// assert!(is_local_host("localhost") && is_local_host("127.0.0.1"));
/// assert!(!is_local_host("some-other-host.example"));
/// ```
pub fn is_local_host(host: &str) -> bool {
    let me = sys::hostname();
    let short = me.split('.').next().unwrap_or(&me);
    host == "localhost"
        || host == "ip6-localhost"
        || host == "::1"
        || host.starts_with("127.")
        || (!me.is_empty() && (host == me || host == short))
}
