//! Copies of plain bytes: every copy the runtime makes of a transfer, a
//! collective's result or a message goes through [`copy_nonoverlapping`]
//! (raw memory) or [`copy_slice`] (Rust slices).
//!
//! Why not always `memcpy`: glibc (2.36, Debian 12) copies sizes from a
//! few KiB up to its non-temporal threshold with `rep movsb`, and on an
//! AMD EPYC Zen 3 VM `rep movsb` runs at 1.5-2.8 GB/s instead of 30-90
//! GB/s when the destination's offset within a 4 KiB page is 1..31 bytes
//! past the source's — 20-30 times slower (on a Zen 5 VM 1..15 bytes: 3-4
//! GB/s against 36-58). GASPI offsets are the user's, windows start on
//! pages, and a `Vec` of 128 KiB or more starts 16 bytes into a page, so
//! a collective's result copied out of a window into the caller's buffer
//! hit that case on Zen 3 wherever the allocator put it so (64 KiB per
//! rank allgatherv into private buffers: 350 us instead of 43); on Zen 5
//! buffers at odd `u64` offsets do. Where the CPU has AVX2 and
//! `memcpy` is that slow at such offsets (measured once per process,
//! with how far the slow offsets reach: [`crate::sys::slow_copy_offsets`],
//! about 0.2 ms), copies from [`LOOP_MIN`] bytes on between such offsets
//! ([`offsets_alias`]) take 32-byte vector loads and aligned stores
//! instead: as fast at those offsets as glibc's at the same page offset.
//! Every other copy is glibc's, which was faster there from 1 MiB on (on
//! the EPYC VM, with the loop for every copy: an in-place alltoallv of 1
//! MiB per pair took 1.7 times, a private allgatherv of 1 MiB per rank
//! 1.25 times the time). Elsewhere every copy is
//! `std::ptr::copy_nonoverlapping` (glibc's `memcpy`): on Intel Xeons with
//! fast `rep movsb` (ERMS, FSRM) it is not slowed by offsets, and it
//! copied a collective's result out of the node's window faster than the
//! vector loop (64 KiB per rank allgatherv into private buffers 0.83 of
//! the loop's time, 4 ranks on a 2-core Xeon VM; see
//! docs/guide/benchmarking.md).
//!
//! The stores are ordinary (cached, ordered by x86's total store order),
//! so the `SeqCst` notification store that follows a copy publishes it as
//! it did with `memcpy`.

/// The smallest copy that takes the vector loop; below it glibc copies
/// with vector moves of its own, never `rep movsb`.
const LOOP_MIN: usize = 2048;

/// Which copies of [`LOOP_MIN`] bytes or more take the vector loop: those
/// whose destination lies 1 to `n - 1` bytes past the source's offset
/// within a page ([`offsets_alias`]), where the CPU has AVX2 and glibc's
/// `memcpy` is three or more times slower there than at the same page
/// offset ([`crate::sys::slow_copy_offsets`]); 0: none. Measured once per
/// process.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn vector_loop() -> usize {
    static LOOP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LOOP.get_or_init(|| {
        if !std::is_x86_feature_detected!("avx2") {
            return 0;
        }
        crate::sys::slow_copy_offsets(|src, dst| {
            dst.copy_from_slice(src);
            // The copy is kept (no one reads `dst` otherwise).
            std::hint::black_box(dst);
            Some(())
        })
    })
}

/// Make the choice of [`vector_loop`] now (at start-up), rather than in
/// the first large copy, which may be a timed call.
pub(crate) fn prepare() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    vector_loop();
}

/// Whether a copy from `src` to `dst` puts the destination 1 to `slow -
/// 1` bytes past the source's offset within a 4 KiB page, where `rep
/// movsb` is slow on a CPU whose slow offsets reach that far
/// ([`crate::sys::slow_copy_offsets`]; `slow` 0: nowhere). Wrapping: only
/// the offset within a page matters.
pub(crate) fn offsets_alias(src: usize, dst: usize, slow: usize) -> bool {
    (1..slow).contains(&(dst.wrapping_sub(src) % 4096))
}

