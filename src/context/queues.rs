//! A rank's queues: which exist, and how many requests each holds since
//! its last `wait` (GASPI's queue depth, see the `queues` chapter).

use crate::config::{QUEUE_MAX, RESERVED_QUEUE, in_internal};
use crate::error::{Error, Result};
use crate::types::{QueueId, Rank};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};

#[derive(Debug, Default)]
pub(crate) struct Queue {
    pub(crate) exists: AtomicBool,
    pub(crate) posted: AtomicU32,
    /// A request posted since the last `wait` whose target had failed:
    /// its rank plus one (0: none). The next `wait` reports it, as GPI-2's
    /// does a request that completed with an error.
    failed: AtomicU32,
}

impl Queue {
    /// A request posted to this queue failed because `rank` had: the next
    /// [`Queue::take_failure`] reports it (the first such rank until then).
    pub(crate) fn fail(&self, rank: Rank) {
        let _ = self
            .failed
            .compare_exchange(0, rank as u32 + 1, SeqCst, SeqCst);
    }

    /// The failure [`Queue::fail`] recorded, once: taking it clears it.
    pub(crate) fn take_failure(&self) -> Option<Rank> {
        match self.failed.swap(0, SeqCst) {
            0 => None,
            r => Some((r - 1) as Rank),
        }
    }

    /// Empty the queue: no requests, no failure to report.
    pub(crate) fn clear(&self) {
        self.posted.store(0, SeqCst);
        self.failed.store(0, SeqCst);
    }
}

/// The queues of a rank.
#[derive(Debug)]
pub(crate) struct Queues {
    /// `0..QUEUE_MAX` for the user (of which `0..max` usable), then the
    /// runtime's own ([`RESERVED_QUEUE`]).
    slots: Vec<Queue>,
    /// Queues the user may have (`Engine::queue_max`).
    pub(crate) max: u32,
    pub(crate) size_max: u32,
}

impl Queues {
    /// `num` queues of depth `size_max`, of at most `max` (`num <= max <=
    /// QUEUE_MAX`, checked by the configuration).
    pub(crate) fn new(num: u32, size_max: u32, max: u32) -> Queues {
        let slots: Vec<Queue> = (0..=QUEUE_MAX).map(|_| Queue::default()).collect();
        for q in &slots[..num as usize] {
            q.exists.store(true, SeqCst);
        }
        slots[RESERVED_QUEUE as usize].exists.store(true, SeqCst);
        Queues {
            slots,
            max,
            size_max,
        }
    }

    pub(crate) fn get(&self, queue: QueueId) -> Result<&Queue> {
        let invalid = || Error::InvalidQueue {
            queue,
            num: self.max,
        };
        if queue == RESERVED_QUEUE && !in_internal() {
            return Err(invalid());
        }
        self.slots
            .get(queue as usize)
            .filter(|q| q.exists.load(SeqCst))
            .ok_or_else(invalid)
    }

    /// The user's queues: the first `max`.
    pub(crate) fn user(&self) -> &[Queue] {
        &self.slots[..self.max as usize]
    }

    /// Check that `queue` exists.
    pub(crate) fn check(&self, queue: QueueId) -> Result<()> {
        self.get(queue).map(|_| ())
    }

    /// Account for `n` requests on `queue`, or fail with `QueueFull`.
    pub(crate) fn reserve(&self, queue: QueueId, n: u32) -> Result<()> {
        let q = self.get(queue)?;
        let mut cur = q.posted.load(SeqCst);
        loop {
            if cur.saturating_add(n) > self.size_max {
                return Err(Error::QueueFull {
                    queue,
                    posted: cur,
                    max: self.size_max,
                });
            }
            match q.posted.compare_exchange_weak(cur, cur + n, SeqCst, SeqCst) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }
}
