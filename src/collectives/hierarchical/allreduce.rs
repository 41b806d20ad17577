//! The public node-aware allreduce: set up once, run many times.

use super::node_reduce::{NodeReduce, ResultPlace};
use super::options::AllreduceOptions;
use crate::collectives::agree::Shape;
use crate::collectives::creation::Creation;
use crate::collectives::reduce_op::{ReduceOp, Reducible, with_op};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::extent;
use crate::segments::SegmentView;
use crate::types::{GroupId, SegmentId, Timeout};
use bytemuck::Pod;
use std::marker::PhantomData;

/// An allreduce over all ranks on node-shared windows (Al Ahad
/// et al. 2018, section III; see the module documentation of the algorithms): `len` elements of
/// type `T` per call, the result in the node's window.
///
/// ```
/// use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let mut ar = Allreduce::<f64>::new(&ctx, 7, 3, Timeout::Block)?;
/// let sum = ar.run(&[1.0, 2.0, ctx.rank() as f64], ReduceOp::Sum, Timeout::Block)?;
/// let n = ctx.num_ranks() as f64;
/// assert_eq!(sum.to_vec(), vec![n, 2.0 * n, n * (n - 1.0) / 2.0]);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug)]
pub struct Allreduce<'a, T> {
    ctx: &'a Context,
    core: NodeReduce,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: Pod> Allreduce<'a, T> {
    /// Collectively prepare allreduces of `len` elements on every rank,
    /// with segment id `segment` for the node windows.
    ///
    /// Every rank must give the same length, element type and options (the
    /// queue and the per-call choices aside: `share_reduction`,
    /// `stream_inputs`, `stream_copies`); ranks that disagree all get
    /// [`Error::InvalidArgument`], nothing made.
    ///
    /// ```
    /// use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// // Set up once, call many times.
    /// let mut ar = Allreduce::<i64>::new(&ctx, 0, 2, Timeout::Block)?;
    /// for it in 1..=3i64 {
    ///     let r = ar.run(&[it, -it], ReduceOp::Sum, Timeout::Block)?;
    ///     assert_eq!(r.to_vec(), vec![it * ctx.num_ranks() as i64, -it * ctx.num_ranks() as i64]);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn new(
        ctx: &'a Context,
        segment: SegmentId,
        len: usize,
        timeout: Timeout,
    ) -> Result<Allreduce<'a, T>> {
        Allreduce::with_options(ctx, segment, len, AllreduceOptions::default(), timeout)
    }

    /// [`Allreduce::new`] with options.
    ///
    /// ```
    /// use gaspi::{Allreduce, AllreduceOptions, Config, Context, ReduceOp, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// // The ring from 64 KiB on, in 16 KiB blocks.
    /// let opts = AllreduceOptions { ring_min: 64 << 10, block_bytes: 16 << 10, ..Default::default() };
    /// let mut ar = Allreduce::<f32>::with_options(&ctx, 0, 1 << 16, opts, Timeout::Block)?;
    /// let r = ar.run(&vec![1.0; 1 << 16], ReduceOp::Sum, Timeout::Block)?;
    /// assert_eq!(r.get(0), ctx.num_ranks() as f32);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn with_options(
        ctx: &'a Context,
        segment: SegmentId,
        len: usize,
        options: AllreduceOptions,
        timeout: Timeout,
    ) -> Result<Allreduce<'a, T>> {
        let mut creation = Creation::begin(ctx, segment, GroupId::ALL, "allreduce", timeout);
        let shape = Shape::new("allreduce")
            .debug(&std::any::type_name::<T>())
            .number(len)
            // Not the queue, nor the choices each rank makes per call.
            .debug(&AllreduceOptions {
                queue: 0,
                share_reduction: None,
                stream_inputs: None,
                stream_copies: None,
                ..options
            });
        creation.agree(shape, "allreduce")?;
        let bytes = extent::mul("allreduce length * element size", len, size_of::<T>())?;
        if bytes == 0 {
            return Err(Error::InvalidArgument(format!(
                "an allreduce needs at least one non-empty element, got {len} of {} bytes",
                size_of::<T>()
            )));
        }
        let core = NodeReduce::create(ctx, segment, bytes, true, options, &mut creation)?;
        Ok(Allreduce {
            ctx,
            core,
            len,
            _t: PhantomData,
        })
    }

    fn check(&self, send: &[T]) -> Result<()> {
        if send.len() != self.len {
            return Err(Error::InvalidArgument(format!(
                "this allreduce reduces {} elements, got {}",
                self.len,
                send.len()
            )));
        }
        Ok(())
    }

    fn view(&self, out: ResultPlace) -> SegmentView<T> {
        let elem = std::mem::size_of::<T>().max(1);
        let len = (out.range.end - out.range.start) / elem;
        // (The area's start need not be a multiple of the element size.)
        self.core.window().view_at::<T>(out.range.start, len)
    }

    /// Reduce `send` element-wise with the user's `reduce` (associative and
    /// commutative) over all ranks; returns a view of the result in the
    /// node's window, valid until this node's ranks call again. On a
    /// timeout, call again with the same arguments to continue.
    ///
    /// ```
    /// use gaspi::{Allreduce, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// // A user-defined operation on a plain-old-data pair: (max, count of max).
    /// #[derive(Clone, Copy, Debug, PartialEq, gaspi::Pod, gaspi::Zeroable)]
    /// #[bytemuck(crate = "gaspi::bytemuck")]
    /// #[repr(C)]
    /// struct MaxCount { max: u32, count: u32 }
    /// let mut ar = Allreduce::<MaxCount>::new(&ctx, 0, 1, Timeout::Block)?;
    /// let op = |a: &MaxCount, b: &MaxCount| match a.max.cmp(&b.max) {
    ///     std::cmp::Ordering::Less => *b,
    ///     std::cmp::Ordering::Greater => *a,
    ///     std::cmp::Ordering::Equal => MaxCount { max: a.max, count: a.count + b.count },
    /// };
    /// let r = ar.run_with(&[MaxCount { max: 5, count: 1 }], op, Timeout::Block)?;
    /// assert_eq!(r.get(0), MaxCount { max: 5, count: ctx.num_ranks() as u32 });
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_with<F: Fn(&T, &T) -> T>(
        &mut self,
        send: &[T],
        reduce: F,
        timeout: Timeout,
    ) -> Result<SegmentView<T>> {
        self.check(send)?;
        let out = self
            .core
            .run(self.ctx, send, &reduce, None, timeout.deadline())?;
        Ok(self.view(out))
    }

    /// [`Allreduce::run_with`], then copy the result into `recv`.
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<u32>::new(&ctx, 0, 2, Timeout::Block)?;
    /// let mut out = [0u32; 2];
    /// // Bitwise or of every rank's flags.
    /// ar.run_with_into(&[1 << (ctx.rank() % 32), 0], &mut out, |a, b| a | b, Timeout::Block)?;
    /// assert_eq!(out[0].count_ones(), ctx.num_ranks().min(32) as u32);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_with_into<F: Fn(&T, &T) -> T>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        reduce: F,
        timeout: Timeout,
    ) -> Result<()> {
        if recv.len() != self.len {
            return Err(Error::InvalidArgument(format!(
                "the receive buffer has {} elements, the allreduce {}",
                recv.len(),
                self.len
            )));
        }
        self.check(send)?;
        let out = self.core.run(
            self.ctx,
            send,
            &reduce,
            Some(&mut *recv),
            timeout.deadline(),
        )?;
        if !out.in_recv {
            self.view(out).copy_to_slice(0, recv);
        }
        Ok(())
    }

    /// [`Allreduce::run_with_into`] with `buf` as both input and result
    /// (`MPI_IN_PLACE`): the result is made in the node's window from
    /// `buf` ([`Allreduce::run_with`]) and then copied into `buf`. On a
    /// timeout, call again with the same `buf` to continue (it is written
    /// only once the call has completed).
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<u64>::new(&ctx, 0, 2, Timeout::Block)?;
    /// let mut buf = [ctx.rank() as u64, 1];
    /// ar.run_with_in_place(&mut buf, |a, b| a.max(b).to_owned(), Timeout::Block)?;
    /// assert_eq!(buf, [ctx.num_ranks() as u64 - 1, 1]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_with_in_place<F: Fn(&T, &T) -> T>(
        &mut self,
        buf: &mut [T],
        reduce: F,
        timeout: Timeout,
    ) -> Result<()> {
        let result = self.run_with(buf, reduce, timeout)?;
        result.copy_to_slice(0, buf);
        Ok(())
    }

    /// Inter-node messages one call sends, all ranks together (the cost
    /// model: dissemination `nodes * (steps + partials)` per instance, ring
    /// `2 * (nodes - 1)` per block).
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let ar = Allreduce::<f64>::new(&ctx, 0, 1, Timeout::Block)?;
    /// if ctx.num_nodes() == 1 {
    ///     assert_eq!(ar.inter_node_messages(), 0);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn inter_node_messages(&self) -> u64 {
        self.core
            .inter_node_messages(self.ctx, self.len, std::mem::size_of::<T>())
    }

    /// The segment id of the windows.
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let ar = Allreduce::<f64>::new(&ctx, 6, 1, Timeout::Block)?;
    /// assert_eq!(ar.segment(), 6);
    /// drop(ar); // deletes the window segment
    /// assert!(!ctx.segment_list().contains(&6));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment(&self) -> SegmentId {
        self.core.segment()
    }
}

