//! Atomic words of a node-shared window, for the protocols the adapters
//! run between ranks (the lock queues, the broadcaster's requests and
//! counters).
//!
//! A word on the caller's node is reached by a hardware atomic on the
//! node's window memory (Zhou et al. 2015's load/store path); a word on another
//! node by a GASPI atomic. Every change wakes the waiters of the word's
//! node, so a rank waiting on a word of its own node waits politely
//! (spin, yield, then sleep on the node's futex word) and never polls
//! remote memory; a rank waiting on a word of another node polls it, at
//! least every 10 ms once asleep.

use super::mcs::ProtocolWords;
use crate::context::Context;
use crate::engine::segment::SegmentObject;
use crate::engine::transport::AtomicOp;
use crate::error::Result;
use crate::types::{Deadline, Rank, Remote, SegmentId, Timeout};
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

/// An 8-byte word of the window: at window offset `at` of `rank`'s node
/// window (so `rank` names the node, and the owner for error messages).
#[derive(Clone, Copy, Debug)]
pub(super) struct Word {
    pub(super) rank: Rank,
    pub(super) at: usize,
}

impl Word {
    /// The word `off` bytes further.
    pub(super) fn plus(self, off: usize) -> Word {
        Word {
            rank: self.rank,
            at: self.at + off,
        }
    }
}

/// The words of one node-shared window, as this rank reaches them.
#[derive(Clone, Debug)]
pub(super) struct Words<'a> {
    ctx: &'a Context,
    segment: SegmentId,
    /// This node's window (its words, and the futex word the wake-ups use).
    node: Arc<SegmentObject>,
}

