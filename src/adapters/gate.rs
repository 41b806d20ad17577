//! The two-level lock design's global word (`LockDesign::TwoLevel`,
//! foMPI's): two classes of holders, `lock_all` holders
//! and exclusive holders, counted in separate bits of one word, that
//! exclude each other. A member adds itself, and if it finds a holder of
//! the other class takes itself out again and waits until that class has
//! drained; holders of one class never wait for each other. Over the same
//! protocol words as the queue lock (`mcs.rs`), and checked with it under
//! loom (`mcs_model.rs`).

use super::mcs::ProtocolWords;
use crate::error::Result;
use crate::types::Deadline;

/// `lock_all` holders count in the word's high half, exclusive holders
/// in its low half.
const ALL_INCR: u64 = 1 << 32;
const EXCL_INCR: u64 = 1;
const EXCL_MASK: u64 = ALL_INCR - 1;

/// The two classes of holders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Class {
    /// `lock_all` holders.
    All,
    /// Holders of an exclusive lock (on any target).
    Exclusive,
}

impl Class {
    /// This class's unit in the word, and the bits of the other class.
    fn bits(self) -> (u64, u64) {
        match self {
            Class::All => (ALL_INCR, EXCL_MASK),
            Class::Exclusive => (EXCL_INCR, !EXCL_MASK),
        }
    }
}

/// One global word as one member sees it.
pub(super) struct Gate<'w, W: ProtocolWords> {
    pub(super) words: &'w W,
    pub(super) word: W::Word,
}

impl<W: ProtocolWords> Gate<'_, W> {
    /// Count this member in `class` once no holder of the other class is
    /// in; back off and wait while one is. After an error (a timeout)
    /// nothing of this member is left in the word: calling again starts
    /// afresh.
    pub(super) fn enter(&self, class: Class, deadline: Deadline) -> Result<()> {
        let (mine, theirs) = class.bits();
        loop {
            if self.words.fetch_add(self.word, mine)? & theirs == 0 {
                return Ok(());
            }
            self.words.fetch_add(self.word, mine.wrapping_neg())?;
            self.words
                .await_word(self.word, |v| v & theirs == 0, deadline)?;
        }
    }

    /// Take this member out of `class`.
    pub(super) fn leave(&self, class: Class) -> Result<()> {
        self.words
            .fetch_add(self.word, class.bits().0.wrapping_neg())
            .map(drop)
    }
}
