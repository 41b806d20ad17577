//! The pipelined call of a job of one node: a large split call cut into
//! chunks that pass through a small ring of staging slots in the window,
//! so that each chunk is put in, reduced and copied out while it is still
//! in the caches.
//!
//! The unpipelined split call puts every rank's whole input into the
//! window, reduces every fraction and copies the whole result out: at
//! 4 MiB per rank and 4 ranks that is 16 MiB of inputs, 4 MiB of result
//! and 16 MiB of private results moving through memory at each step, well
//! beyond the last-level cache. Pipelined, only the caller's own buffers
//! leave the caches (`send` read once, `recv` written once).
//!
//! # One chunk
//! Chunk `g` (numbered across calls, so consecutive calls continue the
//! ring) uses staging slot `g % STAGE_SLOTS`. Every local rank
//! 1. **puts** its part of the chunk into its staging slot once every
//!    local rank has reduced chunk `g - STAGE_SLOTS` (the slot's previous
//!    user), then sets its put word to `g + 1`;
//! 2. **reduces** its fraction of the chunk (the chunk cut into one part
//!    per local rank) once every put word has reached `g + 1`, in
//!    local-rank order, into the window's result area, then sets its
//!    reduced word to `g + 1`;
//! 3. with a private result, **copies** the chunk from the result area
//!    into the caller's buffer once every reduced word has reached
//!    `g + 1`.
//!
//! A rank does whatever step it can (puts first, which the others wait
//! for), so ranks that share a core run ahead of each other by at most the
//! ring's depth, and waits only when it can do none. The result is the
//! unpipelined split call's, bit for bit (the same fractions reduced in
//! the same order), and it lies whole in the result area either way.
//!
//! # Reuse
//! A rank starts a call only after finishing the previous one, which
//! needed every rank's reduction of its last chunk, which needed every
//! rank's puts: the result area is rewritten (chunk `g` of the next call,
//! after every rank has put that chunk in) only after every rank has
//! finished reading it.

use super::areas::STAGE_SLOTS;
use super::call_plan::{CallPlan, PipeCursor, split_range};
use super::node_reduce::NodeReduce;
use crate::context::Context;
use crate::engine::memcopy::copy_slice_with;
use crate::error::Result;
use crate::types::Deadline;
use bytemuck::Pod;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// The two words of each local rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Words {
    Put,
    Reduced,
}

/// The next step a rank can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Put,
    Reduce,
    Copy,
    Done,
}

impl NodeReduce {
    /// Whether a call planned as `plan` runs pipelined: a split call on
    /// one node of at least [`AllreduceOptions::pipeline_min`] bytes.
    ///
    /// [`AllreduceOptions::pipeline_min`]: super::AllreduceOptions::pipeline_min
    pub(super) fn pipelined(&self, plan: &CallPlan) -> bool {
        self.areas.stage_slot > 0
            && !plan.choice.replicated
            && plan.len * plan.elem >= self.opts.pipeline_min
    }

    /// Elements per chunk of a call of `elem`-byte elements.
    fn chunk_elems(&self, elem: usize) -> usize {
        (self.areas.stage_slot / elem.max(1)).max(1)
    }

    /// Chunks of a pipelined call planned as `plan`.
    pub(super) fn chunks(&self, plan: &CallPlan) -> usize {
        plan.len.div_ceil(self.chunk_elems(plan.elem))
    }

    /// Local rank `local`'s word of kind `words`: the chunks (numbered
    /// across calls) it has put in, or whose fraction it has reduced.
    fn pipe_word(&self, words: Words, local: usize) -> &AtomicU64 {
        let first = match words {
            Words::Put => 4 + self.slots,
            Words::Reduced => 4 + 2 * self.slots,
        };
        self.word(first + local)
    }

    /// Whether each of the first `local_num` local ranks' words of kind
    /// `words` has reached `n`.
    fn all_reached(&self, words: Words, local_num: usize, n: u64) -> bool {
        (0..local_num).all(|l| self.pipe_word(words, l).load(SeqCst) >= n)
    }

    /// Byte offset of local rank `local`'s staging slot for global chunk
    /// `g`.
    fn stage_at(&self, g: u64, local: usize) -> usize {
        let slot = (g % STAGE_SLOTS as u64) as usize;
        self.areas.stage + (slot * self.slots + local) * self.areas.stage_slot
    }

