//! Groups, barrier and allreduce.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{
    Alloc, Allreduce, Config, Context, Error, GroupId, Local, Notification, Rank, ReduceOp,
    Reducible, Remote, Timeout, WaitMode,
};

/// Job sizes on one node, then (ranks, ranks per node) of several nodes,
/// where the barrier over all ranks is node-aware (a few of them on the
/// GPI-2 engine: [`gaspi::testing::layouts`]).
fn barrier_layouts() -> Vec<(usize, usize)> {
    gaspi::testing::layouts(&[
        (2, 2),
        (4, 4),
        (8, 8),
        (4, 2),
        (6, 2),
        (7, 1),
        (5, 2),
        (9, 3),
        (12, 1),
    ])
}

#[test]
fn barrier_orders_writes_before_and_after_it() {
    for (ranks, ppn) in barrier_layouts() {
        Job::new(&[ranks]).ppn(ppn).run(barrier_orders_writes);
    }
}

fn barrier_orders_writes(ctx: &Context) {
    {
        let seg = segment(ctx, 0, 8 * 64);
        let n = ctx.num_ranks() as usize;
        let me = ctx.rank() as usize;
        let words = ctx.segment::<u64>(0).unwrap();
        for round in 1..=50u64 {
            // Everyone writes round*100+me into slot [me] of every rank.
            words.set(n, round * 100 + me as u64);
            for t in 0..n as Rank {
                ctx.write(
                    Local::new(0, 8 * n),
                    Remote::new(t, 0, 8 * me),
                    8,
                    0,
                    Timeout::Block,
                )
                .unwrap();
            }
            ctx.wait(0, Timeout::Block).unwrap();
            barrier(ctx);
            for r in 0..n {
                assert_eq!(
                    words.get(r),
                    round * 100 + r as u64,
                    "round {round} slot {r}"
                );
            }
            barrier(ctx);
        }
        let _ = seg;
    }
}

#[test]
fn barrier_timeout_then_retry_completes_the_same_barrier() {
    for (ranks, ppn) in barrier_layouts() {
        Job::new(&[ranks]).ppn(ppn).run(barrier_timeout_then_retry);
    }
}

fn barrier_timeout_then_retry(ctx: &Context) {
    {
        segment(ctx, 0, 64);
        let n = ctx.num_ranks();
        if ctx.rank() != 0 {
            // Rank 0 holds back until everyone has timed out twice.
            assert!(
                ctx.barrier(GroupId::ALL, Timeout::Test)
                    .unwrap_err()
                    .is_timeout()
            );
            assert!(
                ctx.barrier(GroupId::ALL, Timeout::ms(20))
                    .unwrap_err()
                    .is_timeout()
            );
            // A different collective cannot start while the barrier is pending.
            let mut out = [0u32];
            assert!(matches!(
                ctx.allreduce(
                    &[1u32],
                    &mut out,
                    ReduceOp::Sum,
                    GroupId::ALL,
                    Timeout::Test
                ),
                Err(Error::ActiveCollective { .. })
            ));
            ctx.notify(
                0,
                0,
                Notification::new(ctx.rank() as u32, 1),
                0,
                Timeout::Block,
            )
            .unwrap();
            ctx.barrier(GroupId::ALL, Timeout::Block).unwrap();
        } else {
            for _ in 1..n {
                let id = ctx.notify_waitsome(0, 1..n as u32, Timeout::Block).unwrap();
                ctx.notify_reset(0, id).unwrap();
            }
            ctx.barrier(GroupId::ALL, Timeout::Block).unwrap();
        }
        // The state is consistent: further collectives work.
        let mut out = [0u32];
        ctx.allreduce(
            &[1u32],
            &mut out,
            ReduceOp::Sum,
            GroupId::ALL,
            Timeout::Block,
        )
        .unwrap();
        assert_eq!(out[0], n as u32);
        barrier(ctx);
    }
}

#[test]
fn collectives_and_waits_driven_by_test_calls_alone_complete() {
    // GPI-2's write_timeout, nb_barrier and nb_allreduce: a program that
    // calls with GASPI_TEST until the call succeeds. Each call must take
    // up where the last one stopped, not start again: across hosts on the
    // GPI-2 engine every barrier first reads back from the ranks written
    // to, and a read started anew at every try never returned (the queue
    // filled with reads nobody waited for).
    Job::new(&job_sizes(&[3, 4])).run(test_calls_alone);
}

