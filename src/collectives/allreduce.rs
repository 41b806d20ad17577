//! `gaspi_allreduce` and `gaspi_allreduce_user`.
//!
//! Each member stores its contribution in the group's shared buffers,
//! meets the others at one barrier, and then reduces all contributions in
//! member order: `((c0 op c1) op c2) ...`. Every member therefore computes
//! the same operations in the same order, and gets bit-identical results,
//! floating point included, and the same inputs give the same output run
//! after run.
//!
//! A group whose members are on several hosts (GPI-2 engine) reduces
//! through GPI-2's allreduce instead, in a tree of adjacent member ranges
//! (`(c0 op c1) op (c2 op c3)` for four members), each step with the lower
//! range first: results are still bit-identical on every member and run
//! after run, and `op` still need not be commutative, but floating-point
//! sums are grouped differently than on one host (the operation must be
//! associative, up to rounding, either way).

use super::{GroupSync, Pending};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{GroupId, Timeout};
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
            $crate::ReduceOp::Min => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::Reducible>::reduce($crate::ReduceOp::Min, *a, *b)
                };
                $body
            }
            $crate::ReduceOp::Max => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::Reducible>::reduce($crate::ReduceOp::Max, *a, *b)
                };
                $body
            }
            $crate::ReduceOp::Sum => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::Reducible>::reduce($crate::ReduceOp::Sum, *a, *b)
                };
                $body
            }
            $crate::ReduceOp::Prod => {
                let $f = |a: &$t, b: &$t| {
                    <$t as $crate::Reducible>::reduce($crate::ReduceOp::Prod, *a, *b)
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

impl Context {
    /// Reduce `send` element-wise with `op` over every member of `group`;
    /// every member gets the result in `recv` (`gaspi_allreduce`). At most
    /// [`Config::allreduce_elem_max`](crate::Config::allreduce_elem_max)
    /// elements.
    ///
    /// Results are identical on every member and deterministic (see the
    /// module documentation). On timeout, call again with the same
    /// arguments to keep waiting.
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, ReduceOp, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let mut sum = [0u64; 2];
    /// ctx.allreduce(&[1, ctx.rank() as u64], &mut sum, ReduceOp::Sum, GroupId::ALL, Timeout::Block)?;
    /// let n = ctx.num_ranks() as u64;
    /// assert_eq!(sum, [n, n * (n - 1) / 2]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn allreduce<T: Reducible>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        group: GroupId,
        timeout: Timeout,
    ) -> Result<()> {
        let max = self.config.allreduce_elem_max as usize;
        if send.len() > max {
            return Err(Error::InvalidArgument(format!(
                "allreduce of {} elements: at most {max} (Config::allreduce_elem_max)",
                send.len()
            )));
        }
        self.allreduce_user(send, recv, |a, b| T::reduce(op, *a, *b), group, timeout)
    }

    /// Allreduce with a user-defined, element-wise operation on any
    /// plain-old-data type (`gaspi_allreduce_user`). `reduce(a, b)` must
    /// not depend on anything but its arguments and must be associative
    /// (a group spanning hosts reduces as a tree); it is applied in member
    /// order, so it need not be commutative. The contribution is at most
    /// [`Config::allreduce_buf_size`](crate::Config::allreduce_buf_size)
    /// bytes.
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// // [value, rank] pairs: the maximum value and who has it
    /// let mine = [[ctx.rank() as u64 * 10, ctx.rank() as u64]];
    /// let mut best = [[0u64; 2]];
    /// ctx.allreduce_user(&mine, &mut best, |a, b| if b[0] > a[0] { *b } else { *a }, GroupId::ALL, Timeout::Block)?;
    /// assert_eq!(best[0][1], ctx.num_ranks() as u64 - 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn allreduce_user<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        reduce: impl Fn(&T, &T) -> T,
        group: GroupId,
        timeout: Timeout,
    ) -> Result<()> {
        if send.is_empty() || send.len() != recv.len() {
            return Err(Error::InvalidArgument(format!(
                "allreduce needs equally long, non-empty send and receive buffers (got {} and {})",
                send.len(),
                recv.len()
            )));
        }
        let c = self.committed(group)?;
        let bytes = std::mem::size_of_val(send);
        let limit = match &c.sync {
            GroupSync::Shared(shared) => shared.slot_bytes(),
            GroupSync::Remote(_) => usize::MAX,
        }
        .min(self.config.allreduce_slot_bytes());
        if bytes > limit {
            return Err(Error::InvalidArgument(format!(
                "allreduce of {bytes} bytes: at most {limit} (Config::allreduce_buf_size)"
            )));
        }
        let mut st = c.state()?;
        let shared = match &c.sync {
            GroupSync::Shared(shared) => shared,
            GroupSync::Remote(id) => {
                match st.pending {
                    None => {}
                    Some(Pending::RemoteAllreduce { bytes: b }) if b == bytes => {}
                    Some(_) => return Err(Error::ActiveCollective { group }),
                }
                st.pending = Some(Pending::RemoteAllreduce { bytes });
                let g = self.engine.cross_host().expect("a job spanning hosts");
                let n = recv.len();
                let (mut a, mut b) = (vec![T::zeroed(); n], vec![T::zeroed(); n]);
                let mut combine = |lo: &[u8], hi: &[u8], out: &mut [u8]| {
                    // Copies: GPI-2's buffers need not be aligned for T.
                    bytemuck::cast_slice_mut(&mut a).copy_from_slice(lo);
                    bytemuck::cast_slice_mut(&mut b).copy_from_slice(hi);
                    for (x, y) in a.iter_mut().zip(&b) {
                        *x = reduce(x, y);
                    }
                    out.copy_from_slice(bytemuck::cast_slice(&a));
                };
                self.remote_sliced(&c.members, timeout.deadline(), true, |t| {
                    g.allreduce_ordered(
                        *id,
                        c.index,
                        bytemuck::cast_slice(send),
                        bytemuck::cast_slice_mut(recv),
                        &mut combine,
                        t,
                    )
                })?;
                st.pending = None;
                return Ok(());
            }
        };
        let (generation, parity) = match st.pending {
            None => {
                let parity = (st.allreduce_calls % 2) as usize;
                shared.put_contribution(parity, c.index, bytemuck::cast_slice(send));
                st.allreduce_calls += 1;
                (shared.arrive(), parity)
            }
            Some(Pending::Allreduce {
                generation,
                parity,
                bytes: b,
            }) if b == bytes => (generation, parity),
            Some(_) => return Err(Error::ActiveCollective { group }),
        };
        st.pending = Some(Pending::Allreduce {
            generation,
            parity,
            bytes,
        });
        self.await_generation(
            shared,
            generation,
            &c.members,
            super::barrier::Watch::Members,
            timeout.deadline(),
        )?;
        st.pending = None;
        shared.get_contribution(parity, 0, bytemuck::cast_slice_mut(recv));
        let mut other = vec![T::zeroed(); recv.len()];
        for member in 1..c.members.len() {
            shared.get_contribution(parity, member, bytemuck::cast_slice_mut(&mut other));
            for (r, o) in recv.iter_mut().zip(&other) {
                *r = reduce(r, o);
            }
        }
        Ok(())
    }

    /// [`Context::allreduce`] over the ranks of this rank's node
    /// ([`Context::node_group`]): a node-local reduction of small values
    /// through shared memory.
    ///
    /// ```
    /// # use gaspi::{Config, Context, ReduceOp, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// // How many ranks of my node have work left?
    /// let mut busy = [0u32];
    /// ctx.node_allreduce(&[1u32], &mut busy, ReduceOp::Sum, Timeout::Block)?;
    /// assert_eq!(busy[0], ctx.local_num() as u32);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node_allreduce<T: Reducible>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        timeout: Timeout,
    ) -> Result<()> {
        self.allreduce(send, recv, op, self.node_group(), timeout)
    }

    /// Most elements of a typed allreduce (`gaspi_allreduce_elem_max`).
    ///
    /// ```
    /// # use gaspi::{Config, Context, GroupId, ReduceOp, Timeout};
    /// let ctx = Context::init(Config { allreduce_elem_max: 4, ..Default::default() })?;
    /// assert_eq!(ctx.allreduce_elem_max(), 4);
    /// let mut out = [0u64; 5];
    /// assert!(ctx.allreduce(&[1; 5], &mut out, ReduceOp::Sum, GroupId::ALL, Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn allreduce_elem_max(&self) -> u32 {
        self.config.allreduce_elem_max
    }

    /// Bytes of a user-defined allreduce (`gaspi_allreduce_buf_size`).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config { allreduce_buf_size: 64, ..Default::default() })?;
    /// assert_eq!(ctx.allreduce_buf_size(), 64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn allreduce_buf_size(&self) -> usize {
        self.config.allreduce_buf_size
    }
}
