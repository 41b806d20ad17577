//! The plans of the shared-window collectives, as pure computations: the
//! block table of the pipelined-ring allgatherv with its node-local load
//! balancing (Al Ahad et al. 2018), the dissemination schedule with partial
//! reductions, and the node-aggregated alltoallv ([`AlltoallvPlan`]).
//! The collectives execute exactly these plans; the cost models
//! (`gaspi-bench model`-style estimates, traffic assertions in the tests)
//! are computed from them too.

use std::fmt::Write as _;

pub use super::alltoallv_plan::{AlltoallvPlan, Chunk};
pub use super::layout::Layout;

/// One block of an allgatherv: `len` elements of rank `source`'s
/// contribution, at element `offset` of the result. Its id is its index in
/// [`AllgathervPlan::blocks`] and its notification id.
///
/// ```
/// use gaspi::plan::{AllgathervPlan, Block, Layout};
/// // Rank 0 contributes 3 elements, in blocks of at most 2.
/// let plan = AllgathervPlan::new(Layout { ranks: 2, ppn: 1 }, &[3, 1], &[0, 3], 2, 1024);
/// assert_eq!(plan.blocks[1], Block { source: 0, offset: 2, len: 1 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// The rank whose data it is.
    pub source: usize,
    /// First element in the result.
    pub offset: usize,
    /// Number of elements (at least one).
    pub len: usize,
}

/// Which of its node's blocks a rank writes to the next node: `count`
/// blocks from index `first` of the node's block list.
///
/// ```
/// use gaspi::plan::{AllgathervPlan, Layout, Share};
/// // One node of 2 ranks, 3 blocks: local rank 0 writes two, rank 1 one.
/// let plan = AllgathervPlan::new(Layout { ranks: 2, ppn: 2 }, &[2, 1], &[0, 2], 1, 1024);
/// assert_eq!(plan.shares, vec![Share { first: 0, count: 2 }, Share { first: 2, count: 1 }]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// Index of the first block within the node's blocks.
    pub first: usize,
    /// Number of blocks.
    pub count: usize,
}

/// The block table of an allgatherv (Al Ahad et al. 2018, section II, formulas 3-4,
/// listings 1-3).
///
/// Contributions are cut into blocks of at most `block_elems` elements
/// (`mSize`); block ids are global and contiguous, node by node and, in a
/// node, local rank by local rank. Each node's blocks are then shared out
/// evenly among its ranks: local rank `l` of `L` writes
/// `(T + L - l - 1) / L` of the node's `T` blocks, starting after the
/// shares of the lower local ranks. No block mixes two ranks' data.
///
/// ```
/// use gaspi::plan::{AllgathervPlan, Layout};
/// let plan = AllgathervPlan::new(Layout { ranks: 4, ppn: 2 }, &[4, 3, 2, 1], &[0, 4, 7, 9], 2, 1024);
/// assert_eq!(plan.total_blocks(), 2 + 2 + 1 + 1);
/// // Node 0 holds blocks 0..4 and shares them out evenly.
/// assert_eq!((plan.sends(0), plan.sends(1)), (0..2, 2..4));
/// print!("{}", plan.table());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllgathervPlan {
    /// The job's shape.
    pub layout: Layout,
    /// Elements contributed per rank.
    pub counts: Vec<usize>,
    /// Where each rank's contribution goes in the result.
    pub displs: Vec<usize>,
    /// `mSize`: the most elements in a block.
    pub block_elems: usize,
    /// All blocks, by id.
    pub blocks: Vec<Block>,
    /// Per rank: its first block id (index `ranks`: the total).
    pub first_block: Vec<usize>,
    /// Per node: its first block id (index `nodes`: the total).
    pub node_first: Vec<usize>,
    /// Per rank: the share of its node's blocks it writes.
    pub shares: Vec<Share>,
}

