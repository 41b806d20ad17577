//! The node-aware reduction engine: one window, its areas, and the calls
//! that run on it, planned by size and resumable after a timeout.

use super::areas::{Areas, RANK_ALIGN, STAGE_SLOTS, rank_stride};
use super::call_plan::{
    CallPlan, Instance, PipeCursor, SCATTER_MIN_BYTES, ScatterCursor, split_range,
};
use super::kernels::tag;
use super::options::{
    AllreduceAlgorithm, AllreduceOptions, Choice, Inter, auto_direct_max, choose,
};
use super::stream_choice::{self, Kinds, StreamChoices};
use crate::collectives::creation::Creation;
use crate::collectives::memory::NodeMemory;
use crate::collectives::plan::{Dissemination, Layout};
use crate::collectives::post;
use crate::config::NOTIFICATION_LIMIT;
use crate::context::Context;
use crate::engine::caches::last_level_cache_bytes;
use crate::engine::memcopy::copy_slice;
use crate::error::{Error, Result};
use crate::types::{Deadline, GroupId, Notification, Rank, SegmentId, Timeout};
use crate::windows::{Window, WindowOptions};
use bytemuck::Pod;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Instant;

/// Where a call stopped (to resume after a timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    Start,
    /// Instance `mine[idx]`, action `cursor`.
    Instances {
        idx: usize,
        cursor: usize,
    },
    /// A pipelined call ([`NodeReduce::pipeline`]).
    Pipeline(PipeCursor),
    /// A scattered call ([`NodeReduce::scatter_partials`]).
    Scatter(ScatterCursor),
    Closing,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Progress {
    len: usize,
    elem: usize,
    stage: Stage,
    /// The result is the node's shared one ([`NodeReduce::share_reduction`]).
    shared: bool,
}

/// The most nodes whose first ranks exchange the node partials of a small
/// call as keyed messages (every one sends its node's partial to every
/// other: `nodes * (nodes - 1)` messages, where the dissemination sends
/// `nodes * log2(nodes)` notified writes). Measured at 2 nodes only
/// (2026-11-25); the crossover beyond is not.
const MESSAGES_NODES_MAX: usize = 16;

/// How a call of `bytes` bytes runs: [`choose`]'s choice, except that
/// where node partials may cross as keyed messages (`messages`,
/// [`NodeReduce::messages`]) every replicated call exchanges them so, a
/// direct exchange; and whether it does (then `true`). The same on every
/// rank; the window's areas are made for these choices.
fn run_choice(
    opts: &AllreduceOptions,
    bytes: usize,
    nodes: usize,
    direct_max: usize,
    messages: bool,
) -> (Choice, bool) {
    let mut choice = choose(opts, bytes, nodes, direct_max);
    let by_messages = messages && bytes > 0 && choice.replicated;
    if by_messages {
        choice.inter = Inter::Direct;
    }
    (choice, by_messages)
}

/// The node-aware reduction engine: a window, its areas, and the call
/// counter. Untyped; each call brings its element type and operation.
#[derive(Debug)]
pub(crate) struct NodeReduce {
    /// This one's number, the same on every rank (agreed at creation) and
    /// larger than every earlier one's: the first half of the keys of its
    /// keyed messages ([`CallPlan::messages`]), so that those of an object
    /// given up are told apart and dropped.
    pub(super) id: u64,
    pub(super) segment: SegmentId,
    pub(super) window: Window,
    pub(super) mem: NodeMemory,
    pub(super) areas: Areas,
    pub(super) opts: AllreduceOptions,
    pub(super) layout: Layout,
    pub(super) dis: Dissemination,
    /// Instance slots: the most ranks a node has.
    pub(super) slots: usize,
    /// Direct calls exchange node partials (`NodeReduce::claim_partial`).
    pub(super) node_partials: bool,
    /// The largest call, in bytes, that the automatic algorithm exchanges
    /// directly ([`auto_direct_max`]).
    pub(super) direct_max: usize,
    /// The node partials of replicated calls cross hosts as keyed messages
    /// between the nodes' first ranks ([`run_choice`]).
    pub(super) messages: bool,
    /// The local ranks that may run on this rank's core (a job of one
    /// node; `None` elsewhere): its waits spin instead of yielding while
    /// none of them has work ([`Patience::wait_or_spin`]).
    ///
    /// [`Patience::wait_or_spin`]: crate::engine::wait::Patience::wait_or_spin
    pub(super) core_mates: Option<Vec<usize>>,
    pub(super) calls: u64,
    /// Chunks of the pipelined calls so far (the same on every rank).
    pub(super) pipe_seq: u64,
    pub(super) progress: Option<Progress>,
    pub(super) plan: Option<CallPlan>,
    /// Which stores put inputs in and copy pipelined results out,
    /// measured ([`StreamChoices`]).
    pub(super) stream: StreamChoices,
    /// Where the call in progress takes non-temporal stores.
    pub(super) streaming: Kinds,
}

