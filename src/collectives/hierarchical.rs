//! Allreduce (and barrier) over nodes with node-shared windows and shared
//! notifications: seed 002, section III.
//!
//! # One call
//! 1. Every rank copies its contribution into its input slot of the node's
//!    window and counts itself in (a node-wide counter in the window).
//! 2. The node's ranks split the work into *instances*, each reducing the
//!    node's inputs over an element range and then combining it with the
//!    same instance on every other node. Instance `i` of node `q` runs on
//!    the node's local rank `i % local_num(q)`, so on full nodes the ranks
//!    with the same local rank talk to each other (seed 002: "all ranks
//!    subsequently perform the above dissemination algorithm with ranks
//!    which share the same node-local rank id").
//!    - **Replicated** (small messages): one instance per local rank, each
//!      over the whole message. Every rank computes the whole result; no
//!      rank waits for another after its own instance, so the call costs
//!      one node-wide counter wait plus the inter-node algorithm.
//!    - **Split** (larger messages): the message is cut into fractions,
//!      one per local rank (`message size / local ranks`, fractions of at
//!      least [`AllreduceOptions::fraction_min`] bytes); each rank reduces
//!      its fraction, and a node barrier ends the call.
//! 3. Between nodes, an instance runs either
//!    - the **dissemination** with partial reductions
//!      ([`Dissemination`]): `floor(log2 n)` steps, partial results sent
//!      out of band as soon as they exist; latency-optimal, for small
//!      messages; or
//!    - a pipelined **ring** reduce-scatter + allgather: the fraction is cut
//!      into one chunk per node and chunks into blocks; each block is
//!      reduced along the ring and then written, complete, straight into
//!      every node's result area. Bandwidth-optimal, for large messages.
//! 4. The result lies in the node's window: the whole message (split), or
//!    each rank's own copy (replicated).
//!
//! # Determinism
//! Each value is reduced in a fixed order: inputs of a node in local-rank
//! order, then nodes in the order the algorithm fixes. The same inputs
//! give bit-identical results call after call and run after run.
//! - Ring: every block is reduced once and then copied, so **every rank
//!   gets bit-identical results**, floating point included.
//! - Dissemination: every rank of a node gets bit-identical results (split:
//!   one copy per node; replicated: the same operations on the same
//!   values); ranks of *different* nodes combine the node values in
//!   different (cyclically rotated) orders, so floating-point sums and
//!   products may differ between nodes in the last bits. Integers, `min`
//!   and `max` are exact everywhere.
//!
//! The reduction must be associative and commutative (up to rounding).
//!
//! # Reuse
//! Calls reuse the window and the notification ids. Inputs and the
//! dissemination's receive slots alternate by call parity; a rank can only
//! be two calls ahead of another after that one finished the call two
//! back. Ring blocks use one id per block and direction: a node receives
//! a block of the next call only after its successor received the whole
//! result of this call, which includes this node's having consumed every
//! block of it.

use super::plan::{Dissemination, Layout};
use crate::context::Context;
use crate::engine::segment::SegmentObject;
use crate::error::{Error, Result};
use crate::segments::SegmentView;
use crate::types::{Deadline, Notification, QueueId, Rank, SegmentId, Timeout};
use crate::windows::{Window, WindowOptions};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// The algorithm between nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AllreduceAlgorithm {
    /// Dissemination below [`AllreduceOptions::ring_min`] bytes, ring from
    /// there on.
    #[default]
    Auto,
    /// Always the dissemination with partial reductions.
    Dissemination,
    /// Always the pipelined ring (reduce-scatter + allgather).
    Ring,
}

