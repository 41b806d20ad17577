//! `gaspi_allreduce` and `gaspi_allreduce_user`.
//!
//! Each member stores its contribution in the group's shared buffers,
//! meets the others at one barrier, and then reduces all contributions in
//! member order: `((c0 op c1) op c2) ...`. Every member therefore computes
//! the same operations in the same order, and gets bit-identical results,
//! floating point included, and the same inputs give the same output run
//! after run.
//!
//! A group whose members are on several hosts reduces through the
//! transport's allreduce instead (GPI-2's), in a tree of adjacent member ranges
//! (`(c0 op c1) op (c2 op c3)` for four members), each step with the lower
//! range first: results are still bit-identical on every member and run
//! after run, and `op` still need not be commutative, but floating-point
//! sums are grouped differently than on one host (the operation must be
//! associative, up to rounding, either way).

use super::agree::Shape;
use super::reduce_op::{ReduceOp, Reducible};
use crate::context::Context;
use crate::context::groups::{FaultScope, GroupSync, Pending};
use crate::engine::transport::Contribution;
use crate::error::{Error, Result};
use crate::types::{GroupId, Timeout};
use bytemuck::Pod;

impl Context {
    /// Reduce `send` element-wise with `op` over every member of `group`;
    /// every member gets the result in `recv` (`gaspi_allreduce`). At most
    /// [`Config::allreduce_elem_max`](crate::Config::allreduce_elem_max)
    /// elements.
    ///
    /// Results are identical on every member and deterministic (see the
    /// module documentation). On timeout, call again with the same
    /// arguments to keep waiting. Every member must give as many elements
    /// of the same type: a call where they differ fails with
    /// [`Error::InvalidArgument`] on every member, on one host and across
    /// hosts (where a word standing for the length and type travels with
    /// each contribution).
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
        let scope = FaultScope::Members;
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
            GroupSync::Hosts(_) => usize::MAX,
        }
        .min(self.config.allreduce_slot_bytes());
        if bytes > limit {
            return Err(Error::InvalidArgument(format!(
                "allreduce of {bytes} bytes: at most {limit} (Config::allreduce_buf_size)"
            )));
        }
        let mut st = c.state()?;
        // What every member's contribution must share (checked after the
        // exchange, so that all members fail alike where one differs).
        let shape = Shape::new("allreduce")
            .debug(&std::any::type_name::<T>())
            .number(bytes)
            .value();
        let shared = match &c.sync {
            GroupSync::Shared(shared) => shared,
            GroupSync::Hosts(id) => {
                match st.pending {
                    None => {}
                    Some(Pending::HostAllreduce { bytes: b }) if b == bytes => {}
                    Some(_) => return Err(self.busy(&c, scope)),
                }
                st.pending = Some(Pending::HostAllreduce { bytes });
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
                let mine = Contribution {
                    index: c.index,
                    shape,
                    send: bytemuck::cast_slice(send),
                };
                let r = self.engine.host_allreduce(
                    *id,
                    &scope.watched(&c.members, self.num_ranks()),
                    mine,
                    bytemuck::cast_slice_mut(recv),
                    &mut combine,
                    timeout.deadline(),
                );
                // Completed, also where the contributions did not match.
                if matches!(r, Ok(()) | Err(Error::InvalidArgument(_))) {
                    st.pending = None;
                }
                return r;
            }
        };
        let (generation, parity) = match st.pending {
            None => {
                let parity = (st.allreduce_calls % 2) as usize;
                shared.put_contribution(parity, c.index, bytemuck::cast_slice(send), shape);
                st.allreduce_calls += 1;
                (shared.arrive(), parity)
            }
            Some(Pending::Allreduce {
                generation,
                parity,
                bytes: b,
            }) if b == bytes => (generation, parity),
            Some(_) => return Err(self.busy(&c, scope)),
        };
        st.pending = Some(Pending::Allreduce {
            generation,
            parity,
            bytes,
        });
        self.await_generation(shared, generation, &c.members, scope, timeout.deadline())?;
        st.pending = None;
        if let Some(m) = (0..c.members.len()).find(|&m| shared.shape_of(parity, m) != shape) {
            return Err(Error::InvalidArgument(format!(
                "allreduce over group {}: member rank {} gave a contribution of another length \
                 or element type than this rank's {bytes} bytes of {}",
                group.0,
                c.members[m],
                std::any::type_name::<T>()
            )));
        }
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
