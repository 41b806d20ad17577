//! The options of the node-aware allreduce, and the choice of algorithm a
//! call of a given size makes.

use crate::types::QueueId;

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
    /// Direct exchange for small messages on few nodes (while ranks share
    /// cores, on up to 16 nodes, as long as a node's partials to the
    /// others come to at most 64 KiB), else dissemination below
    /// [`AllreduceOptions::ring_min`] bytes, ring from there on. On the
    /// MPI engine between hosts, replicated calls exchange node partials
    /// as MPI messages ([`AllreduceOptions::message_replicate_max`]).
    #[default]
    Auto,
    /// Always the dissemination with partial reductions.
    Dissemination,
    /// Always the pipelined ring (reduce-scatter + allgather), split.
    Ring,
    /// Always the direct exchange, replicated.
    Direct,
}

/// Options of an [`Allreduce`](super::Allreduce).
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
    /// guide's allreduce figures, docs/guide/benchmarking.md).
    pub node_replicate_max: usize,
    /// A job of one node whose ranks each reduce for themselves reads
    /// every local rank's input in every rank when a call is replicated:
    /// the bytes of all inputs together are at most this many, and
    /// [`AllreduceOptions::node_replicate_max`] shrinks with the ranks of
    /// the node to fit (default 4 KiB: 2 KiB with 2 ranks, 512 bytes with
    /// 8, 256 with 16; with a core for each of 8 or 16 ranks on a 16-core
    /// Xeon, splitting was 15-35% faster than replicating from 512 bytes to
    /// 2 KiB, and even at 256 bytes; see the guide's core-per-rank figures,
    /// docs/guide/benchmarking.md).
    pub node_replicate_inputs: usize,
    /// [`AllreduceOptions::replicate_max`] for the direct exchange of ranks
    /// that share cores ([`AllreduceOptions::share_reduction`], agreed at
    /// creation): each node then sends one partial result and reduces
    /// once, so replicated calls stay cheap for longer (default 32 KiB:
    /// with 2 nodes of 2 ranks on 2 cores they were 30% faster than split
    /// calls at 8 KiB and 12% at 32 KiB). On more nodes than the
    /// dissemination's messages, no more than the automatic algorithm
    /// exchanges directly there (64 KiB of partials per node: 21 KiB on 4
    /// nodes, 9 KiB on 8).
    pub shared_replicate_max: usize,
    /// [`AllreduceOptions::replicate_max`] where the node partials of
    /// replicated calls cross hosts as MPI messages between the nodes'
    /// first ranks (the MPI engine between hosts, automatic algorithm, up
    /// to 16 nodes): one message per pair of nodes, where a split call's
    /// steps are notified writes, each a put, a flush and the
    /// notification's accumulates. A node's partials to the others come
    /// to at most this many bytes, divided by the node's ranks where they
    /// do not share cores (one rank reduces a replicated call's node
    /// partial, where the split call's node phase runs on every rank).
    /// `None` (the default): no limit for nodes of one rank each on a
    /// network, whose calls from 1 MiB on are reduce-scattered and
    /// gathered as messages (2 and 4 hosts of one rank over TCP, Intel
    /// MPI, 2026-12-01: 0.28-0.44 of the split calls' time at 4 to 16
    /// MiB, docs/guide/mpi.md); elsewhere
    /// [`AllreduceOptions::MESSAGE_REPLICATE_MAX`] (6 MiB: calls of up to
    /// 6 MiB on 2 nodes whose ranks share cores, 2 MiB on 4, 410 KiB on
    /// 16; 768 KiB on 2 nodes of 8 ranks with a core each), or 256 KiB
    /// ([`AllreduceOptions::MESSAGE_REPLICATE_MAX_IN_MEMORY`]) where the
    /// hosts are emulated on one machine and MPI's one-sided calls between
    /// them are memory copies. Over TCP (Intel MPI, 2 cores, 2026-11-30), replicated calls
    /// took 0.17-0.33 of the split calls' time from 16 to 256 KiB on 2
    /// hosts of one rank, 0.06-0.12 with two ranks per host; with at most
    /// 4 pieces of a message in flight, 0.71-0.85 at 2 and 4 MiB (2 hosts
    /// of one rank), 0.53-0.63 (of two), and 0.40-0.77 at 512 KiB to 2 MiB
    /// on 4 hosts of one rank. Over shared memory (emulated hosts, MPICH)
    /// the split calls win from 1 MiB (1.3-1.9x). Unmeasured with a core
    /// per rank. Larger values of [`AllreduceOptions::replicate_max`] win.
    pub message_replicate_max: Option<usize>,
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
    /// A job of one node reduces split calls of at least this many bytes
    /// per rank in chunks that pass through a small ring of staging slots
    /// in the window, each put in, reduced and copied out while it is
    /// still in the caches; their copies into the callers' buffers go to
    /// memory (they would not stay in the caches either), with the stores
    /// of [`AllreduceOptions::stream_copies`].
    /// 0 (the default): from where the node's data outgrows the caches,
    /// a quarter of the last-level cache per rank of the node (at least
    /// 256 KiB; 2 MiB with 4 ranks and a 32 MiB L3: there pipelined calls
    /// took 15-29% less time than unpipelined ones, 40-49% less at 4 MiB,
    /// and up to 17% more at 1 MiB; see the guide's allreduce figures,
    /// docs/guide/benchmarking.md).
    /// `usize::MAX`: never.
    pub pipeline_min: usize,
    /// Bytes of one rank's part of a pipelined chunk (default 128 KiB;
    /// rounded up to a multiple of 64 bytes).
    pub pipeline_chunk: usize,
    /// Pipelining block of the ring, in bytes. 0 (the default): the
    /// engine's choice, [`AllreduceOptions::DEFAULT_BLOCK_BYTES`], or 1 MiB
    /// where the ring crosses hosts on the MPI engine.
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
    /// Whether a call puts its input into the node's window with
    /// non-temporal stores (`Some(true)`: the other ranks then read it from
    /// memory), with ordinary ones (`Some(false)`: they take it from the
    /// writer's cache), or, `None` (the default), whichever its calls have
    /// measured faster: the node's first rank times each kind, keeps the
    /// faster (by a margin of 10%) and tells the node's ranks, which all
    /// try the other kind in 4 calls of every 256. The hand-off
    /// between caches is the fast one where cores share a cache and can be
    /// several times slower across sockets, dies, or on a virtual machine
    /// for stretches of time; memory is equally fast everywhere. `None`
    /// measures calls of at least 256 KiB and gives smaller ones ordinary
    /// stores; the result is the same either way.
    ///
    /// ```
    /// use gaspi::{Allreduce, AllreduceOptions, Config, Context, ReduceOp, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let opts = AllreduceOptions { stream_inputs: Some(true), ..Default::default() };
    /// let mut ar = Allreduce::<f64>::with_options(&ctx, 0, 1 << 12, opts, Timeout::Block)?;
    /// let sum = ar.run(&vec![1.0; 1 << 12], ReduceOp::Sum, Timeout::Block)?;
    /// assert_eq!(sum.get(0), ctx.num_ranks() as f64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub stream_inputs: Option<bool>,
    /// Whether a pipelined call ([`AllreduceOptions::pipeline_min`])
    /// copies its result into the caller's buffer (`run_into`) with
    /// non-temporal stores (`Some(true)`), with ordinary ones
    /// (`Some(false)`), or, `None` (the default), whichever its calls have
    /// measured faster, as [`AllreduceOptions::stream_inputs`] (calls of at
    /// least 256 KiB; smaller ones copy with ordinary stores). The copies
    /// go to memory either way; streaming them was 10-34% faster on an AMD
    /// EPYC VM and about 10% slower on an Intel Xeon VM (see the guide's
    /// allreduce figures, docs/guide/benchmarking.md).
    ///
    /// ```
    /// use gaspi::{Allreduce, AllreduceOptions, Config, Context, ReduceOp, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let opts = AllreduceOptions { stream_copies: Some(false), ..Default::default() };
    /// let mut ar = Allreduce::<f64>::with_options(&ctx, 0, 1 << 12, opts, Timeout::Block)?;
    /// let mut sum = vec![0.0; 1 << 12];
    /// ar.run_into(&vec![1.0; 1 << 12], &mut sum, ReduceOp::Sum, Timeout::Block)?;
    /// assert_eq!(sum[0], ctx.num_ranks() as f64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub stream_copies: Option<bool>,
}

