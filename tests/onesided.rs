//! One-sided communication on queues: write, read, the notified and list
//! forms, notify, queue depth. Every test runs real jobs and checks data.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Config, Error, ListEntry, Local, Notification, Remote, Timeout};

const SIZES: [usize; 8] = [1, 7, 64, 4095, 65_537, 1 << 20, 3 << 20, 16 << 20];

#[test]
fn write_notify_payload_is_complete_when_the_notification_is_seen() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        let seg = segment(ctx, 0, 2 * (16 << 20));
        let (right, left) = neighbours(ctx);
        let me = ctx.rank() as u64;
        let half = 16 << 20;
        for (round, &size) in SIZES.iter().enumerate() {
            // Source in the first half, destination in the second.
            fill(&seg, 0, size, me * 100 + round as u64);
            ctx.write_notify(
                Local::new(0, 0),
                Remote::new(right, 0, half),
                size,
                Notification::new(round as u32, size as u32),
                0,
                Timeout::Block,
            )
            .unwrap();
            let id = ctx
                .notify_waitsome(0, round as u32..round as u32 + 1, Timeout::Block)
                .unwrap();
            assert_eq!(ctx.notify_reset(0, id).unwrap(), size as u32);
            check(
                &seg,
                half,
                size,
                left as u64 * 100 + round as u64,
                "payload seen with its notification",
            );
            ctx.wait(0, Timeout::Block).unwrap();
            barrier(ctx); // the next round overwrites the source and destination
        }
    });
}

#[test]
fn write_then_read_back_all_to_all() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        let n = ctx.num_ranks() as usize;
        let block = 4096 + 17;
        let seg = segment(ctx, 1, block * (n + 1));
        let me = ctx.rank() as usize;
        // Rank r writes block [r] of every rank from its own block [n].
        fill(&seg, block * n, block, me as u64);
        for t in 0..n as u16 {
            ctx.write(
                Local::new(1, block * n),
                Remote::new(t, 1, block * me),
                block,
                0,
                Timeout::Block,
            )
            .unwrap();
        }
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
        for r in 0..n {
            check(&seg, block * r, block, r as u64, "block written by a peer");
        }
        // Read block [me] of the right neighbour (written by me) into [me].
        let (right, _) = neighbours(ctx);
        seg.copy_from_slice(block * me, &vec![0; block]);
        ctx.read(
            Local::new(1, block * me),
            Remote::new(right, 1, block * me),
            block,
            3,
            Timeout::Block,
        )
        .unwrap();
        ctx.wait(3, Timeout::Block).unwrap();
        check(&seg, block * me, block, me as u64, "block read back");
        barrier(ctx);
    });
}

#[test]
fn read_notify_sets_a_local_notification_after_the_data() {
    Job::new(&[2, 4]).run(|ctx| {
        let seg = segment(ctx, 0, 2 << 20);
        let (right, _) = neighbours(ctx);
        fill(&seg, 0, 1 << 20, ctx.rank() as u64);
        barrier(ctx);
        ctx.read_notify(
            Local::new(0, 1 << 20),
            Remote::new(right, 0, 0),
            1 << 20,
            77,
            1,
            Timeout::Block,
        )
        .unwrap();
        assert_eq!(ctx.notify_waitsome(0, 0..100, Timeout::Block).unwrap(), 77);
        assert_eq!(ctx.notify_reset(0, 77).unwrap(), 1);
        check(&seg, 1 << 20, 1 << 20, right as u64, "read_notify data");
        ctx.wait(1, Timeout::Block).unwrap();
        barrier(ctx);
    });
}

