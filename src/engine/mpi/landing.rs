//! Where notifications from other hosts land in this process, and how
//! they are moved into the tables our waiters watch.
//!
//! Each segment and window this rank binds has a *landing*: one 32-bit
//! value per notification id, a summary bit per id (64 to a word) and a
//! doorbell word, all exposed through the engine's MPI window. A notifier
//! on another host (after its data is complete at the target, see
//! `calls.rs`) stores the value (`MPI_Accumulate`, `MPI_REPLACE`: element
//! atomic) and sets the id's summary bit (`MPI_BOR`). MPI orders neither
//! accumulate after the other (they touch different words), so the mover
//! here takes the summary bits first and keeps an id whose bit it saw but
//! whose value has not landed yet *pending* until the value is there.
//! Moving a value is an atomic swap to 0, then a post into our table
//! (which counts and wakes): a waiter that sees it there sees the data.

use crate::engine::segment::SegmentObject;
use crate::engine::transport::IDS;
use crate::types::NotificationId;
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};

/// Words of the summary (one bit per id).
pub(super) const SUMMARY_WORDS: usize = IDS as usize / 64;

/// The landing of one bound segment.
pub(super) struct Landing {
    /// `[0]`: the doorbell (a count of wake-up requests); `[1..]`: summary.
    pub(super) words: Box<[AtomicU64]>,
    /// One value per id.
    pub(super) values: Box<[AtomicU32]>,
    /// Ids whose summary bit was taken before their value landed.
    pending: Mutex<BTreeSet<NotificationId>>,
    /// How many ids `pending` holds (changed under its lock): a poll that
    /// finds no summary bit and nothing pending takes no lock.
    pending_len: AtomicUsize,
}

impl Landing {
    pub(super) fn new() -> Landing {
        Landing {
            words: (0..1 + SUMMARY_WORDS).map(|_| AtomicU64::new(0)).collect(),
            values: (0..IDS).map(|_| AtomicU32::new(0)).collect(),
            pending: Mutex::new(BTreeSet::new()),
            pending_len: AtomicUsize::new(0),
        }
    }

    /// Byte offset of id `id`'s summary word within `words`.
    pub(super) fn summary_offset(id: NotificationId) -> u64 {
        8 * (1 + id as u64 / 64)
    }

    /// Take the doorbell: whether someone rang it.
    pub(super) fn take_doorbell(&self) -> bool {
        self.words[0].swap(0, SeqCst) != 0
    }

    /// Move the notifications `ids` that landed into `obj`'s table; how
    /// many it moved.
    pub(super) fn pump(&self, obj: &SegmentObject, ids: Range<NotificationId>) -> usize {
        let end = ids.end.min(IDS).min(obj.notification_num());
        let start = ids.start.min(end);
        if start == end {
            return 0;
        }
        let (w0, w1) = (start as usize / 64, (end as usize - 1) / 64);
        // Only the bits of ids in range: the others stay for their own
        // waiters (or the relay).
        let mask = |w: usize| {
            let lo = if w == w0 { start as usize % 64 } else { 0 };
            let hi = if w == w1 { (end as usize - 1) % 64 } else { 63 };
            (u64::MAX >> (63 - hi)) & (u64::MAX << lo)
        };
        let landed = |w: usize| self.words[1 + w].load(SeqCst) & mask(w) != 0;
        // The first summary word with something in range: the words before
        // it are not read again (what lands there meanwhile waits for the
        // next look).
        let first = (w0..=w1).find(|&w| landed(w));
        if self.pending_len.load(SeqCst) == 0 && first.is_none() {
            return 0;
        }
        let table = obj.notifications();
        let mut moved = 0;
        let mut take = |id: NotificationId| -> bool {
            let v = self.values[id as usize].swap(0, SeqCst);
            if v != 0 {
                table.post(id, v);
                moved += 1;
            }
            v != 0
        };
        let mut pending = crate::engine::wait::lock(&self.pending);
        pending.retain(|&id| !(ids.contains(&id) && take(id)));
        for w in first.unwrap_or(w1 + 1)..=w1 {
            if !landed(w) {
                continue;
            }
            let mask = mask(w);
            let mut bits = self.words[1 + w].fetch_and(!mask, SeqCst) & mask;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let id = (w * 64 + b) as NotificationId;
                if !take(id) {
                    pending.insert(id);
                }
            }
        }
        self.pending_len.store(pending.len(), SeqCst);
        moved
    }
}
