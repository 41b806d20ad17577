//! `MPI_Win_fence` in the three designs of Santhanaraman et al. 2009.
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

use super::rma::{RmaElem, RmaWindow};
use super::window::{Assert, Deferred, Epoch, FenceDesign, FencePhase, WindowState};
use crate::collectives::ReduceOp;
use crate::error::{Error, Result};
use crate::types::{Deadline, Notification, Rank, Timeout};
use std::cell::RefMut;

impl<T: RmaElem> RmaWindow<'_, T> {
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
        if st.phase == FencePhase::Idle {
            let preceded = st.epoch == Epoch::Fence && !assert.contains(Assert::NOPRECEDE);
            if !preceded && !st.deferred.is_empty() {
                return Err(Error::RmaSync(
                    "fence with NOPRECEDE after operations were issued in the epoch".into(),
                ));
            }
            st.assert = assert;
            st.drained = 0;
            st.phase = if preceded {
                FencePhase::Exchange
            } else {
                FencePhase::Barrier
            };
        }
        loop {
            match st.phase {
                FencePhase::Idle => return Ok(()),
                FencePhase::Exchange => {
                    self.exchange(&mut st, deadline)?;
                    st.phase = FencePhase::Apply;
                }
                FencePhase::Apply => {
                    self.apply(&mut st)?;
                    st.phase = FencePhase::Drain;
                }
                FencePhase::Drain => {
                    self.drain(&mut st, deadline)?;
                    st.sent.iter_mut().for_each(|c| *c = 0);
                    st.phase = FencePhase::Barrier;
                }
                FencePhase::Barrier => {
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
                    st.phase = FencePhase::Idle;
                }
            }
        }
    }

    /// Notified and deferred: add up what every node receives this epoch
    /// (deferred: also the proof that every member entered the fence).
    /// Opt: a finish notification to every member on another node.
    fn exchange(&self, st: &mut RefMut<'_, WindowState<T>>, deadline: Deadline) -> Result<()> {
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
    fn apply(&self, st: &mut RefMut<'_, WindowState<T>>) -> Result<()> {
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
    fn drain(&self, st: &mut RefMut<'_, WindowState<T>>, deadline: Deadline) -> Result<()> {
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
