//! The GASPI configuration (`gaspi_config_t`), set before `Context::init`,
//! with the environment's overrides, and the ids the runtime keeps for
//! itself.

use crate::env;
use crate::error::{Error, Result};
use crate::types::{QueueId, SegmentId, Timeout};
use std::cell::Cell;
use std::time::Duration;

/// Hard limit on queues (GPI-2's `GASPI_MAX_QP`).
///
/// ```
/// let cfg = gaspi::Config { queue_num: gaspi::QUEUE_MAX, ..Default::default() };
/// assert!(cfg.validate().is_ok());
/// ```
pub const QUEUE_MAX: u32 = 16;
/// Hard limit on the depth of one queue (GPI-2's `GASPI_MAX_QSIZE`).
///
/// ```
/// let cfg = gaspi::Config { queue_size_max: gaspi::QUEUE_SIZE_LIMIT + 1, ..Default::default() };
/// assert!(cfg.validate().is_err());
/// ```
pub const QUEUE_SIZE_LIMIT: u32 = 4096;
/// Hard limit on segment ids: ids are `0..255`.
///
/// ```
/// assert_eq!(gaspi::Config::default().segment_max, gaspi::SEGMENT_LIMIT);
/// ```
pub const SEGMENT_LIMIT: u32 = 255;
/// Hard limit on groups per rank.
///
/// ```
/// let cfg = gaspi::Config { group_max: gaspi::GROUP_LIMIT, ..Default::default() };
/// assert!(cfg.validate().is_ok());
/// ```
pub const GROUP_LIMIT: u32 = 64;
/// Most bytes a rank contributes to one allreduce of a group
/// ([`Config::allreduce_buf_size`], `8 *` [`Config::allreduce_elem_max`]).
pub(crate) const ALLREDUCE_BYTES_MAX: usize = 64 << 20;

/// Largest notification table a segment can have.
///
/// ```
/// let cfg = gaspi::Config { notification_num: gaspi::NOTIFICATION_LIMIT * 2, ..Default::default() };
/// assert!(matches!(cfg.validate(), Err(gaspi::Error::Config(_))));
/// ```
pub const NOTIFICATION_LIMIT: u32 = 1 << 24;

/// Which engine carries operations between nodes.
///
/// `GASPI_ENGINE=native|gpi2|mpi` in the environment overrides
/// [`Config::engine`], so that one binary runs on either.
///
/// ```
/// assert_eq!(gaspi::Engine::parse("gpi2"), Some(gaspi::Engine::Gpi2));
/// assert_eq!(gaspi::Config::default().engine, gaspi::Engine::Native);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Engine {
    /// Ranks on one machine sharing memory; nodes (`--ppn`) are emulated.
    #[default]
    Native,
    /// GPI-2 between nodes, shared memory within a node (feature `gpi2`;
    /// start the job with GPI-2's `gaspi_run` or `gaspi-run --engine gpi2`).
    Gpi2,
    /// MPI-3 one-sided communication between hosts, shared memory within
    /// one (feature `mpi`; start the job with `mpirun`/`srun` and
    /// `GASPI_ENGINE=mpi`, or `gaspi-run --engine mpi`).
    Mpi,
}

impl Engine {
    /// `native`, `gpi2` or `mpi`.
    ///
    /// ```
    /// use gaspi::Engine;
    /// assert_eq!(Engine::parse("native"), Some(Engine::Native));
    /// assert_eq!(Engine::parse("mpi"), Some(Engine::Mpi));
    /// assert_eq!(Engine::parse("shmem"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Engine> {
        match s {
            "native" => Some(Engine::Native),
            "gpi2" => Some(Engine::Gpi2),
            "mpi" => Some(Engine::Mpi),
            _ => None,
        }
    }

    /// Most queues a user can have at once on this engine: [`QUEUE_MAX`]
    /// natively; two fewer on GPI-2, whose 16 queues include the runtime's
    /// own (its last) and the queue of flush reads (the one before), so
    /// that no wait of the runtime's (the relay's passive reads,
    /// collectives, atomics) takes a user's completions, hides the failure
    /// of a user's request, or holds a user's wait up, and no flush read
    /// that a dying target never answers stays on a user's queue.
    pub(crate) fn queue_max(self) -> u32 {
        match self {
            Engine::Native | Engine::Mpi => QUEUE_MAX,
            Engine::Gpi2 => QUEUE_MAX - 2,
        }
    }
}

