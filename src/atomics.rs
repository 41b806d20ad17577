//! Atomic operations on 8-byte words of any rank's segments
//! (`gaspi_atomic_fetch_add`, `gaspi_atomic_compare_swap`).
//!
//! The word must be 8-byte aligned within its segment (segments start on a
//! page, so the offset must be a multiple of 8). The operation is atomic
//! with respect to every other atomic on the same word, from any rank; the
//! owner reads such words locally with
//! [`SegmentView::atomic_u64`](crate::SegmentView::atomic_u64).
//!
//! Under the GPI-2 engine with several nodes, every atomic goes through
//! GPI-2, whose atomics do not exclude the CPU's: change such words only
//! with these calls (loads through `atomic_u64` stay fine), and address a
//! window's word through the same rank everywhere.

use crate::context::Context;
use crate::context::traffic::Op;
use crate::engine::transport::AtomicOp;
use crate::error::{Error, Result};
use crate::types::{Remote, Timeout};

impl Context {
    /// An atomic on a word of a window that a rank of the target's node may
    /// be waiting on (a lock hand-off): the target node's waiters are woken
    /// after it, as a posted notification wakes them.
    pub(crate) fn atomic_wake(&self, at: Remote, op: AtomicOp) -> Result<u64> {
        self.atomic_op(at, true, op, Timeout::Block)
    }

    /// `op` on the word `at` (one engine call: a hardware atomic, or the
    /// transport's). With `wake`, the waiters of the word's node are woken
    /// after it.
    fn atomic_op(&self, at: Remote, wake: bool, op: AtomicOp, timeout: Timeout) -> Result<u64> {
        if at.offset % 8 != 0 {
            return Err(Error::MisalignedAtomic { offset: at.offset });
        }
        self.check_segment_id(at.segment)?;
        self.engine.check_rank(at.rank)?;
        let old = self.engine.atomic(at, op, wake, timeout)?;
        self.traffic.count(self.is_inter(at.rank), Op::Atomic, 1, 0);
        Ok(old)
    }

    /// Add `value` to the word at `at` and return its previous value
    /// (`gaspi_atomic_fetch_add`). Wraps around on overflow.
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// let word = Remote::new(ctx.rank(), 0, 8);
    /// assert_eq!(ctx.atomic_fetch_add(word, 5, Timeout::Block)?, 0);
    /// assert_eq!(ctx.atomic_fetch_add(word, 1, Timeout::Block)?, 5);
    /// assert!(ctx.atomic_fetch_add(Remote::new(ctx.rank(), 0, 4), 1, Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn atomic_fetch_add(&self, at: Remote, value: u64, timeout: Timeout) -> Result<u64> {
        self.atomic_op(at, false, AtomicOp::FetchAdd(value), timeout)
    }

    /// If the word at `at` equals `comparator`, replace it with `new`;
    /// return the previous value either way (`gaspi_atomic_compare_swap`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// let lock = Remote::new(ctx.rank(), 0, 0);
    /// assert_eq!(ctx.atomic_compare_swap(lock, 0, 1, Timeout::Block)?, 0); // taken
    /// assert_eq!(ctx.atomic_compare_swap(lock, 0, 1, Timeout::Block)?, 1); // busy
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn atomic_compare_swap(
        &self,
        at: Remote,
        comparator: u64,
        new: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        self.atomic_op(
            at,
            false,
            AtomicOp::CompareSwap {
                old: comparator,
                new,
            },
            timeout,
        )
    }

    /// The largest value an atomic word holds (`gaspi_atomic_max`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_alloc(0, 8, gaspi::Alloc::Initialized)?;
    /// let word = gaspi::Remote::new(ctx.rank(), 0, 0);
    /// ctx.atomic_fetch_add(word, ctx.atomic_max(), gaspi::Timeout::Block)?;
    /// // Wraps around.
    /// assert_eq!(ctx.atomic_fetch_add(word, 1, gaspi::Timeout::Block)?, u64::MAX);
    /// assert_eq!(ctx.segment::<u64>(0)?.get(0), 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn atomic_max(&self) -> u64 {
        u64::MAX
    }
}
