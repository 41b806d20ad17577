//! Every bad input returns its error, posts nothing, and leaves the runtime
//! usable.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Config, Error, ListEntry, Local, Notification, Remote, Timeout};

#[test]
fn bad_arguments_return_their_errors() {
    let cfg = Config {
        transfer_size_max: 1 << 20,
        rw_list_elem_max: 4,
        ..Default::default()
    };
    Job::new(&[2]).config(cfg).run(|ctx| {
        segment(ctx, 0, 4096);
        let (right, _) = neighbours(ctx);
        let src = Local::new(0, 0);
        let to = |off| Remote::new(right, 0, off);
        let t = Timeout::Block;

        // Invalid rank.
        assert!(matches!(
            ctx.write(src, Remote::new(2, 0, 0), 8, 0, t),
            Err(Error::InvalidRank {
                rank: 2,
                num_ranks: 2
            })
        ));
        assert!(matches!(
            ctx.passive_send(src, 9, 8, t),
            Err(Error::InvalidRank { rank: 9, .. })
        ));
        // Unknown segment: on the target, locally, and an id beyond the maximum.
        // (A rank of another host cannot tell a missing segment from one not
        // registered with it: GPI-2 knows registered ones only.)
        let unknown = ctx.write(src, Remote::new(right, 5, 0), 8, 0, t);
        if ctx.on_this_host(right) {
            assert!(matches!(
                unknown,
                Err(Error::SegmentNotFound { segment: 5, .. })
            ));
        } else {
            assert!(matches!(
                unknown,
                Err(Error::SegmentNotRegistered { segment: 5, .. })
            ));
        }
        assert!(matches!(
            ctx.write(Local::new(5, 0), to(0), 8, 0, t),
            Err(Error::SegmentNotFound { segment: 5, .. })
        ));
        assert!(matches!(
            ctx.notify_waitsome(5, 0..1, t),
            Err(Error::SegmentNotFound { .. })
        ));
        // (255 on the native engine, 253 under GPI-2, which has 255 ids.)
        assert!(matches!(
            ctx.segment_ptr(255),
            Err(Error::InvalidSegmentId {
                segment: 255,
                max
            }) if max == ctx.segment_max()
        ));
        // Offset + size past the end, remote and local, and overflowing.
        assert!(matches!(
            ctx.write(src, to(4090), 8, 0, t),
            Err(Error::OutOfBounds {
                offset: 4090,
                size: 8,
                segment_size: 4096,
                ..
            })
        ));
        assert!(matches!(
            ctx.read(Local::new(0, 4095), to(0), 2, 0, t),
            Err(Error::OutOfBounds { offset: 4095, .. })
        ));
        assert!(matches!(
            ctx.write(src, to(usize::MAX), 2, 0, t),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(
            ctx.write(src, to(0), 2 << 20, 0, t),
            Err(Error::TransferTooLarge { max: 1048576, .. })
        ));
        // Notification id out of range, zero notification value.
        assert!(matches!(
            ctx.write_notify(src, to(0), 8, Notification::new(65_536, 1), 0, t),
            Err(Error::InvalidNotificationId {
                id: 65_536,
                num: 65_536
            })
        ));
        assert!(matches!(
            ctx.notify(right, 0, Notification::new(3, 0), 0, t),
            Err(Error::ZeroNotificationValue)
        ));
        assert!(matches!(
            ctx.notify_reset(0, 70_000),
            Err(Error::InvalidNotificationId { .. })
        ));
        // An empty range waits for nothing (the GASPI standard's num == 0);
        // a reversed one, a claim of nothing and an empty range past the
        // table are errors.
        assert_eq!(ctx.notify_waitsome(0, 5..5, t).unwrap(), 5);
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 5..3;
        assert!(matches!(
            ctx.notify_waitsome(0, reversed, t),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            ctx.notify_claim(0, 5..5, t),
            Err(Error::InvalidArgument(_))
        ));
        let past = ctx.notification_num() + 1;
        assert!(matches!(
            ctx.notify_waitsome(0, past..past, t),
            Err(Error::InvalidNotificationId { .. })
        ));
        // Misaligned atomic.
        assert!(matches!(
            ctx.atomic_fetch_add(to(4), 1, t),
            Err(Error::MisalignedAtomic { offset: 4 })
        ));
        // Invalid queue.
        assert!(matches!(
            ctx.write(src, to(0), 8, 8, t),
            Err(Error::InvalidQueue { queue: 8, .. })
        ));
        assert!(matches!(
            ctx.wait(200, t),
            Err(Error::InvalidQueue { queue: 200, .. })
        ));
        // Lists: empty, too long, and one bad element poisons nothing.
        let good = ListEntry::new(src, 0, 0, 8);
        assert!(matches!(
            ctx.write_list(right, &[], 0, t),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            ctx.write_list(right, &[good; 5], 0, t),
            Err(Error::InvalidArgument(_))
        ));
        let bad = ListEntry::new(src, 0, 4095, 8);
        assert!(matches!(
            ctx.write_list(right, &[good, bad], 0, t),
            Err(Error::OutOfBounds { .. })
        ));

        // None of the failed calls posted anything.
        assert_eq!(ctx.queue_size(0).unwrap(), 0);
        // Errors say what to do.
        let msg = ctx
            .notify(right, 0, Notification::new(3, 0), 0, t)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("non-zero"), "{msg}");
        let msg = ctx.write(src, to(4090), 8, 0, t).unwrap_err().to_string();
        assert!(msg.contains("4096 bytes"), "{msg}");

        // The runtime is still usable.
        ctx.write_notify(src, to(8), 8, Notification::new(1, 1), 0, t)
            .unwrap();
        assert_eq!(ctx.notify_waitsome(0, 0..10, t).unwrap(), 1);
        ctx.wait(0, t).unwrap();
        barrier(ctx);
    });
}

#[test]
fn invalid_configurations_are_refused_at_init() {
    Job::new(&[1]).run_raw(
        || {
            for cfg in [
                Config {
                    queue_num: 0,
                    ..Default::default()
                },
                Config {
                    queue_num: 17,
                    ..Default::default()
                },
                Config {
                    notification_num: 0,
                    ..Default::default()
                },
                Config {
                    segment_max: 256,
                    ..Default::default()
                },
                Config {
                    queue_size_max: 5000,
                    ..Default::default()
                },
                Config {
                    allreduce_elem_max: (1 << 23) + 1,
                    ..Default::default()
                },
            ] {
                assert!(matches!(gaspi::Context::init(cfg), Err(Error::Config(_))));
            }
            if std::env::var("GASPI_ENGINE").as_deref() == Ok("gpi2") {
                // GPI-2's last two queues are the runtime's: 15 is one too many.
                let cfg = Config {
                    queue_num: 15,
                    ..Default::default()
                };
                match gaspi::Context::init(cfg) {
                    Err(Error::Config(m)) => assert!(m.contains("1..=14"), "{m}"),
                    other => panic!("expected a configuration error, got {other:?}"),
                }
            }
            // A valid one still works afterwards, but only once at a time.
            let ctx = gaspi::Context::init(Config::default()).unwrap();
            assert!(matches!(
                gaspi::Context::init(Config::default()),
                Err(Error::AlreadyInitialized)
            ));
            drop(ctx);
            let again = gaspi::Context::init(Config::default());
            // The job of one rank already terminated this rank: a second
            // init in the same job is refused by the job, not by the process.
            assert!(again.is_err());
        },
        |_, report| assert!(report.success(), "{:?}", report.ranks),
    );
}
