//! Allreduce (and barrier) over nodes with node-shared windows and shared
//! notifications: seed 002, section III.
//!
//! # One call
//! 1. Every rank copies its contribution into its input slot of the node's
//!    window and then sets its arrival word (one cache line per local rank,
//!    written only by its rank: no read-modify-write on a line that the
//!    whole node polls).
//! 2. The node's ranks split the work into *instances*, each reducing the
//!    node's inputs over an element range and then combining it with the
//!    same instance on every other node. Instance `i` of node `q` runs on
//!    the node's local rank `i % local_num(q)`, so on full nodes the ranks
//!    with the same local rank talk to each other (seed 002: "all ranks
//!    subsequently perform the above dissemination algorithm with ranks
//!    which share the same node-local rank id").
//!    - **Replicated** (small messages): one instance per local rank, each
//!      over the whole message. Every rank computes the whole result; no
//!      rank waits for another after its own instance. With the direct
//!      exchange or on one node, while the node's ranks share cores, the
//!      first local rank to see every input reduces them once for the
//!      whole node into its window and the others wait for that (a
//!      *shared reduction*, [`AllreduceOptions::share_reduction`]): ranks
//!      that take turns on a core would otherwise each spend their turn on
//!      the same reduction.
//!    - **Split** (larger messages): the message is cut into fractions,
//!      one per local rank (`message size / local ranks`, fractions of at
//!      least [`AllreduceOptions::fraction_min`] bytes); each rank reduces
//!      its fraction, and a node barrier ends the call.
//! 3. Between nodes ([`AllreduceAlgorithm`]), an instance runs
//!    - the **dissemination** with partial reductions
//!      ([`Dissemination`]): `floor(log2 n)` steps, partial results sent
//!      out of band as soon as they exist; latency-optimal, for small
//!      messages on many nodes;
//!    - a pipelined **ring** reduce-scatter + allgather: the fraction is cut
//!      into one chunk per node and chunks into blocks; each block is
//!      reduced along the ring and then written, complete, straight into
//!      every node's result area. Bandwidth-optimal, for large messages;
//!    - or, replicated only, the **direct** exchange for few nodes: every
//!      rank writes its input once into each other node's window (any rank
//!      of a node reaches the node's window) and every rank reduces all
//!      inputs itself, in rank order. One round instead of a node phase
//!      plus `log2 n` steps; `nodes - 1` messages per rank, so
//!      [`AllreduceAlgorithm::Auto`] takes it while that is no more than
//!      the dissemination's `steps + partials`. While the job's ranks
//!      share cores (agreed by all ranks when the allreduce is created),
//!      the direct exchange sends **node partials** instead: the last local
//!      rank to put in its input reduces the node's inputs in local-rank
//!      order and writes that one partial into each other node's window,
//!      and the first local rank to see every node's partial reduces them
//!      in node order into the node's window (`nodes - 1` messages per
//!      node, one reduction per node; replicated up to
//!      [`AllreduceOptions::shared_replicate_max`]).
//! 4. The result lies in the node's window: the whole message (split or
//!    shared reduction), or each rank's own copy (replicated).
//!
//! # Determinism
//! Each value is reduced in a fixed order. The same inputs give
//! bit-identical results call after call and run after run.
//! - Ring and direct: every block is reduced once (ring), all inputs are
//!   reduced in rank order (direct, by every rank or once per node), or
//!   every node's partial (its inputs in local-rank order) is reduced in
//!   node order (direct with node partials), so **every rank gets
//!   bit-identical results**, floating point included.
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
//! Calls reuse the window and the notification ids. Inputs, the direct
//! exchange's slots and the dissemination's receive slots alternate by call
//! parity; a rank can only be two calls ahead of another after that one
//! finished the call two back. Ring blocks use one id per block and
//! direction: a node receives a block of the next call only after its
//! successor received the whole result of this call, which includes this
//! node's having consumed every block of it.

mod dissemination;
mod ring;