/// Check an allgatherv layout of `counts[r]` elements of `elem` bytes from
/// rank `r` at element `displs[r]`, and return the result's length in
/// elements (the furthest end). Every end and byte size is checked
/// ([`Error::SizeOverflow`](crate::Error::SizeOverflow)), and contributions
/// must not overlap ([`Error::InvalidArgument`](crate::Error::InvalidArgument)
/// naming the two ranks): GASPI and MPI leave overlapping receive areas
/// undefined, so this library refuses them. Empty contributions may lie
/// anywhere.
///
/// ```
/// use gaspi::plan::check_extents;
/// assert_eq!(check_extents(&[2, 3], &[3, 0], 8).unwrap(), 5);
/// assert!(check_extents(&[2, 3], &[0, 1], 8).is_err()); // overlap
/// assert!(check_extents(&[usize::MAX, 1], &[0, 0], 1).is_err()); // overflow
/// ```
pub fn check_extents(
    counts: &[usize],
    displs: &[usize],
    elem: usize,
) -> crate::error::Result<usize> {
    use crate::error::Error;
    use crate::extent;
    if counts.len() != displs.len() {
        return Err(Error::InvalidArgument(format!(
            "{} counts but {} displacements",
            counts.len(),
            displs.len()
        )));
    }
    let mut spans = Vec::with_capacity(counts.len());
    for (r, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        let end = extent::end("displacement + count", d, c)?;
        extent::mul("(displacement + count) * element size", end, elem.max(1))?;
        if c > 0 {
            spans.push((d, end, r));
        }
    }
    extent::mul(
        "sum of counts * element size",
        extent::sum("sum of counts", counts.iter().copied())?,
        elem.max(1),
    )?;
    spans.sort_unstable();
    if let Some(w) = spans.windows(2).find(|w| w[1].0 < w[0].1) {
        let ((d0, e0, r0), (d1, e1, r1)) = (w[0], w[1]);
        return Err(Error::InvalidArgument(format!(
            "contributions overlap: rank {r0} at elements {d0}..{e0} and rank {r1} at {d1}..{e1}"
        )));
    }
    Ok(spans.iter().map(|s| s.1).max().unwrap_or(0))
}