/// Call `f` until it does not time out (within a minute).
fn until_done<T>(mut f: impl FnMut() -> gaspi::Result<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        match f() {
            Err(e) if e.is_timeout() => {
                let waited = start.elapsed();
                assert!(waited.as_secs() < 60, "no call succeeded in {waited:?}");
            }
            r => return r.unwrap(),
        }
    }
}

fn test_calls_alone(ctx: &Context) {
    let size = 1 << 20;
    let seg = segment(ctx, 0, size);
    let (right, left) = neighbours(ctx);
    let me = ctx.rank() as u64;
    let n = ctx.num_ranks() as u64;
    let queue = 1;
    let room = ctx.queue_size_max() - 24;
    for round in 0..40u64 {
        let block = 4096;
        let at = (round as usize % (size / 2 / block)) * block;
        fill(&seg, at, block, me * 1000 + round);
        if ctx.queue_size(queue).unwrap() > room {
            until_done(|| ctx.wait(queue, Timeout::Test));
            assert_eq!(ctx.queue_size(queue).unwrap(), 0);
        }
        until_done(|| {
            ctx.write(
                Local::new(0, at),
                Remote::new(right, 0, size / 2 + at),
                block,
                queue,
                Timeout::Test,
            )
        });
        until_done(|| ctx.wait(queue, Timeout::Test));
        // The barrier orders the write before what follows it.
        until_done(|| ctx.barrier(GroupId::ALL, Timeout::Test));
        check(
            &seg,
            size / 2 + at,
            block,
            left as u64 * 1000 + round,
            "write before a barrier",
        );
        let mut out = [0u64];
        until_done(|| {
            ctx.allreduce(
                &[me + round],
                &mut out,
                ReduceOp::Sum,
                GroupId::ALL,
                Timeout::Test,
            )
        });
        assert_eq!(out[0], n * (n - 1) / 2 + n * round);
        until_done(|| ctx.barrier(GroupId::ALL, Timeout::Test));
    }
    barrier(ctx);
}

#[test]
fn node_aware_barrier_sends_one_message_per_node_and_step_or_pair() {
    let all = [
        (4, 2),
        (6, 2),
        (7, 1),
        (11, 1),
        (9, 3),
        (5, 2),
        (16, 2),
        (8, 2),
    ];
    // The automatic wait mode, and the yielding one, in which ranks always
    // count as sharing cores (`GASPI_WAIT` in the environment overrides
    // both).
    // Across hosts (seconds per job; where trimmed) each layout runs in one
    // of the two modes, in turn.
    let env = std::env::var(gaspi::env::WAIT).ok();
    let across = gaspi::testing::trimmed();
    for (m, mode) in [WaitMode::Auto, WaitMode::Yield].into_iter().enumerate() {
        let effective = env.as_deref().and_then(WaitMode::parse).unwrap_or(mode);
        let shared = matches!(effective, WaitMode::Yield | WaitMode::Block);
        let cfg = Config {
            wait_mode: mode,
            ..Default::default()
        };
        let layouts = gaspi::testing::layouts(&all);
        for (i, &(ranks, ppn)) in layouts.iter().enumerate() {
            if across && i % 2 != m {
                continue;
            }
            Job::new(&[ranks])
                .ppn(ppn)
                .config(cfg.clone())
                .run(|ctx| barrier_messages(ctx, ranks, ppn, shared));
        }
    }
}

