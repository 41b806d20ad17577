//! Passive messages across hosts, the receiving side and the wire: the
//! notification ids, the scratch segment's layout, and the relay's intake
//! (see `passive.rs` for the protocol).

use super::codes::{SCRATCH, SCRATCH_BYTES, check, ms, queue_of, sid, wait_napping};
use crate::config::{RESERVED_QUEUE, RESERVED_SEGMENT};
use crate::engine::inbox::Inbox;
use crate::engine::transport::IDS;
use crate::types::{NotificationId, Rank, Timeout};
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

/// Notification id, on the reserved segment, telling that `rank` of a job
/// of `nranks` terminated (see `watch.rs`).
pub(super) fn left_id(rank: usize, nranks: usize) -> NotificationId {
    failed_id(nranks + rank, nranks)
}

/// GPI-2's notification table for a job of `nranks`: the relayed ids, the
/// doorbell, the acknowledgement, requests, failures and departures.
pub(super) fn notification_num(nranks: usize) -> u32 {
    left_id(nranks, nranks)
}
/// Acknowledgement: the message is in the inbox.
pub(super) const DELIVERED: u32 = 1;
/// Acknowledgement: the message is larger than the inbox's slots.
pub(super) const REFUSED: u32 = 2;
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
pub(super) const OUTBOX: usize = SCRATCH_BYTES;

/// The sending side of a process.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Ranks the scratch segment is registered with.
    pub(super) registered: BTreeSet<Rank>,
    /// The receiver of the message in the outbox, while it waits for its
    /// acknowledgement (its send timed out).
    pub(super) unacked: Option<Rank>,
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

impl Intake {
    /// The intake of this rank's `inbox` in a job of `nranks`.
    pub(super) fn new(inbox: Inbox, nranks: u32) -> Intake {
        Intake {
            inbox,
            nranks,
            held: None,
        }
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
            wait_napping(q, RELAY_WAIT);
        }
    }
    wait_napping(q, RELAY_WAIT);
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
            .and_then(|()| check("gaspi_wait", wait_napping(q, RELAY_WAIT), None))
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
