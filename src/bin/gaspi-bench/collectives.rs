//! The collective benchmarks: allreduce and allgatherv, several
//! implementations side by side (`--impl`), every result verified.
//!
//! Each call changes a few elements of the input (so a stale result
//! shows) and checks the matching elements of the result; after the timed
//! calls one more call is checked element by element on every rank.
//! Times are rank 0's, per call.

use crate::benches::Bench;
use crate::report::Row;
use gaspi::{
    Allgatherv, AllgathervOptions, Allreduce, AllreduceAlgorithm, AllreduceOptions, GroupId, Local,
    Notification, ReduceOp, Remote, SegmentId, SegmentView, Timeout,
};

use gaspi::plan::displacements;

const B: Timeout = Timeout::Block;
/// Segment ids the benchmarks use for their windows and buffers.
const WINDOW: SegmentId = 20;
const NAIVE: SegmentId = 21;
/// The queue of the naive implementations.
const QUEUE: u8 = 1;

/// The allreduce implementations `--impl` can name.
/// Without `-private`, the node-window implementations leave the result in
/// the node's window, read in place (like the allgatherv's `ring-shared`);
/// with it, they copy it into the caller's buffer (`run_into`).
pub const ALLREDUCE_IMPLS: [&str; 10] = [
    "auto",
    "dissemination",
    "ring",
    "direct",
    "auto-private",
    "dissemination-private",
    "ring-private",
    "direct-private",
    "naive",
    "gaspi",
];
/// The allgatherv implementations `--impl` can name.
pub const ALLGATHERV_IMPLS: [&str; 3] = ["ring-shared", "ring-private", "naive"];
/// The data distributions of Al Ahad et al. 2018.
pub const DISTRIBUTIONS: [&str; 3] = ["regular", "decreasing", "bcast"];

/// Every rank writes its `len` bytes at `mine` of segment [`NAIVE`] to the
/// same offset on every other rank, with notification `id_base + me`, and
/// waits until every rank in `from` has done the same to it: the naive
/// all-to-all of both naive collectives. Double buffering by the caller
/// (offsets and ids alternate by call parity) makes a barrier needless.
fn naive_exchange(b: &Bench, mine: (usize, usize), from: &[bool], id_base: u32) {
    let ctx = b.ctx;
    let me = ctx.rank();
    let (off, len) = mine;
    if len > 0 {
        for to in (0..ctx.num_ranks()).filter(|&r| r != me) {
            let n = Notification::new(id_base + me as u32, 1);
            let local = Local::new(NAIVE, off);
            let remote = Remote::new(to, NAIVE, off);
            match ctx.write_notify(local, remote, len, n, QUEUE, B) {
                Err(gaspi::Error::QueueFull { .. }) => {
                    ctx.wait(QUEUE, B).expect("wait");
                    ctx.write_notify(local, remote, len, n, QUEUE, B)
                        .expect("write_notify");
                }
                r => r.expect("write_notify"),
            }
        }
        ctx.wait(QUEUE, B).expect("wait");
    }
    let n = ctx.num_ranks() as u32;
    let expect = from
        .iter()
        .enumerate()
        .filter(|&(r, &f)| f && r != me as usize)
        .count();
    for _ in 0..expect {
        ctx.notify_claim(NAIVE, id_base..id_base + n, B)
            .expect("notify_claim");
    }
}

/// A fresh segment [`NAIVE`] of `size` bytes, touched.
fn naive_segment(b: &Bench, size: usize) -> SegmentView<u8> {
    let ctx = b.ctx;
    if ctx.segment_list().contains(&NAIVE) {
        ctx.segment_delete(NAIVE).expect("segment_delete");
    }
    ctx.segment_create(
        NAIVE,
        size.max(1),
        GroupId::ALL,
        B,
        gaspi::Alloc::Initialized,
    )
    .expect("segment_create");
    let v = ctx.segment::<u8>(NAIVE).expect("view");
    v.fill(0);
    ctx.barrier(GroupId::ALL, B).expect("barrier");
    v
}

/// Element `j` of rank `r`'s allreduce input in call `it`: small integers,
/// so that f64 sums are exact; elements 0 and last change every call.
pub(crate) fn reduce_input(r: usize, j: usize, len: usize, it: usize) -> f64 {
    let base = ((r + 1) * (j % 1000 + 1)) as f64;
    if j == 0 || j + 1 == len {
        base + it as f64
    } else {
        base
    }
}

pub(crate) fn reduce_expected(n: usize, j: usize, len: usize, it: usize) -> f64 {
    (0..n).map(|r| reduce_input(r, j, len, it)).sum()
}

/// `allreduce`: sum of f64 over all ranks, per implementation and size.
pub fn allreduce(b: &Bench, sizes: &[usize], impls: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for imp in impls {
        for &size in sizes {
            let len = (size / 8).max(1);
            if imp == "gaspi" && len > b.ctx.allreduce_elem_max() as usize {
                continue; // GASPI's allreduce takes at most 255 elements
            }
            rows.push(allreduce_one(b, imp, len));
        }
    }
    rows
}