/// One barrier's messages between nodes: the dissemination's (one per
/// node and step, carrying nothing), or, where the ranks share cores
/// (`shared`: they must), a byte each (the node partials of an allreduce
/// of a byte, exchanged directly on up to 16 nodes: one per pair of
/// nodes, sent by the node's last rank to arrive). None where the MPI
/// engine spans hosts: the nodes' first ranks meet in MPI's messages (one
/// where a notified write is two round trips), which are not notified
/// writes.
fn barrier_messages(ctx: &Context, ranks: usize, ppn: usize, shared: bool) {
    barrier(ctx); // warm up: map the windows
    barrier(ctx);
    ctx.reset_traffic();
    barrier(ctx);
    let t = ctx.traffic();
    let mut total = [0u64; 2];
    ctx.allreduce(
        &[t.inter.notifications, t.inter.writes],
        &mut total,
        ReduceOp::Sum,
        GroupId::ALL,
        Timeout::Block,
    )
    .unwrap();
    let nodes = ctx.num_nodes();
    let d = gaspi::plan::Dissemination::new(nodes);
    let through_mpi =
        ctx.engine() == gaspi::Engine::Mpi && (0..ctx.num_ranks()).any(|r| !ctx.on_this_host(r));
    let allowed = !through_mpi && ppn > 1 && nodes > 1 && nodes <= 16;
    let partials = total[1] > 0;
    let want = match (through_mpi, partials) {
        (true, _) => 0,
        (false, false) => (nodes * d.messages_per_participant()) as u64,
        (false, true) => (nodes * (nodes - 1)) as u64,
    };
    let at = format!("{ranks} ranks, ppn {ppn}, {total:?}");
    assert_eq!(total[0], want, "{at}");
    assert!(!partials || (total[1] == want && allowed), "{at}");
    // Where ranks share cores, partials go directly wherever allowed.
    if shared && !gaspi::testing::through_transport() {
        assert_eq!(partials, allowed, "{at}: cores shared");
    }
    // Otherwise only the nodes' first ranks talk across nodes.
    if ctx.local_rank() != 0 && !partials {
        assert_eq!(t.inter.messages(), 0);
    }
    barrier(ctx);
}

/// Build, commit and return the group of `members`.
fn group(ctx: &Context, members: impl IntoIterator<Item = Rank>) -> GroupId {
    let g = ctx.group_create().unwrap();
    for r in members {
        ctx.group_add(g, r).unwrap();
    }
    ctx.group_commit(g, Timeout::Block).unwrap();
    g
}

#[test]
fn groups_with_holes_run_their_own_collectives_and_segments() {
    Job::new(&job_sizes(&[3, 4, 8])).run(|ctx| {
        let n = ctx.num_ranks();
        let me = ctx.rank();
        for culprit in 0..n {
            // Everyone but `culprit` forms a group.
            if me != culprit {
                let g = group(ctx, (0..n).filter(|&r| r != culprit));
                assert_eq!(ctx.group_size(g).unwrap(), n as usize - 1);
                for s in 0..3 {
                    ctx.segment_create(s, 1 << 12, g, Timeout::Block, Alloc::Initialized)
                        .unwrap();
                }
                assert_eq!(ctx.segment_list(), vec![0, 1, 2]);
                let mut sum = [0u64];
                ctx.allreduce(&[me as u64], &mut sum, ReduceOp::Sum, g, Timeout::Block)
                    .unwrap();
                let expect: u64 = (0..n as u64).sum::<u64>() - culprit as u64;
                assert_eq!(sum[0], expect);
                ctx.barrier(g, Timeout::Block).unwrap();
                for s in 0..3 {
                    ctx.segment_delete(s).unwrap();
                }
                ctx.group_delete(g).unwrap();
            } else {
                assert_eq!(ctx.segment_num(), 0);
            }
            barrier(ctx);
        }
    });
}

#[test]
fn the_same_group_committed_again_and_groups_of_two() {
    Job::new(&[4]).run(|ctx| {
        let me = ctx.rank();
        // Pairs (0,1) and (2,3), committed, used, deleted, ten times.
        for round in 0..10u64 {
            let pair = [me & !1, me | 1];
            let g = group(ctx, pair);
            let mut out = [0u64];
            ctx.allreduce(
                &[me as u64 + round],
                &mut out,
                ReduceOp::Max,
                g,
                Timeout::Block,
            )
            .unwrap();
            assert_eq!(out[0], pair[1] as u64 + round);
            ctx.group_delete(g).unwrap();
        }
        assert_eq!(ctx.group_num(), 1); // only GroupId::ALL is left
        barrier(ctx);
    });
}

