//! The node-aware allreduce of Al Ahad et al. 2018 (section III) on emulated node
//! layouts: every algorithm and mode, integer results exact, floating
//! point within a stated tolerance and bit-identical where the docs say so.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Allreduce, AllreduceAlgorithm, AllreduceOptions, Context, GroupId, ReduceOp, Timeout};

const B: Timeout = Timeout::Block;

/// (ranks, ranks per node): 1x1 to 12x1, 1x8, 2x4, 4x2, 6x2, 3x2, and two jobs
/// whose last node is short (across hosts a covering few,
/// [`gaspi::testing::layouts`]).
fn layouts() -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = (1..=12).map(|n| (n, 1)).collect();
    v.extend([(8, 8), (8, 4), (8, 2), (12, 2), (6, 2), (5, 2), (7, 3)]);
    gaspi::testing::layouts(&v)
}

/// The option sets every layout runs: the defaults, then each algorithm
/// forced with small fractions and blocks so that small messages split,
/// pipeline and cross several blocks. Replicated calls of the direct
/// exchange (and of one node) run both with one reduction per node and
/// with one per rank, whatever this machine's cores would choose.
fn option_sets() -> Vec<(&'static str, AllreduceOptions)> {
    let small = AllreduceOptions {
        fraction_min: 64,
        block_bytes: 256,
        ..Default::default()
    };
    vec![
        ("auto", AllreduceOptions::default()),
        (
            "dissemination, replicated",
            AllreduceOptions {
                algorithm: AllreduceAlgorithm::Dissemination,
                replicate_max: usize::MAX,
                node_replicate_max: usize::MAX,
                node_replicate_inputs: usize::MAX,
                ..small
            },
        ),
        (
            "dissemination, split",
            AllreduceOptions {
                algorithm: AllreduceAlgorithm::Dissemination,
                replicate_max: 0,
                node_replicate_max: 0,
                ..small
            },
        ),
        (
            "ring",
            AllreduceOptions {
                algorithm: AllreduceAlgorithm::Ring,
                replicate_max: 0,
                node_replicate_max: 0,
                ..small
            },
        ),
        (
            "direct",
            AllreduceOptions {
                algorithm: AllreduceAlgorithm::Direct,
                share_reduction: Some(false),
                ..small
            },
        ),
        (
            "direct, shared reduction",
            AllreduceOptions {
                algorithm: AllreduceAlgorithm::Direct,
                share_reduction: Some(true),
                ..small
            },
        ),
    ]
}

/// Rank `r`'s element `i` in iteration `it`: the paper's
/// `(iProc + 1) * (it + 1)` plus the index, so misplaced elements show.
fn value(r: usize, it: usize, i: usize) -> u64 {
    ((r + 1) * (it + 1)) as u64 * 1_000_003 + i as u64
}

/// Exact integer reductions of `len` elements, `iterations` times, checked
/// against a sequential reference on every rank.
fn check_integers(
    ctx: &Context,
    what: &str,
    opts: AllreduceOptions,
    len: usize,
    iterations: usize,
) {
    let n = ctx.num_ranks() as usize;
    let me = ctx.rank() as usize;
    let mut sum = Allreduce::<u64>::with_options(ctx, 20, len, opts, B).unwrap();
    let mut min = Allreduce::<i64>::with_options(ctx, 21, len, opts, B).unwrap();
    let mut prod = Allreduce::<u32>::with_options(ctx, 22, len, opts, B).unwrap();
    for it in 0..iterations {
        // Two calls back to back, so that fast ranks run ahead into the
        // next call while slow ones still finish this one.
        let mine: Vec<u64> = (0..len).map(|i| value(me, it, i)).collect();
        let got = sum.run(&mine, ReduceOp::Sum, B).unwrap().to_vec();
        let again: Vec<u64> = (0..len).map(|i| value(me, it + 1000, i)).collect();
        // The second into a private buffer (split calls fill it instance
        // by instance as the node completes them).
        let mut got_again = vec![u64::MAX; len];
        sum.run_into(&again, &mut got_again, ReduceOp::Sum, B)
            .unwrap();
        for (i, (g, h)) in got.iter().zip(&got_again).enumerate() {
            let want: u64 = (0..n).map(|r| value(r, it, i)).sum();
            assert_eq!(*g, want, "{what}: sum of element {i}/{len}, iteration {it}");
            let want: u64 = (0..n).map(|r| value(r, it + 1000, i)).sum();
            assert_eq!(
                *h, want,
                "{what}: sum of element {i}/{len}, iteration {it}b"
            );
        }
        // In place (`MPI_IN_PLACE`): the buffer is input and result.
        let mut buf: Vec<u64> = (0..len).map(|i| value(me, it + 2000, i)).collect();
        sum.run_in_place(&mut buf, ReduceOp::Sum, B).unwrap();
        for (i, g) in buf.iter().enumerate() {
            let want: u64 = (0..n).map(|r| value(r, it + 2000, i)).sum();
            assert_eq!(
                *g, want,
                "{what}: in-place sum of element {i}/{len}, iteration {it}"
            );
        }
        let signed: Vec<i64> = mine
            .iter()
            .map(|&v| v as i64 * if me % 2 == 0 { 1 } else { -1 })
            .collect();
        let got = min.run(&signed, ReduceOp::Min, B).unwrap().to_vec();
        for (i, g) in got.iter().enumerate() {
            let want = (0..n)
                .map(|r| value(r, it, i) as i64 * if r % 2 == 0 { 1 } else { -1 })
                .min()
                .unwrap();
            assert_eq!(*g, want, "{what}: min of element {i}/{len}, iteration {it}");
        }
        let factors: Vec<u32> = (0..len).map(|i| (me + i + it) as u32 | 1).collect();
        let mut got = vec![0u32; len];
        prod.run_into(&factors, &mut got, ReduceOp::Prod, B)
            .unwrap();
        for (i, g) in got.iter().enumerate() {
            let want = (0..n).fold(1u32, |acc, r| acc.wrapping_mul((r + i + it) as u32 | 1));
            assert_eq!(
                *g, want,
                "{what}: product of element {i}/{len}, iteration {it}"
            );
        }
    }
}

