//! The benchmarks. Each runs on every rank of the job, measures on rank 0,
//! verifies the data it moved on every rank that received it, and returns
//! rows whose `verified` is the AND over all ranks.
//!
//! Times are taken per batch of operations (so that the clock costs
//! nothing against a 0.3 us operation) and reported per operation; the
//! statistics are over batches. Latencies are one way: half a round trip.

use crate::report::Row;
use gaspi::{
    Alloc, Context, GroupId, Local, Notification, Rank, ReduceOp, Remote, SegmentId, SegmentView,
    Timeout,
};
use std::cell::Cell;
use std::time::Instant;

const B: Timeout = Timeout::Block;

/// What every benchmark gets.
pub struct Bench<'a> {
    pub ctx: &'a Context,
    pub ppn: usize,
    /// Repetitions per size (`--iters`), or the benchmark's default.
    pub iters: Option<usize>,
    /// Options of the node-window allreduce (`--replicate-max`, `--node-replicate-max`, `--ring-min`).
    pub allreduce: gaspi::AllreduceOptions,
    /// Options of the alltoallv (`--single-copy-min`, `--direct-min`).
    pub alltoallv: gaspi::AlltoallvOptions,
    /// Whether [`Bench::batches`] times every call on its own (`--per-op`).
    pub per_op: bool,
}

/// Number of batches the repetitions of one size are cut into.
pub const BATCHES: usize = 25;

impl Bench<'_> {
    fn me(&self) -> Rank {
        self.ctx.rank()
    }

    fn procs(&self) -> usize {
        self.ctx.num_ranks() as usize
    }

    /// Repetitions for messages of `bytes`: `--iters`, or `default`
    /// shrunk so that one size moves at most `budget` bytes.
    pub fn reps(&self, bytes: usize, default: usize, budget: usize) -> usize {
        let r = self
            .iters
            .unwrap_or_else(|| default.min(budget / bytes.max(1)).max(BATCHES));
        r.div_ceil(BATCHES) * BATCHES
    }

    pub fn row(
        &self,
        bench: &'static str,
        imp: &str,
        bytes: usize,
        reps: usize,
        samples: Vec<f64>,
        verified: bool,
    ) -> Row {
        Row {
            bench,
            imp: imp.to_string(),
            procs: self.procs(),
            ppn: self.ppn,
            bytes,
            reps,
            samples,
            bw_bytes: 0,
            verified,
            vs_mpi: None,
        }
    }

    /// Time `reps` calls of `op` in `BATCHES` batches (or each on its own
    /// under `--per-op`); microseconds per call (divided by `per_call`, e.g. 2
    /// for a round trip) for each batch.
    pub fn batches(&self, reps: usize, per_call: f64, mut op: impl FnMut(usize)) -> Vec<f64> {
        let (count, per) = if self.per_op {
            (reps, 1)
        } else {
            (BATCHES, reps / BATCHES)
        };
        let mut samples = Vec::with_capacity(count);
        let mut i = 0;
        for _ in 0..count {
            let t0 = Instant::now();
            for _ in 0..per {
                op(i);
                i += 1;
            }
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / (per as f64 * per_call));
        }
        samples
    }

    /// AND of `ok` over all ranks.
    pub fn all_ok(&self, ok: bool) -> bool {
        let mut out = [0u32];
        self.ctx
            .allreduce(&[ok as u32], &mut out, ReduceOp::Min, GroupId::ALL, B)
            .expect("allreduce of the verification flags");
        out[0] == 1
    }

    pub fn barrier(&self) {
        self.ctx.barrier(GroupId::ALL, B).expect("barrier");
    }

    /// Create segment 0 of `size` bytes on every rank.
    fn segment(&self, size: usize) -> SegmentView<u8> {
        let ctx = self.ctx;
        if ctx.segment_list().contains(&0) {
            ctx.segment_delete(0).expect("segment_delete");
        }
        ctx.segment_create(0, size, GroupId::ALL, B, Alloc::Initialized)
            .expect("segment_create");
        let v = ctx.segment::<u8>(0).expect("segment view");
        v.fill(0); // touch every page before timing...
        self.barrier(); // ...and before anyone writes into it
        v
    }
}

