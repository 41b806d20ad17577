//! Cost models of the collectives, evaluated from the schedules they
//! execute ([`plan`](super::plan)), for node counts far beyond any machine
//! at hand (up to 65,536 nodes and more): the pipelined-ring allgatherv's
//! block table, the dissemination's steps and partial reductions, the
//! allreduce ring, the alltoallv with and without node aggregation, a
//! stencil's halo exchange and a round of Random Access, flat and
//! node-shared ([`Exchange`]), and the
//! RMA broadcast's binomial tree in the LogGP model of Paznikov 2023
//! (section 3).
//!
//! Times are in microseconds. A model is a model: it charges each message
//! `o` at both ends, `L` in flight and `bytes * G` on the sender's link,
//! and charges nothing for contention inside the network.
//!
//! ```
//! use gaspi::model::{CostParams, Model};
//! let m = Model::new(CostParams::this_machine());
//! // The ring allgatherv of 16 MiB in all: nearly flat from 2 to 64 nodes.
//! let (t2, t64) = (m.allgatherv(2, 1, 16 << 20), m.allgatherv(64, 1, 16 << 20));
//! assert!(t64 < 1.5 * t2);
//! // A binomial broadcast beats the linear one once there are enough ranks.
//! assert!(m.bcast_binomial(1024, 1 << 20) < m.bcast_linear(1024, 1 << 20));
//! ```

use super::plan::{AllgathervPlan, Dissemination, Layout, binomial_children, displacements};

/// Machine parameters (LogGP plus what the algorithms add).
///
/// ```
/// use gaspi::model::{CostParams, Model};
/// // A cluster: 1.5 us latency, 12.5 GB/s links.
/// let p = CostParams { latency_us: 1.5, gap_per_byte_us: 1.0 / 12_500.0, ..CostParams::this_machine() };
/// assert!(Model::new(p).allreduce(64, 1, 8) > Model::new(CostParams::this_machine()).allreduce(64, 1, 8));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostParams {
    /// `L`: latency of a message between nodes.
    pub latency_us: f64,
    /// `o`: overhead of sending or receiving one message.
    pub overhead_us: f64,
    /// `G`: time per byte on a node's link (1 / bandwidth).
    pub gap_per_byte_us: f64,
    /// Time per byte of a copy or a reduction inside a node.
    pub local_per_byte_us: f64,
    /// `q`: one atomic on another rank's word (the broadcast's request flag
    /// and done counter).
    pub atomic_us: f64,
    /// `o_r`: noticing a request (a broadcaster thread waking up).
    pub request_us: f64,
}

impl CostParams {
    /// Parameters measured on the machine this crate was developed on
    /// (Intel Xeon VM, 2 cores, native engine, emulated nodes; 2026-11-22):
    /// `L + 2o` = 0.6 us (`gaspi-bench put-lat-distance`, inter-node
    /// targets), `G` from 11.4 GB/s (`gaspi-bench write-bw`, 4 MiB), the
    /// same for local copies, `q` = 0.05 us (`gaspi-bench atomic-lat`),
    /// `o_r` = 5 us (a binomial broadcast of 8 B to one other rank costs
    /// 5.9 us against 0.5 us for the linear one). A cluster's are passed
    /// explicitly (`gaspi-bench model --latency-us ...`).
    ///
    /// ```
    /// let p = gaspi::model::CostParams::this_machine();
    /// assert!(p.latency_us > 0.0 && p.gap_per_byte_us > 0.0);
    /// ```
    pub fn this_machine() -> CostParams {
        CostParams {
            latency_us: 0.4,
            overhead_us: 0.1,
            gap_per_byte_us: 1.0 / 11_400.0,
            local_per_byte_us: 1.0 / 11_400.0,
            atomic_us: 0.05,
            request_us: 5.0,
        }
    }

    /// One message of `bytes` between nodes, sender to receiver.
    fn message(&self, bytes: usize) -> f64 {
        2.0 * self.overhead_us + self.latency_us + bytes as f64 * self.gap_per_byte_us
    }
}

