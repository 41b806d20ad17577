//! A notification table in shared memory, with a two-level summary bitmap.
//!
//! `values[id]` holds the notification value (0: none). Writers store the
//! value, then set the id's bit in the level-1 summary (one bit per id) and
//! the level-1 word's bit in the level-2 summary (one bit per 64 ids), so
//! that `find` over a large range reads a handful of words instead of
//! 65,536 values.
//!
//! Summary bits are hints that may be stale (set while the value was already
//! reset), never missing: the invariant is "a non-zero value has its bits set
//! once its writer's `post` returns". A reader that meets a set bit whose
//! value is zero clears the bit, then reads the value again and restores the
//! bit if the value came back. With all operations `SeqCst`, a writer whose
//! check saw the bit still set (and so skipped setting it) stored its value
//! before the reader's clear, so the reader's second read sees the value.
//!
//! Data written before a notification is visible to whoever sees the
//! notification: `post` stores the value with `SeqCst` (a release) after the
//! data, `find` and `reset` read it with `SeqCst` (an acquire).

use super::shm::Shared;
use super::wait::WaitWord;
use crate::types::{NotificationId, NotificationValue};
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

/// Ranges up to this many ids are scanned value by value.
const LINEAR_SCAN_MAX: u32 = 64;

/// Words of the level-1 summary for `num` ids.
pub(crate) fn l1_words(num: u32) -> usize {
    (num as usize).div_ceil(64)
}

/// Words of the level-2 summary for `num` ids.
pub(crate) fn l2_words(num: u32) -> usize {
    l1_words(num).div_ceil(64)
}

/// Node-wide counts of a window's table, only ever increasing: how many
/// notifications were posted into it and how many were claimed from it.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) posted: AtomicU64,
    pub(crate) claimed: AtomicU64,
}

// SAFETY: atomics only.
unsafe impl Shared for Counters {}

/// A view of a notification table and its summaries.
#[derive(Clone, Copy)]
pub(crate) struct NotificationTable<'a> {
    pub(crate) values: &'a [AtomicU32],
    pub(crate) l1: &'a [AtomicU64],
    pub(crate) l2: &'a [AtomicU64],
    pub(crate) ww: &'a WaitWord,
    /// Present in tables that count (windows).
    pub(crate) counters: Option<&'a Counters>,
}

impl NotificationTable<'_> {
    /// Store `value` (non-zero) at `id`, mark it in the summaries and wake
    /// sleeping waiters.
    #[inline]
    pub(crate) fn post(&self, id: NotificationId, value: NotificationValue) {
        debug_assert!(value != 0);
        let id = id as usize;
        self.values[id].store(value, SeqCst);
        let (w, bit) = (id / 64, 1u64 << (id % 64));
        if self.l1[w].load(SeqCst) & bit == 0 {
            self.l1[w].fetch_or(bit, SeqCst);
        }
        let (v, bit2) = (w / 64, 1u64 << (w % 64));
        if self.l2[v].load(SeqCst) & bit2 == 0 {
            self.l2[v].fetch_or(bit2, SeqCst);
        }
        if let Some(c) = self.counters {
            c.posted.fetch_add(1, SeqCst);
        }
        self.ww.wake();
    }

    /// Take notification `id` if it is set: the value, or `None` if it was
    /// not set or another claimer took it first. Of several ranks or
    /// threads claiming the same id, exactly one gets its value. Counted as
    /// claimed in counting tables.
    pub(crate) fn claim(&self, id: NotificationId) -> Option<NotificationValue> {
        let v = self.reset(id);
        if v == 0 {
            return None;
        }
        if let Some(c) = self.counters {
            c.claimed.fetch_add(1, SeqCst);
            self.ww.wake();
        }
        Some(v)
    }

    /// Atomically take the value at `id`, leaving 0; returns the old value.
    #[inline]
    pub(crate) fn reset(&self, id: NotificationId) -> NotificationValue {
        self.values[id as usize].swap(0, SeqCst)
    }

    /// The lowest id in `range` with a non-zero value, if any. The range must
    /// be within the table.
    pub(crate) fn find(&self, range: Range<NotificationId>) -> Option<NotificationId> {
        if range.end - range.start <= LINEAR_SCAN_MAX {
            return range
                .into_iter()
                .find(|&id| self.values[id as usize].load(SeqCst) != 0);
        }
        let (first_w, last_w) = ((range.start / 64) as usize, ((range.end - 1) / 64) as usize);
        for v in first_w / 64..=last_w / 64 {
            let mut l2_bits = self.l2[v].load(SeqCst) & bits_within(v, first_w, last_w);
            while l2_bits != 0 {
                let w = v * 64 + l2_bits.trailing_zeros() as usize;
                l2_bits &= l2_bits - 1;
                if let Some(id) = self.find_in_word(w, &range) {
                    return Some(id);
                }
                // The word may now be empty: clear its level-2 bit, then
                // restore it if a writer set a level-1 bit meanwhile.
                let bit2 = 1u64 << (w % 64);
                if self.l1[w].load(SeqCst) == 0 {
                    self.l2[v].fetch_and(!bit2, SeqCst);
                    if self.l1[w].load(SeqCst) != 0 {
                        self.l2[v].fetch_or(bit2, SeqCst);
                    }
                }
            }
        }
        None
    }

    /// Look through the set level-1 bits of word `w` that fall in `range`,
    /// clearing stale ones.
    fn find_in_word(&self, w: usize, range: &Range<NotificationId>) -> Option<NotificationId> {
        let mask = bits_within(w, range.start as usize, range.end as usize - 1);
        let mut bits = self.l1[w].load(SeqCst) & mask;
        while bits != 0 {
            let k = bits.trailing_zeros();
            bits &= bits - 1;
            let id = w * 64 + k as usize;
            if self.values[id].load(SeqCst) != 0 {
                return Some(id as NotificationId);
            }
            let bit = 1u64 << k;
            self.l1[w].fetch_and(!bit, SeqCst);
            if self.values[id].load(SeqCst) != 0 {
                self.l1[w].fetch_or(bit, SeqCst);
                return Some(id as NotificationId);
            }
        }
        None
    }
}