fn every_layout(sizes: &[usize], iterations: usize) {
    for (ranks, ppn) in layouts() {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            for (name, opts) in option_sets() {
                for &len in sizes {
                    let what = format!("{ranks} ranks, ppn {ppn}, {name}");
                    check_integers(ctx, &what, opts, len, iterations);
                }
            }
        });
    }
}

#[test]
fn small_messages_on_every_layout() {
    // 400 u64s (3,200 bytes) lie between the replicated thresholds of one
    // node (2 KiB; 8 KiB when its ranks share cores) and of several (4 KiB).
    // Across hosts 4 calls: each parity of the alternating slots twice.
    every_layout(&[1, 7, 100, 400], repeats(10, 4));
}

#[test]
fn large_messages_on_every_layout() {
    // 1,000 u64s (8,000 bytes): replicated on one node whose ranks share
    // cores, split otherwise.
    every_layout(&[1000, 5000], 3);
}

#[test]
fn one_mebibyte_with_default_blocks() {
    for (ranks, ppn) in [(4, 2), (3, 1), (4, 4), (6, 2)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let len = 128 << 10; // u64s: 1 MiB
            for algorithm in [
                AllreduceAlgorithm::Auto,
                AllreduceAlgorithm::Dissemination,
                AllreduceAlgorithm::Ring,
            ] {
                let opts = AllreduceOptions {
                    algorithm,
                    ..Default::default()
                };
                check_integers(ctx, &format!("{ranks}/{ppn} {algorithm:?}"), opts, len, 2);
            }
        });
    }
}

/// Replicated calls of 200 KiB and 1.25 MiB between 2 nodes: on the MPI
/// engine between hosts their node partials cross as MPI messages (also
/// between emulated hosts, where by default only up to 256 KiB do), in
/// pieces of at most 512 KiB: 1, 3, and 10 (more than the receives posted
/// ahead and the pieces in flight, the last one shorter); elsewhere split
/// calls.
#[test]
fn calls_whose_partials_cross_in_pieces() {
    for (ranks, ppn) in [(2, 1), (4, 2)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let opts = AllreduceOptions {
                message_replicate_max: Some(64 << 20),
                ..Default::default()
            };
            for len in [25_600, 160_000, 600_000] {
                let what = format!("{ranks}/{ppn} pieces, {len} elements");
                check_integers(ctx, &what, opts, len, 3);
            }
        });
    }
}

/// Large calls (1.2 MB) of nodes of one rank each: between hosts of the
/// MPI engine the nodes reduce-scatter and gather them (each node reduces
/// one chunk of the result, the chunks of unequal length), which gives the
/// result of every input reduced in node order bit for bit; elsewhere
/// other ways, within a tolerance. Into the window and into a buffer, call
/// after call; and the inter-node messages are those of the cost model.
#[test]
fn large_calls_of_nodes_of_one_rank() {
    for ranks in [2, 3, 4] {
        Job::new(&[ranks]).ppn(1).run(|ctx| {
            let me = ctx.rank() as usize;
            let n = ctx.num_ranks() as usize;
            let exact = ctx.engine() == gaspi::Engine::Mpi
                && (0..ctx.num_ranks()).any(|r| !ctx.on_this_host(r));
            let opts = AllreduceOptions {
                message_replicate_max: Some(64 << 20),
                ..Default::default()
            };
            let large = 150_001;
            let mut ar = Allreduce::<f64>::with_options(ctx, 44, large, opts, B).unwrap();
            if exact {
                // The shared result and one entry per node: no input slots
                // or result columns, and one set of entries (each call
                // sent and taken whole before the next).
                let window = ctx.segment_size(ar.segment(), ctx.rank()).unwrap();
                let bytes = large * 8;
                assert!(
                    window < (n + 2) * bytes,
                    "{n}x1: a window of {window} bytes for calls of {bytes}"
                );
            }
            let mut into = vec![0f64; large];
            for it in 0..4 {
                let len = large;
                let input = |r: usize| (0..len).map(|i| float_input(r, it, i)).collect::<Vec<_>>();
                let mut want = input(0);
                for r in 1..n {
                    for (a, b) in want.iter_mut().zip(input(r)) {
                        *a += b;
                    }
                }
                let mine = input(me);
                let shared = ar.run(&mine, ReduceOp::Sum, B).unwrap().to_vec();
                ar.run_into(&mine, &mut into[..len], ReduceOp::Sum, B)
                    .unwrap();
                for (what, got) in [("shared", &shared[..]), ("into a buffer", &into[..len])] {
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        let ok = if exact {
                            g.to_bits() == w.to_bits()
                        } else {
                            (g - w).abs() <= 1e-9 * w.abs().max(1.0)
                        };
                        assert!(
                            ok,
                            "{n}x1, call {it}, {what}: element {i}/{len} is {g}, not {w}"
                        );
                    }
                }
            }
            let mine = vec![1f64; large];
            barrier(ctx);
            ctx.reset_traffic();
            ar.run(&mine, ReduceOp::Sum, B).unwrap();
            let mut total = [0u64; 1];
            let t = [ctx.traffic().inter.notifications];
            ctx.allreduce(&t, &mut total, ReduceOp::Sum, GroupId::ALL, B)
                .unwrap();
            assert_eq!(
                total[0],
                ar.inter_node_messages(),
                "{n}x1: inter-node messages"
            );
            if exact {
                // Two messages from each node to each other.
                assert_eq!(total[0], 2 * (n * (n - 1)) as u64, "{n}x1: messages");
            }
            drop(ar);
            barrier(ctx);
        });
    }
}

