//! Large calls of nodes of one rank each, as keyed messages: the nodes
//! reduce-scatter their inputs, then gather the reduced chunks
//! ([`CallPlan::scattered`]). Each node reduces one chunk of the result
//! (its own input with that chunk of every other node's, in node order:
//! the same result, bit for bit, as every node reducing all of it), so a
//! node reduces `1/nodes` of the elements where the full exchange
//! reduces them all, and sends `2 (nodes - 1) / nodes` of its input where
//! the full exchange sends `nodes - 1` times all of it; its own chunk is
//! reduced straight from the caller's input, which is copied into the
//! window only for the chunks it sends.
//!
//! Measured where it was chosen (2 hosts of one rank over TCP, Intel MPI
//! 2021.18, AMD EPYC VM, 2026-12-01): a C model of both ways with the
//! engine's copies (`scripts/mpi/allreduce_halves.c`) took 0.69x the
//! time of the full exchange at 4 MiB, 0.71x at 2 MiB, 0.84x at 1 MiB
//! and 0.96-0.98x at 256 and 512 KiB; the engine's calls 0.71-0.88x
//! (shared result) and 0.81-0.96x (private) at 1 to 4 MiB. Calls that
//! were split above the replicated calls' budget before took 0.28-0.44x
//! the time at 4 to 16 MiB on 2 and 4 hosts (docs/guide/mpi.md).

use super::call_plan::{CallPlan, ScatterCursor, split_range};
use super::kernels::{reduce_slices, with_slices};
use super::node_reduce::NodeReduce;
use crate::context::Context;
use crate::context::traffic::Op;
use crate::engine::lent::Lent;
use crate::engine::memcopy::copy_slice;
use crate::error::Result;
use crate::types::{Deadline, Rank};
use bytemuck::Pod;
use std::ops::Range;

impl NodeReduce {
    /// Node `q`'s chunk of the elements of a call planned as `plan`: the
    /// chunk of the result it reduces.
    pub(super) fn chunk(&self, plan: &CallPlan, q: usize) -> Range<usize> {
        split_range(0..plan.len, self.layout.nodes(), q, plan.elem)
    }

