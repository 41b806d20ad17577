//! The plan of the node-aggregated alltoallv, as a pure computation: where
//! every piece lives in the node windows, which aggregated messages cross
//! node boundaries, how they are cut into chunks (one notification id
//! each) and which local rank sends which chunks.
//!
//! Al Ahad et al. 2018 (section V, "Conclusions and future work") name
//! an AlltoallV on shared windows, and aggregating the messages of all
//! ranks of a node that go to the same node, as future work; this plan is
//! that design. For every ordered pair of nodes
//! `(from, to)` there is one *section*: the pieces from `from`'s ranks to
//! `to`'s ranks, target rank by target rank and, for one target, source
//! rank by source rank. The section is staged once in `from`'s window and
//! written once into `to`'s, so a node pair costs one message (or a few
//! chunks for large sections) instead of one per rank pair.
//!
//! A node's window (in elements, after any control area) holds its
//! staging area — its sections to other nodes, by target node — and then
//! its receive area — the sections from every node, by source node,
//! including its own, which its ranks fill by local copies.

use super::layout::Layout;
use crate::error::{Error, Result};
use crate::extent;
use std::fmt::Write as _;
use std::ops::Range;

/// One chunk of an aggregated section: `len` elements from element
/// `offset` of the section from node `from` to node `to`, written with
/// notification id `id` (an id of the target node's window).
///
/// ```
/// use gaspi::plan::{AlltoallvPlan, Chunk, Layout};
/// // 2 nodes of 1 rank, 5 elements each way, chunks of at most 3.
/// let plan = AlltoallvPlan::new(Layout { ranks: 2, ppn: 1 }, &[0, 5, 5, 0], 8, 3, 1024)?;
/// assert_eq!(plan.chunks(0)[1], Chunk { from: 0, to: 1, id: 1, offset: 3, len: 2 });
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The sending node.
    pub from: usize,
    /// The receiving node.
    pub to: usize,
    /// Its notification id in the receiving node's window.
    pub id: usize,
    /// First element within the section.
    pub offset: usize,
    /// Elements (at least one).
    pub len: usize,
}

/// The plan of an alltoallv of `counts[s * ranks + t]` elements from rank
/// `s` to rank `t` over nodes of `layout` (see the module documentation).
///
/// ```
/// use gaspi::plan::{AlltoallvPlan, Layout};
/// // 4 ranks in 2 nodes, 10 elements per rank pair.
/// let layout = Layout { ranks: 4, ppn: 2 };
/// let plan = AlltoallvPlan::new(layout, &[10; 16], 8, 1 << 20, 1024)?;
/// // One aggregated message per node pair instead of 8 rank pairs.
/// assert_eq!(plan.inter_node_messages(), 2);
/// assert_eq!(plan.flat_inter_node_messages(), 8);
/// // Rank 1's piece for rank 2 sits in node 1's receive area, in the
/// // section from node 0: target 2's pieces come first, rank 0's before 1's.
/// assert_eq!(plan.recv_at(1, 2), plan.stage_len(1) + 10);
/// print!("{}", plan.table());
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlltoallvPlan {
    /// The job's shape.
    pub layout: Layout,
    /// Elements from rank `s` to rank `t` at `s * ranks + t`.
    pub counts: Vec<usize>,
    /// The most elements in a chunk.
    pub block_elems: usize,
    /// Per node pair `from * nodes + to`: elements of the section.
    section_len: Vec<usize>,
    /// Per node pair: where the section starts in `from`'s staging area
    /// (pairs of a node with itself are not staged).
    stage_at: Vec<usize>,
    /// Per node pair: where the section starts in `to`'s receive area.
    recv_at: Vec<usize>,
    /// Per node: elements of its staging and of its receive area.
    stage_len: Vec<usize>,
    recv_len: Vec<usize>,
    /// Per rank pair `s * ranks + t`: the piece's offset in its section.
    piece_at: Vec<usize>,
    /// Per node: the chunks it sends, in sending order.
    chunks: Vec<Vec<Chunk>>,
    /// Per node: chunks it receives (its ids `0..in_chunks`).
    in_chunks: Vec<usize>,
    /// Per rank: the range of its node's chunks it sends.
    shares: Vec<Range<usize>>,
}

