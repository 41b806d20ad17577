//! The node-aggregated alltoallv on emulated node layouts: fixed counts
//! (regular, random, sparse) and counts unknown in advance, results in the
//! window and in private buffers, the inter-node messages against the
//! plan, bad arguments, timeouts.

mod common;

use common::*;
use gaspi::launcher::Binding;
use gaspi::plan::AlltoallvPlan;
use gaspi::testing::Job;
use gaspi::{
    Alltoallv, AlltoallvOptions, Context, Engine, Error, GroupId, Notification, ReduceOp, Timeout,
};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

const B: Timeout = Timeout::Block;

/// (nodes, ranks per node) as (ranks, ppn): one node, one rank per node,
/// several per node, and a last node with fewer ranks (a few of them on
/// the GPI-2 engine: [`gaspi::testing::layouts`]).
fn layouts() -> Vec<(usize, usize)> {
    gaspi::testing::layouts(&[
        (1, 1),
        (4, 4),
        (2, 1),
        (3, 1),
        (4, 2),
        (6, 2),
        (6, 3),
        (8, 2),
        (5, 2),
        (7, 3),
    ])
}

#[derive(Clone, Copy, Debug)]
enum Dist {
    Regular,
    Random,
    Sparse,
}

/// A small deterministic hash (no shared state between ranks needed).
fn mix(a: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 32)
}

/// The count matrix (`n * n`) of distribution `d` with mean about `c`,
/// varied by `salt`: regular `c`; random `0..2c`; sparse: a piece in
/// about one pair of eight, none at all between some nodes.
fn counts(d: Dist, n: usize, c: usize, salt: u64) -> Vec<usize> {
    (0..n * n)
        .map(|i| {
            let h = mix(i as u64 ^ salt << 20);
            match d {
                Dist::Regular => c,
                Dist::Random => (h % (2 * c as u64 + 1)) as usize,
                Dist::Sparse if h % 8 == 0 => (h >> 8) as usize % (8 * c + 1),
                Dist::Sparse => 0,
            }
        })
        .collect()
}

/// Element `i` of the piece from `s` to `t` in iteration `it`.
fn value(s: usize, t: usize, it: usize, i: usize) -> u64 {
    (s as u64) << 48 | (t as u64) << 32 | (it as u64) << 20 | i as u64
}

fn send_of(counts: &[usize], n: usize, me: usize, it: usize) -> Vec<u64> {
    (0..n)
        .flat_map(|t| (0..counts[me * n + t]).map(move |i| value(me, t, it, i)))
        .collect()
}

/// What `me` must hold after iteration `it`, packed by source.
fn expected(counts: &[usize], n: usize, me: usize, it: usize) -> Vec<u64> {
    (0..n)
        .flat_map(|s| (0..counts[s * n + me]).map(move |i| value(s, me, it, i)))
        .collect()
}

/// Check `a`'s result in place against `want`.
fn check_in_place(a: &Alltoallv<u64>, counts: &[usize], n: usize, me: usize, it: usize) {
    for s in 0..n {
        let got = a.received(s as u16).unwrap().to_vec();
        let want: Vec<u64> = (0..counts[s * n + me])
            .map(|i| value(s, me, it, i))
            .collect();
        assert_eq!(got, want, "it {it}: piece from {s} to {me} in the window");
    }
}

/// `iterations` calls of a fixed-count alltoallv, alternating the result
/// in place and in a private buffer (poisoned before each call).
fn check_fixed(ctx: &Context, d: Dist, c: usize, iterations: usize, options: AlltoallvOptions) {
    let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
    let counts = counts(d, n, c, c as u64);
    let mut a = Alltoallv::<u64>::with_options(ctx, 10, &counts, options, B).unwrap();
    let row = &counts[me * n..(me + 1) * n];
    let want_len = expected(&counts, n, me, 0).len();
    let mut recv = vec![0u64; want_len + 3];
    for it in 0..iterations {
        let send = send_of(&counts, n, me, it);
        if it % 2 == 1 {
            recv.fill(u64::MAX);
            a.run_into(&send, row, &mut recv, B).unwrap();
            assert_eq!(
                recv[..want_len],
                expected(&counts, n, me, it)[..],
                "{d:?} c={c} it={it}"
            );
            assert_eq!(recv[want_len..], [u64::MAX; 3], "beyond the result");
        } else {
            a.run(&send, row, B).unwrap();
            check_in_place(&a, &counts, n, me, it);
        }
        assert_eq!(
            a.recv_counts(),
            (0..n).map(|s| counts[s * n + me]).collect::<Vec<_>>()
        );
    }
}

fn run_dist(d: Dist) {
    for (ranks, ppn) in layouts() {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            // Small chunks, so that sections are cut and shared out; across
            // hosts 8 calls (credits from the third).
            let calls = repeats(20, 8);
            let small = AlltoallvOptions {
                block_bytes: 8 * 16,
                ..Default::default()
            };
            for c in [0, 1, 37] {
                check_fixed(ctx, d, c, calls, small);
            }
            // The node's ranks share its chunks out (and wait for each
            // other's staging) instead of its last rank sending them all.
            let shared_out = AlltoallvOptions {
                one_sender_max: Some(0),
                ..small
            };
            check_fixed(ctx, d, 37, calls, shared_out);
            // Four copies of the data area in turn: calls 4 apart write
            // the same places.
            let four = AlltoallvOptions {
                copies: Some(4),
                ..shared_out
            };
            check_fixed(ctx, d, 37, calls, four);
            check_fixed(ctx, d, 300, 4, AlltoallvOptions::default());
            // Every piece between nodes written straight from its
            // sender's buffer, the chunks only notifications, with one
            // sender and shared out.
            for opts in [small, shared_out] {
                let direct = AlltoallvOptions {
                    direct_min: Some(1),
                    ..opts
                };
                check_fixed(ctx, d, 37, calls, direct);
            }
        });
    }
}

#[test]
fn regular_counts_on_every_layout() {
    run_dist(Dist::Regular);
}

#[test]
fn random_counts_on_every_layout() {
    run_dist(Dist::Random);
}

#[test]
fn sparse_counts_on_every_layout() {
    run_dist(Dist::Sparse);
}

#[test]
fn pieces_of_1_mib() {
    for (ranks, ppn) in [(4, 2), (3, 1), (4, 4)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            check_fixed(
                ctx,
                Dist::Regular,
                128 << 10,
                3,
                AlltoallvOptions::default(),
            );
            check_fixed(ctx, Dist::Random, 64 << 10, 3, AlltoallvOptions::default());
        });
    }
}

/// Large pieces between ranks of a node go in one copy into private
/// buffers (cross-memory attach) while other ranks of the same call take
/// their result in the window, with receive buffers at every offset (those
/// 8 to 24 bytes past their source within a cache line take the window),
/// counts fixed or learned in the call.
#[test]
fn single_copies_inside_a_node_beside_results_in_place() {
    for (ranks, ppn) in [(4, 4), (4, 2), (5, 3)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let capacity = 2 * 4096 * n;
            let once = AlltoallvOptions {
                single_copy_min: Some(16 << 10),
                ..Default::default()
            };
            let mut fixed = Vec::new();
            for (k, d) in [Dist::Regular, Dist::Random].into_iter().enumerate() {
                let counts = counts(d, n, 4096, 7);
                let a = Alltoallv::<u64>::with_options(ctx, 12 + k as u8, &counts, once, B);
                fixed.push((a.unwrap(), counts));
            }
            let mut unknown =
                Alltoallv::<u64>::with_unknown_sizes(ctx, 14, capacity, once, B).unwrap();
            let mut store = vec![0u64; capacity + 8];
            let mut pulled = 0;
            for it in 0..12 {
                let (a, counts) = match it % 3 {
                    2 => (&mut unknown, counts(Dist::Random, n, 4096, it as u64)),
                    k => {
                        let (a, counts) = &mut fixed[k];
                        (a, counts.clone())
                    }
                };
                let row = &counts[me * n..(me + 1) * n];
                let send = send_of(&counts, n, me, it);
                let want = expected(&counts, n, me, it);
                if (it + me) % 4 == 0 {
                    a.run(&send, row, B).unwrap();
                    check_in_place(a, &counts, n, me, it);
                    continue;
                }
                let shift = (it + me) % 8;
                store.fill(u64::MAX);
                let recv = &mut store[shift..shift + want.len()];
                a.run_into(&send, row, recv, B).unwrap();
                assert_eq!(recv[..], want[..], "it {it}, shift {shift}");
                assert!(
                    store[..shift].iter().all(|&w| w == u64::MAX),
                    "before the result"
                );
                let end = shift + want.len();
                assert!(
                    store[end..].iter().all(|&w| w == u64::MAX),
                    "beyond the result"
                );
                // Pieces that went straight into `recv` are not in the
                // window: this rank's own always, large ones from the
                // node's ranks where they went in one copy.
                assert!(a.received(me as u16).is_err(), "own piece in the window");
                let others = (0..n).filter(|&s| s != me);
                pulled += others.filter(|&s| a.received(s as u16).is_err()).count();
            }
            // Which pieces go in one copy depends on who announces a call
            // first (single_copy_timeout_then_retry_... makes sure some
            // do); none can without cross-memory attach.
            if ctx.local_num() == 1 || !fixed[0].0.single_copy() {
                assert_eq!(pulled, 0);
            }
            assert_eq!(fixed[1].0.single_copy(), unknown.single_copy());
            barrier(ctx);
        });
    }
}

/// Write this rank's pieces of iteration `it` into the window where
/// `Alltoallv::outgoing` says: elements `from..` of each (the others
/// stay from the call `copies` calls before, which used the same copy).
fn write_outgoing(
    a: &Alltoallv<u64>,
    counts: &[usize],
    n: usize,
    me: usize,
    it: usize,
    from: usize,
) {
    for t in 0..n {
        let view = a.outgoing(t as u16).unwrap();
        assert_eq!(view.len(), counts[me * n + t], "piece for {t}");
        let piece: Vec<u64> = (from..view.len()).map(|i| value(me, t, it, i)).collect();
        view.copy_from_slice(from.min(view.len()), &piece);
    }
}

/// Call `it` of `a` (fixed `counts`) the way `(it + me) % 3` says: pieces
/// made in the window, `run` or `run_into` (into a poisoned buffer), and
/// check the result (`what` names the case in a failure).
fn call_each_way(a: &mut Alltoallv<u64>, counts: &[usize], me: usize, it: usize, what: &str) {
    let n = a.recv_counts().len();
    let row = &counts[me * n..(me + 1) * n];
    match (it + me) % 3 {
        0 => {
            write_outgoing(a, counts, n, me, it, 0);
            a.run_in_window(B).unwrap();
            check_in_place(a, counts, n, me, it);
        }
        1 => {
            a.run(&send_of(counts, n, me, it), row, B).unwrap();
            check_in_place(a, counts, n, me, it);
        }
        _ => {
            let mut recv = vec![u64::MAX; expected(counts, n, me, 0).len()];
            a.run_into(&send_of(counts, n, me, it), row, &mut recv, B)
                .unwrap();
            assert_eq!(recv, expected(counts, n, me, it), "{what} it {it}");
        }
    }
}

/// Pieces made in the window and sent by `run_in_window`, on every layout
/// and distribution, while in the same calls other ranks send from
/// buffers with results in place or in their own buffers (single copies
/// where they may): every rank gets every piece. A piece left alone keeps
/// what was written for the call that used the same copy of the window,
/// `copies` calls before (two copies for small pieces, four set for the
/// large ones), or for a rank's piece for itself, which turns through two
/// copies only, what the last call of the same parity wrote.
#[test]
fn pieces_made_in_the_window_beside_send_buffers() {
    for (ranks, ppn) in layouts() {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            // Pieces for other nodes staged, or written straight from
            // buffers and staging slots.
            for (k, (d, c, direct_min)) in [
                (Dist::Regular, 1, Some(usize::MAX)),
                (Dist::Random, 37, Some(usize::MAX)),
                (Dist::Sparse, 2048, None),
                (Dist::Regular, 1, Some(1)),
                (Dist::Random, 37, Some(1)),
            ]
            .into_iter()
            .enumerate()
            {
                let opts = AlltoallvOptions {
                    block_bytes: 8 * 64,
                    single_copy_min: Some(8 << 10),
                    direct_min,
                    copies: (c >= 2048).then_some(4),
                    ..Default::default()
                };
                let counts = counts(d, n, c, 11 + k as u64);
                let mut a = Alltoallv::<u64>::with_options(ctx, 20, &counts, opts, B).unwrap();
                for it in 0..12 {
                    call_each_way(&mut a, &counts, me, it, &format!("{d:?}"));
                }
                // The next `copies` calls write every piece, as many after
                // them only the first element of each: the rest stays from
                // `copies` calls before.
                let k = a.copies();
                assert_eq!(k, if c >= 2048 { 4 } else { 2 });
                for it in 12..12 + 2 * k {
                    if it < 12 + k {
                        write_outgoing(&a, &counts, n, me, it, 0);
                    } else {
                        for t in (0..n).filter(|&t| counts[me * n + t] > 0) {
                            a.outgoing(t as u16).unwrap().set(0, value(me, t, it, 0));
                        }
                    }
                    a.run_in_window(B).unwrap();
                    for s in 0..n {
                        let got = a.received(s as u16).unwrap().to_vec();
                        // A rank's piece for itself turns through the
                        // first two copies only: the last call that wrote
                        // it whole is the last of its parity before 12 + k.
                        let whole = |it: usize| if s == me { 12 + k - 2 + it % 2 } else { it - k };
                        let want: Vec<u64> = (0..counts[s * n + me])
                            .map(|i| match (i, it) {
                                (1.., it) if it >= 12 + k => value(s, me, whole(it), i),
                                _ => value(s, me, it, i),
                            })
                            .collect();
                        assert_eq!(got, want, "{d:?} it {it}: piece from {s}");
                    }
                }
                drop(a);
                barrier(ctx);
            }
        });
    }
}

