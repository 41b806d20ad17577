//! The MCS-RW-RP queue lock (Mellor-Crummey & Scott 1991: a
//! readers-writer queue lock with reader preference), over protocol words
//! it reaches through [`ProtocolWords`]: the window's words in the library
//! (`words.rs`), a model's in its check under loom (`mcs_model.rs`:
//! `RUSTFLAGS="--cfg gaspi_loom" cargo test --profile loom --lib
//! mcs_model`).
//!
//! A lock is four words: `rcnt` (reader count in units of `RC_INCR`, with
//! the flags `WIFLAG`, a writer is interested, and `WAFLAG`, a writer is
//! active), `r_hd` (the queue of blocked readers), `w_tail` and `w_hd`
//! (the writers' queue). Each rank owns a queue node per lock it may wait
//! on, in its own node's memory: `blocked` and `next`; a waiter waits on
//! its own `blocked` word only, never on a remote word. Queue node
//! pointers are `rank + 1` (0 is nil); `fetch_and_store` is a
//! `compare_swap` loop and `fetch_and_or(WIFLAG)` a `fetch_add`, because
//! `WIFLAG` is clear whenever the head writer sets it. Exactly one
//! hand-off unblocks each queued waiter, which is what makes a lock
//! request that timed out resumable: its queue node stays queued, and
//! waiting again ([`QueueLock::await_grant`]) goes on waiting.

use crate::error::{Error, Result};
use crate::types::Deadline;

/// `rcnt` flags and reader unit.
const WIFLAG: u64 = 1;
const WAFLAG: u64 = 2;
const RC_INCR: u64 = 4;
/// Words of a lock, as byte offsets from its first.
const RCNT: usize = 0;
const R_HD: usize = 8;
const W_TAIL: usize = 16;
const W_HD: usize = 24;
/// Words of a queue node.
const BLOCKED: usize = 0;
const NEXT: usize = 8;

/// The atomic words a protocol runs on. Each operation is atomic on its
/// word and complete (visible to every later operation of anyone) when it
/// returns.
pub(super) trait ProtocolWords {
    /// The address of a word.
    type Word: Copy;

    /// The word `off` bytes after `w`.
    fn plus(&self, w: Self::Word, off: usize) -> Self::Word;

    /// Add `v`; the old value.
    fn fetch_add(&self, w: Self::Word, v: u64) -> Result<u64>;

    /// Store `new` if the word holds `old`; the old value.
    fn compare_swap(&self, w: Self::Word, old: u64, new: u64) -> Result<u64>;

    /// The word's value.
    fn load(&self, w: Self::Word) -> Result<u64>;

    /// A store to a word of the caller's own that nobody else writes now.
    fn store_own(&self, w: Self::Word, v: u64);

    /// Wait until `pred` holds for the word's value; that value.
    fn await_word(
        &self,
        w: Self::Word,
        pred: impl Fn(u64) -> bool,
        deadline: Deadline,
    ) -> Result<u64>;

    /// Where `w` is, for error messages.
    fn describe(&self, w: Self::Word) -> String;

    /// `fetch_and_store` from `compare_swap`, first guessing `guess`.
    fn swap(&self, w: Self::Word, new: u64, mut guess: u64) -> Result<u64> {
        loop {
            let old = self.compare_swap(w, guess, new)?;
            if old == guess {
                return Ok(old);
            }
            guess = old;
        }
    }

    /// A store that the protocol's invariants say replaces `old`; another
    /// value means the words were corrupted (misuse). The error also says
    /// what the word holds when read again: the same value says the word
    /// itself was wrong; another says that the compare-and-swap's answer
    /// was, or that the word changed in between.
    fn replace(&self, w: Self::Word, old: u64, new: u64) -> Result<()> {
        match self.compare_swap(w, old, new)? {
            v if v == old => Ok(()),
            v => {
                let again = self
                    .load(w)
                    .map_or_else(|e| format!("unreadable: {e}"), |a| a.to_string());
                Err(Error::RmaSync(format!(
                    "protocol word {} holds {v} (read again: {again}), expected {old}: the \
                     window was misused",
                    self.describe(w)
                )))
            }
        }
    }
}

/// What a lock request reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Acquired {
    /// The lock is held.
    Held,
    /// Queued: [`QueueLock::await_grant`] waits for the hand-off.
    Queued,
}

