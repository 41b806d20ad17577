//! The element-wise loops of the reductions, and the call tag.

use crate::engine::memcopy::copy_slice;
use bytemuck::Pod;

/// The notification value that tags call `call` (never 0).
pub(super) fn tag(call: u64) -> u32 {
    ((call % u32::MAX as u64) + 1) as u32
}

/// Run `body` on the slices `input(0..n)`, gathered without allocating
/// for up to 16 of them (the usual node or job of a small call).
pub(super) fn with_slices<'s, T: 's, R>(
    n: usize,
    input: impl Fn(usize) -> &'s [T],
    body: impl FnOnce(&[&'s [T]]) -> R,
) -> R {
    const ON_STACK: usize = 16;
    if n <= ON_STACK {
        let mut slices: [&[T]; ON_STACK] = [&[]; ON_STACK];
        for (k, s) in slices[..n].iter_mut().enumerate() {
            *s = input(k);
        }
        body(&slices[..n])
    } else {
        body(&(0..n).map(input).collect::<Vec<_>>())
    }
}

/// `out = f(...f(f(inputs[0], inputs[1]), inputs[2])...)` element-wise, a
/// block at a time (the block stays in L1 while every input is folded in).
/// The first two inputs are combined straight into `out` (no copy of the
/// first one before it).
///
/// Where the CPU has AVX2 (detected at run time; the crate is built for
/// baseline x86-64), the same loop compiled for AVX2 runs: four `f64`s per
/// instruction instead of two (allreduces into the caller's buffer of
/// 64 KiB to 1 MiB 8-16% faster, measured with the whole crate built for
/// x86-64-v3).
pub(super) fn reduce_slices<T: Pod, F: Fn(&T, &T) -> T>(out: &mut [T], inputs: &[&[T]], f: &F) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above), the only requirement of
        // a function that merely enables it.
        unsafe { reduce_slices_avx2(out, inputs, f) };
        return;
    }
    reduce_blocks(out, inputs, f);
}

/// [`reduce_blocks`] compiled for AVX2. (`unsafe` only because Rust
/// 1.85, the crate's oldest, allows `target_feature` on no other function.)
///
/// # Safety
/// The CPU has AVX2.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "avx2")]
unsafe fn reduce_slices_avx2<T: Pod, F: Fn(&T, &T) -> T>(out: &mut [T], inputs: &[&[T]], f: &F) {
    reduce_blocks(out, inputs, f);
}

/// The loop of [`reduce_slices`], inlined into each of its builds.
#[inline(always)]
fn reduce_blocks<T: Pod, F: Fn(&T, &T) -> T>(out: &mut [T], inputs: &[&[T]], f: &F) {
    const BLOCK: usize = 1024;
    let Some((first, rest)) = inputs.split_first() else {
        return;
    };
    for (b, o) in out.chunks_mut(BLOCK).enumerate() {
        let at = b * BLOCK..b * BLOCK + o.len();
        let Some((second, more)) = rest.split_first() else {
            copy_slice(o, &first[at]);
            continue;
        };
        for ((x, a), c) in o
            .iter_mut()
            .zip(&first[at.clone()])
            .zip(&second[at.clone()])
        {
            *x = f(a, c);
        }
        for input in more {
            fold_into(o, &input[at.clone()], f);
        }
    }
}

/// `acc[k] = f(acc[k], b[k])`: `acc` holds the earlier inputs.
#[inline(always)]
pub(super) fn fold_into<T, F: Fn(&T, &T) -> T>(acc: &mut [T], b: &[T], f: &F) {
    for (x, y) in acc.iter_mut().zip(b) {
        *x = f(x, y);
    }
}

/// `acc[k] = f(a[k], acc[k])`: `a` holds the earlier inputs.
pub(super) fn fold_from<T, F: Fn(&T, &T) -> T>(acc: &mut [T], a: &[T], f: &F) {
    for (x, y) in acc.iter_mut().zip(a) {
        *x = f(y, x);
    }
}
