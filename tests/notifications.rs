//! Notifications: waitsome over ranges with every timeout kind, atomic
//! reset races, the whole id space.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Config, Error, Local, Notification, Remote, Timeout, WaitMode};
use std::sync::Barrier;
use std::sync::atomic::{AtomicU32, Ordering};

#[test]
fn waitsome_over_ranges_with_test_finite_and_blocking_timeouts() {
    Job::new(&[2, 4]).run(|ctx| {
        segment(ctx, 0, 4096);
        let (right, left) = neighbours(ctx);
        // Nothing is set: Test and a finite timeout both report Timeout.
        assert!(
            ctx.notify_waitsome(0, 0..65_536, Timeout::Test)
                .unwrap_err()
                .is_timeout()
        );
        assert!(
            ctx.notify_waitsome(0, 10..20, Timeout::ms(30))
                .unwrap_err()
                .is_timeout()
        );
        barrier(ctx);
        // Ids spread over the table, set by the left neighbour.
        let ids = [0u32, 63, 64, 4095, 4096, 30_000, 65_535];
        for &id in &ids {
            ctx.notify(right, 0, Notification::new(id, id + 1), 0, Timeout::Block)
                .unwrap();
        }
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx); // all notifications have arrived
        // The lowest set id of each range is returned; nothing is consumed.
        assert_eq!(ctx.notify_waitsome(0, 0..65_536, Timeout::Test).unwrap(), 0);
        assert_eq!(
            ctx.notify_waitsome(0, 1..65_536, Timeout::Test).unwrap(),
            63
        );
        assert!(
            ctx.notify_waitsome(0, 65..4095, Timeout::ms(10))
                .unwrap_err()
                .is_timeout()
        );
        assert_eq!(
            ctx.notify_waitsome(0, 4096..4097, Timeout::Block).unwrap(),
            4096
        );
        assert_eq!(
            ctx.notify_waitsome(0, 4097..65_536, Timeout::Block)
                .unwrap(),
            30_000
        );
        // Consume them in order with waitsome + reset over the full range.
        for &id in &ids {
            let got = ctx.notify_waitsome(0, 0..65_536, Timeout::Block).unwrap();
            assert_eq!(got, id);
            assert_eq!(ctx.notify_reset(0, got).unwrap(), id + 1);
            assert_eq!(
                ctx.notify_reset(0, got).unwrap(),
                0,
                "a reset notification reads 0"
            );
        }
        assert!(
            ctx.notify_waitsome(0, 0..65_536, Timeout::Test)
                .unwrap_err()
                .is_timeout()
        );
        let _ = left;
        barrier(ctx);
    });
}

#[test]
fn a_blocked_waitsome_wakes_for_a_later_notification() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        segment(ctx, 0, 64);
        let (right, left) = neighbours(ctx);
        // Round-trip tokens so that every rank blocks before its notification comes.
        for round in 0..20u32 {
            if ctx.rank() == 0 {
                ctx.notify(
                    right,
                    0,
                    Notification::new(round, round + 1),
                    0,
                    Timeout::Block,
                )
                .unwrap();
            }
            let id = ctx
                .notify_waitsome(0, round..round + 1, Timeout::Block)
                .unwrap();
            assert_eq!(ctx.notify_reset(0, id).unwrap(), round + 1);
            if ctx.rank() != 0 {
                ctx.notify(
                    right,
                    0,
                    Notification::new(round, round + 1),
                    0,
                    Timeout::Block,
                )
                .unwrap();
            }
            ctx.wait(0, Timeout::Block).unwrap();
        }
        let _ = left;
        barrier(ctx);
    });
}

#[test]
fn threads_racing_to_reset_one_notification_have_exactly_one_winner() {
    Job::new(&[2, 4]).run(|ctx| {
        const THREADS: usize = 4;
        const ROUNDS: u32 = 200;
        segment(ctx, 0, 64);
        let n = ctx.num_ranks() as u32;
        let wins = AtomicU32::new(0);
        let claimed = AtomicU32::new(u32::MAX);
        let sync = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (wins, claimed, sync) = (&wins, &claimed, &sync);
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        // One thread of the rank whose turn it is notifies every rank.
                        if t == 0 && round % n == ctx.rank() as u32 {
                            for r in 0..n as u16 {
                                ctx.notify(
                                    r,
                                    0,
                                    Notification::new(0, round + 1),
                                    0,
                                    Timeout::Block,
                                )
                                .unwrap();
                            }
                            ctx.wait(0, Timeout::Block).unwrap();
                        }
                        // Every thread races for it; losers stop once it is claimed.
                        while claimed.load(Ordering::SeqCst) != round {
                            match ctx.notify_waitsome(0, 0..1, Timeout::ms(1)) {
                                Ok(id) => {
                                    let v = ctx.notify_reset(0, id).unwrap();
                                    if v != 0 {
                                        assert_eq!(v, round + 1, "value of this round");
                                        wins.fetch_add(1, Ordering::SeqCst);
                                        claimed.store(round, Ordering::SeqCst);
                                    }
                                }
                                Err(e) => assert!(e.is_timeout(), "{e}"),
                            }
                        }
                        sync.wait();
                        if t == 0 {
                            assert_eq!(
                                wins.swap(0, Ordering::SeqCst),
                                1,
                                "round {round}: exactly one winner"
                            );
                            barrier(ctx); // every rank has consumed this round
                        }
                        sync.wait();
                    }
                });
            }
        });
    });
}