/// How a rank waits for something that has not happened yet.
///
/// Every blocking call first checks, then (depending on the mode) spins,
/// yields the CPU and finally sleeps in the kernel (futex) until woken.
/// `Auto` picks by the job: with at least one core per local rank it spins
/// for a while before yielding; with more ranks than cores it yields almost
/// at once, because a spinning rank would take the core the rank it waits
/// for needs. A rank bound to CPUs that no other rank of its machine may
/// use ([`Context::cpus_of_its_own`](crate::Context::cpus_of_its_own):
/// `mpirun` or `srun` binding each rank to a core of its own) always spins
/// first.
///
/// ```
/// use gaspi::{Config, Context, WaitMode};
/// // Many more ranks than cores: never spin.
/// let ctx = Context::init(Config { wait_mode: WaitMode::Yield, ..Default::default() })?;
/// # let _ = ctx;
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Decide from ranks per core (the default).
    #[default]
    Auto,
    /// Spin until the condition holds or the timeout passes (one core per rank).
    Spin,
    /// Yield the CPU between checks, then sleep.
    Yield,
    /// Sleep in the kernel almost at once.
    Block,
}

impl WaitMode {
    /// Parse the `GASPI_WAIT` environment value (`auto|spin|yield|block`).
    ///
    /// ```
    /// use gaspi::WaitMode;
    /// assert_eq!(WaitMode::parse("yield"), Some(WaitMode::Yield));
    /// assert_eq!(WaitMode::parse("nap"), None);
    /// ```
    pub fn parse(s: &str) -> Option<WaitMode> {
        match s {
            "auto" => Some(WaitMode::Auto),
            "spin" => Some(WaitMode::Spin),
            "yield" => Some(WaitMode::Yield),
            "block" => Some(WaitMode::Block),
            _ => None,
        }
    }
}

/// Settings of the runtime, fixed at `Context::init` (`gaspi_config_t`).
///
/// Start from `Config::default()` (GPI-2's defaults) and change fields:
///
/// ```
/// let cfg = gaspi::Config { queue_num: 2, queue_size_max: 64, ..Default::default() };
/// assert!(cfg.validate().is_ok());
/// let bad = gaspi::Config { queue_num: 99, ..Default::default() };
/// assert!(bad.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Queues created at init (`queue_num`, default 8, at most [`QUEUE_MAX`];
    /// at most 14 on the GPI-2 engine, which keeps GPI-2's last two queues
    /// for the runtime).
    pub queue_num: u32,
    /// Requests a queue holds before [`Error::QueueFull`] (`queue_size_max`, default 1024).
    pub queue_size_max: u32,
    /// Groups this rank may have at once, `GroupId::ALL` included (default 32).
    pub group_max: u32,
    /// Segment ids are `0..segment_max` (default and maximum 255).
    pub segment_max: u32,
    /// Largest single transfer in bytes (default 1 GiB).
    pub transfer_size_max: usize,
    /// Notifications per segment (default 65,536).
    pub notification_num: u32,
    /// Passive messages that can wait in this rank's inbox (default 16).
    pub passive_queue_size_max: u32,
    /// Largest passive message in bytes (default 65,535).
    pub passive_transfer_size_max: usize,
    /// Bytes per rank for `allreduce_user` (default 255 * 8, at most
    /// 64 MiB; a rank's contribution may take the larger of this and
    /// `8 * allreduce_elem_max`).
    pub allreduce_buf_size: usize,
    /// Elements in a typed `allreduce` (default 255, at most 8,388,608:
    /// 64 MiB of 8-byte elements). As in GPI-2, the allreduce's buffers
    /// follow it: a rank's contribution may take the larger of
    /// `allreduce_buf_size` and `8 * allreduce_elem_max` bytes, so raising
    /// this alone is enough for larger typed allreduces. Each committed
    /// group reserves two such slots per member in shared memory (a
    /// million elements: 16 MB per member).
    pub allreduce_elem_max: u32,
    /// Elements in a list operation (default 255).
    pub rw_list_elem_max: u32,
    /// How blocking calls wait; `GASPI_WAIT` in the environment overrides it.
    pub wait_mode: WaitMode,
    /// The engine; `GASPI_ENGINE` in the environment overrides it.
    pub engine: Engine,
    /// How long `Context::init` waits for the other ranks to start.
    pub init_timeout: Timeout,
    /// The MPI and GPI-2 engines: the longest nap of the relay thread
    /// (which serves what other hosts deliver while the rank does not call
    /// the library) while nothing arrives and nobody waits (default 2 ms,
    /// at most [`RELAY_NAP_MAX`]; `GASPI_RELAY_NAP_US` overrides it). A
    /// rank that computes outside the library is a passive target served
    /// only by its relay: shorter naps serve MPI locks, flushes and atomics
    /// to it sooner, and cost its core wake-ups (`docs/guide/mpi.md`,
    /// "A target that computes").
    pub relay_nap: Duration,
}

