//! MPI's side of the comparisons (feature `mpi`; `gaspi-bench` started by
//! `mpirun`): MPI_Allreduce, MPI_Allgatherv, MPI_Alltoallv, MPI_Bcast,
//! MPI_Barrier, the flat-MPI stencil and Random Access, and
//! the one-sided twins of `fence` (MPI_Put + MPI_Win_fence) and `lock`
//! (MPI_Win_lock + MPI_Put + MPI_Win_unlock, or MPI_Put + MPI_Win_flush)
//! in the same processes as ours, on the same data, sizes, repetitions and
//! statistics, and checked against the same reference values as ours, so
//! that two verified rows computed the same result.

use crate::adapters::{fence_data_ok, lock_data_ok, tag, targets};
use crate::alltoallv::{Pieces, alltoallv_bench};
use crate::benches::Bench;
use crate::collectives::{allgatherv_bench, counts, gather_value, reduce_expected, reduce_input};
use crate::gups::on_mpi::MpiGups;
use crate::kernels;
use crate::mpi_rma::RawWin;
use crate::report::Row;
use crate::stencil::on_mpi::MpiStencil;
use gaspi::plan::displacements;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// The MPI side: the communicator our context was made from.
pub struct Mpi {
    pub world: SimpleCommunicator,
}