/// GPI-2's `g_coll_del_coll`, harder: groups of all ranks but one, with
/// another one left out each time, take turns on the same group id (a
/// rank commits a group while a member still holds the last group of
/// these members, kept since, or another between them).
/// On the GPI-2 engine this hung before the members of a new group told
/// each other that they hold it (engine/gpi2/twin.rs).
#[test]
fn groups_of_other_members_take_turns_on_one_id() {
    Job::new(&job_sizes(&[3, 4])).run(|ctx| {
        let (me, n) = (ctx.rank(), ctx.num_ranks());
        for round in 0..4u64 {
            barrier(ctx);
            for culprit in [1, n - 1, 0] {
                if me == culprit {
                    continue;
                }
                let g = group(ctx, (0..n).filter(|&r| r != culprit));
                ctx.barrier(g, Timeout::Block).unwrap();
                let mut out = [0u64];
                ctx.allreduce(
                    &[me as u64 + round],
                    &mut out,
                    ReduceOp::Sum,
                    g,
                    Timeout::Block,
                )
                .unwrap();
                let expect: u64 = (0..n)
                    .filter(|&r| r != culprit)
                    .map(|r| r as u64 + round)
                    .sum();
                assert_eq!(out[0], expect, "round {round}, all but {culprit}");
                ctx.group_delete(g).unwrap();
            }
        }
        assert_eq!(ctx.group_num(), 1);
        barrier(ctx);
    });
}

/// GPI-2's `g_force_timeout` and `g_commit_try_block`: rank 0 commits a
/// group of all ranks while the others cannot (they wait at a barrier
/// that rank 0 reaches only afterwards), so its commit times out, also
/// with `Test`; called again with short timeouts it completes once the
/// others commit, and the group works.
#[test]
fn a_group_commit_that_timed_out_completes_when_called_again() {
    Job::new(&job_sizes(&[3, 4])).run(|ctx| {
        let (me, n) = (ctx.rank(), ctx.num_ranks());
        let g = ctx.group_create().unwrap();
        for r in 0..n {
            ctx.group_add(g, r).unwrap();
        }
        if me == 0 {
            for t in [Timeout::ms(100), Timeout::Test] {
                assert!(matches!(ctx.group_commit(g, t), Err(Error::Timeout)));
            }
            barrier(ctx);
            loop {
                match ctx.group_commit(g, Timeout::ms(50)) {
                    Ok(()) => break,
                    Err(Error::Timeout) => {}
                    Err(e) => panic!("group_commit called again: {e}"),
                }
            }
        } else {
            barrier(ctx);
            ctx.group_commit(g, Timeout::Block).unwrap();
        }
        ctx.barrier(g, Timeout::Block).unwrap();
        let mut out = [0u64];
        ctx.allreduce(&[me as u64 + 1], &mut out, ReduceOp::Sum, g, Timeout::Block)
            .unwrap();
        assert_eq!(out[0], (1..=n as u64).sum::<u64>());
        ctx.group_delete(g).unwrap();
        barrier(ctx);
    });
}

#[test]
fn group_misuse_is_reported() {
    let cfg = Config {
        group_max: 3,
        ..Default::default()
    };
    Job::new(&[2]).config(cfg).run(|ctx| {
        let other = 1 - ctx.rank();
        let g = ctx.group_create().unwrap();
        assert!(matches!(
            ctx.barrier(g, Timeout::Test),
            Err(Error::GroupNotCommitted { .. })
        ));
        ctx.group_add(g, other).unwrap();
        assert!(matches!(
            ctx.group_add(g, other),
            Err(Error::GroupMismatch { .. })
        ));
        assert!(matches!(
            ctx.group_add(g, 7),
            Err(Error::InvalidRank {
                rank: 7,
                num_ranks: 2
            })
        ));
        assert!(
            matches!(
                ctx.group_commit(g, Timeout::Block),
                Err(Error::GroupMismatch { .. })
            ),
            "own rank missing"
        );
        let g2 = ctx.group_create().unwrap();
        assert!(matches!(
            ctx.group_create(),
            Err(Error::TooManyGroups { max: 3 })
        ));
        assert!(matches!(
            ctx.barrier(GroupId(9), Timeout::Test),
            Err(Error::InvalidGroup { .. })
        ));
        assert!(matches!(
            ctx.group_delete(GroupId::ALL),
            Err(Error::InvalidArgument(_))
        ));
        ctx.group_delete(g).unwrap();
        ctx.group_delete(g2).unwrap();
        assert!(matches!(
            ctx.group_delete(g2),
            Err(Error::InvalidGroup { .. })
        ));
        assert_eq!(ctx.group_ranks(GroupId::ALL).unwrap(), vec![0, 1]);
        barrier(ctx);
    });
}

/// The element every rank contributes at position `i`.
trait Sample: Reducible + std::fmt::Debug {
    fn sample(rank: Rank, i: usize) -> Self;
    fn bits(self) -> u64;
}

