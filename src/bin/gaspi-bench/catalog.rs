//! The catalogue of benchmarks: their names and help (one source for the
//! command line and the `all` run), what each needs of a job, and its
//! default layout. How each runs is in `run.rs`.

use clap::ValueEnum;

/// A benchmark, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchName {
    /// ping-pong of write_notify + notify_waitsome (ranks 0, 1), one-way latency
    WriteNotifyLat,
    /// streamed writes rank 0 -> 1, then one notification; beside single-thread memcpy
    WriteBw,
    /// read + wait (rank 0 reads from rank 1)
    ReadLat,
    /// atomic_fetch_add on rank 1's word from rank 0
    AtomicLat,
    /// ping-pong of passive_send + passive_receive (ranks 0, 1), one-way latency
    PassiveLat,
    /// barrier over all ranks (node-aware with several nodes)
    Barrier,
    /// sum of f64 over all ranks: --impl auto, dissemination, ring, direct (result
    /// in the node's window; -private: copied to the caller's buffer), naive, gaspi
    Allreduce,
    /// u64 elements: --impl ring-shared (result in the node window), ring-private
    /// (copied out), naive; --dist regular, decreasing, bcast; bytes = total / ranks
    Allgatherv,
    /// u64 elements, node-aggregated: --impl aggregated (result in the node
    /// window), aggregated-private, aggregated-window (pieces made in the
    /// window), aggregated-displaced (private, at MPI displacements),
    /// unknown-private (counts sent in the call), unknown-varying (the
    /// same, counts changing every call), flat; --dist regular, random,
    /// sparse; bytes = mean per pair of ranks
    Alltoallv,
    /// RMA epochs: the puts of --pattern, then MPI_Win_fence, per --design
    Fence,
    /// put to the right, compute as long as the epoch takes, fence: the overlap
    FenceOverlap,
    /// lock + put + unlock per --design and --mode, with 1..N --contenders;
    /// --target compute: the targets compute outside the library meanwhile
    Lock,
    /// RMA broadcast from rank 0 into every rank's window + flush: --impl
    /// linear, binomial, node; reports the crossover
    Bcast,
    /// write-notify-lat from rank 0 to each other rank (intra-/inter-node)
    PutLatDistance,
    /// remote write_notify into node 1's window until a rank of node 1 claims it
    SharedNotifyLat,
    /// five-point stencil sweeps, verified bit for bit: --impl flat (a segment
    /// per rank), node (node windows, rows read in place); --decomp 1d, 2d;
    /// bytes = one rank's block; under mpirun beside flat MPI (Isend/Irecv)
    Stencil,
    /// Random Access (HPCC GUPS), exact, checked as HPCC does: --impl flat
    /// (buckets per rank), node (node windows, each part updated by its
    /// owner, one bucket per node pair), node-atomic (atomic XORs inside a
    /// node), node-lockfree (plain XORs, HPCC's 1% error allowed); bytes =
    /// one rank's table; under mpirun beside flat MPI (buckets by
    /// MPI_Alltoallv)
    Gups,
    /// every benchmark briefly on 4 ranks in 2 nodes, with a summary
    All,
    /// the collectives' cost models for 1 to 65,536 nodes (no job)
    Model,
}

impl BenchName {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BenchName::WriteNotifyLat => "write-notify-lat",
            BenchName::WriteBw => "write-bw",
            BenchName::ReadLat => "read-lat",
            BenchName::AtomicLat => "atomic-lat",
            BenchName::PassiveLat => "passive-lat",
            BenchName::Barrier => "barrier",
            BenchName::Allreduce => "allreduce",
            BenchName::Allgatherv => "allgatherv",
            BenchName::Alltoallv => "alltoallv",
            BenchName::Fence => "fence",
            BenchName::FenceOverlap => "fence-overlap",
            BenchName::Lock => "lock",
            BenchName::Bcast => "bcast",
            BenchName::PutLatDistance => "put-lat-distance",
            BenchName::SharedNotifyLat => "shared-notify-lat",
            BenchName::Stencil => "stencil",
            BenchName::Gups => "gups",
            BenchName::All => "all",
            BenchName::Model => "model",
        }
    }

    /// The job it runs on by default: ranks, and ranks per node.
    pub fn layout(self) -> (usize, Option<usize>) {
        match self {
            BenchName::All => (4, Some(2)),
            BenchName::PutLatDistance | BenchName::SharedNotifyLat => (8, Some(4)),
            _ => (2, None),
        }
    }

    /// What it needs of the job, if it cannot run on a job of `ranks`
    /// ranks with `ppn` per node.
    pub fn missing(self, ranks: usize, ppn: usize) -> Option<&'static str> {
        let two = matches!(
            self,
            BenchName::WriteNotifyLat
                | BenchName::WriteBw
                | BenchName::ReadLat
                | BenchName::AtomicLat
                | BenchName::PutLatDistance
                | BenchName::All
        );
        let nodes = ranks.div_ceil(ppn.max(1));
        // The kernels' node-shared variants cut a node's share into one
        // part per rank: every node needs all its ranks (`all` skips them).
        let kernel = matches!(self, BenchName::Stencil | BenchName::Gups);
        if two && ranks < 2 {
            Some("at least 2 ranks")
        } else if self == BenchName::SharedNotifyLat && nodes < 2 {
            Some("at least 2 nodes (--ppn)")
        } else if kernel && ranks % ppn.max(1) != 0 {
            Some("full nodes (ranks a multiple of --ppn)")
        } else {
            None
        }
    }

    /// The benchmarks `self` runs: itself, or every one for `all`.
    pub fn members(self) -> Vec<BenchName> {
        match self {
            BenchName::All => BenchName::value_variants()
                .iter()
                .copied()
                .filter(|b| !matches!(b, BenchName::All | BenchName::Model))
                .collect(),
            b => vec![b],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_clap() {
        for b in BenchName::value_variants() {
            let v = b.to_possible_value().expect("every benchmark has a name");
            assert_eq!(v.get_name(), b.name());
        }
        assert!(!BenchName::All.members().contains(&BenchName::Model));
        assert_eq!(BenchName::Lock.members(), vec![BenchName::Lock]);
        assert!(BenchName::Stencil.missing(5, 2).is_some());
        assert!(BenchName::Gups.missing(6, 3).is_none());
        assert!(BenchName::SharedNotifyLat.missing(4, 4).is_some());
    }
}
