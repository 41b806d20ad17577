//! The shape of a job as the collectives' plans see it.

use crate::context::Context;

/// The shape of the job for a collective: `nodes` nodes of consecutive
/// ranks, `ppn` per node (the last may have fewer).
///
/// # Panics
/// [`Layout::nodes`] and [`Layout::node_of`] divide by `ppn`: a layout
/// with `ppn` 0 panics there (a job always has at least one rank per node;
/// [`AlltoallvPlan::new`](crate::plan::AlltoallvPlan::new) refuses such a
/// layout with an error).
///
/// ```
/// use gaspi::plan::Layout;
/// // 7 ranks, 3 per node: nodes of 3, 3 and 1.
/// let l = Layout { ranks: 7, ppn: 3 };
/// assert_eq!(l.nodes(), 3);
/// assert_eq!(l.node_ranks(2), 6..7);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Number of ranks.
    pub ranks: usize,
    /// Ranks per node.
    pub ppn: usize,
}

impl Layout {
    /// The layout of `ctx`'s job.
    pub(crate) fn of(ctx: &Context) -> Layout {
        Layout {
            ranks: ctx.num_ranks() as usize,
            ppn: ctx.ranks_per_node(),
        }
    }

    /// Number of nodes.
    ///
    /// ```
    /// assert_eq!(gaspi::plan::Layout { ranks: 8, ppn: 4 }.nodes(), 2);
    /// ```
    pub fn nodes(&self) -> usize {
        self.ranks.div_ceil(self.ppn)
    }

    /// The ranks of `node`.
    ///
    /// ```
    /// let layout = gaspi::plan::Layout { ranks: 6, ppn: 2 };
    /// assert_eq!(layout.node_ranks(1), 2..4);
    /// assert!(layout.node_ranks(usize::MAX).is_empty()); // no such node
    /// ```
    pub fn node_ranks(&self, node: usize) -> std::ops::Range<usize> {
        let first = node.saturating_mul(self.ppn).min(self.ranks);
        first..first.saturating_add(self.ppn).min(self.ranks)
    }

    /// The node of `rank`.
    ///
    /// ```
    /// assert_eq!(gaspi::plan::Layout { ranks: 6, ppn: 2 }.node_of(5), 2);
    /// ```
    pub fn node_of(&self, rank: usize) -> usize {
        rank / self.ppn
    }
}