/// Where contributions of `counts` elements go when packed in rank order:
/// the exclusive prefix sums (MPI's `displs` for a plain allgatherv).
///
/// ```
/// assert_eq!(gaspi::plan::displacements(&[3, 0, 2]), vec![0, 3, 3]);
/// ```
pub fn displacements(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

/// Formula 3: the blocks of a contribution of `count` elements.
fn nblock(count: usize, block_elems: usize) -> usize {
    count.div_ceil(block_elems)
}

impl AllgathervPlan {
    /// The plan for contributions `counts[r]` placed at `displs[r]`,
    /// with blocks of about `block_elems` elements, enlarged if needed so
    /// that there are at most `max_blocks` blocks (the notification ids
    /// available).
    ///
    /// # Panics
    /// If `counts` or `displs` does not have one entry per rank of
    /// `layout`, or their sums overflow: check them first with
    /// [`check_extents`].
    ///
    /// ```
    /// use gaspi::plan::{AllgathervPlan, Layout, displacements};
    /// let counts = [1000, 1000];
    /// // Only 12 ids: mSize grows so that the blocks fit.
    /// let plan = AllgathervPlan::new(Layout { ranks: 2, ppn: 1 }, &counts, &displacements(&counts), 10, 12);
    /// assert!(plan.total_blocks() <= 12);
    /// assert!(plan.block_elems >= 200);
    /// ```
    pub fn new(
        layout: Layout,
        counts: &[usize],
        displs: &[usize],
        block_elems: usize,
        max_blocks: usize,
    ) -> AllgathervPlan {
        assert_eq!(counts.len(), layout.ranks);
        assert_eq!(displs.len(), layout.ranks);
        let total: usize = counts.iter().sum();
        // Choose mSize from the total: enough that the blocks fit the ids
        // (each rank's last block may be partial: at most one per rank more).
        let room = max_blocks.saturating_sub(layout.ranks).max(1);
        let block_elems = block_elems.max(total.div_ceil(room)).max(1);

        // Load balance, part 1 (formula 3, listing 1): blocks per rank and
        // the first block id of each rank, node-major.
        let mut first_block = Vec::with_capacity(layout.ranks + 1);
        let mut next = 0;
        for &c in counts {
            first_block.push(next);
            next += nblock(c, block_elems);
        }
        first_block.push(next);
        let node_first: Vec<usize> = (0..=layout.nodes())
            .map(|k| first_block[layout.node_ranks(k).start.min(layout.ranks)])
            .collect();

        // Part 2: the block descriptors (source, id, size, offset).
        let mut blocks = Vec::with_capacity(next);
        for (r, (&c, &d)) in counts.iter().zip(displs).enumerate() {
            for j in 0..nblock(c, block_elems) {
                blocks.push(Block {
                    source: r,
                    offset: d + j * block_elems,
                    len: block_elems.min(c - j * block_elems),
                });
            }
        }

        // Part 3 (formula 4, listing 3): each local rank's share.
        let mut shares = Vec::with_capacity(layout.ranks);
        for k in 0..layout.nodes() {
            let local = layout.node_ranks(k).len();
            let node_blocks = node_first[k + 1] - node_first[k];
            let mut first = 0;
            for l in 0..local {
                let count = (node_blocks + local - l - 1) / local;
                shares.push(Share { first, count });
                first += count;
            }
        }
        AllgathervPlan {
            layout,
            counts: counts.to_vec(),
            displs: displs.to_vec(),
            block_elems,
            blocks,
            first_block,
            node_first,
            shares,
        }
    }

    /// Number of blocks.
    ///
    /// ```
    /// use gaspi::plan::{AllgathervPlan, Layout};
    /// let plan = AllgathervPlan::new(Layout { ranks: 2, ppn: 1 }, &[3, 1], &[0, 3], 2, 1024);
    /// assert_eq!(plan.total_blocks(), 3);
    /// ```
    pub fn total_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// The block ids `rank` writes to the next node.
    ///
    /// ```
    /// use gaspi::plan::{AllgathervPlan, Layout};
    /// let plan = AllgathervPlan::new(Layout { ranks: 2, ppn: 1 }, &[3, 1], &[0, 3], 2, 1024);
    /// assert_eq!((plan.sends(0), plan.sends(1)), (0..2, 2..3));
    /// ```
    pub fn sends(&self, rank: usize) -> std::ops::Range<usize> {
        let base = self.node_first[self.layout.node_of(rank)];
        let s = self.shares[rank];
        base + s.first..base + s.first + s.count
    }

    /// Blocks a node receives from other nodes.
    ///
    /// ```
    /// use gaspi::plan::{AllgathervPlan, Layout};
    /// let plan = AllgathervPlan::new(Layout { ranks: 2, ppn: 1 }, &[3, 1], &[0, 3], 2, 1024);
    /// assert_eq!((plan.received_by(0), plan.received_by(1)), (1, 2));
    /// ```
    pub fn received_by(&self, node: usize) -> usize {
        self.total_blocks() - (self.node_first[node + 1] - self.node_first[node])
    }

    /// Whether a node that received block `id` passes it on: unless the
    /// next node is the block's own (then every node has it).
    ///
    /// ```
    /// use gaspi::plan::{AllgathervPlan, Layout};
    /// // Three nodes of one rank, one block each.
    /// let plan = AllgathervPlan::new(Layout { ranks: 3, ppn: 1 }, &[1, 1, 1], &[0, 1, 2], 1, 1024);
    /// assert!(plan.forwards(1, 0)); // node 1 passes node 0's block on to node 2
    /// assert!(!plan.forwards(2, 0)); // node 2's next is node 0, the block's own
    /// ```
    pub fn forwards(&self, node: usize, id: usize) -> bool {
        let nodes = self.layout.nodes();
        (node + 1) % nodes != self.layout.node_of(self.blocks[id].source)
    }

    /// Cost model: block messages that cross a node boundary in one call:
    /// every block crosses `nodes - 1` boundaries once.
    ///
    /// ```
    /// use gaspi::plan::{AllgathervPlan, Layout};
    /// let plan = AllgathervPlan::new(Layout { ranks: 3, ppn: 1 }, &[1, 1, 1], &[0, 1, 2], 1, 1024);
    /// assert_eq!(plan.inter_node_messages(), 3 * 2);
    /// ```
    pub fn inter_node_messages(&self) -> usize {
        self.total_blocks() * (self.layout.nodes() - 1)
    }

    /// The block table as text, for review and snapshot tests.
    ///
    /// ```
    /// use gaspi::plan::{AllgathervPlan, Layout};
    /// let plan = AllgathervPlan::new(Layout { ranks: 2, ppn: 1 }, &[3, 1], &[0, 3], 2, 1024);
    /// assert!(plan.table().starts_with("2 ranks, 1 per node, 2 nodes; mSize 2 elements; 3 blocks"));
    /// ```
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} ranks, {} per node, {} nodes; mSize {} elements; {} blocks",
            self.layout.ranks,
            self.layout.ppn,
            self.layout.nodes(),
            self.block_elems,
            self.total_blocks()
        );
        let _ = writeln!(s, "block  source  offset  len");
        for (id, b) in self.blocks.iter().enumerate() {
            let _ = writeln!(s, "{id:>5}  {:>6}  {:>6}  {:>3}", b.source, b.offset, b.len);
        }
        let _ = writeln!(s, "rank  node  local  first-block  writes-blocks");
        for r in 0..self.layout.ranks {
            let node = self.layout.node_of(r);
            let sends = self.sends(r);
            let _ = writeln!(
                s,
                "{r:>4}  {node:>4}  {:>5}  {:>11}  {:?}",
                r - self.layout.node_ranks(node).start,
                self.first_block[r],
                sends
            );
        }
        s
    }
}