/// Copy `len` bytes from `src` to `dst`, as [`std::ptr::copy_nonoverlapping`]
/// (with the vector loop at offsets that alias, where [`vector_loop`] says
/// glibc's copy is slow there).
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]: `src` readable and `dst` writable
/// for `len` bytes, the two ranges disjoint. No alignment is required.
/// Other processes may read or write the ranges concurrently (shared
/// mappings): the bytes are plain data and no Rust reference covers them.
pub(crate) unsafe fn copy_nonoverlapping(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if len >= LOOP_MIN && offsets_alias(src as usize, dst as usize, vector_loop()) {
        // SAFETY: the caller's promise; AVX2 is present (`vector_loop`).
        unsafe { x86::copy_avx2::<false>(src, dst, len) };
        return;
    }
    // SAFETY: the caller's promise, the same contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
}

/// Copy `len` bytes from `src` to `dst`, where the ranges may overlap (as
/// [`std::ptr::copy`]): disjoint ranges take [`copy_nonoverlapping`], or
/// with `streaming` [`copy_nonoverlapping_streaming`].
///
/// # Safety
/// As [`std::ptr::copy`]: `src` readable and `dst` writable for `len`
/// bytes; see [`copy_nonoverlapping`] on concurrent access.
pub(crate) unsafe fn copy_with(src: *const u8, dst: *mut u8, len: usize, streaming: bool) {
    let (s, d) = (src as usize, dst as usize);
    if s.abs_diff(d) >= len {
        // SAFETY: the ranges are disjoint (checked), the contract of both
        // copies; the rest is the caller's.
        unsafe { copy_nonoverlapping_with(src, dst, len, streaming) };
    } else {
        // SAFETY: the caller's promise, the same contract.
        unsafe { std::ptr::copy(src, dst, len) };
    }
}

/// `dst.copy_from_slice(src)` through [`copy_nonoverlapping`]; panics if
/// the lengths differ, as `copy_from_slice` does.
pub(crate) fn copy_slice<T: bytemuck::Pod>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "copy_slice: lengths differ");
    let len = std::mem::size_of_val(src);
    // SAFETY: both are valid slices of `len` bytes, and a `&mut` slice
    // cannot overlap a `&` one; `Pod` elements are plain bytes.
    unsafe { copy_nonoverlapping(src.as_ptr().cast(), dst.as_mut_ptr().cast(), len) };
}

/// [`copy_slice`] with non-temporal stores where the CPU has AVX2 (from
/// [`LOOP_MIN`] bytes on): the destination's lines go to memory without
/// being read first and without displacing the caches. For large results
/// that the caller writes once and that would not stay in the caches
/// anyway (a collective's private copies of several MiB per rank); it
/// ends with a store fence, so a later `SeqCst` store still publishes it.
pub(crate) fn copy_slice_streaming<T: bytemuck::Pod>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "copy_slice: lengths differ");
    let len = std::mem::size_of_val(src);
    // SAFETY: both are valid slices of `len` bytes that cannot overlap (a
    // `&mut` and a `&` slice); `Pod` elements are plain bytes.
    unsafe { copy_nonoverlapping_streaming(src.as_ptr().cast(), dst.as_mut_ptr().cast(), len) };
}

/// [`copy_slice`], or with `streaming` [`copy_slice_streaming`].
pub(crate) fn copy_slice_with<T: bytemuck::Pod>(dst: &mut [T], src: &[T], streaming: bool) {
    if streaming {
        copy_slice_streaming(dst, src);
    } else {
        copy_slice(dst, src);
    }
}

/// [`copy_nonoverlapping`], or with `streaming`
/// [`copy_nonoverlapping_streaming`].
///
/// # Safety
/// As [`copy_nonoverlapping`].
pub(crate) unsafe fn copy_nonoverlapping_with(
    src: *const u8,
    dst: *mut u8,
    len: usize,
    streaming: bool,
) {
    // SAFETY: the caller's promise, the contract of both.
    unsafe {
        if streaming {
            copy_nonoverlapping_streaming(src, dst, len);
        } else {
            copy_nonoverlapping(src, dst, len);
        }
    }
}

