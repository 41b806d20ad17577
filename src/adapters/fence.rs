//! `MPI_Win_fence` in the three designs of seed 003.
//!
//! A fence completes the epoch before it (every operation issued in it is
//! complete at origin and target) and opens the next one (no rank accesses
//! a window before its owner has entered it). On this engine an operation
//! whose target is on the caller's node is a store that is complete when it
//! returns; what differs between the designs is how operations to other
//! nodes are known to be complete:
//!
//! | design | puts to another node | the fence |
//! |---|---|---|
//! | [`FenceDesign::Notified`] (Fence-Imm-RI) | `write_notify`, issued at once | allreduce of per-node counts; every rank of a node waits until its node's window has received that many notifications; barrier |
//! | [`FenceDesign::ImmediateOpt`] (Fence-Imm-Opt) | `write`, issued at once | a finish notification on every channel to another node (ordered after the writes on the queue); wait for every channel's finish; barrier |
//! | [`FenceDesign::Deferred`] (Fence-Def) | kept in a local list | allreduce of per-node counts (everyone has entered the fence); issue the list as `write_notify`; wait for the node's count; barrier |
//!
//! On one node the notified fence is one barrier, the deferred one a
//! barrier to start the list and one to end it. The counts exchanged are
//! per node, not per rank: a node's window counts every notification it
//! receives, whichever local rank it was for (shared notifications).
//!
//! Assertions: `NOPRECEDE` skips completing the previous epoch (no counts,
//! no finishes, no waiting); `NOSUCCEED` skips opening the next one (the
//! barrier, unless completing needs it) and ends the epoch: the calls are
//! errors until the next fence. Both must be given by all members, as MPI
//! requires. `NOSTORE` and `NOPUT` are accepted: memory here is
//! cache-coherent, so there is no cache maintenance for `NOSTORE` to skip,
//! and the barrier `NOPUT` could spare also orders the next epoch's gets
//! after the completion of this one's puts at every target, so it stays.
//!
//! Under the GPI-2 engine, notified and deferred fences do not count:
//! GPI-2 keeps one value per notification id and target process, so
//! counted writes that arrive together would count once. Their writes are
//! plain, and the fence completes them by flushing (a read back from every
//! rank written to, see `Context::flush`) and a barrier.
//!
//! A fence that returns an error (a timeout, a failed rank) keeps its
//! progress: call it again to finish it. Every other call of the window is
//! refused until then.

use super::rma::{Deferred, Epoch, RmaWindow, State};
use crate::collectives::ReduceOp;
use crate::error::{Error, Result};
use crate::types::{Deadline, Notification, Rank, Timeout};
use std::cell::RefMut;

/// How [`RmaWindow::fence`] completes an epoch (seed 003, section 3).
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
    /// `MPI_MODE_NOCHECK` (for [`RmaWindow::lock`] and
    /// [`RmaWindow::lock_all`]): no conflicting lock is held or requested,
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

/// The steps of a fence; an error leaves the window at the failed step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
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

