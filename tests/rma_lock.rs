//! Passive-target synchronisation of the RMA window (Hatanaka et al. 2015): exclusive
//! locks exclude everyone, shared locks overlap, lock_all works as a
//! shared lock on every member, in both lock designs and across emulated
//! nodes; timeouts leave the request resumable; misuse is an error.

use gaspi::testing::Job;
use gaspi::{
    AccumulateOp, Assert, Context, Error, GroupId, LockDesign, LockType, Rank, RmaOptions,
    RmaWindow, Timeout,
};
use std::time::{Duration, Instant};

const B: Timeout = Timeout::Block;
const DESIGNS: [LockDesign; 2] = [LockDesign::McsRw, LockDesign::TwoLevel];

fn window<'a>(ctx: &'a Context, seg: u8, len: usize, lock: LockDesign) -> RmaWindow<'a, u64> {
    let opts = RmaOptions {
        lock,
        ..Default::default()
    };
    RmaWindow::with_options(ctx, seg, len, GroupId::ALL, opts, B).unwrap()
}

/// Word 0 of each target: who is inside (readers count 1, a writer 1 <<
/// 32); word 1: a counter that only writers change, by get + put (not
/// atomic: exact only under mutual exclusion); word 2: exclusive sections
/// counted by an accumulate, for reference.
const WRITER: u64 = 1 << 32;

/// Random mixes of shared, exclusive and lock_all sections on random
/// targets: a writer never meets anyone inside, a reader never meets a
/// writer, and the writers' non-atomic counters are exact.
#[test]
fn locks_exclude_and_share_as_mpi_says_in_both_designs() {
    for (n, ppn) in gaspi::testing::layouts(&[(4, 4), (8, 2), (5, 5), (6, 3)]) {
        Job::new(&[n]).ppn(ppn).run(|ctx| {
            for design in DESIGNS {
                let win = window(ctx, 1, 4, design);
                let me = ctx.rank() as u64;
                let n = ctx.num_ranks();
                let mut rng = 0x1234_5678_u64.wrapping_add(me * 0x9E37_79B9);
                let mut next = |m: u64| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng % m
                };
                let mut mine = vec![0u64; n as usize];
                for _ in 0..60 {
                    match next(8) {
                        0 => {
                            win.lock_all(Assert::NONE, B).unwrap();
                            for t in 0..n {
                                let old = win.fetch_and_op(1, t, 0, AccumulateOp::Sum).unwrap();
                                assert_eq!(old & !(WRITER - 1), 0, "{design:?}: writer in {t}");
                            }
                            for t in 0..n {
                                win.accumulate(&[1u64.wrapping_neg()], t, 0, AccumulateOp::Sum)
                                    .unwrap();
                            }
                            win.unlock_all().unwrap();
                        }
                        k => {
                            let t = next(n as u64) as Rank;
                            let kind = if k < 4 {
                                LockType::Exclusive
                            } else {
                                LockType::Shared
                            };
                            win.lock(kind, t, Assert::NONE, B).unwrap();
                            let inc = if kind == LockType::Exclusive {
                                WRITER
                            } else {
                                1
                            };
                            let old = win.fetch_and_op(inc, t, 0, AccumulateOp::Sum).unwrap();
                            if kind == LockType::Exclusive {
                                assert_eq!(old, 0, "{design:?}: writer met someone in {t}");
                                let mut c = [0u64];
                                win.get(&mut c, t, 1).unwrap();
                                win.put(&[c[0] + 1], t, 1).unwrap();
                                win.accumulate(&[1], t, 2, AccumulateOp::Sum).unwrap();
                                mine[t as usize] += 1;
                            } else {
                                assert_eq!(
                                    old & !(WRITER - 1),
                                    0,
                                    "{design:?}: reader met a writer in {t}"
                                );
                            }
                            win.accumulate(&[inc.wrapping_neg()], t, 0, AccumulateOp::Sum)
                                .unwrap();
                            win.unlock(t).unwrap();
                        }
                    }
                }
                // Everyone's counts of exclusive sections per target.
                let mut total = vec![0u64; n as usize];
                ctx.allreduce(&mine, &mut total, gaspi::ReduceOp::Sum, GroupId::ALL, B)
                    .unwrap();
                win.fence(Assert::NOPRECEDE, B).unwrap();
                let word = win.local();
                assert_eq!(word.get(0), 0, "{design:?}: someone still inside");
                assert_eq!(
                    word.get(1),
                    total[ctx.rank() as usize],
                    "{design:?}: lost update"
                );
                assert_eq!(word.get(2), total[ctx.rank() as usize], "{design:?}");
                win.fence(Assert::NOSUCCEED, B).unwrap();
            }
        });
    }
}