use super::plan::{Dissemination, Layout};
use crate::context::Context;
use crate::engine::segment::SegmentObject;
use crate::error::{Error, Result};
use crate::segments::SegmentView;
use crate::types::{Deadline, Notification, QueueId, Rank, SegmentId, Timeout};
use crate::windows::{Window, WindowOptions};
use bytemuck::Pod;
use ring::RingPlan;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// The algorithm between nodes.
///
/// ```
/// use gaspi::{Allreduce, AllreduceAlgorithm, AllreduceOptions, Config, Context, ReduceOp, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let opts = AllreduceOptions { algorithm: AllreduceAlgorithm::Dissemination, ..Default::default() };
/// let mut ar = Allreduce::<u64>::with_options(&ctx, 0, 1, opts, Timeout::Block)?;
/// let max = ar.run(&[ctx.rank() as u64], ReduceOp::Max, Timeout::Block)?;
/// assert_eq!(max.get(0), ctx.num_ranks() as u64 - 1);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AllreduceAlgorithm {
    /// Direct exchange for small messages on few nodes, else dissemination
    /// below [`AllreduceOptions::ring_min`] bytes, ring from there on.
    #[default]
    Auto,
    /// Always the dissemination with partial reductions.
    Dissemination,
    /// Always the pipelined ring (reduce-scatter + allgather), split.
    Ring,
    /// Always the direct exchange, replicated.
    Direct,
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
    /// For jobs of several nodes, where the replicated call needs one
    /// direct exchange and the split one the exchange between nodes plus a
    /// node barrier (default 4 KiB; while ranks share cores,
    /// [`AllreduceOptions::shared_replicate_max`]).
    pub replicate_max: usize,
    /// [`AllreduceOptions::replicate_max`] for a job of one node whose
    /// ranks each reduce for themselves, where the split call costs only a
    /// node barrier and saves every rank from reading every other rank's
    /// whole input (default 2 KiB: measured with 2, 4 and 8 ranks,
    /// splitting was 10-15% faster at 4 KiB and slower at 2 KiB; see the
    /// README's allreduce figures).
    pub node_replicate_max: usize,
    /// [`AllreduceOptions::replicate_max`] for the direct exchange of ranks
    /// that share cores ([`AllreduceOptions::share_reduction`], agreed at
    /// creation): each node then sends one partial result and reduces
    /// once, so replicated calls stay cheap for longer (default 32 KiB:
    /// with 2 nodes of 2 ranks on 2 cores they were 30% faster than split
    /// calls at 8 KiB and 12% at 32 KiB).
    pub shared_replicate_max: usize,
    /// [`AllreduceOptions::node_replicate_max`] for a job of one node
    /// whose ranks share cores, where one rank reduces a replicated call
    /// for all ([`AllreduceOptions::share_reduction`], agreed at creation):
    /// the split call then saves less (default 8 KiB: with 4 and 8 ranks
    /// on 2 cores the shared reduction was 20-35% faster than splitting at
    /// 4 and 8 KiB, and slower at 16 KiB).
    pub shared_node_replicate_max: usize,
    /// Smallest fraction of a split message, in bytes.
    pub fraction_min: usize,
    /// [`AllreduceAlgorithm::Auto`] uses the ring from this many bytes on.
    pub ring_min: usize,
    /// Pipelining block of the ring, in bytes.
    pub block_bytes: usize,
    /// The queue the collective posts on.
    pub queue: QueueId,
    /// Whether one local rank reduces a replicated call's whole result for
    /// its node, in the node's window, while the others wait for it
    /// (`Some(true)`), or every local rank reduces it for itself
    /// (`Some(false)`). `None` (default): shared while more ranks are awake
    /// than there are cores, or the wait mode is yield or block (ranks that
    /// share a core run one after the other, so a reduction saved is time
    /// saved); own reductions while every rank has a core (they run side
    /// by side). Replicated calls with the direct exchange or on one node
    /// only; each rank decides per call, and the results are bit-identical
    /// either way.
    ///
    /// If every rank expects sharing when the allreduce is created
    /// (`Some(true)`, or `None` with more ranks on its host than cores),
    /// a job of several nodes also exchanges node partials in the direct
    /// exchange (see the module documentation): one message per node pair
    /// and a result in node-partial order, still bit-identical on every
    /// rank.
    pub share_reduction: Option<bool>,
}

impl Default for AllreduceOptions {
    fn default() -> AllreduceOptions {
        AllreduceOptions {
            algorithm: AllreduceAlgorithm::Auto,
            replicate_max: 4 << 10,
            node_replicate_max: 2 << 10,
            shared_replicate_max: 32 << 10,
            shared_node_replicate_max: 8 << 10,
            fraction_min: 1 << 10,
            ring_min: 128 << 10,
            block_bytes: 128 << 10,
            queue: 0,
            share_reduction: None,
        }
    }
}

/// What runs between nodes in one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Inter {
    Direct,
    Dissemination,
    Ring,
}

/// How a call of some size runs: replicated or split, and between nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Choice {
    replicated: bool,
    inter: Inter,
}

/// The choice for a call of `bytes` bytes on `nodes` nodes (see the module
/// documentation); `dis_messages` is what the dissemination sends per
/// participant.
fn choose(opts: &AllreduceOptions, bytes: usize, nodes: usize, dis_messages: usize) -> Choice {
    use AllreduceAlgorithm as A;
    let replicate_max = if nodes == 1 {
        opts.node_replicate_max
    } else {
        opts.replicate_max
    };
    let small = bytes > 0 && bytes <= replicate_max;
    let (replicated, inter) = match opts.algorithm {
        A::Direct if bytes > 0 => (true, Inter::Direct),
        A::Ring if bytes > 0 => (false, Inter::Ring),
        A::Auto if small && nodes - 1 <= dis_messages => (true, Inter::Direct),
        A::Auto if !small && bytes >= opts.ring_min && nodes > 1 => (false, Inter::Ring),
        _ => (small, Inter::Dissemination),
    };
    Choice { replicated, inter }
}

