//! Passive messages across hosts, the receiving side and the wire: the
//! notification ids, the scratch segment's layout, and the relay's intake
//! (see `passive.rs` for the protocol).

use super::codes::{SCRATCH, SCRATCH_BYTES, check, ms, queue_of, sid, wait_napping};
use crate::config::{RESERVED_QUEUE, RESERVED_SEGMENT};
use crate::engine::inbox::Inbox;
use crate::engine::transport::{IDS, KeptAnswers, SentMessage};
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

/// Notification id, on the reserved segment, telling that `rank` of a job
/// of `nranks` holds a new twin of group `group` (one of `group_max`) and
/// waits to commit it (see `groups.rs`): one id per sender and group.
pub(super) fn ready_id(rank: usize, group: u8, nranks: usize, group_max: u32) -> NotificationId {
    left_id(nranks, nranks) + (rank * group_max as usize + group as usize) as NotificationId
}

/// GPI-2's notification table for a job of `nranks` with `group_max`
/// groups: the relayed ids, the doorbell, the acknowledgement, requests,
/// failures, departures and groups' readiness.
pub(super) fn notification_num(nranks: usize, group_max: u32) -> u32 {
    ready_id(nranks, 0, nranks, group_max)
}
/// Acknowledgement: the message is in the inbox.
pub(super) const DELIVERED: u32 = 1;
/// Acknowledgement: the message is larger than the inbox's slots.
pub(super) const REFUSED: u32 = 2;
/// Acknowledgement: the message is in the inbox, and the receiver's
/// scratch segment is now registered with the sender: its next messages
/// of up to [`push_bytes`] may be written into its slot there.
pub(super) const PUSH: u32 = 3;
/// Bytes of all push slots of a scratch segment together, at most (where
/// each slot is larger than [`PUSH_MIN`]): with RDMA devices GPI-2 pins a
/// registered segment, so this bounds what every process pins for them.
const PUSH_BUDGET: usize = 8 << 20;
/// Smallest push slot, whatever the job's size.
const PUSH_MIN: usize = 1 << 10;
/// Largest push slot: GPI-2's default `passive_transfer_size_max`
/// (65,535 bytes) fits, so in jobs of up to 128 processes every message
/// of the default size after the first is pushed.
const PUSH_MAX: usize = 64 << 10;

/// Largest message a sender writes straight into its slot at the receiver
/// (once allowed: [`PUSH`]) instead of letting the receiver read it, in a
/// job of `nranks`: the slot's size, a power of two from [`PUSH_MIN`] to
/// [`PUSH_MAX`], all slots within [`PUSH_BUDGET`] where they can be. A
/// function of the job's size alone, so that every process places every
/// slot alike (`passive_transfer_size_max` may differ between ranks).
pub(super) fn push_bytes(nranks: usize) -> usize {
    let each = (PUSH_BUDGET / nranks.max(1)).clamp(PUSH_MIN, PUSH_MAX);
    1 << each.ilog2()
}
/// Marks a request's value (the message length) as pushed: the message is
/// in the sender's slot at the receiver, notified on the scratch segment.
pub(super) const PUSHED: u32 = 1 << 31;
/// How long the relay waits for a read or a notification it posted.
const RELAY_WAIT: Timeout = Timeout::After(std::time::Duration::from_secs(10));
/// How long the relay waits to register its scratch segment with a sender
/// (beyond it, the sender's messages keep being read: the relay has
/// failures to watch and windows to serve meanwhile).
const REGISTER_WAIT: Timeout = Timeout::After(std::time::Duration::from_secs(1));

/// Bytes of the scratch segment of a job of `nranks` with messages of up
/// to `cap` bytes: the flush page, a slot of [`push_bytes`] per sender
/// rank, the outbox, the landing area. (Untouched slots cost no memory:
/// the allocation is zeroed pages the kernel maps on first use.)
pub(super) fn scratch_bytes(cap: usize, nranks: usize) -> usize {
    outbox_at(nranks) + 2 * outbox_bytes(cap)
}

fn outbox_bytes(cap: usize) -> usize {
    cap.div_ceil(SCRATCH_BYTES) * SCRATCH_BYTES
}

/// Offset of `sender`'s slot in every process's scratch segment, in a job
/// of `nranks`.
pub(super) fn slot_at(sender: Rank, nranks: usize) -> usize {
    SCRATCH_BYTES + sender as usize * push_bytes(nranks)
}

/// Offset of the outbox in every process's scratch segment (the same in
/// every process of the job: receivers read their senders' outboxes).
pub(super) fn outbox_at(nranks: usize) -> usize {
    (SCRATCH_BYTES + nranks * push_bytes(nranks)).next_multiple_of(SCRATCH_BYTES)
}

/// The sending side of a process.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Ranks the scratch segment is registered with.
    pub(super) registered: BTreeSet<Rank>,
    /// The message in the outbox, from the moment it is requested until
    /// it is acknowledged (past its send, if that timed out).
    pub(super) unacked: Option<SentMessage>,
    /// Answers taken for other threads' messages, for their repeats.
    pub(super) kept: KeptAnswers<u32>,
    /// Receivers that registered their scratch segment with us: messages
    /// of up to [`push_bytes`] are written into our slot there.
    pub(super) pushing: BTreeSet<Rank>,
}

impl Outbox {
    /// `rank` answered the message in the outbox with `answer`: the outbox
    /// is free, and after [`PUSH`] the next messages to `rank` are pushed.
    pub(super) fn answered(&mut self, rank: Rank, answer: u32) {
        self.unacked = None;
        if answer == PUSH {
            self.pushing.insert(rank);
        }
    }
}

