//! The pipelined-ring allgatherv of Al Ahad et al. 2018 on emulated node layouts, with
//! the paper's three distributions and data.

mod common;

use common::*;
use gaspi::launcher::Binding;
use gaspi::testing::Job;
use gaspi::{Allgatherv, AllgathervOptions, Alltoallv, Context, GroupId, ReduceOp, Timeout};
use std::time::Duration;

const B: Timeout = Timeout::Block;

/// (ranks, ranks per node): 1 to 12 nodes of one rank, then 1x8, 2x4, 4x2,
/// 3x2 and 7 ranks in nodes of 2 (across hosts a covering few,
/// [`gaspi::testing::layouts`]).
fn layouts() -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = (1..=12).map(|n| (n, 1)).collect();
    v.extend([(8, 8), (8, 4), (8, 2), (6, 2), (7, 2)]);
    gaspi::testing::layouts(&v)
}

/// Calls per contribution size: fewer across hosts, where every block's
/// notified write waits for its target to be scheduled (6: each of the
/// three ways of a call, `check_dist`'s, into each of the two copies).
fn calls() -> usize {
    repeats(100, 6)
}

#[derive(Clone, Copy, Debug)]
enum Dist {
    Regular,
    Decreasing,
    Broadcast,
}

/// Elements of each rank for distribution `d` with mean `c` (Al Ahad et al. 2018,
/// section II-B): regular `c`; linearly decreasing `2c(n-1-i)/(n-1)`;
/// broadcast all `n*c` on rank 0.
fn counts(d: Dist, n: usize, c: usize) -> Vec<usize> {
    (0..n)
        .map(|i| match d {
            Dist::Regular => c,
            Dist::Decreasing if n == 1 => c,
            Dist::Decreasing => 2 * c * (n - 1 - i) / (n - 1),
            Dist::Broadcast if i == 0 => n * c,
            Dist::Broadcast => 0,
        })
        .collect()
}

fn displs(counts: &[usize]) -> Vec<usize> {
    gaspi::plan::displacements(counts)
}

/// The paper's data, `(iProc + 1) * (it + 1)`, in the high half; the
/// element's index in the contribution in the low half (so that a misplaced
/// block shows).
fn value(rank: usize, it: usize, i: usize) -> u64 {
    (((rank + 1) * (it + 1)) as u64) << 32 | i as u64
}

/// Rank `me`'s contribution to call `it`.
fn contribution(counts: &[usize], me: usize, it: usize) -> Vec<u64> {
    (0..counts[me]).map(|i| value(me, it, i)).collect()
}

/// Run `iterations` allgathervs of distribution `d` with mean `c` and check
/// every element of the result on every rank after each: in the window, in
/// a private buffer (`run_into`, which copies block by block as they
/// arrive) and in place (`run_in_place`, the contribution at its place in
/// that buffer), in turn; the buffer overwritten before each call so that
/// a missed block shows.
fn check_dist(ctx: &Context, d: Dist, c: usize, iterations: usize, options: AllgathervOptions) {
    let n = ctx.num_ranks() as usize;
    let me = ctx.rank() as usize;
    let counts = counts(d, n, c);
    let displs = displs(&counts);
    let mut ag = Allgatherv::<u64>::with_options(ctx, 10, &counts, &displs, options, B).unwrap();
    let total: usize = counts.iter().sum();
    let mut got = vec![0u64; total];
    for it in 0..iterations {
        let send = contribution(&counts, me, it);
        match it % 3 {
            1 => {
                got.fill(u64::MAX);
                ag.run_into(&send, &mut got, B).unwrap();
            }
            2 => {
                got.fill(u64::MAX);
                got[displs[me]..displs[me] + send.len()].copy_from_slice(&send);
                ag.run_in_place(&mut got, B).unwrap();
            }
            _ => ag.run(&send, B).unwrap().copy_to_slice(0, &mut got),
        }
        check_result(&got, &counts, &displs, it, &format!("{d:?} c={c} it={it}"));
    }
}

