//! Single copies between nodes, and pieces written unstaged: each rank's
//! offer of its receive buffer to the senders of other nodes, the senders'
//! writes straight into it (`process_vm_writev`) or into the target node's
//! window, and the revocation of a failing call's offer (see the module
//! documentation's "Single copies between nodes" and "Large pieces
//! unstaged").

use super::control::{OFFER, OFFER_ADDRESS, OFFER_MASK, offer_busy};
use super::single_copy::{brief, kernel_copy_fast, wait_out};
use super::state::{Alltoallv, AroundCopies};
use crate::collectives::alltoallv_plan::AlltoallvPlan;
use crate::context::Context;
use crate::engine::transfer::PutFrom;
use crate::error::Result;
use crate::types::{Deadline, Local, Rank, Remote, Timeout};
use bytemuck::Pod;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// How long a sender waits for the offer of a rank of another node that
/// took its previous call's result privately (see `Alltoallv::push_into`)
/// before it writes the piece into the window instead. As for
/// `single_copy::SINGLE_COPY_PATIENCE`, the receiver's lateness delays
/// the call's end anyway; a wait that gives up sends the receiver a copy out of the window
/// more. 8 ranks in 2 or 4 nodes and 4 ranks in 2, 64 KiB to 1 MiB per
/// pair, private, 2-core Xeon VM: 3 ms took 0.969 of 1 ms's time (median
/// of 46 alternated rounds and sizes, 36 of them below 1), 10 ms 0.990.
const OFFER_PATIENCE: std::time::Duration = std::time::Duration::from_millis(3);

/// The longest nap of a sender polling another node's rank for its offer
/// (see `Alltoallv::push_into`).
const OFFER_NAP: std::time::Duration = std::time::Duration::from_micros(50);

/// How many calls a sender takes a rank of another node that offered no
/// buffer to want its pieces through the window again before it looks at
/// its offer anew (see `Alltoallv::push_into`): looking costs a remote
/// atomic per piece, 6% of an in-place call at 64 KiB per pair on 2
/// nodes of 2; a rank that turns to `run_into` gets its pieces in one
/// copy a few calls later.
const WINDOW_CALLS: u64 = 8;

/// Set (`on`) or clear bit `bit` of `word`, another node's, with the
/// engine's atomics (GASPI has no atomic or).
fn flip_bit(ctx: &Context, word: Remote, bit: u64, on: bool) -> Result<()> {
    let mut v = ctx.atomic_fetch_add(word, 0, Timeout::Block)?;
    while (v & bit != 0) != on {
        let new = if on { v | bit } else { v & !bit };
        match ctx.atomic_compare_swap(word, v, new, Timeout::Block)? {
            now if now == v => break,
            now => v = now,
        }
    }
    Ok(())
}

