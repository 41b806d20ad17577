//! How the GASPI application kernels (`stencil/`, `gups/`) hold their
//! memory: flat, a segment per rank, as a flat-MPI code holds its
//! buffers; or node-shared, one window per node that all its ranks map.

use gaspi::{Alloc, Context, Error, GroupId, SegmentId, SegmentView, Timeout};

/// Flat (a segment per rank) or node-shared (a window per node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    Flat,
    Node,
}

impl Sharing {
    /// Collectively make segment `seg` of `bytes` bytes: this rank's own
    /// (flat) or its node's window (node-shared); a view of all of it.
    pub fn create<T: bytemuck::Pod>(
        self,
        ctx: &Context,
        seg: SegmentId,
        bytes: usize,
    ) -> Result<SegmentView<T>, Error> {
        let b = Timeout::Block;
        match self {
            Sharing::Flat => ctx.segment_create(seg, bytes, GroupId::ALL, b, Alloc::Initialized)?,
            Sharing::Node => drop(ctx.window_create(seg, bytes, GroupId::ALL, b)?),
        }
        ctx.segment::<T>(seg)
    }
}