fn run_dist(d: Dist) {
    for (ranks, ppn) in layouts() {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            // Small blocks so that even small contributions make many blocks
            // and the ring pipelines and forwards; between hosts of the MPI
            // engine, blocks as messages too.
            for (c, messages) in [
                (0, true),
                (1, false),
                (37, true),
                (3000, false),
                (3000, true),
            ] {
                let small = AllgathervOptions {
                    block_bytes: 8 * 64,
                    messages: Some(messages),
                    ..Default::default()
                };
                check_dist(ctx, d, c, calls(), small);
            }
        });
    }
}

#[test]
fn regular_distribution_on_every_layout() {
    run_dist(Dist::Regular);
}

#[test]
fn linearly_decreasing_distribution_on_every_layout() {
    run_dist(Dist::Decreasing);
}

#[test]
fn broadcast_distribution_on_every_layout() {
    run_dist(Dist::Broadcast);
}

#[test]
fn contributions_of_4_mib() {
    // Between hosts of the MPI engine, the ring and messages of many
    // pieces (copied into the caller's buffer as they land).
    let messages = [(2, 2, true), (3, 1, true)];
    for (nodes, ppn, messages) in [(2, 2, false), (3, 1, false), (1, 4, false)]
        .into_iter()
        .chain(messages)
    {
        Job::new(&[nodes * ppn]).ppn(ppn).run(|ctx| {
            let options = AllgathervOptions {
                messages: Some(messages),
                ..Default::default()
            };
            for d in [Dist::Regular, Dist::Decreasing, Dist::Broadcast] {
                check_dist(ctx, d, 512 << 10, 3, options);
            }
        });
    }
}

#[test]
fn private_buffer_variant_and_bad_arguments() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let n = ctx.num_ranks() as usize;
        let counts = vec![3; n];
        let displs = displs(&counts);
        let mut ag = Allgatherv::<u32>::new(ctx, 11, &counts, &displs, B).unwrap();
        let mut recv = vec![0u32; 3 * n];
        let me = ctx.rank() as u32;
        ag.run_into(&[me; 3], &mut recv, B).unwrap();
        assert_eq!(recv, (0..n as u32).flat_map(|r| [r; 3]).collect::<Vec<_>>());
        assert!(matches!(
            ag.run(&[me; 2], B),
            Err(gaspi::Error::InvalidArgument(_))
        ));
        assert!(matches!(
            ag.run_into(&[me; 3], &mut [0u32; 2], B),
            Err(gaspi::Error::InvalidArgument(_))
        ));
        assert!(Allgatherv::<u32>::new(ctx, 12, &counts[1..], &displs, B).is_err());
        // Contributions in reverse rank order with a gap of 2 before each:
        // the gaps of the private buffer keep what they held.
        let gapped: Vec<usize> = (0..n).map(|r| 5 * (n - 1 - r) + 2).collect();
        let mut ag2 = Allgatherv::<u32>::new(ctx, 12, &counts, &gapped, B).unwrap();
        for it in 0..3u32 {
            let mut recv = vec![u32::MAX; 5 * n];
            ag2.run_into(&[me + 10 * it; 3], &mut recv, B).unwrap();
            for (r, &at) in gapped.iter().enumerate() {
                assert_eq!(&recv[at - 2..at], &[u32::MAX; 2], "gap before rank {r}");
                assert_eq!(&recv[at..at + 3], &[r as u32 + 10 * it; 3], "rank {r}");
            }
            // In place, the contribution at its place in the buffer.
            let mut buf = vec![u32::MAX; 5 * n];
            let at = gapped[me as usize];
            buf[at..at + 3].fill(me + 100 * it);
            ag2.run_in_place(&mut buf, B).unwrap();
            for (r, &at) in gapped.iter().enumerate() {
                assert_eq!(&buf[at - 2..at], &[u32::MAX; 2], "gap before rank {r}");
                assert_eq!(&buf[at..at + 3], &[r as u32 + 100 * it; 3], "rank {r}");
            }
        }
        // A buffer shorter than the result: refused.
        assert!(matches!(
            ag2.run_in_place(&mut [0u32; 4], B),
            Err(gaspi::Error::InvalidArgument(_))
        ));
        barrier(ctx);
    });
}