/// The models, for one set of parameters.
///
/// ```
/// use gaspi::model::{CostParams, Model};
/// let mut m = Model::new(CostParams::this_machine());
/// m.block_bytes = 16 << 10;
/// assert!(m.allgatherv(16, 4, 1 << 24) > 0.0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// The machine.
    pub p: CostParams,
    /// Bytes per allgatherv block (`AllgathervOptions::block_bytes`).
    pub block_bytes: usize,
    /// Bytes per alltoallv chunk (`AlltoallvOptions::block_bytes`).
    pub chunk_bytes: usize,
}

impl Model {
    /// Models for machine `p`, with the collectives' default options.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// assert_eq!(m.block_bytes, gaspi::AllgathervOptions::DEFAULT_BLOCK_BYTES);
    /// ```
    pub fn new(p: CostParams) -> Model {
        Model {
            p,
            block_bytes: crate::collectives::AllgathervOptions::DEFAULT_BLOCK_BYTES,
            chunk_bytes: crate::collectives::AlltoallvOptions::DEFAULT_BLOCK_BYTES,
        }
    }

    /// The pipelined-ring allgatherv (Al Ahad et al. 2018, section II) of `total`
    /// bytes in all (regular distribution, u64 elements) over `nodes` nodes
    /// of `ppn` ranks: the node-local copy into the window, then the ring,
    /// charged on its busiest link (the blocks node 0 writes and forwards,
    /// counted from the block table) plus the pipeline's fill (a block's
    /// `nodes - 1` hops).
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// // One node: only the local copy.
    /// assert!(m.allgatherv(1, 4, 1 << 20) < m.allgatherv(4, 4, 1 << 20));
    /// ```
    pub fn allgatherv(&self, nodes: usize, ppn: usize, total: usize) -> f64 {
        let p = &self.p;
        let ranks = nodes * ppn;
        let elems = (total / 8).max(ranks);
        let counts: Vec<usize> = (0..ranks)
            .map(|r| elems / ranks + usize::from(r < elems % ranks))
            .collect();
        let displs = displacements(&counts);
        let layout = Layout { ranks, ppn };
        let plan = AllgathervPlan::new(
            layout,
            &counts,
            &displs,
            (self.block_bytes / 8).max(1),
            crate::config::NOTIFICATION_LIMIT as usize,
        );
        // Local phase: each rank copies its contribution into the window.
        let local = counts[0] as f64 * 8.0 * p.local_per_byte_us;
        if nodes == 1 {
            return local;
        }
        // Node 0's link: its own blocks, and every received block it
        // forwards.
        let own = plan.node_first[0]..plan.node_first[1];
        let sent: Vec<usize> = (0..plan.total_blocks())
            .filter(|&id| own.contains(&id) || plan.forwards(0, id))
            .collect();
        let bytes: usize = sent.iter().map(|&id| plan.blocks[id].len * 8).sum();
        let link = sent.len() as f64 * p.overhead_us + bytes as f64 * p.gap_per_byte_us;
        let block = plan.blocks.iter().map(|b| b.len * 8).max().unwrap_or(0);
        let fill = (nodes - 1) as f64 * p.message(block);
        local + link.max(fill) + p.message(block)
    }

    /// The dissemination allreduce (Al Ahad et al. 2018, section III) of `bytes` over
    /// `nodes` nodes of `ppn` ranks: the node-local reduction of each
    /// rank's fraction, then `floor(log2 n)` steps plus one round for the
    /// partial reductions (sent alongside, combined at the end), each a
    /// message of the fraction and its reduction.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// // log2 steps: 1024 nodes cost about twice 32.
    /// let (t32, t1024) = (m.allreduce_dissemination(32, 1, 8), m.allreduce_dissemination(1024, 1, 8));
    /// assert!(t1024 < 2.5 * t32);
    /// ```
    pub fn allreduce_dissemination(&self, nodes: usize, ppn: usize, bytes: usize) -> f64 {
        let p = &self.p;
        let frac = bytes.div_ceil(ppn);
        let local = (ppn as f64) * frac as f64 * p.local_per_byte_us;
        let d = Dissemination::new(nodes);
        let rounds = d.steps as usize + usize::from(!d.partials.is_empty());
        local + rounds as f64 * (p.message(frac) + frac as f64 * p.local_per_byte_us)
    }

