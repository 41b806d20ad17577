//! The replicated reductions of a call whose result is every rank's own
//! (direct exchange, or one node): each rank reduces every input itself,
//! one rank reduces them once for its node (shared reduction), or each
//! node sends one partial (node partials); and the direct exchange that
//! brings the other nodes' inputs.

use super::call_plan::{CallPlan, Instance};
use super::kernels::{reduce_slices, with_slices};
use super::node_reduce::NodeReduce;
use super::options::Inter;
use crate::context::Context;
use crate::context::traffic::Op;
use crate::engine::lent::Lent;
use crate::engine::memcopy::copy_slice;
use crate::error::Result;
use crate::notifications::tag_reached;
use crate::types::{Deadline, Notification, Rank};
use bytemuck::Pod;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

impl NodeReduce {
    /// Direct exchange: write the call's message at `from` into every other
    /// node's window as its direct entry `entry` (this rank's input, just
    /// put in its slot, as entry `rank`; or this node's partial as entry
    /// `node`), through the rank with the same local rank there (or that
    /// node's last), notified with `tag`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_direct(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        tag: u32,
        (from, entry): (usize, usize),
        deadline: Deadline,
    ) -> Result<()> {
        let bytes = plan.len * plan.elem;
        let to_at = self.direct_at(parity, entry);
        let n = Notification::new(self.direct_id(parity, entry), tag);
        for q in (0..self.layout.nodes()).filter(|&q| q != ctx.node()) {
            let to = self.owner(q, ctx.local_rank() as usize);
            self.post(ctx, to, (from, to_at, bytes), n, deadline)?;
        }
        Ok(())
    }

    /// The whole result (replicated, direct or one node), once
    /// [`NodeReduce::await_inputs`] returned: reduce every rank's input in
    /// rank order into `out`.
    pub(super) fn reduce_all<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        f: &F,
        out: &mut [T],
    ) {
        let node = ctx.node_ranks(ctx.node());
        let len = plan.len;
        let input = |r: usize| {
            let at = if node.contains(&(r as Rank)) {
                self.input_at(r - node.start as usize)
            } else {
                self.direct_at(parity, r)
            };
            // SAFETY: every input was written before its notification
            // (other nodes) or before its rank counted itself in (this
            // node), both of which `await_inputs` saw, and is not written
            // again before every rank of the job has finished this call
            // (slots alternate by call parity, and a rank two calls ahead
            // has seen this node's inputs of the call in between, sent
            // after this call).
            unsafe { self.mem.read::<T>(at, len) }
        };
        with_slices(self.layout.ranks, input, |inputs| {
            reduce_slices(out, inputs, f)
        });
    }

    /// Whether one local rank reduces this call's whole result for the
    /// node ([`NodeReduce::reduce_shared`]) instead of every local rank
    /// reducing it for itself
    /// ([`AllreduceOptions::share_reduction`](crate::AllreduceOptions::share_reduction); by
    /// default when more ranks are awake than there are cores). With a
    /// core for each rank the ranks' own reductions run side by side, and
    /// waiting for another rank's would only add its latency. The ranks of
    /// a node may decide differently: each result is the same reduction in
    /// the same order.
    pub(super) fn share_reduction(&self, ctx: &Context) -> bool {
        self.slots > 1
            && ctx.local_num() > 1
            && self
                .opts
                .share_reduction
                .unwrap_or_else(|| ctx.engine.patience().oversubscribed())
    }

    /// The node's shared reduction of a call whose inputs have all arrived:
    /// the first local rank to claim the call reduces every input, in rank
    /// order, into the shared result and marks it done; the others wait for
    /// that. Bit-identical to [`NodeReduce::reduce_all`]'s result.
    pub(super) fn reduce_shared<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        f: &F,
        deadline: Deadline,
    ) -> Result<()> {
        self.reduce_once(ctx, plan.len, deadline, |out: &mut [T]| {
            self.reduce_all(ctx, plan, parity, f, out)
        })
    }

    /// Copy this call's shared result, once it is done, into `out`.
    pub(super) fn copy_shared<T: Pod>(&self, out: &mut [T]) {
        // SAFETY: the shared result of this call is complete (the caller
        // saw it done) and not written again before this rank has put in
        // its input of the next call.
        copy_slice(out, unsafe {
            self.mem.read::<T>(self.areas.shared, out.len())
        });
    }

    /// The node's control word `k` after the arrival words, a line each:
    /// 0 shared result claimed, 1 shared result done, 2 node partial
    /// claimed, 3 node partial ready (each the last call it holds for);
    /// from 4 on, one per instance ([`NodeReduce::instance_done`]), then
    /// the pipelined calls' words and the kind of input stores in use.
    pub(super) fn word(&self, k: usize) -> &AtomicU64 {
        self.mem.word(64 * (self.slots + k))
    }

    /// Claim this call's shared result: the first local rank to claim it
    /// runs `reduce` on it and marks it done; the others wait for that.
    /// Callers make sure that whatever `reduce` reads is complete.
    pub(super) fn reduce_once<T: Pod>(
        &self,
        ctx: &Context,
        len: usize,
        deadline: Deadline,
        reduce: impl FnOnce(&mut [T]),
    ) -> Result<()> {
        let call = self.calls + 1;
        let claim = self.word(0);
        let done = self.word(1);
        let ww = self.mem.table().ww;
        if claim.fetch_max(call, SeqCst) < call {
            self.record_claimant(call, ctx.local_rank() as usize);
            // SAFETY: only the rank that claimed call `call` writes the
            // shared result, and nobody reads it meanwhile: readers of the
            // previous call's result have all put in their inputs of this
            // call (the claimant saw them before it claimed), and readers
            // of this call's wait for `done`.
            reduce(unsafe { self.mem.write::<T>(self.areas.shared, len) });
            done.store(call, SeqCst);
            ww.wake();
            return Ok(());
        }
        ctx.engine.patience().wait_or_spin(
            ww,
            deadline,
            || (done.load(SeqCst) >= call).then_some(()),
            || self.claimant_elsewhere(call),
            || ctx.engine.faults(),
        )
    }

    /// Node partials: if every local rank has put in its input of this
    /// call and this rank is the first to claim the call's partial, reduce
    /// the node's inputs in local-rank order into this node's partial slot
    /// (the direct area's entry of this node, which no other node writes)
    /// and mark it ready (the only rank of its node put its input there
    /// itself: [`NodeReduce::input_is_partial`]). The last local rank to
    /// arrive always sees every input, so some rank claims it.
    pub(super) fn claim_partial<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        f: &F,
    ) -> bool {
        let call = self.calls + 1;
        let local_num = ctx.local_num() as usize;
        if !(0..local_num).all(|l| self.arrival(l).load(SeqCst) >= call) {
            return false;
        }
        if self.word(2).fetch_max(call, SeqCst) >= call {
            return false;
        }
        let len = plan.len;
        if !self.input_is_partial(ctx, plan) {
            // SAFETY: the node's inputs were written before their ranks
            // counted themselves in, which this rank saw, and are not
            // written again before every rank of the job has finished this
            // call.
            let input = |l: usize| unsafe { self.mem.read::<T>(self.input_at(l), len) };
            // SAFETY: only the claimant writes this node's partial slot of
            // this parity; the reducers of the call two back have read it
            // (every local rank has finished that call), and remote writes
            // of the previous call's partial went out before that call
            // ended.
            let out = unsafe { self.mem.write::<T>(self.direct_at(parity, ctx.node()), len) };
            with_slices(local_num, input, |inputs| reduce_slices(out, inputs, f));
        }
        self.word(3).store(call, SeqCst);
        self.mem.table().ww.wake();
        true
    }

    /// Node partials as keyed messages ([`CallPlan::messages`]), on the
    /// node's first rank: once this node's partial is ready, send it to
    /// every other node's first rank (then `*sent`), and take theirs into
    /// their direct entries here, each posted in the window's table with
    /// `tag` as its notified write would be (so
    /// [`NodeReduce::reduce_partials`] runs unchanged). The keys are this
    /// engine's number and the call's: what a rank sent for a call it gave
    /// up, or for an engine deleted since, is never taken for this one.
    ///
    /// With `eager` (the only rank of its node: its partial is ready before
    /// it gets here), the partials are reduced in node order into the
    /// slice given, each range once it has landed from every other node:
    /// while the rest of the messages come, and from memory the messages
    /// just wrote. (2 hosts of one rank over TCP, 4 MiB calls: the
    /// reduction after the exchange took 800-970 us, Intel MPI, AMD EPYC
    /// VM, 2026-12-01.) A call given up and tried again reduces from the
    /// start again (each element is written, not accumulated).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn exchange_partials<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        tag: u32,
        sent: &mut bool,
        mut eager: Option<(&mut [T], &F)>,
        deadline: Deadline,
    ) -> Result<()> {
        let call = self.calls + 1;
        let key = self.message_key(0);
        let bytes = plan.len * plan.elem;
        let me = ctx.node();
        let table = self.mem.table();
        let others = || (0..self.layout.nodes()).filter(move |&q| q != me);
        let first = |q: usize| self.layout.node_ranks(q).start as Rank;
        // The window's memory the messages go from and land in, lent once
        // for the whole wait: this node's partial, and every node's entry
        // of this parity (this node's own is the partial).
        let entries: Vec<Lent> = (0..self.layout.nodes())
            .map(|q| {
                // SAFETY: node `q`'s entry of this parity. This node's own
                // is its partial of this call: lent to the sends once it
                // is complete (ready), and nobody writes it until this
                // call has ended on every rank of the job, which takes this
                // rank's sends being complete (`*sent`): the claimant of
                // the call two on writes it again (a call given up and
                // then deleted never does), or of the next call where the
                // entries have one set (`Areas::direct_parities`: this
                // node's only rank, once this call ended here). Another
                // node's: on this route only this rank writes it (through
                // the engine, which may fill it until the message is
                // taken, or the object is deleted:
                // `NodeReduce::forget_messages`), and nobody reads it
                // before it is posted below; the reader of the call two
                // back (its claimant) finished before every local rank put
                // in its input of the call in between, which node `q`
                // needed before it could send this call's partial; with
                // one set, the reader of the call before is this node's
                // only rank, which finished it before posting this take.
                unsafe { self.mem.lend(self.direct_at(parity, q), bytes) }
            })
            .collect();
        let partial = &entries[me];
        let nodes = self.layout.nodes();
        let len = plan.len;
        // Elements of the result reduced so far (with `eager`).
        let mut reduced = 0;
        let step = || -> Result<bool> {
            if !*sent && self.word(3).load(SeqCst) >= call {
                let mut all = true;
                for q in others() {
                    all &= ctx.engine.host_keyed_send(first(q), key, partial)?;
                }
                if all {
                    // Each counted as the notified write it stands for.
                    let n = others().count() as u64;
                    ctx.traffic.count(true, Op::Write, n, bytes as u64 * n);
                    ctx.traffic.count(true, Op::Notify, n, 0);
                }
                *sent = all;
            }
            let mut all = *sent;
            for q in others() {
                let id = self.direct_id(parity, q);
                if tag_reached(table.values[id as usize].load(SeqCst), tag) {
                    continue;
                }
                if ctx.engine.host_keyed_take(first(q), key, &entries[q])? {
                    table.post(id, tag);
                } else {
                    all = false;
                }
            }
            if let Some((out, f)) = eager.as_mut() {
                let landed = |q: usize| {
                    if q == me
                        || tag_reached(
                            table.values[self.direct_id(parity, q) as usize].load(SeqCst),
                            tag,
                        )
                    {
                        len
                    } else {
                        ctx.engine.host_keyed_landed(first(q), key) / plan.elem
                    }
                };
                let ready = (0..nodes).map(landed).min().unwrap_or(len).min(len);
                if ready > reduced && self.word(3).load(SeqCst) >= call {
                    let elem = plan.elem;
                    // SAFETY: elements `reduced..ready` of every node's
                    // entry have landed (or are this node's partial, ready)
                    // and are not written again before every rank of the
                    // job has finished this call; the rest of each entry,
                    // which the messages may still be writing, is not read.
                    let input = |q: usize| unsafe {
                        self.mem
                            .read::<T>(self.direct_at(parity, q) + reduced * elem, ready - reduced)
                    };
                    let o = &mut out[reduced..ready];
                    with_slices(nodes, input, |inputs| reduce_slices(o, inputs, *f));
                    reduced = ready;
                }
                all &= reduced == len;
            }
            Ok(all)
        };
        self.poll_messages(ctx, deadline, step)
    }

    /// [`poll_keyed`](crate::collectives::poll_keyed) on this window's
    /// table.
    pub(super) fn poll_messages(
        &self,
        ctx: &Context,
        deadline: Deadline,
        step: impl FnMut() -> Result<bool>,
    ) -> Result<()> {
        crate::collectives::poll_keyed(ctx, self.mem.table().ww, deadline, step)
    }

    /// Node partials: once this node's partial is ready and every other
    /// node's has arrived, the first local rank to claim the call reduces
    /// them in node order into the shared result; every other rank waits
    /// for that. The only rank of its node reduces them straight into
    /// `out` where it is given (no shared result, no copy of it): then
    /// `true`. With `reduced`, the partials were reduced into `out` or the
    /// shared result already (the eager reduction of
    /// [`NodeReduce::exchange_partials`]): the call is only marked done.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce_partials<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        tag: u32,
        f: &F,
        out: Option<&mut [T]>,
        reduced: bool,
        deadline: Deadline,
    ) -> Result<bool> {
        let call = self.calls + 1;
        let nodes = self.layout.nodes();
        let me = ctx.node();
        let done = self.word(1);
        let ready = self.word(3);
        let table = self.mem.table();
        let ids = self.direct_id(parity, 0)..self.direct_id(parity, nodes);
        let arrived = |q: usize| {
            let v = table.values[self.direct_id(parity, q) as usize].load(SeqCst);
            tag_reached(v, tag)
        };
        let all_in = ctx.engine.patience().wait(
            table.ww,
            deadline,
            || {
                if done.load(SeqCst) >= call {
                    return Some(false);
                }
                // (Partials as messages are posted here by the node's
                // first rank: nothing lands through the transport.)
                if !plan.messages {
                    ctx.engine
                        .pump(self.segment, self.mem.object(), ids.clone());
                }
                let all =
                    ready.load(SeqCst) >= call && (0..nodes).filter(|&q| q != me).all(arrived);
                all.then_some(true)
            },
            || ctx.engine.faults(),
        )?;
        if !all_in {
            return Ok(false); // done
        }
        let len = plan.len;
        // SAFETY: every node's partial of this call is complete (ready, or
        // its notification seen) and not written again before every rank
        // of the job has finished this call.
        let input = |q: usize| unsafe { self.mem.read::<T>(self.direct_at(parity, q), len) };
        let reduce = |out: &mut [T]| {
            if !reduced {
                with_slices(nodes, input, |inputs| reduce_slices(out, inputs, f));
            }
        };
        match out {
            Some(out) if ctx.local_num() == 1 => {
                reduce(out);
                Ok(true)
            }
            _ => self.reduce_once(ctx, len, deadline, reduce).map(|()| false),
        }
    }

    /// Wait until every rank of the node has put in its input of this call
    /// and, with the direct exchange, every rank of the other nodes has
    /// written its input here (its notification holds `tag`): one wait, so
    /// a rank that has to wait at all yields for everything at once.
    ///
    /// Like every wait of a collective over all ranks, it fails as soon as
    /// any rank has failed: a local rank that gave up on a call because a
    /// remote one died would otherwise be waited for forever.
    pub(super) fn await_inputs(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        tag: u32,
        deadline: Deadline,
    ) -> Result<()> {
        let call = self.calls + 1;
        let local_num = ctx.local_num() as usize;
        let node = ctx.node_ranks(ctx.node());
        let ranks = self.layout.ranks;
        let remote = plan.choice.inter == Inter::Direct && self.layout.nodes() > 1;
        let ids = self.direct_id(parity, 0)..self.direct_id(parity, ranks);
        let table = self.mem.table();
        let arrived = |r: usize| {
            let v = table.values[self.direct_id(parity, r) as usize].load(SeqCst);
            tag_reached(v, tag)
        };
        ctx.engine.patience().wait_or_spin(
            table.ww,
            deadline,
            || {
                let here = (0..local_num).all(|l| self.arrival(l).load(SeqCst) >= call);
                let there = !remote || {
                    ctx.engine
                        .pump(self.segment, self.mem.object(), ids.clone());
                    (0..ranks)
                        .filter(|&r| !node.contains(&(r as Rank)))
                        .all(arrived)
                };
                (here && there).then_some(())
            },
            // Mates that have put in their input wait here too, or (once
            // every input is in) the poll above succeeds.
            || !remote && self.mates_arrived(call),
            || ctx.engine.faults(),
        )
    }

    /// Reduce the node's inputs over `inst`'s elements into `out`, in
    /// local-rank order: this rank's own from `send` (a split call does
    /// not put in the elements of its own instances), the others' from
    /// their input slots.
    pub(super) fn reduce_node<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        inst: &Instance,
        out: &mut [T],
        send: &[T],
        f: &F,
    ) {
        let skip = inst.elems.start * std::mem::size_of::<T>();
        let ranks = (ctx.local_num() as usize, ctx.local_rank() as usize);
        // SAFETY: the inputs were written before their ranks counted
        // themselves in, and nobody writes them again until every rank of
        // the node has finished the call (input slots alternate by parity
        // for replicated calls; a split call ends with a node barrier).
        unsafe {
            self.reduce_local(
                out,
                inst.elems.clone(),
                ranks,
                send,
                |l| self.input_at(l) + skip,
                f,
            )
        };
    }

    /// Reduce elements `elems` of the local ranks' inputs into `out`, in
    /// local-rank order: local rank `me`'s straight from `send` (a rank
    /// does not put in the elements it reduces itself), each other local
    /// rank `l`'s from the window at byte `at(l)`.
    ///
    /// # Safety
    /// Nobody writes the window's `elems.len()` elements at `at(l)` while
    /// this runs.
    pub(super) unsafe fn reduce_local<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        out: &mut [T],
        elems: Range<usize>,
        (local_num, me): (usize, usize),
        send: &[T],
        at: impl Fn(usize) -> usize,
        f: &F,
    ) {
        let n = elems.len();
        if n == 0 {
            return;
        }
        let input = |l: usize| {
            if l == me {
                return &send[elems.clone()];
            }
            // SAFETY: the caller's promise.
            unsafe { self.mem.read::<T>(at(l), n) }
        };
        with_slices(local_num, input, |inputs| reduce_slices(out, inputs, f));
    }
}