/// Bytes free in the shared-memory file system now.
fn shm_free() -> u64 {
    let st = rustix::fs::statvfs("/dev/shm").expect("statvfs /dev/shm");
    st.f_bavail.saturating_mul(st.f_frsize)
}

/// Where a rank receives 16 KiB or more per call, the calls turn through
/// more copies of the data area than two (`AlltoallvOptions::copies`), as
/// many as the options' rule says, the same on every rank (where ranks
/// share cores, through all of them or the first two as the calls
/// measure: `testing_copy`); with copies set, as many as set, all of them.
/// The results stay right through more than two turns, in place, private
/// (single copies and offered buffers where the calls take them) and made
/// in the window, counts fixed or unknown.
#[test]
fn calls_turn_through_more_copies_of_the_window() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(2, 1), (4, 2), (3, 3)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let counts = counts(Dist::Random, n, 2048, 7);
            let same_everywhere = |c: usize| {
                let (mut most, mut least) = ([0u64], [0u64]);
                ctx.allreduce(&[c as u64], &mut most, ReduceOp::Max, GroupId::ALL, B)
                    .unwrap();
                ctx.allreduce(&[c as u64], &mut least, ReduceOp::Min, GroupId::ALL, B)
                    .unwrap();
                assert_eq!((most[0], least[0]), (c as u64, c as u64), "copies differ");
            };
            for set in [None, Some(6)] {
                let opts = AlltoallvOptions {
                    copies: set,
                    ..Default::default()
                };
                let mut a = Alltoallv::<u64>::with_options(ctx, 2, &counts, opts, B).unwrap();
                let p = a.plan().unwrap();
                let received = (0..n)
                    .map(|t| (0..n).map(|s| 8 * counts[s * n + t]).sum::<usize>())
                    .max()
                    .unwrap();
                let largest = (0..ctx.num_nodes())
                    .map(|k| 8 * p.window_len(k))
                    .max()
                    .unwrap();
                let rule = |room| opts.copies_for(received, largest, room).unwrap();
                match set {
                    Some(c) => assert_eq!(a.copies(), c),
                    None => {
                        let most = rule(None);
                        assert!(most > 2 && most % 2 == 0, "{most}");
                        assert_eq!(rule(Some(0)), 2);
                        // Fewer where the shared memory has less room (a
                        // quarter of it free for the window), but all
                        // where it has plenty, as here unless other jobs
                        // fill it.
                        let c = a.copies();
                        assert!(c % 2 == 0 && (2..=most).contains(&c), "{c} of {most}");
                        if shm_free() / 4 >= (most * largest) as u64 {
                            assert!([most, 2].contains(&c), "{c} of {most}");
                        }
                    }
                }
                same_everywhere(a.copies());
                let what = format!("{} copies", a.copies());
                for it in 0..2 * a.copies() + 3 {
                    call_each_way(&mut a, &counts, me, it, &what);
                    // Copies set: all of them in turn. By the rule, all in
                    // the first turn, then (where measured) a copy of the
                    // call's parity.
                    let (copy, measured) = a.testing_copy();
                    assert_eq!(copy % 2, it % 2, "{what}, call {it}");
                    if !measured || it < a.copies() {
                        assert_eq!(copy, it % a.copies(), "{what}, call {it}");
                    }
                    assert!(!(measured && set.is_some()), "{what}");
                }
                drop(a);
                barrier(ctx);
            }
            // Unknown sizes: copies by the capacity, or as set.
            let capacity = 2048 * n;
            for set in [None, Some(4)] {
                let opts = AlltoallvOptions {
                    copies: set,
                    ..Default::default()
                };
                let mut u =
                    Alltoallv::<u64>::with_unknown_sizes(ctx, 3, capacity, opts, B).unwrap();
                if let Some(c) = set {
                    assert_eq!(u.copies(), c);
                }
                same_everywhere(u.copies());
                let mut recv = vec![0u64; capacity];
                for it in 0..2 * u.copies() + 1 {
                    let c = self::counts(Dist::Random, n, [256, 1024][it % 2], it as u64);
                    let row = &c[me * n..(me + 1) * n];
                    let want = expected(&c, n, me, it);
                    recv.fill(u64::MAX);
                    u.run_into(&send_of(&c, n, me, it), row, &mut recv, B)
                        .unwrap();
                    assert_eq!(recv[..want.len()], want[..], "unknown sizes, it {it}");
                }
                drop(u);
                barrier(ctx);
            }
        });
    }
}

/// Where the calls measure how many copies of the data area they turn
/// through (all, or the first two; ranks that share cores, or
/// `testing_measure_copies`), every node takes the first node's way in
/// the same call: node 0's calls say that all copies are twice as fast
/// until call 500, then the first two (`testing_call_times`), node 1's
/// the opposite. The copy of each call is the same on every rank, of the
/// call's parity, all copies after the probes and two after the change,
/// and every call's results are right, private, in place and made in the
/// window, on 2 and 3 nodes.
#[test]
fn every_node_turns_through_the_copies_the_first_node_measured_faster() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(4, 2), (6, 2)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            // 16 KiB per pair: more than two copies by the rule.
            let counts = counts(Dist::Regular, n, 2048, 3);
            let mut a = Alltoallv::<u64>::new(ctx, 4, &counts, B).unwrap();
            assert!(a.copies() > 2, "{} copies", a.copies());
            a.testing_measure_copies();
            let first = ctx.node() == 0;
            a.testing_call_times(move |call, [_, _, all]| {
                let all_faster = (call < 500) == first;
                Duration::from_millis(if all == all_faster { 1 } else { 2 })
            });
            let row = counts[me * n..(me + 1) * n].to_vec();
            let mut recv = vec![0u64; expected(&counts, n, me, 0).len()];
            let mut copies = Vec::new();
            for it in 0..1024 {
                // Private but in a call of each stretch (not the first
                // rank's 16th, which says whether the next is measured).
                match (it + me) % 64 {
                    40 => {
                        a.run(&send_of(&counts, n, me, it), &row, B).unwrap();
                        check_in_place(&a, &counts, n, me, it);
                    }
                    41 => {
                        write_outgoing(&a, &counts, n, me, it, 0);
                        a.run_in_window(B).unwrap();
                        check_in_place(&a, &counts, n, me, it);
                    }
                    _ => {
                        recv.fill(u64::MAX);
                        a.run_into(&send_of(&counts, n, me, it), &row, &mut recv, B)
                            .unwrap();
                        assert!(recv == expected(&counts, n, me, it), "call {it}");
                    }
                }
                let (copy, measured) = a.testing_copy();
                assert!(measured);
                assert_eq!(copy % 2, it % 2, "call {it}");
                copies.push(copy);
            }
            // The same copies on every rank: a hash of them agreed.
            let hash = copies.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
                (h ^ c as u64).wrapping_mul(0x100_0000_01b3)
            });
            let (mut most, mut least) = ([0u64], [0u64]);
            ctx.allreduce(&[hash], &mut most, ReduceOp::Max, GroupId::ALL, B)
                .unwrap();
            ctx.allreduce(&[hash], &mut least, ReduceOp::Min, GroupId::ALL, B)
                .unwrap();
            assert_eq!(most, least, "the ranks' copies differ");
            // The first node's probes (calls 68-99) find all copies faster,
            // its word for calls 192-255 says so; from call 500 on the two
            // are faster, which a burst of tries (calls 700-703) finds and
            // the word for calls 768-831 says. Beyond a copy below 2 in
            // every 16th call of a turn through all and the bursts of tries
            // of the way not in use, both show.
            let beyond_two = |calls: std::ops::Range<usize>| -> usize {
                copies[calls].iter().filter(|&&c| c >= 2).count()
            };
            assert!(beyond_two(192..500) >= 250, "{copies:?}");
            assert!(beyond_two(832..1024) <= 8, "{copies:?}");
            drop(a);
            barrier(ctx);
        });
    }
}

/// A node may run ahead of the first node when the two exchange nothing:
/// the ranks of node 1 (pieces inside their node only) reach call 48,
/// where every rank reads the first node's way of turning through the
/// copies for the next stretch of calls, while node 0 waits in its call
/// 10 for them. Their call times out, nothing lost; node 0 goes on (it
/// publishes the way at its call 16), and the same call, retried, reads
/// it and completes with the right result, as do all the calls after.
/// Node 0 finishes its calls first and drops its window only once node
/// 1 has read its last word (at call 176; through MPI and GPI-2 a read of
/// a window dropped fails).
#[test]
fn a_node_that_waits_for_the_first_nodes_copies_times_out_then_retries() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let node = ctx.node();
        // 16 KiB per pair inside each node, nothing between nodes.
        let mut counts = vec![0; n * n];
        for s in 0..n {
            for t in (0..n).filter(|&t| t / 2 == s / 2) {
                counts[s * n + t] = 2048;
            }
        }
        let mut a = Alltoallv::<u64>::new(ctx, 5, &counts, B).unwrap();
        assert!(a.testing_measure_copies());
        let row = counts[me * n..(me + 1) * n].to_vec();
        let mut recv = vec![0u64; expected(&counts, n, me, 0).len()];
        let seg = segment(ctx, 6, 64);
        barrier(ctx);
        for it in 0..200 {
            let send = send_of(&counts, n, me, it);
            if node == 0 && it == 10 {
                // Until both ranks of node 1 have timed out at call 48.
                for id in [2, 3] {
                    ctx.notify_waitsome(6, id..id + 1, B).unwrap();
                    ctx.notify_reset(6, id).unwrap();
                }
            }
            if node == 1 && it == 48 {
                let r = a.run_into(&send, &row, &mut recv, Timeout::ms(50));
                assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
                for t in [0, 1] {
                    ctx.notify(t, 6, Notification::new(me as u32, 1), 1, B)
                        .unwrap();
                }
                ctx.wait(1, B).unwrap();
            }
            recv.fill(u64::MAX);
            a.run_into(&send, &row, &mut recv, B).unwrap();
            assert!(recv == expected(&counts, n, me, it), "call {it}");
        }
        drop(seg);
        drop(a);
        barrier(ctx);
    });
}

/// Copies of the data area that are odd or fewer than two are refused on
/// every rank, as are copies that the ranks do not all give alike and so
/// many that the window's size overflows; an alltoallv made afterwards
/// works.
#[test]
fn bad_or_disagreeing_copies_are_refused() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u64);
        let with = |c: usize| AlltoallvOptions {
            copies: Some(c),
            ..Default::default()
        };
        for c in [0, 1, 3, 7] {
            match Alltoallv::<u64>::alltoall(ctx, 2, 4, with(c), B) {
                Err(Error::InvalidArgument(m)) => assert!(m.contains("even"), "{m}"),
                other => panic!("copies {c}: {other:?}"),
            }
        }
        // So many that the window's size overflows: an error, no window.
        assert!(matches!(
            Alltoallv::<u64>::alltoall(ctx, 2, 4, with(1 << 62), B),
            Err(Error::SizeOverflow { .. })
        ));
        let mine = with(if me == 0 { 4 } else { 2 });
        assert!(matches!(
            Alltoallv::<u64>::alltoall(ctx, 2, 4, mine, B),
            Err(Error::InvalidArgument(_))
        ));
        let mut a = Alltoallv::<u64>::alltoall(ctx, 2, 4, with(8), B).unwrap();
        assert_eq!(a.copies(), 8);
        let mut recv = vec![0u64; 4 * n];
        for call in 0..10 {
            a.run_into(&vec![100 * me + call; 4 * n], &vec![4; n], &mut recv, B)
                .unwrap();
            let want: Vec<u64> = (0..n as u64).flat_map(|s| [100 * s + call; 4]).collect();
            assert_eq!(recv, want, "call {call}");
        }
    });
}