#[test]
fn many_writers_to_one_target_every_notification_is_seen_once() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        const PER_RANK: u32 = 1000;
        segment(ctx, 0, 64);
        let n = ctx.num_ranks() as u32;
        let me = ctx.rank() as u32;
        // Every rank posts PER_RANK distinct ids to rank 0, spread over the table.
        for k in 0..PER_RANK {
            let id = (k * n + me) * 7 % 65_536;
            ctx.notify(
                0,
                0,
                Notification::new(id, me + 1),
                (k % 8) as u8,
                Timeout::Block,
            )
            .unwrap();
            if k % 8 == 7 {
                for q in 0..8 {
                    ctx.wait(q, Timeout::Block).unwrap();
                }
            }
        }
        if me == 0 {
            let mut seen = vec![0u32; 65_536];
            for _ in 0..PER_RANK * n {
                let id = ctx.notify_waitsome(0, 0..65_536, Timeout::Block).unwrap();
                let v = ctx.notify_reset(0, id).unwrap();
                assert!(v >= 1 && v <= n, "value {v} at id {id}");
                seen[id as usize] += 1;
            }
            for r in 0..n {
                for k in 0..PER_RANK {
                    let id = (k * n + r) * 7 % 65_536;
                    assert_eq!(seen[id as usize], 1, "id {id} of rank {r}");
                }
            }
            assert!(
                ctx.notify_waitsome(0, 0..65_536, Timeout::Test)
                    .unwrap_err()
                    .is_timeout()
            );
        }
        barrier(ctx);
    });
}

#[test]
fn notification_count_is_configurable() {
    let cfg = Config {
        notification_num: 100,
        ..Default::default()
    };
    Job::new(&[2]).config(cfg).run(|ctx| {
        assert_eq!(ctx.notification_num(), 100);
        segment(ctx, 0, 64);
        let (right, _) = neighbours(ctx);
        ctx.notify(right, 0, Notification::new(99, 1), 0, Timeout::Block)
            .unwrap();
        assert!(matches!(
            ctx.notify(right, 0, Notification::new(100, 1), 0, Timeout::Block),
            Err(Error::InvalidNotificationId { id: 100, num: 100 })
        ));
        assert!(matches!(
            ctx.notify_waitsome(0, 0..101, Timeout::Test),
            Err(Error::InvalidNotificationId { id: 100, num: 100 })
        ));
        assert_eq!(ctx.notify_waitsome(0, 99..100, Timeout::Block).unwrap(), 99);
        ctx.write_notify(
            Local::new(0, 0),
            Remote::new(right, 0, 8),
            8,
            Notification::new(5, 2),
            0,
            Timeout::Block,
        )
        .unwrap();
        barrier(ctx);
    });
}

#[test]
fn waiters_that_sleep_or_yield_are_woken_for_every_notified_write() {
    // A token passed around the ring, each hop a notified write of the
    // holder's block (small and large: under the GPI-2 engine a large one
    // arrives over the TCP device in many pieces), while every other rank
    // waits: with `Block`, asleep in the kernel from the start, so that
    // only a wake-up (the writer's on one host, the relay thread's from
    // another host) ends the wait.
    const LAPS: u64 = 40;
    const BIG: usize = 256 * 1024;
    for mode in [WaitMode::Block, WaitMode::Yield] {
        let cfg = Config {
            wait_mode: mode,
            ..Default::default()
        };
        Job::new(&[2, 4]).config(cfg).run(|ctx| {
            let view = segment(ctx, 0, 2 * BIG);
            let (right, left) = neighbours(ctx);
            let (me, n) = (ctx.rank() as u64, ctx.num_ranks() as u64);
            barrier(ctx);
            let len = |lap: u64| if lap % 2 == 0 { 8 } else { BIG };
            // Wait for hop `hop` (rank `left`'s write of lap `lap`), check it.
            let take = |hop: u64, lap: u64| {
                let id = ctx.notify_waitsome(0, 0..1, Timeout::Block).unwrap();
                assert_eq!(id, 0);
                let got = u64::from(ctx.notify_reset(0, 0).unwrap());
                assert_eq!(got, hop, "{mode:?}: hop from rank {left}");
                check(&view, BIG, len(lap), hop, &format!("{mode:?} hop {hop}"));
            };
            for lap in 0..LAPS {
                // Hop `lap * n + me` comes from the left: in this lap,
                // or for rank 0 from the last rank's previous lap.
                match (me, lap) {
                    (0, 0) => {}
                    (0, _) => take(lap * n, lap - 1),
                    _ => take(lap * n + me, lap),
                }
                let hop = lap * n + me + 1;
                let len = len(lap);
                fill(&view, 0, len, hop);
                let value = u32::try_from(hop).unwrap();
                ctx.write_notify(
                    Local::new(0, 0),
                    Remote::new(right, 0, BIG),
                    len,
                    Notification::new(0, value),
                    0,
                    Timeout::Block,
                )
                .unwrap();
                ctx.wait(0, Timeout::Block).unwrap();
            }
            // Rank 0 takes the last hop home.
            if me == 0 {
                take(LAPS * n, LAPS - 1);
            }
            barrier(ctx);
        });
    }
}

