//! One-sided communication on queues: write, read, their notified and list
//! forms, and notify (`gaspi_write`, `gaspi_read`, `gaspi_write_notify`, ...).
//!
//! Every operation checks all its arguments before it moves a byte: a list
//! with one bad element posts nothing. Then it takes its entries on the
//! queue ([`Error::QueueFull`] if they do not fit) and executes. On the
//! native engine the data has reached the target when the call returns, and
//! a notification is stored after its data with release ordering, so a rank
//! that sees the notification sees the data.

use crate::context::Context;
use crate::engine::Lookup;
use crate::engine::epoch::Pin;
use crate::engine::remote::{Gpi2, IDS, Post, Transfer};
use crate::engine::segment::SegmentObject;
use crate::error::{Error, Result};
use crate::traffic::Op;
use crate::types::{
    ListEntry, Local, Notification, NotificationId, QueueId, Rank, Remote, SegmentId, Timeout,
};

/// Which way the data of a transfer moves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Local segment to the target's (write).
    Put,
    /// Target's segment to the local one (read).
    Get,
}

/// A transfer with both segments resolved and both ranges checked.
struct Checked<'p> {
    local: &'p SegmentObject,
    local_offset: usize,
    remote: &'p SegmentObject,
    remote_offset: usize,
    size: usize,
}

