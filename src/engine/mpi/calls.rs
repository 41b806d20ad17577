//! One-sided calls through MPI: transfers and their notifications,
//! atomics, queue completion, flush and purge.
//!
//! A notified write is `MPI_Put` of the data, `MPI_Win_flush` (the data is
//! complete *at the target*: MPI-3.1 §11.5.4), then the notification into
//! the target's landing (`landing.rs`). The notification therefore cannot
//! be seen before its data; the price is a round trip per notified write.
//! The notification (two element-atomic accumulates, see `landing.rs`) is
//! flushed too, so that it arrives without the writer's next wait whatever
//! the MPI library defers (a second round trip; dropping it measured no
//! faster). That flush completes every earlier operation to the target,
//! so the queue's wait has nothing left to do for a notified write.

use super::Mpi;
use super::ffi::{self, Change};
use super::landing::Landing;
use crate::engine::job;
use crate::engine::transfer::check_within;
use crate::engine::transport::{AtomicOp, Post, Transfer};
use crate::engine::wait::lock;
use crate::error::{Error, Result, Side};
use crate::types::{NotificationId, NotificationValue, QueueId, Rank, SegmentId, Timeout};
use std::sync::atomic::Ordering::SeqCst;

/// At most this many notifications of a run to one rank wait unflushed
/// ([`Mpi::notify`]).
const PARK_MAX: usize = 64;

/// A transfer's offset or size, which the engine made from a `usize`.
fn to_usize(v: u64) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::InvalidArgument(format!("{v} bytes do not fit in usize")))
}

impl Mpi {
    /// Post the transfers `list` with `rank` (writes or reads), and the
    /// notification after them.
    pub(super) fn post(
        &self,
        rank: Rank,
        list: &[Transfer],
        post: Post,
        queue: QueueId,
    ) -> Result<()> {
        let r = rank as usize;
        let write = matches!(post, Post::Write(_));
        // One sync for every directory entry read below.
        ffi::sync(self.win);
        for x in list {
            let here = self.local(x.local.0, x.local.1)?;
            // The description read here, not the size the engine checked
            // before: the target may have deleted the segment and made
            // another of the same id meanwhile.
            let remote = self.remote_synced_of(rank, x.remote.0)?;
            let (offset, size) = (to_usize(x.remote.1)?, to_usize(x.size)?);
            check_within(Side::Remote, remote.size, rank, x.remote.0, offset, size)?;
            let there = remote.data + x.remote.1;
            // SAFETY: both ranges were checked against the segments by the
            // engine; the local segment stays mapped while bound, and the
            // GASPI contract leaves its range alone until the queue's wait
            // (which flushes).
            unsafe { ffi::transfer(self.win, write, here, x.size as usize, r, there)? };
        }
        match post {
            Post::Write(Some((segment, id, value))) => {
                if !list.is_empty() {
                    ffi::flush(self.win, r)?;
                }
                self.notify(rank, segment, id, value, !list.is_empty(), queue)?;
            }
            Post::Read(Some((segment, id))) => {
                ffi::flush(self.win, r)?;
                if let Some(b) = lock(&self.shared.bound).get(&segment) {
                    b.obj.notifications().post(id, 1);
                }
            }
            _ => {
                let mut unflushed = lock(&self.unflushed);
                unflushed.insert(queue, r);
                if !list.is_empty() {
                    // Data ends a run of notifications to `r`.
                    unflushed.in_run(r, false);
                }
            }
        }
        Ok(())
    }

    /// Write `pieces` (any memory of this process: MPI's origin buffers
    /// need not lie in a window, each with its offset in `rank`'s
    /// `segment`), complete there on return: `MPI_Put` each, then one
    /// `MPI_Win_flush` (which also completes this rank's earlier
    /// operations to `rank`, which does no harm).
    pub(super) fn put_from(
        &self,
        rank: Rank,
        segment: SegmentId,
        pieces: &[(&[u8], usize)],
    ) -> Result<()> {
        let r = rank as usize;
        let to = self.remote_of(rank, segment)?;
        for &(data, offset) in pieces {
            check_within(Side::Remote, to.size, rank, segment, offset, data.len())?;
        }
        for &(data, offset) in pieces {
            let here = data.as_ptr().cast_mut();
            // SAFETY: the remote range was checked against the segment's
            // size just now; `data` is borrowed for the whole call, so it
            // stays valid and unchanged until the flush below completes
            // the put (a put only reads it, whatever the pointer's
            // mutability says).
            unsafe { ffi::transfer(self.win, true, here, data.len(), r, to.data + offset as u64)? };
        }
        ffi::flush(self.win, r)
    }