#[test]
fn write_list_notify_delivers_every_element_before_the_notification() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        // Segment 0 holds the sources, segment 1 receives, segment 2 only
        // carries the notification.
        let src = segment(ctx, 0, 64 * 1024);
        let dst = segment(ctx, 1, 64 * 1024);
        segment(ctx, 2, 64);
        let (right, left) = neighbours(ctx);
        let me = ctx.rank() as u64;
        let sizes = [1usize, 100, 4096, 333, 8000];
        let mut entries = Vec::new();
        let (mut loff, mut roff) = (0, 0);
        for (k, &s) in sizes.iter().enumerate() {
            fill(&src, loff, s, me * 10 + k as u64);
            // Scatter in reverse order on the remote side.
            roff += 50;
            entries.push(ListEntry::new(Local::new(0, loff), 1, 60_000 - roff - s, s));
            loff += s;
            roff += s;
        }
        ctx.write_list_notify(
            right,
            &entries,
            2,
            Notification::new(9, 5),
            0,
            Timeout::Block,
        )
        .unwrap();
        assert_eq!(ctx.queue_size(0).unwrap(), sizes.len() as u32 + 1);
        assert_eq!(ctx.notify_waitsome(2, 0..64, Timeout::Block).unwrap(), 9);
        assert_eq!(ctx.notify_reset(2, 9).unwrap(), 5);
        let mut roff = 0;
        for (k, &s) in sizes.iter().enumerate() {
            roff += 50;
            check(
                &dst,
                60_000 - roff - s,
                s,
                left as u64 * 10 + k as u64,
                "list element",
            );
            roff += s;
        }
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
    });
}

#[test]
fn write_list_read_list_and_read_list_notify_round_trip() {
    Job::new(&[2, 4]).run(|ctx| {
        let seg = segment(ctx, 0, 1 << 16);
        let (right, _) = neighbours(ctx);
        let me = ctx.rank() as u64;
        let entries: Vec<ListEntry> = (0..16)
            .map(|k| ListEntry::new(Local::new(0, k * 1000), 0, 32_768 + k * 1000, 999))
            .collect();
        for k in 0..16 {
            fill(&seg, k * 1000, 999, me * 100 + k as u64);
        }
        ctx.write_list(right, &entries, 2, Timeout::Block).unwrap();
        ctx.wait(2, Timeout::Block).unwrap();
        barrier(ctx);
        // Read my elements back from the right neighbour into the low half.
        seg.copy_from_slice(0, &[0; 16_000]);
        ctx.read_list(right, &entries, 2, Timeout::Block).unwrap();
        ctx.wait(2, Timeout::Block).unwrap(); // reads complete at the wait
        for k in 0..16 {
            check(
                &seg,
                k * 1000,
                999,
                me * 100 + k as u64,
                "read_list element",
            );
        }
        seg.copy_from_slice(0, &[0; 16_000]);
        ctx.read_list_notify(right, &entries, 0, 1234, 2, Timeout::Block)
            .unwrap();
        assert_eq!(
            ctx.notify_waitsome(0, 1000..2000, Timeout::Block).unwrap(),
            1234
        );
        assert_eq!(ctx.notify_reset(0, 1234).unwrap(), 1);
        for k in 0..16 {
            check(
                &seg,
                k * 1000,
                999,
                me * 100 + k as u64,
                "read_list_notify element",
            );
        }
        ctx.wait(2, Timeout::Block).unwrap();
        barrier(ctx);
    });
}

