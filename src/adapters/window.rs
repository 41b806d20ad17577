//! What the parts of an RMA window share: the options and designs a user
//! picks, the per-rank state that fences and locks keep between calls, and
//! where each local rank's lock area lies.

use crate::error::{Error, Result};
use crate::types::{QueueId, Rank};

/// The operation of an accumulate (`MPI_Op` of `MPI_Accumulate`).
///
/// ```
/// use gaspi::{AccumulateOp, Assert, Config, Context, GroupId, RmaWindow, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let win = RmaWindow::<u32>::new(&ctx, 0, 2, GroupId::ALL, Timeout::Block)?;
/// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
/// win.accumulate(&[1 << (ctx.rank() % 32)], 0, 0, AccumulateOp::Bor)?;
/// win.accumulate(&[ctx.rank() as u32], 0, 1, AccumulateOp::Max)?;
/// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
/// if ctx.rank() == 0 {
///     assert_eq!(win.local().get(1), ctx.num_ranks() as u32 - 1);
/// }
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccumulateOp {
    /// `MPI_SUM`; integers wrap around.
    Sum,
    /// `MPI_PROD`; integers wrap around.
    Prod,
    /// `MPI_MIN`.
    Min,
    /// `MPI_MAX`.
    Max,
    /// `MPI_REPLACE`: the origin's value replaces the target's.
    Replace,
    /// `MPI_NO_OP`: the target keeps its value (with `get_accumulate` and
    /// `fetch_and_op`: an atomic read).
    NoOp,
    /// `MPI_BAND` (integers only).
    Band,
    /// `MPI_BOR` (integers only).
    Bor,
    /// `MPI_BXOR` (integers only).
    Bxor,
}

impl AccumulateOp {
    pub(super) fn is_bitwise(self) -> bool {
        matches!(
            self,
            AccumulateOp::Band | AccumulateOp::Bor | AccumulateOp::Bxor
        )
    }
}

/// How [`RmaWindow::fence`](crate::RmaWindow::fence) completes an epoch (Santhanaraman et al. 2009, section 3).
///
/// ```
/// use gaspi::{Assert, Config, Context, FenceDesign, GroupId, RmaOptions, RmaWindow, Timeout};
/// let ctx = Context::init(Config::default())?;
/// // The same epoch under each design gives the same result.
/// for (seg, design) in [FenceDesign::Notified, FenceDesign::ImmediateOpt, FenceDesign::Deferred].into_iter().enumerate() {
///     let opts = RmaOptions { design, ..Default::default() };
///     let win = RmaWindow::<u64>::with_options(&ctx, seg as u8, 1, GroupId::ALL, opts, Timeout::Block)?;
///     win.fence(Assert::NOPRECEDE, Timeout::Block)?;
///     win.put(&[seg as u64 + 1], ctx.rank(), 0)?;
///     win.fence(Assert::NOSUCCEED, Timeout::Block)?;
///     assert_eq!(win.local().get(0), seg as u64 + 1);
/// }
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FenceDesign {
    /// Fence-Imm-RI: puts are notified writes; the fence exchanges how many
    /// each node will receive and waits for exactly that many.
    #[default]
    Notified,
    /// Fence-Imm-Opt: puts are plain writes; the fence sends a finish
    /// notification on every channel to another node and waits for every
    /// channel's, then a barrier.
    ImmediateOpt,
    /// Fence-Def: operations are kept locally and issued in the closing
    /// fence, once every rank has entered it.
    Deferred,
}

impl FenceDesign {
    /// Whether writes to other nodes are counted notifications.
    pub(super) fn counts(self) -> bool {
        self != FenceDesign::ImmediateOpt
    }

    /// The size of the window's notification table for `ranks` ranks,
    /// `ppn` per node.
    pub(super) fn notifications(self, ranks: usize, ppn: usize) -> Result<u32> {
        match self {
            FenceDesign::ImmediateOpt => {
                let n = ranks * ppn;
                if n > crate::config::NOTIFICATION_LIMIT as usize {
                    return Err(Error::InvalidArgument(format!(
                        "the immediate-opt fence needs one notification per rank and local \
                         rank ({ranks} x {ppn}), more than {}",
                        crate::config::NOTIFICATION_LIMIT
                    )));
                }
                Ok(n.max(1) as u32)
            }
            _ => Ok(1),
        }
    }
}

/// Assertions of a fence (`MPI_MODE_*`), combined with `|`.
///
/// ```
/// use gaspi::Assert;
/// let a = Assert::NOPRECEDE | Assert::NOSTORE;
/// assert!(a.contains(Assert::NOPRECEDE) && !a.contains(Assert::NOSUCCEED));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Assert(u8);