/// Children of relative position `pos` in a binomial tree of `p`
/// positions rooted at 0, largest subtree first (the RMA broadcast's tree,
/// Paznikov 2023; the cost model walks the same tree).
///
/// ```
/// use gaspi::plan::binomial_children;
/// assert_eq!(binomial_children(0, 8), vec![4, 2, 1]);
/// assert_eq!(binomial_children(4, 8), vec![6, 5]);
/// assert!(binomial_children(7, 8).is_empty());
/// ```
pub fn binomial_children(pos: usize, p: usize) -> Vec<usize> {
    let mut mask = 1;
    while mask < p && pos & mask == 0 {
        mask <<= 1;
    }
    std::iter::successors(Some(mask >> 1), |m| Some(m >> 1))
        .take_while(|&m| m > 0)
        .map(|m| pos + m)
        .filter(|&c| c < p)
        .collect()
}

/// One message of a dissemination: at `step`, `from` sends to `to` the
/// reduction of `span` consecutive inputs ending at `from` (`partial`:
/// sent out of band, to be combined after the regular steps).
///
/// ```
/// use gaspi::plan::{Dissemination, Message};
/// let first = Dissemination::new(4).messages(1)[0];
/// assert_eq!(first, Message { step: 0, from: 1, to: 2, span: 1, partial: false });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// The step after which the value is available at the sender (0: its
    /// own input).
    pub step: u32,
    /// Sender.
    pub from: usize,
    /// Receiver.
    pub to: usize,
    /// How many inputs the sent value reduces.
    pub span: usize,
    /// A partial reduction for `n` that is not a power of two.
    pub partial: bool,
}