/// Pieces in the window need fixed counts; their places are refused for a
/// rank that does not exist and while a call is unfinished; a timed-out
/// `run_in_window` continues only as `run_in_window`, also where pieces are
/// large enough for single copies.
#[test]
fn pieces_in_the_window_refuse_misuse() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let mut unknown =
            Alltoallv::<u64>::with_unknown_sizes(ctx, 1, 8 * n, Default::default(), B).unwrap();
        assert!(matches!(
            unknown.outgoing(0),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            unknown.run_in_window(B),
            Err(Error::InvalidArgument(_))
        ));
        drop(unknown);
        let counts = counts(Dist::Random, n, 20, 5);
        let row = &counts[me * n..(me + 1) * n];
        let mut a = Alltoallv::<u64>::new(ctx, 2, &counts, B).unwrap();
        assert!(matches!(
            a.outgoing(n as u16),
            Err(Error::InvalidRank { .. })
        ));
        write_outgoing(&a, &counts, n, me, 3, 0);
        others_time_out_before_rank_0(ctx, 0, |t| a.run_in_window(t));
        if me != 0 {
            assert!(matches!(a.outgoing(0), Err(Error::InvalidArgument(_))));
            let send = send_of(&counts, n, me, 3);
            assert!(matches!(
                a.run(&send, row, B),
                Err(Error::InvalidArgument(_))
            ));
        }
        a.run_in_window(B).unwrap();
        check_in_place(&a, &counts, n, me, 3);
        // And the next call is a normal one.
        let send = send_of(&counts, n, me, 4);
        a.run(&send, row, B).unwrap();
        check_in_place(&a, &counts, n, me, 4);
        drop(a);
        // The same where pieces are large enough for single copies (a
        // call in the window has no send buffer to read them out of: its
        // failure moves nothing).
        let big = crate::counts(Dist::Regular, n, 4096, 0);
        let mut a = copying_once(ctx, &big);
        write_outgoing(&a, &big, n, me, 5, 0);
        others_time_out_before_rank_0(ctx, 0, |t| a.run_in_window(t));
        a.run_in_window(B).unwrap();
        check_in_place(&a, &big, n, me, 5);
        barrier(ctx);
    });
}

/// A node whose ranks chose different thresholds copies everything twice
/// (nobody waits in vain for another's announcement).
#[test]
fn single_copies_need_the_whole_node() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Regular, n, 4096, 2);
        let min = if me == 0 { 16 << 10 } else { 32 << 10 };
        let mine = AlltoallvOptions {
            single_copy_min: Some(min),
            ..Default::default()
        };
        let mut a = Alltoallv::<u64>::with_options(ctx, 1, &counts, mine, B).unwrap();
        if ctx.node() == 0 {
            assert!(!a.single_copy(), "ranks 0 and 1 disagree");
        }
        let row = &counts[me * n..(me + 1) * n];
        let mut recv = vec![0u64; 4096 * n];
        for it in 0..3 {
            a.run_into(&send_of(&counts, n, me, it), row, &mut recv, B)
                .unwrap();
            assert_eq!(recv, expected(&counts, n, me, it), "it {it}");
        }
        barrier(ctx);
    });
}

/// By default the calls measure whether large pieces go in one copy (or
/// two, through the windows): inside a node, and into buffers offered to
/// other nodes' senders. Every rank of a node takes the same way in the
/// same call, chosen by the node's first rank, and the results are the
/// same either way. The first turn through the window's copies is not
/// measured (its calls touch the window's pages for the first time); then
/// 4 calls warm up and the probes try the two ways in turn, 4 calls each,
/// the usual (two copies) first (`collectives/timed_choice.rs`), so up to
/// the 8th call after the first turn every piece from another rank comes
/// through the window, on every rank: one node of 4 (single copies inside
/// it), 2 nodes of one (offers only), 2 nodes of 2 (both).
#[test]
fn calls_measure_single_copies_and_agree_on_each_call() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(4, 4), (2, 1), (4, 2)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let counts = counts(Dist::Regular, n, 4096, 3);
            let mut a = Alltoallv::<u64>::new(ctx, 2, &counts, B).unwrap();
            let row = &counts[me * n..(me + 1) * n];
            let mut store = vec![0u64; 4096 * n + 8];
            let recv = line_aligned(&mut store, 4096 * n);
            let mut once = 0u64;
            // The first turn through the window's copies is not measured
            // (32 KiB per pair: more than two copies), nor, where the calls
            // measure how many copies they turn through (ranks that share
            // cores), the first stretch of 64 calls.
            let start = if a.testing_copy().1 {
                64
            } else {
                a.copies() - 2
            };
            for it in 0..start + 14 {
                a.run_into(&send_of(&counts, n, me, it), row, recv, B)
                    .unwrap();
                assert_eq!(*recv, expected(&counts, n, me, it), "it {it}");
                let others = (0..n).filter(|&s| s != me);
                let pulled = others.filter(|&s| a.received(s as u16).is_err()).count();
                // Calls 0-3 after the first turn warm up, then the probes
                // take each way for 4 calls in turn, from the usual (two
                // copies).
                if !(start + 8..start + 12).contains(&it) {
                    assert_eq!(pulled, 0, "call {it} copies twice");
                } else {
                    once += pulled as u64;
                }
            }
            // The calls that try one copy do copy once (some pieces at
            // least: a receiver that announces late gets its piece through
            // the window), where the node's ranks may read each other's
            // memory, or, between nodes of one rank, write it (the native
            // engine's emulated nodes).
            let mut all = [0u64];
            ctx.allreduce(&[once], &mut all, ReduceOp::Sum, GroupId::ALL, B)
                .unwrap();
            let afar = ppn < ranks && ctx.engine() == Engine::Native;
            if a.single_copy() || (ppn == 1 && afar) {
                assert!(all[0] > 0, "no piece went in one copy");
            }
            barrier(ctx);
        });
    }
}

/// An alltoallv on segment 1 that copies pieces of 16 KiB or more once
/// in every call (where the node's ranks may read each other's memory).
fn copying_once<'a>(ctx: &'a Context, counts: &[usize]) -> Alltoallv<'a, u64> {
    let once = AlltoallvOptions {
        single_copy_min: Some(16 << 10),
        ..Default::default()
    };
    Alltoallv::<u64>::with_options(ctx, 1, counts, once, B).unwrap()
}

/// `len` elements of `v` starting on a cache line.
fn line_aligned(v: &mut [u64], len: usize) -> &mut [u64] {
    let skip = (64 - v.as_ptr() as usize % 64) % 64 / 8;
    &mut v[skip..skip + len]
}

/// Buffers whose offsets within a cache line differ (as glibc hands out
/// once a program has freed a large buffer: any 16-byte offset) still
/// exchange large pieces in one copy, unless this machine's kernel copies
/// much slower between such offsets (AMD Zen 4): results right either way.
#[test]
fn buffers_at_different_line_offsets_still_copy_once() {
    Job::new(&[3]).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Regular, n, 4096, 1);
        let mut a = copying_once(ctx, &counts);
        let row = &counts[me * n..(me + 1) * n];
        let (mut send_store, mut recv_store) =
            (vec![0u64; 4096 * n + 8], vec![0u64; 4096 * n + 16]);
        // The receive buffer 8 or 16 bytes (by rank) past a line.
        let skip = 1 + me % 2;
        let recv = &mut line_aligned(&mut recv_store, 4096 * n + 8)[skip..skip + 4096 * n];
        let mut pulled = 0;
        for it in 0..3 {
            let send = line_aligned(&mut send_store, 4096 * n);
            send.copy_from_slice(&send_of(&counts, n, me, it));
            a.run_into(send, row, recv, B).unwrap();
            assert_eq!(*recv, expected(&counts, n, me, it), "it {it}");
            pulled += (0..n)
                .filter(|&s| s != me && a.received(s as u16).is_err())
                .count();
        }
        let mut all = [0u64];
        ctx.allreduce(&[pulled as u64], &mut all, ReduceOp::Sum, GroupId::ALL, B)
            .unwrap();
        if a.single_copy() && !gaspi::testing::kernel_copy_offsets_slow() {
            assert!(all[0] > 0, "no piece went in one copy");
        }
        barrier(ctx);
    });
}

/// A call that times out while a rank of the node has not announced its
/// buffers (a receiver waits for that to read its piece) completes when
/// retried; that rank, announcing last, leaves its pieces for the others
/// to read in one copy (with buffers on cache lines, which every machine
/// copies once).
#[test]
fn single_copy_timeout_then_retry_completes_the_same_call() {
    Job::new(&[3]).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Regular, n, 4096, 1);
        let mut a = copying_once(ctx, &counts);
        let row = &counts[me * n..(me + 1) * n];
        let (mut send_store, mut recv_store) = (vec![0u64; 4096 * n + 8], vec![0u64; 4096 * n + 8]);
        let recv = line_aligned(&mut recv_store, 4096 * n);
        for it in 0..2 {
            let send = line_aligned(&mut send_store, 4096 * n);
            send.copy_from_slice(&send_of(&counts, n, me, it));
            let send = &*send;
            others_time_out_before_rank_0(ctx, 0, |t| a.run_into(send, row, recv, t));
            a.run_into(send, row, recv, B).unwrap();
            assert_eq!(*recv, expected(&counts, n, me, it), "it {it}");
            if me != 0 && a.single_copy() {
                assert!(a.received(0).is_err(), "rank 0's piece went in one copy");
            }
        }
        barrier(ctx);
    });
}

/// Pieces between nodes that go unstaged reach a `run_into` buffer in one
/// copy on the native engine: the receiver offers its buffer in the call,
/// the senders write into it themselves, and `received` then refuses
/// those pieces. In the same calls, ranks of `run` (results in the window)
/// and of `run_into_displaced` (which offers nothing) get theirs through
/// the window; ranks change their ways.
#[test]
fn pieces_between_nodes_go_straight_into_offered_buffers() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(4, 2), (6, 3), (3, 1)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            // 32 KiB per pair: unstaged, and large enough to go once.
            let counts = counts(Dist::Regular, n, 4096, 1);
            let mut a = copying_once(ctx, &counts);
            let row = &counts[me * n..(me + 1) * n];
            let packed: Vec<usize> = (0..n).map(|k| 4096 * k).collect();
            let afar = |s: usize| ctx.node_of(s as u16) != ctx.node();
            let mut recv = vec![0u64; 4096 * n];
            let mut pushed = 0u64;
            // Each rank keeps a way for 12 calls, then takes the next (a
            // sender looks at the offers of a rank that offered nothing
            // again a few calls later).
            for it in 0..24 {
                let send = send_of(&counts, n, me, it);
                recv.fill(u64::MAX);
                match (me + it / 12) % 3 {
                    0 => {
                        a.run(&send, row, B).unwrap();
                        check_in_place(&a, &counts, n, me, it);
                    }
                    1 => {
                        a.run_into(&send, row, &mut recv, B).unwrap();
                        assert_eq!(recv, expected(&counts, n, me, it), "it {it}");
                        pushed += (0..n)
                            .filter(|&s| afar(s) && a.received(s as u16).is_err())
                            .count() as u64;
                    }
                    _ => {
                        a.run_into_displaced(&send, row, &packed, &mut recv, &packed, B)
                            .unwrap();
                        assert_eq!(recv, expected(&counts, n, me, it), "it {it}");
                        for s in (0..n).filter(|&s| afar(s)) {
                            assert!(a.received(s as u16).is_ok(), "it {it}: {s} via window");
                        }
                    }
                }
            }
            let mut all = [0u64];
            ctx.allreduce(&[pushed], &mut all, ReduceOp::Sum, GroupId::ALL, B)
                .unwrap();
            // Where the kernel may copy between the ranks (a node of two
            // probes that; a parent may read its children always).
            let allowed = ranks / ppn < 2 || ppn < 2 || a.single_copy();
            if ctx.engine() == Engine::Native && allowed {
                assert!(all[0] > 0, "no piece between nodes went in one copy");
            }
            barrier(ctx);
        });
    }
}

/// A `run_into` that times out after offering its buffer to the ranks of
/// other nodes (and takes the offer back): continuing the call with
/// another buffer is refused on the native engine (pieces may be in the
/// first), with the same buffer it completes, every piece in place
/// whichever way it came. (That the call waits for writers at work before
/// it returns: `a_call_that_times_out_waits_for_the_writes_into_its_buffer`.)
#[test]
fn an_offered_buffer_is_taken_back_on_timeout() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Regular, n, 4096, 1);
        let mut a = copying_once(ctx, &counts);
        let row = &counts[me * n..(me + 1) * n];
        let (mut recv, mut other) = (vec![0u64; 4096 * n], vec![0u64; 4096 * n]);
        for it in 0..3 {
            let send = send_of(&counts, n, me, it);
            recv.fill(u64::MAX);
            others_time_out_before_rank_0(ctx, 0, |t| a.run_into(&send, row, &mut recv, t));
            if me != 0 && ctx.engine() == Engine::Native {
                let e = a.run_into(&send, row, &mut other, B).unwrap_err();
                assert!(
                    matches!(&e, Error::InvalidArgument(m) if m.contains("same buffer")),
                    "{e}"
                );
            }
            a.run_into(&send, row, &mut recv, B).unwrap();
            assert_eq!(recv, expected(&counts, n, me, it), "it {it}");
        }
        barrier(ctx);
    });
}

