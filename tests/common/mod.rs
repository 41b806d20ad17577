//! Helpers shared by the integration tests.
#![allow(dead_code)]

use gaspi::{Alloc, Context, Error, GroupId, Notification, SegmentId, SegmentView, Timeout};

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
