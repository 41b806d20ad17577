//! The MPI-semantic RMA window with fence synchronisation (Santhanaraman et al. 2009):
//! random put / get / accumulate programs over 100 epochs give the final
//! window contents of a sequential model of MPI semantics, in every fence
//! design and node layout; misuse is an error.

use gaspi::testing::Job;
use gaspi::{
    AccumulateOp, Assert, Context, Error, FenceDesign, GroupId, Rank, RmaOptions, RmaWindow,
    Timeout,
};

const B: Timeout = Timeout::Block;
const DESIGNS: [FenceDesign; 3] = [
    FenceDesign::Notified,
    FenceDesign::ImmediateOpt,
    FenceDesign::Deferred,
];

/// A small deterministic generator (splitmix64): every rank derives the
/// same program and model from the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Elements per rank, in blocks of `BLOCK` that one epoch treats alike.
const LEN: usize = 96;
const BLOCK: usize = 4;

/// What happens to one block of one target in one epoch. MPI leaves
/// conflicting accesses undefined, so a block gets one kind of access:
/// puts by one origin, accumulates with one commutative op from any
/// origins, a compare-and-swap by one origin, a local store by its owner,
/// or only gets (of the previous epoch's values).
#[derive(Clone, Debug)]
enum Access {
    Put {
        origin: Rank,
        values: Vec<u64>,
    },
    Acc {
        op: AccumulateOp,
        adds: Vec<(Rank, Vec<u64>)>,
    },
    Fetch {
        adds: Vec<(Rank, u64)>,
    },
    Cas {
        origin: Rank,
        new: u64,
    },
    Store {
        values: Vec<u64>,
    },
    Get {
        readers: Vec<Rank>,
    },
}

const ACC_OPS: [AccumulateOp; 6] = [
    AccumulateOp::Sum,
    AccumulateOp::Max,
    AccumulateOp::Min,
    AccumulateOp::Bxor,
    AccumulateOp::Bor,
    AccumulateOp::Prod,
];

fn apply(op: AccumulateOp, a: u64, b: u64) -> u64 {
    match op {
        AccumulateOp::Sum => a.wrapping_add(b),
        AccumulateOp::Max => a.max(b),
        AccumulateOp::Min => a.min(b),
        AccumulateOp::Bxor => a ^ b,
        AccumulateOp::Bor => a | b,
        AccumulateOp::Prod => a.wrapping_mul(b),
        AccumulateOp::Band => a & b,
        AccumulateOp::Replace => b,
        AccumulateOp::NoOp => a,
    }
}

/// The accesses of epoch `e` for `n` ranks: `[target][block]`.
fn program(seed: u64, e: usize, n: usize) -> Vec<Vec<Access>> {
    let mut rng = Rng(seed ^ (e as u64).wrapping_mul(0x1234_5678_9ABC_DEF1));
    let vals = |rng: &mut Rng, k: usize| (0..k).map(|_| rng.next() % 1000 + 1).collect();
    (0..n)
        .map(|t| {
            (0..LEN / BLOCK)
                .map(|_| match rng.below(8) {
                    0 | 1 => Access::Put {
                        origin: rng.below(n) as Rank,
                        values: vals(&mut rng, BLOCK),
                    },
                    2 => {
                        let op = ACC_OPS[rng.below(ACC_OPS.len())];
                        let k = rng.below(n) + 1;
                        let adds = (0..k)
                            .map(|_| (rng.below(n) as Rank, vals(&mut rng, BLOCK)))
                            .collect();
                        Access::Acc { op, adds }
                    }
                    3 => Access::Fetch {
                        adds: (0..rng.below(n) + 1)
                            .map(|_| (rng.below(n) as Rank, rng.next() % 100))
                            .collect(),
                    },
                    4 => Access::Cas {
                        origin: rng.below(n) as Rank,
                        new: rng.next(),
                    },
                    5 => Access::Store {
                        values: vals(&mut rng, BLOCK),
                    },
                    6 => Access::Get {
                        readers: (0..rng.below(n) + 1)
                            .map(|_| rng.below(n) as Rank)
                            .collect(),
                    },
                    _ => {
                        let _ = t;
                        Access::Get { readers: vec![] }
                    }
                })
                .collect()
        })
        .collect()
}