/// Calls of 4 MiB per rank measure whether their stores into the windows
/// go faster streaming (non-temporal) or cached: the probes after the
/// first calls take both kinds in turn, so among these calls some stream.
/// With `stream_stores: Some(true)` every call streams into the windows, large or small
/// (random sizes: pieces below and above the vector loop's minimum).
/// Every result is right either way, in place and private.
#[test]
fn large_calls_measure_streaming_stores_and_stay_right() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let streaming = AlltoallvOptions {
            stream_stores: Some(true),
            ..Default::default()
        };
        // 1 MiB per pair, then up to 2 * 3000 elements per pair.
        let cases = [
            (counts(Dist::Regular, n, 128 << 10, 1), None, 20),
            (counts(Dist::Random, n, 3000, 2), Some(streaming), 6),
        ];
        for (counts, opts, calls) in cases {
            let mut a = match opts {
                None => Alltoallv::<u64>::new(ctx, 1, &counts, B).unwrap(),
                Some(o) => Alltoallv::<u64>::with_options(ctx, 1, &counts, o, B).unwrap(),
            };
            let mut recv = vec![0u64; (0..n).map(|s| counts[s * n + me]).sum()];
            for it in 0..calls {
                let private = (it % 3 != 0).then_some(&mut recv[..]);
                run_and_check(&mut a, &counts, (n, me), it, private);
            }
            drop(a);
            barrier(ctx);
        }
    });
}

/// Call `it` of `a` (`counts`, rank `me` of `n`) with the result in place,
/// or in `private` (filled with `u64::MAX` first); checks every piece.
fn run_and_check(
    a: &mut Alltoallv<u64>,
    counts: &[usize],
    (n, me): (usize, usize),
    it: usize,
    private: Option<&mut [u64]>,
) {
    let send = send_of(counts, n, me, it);
    let row = &counts[me * n..(me + 1) * n];
    match private {
        None => {
            a.run(&send, row, B).unwrap();
            check_in_place(a, counts, n, me, it);
        }
        Some(recv) => {
            recv.fill(u64::MAX);
            a.run_into(&send, row, recv, B).unwrap();
            assert!(recv == expected(counts, n, me, it), "it {it}");
        }
    }
}

/// Every node takes the ways that the job's first node measured faster,
/// a call after it: node 0's calls say that streaming stores are twice as
/// fast, node 1's the opposite (`testing_call_times`). Past the warm-up
/// and the probes, which try both ways, both nodes stream; a node that
/// went by its own measurements would not. The results are checked in
/// every call.
#[test]
fn every_node_takes_the_ways_the_first_node_measured_faster() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        // 1 MiB per pair: each rank sends 4 MiB, calls that measure
        // whether streaming stores are faster.
        let counts = counts(Dist::Regular, n, 128 << 10, 1);
        let mut a = Alltoallv::<u64>::new(ctx, 1, &counts, B).unwrap();
        let first = ctx.node() == 0;
        a.testing_call_times(move |_, [_, streaming, _]| {
            Duration::from_millis(if streaming == first { 1 } else { 2 })
        });
        let mut recv = vec![0u64; (0..n).map(|s| counts[s * n + me]).sum()];
        let mut ways = Vec::new();
        for it in 0..44 {
            let private = (it % 2 == 1).then_some(&mut recv[..]);
            run_and_check(&mut a, &counts, (n, me), it, private);
            ways.push(a.testing_ways()[1]);
        }
        // Calls 0-3 warm up, 4-35 probe in runs of 8 (4-11 cached, 12-19
        // streaming, ...); the last probe decides, and from call 37 on
        // node 1 has read node 0's choice.
        assert!(ways[12..20].iter().all(|&w| w), "probes: {ways:?}");
        assert!(!ways[20..28].iter().any(|&w| w), "probes: {ways:?}");
        assert!(
            ways[38..].iter().all(|&w| w),
            "node {} took {ways:?}",
            ctx.node()
        );
    });
}

/// By default the node's last rank to stage sends all its chunks up to 64
/// KiB going out of the node, and whatever their size where the node's
/// ranks are all bound to one CPU (`testing_one_sender_max`; their shares
/// would go from that CPU one after the other anyway); a limit set in the
/// options holds everywhere. On 2 CPUs, `--bind block` puts each node of
/// 2 on a CPU of its own (in 4 nodes of 2, two nodes on each), `--bind
/// spread` a rank of each node on each CPU. Calls of 128 KiB going out of
/// each node move the data right each way, in place and private.
#[test]
fn one_rank_sends_a_nodes_chunks_where_they_are_small_or_its_ranks_share_a_cpu() {
    for (ranks, binding) in NODES_OF_2_PLACED {
        Job::new(&[ranks]).ppn(2).binding(binding).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let one_cpu = node_on_one_cpu(ctx);
            let what = format!("{ranks} ranks, {binding:?}");
            // 32 KiB per pair in 4 ranks (8 KiB in 8): 128 KiB out of a node.
            let counts = counts(Dist::Regular, n, 16_384 / n, 1);
            let mut recv = vec![0u64; (0..n).map(|s| counts[s * n + me]).sum()];
            for (seg, limit) in [(1, None), (2, Some(0))] {
                let options = AlltoallvOptions {
                    one_sender_max: limit,
                    ..Default::default()
                };
                let mut a = Alltoallv::<u64>::with_options(ctx, seg, &counts, options, B).unwrap();
                let want = match (limit, one_cpu) {
                    (Some(set), _) => set,
                    (None, true) => usize::MAX,
                    (None, false) => AlltoallvOptions::DEFAULT_ONE_SENDER_MAX,
                };
                assert_eq!(a.testing_one_sender_max(), want, "{what}, {limit:?}");
                for it in 0..12 {
                    let private = (it % 2 == 1).then_some(&mut recv[..]);
                    run_and_check(&mut a, &counts, (n, me), it, private);
                }
            }
            barrier(ctx);
        });
    }
}

/// A rank bound to one CPU on which only ranks of its node may run knows
/// them (`testing_core_mates`): once they have done their part of a call,
/// they wait, as it does, for ranks of other CPUs, and its waits spin
/// rather than hand the CPU to a rank that can only hand it back. Where
/// a rank of another node may run on its CPU (which may have work while
/// this rank waits), or it may run on several, it has none and yields.
/// On 2 CPUs, `--bind block` puts each node of 2 on a CPU of its own, and
/// `--bind spread` a rank of each node on each CPU. Calls in every layout
/// move the data right, with counts known and with sizes unknown (whose
/// waits for the count rows spin too).
#[test]
fn waits_spin_where_a_cpus_ranks_are_all_of_the_node() {
    for binding in [Binding::Block, Binding::Spread] {
        Job::new(&[4]).ppn(2).binding(binding).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let spans = cpu_spans(ctx);
            let overlap = |s: usize, t: usize| spans[s].0 <= spans[t].1 && spans[t].0 <= spans[s].1;
            let node = ctx.node_ranks(ctx.node());
            let node = node.start as usize..node.end as usize;
            let mates: Vec<usize> = (0..n).filter(|&r| r != me && overlap(me, r)).collect();
            let single = spans[me].0 == spans[me].1;
            // The ranks of other hosts are not known to a rank.
            let one_host = (0..n).all(|r| ctx.on_this_host(r as gaspi::Rank));
            let want_mates = (one_host && single && mates.iter().all(|r| node.contains(r)))
                .then(|| mates.iter().map(|r| r - node.start).collect::<Vec<_>>());
            // The CPUs the job's ranks were bound to, lowest to highest.
            let lowest = spans.iter().map(|s| s.0).min().unwrap();
            let cpus = spans.iter().map(|s| s.1).max().unwrap() + 1 - lowest;
            if cpus == 2 && one_host && node.len() == 2 {
                let on_2_cpus = match binding {
                    Binding::Block => Some(vec![1 - me % 2]),
                    _ => None,
                };
                assert_eq!(want_mates, on_2_cpus, "{binding:?}: spans {spans:?}");
            }
            let counts = counts(Dist::Regular, n, 128, 1);
            let mut a = Alltoallv::<u64>::new(ctx, 1, &counts, B).unwrap();
            assert_eq!(
                a.testing_core_mates(),
                want_mates,
                "{binding:?}: spans {spans:?}"
            );
            let mut recv = vec![0u64; (0..n).map(|s| counts[s * n + me]).sum()];
            for it in 0..20 {
                let private = (it % 2 == 1).then_some(&mut recv[..]);
                run_and_check(&mut a, &counts, (n, me), it, private);
            }
            drop(a);
            // Sizes unknown: the waits for the rows spin too (the node's
            // last rank to write its row sends them all), counts changing.
            let capacity = 8 * 128 * n;
            let mut u =
                Alltoallv::<u64>::with_unknown_sizes(ctx, 2, capacity, Default::default(), B)
                    .unwrap();
            assert_eq!(u.testing_core_mates(), want_mates, "{binding:?}");
            let mut recv = vec![0u64; capacity];
            for it in 0..20 {
                let changing = self::counts(Dist::Random, n, 64, it as u64);
                let how = format!("{binding:?} it={it}");
                run_unknown_and_check(&mut u, &changing, (n, me), it, &mut recv, &how);
            }
            drop(u);
            barrier(ctx);
        });
    }
}

/// Private calls with a piece for another rank of 8 KiB or more, or of 2
/// KiB or more in a node where ranks share a CPU, measure streaming
/// stores into the windows (their receivers copy every piece out in the
/// call, so the call's time shows what the stores cost the readers);
/// in-place calls of the same size, private calls of smaller pieces and
/// private calls whose only large piece is a rank's own (which goes
/// straight into its buffer) keep ordinary stores. The calls' times are
/// made to say that streaming is faster: after the probes the private
/// calls that measure stream, where the nodes share one host's memory
/// (through a transport between hosts the nodes would share the measured
/// kind by a round trip per call).
#[test]
fn private_calls_with_pieces_of_8_kib_or_2_kib_on_shared_cpus_measure_streaming_stores() {
    // (2 ranks: on 2 CPUs or more, each on a CPU of its own.)
    Job::new(&[2, 4]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let one_machine = (0..n).all(|r| ctx.on_this_host(r as gaspi::Rank));
        let together = one_cpu_together(ctx);
        let node = ctx.node_ranks(ctx.node());
        let shares_cpu = node
            .map(|s| s as usize)
            .any(|s| (0..n).any(|t| t != s && together[s][t]));
        let own_large: Vec<usize> = (0..n * n)
            .map(|i| if i / n == i % n { 1024 } else { 128 })
            .collect();
        // (counts, private calls, streaming expected after the probes).
        let cases = [
            (counts(Dist::Regular, n, 1024, 3), true, one_machine),
            (counts(Dist::Regular, n, 1024, 3), false, false),
            (
                counts(Dist::Regular, n, 512, 3),
                true,
                one_machine && shares_cpu,
            ),
            (
                counts(Dist::Regular, n, 256, 3),
                true,
                one_machine && shares_cpu,
            ),
            (counts(Dist::Regular, n, 128, 3), true, false),
            (own_large, true, false),
        ];
        for (case, (counts, private, streams)) in cases.into_iter().enumerate() {
            // Two copies of the window: the probes start at call 4 (more
            // copies delay them until each has been used once).
            let two = AlltoallvOptions {
                copies: Some(2),
                ..AlltoallvOptions::default()
            };
            let mut a = Alltoallv::<u64>::with_options(ctx, 1, &counts, two, B).unwrap();
            a.testing_call_times(|_, [_, streaming, _]| {
                Duration::from_millis(if streaming { 1 } else { 2 })
            });
            let mut recv = vec![0u64; (0..n).map(|s| counts[s * n + me]).sum()];
            let mut ways = Vec::new();
            for it in 0..44 {
                let into = private.then_some(&mut recv[..]);
                run_and_check(&mut a, &counts, (n, me), it, into);
                ways.push(a.testing_ways()[1]);
            }
            if streams {
                // Calls 0-3 warm up, 4-35 probe in runs of 8 (4-11
                // cached, 12-19 streaming, ...); the last probe decides.
                assert!(ways[12..20].iter().all(|&w| w), "case {case}: {ways:?}");
                assert!(ways[38..].iter().all(|&w| w), "case {case}: {ways:?}");
            } else {
                assert!(!ways.contains(&true), "case {case}: {ways:?}");
            }
            drop(a);
            barrier(ctx);
        }
    });
}