/// The exclusive counter of the issue: 8 ranks increment one counter by
/// get + put under an exclusive lock; the result is exact.
#[test]
fn exclusive_lock_makes_read_modify_write_exact() {
    Job::new(&[8]).ppn(4).run(|ctx| {
        for design in DESIGNS {
            let win = window(ctx, 2, 1, design);
            for _ in 0..100 {
                win.lock(LockType::Exclusive, 5, Assert::NONE, B).unwrap();
                let mut c = [0u64];
                win.get(&mut c, 5, 0).unwrap();
                win.put(&[c[0] + 1], 5, 0).unwrap();
                win.unlock(5).unwrap();
            }
            ctx.barrier(GroupId::ALL, B).unwrap();
            if ctx.rank() == 5 {
                assert_eq!(win.local().get(0), 800, "{design:?}");
            }
            ctx.barrier(GroupId::ALL, B).unwrap();
        }
    });
}

/// Wait (failing after a minute) until `cond` holds.
fn await_true(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::yield_now();
    }
}

/// Shared locks overlap: every rank is inside a shared lock on rank 0 at
/// the same time (each waits inside until all are). Then a writer that
/// asks while they are inside gets the lock once they left, and readers
/// that come while it holds the lock wait for it.
#[test]
fn shared_locks_overlap_and_a_waiting_writer_gets_its_turn() {
    for ppn in [3, 1] {
        Job::new(&[3]).ppn(ppn).run(|ctx| {
            for design in DESIGNS {
                let win = window(ctx, 3, 4, design);
                let n = ctx.num_ranks() as u64;
                win.lock(LockType::Shared, 0, Assert::NONE, B).unwrap();
                win.accumulate(&[1], 0, 0, AccumulateOp::Sum).unwrap();
                await_true("all readers inside at once", || {
                    win.fetch_and_op(0, 0, 0, AccumulateOp::NoOp).unwrap() == n
                });
                win.unlock(0).unwrap();
                ctx.barrier(GroupId::ALL, B).unwrap();

                // Rank 1 and 2 read; rank 0 asks for the exclusive lock
                // while they are in (word 1 counts readers in, word 2 is
                // the writer's mark).
                if ctx.rank() != 0 {
                    win.lock(LockType::Shared, 0, Assert::NONE, B).unwrap();
                    win.accumulate(&[1], 0, 1, AccumulateOp::Sum).unwrap();
                }
                ctx.barrier(GroupId::ALL, B).unwrap();
                if ctx.rank() == 0 {
                    // Not granted while the readers are in.
                    assert!(matches!(
                        win.lock(LockType::Exclusive, 0, Assert::NONE, Timeout::ms(50)),
                        Err(Error::Timeout)
                    ));
                }
                ctx.barrier(GroupId::ALL, B).unwrap();
                if ctx.rank() != 0 {
                    win.accumulate(&[1u64.wrapping_neg()], 0, 1, AccumulateOp::Sum)
                        .unwrap();
                    win.unlock(0).unwrap();
                } else {
                    // The same request goes on waiting and is granted.
                    win.lock(LockType::Exclusive, 0, Assert::NONE, B).unwrap();
                    assert_eq!(win.fetch_and_op(0, 0, 1, AccumulateOp::NoOp).unwrap(), 0);
                    win.put(&[7], 0, 2).unwrap();
                }
                ctx.barrier(GroupId::ALL, B).unwrap();
                if ctx.rank() != 0 {
                    // Rank 0 still holds it: a reader times out, then waits.
                    assert!(matches!(
                        win.lock(LockType::Shared, 0, Assert::NONE, Timeout::ms(50)),
                        Err(Error::Timeout)
                    ));
                }
                ctx.barrier(GroupId::ALL, B).unwrap();
                if ctx.rank() == 0 {
                    win.put(&[0], 0, 0).unwrap();
                    win.unlock(0).unwrap();
                } else {
                    win.lock(LockType::Shared, 0, Assert::NONE, B).unwrap();
                    let mut v = [0u64; 3];
                    win.get(&mut v, 0, 0).unwrap();
                    assert_eq!(v, [0, 0, 7], "{design:?}: the writer's epoch is complete");
                    win.unlock(0).unwrap();
                }
                ctx.barrier(GroupId::ALL, B).unwrap();
            }
        });
    }
}

/// A request for the two-level global word (exclusive against lock_all)
/// also times out cleanly and resumes.
#[test]
fn exclusive_waits_for_lock_all_holders() {
    Job::new(&[2]).ppn(1).run(|ctx| {
        for design in DESIGNS {
            let win = window(ctx, 4, 2, design);
            if ctx.rank() == 0 {
                win.lock_all(Assert::NONE, B).unwrap();
            }
            ctx.barrier(GroupId::ALL, B).unwrap();
            if ctx.rank() == 1 {
                assert!(matches!(
                    win.lock(LockType::Exclusive, 1, Assert::NONE, Timeout::ms(30)),
                    Err(Error::Timeout)
                ));
                // Another request while that one is pending is refused.
                assert!(matches!(
                    win.lock(LockType::Shared, 0, Assert::NONE, B),
                    Err(Error::RmaSync(_))
                ));
            }
            ctx.barrier(GroupId::ALL, B).unwrap();
            if ctx.rank() == 0 {
                win.put(&[3], 1, 0).unwrap();
                win.unlock_all().unwrap();
            } else {
                win.lock(LockType::Exclusive, 1, Assert::NONE, B).unwrap();
                assert_eq!(win.local().get(0), 3, "{design:?}");
                win.unlock(1).unwrap();
            }
            ctx.barrier(GroupId::ALL, B).unwrap();
        }
    });
}