impl AlltoallvPlan {
    /// The plan for `counts` (`ranks * ranks` entries, row `s` what rank
    /// `s` sends to each rank) of elements of `elem_bytes` bytes, in chunks
    /// of at most `block_elems` elements, enlarged if needed so that no
    /// node receives more than `max_ids` chunks.
    ///
    /// Fails with [`Error::InvalidArgument`] if `counts` has the wrong
    /// length, the layout no ranks per node, or a node receives from more
    /// other nodes than `max_ids` (each needs an id), and with
    /// [`Error::SizeOverflow`] if the total does not fit in memory.
    ///
    /// ```
    /// use gaspi::plan::{AlltoallvPlan, Layout};
    /// let l = Layout { ranks: 2, ppn: 1 };
    /// // Only 4 ids: the chunks grow so that 1000 elements fit.
    /// let plan = AlltoallvPlan::new(l, &[0, 1000, 1000, 0], 8, 10, 4)?;
    /// assert!(plan.in_chunks(0) <= 4 && plan.block_elems >= 250);
    /// assert!(AlltoallvPlan::new(l, &[1, 2, 3], 8, 10, 4).is_err());
    /// assert!(AlltoallvPlan::new(Layout { ranks: 2, ppn: 0 }, &[1; 4], 8, 10, 4).is_err());
    /// assert!(AlltoallvPlan::new(l, &[usize::MAX, 1, 0, 0], 8, 10, 4).is_err());
    /// // 3 nodes send to each node: 2 ids cannot tell their chunks apart.
    /// let four = Layout { ranks: 4, ppn: 1 };
    /// assert!(AlltoallvPlan::new(four, &[1; 16], 8, 10, 2).is_err());
    /// assert!(AlltoallvPlan::new(four, &[1; 16], 8, 10, 3).is_ok());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn new(
        layout: Layout,
        counts: &[usize],
        elem_bytes: usize,
        block_elems: usize,
        max_ids: usize,
    ) -> Result<AlltoallvPlan> {
        let mut plan = AlltoallvPlan {
            layout,
            counts: Vec::new(),
            block_elems: 0,
            section_len: Vec::new(),
            stage_at: Vec::new(),
            recv_at: Vec::new(),
            stage_len: Vec::new(),
            recv_len: Vec::new(),
            piece_at: Vec::new(),
            chunks: Vec::new(),
            in_chunks: Vec::new(),
            shares: Vec::new(),
        };
        plan.renew(layout, counts, elem_bytes, block_elems, max_ids)?;
        Ok(plan)
    }

    /// Make this plan [`AlltoallvPlan::new`]'s plan for these arguments,
    /// in the memory it holds (an alltoallv with sizes unknown in advance
    /// plans every call whose counts change). On an error (those of
    /// `new`) the plan is as it was.
    pub(crate) fn renew(
        &mut self,
        layout: Layout,
        counts: &[usize],
        elem_bytes: usize,
        block_elems: usize,
        max_ids: usize,
    ) -> Result<()> {
        let n = layout.ranks;
        if layout.ppn == 0 {
            return Err(Error::InvalidArgument(
                "an alltoallv's layout needs at least 1 rank per node, got 0".into(),
            ));
        }
        if Some(counts.len()) != n.checked_mul(n) {
            return Err(Error::InvalidArgument(format!(
                "an alltoallv of {n} ranks needs {n} x {n} counts, got {}",
                counts.len()
            )));
        }
        // Every sum below is at most the total, which fits in memory.
        let total = extent::sum("sum of alltoallv counts", counts.iter().copied())?;
        extent::mul(
            "sum of alltoallv counts * element size",
            total,
            elem_bytes.max(1),
        )?;
        let nodes = layout.nodes();
        // Each node's non-empty sections from other nodes need an id each,
        // however large the chunks.
        let sends = |from: usize, to: usize| {
            let to = layout.node_ranks(to);
            layout.node_ranks(from).any(|s| {
                counts[s * n + to.start..s * n + to.end]
                    .iter()
                    .any(|&c| c > 0)
            })
        };
        for to in 0..nodes {
            let senders = (0..nodes).filter(|&f| f != to && sends(f, to)).count();
            if senders > max_ids.max(1) {
                return Err(Error::InvalidArgument(format!(
                    "node {to} of the alltoallv receives from {senders} other nodes, \
                     more than its {max_ids} notification ids"
                )));
            }
        }
        let pair = |from: usize, to: usize| from * nodes + to;
        self.layout = layout;
        self.counts.clear();
        self.counts.extend_from_slice(counts);

        let (section_len, piece_at) = (&mut self.section_len, &mut self.piece_at);
        zeroed(section_len, nodes * nodes);
        zeroed(piece_at, n * n);
        for from in 0..nodes {
            for to in 0..nodes {
                let mut at = 0;
                for t in layout.node_ranks(to) {
                    for s in layout.node_ranks(from) {
                        piece_at[s * n + t] = at;
                        at += counts[s * n + t];
                    }
                }
                section_len[pair(from, to)] = at;
            }
        }
        let section_len = &self.section_len;
        let (stage_at, recv_at) = (&mut self.stage_at, &mut self.recv_at);
        let (stage_len, recv_len) = (&mut self.stage_len, &mut self.recv_len);
        zeroed(stage_at, nodes * nodes);
        zeroed(recv_at, nodes * nodes);
        zeroed(stage_len, nodes);
        zeroed(recv_len, nodes);
        for node in 0..nodes {
            for other in 0..nodes {
                recv_at[pair(other, node)] = recv_len[node];
                recv_len[node] += section_len[pair(other, node)];
                if other != node {
                    stage_at[pair(node, other)] = stage_len[node];
                    stage_len[node] += section_len[pair(node, other)];
                }
            }
        }

        // Chunk size: enough that every node's incoming chunks fit the ids
        // (each section's last chunk may be partial: one per node more).
        let incoming = |b: usize, to: usize| -> usize {
            (0..nodes)
                .filter(|&from| from != to)
                .map(|from| section_len[pair(from, to)].div_ceil(b))
                .sum()
        };
        let mut block_elems = block_elems.max(1);
        let room = max_ids.saturating_sub(nodes).max(1);
        let most = self.recv_len.iter().max().copied().unwrap_or(0);
        block_elems = block_elems.max(most.div_ceil(room));
        while (0..nodes).any(|to| incoming(block_elems, to) > max_ids.max(1)) {
            block_elems = block_elems.saturating_mul(2);
        }
        self.block_elems = block_elems;
        refill(
            &mut self.in_chunks,
            (0..nodes).map(|to| incoming(block_elems, to)),
        );

        // Ids at a target: by source node, then chunk by chunk. Each node
        // sends to the nodes after it first (cyclically), so that the
        // nodes do not all start with the same target.
        self.chunks.resize_with(nodes, Vec::new);
        for (from, list) in self.chunks.iter_mut().enumerate() {
            list.clear();
            for k in 1..nodes {
                let to = (from + k) % nodes;
                let first_id: usize = (0..from)
                    .filter(|&f| f != to)
                    .map(|f| section_len[pair(f, to)].div_ceil(block_elems))
                    .sum();
                let len = section_len[pair(from, to)];
                for (c, offset) in (0..len).step_by(block_elems).enumerate() {
                    list.push(Chunk {
                        from,
                        to,
                        id: first_id + c,
                        offset,
                        len: block_elems.min(len - offset),
                    });
                }
            }
        }

        // Node-local balance: local rank l sends the chunks that start in
        // the l-th of L equal parts of the node's bytes to send (the
        // owners of a node's chunks never decrease, so each local rank's
        // are a range).
        self.shares.clear();
        for (node, list) in self.chunks.iter().enumerate() {
            let local = layout.node_ranks(node).len();
            let bytes = (self.stage_len[node] as u128).max(1);
            let (mut c, mut start) = (0, 0u128);
            for l in 0..local {
                let first = c;
                while c < list.len() && (start * local as u128 / bytes) as usize <= l {
                    start += list[c].len as u128;
                    c += 1;
                }
                self.shares.push(first..c);
            }
        }
        Ok(())
    }

    fn pair(&self, from: usize, to: usize) -> usize {
        from * self.layout.nodes() + to
    }

    /// Elements from rank `s` to rank `t`.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 2, ppn: 2 }, &[1, 2, 3, 4], 4, 64, 64)?;
    /// assert_eq!(plan.count(1, 0), 3);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn count(&self, s: usize, t: usize) -> usize {
        self.counts[s * self.layout.ranks + t]
    }

    /// Elements of the section from node `from` to node `to`.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 4, ppn: 2 }, &[1; 16], 4, 64, 64)?;
    /// assert_eq!(plan.section_len(0, 1), 4);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn section_len(&self, from: usize, to: usize) -> usize {
        self.section_len[self.pair(from, to)]
    }

    /// Elements of `node`'s staging area (its sections to other nodes).
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 4, ppn: 2 }, &[1; 16], 4, 64, 64)?;
    /// assert_eq!(plan.stage_len(0), 4);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn stage_len(&self, node: usize) -> usize {
        self.stage_len[node]
    }

    /// Elements of `node`'s window: its staging area, then its receive
    /// area.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 4, ppn: 2 }, &[1; 16], 4, 64, 64)?;
    /// assert_eq!(plan.window_len(1), 4 + 8);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn window_len(&self, node: usize) -> usize {
        self.stage_len[node] + self.recv_len[node]
    }

    /// Where rank `s`'s piece for rank `t` lies in `t`'s node window.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 2, ppn: 2 }, &[1, 2, 3, 4], 4, 64, 64)?;
    /// // One node: target 0's pieces (from 0, then 1), then target 1's.
    /// assert_eq!([plan.recv_at(0, 0), plan.recv_at(1, 0), plan.recv_at(0, 1)], [0, 1, 4]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn recv_at(&self, s: usize, t: usize) -> usize {
        let (from, to) = (self.layout.node_of(s), self.layout.node_of(t));
        self.stage_len[to]
            + self.recv_at[self.pair(from, to)]
            + self.piece_at[s * self.layout.ranks + t]
    }

    /// Where rank `s` stages its piece for rank `t` of another node in
    /// `s`'s node window (`None` for a target on `s`'s node, which it
    /// copies straight to [`AlltoallvPlan::recv_at`]).
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 2, ppn: 1 }, &[1, 2, 3, 4], 4, 64, 64)?;
    /// assert_eq!((plan.stage_at(0, 1), plan.stage_at(0, 0)), (Some(0), None));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn stage_at(&self, s: usize, t: usize) -> Option<usize> {
        let (from, to) = (self.layout.node_of(s), self.layout.node_of(t));
        (from != to)
            .then(|| self.stage_at[self.pair(from, to)] + self.piece_at[s * self.layout.ranks + t])
    }

    /// Where chunk `c` is read in its sender's window and written in its
    /// receiver's: `(source offset, target offset)` in elements.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 2, ppn: 1 }, &[1, 2, 3, 4], 4, 64, 64)?;
    /// let c = plan.chunks(0)[0];
    /// // Staged at 0 on node 0, lands after node 1's staging (3) and
    /// // node 0's section to node 1 comes first in its receive area.
    /// assert_eq!(plan.chunk_at(&c), (0, 3));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn chunk_at(&self, c: &Chunk) -> (usize, usize) {
        let p = self.pair(c.from, c.to);
        (
            self.stage_at[p] + c.offset,
            self.stage_len[c.to] + self.recv_at[p] + c.offset,
        )
    }

    /// The chunks `node` sends, in order.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 3, ppn: 1 }, &[1; 9], 4, 64, 64)?;
    /// // Node 1 writes to node 2 first, then to node 0.
    /// let to: Vec<usize> = plan.chunks(1).iter().map(|c| c.to).collect();
    /// assert_eq!(to, [2, 0]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn chunks(&self, node: usize) -> &[Chunk] {
        &self.chunks[node]
    }

    /// The indices in its node's [`AlltoallvPlan::chunks`] that `rank`
    /// sends.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// // 2 nodes of 2 ranks, sections of 4 elements in chunks of 2.
    /// let plan = AlltoallvPlan::new(Layout { ranks: 4, ppn: 2 }, &[1; 16], 4, 2, 64)?;
    /// assert_eq!((plan.sends(2), plan.sends(3)), (0..1, 1..2));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn sends(&self, rank: usize) -> Range<usize> {
        self.shares[rank].clone()
    }

    /// Chunks `node` receives: its notification ids `0..in_chunks`.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 3, ppn: 1 }, &[1; 9], 4, 64, 64)?;
    /// assert_eq!(plan.in_chunks(0), 2);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn in_chunks(&self, node: usize) -> usize {
        self.in_chunks[node]
    }

    /// Nodes that send to `node` (its non-empty incoming sections).
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// // Only rank 0 sends, to rank 2.
    /// let mut counts = [0; 9];
    /// counts[2] = 5;
    /// let plan = AlltoallvPlan::new(Layout { ranks: 3, ppn: 1 }, &counts, 4, 64, 64)?;
    /// assert_eq!(plan.senders_to(2).collect::<Vec<_>>(), [0]);
    /// assert_eq!(plan.senders_to(1).count(), 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn senders_to(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.layout.nodes()).filter(move |&f| f != node && self.section_len(f, node) > 0)
    }

    /// Whether node `from` needs a credit from node `to` before it writes
    /// a call's section into `to`'s window: when `to` sends `from` nothing
    /// (otherwise `to`'s chunks of the previous call say that `to` is
    /// ready). Never for an empty section.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// // Rank 0 sends to rank 1 only.
    /// let plan = AlltoallvPlan::new(Layout { ranks: 2, ppn: 1 }, &[0, 5, 0, 0], 4, 64, 64)?;
    /// assert!(plan.needs_credit(0, 1) && !plan.needs_credit(1, 0));
    /// let both = AlltoallvPlan::new(Layout { ranks: 2, ppn: 1 }, &[0, 5, 5, 0], 4, 64, 64)?;
    /// assert!(!both.needs_credit(0, 1));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn needs_credit(&self, from: usize, to: usize) -> bool {
        from != to && self.section_len(from, to) > 0 && self.section_len(to, from) == 0
    }

    /// Data messages one call sends between nodes: the chunks of every
    /// non-empty section (one per node pair when sections fit a chunk).
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 8, ppn: 2 }, &[1; 64], 4, 64, 64)?;
    /// assert_eq!(plan.inter_node_messages(), 4 * 3);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn inter_node_messages(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// What a flat alltoallv sends between nodes: one message per pair of
    /// ranks on different nodes with a non-empty piece.
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 8, ppn: 2 }, &[1; 64], 4, 64, 64)?;
    /// // ranks * (ranks - ppn): the aggregated count times ppn squared.
    /// assert_eq!(plan.flat_inter_node_messages(), 8 * 6);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn flat_inter_node_messages(&self) -> usize {
        let (l, n) = (self.layout, self.layout.ranks);
        (0..n * n)
            .filter(|&i| l.node_of(i / n) != l.node_of(i % n) && self.counts[i] > 0)
            .count()
    }

    /// The plan as text: node windows, sections and each rank's chunks
    /// (for review and snapshot tests).
    ///
    /// ```
    /// # use gaspi::plan::{AlltoallvPlan, Layout};
    /// let plan = AlltoallvPlan::new(Layout { ranks: 2, ppn: 1 }, &[1, 2, 3, 4], 4, 64, 64)?;
    /// assert!(plan.table().contains("node 0 -> node 1"));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn table(&self) -> String {
        let l = self.layout;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "alltoallv: {} ranks, {} per node, chunks of at most {} elements",
            l.ranks, l.ppn, self.block_elems
        );
        for node in 0..l.nodes() {
            let _ = writeln!(
                s,
                "node {node}: ranks {:?}, staging {} + receive {} elements, receives {} chunks",
                l.node_ranks(node),
                self.stage_len[node],
                self.recv_len[node],
                self.in_chunks[node]
            );
        }
        for from in 0..l.nodes() {
            for to in 0..l.nodes() {
                let len = self.section_len(from, to);
                let p = self.pair(from, to);
                let staged = if from == to {
                    "local copies".to_string()
                } else {
                    format!("staged at {}", self.stage_at[p])
                };
                let _ = writeln!(
                    s,
                    "  node {from} -> node {to}: {len} elements, {staged}, received at {}",
                    self.stage_len[to] + self.recv_at[p]
                );
            }
        }
        for r in 0..l.ranks {
            let node = l.node_of(r);
            let list: Vec<String> = self.chunks[node][self.sends(r)]
                .iter()
                .map(|c| format!("{}->{}#{}[{}+{}]", c.from, c.to, c.id, c.offset, c.len))
                .collect();
            let _ = writeln!(s, "  rank {r} sends: {}", list.join(" "));
        }
        s
    }
}

