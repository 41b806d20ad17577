//! Waiting for and consuming notifications (`gaspi_notify_waitsome`,
//! `gaspi_notify_reset`).
//!
//! A notification is a non-zero value at an id of a segment's table, set by
//! `write_notify`, `notify`, `write_list_notify` (by the writer) or
//! `read_notify` (locally, when the read data has arrived). It stays set
//! until [`Context::notify_reset`] takes it: reset is atomic, so when several
//! threads race for one notification exactly one gets its value and the
//! others get 0.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::onesided::check_notification_id;
use crate::types::{NotificationId, NotificationValue, SegmentId, Timeout};
use std::ops::Range;

impl Context {
    /// Wait until some notification in `ids` of local segment `segment` is
    /// set, and return the lowest such id (`gaspi_notify_waitsome`). The
    /// notification stays set: take it with [`Context::notify_reset`].
    ///
    /// With [`Timeout::Test`] it only looks; on timeout it returns
    /// [`Error::Timeout`]. If a rank has failed (and the failure was not
    /// acknowledged) it returns [`Error::RankFailed`] rather than wait for
    /// data that may never come.
    ///
    /// Large ranges cost little: the table keeps a summary bitmap, so a wait
    /// over 65,536 ids reads about 17 words, not 65,536 values.
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Notification, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// assert!(ctx.notify_waitsome(0, 0..100, Timeout::Test).unwrap_err().is_timeout());
    /// ctx.notify(ctx.rank(), 0, Notification::new(42, 7), 0, Timeout::Block)?;
    /// assert_eq!(ctx.notify_waitsome(0, 0..100, Timeout::Block)?, 42);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify_waitsome(
        &self,
        segment: SegmentId,
        ids: Range<NotificationId>,
        timeout: Timeout,
    ) -> Result<NotificationId> {
        self.check_segment_id(segment)?;
        let obj = self.engine.local_arc(segment)?;
        if ids.start >= ids.end {
            return Err(Error::InvalidArgument(format!(
                "notify_waitsome over the empty id range {}..{}",
                ids.start, ids.end
            )));
        }
        check_notification_id(&obj, ids.end - 1)?;
        let table = obj.notifications();
        let deadline = timeout.deadline();
        self.engine.waiter.wait(
            table.ww,
            deadline,
            || table.find(ids.clone()),
            || self.engine.faults(),
        )
    }

    /// Atomically take notification `id` of local segment `segment`: return
    /// its value and set it to 0 (`gaspi_notify_reset`). Returns 0 if it was
    /// not set (or another thread took it first).
    pub fn notify_reset(
        &self,
        segment: SegmentId,
        id: NotificationId,
    ) -> Result<NotificationValue> {
        self.check_segment_id(segment)?;
        self.engine.run(|pin| {
            let obj = self.engine.local(pin, segment)?;
            check_notification_id(obj, id)?;
            Ok(obj.notifications().reset(id))
        })
    }

    /// Notifications per segment of this rank (`gaspi_notification_num`).
    pub fn notification_num(&self) -> u32 {
        self.config.notification_num
    }
}