/// [`copy_nonoverlapping`] with non-temporal stores where the CPU has AVX2
/// (from [`LOOP_MIN`] bytes on), ending with a store fence, as
/// [`copy_slice_streaming`]: for data that another core reads next, when
/// handing dirty lines from cache to cache is slower than memory.
///
/// # Safety
/// As [`copy_nonoverlapping`].
pub(crate) unsafe fn copy_nonoverlapping_streaming(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if len >= LOOP_MIN && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the caller's promise; AVX2 is present (checked above).
        unsafe { x86::copy_avx2::<true>(src, dst, len) };
        return;
    }
    // SAFETY: the caller's promise, the same contract.
    unsafe { copy_nonoverlapping(src, dst, len) };
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86 {
    use std::arch::x86_64::{
        __m256i, _mm_sfence, _mm256_loadu_si256, _mm256_store_si256, _mm256_storeu_si256,
        _mm256_stream_si256,
    };

    /// One aligned 32-byte store: non-temporal with `NT`.
    ///
    /// # Safety
    /// `d` is 32-byte aligned and writable for 32 bytes; AVX2 is present.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn store<const NT: bool>(d: *mut u8, v: __m256i) {
        // SAFETY: the caller's promise.
        unsafe {
            if NT {
                _mm256_stream_si256(d.cast::<__m256i>(), v)
            } else {
                _mm256_store_si256(d.cast::<__m256i>(), v)
            }
        }
    }

    /// The vector loop: the first and last 32 bytes unaligned, everything
    /// between with unaligned loads and stores aligned to 32 bytes, four
    /// vectors per round; with `NT`, those stores are non-temporal and a
    /// store fence follows them.
    ///
    /// # Safety
    /// As [`super::copy_nonoverlapping`], with `len >= 64` and AVX2 present.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_avx2<const NT: bool>(src: *const u8, dst: *mut u8, len: usize) {
        const V: usize = 32;
        debug_assert!(len >= 2 * V);
        // SAFETY: the caller vouches for src..src+len and dst..dst+len,
        // disjoint, with len >= 64. `skip` is 1..=32, so
        // the aligned stores start inside the first 32 bytes, and every
        // vector at `d < end` (end = dst + len - 32) ends before dst + len,
        // its source before src + len; the head and tail vectors cover the
        // bytes before `dst + skip` and after the last full vector.
        unsafe {
            let head = _mm256_loadu_si256(src.cast::<__m256i>());
            let tail = _mm256_loadu_si256(src.add(len - V).cast::<__m256i>());
            let skip = V - (dst as usize & (V - 1));
            let (mut s, mut d) = (src.add(skip), dst.add(skip));
            let end = dst as usize + len - V;
            while d as usize + 4 * V <= end {
                let a = _mm256_loadu_si256(s.cast::<__m256i>());
                let b = _mm256_loadu_si256(s.add(V).cast::<__m256i>());
                let c = _mm256_loadu_si256(s.add(2 * V).cast::<__m256i>());
                let e = _mm256_loadu_si256(s.add(3 * V).cast::<__m256i>());
                store::<NT>(d, a);
                store::<NT>(d.add(V), b);
                store::<NT>(d.add(2 * V), c);
                store::<NT>(d.add(3 * V), e);
                s = s.add(4 * V);
                d = d.add(4 * V);
            }
            while (d as usize) < end {
                store::<NT>(d, _mm256_loadu_si256(s.cast::<__m256i>()));
                s = s.add(V);
                d = d.add(V);
            }
            if NT {
                // The streamed lines are ordered before whatever this
                // thread stores next (x86 orders ordinary stores, not
                // non-temporal ones).
                _mm_sfence();
            }
            _mm256_storeu_si256(dst.cast::<__m256i>(), head);
            _mm256_storeu_si256(dst.add(len - V).cast::<__m256i>(), tail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a test copies: the runtime's choice, the streaming copy, or
    /// the vector loop itself (whichever the machine's choice is).
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Way {
        Chosen,
        Streaming,
        Loop,
    }

    /// Every length around the loop's edges and every relative alignment
    /// of source and destination within a vector: the copy (as chosen,
    /// streaming, and by the vector loop) equals the source and touches no
    /// byte outside the destination.
    #[test]
    fn copies_every_length_and_alignment_exactly() {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        let has_loop = std::is_x86_feature_detected!("avx2");
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        let has_loop = false;
        let lens = (0..80).chain(LOOP_MIN - 70..LOOP_MIN + 300).chain([
            4096,
            4096 + 31,
            65536 + 17,
            1 << 20,
        ]);
        for len in lens {
            let src: Vec<u8> = (0..len + 64).map(|i| (i * 7 + 3) as u8).collect();
            for so in [0, 1, 8, 16, 31, 32, 33] {
                for (d_off, way) in [0, 1, 7, 8, 16, 24, 31, 32, 63]
                    .into_iter()
                    .flat_map(|d| [(d, Way::Chosen), (d, Way::Streaming), (d, Way::Loop)])
                {
                    if way == Way::Loop && (!has_loop || len < 64) {
                        continue;
                    }
                    let mut dst = vec![0xA5u8; len + 128];
                    let to = &mut dst[d_off..d_off + len];
                    match way {
                        Way::Streaming => copy_slice_streaming(to, &src[so..so + len]),
                        // SAFETY: both ranges lie inside their vectors.
                        Way::Chosen => unsafe {
                            copy_nonoverlapping(src.as_ptr().add(so), to.as_mut_ptr(), len)
                        },
                        #[cfg(all(target_arch = "x86_64", not(miri)))]
                        // SAFETY: both ranges lie inside their vectors,
                        // len >= 64, and the CPU has AVX2 (`has_loop`).
                        Way::Loop => unsafe {
                            x86::copy_avx2::<false>(src.as_ptr().add(so), to.as_mut_ptr(), len)
                        },
                        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
                        Way::Loop => unreachable!("no vector loop here"),
                    }
                    let what = format!("len {len}, {way:?}");
                    assert_eq!(&dst[d_off..d_off + len], &src[so..so + len], "{what}");
                    assert!(dst[..d_off].iter().all(|&b| b == 0xA5), "{what}: before");
                    assert!(
                        dst[d_off + len..].iter().all(|&b| b == 0xA5),
                        "{what}: after"
                    );
                }
            }
        }
    }

    /// Only a destination 1 to `slow - 1` bytes past the source's offset
    /// within a page aliases, whichever buffer lies first in memory;
    /// nothing where no offset is slow.
    #[test]
    fn offsets_alias_within_a_page_only() {
        let src = 1 << 20;
        for (dst, zen3, zen5) in [
            (src, false, false),
            (src + 1, true, true),
            (src + 8, true, true),
            (src + 15, true, true),
            (src + 16, true, false),
            (src + 31, true, false),
            (src + 32, false, false),
            (src + 64 + 8, false, false),
            (src + 4096 + 8, true, true),
            (src - 4096 + 24, true, false),
            (src - 16, false, false),
        ] {
            let what = format!("dst - src = {}", dst as isize - src as isize);
            assert_eq!(offsets_alias(src, dst, 32), zen3, "{what}");
            assert_eq!(offsets_alias(src, dst, 16), zen5, "{what}");
            assert!(!offsets_alias(src, dst, 0), "{what}");
        }
    }

    #[test]
    fn overlapping_copies_move_like_memmove() {
        // (Streaming or not: overlapping ranges never take the streaming
        // copy, disjoint ones (shift = len) do.)
        for (len, streaming) in [100, LOOP_MIN, 3 * LOOP_MIN + 5]
            .into_iter()
            .flat_map(|len| [(len, false), (len, true)])
        {
            for shift in [1usize, 8, 33, len / 2, len] {
                let what = format!("{len} by {shift}, streaming {streaming}");
                let orig: Vec<u8> = (0..len + shift).map(|i| (i % 251) as u8).collect();
                let mut fwd = orig.clone();
                let at = fwd.as_mut_ptr();
                // SAFETY: both ranges lie inside `fwd`.
                unsafe { copy_with(at, at.add(shift), len, streaming) };
                assert_eq!(&fwd[shift..], &orig[..len], "forward {what}");
                let mut back = orig.clone();
                let at = back.as_mut_ptr();
                // SAFETY: both ranges lie inside `back`.
                unsafe { copy_with(at.add(shift), at, len, streaming) };
                assert_eq!(&back[..len], &orig[shift..], "backward {what}");
            }
        }
    }

    #[test]
    fn copy_slice_copies_elements() {
        let src: Vec<u64> = (0..5000).collect();
        let mut dst = vec![0u64; 5000];
        copy_slice(&mut dst, &src);
        assert_eq!(dst, src);
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn copy_slice_refuses_different_lengths() {
        copy_slice(&mut [0u8; 3], &[1u8; 4]);
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn streaming_copy_refuses_different_lengths() {
        copy_slice_streaming(&mut [0u8; 3000], &[1u8; 3001]);
    }
}