/// Where the result of a call is: bytes `range` of the window, or the
/// caller's receive buffer.
#[derive(Clone, Debug)]
pub(crate) struct ResultPlace {
    pub(crate) range: Range<usize>,
    pub(crate) in_recv: bool,
}

impl NodeReduce {
    /// Whether direct calls exchange one partial per pair of nodes (the
    /// node's ranks share cores, and direct calls are taken; see
    /// [`NodeReduce::claim_partial`]).
    pub(crate) fn exchanges_node_partials(&self) -> bool {
        self.node_partials
    }

    /// Collectively create the engine on segment `segment` for messages of
    /// up to `cap` bytes, as steps of `creation`. With `fixed`, every call
    /// has exactly `cap` bytes (areas for other sizes are left out).
    pub(crate) fn create(
        ctx: &Context,
        segment: SegmentId,
        cap: usize,
        fixed: bool,
        opts: AllreduceOptions,
        creation: &mut Creation,
    ) -> Result<NodeReduce> {
        let layout = Layout::of(ctx);
        let nodes = layout.nodes();
        let slots = layout.ppn.min(layout.ranks);
        let dis = Dissemination::new(nodes);
        let dis_messages = dis.messages_per_participant();
        // Ranks that share cores share the reduction: replicated calls on
        // one node, and direct exchanges of node partials between nodes,
        // then pay off up to larger sizes.
        let (shared, id) = Self::agree(ctx, &opts, slots > 1 && cap > 0, creation)?;
        let direct_max = match opts.algorithm {
            AllreduceAlgorithm::Auto => auto_direct_max(nodes, dis_messages, shared),
            AllreduceAlgorithm::Direct => usize::MAX,
            _ => 0,
        };
        let node_partials = shared && nodes > 1 && direct_max > 0;
        let messages = Self::partials_as_messages(ctx, &opts, nodes);
        let mut opts = opts.for_node(slots, shared, (node_partials, direct_max));
        if messages {
            ctx.engine.host_keyed_made(id);
            // One message per pair of nodes: replicated for longer. One
            // rank reduces its node's inputs (`claim_partial`): where each
            // rank has a core of its own, the split call's node phase runs
            // on all of them, so the budget shrinks with the node's ranks.
            // Nodes of one rank each on a network: no budget, their large
            // calls are scattered (`scatter_partials`).
            let reducers = if shared { 1 } else { slots };
            let in_memory = ctx.engine.host_one_sided_in_memory();
            let max = opts.message_replicate_max.unwrap_or(if in_memory {
                AllreduceOptions::MESSAGE_REPLICATE_MAX_IN_MEMORY
            } else if slots == 1 {
                usize::MAX
            } else {
                AllreduceOptions::MESSAGE_REPLICATE_MAX
            });
            let budget = max / (nodes - 1) / reducers;
            opts.replicate_max = opts.replicate_max.max(budget);
        }
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
            direct_max,
            direct_max.saturating_add(1),
            opts.ring_min,
        ] {
            sizes.push(t.clamp(smallest, cap));
        }
        let choices: Vec<(usize, Choice)> = sizes
            .iter()
            .map(|&b| (b, run_choice(&opts, b, nodes, direct_max, messages).0))
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
        // Node partials as messages land in the direct area's node
        // entries: every replicated call's.
        let direct_cap = match multi {
            true if messages => replicated_cap.max(largest(&|c| c.inter == Inter::Direct)),
            true => largest(&|c| c.inter == Inter::Direct),
            false => 0,
        };
        // Entries by node where every direct call exchanges node partials,
        // else by rank.
        let direct_entries = if node_partials || messages {
            nodes
        } else {
            layout.ranks
        };
        // Every size below grows with the caller's `cap`: all checked.
        use crate::extent::{add, align_up, mul};
        let what = "allreduce window size (elements * element size, per rank of the node)";
        let a = |x: usize| align_up(what, x, 64);
        // `rank_stride`, checked.
        let stride = |x: usize| align_up(what, x, RANK_ALIGN);
        // Nodes of one rank whose every call crosses as messages put their
        // input straight into their node's partial in the direct area
        // (`NodeReduce::input_is_partial`) and leave their result in the
        // shared one (or the caller's buffer): no input slots, no result
        // columns (a third of the window of a large call on 2 nodes).
        let partial_inputs =
            messages && slots == 1 && choices.iter().all(|&(b, c)| b == 0 || c.replicated);
        let cols = match partial_inputs {
            true => 0,
            false => cap.max(mul(what, slots, stride(replicated_cap)?)?),
        };
        let input_parities = if replicated_cap > 0 { 2 } else { 1 };
        let recv_slots = dis_messages;
        // A job of one node pipelines its largest split calls: their
        // inputs pass through the staging slots, so the input slots need
        // only hold the calls below `pipeline_min`.
        let pipeline_min = opts.pipeline_min_for(slots, last_level_cache_bytes());
        let pipelined = !multi
            && slots > 1
            && cap >= pipeline_min
            && !choose(&opts, cap, 1, usize::MAX).replicated;
        let (input_cap, stage_slot) = if partial_inputs {
            (0, 0)
        } else if pipelined {
            let input_cap = pipeline_min.max(replicated_cap);
            (stride(input_cap)?, a(opts.pipeline_chunk.min(cap).max(64))?)
        } else {
            (stride(cap)?, 0)
        };
        // Bytes 0..64*slots: each local rank's arrival word, a cache line
        // each (the calls it has put its input in for); then the shared
        // reduction's claim and done words and the node partial's claim
        // and ready words, a line each; then each instance's done word
        // (`NodeReduce::instance_done`), a line each; then each local
        // rank's put and reduced words of the pipelined calls, a line
        // each; then the kinds of stores in use
        // (`NodeReduce::stream_word`).
        let inputs = 64 * (4 * slots + 5);
        let stage = a(add(
            what,
            inputs,
            mul(what, input_parities * slots, input_cap)?,
        )?)?;
        let stage_len = mul(what, STAGE_SLOTS * slots, stage_slot)?;
        let result = stride(add(what, stage, stage_len)?)?;
        let shared = a(add(what, result, cols)?)?;
        // (Node partials as messages are reduced into it on nodes of one
        // rank too.)
        let shared_cap = if slots > 1 || messages {
            replicated_cap
        } else {
            0
        };
        let run = a(add(what, shared, shared_cap)?)?;
        let run_len = if dissem {
            mul(what, dis.steps as usize, cols)?
        } else {
            0
        };
        let recv = a(add(what, run, run_len)?)?;
        let recv_len = if dissem {
            mul(what, 2 * recv_slots, cols)?
        } else {
            0
        };
        let ring = a(add(what, recv, recv_len)?)?;
        let direct = a(add(what, ring, if ring_used { cap } else { 0 })?)?;
        // (`Areas::direct_parities`.)
        let direct_parities = if partial_inputs { 1 } else { 2 };
        let direct_len = mul(what, direct_parities * direct_entries, direct_cap)?;
        let total = a(add(what, direct, direct_len)?)?.max(64);
        // Ring blocks: at most one partial block per chunk beyond full ones.
        let dis_ids = 2 * recv_slots * slots;
        let direct_ids = if direct_cap > 0 {
            2 * direct_entries
        } else {
            0
        };
        let budget = NOTIFICATION_LIMIT as usize - dis_ids - direct_ids;
        let mut block = ctx
            .engine
            .block_bytes(opts.block_bytes, AllreduceOptions::DEFAULT_BLOCK_BYTES)
            .max(64);
        let ring_blocks = |block: usize| cap.div_ceil(block) + slots * nodes;
        while ring_used && 2 * ring_blocks(block) > budget {
            block *= 2;
        }
        let ring_blocks = if ring_used { ring_blocks(block) } else { 0 };
        let areas = Areas {
            inputs,
            input_parities,
            input_cap,
            stage,
            stage_slot,
            result,
            shared,
            run,
            recv,
            ring,
            direct,
            direct_cap,
            direct_parities,
            direct_entries,
            cols,
            cap,
            ring_blocks,
            ring_ids: dis_ids as u32,
            direct_ids: (dis_ids + 2 * ring_blocks) as u32,
        };
        let table = (dis_ids + 2 * ring_blocks + direct_ids).max(1) as u32;
        let table = WindowOptions::default().notifications(table);
        let window =
            creation.window(|t| ctx.window_create_with(segment, total, GroupId::ALL, table, t))?;
        let mem = NodeMemory::new(&window);
        let core_mates = if !multi && slots > 1 {
            Some(creation.last(Self::core_mates(ctx, &mem, creation.timeout()))?)
        } else {
            None
        };
        Ok(NodeReduce {
            id,
            segment,
            window,
            mem,
            areas,
            opts: AllreduceOptions {
                block_bytes: block,
                pipeline_min,
                ..opts
            },
            layout,
            dis,
            slots,
            node_partials,
            direct_max,
            messages,
            core_mates,
            calls: 0,
            pipe_seq: 0,
            progress: None,
            plan: None,
            stream: StreamChoices::default(),
            streaming: Kinds::default(),
        })
    }

    /// Collectively agree on this engine's number ([`NodeReduce::id`]: the
    /// largest of the ranks' next numbers) and, where `ask` (nodes of
    /// several ranks, a non-empty window), whether the ranks will share the
    /// reduction of replicated calls ([`AllreduceOptions::share_reduction`],
    /// by default when the job has more ranks than cores): every rank must
    /// choose the same threshold between replicated and split calls. One
    /// allreduce over all ranks.
    fn agree(
        ctx: &Context,
        opts: &AllreduceOptions,
        ask: bool,
        creation: &mut Creation,
    ) -> Result<(bool, u64)> {
        let share = ask
            && opts
                .share_reduction
                .unwrap_or_else(|| ctx.engine.host_shares_cores());
        // The largest "does not share" is 0 only where every rank shares.
        let mut not_shared = [u64::from(!share)];
        let id = creation.keyed_object_id(&mut not_shared)?;
        let shared = ask && not_shared[0] == 0 && ctx.num_ranks() >= 2;
        Ok((shared, id))
    }

    /// Collectively find the local ranks that may run on this rank's CPU:
    /// each rank writes the CPU it is bound to (its affinity's only CPU)
    /// beside its arrival word, and after a barrier reads the others'. A
    /// rank that is not bound to one CPU may run on any, so it is a mate
    /// of every rank, and every rank is its mate.
    fn core_mates(ctx: &Context, mem: &NodeMemory, timeout: Timeout) -> Result<Vec<usize>> {
        let cpus = crate::sys::allowed_cpus();
        let mine = match cpus[..] {
            [cpu] => cpu as u64 + 1,
            _ => 0,
        };
        let local = ctx.local_rank() as usize;
        let cpu_word = |l: usize| mem.word(64 * l + 8);
        cpu_word(local).store(mine, SeqCst);
        ctx.barrier(ctx.node_group(), timeout)?;
        Ok((0..ctx.local_num() as usize)
            .filter(|&l| l != local)
            .filter(|&l| {
                let theirs = cpu_word(l).load(SeqCst);
                mine == 0 || theirs == 0 || theirs == mine
            })
            .collect())
    }

    /// Whether every local rank that may run on this rank's core has put
    /// in its input of call `call` (so while this rank waits for inputs,
    /// they wait too, and it may spin).
    pub(super) fn mates_arrived(&self, call: u64) -> bool {
        self.core_mates
            .as_ref()
            .is_some_and(|m| m.iter().all(|&l| self.arrival(l).load(SeqCst) >= call))
    }

    /// Who claimed the shared reduction of which call, as
    /// `call * slots + local rank`: the word beside the claim word
    /// ([`NodeReduce::word`] 0), written by the claimant after its claim.
    fn claimant(&self) -> &AtomicU64 {
        self.mem.word(64 * self.slots + 8)
    }

    /// Record that local rank `local` claimed call `call`'s shared
    /// reduction (not at all if the number would not fit: the waiters
    /// then yield, as for an unknown claimant).
    pub(super) fn record_claimant(&self, call: u64, local: usize) {
        let slots = self.slots as u64;
        if let Some(v) = call
            .checked_mul(slots)
            .and_then(|v| v.checked_add(local as u64))
        {
            self.claimant().store(v, SeqCst);
        }
    }

    /// Whether call `call`'s shared reduction is known to run on another
    /// core than this rank's (so a rank waiting for it may spin).
    pub(super) fn claimant_elsewhere(&self, call: u64) -> bool {
        let v = self.claimant().load(SeqCst);
        let slots = self.slots as u64;
        self.core_mates
            .as_deref()
            .is_some_and(|m| v / slots == call && !m.contains(&((v % slots) as usize)))
    }

    /// The rank that runs instance `inst` on `node`.
    pub(super) fn owner(&self, node: usize, inst: usize) -> Rank {
        let r = self.layout.node_ranks(node);
        (r.start + inst % r.len()) as Rank
    }

    /// The plan of a call of `len` elements of `elem` bytes.
    fn plan_for(&self, ctx: &Context, len: usize, elem: usize) -> CallPlan {
        let bytes = len * elem;
        let nodes = self.layout.nodes();
        let (choice, messages) = self.run_choice(bytes);
        let instances: Vec<Instance> = if choice.replicated {
            (0..self.slots)
                .map(|i| Instance {
                    elems: 0..len,
                    col: i * rank_stride(bytes),
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
        // Every node one rank, every chunk some elements: the same on
        // every rank.
        let scattered = messages
            && self.layout.ranks == nodes
            && bytes >= SCATTER_MIN_BYTES
            && (0..nodes).all(|q| !split_range(0..len, nodes, q, elem).is_empty());
        CallPlan {
            len,
            elem,
            choice,
            instances,
            mine,
            rings,
            messages,
            scattered,
        }
    }

    /// The key of this call's keyed message `phase` (0 or 1) from one
    /// node's first rank to another's: this object's number, then two per
    /// call (a scattered call sends two messages to each node, others
    /// one), so that the keys of one object's calls only grow.
    pub(super) fn message_key(&self, phase: u64) -> (u64, u64) {
        (self.id, self.calls * 2 + phase)
    }

    /// Local rank `local`'s arrival word: how many calls it has put its
    /// input in for. Only that rank writes it (a plain store, no
    /// read-modify-write on a line everyone polls).
    pub(super) fn arrival(&self, local: usize) -> &AtomicU64 {
        self.mem.word(64 * local)
    }

    /// Going: the keyed messages it was taking are given up, so that the
    /// engine lets go of their memory (its window).
    pub(crate) fn forget_messages(&self, ctx: &Context) {
        if self.messages {
            ctx.engine.host_keyed_forget(self.id);
        }
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
        if plan.messages {
            // One keyed message per pair of nodes (two where scattered:
            // `scatter_partials`), counted as the notified write it stands
            // for (`exchange_partials`).
            let per_pair = if plan.scattered { 2 } else { 1 };
            return per_pair * nodes * (nodes - 1);
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
    /// ([`ResultPlace::in_recv`]): no result in the window, no copy.
    pub(crate) fn run<T: Pod, F: Fn(&T, &T) -> T>(
        &mut self,
        ctx: &Context,
        send: &[T],
        f: &F,
        recv: Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<ResultPlace> {
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
            self.stream.reset(self.calls);
        }
        let plan = self.plan.take().expect("plan was just made");
        // A new call (not one resumed after a timeout) chooses how it puts
        // its input in and copies a pipelined result out; the node's first
        // rank times measured calls.
        let mut timed = None;
        if progress.stage == Stage::Start {
            // Measured: no fixed kind asked for, and large enough; the
            // copies where a pipelined call copies its result out.
            let large = bytes >= stream_choice::MIN_BYTES;
            let measured = Kinds {
                inputs: self.opts.stream_inputs.is_none() && large,
                copies: self.opts.stream_copies.is_none()
                    && large
                    && recv.is_some()
                    && self.pipelined(&plan),
            };
            let picked = self
                .stream
                .pick(self.calls, self.stream_word().load(SeqCst));
            self.streaming = Kinds {
                inputs: (self.opts.stream_inputs).unwrap_or(measured.inputs && picked.inputs),
                copies: (self.opts.stream_copies).unwrap_or(measured.copies && picked.copies),
            };
            if (measured.inputs || measured.copies) && ctx.local_rank() == 0 {
                timed = Some((Instant::now(), measured));
            }
        }
        // The caller's buffer: reduced into straight where this rank's
        // result is its own, or filled instance by instance as the node's
        // ranks complete them where the result is split.
        let (direct, gather) = match recv {
            Some(r) if self.own_result(&plan) => (Some(r), None),
            Some(r) if !plan.choice.replicated => (None, Some(r)),
            _ => (None, None),
        };
        let in_recv = direct.is_some() || gather.is_some();
        let r = self.advance(
            ctx,
            &plan,
            &mut progress,
            send,
            f,
            (direct, gather),
            deadline,
        );
        let out = match r {
            Ok(()) => {
                if let Some((t, measured)) = timed {
                    let (call, kinds) = (self.calls, self.streaming);
                    self.stream
                        .record(call, (kinds, measured), bytes, t.elapsed());
                    self.stream_word().store(self.stream.word(), SeqCst);
                }
                self.calls += 1;
                if self.pipelined(&plan) {
                    self.pipe_seq += self.chunks(&plan) as u64;
                }
                Ok(ResultPlace {
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

    /// Whether the node partials of replicated calls cross hosts as keyed
    /// messages between the nodes' first ranks: where the transport has
    /// them (the MPI engine's, whose messages beat its notified writes:
    /// one message where a notified write is a put, a flush and the
    /// notification's accumulates), for the automatic algorithm, on 2 to
    /// [`MESSAGES_NODES_MAX`] nodes. The same on every rank.
    fn partials_as_messages(ctx: &Context, opts: &AllreduceOptions, nodes: usize) -> bool {
        (2..=MESSAGES_NODES_MAX).contains(&nodes)
            && opts.algorithm == AllreduceAlgorithm::Auto
            && ctx.engine.host_keyed()
    }

    /// [`run_choice`] for a call of `bytes` bytes of this engine.
    fn run_choice(&self, bytes: usize) -> (Choice, bool) {
        let nodes = self.layout.nodes();
        run_choice(&self.opts, bytes, nodes, self.direct_max, self.messages)
    }

    /// Whether this rank computes its result on its own from inputs that
    /// are all present when it starts (so it can reduce straight into the
    /// caller's buffer: a timeout never leaves half a result there).
    pub(super) fn own_result(&self, plan: &CallPlan) -> bool {
        plan.choice.replicated && (plan.choice.inter == Inter::Direct || self.layout.nodes() == 1)
    }

    /// Whether this rank's input is its node's partial, put straight into
    /// the node's direct entry (no input slot, no copy of it): the only
    /// rank of its node, where node partials are exchanged
    /// ([`NodeReduce::claim_partial`] then only marks it ready). A copy
    /// less of the whole call: 2 hosts of one rank over TCP, 4 MiB calls
    /// took 0.8x the time (AMD EPYC VM, Intel MPI, 2026-12-01).
    pub(super) fn input_is_partial(&self, ctx: &Context, plan: &CallPlan) -> bool {
        ctx.local_num() == 1 && self.own_result(plan) && (self.node_partials || plan.messages)
    }

    fn output(&self, ctx: &Context, plan: &CallPlan, shared: bool) -> ResultPlace {
        let bytes = plan.len * plan.elem;
        let start = if shared {
            self.areas.shared
        } else if plan.choice.replicated {
            self.areas.result + plan.instances[ctx.local_rank() as usize].col
        } else {
            self.areas.result
        };
        ResultPlace {
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
        (mut direct, mut gather): (Option<&mut [T]>, Option<&mut [T]>),
        deadline: Deadline,
    ) -> Result<()> {
        let parity = (self.calls % 2) as usize;
        let tag = tag(self.calls);
        let stage = &mut progress.stage;
        loop {
            match *stage {
                Stage::Start if self.pipelined(plan) => {
                    *stage = Stage::Pipeline(PipeCursor::default());
                }
                Stage::Pipeline(mut cur) => {
                    let r = self.pipeline(
                        ctx,
                        plan,
                        &mut cur,
                        send,
                        f,
                        gather.as_deref_mut(),
                        deadline,
                    );
                    *stage = Stage::Pipeline(cur);
                    return r;
                }
                Stage::Scatter(mut cur) => {
                    let out = direct.as_deref_mut();
                    let r = self.scatter_partials(
                        ctx,
                        plan,
                        parity,
                        &mut cur,
                        (send, f),
                        out,
                        deadline,
                    );
                    *stage = Stage::Scatter(cur);
                    r?;
                    // The result is the shared one (and in `direct` too).
                    progress.shared = true;
                    *stage = Stage::Closing;
                }
                Stage::Start => {
                    let local = ctx.local_rank() as usize;
                    let at = if self.input_is_partial(ctx, plan) {
                        self.direct_at(parity, ctx.node())
                    } else {
                        self.input_at(local)
                    };
                    self.put_input(plan, at, send, ctx.node());
                    self.arrival(local).store(self.calls + 1, SeqCst);
                    self.mem.table().ww.wake();
                    if plan.choice.inter == Inter::Direct && !self.node_partials && !plan.messages {
                        let entry = ctx.rank() as usize;
                        self.send_direct(ctx, plan, parity, tag, (at, entry), deadline)?;
                    }
                    *stage = match plan.scattered {
                        true => Stage::Scatter(ScatterCursor::default()),
                        false => Stage::Instances { idx: 0, cursor: 0 },
                    };
                }
                Stage::Instances { idx, cursor } => {
                    if idx == plan.mine.len() {
                        *stage = Stage::Closing;
                        continue;
                    }
                    if self.own_result(plan) && (self.node_partials || plan.messages) {
                        // The cursor: 0 before the claim of the node's
                        // partial; 1 claimed, to be sent as notified
                        // writes; 2 claim settled (sent, or another
                        // rank's); 3 sent as keyed messages.
                        let mut c = cursor;
                        if c == 0 {
                            c = if self.claim_partial(ctx, plan, parity, f) {
                                1
                            } else {
                                2
                            };
                            *stage = Stage::Instances { idx, cursor: c };
                        }
                        if c == 1 && !plan.messages {
                            let node = ctx.node();
                            let from = self.direct_at(parity, node);
                            self.send_direct(ctx, plan, parity, tag, (from, node), deadline)?;
                            c = 2;
                            *stage = Stage::Instances { idx, cursor: c };
                        }
                        // The only rank of its node reduces the partials
                        // as they land, into `direct` or the shared result.
                        let eager = plan.messages && ctx.local_num() == 1;
                        if plan.messages && ctx.node_ranks(ctx.node()).start == ctx.rank() {
                            let mut sent = c == 3;
                            let eager_into = eager
                                .then(|| match direct.as_deref_mut() {
                                    Some(out) => out,
                                    // SAFETY: the shared result, written only
                                    // by the only rank of the node, which
                                    // claims the call in `reduce_partials`
                                    // right after; its reader of the previous
                                    // call (this rank) has finished that call.
                                    None => unsafe {
                                        self.mem.write::<T>(self.areas.shared, plan.len)
                                    },
                                })
                                .map(|o| (o, f));
                            let r = self.exchange_partials(
                                ctx, plan, parity, tag, &mut sent, eager_into, deadline,
                            );
                            if sent {
                                *stage = Stage::Instances { idx, cursor: 3 };
                            }
                            r?;
                        }
                        let out = direct.as_deref_mut();
                        let own =
                            self.reduce_partials(ctx, plan, parity, tag, f, out, eager, deadline)?;
                        progress.shared = !own;
                        if let (false, Some(out)) = (own, direct.as_deref_mut()) {
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
                        self.ring(ctx, plan, idx, &mut c, (send, f), deadline)
                    } else {
                        self.disseminate(ctx, plan, idx, parity, &mut c, (send, f), deadline)
                    };
                    *stage = Stage::Instances { idx, cursor: c };
                    r?;
                    // Its part of the result is complete.
                    self.instance_done(plan.mine[idx])
                        .store(self.calls + 1, SeqCst);
                    self.mem.table().ww.wake();
                    *stage = Stage::Instances {
                        idx: idx + 1,
                        cursor: 0,
                    };
                }
                Stage::Closing => {
                    if !plan.choice.replicated {
                        self.await_instances(ctx, plan, gather.as_deref_mut(), deadline)?;
                    }
                    // (Keyed messages leave nothing on the queue.)
                    if plan.len > 0 && self.layout.nodes() > 1 && !plan.messages {
                        ctx.wait(self.opts.queue, deadline.timeout())?;
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Put this rank's input of a call planned as `plan` into its input
    /// slot at `at`: all of it for a replicated call; for a split one,
    /// only the elements of the other ranks' instances (this rank reduces
    /// its own straight from `send`, [`NodeReduce::reduce_node`]); for a
    /// scattered one, all but the chunk of `node`, its own
    /// ([`NodeReduce::scatter_partials`]).
    fn put_input<T: Pod>(&self, plan: &CallPlan, at: usize, send: &[T], node: usize) {
        if plan.scattered {
            // The chunks this node sends: its own (`node`'s) is reduced
            // straight from `send`.
            return self.put_around(at, send, 0..send.len(), [self.chunk(plan, node)]);
        }
        let own: &[usize] = if plan.choice.replicated {
            &[]
        } else {
            &plan.mine
        };
        let own = own.iter().map(|&i| plan.instances[i].elems.clone());
        self.put_around(at, send, 0..send.len(), own);
    }

    /// Put `send[whole]` into the window at `at` (where element
    /// `whole.start` goes), except the ranges `own` (ascending, inside
    /// `whole`): the elements this rank reduces straight from `send`.
    pub(super) fn put_around<T: Pod>(
        &self,
        at: usize,
        send: &[T],
        whole: Range<usize>,
        own: impl IntoIterator<Item = Range<usize>>,
    ) {
        let elem = std::mem::size_of::<T>();
        let put = |r: Range<usize>| {
            let bytes: &[u8] = bytemuck::cast_slice(&send[r.clone()]);
            self.mem.put(
                at + (r.start - whole.start) * elem,
                bytes,
                self.streaming.inputs,
            );
        };
        let mut from = whole.start;
        for r in own {
            put(from..r.start);
            from = r.end;
        }
        put(from..whole.end);
    }

    /// Instance `inst`'s done word, the control word after the four of
    /// [`NodeReduce::word`]: the last call whose part of the result it
    /// holds complete (a split call's instance, written by its owner).
    fn instance_done(&self, inst: usize) -> &AtomicU64 {
        self.word(4 + inst)
    }

    /// The node's kinds of stores in use ([`StreamChoices::word`]: bit 0
    /// the inputs', bit 1 the pipelined copies'; set: streaming),
    /// published by its first local rank: the control word after the
    /// pipelined calls' words.
    fn stream_word(&self) -> &AtomicU64 {
        self.word(4 + 3 * self.slots)
    }

    /// Wait until every instance of this split call is complete (then
    /// every rank of the node has also finished reading this call's
    /// inputs), copying each into `out` as soon as it is, while the
    /// others are still being reduced.
    fn await_instances<T: Pod>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        mut out: Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<()> {
        let call = self.calls + 1;
        let mut copied = vec![false; plan.instances.len()];
        ctx.engine.patience().wait(
            self.mem.table().ww,
            deadline,
            || {
                for (i, inst) in plan.instances.iter().enumerate() {
                    if copied[i] || self.instance_done(i).load(SeqCst) < call {
                        continue;
                    }
                    if let Some(out) = out.as_deref_mut() {
                        let at = self.areas.result + inst.col;
                        // SAFETY: the instance's result column is complete
                        // (its owner said so above) and not written again
                        // before every local rank has put in its input of
                        // the next call.
                        let r = unsafe { self.mem.read::<T>(at, inst.elems.len()) };
                        copy_slice(&mut out[inst.elems.clone()], r);
                    }
                    copied[i] = true;
                }
                copied.iter().all(|&c| c).then_some(())
            },
            || ctx.engine.faults(),
        )
    }

    /// Byte offset of local rank `local`'s input slot in this call: slots
    /// alternate by call parity if there are two sets.
    pub(super) fn input_at(&self, local: usize) -> usize {
        let parity = (self.calls % self.areas.input_parities as u64) as usize;
        self.areas.inputs + (parity * self.slots + local) * self.areas.input_cap
    }

    /// Byte offset of direct entry `entry` (a rank's input, or a node's
    /// partial: [`Areas::direct_entries`]) in the direct area (parity
    /// `parity`, where there are two sets: [`Areas::direct_parities`]).
    pub(super) fn direct_at(&self, parity: usize, entry: usize) -> usize {
        let set = parity % self.areas.direct_parities;
        self.areas.direct + (set * self.areas.direct_entries + entry) * self.areas.direct_cap
    }

    /// Notification id of direct entry `entry` (parity `parity`).
    pub(super) fn direct_id(&self, parity: usize, entry: usize) -> u32 {
        self.areas.direct_ids + (parity * self.areas.direct_entries + entry) as u32
    }

    /// This instance's column of the area at `area`, as a slice.
    ///
    /// # Safety
    /// Only the instance's owner (this rank) accesses it during the call,
    /// and no remote write targets it: the caller's protocol says why.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn column<T: Pod>(&self, area: usize, inst: &Instance) -> &mut [T] {
        // SAFETY: forwarded to the caller.
        unsafe { self.mem.write::<T>(area + inst.col, inst.elems.len()) }
    }

    pub(super) fn post(
        &self,
        ctx: &Context,
        to: Rank,
        bytes: (usize, usize, usize),
        n: Notification,
        deadline: Deadline,
    ) -> Result<()> {
        post(ctx, self.segment, self.opts.queue, to, bytes, n, deadline)
    }

    /// Wait for notification `id` of the window and take it.
    pub(super) fn await_id(&self, ctx: &Context, id: u32, deadline: Deadline) -> Result<u32> {
        ctx.notify_claim(self.segment, id..id + 1, deadline.timeout())
            .map(|(_, v)| v)
    }
}