/// Make `v` hold `items`, in the memory it has.
fn refill<T>(v: &mut Vec<T>, items: impl Iterator<Item = T>) {
    v.clear();
    v.extend(items);
}

/// Make `v` hold `len` zeros, in the memory it has.
fn zeroed(v: &mut Vec<usize>, len: usize) {
    v.clear();
    v.resize(len, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts for `ranks` ranks from a seed: empty, small and large pieces.
    fn counts(ranks: usize, seed: u64) -> Vec<usize> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..ranks * ranks)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                [0, 1, 3, 40, 1000][(x % 5) as usize]
            })
            .collect()
    }

    /// A plan made again in the memory of another (of another layout,
    /// counts, chunk size and ids) is the plan `new` makes; a renewal that
    /// fails leaves the plan as it was.
    #[test]
    fn a_renewed_plan_is_a_new_one() {
        let layouts: Vec<Layout> = [(1, 1), (2, 1), (4, 2), (6, 4), (7, 3), (9, 1), (8, 8)]
            .iter()
            .map(|&(ranks, ppn)| Layout { ranks, ppn })
            .collect();
        let mut plan = AlltoallvPlan::new(layouts[0], &[5], 8, 4, 16).unwrap();
        let mut seed = 1;
        for round in 0..3 {
            for &l in layouts.iter().chain(layouts.iter().rev()) {
                seed += 1;
                let c = counts(l.ranks, seed);
                // Ids for every source node at least (fewer: refused, below).
                let nodes = l.nodes();
                let ids = [nodes, nodes + 3, 1024][(seed % 3) as usize];
                let block = [1, 7, 64][round];
                plan.renew(l, &c, 8, block, ids).unwrap();
                assert_eq!(
                    plan,
                    AlltoallvPlan::new(l, &c, 8, block, ids).unwrap(),
                    "{l:?}"
                );
                let before = plan.clone();
                assert!(plan.renew(l, &c[1..], 8, block, ids).is_err());
                let mut over = c.clone();
                over[0] = usize::MAX;
                assert!(plan.renew(l, &over, 8, block, ids).is_err());
                assert!(
                    plan.renew(Layout { ppn: 0, ..l }, &c, 8, block, ids)
                        .is_err()
                );
                if nodes > 2 {
                    let full = vec![1; l.ranks * l.ranks];
                    assert!(plan.renew(l, &full, 8, block, nodes - 2).is_err());
                }
                assert_eq!(plan, before, "a failed renewal changed the plan");
            }
        }
    }
}
