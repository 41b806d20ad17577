//! Passive communication: many senders, per-sender order, full inboxes,
//! size limits and timeouts.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Config, Error, Local, Timeout, WaitMode};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

#[test]
fn many_senders_one_receiver_in_order_per_sender() {
    // A small inbox so that senders really wait for room.
    let cfg = Config {
        passive_queue_size_max: 4,
        ..Default::default()
    };
    // Nodes of two: under the GPI-2 engine with emulated hosts, rank 0
    // gets messages from its host (rank 1) and from other hosts at once.
    let sizes = job_sizes(&[2, 4, 8]);
    Job::new(&sizes).ppn(2).config(cfg).run(|ctx| {
        const MSGS: u64 = 100;
        let seg = segment(ctx, 0, 1 << 16);
        let n = ctx.num_ranks() as u64;
        let me = ctx.rank() as u64;
        if me != 0 {
            for k in 0..MSGS {
                let len = 1 + ((k * 37 + me * 11) % 3000) as usize;
                fill(&seg, 0, len, me * 1000 + k);
                ctx.passive_send(Local::new(0, 0), 0, len, Timeout::Block)
                    .unwrap();
            }
        } else {
            let mut next = vec![0u64; n as usize];
            for _ in 0..MSGS * (n - 1) {
                let (from, len) = ctx
                    .passive_receive(Local::new(0, 4096), 8192, Timeout::Block)
                    .unwrap();
                let k = next[from as usize];
                assert_eq!(len, 1 + ((k * 37 + from as u64 * 11) % 3000) as usize);
                check(&seg, 4096, len, from as u64 * 1000 + k, "passive message");
                next[from as usize] += 1;
            }
            assert!(next[1..].iter().all(|&c| c == MSGS));
            assert!(
                ctx.passive_receive(Local::new(0, 0), 64, Timeout::Test)
                    .unwrap_err()
                    .is_timeout()
            );
        }
        barrier(ctx);
    });
}

#[test]
fn passive_limits_timeouts_and_oversized_messages() {
    let cfg = Config {
        passive_queue_size_max: 2,
        passive_transfer_size_max: 1024,
        ..Default::default()
    };
    Job::new(&[2]).ppn(2).config(cfg).run(|ctx| {
        let seg = segment(ctx, 0, 8192);
        let (right, _) = neighbours(ctx);
        assert!(matches!(
            ctx.passive_send(Local::new(0, 0), right, 1025, Timeout::Block),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            ctx.passive_send(Local::new(0, 0), right, 0, Timeout::Block),
            Err(Error::InvalidArgument(_))
        ));
        assert!(
            ctx.passive_receive(Local::new(0, 0), 100, Timeout::ms(20))
                .unwrap_err()
                .is_timeout()
        );
        barrier(ctx);
        if ctx.rank() == 0 {
            // Fill rank 1's inbox; the third message times out, nothing is lost.
            fill(&seg, 0, 1000, 1);
            ctx.passive_send(Local::new(0, 0), 1, 1000, Timeout::Block)
                .unwrap();
            ctx.passive_send(Local::new(0, 0), 1, 10, Timeout::Block)
                .unwrap();
            assert!(
                ctx.passive_send(Local::new(0, 0), 1, 10, Timeout::Test)
                    .unwrap_err()
                    .is_timeout()
            );
            assert!(
                ctx.passive_send(Local::new(0, 0), 1, 10, Timeout::ms(20))
                    .unwrap_err()
                    .is_timeout()
            );
        }
        barrier(ctx);
        if ctx.rank() == 1 {
            // Too small a receive leaves the message queued.
            assert!(matches!(
                ctx.passive_receive(Local::new(0, 4096), 999, Timeout::Block),
                Err(Error::MessageTooLarge {
                    size: 1000,
                    capacity: 999
                })
            ));
            assert_eq!(
                ctx.passive_receive(Local::new(0, 4096), 1000, Timeout::Block)
                    .unwrap(),
                (0, 1000)
            );
            check(&seg, 4096, 1000, 1, "first message");
            assert_eq!(
                ctx.passive_receive(Local::new(0, 4096), 1000, Timeout::Block)
                    .unwrap(),
                (0, 10)
            );
            assert!(
                ctx.passive_receive(Local::new(0, 4096), 1000, Timeout::Test)
                    .unwrap_err()
                    .is_timeout()
            );
        }
        // A rank can send to itself.
        ctx.passive_send(Local::new(0, 0), ctx.rank(), 4, Timeout::Block)
            .unwrap();
        assert_eq!(
            ctx.passive_receive(Local::new(0, 100), 4, Timeout::Block)
                .unwrap(),
            (ctx.rank(), 4)
        );
        barrier(ctx);
    });
}