    /// A scattered call, on the only rank of its node, once its input is
    /// in this node's entry of the direct area, but for its own chunk
    /// ([`NodeReduce::put_input`]): send every other node its chunk of
    /// it, reduce this node's chunk of the result from `send` and from
    /// what the other nodes sent (each range once it has landed from
    /// every node, in node order) into the shared result, send that chunk
    /// to every other node and take theirs into the shared result. With
    /// `out`, the result is copied into it too, each range once it is
    /// complete. The keys are this object's number and the call's, one
    /// for each of the two messages a node sends another.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scatter_partials<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        cur: &mut ScatterCursor,
        (send, f): (&[T], &F),
        mut out: Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<()> {
        let (scatter_key, gather_key) = (self.message_key(0), self.message_key(1));
        let nodes = self.layout.nodes();
        let me = ctx.node();
        let elem = plan.elem;
        let others = || (0..nodes).filter(move |&q| q != me);
        let bit = |q: usize| 1u64 << q;
        let every_other = others().fold(0, |m, q| m | bit(q));
        let first = |q: usize| self.layout.node_ranks(q).start as Rank;
        let chunks: Vec<Range<usize>> = (0..nodes).map(|q| self.chunk(plan, q)).collect();
        let mine = chunks[me].clone();
        let bytes = |r: &Range<usize>| r.len() * elem;
        let own_entry = self.direct_at(parity, me);
        let sends: Vec<Lent> = chunks
            .iter()
            .map(|c| {
                // SAFETY: chunk `c` of this node's entry of this parity
                // holds this node's input (put in at the start of the call;
                // never its own chunk, which is reduced from `send`), lent
                // to the sends and not written before the next call (the
                // entries' one set, `Areas::direct_parities`), which this
                // rank starts only once this call has ended here, which
                // takes its sends being complete (`chunks_sent`).
                unsafe { self.mem.lend(own_entry + c.start * elem, bytes(c)) }
            })
            .collect();
        let intos: Vec<Lent> = (0..nodes)
            .map(|q| {
                // SAFETY: this node's chunk of node `q`'s entry: written
                // only by the engine, for this rank's take of the message
                // of this call, and read only where it has landed; its
                // reader of the call before (this rank, the only one of
                // its node) finished that call before it posted this
                // call's take.
                unsafe {
                    let at = self.direct_at(parity, q) + mine.start * elem;
                    self.mem.lend(at, bytes(&mine))
                }
            })
            .collect();
        let result: Vec<Lent> = chunks
            .iter()
            .map(|c| {
                // SAFETY: chunk `c` of the shared result, which this rank
                // alone reads and writes on its node of one rank: its own
                // chunk is written (reduced) before it is lent to the
                // sends, the others' only by the engine, read where they
                // have landed.
                unsafe { self.mem.lend(self.areas.shared + c.start * elem, bytes(c)) }
            })
            .collect();
        // Per node: elements of its chunk copied into `out` (this try).
        let mut copied = vec![0usize; nodes];
        // Elements of this node's chunk reduced (this try: a call tried
        // again reduces from the start again, each element written).
        let mut reduced = 0;
        let count = |n: u64, b: u64| {
            // Each counted as the notified write it stands for.
            ctx.traffic.count(true, Op::Write, n, b);
            ctx.traffic.count(true, Op::Notify, n, 0);
        };
        let step = || -> Result<bool> {
            let engine = &ctx.engine;
            if !cur.chunks_sent {
                let mut all = true;
                for q in others() {
                    all &= engine.host_keyed_send(first(q), scatter_key, &sends[q])?;
                }
                if all {
                    let b: usize = others().map(|q| bytes(&chunks[q])).sum();
                    count(others().count() as u64, b as u64);
                }
                cur.chunks_sent = all;
            }
            for q in others() {
                if cur.mine_from & bit(q) == 0
                    && engine.host_keyed_take(first(q), scatter_key, &intos[q])?
                {
                    cur.mine_from |= bit(q);
                }
            }
            if !cur.reduced {
                let landed = |q: usize| {
                    if q == me || cur.mine_from & bit(q) != 0 {
                        mine.len()
                    } else {
                        engine.host_keyed_landed(first(q), scatter_key) / elem
                    }
                };
                let ready = (0..nodes).map(landed).min().unwrap_or(0).min(mine.len());
                if ready > reduced {
                    let at = mine.start + reduced;
                    let n = ready - reduced;
                    let input = |q: usize| {
                        if q == me {
                            &send[at..at + n]
                        } else {
                            // SAFETY: these elements of this node's chunk
                            // of node `q`'s entry have landed, and are not
                            // written again in this call.
                            unsafe { self.mem.read::<T>(self.direct_at(parity, q) + at * elem, n) }
                        }
                    };
                    // SAFETY: this node's chunk of the shared result,
                    // which only this rank writes, not yet lent to the
                    // sends (they start once it is reduced whole).
                    let o = unsafe { self.mem.write::<T>(self.areas.shared + at * elem, n) };
                    with_slices(nodes, input, |inputs| reduce_slices(o, inputs, f));
                    reduced = ready;
                }
                cur.reduced = reduced == mine.len();
            }
            // One message at a time to each node: the gather's once the
            // scatter's went whole.
            if cur.reduced && cur.chunks_sent && !cur.result_sent {
                let mut all = true;
                for q in others() {
                    all &= engine.host_keyed_send(first(q), gather_key, &result[me])?;
                }
                if all {
                    let n = others().count() as u64;
                    count(n, n * bytes(&mine) as u64);
                }
                cur.result_sent = all;
            }
            // Taken once the scatter's message from `q` was (its later key
            // would drop what is left of that one).
            for q in others() {
                if cur.mine_from & bit(q) != 0
                    && cur.theirs_from & bit(q) == 0
                    && engine.host_keyed_take(first(q), gather_key, &result[q])?
                {
                    cur.theirs_from |= bit(q);
                }
            }
            let mut all = cur.chunks_sent && cur.result_sent && cur.theirs_from == every_other;
            if let Some(out) = out.as_deref_mut() {
                for (q, c) in chunks.iter().enumerate() {
                    let complete = if q == me {
                        if cur.reduced { c.len() } else { reduced }
                    } else if cur.theirs_from & bit(q) != 0 {
                        c.len()
                    } else if cur.mine_from & bit(q) != 0 {
                        engine.host_keyed_landed(first(q), gather_key) / elem
                    } else {
                        0
                    };
                    let complete = complete.min(c.len());
                    if complete > copied[q] {
                        let at = c.start + copied[q];
                        let n = complete - copied[q];
                        // SAFETY: these elements of the shared result are
                        // complete (reduced by this rank, or landed) and
                        // not written again in this call.
                        let r = unsafe { self.mem.read::<T>(self.areas.shared + at * elem, n) };
                        copy_slice(&mut out[at..at + n], r);
                        copied[q] = complete;
                    }
                    all &= copied[q] == c.len();
                }
            }
            Ok(all)
        };
        self.poll_messages(ctx, deadline, step)
    }
}