/// One MCS-RW-RP lock as one member sees it.
pub(super) struct QueueLock<'w, W: ProtocolWords, Q> {
    /// The words.
    pub(super) words: &'w W,
    /// The lock's first word (`rcnt`).
    pub(super) lock: W::Word,
    /// This member's queue pointer (its rank + 1) and queue node.
    pub(super) me: u64,
    pub(super) qnode: W::Word,
    /// The queue node a pointer names; an error if it names no member
    /// (the words were corrupted).
    pub(super) qnode_of: Q,
}

impl<W: ProtocolWords, Q: Fn(u64) -> Result<W::Word>> QueueLock<'_, W, Q> {
    fn l(&self, off: usize) -> W::Word {
        self.words.plus(self.lock, off)
    }

    fn q(&self, off: usize) -> W::Word {
        self.words.plus(self.qnode, off)
    }

    /// Unblock the waiter `ptr` names.
    fn grant(&self, ptr: u64) -> Result<()> {
        let blocked = self.words.plus((self.qnode_of)(ptr)?, BLOCKED);
        self.words.replace(blocked, 1, 0)
    }

    /// `ReaderLock` (`writer == false`) or the first part of `WriterLock`
    /// (up to the wait).
    pub(super) fn lock(&self, writer: bool) -> Result<Acquired> {
        let w = self.words;
        if !writer {
            if w.fetch_add(self.l(RCNT), RC_INCR)? & WAFLAG == 0 {
                return Ok(Acquired::Held);
            }
            w.store_own(self.q(BLOCKED), 1);
            let next = w.swap(self.l(R_HD), self.me, 0)?;
            w.store_own(self.q(NEXT), next);
            if w.load(self.l(RCNT))? & WAFLAG == 0 {
                // The writer left before we were queued: wake the queue.
                self.wake_readers()?;
            }
            return Ok(Acquired::Queued);
        }
        w.store_own(self.q(BLOCKED), 1);
        w.store_own(self.q(NEXT), 0);
        let pred = w.swap(self.l(W_TAIL), self.me, 0)?;
        if pred == 0 {
            w.replace(self.l(W_HD), 0, self.me)?;
            if w.fetch_add(self.l(RCNT), WIFLAG)? == 0
                && w.compare_swap(self.l(RCNT), WIFLAG, WAFLAG)? == WIFLAG
            {
                return Ok(Acquired::Held);
            }
            // Readers are in: the last one hands the lock over.
        } else {
            w.fetch_add(w.plus((self.qnode_of)(pred)?, NEXT), self.me)?;
        }
        Ok(Acquired::Queued)
    }

    /// Wait on this member's queue node for the hand-off; a reader then
    /// passes it on to the next queued reader. After an error (a
    /// timeout) the request is still queued: call again to go on waiting.
    pub(super) fn await_grant(&self, writer: bool, deadline: Deadline) -> Result<()> {
        self.words
            .await_word(self.q(BLOCKED), |b| b == 0, deadline)?;
        if !writer {
            let next = self.words.load(self.q(NEXT))?;
            if next != 0 {
                self.grant(next)?;
            }
        }
        Ok(())
    }

    /// Unblock the queue of readers, if any.
    fn wake_readers(&self) -> Result<()> {
        let head = self.words.swap(self.l(R_HD), 0, 0)?;
        if head != 0 {
            self.grant(head)?;
        }
        Ok(())
    }

    /// `ReaderUnlock` / `WriterUnlock`.
    pub(super) fn unlock(&self, writer: bool) -> Result<()> {
        let w = self.words;
        if !writer {
            let old = w.fetch_add(self.l(RCNT), RC_INCR.wrapping_neg())?;
            if old == RC_INCR + WIFLAG && w.compare_swap(self.l(RCNT), WIFLAG, WAFLAG)? == WIFLAG {
                self.grant(w.load(self.l(W_HD))?)?;
            }
            return Ok(());
        }
        w.replace(self.l(W_HD), self.me, 0)?;
        if w.fetch_add(self.l(RCNT), WAFLAG.wrapping_neg())? != WAFLAG {
            // Readers came while we wrote.
            self.wake_readers()?;
        }
        if w.load(self.q(NEXT))? == 0 && w.compare_swap(self.l(W_TAIL), self.me, 0)? == self.me {
            return Ok(());
        }
        // A writer is queued behind us: wait until it linked in.
        let next = w.await_word(self.q(NEXT), |n| n != 0, Deadline::Never)?;
        w.replace(self.l(W_HD), 0, next)?;
        if w.fetch_add(self.l(RCNT), WIFLAG)? == 0
            && w.compare_swap(self.l(RCNT), WIFLAG, WAFLAG)? == WIFLAG
        {
            self.grant(next)?;
        }
        Ok(())
    }
}