    /// The allreduce ring (reduce-scatter then allgather) of `bytes` over
    /// `nodes` nodes of `ppn` ranks: `2 (n - 1)` steps of `bytes / (n ppn)`.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// // Large messages: the ring beats the dissemination.
    /// assert!(m.allreduce_ring(16, 1, 64 << 20) < m.allreduce_dissemination(16, 1, 64 << 20));
    /// ```
    pub fn allreduce_ring(&self, nodes: usize, ppn: usize, bytes: usize) -> f64 {
        let p = &self.p;
        let frac = bytes.div_ceil(ppn);
        let local = (ppn as f64) * frac as f64 * p.local_per_byte_us;
        if nodes == 1 {
            return local;
        }
        let chunk = frac.div_ceil(nodes);
        let steps = 2 * (nodes - 1);
        local + steps as f64 * (p.message(chunk) + chunk as f64 * p.local_per_byte_us / 2.0)
    }

    /// The better of the two allreduce algorithms (what `Auto` aims at).
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// let t = m.allreduce(16, 1, 8);
    /// assert_eq!(t, m.allreduce_dissemination(16, 1, 8).min(m.allreduce_ring(16, 1, 8)));
    /// ```
    pub fn allreduce(&self, nodes: usize, ppn: usize, bytes: usize) -> f64 {
        self.allreduce_dissemination(nodes, ppn, bytes)
            .min(self.allreduce_ring(nodes, ppn, bytes))
    }

    /// Messages between nodes in one alltoallv of `bytes` per pair of
    /// ranks (regular) over `nodes` nodes of `ppn` ranks: node-aggregated
    /// (`aggregated`: one section of `ppn^2` pieces per node pair, in
    /// chunks) or flat (one message per pair of ranks on different nodes).
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// // 8 ranks per node: 64 times fewer messages.
    /// assert_eq!(m.alltoallv_messages(16, 8, 1024, false), 64.0 * m.alltoallv_messages(16, 8, 1024, true));
    /// ```
    pub fn alltoallv_messages(
        &self,
        nodes: usize,
        ppn: usize,
        bytes: usize,
        aggregated: bool,
    ) -> f64 {
        let pairs = nodes as f64 * nodes.saturating_sub(1) as f64;
        if aggregated {
            let section = (ppn * ppn * bytes) as f64;
            pairs * (section / self.chunk_bytes.max(1) as f64).ceil().max(1.0)
        } else {
            pairs * (ppn * ppn) as f64
        }
    }

    /// One alltoallv of `bytes` per pair of ranks (regular) over `nodes`
    /// nodes of `ppn` ranks, result in place. Both variants move the same
    /// bytes over a node's link, `(nodes - 1) ppn^2 bytes G`, which
    /// overlaps with the per-message overheads of its ranks; aggregated,
    /// a rank copies its pieces into the window once (`nodes ppn bytes`)
    /// and its node's ranks share out the node's `o` at both ends of every
    /// chunk; flat, every rank pays `o` at both ends of each of its
    /// `(nodes - 1) ppn` messages. Plus one latency.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// // A cluster: 1 us per message end, 12.5 GB/s links.
    /// let p = CostParams { overhead_us: 1.0, gap_per_byte_us: 1.0 / 12_500.0, ..CostParams::this_machine() };
    /// let m = Model::new(p);
    /// // Small pieces, many ranks per node: aggregation wins.
    /// assert!(m.alltoallv(64, 16, 1024, true) < m.alltoallv(64, 16, 1024, false));
    /// // Inside one machine, where a message costs little, it does not.
    /// let here = Model::new(CostParams::this_machine());
    /// assert!(here.alltoallv(64, 16, 1024, true) > here.alltoallv(64, 16, 1024, false));
    /// ```
    pub fn alltoallv(&self, nodes: usize, ppn: usize, bytes: usize, aggregated: bool) -> f64 {
        let p = &self.p;
        let link = nodes.saturating_sub(1) as f64 * (ppn * ppn * bytes) as f64 * p.gap_per_byte_us;
        let messages = self.alltoallv_messages(nodes, ppn, bytes, aggregated);
        // Per rank: its share of its node's messages.
        let per_rank = messages / (nodes * ppn) as f64;
        let ends = 2.0 * per_rank * p.overhead_us;
        let copy = if aggregated {
            (nodes * ppn * bytes) as f64 * p.local_per_byte_us
        } else {
            0.0
        };
        copy + link.max(ends) + p.latency_us + 2.0 * p.overhead_us
    }

