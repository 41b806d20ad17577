//! Remote atomics: exact sums under contention, a spin lock built from
//! compare_swap, alignment and bounds.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Error, Local, Remote, Timeout};

#[test]
fn fetch_add_from_every_rank_sums_exactly() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        // Across hosts every add is a round trip through the transport.
        let adds = repeats(2000, 400) as u64;
        let seg = segment(ctx, 0, 4096);
        let n = ctx.num_ranks() as u64;
        let me = ctx.rank() as u64;
        // Every rank adds to word 0 of every rank; word 8 collects old values' sum.
        let mut olds = Vec::new();
        for k in 0..adds {
            let target = ((k + me) % n) as u16;
            olds.push(
                ctx.atomic_fetch_add(Remote::new(target, 0, 0), me + 1, Timeout::Block)
                    .unwrap(),
            );
        }
        barrier(ctx);
        // Each rank received adds/n adds from each rank r of value r+1 (adds divisible by n).
        let expect = (adds / n) * (1..=n).sum::<u64>();
        assert_eq!(
            seg.atomic_u64(0)
                .unwrap()
                .load(std::sync::atomic::Ordering::SeqCst),
            expect
        );
        assert!(
            olds.iter().all(|&o| o < expect),
            "old values come before the final sum"
        );
        barrier(ctx);
    });
}

#[test]
fn compare_swap_spin_lock_protects_a_plain_counter() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        // Across hosts, where every atomic is a round trip through the
        // transport, fewer rounds of the same contention.
        let iters = repeats(300, 60) as u64;
        // Rank 0 holds the lock word (offset 0) and a non-atomic counter (offset 64).
        let seg = segment(ctx, 0, 4096);
        segment(ctx, 1, 64); // scratch for reading/writing the counter
        let scratch = ctx.segment::<u64>(1).unwrap();
        let me = ctx.rank() as u64 + 1;
        let lock = Remote::new(0, 0, 0);
        for _ in 0..iters {
            while ctx
                .atomic_compare_swap(lock, 0, me, Timeout::Block)
                .unwrap()
                != 0
            {
                std::thread::yield_now();
            }
            // Non-atomic read-modify-write of the counter under the lock.
            ctx.read(
                Local::new(1, 0),
                Remote::new(0, 0, 64),
                8,
                0,
                Timeout::Block,
            )
            .unwrap();
            ctx.wait(0, Timeout::Block).unwrap();
            scratch.set(0, scratch.get(0) + 1);
            ctx.write(
                Local::new(1, 0),
                Remote::new(0, 0, 64),
                8,
                0,
                Timeout::Block,
            )
            .unwrap();
            ctx.wait(0, Timeout::Block).unwrap();
            assert_eq!(
                ctx.atomic_compare_swap(lock, me, 0, Timeout::Block)
                    .unwrap(),
                me,
                "we held the lock"
            );
        }
        barrier(ctx);
        if ctx.rank() == 0 {
            let counter = ctx.segment::<u64>(0).unwrap().get(8);
            assert_eq!(counter, iters * ctx.num_ranks() as u64);
        }
        let _ = seg;
        barrier(ctx);
    });
}

#[test]
fn atomics_check_alignment_bounds_and_wrap() {
    Job::new(&[2]).run(|ctx| {
        segment(ctx, 0, 64);
        let (right, _) = neighbours(ctx);
        assert!(matches!(
            ctx.atomic_fetch_add(Remote::new(right, 0, 12), 1, Timeout::Block),
            Err(Error::MisalignedAtomic { offset: 12 })
        ));
        assert!(matches!(
            ctx.atomic_compare_swap(Remote::new(right, 0, 60), 0, 1, Timeout::Block),
            Err(Error::MisalignedAtomic { offset: 60 })
        ));
        assert!(matches!(
            ctx.atomic_fetch_add(Remote::new(right, 0, 64), 1, Timeout::Block),
            Err(Error::OutOfBounds {
                offset: 64,
                size: 8,
                segment_size: 64,
                ..
            })
        ));
        barrier(ctx);
        if ctx.rank() == 0 {
            let w = Remote::new(1, 0, 56);
            ctx.atomic_fetch_add(w, u64::MAX, Timeout::Block).unwrap();
            assert_eq!(
                ctx.atomic_fetch_add(w, 2, Timeout::Block).unwrap(),
                u64::MAX
            );
            assert_eq!(ctx.atomic_compare_swap(w, 1, 7, Timeout::Block).unwrap(), 1);
            assert_eq!(ctx.atomic_compare_swap(w, 1, 9, Timeout::Block).unwrap(), 7);
        }
        barrier(ctx);
        assert_eq!(ctx.atomic_max(), u64::MAX);
    });
}
