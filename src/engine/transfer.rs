//! One-sided operations, atomics, registration and queue completion: on
//! mapped memory where the target is, through the transport where not.
//!
//! The API has checked what it can check alone (queue, rank, sizes against
//! the configuration, segment ids); these calls check the rest against
//! the segments themselves (the local range, the target's range and
//! notification table) before anything moves: an operation with one bad
//! element moves nothing. Then they take the queue entries (`reserve`) and
//! execute. On mapped memory the data has reached the target when the call
//! returns, and a notification is stored after its data (`SeqCst`), so a
//! rank that sees the notification sees the data; through a transport, the
//! transport promises the same order.

use super::Native;
use super::directory::Lookup;
use super::epoch::Pin;
use super::segment::SegmentObject;
use super::transport::{AtomicOp, IDS, Post, Transfer, Transport};
use crate::config::RESERVED_QUEUE;
use crate::error::{Error, Result, Side};
use crate::types::{
    ListEntry, Local, Notification, NotificationId, QueueId, Rank, Remote, SegmentId, Timeout,
};

/// How [`Native::put_from`] reaches a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PutFrom {
    /// By a copy into memory this process maps (the rank's host).
    Mapped,
    /// Through the transport (MPI: origin buffers need not lie in a
    /// window).
    Transport,
    /// Not at all (GPI-2 writes only from registered memory).
    No,
}

/// Which way the data of a transfer moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
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

/// Check that `offset + size` lies within `obj` (segment `segment` of
/// `rank`), and that this process reaches its data (not another rank's
/// private memory).
pub(crate) fn check_range(
    side: Side,
    obj: &SegmentObject,
    rank: Rank,
    segment: SegmentId,
    offset: usize,
    size: usize,
) -> Result<()> {
    if obj.data_unreachable() {
        return Err(Error::SegmentPrivate { rank, segment });
    }
    check_within(side, obj.size(), rank, segment, offset, size)
}

/// Check that `offset + size` lies within `segment_size` bytes (segment
/// `segment` of `rank`, as this rank maps it or as the transport knows it).
pub(crate) fn check_within(
    side: Side,
    segment_size: usize,
    rank: Rank,
    segment: SegmentId,
    offset: usize,
    size: usize,
) -> Result<()> {
    match offset.checked_add(size) {
        Some(end) if end <= segment_size => Ok(()),
        _ => Err(Error::OutOfBounds {
            side,
            rank,
            segment,
            offset,
            size,
            segment_size,
        }),
    }
}