macro_rules! sample_int {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(rank: Rank, i: usize) -> Self {
                ((rank as i64 * 7919 + i as i64 * 104_729) % 1_000_003 - 500_000) as $t
            }
            fn bits(self) -> u64 { self as u64 }
        }
    )*};
}
sample_int!(i32, u32, i64, u64);

impl Sample for f32 {
    fn sample(rank: Rank, i: usize) -> Self {
        (rank as f32 + 1.0) / 3.0 * (i as f32 - 100.5)
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

impl Sample for f64 {
    fn sample(rank: Rank, i: usize) -> Self {
        (rank as f64 + 1.0).sqrt() * (i as f64 - 127.25) / 7.0
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// GPI-2's allreduce order (recursive doubling): with `p` the largest power
/// of two <= n, pairs (0,1), (2,3), ... of the first 2(n-p) values are
/// combined first; then a balanced tree over the p partial results.
fn tree_fold<T: Copy>(v: Vec<T>, f: impl Fn(T, T) -> T) -> T {
    let p = 1usize << (usize::BITS - 1 - v.len().leading_zeros());
    let rest = v.len() - p;
    let mut t: Vec<T> = (0..rest)
        .map(|i| f(v[2 * i], v[2 * i + 1]))
        .chain(v[2 * rest..].iter().copied())
        .collect();
    while t.len() > 1 {
        t = t.chunks(2).map(|c| f(c[0], c[1])).collect();
    }
    t[0]
}

/// Check allreduce of `T` with every op against a sequential reduction in
/// rank order (on one host, and on the MPI engine across hosts; GPI-2's
/// order across hosts on GPI-2), bit for bit.
fn allreduce_matches_reference<T: Sample>(ctx: &Context) {
    let n = ctx.num_ranks();
    for len in [1usize, 2, 17, 255] {
        for op in [ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum] {
            let send: Vec<T> = (0..len).map(|i| T::sample(ctx.rank(), i)).collect();
            let mut recv = vec![T::sample(0, 0); len];
            ctx.allreduce(&send, &mut recv, op, GroupId::ALL, Timeout::Block)
                .unwrap();
            // One host, and MPI across hosts: left to right; across hosts on
            // GPI-2: GPI-2's tree of adjacent member ranges, lower first.
            let across =
                ctx.engine() == gaspi::Engine::Gpi2 && (0..n).any(|r| !ctx.on_this_host(r));
            for (i, got) in recv.iter().enumerate() {
                let values: Vec<T> = (0..n).map(|r| T::sample(r, i)).collect();
                let want = if across {
                    tree_fold(values, |a, b| T::reduce(op, a, b))
                } else {
                    values[1..]
                        .iter()
                        .fold(values[0], |acc, &v| T::reduce(op, acc, v))
                };
                assert_eq!(
                    got.bits(),
                    want.bits(),
                    "{} {op:?} len {len} element {i}: {got:?} vs {want:?}",
                    T::GASPI_TYPE,
                );
            }
        }
    }
}

#[test]
fn allreduce_every_type_and_op_matches_a_sequential_reference() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        allreduce_matches_reference::<i32>(ctx);
        allreduce_matches_reference::<u32>(ctx);
        allreduce_matches_reference::<i64>(ctx);
        allreduce_matches_reference::<u64>(ctx);
        allreduce_matches_reference::<f32>(ctx);
        allreduce_matches_reference::<f64>(ctx);
    });
}

#[test]
fn allreduce_results_are_identical_on_every_rank_and_every_run() {
    Job::new(&job_sizes(&[4, 8])).run(|ctx| {
        // Sums of values of very different magnitude depend on the order of
        // the additions: every rank and every repetition must agree.
        let send: Vec<f64> = (0..64)
            .map(|i| 10f64.powi((ctx.rank() as i32 * 5 + i) % 31 - 15) * 1.1)
            .collect();
        let mut first = vec![0.0; 64];
        ctx.allreduce(
            &send,
            &mut first,
            ReduceOp::Sum,
            GroupId::ALL,
            Timeout::Block,
        )
        .unwrap();
        for _ in 0..50 {
            let mut again = vec![0.0; 64];
            ctx.allreduce(
                &send,
                &mut again,
                ReduceOp::Sum,
                GroupId::ALL,
                Timeout::Block,
            )
            .unwrap();
            assert!(
                again
                    .iter()
                    .zip(&first)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
        // Compare with rank 0's result bit for bit through a max and a min of the bits.
        let bits: Vec<u64> = first.iter().map(|x| x.to_bits()).collect();
        let (mut hi, mut lo) = (vec![0u64; 64], vec![0u64; 64]);
        ctx.allreduce(&bits, &mut hi, ReduceOp::Max, GroupId::ALL, Timeout::Block)
            .unwrap();
        ctx.allreduce(&bits, &mut lo, ReduceOp::Min, GroupId::ALL, Timeout::Block)
            .unwrap();
        assert_eq!(hi, lo, "every rank computed the same bits");
    });
}

#[test]
fn allreduce_user_defined_operation_and_limits() {
    Job::new(&[2, 4]).run(|ctx| {
        // An associative, non-commutative operation shows the member order:
        // appending decimal digits, as (digits, 10^count) pairs (exact on one
        // host, left to right, and across hosts, as a tree of adjacent
        // member ranges).
        let send = [[ctx.rank() as u64 + 1, 10]];
        let mut out = [[0u64; 2]];
        ctx.allreduce_user(
            &send,
            &mut out,
            |a, b| [a[0] * b[1] + b[0], a[1] * b[1]],
            GroupId::ALL,
            Timeout::Block,
        )
        .unwrap();
        let want = (2..=ctx.num_ranks() as u64).fold(1, |acc, r| acc * 10 + r);
        assert_eq!(out[0][0], want);
        // Structs of plain data work.
        #[derive(Clone, Copy, Debug, PartialEq, gaspi::Pod, gaspi::Zeroable)]
        #[bytemuck(crate = "gaspi::bytemuck")]
        #[repr(C)]
        struct MinLoc {
            value: f64,
            rank: u64,
        }
        let mine = [MinLoc {
            value: (ctx.rank() as f64 - 1.5).abs(),
            rank: ctx.rank() as u64,
        }];
        let mut best = [MinLoc {
            value: 0.0,
            rank: 0,
        }];
        ctx.allreduce_user(
            &mine,
            &mut best,
            |a, b| if b.value < a.value { *b } else { *a },
            GroupId::ALL,
            Timeout::Block,
        )
        .unwrap();
        assert_eq!(best[0].rank, 1);
        // Limits.
        let big = vec![0u32; 256];
        let mut big_out = vec![0u32; 256];
        assert!(matches!(
            ctx.allreduce(
                &big,
                &mut big_out,
                ReduceOp::Sum,
                GroupId::ALL,
                Timeout::Block
            ),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            ctx.allreduce(
                &[1u32, 2],
                &mut [0u32],
                ReduceOp::Sum,
                GroupId::ALL,
                Timeout::Block
            ),
            Err(Error::InvalidArgument(_))
        ));
        let huge = vec![0u8; 4096];
        let mut huge_out = vec![0u8; 4096];
        assert!(matches!(
            ctx.allreduce_user(
                &huge,
                &mut huge_out,
                |a, _| *a,
                GroupId::ALL,
                Timeout::Block
            ),
            Err(Error::InvalidArgument(_))
        ));
        barrier(ctx);
    });
}

/// GPI-2's `allreduce_vlarge`: raising `Config::allreduce_elem_max` alone
/// (to a million) makes typed allreduces of that many elements work, of
/// every width, and one element more is refused.
#[test]
fn allreduces_as_long_as_allreduce_elem_max_allows() {
    const N: usize = 1_000_000;
    let cfg = Config {
        allreduce_elem_max: N as u32,
        ..Default::default()
    };
    Job::new(&[3]).ppn(1).config(cfg).run(|ctx| {
        let (r, n) = (ctx.rank() as usize, ctx.num_ranks() as usize);
        let t = Timeout::Block;
        let send: Vec<u64> = (0..N).map(|i| (i * (r + 1) + 1) as u64).collect();
        let mut sum = vec![0u64; N];
        ctx.allreduce(&send, &mut sum, ReduceOp::Sum, GroupId::ALL, t)
            .unwrap();
        let want = |i: usize| (i * n * (n + 1) / 2 + n) as u64;
        assert!((0..N).all(|i| sum[i] == want(i)), "u64 sums");
        let send: Vec<i32> = (0..N)
            .map(|i| -((i % 1000) as i32) * (r as i32 + 1))
            .collect();
        let mut min = vec![0i32; N];
        ctx.allreduce(&send, &mut min, ReduceOp::Min, GroupId::ALL, t)
            .unwrap();
        assert!(
            (0..N).all(|i| min[i] == -((i % 1000) as i32) * n as i32),
            "i32 minima"
        );
        let send: Vec<f64> = (0..N).map(|i| i as f64 + r as f64 * 0.5).collect();
        let mut max = vec![0f64; N];
        ctx.allreduce(&send, &mut max, ReduceOp::Max, GroupId::ALL, t)
            .unwrap();
        assert!(
            (0..N).all(|i| max[i] == i as f64 + (n - 1) as f64 * 0.5),
            "f64 maxima"
        );
        let one_more = vec![0u32; N + 1];
        assert!(matches!(
            ctx.allreduce(
                &one_more,
                &mut vec![0u32; N + 1],
                ReduceOp::Max,
                GroupId::ALL,
                t
            ),
            Err(Error::InvalidArgument(_))
        ));
        barrier(ctx);
    });
}

#[test]
fn allreduce_timeout_then_retry() {
    Job::new(&[2, 4]).run(|ctx| {
        segment(ctx, 0, 64);
        let n = ctx.num_ranks();
        let mut out = [0i64];
        let send = [ctx.rank() as i64 - 1];
        if ctx.rank() != 0 {
            assert!(
                ctx.allreduce(
                    &send,
                    &mut out,
                    ReduceOp::Min,
                    GroupId::ALL,
                    Timeout::ms(10)
                )
                .unwrap_err()
                .is_timeout()
            );
            ctx.notify(
                0,
                0,
                Notification::new(ctx.rank() as u32, 1),
                0,
                Timeout::Block,
            )
            .unwrap();
        } else {
            for _ in 1..n {
                let id = ctx.notify_waitsome(0, 1..n as u32, Timeout::Block).unwrap();
                ctx.notify_reset(0, id).unwrap();
            }
        }
        ctx.allreduce(&send, &mut out, ReduceOp::Min, GroupId::ALL, Timeout::Block)
            .unwrap();
        assert_eq!(out[0], -1);
        barrier(ctx);
    });
}

/// The node-aware `Allreduce` of small messages (through the nodes' first
/// ranks and MPI's messages where the MPI engine spans hosts, by notified
/// writes elsewhere): exact integer results, floating-point results
/// identical on every rank, `run_into` equal to `run`, and a size past the
/// group allreduce's slots (the notified-write path on every engine).
#[test]
fn small_window_allreduces_are_exact_and_identical_on_every_rank() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(2, 1), (4, 2), (6, 2), (5, 2)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let n = ctx.num_ranks() as u64;
            let me = ctx.rank() as u64;
            for len in [1, 3, 255, 300] {
                let mut ar = Allreduce::<u64>::new(ctx, 40, len, Timeout::Block).unwrap();
                let mine: Vec<u64> = (0..len as u64).map(|i| (me + 1) * (i + 1)).collect();
                let want: Vec<u64> = (0..len as u64).map(|i| n * (n + 1) / 2 * (i + 1)).collect();
                for _ in 0..3 {
                    let got = ar.run(&mine, ReduceOp::Sum, Timeout::Block).unwrap();
                    assert_eq!(got.to_vec(), want, "{ranks}/{ppn}, {len} elements");
                    let mut into = vec![0u64; len];
                    ar.run_into(&mine, &mut into, ReduceOp::Sum, Timeout::Block)
                        .unwrap();
                    assert_eq!(into, want, "run_into, {ranks}/{ppn}, {len} elements");
                }
                drop(ar);
                let mut ar = Allreduce::<f64>::new(ctx, 40, len, Timeout::Block).unwrap();
                let mine: Vec<f64> = (0..len).map(|i| 1.0 / (me + i as u64 + 3) as f64).collect();
                let got = ar
                    .run(&mine, ReduceOp::Sum, Timeout::Block)
                    .unwrap()
                    .to_vec();
                let bits: Vec<u64> = got.iter().map(|x| x.to_bits()).collect();
                // (the GASPI allreduce takes at most 255 elements)
                for part in bits.chunks(255) {
                    let (mut lo, mut hi) = (vec![0u64; part.len()], vec![0u64; part.len()]);
                    let (all, b) = (GroupId::ALL, Timeout::Block);
                    ctx.allreduce(part, &mut lo, ReduceOp::Min, all, b).unwrap();
                    ctx.allreduce(part, &mut hi, ReduceOp::Max, all, b).unwrap();
                    assert_eq!(
                        (&lo[..], &hi[..]),
                        (part, part),
                        "{ranks}/{ppn}: the same bits"
                    );
                }
                for (i, x) in got.iter().enumerate() {
                    let exact: f64 = (0..n).map(|r| 1.0 / (r + i as u64 + 3) as f64).sum();
                    assert!((x - exact).abs() <= 1e-12 * exact, "{x} against {exact}");
                }
                drop(ar);
                barrier(ctx);
            }
        });
    }
}