/// Check `got` against every rank's contribution of call `it`.
fn check_result(got: &[u64], counts: &[usize], displs: &[usize], it: usize, what: &str) {
    for (r, (&c, &at)) in counts.iter().zip(displs).enumerate() {
        for i in 0..c {
            assert_eq!(
                got[at + i],
                value(r, it, i),
                "{what}: element {i} of rank {r}"
            );
        }
    }
}

/// A call that timed out (rank 0 had not come: the others wait at the
/// node barrier, or for a credit from rank 0's node) completes when made
/// again, in the window and in the caller's buffer, and the next call is
/// an ordinary one: on one node, on nodes of 2 and on nodes of 1.
#[test]
fn a_timed_out_call_completes_when_made_again() {
    let messages = [(2, 2, true), (4, 1, true)];
    for (nodes, ppn, messages) in [(1, 4, false), (2, 2, false), (3, 2, false), (4, 1, false)]
        .into_iter()
        .chain(messages)
    {
        Job::new(&[nodes * ppn]).ppn(ppn).run(|ctx| {
            segment(ctx, 0, 64);
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let counts = counts(Dist::Decreasing, n, 700);
            let displs = displs(&counts);
            let small = AllgathervOptions {
                block_bytes: 8 * 64,
                messages: Some(messages),
                ..Default::default()
            };
            let mut ag =
                Allgatherv::<u64>::with_options(ctx, 10, &counts, &displs, small, B).unwrap();
            let total: usize = counts.iter().sum();
            let send = |it| contribution(&counts, me, it);
            let what = format!("{nodes}x{ppn}, messages {}", ag.messages());
            // In the window.
            others_time_out_before_rank_0(ctx, 0, |t| ag.run(&send(0), t).map(|_| ()));
            let got = ag.run(&send(0), B).unwrap().to_vec();
            check_result(&got, &counts, &displs, 0, &format!("{what} retried run"));
            // Into the caller's buffer: what the timed-out call copied stays.
            let mut got = vec![u64::MAX; total];
            others_time_out_before_rank_0(ctx, 0, |t| ag.run_into(&send(1), &mut got, t));
            ag.run_into(&send(1), &mut got, B).unwrap();
            check_result(
                &got,
                &counts,
                &displs,
                1,
                &format!("{what} retried run_into"),
            );
            // In place.
            got.fill(u64::MAX);
            got[displs[me]..displs[me] + counts[me]].copy_from_slice(&send(2));
            others_time_out_before_rank_0(ctx, 0, |t| ag.run_in_place(&mut got, t));
            ag.run_in_place(&mut got, B).unwrap();
            check_result(
                &got,
                &counts,
                &displs,
                2,
                &format!("{what} retried in place"),
            );
            // Then ordinary calls.
            for it in 3..6 {
                got.fill(u64::MAX);
                ag.run_into(&send(it), &mut got, B).unwrap();
                check_result(&got, &counts, &displs, it, &format!("{what} call {it}"));
            }
            barrier(ctx);
        });
    }
}

