//! The MPI transport (feature `mpi`): operations whose target is on
//! another host go through MPI-3 one-sided communication; everything
//! inside a host stays on the engine's shared memory. This is the design
//! of DART-MPI (Zhou, Idrees, Gracia, "Leveraging MPI-3 Shared-Memory
//! Extensions for Efficient PGAS Runtime Systems", Euro-Par 2015):
//! load/store inside a node, MPI RMA between nodes, a translation from
//! segment ids to window addresses.
//!
//! # Segments
//! One dynamic window over all ranks (`MPI_Win_create_dynamic`, in one
//! passive epoch, `MPI_Win_lock_all`, for the job's life); each segment
//! and node-shared window this rank binds is attached to it, with a
//! *landing* for notifications, and registering it with a rank writes its
//! description into that rank's directory (`segments.rs`). A window is
//! attached by every rank of its node on the one shared mapping: a write
//! addressed to any of them lands once, in the node's memory.
//!
//! # Notifications across hosts
//! `MPI_Put` of the data, `MPI_Win_flush` (complete at the target), then
//! the value into the target's landing and a summary bit, flushed
//! (`calls.rs`). The target moves landed values into the table its
//! node's waiters watch — the rank itself for the ids it waits for, its
//! relay thread for windows and while a waiter sleeps (`landing.rs`,
//! `relay.rs`) — which wakes them. Two notifications with the same id that
//! land between two moves count once in a window's `posted` counter.
//!
//! # Progress
//! Passive-target operations to a dynamic window need the target to call
//! into MPI on transports without hardware RMA (MPICH 4 over UCX here: a
//! put to a target that never calls MPI does not complete). The relay
//! thread gives that progress (`MPI_Iprobe`), every 20 us while anything
//! moves, someone sleeps or a flush of its process waits for another rank
//! (which may itself wait in a flush to this one), then less often, down
//! to every 2 ms (`Config::relay_nap`); every wait of the rank gives it as
//! it spins or yields (`Transport::progress`), a waiter that polls at every
//! look. While the rank polls, the relay leaves its rounds out, up to 1 ms
//! apart (`relay.rs`): `mpirun` binds the relay to its rank's core, so each
//! round is time the rank does not run. MPI runs with `MPI_THREAD_MULTIPLE`.
//!
//! # Atomics, groups, passive messages
//! Atomics are `MPI_Fetch_and_op` / `MPI_Compare_and_swap`; once a job has
//! several nodes, every atomic goes through MPI (MPI's atomics need not
//! exclude the CPU's), and the waiters of the target's node are woken by a
//! doorbell. Groups spanning hosts run their barrier and allreduce over
//! nonblocking point-to-point messages that survive a timeout
//! (`groups.rs`); passive messages are MPI messages acknowledged once in
//! the receiver's inbox (`passive.rs`).
//!
//! # Failures
//! MPI's default is to abort the job when a rank fails, and the launchers
//! that start MPI jobs (`mpirun`, `srun`) end every rank when one dies: a
//! failed rank is reported by the launcher (ours names it), not as
//! `RankFailed` to the survivors as on the native and GPI-2 engines. A
//! clean leave is announced to the other hosts, so operations on a rank
//! that terminated fail at once with `RankTerminated`.

mod calls;
mod ffi;
mod groups;
mod intake;
mod keyed;
mod landing;
mod passive;
mod relay;
mod segments;
pub(crate) mod start;
mod unflushed;
mod watch;

use crate::config::Engine;
use crate::engine::inbox::Inbox;
use crate::engine::job::{self, JobBlock};
use crate::engine::lent::Lent;
use crate::engine::segment::{SegmentObject, Span};
use crate::engine::transport::{AtomicOp, Combine, Contribution, Key, Post, Transfer, Transport};
use crate::engine::wait::{Patience, lock};
use crate::error::{Error, Result};
use crate::types::{Deadline, NotificationId, QueueId, Rank, SegmentId, Timeout};
use relay::{Bound, Shared};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a leaving rank waits for the others at its last barrier.
const TERM_BARRIER: Duration = Duration::from_secs(30);

