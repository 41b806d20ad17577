//! The one error type of the crate.
//!
//! Every fallible call returns [`Result<T>`]. Each variant carries the values
//! that made the call fail, and its message says what to change. The variants
//! map onto GASPI's `gaspi_return_t` codes ([`Error::gaspi_code`]) so a port
//! of C code can keep its error handling.

use crate::types::{GroupId, NotificationId, QueueId, Rank, SegmentId};
use std::fmt;
use std::io;

/// Shorthand for `std::result::Result<T, gaspi::Error>`.
///
/// ```
/// fn first_rank(ctx: &gaspi::Context) -> gaspi::Result<gaspi::Rank> {
///     ctx.proc_ping(0)?;
///     Ok(0)
/// }
/// ```
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in a GASPI call.
///
/// A call that fails leaves the runtime usable: [`Error::Timeout`] in
/// particular means "not yet", and the same call can be made again.
///
/// ```
/// use gaspi::Error;
/// let e = Error::QueueFull { queue: 1, posted: 1024, max: 1024 };
/// assert!(e.to_string().contains("wait"));
/// assert_eq!(e.gaspi_code(), "GASPI_QUEUE_FULL");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The timeout passed before the call could complete. Nothing was lost:
    /// call again (with the same arguments) to keep waiting.
    Timeout,
    /// The queue holds `posted` requests and cannot take more. Call
    /// [`Context::wait`](crate::Context::wait) on it, then post again.
    QueueFull {
        /// The queue.
        queue: QueueId,
        /// Requests posted since the last wait.
        posted: u32,
        /// The queue depth ([`Config::queue_size_max`](crate::Config::queue_size_max)).
        max: u32,
    },
    /// A rank outside `0..num_ranks`.
    InvalidRank {
        /// The rank given.
        rank: Rank,
        /// The number of ranks in the job.
        num_ranks: Rank,
    },
    /// A segment id at or above the configured segment maximum.
    InvalidSegmentId {
        /// The id given.
        segment: SegmentId,
        /// [`Config::segment_max`](crate::Config::segment_max).
        max: u32,
    },
    /// The segment does not exist on that rank (never created, or deleted).
    SegmentNotFound {
        /// The rank that should own it.
        rank: Rank,
        /// The segment id.
        segment: SegmentId,
    },
    /// The segment exists on `rank` but was not registered with the caller
    /// (`segment_register` or a collective `segment_create` including it).
    SegmentNotRegistered {
        /// The owner.
        rank: Rank,
        /// The segment id.
        segment: SegmentId,
    },
    /// The segment's data is its owner's private memory: it was bound
    /// (`segment_bind`/`segment_use`) to memory that is not whole pages,
    /// which other ranks of its host cannot map. They may notify it, not
    /// write or read its data.
    SegmentPrivate {
        /// The owner.
        rank: Rank,
        /// The segment id.
        segment: SegmentId,
    },
    /// A segment with this id already exists on the calling rank.
    SegmentExists {
        /// The segment id.
        segment: SegmentId,
    },
    /// `offset + size` reaches past the end of a segment.
    OutOfBounds {
        /// Whether the range is the caller's own (local) one or the
        /// target's (remote) one.
        side: Side,
        /// The owner of the segment.
        rank: Rank,
        /// The segment id.
        segment: SegmentId,
        /// The offset given.
        offset: usize,
        /// The size given.
        size: usize,
        /// The size of the segment.
        segment_size: usize,
    },
    /// A transfer larger than [`Config::transfer_size_max`](crate::Config::transfer_size_max).
    TransferTooLarge {
        /// The size given.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A notification id (or the end of an id range) outside the segment's
    /// notification table.
    InvalidNotificationId {
        /// The id (or range end) given.
        id: NotificationId,
        /// The number of notifications of the segment.
        num: u32,
    },
    /// Zero was given as a notification value; zero means "no notification".
    ZeroNotificationValue,
    /// An atomic on an offset that is not a multiple of 8.
    MisalignedAtomic {
        /// The offset given.
        offset: usize,
    },
    /// A queue id that does not name an existing queue.
    InvalidQueue {
        /// The id given.
        queue: QueueId,
        /// The queue maximum ([`Context::queue_max`](crate::Context::queue_max)):
        /// every existing queue's id is below it, and
        /// [`Context::queue_create`](crate::Context::queue_create) makes
        /// the missing ones.
        num: u32,
    },
    /// No more queues can be created ([`Context::queue_max`](crate::Context::queue_max)).
    TooManyQueues {
        /// The limit.
        max: u32,
    },
    /// A group handle that does not name a group of this rank.
    InvalidGroup {
        /// The handle given.
        group: GroupId,
    },
    /// A collective on a group that is not committed yet.
    GroupNotCommitted {
        /// The group.
        group: GroupId,
    },
    /// A committed group cannot change, or a group was defined inconsistently
    /// (for example without the calling rank).
    GroupMismatch {
        /// The group.
        group: GroupId,
        /// What is wrong.
        reason: String,
    },
    /// No more groups can be created ([`Config::group_max`](crate::Config::group_max)).
    TooManyGroups {
        /// The limit.
        max: u32,
    },
    /// Another collective is still in progress on this group (started by
    /// another thread, or a different collective that timed out and must be
    /// called again first).
    ActiveCollective {
        /// The group.
        group: GroupId,
    },
    /// A rank of the job died (exited without `proc_term`, was killed, or
    /// crashed). See [`Context::state_vec`](crate::Context::state_vec) and
    /// [`Context::acknowledge_failures`](crate::Context::acknowledge_failures).
    RankFailed {
        /// The rank that died.
        rank: Rank,
    },
    /// The target rank has already called `proc_term`.
    RankTerminated {
        /// The rank.
        rank: Rank,
    },
    /// Direct access to memory of another node was asked for. Ranks map
    /// only their own node's memory; other nodes are reached through
    /// one-sided operations.
    OtherNode {
        /// The rank asked about.
        rank: Rank,
        /// Its node.
        node: usize,
        /// The calling rank's node.
        this_node: usize,
    },
    /// The segment is a rank's own segment, not a node-shared window.
    NotAWindow {
        /// The rank.
        rank: Rank,
        /// The segment id.
        segment: SegmentId,
    },
    /// A passive message is larger than the receive size; it stays queued.
    MessageTooLarge {
        /// The size of the queued message.
        size: usize,
        /// The size passed to `passive_receive`.
        capacity: usize,
    },
    /// A size, offset or count, or a sum or product of them, is larger
    /// than any memory can hold (`max`: what a mapping or allocation can
    /// span). Nothing was done.
    SizeOverflow {
        /// The argument (or the combination of arguments) that overflows.
        argument: &'static str,
        /// The largest value allowed.
        max: usize,
    },
    /// The memory for an object could not be reserved: the shared-memory
    /// file system (`/dev/shm`) or the machine has less free space than
    /// `size` bytes. Nothing was made; free memory or ask for less.
    OutOfMemory {
        /// What was being made.
        what: String,
        /// The bytes it needed.
        size: usize,
    },
    /// An argument is outside what the call accepts.
    InvalidArgument(String),
    /// An RMA window call breaks MPI's synchronisation rules (an access
    /// outside an epoch, an unlock without a lock, ...).
    RmaSync(String),
    /// The configuration is not valid.
    Config(String),
    /// The environment set up by the launcher is missing or inconsistent.
    Environment(String),
    /// `Context::init` was called while a context is alive in this process.
    AlreadyInitialized,
    /// GPI-2 (under the GPI-2 engine) failed a call with a code that none
    /// of the variants above describes.
    Engine {
        /// The GPI-2 function.
        call: &'static str,
        /// Its `gaspi_return_t`.
        code: i32,
        /// The code's name in `GASPI.h`.
        name: &'static str,
    },
    /// The operating system refused a request.
    System {
        /// What was being done.
        what: String,
        /// The OS error.
        source: io::Error,
    },
}