    /// The binomial RMA broadcast of `bytes` to `ranks` ranks (Paznikov 2023):
    /// each parent sends to its children one after the other (data,
    /// description and request: `o + m G + 2q`), each child notices the
    /// request (`o_r`) and relays; the time is the latest arrival in the
    /// tree the broadcast uses, plus the done counter's atomic.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// // Logarithmic depth: 4096 ranks cost far less than 16 times 256.
    /// assert!(m.bcast_binomial(4096, 8) < 4.0 * m.bcast_binomial(256, 8));
    /// ```
    pub fn bcast_binomial(&self, ranks: usize, bytes: usize) -> f64 {
        let p = &self.p;
        let send = p.overhead_us + bytes as f64 * p.gap_per_byte_us + 2.0 * p.atomic_us;
        // Arrival time of each position, parents before children.
        let mut at = vec![0.0f64; ranks];
        let mut latest = 0.0f64;
        for pos in 0..ranks {
            let start = at[pos] + if pos == 0 { 0.0 } else { p.request_us };
            for (i, c) in binomial_children(pos, ranks).into_iter().enumerate() {
                at[c] = start + (i + 1) as f64 * send + p.latency_us;
                latest = latest.max(at[c] + p.request_us + p.atomic_us);
            }
        }
        latest + p.overhead_us + p.latency_us
    }

    /// The linear RMA broadcast (Paznikov 2023): the root puts to every other
    /// rank in turn inside `lock_all`.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// // Two ranks: one put, cheaper than waking a relay.
    /// assert!(m.bcast_linear(2, 8) < m.bcast_binomial(2, 8));
    /// ```
    pub fn bcast_linear(&self, ranks: usize, bytes: usize) -> f64 {
        let p = &self.p;
        let send = p.overhead_us + bytes as f64 * p.gap_per_byte_us;
        2.0 * p.atomic_us + (ranks.saturating_sub(1)) as f64 * send + p.latency_us
    }
}

/// Messages and bytes of one step of an application kernel, job-wide.
///
/// ```
/// let t = gaspi::model::Traffic { messages: 2.0, bytes: 1024.0 };
/// assert_eq!(t.bytes / t.messages, 512.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    /// Messages that carry data.
    pub messages: f64,
    /// Their bytes.
    pub bytes: f64,
}

/// The traffic of one step of an application kernel ([`Model::halo`],
/// [`Model::gups_round`]), between nodes and inside them.
///
/// ```
/// use gaspi::model::{CostParams, Model};
/// let m = Model::new(CostParams::this_machine());
/// // One sweep of a 1024 x 1024 band per rank, 2 nodes of 4 ranks.
/// let step = m.halo(2, 4, 1024, true);
/// assert!(step.inter.messages > 0.0);
/// assert_eq!(step.intra.messages, 0.0); // read in place inside a node
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exchange {
    /// Between nodes.
    pub inter: Traffic,
    /// Inside nodes (data messages; notifications without data not counted).
    pub intra: Traffic,
}

/// The columns of the grid of node blocks for `nodes` nodes of `ppn` row
/// bands: the divisor of `nodes` that makes the grid of rank blocks
/// squarest (the smallest such), so that halos are short.
///
/// ```
/// // 4 nodes of 2 bands: 2 x 2 nodes, ranks 4 rows x 2 columns.
/// assert_eq!(gaspi::model::halo_node_columns(4, 2), 2);
/// assert_eq!(gaspi::model::halo_node_columns(1, 8), 1);
/// ```
pub fn halo_node_columns(nodes: usize, ppn: usize) -> usize {
    (1..=nodes.max(1))
        .filter(|x| nodes.max(1) % x == 0)
        .min_by_key(|&x| (nodes.max(1) / x).saturating_mul(ppn).abs_diff(x))
        .unwrap_or(1)
}