/// The receiving side, run by the relay thread.
#[derive(Debug)]
pub(super) struct Intake {
    /// This rank's inbox, mapped for the relay.
    inbox: Inbox,
    nranks: u32,
    /// A message that the inbox had no room for yet: (sender, length, at
    /// which offset of the scratch segment: the landing area or the
    /// sender's slot).
    held: Option<(Rank, usize, usize)>,
    /// Senders our scratch segment is registered with (they push).
    pushing: BTreeSet<Rank>,
}

impl Intake {
    /// The intake of this rank's `inbox` in a job of `nranks`.
    pub(super) fn new(inbox: Inbox, nranks: u32) -> Intake {
        Intake {
            inbox,
            nranks,
            held: None,
            pushing: BTreeSet::new(),
        }
    }
}

/// Take a notification of ids `first..first + num` of the reserved
/// segment: (id, value).
pub(super) fn take(first: NotificationId, num: u32) -> Option<(NotificationId, u32)> {
    take_on(sid(RESERVED_SEGMENT), first, num)
}

/// Take a notification of ids `first..first + num` of GPI-2 segment `seg`.
fn take_on(
    seg: sys::gaspi_segment_id_t,
    first: NotificationId,
    num: u32,
) -> Option<(NotificationId, u32)> {
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
    notify_each(ranks.iter().map(|&r| (r, value)), id);
}

/// Notify id `id` of the reserved segment of each rank of `to` with its
/// value, then wait for the runtime's queue once (errors as in
/// [`notify_all`]).
pub(super) fn notify_each(to: impl IntoIterator<Item = (Rank, u32)>, id: NotificationId) {
    let q = queue_of(RESERVED_QUEUE);
    for (r, value) in to {
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
    /// one, pushed or requested. Returns whether anything happened.
    pub(super) fn step(&mut self, page: usize, cap: usize) -> bool {
        let nranks = self.nranks as usize;
        let landing = outbox_at(nranks) + outbox_bytes(cap);
        // SAFETY: the range (the landing area, `len <= cap`, or a sender's
        // slot, `len <= push_bytes`) lies inside the leaked scratch
        // allocation (`scratch_bytes`) and only the holder of the intake
        // lock (`&mut self`) reads it; GPI-2 writes the landing area only
        // for our reads, which have completed when a message is held or
        // offered, and a slot only for its sender's next message, which
        // waits for our acknowledgement.
        let area = |at: usize, len: usize| unsafe {
            std::slice::from_raw_parts((page + at) as *const u8, len)
        };
        if let Some((sender, len, at)) = self.held {
            if !self.inbox.offer(sender, area(at, len)) {
                return false;
            }
            self.held = None;
            notify_all(&[sender], ACK, self.answer(sender));
            return true;
        }
        let Some((id, value)) =
            take_on(SCRATCH, REQUEST, self.nranks).or_else(|| take(REQUEST, self.nranks))
        else {
            return false;
        };
        let (sender, len) = ((id - REQUEST) as Rank, (value & !PUSHED) as usize);
        let pushed = value & PUSHED != 0;
        let room = if pushed { push_bytes(nranks) } else { cap };
        if len > room.min(self.inbox.max_message()) {
            notify_all(&[sender], ACK, REFUSED);
            return true;
        }
        let at = if pushed {
            slot_at(sender, nranks)
        } else {
            let q = queue_of(RESERVED_QUEUE);
            // SAFETY: plain call; the landing area has room for `cap`
            // bytes, and the sender registered its scratch segment with
            // us before it notified.
            let code = unsafe {
                sys::gaspi_read(
                    SCRATCH,
                    landing as u64,
                    sender,
                    SCRATCH,
                    outbox_at(nranks) as u64,
                    len as u64,
                    q,
                    ms(RELAY_WAIT),
                )
            };
            let read = check("gaspi_read", code, Some(sender))
                .and_then(|()| check("gaspi_wait", wait_napping(q, RELAY_WAIT), None));
            if read.is_err() {
                // The sender is gone or unreachable: its send fails by itself.
                return true;
            }
            landing
        };
        if self.inbox.offer(sender, area(at, len)) {
            notify_all(&[sender], ACK, self.answer(sender));
        } else {
            self.held = Some((sender, len, at));
        }
        true
    }

    /// The acknowledgement of a message from `sender` now in the inbox:
    /// [`PUSH`] once our scratch segment is registered with it (the first
    /// message registers it), else [`DELIVERED`] (registration failed:
    /// it keeps being read from its outbox).
    fn answer(&mut self, sender: Rank) -> u32 {
        if self.pushing.contains(&sender) {
            return PUSH;
        }
        // SAFETY: plain call (the scratch segment is bound for the rest of
        // the process).
        let code = unsafe { sys::gaspi_segment_register(SCRATCH, sender, ms(REGISTER_WAIT)) };
        if code != sys::GASPI_SUCCESS {
            return DELIVERED;
        }
        self.pushing.insert(sender);
        PUSH
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_slots_shrink_with_the_job_within_their_budget() {
        for (nranks, bytes) in [
            (1, 64 << 10),
            (2, 64 << 10),
            (128, 64 << 10),
            (129, 32 << 10),
        ]
        .into_iter()
        .chain([
            (1000, 8 << 10),
            (1024, 8 << 10),
            (8192, 1 << 10),
            (1 << 20, 1 << 10),
        ]) {
            assert_eq!(push_bytes(nranks), bytes, "{nranks} ranks");
        }
        for nranks in 1..20_000 {
            let each = push_bytes(nranks);
            assert!(each.is_power_of_two() && (PUSH_MIN..=PUSH_MAX).contains(&each));
            assert!(nranks * each <= PUSH_BUDGET || each == PUSH_MIN, "{nranks}");
            // The slots lie between the flush page and the outbox.
            assert!(slot_at(nranks as Rank - 1, nranks) + each <= outbox_at(nranks));
        }
    }
}