impl<'a> Words<'a> {
    /// The words of window `segment`, whose object on this node is `node`.
    pub(super) fn new(ctx: &'a Context, segment: SegmentId, node: Arc<SegmentObject>) -> Words<'a> {
        Words { ctx, segment, node }
    }

    fn local(&self, w: Word) -> bool {
        self.ctx.node_of(w.rank) == self.ctx.node()
    }

    /// Whether `w` changes by a CPU atomic: on this node, unless the
    /// transport applies every atomic (a job of several nodes under GPI-2).
    fn hardware(&self, w: Word) -> bool {
        self.local(w) && self.ctx.engine.cpu_atomics()
    }

    fn remote(&self, w: Word) -> Remote {
        Remote::new(w.rank, self.segment, w.at)
    }

    /// An atomic on `w`, then a wake-up of `w`'s node. (Also for the lock
    /// words, which nobody awaits: between hosts of the MPI engine their
    /// doorbells are what keeps a computing target's relay thread
    /// polling. Without them a `two-level` lock to a waiting target took
    /// 0.24-0.62 of the time, to a computing one 10-17 times as long;
    /// docs/guide/mpi.md, "Wake-ups for words nobody awaits".)
    fn atomic(&self, w: Word, op: AtomicOp) -> Result<u64> {
        if self.hardware(w) {
            let old = op.apply(self.node.atomic_u64(w.at));
            self.node.notifications().ww.wake();
            Ok(old)
        } else {
            self.ctx.atomic_wake(self.remote(w), op)
        }
    }

    /// `fetch_add`; returns the old value.
    pub(super) fn fetch_add(&self, w: Word, v: u64) -> Result<u64> {
        self.atomic(w, AtomicOp::FetchAdd(v))
    }

    /// `fetch_add` that wakes `w`'s node only if `watch` (a word on the
    /// same node) is non-zero: for counters whose waiters announce
    /// themselves in `watch` ([`Words::await_watched`]), so that the other
    /// sleepers of the node are not woken for nothing.
    pub(super) fn fetch_add_watched(&self, w: Word, v: u64, watch: Word) -> Result<u64> {
        let old = self.fetch_add_quiet(w, v)?;
        if self.load(watch)? != 0 {
            if self.local(watch) {
                self.node.notifications().ww.wake();
            } else {
                self.ctx
                    .atomic_wake(self.remote(watch), AtomicOp::FetchAdd(0))?;
            }
        }
        Ok(old)
    }

    /// [`Words::await_word`] on a word changed by
    /// [`Words::fetch_add_watched`] with `watch`: counts this waiter in
    /// `watch` while waiting. (Dekker: the waiter raises `watch` then
    /// reads `w`, the changer changes `w` then reads `watch`, all SeqCst,
    /// so one of them sees the other.) A waiter on another node's word
    /// polls it (see the module docs).
    pub(super) fn await_watched(
        &self,
        w: Word,
        watch: Word,
        pred: impl Fn(u64) -> bool,
        deadline: Deadline,
    ) -> Result<u64> {
        self.fetch_add_quiet(watch, 1)?;
        let got = self.await_word(w, pred, deadline);
        self.fetch_add_quiet(watch, 1u64.wrapping_neg())?;
        got
    }

    /// `fetch_add` without a wake-up (for words nobody waits on).
    pub(super) fn fetch_add_quiet(&self, w: Word, v: u64) -> Result<u64> {
        if self.hardware(w) {
            Ok(self.node.atomic_u64(w.at).fetch_add(v, SeqCst))
        } else {
            self.ctx.atomic_fetch_add(self.remote(w), v, Timeout::Block)
        }
    }

    /// `compare_swap`; returns the old value.
    pub(super) fn compare_swap(&self, w: Word, old: u64, new: u64) -> Result<u64> {
        self.atomic(w, AtomicOp::CompareSwap { old, new })
    }

    /// An atomic read (`fetch_add` of 0 on another node).
    pub(super) fn load(&self, w: Word) -> Result<u64> {
        if self.local(w) {
            Ok(self.node.atomic_u64(w.at).load(SeqCst))
        } else {
            self.ctx.atomic_fetch_add(self.remote(w), 0, Timeout::Block)
        }
    }

    /// A plain store to a word of this node that nobody else writes now
    /// (a rank's own queue node before it is queued).
    pub(super) fn store_own(&self, w: Word, v: u64) {
        debug_assert!(self.local(w));
        self.node.atomic_u64(w.at).store(v, SeqCst);
    }

    /// Wait until `pred` holds for `w`'s value (see the module docs);
    /// returns the value.
    pub(super) fn await_word(
        &self,
        w: Word,
        pred: impl Fn(u64) -> bool,
        deadline: Deadline,
    ) -> Result<u64> {
        self.ctx.engine.patience().wait(
            self.node.notifications().ww,
            deadline,
            || {
                // Between hosts a word of this node changes when the
                // transport's atomics land, which may need this process to
                // call into the transport (MPI's passive target): pump at
                // every look, as the waits for notifications do (more often
                // than the progress every wait gives, `Patience::progressing`,
                // and with `MPI_Win_sync`: a lock hand-off waits on this).
                // Without it, contended locks between two hosts took 4.3-7.2
                // times as long even with that progress (2026-11-30,
                // docs/mpi-lock-pump-remeasured-2026-11-30.txt).
                if self.local(w) {
                    self.ctx.engine.pump(self.segment, &self.node, 0..0);
                }
                match self.load(w) {
                    Ok(v) if pred(v) => Some(Ok(v)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                }
            },
            || self.ctx.engine.faults(),
        )?
    }
}

/// The lock protocol's view of the words (`mcs.rs`).
impl ProtocolWords for Words<'_> {
    type Word = Word;

    fn plus(&self, w: Word, off: usize) -> Word {
        w.plus(off)
    }

    fn fetch_add(&self, w: Word, v: u64) -> Result<u64> {
        Words::fetch_add(self, w, v)
    }

    fn compare_swap(&self, w: Word, old: u64, new: u64) -> Result<u64> {
        Words::compare_swap(self, w, old, new)
    }

    fn load(&self, w: Word) -> Result<u64> {
        Words::load(self, w)
    }

    fn store_own(&self, w: Word, v: u64) {
        Words::store_own(self, w, v)
    }

    fn await_word(&self, w: Word, pred: impl Fn(u64) -> bool, deadline: Deadline) -> Result<u64> {
        Words::await_word(self, w, pred, deadline)
    }

    fn describe(&self, w: Word) -> String {
        format!("of rank {} at {}", w.rank, w.at)
    }
}