impl Bench<'_> {
    /// Segment 0 with a send area at offset 0 and a receive area (at the
    /// returned offset), each large enough for the largest of `sizes`.
    fn buffers(&self, sizes: &[usize]) -> (SegmentView<u8>, usize) {
        let max = *sizes.iter().max().unwrap_or(&8);
        (self.segment(2 * max + 4096), max + 4096)
    }
}

/// The byte that marks iteration `i` at both ends of a message, so that a
/// stale or partial message shows.
fn stamp(view: &SegmentView<u8>, off: usize, size: usize, i: usize) {
    let b = (i % 251) as u8 + 1;
    view.set(off, b);
    view.set(off + size - 1, b);
}

fn stamped(view: &SegmentView<u8>, off: usize, size: usize, i: usize) -> bool {
    let b = (i % 251) as u8 + 1;
    view.get(off) == b && view.get(off + size - 1) == b
}

/// Byte `i` of the verification pattern of `seed`.
fn pattern(seed: usize, i: usize) -> u8 {
    (seed
        .wrapping_mul(131)
        .wrapping_add(i.wrapping_mul(7))
        .wrapping_add(i >> 9)
        % 253) as u8
}

fn fill_pattern(view: &SegmentView<u8>, off: usize, size: usize, seed: usize) {
    let v: Vec<u8> = (0..size).map(|i| pattern(seed, i)).collect();
    view.copy_from_slice(off, &v);
}

fn has_pattern(view: &SegmentView<u8>, off: usize, size: usize, seed: usize) -> bool {
    let mut v = vec![0u8; size];
    view.copy_to_slice(off, &mut v);
    v.iter().enumerate().all(|(i, &b)| b == pattern(seed, i))
}

/// Write `size` bytes from the send area (offset 0) to `recv` on `to`,
/// with notification `id`, and complete the queue.
fn send(ctx: &Context, to: Rank, recv: usize, size: usize, id: u32) {
    ctx.write_notify(
        Local::new(0, 0),
        Remote::new(to, 0, recv),
        size,
        Notification::new(id, 1),
        0,
        B,
    )
    .expect("write_notify");
    ctx.wait(0, B).expect("wait");
}

/// Wait for notification `id` and take it.
fn take(ctx: &Context, id: u32) {
    let got = ctx.notify_waitsome(0, id..id + 1, B).expect("waitsome");
    ctx.notify_reset(0, got).expect("reset");
}

/// Send a whole pattern message from rank 0 to rank 1 (or back) and check
/// every byte on arrival: the full verification after a timed loop.
fn exchange_pattern(
    b: &Bench,
    view: &SegmentView<u8>,
    size: usize,
    recv: usize,
    from: Rank,
    to: Rank,
    id: u32,
) -> bool {
    let ctx = b.ctx;
    let mut ok = true;
    if b.me() == from {
        fill_pattern(view, 0, size, size + id as usize);
        send(ctx, to, recv, size, id);
    }
    if b.me() == to {
        take(ctx, id);
        ok = has_pattern(view, recv, size, size + id as usize);
    }
    ok
}

/// Ping-pong of `size`-byte write_notify + notify_waitsome between rank 0
/// and `peer`: rank 0's one-way times per batch, and whether every message
/// arrived whole (each rank's own verdict).
fn ping_pong(
    b: &Bench,
    view: &SegmentView<u8>,
    recv: usize,
    size: usize,
    peer: Rank,
    reps: usize,
) -> (Vec<f64>, bool) {
    let ctx = b.ctx;
    let ok = Cell::new(true);
    // Send message `i` to `to`'s notification `id`; take message `i` from ours.
    let post = |to: Rank, id: u32, i: usize| {
        stamp(view, 0, size, i);
        send(ctx, to, recv, size, id);
    };
    let receive = |id: u32, i: usize| {
        take(ctx, id);
        ok.set(ok.get() & stamped(view, recv, size, i));
    };
    let ping = |i: usize| {
        post(peer, 0, i);
        receive(1, i);
    };
    let pong = |i: usize| {
        receive(0, i);
        post(0, 1, i);
    };
    b.barrier();
    let mut samples = Vec::new();
    let warm = reps / 10;
    if b.me() == 0 {
        (0..warm).for_each(ping);
        samples = b.batches(reps, 2.0, |i| ping(warm + i));
    } else if b.me() == peer {
        (0..warm + reps).for_each(pong);
    }
    (
        samples,
        ok.get() & exchange_pattern(b, view, size, recv, 0, peer, 7),
    )
}