/// Byte offsets of the areas of the window (each 64-byte aligned).
#[derive(Clone, Copy, Debug)]
struct Areas {
    /// Input slots: `[parity][local rank][cap]`.
    inputs: usize,
    input_parities: usize,
    /// Results, one column space wide.
    result: usize,
    /// The node's shared result of a replicated call that one local rank
    /// reduces for all ([`NodeReduce::share_reduction`]): `[cap]` bytes,
    /// or none with one rank per node.
    shared: usize,
    /// Dissemination values after steps `0..steps`: `[step][cols]`.
    run: usize,
    /// Dissemination receive slots: `[parity][slot][cols]`.
    recv: usize,
    /// Ring receive area: `[cap]`.
    ring: usize,
    /// Inputs of other nodes' ranks (direct): `[parity][rank][direct_cap]`.
    direct: usize,
    direct_cap: usize,
    /// Bytes of a column space: `slots * cap` (replicated) or `cap`.
    cols: usize,
    /// Largest message, bytes.
    cap: usize,
    /// Ring block ids available (each block has two).
    ring_blocks: usize,
    /// First notification ids of the ring and the direct exchange.
    ring_ids: u32,
    direct_ids: u32,
}

/// Element range `r` cut into `parts` near-equal parts: part `part`.
/// Borders fall on cache lines where the element size allows.
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

/// What a call of a given size does.
#[derive(Clone, Debug)]
struct CallPlan {
    len: usize,
    elem: usize,
    choice: Choice,
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
    /// The result is the node's shared one ([`NodeReduce::share_reduction`]).
    shared: bool,
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
    /// Direct calls exchange node partials ([`NodeReduce::claim_partial`]).
    node_partials: bool,
    calls: u64,
    progress: Option<Progress>,
    plan: Option<CallPlan>,
}

