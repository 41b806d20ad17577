//! The context: the state a rank holds (its engine, configuration,
//! queues, groups and traffic counters), what it knows about the job, and
//! leaving the job (`gaspi_proc_term`).
//!
//! Its GASPI calls are spread over the files of each chapter (`impl
//! Context` in `segments.rs`, `onesided.rs`, ...); starting is in
//! `start.rs`, above the collectives it sets up.

pub(crate) mod groups;
pub(crate) mod queues;
pub(crate) mod traffic;

use crate::config::{Config, Engine};
use crate::engine::{Health, Native};
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, RankState, Timeout};
use groups::Groups;
use queues::Queues;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// Whether a context is alive in this process.
static ALIVE: AtomicBool = AtomicBool::new(false);

/// The right to create this process's context, held while one is being
/// made; given back on drop unless [`Claim::keep`] handed it to a context.
pub(crate) struct Claim(bool);

impl Claim {
    /// Take the right, or fail with [`Error::AlreadyInitialized`].
    pub(crate) fn take() -> Result<Claim> {
        if ALIVE.swap(true, SeqCst) {
            return Err(Error::AlreadyInitialized);
        }
        Ok(Claim(true))
    }

    /// The context was made: it gives the right back when it terminates.
    pub(crate) fn keep(mut self) {
        self.0 = false;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.0 {
            ALIVE.store(false, SeqCst);
        }
    }
}

/// The barrier over all ranks of a job of several nodes, which the
/// collectives set up at init (node-aware: a node barrier, then one
/// exchange between nodes); held here so that the context owns it.
pub(crate) trait AllNodes: Send + std::fmt::Debug {
    /// Pass the barrier, or resume one that timed out.
    fn barrier(&mut self, ctx: &Context, deadline: Deadline) -> Result<()>;
}

/// A rank's handle on the GASPI runtime.
///
/// Created by [`Context::init`] (`gaspi_proc_init`), torn down by
/// [`Context::term`] or on drop (`gaspi_proc_term`). One context may live in
/// a process at a time.
///
/// # Threads
/// `Context` is `Send + Sync`: several threads of a rank may post and wait
/// at once, as GASPI allows. Use different queues for independent streams
/// of requests; a collective on one group runs on one thread at a time (a
/// second thread gets [`Error::ActiveCollective`]). This is sound because
/// all state a context shares between threads is atomics (queue depths,
/// notification tables, barrier counters), mutexes (group and segment
/// tables' writers), or immutable after creation; segment objects are freed
/// only after every thread that could be reading them has left (an epoch
/// scheme, see the engine); and the shared memory itself is only reached
/// through atomics and raw copies, whose races between ranks are the
/// program's business under the GASPI contract, never references.
///
/// Started by `gaspi-run`, a program learns its rank and the job from the
/// environment; started on its own it is rank 0 of a job of one.
///
/// ```
/// use gaspi::{Config, Context};
/// let ctx = Context::init(Config::default())?;
/// assert!(ctx.rank() < ctx.num_ranks());
/// ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug)]
pub struct Context {
    pub(crate) engine: Native,
    pub(crate) config: Config,
    pub(crate) queues: Queues,
    pub(crate) groups: Groups,
    pub(crate) traffic: traffic::Book,
    /// The node-aware barrier over all ranks (jobs of several nodes).
    pub(crate) all_nodes: Mutex<Option<Box<dyn AllNodes>>>,
    terminated: AtomicBool,
}

impl Context {
    /// A context on `engine` (joined), with GASPI's bookkeeping empty: the
    /// caller (`Context::init`) commits the initial groups and sets up the
    /// collectives over all ranks.
    pub(crate) fn assemble(engine: Native, config: Config) -> Context {
        Context {
            queues: Queues::new(
                config.queue_num,
                config.queue_size_max,
                config.engine.queue_max(),
            ),
            groups: Groups::new(config.group_max as usize),
            traffic: Default::default(),
            all_nodes: Mutex::new(None),
            config,
            engine,
            terminated: AtomicBool::new(false),
        }
    }

