//! The GPI-2 transport (feature `gpi2`): operations whose target is on
//! another node go through GPI-2; everything inside a node stays on
//! the engine's shared memory (the load/store path of DART-MPI: Zhou, Idrees,
//! Gracia, Euro-Par 2015).
//!
//! # Segments
//! Every segment and every node-shared window of this rank is also bound
//! as the GPI-2 segment of the same id (`gaspi_segment_bind` on the same
//! memory), and registered (`gaspi_segment_register`) with the ranks of
//! other nodes it is registered with. A window is bound by every rank of
//! its node, on the one shared mapping: a remote write addressed to any of
//! them lands once, in the node's memory.
//!
//! # Notifications across nodes (shared notifications)
//! GPI-2 keeps each rank's notification table in that process's private
//! memory, so a `gaspi_write_notify` from another node sets a value that
//! only its target process can see. The engine moves such values into the
//! table our waiters watch (the node-shared one for a window) — it *relays*
//! them:
//!
//! 1. the sender posts `gaspi_write_notify(data, id, value)` on one queue:
//!    GPI-2 guarantees that the notification becomes visible at the target
//!    only after the data (the one ordering GASPI promises; a second write
//!    on the same queue would not be ordered after the first);
//! 2. in the target process, whoever relays — the rank itself while it
//!    waits (it pumps the ids it waits for), or its relay thread for
//!    windows (every id, so that the other ranks of the node see
//!    notifications addressed to a rank that is not waiting) — takes the
//!    value with `gaspi_notify_reset` (an atomic swap in GPI-2) and only
//!    then posts it into our table with a `SeqCst` store, which wakes the
//!    node's waiters;
//! 3. a waiter that reads our table (`SeqCst`) therefore happens-after the
//!    relay's reset, which happens-after GPI-2 wrote the notification,
//!    which is after the data: it sees the data.
//!
//! Nothing here needs GPI-2 features beyond its main branch. Relaying
//! keeps GASPI's semantics with one difference: two notifications with the
//! same id that arrive before a relay count once in a window's
//! `posted` counter (the value is overwritten either way, as in GASPI).
//!
//! # Atomics across nodes
//! GPI-2's atomics are atomic only with respect to each other, applied by
//! the target's device: its TCP device thread does a plain read, compare
//! and store, and an InfiniBand adapter's atomics do not exclude the CPU's.
//! So once a job has several nodes, every atomic goes through GPI-2, on
//! this node too: a CPU atomic by a rank of the target's node could lose
//! a GPI-2 atomic's update, or the reverse. (Loads stay plain: the device
//! stores whole words.) A word must be addressed through the same rank by
//! everyone (its owner, for the adapters' protocol words; the rank named
//! in the call for the user's), which the TCP device needs to serialise
//! them. The waiters of the target's node are woken by the requester
//! itself on its node, or by a notification on the reserved id
//! [`DOORBELL`](codes::DOORBELL), which the relay turns into a wake-up.
//!
//! # Passive messages across hosts
//! Pulled by the receiver's relay thread from the sender's outbox, with
//! notifications past the relayed ids (see `gpi2/passive.rs`).
//!
//! # Remote completion
//! `gaspi_wait` completes writes locally (GPI-2's TCP device: once in the
//! socket). `flush` adds remote completion for MPI's flush and unlock,
//! and barriers flush what waits completed: a one-byte read back from
//! every rank written to, on a queue of its own (see `flush.rs`).
//!
//! # Launching
//! GPI-2 reads `GASPI_RANK`, `GASPI_NRANKS`, `GASPI_SOCKET` (the rank on
//! its host) and `GASPI_MFILE` (the machine file); its own `gaspi_run`
//! sets them (ssh, Slurm), and so does our `gaspi-run --engine gpi2` on one
//! machine, without ssh. `GASPI_GPI2_PORT` moves GPI-2's ports (so that several
//! jobs can share a machine).
//!
//! # Files
//! [`start`] (starting GPI-2, joining the job it describes), `codes` (ids,
//! timeouts, errors), `segments`, `calls` (one-sided calls, completion),
//! `flush` (remote completion),
//! `notify` (relaying notifications), `relay` (the thread), `arrivals`
//! (its sleep on GPI-2's sockets), `groups` and
//! `twin` (groups spanning hosts), `passive` and `intake` (passive messages
//! across hosts: sending, receiving), `watch` (failures across hosts).