/// This rank's MPI side.
pub(crate) struct Mpi {
    rank: usize,
    nranks: usize,
    /// The ranks of this rank's host.
    host: Range<usize>,
    /// Hosts emulated on one machine (`GASPI_HOST_RANKS`): MPI moves
    /// their bytes through its shared memory.
    emulated: bool,
    win: ffi::Win,
    /// Collectives of groups spanning hosts.
    coll: ffi::Comm,
    /// Where each rank's directory is in the window.
    directories: Vec<u64>,
    /// This rank's directory (attached to the window).
    directory: &'static [AtomicU64],
    shared: Arc<Shared>,
    relay: Mutex<Option<JoinHandle<()>>>,
    terminated: AtomicBool,
    /// Per queue, the ranks written to or read from since its last wait.
    unflushed: Mutex<unflushed::Unflushed>,
    twins: Mutex<BTreeMap<u8, groups::Twin>>,
    outbox: Mutex<intake::Outbox>,
    keyed: Mutex<keyed::Keyed>,
    /// Deleted segments kept attached until no put can reach them.
    graves: Mutex<segments::Graves>,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.rank)
            .field("nranks", &self.nranks)
            .finish_non_exhaustive()
    }
}

impl Mpi {
    /// Leave: complete every queue, meet every rank at a last barrier (up
    /// to [`TERM_BARRIER`], skipped after a failure), stop the relay, and
    /// if all met, free the window and communicators (MPI is finalised at
    /// the process's exit). Otherwise everything stays up until the
    /// process exits (a peer may still reach this process).
    ///
    /// Returns whether MPI stays up (see [`Transport::term`]).
    fn leave(&self, failed: bool, peers_failed: bool) -> bool {
        if self.terminated.swap(true, SeqCst) {
            return false;
        }
        self.shared.leaving.store(true, SeqCst);
        let mut met = false;
        if !failed && !peers_failed {
            let queues = lock(&self.unflushed).queues();
            for q in queues {
                let _ = self.wait(q, Timeout::Block);
            }
            if let Ok(mut b) = ffi::ibarrier(self.coll) {
                let until = Instant::now() + TERM_BARRIER;
                // The relay keeps serving the others meanwhile.
                while Instant::now() < until {
                    if b.test().unwrap_or(false) {
                        met = true;
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
                // Unmet, the barrier is left to MPI as it drops.
            }
        }
        self.shared.stop.store(true, SeqCst);
        if let Some(h) = lock(&self.relay).take() {
            let _ = h.join();
        }
        if !met {
            // Others may still write here: keep what they write to, and
            // leave MPI up until the process exits.
            std::mem::forget(std::mem::take(&mut *lock(&self.shared.bound)));
            std::mem::forget(std::mem::take(&mut *lock(&self.graves)));
            ffi::may_finalize(false);
            return true;
        }
        // Departures sent before the barrier may still wait in MPI.
        for tag in [intake::TAG_DEPART, watch::TAG_FAILED, watch::TAG_PING] {
            while let Some((_, len, m)) = ffi::improbe(self.shared.comm, None, tag) {
                let _ = ffi::mrecv(m, &mut vec![0u8; len]);
            }
        }
        intake::reap(&mut lock(&self.outbox).sends);
        self.keyed_leave();
        lock(&self.shared.bound).clear();
        // The window goes with everything still attached to it.
        *lock(&self.graves) = segments::Graves::default();
        for mut t in std::mem::take(&mut *lock(&self.twins)).into_values() {
            t.abandon();
        }
        ffi::detach(self.win, self.directory.as_ptr() as *mut u8);
        ffi::window_free(self.win);
        ffi::comm_free(self.coll);
        ffi::comm_free(self.shared.comm);
        // MPI itself is finalised when the process exits (a process may
        // make another context; MPI starts only once per process).
        ffi::may_finalize(true);
        false
    }
}

impl Transport for Mpi {
    fn kind(&self) -> Engine {
        Engine::Mpi
    }

    fn counts_each_notification(&self) -> bool {
        false
    }

    fn bind(&self, segment: SegmentId, obj: &Arc<SegmentObject>, window: bool) -> Result<()> {
        Mpi::bind(self, segment, obj, window)
    }

    fn unbind(&self, segment: SegmentId) {
        Mpi::unbind(self, segment)
    }

    fn writes_after_delete(&self) -> bool {
        // `unbind` clears the registrations first (see `segments.rs`).
        false
    }

    fn block_bytes_min(&self) -> usize {
        // A notified write is two flushes (round trips through the target's
        // progress); measured with MPICH 4.0 over UCX, 2 emulated hosts:
        // allgatherv of 1 MiB per rank 425 us with 64 KiB blocks, 198-205 us
        // with 1 MiB ones (MPI_Allgatherv 226 us); the ring allreduce of
        // 1 MiB 340-388 us with 128 KiB blocks, 196-207 us with 1 MiB ones.
        1 << 20
    }

    fn one_sided_in_memory(&self) -> bool {
        self.emulated
    }

    fn host_collectives_fast(&self) -> bool {
        // Measured with MPICH 4.0 over UCX, 2 emulated hosts: a barrier
        // of MPI messages 0.8 us, the node-aware one of notified writes
        // 4.3-6.5 us.
        true
    }

    fn register(&self, segment: SegmentId, rank: Rank, timeout: Timeout) -> Result<()> {
        Mpi::register(self, segment, rank, timeout)
    }

    fn remote_size(&self, rank: Rank, segment: SegmentId) -> Option<usize> {
        Mpi::remote_size(self, rank, segment)
    }

    fn post(&self, rank: Rank, list: &[Transfer], post: Post, queue: QueueId) -> Result<()> {
        Mpi::post(self, rank, list, post, queue)
    }

    fn puts_from_memory(&self) -> bool {
        true
    }

    fn put_from(&self, rank: Rank, segment: SegmentId, pieces: &[(&[u8], usize)]) -> Result<()> {
        Mpi::put_from(self, rank, segment, pieces)
    }

    fn ring(&self, rank: Rank, segment: SegmentId, queue: QueueId) -> Result<()> {
        Mpi::ring(self, rank, segment, queue)
    }

    fn atomic(
        &self,
        rank: Rank,
        segment: SegmentId,
        offset: usize,
        op: AtomicOp,
        _timeout: Timeout,
    ) -> Result<u64> {
        Mpi::atomic(self, rank, segment, offset, op)
    }

    fn wait(&self, queue: QueueId, timeout: Timeout, _alive: &dyn Fn(Rank) -> bool) -> Result<()> {
        Mpi::wait(self, queue, timeout)
    }

    fn flush(
        &self,
        queue: QueueId,
        _remote: (SegmentId, u64),
        timeout: Timeout,
        _alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        // The wait is a flush already: complete at the targets.
        Mpi::wait(self, queue, timeout)
    }

    fn flush_written(
        &self,
        _remote: (SegmentId, u64),
        _timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        // Writes not yet waited for too: see `barrier_passed`.
        self.flush_all(alive)
    }

    fn barrier_passed(&self, members: &[Rank]) {
        self.release_buried(members)
    }

    fn purge(&self, queue: QueueId, timeout: Timeout, _alive: &dyn Fn(Rank) -> bool) -> Result<()> {
        Mpi::purge(self, queue, timeout)
    }

    fn pump(&self, segment: SegmentId, obj: &SegmentObject, ids: Range<NotificationId>) {
        self.shared.pumped.store(self.shared.since(), SeqCst);
        ffi::progress(self.shared.comm);
        ffi::sync(self.win);
        if let Some(b) = lock(&self.shared.bound).get(&segment) {
            b.landing.pump(obj, ids);
        }
    }

    fn progress(&self) {
        ffi::progress(self.shared.comm);
    }

    fn corrupt_ranks(&self) -> Vec<Rank> {
        Vec::new()
    }

    fn passive_send(
        &self,
        rank: Rank,
        msg: Span<'_>,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
        patience: &Patience<'_>,
    ) -> Result<()> {
        Mpi::passive_send(self, rank, msg, deadline, alive, patience)
    }

    fn passive_pump(&self) -> bool {
        Mpi::passive_pump(self)
    }

    fn relay_enable(&self, inbox: Inbox, block: JobBlock, host: Range<usize>, probe: bool) {
        *lock(&self.shared.intake) = Some(intake::Intake::new(inbox));
        *lock(&self.shared.block) = Some(block);
        *lock(&self.shared.watch) = Some(watch::Watch::new(host, self.rank, probe));
    }

    fn group_create(&self, id: u8) -> Result<()> {
        Mpi::group_create(self, id)
    }

    fn group_delete(&self, id: u8) {
        Mpi::group_delete(self, id)
    }

    fn group_prepare(&self, id: u8, members: &[Rank]) -> Result<()> {
        Mpi::group_prepare(self, id, members)
    }

    fn group_commit(&self, id: u8, timeout: Timeout, patience: &Patience<'_>) -> Result<()> {
        Mpi::group_commit(self, id, timeout, patience)
    }

    fn barrier(&self, id: u8, timeout: Timeout, patience: &Patience<'_>) -> Result<()> {
        Mpi::barrier(self, id, timeout, patience)
    }

    fn allreduce_ordered(
        &self,
        id: u8,
        mine: Contribution<'_>,
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
        patience: &Patience<'_>,
    ) -> Result<()> {
        Mpi::allreduce_ordered(self, id, mine, recv, combine, timeout, patience)
    }

    fn keyed_messages(&self) -> bool {
        true
    }

    fn keyed_send(&self, rank: Rank, key: Key, data: &Lent) -> Result<bool> {
        Mpi::keyed_send(self, rank, key, data)
    }

    fn keyed_take(&self, rank: Rank, key: Key, into: &Lent) -> Result<bool> {
        Mpi::keyed_take(self, rank, key, into)
    }

    fn keyed_landed(&self, rank: Rank, key: Key) -> usize {
        Mpi::keyed_landed(self, rank, key)
    }
    fn keyed_forget(&self, object: u64) {
        Mpi::keyed_forget(self, object)
    }

    fn keyed_made(&self, object: u64) {
        Mpi::keyed_made(self, object)
    }

    fn kill(&self, rank: Rank, timeout: Timeout) -> Result<()> {
        // Answered once the rank's relay took it (it then ends its own
        // process); a request that timed out is left to MPI and may still
        // end the rank.
        let mut q = ffi::send(
            self.shared.comm,
            Vec::new(),
            rank as usize,
            watch::TAG_KILL,
            true,
        )?;
        let deadline = timeout.deadline();
        while !q.test()? {
            match self.state_of(rank as usize) {
                job::FAILED => return Err(Error::RankFailed { rank }),
                job::TERMINATED => return Err(Error::RankTerminated { rank }),
                _ if deadline.expired() => return Err(Error::Timeout),
                _ => {}
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        Ok(())
    }

    fn depart(&self) {
        if let (Some(w), Some(b)) = (
            lock(&self.shared.watch).as_mut(),
            lock(&self.shared.block).as_ref(),
        ) {
            w.tell_deaths(self.shared.comm, b);
        }
        self.announce_departure()
    }

    fn term(&self, failed: bool, peers_failed: bool) -> bool {
        self.leave(failed, peers_failed)
    }
}