/// The model after an epoch: `model[t]` is `t`'s window.
fn step(model: &mut [Vec<u64>], prog: &[Vec<Access>]) {
    for (t, blocks) in prog.iter().enumerate() {
        for (b, a) in blocks.iter().enumerate() {
            let w = &mut model[t][b * BLOCK..(b + 1) * BLOCK];
            match a {
                Access::Put { values, .. } | Access::Store { values } => w.copy_from_slice(values),
                Access::Acc { op, adds } => {
                    for (_, v) in adds {
                        for (x, y) in w.iter_mut().zip(v) {
                            *x = apply(*op, *x, *y);
                        }
                    }
                }
                Access::Fetch { adds } => {
                    for (_, v) in adds {
                        w[0] = w[0].wrapping_add(*v);
                    }
                }
                Access::Cas { new, .. } => w[1] = *new,
                Access::Get { .. } => {}
            }
        }
    }
}

/// Run `epochs` random epochs on a window of `design` (staging of
/// `staging` bytes, so large blocks go in pieces), checking every get,
/// every compare-and-swap and, after each fence, this rank's window.
fn random_program(ctx: &Context, design: FenceDesign, staging: usize, epochs: usize, seed: u64) {
    let n = ctx.num_ranks() as usize;
    let me = ctx.rank();
    let opts = RmaOptions {
        design,
        staging_bytes: staging,
        ..Default::default()
    };
    let win = RmaWindow::<u64>::with_options(ctx, 7, LEN, GroupId::ALL, opts, B).unwrap();
    let mut model = vec![vec![0u64; LEN]; n];
    win.fence(Assert::NOPRECEDE, B).unwrap();
    for e in 0..epochs {
        let prog = program(seed, e, n);
        // Issue this rank's accesses, targets in a rank-specific order.
        let mut order: Vec<(usize, usize)> = (0..n)
            .flat_map(|t| (0..LEN / BLOCK).map(move |b| (t, b)))
            .collect();
        let rot = (me as usize * 7 + e) % order.len();
        order.rotate_left(rot);
        for (t, b) in order {
            let (tr, d) = (t as Rank, b * BLOCK);
            let old = &model[t][d..d + BLOCK];
            match &prog[t][b] {
                Access::Put { origin, values } if *origin == me => win.put(values, tr, d).unwrap(),
                Access::Acc { op, adds } => {
                    for (_, v) in adds.iter().filter(|(o, _)| *o == me) {
                        win.accumulate(v, tr, d, *op).unwrap();
                    }
                }
                Access::Fetch { adds } => {
                    for (_, v) in adds.iter().filter(|(o, _)| *o == me) {
                        win.fetch_and_op(*v, tr, d, AccumulateOp::Sum).unwrap();
                    }
                }
                Access::Cas { origin, new } if *origin == me => {
                    let wrong = win.compare_and_swap(0xdead, old[1] ^ 1, tr, d + 1).unwrap();
                    assert_eq!(wrong, old[1], "epoch {e}: failed CAS returns the value");
                    let got = win.compare_and_swap(*new, old[1], tr, d + 1).unwrap();
                    assert_eq!(got, old[1], "epoch {e}: CAS on {t}[{}]", d + 1);
                }
                Access::Store { values } if t == me as usize => {
                    win.local().copy_from_slice(d, values)
                }
                Access::Get { readers } if readers.contains(&me) => {
                    let mut got = [0u64; BLOCK];
                    win.get(&mut got, tr, d).unwrap();
                    assert_eq!(&got[..], old, "epoch {e}: get of {t}[{d}..] by {me}");
                }
                _ => {}
            }
        }
        // Every tenth epoch ends with NOSUCCEED, is checked whole, and the
        // next one opens with NOPRECEDE. After a plain fence the next epoch
        // is open and others may already write into this window: check
        // only what nobody writes in it (blocks that are read or stored by
        // this rank, which stores after the check).
        let last = e + 1 == epochs;
        let pause = last || e % 10 == 9;
        let assert = if pause {
            Assert::NOSUCCEED
        } else {
            Assert::NONE
        };
        win.fence(assert, B).unwrap();
        step(&mut model, &prog);
        let next = (!pause).then(|| program(seed, e + 1, n));
        let stable = |i: usize| match &next {
            None => true,
            Some(p) => matches!(
                p[me as usize][i / BLOCK],
                Access::Get { .. } | Access::Store { .. }
            ),
        };
        let mine = win.local().to_vec();
        if let Some(i) = (0..LEN).find(|&i| stable(i) && mine[i] != model[me as usize][i]) {
            panic!(
                "{design:?}, epoch {e}, rank {me}: element {i} is {}, the model says {} ({:?})",
                mine[i],
                model[me as usize][i],
                prog[me as usize][i / BLOCK]
            );
        }
        if pause && !last {
            win.fence(Assert::NOPRECEDE, B).unwrap();
        }
    }
}

