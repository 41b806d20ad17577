//! The node reduction's window: where each of its areas lies.

/// Staging slots per local rank of the pipelined calls: how many chunks
/// the puts may run ahead of the slowest reduction.
pub(super) const STAGE_SLOTS: usize = 4;

/// Bytes between the starts of two local ranks' input slots or result
/// columns: a multiple of 128, so that no two ranks write into one pair of
/// cache lines (Intel cores fetch lines in 128-byte pairs). Packed, 16
/// ranks' 8-byte results shared two lines, and a replicated call's result
/// left in the window took twice as long as one reduced into the caller's
/// buffer with a core per rank.
pub(super) fn rank_stride(bytes: usize) -> usize {
    bytes.next_multiple_of(RANK_ALIGN)
}

/// What [`rank_stride`] rounds to.
pub(super) const RANK_ALIGN: usize = 128;

/// Byte offsets of the areas of the window (each 64-byte aligned).
#[derive(Clone, Copy, Debug)]
pub(super) struct Areas {
    /// Input slots: `[parity][local rank][input_cap]`.
    pub(super) inputs: usize,
    pub(super) input_parities: usize,
    /// Bytes of an input slot: the largest call that is not pipelined
    /// ([`rank_stride`]).
    pub(super) input_cap: usize,
    /// Results, one column space wide.
    pub(super) result: usize,
    /// The node's shared result of a replicated call that one local rank
    /// reduces for all (`NodeReduce::share_reduction`): `[cap]` bytes,
    /// or none with one rank per node.
    pub(super) shared: usize,
    /// Dissemination values after steps `0..steps`: `[step][cols]`.
    pub(super) run: usize,
    /// Dissemination receive slots: `[parity][slot][cols]`.
    pub(super) recv: usize,
    /// Ring receive area: `[cap]`.
    pub(super) ring: usize,
    /// Inputs of other nodes' ranks, or their node partials (direct):
    /// `[parity][entry][direct_cap]`.
    pub(super) direct: usize,
    /// Sets of entries of the direct area: 2, alternating by call parity
    /// (a node may write the next call's partial into another node's
    /// entry while that node still reads this call's), or 1 on nodes of
    /// one rank whose every call crosses as keyed messages: the receiver
    /// posts every message's take itself, only once it finished the call
    /// before, and a call ends only once its sends are complete, so the
    /// next call never finds its entries read or sent from.
    pub(super) direct_parities: usize,
    pub(super) direct_cap: usize,
    /// Entries of a parity: one per node where every direct call exchanges
    /// node partials, else one per rank.
    pub(super) direct_entries: usize,
    /// Bytes of a column space: `slots * rank_stride(cap)` (replicated,
    /// one column per local rank) or `cap`.
    pub(super) cols: usize,
    /// Staging slots of the pipelined calls
    /// (`NodeReduce::pipeline`): `[STAGE_SLOTS][local rank][stage_slot]`.
    pub(super) stage: usize,
    /// Bytes of a staging slot (a multiple of 64), or 0: no call is
    /// pipelined.
    pub(super) stage_slot: usize,
    /// Largest message, bytes.
    pub(super) cap: usize,
    /// Ring block ids available (each block has two).
    pub(super) ring_blocks: usize,
    /// First notification ids of the ring and the direct exchange.
    pub(super) ring_ids: u32,
    pub(super) direct_ids: u32,
}