    /// Run a pipelined call from `cur` on: `send` reduced with `f`, the
    /// result in the window's result area and, with `out`, in the
    /// caller's buffer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pipeline<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        ctx: &Context,
        plan: &CallPlan,
        cur: &mut PipeCursor,
        send: &[T],
        f: &F,
        mut out: Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<()> {
        let elem = plan.elem;
        let per = self.chunk_elems(elem);
        let chunks = self.chunks(plan);
        let local_num = ctx.local_num() as usize;
        let me = ctx.local_rank() as usize;
        let first = self.pipe_seq;
        // Global number of the call's chunk `k`, and its element range.
        let global = |k: usize| first + k as u64;
        let range = |k: usize| k * per..((k + 1) * per).min(plan.len);
        let all_reached = |words: Words, n: u64| self.all_reached(words, local_num, n);
        let private = out.is_some();
        if chunks == 0 {
            return Ok(());
        }
        let next = |cur: &PipeCursor| -> Option<Step> {
            let whole = cur.put == chunks && cur.reduced == chunks;
            let finished = whole
                && if private {
                    cur.copied == chunks
                } else {
                    all_reached(Words::Reduced, global(chunks - 1) + 1)
                };
            if finished {
                return Some(Step::Done);
            }
            if cur.put < chunks {
                // The slot's previous chunk, reduced by every local rank.
                let free = (global(cur.put) + 1).saturating_sub(STAGE_SLOTS as u64);
                if all_reached(Words::Reduced, free) {
                    return Some(Step::Put);
                }
            }
            if cur.reduced < cur.put && all_reached(Words::Put, global(cur.reduced) + 1) {
                return Some(Step::Reduce);
            }
            if private
                && cur.copied < cur.reduced
                && all_reached(Words::Reduced, global(cur.copied) + 1)
            {
                return Some(Step::Copy);
            }
            None
        };
        loop {
            let step = match next(cur) {
                Some(s) => s,
                None => ctx.engine.patience().wait(
                    self.mem.table().ww,
                    deadline,
                    || next(cur),
                    || ctx.engine.faults(),
                )?,
            };
            match step {
                Step::Put => {
                    // The chunk but this rank's own fraction, which it
                    // reduces straight from `send`.
                    let k = cur.put;
                    let (g, chunk) = (global(k), range(k));
                    let own = split_range(chunk.clone(), local_num, me, elem);
                    self.put_around(self.stage_at(g, me), send, chunk, [own]);
                    self.pipe_word(Words::Put, me).store(g + 1, SeqCst);
                    self.mem.table().ww.wake();
                    cur.put += 1;
                }
                Step::Reduce => {
                    let k = cur.reduced;
                    self.reduce_fraction(range(k), global(k), (local_num, me), send, f);
                    self.pipe_word(Words::Reduced, me)
                        .store(global(k) + 1, SeqCst);
                    self.mem.table().ww.wake();
                    cur.reduced += 1;
                }
                Step::Copy => {
                    let k = cur.copied;
                    let r = range(k);
                    if let Some(out) = out.as_deref_mut() {
                        // SAFETY: every local rank has reduced its fraction
                        // of chunk `k` (their reduced words said so), and
                        // nobody writes it again before every local rank
                        // has put in this chunk of the next call, which
                        // this rank does only after this call.
                        let res = unsafe {
                            self.mem
                                .read::<T>(self.areas.result + r.start * elem, r.len())
                        };
                        copy_slice_with(&mut out[r], res, self.streaming.copies);
                    }
                    cur.copied += 1;
                }
                Step::Done => return Ok(()),
            }
        }
    }

    /// Reduce this rank's fraction of chunk `g` (elements `chunk` of the
    /// message) over the local ranks' staging slots (its own from
    /// `send`), in local-rank order, into the result area.
    fn reduce_fraction<T: Pod, F: Fn(&T, &T) -> T>(
        &self,
        chunk: Range<usize>,
        g: u64,
        (local_num, me): (usize, usize),
        send: &[T],
        f: &F,
    ) {
        let elem = std::mem::size_of::<T>();
        let part = split_range(chunk.clone(), local_num, me, elem);
        if part.is_empty() {
            return;
        }
        let skip = (part.start - chunk.start) * elem;
        // SAFETY: this rank's fraction of the chunk in the result area is
        // written by this rank only; the readers of the previous call's
        // result have all put in this chunk of this call (seen by the
        // caller), so they have finished reading it, and the readers of
        // this call's wait for this rank's reduced word, set after this.
        let out = unsafe {
            self.mem
                .write::<T>(self.areas.result + part.start * elem, part.len())
        };
        let at = |l: usize| self.stage_at(g, l) + skip;
        // SAFETY: every local rank wrote its staging slot for chunk `g`
        // before setting its put word, which this rank saw; nobody writes
        // the slot again before every local rank has reduced chunk `g`,
        // this rank included, which it marks only after this.
        unsafe { self.reduce_local(out, part, (local_num, me), send, at, f) };
    }
}
