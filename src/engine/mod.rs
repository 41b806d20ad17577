//! The engine: ranks as processes, each mapping the memory of the ranks of
//! its host, and a [`Transport`] to the ranks of other hosts.
//!
//! Every rank maps the segments of the others on its host. A write is a
//! copy into the target's segment object, a notification a `SeqCst` store
//! into its table after the data, a read a copy out of it, an atomic a
//! hardware atomic on the target word. Nothing goes through a server or
//! another rank.
//!
//! The GASPI API (`Context` and its chapters) checks its arguments, keeps
//! GASPI's bookkeeping (queues, groups), and then makes one call into this
//! engine ([`Native`]), as GPI-2's `pgaspi_*` calls end in one
//! `pgaspi_dev_*` call. The engine answers from its mappings where it can
//! and asks its transport (chosen once, in [`start`]) where it cannot; the
//! API never sees which.
//!
//! # Files
//! - [`spec`]: who this process is in which job; [`start`]: the one place
//!   that picks the transport;
//! - this file: [`Native`], joining and leaving the job, failures;
//! - [`tables`], [`directory`]: this rank's segments and its mappings of the
//!   other ranks' (what a lookup borrows, and how stale mappings are
//!   replaced);
//! - [`transfer`], [`messages`], [`hosts`]: one-sided operations and
//!   atomics, passive messages, groups spanning hosts — each mapped here or
//!   carried by the transport;
//! - the memory modules: [`shm`] (mappings), [`segment`], [`notify`],
//!   [`inbox`], [`group`], [`job`] (the shared objects), [`lent`] (window
//!   memory lent to a transport's nonblocking messages), [`memcopy`]
//!   (every copy of data, avoiding a slow `memcpy` case), [`caches`] (the
//!   last-level cache's size), [`epoch`]
//!   (deferred reclamation), [`futex`] and [`wait`] (waiting, and the
//!   small helpers every file uses: `lock`, polling);
//! - [`transport`] (the trait) and its implementations `gpi2/` and `mpi/`.
//!
//! The engine's `unsafe` code lives in the memory modules, each block next
//! to the bounds it relies on, and in `gpi2/` (calls into GPI-2's C API).

pub(crate) mod caches;
pub(crate) mod directory;
pub(crate) mod epoch;
pub(crate) mod futex;
#[cfg(feature = "gpi2")]
pub(crate) mod gpi2;
pub(crate) mod group;
pub(crate) mod hosts;
pub(crate) mod inbox;
pub(crate) mod job;
pub(crate) mod lent;
pub(crate) mod memcopy;
pub(crate) mod messages;
#[cfg(feature = "mpi")]
pub(crate) mod mpi;
pub(crate) mod notify;
pub(crate) mod processes;
pub(crate) mod segment;
pub(crate) mod shm;
pub(crate) mod spec;
pub(crate) mod start;
pub(crate) mod tables;
pub(crate) mod transfer;
pub(crate) mod transport;
pub(crate) mod wait;

use crate::config::{Config, Engine};
use crate::error::{Error, Result};
use crate::types::{Rank, Timeout};
use inbox::Inbox;
use job::{JobBlock, Names};
use spec::JobSpec;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::Instant;
use tables::Tables;
use transport::Transport;
use wait::{Patience, Waiter, lock};

/// Keeps a helper thread counted as awake (see [`Native::count_thread`]).
pub(crate) struct AwakeThread<'a>(&'a AtomicU32);

impl Drop for AwakeThread<'_> {
    fn drop(&mut self) {
        wait::set_helper(false);
        self.0.fetch_sub(1, SeqCst);
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        // SAFETY: clearing is always allowed; the job mapping (with the
        // awake count) is unmapped after this, when the fields drop, and
        // no thread of this rank wakes anything any more (the context is
        // being dropped, so nothing borrows it).
        unsafe { wait::set_awake_counter(None) };
    }
}

/// The state of a rank in a job: a rank's `job::RUNNING`, ... as the API
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Health {
    Running,
    Terminated,
    Failed,
}