/// Results of elements of 24 bytes, which do not divide the window's
/// 64-byte area borders, read in the window (`run_with`'s view) and
/// copied out: until 2026-12-01 the view began at the element below the
/// area's start (16 bytes early). 1,000 elements and 50,001 (1.2 MB:
/// reduce-scattered between hosts of one rank on the MPI engine, its
/// chunk borders off the cache lines), by a closure.
#[test]
fn results_of_elements_that_do_not_divide_64_bytes() {
    for (ranks, ppn) in [(2, 1), (4, 2), (3, 3)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let opts = AllreduceOptions {
                message_replicate_max: Some(64 << 20),
                ..Default::default()
            };
            for len in [1000, 50_001] {
                let mut ar = Allreduce::<[u64; 3]>::with_options(ctx, 44, len, opts, B).unwrap();
                let mine: Vec<[u64; 3]> = (0..len)
                    .map(|i| [value(me, 0, i), i as u64, value(me, 1, i)])
                    .collect();
                let add = |a: &[u64; 3], b: &[u64; 3]| [a[0] + b[0], a[1].max(b[1]), a[2] + b[2]];
                let mut into = vec![[0u64; 3]; len];
                for it in 0..2 {
                    let view = ar.run_with(&mine, add, B).unwrap().to_vec();
                    ar.run_with_into(&mine, &mut into, add, B).unwrap();
                    for i in 0..len {
                        let sum = |k| (0..n).map(|r| value(r, k, i)).sum::<u64>();
                        let want = [sum(0), i as u64, sum(1)];
                        let what = format!("{ranks}x{ppn}, {len} elements, call {it}, element {i}");
                        assert_eq!(view[i], want, "{what}: in the window");
                        assert_eq!(into[i], want, "{what}: copied out");
                    }
                }
                drop(ar);
                barrier(ctx);
            }
        });
    }
}

/// Floating-point inputs whose sum depends on the order of additions.
fn float_input(r: usize, it: usize, i: usize) -> f64 {
    let x = (r * 7919 + i * 104_729 + it * 31) % 1000;
    (x as f64 + 0.1) * 10f64.powi((r % 5) as i32 - 2)
}

/// Every rank's results as bit patterns, gathered with a plain allreduce
/// of `u64::max` / `u64::min` per element: `(all identical, identical
/// within each node)`.
fn identical(ctx: &Context, bits: &[u64]) -> (bool, bool) {
    let agree = |group: GroupId| {
        let (mut lo, mut hi) = (vec![0u64; bits.len()], vec![0u64; bits.len()]);
        for (chunk, (l, h)) in bits
            .chunks(200)
            .zip(lo.chunks_mut(200).zip(hi.chunks_mut(200)))
        {
            ctx.allreduce(chunk, l, ReduceOp::Min, group, B).unwrap();
            ctx.allreduce(chunk, h, ReduceOp::Max, group, B).unwrap();
        }
        lo == hi
    };
    (agree(GroupId::ALL), agree(ctx.node_group()))
}

