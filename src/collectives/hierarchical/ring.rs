//! The pipelined ring between nodes: reduce-scatter, then allgather, of
//! one instance's fraction cut into one chunk per node and blocks of
//! [`AllreduceOptions::block_bytes`](super::AllreduceOptions::block_bytes).
//! A node starts with its own chunk; every block is reduced along the ring
//! (`nodes - 1` hops) and the complete block is written into the next
//! node's result area, which passes it on (`nodes - 1` hops more).

use super::call_plan::{CallPlan, Instance, RingEvent, RingKind, RingPlan, split_range};
use super::kernels::{fold_from, fold_into, tag};
use super::node_reduce::NodeReduce;
use crate::context::Context;
use crate::error::Result;
use crate::types::{Deadline, Notification};
use bytemuck::Pod;
use std::ops::Range;

impl NodeReduce {
    /// The ring plans of this node for the instances `mine`, block ids
    /// numbered over all instances, chunk by chunk.
    pub(super) fn ring_plans(
        &self,
        instances: &[Instance],
        mine: &[usize],
        node: usize,
        elem: usize,
    ) -> Vec<RingPlan> {
        let nodes = self.layout.nodes();
        let mut first_id = vec![0u32; instances.len()];
        let mut g = 0usize;
        for (i, inst) in instances.iter().enumerate() {
            first_id[i] = g as u32;
            g += self.ring_block_count(inst, nodes, elem);
        }
        debug_assert!(g <= self.areas.ring_blocks);
        mine.iter()
            .map(|&i| self.ring_plan(&instances[i], first_id[i], node, nodes, elem))
            .collect()
    }

    /// Elements per ring block for `elem`-byte elements.
    fn block_elems(&self, elem: usize) -> usize {
        (self.opts.block_bytes / elem.max(1)).max(1)
    }

    /// The blocks of chunk `c` of `inst`: element ranges.
    fn chunk_blocks(
        &self,
        inst: &Instance,
        nodes: usize,
        c: usize,
        elem: usize,
    ) -> impl Iterator<Item = Range<usize>> {
        let chunk = split_range(inst.elems.clone(), nodes, c, elem);
        let be = self.block_elems(elem);
        (chunk.start..chunk.end)
            .step_by(be)
            .map(move |s| s..(s + be).min(chunk.end))
    }

    pub(super) fn ring_block_count(&self, inst: &Instance, nodes: usize, elem: usize) -> usize {
        (0..nodes)
            .map(|c| self.chunk_blocks(inst, nodes, c, elem).count())
            .sum()
    }

    /// Node `p`'s part of the ring of `inst`, whose blocks have ids from
    /// `first_id` on (chunk by chunk).
    fn ring_plan(
        &self,
        inst: &Instance,
        first_id: u32,
        p: usize,
        nodes: usize,
        elem: usize,
    ) -> RingPlan {
        let mut ids = Vec::with_capacity(nodes);
        let mut g = first_id;
        for c in 0..nodes {
            let blocks: Vec<Range<usize>> = self.chunk_blocks(inst, nodes, c, elem).collect();
            let with_ids: Vec<(Range<usize>, u32)> = blocks
                .into_iter()
                .map(|b| {
                    g += 1;
                    (b, g - 1)
                })
                .collect();
            ids.push(with_ids);
        }
        let mut plan = RingPlan {
            first: ids[p].clone(),
            events: Vec::new(),
        };
        for s in 1..nodes {
            let c = (p + nodes - s) % nodes;
            let kind = if s < nodes - 1 {
                RingKind::Reduce
            } else {
                RingKind::Complete
            };
            for (b, id) in &ids[c] {
                plan.events.push(RingEvent {
                    elems: b.clone(),
                    id: *id,
                    kind,
                });
            }
        }
        for t in 1..nodes {
            let c = (p + 1 + nodes - t) % nodes;
            let kind = if t < nodes - 1 {
                RingKind::Forward
            } else {
                RingKind::Last
            };
            for (b, id) in &ids[c] {
                plan.events.push(RingEvent {
                    elems: b.clone(),
                    id: *id,
                    kind,
                });
            }
        }
        plan
    }

    /// Notification id of ring block `id` in the reduce-scatter (`false`)
    /// or the allgather (`true`).
    fn ring_id(&self, id: u32, gather: bool) -> u32 {
        self.areas.ring_ids + 2 * id + gather as u32
    }

    /// Instance `plan.mine[idx]` by the pipelined ring, from action
    /// `cursor` on. Action 0: the node reduction into the result column and
    /// the sends of this node's own chunk; then one action per block
    /// received.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ring<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        idx: usize,
        cursor: &mut usize,
        (send, f): (&[T], &F),
        deadline: Deadline,
    ) -> Result<()> {
        let i = plan.mine[idx];
        let inst = &plan.instances[i];
        let ring = &plan.rings[idx];
        let elem = plan.elem;
        let nodes = self.layout.nodes();
        let next = self.owner((ctx.node() + 1) % nodes, i);
        let tag = tag(self.calls);
        let at = |area: usize, b: &Range<usize>| area + b.start * elem;
        let (result, area) = (self.areas.result, self.areas.ring);
        while *cursor < 1 + ring.events.len() {
            if *cursor == 0 {
                // SAFETY: the result column is this instance's; remote
                // writes into it (the allgather) come only after this
                // node's contribution to each block was sent, which is
                // after this write.
                self.reduce_node(ctx, inst, unsafe { self.column(result, inst) }, send, f);
                for (b, id) in &ring.first {
                    let off = at(result, b);
                    let to = at(area, b);
                    let n = Notification::new(self.ring_id(*id, false), tag);
                    self.post(ctx, next, (off, to, b.len() * elem), n, deadline)?;
                }
            } else {
                let e = &ring.events[*cursor - 1];
                let gather = matches!(e.kind, RingKind::Forward | RingKind::Last);
                let v = self.await_id(ctx, self.ring_id(e.id, gather), deadline)?;
                debug_assert_eq!(v, tag, "ring block of another call");
                let (r, l) = (at(area, &e.elems), at(result, &e.elems));
                let n = e.elems.len();
                // The block of the ring area was written by the previous
                // node before the notification just claimed, and its next
                // write comes in the next call, after this node's successor
                // has the whole result; the result column's block is this
                // instance's, written here by this rank only and by the
                // allgather of this call only after this node's
                // contribution to the block was sent.
                let out = match e.kind {
                    // SAFETY: as said above, nobody else touches either
                    // block until this rank has passed it on.
                    RingKind::Reduce => unsafe {
                        fold_into(self.mem.write::<T>(r, n), self.mem.read::<T>(l, n), f);
                        Some((r, false))
                    },
                    // SAFETY: as for `Reduce`.
                    RingKind::Complete => unsafe {
                        fold_from(self.mem.write::<T>(l, n), self.mem.read::<T>(r, n), f);
                        Some((l, true))
                    },
                    RingKind::Forward => Some((l, true)),
                    RingKind::Last => None,
                };
                if let Some((from, gather)) = out {
                    let n = Notification::new(self.ring_id(e.id, gather), tag);
                    self.post(ctx, next, (from, from, e.elems.len() * elem), n, deadline)?;
                }
            }
            *cursor += 1;
        }
        Ok(())
    }
}
