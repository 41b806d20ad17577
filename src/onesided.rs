//! One-sided communication on queues: write, read, their notified and list
//! forms, and notify (`gaspi_write`, `gaspi_read`, `gaspi_write_notify`, ...).
//!
//! Every operation checks all its arguments before it moves a byte: a list
//! with one bad element posts nothing. Then it takes its entries on the
//! queue ([`Error::QueueFull`] if they do not fit) and executes (one call
//! into the engine, `engine/transfer.rs`). On mapped memory the data has
//! reached the target when the call returns, and a notification is stored
//! after its data, so a rank that sees the notification sees the data.

use crate::context::Context;
use crate::context::traffic::Op;
use crate::engine::transfer::{Direction, PutFrom, queue_entries};
use crate::error::{Error, Result};
use crate::types::{
    ListEntry, Local, Notification, NotificationId, QueueId, Rank, Remote, SegmentId, Timeout,
};

impl Context {
    /// The API's checks of one-sided operations with `rank` (GASPI's
    /// argument checks before the engine call): the queue, the rank, every
    /// transfer's size and both segment ids, the notification's segment id;
    /// then one engine call, then the traffic count. `streaming`: see
    /// [`Context::write_notify_with`].
    fn transfer(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
        queue: QueueId,
        streaming: bool,
    ) -> Result<()> {
        self.queues.check(queue)?;
        self.engine.check_rank(rank)?;
        for e in entries {
            if e.size > self.config.transfer_size_max {
                return Err(Error::TransferTooLarge {
                    size: e.size,
                    max: self.config.transfer_size_max,
                });
            }
            self.check_segment_id(e.local.segment)?;
            self.check_segment_id(e.remote_segment)?;
        }
        if let Some((_, seg, n)) = notify {
            self.check_segment_id(seg)?;
            if n.value == 0 {
                return Err(Error::ZeroNotificationValue);
            }
        }
        let reserved = std::cell::Cell::new(false);
        let posted = self
            .engine
            .transfer(rank, entries, dir, notify, queue, streaming, |n| {
                self.queues.reserve(queue, n)?;
                reserved.set(true);
                Ok(())
            });
        match posted {
            // The target had failed, and the program does not know yet
            // (it has not acknowledged it): the request is posted and
            // failed, and the queue's next wait says so, as GPI-2's does
            // (GASPI programs find failures by waiting, then reading the
            // state vector). Once acknowledged, a request to it is an
            // error at once.
            Err(Error::RankFailed { rank: r }) if r == rank && !self.engine.acknowledged(r) => {
                self.engine.check_own_side(entries, dir, notify)?;
                if !reserved.get() {
                    self.queues.reserve(queue, queue_entries(entries, notify))?;
                }
                self.queues.get(queue)?.fail(rank);
                return Ok(());
            }
            posted => posted?,
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

    /// How [`Context::write_from_memory`] reaches `rank` (on one host by a
    /// copy, through MPI by a put; through GPI-2, which writes only from
    /// registered memory, not at all).
    pub(crate) fn writes_from_memory_to(&self, rank: Rank) -> PutFrom {
        self.engine.puts_from_memory_to(rank)
    }

    /// Write `pieces`, memory of this process outside any segment, each to
    /// its offset in `rank`'s `segment`: complete at the target when the
    /// call returns, on no queue, with the checks of [`Context::write`].
    /// For the collectives' large pieces, which then skip a copy into a
    /// segment. `streaming`: where the copy is this process's (a node
    /// mapped here), with non-temporal stores (see
    /// `crate::engine::memcopy::copy_slice_streaming`).
    pub(crate) fn write_from_memory(
        &self,
        rank: Rank,
        segment: SegmentId,
        pieces: &[(&[u8], usize)],
        streaming: bool,
    ) -> Result<()> {
        self.engine.check_rank(rank)?;
        self.check_segment_id(segment)?;
        let max = self.config.transfer_size_max;
        if let Some(&(data, _)) = pieces.iter().find(|(d, _)| d.len() > max) {
            return Err(Error::TransferTooLarge {
                size: data.len(),
                max,
            });
        }
        self.engine.put_from(rank, segment, pieces, streaming)?;
        let bytes = pieces.iter().map(|(d, _)| d.len() as u64).sum();
        let inter = self.is_inter(rank);
        self.traffic
            .count(inter, Op::Write, pieces.len() as u64, bytes);
        Ok(())
    }

    /// Write `data`, memory of this process, to address `at` of rank
    /// `rank`'s process, outside any segment: the collectives' single copy
    /// into a caller's buffer that its rank offered for this write
    /// (`crate::sys::write_process_memory`; only where `rank`'s node is
    /// mapped here, [`PutFrom::Mapped`]). Complete when the call returns,
    /// on no queue, counted as a write to `rank`. The process is the one
    /// the job recorded for `rank`, and only while it runs
    /// (`crate::engine::processes`).
    pub(crate) fn write_into_process(&self, rank: Rank, at: usize, data: &[u8]) -> Result<()> {
        let pid = self.live_pid(rank)?;
        crate::sys::write_process_memory(pid, at, data).map_err(|e| {
            Error::Environment(format!(
                "writing {} bytes into rank {rank}'s buffer (process {pid}): {e}",
                data.len()
            ))
        })?;
        let inter = self.is_inter(rank);
        self.traffic.count(inter, Op::Write, 1, data.len() as u64);
        Ok(())
    }

    /// Read `dst.len()` bytes at address `at` of rank `rank`'s process
    /// into `dst`, outside any segment: the collectives' single copy out of
    /// a buffer that its rank announced for this read, inside a node
    /// (`crate::sys::read_process_memory`). From the process the job
    /// recorded for `rank`, and only while it runs, as
    /// [`Context::write_into_process`]; not counted as traffic (a copy
    /// inside a node, as the copies through a node's window are not).
    pub(crate) fn read_from_process(&self, rank: Rank, at: usize, dst: &mut [u8]) -> Result<()> {
        let pid = self.live_pid(rank)?;
        crate::sys::read_process_memory(pid, at, dst).map_err(|e| {
            Error::Environment(format!(
                "reading {} bytes from rank {rank}'s buffer (process {pid}): {e}",
                dst.len()
            ))
        })
    }

    /// The pid of `rank`'s process for a kernel copy now, or why not: it
    /// failed, or it is not of this host or has exited.
    fn live_pid(&self, rank: Rank) -> Result<u32> {
        self.engine.check_rank(rank)?;
        self.engine.live_pid(rank).ok_or_else(|| {
            self.engine.check_alive(rank).err().unwrap_or_else(|| {
                Error::Environment(format!(
                    "rank {rank}'s process is not one this process may copy to or from \
                     (of another host, exited, or not the process the job recorded)"
                ))
            })
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
        self.transfer(dst.rank, &[e], Direction::Put, None, queue, false)
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
        self.transfer(src.rank, &[e], Direction::Get, None, queue, false)
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
        self.write_notify_with(src, dst, size, notification, queue, false)
    }

    /// [`Context::write_notify`]; with `streaming`, its copy, where this
    /// process makes it (`dst`'s node mapped here), takes non-temporal
    /// stores: the lines go to memory instead of into this core's cache,
    /// for data that a far core reads next (the collectives' messages
    /// between nodes, where their timing says so). Through a transport,
    /// a plain write.
    pub(crate) fn write_notify_with(
        &self,
        src: Local,
        dst: Remote,
        size: usize,
        notification: Notification,
        queue: QueueId,
        streaming: bool,
    ) -> Result<()> {
        let e = ListEntry::new(src, dst.segment, dst.offset, size);
        let n = Some((dst.rank, dst.segment, notification));
        self.transfer(dst.rank, &[e], Direction::Put, n, queue, streaming)
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
        self.transfer(src.rank, &[e], Direction::Get, n, queue, false)
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
            false,
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
        self.transfer(rank, entries, Direction::Put, None, queue, false)
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
        self.transfer(rank, entries, Direction::Put, n, queue, false)
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
        self.transfer(rank, entries, Direction::Get, None, queue, false)
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
        self.transfer(rank, entries, Direction::Get, n, queue, false)
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

    /// Smallest single transfer in bytes (`gaspi_transfer_size_min`): 0,
    /// a transfer of nothing is posted and completes like any other (a
    /// `write_notify` of 0 bytes still notifies).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// assert_eq!(ctx.transfer_size_min(), 0);
    /// let me = ctx.rank();
    /// ctx.read(Local::new(0, 0), Remote::new(me, 0, 8), ctx.transfer_size_min(), 0, Timeout::Block)?;
    /// ctx.wait(0, Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn transfer_size_min(&self) -> usize {
        0
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