/// A rank that deleted its own segment still notifies the others' segment
/// of the same id: a notification needs no local segment (GPI-2's
/// tests/notifications/notify_after_delete.c). Rank 0 deletes segment 0
/// and sends every id (every 64th where tests are trimmed) to each other
/// rank, value = the target's rank, waiting on its queue whenever it
/// fills; each target claims exactly those, each with its own value.
#[test]
fn a_rank_without_the_segment_still_notifies_the_others() {
    Job::new(&[3]).run(|ctx| {
        let num = ctx.notification_num();
        let step = repeats(1, 64) as u32;
        let ids: Vec<u32> = (0..num).step_by(step as usize).collect();
        segment(ctx, 0, 1024);
        barrier(ctx);
        if ctx.rank() == 0 {
            ctx.segment_delete(0).unwrap();
            let room = ctx.queue_size_max();
            for &id in &ids {
                for r in 1..ctx.num_ranks() {
                    if ctx.queue_size(0).unwrap() >= room {
                        ctx.wait(0, Timeout::Block).unwrap();
                    }
                    ctx.notify(r, 0, Notification::new(id, r as u32), 0, Timeout::Block)
                        .unwrap();
                }
            }
            ctx.wait(0, Timeout::Block).unwrap();
        } else {
            let mut seen = vec![false; num as usize];
            for _ in 0..ids.len() {
                let id = ctx.notify_waitsome(0, 0..num, Timeout::Block).unwrap();
                assert_eq!(ctx.notify_reset(0, id).unwrap(), ctx.rank() as u32);
                assert!(
                    id % step == 0 && !seen[id as usize],
                    "id {id} unexpected or twice"
                );
                seen[id as usize] = true;
            }
        }
        barrier(ctx);
    });
}

/// Waiting for zero notifications returns at once, as the GASPI standard
/// says of `gaspi_notify_waitsome` with `num == 0` (GPI-2's
/// tests/notifications/not_zero_wait.c): each rank notifies itself, sees
/// it, then waits on empty ranges (at the start, at its own set id, at the
/// table's end) with `Timeout::Block`; none blocks, none takes the
/// notification, and the segment goes afterwards.
#[test]
fn waiting_for_zero_notifications_returns_at_once() {
    Job::new(&[2]).run(|ctx| {
        let r = ctx.rank() as u32;
        let num = ctx.notification_num();
        segment(ctx, 0, 1);
        ctx.notify(ctx.rank(), 0, Notification::new(r, 1), 0, Timeout::Block)
            .unwrap();
        assert_eq!(ctx.notify_waitsome(0, r..r + 1, Timeout::Block).unwrap(), r);
        for empty in [0..0, r..r, num..num] {
            let at = empty.start;
            assert_eq!(ctx.notify_waitsome(0, empty, Timeout::Block).unwrap(), at);
        }
        assert_eq!(
            ctx.notify_reset(0, r).unwrap(),
            1,
            "the set notification stays"
        );
        ctx.segment_delete(0).unwrap();
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
    });
}