/// This rank's attachment to a job.
#[derive(Debug)]
pub(crate) struct Native {
    job: JobBlock,
    rank: Rank,
    /// Ranks per node (consecutive ranks form a node).
    ppn: usize,
    waiter: Waiter,
    /// No other rank of this machine may run on this rank's CPUs.
    own_cpus: bool,
    launched: bool,
    /// This rank's segments and its mappings of the other ranks'.
    tables: Tables,
    inbox: Inbox,
    /// The ranks of this host (they share memory with this rank); the
    /// others are reached through the transport only.
    host: std::ops::Range<Rank>,
    /// Failed ranks the user has acknowledged, and how many.
    acknowledged: Mutex<Vec<Rank>>,
    acknowledged_count: AtomicU64,
    started: Instant,
    last_probe_ms: AtomicU64,
    /// The size of a segment's notification table ([`Config`]).
    notification_num: u32,
    /// The way to ranks this process cannot map, if the job has one.
    transport: Option<Box<dyn Transport>>,
    /// The host's reaper, on the host's first rank of a job that no
    /// launcher of ours watches ([`Native::host_reaper`]).
    reaper: Option<crate::reaper::Reaper>,
    /// The host's ranks' processes, for kernel copies between them.
    processes: processes::Processes,
}

impl Native {
    /// Join the job described by `spec`: map its control block (creating it
    /// if no launcher did), record this process, create the inbox and wait
    /// until every rank of this host has done the same. `transport`, if
    /// given, is the job's way to other hosts, already started.
    ///
    /// If joining fails in a job no launcher watches, and no other rank of
    /// this host is still in it, this rank removes the job's objects: a
    /// failed start leaves nothing behind.
    pub(crate) fn attach(
        spec: &JobSpec,
        config: &Config,
        transport: Option<Box<dyn Transport>>,
    ) -> Result<Native> {
        let deadline = config.init_timeout.deadline();
        let job = spec::open_job(spec, deadline)?;
        let joined = Native::join(spec, config, transport, job, deadline);
        if joined.is_err() && !spec.launched {
            if let Ok(Some(job)) = JobBlock::try_open(&spec.token) {
                let host = spec.host_first..(spec.host_first + spec.attach).min(job.nranks());
                let anyone = host
                    .filter(|&r| r != spec.rank as usize)
                    .any(|r| job.slot(r).state.load(SeqCst) == job::RUNNING);
                if !anyone {
                    job::sweep(job.token());
                }
            }
        }
        joined
    }

