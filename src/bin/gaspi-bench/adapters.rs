//! The MPI-adapter benchmarks: fence epochs in the communication patterns
//! of Santhanaraman et al. 2009 (figures 7-10) and the overlap of computation with a fenced
//! put (figure 6), for each fence design; lock + put + unlock against the
//! number of concurrently locking ranks (Hatanaka et al. 2015, figure 8), for each
//! lock design. Every benchmark checks the data it moved.

use crate::benches::Bench;
use crate::report::Row;
use gaspi::{
    Assert, BcastImpl, FenceDesign, GroupId, LockDesign, LockType, Rank, RmaOptions, RmaWindow,
    SegmentId, Timeout,
};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const B: Timeout = Timeout::Block;
const WINDOW: SegmentId = 22;
/// The broadcaster's control window.
const CONTROL: SegmentId = 23;

/// The fence patterns `--pattern` can name.
pub const PATTERNS: [&str; 5] = ["zero", "single", "neighbors8", "halo4", "halo8"];
/// The fence designs `--design` can name.
pub const DESIGNS: [&str; 3] = ["notified", "opt", "deferred"];
/// The lock designs `--design` can name.
pub const LOCK_DESIGNS: [&str; 2] = ["mcs-rw", "two-level"];
/// What the contenders of `lock` do (`--mode`): exclusive locks on one
/// target (the last rank), exclusive locks on distinct targets (the next
/// rank), shared locks on one target, lock_all; put-flush: put + flush to
/// the last rank inside one lock_all epoch (IMB-RMA's Unidir_put).
pub const LOCK_MODES: [&str; 5] = [
    "excl-same",
    "excl-distinct",
    "shared-same",
    "lock-all",
    "put-flush",
];
/// What the ranks that do not lock do meanwhile (`--target`): wait in a
/// barrier, or compute without calling the library until every contender
/// is done.
pub const LOCK_TARGETS: [&str; 2] = ["wait", "compute"];

/// A window of `len` u64 per rank with the fence design named `name`.
fn window<'a>(b: &Bench<'a>, name: &str, len: usize) -> RmaWindow<'a, u64> {
    let design = match name {
        "opt" => FenceDesign::ImmediateOpt,
        "deferred" => FenceDesign::Deferred,
        _ => FenceDesign::Notified,
    };
    let opts = RmaOptions {
        design,
        ..Default::default()
    };
    RmaWindow::with_options(b.ctx, WINDOW, len, GroupId::ALL, opts, B).expect("RmaWindow")
}