fn allreduce_one(b: &Bench, imp: &str, len: usize) -> Row {
    let ctx = b.ctx;
    let n = ctx.num_ranks() as usize;
    let me = ctx.rank() as usize;
    let bytes = len * 8;
    let reps = b.reps(bytes, 20_000, 1 << 30);
    let mut send: Vec<f64> = (0..len).map(|j| reduce_input(me, j, len, 0)).collect();
    let mut recv = vec![0f64; len];
    let private = imp.ends_with("-private");
    let algorithm = match imp.trim_end_matches("-private") {
        "dissemination" => Some(AllreduceAlgorithm::Dissemination),
        "ring" => Some(AllreduceAlgorithm::Ring),
        "direct" => Some(AllreduceAlgorithm::Direct),
        "auto" => Some(AllreduceAlgorithm::Auto),
        _ => None,
    };
    let mut ar = algorithm.map(|algorithm| {
        let opts = AllreduceOptions {
            algorithm,
            ..b.allreduce
        };
        Allreduce::<f64>::with_options(ctx, WINDOW, len, opts, B).expect("Allreduce")
    });
    let naive = (imp == "naive").then(|| naive_segment(b, 2 * n * bytes));
    let mut ok = true;
    let warm = reps / 10;
    let last = warm + reps;
    let mut call = |it: usize, send: &mut [f64], recv: &mut [f64]| {
        send[0] = reduce_input(me, 0, len, it);
        send[len - 1] = reduce_input(me, len - 1, len, it);
        if let Some(ar) = ar.as_mut() {
            if private {
                ar.run_into(send, recv, ReduceOp::Sum, B)
                    .expect("allreduce");
            } else {
                let view = ar.run(send, ReduceOp::Sum, B).expect("allreduce");
                for j in [0, len / 2, len - 1] {
                    ok &= view.get(j) == reduce_expected(n, j, len, it);
                }
                if it == last {
                    view.copy_to_slice(0, recv); // for the full check
                }
                return;
            }
        } else if let Some(v) = &naive {
            let parity = it % 2;
            let slot = |r: usize| (parity * n + r) * bytes;
            let as_bytes: &[u8] = bytemuck::cast_slice(send);
            v.copy_from_slice(slot(me), as_bytes);
            naive_exchange(b, (slot(me), bytes), &vec![true; n], (parity * n) as u32);
            let all = v.sub(slot(0)..slot(n));
            // SAFETY: every rank's slot of this parity has arrived (its
            // notification was claimed) and is not written again before
            // this rank has sent its input of the call after next.
            let inputs: &[f64] = bytemuck::cast_slice(unsafe { all.as_slice() });
            recv.copy_from_slice(&inputs[..len]);
            for r in 1..n {
                for (x, y) in recv.iter_mut().zip(&inputs[r * len..(r + 1) * len]) {
                    *x += y;
                }
            }
        } else {
            ctx.allreduce(send, recv, ReduceOp::Sum, GroupId::ALL, B)
                .expect("allreduce");
        }
        for j in [0, len / 2, len - 1] {
            ok &= recv[j] == reduce_expected(n, j, len, it);
        }
    };
    b.barrier();
    for it in 0..warm {
        call(it, &mut send, &mut recv);
    }
    let samples = b.batches(reps, 1.0, |i| call(warm + i, &mut send, &mut recv));
    call(last, &mut send, &mut recv);
    drop(ar);
    ok &= (0..len).all(|j| recv[j] == reduce_expected(n, j, len, last));
    let verified = b.all_ok(ok);
    let samples = if me == 0 { samples } else { Vec::new() };
    b.row("allreduce", imp, bytes, reps, samples, verified)
}

/// Elements of each rank for distribution `dist` with mean `c` per rank
/// (Al Ahad et al. 2018, section II-B): regular `c`; linearly decreasing
/// `2c(n-1-i)/(n-1)`; broadcast `n*c` on rank 0.
pub fn counts(dist: &str, n: usize, c: usize) -> Vec<usize> {
    (0..n)
        .map(|i| match dist {
            "decreasing" if n > 1 => 2 * c * (n - 1 - i) / (n - 1),
            "bcast" if i == 0 => n * c,
            "bcast" => 0,
            _ => c,
        })
        .collect()
}

/// Element `i` of rank `r`'s contribution in call `it`: the paper's
/// `(iProc + 1) * (it + 1)` at both ends, the index elsewhere.
pub(crate) fn gather_value(r: usize, i: usize, count: usize, it: usize) -> u64 {
    if i == 0 || i + 1 == count {
        ((r + 1) * (it + 1)) as u64
    } else {
        (r as u64) << 40 | i as u64
    }
}