/// A streaming call's stores into the windows stream only where some
/// reader is bound to another CPU than the writer: a line stored for a
/// rank of the writer's own CPU is in the cache that rank reads from. 4
/// ranks in 2 nodes, bound in blocks (on 2 CPUs a node per CPU) and
/// spread (on 2 CPUs, each node's ranks on both; on 1 CPU both put all
/// on it, on 4 or more a CPU or more each, none shared), private calls
/// of 8 KiB pieces whose times favour streaming:
/// - written straight into the other node's window (`direct_min` 8 KiB),
///   a rank streams exactly its pieces for ranks not on its CPU, into
///   either node's window;
/// - staged (`direct_min` off), a rank streams its pieces for its node's
///   ranks not on its CPU, its staged pieces where a rank of its node is
///   not on its CPU (one of them writes the node's message), and the
///   node's message where a rank of the other node is not on the
///   writer's CPU.
///
/// The bytes streamed, summed over each node, say so in every call; the
/// data are checked.
#[test]
fn streaming_stores_skip_readers_on_the_writers_cpu() {
    for binding in [Binding::Block, Binding::Spread] {
        streaming_stores_by_cpu(binding);
    }
}

fn streaming_stores_by_cpu(binding: Binding) {
    Job::new(&[4]).ppn(2).binding(binding).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let together = one_cpu_together(ctx);
        let apart = |s: usize, t: usize| !together[s][t];
        let piece = 8u64 << 10;
        let node_of = |r: usize| r / 2;
        let node_ranks = |k: usize| 2 * k..2 * k + 2;
        // The bytes the ranks of node `k` stream in a streaming call.
        let direct = |k: usize| -> u64 {
            node_ranks(k)
                .flat_map(|s| (0..n).filter(move |&t| t != s).map(move |t| (s, t)))
                .filter(|&(s, t)| apart(s, t))
                .count() as u64
                * piece
        };
        let staged = |k: usize| -> u64 {
            let mut bytes = 0;
            for s in node_ranks(k) {
                let to_node = node_ranks(k).filter(|&t| t != s && apart(s, t)).count();
                bytes += to_node as u64 * piece;
                if node_ranks(k).any(|t| apart(s, t)) {
                    bytes += 2 * piece; // its pieces for the other node
                }
            }
            // The node's message, 4 pieces, by whichever of its ranks
            // writes it: the answer must not depend on which.
            let other = 1 - k;
            let streams: Vec<bool> = node_ranks(k)
                .map(|s| node_ranks(other).any(|t| apart(s, t)))
                .collect();
            assert!(streams.iter().all(|&w| w == streams[0]), "{together:?}");
            bytes + u64::from(streams[0]) * 4 * piece
        };
        // Two copies of the window: the probes start at call 4.
        let options = AlltoallvOptions {
            single_copy_min: Some(usize::MAX),
            copies: Some(2),
            ..AlltoallvOptions::default()
        };
        let expected_of: [&dyn Fn(usize) -> u64; 2] = [&direct, &staged];
        for (case, (direct_min, expected_of)) in [8 << 10, usize::MAX]
            .into_iter()
            .zip(expected_of)
            .enumerate()
        {
            let counts = counts(Dist::Regular, n, 1024, 5);
            let options = AlltoallvOptions {
                direct_min: Some(direct_min),
                ..options
            };
            let mut a = Alltoallv::<u64>::with_options(ctx, 1, &counts, options, B).unwrap();
            a.testing_call_times(|_, [_, streaming, _]| {
                Duration::from_millis(if streaming { 1 } else { 2 })
            });
            let mut recv = vec![0u64; (0..n).map(|s| counts[s * n + me]).sum()];
            let mut streamed_calls = 0;
            for it in 0..44 {
                run_and_check(&mut a, &counts, (n, me), it, Some(&mut recv[..]));
                // By node: bytes streamed, and calls that streamed.
                let mut sums = vec![0u64; 4];
                sums[2 * node_of(me)] = a.testing_streamed();
                sums[2 * node_of(me) + 1] = u64::from(a.testing_ways()[1]);
                ctx.allreduce(&sums.clone(), &mut sums, ReduceOp::Sum, GroupId::ALL, B)
                    .unwrap();
                for k in 0..2 {
                    // Both ranks of a node stream, or neither.
                    assert!(sums[2 * k + 1] != 1, "case {case}, call {it}: {sums:?}");
                    let expected = if sums[2 * k + 1] == 2 {
                        expected_of(k)
                    } else {
                        0
                    };
                    assert_eq!(
                        sums[2 * k],
                        expected,
                        "{binding:?}, case {case}, call {it}, node {k}: CPUs together {together:?}"
                    );
                }
                streamed_calls += u64::from(a.testing_ways()[1]);
            }
            let one_machine = (0..n).all(|r| ctx.on_this_host(r as gaspi::Rank));
            assert_eq!(streamed_calls > 0, one_machine, "case {case}");
            drop(a);
            barrier(ctx);
        }
    });
}

/// Notification ids of the tests that hold a write into rank 0's buffer:
/// rank 2 holds its writer's place, rank 0's call returned, rank 2 wrote.
const HOLDING: u32 = 10;
const RETURNED: u32 = 11;
const WRITTEN: u32 = 12;

/// Notify id `id` on segment 0 of rank `to` and wait until it is sent.
fn note(ctx: &Context, to: gaspi::Rank, id: u32) {
    ctx.notify(to, 0, Notification::new(id, 1), 1, B).unwrap();
    ctx.wait(1, B).unwrap();
}

/// Hold a copy in a test hook: tell rank `to` (notification `held`), then
/// wait for its answer (`back`) at most `ms` milliseconds.
fn hold(ctx: &Context, to: gaspi::Rank, held: u32, back: u32, ms: u64) {
    note(ctx, to, held);
    if ctx
        .notify_waitsome(0, back..back + 1, Timeout::ms(ms))
        .is_ok()
    {
        ctx.notify_reset(0, back).unwrap();
    }
}

/// A first call of `a` (pattern 0, checked) from `send` into `recv`:
/// whether rank 2 wrote its piece straight into rank 0's offered buffer
/// (the same answer on every rank). Where the kernel may copy between
/// the job's processes (the nodes' ranks found they may), it did.
fn rank_2_writes_into_rank_0(
    ctx: &Context,
    a: &mut Alltoallv<'_, u64>,
    counts: &[usize],
    send: &mut [u64],
    recv: &mut [u64],
) -> bool {
    let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
    send.copy_from_slice(&send_of(counts, n, me, 0));
    a.run_into(send, &counts[me * n..(me + 1) * n], recv, B)
        .unwrap();
    assert_eq!(*recv, expected(counts, n, me, 0));
    let mut once = [u64::from(me == 0 && a.received(2).is_err())];
    ctx.allreduce(&once.clone(), &mut once, ReduceOp::Max, GroupId::ALL, B)
        .unwrap();
    if ctx.engine() == Engine::Native && a.single_copy() {
        assert_eq!(once, [1], "rank 2 wrote into rank 0's offered buffer");
    }
    once == [1]
}

/// A `run_into` that times out while a rank of another node is writing a
/// piece into its offered buffer returns only once that write is done:
/// the buffer does not change after the call returned, and the call
/// continued with it completes with every piece in place. Rank 2 holds its
/// write into rank 0's buffer (`testing_around_writes`) until rank 0's call
/// has returned, or three times rank 0's timeout: a call that returned
/// without waiting for its writers would see the piece land afterwards.
#[test]
fn a_call_that_times_out_waits_for_the_writes_into_its_buffer() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Regular, n, 4096, 1);
        let row = &counts[me * n..(me + 1) * n];
        // Rank 0's timeout in ms while rank 2 holds its writes (0: not).
        let holding = AtomicU64::new(0);
        let mut a = copying_once(ctx, &counts);
        if me == 2 {
            a.testing_around_writes(|t, written| {
                let ms = holding.load(SeqCst);
                if t != 0 || ms == 0 {
                } else if !written {
                    hold(ctx, 0, HOLDING, RETURNED, 3 * ms);
                } else {
                    note(ctx, 0, WRITTEN);
                }
            });
        }
        // Buffers at the start of a line: the kernel copies at full speed.
        let (mut send_store, mut recv_store) = (vec![0u64; 4096 * n + 8], vec![0u64; 4096 * n + 8]);
        let recv = line_aligned(&mut recv_store, 4096 * n);
        let send = line_aligned(&mut send_store, 4096 * n);
        let once = [u64::from(rank_2_writes_into_rank_0(
            ctx, &mut a, &counts, send, recv,
        ))];
        let mut exercised = [0u64];
        // Rank 0 may time out before rank 2 took its writer's place (a
        // loaded machine): then again, with a longer timeout.
        for (it, ms) in [(1, 300), (2, 1000), (3, 3000)] {
            if once[0] == 0 || exercised[0] == 1 {
                break;
            }
            barrier(ctx);
            send.copy_from_slice(&send_of(&counts, n, me, it));
            recv.fill(u64::MAX);
            holding.store(ms, SeqCst);
            let mut held = 0;
            if me == 0 {
                let e = a.run_into(send, row, recv, Timeout::ms(ms)).unwrap_err();
                assert!(e.is_timeout(), "{e}");
                // Rank 2 said it holds its writer's place before taking
                // it: if it did, it is done writing now.
                if ctx.notify_reset(0, HOLDING).unwrap() != 0 {
                    held = 1;
                    let seen = recv.to_vec();
                    note(ctx, 2, RETURNED);
                    ctx.notify_waitsome(0, WRITTEN..WRITTEN + 1, Timeout::ms(60_000))
                        .unwrap();
                    ctx.notify_reset(0, WRITTEN).unwrap();
                    assert!(*recv == seen[..], "written into after the call returned");
                }
            }
            a.run_into(send, row, recv, B).unwrap();
            holding.store(0, SeqCst);
            assert_eq!(*recv, expected(&counts, n, me, it), "it {it}");
            if held == 1 {
                assert!(a.received(2).is_err(), "rank 2's piece came in one copy");
            }
            ctx.allreduce(&[held], &mut exercised, ReduceOp::Max, GroupId::ALL, B)
                .unwrap();
        }
        assert_eq!(
            exercised, once,
            "the write was held while the call timed out"
        );
        barrier(ctx);
    });
}

/// A `run_into` that fails because a rank died, while a living rank of
/// another node writes a piece into its offered buffer, returns only once
/// that write is done, as after a timeout: the failure of a rank that is
/// not writing does not end the wait for those that are. Rank 2 holds its
/// write into rank 0's buffer (`testing_around_writes`), tells rank 5 to
/// die, and writes once rank 0's call has returned, or after 2 s: a call
/// that returned on the failure alone would see the piece land afterwards.
#[test]
fn a_call_that_fails_waits_for_the_living_writers_into_its_buffer() {
    const DIE: u32 = 13;
    const DYING: gaspi::Rank = 5;
    Job::new(&[6]).ppn(2).run_and_check(
        |ctx| {
            segment(ctx, 0, 128);
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let counts = counts(Dist::Regular, n, 4096, 1);
            let row = &counts[me * n..(me + 1) * n];
            let holding = std::sync::atomic::AtomicBool::new(false);
            let mut a = copying_once(ctx, &counts);
            if me == 2 {
                a.testing_around_writes(|t, written| {
                    if t != 0 || !holding.load(SeqCst) {
                    } else if !written {
                        note(ctx, 0, HOLDING);
                        note(ctx, DYING, DIE);
                        // Not a wait: it would end at the failure.
                        let until = std::time::Instant::now() + Duration::from_secs(2);
                        while ctx.notify_reset(0, RETURNED).unwrap() == 0
                            && std::time::Instant::now() < until
                        {
                            std::thread::yield_now();
                        }
                    } else {
                        note(ctx, 0, WRITTEN);
                    }
                });
            }
            let (mut send_store, mut recv_store) =
                (vec![0u64; 4096 * n + 8], vec![0u64; 4096 * n + 8]);
            let recv = line_aligned(&mut recv_store, 4096 * n);
            let send = line_aligned(&mut send_store, 4096 * n);
            let once = rank_2_writes_into_rank_0(ctx, &mut a, &counts, send, recv);
            barrier(ctx);
            if !once {
                // No piece goes straight into a buffer here (nodes that are
                // hosts of their own): nothing to hold, nobody dies.
                return;
            }
            if me == DYING as usize {
                // Bounded: a rank 2 that never held would leave the others'
                // calls failing on this rank's panic, not hanging.
                ctx.notify_waitsome(0, DIE..DIE + 1, Timeout::ms(60_000))
                    .expect("rank 2 held its write into rank 0's buffer");
                std::process::exit(7);
            }
            holding.store(true, SeqCst);
            send.copy_from_slice(&send_of(&counts, n, me, 1));
            recv.fill(u64::MAX);
            match a.run_into(send, row, recv, B) {
                Err(Error::RankFailed { rank: DYING }) => {}
                other => panic!("expected RankFailed({DYING}), got {other:?}"),
            }
            if me == 0 {
                // Rank 5 died only once rank 2 held its writer's place.
                assert_eq!(ctx.notify_reset(0, HOLDING).unwrap(), 1);
                let seen = recv.to_vec();
                note(ctx, 2, RETURNED);
                assert_eq!(ctx.acknowledge_failures(), vec![DYING]);
                ctx.notify_waitsome(0, WRITTEN..WRITTEN + 1, Timeout::ms(60_000))
                    .unwrap();
                ctx.notify_reset(0, WRITTEN).unwrap();
                assert!(*recv == seen[..], "written into after the call returned");
            }
            leave_together(ctx, DYING);
        },
        |_, report| {
            if report.ranks.iter().all(|o| o.status.success()) {
                // Nobody died: no piece went straight into a buffer.
                assert!(report.left_after_cleanup.is_empty());
            } else {
                check_job(report, DYING as usize, |s| s.code() == Some(7));
            }
        },
    );
}