#[test]
fn a_send_that_timed_out_is_repeated_to_its_end_and_delivered_once() {
    // GPI-2's passive_tout_test: rank 1 sends to every other rank with
    // GASPI_TEST until a try succeeds. Across hosts a try times out while
    // its message travels; repeating the call goes on waiting for that
    // message (it must arrive once, not once per try). Then a try that may
    // time out, followed by a send with other arguments: that one's
    // message arrives after the first, and each at most once.
    Job::new(&[3, 4]).run(|ctx| {
        let seg = segment(ctx, 0, 4096);
        let me = ctx.rank();
        let sender = 1;
        let others: Vec<_> = (0..ctx.num_ranks()).filter(|&r| r != sender).collect();
        if me == sender {
            fill(&seg, 0, 64, 7);
            fill(&seg, 64, 32, 8);
            let start = std::time::Instant::now();
            for &n in &others {
                loop {
                    match ctx.passive_send(Local::new(0, 0), n, 64, Timeout::Test) {
                        Ok(()) => break,
                        Err(e) if e.is_timeout() => {}
                        Err(e) => panic!("{e}"),
                    }
                    let waited = start.elapsed();
                    assert!(waited.as_secs() < 60, "no try succeeded in {waited:?}");
                }
            }
            barrier(ctx);
            for &n in &others {
                let first = ctx.passive_send(Local::new(0, 0), n, 64, Timeout::Test);
                assert!(matches!(first, Ok(()) | Err(Error::Timeout)), "{first:?}");
                ctx.passive_send(Local::new(0, 64), n, 32, Timeout::Block)
                    .unwrap();
            }
        } else {
            let got = ctx.passive_receive(Local::new(0, 1024), 64, Timeout::Block);
            assert_eq!(got.unwrap(), (sender, 64));
            check(&seg, 1024, 64, 7, "the message of the repeated send");
            barrier(ctx);
            let mut lengths = vec![];
            loop {
                let (from, len) = ctx
                    .passive_receive(Local::new(0, 2048), 64, Timeout::Block)
                    .unwrap();
                assert_eq!(from, sender);
                lengths.push(len);
                if len == 32 {
                    check(&seg, 2048, 32, 8, "the message after a try");
                    break;
                }
                check(&seg, 2048, 64, 7, "the message of the try");
            }
            assert!(lengths == [32] || lengths == [64, 32], "{lengths:?}");
        }
        barrier(ctx);
        // Every send ended before the barrier: no message is left, none
        // came twice.
        let left = ctx.passive_receive(Local::new(0, 3072), 64, Timeout::ms(200));
        assert!(left.as_ref().is_err_and(|e| e.is_timeout()), "{left:?}");
        barrier(ctx);
    });
}