/// Where the result of a call is: bytes `range` of the window, or the
/// caller's receive buffer.
#[derive(Clone, Debug)]
pub(crate) struct Output {
    pub(crate) range: Range<usize>,
    pub(crate) in_recv: bool,
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
        let dis_messages = dis.messages_per_participant();
        // Ranks that share cores share the reduction: replicated calls on
        // one node, and direct exchanges of node partials between nodes,
        // then pay off up to larger sizes.
        let shared = slots > 1 && cap > 0 && Self::expect_shared(ctx, &opts, timeout)?;
        let direct = match opts.algorithm {
            AllreduceAlgorithm::Auto => nodes - 1 <= dis_messages,
            a => a == AllreduceAlgorithm::Direct,
        };
        let node_partials = shared && nodes > 1 && direct;
        let opts = AllreduceOptions {
            node_replicate_max: if shared {
                opts.shared_node_replicate_max
            } else {
                opts.node_replicate_max
            },
            replicate_max: if node_partials {
                opts.shared_replicate_max
            } else {
                opts.replicate_max
            },
            ..opts
        };
        // The choices of every size a call may have: `choose` changes only
        // at the thresholds, so these sizes cover them all.
        let smallest = if fixed { cap } else { 0 };
        let mut sizes = vec![smallest, cap];
        let (rm, nrm) = (opts.replicate_max, opts.node_replicate_max);
        for t in [
            1,
            rm,
            rm.saturating_add(1),
            nrm,
            nrm.saturating_add(1),
            opts.ring_min,
        ] {
            sizes.push(t.clamp(smallest, cap));
        }
        let choices: Vec<(usize, Choice)> = sizes
            .iter()
            .map(|&b| (b, choose(&opts, b, nodes, dis_messages)))
            .collect();
        let any = |p: &dyn Fn(&Choice) -> bool| choices.iter().any(|(_, c)| p(c));
        let largest = |p: &dyn Fn(&Choice) -> bool| {
            choices
                .iter()
                .filter(|(_, c)| p(c))
                .map(|&(b, _)| b)
                .max()
                .unwrap_or(0)
        };
        let replicated_cap = largest(&|c| c.replicated);
        let multi = nodes > 1;
        let dissem = multi && any(&|c| c.inter == Inter::Dissemination);
        let ring_used = multi && any(&|c| c.inter == Inter::Ring);
        let direct_cap = if multi {
            largest(&|c| c.inter == Inter::Direct)
        } else {
            0
        };
        let a = |x: usize| x.div_ceil(64) * 64;
        let cols = cap.max(slots * replicated_cap);
        let input_parities = if replicated_cap > 0 { 2 } else { 1 };
        let recv_slots = dis_messages;
        // Bytes 0..64*slots: each local rank's arrival word, a cache line
        // each (the calls it has put its input in for); then the shared
        // reduction's claim and done words and the node partial's claim
        // and ready words, a line each.
        let inputs = 64 * (slots + 4);
        let result = a(inputs + input_parities * slots * cap);
        let shared = a(result + cols);
        let shared_cap = if slots > 1 { replicated_cap } else { 0 };
        let run = a(shared + shared_cap);
        let recv = a(run + if dissem { dis.steps as usize * cols } else { 0 });
        let ring = a(recv + if dissem { 2 * recv_slots * cols } else { 0 });
        let direct = a(ring + if ring_used { cap } else { 0 });
        let total = a(direct + 2 * layout.ranks * direct_cap).max(64);
        // Ring blocks: at most one partial block per chunk beyond full ones.
        let dis_ids = 2 * recv_slots * slots;
        let direct_ids = if direct_cap > 0 { 2 * layout.ranks } else { 0 };
        let budget = crate::config::NOTIFICATION_LIMIT as usize - dis_ids - direct_ids;
        let mut block = opts.block_bytes.max(64);
        let ring_blocks = |block: usize| cap.div_ceil(block) + slots * nodes;
        while ring_used && 2 * ring_blocks(block) > budget {
            block *= 2;
        }
        let ring_blocks = if ring_used { ring_blocks(block) } else { 0 };
        let areas = Areas {
            inputs,
            input_parities,
            result,
            shared,
            run,
            recv,
            ring,
            direct,
            direct_cap,
            cols,
            cap,
            ring_blocks,
            ring_ids: dis_ids as u32,
            direct_ids: (dis_ids + 2 * ring_blocks) as u32,
        };
        let table = (dis_ids + 2 * ring_blocks + direct_ids).max(1) as u32;
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
            node_partials,
            calls: 0,
            progress: None,
            plan: None,
        })
    }

    /// Whether the ranks of a job of one node will share the reduction of
    /// replicated calls ([`AllreduceOptions::share_reduction`], by default
    /// when the job has more ranks than cores): agreed among all ranks, as
    /// every rank must choose the same threshold between replicated and
    /// split calls.
    fn expect_shared(ctx: &Context, opts: &AllreduceOptions, timeout: Timeout) -> Result<bool> {
        if ctx.num_ranks() < 2 {
            return Ok(false);
        }
        let host = ctx.engine.host_ranks().min(u32::MAX as usize) as u32;
        let mine = opts
            .share_reduction
            .unwrap_or_else(|| ctx.engine.patience().shares_cores(host)) as u32;
        let mut all = [0u32];
        ctx.allreduce(
            &[mine],
            &mut all,
            super::ReduceOp::Min,
            crate::GroupId::ALL,
            timeout,
        )?;
        Ok(all[0] == 1)
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
        let choice = choose(
            &self.opts,
            bytes,
            nodes,
            self.dis.messages_per_participant(),
        );
        let instances: Vec<Instance> = if choice.replicated {
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
        let local = ctx.local_rank() as usize;
        let local_num = ctx.local_num() as usize;
        let mine: Vec<usize> = if choice.inter == Inter::Direct || nodes == 1 {
            // Nothing to run with other nodes: each rank for itself.
            if choice.replicated || local < instances.len() {
                vec![local]
            } else {
                Vec::new()
            }
        } else {
            (0..instances.len())
                .filter(|&i| i % local_num == local)
                .collect()
        };
        let rings = if choice.inter == Inter::Ring && nodes > 1 {
            self.ring_plans(&instances, &mine, ctx.node(), elem)
        } else {
            Vec::new()
        };
        CallPlan {
            len,
            elem,
            choice,
            instances,
            mine,
            rings,
        }
    }

    /// Local rank `local`'s arrival word: how many calls it has put its
    /// input in for. Only that rank writes it (a plain store, no
    /// read-modify-write on a line everyone polls).
    fn arrival(&self, local: usize) -> &AtomicU64 {
        self.obj.atomic_u64(64 * local)
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
        match plan.choice.inter {
            Inter::Direct if self.node_partials => nodes * (nodes - 1),
            Inter::Direct => self.layout.ranks as u64 * (nodes - 1),
            Inter::Ring => plan
                .instances
                .iter()
                .map(|inst| {
                    2 * (nodes - 1) * self.ring_block_count(inst, nodes as usize, elem) as u64
                })
                .sum(),
            Inter::Dissemination => {
                plan.instances.len() as u64 * nodes * self.dis.messages_per_participant() as u64
            }
        }
    }

    /// Run one call: reduce `send` with `f` over all ranks. Resumes a call
    /// that timed out (which must have had the same length and type).
    ///
    /// With `recv`, a call whose result is this rank's own (replicated,
    /// direct or one node) is reduced straight into it
    /// ([`Output::in_recv`]): no result in the window, no copy.
    pub(crate) fn run<T: Pod, F: Fn(&T, &T) -> T>(
        &mut self,
        ctx: &Context,
        send: &[T],
        f: &F,
        recv: Option<&mut [T]>,
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
                shared: false,
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
        let direct = recv.filter(|_| self.own_result(&plan));
        let in_recv = direct.is_some();
        let r = self.advance(ctx, &plan, &mut progress, send, f, direct, deadline);
        let out = match r {
            Ok(()) => {
                self.calls += 1;
                Ok(Output {
                    in_recv,
                    ..self.output(ctx, &plan, progress.shared)
                })
            }
            Err(e) => {
                self.progress = Some(progress);
                Err(e)
            }
        };
        self.plan = Some(plan);
        out
    }

    /// Whether this rank computes its result on its own from inputs that
    /// are all present when it starts (so it can reduce straight into the
    /// caller's buffer: a timeout never leaves half a result there).
    fn own_result(&self, plan: &CallPlan) -> bool {
        plan.choice.replicated && (plan.choice.inter == Inter::Direct || self.layout.nodes() == 1)
    }

    fn output(&self, ctx: &Context, plan: &CallPlan, shared: bool) -> Output {
        let bytes = plan.len * plan.elem;
        let start = if shared {
            self.areas.shared
        } else if plan.choice.replicated {
            self.areas.result + plan.instances[ctx.local_rank() as usize].col
        } else {
            self.areas.result
        };
        Output {
            range: start..start + bytes,
            in_recv: false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn advance<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        progress: &mut Progress,
        send: &[T],
        f: &F,
        mut direct: Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<()> {
        let parity = (self.calls % 2) as usize;
        let tag = tag(self.calls);
        let stage = &mut progress.stage;
        loop {
            match *stage {
                Stage::Start => {
                    let local = ctx.local_rank() as usize;
                    let at = self.input_at(local);
                    self.obj.write_from(at, bytemuck::cast_slice(send));
                    self.arrival(local).store(self.calls + 1, SeqCst);
                    self.obj.notifications().ww.wake();
                    if plan.choice.inter == Inter::Direct && !self.node_partials {
                        let entry = ctx.rank() as usize;
                        self.send_direct(ctx, plan, parity, tag, (at, entry), deadline)?;
                    }
                    *stage = Stage::Instances { idx: 0, cursor: 0 };
                }
                Stage::Instances { idx, cursor } => {
                    if idx == plan.mine.len() {
                        *stage = Stage::Closing;
                        continue;
                    }
                    if self.own_result(plan) && self.node_partials {
                        let mut c = cursor;
                        if c == 0 {
                            c = if self.claim_partial(ctx, plan, parity, f) {
                                1
                            } else {
                                2
                            };
                            *stage = Stage::Instances { idx, cursor: c };
                        }
                        if c == 1 {
                            let node = ctx.node();
                            let from = self.direct_at(parity, node);
                            self.send_direct(ctx, plan, parity, tag, (from, node), deadline)?;
                            *stage = Stage::Instances { idx, cursor: 2 };
                        }
                        self.reduce_partials(ctx, plan, parity, tag, f, deadline)?;
                        progress.shared = true;
                        if let Some(out) = direct.as_deref_mut() {
                            self.copy_shared(out);
                        }
                        *stage = Stage::Instances {
                            idx: idx + 1,
                            cursor: 0,
                        };
                        continue;
                    }
                    if self.own_result(plan) {
                        // One wait for every input, local and remote.
                        self.await_inputs(ctx, plan, parity, tag, deadline)?;
                        progress.shared = self.share_reduction(ctx);
                        if progress.shared {
                            self.reduce_shared(ctx, plan, parity, f, deadline)?;
                            if let Some(out) = direct.as_deref_mut() {
                                self.copy_shared(out);
                            }
                        } else {
                            let inst = &plan.instances[ctx.local_rank() as usize];
                            let out = match direct.as_deref_mut() {
                                Some(out) => out,
                                // SAFETY: this rank's result column,
                                // written by it only.
                                None => unsafe { self.column(self.areas.result, inst) },
                            };
                            self.reduce_all(ctx, plan, parity, f, out);
                        }
                        *stage = Stage::Instances {
                            idx: idx + 1,
                            cursor: 0,
                        };
                        continue;
                    }
                    if idx == 0 && cursor == 0 {
                        self.await_inputs(ctx, plan, parity, tag, deadline)?;
                    }
                    let mut c = cursor;
                    let r = if !plan.rings.is_empty() {
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
                    if !plan.choice.replicated {
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

    /// Byte offset of rank `rank`'s input in the direct area (parity
    /// `parity`).
    fn direct_at(&self, parity: usize, rank: usize) -> usize {
        self.areas.direct + (parity * self.layout.ranks + rank) * self.areas.direct_cap
    }

    /// Notification id of rank `rank`'s direct input (parity `parity`).
    fn direct_id(&self, parity: usize, rank: usize) -> u32 {
        self.areas.direct_ids + (parity * self.layout.ranks + rank) as u32
    }

    /// Direct exchange: write the call's message at `from` into every other
    /// node's window as its direct entry `entry` (this rank's input, just
    /// put in its slot, as entry `rank`; or this node's partial as entry
    /// `node`), through the rank with the same local rank there (or that
    /// node's last), notified with `tag`.
    #[allow(clippy::too_many_arguments)]
    fn send_direct(
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
    fn reduce_all<T: Pod, F: Fn(&T, &T) -> T>(
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
            unsafe { self.obj.as_slice::<T>(at, len) }
        };
        with_slices(self.layout.ranks, input, |inputs| {
            reduce_slices(out, inputs, f)
        });
    }

    /// Whether one local rank reduces this call's whole result for the
    /// node ([`NodeReduce::reduce_shared`]) instead of every local rank
    /// reducing it for itself ([`AllreduceOptions::share_reduction`]; by
    /// default when more ranks are awake than there are cores). With a
    /// core for each rank the ranks' own reductions run side by side, and
    /// waiting for another rank's would only add its latency. The ranks of
    /// a node may decide differently: each result is the same reduction in
    /// the same order.
    fn share_reduction(&self, ctx: &Context) -> bool {
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
    fn reduce_shared<T: Pod, F: Fn(&T, &T) -> T>(
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
    fn copy_shared<T: Pod>(&self, out: &mut [T]) {
        // SAFETY: the shared result of this call is complete (the caller
        // saw it done) and not written again before this rank has put in
        // its input of the next call.
        out.copy_from_slice(unsafe { self.obj.as_slice::<T>(self.areas.shared, out.len()) });
    }

    /// The node's control word `k` after the arrival words, a line each:
    /// 0 shared result claimed, 1 shared result done, 2 node partial
    /// claimed, 3 node partial ready (each the last call it holds for).
    fn word(&self, k: usize) -> &AtomicU64 {
        self.obj.atomic_u64(64 * (self.slots + k))
    }

    /// Claim this call's shared result: the first local rank to claim it
    /// runs `reduce` on it and marks it done; the others wait for that.
    /// Callers make sure that whatever `reduce` reads is complete.
    fn reduce_once<T: Pod>(
        &self,
        ctx: &Context,
        len: usize,
        deadline: Deadline,
        reduce: impl FnOnce(&mut [T]),
    ) -> Result<()> {
        let call = self.calls + 1;
        let claim = self.word(0);
        let done = self.word(1);
        let ww = self.obj.notifications().ww;
        if claim.fetch_max(call, SeqCst) < call {
            // SAFETY: only the rank that claimed call `call` writes the
            // shared result, and nobody reads it meanwhile: readers of the
            // previous call's result have all put in their inputs of this
            // call (the claimant saw them before it claimed), and readers
            // of this call's wait for `done`.
            reduce(unsafe { self.obj.as_mut_slice::<T>(self.areas.shared, len) });
            done.store(call, SeqCst);
            ww.wake();
            return Ok(());
        }
        ctx.engine.patience().wait(
            ww,
            deadline,
            || (done.load(SeqCst) >= call).then_some(()),
            || ctx.engine.faults(),
        )
    }

    /// Node partials: if every local rank has put in its input of this
    /// call and this rank is the first to claim the call's partial, reduce
    /// the node's inputs in local-rank order into this node's partial slot
    /// (the direct area's entry of this node, which no other node writes)
    /// and mark it ready. The last local rank to arrive always sees every
    /// input, so some rank claims it.
    fn claim_partial<T: Pod, F: Fn(&T, &T) -> T>(
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
        // SAFETY: the node's inputs were written before their ranks counted
        // themselves in, which this rank saw, and are not written again
        // before every rank of the job has finished this call.
        let input = |l: usize| unsafe { self.obj.as_slice::<T>(self.input_at(l), len) };
        // SAFETY: only the claimant writes this node's partial slot of this
        // parity; the reducers of the call two back have read it (every
        // local rank has finished that call), and remote writes of the
        // previous call's partial went out before that call ended.
        let out = unsafe {
            self.obj
                .as_mut_slice::<T>(self.direct_at(parity, ctx.node()), len)
        };
        with_slices(local_num, input, |inputs| reduce_slices(out, inputs, f));
        self.word(3).store(call, SeqCst);
        self.obj.notifications().ww.wake();
        true
    }

    /// Node partials: once this node's partial is ready and every other
    /// node's has arrived, the first local rank to claim the call reduces
    /// them in node order into the shared result; every other rank waits
    /// for that.
    fn reduce_partials<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        parity: usize,
        tag: u32,
        f: &F,
        deadline: Deadline,
    ) -> Result<()> {
        let call = self.calls + 1;
        let nodes = self.layout.nodes();
        let me = ctx.node();
        let done = self.word(1);
        let ready = self.word(3);
        let table = self.obj.notifications();
        let ids = self.direct_id(parity, 0)..self.direct_id(parity, nodes);
        let arrived = |q: usize| {
            let v = table.values[self.direct_id(parity, q) as usize].load(SeqCst);
            crate::notifications::tag_reached(v, tag)
        };
        let all_in = ctx.engine.patience().wait(
            table.ww,
            deadline,
            || {
                if done.load(SeqCst) >= call {
                    return Some(false);
                }
                ctx.engine.pump(self.segment, &self.obj, ids.clone());
                let all =
                    ready.load(SeqCst) >= call && (0..nodes).filter(|&q| q != me).all(arrived);
                all.then_some(true)
            },
            || ctx.engine.faults(),
        )?;
        if !all_in {
            return Ok(()); // done
        }
        let len = plan.len;
        // SAFETY: every node's partial of this call is complete (ready, or
        // its notification seen) and not written again before every rank
        // of the job has finished this call.
        let input = |q: usize| unsafe { self.obj.as_slice::<T>(self.direct_at(parity, q), len) };
        self.reduce_once(ctx, len, deadline, |out: &mut [T]| {
            with_slices(nodes, input, |inputs| reduce_slices(out, inputs, f))
        })
    }

    /// Wait until every rank of the node has put in its input of this call
    /// and, with the direct exchange, every rank of the other nodes has
    /// written its input here (its notification holds `tag`): one wait, so
    /// a rank that has to wait at all yields for everything at once.
    ///
    /// Like every wait of a collective over all ranks, it fails as soon as
    /// any rank has failed: a local rank that gave up on a call because a
    /// remote one died would otherwise be waited for forever.
    fn await_inputs(
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
        let table = self.obj.notifications();
        let arrived = |r: usize| {
            let v = table.values[self.direct_id(parity, r) as usize].load(SeqCst);
            crate::notifications::tag_reached(v, tag)
        };
        ctx.engine.patience().wait(
            table.ww,
            deadline,
            || {
                let here = (0..local_num).all(|l| self.arrival(l).load(SeqCst) >= call);
                let there = !remote || {
                    ctx.engine.pump(self.segment, &self.obj, ids.clone());
                    (0..ranks)
                        .filter(|&r| !node.contains(&(r as Rank)))
                        .all(arrived)
                };
                (here && there).then_some(())
            },
            || ctx.engine.faults(),
        )
    }

    /// Reduce the node's inputs over `inst`'s elements into `out`, in
    /// local-rank order.
    fn reduce_node<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        inst: &Instance,
        out: &mut [T],
        f: &F,
    ) {
        let n = inst.elems.len();
        if n == 0 {
            return;
        }
        let skip = inst.elems.start * std::mem::size_of::<T>();
        // SAFETY: the inputs were written before their ranks counted
        // themselves in, and nobody writes them again until every rank of
        // the node has finished the call (input slots alternate by parity
        // for replicated calls; a split call ends with a node barrier).
        let input = |l: usize| unsafe { self.obj.as_slice::<T>(self.input_at(l) + skip, n) };
        with_slices(ctx.local_num() as usize, input, |inputs| {
            reduce_slices(out, inputs, f)
        });
    }

    /// This instance's column of the area at `area`, as a slice.
    ///
    /// # Safety
    /// Only the instance's owner (this rank) accesses it during the call,
    /// and no remote write targets it: the caller's protocol says why.
    #[allow(clippy::mut_from_ref)]
    unsafe fn column<T: Pod>(&self, area: usize, inst: &Instance) -> &mut [T] {
        // SAFETY: forwarded to the caller.
        unsafe {
            self.obj
                .as_mut_slice::<T>(area + inst.col, inst.elems.len())
        }
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

/// Run `body` on the slices `input(0..n)`, gathered without allocating
/// for up to 16 of them (the usual node or job of a small call).
fn with_slices<'s, T: 's, R>(
    n: usize,
    input: impl Fn(usize) -> &'s [T],
    body: impl FnOnce(&[&'s [T]]) -> R,
) -> R {
    const ON_STACK: usize = 16;
    if n <= ON_STACK {
        let mut slices: [&[T]; ON_STACK] = [&[]; ON_STACK];
        for (k, s) in slices[..n].iter_mut().enumerate() {
            *s = input(k);
        }
        body(&slices[..n])
    } else {
        body(&(0..n).map(input).collect::<Vec<_>>())
    }
}

/// `out = f(...f(f(inputs[0], inputs[1]), inputs[2])...)` element-wise, a
/// block at a time (the block stays in L1 while every input is folded in).
fn reduce_slices<T: Copy, F: Fn(&T, &T) -> T>(out: &mut [T], inputs: &[&[T]], f: &F) {
    const BLOCK: usize = 1024;
    let Some((first, rest)) = inputs.split_first() else {
        return;
    };
    for (b, o) in out.chunks_mut(BLOCK).enumerate() {
        let at = b * BLOCK..b * BLOCK + o.len();
        o.copy_from_slice(&first[at.clone()]);
        for input in rest {
            fold_into(o, &input[at.clone()], f);
        }
    }
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
    ///
    /// ```
    /// use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// // Set up once, call many times.
    /// let mut ar = Allreduce::<i64>::new(&ctx, 0, 2, Timeout::Block)?;
    /// for it in 1..=3i64 {
    ///     let r = ar.run(&[it, -it], ReduceOp::Sum, Timeout::Block)?;
    ///     assert_eq!(r.to_vec(), vec![it * ctx.num_ranks() as i64, -it * ctx.num_ranks() as i64]);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn new(
        ctx: &'a Context,
        segment: SegmentId,
        len: usize,
        timeout: Timeout,
    ) -> Result<Allreduce<'a, T>> {
        Allreduce::with_options(ctx, segment, len, AllreduceOptions::default(), timeout)
    }

    /// [`Allreduce::new`] with options.
    ///
    /// ```
    /// use gaspi::{Allreduce, AllreduceOptions, Config, Context, ReduceOp, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// // The ring from 64 KiB on, in 16 KiB blocks.
    /// let opts = AllreduceOptions { ring_min: 64 << 10, block_bytes: 16 << 10, ..Default::default() };
    /// let mut ar = Allreduce::<f32>::with_options(&ctx, 0, 1 << 16, opts, Timeout::Block)?;
    /// let r = ar.run(&vec![1.0; 1 << 16], ReduceOp::Sum, Timeout::Block)?;
    /// assert_eq!(r.get(0), ctx.num_ranks() as f32);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
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
    ///
    /// ```
    /// use gaspi::{Allreduce, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// // A user-defined operation on a plain-old-data pair: (max, count of max).
    /// #[derive(Clone, Copy, Debug, PartialEq, gaspi::Pod, gaspi::Zeroable)]
    /// #[repr(C)]
    /// struct MaxCount { max: u32, count: u32 }
    /// let mut ar = Allreduce::<MaxCount>::new(&ctx, 0, 1, Timeout::Block)?;
    /// let op = |a: &MaxCount, b: &MaxCount| match a.max.cmp(&b.max) {
    ///     std::cmp::Ordering::Less => *b,
    ///     std::cmp::Ordering::Greater => *a,
    ///     std::cmp::Ordering::Equal => MaxCount { max: a.max, count: a.count + b.count },
    /// };
    /// let r = ar.run_with(&[MaxCount { max: 5, count: 1 }], op, Timeout::Block)?;
    /// assert_eq!(r.get(0), MaxCount { max: 5, count: ctx.num_ranks() as u32 });
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_with<F: Fn(&T, &T) -> T>(
        &mut self,
        send: &[T],
        reduce: F,
        timeout: Timeout,
    ) -> Result<SegmentView<T>> {
        self.check(send)?;
        let out = self
            .core
            .run(self.ctx, send, &reduce, None, timeout.deadline())?;
        Ok(self.view(out))
    }

    /// [`Allreduce::run_with`], then copy the result into `recv`.
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<u32>::new(&ctx, 0, 2, Timeout::Block)?;
    /// let mut out = [0u32; 2];
    /// // Bitwise or of every rank's flags.
    /// ar.run_with_into(&[1 << (ctx.rank() % 32), 0], &mut out, |a, b| a | b, Timeout::Block)?;
    /// assert_eq!(out[0].count_ones(), ctx.num_ranks().min(32) as u32);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
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
        self.check(send)?;
        let out = self.core.run(
            self.ctx,
            send,
            &reduce,
            Some(&mut *recv),
            timeout.deadline(),
        )?;
        if !out.in_recv {
            self.view(out).copy_to_slice(0, recv);
        }
        Ok(())
    }

    /// Inter-node messages one call sends, all ranks together (the cost
    /// model: dissemination `nodes * (steps + partials)` per instance, ring
    /// `2 * (nodes - 1)` per block).
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let ar = Allreduce::<f64>::new(&ctx, 0, 1, Timeout::Block)?;
    /// if ctx.num_nodes() == 1 {
    ///     assert_eq!(ar.inter_node_messages(), 0);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn inter_node_messages(&self) -> u64 {
        self.core
            .inter_node_messages(self.ctx, self.len, std::mem::size_of::<T>())
    }

    /// The segment id of the windows.
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let ar = Allreduce::<f64>::new(&ctx, 6, 1, Timeout::Block)?;
    /// assert_eq!(ar.segment(), 6);
    /// drop(ar); // deletes the window segment
    /// assert!(!ctx.segment_list().contains(&6));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment(&self) -> SegmentId {
        self.core.segment()
    }
}

impl<T: super::Reducible> Allreduce<'_, T> {
    /// Reduce `send` element-wise with `op` over all ranks; returns a view
    /// of the result in the node's window (see [`Allreduce::run_with`]).
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<f64>::new(&ctx, 0, 1, Timeout::Block)?;
    /// let prod = ar.run(&[2.0], ReduceOp::Prod, Timeout::Block)?;
    /// assert_eq!(prod.get(0), 2f64.powi(ctx.num_ranks() as i32));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run(
        &mut self,
        send: &[T],
        op: super::ReduceOp,
        timeout: Timeout,
    ) -> Result<SegmentView<T>> {
        super::with_op!(op, T, |f| self.run_with(send, f, timeout))
    }

    /// [`Allreduce::run`], then copy the result into `recv`.
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<i32>::new(&ctx, 0, 3, Timeout::Block)?;
    /// let mut out = [0i32; 3];
    /// ar.run_into(&[1, 2, 3], &mut out, ReduceOp::Sum, Timeout::Block)?;
    /// let n = ctx.num_ranks() as i32;
    /// assert_eq!(out, [n, 2 * n, 3 * n]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
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