#[test]
fn floating_point_tolerance_and_bit_identity() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(7, 1), (8, 2), (6, 3), (5, 2), (11, 1), (4, 4)])
    {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let n = ctx.num_ranks() as usize;
            let me = ctx.rank() as usize;
            for (name, opts) in option_sets() {
                for len in [3, 600] {
                    let mut ar = Allreduce::<f64>::with_options(ctx, 30, len, opts, B).unwrap();
                    let mut first: Option<Vec<u64>> = None;
                    for it in 0..4 {
                        // The same inputs every iteration: results must
                        // repeat bit for bit.
                        let mine: Vec<f64> = (0..len).map(|i| float_input(me, 0, i)).collect();
                        let got = ar.run(&mine, ReduceOp::Sum, B).unwrap().to_vec();
                        for (i, g) in got.iter().enumerate() {
                            let want: f64 = (0..n).map(|r| float_input(r, 0, i)).sum();
                            let tol =
                                1e-13 * (0..n).map(|r| float_input(r, 0, i).abs()).sum::<f64>();
                            assert!(
                                (g - want).abs() <= tol,
                                "{name}, {ranks}/{ppn}: element {i} is {g}, reference {want}"
                            );
                        }
                        let bits: Vec<u64> = got.iter().map(|x| x.to_bits()).collect();
                        match &first {
                            None => first = Some(bits.clone()),
                            Some(f) => assert_eq!(
                                f, &bits,
                                "{name}: iteration {it} differs from the first"
                            ),
                        }
                        let (everywhere, in_node) = identical(ctx, &bits);
                        assert!(in_node, "{name}, {ranks}/{ppn}: ranks of one node differ");
                        // Ring and direct: the same bits everywhere.
                        if name == "ring" || name.starts_with("direct") || ctx.num_nodes() == 1 {
                            assert!(everywhere, "{name}, {ranks}/{ppn}: ranks differ");
                        }
                    }
                    drop(ar);
                    barrier(ctx);
                }
            }
        });
    }
}

/// Shared reductions against exact sequential references, bit for bit:
/// every rank reducing for itself (`share_reduction: Some(false)`) and
/// ranks of one node deciding differently (`Some(rank is even)`, which
/// the ranks agree down to no node partials) reduce all inputs in rank
/// order; with `Some(true)` a job of one node does too (one rank for the
/// node), and a job of several nodes reduces node partials (each node's
/// inputs in local-rank order) in node order. Into the window and into
/// the caller's buffer, call after call.
#[test]
fn shared_and_own_reductions_match_their_order_bit_for_bit() {
    for (ranks, ppn) in gaspi::testing::layouts(&[(4, 2), (8, 4), (6, 3), (3, 3), (5, 2), (7, 3)]) {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let me = ctx.rank() as usize;
            let len = 300;
            let opts = |share: bool| AllreduceOptions {
                algorithm: AllreduceAlgorithm::Direct,
                share_reduction: Some(share),
                ..Default::default()
            };
            let mut shared = Allreduce::<f64>::with_options(ctx, 36, len, opts(true), B).unwrap();
            let mut own = Allreduce::<f64>::with_options(ctx, 37, len, opts(false), B).unwrap();
            let mut mixed =
                Allreduce::<f64>::with_options(ctx, 38, len, opts(me % 2 == 0), B).unwrap();
            let nodes: Vec<Vec<usize>> = (0..ranks)
                .collect::<Vec<_>>()
                .chunks(ppn)
                .map(|c| c.to_vec())
                .collect();
            let mut into = vec![0f64; len];
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for it in 0..30 {
                let input = |r: usize| (0..len).map(|i| float_input(r, it, i)).collect::<Vec<_>>();
                let fold = |rs: &[usize]| {
                    let mut acc = input(rs[0]);
                    for &r in &rs[1..] {
                        for (a, b) in acc.iter_mut().zip(input(r)) {
                            *a += b;
                        }
                    }
                    acc
                };
                let in_rank_order = bits(&fold(&(0..ranks).collect::<Vec<_>>()));
                let partials: Vec<Vec<f64>> = nodes.iter().map(|n| fold(n)).collect();
                let mut by_nodes = partials[0].clone();
                for p in &partials[1..] {
                    for (a, b) in by_nodes.iter_mut().zip(p) {
                        *a += b;
                    }
                }
                let by_nodes = bits(&by_nodes);
                let mine = input(me);
                let a = bits(&shared.run(&mine, ReduceOp::Sum, B).unwrap().to_vec());
                let b = bits(&own.run(&mine, ReduceOp::Sum, B).unwrap().to_vec());
                let c = bits(&mixed.run(&mine, ReduceOp::Sum, B).unwrap().to_vec());
                shared.run_into(&mine, &mut into, ReduceOp::Sum, B).unwrap();
                let want_shared = if nodes.len() > 1 {
                    &by_nodes
                } else {
                    &in_rank_order
                };
                assert_eq!(&a, want_shared, "{ranks}/{ppn}, iteration {it}: shared");
                assert_eq!(
                    &bits(&into),
                    want_shared,
                    "{ranks}/{ppn}, iteration {it}: shared into a buffer"
                );
                assert_eq!(b, in_rank_order, "{ranks}/{ppn}, iteration {it}: own");
                assert_eq!(c, in_rank_order, "{ranks}/{ppn}, iteration {it}: mixed");
            }
            drop((shared, own, mixed));
            barrier(ctx);
        });
    }
}

