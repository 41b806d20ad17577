//! RMA broadcast (Paznikov 2023): linear, binomial (broadcaster threads) and
//! node-aware, from every root, 0 B to 16 MiB, 1 to 8 ranks in several
//! node layouts; broadcasts from several roots at once never mix; the
//! broadcaster threads stop when the scope closes, also on a panic.

use gaspi::testing::Job;
use gaspi::{BcastImpl, Context, Error, GroupId, Rank, RmaWindow, Timeout};

const B: Timeout = Timeout::Block;
const IMPLS: [BcastImpl; 3] = [BcastImpl::Linear, BcastImpl::Binomial, BcastImpl::Node];

/// The value of element `i` of broadcast `k` from `root`.
fn value(root: Rank, k: u64, i: usize) -> u32 {
    (root as u32) << 28 ^ (k as u32) << 20 ^ i as u32
}

/// What a rank reads a broadcast of `how` in: its elements, or its node's
/// copy.
fn seen(win: &RmaWindow<'_, u32>, b: &gaspi::Broadcaster<'_, '_, u32>, how: BcastImpl) -> Vec<u32> {
    match how {
        BcastImpl::Node => b.node_copy().to_vec(),
        _ => win.local().to_vec(),
    }
}

/// One broadcast per root, impl and size; every member checks the data
/// (and that elements outside the range kept their value).
fn every_root(ctx: &Context, sizes: &[usize]) {
    let len = sizes.iter().max().unwrap() + 3;
    let win = RmaWindow::<u32>::new(ctx, 1, len, GroupId::ALL, B).unwrap();
    let n = ctx.num_ranks();
    win.broadcaster(2, B, |b| {
        let mut k = 0u64;
        for how in IMPLS {
            for root in 0..n {
                for &size in sizes {
                    let disp = root as usize % 3;
                    let before = seen(&win, b, how);
                    if ctx.rank() == root {
                        let data: Vec<u32> = (0..size).map(|i| value(root, k, i)).collect();
                        b.bcast(&data, disp, how, B).unwrap();
                        b.flush(B).unwrap();
                        assert!(b.test().unwrap());
                    }
                    k += 1;
                    b.wait_received(k, B).unwrap();
                    let got = seen(&win, b, how);
                    for (i, (&g, &old)) in got.iter().zip(&before).enumerate() {
                        let want = if (disp..disp + size).contains(&i) {
                            value(root, k - 1, i - disp)
                        } else {
                            old
                        };
                        assert_eq!(g, want, "{how:?} root {root} size {size} element {i}");
                    }
                    // Nobody's next broadcast overwrites what another still checks.
                    ctx.barrier(GroupId::ALL, B).unwrap();
                }
            }
        }
        assert_eq!(b.received().unwrap(), k);
    })
    .unwrap();
}

#[test]
fn every_root_every_impl_small_and_medium() {
    for (n, ppn) in [
        (1, 1),
        (2, 2),
        (2, 1),
        (4, 2),
        (5, 5),
        (6, 3),
        (8, 4),
        (7, 2),
    ] {
        Job::new(&[n])
            .ppn(ppn)
            .run(|ctx| every_root(ctx, &[0, 1, 1000, 16 << 10]));
    }
}

/// 16 MiB (4 Mi elements of u32) from the middle rank, within a node and
/// across three nodes.
#[test]
fn sixteen_mebibytes() {
    for ppn in [3, 1] {
        Job::new(&[3]).ppn(ppn).run(|ctx| {
            let len = 4 << 20;
            let win = RmaWindow::<u32>::new(ctx, 3, len, GroupId::ALL, B).unwrap();
            win.broadcaster(4, B, |b| {
                for (k, how) in IMPLS.into_iter().enumerate() {
                    if ctx.rank() == 1 {
                        let data: Vec<u32> = (0..len).map(|i| value(1, k as u64, i)).collect();
                        b.bcast(&data, 0, how, B).unwrap();
                    }
                    b.wait_received(k as u64 + 1, B).unwrap();
                    let got = seen(&win, b, how);
                    assert!(
                        got.iter()
                            .enumerate()
                            .all(|(i, &v)| v == value(1, k as u64, i)),
                        "{how:?}"
                    );
                    ctx.barrier(GroupId::ALL, B).unwrap();
                }
            })
            .unwrap();
        });
    }
}

