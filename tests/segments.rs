//! Segments: collective and step-by-step creation, registration, user
//! memory, deletion and reuse, queries, typed views.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Alloc, Config, Error, GroupId, Local, Notification, Remote, Timeout};

#[test]
fn alloc_register_is_needed_before_a_peer_may_access() {
    Job::new(&[2, 4]).run(|ctx| {
        let (right, left) = neighbours(ctx);
        ctx.segment_alloc(3, 8192, Alloc::Initialized).unwrap();
        barrier(ctx);
        // Not registered with the left neighbour yet.
        assert!(matches!(
            ctx.write(
                Local::new(3, 0),
                Remote::new(right, 3, 0),
                8,
                0,
                Timeout::Block
            ),
            Err(Error::SegmentNotRegistered { segment: 3, .. })
        ));
        barrier(ctx);
        ctx.segment_register(3, left, Timeout::Block).unwrap();
        barrier(ctx);
        let view = ctx.segment::<u8>(3).unwrap();
        fill(&view, 0, 100, ctx.rank() as u64);
        ctx.write_notify(
            Local::new(3, 0),
            Remote::new(right, 3, 4096),
            100,
            Notification::new(0, 1),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.notify_waitsome(3, 0..1, Timeout::Block).unwrap();
        check(&view, 4096, 100, left as u64, "data after registration");
        assert_eq!(ctx.segment_size(3, right).unwrap(), 8192);
        barrier(ctx);
    });
}

#[test]
fn segments_of_different_sizes_and_ids_per_rank() {
    Job::new(&job_sizes(&[2, 4, 8])).run(|ctx| {
        let me = ctx.rank() as usize;
        let n = ctx.num_ranks();
        // Rank r has segments 0..=r, segment s of size (s+1)*1000 + r.
        for s in 0..=me {
            ctx.segment_alloc(s as u8, (s + 1) * 1000 + me, Alloc::Uninitialized)
                .unwrap();
            for r in 0..n {
                ctx.segment_register(s as u8, r, Timeout::Block).unwrap();
            }
        }
        assert_eq!(ctx.segment_num(), me + 1);
        assert_eq!(ctx.segment_list(), (0..=me as u8).collect::<Vec<_>>());
        assert_eq!(ctx.segment_avail_local().unwrap(), me as u8 + 1);
        barrier(ctx);
        for r in 0..n as usize {
            for s in 0..ctx.segment_max() as usize {
                let size = ctx.segment_size(s as u8, r as u16);
                if s <= r {
                    assert_eq!(size.unwrap(), (s + 1) * 1000 + r);
                } else if ctx.on_this_host(r as u16) {
                    assert!(matches!(size, Err(Error::SegmentNotFound { .. })));
                } else {
                    // Another host's missing segment: not registered with us.
                    assert!(matches!(size, Err(Error::SegmentNotRegistered { .. })));
                }
            }
        }
        // Write the last byte of the largest segment of every rank.
        for r in 0..n {
            let size = (r as usize + 1) * 1000 + r as usize;
            ctx.write(
                Local::new(0, 0),
                Remote::new(r, r as u8, size - 1),
                1,
                0,
                Timeout::Block,
            )
            .unwrap();
            assert!(matches!(
                ctx.write(
                    Local::new(0, 0),
                    Remote::new(r, r as u8, size),
                    1,
                    0,
                    Timeout::Block
                ),
                Err(Error::OutOfBounds { .. })
            ));
        }
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
    });
}

#[test]
fn deleted_segments_are_seen_as_gone_and_can_be_recreated() {
    Job::new(&[2, 4]).run(|ctx| {
        let (right, left) = neighbours(ctx);
        for round in 0..20u64 {
            let size = 4096 * (1 + round as usize % 3);
            let view = segment(ctx, 7, size);
            assert_eq!(view.len(), size);
            fill(&view, 0, 512, ctx.rank() as u64 * 100 + round);
            ctx.write_notify(
                Local::new(7, 0),
                Remote::new(right, 7, size - 512),
                512,
                Notification::new(1, 1),
                0,
                Timeout::Block,
            )
            .unwrap();
            ctx.notify_waitsome(7, 1..2, Timeout::Block).unwrap();
            check(
                &view,
                size - 512,
                512,
                left as u64 * 100 + round,
                "data in a recreated segment",
            );
            ctx.wait(0, Timeout::Block).unwrap();
            barrier(ctx);
            ctx.segment_delete(7).unwrap();
            barrier(ctx);
            // (A rank of another host cannot see the deletion: GPI-2 engine
            // on a cluster, see `Context::on_this_host`.)
            if ctx.on_this_host(right) {
                assert!(matches!(
                    ctx.notify(right, 7, Notification::new(1, 1), 0, Timeout::Block),
                    Err(Error::SegmentNotFound { segment: 7, rank }) if rank == right
                ));
            }
            assert!(matches!(
                ctx.segment_delete(7),
                Err(Error::SegmentNotFound { .. })
            ));
            // The view keeps the old memory mapped and readable.
            assert_eq!(view.len(), size);
            barrier(ctx); // nobody re-creates segment 7 before everyone checked
        }
    });
}

#[test]
fn user_memory_bound_and_used_as_segments_keeps_its_content() {
    Job::new(&[2, 4]).run(|ctx| {
        let (right, left) = neighbours(ctx);
        let size = 3 * 4096;
        let layout = std::alloc::Layout::from_size_align(size, 4096).unwrap();
        // SAFETY: non-zero size.
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        // SAFETY: mem points to `size` bytes we own.
        let buf = unsafe { std::slice::from_raw_parts_mut(mem, size) };
        buf[..100].copy_from_slice(&pattern_vec(ctx.rank() as u64, 100));
        // SAFETY: page aligned, owned, valid until deleted below.
        unsafe { ctx.segment_use(2, mem, size, GroupId::ALL, Timeout::Block) }.unwrap();
        assert_eq!(ctx.segment_ptr(2).unwrap(), mem);
        // The content survived; remote writes land in the user's memory.
        ctx.write_notify(
            Local::new(2, 0),
            Remote::new(right, 2, 8192),
            100,
            Notification::new(0, 1),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.notify_waitsome(2, 0..1, Timeout::Block).unwrap();
        // SAFETY: the user pointer is valid; the notification ordered the write.
        let got = unsafe { std::slice::from_raw_parts(mem.add(8192), 100) };
        assert_eq!(got, &pattern_vec(left as u64, 100)[..]);
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
        ctx.segment_delete(2).unwrap();
        // Private memory again, content preserved.
        // SAFETY: still our allocation.
        let again = unsafe { std::slice::from_raw_parts(mem.add(8192), 100) };
        assert_eq!(again, &pattern_vec(left as u64, 100)[..]);
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(mem, layout) };
        // Memory whose words would be misaligned is refused with an
        // explanation.
        let odd = vec![0u8; 10_000];
        // SAFETY: the call fails before touching the memory.
        let e = unsafe { ctx.segment_bind(3, odd.as_ptr().wrapping_add(1) as *mut u8, 4096) }
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("aligned to 8"),
            "{e}"
        );
        // SAFETY: as above.
        let e = unsafe { ctx.segment_bind(3, std::ptr::null_mut(), 4096) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(ctx.segment_list().is_empty());
        barrier(ctx);
    });
}

#[test]
fn memory_not_in_whole_pages_is_bound_as_a_private_segment() {
    // GPI-2's seg_use_buffer, seg_reuse_buffer and seg_avail_locally bind
    // `malloc`ed buffers; here a Vec's, at an address 8 more than a
    // multiple of 16, so never page-aligned. Its data stays this rank's:
    // the rank writes from it and reads into it; other ranks of its host
    // may notify it but not reach its data; ranks of other hosts reach it
    // through the transport.
    Job::new(&[2, 3]).run(|ctx| {
        let (right, left) = neighbours(ctx);
        let me = ctx.rank();
        let size = 4096;
        let mut words = vec![0u64; size / 8 + 64];
        let skip = if words.as_ptr() as usize % 16 == 0 { 1 } else { 2 };
        let mem = words[skip..].as_mut_ptr().cast::<u8>();
        let mine = pattern_vec(me as u64, size);
        // SAFETY: `words` holds `size` bytes past `mem`; no reference to
        // them is used while the segments exist.
        unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), mem, size) };
        // SAFETY: valid until the segments are deleted below.
        unsafe { ctx.segment_use(0, mem, size, GroupId::ALL, Timeout::Block) }.unwrap();
        assert_eq!(ctx.segment_ptr(0).unwrap(), mem);
        assert_eq!(ctx.segment_list(), vec![0]);
        // Views of it: of its words, not of elements it is not aligned for
        // (the memory is 8 bytes past a 16-byte aligned address).
        let view = ctx.segment::<u64>(0).unwrap();
        assert_eq!(view.get(3).to_ne_bytes(), mine[24..32]);
        drop(view);
        let e = ctx.segment::<u128>(0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let mut other = vec![0u64; size / 8];
        // SAFETY: fails before touching the memory (the id is taken).
        let e = unsafe { ctx.segment_bind(0, other.as_mut_ptr().cast(), size) }.unwrap_err();
        assert!(matches!(e, Error::SegmentExists { segment: 0 }), "{e}");
        let received = segment(ctx, 1, size);
        // From the private segment to the right neighbour's segment 1.
        ctx.write_notify(
            Local::new(0, 0),
            Remote::new(right, 1, 0),
            size,
            Notification::new(0, 1),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.notify_waitsome(1, 0..1, Timeout::Block).unwrap();
        check(&received, 0, size, left as u64, "written from a private segment");
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
        // Into it: what this rank wrote to the right neighbour, read back.
        ctx.read(Local::new(0, 1000), Remote::new(right, 1, 0), 500, 0, Timeout::Block)
            .unwrap();
        ctx.wait(0, Timeout::Block).unwrap();
        // SAFETY: the read is complete; no rank writes this memory now.
        let got = unsafe { std::slice::from_raw_parts(mem.add(1000), 500) };
        assert_eq!(got, &mine[..500]);
        // A part of it bound as a segment of its own is private too.
        let inner = (64 - mem as usize % 64) % 64;
        // SAFETY: inside segment 0, 64-byte aligned.
        unsafe { ctx.segment_use(2, mem.add(inner), 256, GroupId::ALL, Timeout::Block) }.unwrap();
        // Other ranks of the host notify it, and cannot reach its data.
        ctx.notify(right, 0, Notification::new(3, 5), 0, Timeout::Block)
            .unwrap();
        received.copy_from_slice(0, &[0xAB, 0, 0, 0, 0, 0, 0, 0]);
        let put = ctx.write(Local::new(1, 0), Remote::new(right, 0, 8), 8, 0, Timeout::Block);
        let inner_put = ctx.write(Local::new(1, 0), Remote::new(right, 2, 0), 8, 0, Timeout::Block);
        let get = ctx.read(Local::new(1, 64), Remote::new(right, 0, 8), 8, 0, Timeout::Block);
        let add = ctx.atomic_fetch_add(Remote::new(right, 0, 0), 1, Timeout::Block);
        if ctx.on_this_host(right) {
            for (e, seg) in [
                (put.unwrap_err(), 0),
                (inner_put.unwrap_err(), 2),
                (get.unwrap_err(), 0),
                (add.unwrap_err(), 0),
            ] {
                assert!(
                    matches!(e, Error::SegmentPrivate { rank, segment } if rank == right && segment == seg),
                    "{e}"
                );
                assert!(e.to_string().contains("private"), "{e}");
            }
        } else {
            put.unwrap();
            inner_put.unwrap();
            get.unwrap();
            add.unwrap();
        }
        assert_eq!(ctx.notify_waitsome(0, 3..4, Timeout::Block).unwrap(), 3);
        assert_eq!(ctx.notify_reset(0, 3).unwrap(), 5);
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
        let mut expect = mine.clone();
        expect.copy_within(..500, 1000); // the read above
        if !ctx.on_this_host(left) {
            // The left neighbour's write, then its addition.
            expect[8..16].copy_from_slice(&[0xAB, 0, 0, 0, 0, 0, 0, 0]);
            expect[inner..inner + 8].copy_from_slice(&[0xAB, 0, 0, 0, 0, 0, 0, 0]);
            let word = u64::from_ne_bytes(expect[..8].try_into().unwrap());
            expect[..8].copy_from_slice(&word.wrapping_add(1).to_ne_bytes());
        }
        ctx.segment_delete(0).unwrap();
        ctx.segment_delete(2).unwrap();
        ctx.segment_delete(1).unwrap();
        drop(received);
        barrier(ctx);
        // The memory is the caller's again, with its content.
        // SAFETY: no segment covers it any more.
        let bytes = unsafe { std::slice::from_raw_parts(mem, size) };
        let wrong: Vec<usize> = (0..size).filter(|&i| bytes[i] != expect[i]).collect();
        assert!(
            wrong.is_empty(),
            "{} bytes differ, from {:?} (inner segment at {inner})",
            wrong.len(),
            &wrong[..wrong.len().min(16)]
        );
        other[0] = 1;
        words[0] = 1;
    });
}