/// Hatanaka et al. 2015's figure 5: a stencil inside one lock_all epoch, halos read
/// with get + flush_all, iterations separated by barriers.
#[test]
fn lock_all_stencil_with_flush_all() {
    for (n, ppn) in [(4, 2), (3, 3), (5, 1)] {
        Job::new(&[n]).ppn(ppn).run(|ctx| {
            for design in DESIGNS {
                let win = window(ctx, 5, 16, design);
                let n = ctx.num_ranks();
                let (left, right) = ((ctx.rank() + n - 1) % n, (ctx.rank() + 1) % n);
                win.lock_all(Assert::NONE, B).unwrap();
                for it in 0..50u64 {
                    let own: Vec<u64> = (0..16)
                        .map(|i| it * 1000 + ctx.rank() as u64 * 16 + i)
                        .collect();
                    win.local().copy_from_slice(0, &own);
                    win.sync();
                    ctx.barrier(GroupId::ALL, B).unwrap();
                    let (mut l, mut r) = ([0u64; 2], [0u64; 2]);
                    win.get(&mut l, left, 14).unwrap();
                    win.get(&mut r, right, 0).unwrap();
                    win.flush_all().unwrap();
                    let base = |rank: Rank| it * 1000 + rank as u64 * 16;
                    assert_eq!(l, [base(left) + 14, base(left) + 15], "{design:?}");
                    assert_eq!(r, [base(right), base(right) + 1], "{design:?}");
                    ctx.barrier(GroupId::ALL, B).unwrap();
                }
                // Puts to the right, flushed, then seen after a barrier.
                win.put(&[ctx.rank() as u64], right, 15).unwrap();
                win.flush(right).unwrap();
                ctx.barrier(GroupId::ALL, B).unwrap();
                assert_eq!(win.local().get(15), left as u64, "{design:?}");
                win.unlock_all().unwrap();
                ctx.barrier(GroupId::ALL, B).unwrap();
            }
        });
    }
}

/// NOCHECK skips the protocol; MPI's rules on mixing epochs are enforced
/// with clear errors that leave the window usable.
#[test]
fn nocheck_and_misuse() {
    Job::new(&[2]).ppn(1).run(|ctx| {
        for design in DESIGNS {
            let win = window(ctx, 6, 2, design);
            let other = 1 - ctx.rank();
            let sync = |r: gaspi::Result<()>| matches!(r, Err(Error::RmaSync(_)));
            assert!(sync(win.unlock(other)), "unlock without lock");
            assert!(sync(win.unlock_all()));
            assert!(sync(win.flush(other)));
            assert!(sync(win.flush_all()));
            assert!(matches!(
                win.lock(LockType::Shared, 9, Assert::NONE, B),
                Err(Error::InvalidRank { .. })
            ));

            win.lock(LockType::Shared, other, Assert::NONE, B).unwrap();
            assert!(
                sync(win.lock(LockType::Shared, other, Assert::NONE, B)),
                "twice"
            );
            assert!(sync(win.lock_all(Assert::NONE, B)), "lock_all inside lock");
            assert!(
                sync(win.put(&[1], ctx.rank(), 0)),
                "put to an unlocked target"
            );
            assert!(
                sync(win.fence(Assert::NONE, B)),
                "fence inside a lock epoch"
            );
            if design == LockDesign::McsRw {
                assert!(sync(win.lock(
                    LockType::Exclusive,
                    ctx.rank(),
                    Assert::NONE,
                    B
                )));
            }
            win.unlock(other).unwrap();

            // NOCHECK on both sides: no protocol, data still moves.
            win.lock(LockType::Exclusive, other, Assert::NOCHECK, B)
                .unwrap();
            win.put(&[10 + ctx.rank() as u64], other, 1).unwrap();
            win.unlock(other).unwrap();
            win.lock_all(Assert::NOCHECK, B).unwrap();
            win.unlock_all().unwrap();
            ctx.barrier(GroupId::ALL, B).unwrap();
            assert_eq!(win.local().get(1), 10 + other as u64);

            // A fence epoch with operations cannot hold a lock; an unused one can.
            win.fence(Assert::NOPRECEDE, B).unwrap();
            win.lock(LockType::Shared, other, Assert::NONE, B).unwrap();
            win.unlock(other).unwrap();
            win.put(&[1], other, 0).unwrap();
            assert!(sync(win.lock(LockType::Shared, other, Assert::NONE, B)));
            win.fence(Assert::NOSUCCEED, B).unwrap();
            assert!(sync(win.put(&[1], other, 0)), "no epoch");
            assert_eq!(win.local().get(0), 1);
        }
    });
}
