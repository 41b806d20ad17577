//! The RMA window (`MPI_Win`) and its communication calls.
//!
//! # Layout
//! The window is a node-shared window ([`Context::window_create`]) holding,
//! for each local rank `l` of the node (by [`Context::local_rank`]):
//! - its region of `len` elements at `l * stride` (the memory MPI exposes);
//! - its lock area after the regions: the accumulate lock word, the
//!   passive-target lock words and queue nodes (see `adapters::lock`);
//! - its staging area after the lock words: origin data bound for another
//!   node is copied there and written from there, because the queues move
//!   data between segments and a caller's slice is only borrowed.
//!
//! # Atomicity of accumulates
//! `accumulate`, `get_accumulate`, `fetch_and_op` and `compare_and_swap`
//! take the target's lock word (a compare-and-swap spin lock, waiting
//! politely) around their read-modify-write, so accumulates to the same
//! location from any ranks are atomic per element, as MPI requires; puts
//! and gets racing with them on the same bytes are erroneous in MPI and
//! unordered here.

use super::window::{
    ACC_LINE, AccumulateOp, Assert, Deferred, Epoch, FenceDesign, FencePhase, Passive, RmaOptions,
    WindowState, lock_area_bytes,
};
use crate::collectives::agree::Shape;
use crate::collectives::creation::Creation;
use crate::collectives::{ReduceOp, Reducible};
use crate::context::Context;
use crate::engine::memcopy::copy_slice;
use crate::error::{Error, Result, Side};
use crate::segments::SegmentView;
use crate::types::{GroupId, Local, Notification, Rank, Remote, SegmentId, Timeout};
use crate::windows::WindowOptions;
use std::cell::{RefCell, RefMut};

/// Element types of an [`RmaWindow`]: `i32`, `u32`, `i64`, `u64`, `f32`,
/// `f64` (MPI's predefined integer and floating-point types).
///
/// ```
/// use gaspi::{AccumulateOp, RmaElem};
/// assert_eq!(<u32 as RmaElem>::bitwise(AccumulateOp::Bxor, 6, 3), Some(5));
/// assert_eq!(<f64 as RmaElem>::bitwise(AccumulateOp::Band, 1.0, 1.0), None);
/// ```
pub trait RmaElem: Reducible {
    /// `a op b` for the bitwise operations; `None` for floating-point
    /// types, which MPI does not define them for.
    fn bitwise(op: AccumulateOp, a: Self, b: Self) -> Option<Self>;
}

macro_rules! rma_int {
    ($($t:ty),*) => {$(
        impl RmaElem for $t {
            fn bitwise(op: AccumulateOp, a: Self, b: Self) -> Option<Self> {
                match op {
                    AccumulateOp::Band => Some(a & b),
                    AccumulateOp::Bor => Some(a | b),
                    AccumulateOp::Bxor => Some(a ^ b),
                    _ => None,
                }
            }
        }
    )*};
}
rma_int!(i32, u32, i64, u64);

macro_rules! rma_float {
    ($($t:ty),*) => {$(
        impl RmaElem for $t {
            fn bitwise(_: AccumulateOp, _: Self, _: Self) -> Option<Self> {
                None
            }
        }
    )*};
}
rma_float!(f32, f64);

/// `target op origin`, element-wise (checked by [`check_op`] first).
fn combine<T: RmaElem>(op: AccumulateOp, target: T, origin: T) -> T {
    let reduce = |r| T::reduce(r, target, origin);
    match op {
        AccumulateOp::Sum => reduce(ReduceOp::Sum),
        AccumulateOp::Prod => reduce(ReduceOp::Prod),
        AccumulateOp::Min => reduce(ReduceOp::Min),
        AccumulateOp::Max => reduce(ReduceOp::Max),
        AccumulateOp::Replace => origin,
        AccumulateOp::NoOp => target,
        bit => T::bitwise(bit, target, origin).expect("checked by check_op"),
    }
}

fn check_op<T: RmaElem>(op: AccumulateOp) -> Result<()> {
    if op.is_bitwise() && T::bitwise(op, T::zeroed(), T::zeroed()).is_none() {
        return Err(Error::InvalidArgument(format!(
            "{op:?} is defined for integers only, not for {}",
            T::GASPI_TYPE
        )));
    }
    Ok(())
}