impl Assert {
    /// No assertion (`0`).
    ///
    /// ```
    /// assert!(!gaspi::Assert::NONE.contains(gaspi::Assert::NOPUT));
    /// ```
    pub const NONE: Assert = Assert(0);
    /// `MPI_MODE_NOPRECEDE`: the fence completes no operations (every
    /// member passes it).
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// // The first fence opens the first epoch.
    /// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub const NOPRECEDE: Assert = Assert(1);
    /// `MPI_MODE_NOSUCCEED`: no operations follow; the epoch ends (every
    /// member passes it).
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
    /// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
    /// // No epoch after the last fence.
    /// assert!(win.put(&[1], ctx.rank(), 0).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub const NOSUCCEED: Assert = Assert(2);
    /// `MPI_MODE_NOSTORE`: the local window was not updated by local stores
    /// since the last synchronisation.
    ///
    /// ```
    /// let a = gaspi::Assert::NOSTORE | gaspi::Assert::NOPUT;
    /// assert!(a.contains(gaspi::Assert::NOSTORE));
    /// ```
    pub const NOSTORE: Assert = Assert(4);
    /// `MPI_MODE_NOPUT`: the local window will not be updated by puts or
    /// accumulates until the next fence.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.fence(Assert::NOPRECEDE | Assert::NOPUT, Timeout::Block)?;
    /// let mut v = [0u32];
    /// win.get(&mut v, ctx.rank(), 0)?; // reads only in this epoch
    /// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub const NOPUT: Assert = Assert(8);
    /// `MPI_MODE_NOCHECK` (for [`RmaWindow::lock`](crate::RmaWindow::lock) and
    /// [`RmaWindow::lock_all`](crate::RmaWindow::lock_all)): no conflicting lock is held or requested,
    /// so the lock protocol is skipped.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// // The program knows nobody else locks: skip the lock protocol.
    /// win.lock_all(Assert::NOCHECK, Timeout::Block)?;
    /// win.unlock_all()?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub const NOCHECK: Assert = Assert(16);

    /// Whether every assertion of `other` is in `self`.
    ///
    /// ```
    /// use gaspi::Assert;
    /// let a = Assert::NOPRECEDE | Assert::NOPUT;
    /// assert!(a.contains(Assert::NOPUT));
    /// assert!(a.contains(Assert::NOPRECEDE | Assert::NOPUT));
    /// assert!(!a.contains(Assert::NOPUT | Assert::NOSTORE));
    /// ```
    pub fn contains(self, other: Assert) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Assert {
    type Output = Assert;
    fn bitor(self, rhs: Assert) -> Assert {
        Assert(self.0 | rhs.0)
    }
}

/// The lock type of [`RmaWindow::lock`](crate::RmaWindow::lock) (`MPI_LOCK_EXCLUSIVE`,
/// `MPI_LOCK_SHARED`).
///
/// ```
/// use gaspi::{Assert, Config, Context, GroupId, LockType, RmaWindow, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let win = RmaWindow::<u64>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
/// // Readers share the target, a writer has it alone.
/// win.lock(LockType::Shared, 0, Assert::NONE, Timeout::Block)?;
/// let mut v = [0u64];
/// win.get(&mut v, 0, 0)?;
/// win.unlock(0)?;
/// win.lock(LockType::Exclusive, 0, Assert::NONE, Timeout::Block)?;
/// win.put(&[v[0] + 1], 0, 0)?;
/// win.unlock(0)?;
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockType {
    /// `MPI_LOCK_EXCLUSIVE`: no other rank holds a lock on the target.
    Exclusive,
    /// `MPI_LOCK_SHARED`: other ranks may hold shared locks on the target.
    Shared,
}

/// How [`RmaWindow::lock`](crate::RmaWindow::lock) and friends are implemented (see the module
/// docs of `adapters::lock`).
///
/// ```
/// use gaspi::{LockDesign, RmaOptions};
/// let opts = RmaOptions { lock: LockDesign::McsRw, ..Default::default() };
/// assert_ne!(opts.lock, LockDesign::default());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockDesign {
    /// One global MCS-RW-RP lock per window (Hatanaka et al. 2015).
    McsRw,
    /// A global `lock_all`/exclusive word plus one MCS-RW-RP lock per
    /// target (foMPI): the default, because exclusive locks on different
    /// targets do not serialise (see the lock figures in docs/guide/benchmarking.md).
    #[default]
    TwoLevel,
}

/// Options of an [`RmaWindow`](crate::RmaWindow).
///
/// ```
/// use gaspi::{FenceDesign, RmaOptions};
/// let opts = RmaOptions { design: FenceDesign::Deferred, ..Default::default() };
/// assert_eq!(opts.queue, 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RmaOptions {
    /// How [`RmaWindow::fence`](crate::RmaWindow::fence) completes an epoch (default: notified).
    pub design: FenceDesign,
    /// Bytes of staging memory per rank for data bound for other nodes
    /// (default 256 KiB); larger transfers go in pieces.
    pub staging_bytes: usize,
    /// The queue the window posts on (default 0).
    pub queue: QueueId,
    /// How passive-target locks are implemented (default: two-level).
    pub lock: LockDesign,
    /// The queue the broadcaster threads of
    /// [`RmaWindow::broadcaster`](crate::RmaWindow::broadcaster) relay on (default 1; must differ from
    /// `queue`).
    pub relay_queue: QueueId,
}

