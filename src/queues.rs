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

use crate::config::RESERVED_SEGMENT;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{QueueId, Timeout};
use std::sync::atomic::Ordering::SeqCst;

impl Context {
    /// Wait until every request posted to `queue` has completed locally
    /// (`gaspi_wait`): source buffers of writes may be reused, read data is
    /// in place. Empties the queue.
    ///
    /// A request whose target had failed (posted before the program
    /// acknowledged the failure, [`Context::acknowledge_failures`]) makes
    /// this wait fail with [`Error::RankFailed`] naming it, once: the queue
    /// is empty afterwards, and [`Context::state_vec`] shows the rank.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.wait(0, gaspi::Timeout::Block)?;
    /// assert_eq!(ctx.queue_size(0)?, 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn wait(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        let q = self.queues.get(queue)?;
        self.engine.wait(queue, timeout)?;
        q.posted.store(0, SeqCst);
        match q.take_failure() {
            // Given up once acknowledged, as the transport's requests are.
            Some(rank) if !self.engine.acknowledged(rank) => Err(Error::RankFailed { rank }),
            _ => Ok(()),
        }
    }

    /// [`Context::wait`], then remote completion: every write posted to
    /// `queue` since the last flush is in place at its target, for any
    /// rank that learns of it afterwards by any path (MPI's flush and
    /// unlock need this; GASPI's `wait` promises local completion only).
    /// The native engine completes writes when they are posted; the GPI-2
    /// engine reads one byte back from every other-node rank written to
    /// (see the GPI-2 transport's `flush`).
    pub(crate) fn flush(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        self.wait(queue, timeout)?;
        // The runtime's window exists on every rank of a job of several
        // nodes, registered with every rank.
        self.engine.flush(queue, (RESERVED_SEGMENT, 0), timeout)
    }

    /// Before a barrier: every write that a `wait` completed is in place at
    /// its target once the barrier ends, on every engine (GASPI promises
    /// only local completion; GPI-2's TCP device completes a write once it
    /// is in the socket, so the GPI-2 engine flushes the queues written
    /// to other nodes since their last flush).
    pub(crate) fn flush_written(&self, timeout: Timeout) -> Result<()> {
        self.engine.flush_written((RESERVED_SEGMENT, 0), timeout)
    }

    /// Discard the requests of `queue` (`gaspi_queue_purge`). On the native
    /// engine they have completed already, so this only empties the count;
    /// the GPI-2 engine purges GPI-2's queue (up to `timeout`: GPI-2 takes
    /// the requests' completions, failed ones included, off the queue).
    ///
    /// ```
    /// # use gaspi::{Alloc, Local, Remote, Timeout};
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// ctx.write(Local::new(0, 0), Remote::new(ctx.rank(), 0, 32), 8, 1, Timeout::Block)?;
    /// // Give up on the queue's requests (after an error, say).
    /// ctx.queue_purge(1, Timeout::Block)?;
    /// assert_eq!(ctx.queue_size(1)?, 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn queue_purge(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        let q = self.queues.get(queue)?;
        self.engine.purge(queue, timeout)?;
        q.clear();
        Ok(())
    }

    /// Requests posted to `queue` since its last wait (`gaspi_queue_size`).
    ///
    /// ```
    /// # use gaspi::{Alloc, Local, Notification, Remote, Timeout};
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// let to = Remote::new(ctx.rank(), 0, 32);
    /// ctx.write_notify(Local::new(0, 0), to, 8, Notification::new(0, 1), 0, Timeout::Block)?;
    /// assert_eq!(ctx.queue_size(0)?, 2); // the data and the notification
    /// ctx.wait(0, Timeout::Block)?;
    /// assert_eq!(ctx.queue_size(0)?, 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn queue_size(&self, queue: QueueId) -> Result<u32> {
        Ok(self.queues.get(queue)?.posted.load(SeqCst))
    }

    /// Number of existing queues (`gaspi_queue_num`).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config { queue_num: 3, ..Default::default() })?;
    /// assert_eq!(ctx.queue_num(), 3);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn queue_num(&self) -> u32 {
        self.queues
            .user()
            .iter()
            .filter(|q| q.exists.load(SeqCst))
            .count() as u32
    }

    /// Depth of every queue (`gaspi_queue_size_max`).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config { queue_size_max: 64, ..Default::default() })?;
    /// assert_eq!(ctx.queue_size_max(), 64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn queue_size_max(&self) -> u32 {
        self.queues.size_max
    }

    /// Most queues that can exist at once (`gaspi_queue_max`): [`QUEUE_MAX`],
    /// or two fewer on the GPI-2 engine, which keeps GPI-2's last two queues
    /// for the runtime.
    ///
    /// [`QUEUE_MAX`]: crate::QUEUE_MAX
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// while ctx.queue_num() < ctx.queue_max() {
    ///     ctx.queue_create()?;
    /// }
    /// assert!(matches!(ctx.queue_create(), Err(gaspi::Error::TooManyQueues { .. })));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn queue_max(&self) -> u32 {
        self.queues.max
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
        for (i, q) in self.queues.user().iter().enumerate() {
            if q.exists
                .compare_exchange(false, true, SeqCst, SeqCst)
                .is_ok()
            {
                q.clear();
                return Ok(i as QueueId);
            }
        }
        Err(Error::TooManyQueues {
            max: self.queues.max,
        })
    }

    /// Delete a queue (`gaspi_queue_delete`). Requests on it have completed
    /// (see the module documentation), so nothing is lost.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config { queue_num: 2, ..Default::default() })?;
    /// ctx.queue_delete(1)?;
    /// assert!(matches!(ctx.wait(1, gaspi::Timeout::Test), Err(gaspi::Error::InvalidQueue { queue: 1, .. })));
    /// assert_eq!(ctx.queue_create()?, 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn queue_delete(&self, queue: QueueId) -> Result<()> {
        let q = self.queues.get(queue)?;
        q.exists.store(false, SeqCst);
        q.clear();
        Ok(())
    }
}