/// Ranks that give up on a timed-out call and drop the allgatherv can
/// make a new one on the same segment id with the rank that never came,
/// and its calls are right.
#[test]
fn a_timed_out_call_can_be_given_up() {
    // 300 elements per rank: calls that alternate between two result
    // areas; 40,000 (320 KB per rank): larger than two areas allow, so
    // each call opens with a wait for the node's ranks (once the node's
    // barrier, where the given-up call left its arrival).
    // Between hosts of the MPI engine, blocks as messages too.
    for (nodes, ppn, per_rank, messages) in [
        (1, 4, 300, false),
        (2, 2, 300, false),
        (4, 1, 300, false),
        (1, 4, 40_000, false),
        (2, 2, 40_000, false),
        (4, 1, 40_000, false),
        (2, 2, 300, true),
        (4, 1, 40_000, true),
    ] {
        Job::new(&[nodes * ppn]).ppn(ppn).run(|ctx| {
            segment(ctx, 0, 64);
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let counts = counts(Dist::Regular, n, per_rank);
            let displs = displs(&counts);
            let send = |it| contribution(&counts, me, it);
            let opts = AllgathervOptions {
                messages: Some(messages),
                ..Default::default()
            };
            let make = || Allgatherv::<u64>::with_options(ctx, 10, &counts, &displs, opts, B);
            let mut ag = make().unwrap();
            others_give_up_before_rank_0(ctx, 0, |t| ag.run(&send(0), t).map(|_| ()));
            drop(ag);
            let mut ag = make().unwrap();
            let mut got = vec![u64::MAX; n * per_rank];
            for it in 1..4 {
                ag.run_into(&send(it), &mut got, B).unwrap();
                check_result(
                    &got,
                    &counts,
                    &displs,
                    it,
                    &format!("{nodes}x{ppn}, {per_rank} per rank, call {it}"),
                );
                let view = ag.result().to_vec();
                check_result(
                    &view,
                    &counts,
                    &displs,
                    it,
                    &format!("{nodes}x{ppn}, {per_rank} per rank, window {it}"),
                );
            }
            barrier(ctx);
        });
    }
}

#[test]
fn inter_node_messages_match_the_cost_model() {
    // (Between hosts of the MPI engine, blocks as messages too.)
    let messages = [(2, 2, true), (3, 2, true), (5, 1, true)];
    for (nodes, ppn, messages) in [
        (2, 2, false),
        (3, 2, false),
        (4, 2, false),
        (5, 1, false),
        (3, 3, false),
    ]
    .into_iter()
    .chain(messages)
    {
        Job::new(&[nodes * ppn]).ppn(ppn).run(|ctx| {
            let n = ctx.num_ranks() as usize;
            let counts = counts(Dist::Decreasing, n, 700);
            let displs = displs(&counts);
            let options = AllgathervOptions {
                block_bytes: 8 * 100,
                messages: Some(messages),
                ..Default::default()
            };
            let mut ag =
                Allgatherv::<u64>::with_options(ctx, 10, &counts, &displs, options, B).unwrap();
            let me = ctx.rank() as usize;
            let send = contribution(&counts, me, 0);
            ag.run(&send, B).unwrap(); // warm up: map the windows
            barrier(ctx);
            ctx.reset_traffic();
            ag.run(&send, B).unwrap();
            let t = ctx.traffic();
            let mut sums = [0u64; 3];
            ctx.allreduce(
                &[t.inter.writes, t.inter.notifications, t.inter.bytes],
                &mut sums,
                ReduceOp::Sum,
                GroupId::ALL,
                B,
            )
            .unwrap();
            let plan = ag.plan();
            // Every byte crosses into every other node once.
            let bytes: u64 =
                plan.blocks.iter().map(|b| 8 * b.len as u64).sum::<u64>() * (nodes as u64 - 1);
            let expected = if ag.messages() {
                // One message (a notified write) from every node that
                // contributes to every other node; no credits.
                let sending = (0..nodes)
                    .filter(|&q| plan.node_first[q] < plan.node_first[q + 1])
                    .count() as u64;
                let m = sending * (nodes as u64 - 1);
                [m, m, bytes]
            } else {
                // Every block crosses every node boundary once; one credit
                // per node.
                let blocks = plan.inter_node_messages() as u64;
                [blocks, blocks + nodes as u64, bytes]
            };
            assert_eq!(
                sums,
                expected,
                "messages {}: {}",
                ag.messages(),
                plan.table()
            );
            barrier(ctx);
        });
    }
}