/// An MPI-style RMA window (`MPI_Win`) over a group: every member exposes
/// `len` elements of `T`; members access each other's with `put`, `get`
/// and the accumulates inside epochs: active-target epochs opened and
/// closed by [`RmaWindow::fence`], or passive-target epochs of
/// [`RmaWindow::lock`] / [`RmaWindow::lock_all`] and their unlocks. Ranks
/// are the job's ranks (not group indices).
///
/// The owner reads and writes its own elements with [`RmaWindow::local`]
/// (MPI's local loads and stores to the window).
///
/// A window is used by one thread at a time (it is `Send`, not `Sync`), as
/// an MPI window is from one thread per process unless the program
/// synchronises. Dropping it deletes its segment (not collective: drop it
/// after a closing fence, as `MPI_Win_free` requires).
///
/// ```
/// use gaspi::{AccumulateOp, Assert, Config, Context, GroupId, RmaWindow, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let win = RmaWindow::<u64>::new(&ctx, 3, 16, GroupId::ALL, Timeout::Block)?;
/// let right = (ctx.rank() + 1) % ctx.num_ranks();
/// win.fence(Assert::NOPRECEDE, Timeout::Block)?;          // MPI_Win_fence
/// win.put(&[ctx.rank() as u64], right, 0)?;               // MPI_Put
/// win.accumulate(&[1], 0, 1, AccumulateOp::Sum)?;         // MPI_Accumulate
/// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
/// let left = (ctx.rank() + ctx.num_ranks() - 1) % ctx.num_ranks();
/// assert_eq!(win.local().get(0), left as u64);
/// if ctx.rank() == 0 {
///     assert_eq!(win.local().get(1), ctx.num_ranks() as u64);
/// }
/// # Ok::<(), gaspi::Error>(())
/// ```
pub struct RmaWindow<'a, T: RmaElem> {
    pub(super) ctx: &'a Context,
    pub(super) segment: SegmentId,
    pub(super) group: GroupId,
    /// The group's ranks, sorted.
    pub(super) members: Vec<Rank>,
    /// The members on other nodes.
    pub(super) elsewhere: Vec<Rank>,
    len: usize,
    /// Bytes between two local ranks' regions (a multiple of 64).
    stride: usize,
    locks_at: usize,
    /// Bytes of each local rank's lock area.
    lock_bytes: usize,
    staging_at: usize,
    /// The window's words, for the lock protocol.
    pub(super) words: super::words::Words<'a>,
    pub(super) opts: RmaOptions,
    data: SegmentView<T>,
    bytes: SegmentView<u8>,
    pub(super) st: RefCell<WindowState<T>>,
}

/// The notification id of counted writes (notified and deferred designs).
pub(super) const DATA_ID: u32 = 0;

