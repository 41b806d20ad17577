//! Passive messages between hosts, over GPI-2's one-sided operations.
//!
//! On one host a sender copies its message straight into the receiver's
//! inbox (shared memory, see `inbox.rs`). Across hosts the receiver pulls
//! it, so that the inbox keeps its CPU atomics and only its owner's process
//! touches it from afar:
//!
//! 1. the sender copies the message into its *outbox* (in its scratch
//!    segment, registered with the receiver on first use) and notifies the
//!    receiver on the reserved segment, id [`REQUEST`] + sender rank,
//!    value = the message length. A process has one message in flight:
//!    its senders take turns on the outbox;
//! 2. the receiver's relay thread takes the request (`gaspi_notify_reset`),
//!    reads the message from the sender's outbox into its *landing area*
//!    (`gaspi_read`, then `gaspi_wait`: the data is there), queues it in
//!    the inbox like a local sender (which wakes receivers) and
//!    acknowledges on the sender's reserved segment, id [`ACK`], value
//!    [`DELIVERED`] (or [`REFUSED`] for a message larger than the inbox's
//!    slots, without reading it). A full inbox keeps the message in the
//!    landing area until a slot frees; further requests stay in GPI-2's
//!    table meanwhile;
//! 3. the sender returns on the acknowledgement, so `passive_send` keeps
//!    its promise across hosts: the message is in the inbox. A send that
//!    timed out may still be delivered: the next send of the process waits
//!    for that acknowledgement before it reuses the outbox.
//!
//! GPI-2's own passive channel (`gaspi_passive_send`) is not used: its TCP
//! device keeps a receive posted after a timeout and mishandles a message
//! that arrives before a receive. Ids [`ACK`] and up lie past the ids a
//! window relays, so nothing else reads them.

use super::Gpi2;
use super::codes::{SCRATCH, check, corrupt, ms, queue_of, sid};
use super::intake::{ACK, Intake, OUTBOX, REFUSED, REQUEST, take};
use crate::config::{RESERVED_QUEUE, RESERVED_SEGMENT};
use crate::engine::inbox::Inbox;
use crate::engine::job::JobBlock;
use crate::engine::segment::Span;
use crate::engine::transport::PASSIVE_NAP;
use crate::engine::wait::{lock, lock_until, poll_with_naps};
use crate::error::{Error, Result};
use crate::types::{Deadline, NotificationId, Rank};
use gpi2_sys as sys;

impl Gpi2 {
    /// Start the relay's work for other hosts: take their passive messages
    /// into `inbox` (this rank's inbox, mapped again for the relay) and
    /// watch for failures (see `watch.rs`) over `block`, this host's
    /// control block (ranks `host`; `probe`: look for dead processes).
    pub(super) fn relay_enable(
        &self,
        inbox: Inbox,
        block: JobBlock,
        host: std::ops::Range<usize>,
        probe: bool,
    ) {
        *lock(&self.shared.intake) = Some(Intake::new(inbox, self.placement.nranks as u32));
        let me = self.placement.rank as usize;
        *lock(&self.shared.watch) = Some(super::watch::Watch::new(block, host, me, probe));
    }

    /// Send the message `msg` to the inbox of `rank`, on another host,
    /// until `deadline`; `alive` checks a receiver.
    pub(super) fn passive_send(
        &self,
        rank: Rank,
        msg: Span<'_>,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
    ) -> Result<()> {
        let len = msg.len;
        if len > self.passive_cap {
            return Err(Error::InvalidArgument(format!(
                "a passive message has at most {} bytes, got {len}",
                self.passive_cap
            )));
        }
        // Senders of this process take turns on the outbox.
        let mut outbox = lock_until(&self.outbox, deadline)?;
        if let Some(before) = outbox.unacked {
            // Whatever became of that message, the outbox is free once
            // answered, or once its receiver is dead.
            match self.await_ack(before, deadline, alive) {
                Ok(_) | Err(Error::RankFailed { .. } | Error::RankTerminated { .. }) => {}
                Err(e) => return Err(e),
            }
            outbox.unacked = None;
        }
        if !outbox.registered.contains(&rank) {
            self.register(SCRATCH, rank, deadline.timeout())?;
            outbox.registered.insert(rank);
        }
        // SAFETY: the outbox (`passive_cap >= len` bytes, checked above)
        // lies inside the leaked scratch allocation (`scratch_bytes`), is
        // written only under the `outbox` lock and
        // read by a receiver only between this notification and its
        // acknowledgement; `msg` is a checked span of a segment that its
        // borrow keeps mapped, and no Rust reference covers either range.
        unsafe {
            std::ptr::copy_nonoverlapping(msg.ptr(), (self.page + OUTBOX) as *mut u8, len);
        }
        let q = queue_of(RESERVED_QUEUE);
        // SAFETY: plain call; the id is inside GPI-2's table (see `start`).
        let code = unsafe {
            sys::gaspi_notify(
                sid(RESERVED_SEGMENT),
                rank,
                REQUEST + self.placement.rank as NotificationId,
                len as u32,
                q,
                ms(deadline.timeout()),
            )
        };
        check("gaspi_notify", code, Some(rank))?;
        outbox.unacked = Some(rank);
        self.wait(RESERVED_QUEUE, deadline.timeout())?;
        let answer = self.await_ack(rank, deadline, alive)?;
        outbox.unacked = None;
        match answer {
            REFUSED => Err(Error::InvalidArgument(format!(
                "a passive message of {len} bytes does not fit rank {rank}'s inbox \
                 (its Config::passive_transfer_size_max is smaller)"
            ))),
            _ => Ok(()),
        }
    }

    /// Take passive messages from other hosts now, if the relay is not
    /// at it (a receiver waiting for one does, rather than wait for the
    /// relay's next round). Returns whether one was taken.
    pub(super) fn passive_pump(&self) -> bool {
        let bound = lock(&self.shared.bound);
        if !bound.iter().any(|b| b.segment == RESERVED_SEGMENT) {
            return false;
        }
        let Ok(mut intake) = self.shared.intake.try_lock() else {
            return false;
        };
        intake
            .as_mut()
            .is_some_and(|i| i.step(self.shared.page, self.shared.passive_cap))
    }

    /// Wait for the acknowledgement of this process's message to `rank`.
    fn await_ack(
        &self,
        rank: Rank,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
    ) -> Result<u32> {
        poll_with_naps(deadline, PASSIVE_NAP, || {
            alive(rank)?;
            if corrupt(rank) {
                return Err(Error::RankFailed { rank });
            }
            Ok(take(ACK, 1).map(|(_, v)| v))
        })
    }
}
