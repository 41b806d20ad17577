//! The node reduction's window: where each of its areas lies.

/// Byte offsets of the areas of the window (each 64-byte aligned).
#[derive(Clone, Copy, Debug)]
pub(super) struct Areas {
    /// Input slots: `[parity][local rank][cap]`.
    pub(super) inputs: usize,
    pub(super) input_parities: usize,
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
    /// Inputs of other nodes' ranks (direct): `[parity][rank][direct_cap]`.
    pub(super) direct: usize,
    pub(super) direct_cap: usize,
    /// Bytes of a column space: `slots * cap` (replicated) or `cap`.
    pub(super) cols: usize,
    /// Largest message, bytes.
    pub(super) cap: usize,
    /// Ring block ids available (each block has two).
    pub(super) ring_blocks: usize,
    /// First notification ids of the ring and the direct exchange.
    pub(super) ring_ids: u32,
    pub(super) direct_ids: u32,
}
