//! Random Access as a flat-MPI code does it, bucketed: per round every
//! rank applies its own updates, sorts the others into one bucket per
//! owner, exchanges the counts (`MPI_Alltoall`) and the buckets
//! (`MPI_Alltoallv`), and applies what it received. Exact: only a part's
//! owner writes it. Same stream, rounds and check as the GASPI variants.

use super::{CHUNK, Table, next, stream_start};
use gaspi::plan::displacements;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// One rank's part of the flat-MPI Random Access.
pub struct MpiGups<'a> {
    world: &'a SimpleCommunicator,
    table: Table,
    part: Vec<u64>,
    a: u64,
    buckets: Vec<Vec<u64>>,
    rounds: usize,
}

impl<'a> MpiGups<'a> {
    /// This rank's part, `T[i] = i`.
    pub fn new(world: &'a SimpleCommunicator, table: Table) -> MpiGups<'a> {
        let me = world.rank() as usize;
        let first = (me * table.words) as u64;
        MpiGups {
            world,
            table,
            part: (first..first + table.words as u64).collect(),
            a: stream_start(me),
            buckets: vec![Vec::with_capacity(CHUNK); table.ranks],
            rounds: 0,
        }
    }

    /// One round: [`CHUNK`] updates of this rank, and the buckets sent to it.
    pub fn round(&mut self) {
        let (n, me) = (self.table.ranks, self.world.rank() as usize);
        let lo = me * self.table.words;
        self.buckets.iter_mut().for_each(Vec::clear);
        for _ in 0..CHUNK {
            self.a = next(self.a);
            let i = self.table.index(self.a);
            match self.table.owner(i) {
                o if o == me => self.part[i - lo] ^= self.a,
                o => self.buckets[o].push(self.a),
            }
        }
        let counts: Vec<i32> = self.buckets.iter().map(|b| b.len() as i32).collect();
        let mut got = vec![0i32; n];
        self.world.all_to_all_into(&counts[..], &mut got[..]);
        // Displacements by the project's one prefix sum, as MPI's ints.
        let displs = |c: &[i32]| -> Vec<i32> {
            let c: Vec<usize> = c.iter().map(|&k| k as usize).collect();
            displacements(&c).into_iter().map(|d| d as i32).collect()
        };
        let send: Vec<u64> = self.buckets.concat();
        let mut recv = vec![0u64; got.iter().sum::<i32>() as usize];
        let (sd, rd) = (displs(&counts), displs(&got));
        let part = Partition::new(&send[..], &counts[..], &sd[..]);
        let mut into = PartitionMut::new(&mut recv[..], &got[..], &rd[..]);
        self.world.all_to_all_varcount_into(&part, &mut into);
        for a in recv {
            self.part[self.table.index(a) - lo] ^= a;
        }
        self.rounds += 1;
    }

    /// Rounds done so far.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// This rank's part of the table (no one else writes it).
    pub fn finish(self) -> Vec<u64> {
        self.part
    }
}
