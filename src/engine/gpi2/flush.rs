//! Remote completion through GPI-2: a flush makes the writes that a wait
//! completed locally visible at their targets.
//!
//! GPI-2's TCP device completes a write once it is in the socket, so a rank
//! that learns of the write by another path (a barrier, a lock handed
//! over, a third rank) could still read the old data. A flush reads one
//! byte back from every target written to, after the writes completed
//! locally: GPI-2 sends every request to a rank over one connection, which
//! the target serves in order, so the answer comes after the writes are in
//! place. (On InfiniBand a write completes once its target acknowledged
//! it; the read is then one round trip more.)
//!
//! The reads are `gaspi_read_notify`s on a queue of their own
//! ([`FLUSH_QUEUE`]), each with a notification id of its own on the
//! scratch segment: a read has its answer once its id is set (GPI-2 reads
//! the target's fixed notification, 1, after the byte, over the same
//! connection). A target that dies after taking a read never answers, and
//! GPI-2 never fails the read (only requests on the wire when a connection
//! drops get an error completion), so a `gaspi_wait` on its queue would
//! never return, and the queue would stay full by its two entries. Hence
//! nobody waits on the flush queue: the reads' ids are polled, a target
//! that `alive` rules out meanwhile (or that GPI-2 marks corrupt) is given
//! up, and the queue is drained by tests (`gaspi_wait` with `GASPI_TEST`
//! takes what completed). The ids rotate over the scratch segment's first
//! [`IDS`], and an id whose read was given up is not used again until its
//! answer came, so an answer that comes late lands on an id no flush
//! waits for.
//!
//! A flush that times out keeps its reads: the next flush (the caller
//! repeating the call, as GASPI has it after a timeout) waits for their
//! answers instead of reading again, where no write to that rank was
//! completed since. Reading again at every call would never end in a
//! `GASPI_TEST` loop (an answer takes a round trip), and would fill the
//! queue with reads nobody waits for.

use super::Gpi2;
use super::codes::{FLUSH_QUEUE, SCRATCH, corrupt, corrupt_ranks, poll_yielding, queue_of};
use crate::engine::transport::{IDS, Post, Transfer};
use crate::engine::wait::{lock, lock_until};
use crate::error::{Error, Result};
use crate::types::{Deadline, NotificationId, QueueId, Rank, SegmentId, Timeout};
use gpi2_sys as sys;
use std::collections::{BTreeSet, VecDeque};

/// What flushes still owe.
#[derive(Debug)]
pub(super) struct Unflushed {
    /// Per GPI-2 queue, the ranks written to since its last flush.
    by_queue: Vec<BTreeSet<Rank>>,
    /// Ranks whose writes completed locally but were not read back (the
    /// flush timed out).
    waited: BTreeSet<Rank>,
}

impl Unflushed {
    pub(super) fn new(queues: usize) -> Self {
        Unflushed {
            by_queue: vec![BTreeSet::new(); queues],
            waited: BTreeSet::new(),
        }
    }

    /// `rank` was written to on GPI-2 queue `q`.
    pub(super) fn written(&mut self, q: usize, rank: Rank) {
        self.by_queue[q].insert(rank);
    }
}

/// The flush reads' side (flushes take turns).
#[derive(Debug, Default)]
pub(super) struct Reads {
    next_id: NotificationId,
    /// Reads of flushes that timed out, unanswered: (id, rank). Each
    /// answers for the writes to its rank that had completed when it was
    /// posted.
    outstanding: Vec<(NotificationId, Rank)>,
    /// Ids of reads given up (a later write made them too early), until
    /// their answers come: not used again before.
    abandoned: BTreeSet<NotificationId>,
}

impl Reads {
    /// The next free id, or `None` if every id waits for a late answer.
    fn take_free_id(&mut self) -> Option<NotificationId> {
        for _ in 0..IDS {
            let id = self.next_id;
            self.next_id = (id + 1) % IDS;
            if !self.abandoned.contains(&id) {
                return Some(id);
            }
        }
        None
    }
}

impl Gpi2 {
    /// Remote completion of `queue`: wait for it, then make every write
    /// posted to it since its last flush visible at its target (MPI's
    /// flush and unlock). `remote` is (segment, offset) of a byte that
    /// every rank has registered with every other. A target that failed,
    /// before or during the flush, fails it with [`Error::RankFailed`]
    /// (after the others were flushed).
    pub(crate) fn flush(
        &self,
        queue: QueueId,
        remote: (SegmentId, u64),
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        let deadline = timeout.deadline();
        self.wait(queue, deadline.timeout(), alive)?;
        let fresh = std::mem::take(&mut lock(&self.unflushed).by_queue[queue_of(queue) as usize]);
        match self.read_back(&fresh, remote, deadline, alive)?.first() {
            Some(&rank) => Err(Error::RankFailed { rank }),
            None => Ok(()),
        }
    }