/// A window `Allreduce` that timed out is completed by calling again with
/// the same arguments (other lengths are refused meanwhile), and the next
/// call is a fresh one.
#[test]
fn a_timed_out_window_allreduce_resumes() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let me = ctx.rank();
        let mut ar = Allreduce::<u64>::new(ctx, 33, 5, Timeout::Block).unwrap();
        let flags = segment(ctx, 34, 64);
        if me == 0 {
            // Nobody else has started: the call cannot complete.
            let e = ar.run(&[1; 5], ReduceOp::Sum, Timeout::Test).unwrap_err();
            assert!(e.is_timeout(), "{e}");
            // A different length is refused while the call is pending.
            assert!(matches!(
                ar.run(&[1; 4], ReduceOp::Sum, Timeout::Block),
                Err(gaspi::Error::InvalidArgument(_))
            ));
            for r in 1..4 {
                ctx.notify(r, 34, Notification::new(0, 1), 0, Timeout::Block)
                    .unwrap();
            }
        } else {
            ctx.notify_claim(34, 0..1, Timeout::Block).unwrap();
        }
        let got = ar
            .run(&[1; 5], ReduceOp::Sum, Timeout::Block)
            .unwrap()
            .to_vec();
        assert_eq!(got, vec![4; 5]);
        // And the next call is a fresh one.
        let got = ar
            .run(&[me as u64; 5], ReduceOp::Max, Timeout::Block)
            .unwrap()
            .to_vec();
        assert_eq!(got, vec![3; 5]);
        assert!(matches!(
            ar.run(&[1; 6], ReduceOp::Sum, Timeout::Block),
            Err(gaspi::Error::InvalidArgument(_))
        ));
        drop(flags);
        barrier(ctx);
    });
}