#[test]
fn a_timed_out_send_repeated_while_another_thread_sends_is_delivered_once() {
    // Two threads of rank 1 send to rank 0: one repeats a send with
    // Timeout::Test until a try succeeds (GPI-2's passive_tout_test), the
    // other sends other messages meanwhile. Across hosts the second
    // thread's sends wait for the first one's message to be answered, and
    // take that answer: the repeat must still return with it, not send its
    // message again.
    const OTHERS: usize = 20;
    Job::new(&[2]).run(|ctx| {
        let seg = segment(ctx, 0, 4096);
        let (me, sender, receiver) = (ctx.rank(), 1, 0);
        if me == sender {
            fill(&seg, 0, 64, 7);
            fill(&seg, 64, 32, 8);
            // After the first try timed out, the repeats wait until the
            // other thread has sent once (it took the try's answer then).
            let tried = AtomicBool::new(false);
            let others_sent = AtomicUsize::new(0);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let start = std::time::Instant::now();
                    loop {
                        match ctx.passive_send(Local::new(0, 0), receiver, 64, Timeout::Test) {
                            Ok(()) => break,
                            Err(e) if e.is_timeout() => {}
                            Err(e) => panic!("{e}"),
                        }
                        tried.store(true, SeqCst);
                        while others_sent.load(SeqCst) == 0 {
                            std::thread::yield_now();
                        }
                        let waited = start.elapsed();
                        assert!(waited.as_secs() < 60, "no try succeeded in {waited:?}");
                    }
                    tried.store(true, SeqCst);
                });
                s.spawn(|| {
                    while !tried.load(SeqCst) {
                        std::thread::yield_now();
                    }
                    for _ in 0..OTHERS {
                        ctx.passive_send(Local::new(0, 64), receiver, 32, Timeout::Block)
                            .unwrap();
                        others_sent.fetch_add(1, SeqCst);
                    }
                });
            });
        } else {
            let (mut long, mut short) = (0, 0);
            while long < 1 || short < OTHERS {
                let (from, len) = ctx
                    .passive_receive(Local::new(0, 1024), 64, Timeout::Block)
                    .unwrap();
                assert_eq!(from, sender);
                match len {
                    64 => {
                        check(&seg, 1024, 64, 7, "the repeated message");
                        long += 1;
                    }
                    32 => {
                        check(&seg, 1024, 32, 8, "another thread's message");
                        short += 1;
                    }
                    _ => panic!("a message of {len} bytes"),
                }
                assert!(long <= 1, "the repeated message arrived twice");
            }
        }
        barrier(ctx);
        // Every send ended before the barrier: no message is left.
        let left = ctx.passive_receive(Local::new(0, 3072), 64, Timeout::ms(200));
        assert!(left.as_ref().is_err_and(|e| e.is_timeout()), "{left:?}");
        barrier(ctx);
    });
}

#[test]
fn passive_messages_across_hosts_and_full_inboxes() {
    // Every rank a node: under the GPI-2 engine with emulated hosts each
    // is a host: the receiver reads the first message from the sender,
    // later ones are written into the sender's slot at the receiver (64
    // KiB in small jobs), larger ones read again. In the default wait
    // mode and in `Block`, where a receiver across hosts pumps other
    // hosts' messages in between naps instead of spinning and yielding.
    for mode in [WaitMode::Auto, WaitMode::Block] {
        let cfg = Config {
            passive_queue_size_max: 2,
            passive_transfer_size_max: 1 << 17,
            wait_mode: mode,
            ..Default::default()
        };
        across_hosts_and_full_inboxes(cfg);
    }
}