/// Options of an [`Allreduce`].
///
/// ```
/// use gaspi::{AllreduceAlgorithm, AllreduceOptions};
/// let opts = AllreduceOptions { algorithm: AllreduceAlgorithm::Ring, ..Default::default() };
/// assert_eq!(opts.queue, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllreduceOptions {
    /// Which algorithm runs between nodes.
    pub algorithm: AllreduceAlgorithm,
    /// Messages up to this many bytes are reduced whole by every local
    /// rank (replicated); larger ones are split among the local ranks.
    pub replicate_max: usize,
    /// Smallest fraction of a split message, in bytes.
    pub fraction_min: usize,
    /// [`AllreduceAlgorithm::Auto`] uses the ring from this many bytes on.
    pub ring_min: usize,
    /// Pipelining block of the ring, in bytes.
    pub block_bytes: usize,
    /// The queue the collective posts on.
    pub queue: QueueId,
}

impl Default for AllreduceOptions {
    fn default() -> AllreduceOptions {
        AllreduceOptions {
            algorithm: AllreduceAlgorithm::Auto,
            replicate_max: 4 << 10,
            fraction_min: 1 << 10,
            ring_min: 64 << 10,
            block_bytes: 128 << 10,
            queue: 0,
        }
    }
}

/// Byte offsets of the areas of the window (each 64-byte aligned).
#[derive(Clone, Copy, Debug)]
struct Areas {
    /// Input slots: `[parity][local rank][cap]`.
    inputs: usize,
    input_parities: usize,
    /// Results, one column space wide.
    result: usize,
    /// Dissemination values after steps `0..steps`: `[step][cols]`.
    run: usize,
    /// Dissemination receive slots: `[parity][slot][cols]`.
    recv: usize,
    /// Ring receive area: `[cap]`.
    ring: usize,
    /// Bytes of a column space: `slots * cap` (replicated) or `cap`.
    cols: usize,
    /// Largest message, bytes.
    cap: usize,
    /// Ring block ids available (each block has two).
    ring_blocks: usize,
}

/// Element offset `x` rounded for a split among ranks: fraction and
/// chunk borders fall on cache lines where the element size allows.
fn split_range(r: Range<usize>, parts: usize, part: usize, elem: usize) -> Range<usize> {
    let align = if elem > 0 && elem <= 64 && 64 % elem == 0 {
        64 / elem
    } else {
        1
    };
    let len = r.end - r.start;
    let at = |k: usize| {
        let x = (len * k / parts).div_ceil(align) * align;
        r.start + x.min(len)
    };
    at(part)..at(part + 1)
}

/// One instance of a call: an element range of the message, reduced over
/// the node and then with the same instance of every node.
#[derive(Clone, Debug)]
struct Instance {
    elems: Range<usize>,
    /// Byte offset of its column within a column space.
    col: usize,
}

/// One receive event of a ring instance: block `elems` (global id `g`)
/// arrives; `rs_step`: the reduce-scatter step (`1..nodes`) or `None` in the
/// allgather; `forward`: whether to pass it on.
#[derive(Clone, Debug)]
struct RingEvent {
    elems: Range<usize>,
    id: u32,
    kind: RingKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RingKind {
    /// Reduce-scatter: combine with the local value, pass on.
    Reduce,
    /// Reduce-scatter, last step: the block is complete; start its
    /// allgather.
    Complete,
    /// Allgather: the complete block arrived; pass it on.
    Forward,
    /// Allgather, last hop.
    Last,
}

/// The blocks of one ring instance as this node sees them.
#[derive(Clone, Debug, Default)]
struct RingPlan {
    /// Blocks of this node's own chunk: sent first.
    first: Vec<(Range<usize>, u32)>,
    events: Vec<RingEvent>,
}

/// What a call of a given size does.
#[derive(Clone, Debug)]
struct CallPlan {
    len: usize,
    elem: usize,
    replicated: bool,
    ring: bool,
    instances: Vec<Instance>,
    /// Instances this rank runs, ascending.
    mine: Vec<usize>,
    /// Per instance of `mine`: its ring plan (empty without ring).
    rings: Vec<RingPlan>,
}

/// Where a call stopped (to resume after a timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    /// Instance `mine[idx]`, action `cursor`.
    Instances {
        idx: usize,
        cursor: usize,
    },
    Closing,
}

#[derive(Clone, Copy, Debug)]
struct Progress {
    len: usize,
    elem: usize,
    stage: Stage,
}