    /// [`Native::attach`] once the control block `job` is mapped.
    fn join(
        spec: &JobSpec,
        config: &Config,
        transport: Option<Box<dyn Transport>>,
        job: JobBlock,
        deadline: crate::types::Deadline,
    ) -> Result<Native> {
        if job.nranks() != spec.nranks {
            return Err(Error::Environment(format!(
                "GASPI_NRANKS is {} but job {} has {} ranks",
                spec.nranks,
                spec.token,
                job.nranks()
            )));
        }
        // Every job-wide setting must agree: ranks that disagree on the
        // node layout would address different objects and fail later
        // with misleading errors.
        if job.ppn() != spec.ppn {
            return Err(Error::Environment(format!(
                "{} is {} but job {} has {} ranks per node: start every rank with the same {}",
                crate::env::PPN,
                spec.ppn,
                spec.token,
                job.ppn(),
                crate::env::PPN
            )));
        }
        let r = spec.rank as usize;
        let slot = job.slot(r);
        let me = std::process::id();
        if slot
            .state
            .compare_exchange(job::ABSENT, job::RUNNING, SeqCst, SeqCst)
            .is_err()
        {
            return Err(Error::Environment(format!(
                "rank {r} of job {} has joined it before: a rank joins a job once",
                spec.token
            )));
        }
        // The start time first: a sweep that sees the pid must see it too
        // (or it would take a live rank for a dead one: see
        // `JobBlock::abandoned`).
        slot.start_time
            .store(job::process_info(me).map_or(0, |(s, _)| s), SeqCst);
        slot.pid.store(me, SeqCst);
        slot.cpus
            .store(job::cpu_span(&crate::sys::allowed_cpus()), SeqCst);

        let inbox = Inbox::create(
            job.names(),
            r,
            config.passive_queue_size_max as usize,
            config.passive_transfer_size_max,
        )
        .map_err(|e| {
            job.mark_failed(r); // nobody may wait for a rank that cannot start
            Error::system(format!("creating the passive inbox of rank {r}"), e)
        })?;

        let host = spec.host_first as Rank..(spec.host_first + spec.attach) as Rank;
        let mut native = Native {
            waiter: match transport {
                Some(_) => Waiter::new(config.wait_mode, spec.cores).sleepless(),
                None => Waiter::new(config.wait_mode, spec.cores),
            },
            own_cpus: false,
            rank: spec.rank,
            ppn: spec.ppn,
            launched: spec.launched,
            tables: Tables::new(spec.nranks),
            inbox,
            processes: processes::Processes::new(host.clone()),
            host,
            acknowledged: Mutex::new(Vec::new()),
            acknowledged_count: AtomicU64::new(0),
            started: Instant::now(),
            last_probe_ms: AtomicU64::new(0),
            notification_num: config.notification_num,
            job,
            transport,
            reaper: None,
        };

        // Init barrier: every rank has recorded itself and made its inbox.
        let h = native.job.header();
        // SAFETY: the header lives in the job mapping, which the engine
        // keeps until its drop, where the pointer is cleared first.
        unsafe { wait::set_awake_counter(Some(&h.awake)) };
        h.awake.fetch_add(1, SeqCst);
        h.arrived.fetch_add(1, SeqCst);
        h.ww.advance();
        let n = spec.attach as u32;
        let result = native.patience().wait(
            &h.ww,
            deadline,
            || (h.arrived.load(SeqCst) >= n).then_some(()),
            || native.faults(),
        );
        // A rank bound to CPUs of its own (mpirun, srun or gaspi-run
        // binding each rank apart) spins while no more threads than its
        // host's ranks are awake, whatever CPUs it was told of: a launcher
        // that binds without telling us the job's CPUs leaves each rank
        // seeing one, and it never spun. Where the start did not learn it,
        // the control block tells once every rank of the machine has
        // recorded its CPUs there.
        let own = spec.own_cpus.unwrap_or_else(|| {
            result.is_ok() && spec.attach == spec.machine && {
                let host = native.host.start as usize..native.host.end as usize;
                let mine = native.job.slot(r).cpus.load(SeqCst);
                let others = host
                    .filter(|&o| o != r)
                    .map(|o| native.job.slot(o).cpus.load(SeqCst));
                job::cpus_of_its_own(mine, others)
            }
        });
        if result.is_ok() && own {
            native.own_cpus = true;
            native.waiter = native.waiter.own_cpus(spec.attach);
        }
        if result.is_ok() && !spec.launched && spec.nranks > 1 && spec.rank == native.host.start {
            native.reaper = native.host_reaper();
        }
        if let Err(e) = result {
            native.term(true);
            return Err(match e {
                Error::Timeout => Error::Environment(format!(
                    "only {} of {} ranks started within the init timeout",
                    h.arrived.load(SeqCst),
                    spec.nranks
                )),
                e => e,
            });
        }
        Ok(native)
    }