mod arrivals;
mod calls;
mod codes;
mod flush;
mod groups;
mod intake;
mod notify;
mod passive;
mod relay;
mod segments;
pub(crate) mod start;
mod twin;
mod watch;

use crate::config::Engine;
use crate::engine::inbox::Inbox;
use crate::engine::job::JobBlock;
use crate::engine::segment::{SegmentObject, Span};
use crate::engine::transport::{AtomicOp, Combine, Contribution, Post, Transfer, Transport};
use crate::engine::wait::{Patience, lock};
use crate::error::Result;
use crate::types::{Deadline, NotificationId, QueueId, Rank, SegmentId, Timeout};
use codes::{QUEUES, check, ms, states};
use gpi2_sys as sys;
use relay::Shared;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use twin::Twins;

/// How long a leaving rank without a last barrier lingers before it
/// leaves GPI-2 to the process's exit.
const LINGER: Duration = Duration::from_millis(300);
/// How long a leaving rank waits for its queues to drain, all together.
const DRAIN: Duration = Duration::from_secs(2);
/// How long a leaving rank waits for the others at its last barrier.
const TERM_BARRIER_MS: u64 = 30_000;

/// Where this process stands in the GPI-2 job.
#[derive(Clone, Copy, Debug)]
struct Placement {
    rank: Rank,
    nranks: usize,
    /// Ranks GPI-2 places on this host (by machine-file host name).
    local_num: usize,
    /// This rank's position among them.
    local_rank: usize,
}

/// This rank's GPI-2 side.
pub(crate) struct Gpi2 {
    placement: Placement,
    shared: Arc<Shared>,
    relay: Mutex<Option<JoinHandle<()>>>,
    terminated: AtomicBool,
    /// The ranks written to since their last flush (`flush.rs`).
    unflushed: Mutex<flush::Unflushed>,
    /// Flush reads take turns.
    flush_reads: Mutex<flush::Reads>,
    /// Per GPI-2 queue, its reads in flight (`calls.rs`).
    reading: Mutex<Vec<calls::Reading>>,
    /// GPI-2 segment ids whose table of remote descriptions exists in this
    /// process (see `remote_size`); taken by binds too.
    described: Mutex<[u64; 4]>,
    /// GPI-2 segment ids this rank deleted but GPI-2 still binds (see
    /// `Gpi2::unbind`): deleted in GPI-2 when the id is bound again, or
    /// with everything at `gaspi_proc_term`.
    parked: Mutex<[u64; 4]>,
    /// The reserved segment once this rank deleted it: still bound in
    /// GPI-2 until `gaspi_proc_term`, because other hosts notify it until
    /// they leave too (failures, departures), and GPI-2's device writes to
    /// a deleted segment's address unchecked (a SIGSEGV in its thread).
    kept: Mutex<Option<Arc<SegmentObject>>>,
    /// The scratch page (also what `describe` binds for a moment).
    page: usize,
    /// GPI-2's groups twinning ours, and how far each pair of members got
    /// in telling each other about new ones (see `twin.rs`).
    twins: Mutex<Twins>,
    /// Groups GPI-2 was configured for (`Config::group_max`, the same on
    /// every rank): the ids of groups' readiness depend on it.
    group_max: u32,
    /// Passive messages to other hosts.
    outbox: Mutex<intake::Outbox>,
    /// Largest passive message.
    passive_cap: usize,
}

impl std::fmt::Debug for Gpi2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpi2")
            .field("placement", &self.placement)
            .finish_non_exhaustive()
    }
}