/// A result that each rank reduces for itself and leaves in the window
/// lies in a column of its own, and no two local ranks' columns share a
/// 128-byte pair of cache lines: ranks writing into one pair slow each
/// other down (with 16 ranks, packed 8-byte results doubled a call's time).
#[test]
fn own_results_in_the_window_do_not_share_cache_line_pairs() {
    for (ranks, ppn) in [(4, 4), (6, 3), (8, 8), (5, 2)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let opts = AllreduceOptions {
                algorithm: AllreduceAlgorithm::Direct,
                share_reduction: Some(false),
                replicate_max: usize::MAX,
                node_replicate_max: usize::MAX,
                node_replicate_inputs: usize::MAX,
                ..Default::default()
            };
            for len in [1usize, 3, 17, 300] {
                let mut ar = Allreduce::<u64>::with_options(ctx, 39, len, opts, B).unwrap();
                let view = ar.run(&vec![1; len], ReduceOp::Sum, B).unwrap();
                assert_eq!(view.to_vec(), vec![ranks as u64; len]);
                let base = ctx.segment_ptr(ar.segment()).unwrap() as usize;
                let offset = view.as_ptr() as usize - base;
                // Every rank's offset, by an allreduce of one-hot vectors.
                let mut mine = vec![0u64; ranks];
                mine[ctx.rank() as usize] = offset as u64 + 1;
                let mut all = vec![0u64; ranks];
                ctx.allreduce(&mine, &mut all, ReduceOp::Sum, GroupId::ALL, B)
                    .unwrap();
                let pairs = |r: usize| {
                    let start = all[r] as usize - 1;
                    start / 128..=(start + len * 8 - 1) / 128
                };
                let node = ctx.node_ranks(ctx.node());
                for a in node.clone() {
                    for b in node.clone().filter(|&b| b > a) {
                        let (pa, pb) = (pairs(a as usize), pairs(b as usize));
                        assert!(
                            pa.end() < pb.start() || pb.end() < pa.start(),
                            "{ranks}/{ppn}, {len} elements: ranks {a} and {b} share a line pair ({pa:?}, {pb:?})"
                        );
                    }
                }
                drop(ar);
                barrier(ctx);
            }
        });
    }
}

/// The options that pipeline every split call of a job of one node, in
/// chunks of 192 bytes (24 `u64`s: most calls run through the staging
/// ring many times, and chunks end mid-fraction), and the same options
/// without the pipeline.
fn pipelined_and_plain() -> (AllreduceOptions, AllreduceOptions) {
    let pipelined = AllreduceOptions {
        node_replicate_max: 0,
        shared_node_replicate_max: 0,
        fraction_min: 64,
        pipeline_min: 1,
        pipeline_chunk: 192,
        ..Default::default()
    };
    let plain = AllreduceOptions {
        pipeline_min: usize::MAX,
        ..pipelined
    };
    (pipelined, plain)
}

/// Pipelined calls (one node, split, through the staging ring) give the
/// unpipelined call's result bit for bit: the inputs in local-rank order,
/// into the window and into the caller's buffer, call after call and
/// alternating with another allreduce; and a type of 24-byte elements
/// with a user's closure.
#[test]
fn pipelined_calls_match_the_unpipelined_bit_for_bit() {
    for ranks in [2, 3, 4, 5] {
        Job::new(&[ranks]).ppn(ranks).run(|ctx| {
            assert_eq!(ctx.num_nodes(), 1);
            let me = ctx.rank() as usize;
            let (pipelined, plain) = pipelined_and_plain();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for len in [1, 5, 23, 24, 25, 97, 1000, 3001] {
                let mut pipe = Allreduce::<f64>::with_options(ctx, 40, len, pipelined, B).unwrap();
                let mut flat = Allreduce::<f64>::with_options(ctx, 41, len, plain, B).unwrap();
                let mut into = vec![f64::NAN; len];
                for it in 0..6 {
                    let input =
                        |r: usize| (0..len).map(|i| float_input(r, it, i)).collect::<Vec<_>>();
                    let mut want = input(0);
                    for r in 1..ranks {
                        for (a, b) in want.iter_mut().zip(input(r)) {
                            *a += b;
                        }
                    }
                    let want = bits(&want);
                    let mine = input(me);
                    let a = bits(&pipe.run(&mine, ReduceOp::Sum, B).unwrap().to_vec());
                    let b = bits(&flat.run(&mine, ReduceOp::Sum, B).unwrap().to_vec());
                    pipe.run_into(&mine, &mut into, ReduceOp::Sum, B).unwrap();
                    let what = format!("{ranks} ranks, {len} elements, call {it}");
                    assert_eq!(a, want, "{what}: pipelined, in the window");
                    assert_eq!(bits(&into), want, "{what}: pipelined, into a buffer");
                    assert_eq!(b, want, "{what}: unpipelined");
                }
                drop((pipe, flat));
                barrier(ctx);
            }
            // 24-byte elements: chunks of 8, fractions that are no
            // multiple of a cache line.
            let len = 301;
            let mut ar = Allreduce::<[u64; 3]>::with_options(ctx, 42, len, pipelined, B).unwrap();
            let add =
                |a: &[u64; 3], b: &[u64; 3]| [a[0].wrapping_add(b[0]), a[1] ^ b[1], a[2].max(b[2])];
            let sample = |r: usize, i: usize, it: usize| {
                let v = value(r, it, i);
                [v, v.rotate_left(17), v % 1009]
            };
            let mut got = vec![[0u64; 3]; len];
            for it in 0..5 {
                let mine: Vec<[u64; 3]> = (0..len).map(|i| sample(me, i, it)).collect();
                ar.run_with_into(&mine, &mut got, add, B).unwrap();
                for (i, g) in got.iter().enumerate() {
                    let want =
                        (1..ranks).fold(sample(0, i, it), |acc, r| add(&acc, &sample(r, i, it)));
                    assert_eq!(*g, want, "{ranks} ranks: element {i}, call {it}");
                }
            }
            drop(ar);
            barrier(ctx);
        });
    }
}