/// The dissemination allreduce of Al Ahad et al. 2018, section III, over `n`
/// participants.
///
/// With `n = 2^l + sum c_j 2^j` (`j < l`), the regular dissemination runs
/// `l` steps: at step `k` participant `i` sends its running reduction (of
/// `2^k` inputs ending at `i`) to `i + 2^k` and receives from `i - 2^k`.
/// For every `j < l` with `c_j = 1`, the reduction of `2^j` inputs that `i`
/// holds after step `j` is also sent, at once and out of band, to
/// `i + D_j` with `D_j = sum_{k=j+1}^{l} c_k 2^k`; the receiver combines
/// these partials after its `l` steps, which completes its `n` inputs.
///
/// ```
/// use gaspi::plan::Dissemination;
/// // 7 = 4 + 2 + 1: two regular steps, partials of 2 inputs (D = 4) and of 1 (D = 6).
/// let d = Dissemination::new(7);
/// assert_eq!((d.steps, d.partials.clone()), (2, vec![(1, 4), (0, 6)]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dissemination {
    /// Participants.
    pub n: usize,
    /// Regular steps: `floor(log2 n)`.
    pub steps: u32,
    /// The `j` with `c_j = 1`, `j < steps`, in decreasing order, each with
    /// its distance `D_j`.
    pub partials: Vec<(u32, usize)>,
}

impl Dissemination {
    /// The schedule for `n >= 1` participants.
    ///
    /// ```
    /// use gaspi::plan::Dissemination;
    /// let d = Dissemination::new(8);
    /// assert_eq!(d.steps, 3);
    /// assert!(d.partials.is_empty());
    /// ```
    pub fn new(n: usize) -> Dissemination {
        assert!(n >= 1);
        let steps = usize::BITS - 1 - n.leading_zeros();
        let mut partials = Vec::new();
        let mut distance = 1usize << steps;
        for j in (0..steps).rev() {
            if n & (1 << j) != 0 {
                partials.push((j, distance));
                distance += 1 << j;
            }
        }
        Dissemination { n, steps, partials }
    }

    /// Every message of one allreduce, in the order a participant issues
    /// them: partials when their value is ready, regular sends by step.
    ///
    /// ```
    /// use gaspi::plan::Dissemination;
    /// // Participant 0 of 3 (= 2 + 1): its own input to 2 at once (partial,
    /// // D_0 = 2), and step 0 to 1.
    /// let to: Vec<(usize, bool)> = Dissemination::new(3).messages(0).iter().map(|m| (m.to, m.partial)).collect();
    /// assert_eq!(to, vec![(2, true), (1, false)]);
    /// ```
    pub fn messages(&self, from: usize) -> Vec<Message> {
        let n = self.n;
        let mut out = Vec::new();
        for k in 0..=self.steps {
            for &(j, d) in &self.partials {
                if j == k {
                    out.push(Message {
                        step: j,
                        from,
                        to: (from + d) % n,
                        span: 1 << j,
                        partial: true,
                    });
                }
            }
            if k < self.steps {
                out.push(Message {
                    step: k,
                    from,
                    to: (from + (1 << k)) % n,
                    span: 1 << k,
                    partial: false,
                });
            }
        }
        out
    }

    /// Messages per allreduce and participant (cost model).
    ///
    /// ```
    /// use gaspi::plan::Dissemination;
    /// assert_eq!(Dissemination::new(11).messages_per_participant(), 3 + 2);
    /// ```
    pub fn messages_per_participant(&self) -> usize {
        self.steps as usize + self.partials.len()
    }