/// Which range of a transfer an [`Error::OutOfBounds`] is about.
///
/// ```
/// use gaspi::{Alloc, Config, Context, Error, Local, Remote, Side, Timeout};
/// let ctx = Context::init(Config::default())?;
/// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
/// let me = ctx.rank();
/// // 32 bytes from offset 48 of this rank's 64-byte segment: past its end.
/// let e = ctx.write(Local::new(0, 48), Remote::new(me, 0, 0), 32, 0, Timeout::Block);
/// assert!(matches!(e, Err(Error::OutOfBounds { side: Side::Local, .. })));
/// let e = ctx.write(Local::new(0, 0), Remote::new(me, 0, 48), 32, 0, Timeout::Block);
/// assert!(matches!(e, Err(Error::OutOfBounds { side: Side::Remote, .. })));
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The caller's own segment (a write's source, a read's destination).
    Local,
    /// The target rank's segment.
    Remote,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Local => "local",
            Side::Remote => "remote",
        })
    }
}

impl Error {
    /// The name of the GASPI return code this error corresponds to.
    ///
    /// ```
    /// assert_eq!(gaspi::Error::Timeout.gaspi_code(), "GASPI_TIMEOUT");
    /// ```
    pub fn gaspi_code(&self) -> &'static str {
        match self {
            Error::Timeout => "GASPI_TIMEOUT",
            Error::QueueFull { .. } => "GASPI_QUEUE_FULL",
            Error::InvalidRank { .. } | Error::RankTerminated { .. } => "GASPI_ERR_INV_RANK",
            Error::InvalidSegmentId { .. }
            | Error::SegmentNotFound { .. }
            | Error::SegmentNotRegistered { .. }
            | Error::SegmentPrivate { .. } => "GASPI_ERR_INV_SEG",
            // GPI-2 (`pgaspi_segment_alloc`): an id in use is an invalid
            // segment; GASPI_ERR_MANY_SEG is for more segments than
            // segment_max, which ids below segment_max cannot reach.
            Error::SegmentExists { .. } => "GASPI_ERR_INV_SEG",
            // As GPI-2's checks: an offset at or past the end is a bad
            // offset; an offset inside whose size runs past the end is a
            // bad size.
            Error::OutOfBounds {
                side,
                offset,
                segment_size,
                ..
            } => match (offset >= segment_size, side) {
                (true, Side::Local) => "GASPI_ERR_INV_LOC_OFF",
                (true, Side::Remote) => "GASPI_ERR_INV_REM_OFF",
                (false, _) => "GASPI_ERR_INV_COMMSIZE",
            },
            Error::TransferTooLarge { .. } | Error::MessageTooLarge { .. } => {
                "GASPI_ERR_INV_COMMSIZE"
            }
            Error::InvalidNotificationId { .. } => "GASPI_ERR_INV_NOTIF_ID",
            Error::ZeroNotificationValue => "GASPI_ERR_INV_NOTIF_VAL",
            Error::MisalignedAtomic { .. } => "GASPI_ERR_UNALIGN_OFF",
            Error::InvalidQueue { .. } => "GASPI_ERR_INV_QUEUE",
            // GPI-2's gaspi_queue_create returns GASPI_ERROR at its limit.
            Error::TooManyQueues { .. } => "GASPI_ERROR",
            Error::InvalidGroup { .. }
            | Error::GroupNotCommitted { .. }
            | Error::GroupMismatch { .. } => "GASPI_ERR_INV_GROUP",
            Error::TooManyGroups { .. } => "GASPI_ERR_MANY_GRP",
            Error::ActiveCollective { .. } => "GASPI_ERR_ACTIVE_COLL",
            Error::RankFailed { .. } => "GASPI_ERROR",
            Error::OtherNode { .. } | Error::NotAWindow { .. } => "GASPI_ERR_INV_SEG",
            Error::SizeOverflow { .. } => "GASPI_ERR_INV_SIZE",
            Error::OutOfMemory { .. } => "GASPI_ERR_MEMALLOC",
            Error::InvalidArgument(_) => "GASPI_ERR_INV_NUM",
            Error::RmaSync(_) => "GASPI_ERROR",
            Error::Config(_) => "GASPI_ERR_CONFIG",
            Error::Environment(_) => "GASPI_ERR_ENV",
            Error::AlreadyInitialized => "GASPI_ERR_INITED",
            Error::System { .. } => "GASPI_ERR_DEVICE",
            Error::Engine { name, .. } => name,
        }
    }

    /// True for [`Error::Timeout`]: the call may simply be repeated.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// # ctx.segment_create(0, 64, gaspi::GroupId::ALL, gaspi::Timeout::Block, gaspi::Alloc::Initialized)?;
    /// // Nothing was notified: a test returns at once with a timeout.
    /// let e = ctx.notify_waitsome(0, 0..4, gaspi::Timeout::Test).unwrap_err();
    /// assert!(e.is_timeout());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout)
    }

    /// The error for an OS refusal while making `what` of `size` bytes:
    /// [`Error::OutOfMemory`] when the refusal means "no space" (`ENOSPC`,
    /// `ENOMEM`, `EFBIG`), [`Error::System`] otherwise.
    pub(crate) fn making(what: impl Into<String>, size: usize, source: io::Error) -> Error {
        match source.raw_os_error() {
            Some(libc::ENOSPC | libc::ENOMEM | libc::EFBIG) => Error::OutOfMemory {
                what: what.into(),
                size,
            },
            _ if source.kind() == io::ErrorKind::OutOfMemory => Error::OutOfMemory {
                what: what.into(),
                size,
            },
            _ => Error::system(what, source),
        }
    }

    pub(crate) fn system(what: impl Into<String>, source: io::Error) -> Error {
        Error::System {
            what: what.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Timeout => write!(f, "timed out; nothing was lost, call again to keep waiting"),
            Error::QueueFull { queue, posted, max } => write!(
                f,
                "queue {queue} is full ({posted} of {max} requests posted); call wait({queue}) \
                 before posting more, or raise Config::queue_size_max"
            ),
            Error::InvalidRank { rank, num_ranks } => write!(
                f,
                "rank {rank} does not exist: the job has ranks 0..{num_ranks}"
            ),
            Error::InvalidSegmentId { segment, max } => write!(
                f,
                "segment id {segment} is out of range: ids are 0..{max} (Config::segment_max)"
            ),
            Error::SegmentNotFound { rank, segment } => write!(
                f,
                "segment {segment} does not exist on rank {rank}: create or allocate it first"
            ),
            Error::SegmentNotRegistered { rank, segment } => write!(
                f,
                "segment {segment} of rank {rank} is not registered with this rank: rank {rank} \
                 must call segment_register({segment}, <this rank>) or create it collectively"
            ),
            Error::SegmentPrivate { rank, segment } => write!(
                f,
                "segment {segment} of rank {rank} is that rank's private memory (bound to \
                 memory that is not whole pages): only rank {rank} reads and writes its data, \
                 others may only notify it; bind page-aligned memory sized in pages to share it"
            ),
            Error::SegmentExists { segment } => write!(
                f,
                "segment {segment} already exists on this rank: delete it first or use another id"
            ),
            Error::OutOfBounds {
                side,
                rank,
                segment,
                offset,
                size,
                segment_size,
            } => write!(
                f,
                "{side} offset {offset} + size {size} is past the end of segment {segment} of \
                 rank {rank}, which has {segment_size} bytes"
            ),
            Error::TransferTooLarge { size, max } => write!(
                f,
                "transfer of {size} bytes exceeds the maximum of {max} (Config::transfer_size_max); \
                 split it"
            ),
            Error::InvalidNotificationId { id, num } => write!(
                f,
                "notification id {id} is out of range: the segment has notifications 0..{num} \
                 (Config::notification_num)"
            ),
            Error::ZeroNotificationValue => write!(
                f,
                "notification value 0 is not allowed: 0 means 'no notification', use a non-zero value"
            ),
            Error::MisalignedAtomic { offset } => write!(
                f,
                "atomic operations need an 8-byte aligned offset, {offset} is not"
            ),
            Error::InvalidQueue { queue, num } => write!(
                f,
                "queue {queue} does not exist (deleted, never created, or past the maximum): \
                 ids 0..{num} may name queues (Config::queue_num, queue_create)"
            ),
            Error::TooManyQueues { max } => {
                write!(f, "cannot create more queues: the maximum is {max}")
            }
            Error::InvalidGroup { group } => write!(
                f,
                "group {} does not exist on this rank: create it with group_create",
                group.0
            ),
            Error::GroupNotCommitted { group } => write!(
                f,
                "group {} is not committed: call group_commit on every member first",
                group.0
            ),
            Error::GroupMismatch { group, reason } => write!(f, "group {}: {reason}", group.0),
            Error::TooManyGroups { max } => write!(
                f,
                "cannot create more groups: the maximum is {max} (Config::group_max)"
            ),
            Error::ActiveCollective { group } => write!(
                f,
                "another collective is in progress on group {}: finish it (repeat the call that \
                 timed out) before starting a different one",
                group.0
            ),
            Error::RankFailed { rank } => write!(
                f,
                "rank {rank} has failed (died without proc_term); see state_vec(), and call \
                 acknowledge_failures() to keep waiting on the surviving ranks"
            ),
            Error::RankTerminated { rank } => write!(
                f,
                "rank {rank} has already terminated (proc_term); it takes no more communication"
            ),
            Error::OtherNode {
                rank,
                node,
                this_node,
            } => write!(
                f,
                "rank {rank} is on node {node}, not on this rank's node {this_node}: only memory \
                 of the own node can be accessed directly; use write/read/write_notify"
            ),
            Error::NotAWindow { rank, segment } => write!(
                f,
                "segment {segment} of rank {rank} is not a node-shared window: create it with \
                 window_create to share it within the node"
            ),
            Error::MessageTooLarge { size, capacity } => write!(
                f,
                "the next passive message has {size} bytes but the receive size is {capacity}; it \
                 stays queued: receive it with a larger size"
            ),
            Error::SizeOverflow { argument, max } => write!(
                f,
                "{argument} overflows: it exceeds {max} bytes, the most any memory can hold"
            ),
            Error::OutOfMemory { what, size } => write!(
                f,
                "not enough memory for {what} ({size} bytes): /dev/shm or the machine has less \
                 free; free some or ask for less"
            ),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::RmaSync(msg) => write!(f, "RMA synchronisation: {msg}"),
            Error::Config(msg) => write!(f, "invalid configuration: {msg}"),
            Error::Environment(msg) => write!(f, "bad launch environment: {msg}"),
            Error::AlreadyInitialized => write!(
                f,
                "a GASPI context is already alive in this process; use it (it is Sync) or drop it \
                 before initialising again"
            ),
            Error::System { what, source } => write!(f, "{what}: {source}"),
            Error::Engine { call, code, name } => {
                write!(f, "GPI-2's {call} failed with {name} ({code})")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::System { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant's code, against what GPI-2 1.6.0's checking build
    /// returns for the same mistake (GPI2_Utility.h's GASPI_VERIFY_*
    /// macros, GPI2_SEG.c, GPI2_IO.c, GPI2_GRP.c).
    #[test]
    fn codes_are_gpi2s() {
        let oob = |side, offset| Error::OutOfBounds {
            side,
            rank: 0,
            segment: 0,
            offset,
            size: 8,
            segment_size: 4096,
        };
        let cases: Vec<(Error, &str)> = vec![
            (Error::Timeout, "GASPI_TIMEOUT"),
            (
                Error::QueueFull {
                    queue: 0,
                    posted: 1,
                    max: 1,
                },
                "GASPI_QUEUE_FULL",
            ),
            (
                Error::InvalidRank {
                    rank: 9,
                    num_ranks: 2,
                },
                "GASPI_ERR_INV_RANK",
            ),
            (
                Error::InvalidSegmentId {
                    segment: 255,
                    max: 32,
                },
                "GASPI_ERR_INV_SEG",
            ),
            (
                Error::SegmentNotFound {
                    rank: 0,
                    segment: 1,
                },
                "GASPI_ERR_INV_SEG",
            ),
            (Error::SegmentExists { segment: 1 }, "GASPI_ERR_INV_SEG"),
            (
                Error::SegmentPrivate {
                    rank: 1,
                    segment: 2,
                },
                "GASPI_ERR_INV_SEG",
            ),
            // GASPI_VERIFY_LOCAL_OFF / REMOTE_OFF: offset >= size is a bad
            // offset, offset + size > segment size a bad size.
            (oob(Side::Local, 4096), "GASPI_ERR_INV_LOC_OFF"),
            (oob(Side::Remote, 5000), "GASPI_ERR_INV_REM_OFF"),
            (oob(Side::Local, 4090), "GASPI_ERR_INV_COMMSIZE"),
            (oob(Side::Remote, 4090), "GASPI_ERR_INV_COMMSIZE"),
            (
                Error::TransferTooLarge { size: 2, max: 1 },
                "GASPI_ERR_INV_COMMSIZE",
            ),
            (
                Error::InvalidNotificationId { id: 9, num: 8 },
                "GASPI_ERR_INV_NOTIF_ID",
            ),
            (Error::ZeroNotificationValue, "GASPI_ERR_INV_NOTIF_VAL"),
            (
                Error::MisalignedAtomic { offset: 3 },
                "GASPI_ERR_UNALIGN_OFF",
            ),
            (
                Error::InvalidQueue { queue: 9, num: 8 },
                "GASPI_ERR_INV_QUEUE",
            ),
            (Error::TooManyQueues { max: 16 }, "GASPI_ERROR"),
            (
                Error::InvalidGroup { group: GroupId(7) },
                "GASPI_ERR_INV_GROUP",
            ),
            (Error::TooManyGroups { max: 32 }, "GASPI_ERR_MANY_GRP"),
            (
                Error::ActiveCollective { group: GroupId(0) },
                "GASPI_ERR_ACTIVE_COLL",
            ),
            (
                Error::SizeOverflow {
                    argument: "x",
                    max: 1,
                },
                "GASPI_ERR_INV_SIZE",
            ),
            (
                Error::OutOfMemory {
                    what: "x".into(),
                    size: 1,
                },
                "GASPI_ERR_MEMALLOC",
            ),
            (Error::Config("x".into()), "GASPI_ERR_CONFIG"),
            (Error::Environment("x".into()), "GASPI_ERR_ENV"),
            (Error::AlreadyInitialized, "GASPI_ERR_INITED"),
        ];
        for (e, code) in cases {
            assert_eq!(e.gaspi_code(), code, "{e:?}");
        }
    }

    #[test]
    fn no_space_is_out_of_memory() {
        for errno in [libc::ENOSPC, libc::ENOMEM, libc::EFBIG] {
            let e = Error::making("x", 9, io::Error::from_raw_os_error(errno));
            assert!(matches!(e, Error::OutOfMemory { size: 9, .. }), "{e:?}");
        }
        let e = Error::making("x", 9, io::Error::from_raw_os_error(libc::EACCES));
        assert!(matches!(e, Error::System { .. }));
    }
}