impl<T: Reducible> Allreduce<'_, T> {
    /// Reduce `send` element-wise with `op` over all ranks; returns a view
    /// of the result in the node's window (see [`Allreduce::run_with`]).
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<f64>::new(&ctx, 0, 1, Timeout::Block)?;
    /// let prod = ar.run(&[2.0], ReduceOp::Prod, Timeout::Block)?;
    /// assert_eq!(prod.get(0), 2f64.powi(ctx.num_ranks() as i32));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run(&mut self, send: &[T], op: ReduceOp, timeout: Timeout) -> Result<SegmentView<T>> {
        with_op!(op, T, |f| self.run_with(send, f, timeout))
    }

    /// [`Allreduce::run`], then copy the result into `recv`.
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<i32>::new(&ctx, 0, 3, Timeout::Block)?;
    /// let mut out = [0i32; 3];
    /// ar.run_into(&[1, 2, 3], &mut out, ReduceOp::Sum, Timeout::Block)?;
    /// let n = ctx.num_ranks() as i32;
    /// assert_eq!(out, [n, 2 * n, 3 * n]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_into(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        timeout: Timeout,
    ) -> Result<()> {
        with_op!(op, T, |f| self.run_with_into(send, recv, f, timeout))
    }

    /// [`Allreduce::run_into`] with `buf` as both input and result
    /// (`MPI_Allreduce` with `MPI_IN_PLACE`; see
    /// [`Allreduce::run_with_in_place`]).
    ///
    /// ```
    /// # use gaspi::{Allreduce, Config, Context, ReduceOp, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let mut ar = Allreduce::<f64>::new(&ctx, 0, 3, Timeout::Block)?;
    /// let mut buf = [1.0, 2.0, 3.0];
    /// ar.run_in_place(&mut buf, ReduceOp::Sum, Timeout::Block)?;
    /// let n = ctx.num_ranks() as f64;
    /// assert_eq!(buf, [n, 2.0 * n, 3.0 * n]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_in_place(&mut self, buf: &mut [T], op: ReduceOp, timeout: Timeout) -> Result<()> {
        with_op!(op, T, |f| self.run_with_in_place(buf, f, timeout))
    }
}

impl<T> Drop for Allreduce<'_, T> {
    /// Deletes this rank's window segment, once its queue is done. Every
    /// message of a completed call has arrived when it returns (after a
    /// call given up, see [`Context::segment_create`] for why a new one is
    /// still safe).
    fn drop(&mut self) {
        self.core.forget_messages(self.ctx);
        crate::collectives::release(self.ctx, self.core.segment(), self.core.opts.queue);
    }
}
