//! The native engine: ranks on one machine as processes sharing memory.
//!
//! Every rank maps the segments of the others. A write is a copy into the
//! target's segment object, a notification a `SeqCst` store into its table
//! after the data, a read a copy out of it, an atomic a hardware atomic on
//! the target word. Nothing goes through a server or another rank.
//!
//! The public API (`Context` and its modules) does argument checking and
//! GASPI bookkeeping (queues, groups) and asks this engine for two things:
//! the mapped segment object of any (rank, segment), and the wake-up,
//! failure and inbox machinery. An engine for ranks on other machines would
//! answer the first question for remote ranks with a transport instead of a
//! mapping; the public API does not change.
//!
//! The crate's `unsafe` code for memory lives in this module's children:
//! [`shm`] (mappings), [`futex`], [`epoch`] (deferred reclamation), and the
//! copy helpers of [`segment`], [`inbox`] and [`group`], each next to the
//! bounds it relies on. The only other `unsafe` blocks are the launcher's
//! system calls (`launcher/sys.rs`) and the public `unsafe fn`s of segment
//! binding and slice views, which forward their callers' promises.

pub(crate) mod epoch;
pub(crate) mod futex;
#[cfg(feature = "gpi2")]
pub(crate) mod gpi2;
pub(crate) mod group;
pub(crate) mod inbox;
pub(crate) mod job;
pub(crate) mod notify;
pub(crate) mod remote;
pub(crate) mod segment;
pub(crate) mod shm;
pub(crate) mod wait;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, SegmentId};
use epoch::{Epochs, Pin, Published};
use inbox::Inbox;
use job::{JobBlock, ObjectId, ObjectKind};
use remote::Gpi2;
use segment::{SegmentKey, SegmentObject};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use wait::{Patience, Waiter};

/// Who this process is in which job, as the launcher (or the caller) says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobSpec {
    pub(crate) token: String,
    pub(crate) rank: Rank,
    pub(crate) nranks: usize,
    pub(crate) ppn: usize,
    /// A launcher supervises the ranks (marks failures, cleans up).
    pub(crate) launched: bool,
    /// CPUs the job runs on.
    pub(crate) cores: usize,
    /// Ranks that join this machine's control block: all of them, except
    /// under GPI-2's own launcher, where each host has a block of its own.
    pub(crate) attach: usize,
    /// The first of the `attach` ranks (this host's first rank).
    pub(crate) host_first: usize,
}

/// An object of another rank (a segment, or a window of another node) as
/// this rank mapped it.
#[derive(Debug)]
struct PeerSegment {
    obj: SegmentObject,
    registered: AtomicBool,
}

type PeerRow = Box<[Published<PeerSegment>]>;

/// Why a lookup under a pin did not produce a segment.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// A real error for the caller.
    Fail(Error),
    /// This rank's mapping of the peer's segment is missing or stale:
    /// remap it (unpinned) and run the operation again.
    Remap { rank: Rank, segment: SegmentId },
}

