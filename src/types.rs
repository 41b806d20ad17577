//! The GASPI vocabulary as Rust types: ranks, segment ids, notification ids,
//! queues, groups, timeouts and the addresses that one-sided operations take.

use std::time::{Duration, Instant};

/// A process of the job, `0..num_ranks` (GASPI's `gaspi_rank_t`).
///
/// ```
/// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
/// let left: gaspi::Rank = (ctx.rank() + ctx.num_ranks() - 1) % ctx.num_ranks();
/// # let _ = left;
/// # Ok::<(), gaspi::Error>(())
/// ```
pub type Rank = u16;
/// A segment id, `0..Config::segment_max` (GASPI's `gaspi_segment_id_t`).
///
/// ```
/// let data: gaspi::SegmentId = 0;
/// let flags: gaspi::SegmentId = 1;
/// assert_ne!(data, flags);
/// ```
pub type SegmentId = u8;
/// A notification id within a segment's table (GASPI's `gaspi_notification_id_t`).
///
/// ```
/// // One notification id per sending rank is a common scheme.
/// let id_of = |sender: gaspi::Rank| -> gaspi::NotificationId { sender as u32 };
/// assert_eq!(id_of(3), 3);
/// ```
pub type NotificationId = u32;
/// A notification value; never zero (GASPI's `gaspi_notification_t`).
///
/// ```
/// // The iteration number (+1, never zero) as the value.
/// let value: gaspi::NotificationValue = 41 + 1;
/// let n = gaspi::Notification::new(0, value);
/// assert_eq!(n.value, 42);
/// ```
pub type NotificationValue = u32;
/// A queue id (GASPI's `gaspi_queue_id_t`).
///
/// ```
/// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
/// let q: gaspi::QueueId = 0;
/// ctx.wait(q, gaspi::Timeout::Block)?;
/// # Ok::<(), gaspi::Error>(())
/// ```
pub type QueueId = u8;

/// A group of ranks for collectives (GASPI's `gaspi_group_t`).
///
/// [`GroupId::ALL`] holds every rank and is committed by `Context::init`.
///
/// ```
/// assert_eq!(gaspi::GroupId::ALL.0, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub u8);

impl GroupId {
    /// The group of all ranks (`GASPI_GROUP_ALL`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// assert_eq!(ctx.group_size(gaspi::GroupId::ALL)?, ctx.num_ranks() as usize);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub const ALL: GroupId = GroupId(0);
}

/// How long a blocking call may wait (GASPI's `gaspi_timeout_t`).
///
/// A call that runs out of time returns [`Error::Timeout`](crate::Error::Timeout)
/// and can be repeated.
///
/// ```
/// use gaspi::Timeout;
/// use std::time::Duration;
/// assert_eq!(Timeout::ms(5), Timeout::After(Duration::from_millis(5)));
/// assert_eq!(Timeout::from(Duration::ZERO), Timeout::After(Duration::ZERO));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Timeout {
    /// Wait as long as it takes (`GASPI_BLOCK`).
    #[default]
    Block,
    /// Do not wait: check once and return (`GASPI_TEST`).
    Test,
    /// Wait at most this long.
    After(Duration),
}

impl Timeout {
    /// A timeout of `ms` milliseconds, as GASPI's C API counts them.
    ///
    /// ```
    /// use gaspi::Timeout;
    /// assert_eq!(Timeout::ms(1500), Timeout::After(std::time::Duration::from_millis(1500)));
    /// ```
    pub const fn ms(ms: u64) -> Timeout {
        Timeout::After(Duration::from_millis(ms))
    }

    /// The instant after which the call gives up, `None` for [`Timeout::Block`].
    pub(crate) fn deadline(self) -> Deadline {
        match self {
            Timeout::Block => Deadline::Never,
            Timeout::Test => Deadline::Now,
            Timeout::After(d) => match Instant::now().checked_add(d) {
                Some(at) => Deadline::At(at),
                None => Deadline::Never,
            },
        }
    }
}

impl From<Duration> for Timeout {
    fn from(d: Duration) -> Timeout {
        Timeout::After(d)
    }
}

/// A timeout turned into a point in time when a call starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deadline {
    Never,
    Now,
    At(Instant),
}

impl Deadline {
    /// Time left, `None` when unbounded.
    pub(crate) fn remaining(self) -> Option<Duration> {
        match self {
            Deadline::Never => None,
            Deadline::Now => Some(Duration::ZERO),
            Deadline::At(at) => Some(at.saturating_duration_since(Instant::now())),
        }
    }

    pub(crate) fn expired(self) -> bool {
        self.remaining() == Some(Duration::ZERO)
    }

    /// The time left as a timeout, for calls made on the way to it.
    pub(crate) fn timeout(self) -> Timeout {
        match self.remaining() {
            None => Timeout::Block,
            Some(d) if d.is_zero() => Timeout::Test,
            Some(d) => Timeout::After(d),
        }
    }
}