fn across_hosts_and_full_inboxes(cfg: Config) {
    Job::new(&[2, 4]).ppn(1).config(cfg).run(|ctx| {
        let seg = segment(ctx, 0, 1 << 18);
        let (right, left) = neighbours(ctx);
        let me = ctx.rank() as u64;
        // A ring of messages of growing size, 1 B to 128 KiB (64 KiB fills
        // a slot exactly), then one a byte larger than a slot.
        for round in 0..11u64 {
            let len = match round {
                10 => (1 << 16) + 1,
                _ => 1 << (round * 2).min(17),
            };
            fill(&seg, 0, len, me * 100 + round);
            ctx.passive_send(Local::new(0, 0), right, len, Timeout::Block)
                .unwrap();
            let (from, got) = ctx
                .passive_receive(Local::new(0, 1 << 17), 1 << 17, Timeout::Block)
                .unwrap();
            assert_eq!((from, got), (left, len));
            check(
                &seg,
                1 << 17,
                len,
                left as u64 * 100 + round,
                "passive message",
            );
        }
        barrier(ctx);
        // Rank 0 fills rank 1's inbox: the third send times out.
        if ctx.rank() == 0 {
            for k in 0..2 {
                fill(&seg, 0, 64, 7 + k);
                ctx.passive_send(Local::new(0, 0), 1, 64, Timeout::Block)
                    .unwrap();
            }
            fill(&seg, 0, 10, 9);
            assert!(
                ctx.passive_send(Local::new(0, 0), 1, 10, Timeout::ms(50))
                    .unwrap_err()
                    .is_timeout()
            );
        }
        barrier(ctx);
        if ctx.rank() == 1 {
            for k in 0..2 {
                assert_eq!(
                    ctx.passive_receive(Local::new(0, 4096), 64, Timeout::Block)
                        .unwrap(),
                    (0, 64)
                );
                check(&seg, 4096, 64, 7 + k, "message into a full inbox");
            }
            if ctx.on_this_host(0) {
                // On one host the send that timed out queued nothing.
                assert!(
                    ctx.passive_receive(Local::new(0, 4096), 64, Timeout::Test)
                        .unwrap_err()
                        .is_timeout()
                );
            } else {
                // Across hosts it waited at the receiver (in the sender's
                // slot there) and arrives once there is room.
                assert_eq!(
                    ctx.passive_receive(Local::new(0, 4096), 64, Timeout::Block)
                        .unwrap(),
                    (0, 10)
                );
                check(&seg, 4096, 10, 9, "message of a send that timed out");
            }
        }
        barrier(ctx);
        // The outbox is usable again: one more ring.
        fill(&seg, 0, 100, me);
        ctx.passive_send(Local::new(0, 0), right, 100, Timeout::Block)
            .unwrap();
        let (from, len) = ctx
            .passive_receive(Local::new(0, 2048), 128, Timeout::Block)
            .unwrap();
        assert_eq!((from, len), (left, 100));
        check(&seg, 2048, 100, left as u64, "passive message");
        barrier(ctx);
    });
}

#[test]
fn a_message_larger_than_a_smaller_receivers_inbox_is_refused_and_the_next_arrives() {
    // Rank 1 takes messages of at most 1 KiB, rank 0 sends up to 64 KiB.
    // Across hosts (GPI-2 engine, emulated hosts) the second message is
    // pushed into rank 0's slot at rank 1 (the first one allowed pushes),
    // and rank 1's relay refuses it there.
    Job::new(&[2]).run_raw(
        || {
            let me: u16 = std::env::var("GASPI_RANK").unwrap().parse().unwrap();
            let cfg = Config {
                passive_transfer_size_max: if me == 1 { 1024 } else { 65_535 },
                ..Default::default()
            };
            let ctx = gaspi::Context::init(cfg).unwrap();
            let seg = segment(&ctx, 0, 1 << 14);
            if me == 0 {
                let send = |len: usize, seed: u64| {
                    fill(&seg, 0, len, seed);
                    ctx.passive_send(Local::new(0, 0), 1, len, Timeout::Block)
                };
                send(100, 1).unwrap();
                match send(2000, 2) {
                    Err(Error::InvalidArgument(m)) => {
                        assert!(m.contains("1024") || m.contains("inbox"), "{m}")
                    }
                    other => panic!("expected InvalidArgument, got {other:?}"),
                }
                send(64, 3).unwrap();
            } else if me == 1 {
                for (len, seed) in [(100, 1), (64, 3)] {
                    let got = ctx
                        .passive_receive(Local::new(0, 4096), 1024, Timeout::Block)
                        .unwrap();
                    assert_eq!(got, (0, len));
                    check(&seg, 4096, len, seed, "passive message");
                }
            }
            barrier(&ctx);
            if me == 1 {
                assert!(
                    ctx.passive_receive(Local::new(0, 4096), 1024, Timeout::Test)
                        .unwrap_err()
                        .is_timeout(),
                    "the refused message never arrives"
                );
            }
            ctx.term().unwrap();
        },
        |n, report| assert!(report.success(), "job of {n} ranks failed: {report:?}"),
    );
}