/// The longest [`Config::relay_nap`]: 100 ms, well below the 1 s gap
/// between two relay rounds that the MPI engine's failure watch takes for a
/// stalled rank (and takes out of a ping's age).
///
/// ```
/// use std::time::Duration;
/// let quick = gaspi::Config { relay_nap: Duration::from_micros(50), ..Default::default() };
/// assert!(quick.validate().is_ok());
/// let long = gaspi::Config { relay_nap: gaspi::RELAY_NAP_MAX * 2, ..Default::default() };
/// assert!(matches!(long.validate(), Err(gaspi::Error::Config(m)) if m.contains("relay_nap")));
/// ```
pub const RELAY_NAP_MAX: Duration = Duration::from_millis(100);

impl Default for Config {
    fn default() -> Config {
        Config {
            queue_num: 8,
            queue_size_max: 1024,
            group_max: 32,
            segment_max: SEGMENT_LIMIT,
            transfer_size_max: 1 << 30,
            notification_num: 65_536,
            passive_queue_size_max: 16,
            passive_transfer_size_max: 65_535,
            allreduce_buf_size: 255 * 8,
            allreduce_elem_max: 255,
            rw_list_elem_max: 255,
            wait_mode: WaitMode::Auto,
            engine: Engine::Native,
            init_timeout: Timeout::ms(120_000),
            relay_nap: Duration::from_millis(2),
        }
    }
}

impl Config {
    /// Check every field against its limits.
    ///
    /// ```
    /// let bad = gaspi::Config { passive_transfer_size_max: 0, ..Default::default() };
    /// assert!(matches!(bad.validate(), Err(gaspi::Error::Config(m)) if m.contains("passive_transfer_size_max")));
    /// // GPI-2's last two queues are the runtime's.
    /// let all = gaspi::Config { queue_num: gaspi::QUEUE_MAX, ..Default::default() };
    /// assert!(all.validate().is_ok());
    /// let gpi2 = gaspi::Config { engine: gaspi::Engine::Gpi2, ..all };
    /// assert!(matches!(gpi2.validate(), Err(gaspi::Error::Config(m)) if m.contains("1..=14")));
    /// ```
    pub fn validate(&self) -> Result<()> {
        fn check(ok: bool, msg: String) -> Result<()> {
            if ok { Ok(()) } else { Err(Error::Config(msg)) }
        }
        let queues = self.engine.queue_max();
        check(
            (1..=queues).contains(&self.queue_num),
            format!(
                "queue_num {} must be in 1..={queues} on the {:?} engine{}",
                self.queue_num,
                self.engine,
                if queues < QUEUE_MAX {
                    format!(" (it has {QUEUE_MAX} queues; the runtime keeps the last two)")
                } else {
                    String::new()
                }
            ),
        )?;
        check(
            (1..=QUEUE_SIZE_LIMIT).contains(&self.queue_size_max),
            format!(
                "queue_size_max {} must be in 1..={QUEUE_SIZE_LIMIT}",
                self.queue_size_max
            ),
        )?;
        check(
            (1..=GROUP_LIMIT).contains(&self.group_max),
            format!("group_max {} must be in 1..={GROUP_LIMIT}", self.group_max),
        )?;
        check(
            (1..=SEGMENT_LIMIT).contains(&self.segment_max),
            format!(
                "segment_max {} must be in 1..={SEGMENT_LIMIT}",
                self.segment_max
            ),
        )?;
        check(
            self.transfer_size_max > 0,
            "transfer_size_max must be positive".into(),
        )?;
        check(
            (1..=NOTIFICATION_LIMIT).contains(&self.notification_num),
            format!(
                "notification_num {} must be in 1..={NOTIFICATION_LIMIT}",
                self.notification_num
            ),
        )?;
        check(
            (1..=4096).contains(&self.passive_queue_size_max),
            format!(
                "passive_queue_size_max {} must be in 1..=4096",
                self.passive_queue_size_max
            ),
        )?;
        check(
            (1..=(1 << 26)).contains(&self.passive_transfer_size_max),
            format!(
                "passive_transfer_size_max {} must be in 1..=64 MiB",
                self.passive_transfer_size_max
            ),
        )?;
        check(
            (8..=ALLREDUCE_BYTES_MAX).contains(&self.allreduce_buf_size),
            format!(
                "allreduce_buf_size {} must be in 8..=64 MiB",
                self.allreduce_buf_size
            ),
        )?;
        check(
            (1..=ALLREDUCE_BYTES_MAX / 8).contains(&(self.allreduce_elem_max as usize)),
            format!(
                "allreduce_elem_max {} must be in 1..={} (64 MiB of 8-byte elements)",
                self.allreduce_elem_max,
                ALLREDUCE_BYTES_MAX / 8
            ),
        )?;
        check(
            (1..=65_536).contains(&self.rw_list_elem_max),
            format!(
                "rw_list_elem_max {} must be in 1..=65536",
                self.rw_list_elem_max
            ),
        )?;
        check(
            self.relay_nap <= RELAY_NAP_MAX,
            format!(
                "relay_nap {:?} must be at most {RELAY_NAP_MAX:?}",
                self.relay_nap
            ),
        )?;
        Ok(())
    }