/// The node-aware reduction engine: a window, its areas, and the call
/// counter. Untyped; each call brings its element type and operation.
#[derive(Debug)]
pub(crate) struct NodeReduce {
    segment: SegmentId,
    window: Window,
    obj: Arc<SegmentObject>,
    areas: Areas,
    opts: AllreduceOptions,
    layout: Layout,
    dis: Dissemination,
    /// Instance slots: the most ranks a node has.
    slots: usize,
    calls: u64,
    progress: Option<Progress>,
    plan: Option<CallPlan>,
}

/// Where the result of a call is: bytes `range` of the window.
#[derive(Clone, Debug)]
pub(crate) struct Output {
    pub(crate) range: Range<usize>,
}

impl NodeReduce {
    /// Collectively create the engine on segment `segment` for messages of
    /// up to `cap` bytes. With `fixed`, every call has exactly `cap` bytes
    /// (areas for other sizes are left out).
    pub(crate) fn create(
        ctx: &Context,
        segment: SegmentId,
        cap: usize,
        fixed: bool,
        opts: AllreduceOptions,
        timeout: Timeout,
    ) -> Result<NodeReduce> {
        let layout = Layout {
            ranks: ctx.num_ranks() as usize,
            ppn: ctx.ranks_per_node(),
        };
        let nodes = layout.nodes();
        let slots = layout.ppn.min(layout.ranks);
        let dis = Dissemination::new(nodes);
        let smallest = if fixed { cap } else { 0 };
        let may_replicate = smallest <= opts.replicate_max;
        let may_split = cap > opts.replicate_max || cap == 0;
        let may_ring = nodes > 1
            && may_split
            && match opts.algorithm {
                AllreduceAlgorithm::Auto => cap >= opts.ring_min,
                AllreduceAlgorithm::Dissemination => false,
                AllreduceAlgorithm::Ring => true,
            };
        let may_disseminate = nodes > 1
            && (may_replicate
                || match opts.algorithm {
                    AllreduceAlgorithm::Auto => smallest < opts.ring_min,
                    AllreduceAlgorithm::Dissemination => true,
                    AllreduceAlgorithm::Ring => false,
                });
        let a = |x: usize| x.div_ceil(64) * 64;
        let cols = if may_replicate {
            (slots * cap.min(opts.replicate_max)).max(cap)
        } else {
            cap
        };
        let input_parities = if may_replicate { 2 } else { 1 };
        let recv_slots = dis.steps as usize + dis.partials.len();
        let inputs = 64; // bytes 0..8: the node's arrival counter
        let result = a(inputs + input_parities * slots * cap);
        let run = a(result + cols);
        let dsteps = if may_disseminate {
            dis.steps as usize
        } else {
            0
        };
        let recv = a(run + dsteps * cols);
        let ring = a(recv
            + if may_disseminate {
                2 * recv_slots * cols
            } else {
                0
            });
        let total = a(ring + if may_ring { cap } else { 0 }).max(64);
        // Ring blocks: at most one partial block per chunk beyond full ones.
        let mut block = opts.block_bytes.max(64);
        let dis_ids = 2 * recv_slots * slots;
        let budget = crate::config::NOTIFICATION_LIMIT as usize - dis_ids;
        let ring_blocks = |block: usize| cap.div_ceil(block) + slots * nodes;
        while may_ring && 2 * ring_blocks(block) > budget {
            block *= 2;
        }
        let ring_blocks = if may_ring { ring_blocks(block) } else { 0 };
        let areas = Areas {
            inputs,
            input_parities,
            result,
            run,
            recv,
            ring,
            cols,
            cap,
            ring_blocks,
        };
        let table = (dis_ids + 2 * ring_blocks).max(1) as u32;
        let window = ctx.window_create_with(
            segment,
            total,
            crate::GroupId::ALL,
            WindowOptions::default().notifications(table),
            timeout,
        )?;
        let obj = window.object().clone();
        Ok(NodeReduce {
            segment,
            window,
            obj,
            areas,
            opts: AllreduceOptions {
                block_bytes: block,
                ..opts
            },
            layout,
            dis,
            slots,
            calls: 0,
            progress: None,
            plan: None,
        })
    }

