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
use crate::engine::notify::{Counters, NotificationTable};
use crate::engine::segment::SegmentObject;
use crate::engine::transfer::check_notification_id;
use crate::error::{Error, Result};
use crate::types::{Deadline, NotificationId, NotificationValue, SegmentId, Timeout};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

/// How many notifications a window's table has received and given out,
/// node-wide, since the window was created. Both only grow.
///
/// ```
/// # use gaspi::{Config, Context, GroupId, Notification, Timeout};
/// # let ctx = Context::init(Config::default())?;
/// let win = ctx.window_create(0, 64, GroupId::ALL, Timeout::Block)?;
/// ctx.notify(ctx.rank(), 0, Notification::new(1, 1), 0, Timeout::Block)?;
/// assert_eq!(ctx.notify_counts(0)?, gaspi::NotifyCounts { posted: 1, claimed: 0 });
/// # drop(win);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NotifyCounts {
    /// Notifications posted into the table (by any rank, any node).
    pub posted: u64,
    /// Notifications taken from it ([`Context::notify_claim`] or
    /// [`Context::notify_reset`] of a set notification).
    pub claimed: u64,
}

/// Which of the two counts to wait for.
#[derive(Clone, Copy)]
enum Count {
    Posted,
    Claimed,
}

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
    /// An empty range `n..n` (GASPI's `num == 0`) returns `Ok(n)` at once,
    /// as the GASPI standard says of `gaspi_notify_waitsome`: nothing is
    /// waited for, and no notification stands behind that id. The segment
    /// must exist and `n` must not exceed [`Context::notification_num`]; a
    /// reversed range (`start > end`) is an [`Error::InvalidArgument`].
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Notification, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// assert!(ctx.notify_waitsome(0, 0..100, Timeout::Test).unwrap_err().is_timeout());
    /// assert_eq!(ctx.notify_waitsome(0, 0..0, Timeout::Block)?, 0); // nothing to wait for
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
        if ids.start == ids.end {
            let num = self.local_table(segment)?.notification_num();
            return if ids.start <= num {
                Ok(ids.start)
            } else {
                Err(Error::InvalidNotificationId { id: ids.start, num })
            };
        }
        let obj = self.table_of(segment, &ids)?;
        let table = obj.notifications();
        let deadline = timeout.deadline();
        self.engine.patience().wait(
            table.ww,
            deadline,
            || {
                self.engine.pump(segment, &obj, ids.clone());
                table.find(ids.clone())
            },
            || self.engine.faults(),
        )
    }

    /// Atomically take notification `id` of local segment `segment`: return
    /// its value and set it to 0 (`gaspi_notify_reset`). Returns 0 if it was
    /// not set (or another thread took it first).
    ///
    /// ```
    /// # use gaspi::{Alloc, Config, Context, Notification, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// ctx.notify(ctx.rank(), 0, Notification::new(5, 2), 0, Timeout::Block)?;
    /// assert_eq!(ctx.notify_reset(0, 5)?, 2); // taken
    /// assert_eq!(ctx.notify_reset(0, 5)?, 0); // nothing left
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify_reset(
        &self,
        segment: SegmentId,
        id: NotificationId,
    ) -> Result<NotificationValue> {
        self.check_segment_id(segment)?;
        self.engine.run(|pin| {
            let obj = self.engine.local(pin, segment)?;
            check_notification_id(obj, id)?;
            // Notifications from other hosts land with the transport
            // first: those of this id that arrived before this call are
            // moved into the table and taken with it, as GPI-2's one
            // table holds every notification that arrived. Taking the
            // table's value alone left them to show up after the reset,
            // as notifications nobody sent since (a notification
            // completed before a barrier, reset after it, came back).
            self.engine.pump(segment, obj, id..id + 1);
            Ok(obj.notifications().claim(id).unwrap_or(0))
        })
    }

    /// Wait until some notification in `ids` of local segment `segment` is
    /// set and take it: returns its id and value. Of several ranks (sharing
    /// a window's table) or threads claiming at once, each notification
    /// goes to exactly one; the others keep waiting for the next. In a
    /// window, claims are counted ([`Context::notify_counts`]).
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, Notification, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = ctx.window_create(0, 64, GroupId::ALL, Timeout::Block)?;
    /// ctx.notify(ctx.rank(), 0, Notification::new(9, 3), 0, Timeout::Block)?;
    /// assert_eq!(ctx.notify_claim(0, 0..16, Timeout::Block)?, (9, 3));
    /// assert_eq!(ctx.notify_counts(0)?.claimed, 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify_claim(
        &self,
        segment: SegmentId,
        ids: Range<NotificationId>,
        timeout: Timeout,
    ) -> Result<(NotificationId, NotificationValue)> {
        self.claim_or_done(segment, ids, None, timeout, || false)
            .map(|c| c.expect("without a target count a claim is the only way out"))
    }

    /// Claim a notification in `ids` of window `segment`, or return `None`
    /// once the node has claimed `claimed` notifications in total: the loop
    /// of Al Ahad et al. 2018's allgatherv ("while the node has not received all
    /// blocks: claim one"), where every rank of the node stops when the
    /// last block was taken, by whichever rank.
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, Notification, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.window_create(0, 64, GroupId::ALL, Timeout::Block)?;
    /// ctx.notify(ctx.rank(), 0, Notification::new(1, 7), 0, Timeout::Block)?;
    /// assert_eq!(ctx.notify_claim_until(0, 0..4, 1, Timeout::Block)?, Some((1, 7)));
    /// assert_eq!(ctx.notify_claim_until(0, 0..4, 1, Timeout::Block)?, None); // all taken
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify_claim_until(
        &self,
        segment: SegmentId,
        ids: Range<NotificationId>,
        claimed: u64,
        timeout: Timeout,
    ) -> Result<Option<(NotificationId, NotificationValue)>> {
        self.claim_or_done(segment, ids, Some(claimed), timeout, || false)
    }

    /// [`Context::notify_claim_until`] for a collective that knows when the
    /// ranks that may run on this rank's core have nothing to do but wait,
    /// as this rank does, for ranks of other cores: while `idle_core` says
    /// so, the automatic mode spins where it would yield
    /// ([`Patience::wait_or_spin`](crate::engine::wait::Patience::wait_or_spin)).
    pub(crate) fn notify_claim_until_or_spin(
        &self,
        segment: SegmentId,
        ids: Range<NotificationId>,
        claimed: u64,
        timeout: Timeout,
        idle_core: impl FnMut() -> bool,
    ) -> Result<Option<(NotificationId, NotificationValue)>> {
        self.claim_or_done(segment, ids, Some(claimed), timeout, idle_core)
    }

    fn claim_or_done(
        &self,
        segment: SegmentId,
        ids: Range<NotificationId>,
        done_at: Option<u64>,
        timeout: Timeout,
        idle_core: impl FnMut() -> bool,
    ) -> Result<Option<(NotificationId, NotificationValue)>> {
        let obj = self.table_of(segment, &ids)?;
        let table = obj.notifications();
        let done = match done_at {
            Some(k) => {
                let c = self.counters(&obj, segment)?;
                Some((&c.claimed, k))
            }
            None => None,
        };
        self.engine.patience().wait_or_spin(
            table.ww,
            timeout.deadline(),
            || {
                if let Some((claimed, k)) = done {
                    if claimed.load(SeqCst) >= k {
                        return Some(None);
                    }
                }
                self.engine.pump(segment, &obj, ids.clone());
                // A lost race means: look again at once, since others may
                // be set (None from find: nothing is).
                loop {
                    let id = table.find(ids.clone())?;
                    if let Some(v) = table.claim(id) {
                        return Some(Some((id, v)));
                    }
                }
            },
            idle_core,
            || self.engine.faults(),
        )
    }

    /// The node-wide counts of the notification table of window `segment`.
    /// Fails with [`Error::NotAWindow`] on a rank's own segment, whose
    /// table does not count.
    ///
    /// ```
    /// # use gaspi::{Alloc, Config, Context, GroupId, Notification, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let _win = ctx.window_create(0, 64, GroupId::ALL, Timeout::Block)?;
    /// ctx.notify(ctx.rank(), 0, Notification::new(2, 1), 0, Timeout::Block)?;
    /// ctx.notify_claim(0, 0..8, Timeout::Block)?;
    /// let c = ctx.notify_counts(0)?;
    /// assert_eq!((c.posted, c.claimed), (1, 1));
    /// // A plain segment's table does not count.
    /// ctx.segment_alloc(1, 64, Alloc::Initialized)?;
    /// assert!(matches!(ctx.notify_counts(1), Err(gaspi::Error::NotAWindow { .. })));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify_counts(&self, segment: SegmentId) -> Result<NotifyCounts> {
        let obj = self.local_table(segment)?;
        let c = self.counters(&obj, segment)?;
        Ok(NotifyCounts {
            posted: c.posted.load(SeqCst),
            claimed: c.claimed.load(SeqCst),
        })
    }

    /// Wait until at least `at_least` notifications have been posted into
    /// window `segment` since its creation; returns the count then. Waiting
    /// for a total rather than "one more" makes rounds unambiguous: round
    /// `k` waits for the total of rounds `0..=k`.
    ///
    /// ```
    /// # use gaspi::{Config, Context, GroupId, Notification, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let _win = ctx.window_create(0, 64, GroupId::ALL, Timeout::Block)?;
    /// for round in 0..3u64 {
    ///     ctx.notify(ctx.rank(), 0, Notification::new(round as u32, 1), 0, Timeout::Block)?;
    ///     // Round k waits for the total of rounds 0..=k.
    ///     assert!(ctx.notify_wait_posted(0, round + 1, Timeout::Block)? >= round + 1);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify_wait_posted(
        &self,
        segment: SegmentId,
        at_least: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        self.wait_count(segment, Count::Posted, at_least, timeout)
    }

    /// Wait until at least `at_least` notifications have been claimed from
    /// window `segment` (by any rank of the node); returns the count then.
    ///
    /// ```
    /// # use gaspi::{Config, Context, GroupId, Notification, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let _win = ctx.window_create(0, 64, GroupId::ALL, Timeout::Block)?;
    /// ctx.notify(ctx.rank(), 0, Notification::new(0, 1), 0, Timeout::Block)?;
    /// assert!(ctx.notify_wait_claimed(0, 1, Timeout::Test).unwrap_err().is_timeout());
    /// ctx.notify_claim(0, 0..1, Timeout::Block)?;
    /// assert_eq!(ctx.notify_wait_claimed(0, 1, Timeout::Block)?, 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify_wait_claimed(
        &self,
        segment: SegmentId,
        at_least: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        self.wait_count(segment, Count::Claimed, at_least, timeout)
    }

    fn wait_count(
        &self,
        segment: SegmentId,
        which: Count,
        at_least: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        let obj = self.local_table(segment)?;
        let c = self.counters(&obj, segment)?;
        let counter = match which {
            Count::Posted => &c.posted,
            Count::Claimed => &c.claimed,
        };
        let ww = obj.notifications().ww;
        self.engine.patience().wait(
            ww,
            timeout.deadline(),
            || {
                self.engine.pump(segment, &obj, 0..obj.notification_num());
                let n = counter.load(SeqCst);
                (n >= at_least).then_some(n)
            },
            || self.engine.faults(),
        )
    }

    /// Wait until notification `id` of local segment `segment` holds a
    /// value at least `tag` ([`tag_reached`]), without
    /// taking it: for values that every rank of a node reads, like the
    /// allgatherv's credits.
    pub(crate) fn await_notification_tag(
        &self,
        segment: SegmentId,
        id: NotificationId,
        tag: NotificationValue,
        deadline: Deadline,
    ) -> Result<()> {
        let obj = self.local_table(segment)?;
        check_notification_id(&obj, id)?;
        let table = obj.notifications();
        self.engine.patience().wait(
            table.ww,
            deadline,
            || {
                self.engine.pump(segment, &obj, id..id + 1);
                let v = table.values[id as usize].load(SeqCst);
                tag_reached(v, tag).then_some(())
            },
            || self.engine.faults(),
        )
    }

    /// This rank's segment `segment`, kept beyond a pin for blocking waits.
    fn local_table(&self, segment: SegmentId) -> Result<Arc<SegmentObject>> {
        self.check_segment_id(segment)?;
        self.engine.local_arc(segment)
    }

    /// Segment `segment`, checked for a non-empty id range within its table.
    fn table_of(
        &self,
        segment: SegmentId,
        ids: &Range<NotificationId>,
    ) -> Result<Arc<SegmentObject>> {
        let obj = self.local_table(segment)?;
        if ids.start >= ids.end {
            return Err(Error::InvalidArgument(format!(
                "an empty notification id range {}..{}",
                ids.start, ids.end
            )));
        }
        check_notification_id(&obj, ids.end - 1)?;
        Ok(obj)
    }

    fn counters<'a>(&self, obj: &'a SegmentObject, segment: SegmentId) -> Result<&'a Counters> {
        let table: NotificationTable<'a> = obj.notifications();
        table.counters.ok_or_else(|| Error::NotAWindow {
            rank: self.rank(),
            segment,
        })
    }

    /// Notifications per segment of this rank (`gaspi_notification_num`).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config { notification_num: 1024, ..Default::default() })?;
    /// ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// assert_eq!(ctx.notification_num(), 1024);
    /// let beyond = gaspi::Notification::new(1024, 1);
    /// assert!(ctx.notify(ctx.rank(), 0, beyond, 0, gaspi::Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notification_num(&self) -> u32 {
        self.config.notification_num
    }
}

/// Whether notification value `v` is `tag` or later, in wrapping order
/// (values that count calls; 0 is no value).
pub(crate) fn tag_reached(v: NotificationValue, tag: NotificationValue) -> bool {
    v != 0 && v.wrapping_sub(tag) as i32 >= 0
}