/// A pipelined call that timed out (its rank ran ahead as far as the
/// staging ring lets it, then found nobody else there) completes when
/// called again with the same arguments, and the next call is a fresh one.
#[test]
fn a_timed_out_pipelined_call_resumes() {
    Job::new(&[3]).run(|ctx| {
        let me = ctx.rank() as usize;
        let (pipelined, _) = pipelined_and_plain();
        let len = 500;
        let mut ar = Allreduce::<u64>::with_options(ctx, 43, len, pipelined, B).unwrap();
        let flags = segment(ctx, 44, 64);
        let mine: Vec<u64> = (0..len).map(|i| value(me, 0, i)).collect();
        let mut got = vec![0u64; len];
        if me == 0 {
            let e = ar
                .run_into(&mine, &mut got, ReduceOp::Sum, Timeout::Test)
                .unwrap_err();
            assert!(e.is_timeout(), "{e}");
            let e = ar
                .run_into(&mine, &mut got, ReduceOp::Sum, Timeout::Test)
                .unwrap_err();
            assert!(e.is_timeout(), "{e}");
            for r in 1..3 {
                ctx.notify(r, 44, gaspi::Notification::new(0, 1), 0, B)
                    .unwrap();
            }
        } else {
            ctx.notify_claim(44, 0..1, B).unwrap();
        }
        ar.run_into(&mine, &mut got, ReduceOp::Sum, B).unwrap();
        for (i, g) in got.iter().enumerate() {
            assert_eq!(
                *g,
                (0..3).map(|r| value(r, 0, i)).sum::<u64>(),
                "element {i}"
            );
        }
        let next: Vec<u64> = (0..len).map(|i| value(me, 1, i)).collect();
        let got = ar.run(&next, ReduceOp::Max, B).unwrap().to_vec();
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, value(2, 1, i), "element {i} of the next call");
        }
        drop(flags);
        barrier(ctx);
    });
}

/// An in-place call that timed out (rank 0 came late) completes when
/// called again with the same buffer: replicated on one node, split on
/// nodes of 2, pipelined, and 1.2 MB on nodes of one rank (on the MPI
/// engine between hosts reduce-scattered and gathered as keyed messages,
/// the others' calls given up while they wait for rank 0's message).
#[test]
fn an_in_place_call_resumes_from_its_input() {
    let (pipelined, _) = pipelined_and_plain();
    let messages = AllreduceOptions {
        message_replicate_max: Some(64 << 20),
        ..Default::default()
    };
    for (ranks, ppn, opts, len) in [
        (4, 4, AllreduceOptions::default(), 8),
        (4, 2, AllreduceOptions::default(), 4096),
        (3, 3, pipelined, 500),
        (3, 1, messages, 150_001),
    ] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
            let mut ar = Allreduce::<u64>::with_options(ctx, 43, len, opts, B).unwrap();
            let flags = segment(ctx, 44, 64);
            for it in 0..2 {
                let mut buf: Vec<u64> = (0..len).map(|i| value(me, it, i)).collect();
                others_time_out_before_rank_0(ctx, 44, |t| {
                    ar.run_in_place(&mut buf, ReduceOp::Sum, t)
                });
                ar.run_in_place(&mut buf, ReduceOp::Sum, B).unwrap();
                for (i, g) in buf.iter().enumerate() {
                    let want: u64 = (0..n).map(|r| value(r, it, i)).sum();
                    assert_eq!(*g, want, "{ranks}x{ppn}: element {i}, call {it}");
                }
            }
            drop(flags);
            barrier(ctx);
        });
    }
}

/// Ranks that give up on a timed-out call (rank 0 never came) and drop the
/// allreduce make a new one on the same segment id with rank 0, and its
/// calls are exact: one node, nodes of 2 and of 1, with the default
/// options, the pipelined staging ring and the dissemination between
/// nodes.
#[test]
fn a_timed_out_call_can_be_given_up() {
    let (pipelined, _) = pipelined_and_plain();
    let dissemination = AllreduceOptions {
        algorithm: AllreduceAlgorithm::Dissemination,
        fraction_min: 64,
        ..Default::default()
    };
    for (ranks, ppn) in [(4, 4), (4, 2), (4, 1)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let flags = segment(ctx, 44, 64);
            let me = ctx.rank();
            // 200 elements: small enough that on the MPI engine between
            // hosts the node partials cross as keyed messages; 600,000
            // (4.6 MiB) cross as 10 pieces, those to rank 0 still held by
            // MPI when the call is given up and its window deleted.
            let pieces = AllreduceOptions {
                message_replicate_max: Some(64 << 20),
                ..Default::default()
            };
            for (what, opts, len) in [
                ("auto", AllreduceOptions::default(), 700),
                ("auto small", AllreduceOptions::default(), 200),
                ("pieces", pieces, 600_000),
                ("pipelined", pipelined, 700),
                ("dissemination", dissemination, 700),
            ] {
                let input = |it: usize| -> Vec<u64> {
                    (0..len).map(|i| value(me as usize, it, i)).collect()
                };
                let mut ar = Allreduce::<u64>::with_options(ctx, 43, len, opts, B).unwrap();
                let mut got = vec![0u64; len];
                others_give_up_before_rank_0(ctx, 44, |t| {
                    ar.run_into(&input(0), &mut got, ReduceOp::Sum, t)
                });
                drop(ar);
                let mut ar = Allreduce::<u64>::with_options(ctx, 43, len, opts, B).unwrap();
                for it in 1..4 {
                    let mut got = vec![0u64; len];
                    ar.run_into(&input(it), &mut got, ReduceOp::Sum, B).unwrap();
                    let window = ar.run(&input(it + 10), ReduceOp::Max, B).unwrap().to_vec();
                    for i in 0..len {
                        let sum: u64 = (0..ranks).map(|r| value(r, it, i)).sum();
                        assert_eq!(got[i], sum, "{what} {ranks}x{ppn} call {it}, element {i}");
                        let max = value(ranks - 1, it + 10, i);
                        assert_eq!(window[i], max, "{what} {ranks}x{ppn} max {it}, element {i}");
                    }
                }
                drop(ar);
                barrier(ctx);
            }
            drop(flags);
        });
    }
}