    /// Set notification `id` of `rank`'s `segment` to `value` (after its
    /// data is complete there). The caller has synced the window
    /// (`MPI_Win_sync`) since it began.
    ///
    /// Complete there on return (one round trip), except a notification
    /// without data that follows another to the same rank: that one is
    /// only issued, and completes with the queue's wait, any later flush
    /// of `rank`, or at the latest when [`PARK_MAX`] are waiting. A flush
    /// costs least right away, while the target is likely to wait for
    /// the notification and so to serve MPI; put off to the queue's wait
    /// it may meet a target that computes and is served by its relay
    /// thread only (a stencil between hosts took 4-10 times as long so);
    /// but a rank that notifies one target over and over (GPI-2's
    /// `notify_null` test) waited a round trip for each (docs/guide/mpi.md,
    /// "Runs of notifications").
    fn notify(
        &self,
        rank: Rank,
        segment: SegmentId,
        id: NotificationId,
        value: NotificationValue,
        after_data: bool,
        queue: QueueId,
    ) -> Result<()> {
        let r = rank as usize;
        let to = self.remote_synced_of(rank, segment)?;
        let value = (to.values + 4 * id as u64, Change::Store32(value));
        let bit = (
            to.words + Landing::summary_offset(id),
            Change::Or64(1 << (id % 64)),
        );
        let mut unflushed = lock(&self.unflushed);
        match unflushed.in_run(r, !after_data) {
            Some(n) if n + 1 < PARK_MAX => {
                // Left to the queue's wait (first, so that even a failed
                // issue is flushed by it).
                unflushed.insert(queue, r);
                let changes = unflushed.park(r, Box::new([value, bit]));
                // SAFETY: the changes stay parked, in place, until a flush
                // of `r` that begins after this call has returned
                // (`Unflushed::unpark` takes them only before a flush, and
                // the lock held here keeps any from beginning until they
                // are issued).
                unsafe { ffi::issue_accumulates(self.win, r, changes) }
            }
            Some(_) => {
                // As many as may wait: this one's flush completes them all.
                drop(unflushed);
                self.completing_parked(r, || ffi::accumulate(self.win, r, &[value, bit]))
            }
            None => {
                drop(unflushed);
                // This flush completes every operation to `rank` so far:
                // the queue's wait has nothing left to do for them (it
                // would cost another round trip, at a time the target may
                // not serve MPI).
                ffi::accumulate(self.win, r, &[value, bit])
            }
        }
    }

    /// Wake the waiters of `rank`'s node on window `segment`: its doorbell.
    pub(super) fn ring(&self, rank: Rank, segment: SegmentId, _queue: QueueId) -> Result<()> {
        let r = rank as usize;
        let to = self.remote_of(rank, segment)?;
        ffi::accumulate(self.win, r, &[(to.words, Change::Add64(1))])
    }

    /// An MPI atomic on the word at `offset` of `rank`'s `segment`.
    pub(super) fn atomic(
        &self,
        rank: Rank,
        segment: SegmentId,
        offset: usize,
        op: AtomicOp,
    ) -> Result<u64> {
        let r = rank as usize;
        let at = self.remote_of(rank, segment)?.data + offset as u64;
        match op {
            AtomicOp::FetchAdd(v) => ffi::fetch_add(self.win, r, at, v),
            AtomicOp::CompareSwap { old, new } => ffi::compare_swap(self.win, r, at, old, new),
        }
    }

    /// Complete `queue`'s transfers at their targets (`MPI_Win_flush` of
    /// each rank it reached): stronger than GASPI's local completion. A
    /// rank known failed is not flushed (MPI would wait for it for ever):
    /// its requests are dropped and the wait ends with
    /// [`Error::RankFailed`] once, as GPI-2's does; a rank that terminated
    /// is dropped silently (its requests completed before it left, or
    /// were errors).
    pub(super) fn wait(&self, queue: QueueId, _timeout: Timeout) -> Result<()> {
        let ranks = lock(&self.unflushed).take(queue);
        let mut failed = None;
        for (i, &r) in ranks.iter().enumerate() {
            match self.state_of(r) {
                job::FAILED => {
                    failed.get_or_insert(r);
                    continue;
                }
                job::TERMINATED => continue,
                _ => {}
            }
            if let Err(e) = self.flush_parked(r) {
                lock(&self.unflushed).restore(queue, &ranks[i..]);
                return Err(e);
            }
        }
        match failed {
            Some(r) => Err(Error::RankFailed { rank: r as Rank }),
            None => Ok(()),
        }
    }

    /// `MPI_Win_flush` of `rank`, then free the notifications' origin
    /// buffers issued to it before the flush began.
    pub(super) fn flush_parked(&self, rank: usize) -> Result<()> {
        self.completing_parked(rank, || ffi::flush(self.win, rank))
    }

    /// Run `flushing`, which ends in a flush of `rank`; once it succeeded,
    /// free the origin buffers issued to `rank` before it began (put them
    /// back if it failed).
    fn completing_parked(&self, rank: usize, flushing: impl FnOnce() -> Result<()>) -> Result<()> {
        let parked = lock(&self.unflushed).unpark(rank);
        let done = flushing();
        match done {
            Ok(()) => parked.completed(),
            Err(_) => lock(&self.unflushed).repark(rank, parked),
        }
        done
    }

    /// `rank`'s state in this host's control block (`ABSENT` before the
    /// relay has it: a rank of another host that is running).
    pub(super) fn state_of(&self, rank: usize) -> u32 {
        lock(&self.shared.block)
            .as_ref()
            .map_or(job::ABSENT, |b| b.slot(rank).state.load(SeqCst))
    }

    /// Whether `rank` is known gone: failed, or terminated (its relay may
    /// have stopped, so a flush to it could wait for ever).
    pub(super) fn gone(&self, rank: usize) -> bool {
        matches!(self.state_of(rank), job::FAILED | job::TERMINATED)
    }

    /// Discard `queue`'s transfers: MPI cannot take them back, so they are
    /// completed instead (a purge may be followed by deleting the memory
    /// they read from).
    pub(super) fn purge(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        self.wait(queue, timeout)
    }
}