/// Between hosts of the MPI engine, blocks go as messages only where
/// every node's contributions lie side by side in the result; here node
/// 0's ranks 0 and 1 lie apart (ranks 0, 2, 1, 3 in the result): the ring
/// carries them, and the result is right.
#[test]
fn contributions_of_a_node_apart_take_the_ring() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let me = ctx.rank() as usize;
        let counts = vec![100; 4];
        let displs = vec![0, 200, 100, 300];
        let options = AllgathervOptions {
            messages: Some(true),
            ..Default::default()
        };
        let mut ag =
            Allgatherv::<u64>::with_options(ctx, 10, &counts, &displs, options, B).unwrap();
        assert!(!ag.messages());
        let mut got = vec![u64::MAX; 400];
        for it in 0..3 {
            ag.run_into(&contribution(&counts, me, it), &mut got, B)
                .unwrap();
            check_result(&got, &counts, &displs, it, &format!("call {it}"));
        }
        // Side by side, in any order of the node's ranks: messages.
        drop(ag);
        let displs = vec![100, 0, 300, 200];
        let ag = Allgatherv::<u64>::with_options(ctx, 10, &counts, &displs, options, B).unwrap();
        let expect =
            ctx.num_nodes() > 1 && std::env::var(gaspi::env::ENGINE).is_ok_and(|e| e == "mpi");
        assert_eq!(ag.messages(), expect);
        barrier(ctx);
    });
}

/// Calls with a private result of 256 KiB or more put the contributions
/// into the window, and the blocks into the next node's, with the stores
/// their node's first rank timed faster (`testing_call_times`: here
/// streaming stores twice as fast, then twice as slow): calls 0-3 warm up
/// with ordinary stores, the probes take each kind in runs of 4 (calls
/// 8-11 streaming, 12-15 not), and from call 37 on (the last probe
/// decides, the node's ranks read the word a call later) every call takes
/// the faster. Calls with the result in the window, smaller results, and
/// ranks all of whose readers share their one CPU take ordinary stores.
/// The results are checked in every call: on one node and on nodes of 2.
#[test]
fn private_calls_take_the_stores_timed_faster() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(4, 4), (4, 2)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            for faster in [true, false] {
                // 64 KiB each: a result of 256 KiB.
                let counts = vec![8192; n];
                let displs = displs(&counts);
                let mut ag = Allgatherv::<u64>::new(ctx, 10, &counts, &displs, B).unwrap();
                ag.testing_call_times(move |_, streaming| {
                    Duration::from_millis(if streaming == faster { 1 } else { 2 })
                });
                let mut got = vec![0u64; n * 8192];
                let mut ways = Vec::new();
                for it in 0..44 {
                    let send = contribution(&counts, me, it);
                    got.fill(u64::MAX);
                    ag.run_into(&send, &mut got, B).unwrap();
                    check_result(&got, &counts, &displs, it, &format!("{faster} it={it}"));
                    ways.push(ag.testing_streaming());
                }
                if ag.testing_may_stream() {
                    assert!(!ways[..4].iter().any(|&w| w), "warm-up: {ways:?}");
                    assert!(ways[8..12].iter().all(|&w| w), "probes: {ways:?}");
                    assert!(!ways[12..16].iter().any(|&w| w), "probes: {ways:?}");
                    assert!(
                        ways[37..].iter().all(|&w| w == faster),
                        "{faster}: {ways:?}"
                    );
                } else {
                    assert!(!ways.iter().any(|&w| w), "{ways:?}");
                }
                // In the window: ordinary stores.
                ag.run(&contribution(&counts, me, 44), B).unwrap();
                assert!(!ag.testing_streaming());
                drop(ag);
                barrier(ctx);
            }
            // A result of 64 KiB: ordinary stores, whatever the times say.
            let counts = vec![8192 / n.max(1); n];
            let displs = displs(&counts);
            let mut ag = Allgatherv::<u64>::new(ctx, 10, &counts, &displs, B).unwrap();
            ag.testing_call_times(|_, streaming| Duration::from_millis(2 - streaming as u64));
            let mut got = vec![0u64; counts.iter().sum()];
            for it in 0..44 {
                ag.run_into(&contribution(&counts, me, it), &mut got, B)
                    .unwrap();
                assert!(!ag.testing_streaming(), "it {it}");
            }
            check_result(&got, &counts, &displs, 43, "small");
        });
    }
}