/// Calls given up and later objects whose keyed messages share one tag
/// pair (`GASPI_KEYED_SLOTS=1`; on the MPI engine between hosts, where
/// node partials cross as keyed messages): what the ranks sent for an
/// object deleted meets the messages of every later object on the same
/// tags, also 4.6 MiB messages of 10 pieces, more than are read into
/// buffers at a time, and is told apart by its heads. Elsewhere the
/// setting changes nothing and the test runs the same calls.
#[test]
fn objects_sharing_tags_after_calls_given_up() {
    for (ranks, ppn) in [(4, 1), (4, 2)] {
        Job::new(&[ranks])
            .ppn(ppn)
            .env("GASPI_KEYED_SLOTS", "1")
            .run(|ctx| {
                let flags = segment(ctx, 44, 64);
                let me = ctx.rank() as usize;
                let pieces = AllreduceOptions {
                    message_replicate_max: Some(64 << 20),
                    ..Default::default()
                };
                for len in [200, 600_000] {
                    let input =
                        |it: usize| -> Vec<u64> { (0..len).map(|i| value(me, it, i)).collect() };
                    let check = |ar: &mut Allreduce<u64>, it: usize, what: &str| {
                        let mut got = vec![0u64; len];
                        ar.run_into(&input(it), &mut got, ReduceOp::Sum, B).unwrap();
                        for (i, g) in got.iter().enumerate() {
                            let sum: u64 = (0..ranks).map(|r| value(r, it, i)).sum();
                            assert_eq!(
                                *g, sum,
                                "{what} {len} {ranks}x{ppn} call {it}, element {i}"
                            );
                        }
                    };
                    // Two objects alive at once, their calls alternating.
                    let mut a = Allreduce::<u64>::with_options(ctx, 43, len, pieces, B).unwrap();
                    let mut b = Allreduce::<u64>::with_options(ctx, 45, len, pieces, B).unwrap();
                    for it in 0..2 {
                        check(&mut a, it, "first of two");
                        check(&mut b, it + 5, "second of two");
                    }
                    drop(b);
                    // A call given up on every rank but 0, its object deleted.
                    let mut got = vec![0u64; len];
                    others_give_up_before_rank_0(ctx, 44, |t| {
                        a.run_into(&input(9), &mut got, ReduceOp::Sum, t)
                    });
                    drop(a);
                    // Later objects on the same tags.
                    for round in 0..2 {
                        let mut c =
                            Allreduce::<u64>::with_options(ctx, 43, len, pieces, B).unwrap();
                        for it in 0..2 {
                            check(&mut c, 20 + round * 2 + it, "later");
                        }
                        drop(c);
                    }
                    barrier(ctx);
                }
                drop(flags);
            });
    }
}

/// Every GASPI type with every operation, against a sequential reference
/// (floats: inputs whose sums and products are exact, so equality holds).
fn every_type_and_op<T>(ctx: &Context, sample: impl Fn(usize, usize) -> T)
where
    T: gaspi::Reducible + PartialEq + std::fmt::Debug,
{
    let n = ctx.num_ranks() as usize;
    let me = ctx.rank() as usize;
    let len = 37;
    let mut ar = Allreduce::<T>::new(ctx, 35, len, B).unwrap();
    let mine: Vec<T> = (0..len).map(|i| sample(me, i)).collect();
    for op in [ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum, ReduceOp::Prod] {
        let got = ar.run(&mine, op, B).unwrap().to_vec();
        for (i, g) in got.iter().enumerate() {
            let want = (1..n).fold(sample(0, i), |acc, r| T::reduce(op, acc, sample(r, i)));
            assert_eq!(*g, want, "{} {op:?}, element {i}", T::GASPI_TYPE);
        }
    }
    drop(ar);
    barrier(ctx);
}