#[test]
fn notify_alone_and_zero_sized_transfers() {
    Job::new(&[2, 4]).run(|ctx| {
        let seg = segment(ctx, 0, 4096);
        let (right, left) = neighbours(ctx);
        // A zero-sized write_notify at the very end of the segment is a notification.
        ctx.write_notify(
            Local::new(0, 4096),
            Remote::new(right, 0, 4096),
            0,
            Notification::new(1, 11),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.notify(
            right,
            0,
            Notification::new(2, ctx.rank() as u32 + 100),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.write(
            Local::new(0, 0),
            Remote::new(right, 0, 0),
            0,
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.read(
            Local::new(0, 0),
            Remote::new(right, 0, 0),
            0,
            0,
            Timeout::Block,
        )
        .unwrap();
        for (id, want) in [(1u32, 11u32), (2, left as u32 + 100)] {
            assert_eq!(
                ctx.notify_waitsome(0, id..id + 1, Timeout::Block).unwrap(),
                id
            );
            assert_eq!(ctx.notify_reset(0, id).unwrap(), want);
        }
        assert!(seg.to_vec().iter().all(|&b| b == 0));
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
    });
}

#[test]
fn queue_full_then_wait_then_reuse() {
    let cfg = Config {
        queue_size_max: 16,
        queue_num: 2,
        ..Default::default()
    };
    Job::new(&[2]).config(cfg).run(|ctx| {
        let seg = segment(ctx, 0, 4096);
        let (right, _) = neighbours(ctx);
        let w = |q| {
            ctx.write(
                Local::new(0, 0),
                Remote::new(right, 0, 64),
                8,
                q,
                Timeout::Block,
            )
        };
        for _ in 0..16 {
            w(1).unwrap();
        }
        assert_eq!(ctx.queue_size(1).unwrap(), 16);
        match w(1) {
            Err(Error::QueueFull {
                queue: 1,
                posted: 16,
                max: 16,
            }) => {}
            other => panic!("expected QueueFull, got {other:?}"),
        }
        // Other queues are independent.
        w(0).unwrap();
        ctx.wait(1, Timeout::Block).unwrap();
        assert_eq!(ctx.queue_size(1).unwrap(), 0);
        // write_notify takes two entries: 15 + 2 does not fit, 14 + 2 does.
        for _ in 0..15 {
            w(1).unwrap();
        }
        let wn = || {
            ctx.write_notify(
                Local::new(0, 0),
                Remote::new(right, 0, 64),
                8,
                Notification::new(0, 1),
                1,
                Timeout::Block,
            )
        };
        assert!(matches!(wn(), Err(Error::QueueFull { .. })));
        ctx.wait(1, Timeout::Block).unwrap();
        for _ in 0..14 {
            w(1).unwrap();
        }
        wn().unwrap();
        assert_eq!(ctx.queue_size(1).unwrap(), 16);
        // Purging empties the queue too.
        ctx.queue_purge(1, Timeout::Block).unwrap();
        assert_eq!(ctx.queue_size(1).unwrap(), 0);
        // A list that does not fit posts nothing.
        w(1).unwrap();
        let list: Vec<ListEntry> = (0..16)
            .map(|k| ListEntry::new(Local::new(0, k), 0, 100 + k, 1))
            .collect();
        assert!(matches!(
            ctx.write_list(right, &list, 1, Timeout::Block),
            Err(Error::QueueFull { .. })
        ));
        assert_eq!(ctx.queue_size(1).unwrap(), 1);
        ctx.wait(1, Timeout::Block).unwrap();
        ctx.write_list(right, &list, 1, Timeout::Block).unwrap();
        ctx.wait(1, Timeout::Block).unwrap();
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
        let _ = seg;
    });
}

#[test]
fn queues_are_created_and_deleted() {
    let cfg = Config {
        queue_num: 2,
        ..Default::default()
    };
    Job::new(&[2]).config(cfg).run(|ctx| {
        segment(ctx, 0, 4096);
        assert_eq!(ctx.queue_num(), 2);
        // GPI-2's last two queues are the runtime's.
        let max = match ctx.engine() {
            gaspi::Engine::Native | gaspi::Engine::Mpi => 16,
            gaspi::Engine::Gpi2 => 14,
            e => panic!("no queue limit known for {e:?}"),
        };
        assert_eq!(ctx.queue_max(), max);
        let mut made = Vec::new();
        for _ in 2..max {
            made.push(ctx.queue_create().unwrap());
        }
        assert_eq!(made, (2..max as u8).collect::<Vec<u8>>());
        assert!(matches!(
            ctx.queue_create(),
            Err(Error::TooManyQueues { max: m }) if m == max
        ));
        let last = max as u8 - 1;
        assert!(matches!(
            ctx.wait(last + 1, Timeout::Test),
            Err(Error::InvalidQueue { queue, num }) if queue == last + 1 && num == max
        ));
        let (right, _) = neighbours(ctx);
        ctx.write(
            Local::new(0, 0),
            Remote::new(right, 0, 0),
            8,
            last,
            Timeout::Block,
        )
        .unwrap();
        ctx.queue_delete(5).unwrap();
        assert!(matches!(
            ctx.write(
                Local::new(0, 0),
                Remote::new(right, 0, 0),
                8,
                5,
                Timeout::Block
            ),
            Err(Error::InvalidQueue { queue: 5, .. })
        ));
        assert_eq!(ctx.queue_create().unwrap(), 5);
        assert_eq!(ctx.queue_num(), max);
        barrier(ctx);
    });
}

#[test]
fn threads_post_on_their_own_queues_at_once() {
    Job::new(&[2, 4]).run(|ctx| {
        const THREADS: usize = 4;
        const ROUNDS: usize = 50;
        let chunk = 8192;
        let seg = segment(ctx, 0, 2 * THREADS * chunk);
        let (right, left) = neighbours(ctx);
        let me = ctx.rank() as u64;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let seg = seg.clone();
                s.spawn(move || {
                    let q = t as u8;
                    for round in 0..ROUNDS {
                        let seed = me * 1_000_000 + t as u64 * 1000 + round as u64;
                        fill(&seg, t * chunk, chunk, seed);
                        let id = t as u32;
                        ctx.write_notify(
                            Local::new(0, t * chunk),
                            Remote::new(right, 0, (THREADS + t) * chunk),
                            chunk,
                            Notification::new(id, round as u32 + 1),
                            q,
                            Timeout::Block,
                        )
                        .unwrap();
                        // Receive the left neighbour's thread t's chunk of this round.
                        let got = ctx.notify_waitsome(0, id..id + 1, Timeout::Block).unwrap();
                        assert_eq!(ctx.notify_reset(0, got).unwrap(), round as u32 + 1);
                        let lseed = left as u64 * 1_000_000 + t as u64 * 1000 + round as u64;
                        check(
                            &seg,
                            (THREADS + t) * chunk,
                            chunk,
                            lseed,
                            "chunk of a posting thread",
                        );
                        ctx.wait(q, Timeout::Block).unwrap();
                        // Tell the left neighbour its chunk was consumed.
                        ctx.notify(left, 0, Notification::new(100 + id, 1), q, Timeout::Block)
                            .unwrap();
                        ctx.notify_waitsome(0, 100 + id..101 + id, Timeout::Block)
                            .unwrap();
                        ctx.notify_reset(0, 100 + id).unwrap();
                        ctx.wait(q, Timeout::Block).unwrap();
                    }
                });
            }
        });
        barrier(ctx);
    });
}