/// The node's last rank to copy its contribution in sends all the node's
/// blocks (`testing_one_sender`) up to 64 KiB of the node's contributions,
/// and above that only where the node's ranks are all bound to one CPU
/// (their shares would go one after the other from it anyway); where they
/// may run on several CPUs, each sends its share, from its own CPU. The
/// node's ranks agree, and calls each way move the data right, the result
/// in the window and in the caller's buffer (where blocks between hosts go
/// as messages, nobody sends them so). On 2 CPUs, `--bind block`
/// puts each node of 2 on a CPU of its own (and in 4 nodes of 2, two nodes
/// on each), `--bind spread` a rank of each node on each CPU.
#[test]
fn one_rank_sends_a_nodes_blocks_where_they_are_small_or_its_ranks_share_a_cpu() {
    for (ranks, binding) in NODES_OF_2_PLACED {
        Job::new(&[ranks]).ppn(2).binding(binding).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let one_cpu = node_on_one_cpu(ctx);
            // 8 KiB per rank (16 of the node's), then 80 KiB (160).
            for (seg, per_rank) in [(10, 1024), (11, 10_240)] {
                let counts = counts(Dist::Regular, n, per_rank);
                let displs = displs(&counts);
                let mut ag = Allgatherv::<u64>::new(ctx, seg, &counts, &displs, B).unwrap();
                let what = format!("{ranks} ranks, {binding:?}, {per_rank} per rank");
                // (Between hosts of the MPI engine, blocks go as messages.)
                let expect = !ag.messages() && (per_rank == 1024 || one_cpu);
                assert_eq!(ag.testing_one_sender(), expect, "{what}");
                run_both_ways(&mut ag, (&counts, &displs), me, 12, &what);
            }
        });
    }
}

/// `calls` calls of `ag` (made with `counts` and `displs`) by rank `me`,
/// the result read in the window in even calls and copied into the
/// caller's buffer in odd ones, each checked.
fn run_both_ways(
    ag: &mut Allgatherv<u64>,
    (counts, displs): (&[usize], &[usize]),
    me: usize,
    calls: usize,
    what: &str,
) {
    let mut got = vec![0u64; counts.iter().sum()];
    for it in 0..calls {
        let send = contribution(counts, me, it);
        if it % 2 == 0 {
            ag.run(&send, B).unwrap().copy_to_slice(0, &mut got);
        } else {
            got.fill(u64::MAX);
            ag.run_into(&send, &mut got, B).unwrap();
        }
        check_result(&got, counts, displs, it, &format!("{what} it={it}"));
    }
}

/// A rank bound to one CPU on which only ranks of its node may run knows
/// them, as the alltoallv's ranks do (`testing_core_mates`; which ranks
/// those are: the alltoallv's test of its waits): once they have sent
/// their shares of a call's blocks and claim the other nodes', as it
/// does, its claims spin rather than hand the CPU to a rank that can only
/// hand it back. On 2 CPUs, `--bind block` puts each node of 2 on a CPU of
/// its own, `--bind spread` a rank of each node on each CPU (none then).
/// Calls move the data right either way, the result in the window and in
/// the caller's buffer.
#[test]
fn claims_spin_where_a_cpus_ranks_are_all_of_the_node() {
    for binding in [Binding::Block, Binding::Spread] {
        Job::new(&[4]).ppn(2).binding(binding).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let counts = counts(Dist::Regular, n, 1000);
            let displs = displs(&counts);
            let mut ag = Allgatherv::<u64>::new(ctx, 10, &counts, &displs, B).unwrap();
            let a = Alltoallv::<u64>::alltoall(ctx, 11, 1, Default::default(), B).unwrap();
            assert_eq!(
                ag.testing_core_mates(),
                a.testing_core_mates(),
                "{binding:?}"
            );
            drop(a);
            run_both_ways(&mut ag, (&counts, &displs), me, 40, &format!("{binding:?}"));
        });
    }
}