impl AllreduceOptions {
    /// The ring block chosen for `block_bytes: 0` inside a host and on the
    /// native and GPI-2 engines: 128 KiB.
    pub const DEFAULT_BLOCK_BYTES: usize = 128 << 10;

    /// [`AllreduceOptions::message_replicate_max`]'s default between
    /// hosts on a network, for nodes of more than one rank.
    ///
    /// ```
    /// assert_eq!(gaspi::AllreduceOptions::MESSAGE_REPLICATE_MAX, 6 << 20);
    /// ```
    pub const MESSAGE_REPLICATE_MAX: usize = 6 << 20;

    /// [`AllreduceOptions::message_replicate_max`]'s default between
    /// hosts emulated on one machine (MPI's one-sided calls are memory
    /// copies there, and split calls win from 1 MiB).
    ///
    /// ```
    /// assert_eq!(gaspi::AllreduceOptions::MESSAGE_REPLICATE_MAX_IN_MEMORY, 256 << 10);
    /// ```
    pub const MESSAGE_REPLICATE_MAX_IN_MEMORY: usize = 256 << 10;

    /// The smallest pipelined call on a node of `ranks` ranks and a
    /// last-level cache of `cache` bytes: [`AllreduceOptions::pipeline_min`],
    /// or where it is 0, `cache / (4 * ranks)` and at least 256 KiB.
    pub(super) fn pipeline_min_for(&self, ranks: usize, cache: usize) -> usize {
        match self.pipeline_min {
            0 => (cache / 4 / ranks.max(1)).max(256 << 10),
            b => b,
        }
    }
}