/// GPI-2's `mtt_barrier_different_grps` and
/// `mtt_barrier_allreduce_different_grps`: two threads of every rank run
/// collectives at once, each on a group of its own (the same members,
/// different ids): barriers and allreduces of `allreduce_elem_max`
/// elements, every result checked, then barriers with a 10 ms timeout
/// whose results are ignored (a timed-out one is finished by the next
/// call), then a barrier of all ranks.
#[test]
fn threads_run_collectives_on_their_own_groups_at_once() {
    let iters = repeats(1000, 100);
    Job::new(&[4]).run(|ctx| {
        let groups: Vec<GroupId> = (0..2)
            .map(|_| {
                let g = ctx.group_create().unwrap();
                for r in 0..ctx.num_ranks() {
                    ctx.group_add(g, r).unwrap();
                }
                ctx.group_commit(g, Timeout::Block).unwrap();
                g
            })
            .collect();
        let len = ctx.allreduce_elem_max() as usize;
        let me = ctx.rank() as i64;
        std::thread::scope(|s| {
            for (t, &g) in groups.iter().enumerate() {
                s.spawn(move || {
                    let mut got = vec![0i64; len];
                    for k in 0..iters as i64 {
                        ctx.barrier(g, Timeout::Block).unwrap();
                        // Differs by rank, thread, round and element.
                        let mine: Vec<i64> = (0..len as i64)
                            .map(|i| (me * 7 + i * 3 + k + t as i64) % 11)
                            .collect();
                        ctx.allreduce(&mine, &mut got, ReduceOp::Min, g, Timeout::Block)
                            .unwrap();
                        for (i, &v) in got.iter().enumerate() {
                            let want = (0..ctx.num_ranks() as i64)
                                .map(|r| (r * 7 + i as i64 * 3 + k + t as i64) % 11)
                                .min()
                                .unwrap();
                            assert_eq!(v, want, "thread {t}, round {k}, element {i}");
                        }
                    }
                    for _ in 0..iters {
                        let _ = ctx.barrier(g, Timeout::ms(10));
                    }
                });
            }
        });
        ctx.barrier(GroupId::ALL, Timeout::Block).unwrap();
    });
}