    /// The schedule as text, for review and snapshot tests.
    ///
    /// ```
    /// let s = gaspi::plan::Dissemination::new(3).schedule();
    /// assert!(s.contains("partial 0: 0 -> 2 reduction of inputs [0]"), "{s}");
    /// ```
    pub fn schedule(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "n = {}: {} regular steps (2^{} = {}); partials {:?} (step j, distance D_j)",
            self.n,
            self.steps,
            self.steps,
            1usize << self.steps,
            self.partials
        );
        for i in 0..self.n {
            for m in self.messages(i) {
                let kind = if m.partial { "partial" } else { "step" };
                let _ = writeln!(
                    s,
                    "{kind:>7} {}: {} -> {} reduction of inputs {:?}",
                    m.step,
                    m.from,
                    m.to,
                    (0..m.span)
                        .map(|t| (m.from + self.n - t) % self.n)
                        .rev()
                        .collect::<Vec<_>>()
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dissemination_covers_every_input_exactly_once() {
        for n in 1..=40 {
            let d = Dissemination::new(n);
            // Simulate: each participant's set of inputs.
            let mut held: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
            let mut after_step: Vec<Vec<Vec<usize>>> = vec![held.clone()];
            for k in 0..d.steps {
                let prev = held.clone();
                for (i, h) in held.iter_mut().enumerate() {
                    let from = (i + n - (1 << k)) % n;
                    h.extend(prev[from].iter().copied());
                }
                after_step.push(held.clone());
            }
            for &(j, dist) in &d.partials {
                for (i, h) in held.iter_mut().enumerate() {
                    let from = (i + n - dist) % n;
                    h.extend(after_step[j as usize][from].iter().copied());
                }
            }
            for (i, h) in held.iter_mut().enumerate() {
                h.sort_unstable();
                assert_eq!(*h, (0..n).collect::<Vec<_>>(), "n = {n}, participant {i}");
            }
        }
    }

    #[test]
    fn allgatherv_plan_balances_and_never_mixes_ranks() {
        let layout = Layout { ranks: 6, ppn: 3 };
        let counts = [10, 0, 7, 3, 25, 1];
        let displs = displacements(&counts);
        let p = AllgathervPlan::new(layout, &counts, &displs, 4, 1000);
        // Blocks of 4: 10 -> 3, 0 -> 0, 7 -> 2, 3 -> 1, 25 -> 7, 1 -> 1.
        assert_eq!(p.total_blocks(), 14);
        // Ids are node-major, contiguous; every block within one rank's data.
        for b in &p.blocks {
            assert!(
                b.offset >= displs[b.source]
                    && b.offset + b.len <= displs[b.source] + counts[b.source]
            );
        }
        // Shares cover each node's blocks exactly, differing by at most one.
        for k in 0..layout.nodes() {
            let ranks = layout.node_ranks(k);
            let all: Vec<usize> = ranks.clone().flat_map(|r| p.sends(r)).collect();
            assert_eq!(
                all,
                (p.node_first[k]..p.node_first[k + 1]).collect::<Vec<_>>()
            );
            let counts: Vec<usize> = ranks.map(|r| p.shares[r].count).collect();
            assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1);
        }
        // mSize grows when the ids would not suffice.
        let tight = AllgathervPlan::new(layout, &counts, &displs, 1, 12);
        assert!(tight.total_blocks() <= 12, "{}", tight.table());
    }

    /// Every position but the root has exactly one parent, children come
    /// largest subtree first, the depth is floor(log2 p) and the root
    /// sends ceil(log2 p) times.
    #[test]
    fn binomial_trees_cover_every_position_once() {
        for p in 1..70 {
            let mut parent = vec![None; p];
            let mut depth = vec![0; p];
            for pos in 0..p {
                let c = binomial_children(pos, p);
                assert!(c.windows(2).all(|w| w[0] > w[1]), "{p}: {pos} -> {c:?}");
                for ch in c {
                    assert!(parent[ch].replace(pos).is_none(), "{p}: {ch} twice");
                    assert!(ch > pos);
                }
            }
            for pos in 1..p {
                let up = parent[pos].expect("a parent");
                depth[pos] = depth[up] + 1;
            }
            // Hops: floor(log2 p); the root's sends (rounds): ceil(log2 p).
            let max = depth.iter().max().copied().unwrap_or(0);
            assert_eq!(max, p.ilog2() as usize, "p = {p}");
            assert_eq!(
                binomial_children(0, p).len(),
                p.next_power_of_two().ilog2() as usize
            );
        }
        assert_eq!(binomial_children(0, 5), vec![4, 2, 1]);
        assert_eq!(binomial_children(2, 5), vec![3]);
    }
}
