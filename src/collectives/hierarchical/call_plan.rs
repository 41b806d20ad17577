//! What one call of a given size does: its instances (element ranges
//! reduced over the node, then with the same instance of every node),
//! which of them this rank runs, and their ring blocks.

use super::options::Choice;
use std::ops::Range;

/// Element range `r` cut into `parts` near-equal parts: part `part`.
/// Borders fall on cache lines where the element size allows.
pub(super) fn split_range(r: Range<usize>, parts: usize, part: usize, elem: usize) -> Range<usize> {
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
pub(super) struct Instance {
    pub(super) elems: Range<usize>,
    /// Byte offset of its column within a column space.
    pub(super) col: usize,
}

/// What a call of a given size does.
#[derive(Clone, Debug)]
pub(super) struct CallPlan {
    pub(super) len: usize,
    pub(super) elem: usize,
    pub(super) choice: Choice,
    pub(super) instances: Vec<Instance>,
    /// Instances this rank runs, ascending.
    pub(super) mine: Vec<usize>,
    /// Per instance of `mine`: its ring plan (empty without ring).
    pub(super) rings: Vec<RingPlan>,
    /// The node partials cross hosts as keyed messages between the nodes'
    /// first ranks (`NodeReduce::exchange_partials`), not as notified
    /// writes: a direct, replicated call.
    pub(super) messages: bool,
    /// Nodes of one rank each reduce-scatter and gather their inputs as
    /// keyed messages (`NodeReduce::scatter_partials`): a large call of
    /// [`CallPlan::messages`].
    pub(super) scattered: bool,
}

/// The smallest call, in bytes, that nodes of one rank each
/// reduce-scatter and gather ([`CallPlan::scattered`]) rather than send
/// each other all of it (`scatter.rs`).
pub(super) const SCATTER_MIN_BYTES: usize = 1 << 20;

/// How far a scattered call (`NodeReduce::scatter_partials`) got, to
/// resume after a timeout: what went whole to every other node, and, one
/// bit per node, whose messages were taken whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ScatterCursor {
    /// Every other node has been sent its chunk of this node's input.
    pub(super) chunks_sent: bool,
    /// This node's chunk of every other node's input, taken.
    pub(super) mine_from: u64,
    /// This node's chunk of the result is reduced (into the shared result).
    pub(super) reduced: bool,
    /// The reduced chunk went whole to every other node.
    pub(super) result_sent: bool,
    /// Every other node's reduced chunk, taken into the shared result.
    pub(super) theirs_from: u64,
}

/// How far a pipelined call got (to resume after a timeout): chunks put
/// in, reduced (this rank's fraction) and copied out, counted from the
/// call's first chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct PipeCursor {
    pub(super) put: usize,
    pub(super) reduced: usize,
    pub(super) copied: usize,
}

/// One receive event of a ring instance: block `elems` (global id `g`)
/// arrives; `rs_step`: the reduce-scatter step (`1..nodes`) or `None` in the
/// allgather; `forward`: whether to pass it on.
#[derive(Clone, Debug)]
pub(super) struct RingEvent {
    pub(super) elems: Range<usize>,
    pub(super) id: u32,
    pub(super) kind: RingKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RingKind {
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
pub(super) struct RingPlan {
    /// Blocks of this node's own chunk: sent first.
    pub(super) first: Vec<(Range<usize>, u32)>,
    pub(super) events: Vec<RingEvent>,
}