impl Model {
    /// The halo exchange of a two-dimensional five-point stencil, per
    /// sweep: `nodes` node blocks in the grid [`halo_node_columns`] picks,
    /// each cut into `ppn` row bands of `side x side` f64 points, one per
    /// rank (`gaspi-bench stencil`'s cut); flat (`node_shared` false) or
    /// node-shared.
    ///
    /// Between nodes, flat and node-shared codes send the same: a row each
    /// way across every north-south node edge, and each band's piece of the
    /// column each way across every east-west edge. Inside a node, a flat
    /// code sends a row each way between neighbouring bands (`2 (ppn - 1)`
    /// messages per node); a node-shared one reads them in place and sends
    /// none, only a notification per band edge and direction.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// let (flat, shared) = (m.halo(4, 8, 1024, false), m.halo(4, 8, 1024, true));
    /// assert_eq!(flat.inter, shared.inter);
    /// assert_eq!((flat.intra.messages, shared.intra.messages), (4.0 * 14.0, 0.0));
    /// ```
    pub fn halo(&self, nodes: usize, ppn: usize, side: usize, node_shared: bool) -> Exchange {
        let x = halo_node_columns(nodes, ppn);
        let y = nodes.max(1) / x;
        let row = (side * 8) as f64;
        let ns_edges = (y - 1) as f64 * x as f64;
        let ew_edges = (x - 1) as f64 * y as f64;
        let inter = 2.0 * ns_edges + 2.0 * ppn as f64 * ew_edges;
        let intra = if node_shared {
            0.0
        } else {
            2.0 * ppn.saturating_sub(1) as f64 * nodes as f64
        };
        Exchange {
            inter: Traffic {
                messages: inter,
                bytes: inter * row,
            },
            intra: Traffic {
                messages: intra,
                bytes: intra * row,
            },
        }
    }

    /// One round of Random Access (`gaspi-bench gups`): every rank sends
    /// `updates` random updates (8 bytes each) to their owners, uniformly
    /// spread over `nodes` nodes of `ppn` ranks. Flat, a rank sends a bucket
    /// to every other rank each round (a notification alone when it is
    /// empty); node-shared, one bucket to every other node, read by one
    /// rank of the target node, and a bucket to each rank of its own node
    /// in the node's window (a notification, the bucket stored in place)
    /// with the updates of that rank's part: its own, and those it read
    /// from other nodes' buckets, `(ppn - 1) / ppn` of all bytes. The bytes
    /// between nodes are the same.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// let (flat, shared) = (m.gups_round(64, 16, 1024, false), m.gups_round(64, 16, 1024, true));
    /// // 1024 ranks: 1023 buckets per rank, or 63.
    /// assert_eq!(flat.inter.messages / shared.inter.messages, 16.0);
    /// assert_eq!(flat.inter.bytes, shared.inter.bytes);
    /// // Inside a node both hand a bucket to each of the 15 others.
    /// assert_eq!(shared.intra.messages, flat.intra.messages);
    /// assert_eq!(shared.intra.bytes, 1024.0 * 8192.0 * 15.0 / 16.0);
    /// ```
    pub fn gups_round(
        &self,
        nodes: usize,
        ppn: usize,
        updates: usize,
        node_shared: bool,
    ) -> Exchange {
        let (n, p) = (nodes.max(1) as f64, ppn.max(1) as f64);
        let ranks = n * p;
        let bytes = ranks * (updates * 8) as f64;
        let inter = if node_shared {
            ranks * (n - 1.0)
        } else {
            ranks * (ranks - p)
        };
        Exchange {
            inter: Traffic {
                messages: inter,
                bytes: bytes * (n - 1.0) / n,
            },
            intra: Traffic {
                messages: ranks * (p - 1.0),
                bytes: if node_shared {
                    bytes * (p - 1.0) / p
                } else {
                    bytes * (p - 1.0) / ranks
                },
            },
        }
    }