/// `write-notify-lat`: ping-pong of write_notify + notify_waitsome between
/// ranks 0 and 1; one-way latency.
pub fn write_notify_lat(b: &Bench, sizes: &[usize]) -> Vec<Row> {
    let (view, recv) = b.buffers(sizes);
    let mut rows = Vec::new();
    for &size in sizes {
        let reps = b.reps(size, 20_000, 2 << 30);
        let (samples, ok) = ping_pong(b, &view, recv, size, 1, reps);
        let verified = b.all_ok(ok);
        rows.push(b.row("write-notify-lat", "gaspi", size, reps, samples, verified));
    }
    rows
}

/// `put-lat-distance` (Zhou et al. 2015, figures 3-4): the write_notify ping-pong
/// from rank 0 to every other rank in turn; `impl` names the target and
/// whether it is on rank 0's node (`intra:3`) or not (`inter:5`).
pub fn put_lat_distance(b: &Bench, sizes: &[usize]) -> Vec<Row> {
    let ctx = b.ctx;
    let (view, recv) = b.buffers(sizes);
    let mut rows = Vec::new();
    for peer in 1..ctx.num_ranks() {
        let place = if ctx.node_of(peer) == ctx.node_of(0) {
            "intra"
        } else {
            "inter"
        };
        for &size in sizes {
            let reps = b.reps(size, 5_000, 1 << 30);
            let (samples, ok) = ping_pong(b, &view, recv, size, peer, reps);
            let verified = b.all_ok(ok);
            let imp = format!("{place}:{peer}");
            rows.push(b.row("put-lat-distance", &imp, size, reps, samples, verified));
        }
    }
    rows
}