/// Places for pieces of `counts` (by rank) as a code ported from MPI
/// might have them: in reverse rank order, a gap of 0 to 2 elements (by
/// `salt`) before each. The displacements and the buffer's length (one
/// element beyond the last piece).
fn scattered(counts: &[usize], salt: usize) -> (Vec<usize>, usize) {
    let mut displs = vec![0; counts.len()];
    let mut at = 0;
    for k in (0..counts.len()).rev() {
        at += (k + salt) % 3;
        displs[k] = at;
        at += counts[k];
    }
    (displs, at + 1)
}

/// One call of `a` with `MPI_Alltoallv`'s displacements: sent from
/// scattered places (or packed ones given as displacements), received at
/// scattered places; every received piece at its place, every other
/// element of the receive buffer untouched. Returns the sources whose
/// pieces went in one copy.
fn check_displaced(
    a: &mut Alltoallv<u64>,
    counts: &[usize],
    (n, me): (usize, usize),
    it: usize,
    packed_send: bool,
) -> Vec<usize> {
    let row = &counts[me * n..(me + 1) * n];
    let col: Vec<usize> = (0..n).map(|s| counts[s * n + me]).collect();
    let (send_displs, send_len) = if packed_send {
        (gaspi::plan::displacements(row), row.iter().sum())
    } else {
        scattered(row, me + it)
    };
    let mut send = vec![u64::MAX - 1; send_len];
    for t in 0..n {
        for i in 0..row[t] {
            send[send_displs[t] + i] = value(me, t, it, i);
        }
    }
    let (recv_displs, recv_len) = scattered(&col, me + it + 1);
    let mut recv = vec![u64::MAX; recv_len];
    a.run_into_displaced(&send, row, &send_displs, &mut recv, &recv_displs, B)
        .unwrap();
    let mut want = vec![u64::MAX; recv_len];
    for s in 0..n {
        for i in 0..col[s] {
            want[recv_displs[s] + i] = value(s, me, it, i);
        }
    }
    assert_eq!(recv, want, "call {it}, send packed: {packed_send}");
    (0..n)
        .filter(|&s| s != me && col[s] > 0 && a.received(s as u16).is_err())
        .collect()
}

/// `run_into_displaced` places every piece at its displacements on every
/// kind of layout, counts fixed or learned in the call, pieces staged or
/// written straight between nodes, large pieces inside a node in one copy
/// from packed and scattered send buffers alike.
#[test]
fn mpi_displacements_on_every_layout() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(1, 1), (4, 4), (4, 2), (5, 2), (3, 1)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let direct = AlltoallvOptions {
                direct_min: Some(1),
                block_bytes: 8 * 16,
                ..Default::default()
            };
            let small = counts(Dist::Random, n, 37, 2);
            let mut a = Alltoallv::<u64>::with_options(ctx, 1, &small, direct, B).unwrap();
            // Displacements given packed, scattered, none (plain
            // `run_into`), in an order where a plain call follows each.
            for (it, kind) in [0, 1, 2, 1, 2, 0, 2].into_iter().enumerate() {
                if kind == 2 {
                    // Packed buffers in between (places kept from call to
                    // call where nothing is displaced).
                    let send = send_of(&small, n, me, it);
                    let mut recv = vec![u64::MAX; expected(&small, n, me, it).len() + 1];
                    a.run_into(&send, &small[me * n..(me + 1) * n], &mut recv, B)
                        .unwrap();
                    let last = recv.pop();
                    assert_eq!((recv, last), (expected(&small, n, me, it), Some(u64::MAX)));
                } else {
                    check_displaced(&mut a, &small, (n, me), it, kind == 0);
                }
            }
            drop(a);
            let large = counts(Dist::Regular, n, 4096, 3);
            let mut a = copying_once(ctx, &large);
            // Pieces read in one copy from packed and scattered senders.
            let mut pulled = [0u64; 2];
            for it in 0..4 {
                let from = check_displaced(&mut a, &large, (n, me), it, it % 2 == 0);
                pulled[it % 2] += from.len() as u64;
            }
            let mut all = [0u64; 2];
            ctx.allreduce(&pulled, &mut all, ReduceOp::Sum, GroupId::ALL, B)
                .unwrap();
            if a.single_copy() && !gaspi::testing::kernel_copy_offsets_slow() {
                assert!(all[0] > 0, "no piece from a packed sender went in one copy");
                assert!(all[1] > 0, "no piece at displacements went in one copy");
            }
            drop(a);
            let mut u = Alltoallv::<u64>::with_unknown_sizes(ctx, 2, 80 * n, direct, B).unwrap();
            for it in 0..6 {
                let d = [Dist::Sparse, Dist::Random][it % 2];
                let c = counts(d, n, 40, it as u64);
                check_displaced(&mut u, &c, (n, me), it, it % 3 == 0);
            }
            barrier(ctx);
        });
    }
}

/// Displacements that do not fit their buffers, overlap or overflow are
/// refused before the call with fixed counts, and once the counts are
/// known with sizes learned in the call (which completes, its result in
/// the window, the receive buffer untouched); the collective works after.
#[test]
fn bad_displacements_are_refused() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let mut a = Alltoallv::<u32>::alltoall(ctx, 1, 2, Default::default(), B).unwrap();
        let row = vec![2; n];
        let send = vec![7u32; 2 * n];
        let packed = gaspi::plan::displacements(&row);
        let mut recv = vec![0u32; 2 * n];
        let refused = |r: gaspi::Result<()>| {
            matches!(
                r,
                Err(Error::InvalidArgument(_) | Error::SizeOverflow { .. })
            )
        };
        let mut past = packed.clone();
        past[n - 1] = 2 * n - 1;
        let mut overlap = packed.clone();
        overlap[1] = 1;
        let mut huge = packed.clone();
        huge[0] = usize::MAX;
        let calls: [(&[usize], &[usize]); 7] = [
            (&packed[1..], &packed),
            (&packed, &packed[1..]),
            (&past, &packed),
            (&packed, &past),
            (&packed, &overlap),
            (&huge, &packed),
            (&packed, &huge),
        ];
        for (sd, rd) in calls {
            let r = a.run_into_displaced(&send, &row, sd, &mut recv, rd, B);
            assert!(refused(r), "send {sd:?} receive {rd:?}");
        }
        assert_eq!(recv, vec![0; 2 * n], "a refused call wrote");
        // Sent pieces may overlap (read twice); empty pieces lie anywhere.
        let same = vec![0; n];
        a.run_into_displaced(&send[..2], &row, &same, &mut recv, &packed, B)
            .unwrap();
        assert_eq!(recv, vec![7; 2 * n]);
        // A packed call, then one whose buffer is one element short.
        a.run_into(&send, &row, &mut recv, B).unwrap();
        let r = a.run_into(&send, &row, &mut recv[1..], B);
        assert!(refused(r), "a receive buffer too small after a packed call");
        let mut b =
            Alltoallv::<u32>::with_unknown_sizes(ctx, 2, 4 * n, Default::default(), B).unwrap();
        // Rank 0 sends 3 elements to everyone: the others' receive
        // displacements, made for 2, overlap.
        let mut row = vec![2; n];
        if me == 0 {
            row = vec![3; n];
        }
        let send = vec![me as u32; row.iter().sum()];
        let send_displs = gaspi::plan::displacements(&row);
        let mut recv = vec![u32::MAX; 3 * n];
        let r = b.run_into_displaced(&send, &row, &send_displs, &mut recv, &packed, B);
        assert!(refused(r));
        assert_eq!(recv, vec![u32::MAX; 3 * n], "a refused call wrote");
        assert_eq!(
            b.received(0).unwrap().to_vec(),
            vec![0; 3],
            "the result in the window"
        );
        let wide: Vec<usize> = (0..n).map(|s| 3 * s).collect();
        b.run_into_displaced(&send, &row, &send_displs, &mut recv, &wide, B)
            .unwrap();
        for s in 0..n {
            let len = if s == 0 { 3 } else { 2 };
            assert_eq!(
                recv[3 * s..3 * s + len],
                vec![s as u32; len][..],
                "from {s}"
            );
        }
        // Empty pieces at displacements no buffer could hold: nothing to
        // or from odd ranks.
        let row: Vec<usize> = (0..n).map(|t| 1 - t % 2).collect();
        let far = |k: usize, at: usize| if k % 2 == 1 { usize::MAX } else { at };
        let send_displs: Vec<usize> = (0..n).map(|t| far(t, t / 2)).collect();
        let send = vec![me as u32; n.div_ceil(2)];
        let recv_displs: Vec<usize> = (0..n).map(|s| far(me, s)).collect();
        let mut recv = vec![u32::MAX; if me % 2 == 1 { 0 } else { n }];
        b.run_into_displaced(&send, &row, &send_displs, &mut recv, &recv_displs, B)
            .unwrap();
        assert_eq!(recv, (0..recv.len() as u32).collect::<Vec<_>>());
        barrier(ctx);
    });
}

/// Sizes unknown in advance, on every layout: counts that change from call
/// to call (distribution, size, seed), and now and then the last call's
/// counts again with new data (a call that keeps the last plan), in place
/// and into private buffers.
/// Call `a` (sizes unknown) with `counts` and this call's data, into
/// `recv` in odd calls and in place in even ones, and check the result.
fn run_unknown_and_check(
    a: &mut Alltoallv<u64>,
    counts: &[usize],
    (n, me): (usize, usize),
    it: usize,
    recv: &mut [u64],
    how: &str,
) {
    let row = &counts[me * n..(me + 1) * n];
    let send = send_of(counts, n, me, it);
    let want = expected(counts, n, me, it);
    if it % 2 == 1 {
        recv.fill(u64::MAX);
        a.run_into(&send, row, recv, B).unwrap();
        assert_eq!(recv[..want.len()], want[..], "{how}");
    } else {
        a.run(&send, row, B).unwrap();
        check_in_place(a, counts, n, me, it);
    }
}

#[test]
fn unknown_sizes_change_or_repeat_on_every_layout() {
    for (ranks, ppn) in layouts() {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let capacity = 8 * 40 * n;
            // The node's last rank to stage sends all its chunks where
            // they are 320 bytes or less, and its last to write its row
            // all its rows: some calls (and layouts) one way, some the
            // other.
            let staged = AlltoallvOptions {
                block_bytes: 8 * 24,
                one_sender_max: Some(8 * 40),
                ..Default::default()
            };
            // (And six copies of the data area in turn, and the node's
            // count rows and chunks shared out among its ranks.)
            let direct = AlltoallvOptions {
                direct_min: Some(8 * 20),
                copies: Some(6),
                one_sender_max: Some(0),
                ..staged
            };
            let mut a = Alltoallv::<u64>::with_unknown_sizes(ctx, 11, capacity, staged, B).unwrap();
            let mut b = Alltoallv::<u64>::with_unknown_sizes(ctx, 12, capacity, direct, B).unwrap();
            let mut recv = vec![0u64; capacity];
            // Across hosts 36 calls: each half two rounds of its sizes.
            let calls = repeats(60, 36);
            for it in 0..calls {
                // Both: staged, and the larger pieces written straight.
                let a = if it < calls / 2 { &mut a } else { &mut b };
                // Every third call repeats the counts of the call before
                // (whose plan it keeps), with new data: in place and into
                // private buffers in turn.
                let like = if it % 3 == 2 { it - 1 } else { it };
                let d = [Dist::Regular, Dist::Random, Dist::Sparse][like % 3];
                let counts = counts(d, n, [0, 1, 40][(like / 3) % 3], like as u64);
                run_unknown_and_check(
                    a,
                    &counts,
                    (n, me),
                    it,
                    &mut recv,
                    &format!("{d:?} it={it}"),
                );
                assert_eq!(a.plan().unwrap().counts, counts);
            }
        });
    }
}

