//! Start and stop (`gaspi_proc_init` / `gaspi_proc_term`), and what a rank
//! knows about the job.

use crate::collectives::Groups;
use crate::config::{Config, Engine, WaitMode};
use crate::engine::{JobSpec, Native, job};
use crate::error::{Error, Result};
use crate::queues::Queues;
use crate::types::{Rank, RankState};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// Environment variables a launcher sets for each rank.
pub mod env {
    /// This rank (GPI-2's name).
    ///
    /// ```
    /// // A rank started by a launcher knows its rank before init.
    /// let rank: Option<u16> = std::env::var(gaspi::env::RANK).ok().and_then(|r| r.parse().ok());
    /// # let _ = rank;
    /// ```
    pub const RANK: &str = "GASPI_RANK";
    /// Number of ranks (GPI-2's name).
    ///
    /// ```
    /// let ranks = std::env::var(gaspi::env::NRANKS).map_or(1, |n| n.parse::<usize>().unwrap_or(1));
    /// assert!(ranks >= 1);
    /// ```
    pub const NRANKS: &str = "GASPI_NRANKS";
    /// Ranks per node (consecutive ranks form a node).
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// let report = Launch::new("sh", 2).args(["-c", &format!("echo ${}", gaspi::env::PPN)]).ppn(1).output(Output::Capture).run()?;
    /// assert_eq!(report.ranks[0].stdout, b"1\n");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub const PPN: &str = "GASPI_PPN";
    /// The job's token: names its shared-memory objects.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// // Every rank of a job gets the same token.
    /// let report = Launch::new("sh", 2).args(["-c", &format!("echo ${}", gaspi::env::JOB)]).output(Output::Capture).run()?;
    /// assert_eq!(report.ranks[0].stdout, report.ranks[1].stdout);
    /// assert_eq!(report.ranks[0].stdout, format!("{}\n", report.token).into_bytes());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub const JOB: &str = "GASPI_JOB";
    /// Pid of the supervising launcher, if any.
    ///
    /// ```
    /// let supervised = std::env::var_os(gaspi::env::LAUNCHER).is_some();
    /// # let _ = supervised;
    /// ```
    pub const LAUNCHER: &str = "GASPI_LAUNCHER";
    /// Overrides [`Config::wait_mode`](crate::Config::wait_mode): `auto|spin|yield|block`.
    ///
    /// ```
    /// use gaspi::launcher::Launch;
    /// // The same as `GASPI_WAIT=block gaspi-run ...`.
    /// let job = Launch::new("target/release/examples/ring", 4).env(gaspi::env::WAIT, "block");
    /// # let _ = job;
    /// ```
    pub const WAIT: &str = "GASPI_WAIT";
    /// CPUs the whole job runs on (the launcher's; each rank may be bound
    /// to fewer): what waiting compares the awake ranks with.
    ///
    /// ```
    /// use gaspi::launcher::{Launch, Output};
    /// let report = Launch::new("sh", 1).args(["-c", &format!("echo ${}", gaspi::env::CPUS)]).output(Output::Capture).run()?;
    /// let cpus: usize = String::from_utf8_lossy(&report.ranks[0].stdout).trim().parse().unwrap();
    /// assert!(cpus >= 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub const CPUS: &str = "GASPI_CPUS";
    /// Overrides [`Config::engine`](crate::Config::engine): `native|gpi2`.
    ///
    /// ```
    /// // `GASPI_ENGINE=gpi2 ./program` runs the same binary on GPI-2.
    /// let engine = std::env::var(gaspi::env::ENGINE).ok().and_then(|e| gaspi::Engine::parse(&e));
    /// let configured = gaspi::Config { engine: engine.unwrap_or_default(), ..Default::default() };
    /// assert!(configured.validate().is_ok());
    /// ```
    pub const ENGINE: &str = "GASPI_ENGINE";
    /// For testing the GPI-2 engine on one machine: ranks per emulated
    /// host (consecutive blocks) under GPI-2's own `gaspi_run`. Ranks of
    /// different emulated hosts share no shared-memory object, as if they
    /// ran on different machines; everything between them goes through
    /// GPI-2.
    ///
    /// ```text
    /// GASPI_HOST_RANKS=2 gaspi_run -m machines -n 4 ./program   # hosts of 2 ranks
    /// ```
    pub const HOST_RANKS: &str = "GASPI_HOST_RANKS";
}

static ALIVE: AtomicBool = AtomicBool::new(false);