/// GPI-2's `notify_null` and `notify_all` tests: one rank notifies every
/// id of every other rank's table in a run (no data, waiting for its queue
/// only when it is full), with a value per id; each target takes every id
/// once with its value. Then runs that the origin never waits for: rank 0
/// notifies ids in a run and waits for the target's answer, which comes
/// only once every one of them arrived; a notified write after a run
/// delivers its data before its notification.
#[test]
fn a_reset_takes_every_notification_of_its_id_that_arrived_before_it() {
    // GPI-2's notify_all, then the cleanup a program does between phases:
    // every rank notifies every rank on each id; each rank takes some,
    // and after a barrier resets every id. Nothing may come back after
    // the reset: notifications completed before a barrier have arrived
    // after it (on the MPI engine a notification from another host waits
    // in the transport until moved into the table: a reset that looked
    // at the table alone left it to appear later).
    let cfg = Config {
        notification_num: 512,
        ..Default::default()
    };
    Job::new(&job_sizes(&[2, 3, 4])).config(cfg).run(|ctx| {
        let _seg = segment(ctx, 0, 64);
        let (me, n) = (ctx.rank(), ctx.num_ranks());
        let num = ctx.notification_num();
        for round in 1..=3u32 {
            for id in 0..num {
                for to in 0..n {
                    if ctx.queue_size(0).unwrap() >= ctx.queue_size_max() {
                        ctx.wait(0, Timeout::Block).unwrap();
                    }
                    let v = Notification::new(id, round * 100 + to as u32 + 1);
                    ctx.notify(to, 0, v, 0, Timeout::Block).unwrap();
                }
            }
            // Take as many as there are ids; more may have come meanwhile.
            for _ in 0..num {
                let id = ctx.notify_waitsome(0, 0..num, Timeout::Block).unwrap();
                let v = ctx.notify_reset(0, id).unwrap();
                assert_eq!(v, round * 100 + me as u32 + 1);
            }
            ctx.wait(0, Timeout::Block).unwrap();
            barrier(ctx);
            for id in 0..num {
                ctx.notify_reset(0, id).unwrap();
            }
            barrier(ctx);
            let left = ctx.notify_waitsome(0, 0..num, Timeout::ms(100));
            assert!(
                matches!(left, Err(Error::Timeout)),
                "round {round}: {left:?} after every id was reset"
            );
            barrier(ctx);
        }
    });
}

#[test]
fn runs_of_notifications_arrive_every_one_with_its_value() {
    // Across hosts every notification is an MPI or GPI-2 message: a
    // smaller table there.
    let cfg = Config {
        notification_num: repeats(65_536, 4096) as u32,
        ..Default::default()
    };
    Job::new(&job_sizes(&[2, 3, 4])).config(cfg).run(|ctx| {
        let view = segment(ctx, 0, 4096);
        let (me, n) = (ctx.rank(), ctx.num_ranks());
        let num = ctx.notification_num();
        let value = |id: u32, to: u16| (id * 3 + to as u32) % 1000 + 1;
        if me == 0 {
            let qmax = ctx.queue_size_max();
            for id in 0..num {
                for to in 1..n {
                    if ctx.queue_size(0).unwrap() >= qmax {
                        ctx.wait(0, Timeout::Block).unwrap();
                    }
                    let v = Notification::new(id, value(id, to));
                    ctx.notify(to, 0, v, 0, Timeout::Block).unwrap();
                }
            }
        } else {
            let mut seen = vec![false; num as usize];
            for _ in 0..num {
                let id = ctx.notify_waitsome(0, 0..num, Timeout::Block).unwrap();
                assert!(!seen[id as usize], "id {id} twice");
                seen[id as usize] = true;
                assert_eq!(ctx.notify_reset(0, id).unwrap(), value(id, me), "id {id}");
            }
        }
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);

        // Runs the origin does not wait for, then a notified write.
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        for round in 0..repeats(50, 10) as u32 {
            // 1 to 66 ids: runs longer than the MPI engine parks (64) too.
            let len = 1 + round * 13 % 70;
            for id in 0..len {
                ctx.notify(
                    right,
                    0,
                    Notification::new(id, round + 1),
                    1,
                    Timeout::Block,
                )
                .unwrap();
            }
            // Every id of the left neighbour's run, before the answer.
            for id in 0..len {
                let got = ctx.notify_waitsome(0, id..id + 1, Timeout::Block).unwrap();
                assert_eq!(ctx.notify_reset(0, got).unwrap(), round + 1);
            }
            fill(&view, 1024, 512, round as u64 * 64 + me as u64);
            ctx.write_notify(
                Local::new(0, 1024),
                Remote::new(right, 0, 2048),
                512,
                Notification::new(num - 1, round + 1),
                1,
                Timeout::Block,
            )
            .unwrap();
            let id = ctx
                .notify_waitsome(0, num - 1..num, Timeout::Block)
                .unwrap();
            assert_eq!(ctx.notify_reset(0, id).unwrap(), round + 1);
            check(
                &view,
                2048,
                512,
                round as u64 * 64 + left as u64,
                "data of a notified write after a run",
            );
            // The next round's fill of 1024.. may not overwrite what the
            // write is still reading (queue 1 is waited only now).
            ctx.wait(1, Timeout::Block).unwrap();
            barrier(ctx);
        }
    });
}