impl AllreduceOptions {
    /// The options a node of `slots` ranks runs with: where its ranks
    /// share the reduction (`shared`), the thresholds for ranks that share
    /// cores; else [`AllreduceOptions::node_replicate_max`] within
    /// [`AllreduceOptions::node_replicate_inputs`]. `node_partials`: the
    /// direct exchange sends one partial per node.
    pub(super) fn for_node(
        &self,
        slots: usize,
        shared: bool,
        (node_partials, direct_max): (bool, usize),
    ) -> AllreduceOptions {
        AllreduceOptions {
            node_replicate_max: if shared {
                self.shared_node_replicate_max
            } else {
                self.node_replicate_max
                    .min(self.node_replicate_inputs / slots.max(1))
            },
            // Replicated calls of node partials as far as they are
            // exchanged directly.
            replicate_max: if node_partials {
                self.shared_replicate_max
                    .min(direct_max.max(self.replicate_max))
            } else {
                self.replicate_max
            },
            ..*self
        }
    }
}

impl Default for AllreduceOptions {
    fn default() -> AllreduceOptions {
        AllreduceOptions {
            algorithm: AllreduceAlgorithm::Auto,
            replicate_max: 4 << 10,
            node_replicate_max: 2 << 10,
            node_replicate_inputs: 4 << 10,
            shared_replicate_max: 32 << 10,
            shared_node_replicate_max: 8 << 10,
            message_replicate_max: None,
            fraction_min: 1 << 10,
            ring_min: 128 << 10,
            pipeline_min: 0,
            pipeline_chunk: 128 << 10,
            block_bytes: 0,
            queue: 0,
            share_reduction: None,
            stream_inputs: None,
            stream_copies: None,
        }
    }
}

/// What runs between nodes in one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Inter {
    Direct,
    Dissemination,
    Ring,
}

/// How a call of some size runs: replicated or split, and between nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Choice {
    pub(super) replicated: bool,
    pub(super) inter: Inter,
}

/// The most nodes among which the automatic algorithm exchanges node
/// partials directly where the dissemination would send fewer messages
/// ([`auto_direct_max`]).
const PARTIALS_DIRECT_MAX_NODES: usize = 16;

/// The most bytes of node partials one node sends in such a direct
/// exchange (its partial to each other node).
const PARTIALS_DIRECT_BYTES: usize = 64 << 10;

