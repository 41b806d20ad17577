//! Passive messages between hosts, over GPI-2's one-sided operations.
//!
//! On one host a sender copies its message straight into the receiver's
//! inbox (shared memory, see `inbox.rs`). Across hosts only its owner's
//! process touches the inbox (it keeps its CPU atomics); the message
//! reaches that process first:
//!
//! 1. the sender copies the message into its *outbox* (in its scratch
//!    segment). A process has one message in flight: its senders take
//!    turns on the outbox. Then either
//!    - **push** (messages of up to [`push_bytes`], 64 KiB in jobs of up
//!      to 128 processes, less in larger ones, once the receiver
//!      allowed it): `gaspi_write_notify` from the outbox into the
//!      sender's *slot* in the receiver's scratch segment, notifying the
//!      scratch segment's id [`REQUEST`] + sender rank with value
//!      [`PUSHED`] | length (GPI-2 shows the notification after the
//!      data); or
//!    - **pull** (the first message to a receiver, and larger ones): the
//!      outbox is registered with the receiver on first use and the
//!      sender notifies the receiver's reserved segment, id [`REQUEST`] +
//!      sender rank, value = the length;
//! 2. the receiver takes the request (`gaspi_notify_reset`) — its relay
//!    thread, or the rank itself while it waits in `passive_receive` —,
//!    for a pull reads the message from the sender's outbox into its
//!    *landing area* (`gaspi_read`, then `gaspi_wait`: the data is there),
//!    queues it in the inbox like a local sender (which wakes receivers)
//!    and acknowledges on the sender's reserved segment, id [`ACK`]:
//!    [`PUSH`](super::intake::PUSH) (delivered; its scratch segment, registered with the
//!    sender on the first message, takes pushes from now on),
//!    [`DELIVERED`](super::intake::DELIVERED) (delivered, registration failed) or [`REFUSED`] (larger
//!    than the inbox's slots, not read). A full inbox keeps the message
//!    where it is (landing area or slot) until a slot frees; further
//!    requests stay in GPI-2's tables meanwhile;
//! 3. the sender returns on the acknowledgement, so `passive_send` keeps
//!    its promise across hosts: the message is in the inbox. A send that
//!    timed out may still be delivered: the next send of the process waits
//!    for that acknowledgement before it reuses the outbox (and the slot),
//!    and if it repeats the send that timed out (same arguments,
//!    [`SentMessage`]) it returns with that answer instead of sending
//!    again.
//!
//! A push costs one notified write instead of a notification and a read
//! (a round trip); one way, a pushed message across hosts takes 1.3-1.5
//! times a write_notify's time (`gaspi-bench passive-lat`).
//!
//! GPI-2's own passive channel (`gaspi_passive_send`) is not used: its TCP
//! device keeps a receive posted after a timeout and mishandles a message
//! that arrives before a receive. Ids [`ACK`] and up lie past the ids a
//! window relays, so nothing else reads them.

use super::Gpi2;
use super::codes::{SCRATCH, check, corrupt, ms, queue_of, sid};
use super::intake::{ACK, Intake, PUSHED, REFUSED, REQUEST, outbox_at, push_bytes, slot_at, take};
use crate::config::{RESERVED_QUEUE, RESERVED_SEGMENT};
use crate::engine::inbox::Inbox;
use crate::engine::job::JobBlock;
use crate::engine::memcopy;
use crate::engine::segment::Span;
use crate::engine::transport::{PASSIVE_NAP, SentMessage, delivered};
use crate::engine::wait::{Patience, lock, lock_until};
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
        patience: &Patience<'_>,
    ) -> Result<()> {
        let len = msg.len;
        if len > self.passive_cap {
            return Err(Error::InvalidArgument(format!(
                "a passive message has at most {} bytes, got {len}",
                self.passive_cap
            )));
        }
        let this = SentMessage::new(rank, &msg);
        // Senders of this process take turns on the outbox.
        let mut outbox = lock_until(&self.outbox, deadline)?;
        if let Some(before) = outbox.unacked {
            // Whatever became of that message, the outbox is free once
            // answered, or once its receiver is dead. This call may be the
            // repeat of the send that timed out: then that answer is its.
            match self.await_ack(before.rank, deadline, alive, patience) {
                Ok(answer) => {
                    outbox.answered(before.rank, answer);
                    if before == this {
                        return delivered(answer == REFUSED, len, rank);
                    }
                    outbox.kept.keep(before, answer, &this);
                }
                Err(e @ (Error::RankFailed { .. } | Error::RankTerminated { .. })) => {
                    outbox.unacked = None;
                    if before == this {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(answer) = outbox.kept.take_for(&this) {
            return delivered(answer == REFUSED, len, rank);
        }
        if !outbox.registered.contains(&rank) {
            self.register(SCRATCH, rank, deadline.timeout())?;
            outbox.registered.insert(rank);
        }
        let me = self.placement.rank;
        let out = outbox_at(self.placement.nranks);
        // SAFETY: the outbox (`passive_cap >= len` bytes, checked above)
        // lies inside the leaked scratch allocation (`scratch_bytes`), is
        // written only under the `outbox` lock and read by GPI-2 (a push)
        // or a receiver (a pull) only between this request and its
        // acknowledgement; `msg` is a checked span of a segment that its
        // borrow keeps mapped, and no Rust reference covers either range.
        unsafe {
            memcopy::copy_nonoverlapping(msg.ptr(), (self.page + out) as *mut u8, len);
        }
        let q = queue_of(RESERVED_QUEUE);
        let id = REQUEST + me as NotificationId;
        let nranks = self.placement.nranks;
        let (call, code) = if len <= push_bytes(nranks) && outbox.pushing.contains(&rank) {
            // SAFETY: plain call; the slot (`push_bytes`) is inside the
            // receiver's scratch segment, registered with us (it said
            // PUSH), the outbox inside ours, the id inside GPI-2's table.
            let code = unsafe {
                sys::gaspi_write_notify(
                    SCRATCH,
                    out as u64,
                    rank,
                    SCRATCH,
                    slot_at(me, nranks) as u64,
                    len as u64,
                    id,
                    PUSHED | len as u32,
                    q,
                    ms(deadline.timeout()),
                )
            };
            ("gaspi_write_notify", code)
        } else {
            // SAFETY: plain call; the id is inside GPI-2's table (see `start`).
            let code = unsafe {
                sys::gaspi_notify(
                    sid(RESERVED_SEGMENT),
                    rank,
                    id,
                    len as u32,
                    q,
                    ms(deadline.timeout()),
                )
            };
            ("gaspi_notify", code)
        };
        check(call, code, Some(rank))?;
        outbox.unacked = Some(this);
        self.wait(RESERVED_QUEUE, deadline.timeout(), &|r| alive(r).is_ok())?;
        let answer = self.await_ack(rank, deadline, alive, patience)?;
        outbox.answered(rank, answer);
        delivered(answer == REFUSED, len, rank)
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

    /// Wait for the acknowledgement of this process's message to `rank`
    /// (after [`Outbox::unacked`](super::intake::Outbox::unacked) names
    /// it, so that a timeout leaves it to the next send).
    fn await_ack(
        &self,
        rank: Rank,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
        patience: &Patience<'_>,
    ) -> Result<u32> {
        patience.poll(deadline, PASSIVE_NAP, || {
            alive(rank)?;
            if corrupt(rank) {
                return Err(Error::RankFailed { rank });
            }
            Ok(take(ACK, 1).map(|(_, v)| v))
        })
    }
}