    /// The reaper of this host's part of a job that `mpirun`, `srun` or
    /// GPI-2's `gaspi_run` started: once every rank of the host has exited,
    /// however it ended (`mpirun` kills the others when one dies, before
    /// they clean up), it removes what the job left in `/dev/shm`. Forked
    /// by the host's first rank once every rank of the host has recorded
    /// itself; a rank that has exited already (or whose pid another
    /// process has taken since) is not waited for. `None` where it cannot
    /// be made, or where a rank that runs cannot be watched (no
    /// `pidfd_open` before Linux 5.3): the next such job on the machine
    /// sweeps what this one leaves ([`job::sweep_stale`]).
    fn host_reaper(&self) -> Option<crate::reaper::Reaper> {
        use rustix::process::{Pid, PidfdFlags, pidfd_open};
        let mut pidfds = Vec::new();
        for o in self.host.start..self.host.end {
            let slot = self.job.slot(o as usize);
            let pid = slot.pid.load(SeqCst);
            let fd = match pidfd_open(Pid::from_raw(pid as i32)?, PidfdFlags::empty()) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::SRCH) => continue, // exited
                Err(_) => return None,
            };
            // The pidfd names the process that held the pid when it was
            // opened: the rank's if the process holding it now (checked
            // after opening) started when the rank did.
            let started = job::process_info(pid).map(|(start, _)| start);
            if started == Some(slot.start_time.load(SeqCst)) {
                pidfds.push(fd);
            }
        }
        let ranks: Vec<_> = pidfds.iter().map(std::os::fd::AsFd::as_fd).collect();
        let prefix = job::prefix(self.job.token());
        crate::reaper::Reaper::spawn(&ranks, std::path::Path::new(shm::SHM_DIR), &[&prefix], &[])
            .ok()
    }

    /// Give the job its transport once it has joined (a transport whose
    /// start needs the job first).
    #[cfg(any(feature = "gpi2", feature = "mpi"))]
    pub(crate) fn set_transport(&mut self, transport: Box<dyn Transport>) {
        self.waiter = self.waiter.sleepless();
        self.transport = Some(transport);
    }

    /// The transport, if the job has one (for the engine's own files).
    fn transport(&self) -> Option<&dyn Transport> {
        self.transport.as_deref()
    }

    /// How many of the job's `nodes` nodes share a host's memory and caches
    /// with this rank's, as every rank of the job counts them: all of
    /// them on one machine (nodes emulated there), one where the job spans
    /// hosts (a host per node as a rule; a job-wide answer, which the
    /// sizes of hosts are not).
    pub(crate) fn nodes_per_host(&self, nodes: usize) -> usize {
        if self.across_hosts().is_some() {
            1
        } else {
            nodes.max(1)
        }
    }

    /// A collective's pipelining block: `requested` bytes, or if that is 0
    /// (the options' default), `default` raised to what the transport
    /// between hosts needs to amortise a notified write.
    pub(crate) fn block_bytes(&self, requested: usize, default: usize) -> usize {
        match requested {
            0 => default.max(self.across_hosts().map_or(0, |t| t.block_bytes_min())),
            b => b,
        }
    }

    /// The transport, if the job spans hosts: what this host cannot map.
    fn across_hosts(&self) -> Option<&dyn Transport> {
        self.transport().filter(|_| self.host.len() < self.nranks())
    }

    /// The transport, if `rank` is on another node and the job has one:
    /// then every operation with `rank` goes through it (also inside a
    /// host, where nodes are emulated), else through the mappings.
    fn to_node_of(&self, rank: Rank) -> Option<&dyn Transport> {
        self.transport()
            .filter(|_| self.node_of(rank) != self.node_of(self.rank))
    }

    /// The transport, if atomics must go through it: once a job with a
    /// transport has several nodes, every atomic does, on this node too
    /// (a transport's atomics need not exclude the CPU's).
    fn for_atomics(&self) -> Option<&dyn Transport> {
        self.transport().filter(|_| self.ppn < self.nranks())
    }

    /// Whether atomics on this node's words are the CPU's (no transport
    /// applies them, see [`Native::for_atomics`]).
    pub(crate) fn cpu_atomics(&self) -> bool {
        self.for_atomics().is_none()
    }

    /// The engine this rank runs on.
    pub(crate) fn kind(&self) -> Engine {
        self.transport().map_or(Engine::Native, |t| t.kind())
    }

    /// Whether every notification posted into a window counts once in its
    /// `posted` counter, from any rank (see
    /// [`Transport::counts_each_notification`]).
    pub(crate) fn counts_each_notification(&self) -> bool {
        self.transport()
            .is_none_or(|t| t.counts_each_notification())
    }

    /// The wait policy with the job's count of awake ranks, giving the
    /// transport progress as it looks ([`Transport::progress`]).
    pub(crate) fn patience(&self) -> Patience<'_> {
        self.waiter
            .with(&self.job.header().awake)
            .progressing(self.transport.as_ref().map(|t| t as &dyn wait::Progress))
    }

    /// Count a helper thread of this rank (a broadcaster) among the job's
    /// awake threads while the guard lives: each waiter uncounts itself
    /// while it sleeps, so every thread that waits must be counted, or the
    /// count would tell spinners there are free cores when there are not.
    /// The calling thread is marked as a helper, which never spins.
    pub(crate) fn count_thread(&self) -> AwakeThread<'_> {
        wait::set_helper(true);
        let awake = &self.job.header().awake;
        awake.fetch_add(1, SeqCst);
        AwakeThread(awake)
    }

    /// This rank.
    pub(crate) fn rank(&self) -> Rank {
        self.rank
    }

    pub(crate) fn nranks(&self) -> usize {
        self.job.nranks()
    }

    /// Ranks per node.
    pub(crate) fn ppn(&self) -> usize {
        self.ppn
    }

    /// The node of `rank`.
    pub(crate) fn node_of(&self, rank: Rank) -> usize {
        rank as usize / self.ppn
    }

    /// How many ranks run on this rank's host (share its memory and cores).
    pub(crate) fn host_ranks(&self) -> usize {
        self.host.len()
    }

    /// Whether this host's ranks, all awake, would be more than there are
    /// cores for spinning ([`Patience::shares_cores`]).
    pub(crate) fn host_shares_cores(&self) -> bool {
        let ranks = u32::try_from(self.host_ranks()).unwrap_or(u32::MAX);
        self.patience().shares_cores(ranks)
    }

    /// Bytes free now for shared-memory objects on this host (the file
    /// system of `/dev/shm`), where it says (`None`: unknown).
    pub(crate) fn shm_free(&self) -> Option<u64> {
        shm::free_bytes()
    }

    /// Whether no other rank of this machine may run on this rank's CPUs
    /// (as they were when it joined).
    pub(crate) fn own_cpus(&self) -> bool {
        self.own_cpus
    }

    /// Whether ranks `a` and `b` are both bound to the same single CPU (as
    /// they were when they joined: [`job::one_cpu_shared`]): what one
    /// writes, the other reads from the same cache. False unless both run
    /// on this rank's host, or where either may run on more than one CPU.
    pub(crate) fn one_cpu_together(&self, a: Rank, b: Rank) -> bool {
        let span = |r: Rank| self.job.slot(r as usize).cpus.load(SeqCst);
        let here = self.host.contains(&a) && self.host.contains(&b);
        here && job::one_cpu_shared(span(a), span(b))
    }

    /// Whether ranks `a` and `b` may run on a common CPU (by their CPUs
    /// as they were when they joined): both run on this rank's host and
    /// their CPUs overlap, or either's are unknown
    /// ([`job::cpus_of_its_own`]).
    pub(crate) fn may_share_cpu(&self, a: Rank, b: Rank) -> bool {
        let span = |r: Rank| self.job.slot(r as usize).cpus.load(SeqCst);
        let here = self.host.contains(&a) && self.host.contains(&b);
        here && !job::cpus_of_its_own(span(a), [span(b)])
    }

    /// The pid by which a kernel copy between processes reaches `rank`
    /// now: `None` unless it runs on this host and its process, checked
    /// against the job's record, has not exited ([`processes`]).
    pub(crate) fn live_pid(&self, rank: Rank) -> Option<u32> {
        self.processes.live_pid(&self.job, rank)
    }

    /// Whether `rank` runs on this rank's host (shares its memory).
    pub(crate) fn same_host(&self, rank: Rank) -> bool {
        self.host.contains(&rank)
    }

    /// Whether a group of `members` lives in the transport: it reaches
    /// beyond this rank's host (no shared memory reaches all of them).
    /// Whether the job spans hosts through a transport whose group
    /// collectives beat notified writes ([`Transport::host_collectives_fast`]).
    pub(crate) fn host_collectives_fast(&self) -> bool {
        self.across_hosts()
            .is_some_and(|t| t.host_collectives_fast())
    }

    /// Whether the job spans hosts through a transport whose one-sided
    /// calls are memory copies ([`Transport::one_sided_in_memory`]).
    pub(crate) fn host_one_sided_in_memory(&self) -> bool {
        self.across_hosts().is_some_and(|t| t.one_sided_in_memory())
    }

    pub(crate) fn spans_hosts(&self, members: &[Rank]) -> bool {
        self.across_hosts().is_some() && members.iter().any(|r| !self.host.contains(r))
    }

    pub(crate) fn token(&self) -> &str {
        self.job.token()
    }

    /// How the job's objects are named.
    pub(crate) fn names(&self) -> &Names {
        self.job.names()
    }

    /// Check a rank argument.
    pub(crate) fn check_rank(&self, rank: Rank) -> Result<()> {
        if (rank as usize) < self.nranks() {
            Ok(())
        } else {
            Err(Error::InvalidRank {
                rank,
                num_ranks: self.nranks() as Rank,
            })
        }
    }

    /// How `rank` stands (as this host's control block says; other hosts'
    /// failures are marked there too).
    pub(crate) fn health(&self, rank: Rank) -> Health {
        match self.job.slot(rank as usize).state.load(SeqCst) {
            job::FAILED => Health::Failed,
            job::TERMINATED => Health::Terminated,
            _ => Health::Running,
        }
    }

    /// Whether `rank` is neither failed nor terminated.
    pub(crate) fn running(&self, rank: Rank) -> bool {
        matches!(self.health(rank), Health::Running)
    }

    /// Fail if `rank` cannot take communication (failed or terminated).
    pub(crate) fn check_alive(&self, rank: Rank) -> Result<()> {
        match self.health(rank) {
            Health::Failed => Err(Error::RankFailed { rank }),
            Health::Terminated if rank != self.rank => Err(Error::RankTerminated { rank }),
            _ => Ok(()),
        }
    }

    /// End `rank` (`proc_kill`): on this host by SIGKILL to its process
    /// (through a pidfd, never to another process that took its pid),
    /// recorded first in the control block as asked for by this rank, so
    /// that the launcher does not count it as a failure of the job; then
    /// marked failed, so that every rank of the host sees it at once. On
    /// another host through the transport.
    pub(crate) fn kill(&self, rank: Rank, timeout: Timeout) -> Result<()> {
        self.check_rank(rank)?;
        if rank == self.rank {
            return Err(Error::InvalidArgument(format!(
                "proc_kill: rank {rank} is this rank; a rank ends itself by returning from main or std::process::exit"
            )));
        }
        self.check_alive(rank)?;
        let remote = match self.same_host(rank) {
            true => None,
            false => Some(self.transport().ok_or_else(|| {
                Error::Environment(format!(
                    "proc_kill: rank {rank} is on another host, and no transport reaches it"
                ))
            })?),
        };
        let (r, me) = (usize::from(rank), usize::from(self.rank));
        // Recorded in this host's block before the kill (a launcher of
        // several emulated hosts reads every host's).
        self.job.mark_killed(r, me);
        let killed = match remote {
            Some(t) => t.kill(rank, timeout).map(|()| true),
            None => Ok(self.processes.kill(&self.job, rank)),
        };
        match killed {
            Ok(true) => {
                // This host (and through its watch the others) at once;
                // another host's rank's own host learns it from its
                // launcher or its ranks' probes.
                self.job.mark_failed(r);
                Ok(())
            }
            Ok(false) => {
                // Not reached: it ended meanwhile (say so), or its process
                // cannot be named from here.
                self.job.unmark_killed(r, me);
                self.job.probe();
                self.check_alive(rank)?;
                Err(Error::InvalidArgument(format!(
                    "proc_kill: rank {rank}'s process cannot be reached from here (its pid is from another pid namespace, or the kernel lacks pidfd_open)"
                )))
            }
            Err(e) => {
                self.job.unmark_killed(r, me);
                Err(e)
            }
        }
    }

    /// Fail with a failed rank the user has not acknowledged, the first to
    /// fail if it is among them (the root cause). When no launcher watches
    /// the job, first look for dead processes (at most every 100 ms).
    pub(crate) fn faults(&self) -> Result<()> {
        if !self.launched {
            let now = self.started.elapsed().as_millis() as u64;
            let last = self.last_probe_ms.load(SeqCst);
            if now >= last + 100
                && self
                    .last_probe_ms
                    .compare_exchange(last, now, SeqCst, SeqCst)
                    .is_ok()
            {
                self.job.probe();
            }
        }
        let failed = self.job.header().failed.load(SeqCst) as u64;
        if failed <= self.acknowledged_count.load(SeqCst) {
            return Ok(());
        }
        let acked = lock(&self.acknowledged);
        // failed_ranks() lists the first failure first.
        match self
            .job
            .failed_ranks()
            .into_iter()
            .map(|r| r as Rank)
            .find(|r| !acked.contains(r))
        {
            Some(rank) => Err(Error::RankFailed { rank }),
            None => Ok(()),
        }
    }

    /// Fail if any of `members` has failed or terminated (a collective over
    /// them cannot complete). Failures are reported even if acknowledged,
    /// and before terminations: the first failed member is the root cause.
    pub(crate) fn member_faults(&self, members: &[Rank]) -> Result<()> {
        if !self.launched {
            self.faults().ok();
        }
        if self.job.header().failed.load(SeqCst) > 0 {
            let failed = self.job.failed_ranks();
            if let Some(&rank) = failed.iter().find(|&&r| members.contains(&(r as Rank))) {
                return Err(Error::RankFailed { rank: rank as Rank });
            }
        }
        members.iter().try_for_each(|&r| self.check_alive(r))
    }

    /// Whether the user acknowledged the failure of `rank`.
    pub(crate) fn acknowledged(&self, rank: Rank) -> bool {
        lock(&self.acknowledged).contains(&rank)
    }

    /// Accept the current failures: blocking calls stop reporting them.
    /// Returns every failed rank.
    pub(crate) fn acknowledge_failures(&self) -> Vec<Rank> {
        let failed: Vec<Rank> = self
            .job
            .failed_ranks()
            .into_iter()
            .map(|r| r as Rank)
            .collect();
        let mut acked = lock(&self.acknowledged);
        acked.clone_from(&failed);
        self.acknowledged_count.store(failed.len() as u64, SeqCst);
        failed
    }

    /// This rank's inbox.
    pub(crate) fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// Start the transport's work for other hosts: their passive messages
    /// to this rank, failures across hosts.
    pub(crate) fn enable_relay(&self) -> Result<()> {
        if let Some(t) = self.across_hosts() {
            let inbox = Inbox::open(self.names(), self.rank as usize)
                .map_err(|e| Error::system("mapping the passive inbox for the relay", e))?;
            let block = JobBlock::try_open(self.token())
                .ok()
                .flatten()
                .ok_or_else(|| Error::Environment("the job control block vanished".into()))?;
            let host = self.host.start as usize..self.host.end as usize;
            t.relay_enable(inbox, block, host, !self.launched);
        }
        Ok(())
    }

    /// Leave the job: record the new state (failed if the process is going
    /// down abnormally), then delete this rank's segments and inbox (so a
    /// peer that finds them gone learns why: [`Error::RankTerminated`] or
    /// [`Error::RankFailed`]), and, if no launcher will, remove the job's
    /// objects when this is the last rank.
    pub(crate) fn term(&self, failed: bool) {
        let h = self.job.header();
        h.awake.fetch_sub(1, SeqCst);
        if failed {
            self.job.mark_failed(self.rank as usize);
        } else if self
            .job
            .slot(self.rank as usize)
            .state
            .compare_exchange(job::RUNNING, job::TERMINATED, SeqCst, SeqCst)
            .is_ok()
        {
            h.terminated.fetch_add(1, SeqCst);
            h.ww.advance();
            if let Some(t) = self.transport() {
                t.depart();
            }
        }
        for s in self.segment_ids() {
            let _ = self.remove_segment(s);
        }
        Inbox::unlink(self.names(), self.rank as usize);
        if let Some(t) = self.transport() {
            if t.term(failed, h.failed.load(SeqCst) > 0) {
                // The transport stays up and a rank of another host may
                // still write into the segments deleted above (GPI-2's
                // device writes unchecked): their memory stays mapped
                // until the process exits, when the kernel frees it (the
                // names are gone already).
                std::mem::forget(std::mem::take(&mut *lock(&self.tables.retired)));
            }
        }
        if !self.launched {
            // This host's ranks only: other hosts' failures are marked here
            // too (the transport's failure watch).
            let done = self.host.clone().all(|r| {
                let state = self.job.slot(r as usize).state.load(SeqCst);
                state == job::TERMINATED || state == job::FAILED
            });
            if done {
                job::sweep(self.token());
            }
        }
    }
}