/// The largest call, in bytes, that the automatic algorithm exchanges
/// directly on `nodes` nodes, where the dissemination sends
/// `dis_messages` messages per participant: any call where a node sends
/// no more messages directly than the dissemination would. Where the
/// ranks share cores (`shared`: the direct exchange then sends node
/// partials, one message per pair of nodes), also on up to
/// [`PARTIALS_DIRECT_MAX_NODES`] nodes, the calls whose partials come to
/// at most [`PARTIALS_DIRECT_BYTES`] per node: one round of messages
/// instead of `log2(nodes)` rounds, each a hand-off between ranks that
/// wait for their turn on a core. Measured on 2 cores, nodes of 2 ranks
/// (2026-11-29, `docs/guide/benchmarking.md`, "Node partials exchanged
/// directly on up to 16 nodes"): new / old time at 8 bytes 0.54, 0.51 and
/// 0.49 on 4, 8 and 16 nodes, at 4 KiB 0.53, 0.58 and 0.88; beyond the
/// budget the direct exchange lost (8 KiB on 16 nodes 1.32, 32 KiB on 8
/// nodes 1.67 times the dissemination's time).
pub(super) fn auto_direct_max(nodes: usize, dis_messages: usize, shared: bool) -> usize {
    if nodes <= 1 || nodes - 1 <= dis_messages {
        usize::MAX
    } else if shared && nodes <= PARTIALS_DIRECT_MAX_NODES {
        PARTIALS_DIRECT_BYTES / (nodes - 1)
    } else {
        0
    }
}

/// The choice for a call of `bytes` bytes on `nodes` nodes (see the module
/// documentation); `direct_max` is the largest call the automatic
/// algorithm exchanges directly ([`auto_direct_max`]).
pub(super) fn choose(
    opts: &AllreduceOptions,
    bytes: usize,
    nodes: usize,
    direct_max: usize,
) -> Choice {
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
        A::Auto if small && bytes <= direct_max => (true, Inter::Direct),
        A::Auto if !small && bytes >= opts.ring_min && nodes > 1 => (false, Inter::Ring),
        _ => (small, Inter::Dissemination),
    };
    Choice { replicated, inter }
}

#[cfg(test)]
mod tests {
    use super::{AllreduceOptions, auto_direct_max};

    #[test]
    fn node_partials_go_directly_on_up_to_16_nodes_within_their_budget() {
        // Where the dissemination sends as many messages, any size.
        assert_eq!(auto_direct_max(1, 0, false), usize::MAX);
        assert_eq!(auto_direct_max(3, 2, false), usize::MAX);
        assert_eq!(auto_direct_max(3, 2, true), usize::MAX);
        // Beyond, only node partials, and only as far as their budget.
        assert_eq!(auto_direct_max(4, 2, false), 0);
        assert_eq!(auto_direct_max(4, 2, true), (64 << 10) / 3);
        assert_eq!(auto_direct_max(16, 4, true), (64 << 10) / 15);
        assert_eq!(auto_direct_max(17, 5, true), 0);
        // The replicated calls of node partials follow the budget.
        let d = AllreduceOptions::default();
        let rm = |direct_max| d.for_node(2, true, (true, direct_max)).replicate_max;
        assert_eq!(rm(usize::MAX), 32 << 10);
        assert_eq!(rm((64 << 10) / 3), (64 << 10) / 3);
        assert_eq!(rm((64 << 10) / 31), 4 << 10);
    }

    #[test]
    fn replicated_calls_of_one_node_shrink_with_its_ranks() {
        let d = AllreduceOptions::default();
        let max = |slots, shared| d.for_node(slots, shared, (false, 0)).node_replicate_max;
        assert_eq!(max(1, false), 2 << 10);
        assert_eq!(max(2, false), 2 << 10);
        assert_eq!(max(4, false), 1 << 10);
        assert_eq!(max(8, false), 512);
        assert_eq!(max(16, false), 256);
        // Ranks sharing the reduction read the inputs once per node.
        assert_eq!(max(16, true), 8 << 10);
        let set = AllreduceOptions {
            node_replicate_inputs: usize::MAX,
            ..d
        };
        assert_eq!(
            set.for_node(16, false, (false, 0)).node_replicate_max,
            2 << 10
        );
        assert_eq!(
            d.for_node(4, true, (true, usize::MAX)).replicate_max,
            32 << 10
        );
        assert_eq!(d.for_node(4, true, (false, 0)).replicate_max, 4 << 10);
    }
}
