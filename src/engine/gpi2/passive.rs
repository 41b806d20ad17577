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
use super::codes::{SCRATCH, SCRATCH_BYTES, check, corrupt, ms, queue_of, sid};
use crate::config::{RESERVED_QUEUE, RESERVED_SEGMENT};
use crate::engine::inbox::Inbox;
use crate::engine::job::JobBlock;
use crate::engine::lock;
use crate::engine::segment::Span;
use crate::engine::transport::{IDS, PASSIVE_NAP};
use crate::error::{Error, Result};
use crate::types::{Deadline, NotificationId, Rank, Timeout};
use gpi2_sys as sys;
use std::collections::BTreeSet;

/// Notification id, on the reserved segment, acknowledging this process's
/// passive message.
pub(super) const ACK: NotificationId = IDS + 1;
/// First notification id of passive requests on the reserved segment: one
/// per sender rank. The failure watch's ids follow (see [`failed_id`]).
pub(super) const REQUEST: NotificationId = IDS + 2;

/// Notification id, on the reserved segment, telling that `rank` of a job
/// of `nranks` failed (see `watch.rs`).
pub(super) fn failed_id(rank: usize, nranks: usize) -> NotificationId {
    REQUEST + (nranks + rank) as NotificationId
}

/// GPI-2's notification table for a job of `nranks`: the relayed ids, the
/// doorbell, the acknowledgement, requests and failures.
pub(super) fn notification_num(nranks: usize) -> u32 {
    failed_id(nranks, nranks)
}
/// Acknowledgement: the message is in the inbox.
const DELIVERED: u32 = 1;
/// Acknowledgement: the message is larger than the inbox's slots.
const REFUSED: u32 = 2;
/// How long the relay waits for a read or a notification it posted.
const RELAY_WAIT: Timeout = Timeout::After(std::time::Duration::from_secs(10));

/// Bytes of the scratch segment for messages of up to `cap` bytes: the
/// flush page, the outbox, the landing area.
pub(super) fn scratch_bytes(cap: usize) -> usize {
    SCRATCH_BYTES + 2 * outbox_bytes(cap)
}

fn outbox_bytes(cap: usize) -> usize {
    cap.div_ceil(SCRATCH_BYTES) * SCRATCH_BYTES
}

/// Offset of the outbox in every process's scratch segment.
const OUTBOX: usize = SCRATCH_BYTES;

/// The sending side of a process.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Ranks the scratch segment is registered with.
    registered: BTreeSet<Rank>,
    /// The receiver of the message in the outbox, while it waits for its
    /// acknowledgement (its send timed out).
    unacked: Option<Rank>,
}

/// The receiving side, run by the relay thread.
#[derive(Debug)]
pub(super) struct Intake {
    /// This rank's inbox, mapped for the relay.
    inbox: Inbox,
    nranks: u32,
    /// A message read into the landing area that the inbox had no room
    /// for yet: (sender, length).
    held: Option<(Rank, usize)>,
}

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
        *lock(&self.shared.intake) = Some(Intake {
            inbox,
            nranks: self.placement.nranks as u32,
            held: None,
        });
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
        let mut outbox = crate::engine::poll_with_backoff(deadline, || {
            Ok(match self.outbox.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            })
        })?;
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
        crate::engine::poll_with_naps(deadline, PASSIVE_NAP, || {
            alive(rank)?;
            if corrupt(rank) {
                return Err(Error::RankFailed { rank });
            }
            Ok(take(ACK, 1).map(|(_, v)| v))
        })
    }
}

/// Take a notification of ids `first..first + num` of the reserved
/// segment: (id, value).
pub(super) fn take(first: NotificationId, num: u32) -> Option<(NotificationId, u32)> {
    let seg = sid(RESERVED_SEGMENT);
    let mut id: sys::gaspi_notification_id_t = 0;
    // SAFETY: out pointer to a local; the ids are inside GPI-2's table.
    let code = unsafe { sys::gaspi_notify_waitsome(seg, first, num, &mut id, sys::GASPI_TEST) };
    if code != sys::GASPI_SUCCESS || id < first || id >= first + num {
        return None;
    }
    let mut value: sys::gaspi_notification_t = 0;
    // SAFETY: out pointer to a local; `id` is in range.
    unsafe { sys::gaspi_notify_reset(seg, id, &mut value) };
    (value != 0).then_some((id, value))
}

/// Notify the reserved segment of every rank of `ranks` (errors are left
/// to the watch: a rank that does not answer is found dead by GPI-2).
pub(super) fn notify_all(ranks: &[Rank], id: NotificationId, value: u32) {
    let q = queue_of(RESERVED_QUEUE);
    for &r in ranks {
        loop {
            // SAFETY: plain call; the id is inside GPI-2's table.
            let code = unsafe {
                sys::gaspi_notify(sid(RESERVED_SEGMENT), r, id, value, q, ms(RELAY_WAIT))
            };
            if code != sys::GASPI_QUEUE_FULL {
                break;
            }
            // SAFETY: plain call.
            unsafe { sys::gaspi_wait(q, ms(RELAY_WAIT)) };
        }
    }
    // SAFETY: plain call.
    unsafe { sys::gaspi_wait(q, ms(RELAY_WAIT)) };
}

impl Intake {
    /// One round of the relay: deliver a held message, or take the next
    /// request. Returns whether anything happened.
    pub(super) fn step(&mut self, page: usize, cap: usize) -> bool {
        let landing = OUTBOX + outbox_bytes(cap);
        // SAFETY: the landing area (`cap` bytes, `len <= cap`) lies inside
        // the leaked scratch allocation and only the holder of the intake
        // lock (`&mut self`) reads it; GPI-2 writes it only for our reads,
        // which have completed when a message is held or offered.
        let area =
            |len: usize| unsafe { std::slice::from_raw_parts((page + landing) as *const u8, len) };
        if let Some((sender, len)) = self.held {
            if !self.inbox.offer(sender, area(len)) {
                return false;
            }
            self.held = None;
            notify_all(&[sender], ACK, DELIVERED);
            return true;
        }
        let Some((id, value)) = take(REQUEST, self.nranks) else {
            return false;
        };
        let (sender, len) = ((id - REQUEST) as Rank, value as usize);
        if len > cap.min(self.inbox.max_message()) {
            notify_all(&[sender], ACK, REFUSED);
            return true;
        }
        let q = queue_of(RESERVED_QUEUE);
        // SAFETY: plain calls; the landing area has room for `cap` bytes,
        // and the sender registered its scratch segment with us before
        // it notified.
        let read = unsafe {
            check(
                "gaspi_read",
                sys::gaspi_read(
                    SCRATCH,
                    landing as u64,
                    sender,
                    SCRATCH,
                    OUTBOX as u64,
                    len as u64,
                    q,
                    ms(RELAY_WAIT),
                ),
                Some(sender),
            )
            .and_then(|()| check("gaspi_wait", sys::gaspi_wait(q, ms(RELAY_WAIT)), None))
        };
        if read.is_err() {
            // The sender is gone or unreachable: its send fails by itself.
            return true;
        }
        if self.inbox.offer(sender, area(len)) {
            notify_all(&[sender], ACK, DELIVERED);
        } else {
            self.held = Some((sender, len));
        }
        true
    }
}