/// Writes, reads and local copies at relative source/destination offsets
/// within a cache line that once hit a slow copy path (glibc's `rep movsb`
/// on AMD Zen 4): every byte lands, and the bytes around the destination
/// stay as they were.
#[test]
fn transfers_land_exactly_at_every_relative_alignment() {
    Job::new(&[2, 3]).run(|ctx| {
        const DST: usize = 256 << 10;
        const GUARD: usize = 64;
        let seg = segment(ctx, 2, 2 * DST);
        let (right, left) = neighbours(ctx);
        let me = ctx.rank() as u64;
        let offsets = [(0, 8), (8, 0), (1, 40), (16, 0), (0, 31), (33, 2)];
        for (k, &size) in [33usize, 2048, 4096 + 9, 65_536 + 3].iter().enumerate() {
            for (j, &(src, dst)) in offsets.iter().enumerate() {
                let seed = |r: u64| r * 1000 + (k * 10 + j) as u64;
                let guard = |r: u64| seed(r) + 500;
                fill(&seg, src, size, seed(me));
                fill(&seg, DST, dst + size + GUARD, guard(me));
                barrier(ctx);
                // Write to the right neighbour; then read the left one's
                // source back over what it wrote here.
                let at = DST + dst;
                ctx.write(
                    Local::new(2, src),
                    Remote::new(right, 2, at),
                    size,
                    0,
                    Timeout::Block,
                )
                .unwrap();
                ctx.wait(0, Timeout::Block).unwrap();
                barrier(ctx);
                check(&seg, at, size, seed(left as u64), "written bytes");
                check(&seg, DST, dst, guard(me), "bytes before the write");
                let mut after = vec![0u8; GUARD];
                seg.copy_to_slice(at + size, &mut after);
                let expect: Vec<u8> = (dst + size..dst + size + GUARD)
                    .map(|i| pattern(guard(me), i))
                    .collect();
                assert_eq!(after, expect, "bytes after the write");
                barrier(ctx);
                ctx.read(
                    Local::new(2, at),
                    Remote::new(left, 2, src),
                    size,
                    0,
                    Timeout::Block,
                )
                .unwrap();
                ctx.wait(0, Timeout::Block).unwrap();
                check(&seg, at, size, seed(left as u64), "read bytes");
                // A local write inside one segment whose ranges overlap.
                barrier(ctx);
                fill(&seg, DST, size + 64, seed(me));
                let me_rank = ctx.rank();
                ctx.write(
                    Local::new(2, DST),
                    Remote::new(me_rank, 2, DST + dst + 1),
                    size,
                    0,
                    Timeout::Block,
                )
                .unwrap();
                ctx.wait(0, Timeout::Block).unwrap();
                check(
                    &seg,
                    DST + dst + 1,
                    size,
                    seed(me),
                    "overlapping local write",
                );
                barrier(ctx);
            }
        }
    });
}