/// The bits of word `word` (covering items `64*word..64*word+64`) that lie
/// in the inclusive item range `first..=last`.
fn bits_within(word: usize, first: usize, last: usize) -> u64 {
    let lo = word * 64;
    let from = first.saturating_sub(lo).min(64);
    let to = (last + 1).saturating_sub(lo).min(64); // exclusive
    if from >= to {
        return 0;
    }
    let upper = if to == 64 { u64::MAX } else { (1u64 << to) - 1 };
    upper & !((1u64 << from) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owned {
        values: Vec<AtomicU32>,
        l1: Vec<AtomicU64>,
        l2: Vec<AtomicU64>,
        ww: WaitWord,
        counters: Counters,
    }

    impl Owned {
        fn new(num: u32) -> Owned {
            Owned {
                values: (0..num).map(|_| AtomicU32::new(0)).collect(),
                l1: (0..l1_words(num)).map(|_| AtomicU64::new(0)).collect(),
                l2: (0..l2_words(num)).map(|_| AtomicU64::new(0)).collect(),
                ww: WaitWord::default(),
                counters: Counters::default(),
            }
        }
        fn table(&self) -> NotificationTable<'_> {
            NotificationTable {
                values: &self.values,
                l1: &self.l1,
                l2: &self.l2,
                ww: &self.ww,
                counters: Some(&self.counters),
            }
        }
    }

    #[test]
    fn bits_within_edges() {
        assert_eq!(bits_within(0, 0, 63), u64::MAX);
        assert_eq!(bits_within(0, 1, 1), 2);
        assert_eq!(bits_within(1, 0, 64), 1);
        assert_eq!(bits_within(1, 0, 63), 0);
        assert_eq!(bits_within(2, 130, 1000), u64::MAX << 2);
    }

    #[test]
    fn find_matches_a_linear_scan_with_stale_bits() {
        let o = Owned::new(65_536);
        let t = o.table();
        let ids = [0u32, 63, 64, 4095, 4096, 40_000, 65_535];
        for &id in &ids {
            t.post(id, id + 1);
        }
        t.reset(63); // leaves a stale summary bit
        let live: Vec<u32> = ids.iter().copied().filter(|&i| i != 63).collect();
        let ranges = [
            (0, 65_536),
            (1, 65_536),
            (64, 65),
            (65, 4095),
            (65, 4096),
            (4097, 65_535),
            (100, 40_001),
            (40_001, 65_535),
        ];
        for &(b, e) in &ranges {
            let expect = live.iter().copied().find(|&i| i >= b && i < e);
            assert_eq!(t.find(b..e), expect, "range {b}..{e}");
        }
        // stale bit of 63 was cleaned by the scans over it
        assert_eq!(o.l1[0].load(SeqCst) & (1 << 63), 0);
        assert_eq!(t.reset(40_000), 40_001);
        assert_eq!(t.find(4097..65_535), None);
    }

    #[test]
    fn concurrent_posts_are_never_missed() {
        use std::sync::Arc;
        let o = Arc::new(Owned::new(8192));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let o = o.clone();
                std::thread::spawn(move || {
                    for i in 0..2048u32 {
                        o.table().post(w * 2048 + i, 1);
                    }
                })
            })
            .collect();
        let mut seen = 0;
        while seen < 8192 {
            if let Some(id) = o.table().find(0..8192) {
                assert_eq!(o.table().reset(id), 1);
                seen += 1;
            }
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(o.table().find(0..8192), None);
    }
}