#[test]
fn typed_views_copy_and_index_elements() {
    Job::new(&[2]).run(|ctx| {
        let seg = segment(ctx, 0, 1000);
        let v = ctx.segment::<u32>(0).unwrap();
        assert_eq!(v.len(), 250);
        v.fill(7);
        assert!(v.to_vec().iter().all(|&x| x == 7));
        v.copy_from_slice(10, &[1, 2, 3]);
        let mut out = [0u32; 4];
        v.copy_to_slice(9, &mut out);
        assert_eq!(out, [7, 1, 2, 3]);
        v.set(249, 42);
        assert_eq!(v.get(249), 42);
        assert!(std::panic::catch_unwind(|| v.get(250)).is_err());
        // SAFETY: no other rank or thread writes segment 0 of this rank now.
        assert_eq!(unsafe { v.as_slice() }[11], 2);
        assert_eq!(seg.len(), 1000);
        barrier(ctx);
    });
}

#[test]
fn segment_limits_are_enforced() {
    let cfg = Config {
        segment_max: 8,
        ..Default::default()
    };
    Job::new(&[2]).config(cfg).run(|ctx| {
        assert_eq!(ctx.segment_max(), 8);
        for s in 0..8 {
            ctx.segment_alloc(s, 64, Alloc::Initialized).unwrap();
        }
        assert!(matches!(
            ctx.segment_alloc(8, 64, Alloc::Initialized),
            Err(Error::InvalidSegmentId { segment: 8, max: 8 })
        ));
        assert!(matches!(
            ctx.segment_avail_local(),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            ctx.segment_alloc(3, 64, Alloc::Initialized),
            Err(Error::SegmentExists { segment: 3 })
        ));
        ctx.segment_delete(3).unwrap();
        assert!(matches!(
            ctx.segment_alloc(3, 0, Alloc::Initialized),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(ctx.segment_avail_local().unwrap(), 3);
        barrier(ctx);
    });
}

#[test]
fn segments_bound_inside_another_segment_share_its_memory() {
    // GPI-2's seg_subsegments, and beyond it: the sub-segments and the
    // segment around them are one memory, from every rank.
    Job::new(&[2, 3]).run(|ctx| {
        let (right, left) = neighbours(ctx);
        let page = 4096;
        let base = segment(ctx, 0, 4 * page).as_ptr(); // the view goes at once
        // SAFETY: inside segment 0, which outlives both (deleted last).
        unsafe {
            ctx.segment_bind(1, base, page).unwrap();
            ctx.segment_bind(2, base.add(page), page).unwrap();
        }
        assert_eq!(ctx.segment_ptr(1).unwrap(), base);
        assert_eq!(ctx.segment_ptr(2).unwrap(), unsafe { base.add(page) });
        ctx.segment_register(2, left, Timeout::Block).unwrap();
        let lower = ctx.segment::<u32>(1).unwrap();
        lower.fill(ctx.rank() as u32);
        barrier(ctx);
        // Lower part to the right neighbour's upper part, as GPI-2's test.
        ctx.write_notify(
            Local::new(1, 0),
            Remote::new(right, 2, 0),
            page,
            Notification::new(0, 1),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.notify_waitsome(2, 0..1, Timeout::Block).unwrap();
        ctx.notify_reset(2, 0).unwrap();
        let upper = ctx.segment::<u32>(2).unwrap();
        assert!(upper.to_vec().iter().all(|&x| x == left as u32));
        // The same bytes through segment 0.
        let whole = ctx.segment::<u32>(0).unwrap();
        assert_eq!(whole.get(page / 4 + 7), left as u32);
        assert_eq!(whole.get(3), ctx.rank() as u32);
        // A write into segment 0 shows in segment 2.
        let mark = |r: u16| 1000 + r as u32;
        whole.set(3 * page / 4, mark(ctx.rank()));
        ctx.wait(0, Timeout::Block).unwrap();
        barrier(ctx);
        // This rank's mark into the right neighbour's segment 0 at `at`.
        let put_mark = |at| {
            ctx.write(
                Local::new(0, 3 * page),
                Remote::new(right, 0, at),
                4,
                0,
                Timeout::Block,
            )
            .unwrap();
            ctx.wait(0, Timeout::Block).unwrap();
            barrier(ctx);
        };
        put_mark(page + 8);
        assert_eq!(upper.get(2), mark(left));
        // Deleting the sub-segments leaves segment 0 and its content.
        ctx.segment_delete(1).unwrap();
        ctx.segment_delete(2).unwrap();
        barrier(ctx);
        put_mark(page + 12);
        assert_eq!(whole.get(page / 4 + 3), mark(left));
        assert_eq!(whole.get(page / 4 + 2), mark(left));
        assert_eq!(whole.get(page / 4 + 7), left as u32);
        barrier(ctx);
    });
}

#[test]
fn a_segment_inside_another_outlives_it_and_overlaps_are_refused() {
    Job::new(&[2, 3]).run(|ctx| {
        let (right, left) = neighbours(ctx);
        let page = 4096;
        let all = |s| {
            for r in 0..ctx.num_ranks() {
                ctx.segment_register(s, r, Timeout::Block).unwrap();
            }
        };
        // 8 bytes to a neighbour, complete there for everyone afterwards.
        let put = |from, to| {
            ctx.write(from, to, 8, 0, Timeout::Block).unwrap();
            ctx.wait(0, Timeout::Block).unwrap();
            barrier(ctx);
        };
        let base = segment(ctx, 0, 4 * page).as_ptr(); // the view goes at once
        // SAFETY: inside segment 0, kept mapped by segment 1 (see below).
        unsafe { ctx.segment_bind(1, base.add(page), 2 * page) }.unwrap();
        all(1);
        // Overlapping segment 0 without lying inside it, and inside it at
        // an address no element type could use: refused.
        for (at, len, says) in [
            (3 * page as isize, 2 * page, "overlap"),
            (-(page as isize), 2 * page, "overlap"),
            (page as isize + 8, 64, "aligned"),
        ] {
            // SAFETY: refused before anything is bound.
            let e = unsafe { ctx.segment_bind(3, base.wrapping_offset(at), len) }.unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument(_)) && e.to_string().contains(says),
                "{e}"
            );
        }
        barrier(ctx);
        // Segment 0 goes first; peers reach segment 1 only afterwards.
        ctx.segment_delete(0).unwrap();
        barrier(ctx);
        let v = ctx.segment::<u64>(1).unwrap();
        v.set(0, 7000 + ctx.rank() as u64);
        ctx.write_notify(
            Local::new(1, 0),
            Remote::new(right, 1, page),
            8,
            Notification::new(5, 1),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.notify_waitsome(1, 5..6, Timeout::Block).unwrap();
        assert_eq!(ctx.notify_reset(1, 5).unwrap(), 1);
        assert_eq!(v.get(page / 8), 7000 + left as u64);
        // A segment inside segment 1 (so inside the deleted one's memory).
        // SAFETY: inside segment 1.
        unsafe { ctx.segment_bind(2, base.add(2 * page), 64) }.unwrap();
        all(2);
        barrier(ctx);
        put(Local::new(1, 0), Remote::new(right, 2, 8));
        assert_eq!(ctx.segment::<u64>(2).unwrap().get(1), 7000 + left as u64);
        assert_eq!(v.get(page / 8 + 1), 7000 + left as u64);
        drop(v);
        ctx.segment_delete(1).unwrap();
        ctx.segment_delete(2).unwrap();

        // User memory, and a segment inside it that outlives it.
        let layout = std::alloc::Layout::from_size_align(2 * page, page).unwrap();
        // SAFETY: non-zero size.
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        // SAFETY: page aligned, ours, valid until deallocated after both
        // segments are deleted.
        unsafe {
            ctx.segment_bind(4, mem, 2 * page).unwrap();
            ctx.segment_bind(5, mem.add(page), page).unwrap();
        }
        all(5);
        barrier(ctx);
        ctx.segment_delete(4).unwrap();
        barrier(ctx);
        ctx.segment::<u64>(5)
            .unwrap()
            .set(0, 9000 + ctx.rank() as u64);
        put(Local::new(5, 0), Remote::new(right, 5, 16));
        // SAFETY: our allocation; the write before the barrier landed.
        let got = unsafe { mem.add(page + 16).cast::<u64>().read() };
        assert_eq!(got, 9000 + left as u64);
        ctx.segment_delete(5).unwrap();
        // Private memory again, content kept.
        // SAFETY: as above.
        assert_eq!(unsafe { mem.add(page + 16).cast::<u64>().read() }, got);
        // SAFETY: allocated above with this layout; no segment uses it.
        unsafe { std::alloc::dealloc(mem, layout) };

        // A window's memory is the node's: never a segment of one rank.
        ctx.window_create(6, 4096, GroupId::ALL, Timeout::Block)
            .unwrap();
        let at = ctx.segment_ptr(6).unwrap();
        // SAFETY: refused before anything is bound.
        let e = unsafe { ctx.segment_bind(7, at, 64) }.unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("window 6"),
            "{e}"
        );
        barrier(ctx);
    });
}