    /// Bytes each rank contributes to one allreduce: enough for both the
    /// typed and the user-defined form.
    pub(crate) fn allreduce_slot_bytes(&self) -> usize {
        self.allreduce_buf_size
            .max(self.allreduce_elem_max as usize * 8)
    }
}

impl Config {
    /// `self` with the environment's overrides (`GASPI_WAIT`,
    /// `GASPI_ENGINE`, `GASPI_RELAY_NAP_US`).
    pub(crate) fn with_env(mut self) -> Result<Config> {
        if let Some(us) = env::number(env::RELAY_NAP_US)? {
            self.relay_nap = u64::try_from(us)
                .ok()
                .map(Duration::from_micros)
                .filter(|&d| d <= RELAY_NAP_MAX)
                .ok_or_else(|| {
                    Error::Environment(format!(
                        "{}={us}: at most {} us",
                        env::RELAY_NAP_US,
                        RELAY_NAP_MAX.as_micros()
                    ))
                })?;
        }
        if let Ok(w) = std::env::var(env::WAIT) {
            self.wait_mode = WaitMode::parse(&w).ok_or_else(|| {
                Error::Environment(format!("{}={w}: use auto, spin, yield or block", env::WAIT))
            })?;
        }
        if let Ok(e) = std::env::var(env::ENGINE) {
            self.engine = Engine::parse(&e).ok_or_else(|| {
                Error::Environment(format!("{}={e}: use native, gpi2 or mpi", env::ENGINE))
            })?;
        } else if cfg!(feature = "gpi2") && started_by_gpi2_run() {
            // GPI-2's gaspi_run (over ssh on a cluster) passes on none of
            // the user's variables: a build with the GPI-2 engine started
            // by it runs on it.
            self.engine = Engine::Gpi2;
        }
        Ok(self)
    }
}

/// Whether GPI-2's own `gaspi_run` started this process: its machine file
/// and local rank are set, and no job token of our launcher is.
pub(crate) fn started_by_gpi2_run() -> bool {
    std::env::var_os(env::GPI2_MFILE).is_some()
        && std::env::var_os(env::SOCKET).is_some()
        && std::env::var_os(env::JOB).is_none()
}

/// The segment id the runtime keeps for itself (the windows of its
/// collectives over all ranks): user ids are `0..segment_max`, at most
/// `0..255`.
pub(crate) const RESERVED_SEGMENT: SegmentId = 255;
/// The queue the runtime keeps for itself, after the user's `0..QUEUE_MAX`.
pub(crate) const RESERVED_QUEUE: QueueId = QUEUE_MAX as u8;

thread_local! {
    /// Set while the runtime itself posts on its reserved segment and queue.
    static INTERNAL: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with the reserved segment and queue usable: the collectives over
/// all ranks post their one-sided operations there, apart from the user's.
pub(crate) fn internal<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            INTERNAL.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(INTERNAL.with(|c| c.replace(true)));
    f()
}

/// Whether the calling thread is inside [`internal`].
pub(crate) fn in_internal() -> bool {
    INTERNAL.with(|c| c.get())
}
