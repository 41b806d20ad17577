//! Helpers shared by the integration tests.
#![allow(dead_code)]

use gaspi::launcher::{Binding, Report};
use gaspi::{
    Alloc, Context, Error, GroupId, Notification, ReduceOp, SegmentId, SegmentView, Timeout,
};

/// How many times a test repeats its calls or rounds: `native`, or
/// `across` where the tests are trimmed ([`gaspi::testing::trimmed`]: on an
/// engine with a transport between hosts, where every job and every
/// message between emulated hosts costs far more; CI runs whole files
/// there on 2 cores).
pub fn repeats(native: usize, across: usize) -> usize {
    if gaspi::testing::trimmed() {
        across
    } else {
        native
    }
}

/// The job sizes of a test that runs several: all of `native`, or where
/// the tests are trimmed ([`gaspi::testing::trimmed`]) those of at most 4
/// ranks (the smallest if none is): across hosts every rank costs a start
/// through the transport (about a second of CPU on GPI-2 1.6, whose start
/// samples the clock in a busy loop).
pub fn job_sizes(native: &[usize]) -> Vec<usize> {
    if !gaspi::testing::trimmed() {
        return native.to_vec();
    }
    let few: Vec<usize> = native.iter().copied().filter(|&n| n <= 4).collect();
    if few.is_empty() {
        native.iter().copied().min().into_iter().collect()
    } else {
        few
    }
}

/// Byte `i` of the test pattern number `seed`: differs between seeds and
/// along the buffer, so misplaced or stale bytes show.
pub fn pattern(seed: u64, i: usize) -> u8 {
    let x =
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x ^ (x >> 29) ^ (i as u64 >> 8)) as u8
}

/// `len` bytes of pattern `seed`.
pub fn pattern_vec(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| pattern(seed, i)).collect()
}

/// Write pattern `seed` into `len` bytes at `off` of `view`.
pub fn fill(view: &SegmentView<u8>, off: usize, len: usize, seed: u64) {
    view.copy_from_slice(off, &pattern_vec(seed, len));
}

/// Assert that `len` bytes at `off` of `view` hold pattern `seed`.
pub fn check(view: &SegmentView<u8>, off: usize, len: usize, seed: u64, what: &str) {
    let mut got = vec![0u8; len];
    view.copy_to_slice(off, &mut got);
    if let Some(i) = (0..len).find(|&i| got[i] != pattern(seed, i)) {
        panic!(
            "{what}: byte {i} of {len} is {:#x}, expected {:#x} (pattern {seed})",
            got[i],
            pattern(seed, i)
        );
    }
}

/// Create segment `seg` of `size` bytes on every rank, zeroed.
pub fn segment(ctx: &Context, seg: SegmentId, size: usize) -> SegmentView<u8> {
    ctx.segment_create(seg, size, GroupId::ALL, Timeout::Block, Alloc::Initialized)
        .expect("segment_create");
    ctx.segment::<u8>(seg).expect("segment view")
}

/// Barrier over all ranks, blocking.
pub fn barrier(ctx: &Context) {
    ctx.barrier(GroupId::ALL, Timeout::Block).expect("barrier");
}

/// Every rank but 0 makes `call` (a collective call) with a 10 ms
/// timeout, which must time out since rank 0 has not come, and tells rank
/// 0 so (notification `rank` of segment `seg`, which must have ids
/// `1..ranks`); rank 0 waits until all have told it. Then the caller goes
/// on and retries the call.
pub fn others_time_out_before_rank_0(
    ctx: &Context,
    seg: SegmentId,
    call: impl FnOnce(Timeout) -> gaspi::Result<()>,
) {
    others_fail_before_rank_0(ctx, seg, call, |e| e.is_timeout());
}

/// [`others_time_out_before_rank_0`] for ranks that then give the call up
/// (drop the collective) each as soon as its own call failed: a rank still
/// in the call may find that a peer's segment is gone instead of timing out.
pub fn others_give_up_before_rank_0(
    ctx: &Context,
    seg: SegmentId,
    call: impl FnOnce(Timeout) -> gaspi::Result<()>,
) {
    others_fail_before_rank_0(ctx, seg, call, |e| {
        e.is_timeout()
            || matches!(
                e,
                Error::SegmentNotRegistered { .. } | Error::SegmentNotFound { .. }
            )
    });
}

fn others_fail_before_rank_0(
    ctx: &Context,
    seg: SegmentId,
    call: impl FnOnce(Timeout) -> gaspi::Result<()>,
    expected: impl Fn(&Error) -> bool,
) {
    let (n, me) = (ctx.num_ranks(), ctx.rank());
    if me != 0 {
        let e = call(Timeout::ms(10)).unwrap_err();
        assert!(expected(&e), "rank {me}: {e}");
        ctx.notify(
            0,
            seg,
            Notification::new(u32::from(me), 1),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.wait(0, Timeout::Block).unwrap();
    } else {
        for _ in 1..n {
            let id = ctx
                .notify_waitsome(seg, 1..u32::from(n), Timeout::Block)
                .unwrap();
            ctx.notify_reset(seg, id).unwrap();
        }
    }
}

/// The right and left neighbours of this rank on the ring of all ranks.
pub fn neighbours(ctx: &Context) -> (gaspi::Rank, gaspi::Rank) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    ((me + 1) % n, (me + n - 1) % n)
}

