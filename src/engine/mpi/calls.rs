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
                // The notification's flush completed every operation to
                // `rank` so far: the queue's wait has nothing left to do
                // for them (it would cost another round trip).
                self.notify(rank, segment, id, value)?;
            }
            Post::Read(Some((segment, id))) => {
                ffi::flush(self.win, r)?;
                if let Some(b) = lock(&self.shared.bound).get(&segment) {
                    b.obj.notifications().post(id, 1);
                }
            }
            _ => {
                lock(&self.unflushed).insert(queue, r);
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
    /// data is complete there), complete there on return. The caller has
    /// synced the window (`MPI_Win_sync`) since it began.
    fn notify(
        &self,
        rank: Rank,
        segment: SegmentId,
        id: NotificationId,
        value: NotificationValue,
    ) -> Result<()> {
        let r = rank as usize;
        let to = self.remote_synced_of(rank, segment)?;
        let value = (to.values + 4 * id as u64, Change::Store32(value));
        let bit = (
            to.words + Landing::summary_offset(id),
            Change::Or64(1 << (id % 64)),
        );
        ffi::accumulate(self.win, r, &[value, bit])
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
            if let Err(e) = ffi::flush(self.win, r) {
                lock(&self.unflushed).restore(queue, &ranks[i..]);
                return Err(e);
            }
        }
        match failed {
            Some(r) => Err(Error::RankFailed { rank: r as Rank }),
            None => Ok(()),
        }
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
