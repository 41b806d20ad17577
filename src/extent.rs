//! Checked arithmetic on the sizes, offsets and counts that come from
//! users: the one path by which such a number becomes a byte count, an end
//! offset or an object size.
//!
//! Every function refuses a result above [`MAX_BYTES`] (what `mmap` and
//! `off_t` can address, and what Rust allows one allocation or slice to
//! span) with [`Error::SizeOverflow`] naming the argument, instead of
//! wrapping. Code that maps, copies or allocates from a user's number goes
//! through here; a plain `+` or `*` on such a number is a defect.
//!
//! ```ignore
//! let bytes = extent::mul("count", count, size_of::<T>())?;
//! let end = extent::end("offset + size", offset, bytes)?;
//! ```

use crate::error::{Error, Result};

/// The largest byte count any object, mapping or buffer may have.
pub(crate) const MAX_BYTES: usize = isize::MAX as usize;

#[inline]
fn overflow(argument: &'static str) -> Error {
    Error::SizeOverflow {
        argument,
        max: MAX_BYTES,
    }
}

#[inline]
fn bounded(argument: &'static str, n: Option<usize>) -> Result<usize> {
    n.filter(|&n| n <= MAX_BYTES)
        .ok_or_else(|| overflow(argument))
}

/// `a + b`.
#[inline]
pub(crate) fn add(argument: &'static str, a: usize, b: usize) -> Result<usize> {
    bounded(argument, a.checked_add(b))
}

/// `a * b`.
#[inline]
pub(crate) fn mul(argument: &'static str, a: usize, b: usize) -> Result<usize> {
    bounded(argument, a.checked_mul(b))
}

/// The end of `len` bytes from `offset`: `offset + len` (an alias of
/// [`add`] that says what the sum is).
#[inline]
pub(crate) fn end(argument: &'static str, offset: usize, len: usize) -> Result<usize> {
    add(argument, offset, len)
}

/// The sum of `items`.
pub(crate) fn sum(argument: &'static str, items: impl IntoIterator<Item = usize>) -> Result<usize> {
    items
        .into_iter()
        .try_fold(0usize, |acc, n| add(argument, acc, n))
}

/// `n` rounded up to a multiple of `align` (a power of two).
pub(crate) fn align_up(argument: &'static str, n: usize, align: usize) -> Result<usize> {
    debug_assert!(align.is_power_of_two());
    bounded(argument, n.checked_add(align - 1).map(|m| m & !(align - 1)))
}

/// An overflow as the I/O error of the object being made
/// (`ErrorKind::OutOfMemory`: [`Error::making`] reports it as
/// [`Error::OutOfMemory`]).
pub(crate) fn io_error(e: Error) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::OutOfMemory, e.to_string())
}

/// `n` rounded up to a multiple of `align` (a power of two), for sizes the
/// crate itself fixes (type sizes, table sizes bounded by the
/// configuration); panics on overflow, which such sizes cannot reach.
pub(crate) const fn align_const(n: usize, align: usize) -> usize {
    match n.checked_add(align - 1) {
        Some(m) => m & !(align - 1),
        None => panic!("align_const: overflow"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_products_within_the_limit_are_exact() {
        assert_eq!(add("a", 3, 4).unwrap(), 7);
        assert_eq!(mul("a", 3, 4).unwrap(), 12);
        assert_eq!(sum("a", [1, 2, 3]).unwrap(), 6);
        assert_eq!(align_up("a", 4097, 4096).unwrap(), 8192);
        assert_eq!(align_up("a", 4096, 4096).unwrap(), 4096);
        assert_eq!(align_up("a", 0, 64).unwrap(), 0);
        assert_eq!(add("a", MAX_BYTES, 0).unwrap(), MAX_BYTES);
    }

    #[test]
    fn overflow_names_the_argument() {
        for r in [
            add("x", usize::MAX, 1),
            add("x", MAX_BYTES, 1),
            mul("x", usize::MAX / 2, 3),
            mul("x", 1 << 40, 1 << 30),
            sum("x", [MAX_BYTES, 1]),
            align_up("x", usize::MAX - 10, 4096),
            align_up("x", MAX_BYTES, 4096),
        ] {
            match r {
                Err(Error::SizeOverflow { argument: "x", max }) => assert_eq!(max, MAX_BYTES),
                other => panic!("{other:?}"),
            }
        }
    }
}