/// 2-8 ranks on one node and on emulated nodes, 100 epochs, every design.
#[test]
fn random_programs_match_the_sequential_model_in_every_design() {
    for (ranks, ppn) in [(2, 2), (2, 1), (3, 3), (4, 2), (5, 2), (8, 4)] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            for (i, design) in DESIGNS.into_iter().enumerate() {
                random_program(ctx, design, 256 << 10, 100, 42 + i as u64);
            }
        });
    }
}

/// Transfers larger than the staging area go in pieces, through every
/// design, between nodes.
#[test]
fn transfers_larger_than_the_staging_area() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        for design in DESIGNS {
            random_program(ctx, design, 64, 20, 7);
            let opts = RmaOptions {
                design,
                staging_bytes: 64,
                ..Default::default()
            };
            let n = 10_000;
            let win = RmaWindow::<u32>::with_options(ctx, 8, n, GroupId::ALL, opts, B).unwrap();
            let me = ctx.rank();
            let right = (me + 1) % ctx.num_ranks();
            let data: Vec<u32> = (0..n as u32).map(|i| i * 3 + me as u32).collect();
            win.fence(Assert::NOPRECEDE, B).unwrap();
            win.put(&data, right, 0).unwrap();
            win.fence(Assert::NONE, B).unwrap();
            let left = (me + ctx.num_ranks() - 1) % ctx.num_ranks();
            let expect: Vec<u32> = (0..n as u32).map(|i| i * 3 + left as u32).collect();
            assert_eq!(win.local().to_vec(), expect, "{design:?}");
            let mut back = vec![0u32; n];
            win.get(&mut back, right, 0).unwrap();
            assert_eq!(back, data, "{design:?}: get of what I put");
            win.fence(Assert::NOSUCCEED, B).unwrap();
        }
    });
}

/// Accumulates from every rank to one element are atomic: the exact sum.
#[test]
fn concurrent_accumulates_are_atomic_per_element() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        for design in DESIGNS {
            let opts = RmaOptions {
                design,
                ..Default::default()
            };
            let win = RmaWindow::<i64>::with_options(ctx, 9, 8, GroupId::ALL, opts, B).unwrap();
            win.fence(Assert::NOPRECEDE, B).unwrap();
            for _ in 0..200 {
                win.accumulate(&[1, -2], 3, 2, AccumulateOp::Sum).unwrap();
            }
            win.fence(Assert::NONE, B).unwrap();
            let n = ctx.num_ranks() as i64;
            let mut got = [0i64; 2];
            win.get(&mut got, 3, 2).unwrap();
            assert_eq!(got, [200 * n, -400 * n], "{design:?}");
            // fetch_and_op: every old value distinct, the last one + 1 = total.
            let olds: Vec<i64> = (0..50)
                .map(|_| win.fetch_and_op(1, 0, 0, AccumulateOp::Sum).unwrap())
                .collect();
            assert!(olds.windows(2).all(|w| w[0] < w[1]), "{design:?}: {olds:?}");
            win.fence(Assert::NONE, B).unwrap();
            assert_eq!(
                win.fetch_and_op(0, 0, 0, AccumulateOp::NoOp).unwrap(),
                50 * n,
                "{design:?}"
            );
            win.fence(Assert::NOSUCCEED, B).unwrap();
        }
    });
}

