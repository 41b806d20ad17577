//! Atomic operations on 8-byte words of any rank's segments
//! (`gaspi_atomic_fetch_add`, `gaspi_atomic_compare_swap`).
//!
//! The word must be 8-byte aligned within its segment (segments start on a
//! page, so the offset must be a multiple of 8). The operation is atomic
//! with respect to every other atomic on the same word, from any rank; the
//! owner reads such words locally with
//! [`SegmentView::atomic_u64`](crate::SegmentView::atomic_u64).

use crate::context::Context;
use crate::error::{Error, Result};
use crate::onesided::check_range;
use crate::traffic::Op;
use crate::types::{Remote, Timeout};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

impl Context {
    fn atomic_word<R>(&self, at: Remote, op: impl FnOnce(&AtomicU64) -> R) -> Result<R> {
        self.atomic_word_then(at, false, op)
    }

    /// An atomic on a word of a window that a rank of the target's node may
    /// be waiting on (a lock hand-off): the target node's waiters are woken
    /// after it, as a posted notification wakes them.
    pub(crate) fn atomic_wake<R>(&self, at: Remote, op: impl FnOnce(&AtomicU64) -> R) -> Result<R> {
        self.atomic_word_then(at, true, op)
    }

    fn atomic_word_then<R>(
        &self,
        at: Remote,
        wake: bool,
        op: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R> {
        if at.offset % 8 != 0 {
            return Err(Error::MisalignedAtomic { offset: at.offset });
        }
        self.check_segment_id(at.segment)?;
        let mut op = Some(op);
        let old = self.engine.run(|pin| {
            let obj = self.engine.target(pin, at.rank, at.segment)?;
            check_range(obj, at.rank, at.segment, at.offset, 8)?;
            let op = op
                .take()
                .expect("runs once: nothing fails after the lookup");
            let old = op(obj.atomic_u64(at.offset));
            if wake {
                obj.notifications().ww.wake();
            }
            Ok(old)
        })?;
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
    pub fn atomic_fetch_add(&self, at: Remote, value: u64, _timeout: Timeout) -> Result<u64> {
        self.atomic_word(at, |w| w.fetch_add(value, SeqCst))
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
        _timeout: Timeout,
    ) -> Result<u64> {
        self.atomic_word(at, |w| {
            match w.compare_exchange(comparator, new, SeqCst, SeqCst) {
                Ok(old) | Err(old) => old,
            }
        })
    }

    /// The largest value an atomic word holds (`gaspi_atomic_max`).
    pub fn atomic_max(&self) -> u64 {
        u64::MAX
    }
}