/// `allgatherv`: u64 elements, per distribution, implementation and
/// mean size per rank (`bytes` = total / ranks, IMB's convention).
pub fn allgatherv(b: &Bench, sizes: &[usize], impls: &[String], dists: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for dist in dists {
        for imp in impls {
            for &size in sizes {
                rows.push(allgatherv_one(b, dist, imp, (size / 8).max(1)));
            }
        }
    }
    rows
}

fn allgatherv_one(b: &Bench, dist: &str, imp: &str, c: usize) -> Row {
    let ctx = b.ctx;
    let n = ctx.num_ranks() as usize;
    let me = ctx.rank() as usize;
    let counts = counts(dist, n, c);
    let displs = displacements(&counts);
    let total: usize = counts.iter().sum();
    let reps = b.reps(total * 8, 5_000, 1 << 30);
    let mut send: Vec<u64> = (0..counts[me])
        .map(|i| gather_value(me, i, counts[me], 0))
        .collect();
    let mut recv = vec![0u64; total];
    let mut ag = (imp != "naive").then(|| {
        Allgatherv::<u64>::with_options(
            ctx,
            WINDOW,
            &counts,
            &displs,
            AllgathervOptions::default(),
            B,
        )
        .expect("Allgatherv")
    });
    let naive = (imp == "naive").then(|| naive_segment(b, 2 * total * 8));
    let senders: Vec<bool> = counts.iter().map(|&k| k > 0).collect();
    let mut ok = true;
    // Check both ends of every contribution (they change every call).
    let check = |get: &dyn Fn(usize) -> u64, it: usize| {
        (0..n).filter(|&r| counts[r] > 0).all(|r| {
            let k = counts[r];
            get(displs[r]) == gather_value(r, 0, k, it)
                && get(displs[r] + k - 1) == gather_value(r, k - 1, k, it)
        })
    };
    let mut call = |it: usize, send: &mut [u64], recv: &mut [u64]| {
        let k = send.len();
        if k > 0 {
            send[0] = gather_value(me, 0, k, it);
            send[k - 1] = gather_value(me, k - 1, k, it);
        }
        match (ag.as_mut(), &naive) {
            (Some(ag), _) if imp == "ring-private" => {
                ag.run_into(send, recv, B).expect("allgatherv");
                ok &= check(&|i| recv[i], it);
            }
            (Some(ag), _) => {
                let view = ag.run(send, B).expect("allgatherv");
                ok &= check(&|i| view.get(i), it);
            }
            (None, Some(v)) => {
                let base = (it % 2) * total * 8;
                let mine = base + displs[me] * 8;
                v.copy_from_slice(mine, bytemuck::cast_slice(send));
                naive_exchange(b, (mine, k * 8), &senders, ((it % 2) * n) as u32);
                let view = v.sub(base..base + total * 8);
                ok &= check(
                    &|i| u64::from_ne_bytes(std::array::from_fn(|x| view.get(i * 8 + x))),
                    it,
                );
            }
            (None, None) => unreachable!(),
        }
    };
    b.barrier();
    let warm = reps / 10;
    for it in 0..warm {
        call(it, &mut send, &mut recv);
    }
    let samples = b.batches(reps, 1.0, |i| call(warm + i, &mut send, &mut recv));
    // One more call, every element checked.
    let last = warm + reps;
    call(last, &mut send, &mut recv);
    let result: Vec<u64> = match (&ag, &naive) {
        (Some(ag), _) => ag.result().to_vec()[..total].to_vec(),
        (None, Some(v)) => {
            let base = (last % 2) * total * 8;
            let mut bytes = vec![0u8; total * 8];
            v.copy_to_slice(base, &mut bytes);
            bytemuck::cast_slice(&bytes).to_vec()
        }
        (None, None) => unreachable!(),
    };
    ok &= (0..n).all(|r| {
        (0..counts[r]).all(|i| result[displs[r] + i] == gather_value(r, i, counts[r], last))
    });
    drop(ag);
    let verified = b.all_ok(ok);
    let samples = if me == 0 { samples } else { Vec::new() };
    b.row(allgatherv_bench(dist), imp, c * 8, reps, samples, verified)
}

/// The bench column of an allgatherv row with distribution `dist`.
pub fn allgatherv_bench(dist: &str) -> &'static str {
    match dist {
        "decreasing" => "allgatherv-decreasing",
        "bcast" => "allgatherv-bcast",
        _ => "allgatherv-regular",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_have_the_mean_size() {
        for dist in DISTRIBUTIONS {
            let c = counts(dist, 5, 100);
            assert_eq!(c.iter().sum::<usize>(), 500, "{dist}");
        }
        assert_eq!(counts("decreasing", 3, 10), vec![20, 10, 0]);
        assert_eq!(counts("bcast", 3, 10), vec![30, 0, 0]);
    }
}