    /// Id of dissemination slot `slot` of instance `inst` in a call of
    /// parity `parity`.
    fn recv_id(&self, parity: usize, slot: usize, inst: usize) -> u32 {
        let slots = self.dis.steps as usize + self.dis.partials.len();
        ((parity * slots + slot) * self.slots + inst) as u32
    }

    /// Byte offset of dissemination slot `slot` (parity `parity`).
    fn recv_at(&self, parity: usize, slot: usize) -> usize {
        let slots = self.dis.steps as usize + self.dis.partials.len();
        self.areas.recv + (parity * slots + slot) * self.areas.cols
    }

    /// The rank that runs instance `inst` on `node`.
    fn owner(&self, node: usize, inst: usize) -> Rank {
        let r = self.layout.node_ranks(node);
        (r.start + inst % r.len()) as Rank
    }

    /// The plan of a call of `len` elements of `elem` bytes.
    fn plan_for(&self, ctx: &Context, len: usize, elem: usize) -> CallPlan {
        let bytes = len * elem;
        let nodes = self.layout.nodes();
        let replicated = bytes <= self.opts.replicate_max && bytes > 0;
        let ring = !replicated
            && nodes > 1
            && bytes > 0
            && match self.opts.algorithm {
                AllreduceAlgorithm::Auto => bytes >= self.opts.ring_min,
                AllreduceAlgorithm::Dissemination => false,
                AllreduceAlgorithm::Ring => true,
            };
        let instances: Vec<Instance> = if replicated {
            (0..self.slots)
                .map(|i| Instance {
                    elems: 0..len,
                    col: i * bytes,
                })
                .collect()
        } else {
            let k = (bytes / self.opts.fraction_min.max(1)).clamp(1, self.slots);
            (0..k)
                .map(|i| {
                    let elems = split_range(0..len, k, i, elem);
                    Instance {
                        col: elems.start * elem,
                        elems,
                    }
                })
                .collect()
        };
        let node = ctx.node();
        let local = ctx.local_rank() as usize;
        let local_num = ctx.local_num() as usize;
        let mine: Vec<usize> = (0..instances.len())
            .filter(|&i| i % local_num == local)
            .collect();
        let rings = if ring {
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
        } else {
            Vec::new()
        };
        CallPlan {
            len,
            elem,
            replicated,
            ring,
            instances,
            mine,
            rings,
        }
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

    fn ring_block_count(&self, inst: &Instance, nodes: usize, elem: usize) -> usize {
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
        let slots = self.dis.steps as usize + self.dis.partials.len();
        (2 * slots * self.slots) as u32 + 2 * id + gather as u32
    }

    /// The node's arrival counter (first word of the window).
    fn arrivals(&self) -> &AtomicU64 {
        self.obj.atomic_u64(0)
    }

    /// The segment the window is.
    pub(crate) fn segment(&self) -> SegmentId {
        self.segment
    }

    /// The window.
    pub(crate) fn window(&self) -> &Window {
        &self.window
    }

    /// Inter-node messages of one call of `len` elements of `elem` bytes,
    /// summed over all ranks: the cost model the tests check against the
    /// traffic counters.
    pub(crate) fn inter_node_messages(&self, ctx: &Context, len: usize, elem: usize) -> u64 {
        let plan = self.plan_for(ctx, len, elem);
        let nodes = self.layout.nodes() as u64;
        if nodes < 2 {
            return 0;
        }
        let per_instance = |inst: &Instance| -> u64 {
            if plan.ring {
                let blocks = self.ring_block_count(inst, nodes as usize, elem) as u64;
                2 * (nodes - 1) * blocks
            } else {
                nodes * self.dis.messages_per_participant() as u64
            }
        };
        plan.instances.iter().map(per_instance).sum()
    }

    /// Run one call: reduce `send` with `f` over all ranks. Resumes a call
    /// that timed out (which must have had the same length and type).
    pub(crate) fn run<T: Pod, F: Fn(&T, &T) -> T>(
        &mut self,
        ctx: &Context,
        send: &[T],
        f: &F,
        deadline: Deadline,
    ) -> Result<Output> {
        let elem = std::mem::size_of::<T>();
        let bytes = std::mem::size_of_val(send);
        if bytes > self.areas.cap {
            return Err(Error::InvalidArgument(format!(
                "allreduce of {bytes} bytes: this allreduce takes at most {}",
                self.areas.cap
            )));
        }
        if std::mem::align_of::<T>() > 64 {
            return Err(Error::InvalidArgument(
                "allreduce elements must be aligned to at most 64 bytes".into(),
            ));
        }
        let mut progress = match self.progress.take() {
            None => Progress {
                len: send.len(),
                elem,
                stage: Stage::Start,
            },
            Some(p) if p.len == send.len() && p.elem == elem => p,
            Some(p) => {
                self.progress = Some(p);
                return Err(Error::InvalidArgument(
                    "an allreduce that timed out must be called again with the same length and type"
                        .into(),
                ));
            }
        };
        let fresh = match &self.plan {
            Some(p) => p.len != send.len() || p.elem != elem,
            None => true,
        };
        if fresh {
            self.plan = Some(self.plan_for(ctx, send.len(), elem));
        }
        let plan = self.plan.take().expect("plan was just made");
        let r = self.advance(ctx, &plan, &mut progress.stage, send, f, deadline);
        let out = match r {
            Ok(()) => {
                self.calls += 1;
                Ok(self.output(ctx, &plan))
            }
            Err(e) => {
                self.progress = Some(progress);
                Err(e)
            }
        };
        self.plan = Some(plan);
        out
    }

    fn output(&self, ctx: &Context, plan: &CallPlan) -> Output {
        let bytes = plan.len * plan.elem;
        let start = if plan.replicated {
            self.areas.result + plan.instances[ctx.local_rank() as usize].col
        } else {
            self.areas.result
        };
        Output {
            range: start..start + bytes,
        }
    }

    fn advance<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        stage: &mut Stage,
        send: &[T],
        f: &F,
        deadline: Deadline,
    ) -> Result<()> {
        let parity = (self.calls % 2) as usize;
        loop {
            match *stage {
                Stage::Start => {
                    let local = ctx.local_rank() as usize;
                    let at = self.input_at(local);
                    self.obj.write_from(at, bytemuck::cast_slice(send));
                    self.arrivals().fetch_add(1, SeqCst);
                    self.obj.notifications().ww.wake();
                    *stage = Stage::Instances { idx: 0, cursor: 0 };
                }
                Stage::Instances { idx, cursor } => {
                    if idx == plan.mine.len() {
                        *stage = Stage::Closing;
                        continue;
                    }
                    if idx == 0 && cursor == 0 {
                        self.await_arrivals(ctx, deadline)?;
                    }
                    let mut c = cursor;
                    let r = if plan.ring {
                        self.ring(ctx, plan, idx, &mut c, f, deadline)
                    } else {
                        self.disseminate(ctx, plan, idx, parity, &mut c, f, deadline)
                    };
                    *stage = Stage::Instances { idx, cursor: c };
                    r?;
                    *stage = Stage::Instances {
                        idx: idx + 1,
                        cursor: 0,
                    };
                }
                Stage::Closing => {
                    if !plan.replicated {
                        ctx.node_barrier_watching_all(deadline)?;
                    }
                    if plan.len > 0 && self.layout.nodes() > 1 {
                        ctx.wait(self.opts.queue, deadline.timeout())?;
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Byte offset of local rank `local`'s input slot in this call: slots
    /// alternate by call parity if there are two sets.
    fn input_at(&self, local: usize) -> usize {
        let parity = (self.calls % self.areas.input_parities as u64) as usize;
        self.areas.inputs + (parity * self.slots + local) * self.areas.cap
    }

    /// Wait until every rank of the node has put in its input of this call.
    fn await_arrivals(&self, ctx: &Context, deadline: Deadline) -> Result<()> {
        let target = ctx.local_num() as u64 * (self.calls + 1);
        let node: Vec<Rank> = ctx.node_ranks(ctx.node()).collect();
        let counter = self.arrivals();
        ctx.engine.patience().wait(
            self.obj.notifications().ww,
            deadline,
            || (counter.load(SeqCst) >= target).then_some(()),
            || ctx.engine.member_faults(&node),
        )
    }

    /// Reduce the node's inputs over `inst`'s elements into the bytes at
    /// `dst` (an area offset plus the instance's column).
    fn reduce_node<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        inst: &Instance,
        dst: usize,
        f: &F,
    ) {
        let n = inst.elems.len();
        if n == 0 {
            return;
        }
        let elem = std::mem::size_of::<T>();
        let skip = inst.elems.start * elem;
        // SAFETY: the destination is this instance's column, written only
        // by this rank (its owner) during the call; the inputs were
        // written before their ranks counted themselves in, and nobody
        // writes them again until every rank of the node has finished the
        // call (input slots alternate by parity for replicated calls; a
        // split call ends with a node barrier).
        unsafe {
            let out = self.obj.as_mut_slice::<T>(dst, n);
            let first = self.obj.as_slice::<T>(self.input_at(0) + skip, n);
            out.copy_from_slice(first);
            for l in 1..ctx.local_num() as usize {
                let input = self.obj.as_slice::<T>(self.input_at(l) + skip, n);
                fold_into(out, input, f);
            }
        }
    }

    /// Instance `plan.mine[idx]` by dissemination, from action `cursor`
    /// on. Action 0: the node reduction and the sends of step 0; action
    /// `k + 1`: receive step `k`, combine, send; then one action per
    /// partial received.
    #[allow(clippy::too_many_arguments)]
    fn disseminate<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        idx: usize,
        parity: usize,
        cursor: &mut usize,
        f: &F,
        deadline: Deadline,
    ) -> Result<()> {
        let i = plan.mine[idx];
        let inst = &plan.instances[i];
        let elem = plan.elem;
        let n = inst.elems.len();
        let bytes = n * elem;
        let steps = self.dis.steps as usize;
        let nodes = self.layout.nodes();
        let p = ctx.node();
        let tag = tag(self.calls);
        let result = self.areas.result + inst.col;
        // The value after step `k` (`k < steps`) lives in run[k]; the
        // final value in the result column.
        let value = |k: usize| {
            if k < steps {
                self.areas.run + k * self.areas.cols + inst.col
            } else {
                result
            }
        };
        let send_after = |k: usize| -> Result<()> {
            let from = value(k);
            if k < steps {
                let to = (p + (1 << k)) % nodes;
                let at = self.recv_at(parity, k) + inst.col;
                self.post(
                    ctx,
                    self.owner(to, i),
                    (from, at, bytes),
                    Notification::new(self.recv_id(parity, k, i), tag),
                    deadline,
                )?;
            }
            for (q, &(j, d)) in self.dis.partials.iter().enumerate() {
                if j as usize == k {
                    let to = (p + d) % nodes;
                    let slot = steps + q;
                    let at = self.recv_at(parity, slot) + inst.col;
                    self.post(
                        ctx,
                        self.owner(to, i),
                        (from, at, bytes),
                        Notification::new(self.recv_id(parity, slot, i), tag),
                        deadline,
                    )?;
                }
            }
            Ok(())
        };
        let actions = 1 + steps + self.dis.partials.len();
        while *cursor < actions {
            let a = *cursor;
            if a == 0 {
                self.reduce_node(ctx, inst, value(0), f);
                send_after(0)?;
            } else {
                let slot = a - 1;
                let v = self.await_id(ctx, self.recv_id(parity, slot, i), deadline)?;
                debug_assert_eq!(v, tag, "dissemination message of another call");
                let recv = self.recv_at(parity, slot) + inst.col;
                if n > 0 {
                    // SAFETY: the receive slot was written by its sender
                    // before the notification just claimed and is not
                    // written again before the call two ahead; `value(k)`
                    // columns are this instance's, written by this rank
                    // only, and the one written here is not being sent
                    // (it is sent after this write, by `send_after`).
                    unsafe {
                        let r = self.obj.as_slice::<T>(recv, n);
                        if slot < steps {
                            let prev = self.obj.as_slice::<T>(value(slot), n);
                            let out = self.obj.as_mut_slice::<T>(value(slot + 1), n);
                            for ((o, a), b) in out.iter_mut().zip(r).zip(prev) {
                                *o = f(a, b);
                            }
                        } else {
                            fold_from(self.obj.as_mut_slice::<T>(result, n), r, f);
                        }
                    }
                }
                if slot < steps {
                    send_after(slot + 1)?;
                }
            }
            *cursor += 1;
        }
        Ok(())
    }

    /// Instance `plan.mine[idx]` by the pipelined ring, from action
    /// `cursor` on. Action 0: the node reduction into the result column and
    /// the sends of this node's own chunk; then one action per block
    /// received.
    #[allow(clippy::too_many_arguments)]
    fn ring<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        idx: usize,
        cursor: &mut usize,
        f: &F,
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
                self.reduce_node(ctx, inst, result + inst.col, f);
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
                // SAFETY: the block of the ring area was written by the
                // previous node before the notification just claimed, and
                // its next write comes in the next call, after this node's
                // successor has the whole result; the result column's
                // block is this instance's, written here by this rank only
                // and by the allgather of this call only after this
                // node's contribution to the block was sent.
                let out = match e.kind {
                    RingKind::Reduce => unsafe {
                        fold_into(
                            self.obj.as_mut_slice::<T>(r, n),
                            self.obj.as_slice::<T>(l, n),
                            f,
                        );
                        Some((r, false))
                    },
                    RingKind::Complete => unsafe {
                        fold_from(
                            self.obj.as_mut_slice::<T>(l, n),
                            self.obj.as_slice::<T>(r, n),
                            f,
                        );
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

    fn post(
        &self,
        ctx: &Context,
        to: Rank,
        bytes: (usize, usize, usize),
        n: Notification,
        deadline: Deadline,
    ) -> Result<()> {
        super::post(ctx, self.segment, self.opts.queue, to, bytes, n, deadline)
    }

    /// Wait for notification `id` of the window and take it.
    fn await_id(&self, ctx: &Context, id: u32, deadline: Deadline) -> Result<u32> {
        ctx.notify_claim(self.segment, id..id + 1, deadline.timeout())
            .map(|(_, v)| v)
    }
}

/// The notification value that tags call `call` (never 0).
fn tag(call: u64) -> u32 {
    ((call % u32::MAX as u64) + 1) as u32
}

/// `acc[k] = f(acc[k], b[k])`: `acc` holds the earlier inputs.
fn fold_into<T, F: Fn(&T, &T) -> T>(acc: &mut [T], b: &[T], f: &F) {
    for (x, y) in acc.iter_mut().zip(b) {
        *x = f(x, y);
    }
}

/// `acc[k] = f(a[k], acc[k])`: `a` holds the earlier inputs.
fn fold_from<T, F: Fn(&T, &T) -> T>(acc: &mut [T], a: &[T], f: &F) {
    for (x, y) in acc.iter_mut().zip(a) {
        *x = f(y, x);
    }
}

/// An allreduce over all ranks on node-shared windows (seed 002, section
/// III; see the module documentation of the algorithms): `len` elements of
/// type `T` per call, the result in the node's window.
///
/// ```
/// use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let mut ar = Allreduce::<f64>::new(&ctx, 7, 3, Timeout::Block)?;
/// let sum = ar.run(&[1.0, 2.0, ctx.rank() as f64], ReduceOp::Sum, Timeout::Block)?;
/// let n = ctx.num_ranks() as f64;
/// assert_eq!(sum.to_vec(), vec![n, 2.0 * n, n * (n - 1.0) / 2.0]);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug)]
pub struct Allreduce<'a, T> {
    ctx: &'a Context,
    core: NodeReduce,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: Pod> Allreduce<'a, T> {
    /// Collectively prepare allreduces of `len` elements on every rank,
    /// with segment id `segment` for the node windows.
    pub fn new(
        ctx: &'a Context,
        segment: SegmentId,
        len: usize,
        timeout: Timeout,
    ) -> Result<Allreduce<'a, T>> {
        Allreduce::with_options(ctx, segment, len, AllreduceOptions::default(), timeout)
    }

    /// [`Allreduce::new`] with options.
    pub fn with_options(
        ctx: &'a Context,
        segment: SegmentId,
        len: usize,
        options: AllreduceOptions,
        timeout: Timeout,
    ) -> Result<Allreduce<'a, T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "an allreduce needs at least one non-empty element, got {len}"
                ))
            })?;
        let core = NodeReduce::create(ctx, segment, bytes, true, options, timeout)?;
        Ok(Allreduce {
            ctx,
            core,
            len,
            _t: PhantomData,
        })
    }

    fn check(&self, send: &[T]) -> Result<()> {
        if send.len() != self.len {
            return Err(Error::InvalidArgument(format!(
                "this allreduce reduces {} elements, got {}",
                self.len,
                send.len()
            )));
        }
        Ok(())
    }

    fn view(&self, out: Output) -> SegmentView<T> {
        let elem = std::mem::size_of::<T>();
        self.core
            .window()
            .view::<T>()
            .sub(out.range.start / elem..out.range.end / elem)
    }

    /// Reduce `send` element-wise with the user's `reduce` (associative and
    /// commutative) over all ranks; returns a view of the result in the
    /// node's window, valid until this node's ranks call again. On a
    /// timeout, call again with the same arguments to continue.
    pub fn run_with<F: Fn(&T, &T) -> T>(
        &mut self,
        send: &[T],
        reduce: F,
        timeout: Timeout,
    ) -> Result<SegmentView<T>> {
        self.check(send)?;
        let out = self.core.run(self.ctx, send, &reduce, timeout.deadline())?;
        Ok(self.view(out))
    }

    /// [`Allreduce::run_with`], then copy the result into `recv`.
    pub fn run_with_into<F: Fn(&T, &T) -> T>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        reduce: F,
        timeout: Timeout,
    ) -> Result<()> {
        if recv.len() != self.len {
            return Err(Error::InvalidArgument(format!(
                "the receive buffer has {} elements, the allreduce {}",
                recv.len(),
                self.len
            )));
        }
        let view = self.run_with(send, reduce, timeout)?;
        view.copy_to_slice(0, recv);
        Ok(())
    }

    /// Inter-node messages one call sends, all ranks together (the cost
    /// model: dissemination `nodes * (steps + partials)` per instance, ring
    /// `2 * (nodes - 1)` per block).
    pub fn inter_node_messages(&self) -> u64 {
        self.core
            .inter_node_messages(self.ctx, self.len, std::mem::size_of::<T>())
    }

    /// The segment id of the windows.
    pub fn segment(&self) -> SegmentId {
        self.core.segment()
    }
}

impl<T: super::Reducible> Allreduce<'_, T> {
    /// Reduce `send` element-wise with `op` over all ranks; returns a view
    /// of the result in the node's window (see [`Allreduce::run_with`]).
    pub fn run(
        &mut self,
        send: &[T],
        op: super::ReduceOp,
        timeout: Timeout,
    ) -> Result<SegmentView<T>> {
        super::with_op!(op, T, |f| self.run_with(send, f, timeout))
    }

    /// [`Allreduce::run`], then copy the result into `recv`.
    pub fn run_into(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: super::ReduceOp,
        timeout: Timeout,
    ) -> Result<()> {
        super::with_op!(op, T, |f| self.run_with_into(send, recv, f, timeout))
    }
}

impl<T> Drop for Allreduce<'_, T> {
    /// Deletes this rank's window segment. Every message of a completed
    /// call has arrived when it returns.
    fn drop(&mut self) {
        let _ = self.ctx.segment_delete(self.core.segment());
    }
}