impl Gpi2 {
    /// Leave GPI-2: drain the queues (briefly), wait at a barrier of
    /// every rank (up to [`TERM_BARRIER_MS`]; skipped when a rank is known
    /// dead: `peers_failed`, or GPI-2's state vector), stop the relay, then
    /// `gaspi_proc_term` if every rank met at the barrier (else GPI-2 stays
    /// up until the process exits: a peer may still send). After a failure
    /// of this rank only the relay is stopped.
    ///
    /// The barrier keeps a rank that finished from tearing down its
    /// connections while its last writes are on their way (GPI-2's wait is
    /// local completion: a closed socket may drop them) or while its relay
    /// is still needed by the other ranks of its node.
    ///
    /// Returns whether GPI-2 stays up (see [`Transport::term`]).
    pub(super) fn leave(&self, failed: bool, peers_failed: bool) -> bool {
        if self.terminated.swap(true, SeqCst) {
            return false;
        }
        self.shared.leaving.store(true, SeqCst);
        let dead_peer = peers_failed || states().contains(&sys::GASPI_STATE_CORRUPT);
        // Every rank reached its last barrier: nothing reaches this process
        // through GPI-2 any more.
        let mut met = false;
        if !failed {
            // One budget for all queues: requests to a dead rank may never
            // complete, and a wait per queue would add up past the time the
            // launcher grants survivors.
            let until = Instant::now() + DRAIN;
            for q in 0..QUEUES {
                let left = until.saturating_duration_since(Instant::now());
                // SAFETY: plain call.
                let _ = unsafe { sys::gaspi_wait(q as u8, left.as_millis() as u64) };
            }
            // Not with a dead rank: the barrier could only time out.
            if !dead_peer {
                // SAFETY: plain call. A timeout (a rank that stays much
                // longer) only ends the wait.
                met = unsafe { sys::gaspi_barrier(sys::GASPI_GROUP_ALL, TERM_BARRIER_MS) }
                    == sys::GASPI_SUCCESS;
            }
        }
        self.shared.stop.store(true, SeqCst);
        if let Some(h) = lock(&self.relay).take() {
            let _ = h.join();
        }
        if !met && !failed {
            // What this rank sent has completed only locally and no barrier
            // ordered it: give GPI-2's TCP device a moment to put it on the
            // wire before the process exits and its sockets close (a
            // survivor's last notifications to the others, its departure
            // notice). Best effort: a remote fence here crashed GPI-2.
            std::thread::sleep(LINGER);
        }
        if !met {
            // A rank may still write or notify here (a survivor of a dead
            // peer announcing its own departure, a rank past the barrier's
            // timeout), and GPI-2's proc_term frees what its TCP device
            // thread writes to (a SIGSEGV in that thread, seen in CI), or
            // joins a thread that retries a dead connection for seconds:
            // GPI-2 stays up until the process exits, and so does the
            // memory it may write to.
            std::mem::forget(lock(&self.kept).take());
            std::mem::forget(std::mem::take(&mut *lock(&self.shared.bound)));
            return true;
        }
        lock(&self.shared.bound).clear();
        // SAFETY: plain call; nothing of ours uses GPI-2 after it, and no
        // other rank sends anything after the barrier above.
        let _ = unsafe { sys::gaspi_proc_term(10_000) };
        drop(lock(&self.kept).take());
        false
    }
}

impl Transport for Gpi2 {
    fn kind(&self) -> Engine {
        Engine::Gpi2
    }

    fn counts_each_notification(&self) -> bool {
        // The relay moves notifications into the node's table after the
        // fact: two with the same id between two moves count once.
        false
    }

    fn bind(&self, segment: SegmentId, obj: &Arc<SegmentObject>, window: bool) -> Result<()> {
        Gpi2::bind(self, segment, obj, window)
    }

    fn unbind(&self, segment: SegmentId) {
        Gpi2::unbind(self, segment)
    }

    fn writes_after_delete(&self) -> bool {
        // GPI-2 keeps a deleted segment's registration at its peers.
        true
    }

    fn block_bytes_min(&self) -> usize {
        0
    }

    fn host_collectives_fast(&self) -> bool {
        // GPI-2's barrier spins in its calls; its groups are few (the
        // node-aware barrier's notified writes need no group of GPI-2's).
        false
    }

    fn register(&self, segment: SegmentId, rank: Rank, timeout: Timeout) -> Result<()> {
        Gpi2::register(self, segment, rank, timeout)
    }