impl<'a, T: RmaElem> RmaWindow<'a, T> {
    /// Create a window of `len` elements per member over `group` on
    /// segment `segment`, with the default (notified) fence design
    /// (`MPI_Win_allocate`). Collective over `group`; the elements start
    /// zeroed.
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<i64>::new(&ctx, 0, 100, GroupId::ALL, Timeout::Block)?;
    /// assert_eq!(win.local().to_vec(), vec![0; 100]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn new(
        ctx: &'a Context,
        segment: SegmentId,
        len: usize,
        group: GroupId,
        timeout: Timeout,
    ) -> Result<RmaWindow<'a, T>> {
        RmaWindow::with_options(ctx, segment, len, group, RmaOptions::default(), timeout)
    }

    /// [`RmaWindow::new`] with options (the fence design, staging size,
    /// queue). Every member must pass the same length, element type and
    /// options (the queues aside): members that disagree all get
    /// [`Error::InvalidArgument`], nothing made.
    ///
    /// ```
    /// use gaspi::{Config, Context, FenceDesign, GroupId, RmaOptions, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let opts = RmaOptions { design: FenceDesign::ImmediateOpt, ..Default::default() };
    /// let win = RmaWindow::<f64>::with_options(&ctx, 4, 8, GroupId::ALL, opts, Timeout::Block)?;
    /// assert_eq!(win.len(), 8);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn with_options(
        ctx: &'a Context,
        segment: SegmentId,
        len: usize,
        group: GroupId,
        opts: RmaOptions,
        timeout: Timeout,
    ) -> Result<RmaWindow<'a, T>> {
        let mut members = ctx.committed_members(group)?;
        members.sort_unstable();
        if !members.contains(&ctx.rank()) {
            return Err(Error::InvalidArgument(format!(
                "rank {} is not a member of group {}",
                ctx.rank(),
                group.0
            )));
        }
        let mut creation = Creation::begin(ctx, segment, group, "RmaWindow", timeout);
        let shape = Shape::new("RMA window")
            .debug(&std::any::type_name::<T>())
            .number(len)
            .debug(&(opts.design, opts.staging_bytes, opts.lock));
        creation.agree(shape, "RmaWindow")?;
        if opts.staging_bytes < 64 {
            return Err(Error::InvalidArgument(
                "RmaOptions::staging_bytes must be at least 64".into(),
            ));
        }
        use crate::extent::{add, align_up, mul};
        let elem = std::mem::size_of::<T>();
        let ppn = ctx.ranks_per_node();
        let what = "RMA window size (len * element size, per rank of the node)";
        let stride = align_up(what, mul(what, len, elem)?, 64)?.max(64);
        let locks_at = mul(what, ppn, stride)?;
        let lock_bytes = lock_area_bytes(members.len());
        let staging_bytes = align_up("RmaOptions::staging_bytes", opts.staging_bytes, 64)?;
        let staging_at = add(what, locks_at, mul(what, ppn, lock_bytes)?)?;
        let size = add(what, staging_at, mul(what, ppn, staging_bytes)?)?;
        let table = opts.design.notifications(ctx.num_ranks() as usize, ppn)?;
        if opts.design.counts() && ctx.num_nodes() > ctx.config.allreduce_elem_max as usize {
            return Err(Error::InvalidArgument(format!(
                "the {:?} fence exchanges one count per node: at most {} nodes \
                 (Config::allreduce_elem_max), the job has {}",
                opts.design,
                ctx.config.allreduce_elem_max,
                ctx.num_nodes()
            )));
        }
        let members_len = members.len();
        let table = WindowOptions::default().notifications(table);
        let win = creation.window(|t| ctx.window_create_with(segment, size, group, table, t))?;
        let opts = RmaOptions {
            staging_bytes,
            ..opts
        };
        Ok(RmaWindow {
            ctx,
            data: win.view::<T>(),
            bytes: win.view::<u8>(),
            words: super::words::Words::new(ctx, segment, win.object().clone()),
            segment,
            group,
            elsewhere: members
                .iter()
                .copied()
                .filter(|&r| ctx.node_of(r) != ctx.node())
                .collect(),
            members,
            len,
            stride,
            locks_at,
            lock_bytes,
            staging_at,
            opts,
            st: RefCell::new(WindowState {
                epoch: Epoch::None,
                used: false,
                passive: Passive::new(members_len),
                phase: FencePhase::Idle,
                assert: Assert::NONE,
                sent: vec![0; ctx.num_nodes()],
                expected: 0,
                drained: 0,
                staging_used: 0,
                deferred: Default::default(),
            }),
        })
    }

    /// Elements per member.
    ///
    /// ```
    /// # use gaspi::{Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<f32>::new(&ctx, 0, 10, GroupId::ALL, Timeout::Block)?;
    /// assert_eq!(win.len(), 10);
    /// assert_eq!(win.local().len(), 10);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the members expose no elements.
    ///
    /// ```
    /// # use gaspi::{Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<f32>::new(&ctx, 0, 0, GroupId::ALL, Timeout::Block)?;
    /// assert!(win.is_empty());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment (a node-shared window) holding the window.
    ///
    /// ```
    /// # use gaspi::{Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 12, 1, GroupId::ALL, Timeout::Block)?;
    /// assert_eq!(win.segment(), 12);
    /// assert!(ctx.window(12).is_ok());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment(&self) -> SegmentId {
        self.segment
    }

    /// The fence design of this window.
    ///
    /// ```
    /// # use gaspi::{Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// assert_eq!(win.design(), gaspi::FenceDesign::Notified);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn design(&self) -> FenceDesign {
        self.opts.design
    }

    /// This rank's own elements, for local loads and stores (MPI's direct
    /// access to the local window memory). The same epoch rules as in MPI
    /// apply: a local store and a remote access to the same element in one
    /// epoch race.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 0, 4, GroupId::ALL, Timeout::Block)?;
    /// win.local().set(2, 8); // a local store, before the first epoch
    /// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
    /// let mut v = [0u64];
    /// win.get(&mut v, ctx.rank(), 2)?;
    /// assert_eq!(v[0], 8);
    /// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn local(&self) -> SegmentView<T> {
        self.region_of(self.ctx.rank())
    }

    /// The elements of `rank` (a rank of this node).
    pub(super) fn region_of(&self, rank: Rank) -> SegmentView<T> {
        let first = self.local_of(rank) * self.stride / std::mem::size_of::<T>().max(1);
        self.data.sub(first..first + self.len)
    }

    fn local_of(&self, rank: Rank) -> usize {
        rank as usize % self.ctx.ranks_per_node()
    }

    pub(super) fn on_my_node(&self, rank: Rank) -> bool {
        self.ctx.node_of(rank) == self.ctx.node()
    }

    /// Byte offset of `rank`'s lock area in the window.
    pub(super) fn lock_area(&self, rank: Rank) -> usize {
        self.locks_at + self.local_of(rank) * self.lock_bytes
    }

    /// Byte offset of element `disp` of `rank`'s region in the window.
    pub(super) fn offset(&self, rank: Rank, disp: usize) -> usize {
        self.local_of(rank) * self.stride + disp * std::mem::size_of::<T>()
    }

    pub(super) fn state(&self) -> Result<RefMut<'_, WindowState<T>>> {
        self.st.try_borrow_mut().map_err(|_| {
            Error::InvalidArgument("the window is in use by a call that has not returned".into())
        })
    }

    /// Check an access of `n` elements at `disp` of `target` in an epoch.
    fn check(
        &self,
        st: &mut WindowState<T>,
        call: &str,
        target: Rank,
        disp: usize,
        n: usize,
    ) -> Result<()> {
        let index = self.member_index(target)?;
        if st.passive.active() {
            if !st.passive.grants(index) {
                return Err(Error::RmaSync(format!(
                    "{call} to rank {target}, which this rank has not locked \
                     (lock it, or use lock_all)"
                )));
            }
        } else if st.epoch != Epoch::Fence {
            return Err(Error::RmaSync(format!(
                "{call} outside an access epoch: open one with fence \
                 (without NOSUCCEED) or lock first"
            )));
        } else if st.phase != FencePhase::Idle {
            return Err(Error::RmaSync(format!(
                "{call} while a fence is unfinished: call fence again to complete it"
            )));
        } else {
            st.used = true;
        }
        self.check_range(target, disp, n)
    }

    /// Whether elements `disp..disp + n` lie in the window; if not, the
    /// error gives the range and the window in bytes of `target`'s region,
    /// as [`Error::OutOfBounds`] says (a range past the end of what memory
    /// can hold is reported as reaching to `usize::MAX`).
    pub(crate) fn check_range(&self, target: Rank, disp: usize, n: usize) -> Result<()> {
        match disp.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => {
                let bytes = |elems: usize| elems.saturating_mul(std::mem::size_of::<T>());
                Err(Error::OutOfBounds {
                    side: Side::Remote,
                    rank: target,
                    segment: self.segment,
                    offset: bytes(disp),
                    size: bytes(n),
                    segment_size: bytes(self.len),
                })
            }
        }
    }

    /// Whether operations are kept for the closing fence: the deferred
    /// design, in a fence epoch (passive-target epochs act at once).
    fn defers(&self, st: &WindowState<T>) -> bool {
        self.opts.design == FenceDesign::Deferred && !st.passive.active()
    }

    /// Put `src` into elements `disp..` of `target` (`MPI_Put`). Complete
    /// at the target after the closing fence; `src` may be reused at once.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 0, 8, GroupId::ALL, Timeout::Block)?;
    /// let right = (ctx.rank() + 1) % ctx.num_ranks();
    /// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
    /// win.put(&[1, 2, 3], right, 5)?;
    /// assert!(win.put(&[1, 2, 3, 4], right, 5).is_err()); // past the end
    /// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
    /// assert_eq!(win.local().get(7), 3);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn put(&self, src: &[T], target: Rank, disp: usize) -> Result<()> {
        let mut st = self.state()?;
        self.check(&mut st, "put", target, disp, src.len())?;
        if self.defers(&st) {
            st.deferred.push_back(Deferred::Put {
                target,
                disp,
                data: src.to_vec(),
            });
            return Ok(());
        }
        self.write(&mut st, src, target, disp)
    }

    /// Read elements `disp..disp + dst.len()` of `target` into `dst`
    /// (`MPI_Get` followed by `MPI_Win_flush_local`: the data is in `dst`
    /// when the call returns, in every fence design).
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 0, 2, GroupId::ALL, Timeout::Block)?;
    /// win.local().set(1, ctx.rank() as u64);
    /// let left = (ctx.rank() + ctx.num_ranks() - 1) % ctx.num_ranks();
    /// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
    /// let mut v = [0u64];
    /// win.get(&mut v, left, 1)?;
    /// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
    /// assert_eq!(v[0], left as u64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn get(&self, dst: &mut [T], target: Rank, disp: usize) -> Result<()> {
        let mut st = self.state()?;
        self.check(&mut st, "get", target, disp, dst.len())?;
        self.read(&mut st, dst, target, disp)
    }

    /// Combine `src` into elements `disp..` of `target` with `op`
    /// (`MPI_Accumulate`), atomically per element with respect to every
    /// other accumulate.
    ///
    /// ```
    /// # use gaspi::{AccumulateOp, Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<f64>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
    /// win.accumulate(&[0.5], 0, 0, AccumulateOp::Sum)?;
    /// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
    /// if ctx.rank() == 0 {
    ///     assert_eq!(win.local().get(0), 0.5 * ctx.num_ranks() as f64);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn accumulate(&self, src: &[T], target: Rank, disp: usize, op: AccumulateOp) -> Result<()> {
        check_op::<T>(op)?;
        let mut st = self.state()?;
        self.check(&mut st, "accumulate", target, disp, src.len())?;
        if self.defers(&st) {
            st.deferred.push_back(Deferred::Accumulate {
                target,
                disp,
                data: src.to_vec(),
                op,
            });
            return Ok(());
        }
        self.read_modify_write(&mut st, src, None, target, disp, op)
    }

    /// Fetch elements `disp..` of `target` into `result`, then combine
    /// `src` into them with `op`, as one atomic step per element
    /// (`MPI_Get_accumulate`; done at once in every design).
    ///
    /// ```
    /// # use gaspi::{AccumulateOp, Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<i32>::new(&ctx, 0, 2, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// let mut old = [0i32; 2];
    /// win.get_accumulate(&[1, -1], &mut old, 0, 0, AccumulateOp::Sum)?;
    /// win.unlock_all()?;
    /// assert!(old[0] >= 0 && old[0] == -old[1]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn get_accumulate(
        &self,
        src: &[T],
        result: &mut [T],
        target: Rank,
        disp: usize,
        op: AccumulateOp,
    ) -> Result<()> {
        check_op::<T>(op)?;
        if src.len() != result.len() {
            return Err(Error::InvalidArgument(format!(
                "get_accumulate: origin has {} elements, result {}",
                src.len(),
                result.len()
            )));
        }
        let mut st = self.state()?;
        self.check(&mut st, "get_accumulate", target, disp, src.len())?;
        self.read_modify_write(&mut st, src, Some(result), target, disp, op)
    }

    /// One-element [`RmaWindow::get_accumulate`]: returns the old value of
    /// element `disp` of `target` and combines `value` into it
    /// (`MPI_Fetch_and_op`).
    ///
    /// ```
    /// # use gaspi::{AccumulateOp, Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// // A shared ticket counter on rank 0: every rank gets a distinct ticket.
    /// let ticket = win.fetch_and_op(1, 0, 0, AccumulateOp::Sum)?;
    /// win.unlock_all()?;
    /// assert!(ticket < ctx.num_ranks() as u64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn fetch_and_op(&self, value: T, target: Rank, disp: usize, op: AccumulateOp) -> Result<T> {
        let mut old = [T::zeroed()];
        self.get_accumulate(&[value], &mut old, target, disp, op)?;
        Ok(old[0])
    }

    /// Replace element `disp` of `target` by `value` if it equals
    /// `compare` (bitwise), atomically; returns the old value
    /// (`MPI_Compare_and_swap`).
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// // Exactly one rank sees 0 and becomes the leader.
    /// let me = ctx.rank() as u32;
    /// let before = win.compare_and_swap(me + 1, 0, 0, 0)?;
    /// win.unlock_all()?;
    /// let leader = if before == 0 { me } else { before - 1 };
    /// assert!(leader < ctx.num_ranks() as u32);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn compare_and_swap(&self, value: T, compare: T, target: Rank, disp: usize) -> Result<T> {
        let mut st = self.state()?;
        self.check(&mut st, "compare_and_swap", target, disp, 1)?;
        let mut old = [T::zeroed()];
        self.locked(target, || {
            self.read(&mut st, &mut old, target, disp)?;
            if bytemuck::bytes_of(&old[0]) == bytemuck::bytes_of(&compare) {
                self.write(&mut st, &[value], target, disp)?;
            }
            Ok(())
        })?;
        Ok(old[0])
    }

    /// `target op= src` under the target's accumulate lock, the old values
    /// into `fetch` if given.
    pub(super) fn read_modify_write(
        &self,
        st: &mut WindowState<T>,
        src: &[T],
        fetch: Option<&mut [T]>,
        target: Rank,
        disp: usize,
        op: AccumulateOp,
    ) -> Result<()> {
        self.locked(target, || {
            let mut cur = vec![T::zeroed(); src.len()];
            self.read(st, &mut cur, target, disp)?;
            if let Some(f) = fetch {
                copy_slice(f, &cur);
            }
            if op != AccumulateOp::NoOp {
                for (c, s) in cur.iter_mut().zip(src) {
                    *c = combine(op, *c, *s);
                }
                self.write(st, &cur, target, disp)?;
            }
            Ok(())
        })
    }

    /// Run `f` holding `target`'s accumulate lock: a compare-and-swap spin
    /// lock on its lock word that spins briefly, then yields, and gives up
    /// if a rank fails. Writes to another node are complete at the target
    /// before the lock is released.
    fn locked<R>(&self, target: Rank, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let word = Remote::new(target, self.segment, self.lock_area(target) + ACC_LINE * 64);
        let me = self.ctx.rank() as u64 + 1;
        let mut tries = 0u32;
        while self.ctx.atomic_compare_swap(word, 0, me, Timeout::Block)? != 0 {
            tries += 1;
            if tries < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
                if tries % 1024 == 0 {
                    self.ctx.engine.faults()?;
                }
            }
        }
        let r = f();
        let drained = if self.on_my_node(target) {
            Ok(())
        } else {
            self.ctx.flush(self.opts.queue, Timeout::Block)
        };
        let released = self.ctx.atomic_compare_swap(word, me, 0, Timeout::Block);
        let r = r?;
        drained?;
        match released? {
            old if old == me => Ok(r),
            old => Err(Error::RmaSync(format!(
                "accumulate lock of rank {target} held by {old}, expected {me}"
            ))),
        }
    }

    /// Store `src` at `disp` of `target`: a copy into the region on this
    /// node, counted writes (or plain writes in the opt design) through the
    /// staging area to another node.
    pub(super) fn write(
        &self,
        st: &mut WindowState<T>,
        src: &[T],
        target: Rank,
        disp: usize,
    ) -> Result<()> {
        if self.on_my_node(target) {
            self.region_of(target).copy_from_slice(disp, src);
            return Ok(());
        }
        let bytes: &[u8] = bytemuck::cast_slice(src);
        // Counted in fence epochs; passive epochs complete by flushing.
        let counted = self.counting() && !st.passive.active();
        let mut at = self.offset(target, disp);
        for chunk in bytes.chunks(self.opts.staging_bytes) {
            let from = self.stage(st, chunk.len())?;
            self.bytes.copy_from_slice(from, chunk);
            let (src, dst) = (
                Local::new(self.segment, from),
                Remote::new(target, self.segment, at),
            );
            let q = self.opts.queue;
            if counted {
                let n = Notification::new(DATA_ID, 1);
                self.ctx
                    .write_notify(src, dst, chunk.len(), n, q, Timeout::Block)?;
                st.sent[self.ctx.node_of(target)] += 1;
            } else {
                self.ctx.write(src, dst, chunk.len(), q, Timeout::Block)?;
            }
            at += chunk.len();
        }
        Ok(())
    }

    /// Whether writes to other nodes are counted notifications: in the
    /// designs that count, unless GPI-2 carries them (see the fence docs).
    pub(super) fn counting(&self) -> bool {
        self.opts.design.counts() && self.ctx.engine.counts_each_notification()
    }

    /// How many counted writes storing `n` elements on another node takes.
    pub(super) fn writes_for(&self, n: usize) -> u64 {
        (n * std::mem::size_of::<T>()).div_ceil(self.opts.staging_bytes) as u64
    }

    /// Load `dst.len()` elements at `disp` of `target` into `dst`.
    fn read(
        &self,
        st: &mut WindowState<T>,
        dst: &mut [T],
        target: Rank,
        disp: usize,
    ) -> Result<()> {
        if self.on_my_node(target) {
            self.region_of(target).copy_to_slice(disp, dst);
            return Ok(());
        }
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let mut at = self.offset(target, disp);
        for chunk in bytes.chunks_mut(self.opts.staging_bytes) {
            let to = self.stage(st, chunk.len())?;
            let (dst, src) = (
                Local::new(self.segment, to),
                Remote::new(target, self.segment, at),
            );
            self.ctx
                .read(dst, src, chunk.len(), self.opts.queue, Timeout::Block)?;
            self.ctx.wait(self.opts.queue, Timeout::Block)?;
            self.bytes.copy_to_slice(to, chunk);
            at += chunk.len();
        }
        Ok(())
    }

    /// Reserve `n` bytes of this rank's staging area (draining the queue
    /// when it is used up or the queue is nearly full); returns its offset.
    fn stage(&self, st: &mut WindowState<T>, n: usize) -> Result<usize> {
        let q = self.opts.queue;
        if st.staging_used + n > self.opts.staging_bytes
            || self.ctx.queue_size(q)? + 2 > self.ctx.queue_size_max()
        {
            self.ctx.wait(q, Timeout::Block)?;
            st.staging_used = 0;
        }
        let at = self.staging_at + self.local_of(self.ctx.rank()) * self.opts.staging_bytes;
        let at = at + st.staging_used;
        st.staging_used += n.div_ceil(64) * 64;
        Ok(at)
    }

    /// The staging area is free again once the queue is drained.
    pub(super) fn drained(&self, st: &mut WindowState<T>) -> Result<()> {
        self.ctx.wait(self.opts.queue, Timeout::Block)?;
        st.staging_used = 0;
        Ok(())
    }

    /// [`RmaWindow::drained`], and every write is complete at its target
    /// (MPI's flush and unlock).
    pub(super) fn completed(&self, st: &mut WindowState<T>) -> Result<()> {
        self.ctx.flush(self.opts.queue, Timeout::Block)?;
        st.staging_used = 0;
        Ok(())
    }
}

impl<T: RmaElem> Drop for RmaWindow<'_, T> {
    /// Deletes this rank's window segment once its queue is done, as the
    /// collectives do (an epoch left open may still have operations in
    /// flight from its staging area).
    fn drop(&mut self) {
        crate::collectives::release(self.ctx, self.segment, self.opts.queue);
    }
}