/// Nanoseconds on the machine's clock, which every rank of a job on one
/// machine shares: one-way times can be taken across processes.
fn clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `shared-notify-lat`: rank 0 write_notifies 16 bytes (its clock and the
/// message number) into the window of node 1, addressed to a different
/// rank of node 1 each time; all ranks of node 1 race to claim it; the
/// winner takes the time (one way, on the shared clock), checks the
/// payload, and returns the time to rank 0 with its acknowledgement.
pub fn shared_notify_lat(b: &Bench) -> Vec<Row> {
    const WIN: SegmentId = 1;
    let ctx = b.ctx;
    let reps = b.reps(16, 20_000, usize::MAX);
    let warm = reps / 10;
    let total = (warm + reps) as u64;
    b.segment(64);
    if ctx.segment_list().contains(&WIN) {
        ctx.segment_delete(WIN).expect("segment_delete");
    }
    let win = ctx
        .window_create(WIN, 64, GroupId::ALL, B)
        .expect("window_create")
        .view::<u64>();
    let words = ctx.segment::<u64>(0).expect("view");
    let node1 = ctx.node_ranks(1);
    let mut ok = true;
    let mut samples = Vec::new();
    b.barrier();
    if b.me() == 0 {
        for i in 0..total {
            // Words 1-2 of segment 0: the message; word 0: the answer.
            let slot = (i % 2) as usize;
            words.set(2, i + 1);
            words.set(1, clock_ns());
            let to = node1.start + (i % node1.len() as u64) as Rank;
            ctx.write_notify(
                Local::new(0, 8),
                Remote::new(to, WIN, 16 * slot),
                16,
                Notification::new(slot as u32, i as u32 + 1),
                0,
                B,
            )
            .expect("write_notify");
            ctx.wait(0, B).expect("wait");
            take(ctx, 0);
            if i >= warm as u64 {
                samples.push(words.get(0) as f64 / 1000.0);
            }
        }
    } else if node1.contains(&b.me()) {
        while let Some((id, v)) = ctx
            .notify_claim_until(WIN, 0..2, total, B)
            .expect("notify_claim_until")
        {
            let t1 = clock_ns();
            let (t0, n) = (win.get(2 * id as usize), win.get(2 * id as usize + 1));
            ok &= n == v as u64 && id as u64 == (n - 1) % 2 && t0 <= t1;
            words.set(0, t1.saturating_sub(t0));
            send(ctx, 0, 0, 8, 0);
        }
    }
    let verified = b.all_ok(ok);
    vec![b.row("shared-notify-lat", "gaspi", 16, reps, samples, verified)]
}

/// `write-bw`: rank 0 streams writes of one size to rank 1, which
/// acknowledges each batch; beside it, single-thread memcpy of the same
/// size on rank 0, batch by batch in the same run.
pub fn write_bw(b: &Bench, sizes: &[usize]) -> Vec<Row> {
    let ctx = b.ctx;
    let (view, recv) = b.buffers(sizes);
    let depth = ctx.queue_size_max() as usize;
    let mut rows = Vec::new();
    for &size in sizes {
        let reps = b.reps(size, 2000, 4 << 30);
        let per = reps / BATCHES;
        let mut local = vec![0u8; size];
        fill_pattern(&view, 0, size, 1);
        b.barrier();
        let (mut gaspi, mut memcpy) = (Vec::new(), Vec::new());
        for batch in 0..=BATCHES {
            // Batch 0 warms up and is not recorded.
            match b.me() {
                0 => {
                    let t0 = Instant::now();
                    for _ in 0..per {
                        view.copy_to_slice(0, &mut local);
                    }
                    let t_copy = t0.elapsed().as_secs_f64() * 1e6 / per as f64;
                    std::hint::black_box(&local);
                    let t0 = Instant::now();
                    for k in 0..per {
                        if k % depth == depth - 1 {
                            ctx.wait(0, B).expect("wait");
                        }
                        ctx.write(Local::new(0, 0), Remote::new(1, 0, recv), size, 0, B)
                            .expect("write");
                    }
                    send(ctx, 1, recv, 0, 0); // a notification: the batch is done
                    take(ctx, 1);
                    let t_write = t0.elapsed().as_secs_f64() * 1e6 / per as f64;
                    if batch > 0 {
                        memcpy.push(t_copy);
                        gaspi.push(t_write);
                    }
                }
                1 => {
                    take(ctx, 0);
                    send(ctx, 0, recv, 0, 1); // acknowledge the batch
                }
                _ => {}
            }
        }
        let ok = exchange_pattern(b, &view, size, recv, 0, 1, 3);
        let copy_ok = b.me() != 0 || local.iter().enumerate().all(|(i, &x)| x == pattern(1, i));
        let verified = b.all_ok(ok);
        let copy_verified = b.all_ok(copy_ok);
        rows.push(
            b.row("write-bw", "memcpy", size, reps, memcpy, copy_verified)
                .with_bandwidth(),
        );
        rows.push(
            b.row("write-bw", "gaspi", size, reps, gaspi, verified)
                .with_bandwidth(),
        );
    }
    rows
}

/// `read-lat`: rank 0 reads from rank 1 and waits for the read to
/// complete.
pub fn read_lat(b: &Bench, sizes: &[usize]) -> Vec<Row> {
    let ctx = b.ctx;
    let (view, recv) = b.buffers(sizes);
    let mut rows = Vec::new();
    for &size in sizes {
        let reps = b.reps(size, 20_000, 2 << 30);
        if b.me() == 1 {
            fill_pattern(&view, 0, size, size);
        }
        b.barrier();
        let mut ok = true;
        let mut samples = Vec::new();
        if b.me() == 0 {
            let mut read = |_: usize| {
                ctx.read(Local::new(0, recv), Remote::new(1, 0, 0), size, 0, B)
                    .expect("read");
                ctx.wait(0, B).expect("wait");
            };
            (0..reps / 10).for_each(&mut read);
            samples = b.batches(reps, 1.0, read);
            ok = has_pattern(&view, recv, size, size);
        }
        let verified = b.all_ok(ok);
        rows.push(b.row("read-lat", "gaspi", size, reps, samples, verified));
    }
    rows
}

/// `passive-lat`: ping-pong of passive_send + passive_receive between
/// ranks 0 and 1; one-way latency. Every message is checked (sender,
/// length, stamps), then one whole pattern per size.
pub fn passive_lat(b: &Bench, sizes: &[usize]) -> Vec<Row> {
    let ctx = b.ctx;
    let (view, recv) = b.buffers(sizes);
    let mut rows = Vec::new();
    for &size in sizes {
        let reps = b.reps(size, 5_000, 1 << 30);
        let ok = Cell::new(true);
        let post = |to: Rank, i: usize| {
            stamp(&view, 0, size, i);
            ctx.passive_send(Local::new(0, 0), to, size, B)
                .expect("passive_send");
        };
        let receive = |from: Rank, i: usize| {
            let got = ctx
                .passive_receive(Local::new(0, recv), size, B)
                .expect("passive_receive");
            ok.set(ok.get() & (got == (from, size)) & stamped(&view, recv, size, i));
        };
        b.barrier();
        let mut samples = Vec::new();
        let warm = reps / 10;
        if b.me() == 0 {
            let ping = |i: usize| {
                post(1, i);
                receive(1, i);
            };
            (0..warm).for_each(ping);
            samples = b.batches(reps, 2.0, |i| ping(warm + i));
            fill_pattern(&view, 0, size, size);
            ctx.passive_send(Local::new(0, 0), 1, size, B)
                .expect("passive_send");
        } else if b.me() == 1 {
            for i in 0..warm + reps {
                receive(0, i);
                post(0, i);
            }
            let got = ctx
                .passive_receive(Local::new(0, recv), size, B)
                .expect("passive_receive");
            ok.set(ok.get() & (got == (0, size)) & has_pattern(&view, recv, size, size));
        }
        let verified = b.all_ok(ok.get());
        rows.push(b.row("passive-lat", "gaspi", size, reps, samples, verified));
    }
    rows
}

/// `atomic-lat`: rank 0 runs fetch_add on a word of rank 1; every returned
/// old value must be the previous one plus one.
pub fn atomic_lat(b: &Bench) -> Vec<Row> {
    let ctx = b.ctx;
    b.segment(4096);
    let reps = b.reps(8, 20_000, usize::MAX);
    b.barrier();
    let mut ok = true;
    let mut samples = Vec::new();
    if b.me() == 0 {
        let word = Remote::new(1, 0, 64);
        let mut expect = 0u64;
        let mut add = |_: usize| {
            let old = ctx.atomic_fetch_add(word, 1, B).expect("fetch_add");
            ok &= old == expect;
            expect += 1;
        };
        (0..reps / 10).for_each(&mut add);
        samples = b.batches(reps, 1.0, add);
    }
    let verified = b.all_ok(ok);
    vec![b.row("atomic-lat", "gaspi", 8, reps, samples, verified)]
}

/// Check that a barrier separates writes before it from reads after it:
/// every rank writes `round` into its slot on every rank, then reads all.
fn barrier_orders_writes(b: &Bench, view: &SegmentView<u8>) -> bool {
    let ctx = b.ctx;
    let n = b.procs();
    let words = ctx.segment::<u64>(0).expect("view");
    let mut ok = true;
    for round in 1..=5u64 {
        words.set(n, round);
        for t in 0..n as Rank {
            ctx.write(
                Local::new(0, 8 * n),
                Remote::new(t, 0, 8 * b.me() as usize),
                8,
                0,
                B,
            )
            .expect("write");
        }
        ctx.wait(0, B).expect("wait");
        b.barrier();
        ok &= (0..n).all(|r| words.get(r) == round);
        b.barrier();
    }
    let _ = view;
    ok
}

/// `barrier`: time per barrier over all ranks, as seen by rank 0 (`impl`
/// `gaspi`); with several nodes also the node barrier (`gaspi-node`).
pub fn barrier(b: &Bench) -> Vec<Row> {
    let ctx = b.ctx;
    let view = b.segment(4096 + 8 * b.procs());
    let reps = b.reps(0, 20_000, usize::MAX);
    // GroupId::ALL (node-aware with several nodes), a group of the same
    // ranks (one shared counter: flat), and the node's group.
    let flat = ctx.group_create().expect("group_create");
    for r in 0..ctx.num_ranks() {
        ctx.group_add(flat, r).expect("group_add");
    }
    ctx.group_commit(flat, B).expect("group_commit");
    let mut groups = vec![("gaspi", GroupId::ALL), ("gaspi-flat", flat)];
    if ctx.num_nodes() > 1 {
        groups.push(("gaspi-node", ctx.node_group()));
    }
    let ok = barrier_orders_writes(b, &view);
    let verified = b.all_ok(ok);
    let mut rows = Vec::new();
    for (imp, group) in groups {
        let barrier = || ctx.barrier(group, B).expect("barrier");
        b.barrier();
        (0..reps / 10).for_each(|_| barrier());
        let samples = b.batches(reps, 1.0, |_| barrier());
        let samples = if b.me() == 0 { samples } else { Vec::new() };
        rows.push(b.row("barrier", imp, 0, reps, samples, verified));
    }
    ctx.group_delete(flat).expect("group_delete");
    rows
}
