//! What a launched job gives back: how each rank ended, with its output.

use crate::sys::signal_name;
use crate::types::Rank;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

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
    /// Where it was when the launcher stopped it after a timeout or
    /// another rank's failure (each thread's state and the kernel function
    /// it waited in; backtraces with
    /// [`Launch::backtraces_on_stop`](super::Launch::backtraces_on_stop)).
    pub at_stop: Option<String>,
    /// The rank that ended it with
    /// [`Context::proc_kill`](crate::Context::proc_kill): it was killed by
    /// SIGKILL as asked, which is no failure of the job.
    pub killed_by: Option<Rank>,
}

impl RankOutcome {
    /// Whether it ended well: exit status 0, or killed at another rank's
    /// request ([`RankOutcome::killed_by`]).
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// let report = Launch::new("sh", 2).args(["-c", "exit $GASPI_RANK"]).output(Output::Capture).run()?;
    /// assert!(report.ranks[0].ended_well() && !report.ranks[1].ended_well());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn ended_well(&self) -> bool {
        self.status.success() || self.killed_by.is_some()
    }
}

impl std::fmt::Debug for RankOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RankOutcome")
            .field("rank", &self.rank)
            .field("pid", &self.pid)
            .field("status", &describe_status(self.status))
            .field("stopped_by_launcher", &self.stopped_by_launcher)
            .field("killed_by", &self.killed_by)
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
    /// Objects of the job still present after the launcher's clean-up:
    /// always empty unless the system refused to remove them.
    pub left_after_cleanup: Vec<String>,
    /// Objects named like the job's that belong to another user. The
    /// job's token is public (`/dev/shm` is world-listable) and anyone may
    /// create objects there, but not the job's own, whose names are
    /// unpredictable: these are someone else's, neither the job's nor
    /// removed by it (counted in neither list above). Normally empty.
    pub other_users_objects: Vec<String>,
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

pub(super) fn status_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

impl Report {
    /// The first rank (in time) that exited unsuccessfully (not counting
    /// ranks killed at another rank's request, [`RankOutcome::killed_by`]).
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
            .find(|o| !o.ended_well())
    }

    /// True if every rank exited with status 0 (or was killed at another
    /// rank's request, [`RankOutcome::killed_by`]) and the job did not
    /// time out.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// assert!(Launch::new("sh", 2).args(["-c", "exit 0"]).output(Output::Capture).run()?.success());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn success(&self) -> bool {
        !self.timed_out && self.ranks.iter().all(RankOutcome::ended_well)
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