#[test]
fn lists_whose_elements_are_mostly_empty_move_exactly_the_others() {
    // GPI-2's list_ops_zero_size: 255 elements of one u16 each, all empty
    // but the first, the last, the middle one, or every odd one; notified
    // writes to the right, notified reads from the right.
    const N: usize = 255;
    Job::new(&[2, 3]).run(|ctx| {
        let view = segment(ctx, 0, 2 * N * 2);
        let (right, left) = neighbours(ctx);
        let me = ctx.rank();
        let word = |k: usize| {
            let mut b = [0u8; 2];
            view.copy_to_slice(k * 2, &mut b);
            u16::from_le_bytes(b)
        };
        let reset = || {
            for k in 0..2 * N {
                view.copy_from_slice(k * 2, &me.to_le_bytes());
            }
            barrier(ctx);
        };
        let odd: Vec<usize> = (0..N).filter(|k| k % 2 == 1).collect();
        for full in [vec![0], vec![N - 1], vec![N / 2], odd] {
            // Element k: word k here <-> word N + k at the right.
            let entries: Vec<ListEntry> = (0..N)
                .map(|k| {
                    let size = if full.contains(&k) { 2 } else { 0 };
                    ListEntry::new(Local::new(0, k * 2), 0, (N + k) * 2, size)
                })
                .collect();
            reset();
            let id = u32::from(me);
            ctx.write_list_notify(
                right,
                &entries,
                0,
                Notification::new(id, 1),
                0,
                Timeout::Block,
            )
            .unwrap();
            let from = u32::from(left);
            assert_eq!(
                ctx.notify_waitsome(0, from..from + 1, Timeout::Block)
                    .unwrap(),
                from
            );
            assert_eq!(ctx.notify_reset(0, from).unwrap(), 1);
            ctx.wait(0, Timeout::Block).unwrap();
            for k in 0..N {
                let want = if full.contains(&k) { left } else { me };
                assert_eq!(word(N + k), want, "write_list_notify, element {k}");
            }
            barrier(ctx);
            reset();
            ctx.read_list_notify(right, &entries, 0, id, 0, Timeout::Block)
                .unwrap();
            assert_eq!(
                ctx.notify_waitsome(0, id..id + 1, Timeout::Block).unwrap(),
                id
            );
            ctx.notify_reset(0, id).unwrap();
            ctx.wait(0, Timeout::Block).unwrap();
            for k in 0..N {
                let want = if full.contains(&k) { right } else { me };
                assert_eq!(word(k), want, "read_list_notify, element {k}");
            }
            barrier(ctx);
        }
    });
}
