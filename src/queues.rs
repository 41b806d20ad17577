//! Queues of one-sided requests: creation, depth accounting, local
//! completion (`gaspi_wait`).
//!
//! A queue counts the requests posted since its last `wait`, as GPI-2 does
//! with its InfiniBand device: a write, read or notify is one request, a
//! `write_notify`/`read_notify` two, a list of `n` elements `n` (`n + 1`
//! with its notification). Posting beyond [`Config::queue_size_max`]
//! fails with [`Error::QueueFull`] and posts nothing; `wait` empties the
//! queue. On the native engine every request has completed, locally and at
//! the target, when its post returns, so `wait` never blocks.
//!
//! [`Config::queue_size_max`]: crate::Config::queue_size_max

use crate::config::QUEUE_MAX;
use crate::context::{Context, RESERVED_QUEUE, RESERVED_SEGMENT};
use crate::error::{Error, Result};
use crate::types::{QueueId, Timeout};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};

#[derive(Debug, Default)]
struct Queue {
    exists: AtomicBool,
    posted: AtomicU32,
}

/// The queues of a rank.
#[derive(Debug)]
pub(crate) struct Queues {
    slots: Vec<Queue>,
    size_max: u32,
}

impl Queues {
    pub(crate) fn new(num: u32, size_max: u32) -> Queues {
        // The user's QUEUE_MAX, then the runtime's own.
        let slots: Vec<Queue> = (0..=QUEUE_MAX).map(|_| Queue::default()).collect();
        for q in &slots[..num as usize] {
            q.exists.store(true, SeqCst);
        }
        slots[RESERVED_QUEUE as usize].exists.store(true, SeqCst);
        Queues { slots, size_max }
    }

    fn get(&self, queue: QueueId) -> Result<&Queue> {
        if queue == RESERVED_QUEUE && !crate::context::in_internal() {
            return Err(Error::InvalidQueue {
                queue,
                num: QUEUE_MAX,
            });
        }
        self.slots
            .get(queue as usize)
            .filter(|q| q.exists.load(SeqCst))
            .ok_or_else(|| Error::InvalidQueue {
                queue,
                num: QUEUE_MAX,
            })
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

impl Context {
    /// Wait until every request posted to `queue` has completed locally
    /// (`gaspi_wait`): source buffers of writes may be reused, read data is
    /// in place. Empties the queue.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.wait(0, gaspi::Timeout::Block)?;
    /// assert_eq!(ctx.queue_size(0)?, 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn wait(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        let q = self.queues.get(queue)?;
        if let Some(g) = &self.engine.remote {
            let deadline = timeout.deadline();
            loop {
                match g.wait(queue, deadline.timeout()) {
                    // Requests to ranks whose failure the user acknowledged
                    // are given up, as on one host, where they completed.
                    Err(Error::RankFailed { .. })
                        if g.corrupt_ranks()
                            .iter()
                            .all(|&r| self.engine.acknowledged(r)) => {}
                    done => break done?,
                }
            }
        }
        q.posted.store(0, SeqCst);
        Ok(())
    }

    /// [`Context::wait`], then remote completion: every write posted to
    /// `queue` since the last flush is in place at its target, for any
    /// rank that learns of it afterwards by any path (MPI's flush and
    /// unlock need this; GASPI's `wait` promises local completion only).
    /// The native engine completes writes when they are posted; the GPI-2
    /// engine reads one byte back from every other-node rank written to
    /// (see `Gpi2::flush`).
    pub(crate) fn flush(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        self.wait(queue, timeout)?;
        match &self.engine.remote {
            // The runtime's window exists on every rank of a job of
            // several nodes, registered with every rank.
            Some(g) if self.num_nodes() > 1 => g.flush(queue, (RESERVED_SEGMENT, 0), timeout),
            _ => Ok(()),
        }
    }

    /// Discard the requests of `queue` (`gaspi_queue_purge`). On the native
    /// engine they have completed already, so this only empties the count;
    /// the GPI-2 engine purges GPI-2's queue (up to `timeout`: GPI-2 takes
    /// the requests' completions, failed ones included, off the queue).
    pub fn queue_purge(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        let q = self.queues.get(queue)?;
        if let Some(g) = &self.engine.remote {
            g.purge(queue, timeout)?;
        }
        q.posted.store(0, SeqCst);
        Ok(())
    }

    /// Requests posted to `queue` since its last wait (`gaspi_queue_size`).
    pub fn queue_size(&self, queue: QueueId) -> Result<u32> {
        Ok(self.queues.get(queue)?.posted.load(SeqCst))
    }

    /// Number of existing queues (`gaspi_queue_num`).
    pub fn queue_num(&self) -> u32 {
        self.queues.slots[..QUEUE_MAX as usize]
            .iter()
            .filter(|q| q.exists.load(SeqCst))
            .count() as u32
    }

    /// Depth of every queue (`gaspi_queue_size_max`).
    pub fn queue_size_max(&self) -> u32 {
        self.queues.size_max
    }

    /// Most queues that can exist at once (`gaspi_queue_max`).
    pub fn queue_max(&self) -> u32 {
        QUEUE_MAX
    }

    /// Create a queue and return its id, the lowest free one
    /// (`gaspi_queue_create`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config { queue_num: 1, ..Default::default() })?;
    /// let q = ctx.queue_create()?;
    /// assert_eq!(q, 1);
    /// ctx.queue_delete(q)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn queue_create(&self) -> Result<QueueId> {
        for (i, q) in self.queues.slots[..QUEUE_MAX as usize].iter().enumerate() {
            if q.exists
                .compare_exchange(false, true, SeqCst, SeqCst)
                .is_ok()
            {
                q.posted.store(0, SeqCst);
                return Ok(i as QueueId);
            }
        }
        Err(Error::TooManyQueues { max: QUEUE_MAX })
    }

    /// Delete a queue (`gaspi_queue_delete`). Requests on it have completed
    /// (see the module documentation), so nothing is lost.
    pub fn queue_delete(&self, queue: QueueId) -> Result<()> {
        let q = self.queues.get(queue)?;
        q.exists.store(false, SeqCst);
        q.posted.store(0, SeqCst);
        Ok(())
    }
}
