//! The reduction operations and element types of the typed allreduces
//! (`gaspi_operation_t`, `gaspi_datatype_t`).

use bytemuck::Pod;

/// A reduction operation of the typed allreduce (`gaspi_operation_t`).
///
/// ```
/// use gaspi::{Config, Context, GroupId, ReduceOp, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let mut out = [0i32; 1];
/// ctx.allreduce(&[-(ctx.rank() as i32)], &mut out, ReduceOp::Min, GroupId::ALL, Timeout::Block)?;
/// assert_eq!(out[0], -(ctx.num_ranks() as i32 - 1));
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Smallest element (`GASPI_OP_MIN`); for floats `f64::min` (a NaN
    /// loses against a number).
    Min,
    /// Largest element (`GASPI_OP_MAX`); for floats `f64::max`.
    Max,
    /// Sum (`GASPI_OP_SUM`); integers wrap around on overflow.
    Sum,
    /// Product (an extension of GASPI's operations); integers wrap around
    /// on overflow.
    Prod,
}

/// Run `$body` with `$f` bound to the closure of `$op` on `$t`, so that
/// the operation is fixed at compile time inside the reduction loops.
macro_rules! with_op {
    ($op:expr, $t:ty, |$f:ident| $body:expr) => {
        match $op {
            $crate::collectives::ReduceOp::Min => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::collectives::Reducible>::reduce(
                        $crate::collectives::ReduceOp::Min,
                        *a,
                        *b,
                    )
                };
                $body
            }
            $crate::collectives::ReduceOp::Max => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::collectives::Reducible>::reduce(
                        $crate::collectives::ReduceOp::Max,
                        *a,
                        *b,
                    )
                };
                $body
            }
            $crate::collectives::ReduceOp::Sum => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::collectives::Reducible>::reduce(
                        $crate::collectives::ReduceOp::Sum,
                        *a,
                        *b,
                    )
                };
                $body
            }
            $crate::collectives::ReduceOp::Prod => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::collectives::Reducible>::reduce(
                        $crate::collectives::ReduceOp::Prod,
                        *a,
                        *b,
                    )
                };
                $body
            }
        }
    };
}
pub(crate) use with_op;

mod sealed {
    pub trait Sealed {}
}

/// Element types of the typed allreduce (`gaspi_datatype_t`): `i32`,
/// `u32`, `i64`, `u64`, `f32`, `f64`.
///
/// ```
/// use gaspi::{ReduceOp, Reducible};
/// fn total<T: Reducible>(xs: &[T]) -> T {
///     xs.iter().copied().reduce(|a, b| T::reduce(ReduceOp::Sum, a, b)).unwrap()
/// }
/// assert_eq!(total(&[1.5f32, 2.5]), 4.0);
/// assert_eq!(<u64 as Reducible>::GASPI_TYPE, "GASPI_TYPE_ULONG");
/// ```
pub trait Reducible: Pod + sealed::Sealed {
    /// The GASPI name of the type, e.g. `GASPI_TYPE_DOUBLE`.
    const GASPI_TYPE: &'static str;
    /// Combine two elements.
    fn reduce(op: ReduceOp, a: Self, b: Self) -> Self;
}

/// `Reducible` for `$t`, named `$name`, with `$sum` as its sum.
macro_rules! reducible {
    ($($t:ty => $name:literal, $sum:expr, $prod:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            const GASPI_TYPE: &'static str = $name;
            #[inline(always)]
            fn reduce(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Sum => $sum(a, b),
                    ReduceOp::Prod => $prod(a, b),
                }
            }
        }
    )*};
}

reducible! {
    i32 => "GASPI_TYPE_INT", i32::wrapping_add, i32::wrapping_mul;
    u32 => "GASPI_TYPE_UINT", u32::wrapping_add, u32::wrapping_mul;
    i64 => "GASPI_TYPE_LONG", i64::wrapping_add, i64::wrapping_mul;
    u64 => "GASPI_TYPE_ULONG", u64::wrapping_add, u64::wrapping_mul;
    f32 => "GASPI_TYPE_FLOAT", |a: f32, b: f32| a + b, |a: f32, b: f32| a * b;
    f64 => "GASPI_TYPE_DOUBLE", |a: f64, b: f64| a + b, |a: f64, b: f64| a * b;
}
