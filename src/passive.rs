//! Passive communication: two-sided messages into the receiver's inbox
//! (`gaspi_passive_send`, `gaspi_passive_receive`).
//!
//! Each rank has an inbox of [`Config::passive_queue_size_max`] messages of
//! up to [`Config::passive_transfer_size_max`] bytes, in its own shared
//! memory. A send copies the message into a free slot of the receiver's
//! inbox (waiting while it is full); a receive takes the oldest message from
//! any sender. Messages from one sender arrive in the order they were sent.
//!
//! [`Config::passive_queue_size_max`]: crate::Config::passive_queue_size_max
//! [`Config::passive_transfer_size_max`]: crate::Config::passive_transfer_size_max

use crate::context::Context;
use crate::context::traffic::Op;
use crate::engine::segment::Span;
use crate::engine::transfer::check_range;
use crate::error::{Error, Result, Side};
use crate::types::{Local, Rank, Timeout};

impl Context {
    /// Send `size` bytes at `src` to `rank`'s inbox (`gaspi_passive_send`).
    /// Returns once the message is in the inbox: `src` may be reused. Waits
    /// while the inbox is full, up to `timeout`.
    ///
    /// To a rank on another host (MPI and GPI-2 engines) the message
    /// travels to the receiver's process, one message per sending process
    /// at a time, and a send that timed out may still be delivered. As
    /// after every timeout, call again (from the same thread) with the
    /// same arguments to go on waiting: that call returns once the first
    /// message is delivered, without sending it again (a `Timeout::Test`
    /// loop delivers one message), also where another thread's send came
    /// between the two calls. The process's next send with other arguments
    /// waits for that delivery before it sends its own message. One limit
    /// follows from telling a repeat by its thread and arguments: a thread
    /// that gave up on such a send and at once sends anew from the same
    /// place gets the first message's answer (its new bytes are not sent;
    /// send from elsewhere, or after the first was delivered).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// ctx.segment::<u8>(0)?.copy_from_slice(0, b"ping");
    /// ctx.passive_send(Local::new(0, 0), ctx.rank(), 4, Timeout::Block)?;
    /// let (from, len) = ctx.passive_receive(Local::new(0, 32), 32, Timeout::Block)?;
    /// assert_eq!((from, len), (ctx.rank(), 4));
    /// assert_eq!(ctx.segment::<u8>(0)?.get(33), b'i');
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn passive_send(
        &self,
        src: Local,
        rank: Rank,
        size: usize,
        timeout: Timeout,
    ) -> Result<()> {
        self.engine.check_rank(rank)?;
        self.check_segment_id(src.segment)?;
        let obj = self.engine.local_arc(src.segment)?;
        check_range(
            Side::Local,
            &obj,
            self.rank(),
            src.segment,
            src.offset,
            size,
        )?;
        self.engine.check_alive(rank)?;
        let max = self
            .engine
            .passive_capacity(rank)?
            .min(self.config.passive_transfer_size_max);
        let min = self.passive_transfer_size_min();
        if size < min || size > max {
            return Err(Error::InvalidArgument(format!(
                "a passive message has {min}..={max} bytes (Config::passive_transfer_size_max \
                 of sender and receiver), got {size}"
            )));
        }
        let msg = Span {
            obj: &obj,
            off: src.offset,
            len: size,
        };
        self.engine.passive_send(rank, msg, timeout.deadline())?;
        self.traffic
            .count(self.is_inter(rank), Op::Passive, 1, size as u64);
        Ok(())
    }

    /// Receive the next message from any rank into `dst`, which has room for
    /// `size` bytes (`gaspi_passive_receive`). Returns the sender and the
    /// message length. A message longer than `size` stays queued and the
    /// call fails with [`Error::MessageTooLarge`].
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// // Nothing sent yet.
    /// assert!(ctx.passive_receive(Local::new(0, 0), 64, Timeout::Test).unwrap_err().is_timeout());
    /// ctx.segment::<u8>(0)?.copy_from_slice(0, b"too long");
    /// ctx.passive_send(Local::new(0, 0), ctx.rank(), 8, Timeout::Block)?;
    /// // Room for 4 bytes only: the message stays queued.
    /// assert!(matches!(ctx.passive_receive(Local::new(0, 32), 4, Timeout::Block), Err(gaspi::Error::MessageTooLarge { .. })));
    /// assert_eq!(ctx.passive_receive(Local::new(0, 32), 32, Timeout::Block)?, (ctx.rank(), 8));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn passive_receive(
        &self,
        dst: Local,
        size: usize,
        timeout: Timeout,
    ) -> Result<(Rank, usize)> {
        self.check_segment_id(dst.segment)?;
        let obj = self.engine.local_arc(dst.segment)?;
        check_range(
            Side::Local,
            &obj,
            self.rank(),
            dst.segment,
            dst.offset,
            size,
        )?;
        if size == 0 {
            return Err(Error::InvalidArgument(
                "passive_receive needs room for at least one byte".into(),
            ));
        }
        let into = Span {
            obj: &obj,
            off: dst.offset,
            len: size,
        };
        self.engine.passive_receive(into, timeout.deadline())
    }

    /// Largest passive message in bytes (`gaspi_passive_transfer_size_max`).
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Timeout};
    /// let ctx = Context::init(Config { passive_transfer_size_max: 16, ..Default::default() })?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// assert_eq!(ctx.passive_transfer_size_max(), 16);
    /// assert!(ctx.passive_send(Local::new(0, 0), ctx.rank(), 17, Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn passive_transfer_size_max(&self) -> usize {
        self.config.passive_transfer_size_max
    }

    /// Smallest passive message in bytes (`gaspi_passive_transfer_size_min`):
    /// 1; an empty message is refused.
    ///
    /// ```
    /// use gaspi::{Alloc, Config, Context, Local, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
    /// assert_eq!(ctx.passive_transfer_size_min(), 1);
    /// assert!(ctx.passive_send(Local::new(0, 0), ctx.rank(), 0, Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn passive_transfer_size_min(&self) -> usize {
        1
    }
}