/// The segment id the runtime keeps for itself: user ids are
/// `0..segment_max`, at most `0..255`.
pub(crate) const RESERVED_SEGMENT: crate::types::SegmentId = 255;
/// The queue the runtime keeps for itself, after the user's `0..QUEUE_MAX`.
pub(crate) const RESERVED_QUEUE: crate::types::QueueId = crate::config::QUEUE_MAX as u8;

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
    pub(crate) traffic: crate::traffic::Book,
    /// The node-aware barrier over all ranks (jobs of several nodes).
    pub(crate) all_nodes: Mutex<Option<crate::collectives::NodeReduce>>,
    ppn: usize,
    terminated: AtomicBool,
}

fn env_number(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Environment(format!("{name}={v} is not a number"))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(_) => Err(Error::Environment(format!("{name} is not valid UTF-8"))),
    }
}

/// When the engine's transport to other nodes starts.
#[cfg_attr(not(feature = "gpi2"), allow(dead_code))]
enum RemoteStart {
    /// No transport (native engine, or a one-rank job).
    None,
    /// Already started (GPI-2's launcher: GPI-2 said who is where).
    Started(Box<crate::engine::remote::Gpi2>),
    /// After joining our launcher's job.
    AfterAttach,
}

#[cfg(feature = "gpi2")]
fn start_remote(config: &Config) -> Result<crate::engine::remote::Gpi2> {
    crate::engine::gpi2::Gpi2::start(config)
}

#[cfg(not(feature = "gpi2"))]
fn start_remote(_: &Config) -> Result<crate::engine::remote::Gpi2> {
    unreachable!("only the gpi2 feature's init asks for a transport")
}

/// `config` with the environment's overrides (`GASPI_WAIT`, `GASPI_ENGINE`).
fn config_from_env(mut config: Config) -> Result<Config> {
    if let Ok(w) = std::env::var(env::WAIT) {
        config.wait_mode = WaitMode::parse(&w).ok_or_else(|| {
            Error::Environment(format!("{}={w}: use auto, spin, yield or block", env::WAIT))
        })?;
    }
    if let Ok(e) = std::env::var(env::ENGINE) {
        config.engine = Engine::parse(&e).ok_or_else(|| {
            Error::Environment(format!("{}={e}: use native or gpi2", env::ENGINE))
        })?;
    }
    Ok(config)
}

/// The job this process belongs to, from the launcher's environment.
fn spec_from_env() -> Result<JobSpec> {
    let rank = env_number(env::RANK)?;
    let nranks = env_number(env::NRANKS)?;
    let token = std::env::var(env::JOB).ok();
    let launched = std::env::var_os(env::LAUNCHER).is_some();
    let (rank, nranks) = match (rank, nranks) {
        (None, None) => (0, 1),
        (Some(r), Some(n)) => (r, n),
        _ => {
            return Err(Error::Environment(format!(
                "set both {} and {} (gaspi-run does), or neither for a one-rank job",
                env::RANK,
                env::NRANKS
            )));
        }
    };
    if nranks == 0 || nranks > Rank::MAX as usize || rank >= nranks {
        return Err(Error::Environment(format!(
            "rank {rank} of {nranks} ranks is not a valid position"
        )));
    }
    let token = match token {
        Some(t) if !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric()) => t,
        Some(t) => {
            return Err(Error::Environment(format!(
                "{}={t} must be a non-empty alphanumeric token",
                env::JOB
            )));
        }
        None if nranks == 1 => job::new_token(),
        None => {
            return Err(Error::Environment(format!(
                "{} is not set: start the ranks with gaspi-run, or give every rank the same \
                 {} token",
                env::JOB,
                env::JOB
            )));
        }
    };
    job_spec(token, rank, nranks, launched)
}

/// The job of rank `rank` of `nranks` named `token`, with the node layout
/// (`GASPI_PPN`) and CPUs from the environment.
pub(crate) fn job_spec(
    token: String,
    rank: usize,
    nranks: usize,
    launched: bool,
) -> Result<JobSpec> {
    let ppn = ppn_from_env(nranks)?;
    let cores = cores_from_env(nranks)?;
    Ok(JobSpec {
        token,
        rank: rank as Rank,
        nranks,
        ppn: ppn.min(nranks),
        launched: launched && nranks > 0,
        cores,
        attach: nranks,
        host_first: 0,
    })
}

/// The host of `rank` when hosts are blocks of `per_host` ranks: its
/// first rank and its number of ranks.
#[cfg(feature = "gpi2")]
pub(crate) fn host_of(rank: usize, nranks: usize, per_host: usize) -> (usize, usize) {
    let first = rank / per_host * per_host;
    (first, per_host.min(nranks - first))
}

/// Ranks per node: `GASPI_PPN` (the launcher's `--ppn`), else all.
fn ppn_from_env(nranks: usize) -> Result<usize> {
    let ppn = env_number(env::PPN)?.unwrap_or(nranks);
    if ppn == 0 {
        return Err(Error::Environment(format!("{} must be positive", env::PPN)));
    }
    Ok(ppn)
}