/// The (target, slot) pairs rank `me` of `n` puts to in `pattern`: slot
/// `k` of the target receives from the origin's `k`-th direction, so no
/// two origins share a slot.
pub(crate) fn targets(pattern: &str, me: usize, n: usize) -> Vec<(usize, usize)> {
    if n < 2 {
        return Vec::new();
    }
    match pattern {
        "single" => vec![((me + 1) % n, 0)],
        "neighbors8" => (1..=8usize)
            .map(|k| {
                let d = if k % 2 == 1 {
                    k.div_ceil(2)
                } else {
                    n - k / 2 % n
                };
                ((me + d) % n, k - 1)
            })
            .filter(|&(t, _)| t != me)
            .collect(),
        "halo4" | "halo8" => {
            // A periodic px x py grid, px the largest divisor <= sqrt(n).
            let px = (1..=n)
                .filter(|p| n % p == 0 && p * p <= n)
                .max()
                .unwrap_or(1);
            let py = n / px;
            let (x, y) = (me % px, me / px);
            let mut dirs = vec![(1, 0), (px - 1, 0), (0, 1), (0, py - 1)];
            if pattern == "halo8" {
                dirs.extend([(1, 1), (px - 1, 1), (1, py - 1), (px - 1, py - 1)]);
            }
            dirs.iter()
                .enumerate()
                .map(|(k, &(dx, dy))| ((x + dx) % px + (y + dy) % py * px, k))
                .filter(|&(t, _)| t != me)
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Whether `local` (rank `me`'s elements, `elems` per slot) holds, in
/// every slot some origin writes to in `pattern`, that origin's `bytes` of
/// epoch `last` (the check of `fence` and of its MPI twin).
pub(crate) fn fence_data_ok(
    pattern: &str,
    me: usize,
    n: usize,
    local: &[u64],
    elems: usize,
    bytes: usize,
    last: usize,
) -> bool {
    (0..n).all(|o| {
        targets(pattern, o, n).iter().all(|&(t, slot)| {
            t != me
                || local[slot * elems..slot * elems + bytes / 8]
                    .iter()
                    .all(|&v| v == tag(o, last))
        })
    })
}

/// Whether `local` (rank `me`'s elements) holds the last put of each of
/// the `c` contenders whose target is `me` (the check of `lock` and of its
/// MPI twin).
pub(crate) fn lock_data_ok(
    target: &dyn Fn(usize) -> usize,
    c: usize,
    me: usize,
    local: &[u64],
    elems: usize,
    bytes: usize,
    last: usize,
) -> bool {
    (0..c).all(|o| {
        target(o) != me
            || local[o * elems..o * elems + bytes / 8]
                .iter()
                .all(|&v| v == tag(o, last))
    })
}

/// The value origin `o` puts in epoch `it`.
pub(crate) fn tag(o: usize, it: usize) -> u64 {
    ((o as u64) << 40) | (it as u64 + 1)
}

/// `fence`: time per epoch (the puts of the pattern, then a fence), on
/// rank 0, for each pattern, design and size (bytes per put).
pub fn fence(b: &Bench, sizes: &[usize], patterns: &[String], designs: &[String]) -> Vec<Row> {
    let ctx = b.ctx;
    let (me, n) = (ctx.rank() as usize, ctx.num_ranks() as usize);
    let mut rows = Vec::new();
    for pattern in patterns {
        let sizes: &[usize] = if pattern == "zero" { &[0] } else { sizes };
        for &bytes in sizes {
            let elems = bytes.div_ceil(8).max(1);
            for d in designs {
                let win = window(b, d, 8 * elems);
                let out = targets(pattern, me, n);
                let mut data = vec![0u64; elems];
                win.fence(Assert::NOPRECEDE, B).expect("fence");
                let mut epoch = |it: usize| {
                    data.fill(tag(me, it));
                    for &(t, slot) in &out {
                        win.put(&data[..bytes / 8], t as Rank, slot * elems)
                            .expect("put");
                    }
                    win.fence(Assert::NONE, B).expect("fence");
                };
                let reps = b.reps(bytes.max(64), 2_000, 64 << 20);
                (0..reps / 10).for_each(&mut epoch);
                let samples = b.batches(reps, 1.0, |i| epoch(reps / 10 + i));
                // The last epoch's data: every slot some origin writes to me.
                let last = reps / 10 + reps - 1;
                let ok = fence_data_ok(pattern, me, n, &win.local().to_vec(), elems, bytes, last);
                win.fence(Assert::NOSUCCEED, B).expect("fence");
                let verified = b.all_ok(ok);
                let samples = if me == 0 { samples } else { Vec::new() };
                let imp = format!("{pattern}:{d}");
                rows.push(b.row("fence", &imp, bytes, reps, samples, verified));
            }
        }
    }
    rows
}

/// Busy computation for `d` (the "compute" of an overlap test).
fn compute(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Compute (spin) until the `c` flags from element `flags` of this rank's
/// part of `win` are all set, looking at them between 10 us slices of
/// computation by plain loads: nothing here calls the library.
fn compute_until_done(win: &RmaWindow<u64>, flags: usize, c: usize) {
    let view = win.local().sub(flags..flags + c);
    let words = view.atomic_u64s().expect("the flags are aligned u64");
    while words.iter().any(|w| w.load(Ordering::Acquire) == 0) {
        compute(Duration::from_micros(10));
    }
}

/// `fence-overlap`: each rank puts `bytes` to its right neighbour, computes,
/// then fences. Rows per design and size: the epoch without computation,
/// and with as much computation as that epoch takes; the overlap
/// (comm + compute - total) / comm, as a percentage, is in the impl name.
pub fn fence_overlap(b: &Bench, sizes: &[usize], designs: &[String]) -> Vec<Row> {
    let ctx = b.ctx;
    let (me, n) = (ctx.rank() as usize, ctx.num_ranks() as usize);
    let right = ((me + 1) % n) as Rank;
    let left = (me + n - 1) % n;
    let mut rows = Vec::new();
    for &bytes in sizes {
        let elems = bytes.div_ceil(8).max(1);
        for d in designs {
            let win = window(b, d, elems);
            let mut data = vec![0u64; elems];
            let reps = b.reps(bytes, 1_000, 64 << 20);
            win.fence(Assert::NOPRECEDE, B).expect("fence");
            let mut it = 0;
            let mut run = |work: Duration| {
                let s = b.batches(reps, 1.0, |_| {
                    it += 1;
                    data.fill(tag(me, it));
                    win.put(&data, right, 0).expect("put");
                    compute(work);
                    win.fence(Assert::NONE, B).expect("fence");
                });
                let ok = win.local().to_vec().iter().all(|&v| v == tag(left, it));
                (s, ok)
            };
            run(Duration::ZERO);
            let (comm, ok1) = run(Duration::ZERO);
            // Everyone computes as long as rank 0's epoch took.
            let mut t = [median(&comm)];
            let mut out = [0f64];
            ctx.allreduce(&t, &mut out, gaspi::ReduceOp::Max, GroupId::ALL, B)
                .expect("allreduce");
            t[0] = out[0];
            let (total, ok2) = run(Duration::from_secs_f64(t[0] * 1e-6));
            win.fence(Assert::NOSUCCEED, B).expect("fence");
            let verified = b.all_ok(ok1 && ok2);
            let (c, tot) = (t[0], median(&total));
            let overlap = ((2.0 * c - tot) / c * 100.0).clamp(0.0, 100.0);
            let keep = |s: Vec<f64>| if me == 0 { s } else { Vec::new() };
            rows.push(b.row(
                "fence-overlap",
                &format!("{d}:comm"),
                bytes,
                reps,
                keep(comm),
                verified,
            ));
            let imp = format!("{d}:comm+compute:overlap={overlap:.0}%");
            rows.push(b.row("fence-overlap", &imp, bytes, reps, keep(total), verified));
        }
    }
    rows
}

/// `lock`: ranks `0..c` (the contenders) each run `lock + put of bytes +
/// unlock` (or `lock_all + put + unlock_all`) in a loop; the time per
/// iteration on rank 0, for each mode, contender count, size and lock
/// design (impl `design:mode:cC`). Each contender puts into a slot of its
/// own at its target; the last iteration's data is checked.
///
/// With `compute`, the other ranks (the targets among them) compute
/// meanwhile, calling nothing of the library, until every contender has
/// put its "done" flag into their windows (impl `design:mode:cC:compute`).
/// That is the passive target of MPI-3 RMA: between hosts of the MPI
/// engine only the target's relay thread serves it.
pub fn lock(
    b: &Bench,
    sizes: &[usize],
    designs: &[String],
    modes: &[String],
    contenders: &[usize],
    compute: bool,
) -> Vec<Row> {
    let ctx = b.ctx;
    let (me, n) = (ctx.rank() as usize, ctx.num_ranks() as usize);
    let mut rows = Vec::new();
    for mode in modes {
        let target = |i: usize| match mode.as_str() {
            "excl-distinct" => (i + 1) % n,
            _ => n - 1,
        };
        for &c in contenders.iter().filter(|&&c| (1..=n).contains(&c)) {
            for &bytes in sizes {
                let elems = bytes.div_ceil(8).max(1);
                for d in designs {
                    let lock = if d == "mcs-rw" {
                        LockDesign::McsRw
                    } else {
                        LockDesign::TwoLevel
                    };
                    let opts = RmaOptions {
                        lock,
                        ..Default::default()
                    };
                    // The contenders' slots, then one "done" flag per
                    // rank (the window starts zeroed).
                    let flags = n * elems;
                    let win = RmaWindow::<u64>::with_options(
                        ctx,
                        WINDOW,
                        flags + n,
                        GroupId::ALL,
                        opts,
                        B,
                    )
                    .expect("RmaWindow");
                    let mut data = vec![0u64; elems];
                    let t = target(me) as Rank;
                    let epoch = mode == "put-flush";
                    let mut one = |it: usize| {
                        data.fill(tag(me, it));
                        if epoch {
                            win.put(&data[..bytes / 8], t, me * elems).expect("put");
                            return win.flush(t).expect("flush");
                        }
                        match mode.as_str() {
                            "lock-all" => win.lock_all(Assert::NONE, B).expect("lock_all"),
                            "shared-same" => win
                                .lock(LockType::Shared, t, Assert::NONE, B)
                                .expect("lock"),
                            _ => win
                                .lock(LockType::Exclusive, t, Assert::NONE, B)
                                .expect("lock"),
                        }
                        win.put(&data[..bytes / 8], t, me * elems).expect("put");
                        match mode.as_str() {
                            "lock-all" => win.unlock_all().expect("unlock_all"),
                            _ => win.unlock(t).expect("unlock"),
                        }
                    };
                    let reps = b.reps(bytes.max(64), 5_000, 64 << 20);
                    b.barrier();
                    let samples = if me < c {
                        if epoch {
                            win.lock_all(Assert::NONE, B).expect("lock_all");
                        }
                        (0..reps / 10).for_each(&mut one);
                        let s = b.batches(reps, 1.0, |i| one(reps / 10 + i));
                        if epoch {
                            win.unlock_all().expect("unlock_all");
                        }
                        if compute {
                            win.lock_all(Assert::NONE, B).expect("lock_all");
                            for r in c..n {
                                win.put(&[1], r as Rank, flags + me).expect("put");
                            }
                            win.unlock_all().expect("unlock_all");
                        }
                        s
                    } else {
                        if compute {
                            compute_until_done(&win, flags, c);
                        }
                        Vec::new()
                    };
                    b.barrier();
                    let last = reps / 10 + reps - 1;
                    let ok =
                        lock_data_ok(&target, c, me, &win.local().to_vec(), elems, bytes, last);
                    let verified = b.all_ok(ok);
                    let samples = if me == 0 { samples } else { Vec::new() };
                    let busy = if compute { ":compute" } else { "" };
                    rows.push(b.row(
                        "lock",
                        &format!("{d}:{mode}:c{c}{busy}"),
                        bytes,
                        reps,
                        samples,
                        verified,
                    ));
                }
            }
        }
    }
    rows
}

/// The broadcast implementations `--impl` can name for `bcast`.
pub const BCAST_IMPLS: [&str; 3] = ["linear", "binomial", "node"];

/// `bcast`: rank 0 broadcasts `bytes` into every member's window (or node
/// copy) and waits until all have it (`bcast` + `flush`); time per
/// broadcast on rank 0, for each size and implementation. Every rank
/// checks the last broadcast's data.
pub fn bcast(b: &Bench, sizes: &[usize], impls: &[String]) -> Vec<Row> {
    let ctx = b.ctx;
    let me = ctx.rank() as usize;
    let max = sizes.iter().copied().max().unwrap_or(8);
    let elems = max.div_ceil(8).max(1);
    let win = RmaWindow::<u64>::new(ctx, WINDOW, elems, GroupId::ALL, B).expect("RmaWindow");
    let pattern = |i: usize| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rows = Vec::new();
    win.broadcaster(CONTROL, B, |bc| {
        for &bytes in sizes {
            let n = bytes / 8;
            let mut data: Vec<u64> = (0..n).map(pattern).collect();
            for imp in impls {
                let how = match imp.as_str() {
                    "linear" => BcastImpl::Linear,
                    "node" => BcastImpl::Node,
                    _ => BcastImpl::Binomial,
                };
                let reps = b.reps(bytes.max(64), 2_000, 256 << 20);
                let before = bc.received().expect("received");
                b.barrier();
                let samples = if me == 0 {
                    let mut one = |it: usize| {
                        if let Some(first) = data.first_mut() {
                            *first = tag(0, it);
                        }
                        bc.bcast(&data, 0, how, B).expect("bcast");
                        bc.flush(B).expect("flush");
                    };
                    (0..reps / 10).for_each(&mut one);
                    b.batches(reps, 1.0, |i| one(reps / 10 + i))
                } else {
                    Vec::new()
                };
                // Rank 0's flushes mean every rank has every broadcast; the
                // others wait in a barrier, not on the counters the relays
                // change (each change would wake them).
                b.barrier();
                let all_in = bc.received().expect("received") == before + (reps / 10 + reps) as u64;
                let got = match how {
                    BcastImpl::Node => bc.node_copy().to_vec(),
                    _ => win.local().to_vec(),
                };
                let last = reps / 10 + reps - 1;
                let ok = all_in
                    && (0..n).all(|i| got[i] == if i == 0 { tag(0, last) } else { pattern(i) });
                let verified = b.all_ok(ok);
                rows.push(b.row("bcast", imp, bytes, reps, samples, verified));
            }
        }
    })
    .expect("broadcaster");
    rows
}

/// For each size of a `bcast` run, the fastest implementation, and the
/// smallest size from which binomial (and node) beat linear.
pub fn bcast_crossover(rows: &[Row]) -> Vec<String> {
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.bytes).collect();
    sizes.dedup();
    let time = |imp: &str, bytes: usize| {
        rows.iter()
            .find(|r| r.imp == imp && r.bytes == bytes)
            .map(Row::median)
    };
    let mut out = Vec::new();
    for imp in ["binomial", "node"] {
        let beats =
            |t: usize| matches!((time(imp, t), time("linear", t)), (Some(a), Some(l)) if a < l);
        let from = (0..sizes.len()).find(|&i| sizes[i..].iter().all(|&t| beats(t)));
        if time(imp, sizes[0]).is_some() && time("linear", sizes[0]).is_some() {
            out.push(match from {
                Some(i) => format!("{imp} beats linear from {} bytes on", sizes[i]),
                None => format!("{imp} never beats linear at every larger size"),
            });
        }
    }
    out
}

fn median(s: &[f64]) -> f64 {
    let mut v = s.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