#[test]
fn every_type_and_operation() {
    for (ranks, ppn) in [(5, 2), (4, 4), (7, 1)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            // Small magnitudes: products of up to 7 factors stay exact.
            let small = |r: usize, i: usize| ((r * 3 + i) % 5) as i64 - 2;
            every_type_and_op(ctx, |r, i| small(r, i) as i32);
            every_type_and_op(ctx, |r, i| (small(r, i) + 3) as u32);
            every_type_and_op(ctx, |r, i| small(r, i) * 1_000_003);
            every_type_and_op(ctx, |r, i| (small(r, i) + 3) as u64 * 65_537);
            every_type_and_op(ctx, |r, i| small(r, i) as f32 * 0.5);
            every_type_and_op(ctx, |r, i| small(r, i) as f64 * 0.25);
        });
    }
}

#[test]
fn user_closures_on_any_plain_data() {
    Job::new(&[6]).ppn(2).run(|ctx| {
        let me = ctx.rank() as u64;
        for (name, opts) in option_sets() {
            // [value, rank] pairs: the largest value and who has it.
            let mut ar = Allreduce::<[u64; 2]>::with_options(ctx, 31, 40, opts, B).unwrap();
            for it in 0..5u64 {
                let mine: Vec<[u64; 2]> = (0..40).map(|i| [(me * 13 + i + it) % 6, me]).collect();
                let mut got = vec![[0u64; 2]; 40];
                ar.run_with_into(
                    &mine,
                    &mut got,
                    |a, b| if (b[0], b[1]) > (a[0], a[1]) { *b } else { *a },
                    B,
                )
                .unwrap();
                for (i, g) in got.iter().enumerate() {
                    let want = (0..6u64)
                        .map(|r| [(r * 13 + i as u64 + it) % 6, r])
                        .max_by_key(|p| (p[0], p[1]))
                        .unwrap();
                    assert_eq!(*g, want, "{name}: element {i}, iteration {it}");
                }
            }
            drop(ar);
            barrier(ctx);
        }
    });
}

#[test]
fn inter_node_messages_match_the_cost_model() {
    for (ranks, ppn) in
        gaspi::testing::layouts(&[(4, 2), (6, 2), (8, 2), (7, 1), (11, 1), (9, 3), (5, 2)])
    {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            for (name, opts) in option_sets() {
                for len in [1, 300, 2000] {
                    let mut ar = Allreduce::<u64>::with_options(ctx, 32, len, opts, B).unwrap();
                    let mine = vec![ctx.rank() as u64; len];
                    ar.run(&mine, ReduceOp::Sum, B).unwrap(); // warm up: map the windows
                    barrier(ctx);
                    ctx.reset_traffic();
                    ar.run(&mine, ReduceOp::Sum, B).unwrap();
                    let t = ctx.traffic().inter;
                    let mut total = [0u64; 1];
                    ctx.allreduce(
                        &[t.notifications],
                        &mut total,
                        ReduceOp::Sum,
                        GroupId::ALL,
                        B,
                    )
                    .unwrap();
                    assert_eq!(
                        total[0],
                        ar.inter_node_messages(),
                        "{name}, {ranks}/{ppn}, {len} elements: inter-node messages"
                    );
                    drop(ar);
                    barrier(ctx);
                }
            }
        });
    }
}

/// Inputs put in and pipelined results copied out with ordinary stores,
/// with non-temporal ones, mixed, and by the measured choices between them
/// (`stream_inputs` and `stream_copies` `None`, which warm up, try both
/// kinds and then keep one): the same exact sums, into the window and
/// into the caller's buffer, on one node (pipelined) and on two.
#[test]
fn streaming_and_ordinary_stores_give_the_same_results() {
    for (ranks, ppn) in [(4, 4), (4, 2)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            let me = ctx.rank() as usize;
            let cap = 1 << 16; // 512 KiB of f64: measured calls
            let opts = |(stream_inputs, stream_copies)| AllreduceOptions {
                stream_inputs,
                stream_copies,
                pipeline_min: 384 << 10,
                ..Default::default()
            };
            let kinds = [
                (Some(false), Some(false)),
                (Some(true), Some(true)),
                (Some(false), Some(true)),
                (None, None),
            ];
            let mut ars: Vec<Allreduce<f64>> = kinds
                .iter()
                .enumerate()
                .map(|(k, &s)| Allreduce::with_options(ctx, 40 + k as u8, cap, opts(s), B).unwrap())
                .collect();
            let mut into = vec![0f64; cap];
            for it in 0..24usize {
                let len = cap;
                // Small integers: every order of summation is exact.
                let input = |r: usize, i: usize| ((r * 7 + it * 3 + i) % 1000) as f64;
                let mine: Vec<f64> = (0..len).map(|i| input(me, i)).collect();
                let want: Vec<f64> = (0..len)
                    .map(|i| (0..ranks).map(|r| input(r, i)).sum())
                    .collect();
                for (k, ar) in ars.iter_mut().enumerate() {
                    let what = format!("{ranks}/{ppn}, call {it}, streaming {:?}", kinds[k]);
                    if it % 2 == 0 {
                        let got = ar.run(&mine, ReduceOp::Sum, B).unwrap().to_vec();
                        assert_eq!(&got[..len], &want[..], "{what}: in the window");
                    } else {
                        ar.run_into(&mine, &mut into[..len], ReduceOp::Sum, B)
                            .unwrap();
                        assert_eq!(&into[..len], &want[..], "{what}: into a buffer");
                    }
                }
            }
        });
    }
}