/// Whether this process was started by an MPI launcher (MPICH, Intel MPI
/// and Open MPI set these).
pub fn under_mpirun() -> bool {
    ["PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

impl Mpi {
    /// `MPI_Allreduce` (sum of f64) of `len` elements: `allreduce_one`'s
    /// twin.
    pub fn allreduce(&self, b: &Bench, len: usize) -> Row {
        let (me, n) = (self.world.rank() as usize, self.world.size() as usize);
        let bytes = len * 8;
        let reps = b.reps(bytes, 20_000, 1 << 30);
        let mut send: Vec<f64> = (0..len).map(|j| reduce_input(me, j, len, 0)).collect();
        let mut recv = vec![0f64; len];
        let mut ok = true;
        let mut call = |it: usize, full: bool| {
            send[0] = reduce_input(me, 0, len, it);
            send[len - 1] = reduce_input(me, len - 1, len, it);
            self.world
                .all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
            let check = |j: usize| recv[j] == reduce_expected(n, j, len, it);
            ok &= if full {
                (0..len).all(check)
            } else {
                [0, len / 2, len - 1].into_iter().all(check)
            };
        };
        self.world.barrier();
        let warm = reps / 10;
        (0..warm).for_each(|it| call(it, false));
        let samples = b.batches(reps, 1.0, |i| call(warm + i, false));
        call(warm + reps, true);
        self.row(b, "allreduce", "mpi", bytes, reps, samples, ok)
    }

    /// `MPI_Allgatherv` of u64 with distribution `dist`, `c` per rank on
    /// average: `allgatherv_one`'s twin.
    pub fn allgatherv(&self, b: &Bench, dist: &str, c: usize) -> Row {
        let (me, n) = (self.world.rank() as usize, self.world.size() as usize);
        let counts = counts(dist, n, c);
        let displs = displacements(&counts);
        let total: usize = counts.iter().sum();
        let reps = b.reps(total * 8, 5_000, 1 << 30);
        let k = counts[me];
        let mut send: Vec<u64> = (0..k).map(|i| gather_value(me, i, k, 0)).collect();
        let mut recv = vec![0u64; total];
        let (c32, d32): (Vec<i32>, Vec<i32>) = counts
            .iter()
            .zip(&displs)
            .map(|(&c, &d)| (c as i32, d as i32))
            .unzip();
        let mut ok = true;
        let mut call = |it: usize, full: bool| {
            if k > 0 {
                send[0] = gather_value(me, 0, k, it);
                send[k - 1] = gather_value(me, k - 1, k, it);
            }
            let mut part = PartitionMut::new(&mut recv[..], &c32[..], &d32[..]);
            self.world.all_gather_varcount_into(&send[..], &mut part);
            ok &= (0..n).filter(|&r| counts[r] > 0).all(|r| {
                let kr = counts[r];
                let at = |i: usize| recv[displs[r] + i] == gather_value(r, i, kr, it);
                if full {
                    (0..kr).all(at)
                } else {
                    at(0) && at(kr - 1)
                }
            });
        };
        self.world.barrier();
        let warm = reps / 10;
        (0..warm).for_each(|it| call(it, false));
        let samples = b.batches(reps, 1.0, |i| call(warm + i, false));
        call(warm + reps, true);
        self.row(b, allgatherv_bench(dist), "mpi", c * 8, reps, samples, ok)
    }

    /// `MPI_Alltoallv` of u64 with distribution `dist`, `c` per pair on
    /// average: `alltoallv_one`'s twin (its result in the caller's buffer,
    /// as MPI's always is).
    pub fn alltoallv(&self, b: &Bench, dist: &str, c: usize) -> Row {
        let (me, n) = (self.world.rank() as usize, self.world.size() as usize);
        let counts = crate::alltoallv::pair_counts(dist, n, c);
        let total: usize = counts.iter().sum();
        let reps = b.reps(total * 8 / n.max(1), 5_000, 1 << 30);
        let scount: Vec<i32> = (0..n).map(|t| counts[me * n + t] as i32).collect();
        let rcount: Vec<i32> = (0..n).map(|s| counts[s * n + me] as i32).collect();
        let displs = |c: &[i32]| -> Vec<i32> {
            c.iter()
                .scan(0, |a, &k| {
                    let d = *a;
                    *a += k;
                    Some(d)
                })
                .collect()
        };
        let (sdispl, rdispl) = (displs(&scount), displs(&rcount));
        let pieces = Pieces::new(&counts, n, me, 0);
        let mut send = pieces.send_buffer(0);
        let mut recv = vec![0u64; rcount.iter().sum::<i32>() as usize];
        let mut ok = true;
        let mut call = |it: usize, full: bool| {
            pieces.touch(&mut send, it);
            let part = Partition::new(&send[..], &scount[..], &sdispl[..]);
            let mut into = PartitionMut::new(&mut recv[..], &rcount[..], &rdispl[..]);
            self.world.all_to_all_varcount_into(&part, &mut into);
            ok &= pieces.received_ok(&recv, it, full);
        };
        self.world.barrier();
        let warm = reps / 10;
        (0..warm).for_each(|it| call(it, false));
        let samples = b.batches(reps, 1.0, |i| call(warm + i, false));
        call(warm + reps, true);
        self.row(b, alltoallv_bench(dist), "mpi", c * 8, reps, samples, ok)
    }

    /// `MPI_Bcast` of `bytes` from rank 0, back to back; each batch ends
    /// with a barrier so the root cannot run more than a batch ahead of the
    /// receivers (ours waits for every rank after each broadcast).
    pub fn bcast(&self, b: &Bench, bytes: usize) -> Row {
        let me = self.world.rank();
        let len = bytes / 8;
        let reps = b.reps(bytes.max(64), 2_000, 256 << 20);
        let pattern = |i: usize, it: usize| (i as u64) ^ (it as u64) << 40;
        let mut buf = vec![0u64; len];
        let root = self.world.process_at_rank(0);
        let mut ok = true;
        let per = reps / crate::benches::BATCHES;
        let mut call = |it: usize| {
            if me == 0 {
                buf.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = pattern(i, it));
            }
            root.broadcast_into(&mut buf[..]);
            ok &= buf.first().is_none_or(|&x| x == pattern(0, it))
                && buf.last().is_none_or(|&x| x == pattern(len - 1, it));
            if (it + 1) % per == 0 {
                self.world.barrier();
            }
        };
        self.world.barrier();
        let warm = per;
        (0..warm).for_each(&mut call);
        let samples = b.batches(reps, 1.0, |i| call(warm + i));
        self.row(b, "bcast", "mpi", bytes, reps, samples, ok)
    }

    /// `MPI_Barrier`.
    pub fn barrier(&self, b: &Bench) -> Row {
        let reps = b.reps(0, 20_000, usize::MAX);
        self.world.barrier();
        (0..reps / 10).for_each(|_| self.world.barrier());
        let samples = b.batches(reps, 1.0, |_| self.world.barrier());
        self.row(b, "barrier", "mpi", 0, reps, samples, true)
    }

    /// Epochs of `pattern`'s puts of `bytes` closed by `MPI_Win_fence`:
    /// `adapters::fence`'s twin (impl `pattern:mpi`).
    pub fn fence(&self, b: &Bench, pattern: &str, bytes: usize) -> Row {
        let (me, n) = (self.world.rank() as usize, self.world.size() as usize);
        let elems = bytes.div_ceil(8).max(1);
        let win = RawWin::allocate(&self.world, 8 * elems);
        let out = targets(pattern, me, n);
        let mut data = vec![0u64; elems];
        win.fence(mpi::ffi::MPI_MODE_NOPRECEDE);
        let mut epoch = |it: usize| {
            data.fill(tag(me, it));
            for &(t, slot) in &out {
                win.put(&data[..bytes / 8], t as i32, slot * elems);
            }
            win.fence(0);
        };
        let reps = b.reps(bytes.max(64), 2_000, 64 << 20);
        (0..reps / 10).for_each(&mut epoch);
        let samples = b.batches(reps, 1.0, |i| epoch(reps / 10 + i));
        let last = reps / 10 + reps - 1;
        let ok = fence_data_ok(pattern, me, n, &win.local(), elems, bytes, last);
        win.fence(mpi::ffi::MPI_MODE_NOSUCCEED);
        drop(win);
        self.row(
            b,
            "fence",
            &format!("{pattern}:mpi"),
            bytes,
            reps,
            samples,
            ok,
        )
    }

    /// `adapters::lock`'s twin: ranks `0..c` loop lock + put + unlock as
    /// `mode` says (impl `mpi:mode:cC`).
    pub fn lock(&self, b: &Bench, mode: &str, c: usize, bytes: usize) -> Row {
        let (me, n) = (self.world.rank() as usize, self.world.size() as usize);
        let elems = bytes.div_ceil(8).max(1);
        let win = RawWin::allocate(&self.world, n * elems);
        let target = |i: usize| {
            if mode == "excl-distinct" {
                (i + 1) % n
            } else {
                n - 1
            }
        };
        let t = target(me) as i32;
        let epoch = mode == "put-flush";
        let mut data = vec![0u64; elems];
        let mut one = |it: usize| {
            data.fill(tag(me, it));
            if epoch {
                win.put(&data[..bytes / 8], t, me * elems);
                return win.flush(t);
            }
            match mode {
                "lock-all" => win.lock_all(),
                "shared-same" => win.lock(false, t),
                _ => win.lock(true, t),
            }
            win.put(&data[..bytes / 8], t, me * elems);
            match mode {
                "lock-all" => win.unlock_all(),
                _ => win.unlock(t),
            }
        };
        let reps = b.reps(bytes.max(64), 5_000, 64 << 20);
        self.world.barrier();
        let samples = if me < c {
            if epoch {
                win.lock_all();
            }
            (0..reps / 10).for_each(&mut one);
            let s = b.batches(reps, 1.0, |i| one(reps / 10 + i));
            if epoch {
                win.unlock_all();
            }
            s
        } else {
            Vec::new()
        };
        self.world.barrier();
        let last = reps / 10 + reps - 1;
        let ok = lock_data_ok(&target, c, me, &win.local(), elems, bytes, last);
        drop(win);
        self.row(
            b,
            "lock",
            &format!("mpi:{mode}:c{c}"),
            bytes,
            reps,
            samples,
            ok,
        )
    }

    /// The flat-MPI stencil (halo exchange by `MPI_Isend`/`MPI_Irecv`):
    /// `stencil_one`'s twin, same cut, sweeps and check.
    pub fn stencil(&self, b: &Bench, decomp: &str, bytes: usize, most: usize) -> Row {
        let shape = kernels::shape(b, decomp, bytes);
        let mut st = MpiStencil::new(&self.world, shape);
        let reps = kernels::sweeps(b, bytes, most);
        self.world.barrier();
        for _ in 0..reps / 10 {
            st.step();
        }
        let samples = b.batches(reps, 1.0, |_| st.step());
        let me = self.world.rank() as usize;
        let ok = kernels::block_ok(&shape, me, st.done(), &st.block());
        let side = shape.side;
        let bench = kernels::stencil_bench(decomp);
        self.row(b, bench, "mpi", side * side * 8, reps, samples, ok)
    }

    /// The flat-MPI Random Access (buckets by `MPI_Alltoallv`):
    /// `gups_one`'s twin, same stream, rounds and check.
    pub fn gups(&self, b: &Bench, bytes: usize, most: usize) -> Row {
        let table = kernels::table(b, bytes);
        let mut g = MpiGups::new(&self.world, table);
        let reps = kernels::gups_rounds(b, most);
        self.world.barrier();
        for _ in 0..reps / 10 {
            g.round();
        }
        let samples = b.batches(reps, 1.0, |_| g.round());
        let rounds = g.rounds();
        let me = self.world.rank() as usize;
        let ok = kernels::gups_errors(&table, me, rounds, g.finish()) == 0;
        let row = self.row(b, "gups", "mpi", table.words * 8, reps, samples, ok);
        kernels::gups_row(row, table.ranks)
    }

    /// A row of MPI's, verified when every rank's check passed.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        b: &Bench,
        bench: &'static str,
        imp: &str,
        bytes: usize,
        reps: usize,
        samples: Vec<f64>,
        ok: bool,
    ) -> Row {
        let mut all = 0i32;
        self.world
            .all_reduce_into(&(ok as i32), &mut all, SystemOperation::logical_and());
        let samples = if self.world.rank() == 0 {
            samples
        } else {
            Vec::new()
        };
        b.row(bench, imp, bytes, reps, samples, all != 0)
    }
}