/// An offer word: the call's tag in the high half, then [`OFFER_PRIVATE`],
/// [`OFFER_REVOKED`], [`OFFER_LATER`] (no buffer in this call, as the
/// node's measurements chose, but likely in later ones: senders look
/// again in the next call) and the number of senders writing into the
/// buffer ([`OFFER_WRITERS`]).
const OFFER_PRIVATE: u64 = 1 << 31;
const OFFER_REVOKED: u64 = 1 << 30;
const OFFER_LATER: u64 = 1 << 29;
const OFFER_WRITERS: u64 = OFFER_LATER - 1;

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// Offer this call's receive buffer `recv` to the ranks of other nodes
    /// that write their pieces unstaged, where they may write into it
    /// themselves (one copy, by the kernel, where the window's way is two:
    /// their write into the window and this rank's copy out): its address
    /// and the call's tag with [`OFFER_PRIVATE`], and
    /// an empty mask in which each sender that does sets its bit. Only
    /// where `recv` holds the call's pieces packed (`fits`, no
    /// displacements) and a piece of [`Alltoallv::single_min`] bytes or
    /// more may come from a node mapped here, and in the calls where the
    /// node's measurements have ranks copy once (`now`; in the others the
    /// tag and [`OFFER_LATER`] tell senders to write into the window in
    /// this call and look again in the next); otherwise the tag alone
    /// tells senders to write into the window, as they also do for a rank
    /// whose offer they have not seen within [`OFFER_PATIENCE`], that
    /// took its offer back ([`Alltoallv::revoke`]), or whose memory they
    /// may not write: the mask says which pieces came which way. While the
    /// call holds `recv` borrowed, kernel copies made for other processes
    /// write the places of those pieces, as a device would; this rank
    /// reads and writes none of them during the call (`copy_out` skips
    /// them), and none is written once the call has returned
    /// ([`Alltoallv::revoke`]).
    pub(super) fn offer(&mut self, tag: u32, recv: Option<&[T]>, fits: bool, now: bool) {
        let p = self.plan.as_ref().expect("planned");
        let (me, local) = (self.ctx.rank() as usize, self.ctx.local_rank() as usize);
        let buffer = recv.filter(|_| fits && self.offers(p) && self.offerable(p, me));
        for k in 0..p.layout.ranks.div_ceil(64) {
            self.offer_word(local, OFFER_MASK + k).store(0, SeqCst);
        }
        let mut word = u64::from(tag) << 32;
        let buffer = match buffer {
            Some(b) if now => {
                let at = b.as_ptr() as usize as u64;
                self.offer_word(local, OFFER_ADDRESS).store(at, SeqCst);
                word |= OFFER_PRIVATE;
                Some(b)
            }
            Some(_) => {
                word |= OFFER_LATER;
                None
            }
            None => None,
        };
        self.offer_word(local, OFFER).store(word, SeqCst);
        self.offered = buffer.map(|b| (b.as_ptr() as usize, b.len()));
        self.offer_made = true;
    }

    /// Whether this call's ranks may offer their buffers at all: results
    /// copied into packed buffers, not left in the window.
    fn offers(&self, p: &AlltoallvPlan) -> bool {
        !self.in_window && self.recv_displs.is_none() && p.layout.nodes() > 1
    }

    /// Whether a piece of [`Alltoallv::single_min`] bytes or more comes to
    /// rank `t` in a call planned as `p` from a node whose window is
    /// mapped here (which its sender could write into `t`'s buffer).
    fn offerable(&self, p: &AlltoallvPlan, t: usize) -> bool {
        let (min, elem) = (self.single_min(), std::mem::size_of::<T>());
        (0..p.layout.ranks).any(|s| {
            p.layout.node_of(s) != p.layout.node_of(t)
                && p.count(s, t).saturating_mul(elem) >= min
                && self.ctx.writes_from_memory_to(s as Rank) == PutFrom::Mapped
        })
    }

    /// Whether a call planned as `p` with private results offers (or, in
    /// a call whose measured way copies twice, would offer) a buffer of a
    /// rank of this node to other nodes' senders.
    pub(super) fn has_offered(&self, p: &AlltoallvPlan) -> bool {
        self.offers(p)
            && p.layout
                .node_ranks(self.ctx.node())
                .any(|t| self.offerable(p, t))
    }

    /// After an error in a call whose receive buffer was offered: take the
    /// offer back ([`OFFER_REVOKED`]; senders that come later write into
    /// the window), then wait until the senders writing into the buffer
    /// have finished (each is one kernel copy under way), so that none
    /// writes there once the call has returned and the caller may drop
    /// the buffer. Writers that failed end the wait (they write no more;
    /// a dead one never gives its place back): it ends once every sender
    /// marked at work ([`offer_busy`]) has failed or gone, never only
    /// because some other rank failed while a living one still writes.
    pub(super) fn revoke(&self) {
        if self.offered.is_none() {
            return;
        }
        let (local, n) = (
            self.ctx.local_rank() as usize,
            self.ctx.num_ranks() as usize,
        );
        let word = self.offer_word(local, OFFER);
        word.fetch_or(OFFER_REVOKED, SeqCst);
        let writers_dead = || {
            let _ = self.ctx.engine.faults();
            (0..n).all(|r| {
                let busy = self.offer_word(local, offer_busy(n) + r / 64).load(SeqCst);
                busy >> (r % 64) & 1 == 0 || !self.ctx.engine.running(r as Rank)
            })
        };
        wait_out(|| word.load(SeqCst) & OFFER_WRITERS != 0, writers_dead);
    }

    /// Write `piece`, this rank's for rank `t` of another node, straight
    /// into `t`'s receive buffer if `t` offered it in this call
    /// ([`Alltoallv::offer`]): `Ok(false)` if the piece must go through
    /// the window instead. Waits for the offer up to
    /// [`OFFER_PATIENCE`] within `deadline`, unless `t` took its
    /// previous call's result in the window (it likely does again); does
    /// not look for [`WINDOW_CALLS`] calls after `t` offered nothing, nor
    /// in a call whose measured way copies twice (this node's pick: `t`'s
    /// node takes the same ways, a call apart at most, and then offers
    /// nothing either; waiting for its word only delayed this rank's
    /// write until `t` had started the call: 2 ranks in 2 nodes of 1,
    /// private results, 0.96 of the time at 16-256 KiB per pair). The
    /// offer's count of writers keeps `t` from returning while this rank
    /// writes; the bit in `t`'s mask, set before the count drops, tells
    /// `t` that the piece is in its buffer.
    fn push_into(
        &self,
        p: &AlltoallvPlan,
        t: usize,
        piece: &[u8],
        deadline: Deadline,
    ) -> Result<bool> {
        let (ctx, rank, n) = (self.ctx, t as Rank, self.ctx.num_ranks() as usize);
        let window_until = self.window_until.get(t).map_or(0, |w| w.load(Relaxed));
        if !self.once_way
            || self.calls < window_until
            || self.push_failed.load(Relaxed)
            || piece.len() < self.single_min()
            || ctx.writes_from_memory_to(rank) != PutFrom::Mapped
        {
            return Ok(false);
        }
        let lt = t - p.layout.node_ranks(p.layout.node_of(t)).start;
        let at = |k: usize| Remote::new(rank, self.segment, self.offer_at(lt, k));
        let fetch = |k: usize| ctx.atomic_fetch_add(at(k), 0, Timeout::Block);
        let tag = u64::from(crate::collectives::call_tag(self.calls));
        // The previous call's tag: `t` has not started this call yet, and
        // offered nothing in that one. (Before the first call the word
        // holds no tag, 0: `t` may yet offer.)
        let before =
            (self.calls.checked_sub(1)).map(|c| u64::from(crate::collectives::call_tag(c)));
        // The word once it tells whether `t` takes this piece into its
        // buffer in this call: `t`'s offer or refusal of this call, or its
        // refusal of the call before (not a refusal for that call only,
        // [`OFFER_LATER`]: `t` may offer in this one).
        let judge = |w: u64| match w >> 32 {
            x if x == tag => Some(w),
            x if Some(x) == before && w & (OFFER_PRIVATE | OFFER_LATER) == 0 => Some(w),
            _ => None,
        };
        let seen = match judge(fetch(OFFER)?) {
            Some(seen) => Ok(seen),
            None => {
                let wait = match self.around_writes {
                    Some(_) => deadline,
                    None => brief(deadline, OFFER_PATIENCE),
                };
                ctx.engine
                    .patience()
                    .poll(wait, OFFER_NAP, || Ok(judge(fetch(OFFER)?)))
            }
        };
        let mut w = match seen {
            Ok(w) if w >> 32 == tag && w & OFFER_PRIVATE != 0 => w,
            Ok(w) if w >> 32 == tag && w & OFFER_LATER != 0 => return Ok(false),
            Ok(_) => {
                // No buffer offered: the window for a few calls.
                if let Some(w) = self.window_until.get(t) {
                    w.store(self.calls.saturating_add(WINDOW_CALLS), Relaxed);
                }
                return Ok(false);
            }
            Err(e) if e.is_timeout() => return Ok(false),
            Err(e) => return Err(e),
        };
        // Marked at work before taking a place (`t`'s revoke waits for
        // the living ones marked), unmarked once the place is given back.
        let me = self.ctx.rank() as usize;
        let (busy, bit) = (at(offer_busy(n) + me / 64), 1u64 << (me % 64));
        flip_bit(ctx, busy, bit, true)?;
        let unmark = || flip_bit(ctx, busy, bit, false);
        // A writer's place, while the offer stands.
        loop {
            let open = w >> 32 == tag && w & OFFER_PRIVATE != 0 && w & OFFER_REVOKED == 0;
            if !open || w & OFFER_WRITERS == OFFER_WRITERS {
                unmark()?;
                return Ok(false);
            }
            match ctx.atomic_compare_swap(at(OFFER), w, w + 1, Timeout::Block) {
                Ok(now) if now == w => break,
                Ok(now) => w = now,
                Err(e) => {
                    let _ = unmark();
                    return Err(e);
                }
            }
        }
        let written = self.push_piece(t, piece, &fetch).and_then(|done| {
            if done {
                // This rank's bit in `t`'s mask (idempotent: a call
                // resumed may write the piece again).
                flip_bit(ctx, at(OFFER_MASK + me / 64), bit, true)?;
            }
            Ok(done)
        });
        // The writer's place back (wrapping add: minus one).
        let released = ctx.atomic_fetch_add(at(OFFER), u64::MAX, Timeout::Block);
        let unmarked = unmark();
        let written = written?;
        released?;
        unmarked?;
        Ok(written)
    }

    /// The copy of [`Alltoallv::push_into`] once this rank holds a
    /// writer's place in `t`'s offer: `Ok(false)` where the piece must go
    /// through the window (its place would lie at an offset where the
    /// kernel's copy is slow, see [`Alltoallv::aligned`], or this process
    /// may not write `t`'s memory: then it stops trying).
    fn push_piece(
        &self,
        t: usize,
        piece: &[u8],
        fetch: &dyn Fn(usize) -> Result<u64>,
    ) -> Result<bool> {
        // Packed by source: `t` checked that its buffer holds them all.
        let Some(&place) = self.push_at.get(t) else {
            return Ok(false);
        };
        let addr = fetch(OFFER_ADDRESS)?;
        let dst = place
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| usize::try_from(addr).ok()?.checked_add(b));
        let Some(dst) = dst else {
            return Ok(false);
        };
        if !kernel_copy_fast(piece.as_ptr() as usize as u64, dst as u64) {
            return Ok(false);
        }
        let around = |written| {
            if let Some(AroundCopies(hook)) = &self.around_writes {
                hook(t as Rank, written);
            }
        };
        around(false);
        let result = self.ctx.write_into_process(t as Rank, dst, piece);
        around(true);
        match result {
            Ok(()) => Ok(true),
            Err(_) => {
                self.push_failed.store(true, Relaxed);
                Ok(false)
            }
        }
    }

    /// Write this rank's pieces for the nodes it reaches unstaged
    /// (`Alltoallv::direct_to`) into their receive areas: from `send`, or
    /// in the window from its staging slots. Complete at the targets on
    /// return, so the node's notifications, sent once every local rank has
    /// staged, follow the data.
    pub(super) fn write_direct(
        &self,
        send: &[T],
        send_counts: &[usize],
        deadline: Deadline,
    ) -> Result<()> {
        if !self.direct_to.contains(&true) {
            return Ok(());
        }
        let p = self.plan.as_ref().expect("planned");
        let (me, node) = (self.ctx.rank() as usize, self.ctx.node());
        let elem = std::mem::size_of::<T>();
        let mut posted = false;
        for (to, &direct) in self.direct_to.iter().enumerate() {
            let ranks = p.layout.node_ranks(to);
            let counts = &send_counts[ranks.clone()];
            if !direct || counts.iter().all(|&c| c == 0) {
                continue;
            }
            self.await_credit(p, to, deadline)?;
            let place = |t: usize| self.recv_place(p, self.calls, me, t) * elem;
            if self.in_window {
                for (t, &c) in ranks.zip(counts).filter(|&(_, &c)| c > 0) {
                    let staged = p
                        .stage_at(me, t)
                        .expect("a piece for another node is staged");
                    let here =
                        Local::new(self.segment, (self.area(node, self.calls) + staged) * elem);
                    let remote = Remote::new(self.peer(to), self.segment, place(t));
                    let queue = self.options.queue;
                    crate::collectives::with_room(self.ctx, queue, deadline, || {
                        self.ctx
                            .write(here, remote, c * elem, queue, Timeout::Block)
                    })?;
                }
                posted = true;
            } else {
                // One call per node and kind of stores (`streams_to`): the
                // engine completes them together. Pieces whose receivers
                // offered their buffers go there.
                let mut pieces = [const { Vec::new() }; 2];
                for (t, &c) in ranks.zip(counts).filter(|&(_, &c)| c > 0) {
                    let from = self.send_at[t];
                    let piece: &[u8] = bytemuck::cast_slice(&send[from..from + c]);
                    if !self.push_into(p, t, piece, deadline)? {
                        let streams = self.streams_to(std::iter::once(t));
                        pieces[usize::from(streams)].push((piece, place(t)));
                    }
                }
                for (streams, pieces) in [false, true].into_iter().zip(&pieces) {
                    if !pieces.is_empty() {
                        let peer = self.peer(to);
                        self.ctx
                            .write_from_memory(peer, self.segment, pieces, streams)?;
                        let bytes = pieces.iter().map(|(d, _)| d.len()).sum();
                        self.count_streamed(bytes, streams);
                    }
                }
            }
        }
        if posted {
            // Complete at the targets (the engines that write from any
            // memory complete their writes there by the queue's wait).
            self.ctx.wait(self.options.queue, deadline.timeout())?;
        }
        Ok(())
    }
}