/// Every rank broadcasts at once, back to back, into the same elements
/// and into ranges of its own: the shared range always holds exactly one
/// broadcast (never a mix), the own ranges each root's last one.
#[test]
fn concurrent_roots_never_mix() {
    for (n, ppn) in [(4, 2), (6, 3), (5, 1)] {
        Job::new(&[n]).ppn(ppn).run(|ctx| {
            let n = ctx.num_ranks() as usize;
            let chunk = 64 << 10;
            let win = RmaWindow::<u32>::new(ctx, 5, chunk * (n + 1), GroupId::ALL, B).unwrap();
            let me = ctx.rank();
            let rounds = 6u64;
            win.broadcaster(6, B, |b| {
                for k in 0..rounds {
                    for how in [BcastImpl::Binomial, BcastImpl::Linear] {
                        let shared: Vec<u32> = (0..chunk).map(|i| value(me, k, i)).collect();
                        b.bcast(&shared, 0, how, B).unwrap();
                        b.bcast(&shared, chunk * (me as usize + 1), how, B).unwrap();
                    }
                }
                b.flush(B).unwrap();
                let total = rounds * 4 * n as u64;
                b.wait_received(total, B).unwrap();
                let got = win.local().to_vec();
                let root = got[0] >> 28;
                let k = (got[0] >> 20 & 0xff) as u64;
                assert!((root as usize) < n && k < rounds);
                for (i, &v) in got[..chunk].iter().enumerate() {
                    assert_eq!(v, value(root as Rank, k, i), "mixed at {i}");
                }
                for r in 0..n {
                    let own = &got[chunk * (r + 1)..chunk * (r + 2)];
                    for (i, &v) in own.iter().enumerate() {
                        assert_eq!(v, value(r as Rank, rounds - 1, i), "root {r}'s range");
                    }
                }
                ctx.barrier(GroupId::ALL, B).unwrap();
            })
            .unwrap();
        });
    }
}

/// Errors: out-of-range broadcasts, waits that time out, a closure that
/// panics (the thread stops, the job goes on); windows and scopes are
/// usable afterwards.
#[test]
fn errors_timeouts_and_panics() {
    Job::new(&[3]).ppn(1).run(|ctx| {
        let win = RmaWindow::<u64>::new(ctx, 7, 4, GroupId::ALL, B).unwrap();
        win.broadcaster(8, B, |b| {
            assert!(matches!(
                b.bcast(&[1, 2, 3], 2, BcastImpl::Binomial, B),
                Err(Error::OutOfBounds { .. })
            ));
            assert!(matches!(
                b.wait_received(1, Timeout::ms(20)),
                Err(Error::Timeout)
            ));
            ctx.barrier(GroupId::ALL, B).unwrap();
            if ctx.rank() == 2 {
                b.bcast(&[9], 3, BcastImpl::Node, B).unwrap();
            }
            b.wait_received(1, B).unwrap();
            assert_eq!(b.node_copy().get(3), 9);
        })
        .unwrap();
        // The same queue for relays and the window is refused.
        let same = gaspi::RmaOptions {
            relay_queue: 0,
            ..Default::default()
        };
        let w2 = RmaWindow::<u64>::with_options(ctx, 9, 1, GroupId::ALL, same, B).unwrap();
        assert!(matches!(
            w2.broadcaster(10, B, |_| ()),
            Err(Error::InvalidArgument(_))
        ));
        drop(w2);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            win.broadcaster(11, B, |_| panic!("in the scope"))
        }));
        assert!(panicked.is_err());
        ctx.segment_delete(11).unwrap();
        // A new scope works after the panic.
        win.broadcaster(12, B, |b| {
            if ctx.rank() == 0 {
                b.bcast(&[5, 6], 0, BcastImpl::Binomial, B).unwrap();
                b.flush(B).unwrap();
            }
            b.wait_received(1, B).unwrap();
            assert_eq!(win.local().to_vec()[..2], [5, 6]);
        })
        .unwrap();
    });
}

/// `test` turns true only once every member has the data: after the root
/// saw it true (polling, no flush) and a barrier, every member finds the
/// broadcast in place without waiting; roots alternate, back to back.
#[test]
fn test_turns_true_only_when_every_member_has_the_data() {
    for (n, ppn) in [(4, 2), (5, 5)] {
        Job::new(&[n]).ppn(ppn).run(|ctx| {
            let n = ctx.num_ranks();
            let len = 4096;
            let win = RmaWindow::<u32>::new(ctx, 13, len, GroupId::ALL, B).unwrap();
            win.broadcaster(14, B, |b| {
                for k in 0..40u64 {
                    let root = (k % n as u64) as Rank;
                    let how =
                        [BcastImpl::Binomial, BcastImpl::Node, BcastImpl::Linear][k as usize % 3];
                    if ctx.rank() == root {
                        let data: Vec<u32> = (0..len).map(|i| value(root, k, i)).collect();
                        b.bcast(&data, 0, how, B).unwrap();
                        while !b.test().unwrap() {
                            std::thread::yield_now();
                        }
                    }
                    ctx.barrier(GroupId::ALL, B).unwrap();
                    assert_eq!(b.received().unwrap(), k + 1, "broadcast {k} not counted");
                    let got = seen(&win, b, how);
                    assert!(
                        got.iter().enumerate().all(|(i, &v)| v == value(root, k, i)),
                        "broadcast {k} ({how:?} from {root}) not in place"
                    );
                    ctx.barrier(GroupId::ALL, B).unwrap();
                }
            })
            .unwrap();
        });
    }
}