    fn remote_size(&self, rank: Rank, segment: SegmentId) -> Option<usize> {
        Gpi2::remote_size(self, rank, segment)
    }

    fn post(&self, rank: Rank, list: &[Transfer], post: Post, queue: QueueId) -> Result<()> {
        Gpi2::post(self, rank, list, post, queue)
    }

    fn ring(&self, rank: Rank, segment: SegmentId, queue: QueueId) -> Result<()> {
        Gpi2::ring(self, rank, segment, queue)
    }

    fn atomic(
        &self,
        rank: Rank,
        segment: SegmentId,
        offset: usize,
        op: AtomicOp,
        timeout: Timeout,
    ) -> Result<u64> {
        Gpi2::atomic(self, rank, segment, offset, op, timeout)
    }

    fn wait(&self, queue: QueueId, timeout: Timeout, alive: &dyn Fn(Rank) -> bool) -> Result<()> {
        Gpi2::wait(self, queue, timeout, alive)
    }

    fn stuck(&self, queue: QueueId) -> bool {
        Gpi2::stuck(self, queue)
    }

    fn flush(
        &self,
        queue: QueueId,
        remote: (SegmentId, u64),
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        Gpi2::flush(self, queue, remote, timeout, alive)
    }

    fn flush_written(
        &self,
        remote: (SegmentId, u64),
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        Gpi2::flush_written(self, remote, timeout, alive)
    }

    fn purge(&self, queue: QueueId, timeout: Timeout, alive: &dyn Fn(Rank) -> bool) -> Result<()> {
        Gpi2::purge(self, queue, timeout, alive)
    }

    fn pump(&self, segment: SegmentId, obj: &SegmentObject, ids: Range<NotificationId>) {
        notify::pump(segment, obj, ids);
    }

    fn corrupt_ranks(&self) -> Vec<Rank> {
        codes::corrupt_ranks()
    }

    fn kill(&self, rank: Rank, timeout: Timeout) -> Result<()> {
        // GPI-2's service thread on the rank's host ends its process
        // (`_exit(-1)`) when the request arrives.
        // SAFETY: plain call.
        let code = unsafe { sys::gaspi_proc_kill(rank, ms(timeout)) };
        check("gaspi_proc_kill", code, Some(rank))
    }

    fn passive_send(
        &self,
        rank: Rank,
        msg: Span<'_>,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
        patience: &Patience<'_>,
    ) -> Result<()> {
        Gpi2::passive_send(self, rank, msg, deadline, alive, patience)
    }

    fn passive_pump(&self) -> bool {
        Gpi2::passive_pump(self)
    }

    fn relay_enable(&self, inbox: Inbox, block: JobBlock, host: Range<usize>, probe: bool) {
        Gpi2::relay_enable(self, inbox, block, host, probe)
    }

    fn group_create(&self, id: u8) -> Result<()> {
        Gpi2::group_create(self, id)
    }

    fn group_delete(&self, id: u8) {
        Gpi2::group_delete(self, id)
    }

    fn group_prepare(&self, id: u8, members: &[Rank]) -> Result<()> {
        Gpi2::group_prepare(self, id, members)
    }

    fn group_commit(&self, id: u8, timeout: Timeout, _patience: &Patience<'_>) -> Result<()> {
        // GPI-2 waits inside its calls (for at most `timeout`).
        Gpi2::group_commit(self, id, timeout)
    }

    fn barrier(&self, id: u8, timeout: Timeout, _patience: &Patience<'_>) -> Result<()> {
        Gpi2::barrier(self, id, timeout)
    }

    fn allreduce_ordered(
        &self,
        id: u8,
        mine: Contribution<'_>,
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
        _patience: &Patience<'_>,
    ) -> Result<()> {
        Gpi2::allreduce_ordered(self, id, mine, recv, combine, timeout)
    }

    fn depart(&self) {
        if let Some(w) = lock(&self.shared.watch).as_mut() {
            w.announce_departure();
        }
    }

    fn term(&self, failed: bool, peers_failed: bool) -> bool {
        self.leave(failed, peers_failed)
    }
}