/// The checked transfers of one operation: single operations, the common
/// case, need no allocation.
enum CheckedList<'p> {
    One([Checked<'p>; 1]),
    Many(Vec<Checked<'p>>),
}

impl<'p> CheckedList<'p> {
    fn as_slice(&self) -> &[Checked<'p>] {
        match self {
            CheckedList::One(c) => c,
            CheckedList::Many(v) => v,
        }
    }
}

/// Check that `offset + size` lies within `obj` (segment `segment` of `rank`).
pub(crate) fn check_range(
    obj: &SegmentObject,
    rank: Rank,
    segment: SegmentId,
    offset: usize,
    size: usize,
) -> Result<()> {
    check_within(obj.size(), rank, segment, offset, size)
}

/// Check that `offset + size` lies within `segment_size` bytes (segment
/// `segment` of `rank`, as this rank maps it or as the transport knows it).
pub(crate) fn check_within(
    segment_size: usize,
    rank: Rank,
    segment: SegmentId,
    offset: usize,
    size: usize,
) -> Result<()> {
    match offset.checked_add(size) {
        Some(end) if end <= segment_size => Ok(()),
        _ => Err(Error::OutOfBounds {
            rank,
            segment,
            offset,
            size,
            segment_size,
        }),
    }
}

/// Check a notification id against the table of `obj`.
pub(crate) fn check_notification_id(obj: &SegmentObject, id: NotificationId) -> Result<()> {
    if id < obj.notification_num() {
        Ok(())
    } else {
        Err(Error::InvalidNotificationId {
            id,
            num: obj.notification_num(),
        })
    }
}

impl Context {
    /// The checks of a transfer that do not depend on where the target is:
    /// its size, both segment ids, and the local range; returns the local
    /// segment.
    fn check_local<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        local: Local,
        remote_segment: SegmentId,
        size: usize,
    ) -> Result<&'p SegmentObject> {
        if size > self.config.transfer_size_max {
            return Err(Error::TransferTooLarge {
                size,
                max: self.config.transfer_size_max,
            });
        }
        self.check_segment_id(local.segment)?;
        self.check_segment_id(remote_segment)?;
        let l = self.engine.local(pin, local.segment)?;
        check_range(l, self.rank(), local.segment, local.offset, size)?;
        Ok(l)
    }

    fn check_transfer<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        local: Local,
        remote: Remote,
        size: usize,
    ) -> std::result::Result<Checked<'p>, Lookup> {
        let l = self.check_local(pin, local, remote.segment, size)?;
        let r = self.engine.target(pin, remote.rank, remote.segment)?;
        check_range(r, remote.rank, remote.segment, remote.offset, size)?;
        Ok(Checked {
            local: l,
            local_offset: local.offset,
            remote: r,
            remote_offset: remote.offset,
            size,
        })
    }

    /// The table a notification goes to, checked: segment `segment` of
    /// `rank`, id in range, value non-zero.
    fn check_notification<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        rank: Rank,
        segment: SegmentId,
        n: Notification,
    ) -> std::result::Result<&'p SegmentObject, Lookup> {
        if n.value == 0 {
            return Err(Error::ZeroNotificationValue.into());
        }
        self.check_segment_id(segment)?;
        let obj = self.engine.target(pin, rank, segment)?;
        check_notification_id(obj, n.id)?;
        Ok(obj)
    }

    /// The one routine behind every one-sided operation: check everything,
    /// reserve the queue entries, move the data, then post the notification.
    fn transfer(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
        queue: QueueId,
    ) -> Result<()> {
        self.queues.check(queue)?;
        self.engine.check_rank(rank)?;
        if let Some(g) = self.via_remote(rank) {
            self.transfer_remote(g, rank, entries, dir, notify, queue)?;
        } else {
            self.transfer_here(rank, entries, dir, notify, queue)?;
        }
        let inter = self.is_inter(rank);
        if !entries.is_empty() {
            let op = match dir {
                Direction::Put => Op::Write,
                Direction::Get => Op::Read,
            };
            let bytes = entries.iter().map(|e| e.size as u64).sum();
            self.traffic.count(inter, op, entries.len() as u64, bytes);
        }
        // A read's notification is set locally: not traffic.
        if notify.is_some() && dir == Direction::Put {
            self.traffic.count(inter, Op::Notify, 1, 0);
        }
        Ok(())
    }

    /// The transport to `rank` when it is on another node and the engine
    /// has one (GPI-2); `None` for load/store.
    pub(crate) fn via_remote(&self, rank: Rank) -> Option<&Gpi2> {
        self.engine.remote.as_ref().filter(|_| self.is_inter(rank))
    }

    /// Size of `rank`'s segment `segment` as the transport knows it.
    ///
    /// GPI-2 knows the segments registered with this rank, and keeps a
    /// deleted one's registration. For a rank of this host the directory
    /// tells a missing or deleted segment ([`Error::SegmentNotFound`]) from
    /// one not registered with this rank ([`Error::SegmentNotRegistered`]);
    /// for a rank of another host neither is visible: an unknown segment
    /// is [`Error::SegmentNotRegistered`], and an access to a segment its
    /// owner deleted is not detected (as in GPI-2; the owner keeps such
    /// memory until it terminates, so the access does no harm).
    pub(crate) fn remote_segment_size(
        &self,
        g: &Gpi2,
        rank: Rank,
        segment: SegmentId,
    ) -> Result<usize> {
        if self.engine.same_host(rank) && self.engine.entry(rank, segment).is_none() {
            return Err(Error::SegmentNotFound { rank, segment });
        }
        g.remote_size(rank, segment)
            .ok_or(Error::SegmentNotRegistered { rank, segment })
    }

    /// [`Context::transfer`] to another node through the transport: the
    /// same checks, against the sizes the transport knows; GPI-2 orders
    /// the notification after the data (see `engine::gpi2`).
    fn transfer_remote(
        &self,
        g: &Gpi2,
        rank: Rank,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
        queue: QueueId,
    ) -> Result<()> {
        // Failures of other hosts' ranks reach this host's control block
        // through the GPI-2 engine's failure watch.
        self.engine.check_alive(rank)?;
        let list = self.engine.run(|pin| {
            entries
                .iter()
                .map(|e| {
                    self.check_local(pin, e.local, e.remote_segment, e.size)?;
                    let size = self.remote_segment_size(g, rank, e.remote_segment)?;
                    check_within(size, rank, e.remote_segment, e.remote_offset, e.size)?;
                    Ok(Transfer {
                        local: (e.local.segment, e.local.offset as u64),
                        remote: (e.remote_segment, e.remote_offset as u64),
                        size: e.size as u64,
                    })
                })
                .collect::<std::result::Result<Vec<_>, Lookup>>()
        })?;
        let post = match (dir, notify) {
            (_, Some((_, _, n))) if n.value == 0 => return Err(Error::ZeroNotificationValue),
            (Direction::Put, Some((r, seg, n))) => {
                self.check_segment_id(seg)?;
                self.remote_segment_size(g, r, seg)?;
                // The target's table: as large as ours of the same segment
                // (windows are made collectively), at most what GPI-2 carries.
                let num = self
                    .engine
                    .local_arc(seg)
                    .map_or(self.config.notification_num, |o| o.notification_num())
                    .min(IDS);
                if n.id >= num {
                    return Err(Error::InvalidNotificationId { id: n.id, num });
                }
                Post::Write(Some((seg, n.id, n.value)))
            }
            (Direction::Put, None) => Post::Write(None),
            (Direction::Get, Some((_, seg, n))) => {
                let obj = self.engine.local_arc(seg)?;
                check_notification_id(&obj, n.id)?;
                if n.id >= IDS {
                    return Err(Error::InvalidNotificationId { id: n.id, num: IDS });
                }
                Post::Read(Some((seg, n.id)))
            }
            (Direction::Get, None) => Post::Read(None),
        };
        self.queues
            .reserve(queue, entries.len() as u32 + notify.is_some() as u32)?;
        g.post(rank, &list, post, queue)
    }

    /// [`Context::transfer`] within the node (or on the native engine):
    /// copies and a notification store.
    fn transfer_here(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
        queue: QueueId,
    ) -> Result<()> {
        self.engine.run(|pin| {
            let checked = match entries {
                [e] => {
                    CheckedList::One([self.check_transfer(pin, e.local, e.remote(rank), e.size)?])
                }
                _ => CheckedList::Many(
                    entries
                        .iter()
                        .map(|e| self.check_transfer(pin, e.local, e.remote(rank), e.size))
                        .collect::<std::result::Result<_, _>>()?,
                ),
            };
            let target = match notify {
                Some((r, seg, n)) => Some((self.check_notification(pin, r, seg, n)?, n)),
                None => None,
            };
            self.queues
                .reserve(queue, entries.len() as u32 + target.is_some() as u32)?;
            for c in checked.as_slice() {
                match dir {
                    Direction::Put => {
                        c.local
                            .copy_to(c.local_offset, c.remote, c.remote_offset, c.size)
                    }
                    Direction::Get => {
                        c.remote
                            .copy_to(c.remote_offset, c.local, c.local_offset, c.size)
                    }
                }
            }
            if let Some((obj, n)) = target {
                obj.notifications().post(n.id, n.value);
            }
            Ok(())
        })
    }

    fn check_list(&self, entries: &[ListEntry]) -> Result<()> {
        let max = self.config.rw_list_elem_max as usize;
        if entries.is_empty() || entries.len() > max {
            return Err(Error::InvalidArgument(format!(
                "a list operation takes 1..={max} elements (Config::rw_list_elem_max), got {}",
                entries.len()
            )));
        }
        Ok(())
    }

    /// Write `size` bytes from `src` to `dst` (`gaspi_write`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, GroupId, Local, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_create(0, 1024, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
    /// ctx.segment::<u8>(0)?.copy_from_slice(0, b"hello");
    /// let right = (ctx.rank() + 1) % ctx.num_ranks();
    /// ctx.write(Local::new(0, 0), Remote::new(right, 0, 512), 5, 0, Timeout::Block)?;
    /// ctx.wait(0, Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn write(
        &self,
        src: Local,
        dst: Remote,
        size: usize,
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        let e = ListEntry::new(src, dst.segment, dst.offset, size);
        self.transfer(dst.rank, &[e], Direction::Put, None, queue)
    }

    /// Read `size` bytes from `src` into `dst` (`gaspi_read`). The data is
    /// in place once [`Context::wait`] on the queue returns (on the native
    /// engine, already when this call returns).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, GroupId, Local, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_create(0, 64, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
    /// ctx.segment::<u64>(0)?.set(0, 11 + ctx.rank() as u64);
    /// ctx.barrier(GroupId::ALL, Timeout::Block)?;
    /// let left = (ctx.rank() + ctx.num_ranks() - 1) % ctx.num_ranks();
    /// ctx.read(Local::new(0, 8), Remote::new(left, 0, 0), 8, 0, Timeout::Block)?;
    /// ctx.wait(0, Timeout::Block)?;
    /// assert_eq!(ctx.segment::<u64>(0)?.get(1), 11 + left as u64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn read(
        &self,
        dst: Local,
        src: Remote,
        size: usize,
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        let e = ListEntry::new(dst, src.segment, src.offset, size);
        self.transfer(src.rank, &[e], Direction::Get, None, queue)
    }

    /// Write `size` bytes from `src` to `dst`, then set `notification` in
    /// the notification table of `dst`'s segment (`gaspi_write_notify`). A
    /// rank that sees the notification sees the data.
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, GroupId, Local, Notification, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_create(0, 64, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
    /// let me = ctx.rank();
    /// ctx.segment::<u64>(0)?.set(0, 99);
    /// ctx.write_notify(Local::new(0, 0), Remote::new(me, 0, 8), 8, Notification::new(3, 1), 0, Timeout::Block)?;
    /// let id = ctx.notify_waitsome(0, 0..16, Timeout::Block)?;
    /// assert_eq!((id, ctx.notify_reset(0, id)?), (3, 1));
    /// assert_eq!(ctx.segment::<u64>(0)?.get(1), 99);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn write_notify(
        &self,
        src: Local,
        dst: Remote,
        size: usize,
        notification: Notification,
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        let e = ListEntry::new(src, dst.segment, dst.offset, size);
        let n = Some((dst.rank, dst.segment, notification));
        self.transfer(dst.rank, &[e], Direction::Put, n, queue)
    }

    /// Read `size` bytes from `src` into `dst`, then set notification `id`
    /// to 1 in the table of the local segment `dst.segment`
    /// (`gaspi_read_notify`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// ctx.segment::<u64>(0)?.set(0, 5);
    /// ctx.read_notify(Local::new(0, 8), Remote::new(ctx.rank(), 0, 0), 8, 4, 0, Timeout::Block)?;
    /// // The local notification says the data is in place.
    /// assert_eq!(ctx.notify_waitsome(0, 4..5, Timeout::Block)?, 4);
    /// assert_eq!(ctx.notify_reset(0, 4)?, 1);
    /// assert_eq!(ctx.segment::<u64>(0)?.get(1), 5);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn read_notify(
        &self,
        dst: Local,
        src: Remote,
        size: usize,
        id: NotificationId,
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        let e = ListEntry::new(dst, src.segment, src.offset, size);
        let n = Some((self.rank(), dst.segment, Notification::new(id, 1)));
        self.transfer(src.rank, &[e], Direction::Get, n, queue)
    }

    /// Set `notification` in the table of segment `segment` of `rank`
    /// (`gaspi_notify`). It is seen after every write this rank posted
    /// before it to that rank.
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, GroupId, Notification, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_create(0, 64, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
    /// let right = (ctx.rank() + 1) % ctx.num_ranks();
    /// // "My data for you is complete", one id per sender.
    /// ctx.notify(right, 0, Notification::new(ctx.rank() as u32, 1), 0, Timeout::Block)?;
    /// let left = (ctx.rank() + ctx.num_ranks() - 1) % ctx.num_ranks();
    /// ctx.notify_waitsome(0, left as u32..left as u32 + 1, Timeout::Block)?;
    /// assert!(matches!(
    ///     ctx.notify(right, 0, Notification::new(0, 0), 0, Timeout::Block),
    ///     Err(gaspi::Error::ZeroNotificationValue)
    /// ));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notify(
        &self,
        rank: Rank,
        segment: SegmentId,
        notification: Notification,
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        self.transfer(
            rank,
            &[],
            Direction::Put,
            Some((rank, segment, notification)),
            queue,
        )
    }

    /// Write every element of `entries` to `rank` (`gaspi_write_list`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, ListEntry, Local, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 256, Alloc::Initialized)?;
    /// let v = ctx.segment::<u8>(0)?;
    /// v.copy_from_slice(0, b"ab");
    /// // Scatter two bytes to offsets 100 and 200 of the target's segment 0.
    /// let list = [ListEntry::new(Local::new(0, 0), 0, 100, 1), ListEntry::new(Local::new(0, 1), 0, 200, 1)];
    /// ctx.write_list(ctx.rank(), &list, 0, Timeout::Block)?;
    /// ctx.wait(0, Timeout::Block)?;
    /// assert_eq!((v.get(100), v.get(200)), (b'a', b'b'));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn write_list(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        self.check_list(entries)?;
        self.transfer(rank, entries, Direction::Put, None, queue)
    }

    /// Write every element of `entries` to `rank`, then set `notification`
    /// in the table of its segment `notification_segment`
    /// (`gaspi_write_list_notify`): the notification is seen after all the
    /// elements.
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, ListEntry, Local, Notification, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 256, Alloc::Initialized)?;
    /// ctx.segment::<u8>(0)?.copy_from_slice(0, b"xy");
    /// let list = [ListEntry::new(Local::new(0, 0), 0, 64, 2), ListEntry::new(Local::new(0, 0), 0, 128, 2)];
    /// ctx.write_list_notify(ctx.rank(), &list, 0, Notification::new(7, 1), 0, Timeout::Block)?;
    /// // Seeing the notification means both pieces are in place.
    /// assert_eq!(ctx.notify_waitsome(0, 7..8, Timeout::Block)?, 7);
    /// assert_eq!(ctx.segment::<u8>(0)?.get(129), b'y');
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn write_list_notify(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        notification_segment: SegmentId,
        notification: Notification,
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        self.check_list(entries)?;
        let n = Some((rank, notification_segment, notification));
        self.transfer(rank, entries, Direction::Put, n, queue)
    }

    /// Read every element of `entries` from `rank` (`gaspi_read_list`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, ListEntry, Local, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 256, Alloc::Initialized)?;
    /// let v = ctx.segment::<u8>(0)?;
    /// v.set(100, 1);
    /// v.set(200, 2);
    /// // Gather offsets 100 and 200 into bytes 0 and 1.
    /// let list = [ListEntry::new(Local::new(0, 0), 0, 100, 1), ListEntry::new(Local::new(0, 1), 0, 200, 1)];
    /// ctx.read_list(ctx.rank(), &list, 0, Timeout::Block)?;
    /// ctx.wait(0, Timeout::Block)?;
    /// assert_eq!((v.get(0), v.get(1)), (1, 2));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn read_list(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        self.check_list(entries)?;
        self.transfer(rank, entries, Direction::Get, None, queue)
    }

    /// Read every element of `entries` from `rank`, then set notification
    /// `id` to 1 in the table of local segment `notification_segment`
    /// (`gaspi_read_list_notify`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, ListEntry, Local, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 256, Alloc::Initialized)?;
    /// ctx.segment::<u8>(0)?.set(100, 9);
    /// let list = [ListEntry::new(Local::new(0, 0), 0, 100, 1)];
    /// ctx.read_list_notify(ctx.rank(), &list, 0, 12, 0, Timeout::Block)?;
    /// assert_eq!(ctx.notify_waitsome(0, 12..13, Timeout::Block)?, 12);
    /// assert_eq!(ctx.segment::<u8>(0)?.get(0), 9);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn read_list_notify(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        notification_segment: SegmentId,
        id: NotificationId,
        queue: QueueId,
        _timeout: Timeout,
    ) -> Result<()> {
        self.check_list(entries)?;
        let n = Some((self.rank(), notification_segment, Notification::new(id, 1)));
        self.transfer(rank, entries, Direction::Get, n, queue)
    }

    /// Largest single transfer in bytes (`gaspi_transfer_size_max`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Remote, Timeout};
    /// let ctx = Context::init(Config { transfer_size_max: 16, ..Default::default() })?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// assert_eq!(ctx.transfer_size_max(), 16);
    /// let too_big = ctx.write(Local::new(0, 0), Remote::new(ctx.rank(), 0, 32), 32, 0, Timeout::Block);
    /// assert!(too_big.is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn transfer_size_max(&self) -> usize {
        self.config.transfer_size_max
    }

    /// Most elements in one list operation (`gaspi_rw_list_elem_max`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, ListEntry, Local, Timeout};
    /// let ctx = Context::init(Config { rw_list_elem_max: 2, ..Default::default() })?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// let list = vec![ListEntry::new(Local::new(0, 0), 0, 32, 1); ctx.rw_list_elem_max() as usize + 1];
    /// assert!(matches!(ctx.write_list(ctx.rank(), &list, 0, Timeout::Block), Err(gaspi::Error::InvalidArgument(_))));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn rw_list_elem_max(&self) -> u32 {
        self.config.rw_list_elem_max
    }
}
