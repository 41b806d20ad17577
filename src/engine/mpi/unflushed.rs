//! Per queue, the ranks this rank wrote to or read from since the queue's
//! last wait: what the wait, or the flush of everything before a barrier,
//! completes with `MPI_Win_flush`. Only queues with such ranks are kept,
//! so that a barrier looks at those alone (looking at all 256 possible
//! queues cost a barrier between two hosts about 1 us).

use crate::types::QueueId;
use std::collections::{BTreeMap, BTreeSet};

/// The ranks to flush, by queue.
#[derive(Debug, Default)]
pub(super) struct Unflushed {
    /// Never an empty set.
    queues: BTreeMap<QueueId, BTreeSet<usize>>,
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
}
