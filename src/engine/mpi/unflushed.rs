//! Per queue, the ranks this rank wrote to or read from since the queue's
//! last wait: what the wait, or the flush of everything before a barrier,
//! completes with `MPI_Win_flush`. Only queues with such ranks are kept,
//! so that a barrier looks at those alone (looking at all 256 possible
//! queues cost a barrier between two hosts about 1 us).
//!
//! Beside them, by target rank, the origin buffers of notifications
//! issued without a flush ([`Parked`]): MPI reads them until a flush of
//! that rank completes.

use super::ffi::Change;
use crate::types::QueueId;
use std::collections::{BTreeMap, BTreeSet};

/// The ranks to flush, by queue, and the origin buffers MPI may still read.
#[derive(Debug, Default)]
pub(super) struct Unflushed {
    /// Never an empty set.
    queues: BTreeMap<QueueId, BTreeSet<usize>>,
    /// By target rank, never empty.
    parked: BTreeMap<usize, Parked>,
    /// The ranks whose last post from this rank was a notification
    /// without data.
    runs: BTreeSet<usize>,
}

/// Origin buffers of accumulates issued to one rank and not yet known
/// complete. Each change set is boxed, so it stays where MPI was told it is
/// however the list grows. Dropped, they are leaked, never freed: only
/// [`Parked::completed`] frees them, after a flush that completed them.
#[derive(Debug, Default)]
pub(super) struct Parked(Vec<Box<[(u64, Change)]>>);

impl Parked {
    /// Free the buffers: a flush of their rank that began after they were
    /// taken ([`Unflushed::unpark`]) has returned.
    pub(super) fn completed(mut self) {
        self.0.clear();
    }

    /// How many change sets wait here.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        // MPI may still read them: leak (a few bytes per notification, and
        // only where a flush failed or the job ended without one).
        std::mem::forget(std::mem::take(&mut self.0));
    }
}

impl Unflushed {
    /// `rank` was written to or read from on `queue`.
    pub(super) fn insert(&mut self, queue: QueueId, rank: usize) {
        self.queues.entry(queue).or_default().insert(rank);
    }

    /// Take `queue`'s ranks, in order, leaving none.
    pub(super) fn take(&mut self, queue: QueueId) -> Vec<usize> {
        self.queues
            .remove(&queue)
            .map_or_else(Vec::new, |s| s.into_iter().collect())
    }

    /// Put back ranks of `queue` that were taken and not flushed.
    pub(super) fn restore(&mut self, queue: QueueId, ranks: &[usize]) {
        if !ranks.is_empty() {
            self.queues.entry(queue).or_default().extend(ranks);
        }
    }

    /// Every rank of any queue, once each.
    pub(super) fn ranks(&self) -> BTreeSet<usize> {
        self.queues.values().flatten().copied().collect()
    }

    /// `rank` was flushed: no queue needs to flush it.
    pub(super) fn flushed(&mut self, rank: usize) {
        self.queues.retain(|_, s| {
            s.remove(&rank);
            !s.is_empty()
        });
    }

    /// The queues with ranks to flush.
    pub(super) fn queues(&self) -> Vec<QueueId> {
        self.queues.keys().copied().collect()
    }

    /// Note a post to `rank`, a notification without data if `pure`: for
    /// one that follows such another (a run), how many changes sets wait
    /// parked for `rank`; `None` for the first of a run or any other post.
    pub(super) fn in_run(&mut self, rank: usize, pure: bool) -> Option<usize> {
        if !pure {
            self.runs.remove(&rank);
            None
        } else if self.runs.insert(rank) {
            None
        } else {
            Some(self.parked.get(&rank).map_or(0, |p| p.0.len()))
        }
    }

    /// Keep `changes`, to be issued to `rank` now without a flush, and
    /// lend them for that: the caller issues them while it still holds
    /// this (so that no flush of `rank` can have begun before, and unpark
    /// them, while they are not issued yet).
    pub(super) fn park(&mut self, rank: usize, changes: Box<[(u64, Change)]>) -> &[(u64, Change)] {
        let list = &mut self.parked.entry(rank).or_default().0;
        list.push(changes);
        list.last().expect("just pushed")
    }

    /// Take the buffers issued to `rank` so far, before a flush of `rank`
    /// begins: once it returned, [`Parked::completed`] frees them; if it
    /// failed, [`Unflushed::repark`] puts them back.
    pub(super) fn unpark(&mut self, rank: usize) -> Parked {
        self.parked.remove(&rank).unwrap_or_default()
    }

    /// Put back buffers whose flush failed.
    pub(super) fn repark(&mut self, rank: usize, mut p: Parked) {
        if !p.0.is_empty() {
            let list = &mut self.parked.entry(rank).or_default().0;
            list.append(&mut p.0);
        }
    }

    /// Every rank with parked buffers.
    #[cfg(test)]
    fn parked_ranks(&self) -> Vec<usize> {
        self.parked.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::Unflushed;

    #[test]
    fn only_queues_with_ranks_are_kept() {
        let mut u = Unflushed::default();
        assert!(u.queues().is_empty() && u.ranks().is_empty());
        u.insert(3, 7);
        u.insert(3, 2);
        u.insert(200, 7);
        assert_eq!(u.queues(), vec![3, 200]);
        assert_eq!(u.ranks().into_iter().collect::<Vec<_>>(), vec![2, 7]);
        u.flushed(7);
        assert_eq!(u.queues(), vec![3]);
        assert_eq!(u.take(3), vec![2]);
        assert!(u.queues().is_empty());
        assert_eq!(u.take(3), Vec::<usize>::new());
        u.restore(5, &[]);
        assert!(u.queues().is_empty());
        u.restore(5, &[4, 1]);
        assert_eq!(u.take(5), vec![1, 4]);
    }

    #[test]
    fn parked_buffers_stay_in_place_until_taken() {
        use super::Change;
        let mut u = Unflushed::default();
        let first = u.park(3, Box::new([(8, Change::Store32(7))])).as_ptr();
        for v in 0..100 {
            u.park(3, Box::new([(16, Change::Add64(v))]));
        }
        u.park(5, Box::new([(0, Change::Or64(1))]));
        assert_eq!(u.parked_ranks(), vec![3, 5]);
        let p = u.unpark(3);
        assert_eq!(p.len(), 101);
        // The first set did not move while the list grew.
        assert_eq!(p.0[0].as_ptr(), first);
        assert_eq!(u.parked_ranks(), vec![5]);
        u.repark(3, p);
        u.park(3, Box::new([(24, Change::Add64(1))]));
        assert_eq!(u.unpark(3).len(), 102);
        assert_eq!(u.unpark(3).len(), 0);
        u.unpark(5).completed();
        assert!(u.parked_ranks().is_empty());
    }

    #[test]
    fn a_run_is_notifications_without_data_one_after_another() {
        use super::Change;
        let mut u = Unflushed::default();
        assert_eq!(u.in_run(2, true), None, "the first of a run");
        assert_eq!(u.in_run(2, true), Some(0));
        u.park(2, Box::new([(0, Change::Or64(1))]));
        assert_eq!(u.in_run(2, true), Some(1));
        assert_eq!(u.in_run(3, true), None, "runs are per rank");
        assert_eq!(u.in_run(2, false), None, "data ends it");
        assert_eq!(u.in_run(2, true), None, "and the next starts one");
        assert_eq!(u.in_run(2, true), Some(1));
    }
}