/// Floating-point windows; bitwise operations on them are errors.
#[test]
fn float_windows_and_their_operations() {
    Job::new(&[3]).run(|ctx| {
        let win = RmaWindow::<f64>::new(ctx, 10, 4, GroupId::ALL, B).unwrap();
        win.fence(Assert::NOPRECEDE, B).unwrap();
        assert!(matches!(
            win.accumulate(&[1.0], 0, 0, AccumulateOp::Band),
            Err(Error::InvalidArgument(_))
        ));
        win.accumulate(&[0.5], 0, 0, AccumulateOp::Sum).unwrap();
        win.accumulate(&[ctx.rank() as f64], 0, 1, AccumulateOp::Max)
            .unwrap();
        win.fence(Assert::NOSUCCEED, B).unwrap();
        if ctx.rank() == 0 {
            assert_eq!(win.local().get(0), 1.5);
            assert_eq!(win.local().get(1), 2.0);
        }
    });
}

/// Calls outside an epoch, bad targets and bad ranges are errors that
/// leave the window usable.
#[test]
fn misuse_is_an_error() {
    Job::new(&[2]).ppn(1).run(|ctx| {
        for design in DESIGNS {
            let opts = RmaOptions {
                design,
                ..Default::default()
            };
            let win = RmaWindow::<u32>::with_options(ctx, 11, 4, GroupId::ALL, opts, B).unwrap();
            let outside = |r: gaspi::Result<()>| matches!(r, Err(Error::RmaSync(_)));
            assert!(outside(win.put(&[1], 1, 0)), "put before the first fence");
            assert!(outside(win.get(&mut [0], 1, 0)));
            assert!(outside(win.accumulate(&[1], 1, 0, AccumulateOp::Sum)));
            win.fence(Assert::NOPRECEDE, B).unwrap();
            // The range and the window in bytes, as the error says: 2
            // u32 at element 3 of 4.
            assert!(matches!(
                win.put(&[1, 2], 1, 3),
                Err(Error::OutOfBounds {
                    offset: 12,
                    size: 8,
                    segment_size: 16,
                    ..
                })
            ));
            assert!(matches!(
                win.put(&[1], 7, 0),
                Err(Error::InvalidRank { .. })
            ));
            assert!(matches!(
                win.compare_and_swap(1, 0, 0, 4),
                Err(Error::OutOfBounds { .. })
            ));
            win.put(&[5], 1 - ctx.rank(), 0).unwrap();
            win.fence(Assert::NOSUCCEED, B).unwrap();
            assert!(outside(win.put(&[1], 1, 0)), "put after NOSUCCEED");
            assert_eq!(win.local().get(0), 5);
        }
    });
}

/// A window over a subgroup: non-members cannot be targets.
#[test]
fn a_window_over_a_group() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        let g = ctx.group_create().unwrap();
        for r in [0, 1, 3] {
            ctx.group_add(g, r).unwrap();
        }
        if ctx.rank() == 2 {
            return;
        }
        ctx.group_commit(g, B).unwrap();
        let win = RmaWindow::<u64>::new(ctx, 12, 2, g, B).unwrap();
        win.fence(Assert::NOPRECEDE, B).unwrap();
        assert!(matches!(
            win.put(&[1], 2, 0),
            Err(Error::InvalidArgument(_))
        ));
        for t in [0, 1, 3] {
            win.accumulate(&[ctx.rank() as u64 + 1], t, 1, AccumulateOp::Sum)
                .unwrap();
        }
        win.fence(Assert::NOSUCCEED, B).unwrap();
        assert_eq!(win.local().get(1), 1 + 2 + 4);
    });
}