impl From<Error> for Lookup {
    fn from(e: Error) -> Lookup {
        Lookup::Fail(e)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps a helper thread counted as awake (see [`Native::count_thread`]).
pub(crate) struct AwakeThread<'a>(&'a std::sync::atomic::AtomicU32);

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

/// This rank's attachment to a job.
#[derive(Debug)]
pub(crate) struct Native {
    pub(crate) job: JobBlock,
    pub(crate) rank: Rank,
    waiter: Waiter,
    launched: bool,
    /// Readers of the two tables below pin these for one operation.
    epochs: Epochs,
    /// This rank's segments; creation and deletion hold `local_writer`.
    local: Box<[Published<SegmentObject>]>,
    local_writer: Mutex<()>,
    /// Objects of other ranks as mapped here, by owner and segment id (a
    /// node's window is mapped once, whichever of its ranks is addressed);
    /// remaps hold `peer_writer`.
    peers: Box<[OnceLock<PeerRow>]>,
    peer_writer: Mutex<()>,
    inbox: Inbox,
    /// The ranks of this host (they share memory with this rank); the
    /// others are reached through the transport only.
    host: std::ops::Range<Rank>,
    /// Deleted segments that ranks of other hosts may still write to.
    retired: Mutex<Vec<Arc<SegmentObject>>>,
    peer_inboxes: Box<[OnceLock<Inbox>]>,
    /// Failed ranks the user has acknowledged, and how many.
    acknowledged: Mutex<Vec<Rank>>,
    acknowledged_count: AtomicU64,
    /// Numbers this rank's next segment object.
    next_object: AtomicU64,
    started: Instant,
    last_probe_ms: AtomicU64,
    /// The transport to other nodes (GPI-2 engine), if any.
    pub(crate) remote: Option<Gpi2>,
}

impl Native {
    /// Join the job described by `spec`: map its control block (creating it
    /// if no launcher did), record this process, create the inbox and wait
    /// until every rank has done the same.
    pub(crate) fn attach(spec: &JobSpec, config: &Config, remote: Option<Gpi2>) -> Result<Native> {
        let deadline = config.init_timeout.deadline();
        let job = open_job(spec, deadline)?;
        if job.nranks() != spec.nranks {
            return Err(Error::Environment(format!(
                "GASPI_NRANKS is {} but job {} has {} ranks",
                spec.nranks,
                spec.token,
                job.nranks()
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
        slot.pid.store(me, SeqCst);
        slot.start_time
            .store(job::process_info(me).map_or(0, |(s, _)| s), SeqCst);

        let inbox = Inbox::create(
            &spec.token,
            r,
            config.passive_queue_size_max as usize,
            config.passive_transfer_size_max,
        )
        .map_err(|e| {
            job.mark_failed(r); // nobody may wait for a rank that cannot start
            Error::system(format!("creating the passive inbox of rank {r}"), e)
        })?;

        let native = Native {
            waiter: Waiter::new(config.wait_mode, spec.cores),
            rank: spec.rank,
            launched: spec.launched,
            epochs: Epochs::default(),
            local: (0..job::SEGMENT_SLOTS)
                .map(|_| Published::default())
                .collect(),
            local_writer: Mutex::new(()),
            peers: (0..spec.nranks).map(|_| OnceLock::new()).collect(),
            peer_writer: Mutex::new(()),
            inbox,
            host: spec.host_first as Rank..(spec.host_first + spec.attach) as Rank,
            retired: Mutex::new(Vec::new()),
            peer_inboxes: (0..spec.nranks).map(|_| OnceLock::new()).collect(),
            acknowledged: Mutex::new(Vec::new()),
            acknowledged_count: AtomicU64::new(0),
            next_object: AtomicU64::new(1),
            started: Instant::now(),
            last_probe_ms: AtomicU64::new(0),
            job,
            remote,
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

    /// The wait policy with the job's count of awake ranks.
    pub(crate) fn patience(&self) -> Patience<'_> {
        self.waiter.with(&self.job.header().awake)
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

    pub(crate) fn nranks(&self) -> usize {
        self.job.nranks()
    }

    /// The transport, if the job spans several hosts: groups with members
    /// on other hosts then live in GPI-2 (no shared memory reaches them).
    pub(crate) fn cross_host(&self) -> Option<&Gpi2> {
        self.remote
            .as_ref()
            .filter(|_| self.host.len() < self.nranks())
    }

    /// How many ranks run on this rank's host (share its memory and cores).
    pub(crate) fn host_ranks(&self) -> usize {
        self.host.len()
    }

    /// Whether `rank` runs on this rank's host (shares its memory).
    pub(crate) fn same_host(&self, rank: Rank) -> bool {
        self.host.contains(&rank)
    }

    /// Whether `members` reach beyond this rank's host.
    pub(crate) fn spans_hosts(&self, members: &[Rank]) -> bool {
        members.iter().any(|r| !self.host.contains(r))
    }

    pub(crate) fn token(&self) -> &str {
        self.job.token()
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

    /// Fail if `rank` cannot take communication (failed or terminated).
    pub(crate) fn check_alive(&self, rank: Rank) -> Result<()> {
        match self.job.slot(rank as usize).state.load(SeqCst) {
            job::FAILED => Err(Error::RankFailed { rank }),
            job::TERMINATED if rank != self.rank => Err(Error::RankTerminated { rank }),
            _ => Ok(()),
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

    /// Accept the current failures: blocking calls stop reporting them.
    /// Returns every failed rank.
    /// Whether the user acknowledged the failure of `rank`.
    pub(crate) fn acknowledged(&self, rank: Rank) -> bool {
        lock(&self.acknowledged).contains(&rank)
    }

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

    /// Run `op` pinned, so that it can borrow segment objects from the
    /// tables without reference counting. If a lookup asks for a remap,
    /// remap unpinned and run `op` again: `op` must not have done anything
    /// visible before its lookups succeeded.
    #[inline]
    pub(crate) fn run<R>(
        &self,
        mut op: impl FnMut(&Pin<'_>) -> std::result::Result<R, Lookup>,
    ) -> Result<R> {
        loop {
            let outcome = {
                let pin = self.epochs.pin();
                op(&pin)
            };
            match outcome {
                Ok(r) => return Ok(r),
                Err(Lookup::Fail(e)) => return Err(e),
                Err(Lookup::Remap { rank, segment }) => self.remap(rank, segment)?,
            }
        }
    }

    /// This rank's segment `seg`, borrowed for the pin.
    #[inline]
    pub(crate) fn local<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        seg: SegmentId,
    ) -> Result<&'p SegmentObject> {
        self.local[seg as usize]
            .get(pin)
            .ok_or_else(|| Error::SegmentNotFound {
                rank: self.rank,
                segment: seg,
            })
    }

    /// This rank's segment `seg`, to keep beyond a pin (views, blocking waits).
    pub(crate) fn local_arc(&self, seg: SegmentId) -> Result<Arc<SegmentObject>> {
        let pin = self.epochs.pin();
        self.local[seg as usize]
            .get_arc(&pin)
            .ok_or_else(|| Error::SegmentNotFound {
                rank: self.rank,
                segment: seg,
            })
    }

    /// The object backing segment `seg` of `rank`, as its directory says.
    pub(crate) fn entry(&self, rank: Rank, seg: SegmentId) -> Option<ObjectId> {
        let word = self.job.slot(rank as usize).segments[seg as usize]
            .object
            .load(SeqCst);
        ObjectId::unpack(word)
    }

    /// Segment `seg` of `rank` (this rank included), checked for existence,
    /// registration with this rank, and the owner's health.
    #[inline]
    pub(crate) fn target<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        rank: Rank,
        seg: SegmentId,
    ) -> std::result::Result<&'p SegmentObject, Lookup> {
        if rank == self.rank {
            return Ok(self.local(pin, seg)?);
        }
        self.check_rank(rank)?;
        self.check_alive(rank)?;
        let Some(id) = self.entry(rank, seg) else {
            // Deleted: drop our mapping of it (remap does, then reports it
            // gone), so that its owner's memory can be freed.
            let stale = self.peer_row(rank)[seg as usize]
                .get(pin)
                .is_some_and(|p| p.obj.id().owner == rank);
            return Err(if stale {
                Lookup::Remap { rank, segment: seg }
            } else {
                Error::SegmentNotFound { rank, segment: seg }.into()
            });
        };
        // A window of this rank's node is this rank's segment too.
        if let Some(own) = self.local[seg as usize].get(pin).filter(|o| o.id() == id) {
            return Ok(own);
        }
        match self.peer_row(id.owner)[seg as usize].get(pin) {
            Some(p) if p.obj.id() == id => {
                if !p.registered.load(SeqCst) {
                    if !p.obj.is_registered(self.rank) {
                        return Err(Error::SegmentNotRegistered { rank, segment: seg }.into());
                    }
                    p.registered.store(true, SeqCst);
                }
                Ok(&p.obj)
            }
            _ => Err(Lookup::Remap { rank, segment: seg }),
        }
    }

    fn peer_row(&self, owner: Rank) -> &PeerRow {
        self.peers[owner as usize].get_or_init(|| {
            (0..job::SEGMENT_SLOTS)
                .map(|_| Published::default())
                .collect()
        })
    }

    /// Map the object now backing segment `seg` of `rank`, replacing a
    /// stale mapping. Must not be called while pinned.
    fn remap(&self, rank: Rank, seg: SegmentId) -> Result<()> {
        let _w = lock(&self.peer_writer);
        let Some(id) = self.entry(rank, seg) else {
            let cell = &self.peer_row(rank)[seg as usize];
            let stale = cell
                .get(&self.epochs.pin())
                .is_some_and(|p| p.obj.id().owner == rank);
            if stale {
                cell.replace(None, &self.epochs);
            }
            return Err(Error::SegmentNotFound { rank, segment: seg });
        };
        let cell = &self.peer_row(id.owner)[seg as usize];
        if cell
            .get(&self.epochs.pin())
            .is_some_and(|p| p.obj.id() == id)
        {
            return Ok(()); // another thread did it
        }
        let key = SegmentKey {
            token: self.token(),
            segment: seg,
            id,
        };
        let obj = match SegmentObject::open(&key) {
            Ok(o) => o,
            // Deleted between our look at the directory and the open.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::SegmentNotFound { rank, segment: seg });
            }
            Err(e) => {
                return Err(Error::system(
                    format!("mapping segment {seg} of rank {rank}"),
                    e,
                ));
            }
        };
        let fresh = PeerSegment {
            obj,
            registered: AtomicBool::new(false),
        };
        cell.replace(Some(Arc::new(fresh)), &self.epochs);
        Ok(())
    }

    /// Size of segment `seg` of `rank` as its directory says.
    pub(crate) fn segment_size(&self, rank: Rank, seg: SegmentId) -> Result<usize> {
        self.check_rank(rank)?;
        if self.entry(rank, seg).is_none() {
            return Err(Error::SegmentNotFound { rank, segment: seg });
        }
        let entry = &self.job.slot(rank as usize).segments[seg as usize];
        Ok(entry.size.load(SeqCst) as usize)
    }

    /// Make `seg` a new segment of this rank from the object `make` creates
    /// under the key it is given.
    pub(crate) fn add_segment(
        &self,
        seg: SegmentId,
        make: impl FnOnce(&SegmentKey) -> io::Result<SegmentObject>,
    ) -> Result<()> {
        let _w = lock(&self.local_writer);
        self.check_free(seg)?;
        let key = SegmentKey {
            token: self.token(),
            segment: seg,
            id: ObjectId {
                kind: ObjectKind::Segment,
                owner: self.rank,
                number: self.next_object.fetch_add(1, SeqCst),
            },
        };
        let obj = make(&key).map_err(|e| {
            Error::system(format!("creating the shared memory of segment {seg}"), e)
        })?;
        obj.register(self.rank);
        let obj = self.install(seg, obj);
        self.bind_remote(seg, &obj, false)
    }

    /// Make `obj` (a window of this rank's node) this rank's segment `seg`.
    pub(crate) fn add_window(&self, seg: SegmentId, obj: SegmentObject) -> Result<()> {
        let _w = lock(&self.local_writer);
        self.check_free(seg)?;
        let obj = self.install(seg, obj);
        self.bind_remote(seg, &obj, true)
    }

    /// Bind a new segment or window as the transport's segment too; undo
    /// the segment if that fails.
    fn bind_remote(&self, seg: SegmentId, obj: &Arc<SegmentObject>, window: bool) -> Result<()> {
        let Some(g) = &self.remote else {
            return Ok(());
        };
        g.bind(seg, obj, window).inspect_err(|_| {
            let entry = &self.job.slot(self.rank as usize).segments[seg as usize];
            entry.object.store(0, SeqCst);
            if let Some(o) = self.local[seg as usize].replace(None, &self.epochs) {
                if o.id().owner == self.rank && !window {
                    o.unlink();
                }
            }
        })
    }

    fn check_free(&self, seg: SegmentId) -> Result<()> {
        if self.local[seg as usize].get(&self.epochs.pin()).is_some() {
            return Err(Error::SegmentExists { segment: seg });
        }
        Ok(())
    }

    /// Publish `obj` as segment `seg`: in the local table, then in the
    /// directory where peers find it. Callers hold `local_writer`.
    fn install(&self, seg: SegmentId, obj: SegmentObject) -> Arc<SegmentObject> {
        let entry = &self.job.slot(self.rank as usize).segments[seg as usize];
        let id = obj.id();
        entry.size.store(obj.size() as u64, SeqCst);
        let obj = Arc::new(obj);
        self.local[seg as usize].replace(Some(obj.clone()), &self.epochs);
        entry.object.store(id.pack(), SeqCst);
        obj
    }

    /// Delete segment `seg` of this rank (for a window, this rank's use of
    /// it; its creator also removes its name).
    pub(crate) fn remove_segment(&self, seg: SegmentId) -> Result<()> {
        let _w = lock(&self.local_writer);
        let entry = &self.job.slot(self.rank as usize).segments[seg as usize];
        if entry.object.swap(0, SeqCst) == 0 {
            return Err(Error::SegmentNotFound {
                rank: self.rank,
                segment: seg,
            });
        }
        if let Some(g) = &self.remote {
            g.unbind(seg);
        }
        if let Some(obj) = self.local[seg as usize].replace(None, &self.epochs) {
            if obj.id().owner == self.rank {
                obj.unlink();
            }
            // A rank of another host cannot see the deletion and may still
            // write through GPI-2 (its device writes straight into this
            // memory): keep the memory until this rank terminates.
            if self.remote.is_some()
                && (0..self.nranks() as Rank).any(|r| !self.same_host(r) && obj.is_registered(r))
            {
                lock(&self.retired).push(obj);
            }
        }
        Ok(())
    }

    /// Open the window `key` that this node's leader creates, waiting until
    /// `deadline` for it to appear; fails if a rank of `node` dies first.
    pub(crate) fn open_window(
        &self,
        key: &SegmentKey,
        node: &[Rank],
        deadline: Deadline,
    ) -> Result<SegmentObject> {
        poll_with_backoff(deadline, || {
            self.member_faults(node)?;
            match SegmentObject::open(key) {
                Ok(o) => Ok(Some(o)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::system(
                    format!("opening the window of segment {}", key.segment),
                    e,
                )),
            }
        })
    }

    /// Move notifications `ids` of segment `seg` (object `obj`) that came
    /// from other nodes through the transport into `obj`'s table; nothing
    /// on the native engine.
    #[inline]
    pub(crate) fn pump(&self, seg: SegmentId, obj: &SegmentObject, ids: std::ops::Range<u32>) {
        if let Some(g) = &self.remote {
            g.pump(seg, obj, ids);
        }
    }

    /// Ids of this rank's segments, ascending.
    pub(crate) fn segment_ids(&self) -> Vec<SegmentId> {
        let pin = self.epochs.pin();
        (0..job::SEGMENT_SLOTS)
            .filter(|&s| self.local[s].get(&pin).is_some())
            .map(|s| s as SegmentId)
            .collect()
    }

    /// This rank's inbox.
    pub(crate) fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// Start the GPI-2 relay's work for other hosts: their passive
    /// messages to this rank, failures across hosts.
    pub(crate) fn enable_remote_relay(&self) -> Result<()> {
        if let Some(g) = self.cross_host() {
            let inbox = Inbox::open(self.token(), self.rank as usize)
                .map_err(|e| Error::system("mapping the passive inbox for the relay", e))?;
            let block = JobBlock::try_open(self.token())
                .ok()
                .flatten()
                .ok_or_else(|| Error::Environment("the job control block vanished".into()))?;
            let host = self.host.start as usize..self.host.end as usize;
            g.relay_enable(inbox, block, host, !self.launched);
        }
        Ok(())
    }

    /// The inbox of `rank`, a rank of this host, mapped on first use.
    pub(crate) fn peer_inbox(&self, rank: Rank) -> Result<&Inbox> {
        debug_assert!(self.same_host(rank), "the inbox of another host's rank");
        if rank == self.rank {
            return Ok(&self.inbox);
        }
        let cell = &self.peer_inboxes[rank as usize];
        if let Some(i) = cell.get() {
            return Ok(i);
        }
        let inbox = Inbox::open(self.token(), rank as usize)
            .map_err(|e| Error::system(format!("mapping the passive inbox of rank {rank}"), e))?;
        let _ = cell.set(inbox);
        Ok(cell.get().expect("set above"))
    }

    /// Leave the job: delete this rank's segments and inbox, record the new
    /// state (failed if the process is going down abnormally), and, if no
    /// launcher will, remove the job's objects when this is the last rank.
    pub(crate) fn term(&self, failed: bool) {
        for s in self.segment_ids() {
            let _ = self.remove_segment(s);
        }
        Inbox::unlink(self.token(), self.rank as usize);
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
        }
        if let Some(g) = &self.remote {
            g.term(failed, h.failed.load(SeqCst) > 0);
        }
        if !self.launched {
            // This host's ranks only: other hosts' failures are marked here
            // too (the GPI-2 engine's failure watch).
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

/// Poll `step` with growing naps (5 us to 2 ms) until it yields a value,
/// fails, or `deadline` passes ([`Error::Timeout`]). For waiting on objects
/// that another process creates, where nothing can wake us.
pub(crate) fn poll_with_backoff<T>(
    deadline: Deadline,
    step: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    poll_with_naps(deadline, Duration::from_millis(2), step)
}

/// [`poll_with_backoff`] with naps of at most `longest`.
pub(crate) fn poll_with_naps<T>(
    deadline: Deadline,
    longest: Duration,
    mut step: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let mut nap = Duration::from_micros(5);
    loop {
        if let Some(v) = step()? {
            return Ok(v);
        }
        match deadline.remaining() {
            Some(left) if left.is_zero() => return Err(Error::Timeout),
            Some(left) => std::thread::sleep(nap.min(left)),
            None => std::thread::sleep(nap),
        }
        nap = (nap * 2).min(longest);
    }
}

fn open_job(spec: &JobSpec, deadline: Deadline) -> Result<JobBlock> {
    let token = &spec.token;
    if !spec.launched {
        // No launcher made the block: the first rank to get here does.
        match JobBlock::create(token, spec.nranks, spec.ppn, None) {
            Ok(b) => return Ok(b),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::system("creating the job control block", e)),
        }
    }
    poll_with_backoff(deadline, || {
        JobBlock::try_open(token).map_err(|e| Error::system(format!("opening job {token}"), e))
    })
    .map_err(|e| match e {
        Error::Timeout => Error::Environment(format!(
            "job {token} does not exist (was its launcher stopped?)"
        )),
        e => e,
    })
}