#[test]
fn unknown_sizes_beyond_the_capacity_fail_on_every_rank_then_work_again() {
    Job::new(&[6]).ppn(2).run(|ctx| {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let mut a =
            Alltoallv::<u32>::with_unknown_sizes(ctx, 3, 10, Default::default(), B).unwrap();
        // Rank 1 sends 11 elements: every rank learns it and fails alike.
        let mut row = vec![0; n];
        if me == 1 {
            row[4] = 11;
        }
        let send = vec![7u32; row.iter().sum()];
        match a.run(&send, &row, B) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("rank 1 sends 11"), "{m}"),
            other => panic!("expected a capacity error, got {other:?}"),
        }
        // Rank 2 would receive 2 * 6 = 12.
        let row: Vec<usize> = (0..n).map(|t| if t == 2 { 2 } else { 0 }).collect();
        match a.run(&[me as u32; 2], &row, B) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("rank 2 receives 12"), "{m}"),
            other => panic!("expected a capacity error, got {other:?}"),
        }
        // Within the capacity again; a receive buffer too small fails
        // after the call, whose result is in the window.
        let row = vec![1; n];
        let mut small = vec![0u32; n - 1];
        assert!(matches!(
            a.run_into(&vec![me as u32; n], &row, &mut small, B),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(small, vec![0; n - 1], "untouched");
        for s in 0..n {
            assert_eq!(a.received(s as u16).unwrap().to_vec(), [s as u32]);
        }
        let mut recv = vec![0u32; n];
        a.run_into(&vec![me as u32 + 100; n], &row, &mut recv, B)
            .unwrap();
        assert_eq!(recv, (100..100 + n as u32).collect::<Vec<_>>());
        barrier(ctx);
    });
}

#[test]
fn bad_arguments_are_refused() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let n = ctx.num_ranks() as usize;
        assert!(matches!(
            Alltoallv::<u8>::new(ctx, 1, &[1; 15], B),
            Err(Error::InvalidArgument(_))
        ));
        let mut huge = vec![0; 16];
        huge[1] = usize::MAX / 2;
        assert!(matches!(
            Alltoallv::<u64>::new(ctx, 1, &huge, B),
            Err(Error::SizeOverflow { .. })
        ));
        assert!(matches!(
            Alltoallv::<u64>::with_unknown_sizes(ctx, 1, usize::MAX / 4, Default::default(), B),
            Err(Error::SizeOverflow { .. })
        ));
        let mut a = Alltoallv::<u16>::alltoall(ctx, 1, 2, Default::default(), B).unwrap();
        let row = vec![2; n];
        let send = vec![1u16; 2 * n];
        // Too few counts, a send buffer of the wrong size, counts other
        // than the fixed ones, a receive buffer too small, a rank that does
        // not exist: each a clear error, nothing started.
        assert!(a.run(&send, &row[1..], B).is_err());
        assert!(a.run(&send[1..], &row, B).is_err());
        let mut other = row.clone();
        other[0] = 3;
        assert!(a.run(&vec![1u16; 2 * n + 1], &other, B).is_err());
        assert!(a.run_into(&send, &row, &mut [0u16; 3], B).is_err());
        assert!(matches!(
            a.received(n as u16),
            Err(Error::InvalidRank { .. })
        ));
        // Still usable.
        let mut recv = vec![0u16; 2 * n];
        a.run_into(&send, &row, &mut recv, B).unwrap();
        assert_eq!(recv, vec![1; 2 * n]);
        barrier(ctx);
    });
}

#[test]
fn inter_node_messages_match_the_plan() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(4, 2), (6, 2), (6, 3), (5, 1), (8, 4)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let nodes = ctx.num_nodes() as u64;
            // Staged: one aggregated write per chunk. Unstaged: one write
            // per piece between nodes, the chunks only notifications.
            for (d, unstaged) in [
                (Dist::Regular, false),
                (Dist::Sparse, false),
                (Dist::Regular, true),
                (Dist::Sparse, true),
            ] {
                let counts = counts(d, n, 50, 1);
                let opts = AlltoallvOptions {
                    block_bytes: 8 * 64,
                    direct_min: Some(if unstaged { 1 } else { usize::MAX }),
                    ..Default::default()
                };
                let mut a = Alltoallv::<u64>::with_options(ctx, 10, &counts, opts, B).unwrap();
                let row = &counts[me * n..(me + 1) * n];
                let send = send_of(&counts, n, me, 0);
                // Warm up (map the windows); credits start with the third call.
                a.run(&send, row, B).unwrap();
                a.run(&send, row, B).unwrap();
                barrier(ctx);
                ctx.reset_traffic();
                a.run(&send, row, B).unwrap();
                let sums = inter_node_sums(ctx);
                let plan = a.plan().unwrap();
                let chunks = plan.inter_node_messages() as u64;
                let credits: u64 = (0..ctx.num_nodes())
                    .map(|k| {
                        plan.senders_to(k)
                            .filter(|&m| plan.needs_credit(m, k))
                            .count() as u64
                    })
                    .sum();
                if let Dist::Regular = d {
                    assert_eq!(credits, 0, "every node pair sends both ways");
                }
                let bytes: u64 = (0..ctx.num_nodes())
                    .flat_map(|f| {
                        (0..ctx.num_nodes())
                            .filter(move |&t| t != f)
                            .map(move |t| (f, t))
                    })
                    .map(|(f, t)| 8 * plan.section_len(f, t) as u64)
                    .sum();
                let pieces = (0..n * n)
                    .filter(|&i| {
                        counts[i] > 0 && ctx.node_of((i / n) as u16) != ctx.node_of((i % n) as u16)
                    })
                    .count() as u64;
                // GPI-2, through which every operation between nodes
                // goes, writes only from registered memory: every pair
                // stays staged.
                let writes = if unstaged && ctx.engine() != Engine::Gpi2 {
                    pieces
                } else {
                    chunks
                };
                assert_eq!(
                    sums,
                    [writes, chunks + credits, bytes],
                    "{d:?} unstaged {unstaged}\n{}",
                    plan.table()
                );
                if let (Dist::Regular, false) = (d, unstaged) {
                    // With the default chunks, one message per node pair,
                    // against a flat exchange's one per pair of ranks on
                    // different nodes.
                    let whole =
                        AlltoallvPlan::new(plan.layout, &counts, 8, 1 << 17, 1 << 16).unwrap();
                    assert_eq!(whole.inter_node_messages() as u64, nodes * (nodes - 1));
                    let local: usize = (0..ctx.num_nodes())
                        .map(|k| ctx.node_ranks(k).len().pow(2))
                        .sum();
                    assert_eq!(whole.flat_inter_node_messages(), n * n - local);
                }
                drop(a);
                barrier(ctx);
            }
            // Unknown sizes: the count rows go to every other node, and
            // take the place of the credits.
            let counts = counts(Dist::Sparse, n, 50, 2);
            let mut a =
                Alltoallv::<u64>::with_unknown_sizes(ctx, 12, 8 * 50 * n, Default::default(), B)
                    .unwrap();
            let row = &counts[me * n..(me + 1) * n];
            let send = send_of(&counts, n, me, 0);
            a.run(&send, row, B).unwrap();
            barrier(ctx);
            ctx.reset_traffic();
            a.run(&send, row, B).unwrap();
            let sums = inter_node_sums(ctx);
            let chunks = a.plan().unwrap().inter_node_messages() as u64;
            let rows = nodes * (nodes - 1);
            assert_eq!([sums[0], sums[1]], [chunks + rows, chunks + rows]);
            barrier(ctx);
        });
    }
}

/// Inter-node writes, notifications and bytes of all ranks since the last
/// reset.
fn inter_node_sums(ctx: &Context) -> [u64; 3] {
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
    sums
}

#[test]
fn timeout_then_retry_completes_the_same_call() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Random, n, 20, 3);
        let mut fixed = Alltoallv::<u64>::new(ctx, 1, &counts, B).unwrap();
        let mut unknown =
            Alltoallv::<u64>::with_unknown_sizes(ctx, 2, 40 * n, Default::default(), B).unwrap();
        let direct = AlltoallvOptions {
            direct_min: Some(1),
            ..Default::default()
        };
        let mut unstaged = Alltoallv::<u64>::with_options(ctx, 3, &counts, direct, B).unwrap();
        let row = &counts[me * n..(me + 1) * n];
        let send = send_of(&counts, n, me, 5);
        for a in [&mut fixed, &mut unknown, &mut unstaged] {
            others_time_out_before_rank_0(ctx, 0, |t| a.run(&send, row, t));
            a.run(&send, row, B).unwrap();
            check_in_place(a, &counts, n, me, 5);
            // And the next call is a normal one.
            let send = send_of(&counts, n, me, 6);
            a.run(&send, row, B).unwrap();
            check_in_place(a, &counts, n, me, 6);
        }
        barrier(ctx);
    });
}

/// Notification ids of the test of a rank that returns while a rank of its
/// node is still in the call: rank 1's call timed out waiting for node 1's
/// chunk; rank 0's call returned.
const LAGGING: u32 = 20;
const AHEAD: u32 = 21;

/// A rank's call returns once its node's chunks have come and every rank
/// of its node has placed its pieces for the node's ranks (and read what
/// it reads out of their send buffers), without waiting for the others to
/// see the chunks too: in 2 nodes of 2, rank 1's call times out waiting
/// for node 1's chunk (node 1 has not called yet), node 1 calls, and rank
/// 0's call returns with its whole result while rank 1 is out of its call;
/// rank 1 then continues its call, which completes with its own. In place
/// and into private buffers, without single copies and with them where
/// the node's ranks may read each other's memory (pieces of 32 KiB; rank
/// 1's first try then lasts long enough to read its pieces out of rank
/// 0's buffer, a second), in the steady state (from the third call on),
/// and the calls after it are right.
#[test]
fn a_rank_returns_while_a_rank_of_its_node_still_waits_for_chunks() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let never = AlltoallvOptions {
            single_copy_min: Some(usize::MAX),
            ..Default::default()
        };
        let once = AlltoallvOptions {
            single_copy_min: Some(16 << 10),
            ..Default::default()
        };
        // Data both ways between the nodes: no credit to wait for.
        for (c, opts, first_try) in [(20, never, 20), (4096, once, 1000)] {
            let counts = counts(Dist::Regular, n, c, 0);
            let row = &counts[me * n..(me + 1) * n];
            let mut a = Alltoallv::<u64>::with_options(ctx, 1, &counts, opts, B).unwrap();
            for it in 0..6 {
                let send = send_of(&counts, n, me, it);
                let private = it % 2 == 1;
                let mut recv = vec![u64::MAX; expected(&counts, n, me, it).len()];
                let reads = private && a.single_copy() && ctx.local_num() == 2;
                // (`elsewhere`: into another buffer than the call's.)
                let mut call = |t: Timeout, elsewhere: bool| {
                    if elsewhere {
                        a.run_into(&send, row, &mut vec![u64::MAX; recv.len()], t)
                    } else if private {
                        a.run_into(&send, row, &mut recv, t)
                    } else {
                        a.run(&send, row, t)
                    }
                };
                match (it, me) {
                    (0..=2, _) => call(B, false).unwrap(),
                    (_, 0) => {
                        call(B, false).unwrap();
                        note(ctx, 1, AHEAD);
                    }
                    (_, 1) => {
                        let e = call(Timeout::ms(first_try), false).unwrap_err();
                        assert!(e.is_timeout(), "{c}, call {it}: {e}");
                        if reads {
                            // It read pieces into `recv`: going on with
                            // another buffer is refused.
                            let e = call(B, true).unwrap_err();
                            assert!(
                                matches!(e, Error::InvalidArgument(_)),
                                "{c}, call {it}: {e}"
                            );
                        }
                        note(ctx, 2, LAGGING);
                        note(ctx, 3, LAGGING);
                        let ahead = ctx.notify_waitsome(0, AHEAD..AHEAD + 1, Timeout::ms(20_000));
                        assert!(
                            ahead.is_ok(),
                            "{c}, call {it}: rank 0's call waited for rank 1's ({ahead:?})"
                        );
                        ctx.notify_reset(0, AHEAD).unwrap();
                        call(B, false).unwrap();
                    }
                    _ => {
                        ctx.notify_waitsome(0, LAGGING..LAGGING + 1, B).unwrap();
                        ctx.notify_reset(0, LAGGING).unwrap();
                        call(B, false).unwrap();
                    }
                }
                if private {
                    assert_eq!(
                        recv,
                        expected(&counts, n, me, it),
                        "{c}, call {it}, rank {me}"
                    );
                } else {
                    check_in_place(&a, &counts, n, me, it);
                }
            }
            drop(a);
            barrier(ctx);
        }
    });
}

/// Notification ids of the test of a call that takes its send buffer
/// back: rank 1 holds its read out of rank 0's send buffer; rank 0's call
/// returned.
const READ_HELD: u32 = 22;
const BACK: u32 = 23;

/// Assert that `got` is `right`, saying how many elements differ (not
/// printing thousands of them).
fn same(got: &[u64], right: &[u64], how: &str) {
    let wrong = got.iter().zip(right).filter(|(a, b)| a != b).count();
    assert!(
        got.len() == right.len() && wrong == 0,
        "{how}: {wrong} of {} elements wrong (first: {:?})",
        right.len(),
        got.iter().zip(right).find(|(a, b)| a != b)
    );
}