    /// Leave the job (`gaspi_proc_term`): delete this rank's segments and
    /// inbox and mark it terminated. Dropping the context does the same.
    ///
    /// Other ranks' operations on this rank fail with
    /// [`Error::RankTerminated`] afterwards.
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(gaspi::Context::is_initialized());
    /// ctx.term()?;
    /// assert!(!gaspi::Context::is_initialized());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn term(self) -> Result<()> {
        self.shutdown(false);
        Ok(())
    }

    /// Leave the job once (`failed`: abnormally).
    pub(crate) fn shutdown(&self, failed: bool) {
        if !self.terminated.swap(true, SeqCst) {
            self.groups.release_all(self.rank());
            self.engine.term(failed);
            ALIVE.store(false, SeqCst);
        }
    }

    /// The engine this context runs on ([`Config::engine`], or
    /// `GASPI_ENGINE`).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.engine(), gaspi::Engine::Native);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn engine(&self) -> Engine {
        self.engine.kind()
    }

    /// This rank (`gaspi_proc_rank`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.rank() < ctx.num_ranks());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn rank(&self) -> Rank {
        self.engine.rank()
    }

    /// Number of ranks in the job (`gaspi_proc_num`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let right = (ctx.rank() + 1) % ctx.num_ranks();
    /// assert!(right < ctx.num_ranks());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn num_ranks(&self) -> Rank {
        self.engine.nranks() as Rank
    }

    /// Ranks per node: consecutive ranks `node*ppn .. node*ppn+ppn` form a
    /// node (`gaspi-run --ppn`; all ranks when not given).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// // Without --ppn the whole job is one node.
    /// assert_eq!(ctx.ranks_per_node(), ctx.num_ranks() as usize);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn ranks_per_node(&self) -> usize {
        self.engine.ppn()
    }

    /// The node of this rank.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.node(), ctx.rank() as usize / ctx.ranks_per_node());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node(&self) -> usize {
        self.engine.node_of(self.rank())
    }

    /// Number of nodes.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.node() < ctx.num_nodes());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn num_nodes(&self) -> usize {
        (self.num_ranks() as usize).div_ceil(self.ranks_per_node())
    }

    /// This rank's index within its node (`gaspi_proc_local_rank`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let first_of_node = ctx.rank() - ctx.local_rank();
    /// assert_eq!(first_of_node as usize, ctx.node() * ctx.ranks_per_node());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn local_rank(&self) -> Rank {
        (self.rank() as usize % self.ranks_per_node()) as Rank
    }

    /// Number of ranks on this rank's node (`gaspi_proc_local_num`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.local_rank() < ctx.local_num());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn local_num(&self) -> Rank {
        let first = self.node() * self.ranks_per_node();
        (self.num_ranks() as usize - first).min(self.ranks_per_node()) as Rank
    }

    /// Whether this rank has CPUs to itself: when it joined, it was bound
    /// to CPUs on which no other rank of its machine may run (`gaspi-run
    /// --bind spread` with a CPU per rank, or `mpirun`/`srun` binding each
    /// rank to a core of its own). Its waits then spin before they yield
    /// (in the automatic wait mode) even where it was told of fewer CPUs
    /// than ranks, since spinning takes no CPU another rank needs;
    /// otherwise they spin only while the job's awake ranks fit the CPUs
    /// (see [`WaitMode::Auto`](crate::WaitMode::Auto)). For
    /// telling why waits are slow: a rank that yields at every look pays a
    /// system call each time. Where hosts are emulated, false, except on
    /// the MPI engine started by `mpirun` or `srun` (MPI tells each rank
    /// the other hosts' CPUs).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// if ctx.num_ranks() == 1 {
    ///     assert!(ctx.cpus_of_its_own()); // no other rank may take its CPUs
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn cpus_of_its_own(&self) -> bool {
        self.engine.own_cpus()
    }

    /// Whether `rank` runs on this rank's host, sharing its memory. Always
    /// true on the native engine; under the GPI-2 engine on a cluster (or
    /// with emulated hosts) ranks of other hosts are reached only through
    /// GPI-2: passive messages to them are pulled by their relay thread,
    /// and an access to a segment they deleted is not detected (see the
    /// cluster notes in docs/guide/engines.md).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.on_this_host(ctx.rank()));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn on_this_host(&self, rank: Rank) -> bool {
        self.engine.same_host(rank)
    }

    /// The configuration in effect (`gaspi_config_get` after init).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config { queue_num: 2, ..Default::default() })?;
    /// assert_eq!(ctx.config().queue_num, 2);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Health of every rank (`gaspi_state_vec_get`): a rank that died
    /// without terminating is [`RankState::Corrupt`].
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.state_vec().iter().all(|s| *s == gaspi::RankState::Healthy));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn state_vec(&self) -> Vec<RankState> {
        (0..self.engine.nranks())
            .map(|r| match self.engine.health(r as Rank) {
                Health::Failed => RankState::Corrupt,
                _ => RankState::Healthy,
            })
            .collect()
    }

    /// Accept the failures seen so far and return all failed ranks.
    ///
    /// After a rank fails, blocking calls that cannot tell where their data
    /// would come from (`notify_waitsome`, `passive_receive`) fail with
    /// [`Error::RankFailed`] so that nobody waits forever for a dead rank.
    /// Once acknowledged, they wait for the surviving ranks again (a later
    /// failure is reported anew). Operations aimed at a failed rank, and
    /// collectives over groups containing it, always fail.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_create(0, 64, gaspi::GroupId::ALL, gaspi::Timeout::Block, gaspi::Alloc::Initialized)?;
    /// match ctx.notify_waitsome(0, 0..1, gaspi::Timeout::Test) {
    ///     Err(gaspi::Error::RankFailed { rank }) => {
    ///         // Go on with the survivors.
    ///         assert!(ctx.acknowledge_failures().contains(&rank));
    ///     }
    ///     _ => assert!(ctx.acknowledge_failures().is_empty()),
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn acknowledge_failures(&self) -> Vec<Rank> {
        self.engine.acknowledge_failures()
    }

    /// Whether `rank` is still running (`gaspi_proc_ping`): `Ok` if it is,
    /// [`Error::RankFailed`] or [`Error::RankTerminated`] if not.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.proc_ping(ctx.rank())?;
    /// assert!(matches!(ctx.proc_ping(ctx.num_ranks()), Err(gaspi::Error::InvalidRank { .. })));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn proc_ping(&self, rank: Rank) -> Result<()> {
        self.engine.check_rank(rank)?;
        self.engine.faults().ok();
        self.engine.check_alive(rank)
    }

    /// End `rank`'s process (`gaspi_proc_kill`): it is killed (SIGKILL on
    /// this host and, through its relay thread, on another host under the
    /// MPI engine; GPI-2's `gaspi_proc_kill` on another host under the
    /// GPI-2 engine, which ends the process with status 255), and every
    /// other rank then sees it failed ([`Error::RankFailed`],
    /// [`Context::state_vec`]), as after a crash. `gaspi-run` reports a
    /// rank killed at another rank's request as such
    /// ([`RankOutcome::killed_by`](crate::launcher::RankOutcome::killed_by)),
    /// not as a failure of the job, and lets the others run on.
    ///
    /// Under `mpirun` or `srun` the job ends with the rank, as it does
    /// when any rank dies.
    ///
    /// Errors: [`Error::InvalidRank`] for a rank outside the job,
    /// [`Error::InvalidArgument`] for this rank itself (GPI-2 answers
    /// `GASPI_ERR_INV_RANK`), [`Error::RankFailed`] or
    /// [`Error::RankTerminated`] for a rank that ended already, and
    /// [`Error::Timeout`] where another host did not take the request in
    /// time (it may still take it: a retry asks again, which is
    /// harmless).
    ///
    /// ```no_run
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// if ctx.rank() == 0 {
    ///     for r in 1..ctx.num_ranks() {
    ///         ctx.proc_kill(r, gaspi::Timeout::Block)?;
    ///     }
    ///     assert!(matches!(ctx.proc_kill(0, gaspi::Timeout::Block), Err(gaspi::Error::InvalidArgument(_))));
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn proc_kill(&self, rank: Rank, timeout: Timeout) -> Result<()> {
        self.engine.kill(rank, timeout)
    }

    /// Prepare communication with `rank` (`gaspi_connect`). Ranks on one
    /// machine need no connection: this checks that `rank` exists and is
    /// running, so ported code that connects explicitly keeps its error
    /// handling.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// for r in 0..ctx.num_ranks() {
    ///     ctx.connect(r, gaspi::Timeout::Block)?;
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn connect(&self, rank: Rank, _timeout: Timeout) -> Result<()> {
        self.proc_ping(rank)
    }

    /// End communication with `rank` (`gaspi_disconnect`); nothing to tear
    /// down on one machine, so only the rank is checked.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.connect(0, gaspi::Timeout::Block)?;
    /// ctx.disconnect(0)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn disconnect(&self, rank: Rank) -> Result<()> {
        self.engine.check_rank(rank)
    }

    /// Whether a context is alive in this process (`gaspi_initialized`).
    ///
    /// ```
    /// assert!(!gaspi::Context::is_initialized());
    /// let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(gaspi::Context::is_initialized());
    /// # drop(ctx);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn is_initialized() -> bool {
        ALIVE.load(SeqCst)
    }

    /// The library version (`gaspi_version`).
    ///
    /// ```
    /// assert!(!gaspi::Context::version().is_empty());
    /// ```
    pub fn version() -> &'static str {
        env!("CARGO_PKG_VERSION")
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // A context dropped while unwinding belongs to a rank going down
        // abnormally: peers must learn it failed, not that it finished.
        self.shutdown(std::thread::panicking());
    }
}