/// The queue entries a request takes: one per transfer, one for its
/// notification (GPI-2's accounting, see `crate::queues`).
pub(crate) fn queue_entries(
    entries: &[ListEntry],
    notify: Option<(Rank, SegmentId, Notification)>,
) -> u32 {
    entries.len() as u32 + notify.is_some() as u32
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

impl Native {
    /// This rank's segment `local.segment`, checked to hold `size` bytes
    /// from `local.offset`.
    fn local_range<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        local: Local,
        size: usize,
    ) -> Result<&'p SegmentObject> {
        let l = self.local(pin, local.segment)?;
        check_range(Side::Local, l, self.rank, local.segment, local.offset, size)?;
        Ok(l)
    }

    fn check_transfer<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        local: Local,
        remote: Remote,
        size: usize,
    ) -> std::result::Result<Checked<'p>, Lookup> {
        let l = self.local_range(pin, local, size)?;
        let r = self.target(pin, remote.rank, remote.segment)?;
        check_range(
            Side::Remote,
            r,
            remote.rank,
            remote.segment,
            remote.offset,
            size,
        )?;
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
        let obj = self.target(pin, rank, segment)?;
        check_notification_id(obj, n.id)?;
        Ok(obj)
    }

    /// The checks of [`Native::transfer`] that need nothing of the target:
    /// this rank's segments and ranges, a read's own notification id. For
    /// a request to a failed rank, which is accepted only if these pass.
    pub(crate) fn check_own_side(
        &self,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
    ) -> Result<()> {
        self.run(|pin| {
            for e in entries {
                self.local_range(pin, e.local, e.size)?;
            }
            match (dir, notify) {
                (Direction::Get, Some((_, seg, n))) => {
                    Ok(check_notification_id(self.local(pin, seg)?, n.id)?)
                }
                _ => Ok(()),
            }
        })
    }

    /// The one routine behind every one-sided operation with `rank`: check
    /// everything, `reserve` the queue entries (the transfers, plus one for
    /// the notification), move the data, then post the notification
    /// (`notify`: to (rank, segment); a read's is this rank's own).
    /// `streaming`: copies made here (mapped memory) take non-temporal
    /// stores, for data that a far core reads next; a transport's
    /// transfers ignore it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn transfer(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
        queue: QueueId,
        streaming: bool,
        reserve: impl Fn(u32) -> Result<()>,
    ) -> Result<()> {
        match self.to_node_of(rank) {
            Some(t) => self.transfer_through(t, rank, entries, dir, notify, queue, reserve),
            None => self.transfer_mapped(rank, entries, dir, notify, streaming, reserve),
        }
    }

    /// [`Native::transfer`] on mapped memory: copies and a notification
    /// store.
    fn transfer_mapped(
        &self,
        rank: Rank,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
        streaming: bool,
        reserve: impl Fn(u32) -> Result<()>,
    ) -> Result<()> {
        self.run(|pin| {
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
            reserve(queue_entries(entries, notify))?;
            for c in checked.as_slice() {
                match dir {
                    Direction::Put => c.local.copy_to(
                        c.local_offset,
                        c.remote,
                        c.remote_offset,
                        c.size,
                        streaming,
                    ),
                    Direction::Get => c.remote.copy_to(
                        c.remote_offset,
                        c.local,
                        c.local_offset,
                        c.size,
                        streaming,
                    ),
                }
            }
            if let Some((obj, n)) = target {
                obj.notifications().post(n.id, n.value);
            }
            Ok(())
        })
    }

    /// [`Native::transfer`] through the transport: the same checks, against
    /// the sizes the transport knows; the transport orders the notification
    /// after the data.
    #[allow(clippy::too_many_arguments)]
    fn transfer_through(
        &self,
        t: &dyn Transport,
        rank: Rank,
        entries: &[ListEntry],
        dir: Direction,
        notify: Option<(Rank, SegmentId, Notification)>,
        queue: QueueId,
        reserve: impl Fn(u32) -> Result<()>,
    ) -> Result<()> {
        // Failures of other hosts' ranks reach this host's control block
        // through the transport's failure watch.
        self.check_alive(rank)?;
        let checked = |pin: &Pin<'_>, e: &ListEntry| -> std::result::Result<Transfer, Lookup> {
            self.local_range(pin, e.local, e.size)?;
            let size = self.remote_size(t, rank, e.remote_segment)?;
            check_within(
                Side::Remote,
                size,
                rank,
                e.remote_segment,
                e.remote_offset,
                e.size,
            )?;
            Ok(Transfer {
                local: (e.local.segment, e.local.offset as u64),
                remote: (e.remote_segment, e.remote_offset as u64),
                size: e.size as u64,
            })
        };
        // A single write (the usual call) allocates nothing.
        let (one, many);
        let list: &[Transfer] = match entries {
            [e] => {
                one = [self.run(|pin| checked(pin, e))?];
                &one
            }
            _ => {
                many = self.run(|pin| {
                    entries
                        .iter()
                        .map(|e| checked(pin, e))
                        .collect::<std::result::Result<Vec<_>, Lookup>>()
                })?;
                &many
            }
        };
        let post = match (dir, notify) {
            (Direction::Put, Some((r, seg, n))) => {
                // Checked above already where the notification goes to a
                // segment written (the usual case: one lookup less).
                if r != rank || !entries.iter().any(|e| e.remote_segment == seg) {
                    self.remote_size(t, r, seg)?;
                }
                // The target's table: as large as ours of the same segment
                // (windows are made collectively), at most what the
                // transport carries.
                let num = self
                    .local_arc(seg)
                    .map_or(self.notification_num, |o| o.notification_num())
                    .min(IDS);
                if n.id >= num {
                    return Err(Error::InvalidNotificationId { id: n.id, num });
                }
                Post::Write(Some((seg, n.id, n.value)))
            }
            (Direction::Put, None) => Post::Write(None),
            (Direction::Get, Some((_, seg, n))) => {
                let obj = self.local_arc(seg)?;
                check_notification_id(&obj, n.id)?;
                if n.id >= IDS {
                    return Err(Error::InvalidNotificationId { id: n.id, num: IDS });
                }
                Post::Read(Some((seg, n.id)))
            }
            (Direction::Get, None) => Post::Read(None),
        };
        reserve(queue_entries(entries, notify))?;
        t.post(rank, list, post, queue)
    }

    /// How [`Native::put_from`] reaches `rank`.
    pub(crate) fn puts_from_memory_to(&self, rank: Rank) -> PutFrom {
        match self.to_node_of(rank) {
            None => PutFrom::Mapped,
            Some(t) if t.puts_from_memory() => PutFrom::Transport,
            Some(_) => PutFrom::No,
        }
    }

    /// Write `pieces`, each memory of this process that need not lie in a
    /// segment and its offset in `rank`'s `segment`, complete at the
    /// target when the call returns; on no queue. Where
    /// [`Native::puts_from_memory_to`] says no, nothing moves and the
    /// error says why. Every remote range is checked before a byte moves.
    /// `streaming`: copies made here take non-temporal stores.
    pub(crate) fn put_from(
        &self,
        rank: Rank,
        segment: SegmentId,
        pieces: &[(&[u8], usize)],
        streaming: bool,
    ) -> Result<()> {
        match self.to_node_of(rank) {
            Some(t) => {
                self.check_alive(rank)?;
                let size = self.remote_size(t, rank, segment)?;
                for &(data, offset) in pieces {
                    check_within(Side::Remote, size, rank, segment, offset, data.len())?;
                }
                t.put_from(rank, segment, pieces)
            }
            None => self.run(|pin| {
                let r = self.target(pin, rank, segment)?;
                for &(data, offset) in pieces {
                    check_range(Side::Remote, r, rank, segment, offset, data.len())?;
                }
                for &(data, offset) in pieces {
                    r.write_from(offset, data, streaming);
                }
                Ok(())
            }),
        }
    }

    /// `op` on the 8-byte word at `at` (offset checked to be aligned by the
    /// caller); with `wake`, wake the waiters of the word's table after it
    /// (the adapters' protocol words). Returns the old value.
    pub(crate) fn atomic(
        &self,
        at: Remote,
        op: AtomicOp,
        wake: bool,
        timeout: Timeout,
    ) -> Result<u64> {
        match self.for_atomics() {
            Some(t) if self.to_node_of(at.rank).is_some() => {
                let size = self.remote_size(t, at.rank, at.segment)?;
                check_within(Side::Remote, size, at.rank, at.segment, at.offset, 8)?;
                let old = t.atomic(at.rank, at.segment, at.offset, op, timeout)?;
                if wake {
                    t.ring(at.rank, at.segment, RESERVED_QUEUE)?;
                }
                Ok(old)
            }
            // This node's word, changed by the transport (see
            // `Native::for_atomics`); its waiters are woken here.
            Some(t) => self.run(|pin| {
                let obj = self.target(pin, at.rank, at.segment)?;
                check_range(Side::Remote, obj, at.rank, at.segment, at.offset, 8)?;
                let old = t.atomic(at.rank, at.segment, at.offset, op, timeout)?;
                if wake {
                    obj.notifications().ww.wake();
                }
                Ok(old)
            }),
            None => self.run(|pin| {
                let obj = self.target(pin, at.rank, at.segment)?;
                check_range(Side::Remote, obj, at.rank, at.segment, at.offset, 8)?;
                let old = op.apply(obj.atomic_u64(at.offset));
                if wake {
                    obj.notifications().ww.wake();
                }
                Ok(old)
            }),
        }
    }

    /// Let `rank` access this rank's segment `segment`: in the segment's
    /// registration bitmap, and with the transport for ranks it serves
    /// (other nodes; this node too once atomics go through it).
    pub(crate) fn register(&self, segment: SegmentId, rank: Rank, timeout: Timeout) -> Result<()> {
        self.local_arc(segment)?.register(rank);
        if let Some(t) = self.for_atomics().filter(|_| rank != self.rank) {
            t.register(segment, rank, timeout)?;
        }
        Ok(())
    }

    /// Local completion of `queue`: nothing to wait for on mapped memory
    /// (a request has completed when its post returns); the transport's
    /// requests otherwise. Requests to ranks whose failure the user
    /// acknowledged are given up, as on mapped memory, where they
    /// completed, unless the transport cannot give them up (the queue is
    /// [`Transport::stuck`]: a GPI-2 read its dead target never answers).
    pub(crate) fn wait(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        let Some(t) = self.transport() else {
            return Ok(());
        };
        let deadline = timeout.deadline();
        loop {
            match t.wait(queue, deadline.timeout(), &|r| self.running(r)) {
                Err(Error::RankFailed { rank }) => {
                    // The transport may see it first (a request to it
                    // failed): the state vector says so from now on, as
                    // the failure watch would in its next round.
                    self.job.mark_failed(rank as usize);
                    if t.stuck(queue) || !t.corrupt_ranks().iter().all(|&r| self.acknowledged(r)) {
                        return Err(Error::RankFailed { rank });
                    }
                }
                done => return done,
            }
        }
    }

    /// Remote completion of `queue` after its [`Native::wait`] (MPI's
    /// flush): through the transport, every write since the last flush
    /// becomes visible at its target; on mapped memory it is already.
    /// `reserved` is a byte every rank has registered with every other
    /// (the runtime's window).
    pub(crate) fn flush(
        &self,
        queue: QueueId,
        reserved: (SegmentId, u64),
        timeout: Timeout,
    ) -> Result<()> {
        match self.transport() {
            Some(t) if self.ppn < self.nranks() => t
                .flush(queue, reserved, timeout, &|r| self.running(r))
                // The transport knows only that a target stopped running;
                // the job knows whether it terminated cleanly.
                .map_err(|e| match e {
                    Error::RankFailed { rank } => self.check_alive(rank).err().unwrap_or(e),
                    e => e,
                }),
            _ => Ok(()),
        }
    }

    /// Before a barrier: through the transport, the writes that waits
    /// completed become visible at their targets
    /// ([`Transport::flush_written`]); on mapped memory they are already.
    pub(crate) fn flush_written(&self, reserved: (SegmentId, u64), timeout: Timeout) -> Result<()> {
        match self.transport() {
            Some(t) if self.ppn < self.nranks() => {
                t.flush_written(reserved, timeout, &|r| self.running(r))
            }
            _ => Ok(()),
        }
    }

    /// A barrier over `members` ended ([`Transport::barrier_passed`]).
    pub(crate) fn barrier_passed(&self, members: &[Rank]) {
        if let Some(t) = self.transport() {
            t.barrier_passed(members);
        }
    }

    /// Discard `queue`'s requests: nothing on mapped memory.
    pub(crate) fn purge(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        match self.transport() {
            Some(t) => t.purge(queue, timeout, &|r| self.running(r)),
            None => Ok(()),
        }
    }
}