impl Default for RmaOptions {
    fn default() -> RmaOptions {
        RmaOptions {
            design: FenceDesign::Notified,
            staging_bytes: 256 << 10,
            queue: 0,
            lock: LockDesign::default(),
            relay_queue: 1,
        }
    }
}

/// Whether the window is in an access/exposure epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Epoch {
    /// Before the first fence, or after a fence with `NOSUCCEED`.
    None,
    /// Between two fences (passive-target epochs may still be opened as
    /// long as no operation was issued since the last fence).
    Fence,
}

/// An operation the deferred design keeps until the closing fence.
pub(super) enum Deferred<T> {
    Put {
        target: Rank,
        disp: usize,
        data: Vec<T>,
    },
    Accumulate {
        target: Rank,
        disp: usize,
        data: Vec<T>,
        op: AccumulateOp,
    },
}

pub(super) struct WindowState<T> {
    pub(super) epoch: Epoch,
    /// An operation was issued since the last fence.
    pub(super) used: bool,
    /// Locks held or requested.
    pub(super) passive: Passive,
    /// Where a fence that returned an error resumes.
    pub(super) phase: FencePhase,
    /// The assertions of the fence in progress.
    pub(super) assert: Assert,
    /// Counted (notified) writes sent to each node in this epoch.
    pub(super) sent: Vec<u64>,
    /// The node's notification count that completes the last epoch.
    pub(super) expected: u64,
    /// Finish notifications claimed in the fence in progress (opt design).
    pub(super) drained: usize,
    /// Bytes of the staging area in use since the queue was last drained.
    pub(super) staging_used: usize,
    pub(super) deferred: std::collections::VecDeque<Deferred<T>>,
}

impl<T> WindowState<T> {
    /// Whether the rank is in a fence epoch in which it issued operations.
    pub(super) fn fence_used(&self) -> bool {
        self.epoch == Epoch::Fence && self.used
    }
}

/// The steps of a fence; an error leaves the window at the failed step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FencePhase {
    /// No fence in progress.
    Idle,
    /// Exchange counts (notified, deferred) or send finishes (opt).
    Exchange,
    /// Issue the kept operations (deferred).
    Apply,
    /// Wait until this node received everything of the epoch.
    Drain,
    /// The closing barrier (when needed), then the epoch state.
    Barrier,
}

/// Cache lines of a rank's lock area: the accumulate lock, its MCS lock as
/// a target, the global lock (used at the window's first member), then
/// queue nodes.
pub(super) const ACC_LINE: usize = 0;
pub(super) const LOCAL_LINE: usize = 1;
pub(super) const GLOBAL_LINE: usize = 2;
/// The two-level global word, in the global lock's line.
pub(super) const GLOBAL_WORD: usize = 32;
pub(super) const QNODE_LINE: usize = 3;

/// Bytes of one rank's lock area in a window of `members` members: one
/// queue node for the global lock and one per target.
pub(super) fn lock_area_bytes(members: usize) -> usize {
    64 * (QNODE_LINE + 1 + members)
}

/// One MCS-RW-RP lock and this rank's queue node for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Mcs {
    /// The rank holding the lock words.
    pub(super) owner: Rank,
    /// The queue node's index in a lock area (0: the global lock).
    pub(super) qnode: usize,
}

/// What a lock request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LockRequest {
    pub(super) kind: LockType,
    /// `None`: `lock_all`.
    pub(super) target: Option<Rank>,
}

/// Where a lock request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LockStep {
    /// Nothing done yet.
    Start,
    /// Two-level: entering the global word (no effect left behind while
    /// waiting).
    Global,
    /// Queued on an MCS lock, waiting for the hand-off.
    Queued { lock: Mcs, writer: bool },
    /// Granted.
    Done,
}

/// A lock this rank holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Held {
    pub(super) kind: LockType,
    pub(super) nocheck: bool,
}

/// The passive-target state of a window at this rank.
#[derive(Debug, Default)]
pub(super) struct Passive {
    /// The lock held on each member (by member index).
    pub(super) held: Vec<Option<Held>>,
    /// `lock_all` is held.
    pub(super) all: Option<Held>,
    /// [`LockDesign::McsRw`]: the mode this rank holds the global lock in
    /// and how many of its locks share that hold.
    pub(super) global: Option<(LockType, usize)>,
    /// A request that returned an error before it was granted.
    pub(super) pending: Option<(LockRequest, LockStep)>,
}

impl Passive {
    pub(super) fn new(members: usize) -> Passive {
        Passive {
            held: vec![None; members],
            ..Default::default()
        }
    }

    /// Whether this rank is in a passive-target epoch (holds a lock or
    /// waits for one).
    pub(super) fn active(&self) -> bool {
        self.all.is_some() || self.pending.is_some() || self.held.iter().any(Option::is_some)
    }

    /// Whether member `index` may be accessed.
    pub(super) fn grants(&self, index: usize) -> bool {
        self.all.is_some() || self.held[index].is_some()
    }
}