    /// Before a barrier: wait for every user queue with writes since its
    /// last flush and read back from their targets, so that a write
    /// completed by `wait` before a barrier is in place after it. Targets
    /// that `alive` rules out, or that fail meanwhile, are skipped: a
    /// barrier of the survivors must not fail for a write to a rank that
    /// died.
    pub(crate) fn flush_written(
        &self,
        remote: (SegmentId, u64),
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        let deadline = timeout.deadline();
        let mut fresh = BTreeSet::new();
        for q in 0..FLUSH_QUEUE {
            let written = |u: &mut Unflushed| {
                u.by_queue[q as usize].retain(|&r| alive(r));
                !u.by_queue[q as usize].is_empty()
            };
            if !written(&mut lock(&self.unflushed)) {
                continue;
            }
            // A request that failed (its target died) is off the queue
            // once the wait says so: wait again for the others.
            loop {
                match self.wait(q, deadline.timeout(), alive) {
                    Err(Error::RankFailed { .. }) => {
                        let mut u = lock(&self.unflushed);
                        u.by_queue[q as usize].retain(|&r| !corrupt(r));
                    }
                    waited => break waited?,
                }
            }
            fresh.append(&mut lock(&self.unflushed).by_queue[q as usize]);
        }
        fresh.retain(|&r| alive(r));
        self.read_back(&fresh, remote, deadline, alive)?;
        Ok(())
    }

    /// Read one byte at `remote` back from each of `fresh` (ranks whose
    /// writes completed since the last flush) and of the ranks a flush
    /// that timed out left unanswered (see the module's notes), and return
    /// those given up: ruled out by `alive`, or marked corrupt by GPI-2,
    /// before they answered. An unanswered rank not written since keeps
    /// its outstanding read. On an error (a timeout) the unanswered ranks
    /// and their reads are kept for the next flush. Flushes take turns, so
    /// one that finds nothing to read returns only after a flush still
    /// reading for it (another thread's) is done.
    fn read_back(
        &self,
        fresh: &BTreeSet<Rank>,
        remote: (SegmentId, u64),
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<Vec<Rank>> {
        let read = Transfer {
            local: (SCRATCH, 0),
            remote,
            size: 1,
        };
        let mut lost = Vec::new();
        let mut todo: VecDeque<Rank> = VecDeque::new();
        let mut pending: Vec<(NotificationId, Rank)> = Vec::new();
        let mut reads = match lock_until(&self.flush_reads, deadline) {
            Ok(reads) => reads,
            Err(e) => {
                lock(&self.unflushed).waited.extend(fresh);
                return Err(e);
            }
        };
        // Taken under the turn, so that what a timed-out flush put back
        // is seen by the next.
        let carried = std::mem::take(&mut lock(&self.unflushed).waited);
        if fresh.is_empty() && carried.is_empty() {
            return Ok(Vec::new());
        }
        // Reads of a timed-out flush still answer for their ranks unless
        // a write to them completed since; those are given up.
        let outstanding = std::mem::take(&mut reads.outstanding);
        for (id, r) in outstanding {
            if fresh.contains(&r) || !carried.contains(&r) {
                reads.abandoned.insert(id);
            } else {
                pending.push((id, r));
            }
        }
        todo.extend(
            fresh
                .union(&carried)
                .filter(|r| !pending.iter().any(|&(_, p)| p == **r)),
        );
        let done = {
            let reads = &mut *reads;
            poll_yielding(deadline, || {
                drain();
                // GPI-2's state vector, read once per look.
                let corrupt = corrupt_ranks();
                let dead = |r: Rank| !alive(r) || corrupt.contains(&r);
                reads.abandoned.retain(|&id| take_id(id) == 0);
                while let Some(&r) = todo.front() {
                    if dead(r) {
                        lost.push(r);
                        todo.pop_front();
                        continue;
                    }
                    let Some(id) = reads.take_free_id() else {
                        break; // every id waits for a late answer
                    };
                    let _ = take_id(id);
                    match self.post(r, &[read], Post::Read(Some((SCRATCH, id))), FLUSH_QUEUE) {
                        Ok(()) => {
                            pending.push((id, r));
                            todo.pop_front();
                        }
                        // Room comes as the posted reads complete; with
                        // none posted or given up, what fills the queue
                        // never will.
                        Err(Error::QueueFull { .. })
                            if !pending.is_empty() || !reads.abandoned.is_empty() =>
                        {
                            break;
                        }
                        Err(Error::RankFailed { rank }) if rank == r => {
                            lost.push(r);
                            todo.pop_front();
                        }
                        Err(e) => return Err(e),
                    }
                }
                pending.retain(|&(id, r)| match take_id(id) {
                    0 if dead(r) => {
                        lost.push(r);
                        false
                    }
                    0 => true,
                    _ => false,
                });
                Ok((todo.is_empty() && pending.is_empty()).then_some(()))
            })
        };
        drain();
        match done {
            Ok(()) => Ok(lost),
            Err(e) => {
                let mut u = lock(&self.unflushed);
                u.waited
                    .extend(todo.iter().chain(pending.iter().map(|(_, r)| r)));
                reads.outstanding = pending;
                Err(e)
            }
        }
    }
}

/// Reset notification `id` of the scratch segment, returning its value.
fn take_id(id: NotificationId) -> u32 {
    let mut old = 0;
    // SAFETY: out pointer to a local; `id` is inside the scratch segment's
    // notification table (it has more than `IDS` ids).
    unsafe { sys::gaspi_notify_reset(SCRATCH, id, &mut old) };
    old
}

/// Take the flush queue's completed requests (and mark the targets of
/// failed ones corrupt) without waiting.
fn drain() {
    // SAFETY: plain call.
    unsafe { sys::gaspi_wait(queue_of(FLUSH_QUEUE), sys::GASPI_TEST) };
}