/// A call that times out while a rank of its node reads its piece out of
/// its send buffer (single copies) returns only once that read is done,
/// and takes the buffer back: nobody reads it once the call has returned,
/// and its caller may free or reuse it. On one node of 2 with pieces of
/// 32 KiB, rank 1 holds its read out of rank 0's buffer
/// (`testing_around_reads`) until rank 0's call has returned, or three
/// times rank 0's timeout; rank 0 then overwrites its buffer, and going
/// on with another receive buffer than the one it read rank 1's piece
/// into is refused. Given up (rank 0 drops the alltoallv): rank 1's call
/// completes with its result right, without a trace of what rank 0 wrote
/// (a call that returned while rank 1 read would have let it read that;
/// rank 0's failed call moved the piece into the window, so rank 1 need
/// not wait for it to go on). Retried: both ranks go on polling with
/// `Timeout::Test` in turns, rank 0 from a copy of its pieces in another
/// buffer, and both results are right (a piece left to be read out of a
/// buffer only while its sender is in its call would never be read).
/// Where ranks do not read each other's memory, there is nothing to hold.
#[test]
fn a_call_that_times_out_takes_its_send_buffer_back() {
    Job::new(&[2]).ppn(2).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Regular, n, 4096, 0);
        let row = &counts[me * n..(me + 1) * n];
        // Rank 0's timeout in ms while rank 1 holds its read (0: not).
        let holding = AtomicU64::new(0);
        for give_up in [false, true] {
            let (mut exercised, mut possible) = ([0u64], [0u64]);
            // Rank 0 may time out before rank 1 began its read (a loaded
            // machine): then again, with a longer timeout.
            for (it, ms) in [(0, 300), (1, 1000), (2, 3000)] {
                if exercised[0] == 1 {
                    break;
                }
                barrier(ctx);
                ctx.notify_reset(0, READ_HELD).unwrap();
                ctx.notify_reset(0, BACK).unwrap();
                let mut a = copying_once(ctx, &counts);
                possible = [u64::from(a.single_copy() && ctx.local_num() == 2)];
                if possible[0] == 0 {
                    break;
                }
                // (On rank 0 too: its call waits for rank 1's announcement.)
                a.testing_around_reads(|s, read| {
                    if me == 1 && s == 0 && !read && holding.swap(0, SeqCst) != 0 {
                        hold(ctx, 0, READ_HELD, BACK, 3 * ms);
                    }
                });
                holding.store(ms, SeqCst);
                // Buffers at the start of a line: the kernel copies at full
                // speed (where it does not, pieces go through the window).
                let right = expected(&counts, n, me, it);
                let len = right.len();
                let (mut send_store, mut recv_store) = (vec![0; len + 8], vec![u64::MAX; len + 8]);
                let send = line_aligned(&mut send_store, len);
                send.copy_from_slice(&send_of(&counts, n, me, it));
                let recv = line_aligned(&mut recv_store, len);
                let how = format!("give up {give_up}, timeout {ms} ms, rank {me}");
                let mut held = [0u64];
                let mut kept = None;
                let first = if me == 0 {
                    let first = a.run_into(send, row, recv, Timeout::ms(ms));
                    if let Err(e) = &first {
                        assert!(e.is_timeout(), "{how}: {e}");
                    }
                    if first.is_err() && ctx.notify_reset(0, READ_HELD).unwrap() != 0 {
                        held[0] = 1;
                        // Taken back: the buffer is the caller's.
                        kept = Some(send.to_vec());
                        send.fill(u64::MAX - 1);
                        note(ctx, 1, BACK);
                        // It read rank 1's piece into `recv`: going on with
                        // another receive buffer is refused.
                        let mut other = vec![u64::MAX; len];
                        let from = kept.as_deref().unwrap_or_default();
                        let refused = a.run_into(from, row, &mut other, B).unwrap_err();
                        assert!(
                            matches!(refused, Error::InvalidArgument(_)),
                            "{how}: {refused}"
                        );
                    }
                    first
                } else {
                    a.run_into(send, row, recv, Timeout::ms(6 * ms))
                };
                ctx.allreduce(&held.clone(), &mut held, ReduceOp::Max, GroupId::ALL, B)
                    .unwrap();
                if give_up && held[0] == 1 {
                    // Rank 0 gave up; rank 1's call completed without it.
                    assert!(me == 0 || first.is_ok(), "{how}: {first:?}");
                } else {
                    // Both go on, each only while the other is out of its
                    // call (rank 1 begins), rank 0 from its copy.
                    let from: &[u64] = match &kept {
                        Some(k) => k,
                        None => send,
                    };
                    let call = || a.run_into(from, row, recv, Timeout::Test);
                    poll_in_turn(ctx, me == 1, first.is_ok(), call, &how);
                }
                if me == 1 || !(give_up && held[0] == 1) {
                    same(recv, &right, &how);
                }
                drop(a);
                exercised = held;
            }
            assert_eq!(exercised, possible, "give up {give_up}: the read was held");
        }
        barrier(ctx);
    });
}

/// Notification id of the test of ranks that poll in turn: the turn
/// passes, with 1 + whether the passing rank's call has completed.
const TURN: u32 = 24;

/// Poll `call` (with `Timeout::Test`) in a job of 2 ranks in turns with
/// the other rank, each only while the other is out of its call, until
/// both calls have completed (`done`: this rank's already has): `begins`
/// takes the first turn. At most 100 turns.
fn poll_in_turn(
    ctx: &Context,
    begins: bool,
    mut done: bool,
    mut call: impl FnMut() -> gaspi::Result<()>,
    how: &str,
) {
    let other = 1 - ctx.rank();
    // (`told`: the other knows this rank is done.)
    let (mut other_done, mut told) = (false, false);
    let mut turns = 0;
    // A turn ends by passing it, until both are done and each knows it.
    loop {
        if !begins || turns > 0 {
            let id = ctx.notify_waitsome(0, TURN..TURN + 1, B).unwrap();
            other_done = ctx.notify_reset(0, id).unwrap() == 2;
        }
        if !done {
            match call() {
                Ok(()) => done = true,
                Err(e) => assert!(e.is_timeout(), "{how}: {e}"),
            }
        }
        turns += 1;
        assert!(turns <= 100, "{how}: no end in {turns} turns");
        if done && other_done && told {
            return;
        }
        ctx.notify(other, 0, Notification::new(TURN, 1 + u32::from(done)), 1, B)
            .unwrap();
        ctx.wait(1, B).unwrap();
        told = done;
        if done && other_done {
            return;
        }
    }
}

/// Ranks that poll their calls with `Timeout::Test`, each only while the
/// other is out of its call (they pass a turn), complete them: a call
/// that fails does not leave its node's ranks waiting for it to go on
/// (with single copies, its pieces that they were to read go into the
/// window). One node of 2, pieces of 32 KiB in line-aligned buffers,
/// without and with single copies, three calls each; at most 100 turns a
/// call.
#[test]
fn ranks_that_poll_in_turn_complete() {
    Job::new(&[2]).ppn(2).run(|ctx| {
        segment(ctx, 0, 64);
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let counts = counts(Dist::Regular, n, 4096, 0);
        let row = &counts[me * n..(me + 1) * n];
        for once in [usize::MAX, 16 << 10] {
            let opts = AlltoallvOptions {
                single_copy_min: Some(once),
                ..Default::default()
            };
            let mut a = Alltoallv::<u64>::with_options(ctx, 1, &counts, opts, B).unwrap();
            for it in 0..3 {
                let right = expected(&counts, n, me, it);
                let len = right.len();
                let (mut send_store, mut recv_store) = (vec![0; len + 8], vec![u64::MAX; len + 8]);
                let send = line_aligned(&mut send_store, len);
                send.copy_from_slice(&send_of(&counts, n, me, it));
                let recv = line_aligned(&mut recv_store, len);
                let how = format!("single copies from {once}, call {it}, rank {me}");
                let call = || a.run_into(send, row, recv, Timeout::Test);
                poll_in_turn(ctx, me == 0, false, call, &how);
                same(recv, &right, &how);
                // Neither begins the next call's turns before the other saw
                // this one end.
                barrier(ctx);
            }
        }
    });
}

/// Ranks that give up on a timed-out call (rank 0 never came) and drop the
/// alltoallv make a new one on the same segment id with rank 0, and its
/// calls are right, with counts fixed or learned in the call, on one node,
/// nodes of 2 and nodes of 1.
#[test]
fn a_timed_out_call_can_be_given_up() {
    for (ranks, ppn) in [(4, 4), (4, 2), (4, 1)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            segment(ctx, 0, 64);
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let counts = counts(Dist::Random, n, 20, 7);
            let row = &counts[me * n..(me + 1) * n];
            for unknown in [false, true] {
                let make = || {
                    if unknown {
                        Alltoallv::<u64>::with_unknown_sizes(ctx, 2, 40 * n, Default::default(), B)
                    } else {
                        Alltoallv::<u64>::new(ctx, 2, &counts, B)
                    }
                    .unwrap()
                };
                let mut a = make();
                let send = send_of(&counts, n, me, 0);
                others_give_up_before_rank_0(ctx, 0, |t| a.run(&send, row, t));
                drop(a);
                let mut a = make();
                for it in 1..4 {
                    let send = send_of(&counts, n, me, it);
                    a.run(&send, row, B).unwrap();
                    check_in_place(&a, &counts, n, me, it);
                    let mut recv = vec![u64::MAX; expected(&counts, n, me, it).len()];
                    a.run_into(&send, row, &mut recv, B).unwrap();
                    assert_eq!(
                        recv,
                        expected(&counts, n, me, it),
                        "{ranks}x{ppn} unknown {unknown} call {it}"
                    );
                }
                drop(a);
                barrier(ctx);
            }
        });
    }
}

#[test]
fn plans_aggregate_and_balance() {
    // 2 nodes of 3: every section is one message; 9 pieces in one.
    let l = gaspi::plan::Layout { ranks: 6, ppn: 3 };
    let plan = AlltoallvPlan::new(l, &[5; 36], 8, 1 << 20, 1 << 16).unwrap();
    assert_eq!(plan.inter_node_messages(), 2);
    assert_eq!(plan.flat_inter_node_messages(), 18);
    // Chunks of 5 elements: 9 per section, shared 3/3/3 by bytes.
    let plan = AlltoallvPlan::new(l, &[5; 36], 8, 5, 1 << 16).unwrap();
    for r in 0..6 {
        assert_eq!(plan.sends(r).len(), 3, "rank {r}\n{}", plan.table());
    }
    // Every piece has its own place in its target's window.
    for (ranks, ppn) in layouts() {
        let l = gaspi::plan::Layout { ranks, ppn };
        let counts = counts(Dist::Random, ranks, 9, 4);
        let plan = AlltoallvPlan::new(l, &counts, 8, 7, 1 << 16).unwrap();
        for node in 0..l.nodes() {
            let mut cover = vec![0u8; plan.window_len(node)];
            for t in l.node_ranks(node) {
                for s in 0..ranks {
                    let at = plan.recv_at(s, t);
                    for x in &mut cover[at..at + plan.count(s, t)] {
                        *x += 1;
                    }
                }
            }
            let staged = plan.stage_len(node);
            assert!(cover[..staged].iter().all(|&x| x == 0));
            assert!(cover[staged..].iter().all(|&x| x == 1), "node {node}");
            // Chunks cover each outgoing section once.
            let sent: usize = plan.chunks(node).iter().map(|c| c.len).sum();
            assert_eq!(sent, staged);
        }
        // Every node's incoming chunks have the ids 0..in_chunks, each once.
        for to in 0..l.nodes() {
            let mut ids: Vec<usize> = (0..l.nodes())
                .flat_map(|from| plan.chunks(from).iter().filter(move |c| c.to == to))
                .map(|c| c.id)
                .collect();
            ids.sort_unstable();
            assert_eq!(
                ids,
                (0..plan.in_chunks(to)).collect::<Vec<_>>(),
                "node {to}"
            );
        }
    }
}

#[test]
fn one_way_sections_wait_for_credits() {
    // Only node 0 sends, to the last node: that node says by credits when
    // it may be written, and its result may not be overwritten while it
    // reads it (checked after each call, before the next).
    for (ranks, ppn) in [(4, 2), (3, 1), (6, 3)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let mut counts = vec![0; n * n];
            counts[n - 1] = 64; // rank 0 -> the last rank
            counts[n + n - 1] = 3; // rank 1 -> the last rank
            let mut a = Alltoallv::<u64>::new(ctx, 5, &counts, B).unwrap();
            let plan = a.plan().unwrap();
            assert!(plan.needs_credit(0, ctx.num_nodes() - 1));
            let row = counts[me * n..(me + 1) * n].to_vec();
            for it in 0..repeats(30, 10) {
                a.run(&send_of(&counts, n, me, it), &row, B).unwrap();
                check_in_place(&a, &counts, n, me, it);
            }
            barrier(ctx);
        });
    }
}