/// The CPUs a waiter may count on, for a job of `nranks` ranks.
fn cores_from_env(nranks: usize) -> Result<usize> {
    // The job's CPUs as the launcher says (a bound rank sees only its
    // own), else this process's.
    let cores = match env_number(env::CPUS)? {
        Some(c) if c > 0 => c,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // A rank bound to part of the job's CPUs in a job with more ranks than
    // CPUs shares its CPUs with other ranks (gaspi-run --bind block): when
    // it waits for one of them, spinning only keeps it off the CPU, so it
    // never spins (it yields at once, which is as fast as spinning when its
    // CPU-mates sleep). Measured: a ping-pong between ranks 0 and 1 of 4 on
    // 2 CPUs took 100 us one way with spinning, 0.5-1 us without.
    let bound = crate::launcher::sys::allowed_cpus().len();
    Ok(if bound > 0 && bound < cores && nranks > cores {
        0
    } else {
        cores
    })
}

impl Context {
    /// Join the job (`gaspi_proc_init`): map the job, wait until every rank
    /// has started (up to [`Config::init_timeout`]), and commit
    /// [`GroupId::ALL`](crate::GroupId::ALL).
    ///
    /// Fails with [`Error::AlreadyInitialized`] if a context is alive in
    /// this process, and with [`Error::Environment`] if the launcher's
    /// variables are inconsistent.
    ///
    /// ```
    /// // Run on its own, a program is a job of one rank.
    /// let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.num_ranks(), 1);
    /// assert!(matches!(gaspi::Context::init(gaspi::Config::default()), Err(gaspi::Error::AlreadyInitialized)));
    /// ctx.term()?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn init(config: Config) -> Result<Context> {
        let config = config_from_env(config)?;
        if config.engine == Engine::Gpi2 {
            return Context::init_gpi2(config);
        }
        Context::init_with(config, spec_from_env()?)
    }

    /// [`Context::init`] on the GPI-2 engine: GPI-2 starts first and says
    /// who is where; our launcher's variables (token, node emulation)
    /// apply when it started the job, else the token comes from rank 0
    /// through GPI-2, nodes are GPI-2's hosts, and each host's ranks share
    /// a control block of their own.
    #[cfg(feature = "gpi2")]
    fn init_gpi2(mut config: Config) -> Result<Context> {
        config.validate()?;
        // GPI-2 has 255 segment ids; the runtime takes the last two.
        config.segment_max = config
            .segment_max
            .min(crate::engine::gpi2::GPI2_SEGMENTS - 2);
        if config.wait_mode == WaitMode::Auto {
            // GPI-2 writes data and notifications from its own threads
            // (device, NIC), which cannot wake a rank sleeping in the
            // kernel: waiters yield and look (pumping) instead of sleeping.
            config.wait_mode = WaitMode::Yield;
        }
        if ALIVE.load(SeqCst) {
            return Err(Error::AlreadyInitialized);
        }
        let launched = std::env::var_os(env::LAUNCHER).is_some();
        if launched {
            // Our launcher: join its job first (it watches the ranks, so a
            // rank that never starts fails init instead of hanging GPI-2's),
            // then start GPI-2.
            let mut spec = spec_from_env()?;
            if let Some(h) = env_number(env::HOST_RANKS)?.filter(|&h| h > 0) {
                // Emulated hosts: this host's control block only.
                (spec.host_first, spec.attach) = host_of(spec.rank as usize, spec.nranks, h);
            }
            return Context::init_engine(config, spec, RemoteStart::AfterAttach);
        }
        if std::env::var_os("GASPI_MFILE").is_none() && std::env::var(env::NRANKS).is_err() {
            // A one-rank job started on its own: no other node to reach.
            return Context::init_engine(config, spec_from_env()?, RemoteStart::None);
        }
        let mut g = crate::engine::gpi2::Gpi2::start(&config)?;
        if let Some(h) = env_number(env::HOST_RANKS)?.filter(|&h| h > 0) {
            g.emulate_hosts(h);
        }
        let p = g.placement();
        // One token per host: ranks of different hosts share no object
        // (what emulated hosts rely on).
        let mine = u64::from_str_radix(&job::new_token()[..15], 16).unwrap_or(1) | 1;
        let token = crate::launcher::host_token(
            &format!("g{:x}", g.agree(mine, config.init_timeout)?),
            p.rank as usize - p.local_rank,
        );
        if p.local_rank == 0 {
            // No launcher of ours cleans up after jobs of GPI-2's: remove
            // what killed ones left on this host.
            job::sweep_stale();
        }
        let mut spec = job_spec(token, p.rank as usize, p.nranks, false)?;
        if std::env::var_os(env::PPN).is_none() {
            // Nodes are hosts when all hosts have as many ranks, else the
            // largest size that divides every host.
            spec.ppn = g.host_size_gcd(config.init_timeout)?;
        }
        spec.attach = p.local_num;
        spec.host_first = p.rank as usize - p.local_rank;
        // Nodes (GPI-2's hosts, or emulated ones inside them) must be
        // blocks of consecutive ranks within one host.
        let host = p.rank as usize - p.local_rank;
        let node = p.rank as usize / spec.ppn * spec.ppn;
        if node < host || (node + spec.ppn).min(p.nranks) > host + p.local_num {
            g.term(true, false);
            return Err(Error::Environment(format!(
                "rank {}'s node (ranks {node}.. in blocks of {}) spans hosts under GPI-2: \
                 list each host's ranks consecutively in the machine file",
                p.rank, spec.ppn
            )));
        }
        Context::init_engine(config, spec, RemoteStart::Started(Box::new(g)))
    }

    #[cfg(not(feature = "gpi2"))]
    fn init_gpi2(_config: Config) -> Result<Context> {
        Err(Error::Config(
            "the GPI-2 engine needs the crate built with feature `gpi2`".into(),
        ))
    }

    /// [`Context::init`] for the job `spec` describes (from the launcher's
    /// environment, or from MPI).
    pub(crate) fn init_with(config: Config, spec: JobSpec) -> Result<Context> {
        Context::init_engine(config_from_env(config)?, spec, RemoteStart::None)
    }

    fn init_engine(config: Config, spec: JobSpec, remote: RemoteStart) -> Result<Context> {
        let (remote, after) = match remote {
            RemoteStart::None => (None, false),
            RemoteStart::Started(g) => (Some(*g), false),
            RemoteStart::AfterAttach => (None, true),
        };
        if let Err(e) = config.validate() {
            if let Some(g) = &remote {
                g.term(true, false);
            }
            return Err(e);
        }
        if ALIVE.swap(true, SeqCst) {
            return Err(Error::AlreadyInitialized);
        }
        let attached = Native::attach(&spec, &config, remote).and_then(|mut engine| {
            if after {
                match start_remote(&config) {
                    Ok(g) => engine.remote = Some(g),
                    Err(e) => {
                        engine.term(true);
                        return Err(e);
                    }
                }
            }
            Ok(engine)
        });
        let made = attached.and_then(|engine| {
            let ctx = Context {
                queues: Queues::new(
                    config.queue_num,
                    config.queue_size_max,
                    config.engine.queue_max(),
                ),
                groups: Groups::new(config.group_max as usize),
                traffic: Default::default(),
                all_nodes: Mutex::new(None),
                config,
                ppn: spec.ppn,
                engine,
                terminated: AtomicBool::new(false),
            };
            ctx.commit_initial_groups()?;
            ctx.create_node_collectives()?;
            ctx.engine.enable_remote_relay()?;
            Ok(ctx)
        });
        if made.is_err() {
            ALIVE.store(false, SeqCst);
        }
        made
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

    fn shutdown(&self, failed: bool) {
        if !self.terminated.swap(true, SeqCst) {
            self.groups.release_all(self);
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
        if self.engine.remote.is_some() {
            Engine::Gpi2
        } else {
            Engine::Native
        }
    }

    /// This rank (`gaspi_proc_rank`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.rank() < ctx.num_ranks());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn rank(&self) -> Rank {
        self.engine.rank
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
        self.ppn
    }

    /// The node of this rank.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.node(), ctx.rank() as usize / ctx.ranks_per_node());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node(&self) -> usize {
        self.rank() as usize / self.ppn
    }

    /// Number of nodes.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.node() < ctx.num_nodes());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn num_nodes(&self) -> usize {
        (self.num_ranks() as usize).div_ceil(self.ppn)
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
        (self.rank() as usize % self.ppn) as Rank
    }

    /// Number of ranks on this rank's node (`gaspi_proc_local_num`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert!(ctx.local_rank() < ctx.local_num());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn local_num(&self) -> Rank {
        let first = self.node() * self.ppn;
        (self.num_ranks() as usize - first).min(self.ppn) as Rank
    }

    /// Whether `rank` runs on this rank's host, sharing its memory. Always
    /// true on the native engine; under the GPI-2 engine on a cluster (or
    /// with emulated hosts) ranks of other hosts are reached only through
    /// GPI-2: passive messages to them are pulled by their relay thread,
    /// and an access to a segment they deleted is not detected (see the
    /// README's cluster notes).
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
            .map(|r| match self.engine.job.slot(r).state.load(SeqCst) {
                job::FAILED => RankState::Corrupt,
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
    pub fn connect(&self, rank: Rank, _timeout: crate::Timeout) -> Result<()> {
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