    /// The halo exchange's time in one sweep for a band inside a node
    /// with neighbours all round (no computation): flat, four messages
    /// (two inside the node, copied at `local_per_byte_us`, two to the
    /// nodes east and west) with `o` at both ends of each; node-shared,
    /// the two between nodes and two notifications (`q` each) inside it.
    ///
    /// ```
    /// use gaspi::model::{CostParams, Model};
    /// let m = Model::new(CostParams::this_machine());
    /// assert!(m.halo_time(64, 4, 1024, true) < m.halo_time(64, 4, 1024, false));
    /// // One rank per node: nothing inside a node to save.
    /// assert_eq!(m.halo_time(64, 1, 1024, true), m.halo_time(64, 1, 1024, false));
    /// ```
    pub fn halo_time(&self, nodes: usize, ppn: usize, side: usize, node_shared: bool) -> f64 {
        let p = &self.p;
        let row = (side * 8) as f64;
        let x = halo_node_columns(nodes, ppn);
        let y = nodes.max(1) / x;
        let (inside, across) = if ppn > 1 {
            (2.0, if x > 1 { 2.0 } else { 0.0 })
        } else {
            (
                0.0,
                if x > 1 { 2.0 } else { 0.0 } + if y > 1 { 2.0 } else { 0.0 },
            )
        };
        let network = if across > 0.0 {
            2.0 * across * p.overhead_us + p.latency_us + row * p.gap_per_byte_us
        } else {
            0.0
        };
        let node = if node_shared {
            inside * p.atomic_us
        } else {
            inside * (2.0 * p.overhead_us + row * p.local_per_byte_us)
        };
        network + node
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        Model::new(CostParams::this_machine())
    }

    #[test]
    fn one_node_costs_no_network() {
        let m = model();
        let p = m.p;
        assert_eq!(
            m.allgatherv(1, 4, 1 << 20),
            (1 << 20) as f64 / 4.0 * p.local_per_byte_us
        );
        assert!(m.allreduce_ring(1, 2, 1024) < p.latency_us);
        assert!(m.allreduce_dissemination(1, 1, 8) < p.latency_us);
    }

    #[test]
    fn dissemination_counts_steps_and_partials() {
        let m = model();
        let one = m.allreduce_dissemination(2, 1, 8); // 1 step
        let seven = m.allreduce_dissemination(7, 1, 8); // 2 steps + partials
        let eight = m.allreduce_dissemination(8, 1, 8); // 3 steps
        let sixteen = m.allreduce_dissemination(16, 1, 8); // 4 steps
        assert!((seven - eight).abs() < 1e-9 && seven > 2.5 * one && sixteen > eight);
        // Large messages go to the ring, small ones to the dissemination.
        assert!(m.allreduce_ring(16, 1, 16 << 20) < m.allreduce_dissemination(16, 1, 16 << 20));
        assert!(m.allreduce_dissemination(16, 1, 8) < m.allreduce_ring(16, 1, 8));
    }

    #[test]
    fn the_ring_allgatherv_is_bandwidth_bound_until_the_pipeline_fill_dominates() {
        let m = model();
        let total = 64 << 20;
        let t: Vec<f64> = [2, 8, 64, 512]
            .iter()
            .map(|&n| m.allgatherv(n, 1, total))
            .collect();
        assert!(t.windows(2).all(|w| w[1] < 1.3 * w[0]), "{t:?}");
        // At 65,536 nodes a block's 65,535 hops cost more than the data.
        assert!(m.allgatherv(65_536, 1, total) > 2.0 * t[0]);
    }

    #[test]
    fn binomial_broadcast_has_a_crossover_with_the_linear_one() {
        let m = model();
        assert!(m.bcast_linear(2, 8) < m.bcast_binomial(2, 8));
        assert!(m.bcast_binomial(65_536, 8) < m.bcast_linear(65_536, 8));
        // Arrival times follow the tree: log-depth growth.
        let (a, b) = (
            m.bcast_binomial(1024, 1 << 20),
            m.bcast_binomial(2048, 1 << 20),
        );
        assert!(b > a && b < 1.2 * a);
    }
}