/// The children of process `pid` (`"self"`: this one), of each of its
/// threads: a rank's reaper is one.
pub fn children_of(pid: &str) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The objects in `/dev/shm` of job `token` (its control block and every
/// object named after it).
pub fn shm_objects_of(token: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(token))
        .collect()
}

/// Whether survivors may be stopped by the launcher before they learn of
/// a failure: on the MPI engine, where a rank alone on its host is seen
/// dead by the others only once its host stops answering pings (minutes:
/// MPI itself tells nothing), later than `gaspi-run` stops the others of a
/// job one rank of which died (docs/guide/mpi.md, "Differences from the
/// native and GPI-2 engines"). The failure must still be named, and nothing
/// left behind.
pub fn survivors_may_be_stopped() -> bool {
    std::env::var("GASPI_ENGINE").as_deref() == Ok("mpi")
}

/// The parent's side: the dead rank ended as expected, the others
/// succeeded (or, see [`survivors_may_be_stopped`], were stopped), and no
/// shared memory survived the job.
pub fn check_job(report: &Report, dead: usize, expect: impl Fn(std::process::ExitStatus) -> bool) {
    for o in &report.ranks {
        if o.rank as usize == dead {
            assert!(expect(o.status), "rank {dead} ended with {:?}", o.status);
        } else if survivors_may_be_stopped() && o.stopped_by_launcher {
            // Stopped while it waited for the news.
        } else {
            assert!(
                o.status.success() && !o.stopped_by_launcher,
                "survivor {} ended with {:?}",
                o.rank,
                o.status
            );
        }
    }
    assert_eq!(report.first_failure().map(|o| o.rank as usize), Some(dead));
    assert!(
        report.left_after_cleanup.is_empty(),
        "{:?}",
        report.left_after_cleanup
    );
}

/// The survivors of rank `dying`'s death leave together: a survivor
/// that finished its failing collectives must not end (and delete its
/// segments) while another one is still inside them, or that one would
/// see its own failure or a missing segment instead of the dead rank.
/// Rank 0 collects one notification from every survivor on ids 64.., then
/// releases them with id 63 (rank 0 must not be the dying rank).
pub fn leave_together(ctx: &gaspi::Context, dying: gaspi::Rank) {
    let n = ctx.num_ranks();
    // Waits fail while a failure is unacknowledged.
    assert_eq!(ctx.acknowledge_failures(), vec![dying]);
    let survivors = (0..n).filter(|&r| r != dying && r != 0);
    if ctx.rank() == 0 {
        for _ in survivors.clone() {
            ctx.notify_claim(0, 64..64 + n as u32, Timeout::Block)
                .unwrap();
        }
        for r in survivors {
            ctx.notify(r, 0, Notification::new(63, 1), 0, Timeout::Block)
                .unwrap();
        }
    } else {
        let me = Notification::new(64 + ctx.rank() as u32, 1);
        ctx.notify(0, 0, me, 0, Timeout::Block).unwrap();
        ctx.notify_claim(0, 63..64, Timeout::Block).unwrap();
    }
    ctx.wait(0, Timeout::Block).unwrap();
}

/// The CPUs this process (its calling thread) may run on.
pub fn allowed_cpus() -> Vec<usize> {
    let set = rustix::thread::sched_getaffinity(None).unwrap();
    (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c))
        .collect()
}

/// By rank of the job: the lowest and highest CPU it may run on.
pub fn cpu_spans(ctx: &Context) -> Vec<(u64, u64)> {
    let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
    let mine = allowed_cpus();
    // Each rank's lowest and highest CPU, plus one.
    let mut spans = vec![0u64; 2 * n];
    spans[2 * me] = mine[0] as u64 + 1;
    spans[2 * me + 1] = *mine.last().unwrap() as u64 + 1;
    ctx.allreduce(
        &spans.clone(),
        &mut spans,
        ReduceOp::Max,
        GroupId::ALL,
        Timeout::Block,
    )
    .unwrap();
    spans.chunks(2).map(|s| (s[0] - 1, s[1] - 1)).collect()
}

/// By rank of the job, by rank: whether both are bound to one and the
/// same CPU (a test's ranks are bound as `gaspi-run --bind block` binds
/// them: 4 ranks on 2 CPUs, ranks 0 and 1 on the first).
pub fn one_cpu_together(ctx: &Context) -> Vec<Vec<bool>> {
    let spans = cpu_spans(ctx);
    let single = |r: usize| spans[r].0 == spans[r].1;
    (0..spans.len())
        .map(|s| {
            (0..spans.len())
                .map(|t| single(s) && spans[s] == spans[t])
                .collect()
        })
        .collect()
}

/// Whether every rank of this rank's node is bound to one CPU, the same
/// ([`one_cpu_together`]); a collective call on every rank.
pub fn node_on_one_cpu(ctx: &Context) -> bool {
    let together = one_cpu_together(ctx);
    let me = ctx.rank() as usize;
    let mut node = ctx.node_ranks(ctx.node());
    node.all(|r| together[me][r as usize])
}

/// Jobs of nodes of 2 ranks (ranks, binding) whose nodes lie on one CPU
/// each or not: on 2 CPUs, `--bind block` puts each node of 2 on a CPU of
/// its own (in 4 nodes of 2, two nodes on each), `--bind spread` a rank
/// of each node on each CPU ([`node_on_one_cpu`] says which).
pub const NODES_OF_2_PLACED: [(usize, Binding); 3] = [
    (4, Binding::Block),
    (4, Binding::Spread),
    (8, Binding::Block),
];