impl<T: super::RmaElem> RmaWindow<'_, T> {
    /// `MPI_Win_fence(assert)`: complete the epoch before (unless
    /// `NOPRECEDE`) and open the next one (unless `NOSUCCEED`); collective
    /// over the window's group. See the module docs of the designs.
    ///
    /// ```
    /// use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 5, 4, GroupId::ALL, Timeout::Block)?;
    /// assert!(win.put(&[1], 0, 0).is_err()); // no epoch yet
    /// win.fence(Assert::NOPRECEDE, Timeout::Block)?;
    /// win.put(&[7], 0, ctx.rank() as usize % 4)?;
    /// win.fence(Assert::NOSUCCEED, Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn fence(&self, assert: Assert, timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        let mut st = self.state()?;
        if st.passive.active() {
            return Err(Error::RmaSync(
                "fence inside a passive-target epoch: unlock first".into(),
            ));
        }
        if st.phase == Phase::Idle {
            let preceded = st.epoch == Epoch::Fence && !assert.contains(Assert::NOPRECEDE);
            if !preceded && !st.deferred.is_empty() {
                return Err(Error::RmaSync(
                    "fence with NOPRECEDE after operations were issued in the epoch".into(),
                ));
            }
            st.assert = assert;
            st.drained = 0;
            st.phase = if preceded {
                Phase::Exchange
            } else {
                Phase::Barrier
            };
        }
        loop {
            match st.phase {
                Phase::Idle => return Ok(()),
                Phase::Exchange => {
                    self.exchange(&mut st, deadline)?;
                    st.phase = Phase::Apply;
                }
                Phase::Apply => {
                    self.apply(&mut st)?;
                    st.phase = Phase::Drain;
                }
                Phase::Drain => {
                    self.drain(&mut st, deadline)?;
                    st.sent.iter_mut().for_each(|c| *c = 0);
                    st.phase = Phase::Barrier;
                }
                Phase::Barrier => {
                    let preceded =
                        st.epoch == Epoch::Fence && !st.assert.contains(Assert::NOPRECEDE);
                    let open = !st.assert.contains(Assert::NOSUCCEED);
                    // Stores on this node are complete for their targets
                    // after a collective: the notified design's allreduce
                    // is one when there are several nodes.
                    let synced = self.opts.design == FenceDesign::Notified
                        && self.ctx.num_nodes() > 1
                        && self.counting();
                    if open || (preceded && !synced) {
                        self.ctx.barrier(self.group, deadline.timeout())?;
                    }
                    st.epoch = if open { Epoch::Fence } else { Epoch::None };
                    st.used = false;
                    st.phase = Phase::Idle;
                }
            }
        }
    }

    /// Notified and deferred: add up what every node receives this epoch
    /// (deferred: also the proof that every member entered the fence).
    /// Opt: a finish notification to every member on another node.
    fn exchange(&self, st: &mut RefMut<'_, State<T>>, deadline: Deadline) -> Result<()> {
        let ctx = self.ctx;
        match self.opts.design {
            FenceDesign::ImmediateOpt => {
                if ctx.num_nodes() > 1 {
                    let me = ctx.rank() as usize * ctx.ranks_per_node();
                    for &r in self.others() {
                        let id = (me + r as usize % ctx.ranks_per_node()) as u32;
                        ctx.notify(
                            r,
                            self.segment,
                            Notification::new(id, 1),
                            self.opts.queue,
                            Timeout::Block,
                        )?;
                    }
                }
            }
            FenceDesign::Notified | FenceDesign::Deferred => {
                if self.opts.design == FenceDesign::Deferred {
                    // What applying the list will send to each node.
                    st.sent.iter_mut().for_each(|c| *c = 0);
                    let mut sent = std::mem::take(&mut st.sent);
                    for op in &st.deferred {
                        let (Deferred::Put { target, data, .. }
                        | Deferred::Accumulate { target, data, .. }) = op;
                        if ctx.node_of(*target) != ctx.node() {
                            sent[ctx.node_of(*target)] += self.writes_for(data.len());
                        }
                    }
                    st.sent = sent;
                }
                if ctx.num_nodes() > 1 && self.counting() {
                    self.drained(st)?;
                    let mut total = vec![0u64; st.sent.len()];
                    ctx.allreduce(
                        &st.sent,
                        &mut total,
                        ReduceOp::Sum,
                        self.group,
                        deadline.timeout(),
                    )?;
                    st.expected += total[ctx.node()];
                } else if self.opts.design == FenceDesign::Deferred {
                    ctx.barrier(self.group, deadline.timeout())?;
                }
                if self.opts.design == FenceDesign::Deferred {
                    // Applying adds them again.
                    st.sent.iter_mut().for_each(|c| *c = 0);
                }
            }
        }
        Ok(())
    }

    /// Deferred: issue the kept operations in order.
    fn apply(&self, st: &mut RefMut<'_, State<T>>) -> Result<()> {
        while let Some(op) = st.deferred.pop_front() {
            match op {
                Deferred::Put { target, disp, data } => self.write(st, &data, target, disp)?,
                Deferred::Accumulate {
                    target,
                    disp,
                    data,
                    op,
                } => self.read_modify_write(st, &data, None, target, disp, op)?,
            }
        }
        Ok(())
    }

    /// Wait until this node has received everything sent to it this epoch.
    fn drain(&self, st: &mut RefMut<'_, State<T>>, deadline: Deadline) -> Result<()> {
        let ctx = self.ctx;
        if ctx.num_nodes() == 1 {
            return Ok(());
        }
        if self.opts.design != FenceDesign::ImmediateOpt && !self.counting() {
            // The barrier after this orders the data before the next epoch.
            return self.completed(st);
        }
        self.drained(st)?;
        match self.opts.design {
            FenceDesign::ImmediateOpt => {
                let me = ctx.local_rank() as usize;
                let ppn = ctx.ranks_per_node();
                let others: Vec<Rank> = self.others().to_vec();
                while st.drained < others.len() {
                    let id = (others[st.drained] as usize * ppn + me) as u32;
                    ctx.notify_claim(self.segment, id..id + 1, deadline.timeout())?;
                    st.drained += 1;
                }
            }
            _ => {
                ctx.notify_wait_posted(self.segment, st.expected, deadline.timeout())?;
            }
        }
        Ok(())
    }

    /// The members on other nodes (the channels that need completing).
    fn others(&self) -> &[Rank] {
        &self.elsewhere
    }
}