/// A place in a segment of the calling rank: the source of a write, the
/// destination of a read.
///
/// ```
/// let src = gaspi::Local::new(0, 128);
/// assert_eq!((src.segment, src.offset), (0, 128));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Local {
    /// Segment id on the calling rank.
    pub segment: SegmentId,
    /// Byte offset from the start of the segment.
    pub offset: usize,
}

impl Local {
    /// The place `offset` bytes into local segment `segment`.
    ///
    /// ```
    /// // Byte 4096 of my segment 1.
    /// let src = gaspi::Local::new(1, 4096);
    /// assert_eq!(src.offset, 4096);
    /// ```
    pub const fn new(segment: SegmentId, offset: usize) -> Local {
        Local { segment, offset }
    }
}

/// A place in a segment of some rank: the destination of a write, the source
/// of a read, the word of an atomic.
///
/// ```
/// let dst = gaspi::Remote::new(3, 0, 64);
/// assert_eq!((dst.rank, dst.segment, dst.offset), (3, 0, 64));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    /// The rank owning the segment (may be the calling rank).
    pub rank: Rank,
    /// Segment id on that rank.
    pub segment: SegmentId,
    /// Byte offset from the start of the segment.
    pub offset: usize,
}

impl Remote {
    /// The place `offset` bytes into segment `segment` of `rank`.
    ///
    /// ```
    /// // Byte 0 of segment 2 on rank 5.
    /// let dst = gaspi::Remote::new(5, 2, 0);
    /// assert_eq!(dst.rank, 5);
    /// ```
    pub const fn new(rank: Rank, segment: SegmentId, offset: usize) -> Remote {
        Remote {
            rank,
            segment,
            offset,
        }
    }
}

/// A notification to post: its id and its (non-zero) value.
///
/// ```
/// let n = gaspi::Notification::new(7, 1);
/// assert_eq!((n.id, n.value), (7, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    /// Id in the target segment's notification table.
    pub id: NotificationId,
    /// Value stored there; must not be zero.
    pub value: NotificationValue,
}

impl Notification {
    /// Notification `id` carrying `value`.
    ///
    /// ```
    /// let n = gaspi::Notification::new(3, 1);
    /// assert_eq!(n, gaspi::Notification { id: 3, value: 1 });
    /// ```
    pub const fn new(id: NotificationId, value: NotificationValue) -> Notification {
        Notification { id, value }
    }
}

/// One element of a list operation (`write_list`, `read_list`, ...): `size`
/// bytes between a local place and a place in a segment of the target rank.
///
/// ```
/// use gaspi::{ListEntry, Local};
/// let e = ListEntry::new(Local::new(0, 0), 1, 4096, 256);
/// assert_eq!(e.size, 256);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListEntry {
    /// The local side.
    pub local: Local,
    /// Segment id on the target rank.
    pub remote_segment: SegmentId,
    /// Byte offset in that segment.
    pub remote_offset: usize,
    /// Number of bytes.
    pub size: usize,
}

impl ListEntry {
    /// An entry moving `size` bytes between `local` and
    /// `remote_segment`/`remote_offset` on the target rank.
    ///
    /// ```
    /// use gaspi::{ListEntry, Local};
    /// // Two 64-byte pieces into segment 0 of the target, 1 KiB apart.
    /// let list = [
    ///     ListEntry::new(Local::new(0, 0), 0, 0, 64),
    ///     ListEntry::new(Local::new(0, 64), 0, 1024, 64),
    /// ];
    /// assert_eq!(list.iter().map(|e| e.size).sum::<usize>(), 128);
    /// ```
    pub const fn new(
        local: Local,
        remote_segment: SegmentId,
        remote_offset: usize,
        size: usize,
    ) -> ListEntry {
        ListEntry {
            local,
            remote_segment,
            remote_offset,
            size,
        }
    }

    pub(crate) fn remote(&self, rank: Rank) -> Remote {
        Remote::new(rank, self.remote_segment, self.remote_offset)
    }
}

/// Whether new segment memory is zeroed (GASPI's `gaspi_alloc_t`).
///
/// The native engine always hands out zeroed memory (fresh shared memory is
/// zero), so both policies cost the same there.
///
/// ```
/// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
/// use gaspi::{Alloc, GroupId, Timeout};
/// ctx.segment_create(0, 4096, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
/// assert_eq!(ctx.segment::<u8>(0)?.get(100), 0);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Alloc {
    /// `GASPI_MEM_UNINITIALIZED`.
    #[default]
    Uninitialized,
    /// `GASPI_MEM_INITIALIZED`: zero-filled.
    Initialized,
}

/// Health of a rank, as reported by [`Context::state_vec`](crate::Context::state_vec).
///
/// ```
/// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
/// let dead: Vec<usize> = ctx.state_vec().iter().enumerate()
///     .filter(|(_, s)| **s == gaspi::RankState::Corrupt).map(|(r, _)| r).collect();
/// assert!(dead.is_empty());
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankState {
    /// Running, or terminated cleanly (`GASPI_STATE_HEALTHY`).
    Healthy,
    /// Died without `proc_term` (`GASPI_STATE_CORRUPT`).
    Corrupt,
}
