//! Single copies inside a node: the probe at creation (may the node's ranks
//! read each other's memory?), the announcement of a call's buffers, the
//! push masks, each rank's reads of its pieces out of the others' send
//! buffers (`process_vm_readv`), and the withdrawal of a failing call's
//! send buffer (see the module documentation's "Single copies").

use super::state::{
    ADDRESS, ANNOUNCE, Alltoallv, AroundCopies, DECIDED, MEASURED, MOVED, PROBE, READERS,
    RECV_ADDRESS, THRESHOLD, WITHDRAWN,
};
use super::steps::Staged;
use crate::collectives::alltoallv_plan::AlltoallvPlan;
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, Timeout};
use bytemuck::Pod;
use std::sync::atomic::Ordering::SeqCst;

/// What a reader found of a sender's announcement
/// (`Alltoallv::pull_piece`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pulled {
    /// The piece was read.
    Read,
    /// The sender's call failed and moved the piece into the window.
    Moved,
    /// The sender's call failed and is moving it into the window: wait
    /// (a moment).
    NotNow,
}

/// How long a rank about to copy its pieces for its node's ranks waits for
/// their announcements of the call before it copies those it has not seen
/// into the window (see `Alltoallv::decide`). On a 16-core Xeon, waiting
/// 5 us saw 6-66% of the receivers, 100 us all of them.
const SINGLE_COPY_PATIENCE: std::time::Duration = std::time::Duration::from_millis(1);

/// What a rank's probe word holds at creation (xor its rank), read by the
/// node's other ranks through `process_vm_readv`: a value no other process
/// would hold at that address.
const PROBE_TOKEN: u64 = 0x6761_7370_692d_6131;

/// Wait while `busy` says that ranks are copying into or out of this
/// rank's buffer, unless `failed` says they failed: kernel copies of a
/// piece each, short, so a brief spin, then yields.
pub(super) fn wait_out(mut busy: impl FnMut() -> bool, mut failed: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while busy() && !failed() {
        spins = spins.saturating_add(1);
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The end of a brief wait (at most `most`) within `deadline`.
pub(super) fn brief(deadline: Deadline, most: std::time::Duration) -> Deadline {
    match (deadline.remaining(), most) {
        (Some(left), most) if left < most => deadline,
        (_, most) => Timeout::After(most).deadline(),
    }
}

/// Whether the kernel copies a piece from address `src` to address `dst`
/// at full speed: the destination does not lie at the offsets past the
/// source's within a 4 KiB page where this machine's kernel copy is slow
/// ([`crate::sys::cross_copy_slow_offsets`]; see `Alltoallv::aligned`).
/// Wrapping: only the offset within a page matters.
pub(super) fn kernel_copy_fast(src: u64, dst: u64) -> bool {
    !crate::engine::memcopy::offsets_alias(
        src as usize,
        dst as usize,
        crate::sys::cross_copy_slow_offsets(),
    )
}

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// Find out whether the ranks of this node copy large pieces once
    /// (`once_min`): each publishes its threshold and the address of a
    /// word holding a token, reads every other rank's
    /// token, says whether all came right and all thresholds are its own,
    /// and all agree. Every rank of the node takes part, wanting single
    /// copies or not, so that none waits for another in vain. Called again
    /// after a timeout (the creation's next call, on the same window), it
    /// goes on from the wait that timed out: its own word says how far it
    /// came.
    pub(super) fn probe_single_copy(&mut self, deadline: Deadline) -> Result<()> {
        let ctx = self.ctx;
        let (local, local_num) = (ctx.local_rank() as usize, ctx.local_num() as usize);
        // By default the calls measure whether single copies pay: inside
        // the node and, into offered buffers, from other nodes.
        let measured = self.options.single_copy_min.is_none();
        if local_num < 2 {
            // No piece goes between two ranks of this node; the offers do.
            self.measured = measured;
            return Ok(());
        }
        let min = self.single_min() as u64;
        // A rank that measures and one that copies once in every call
        // would not agree on each call's way: no single copies then.
        let threshold = if measured { min | MEASURED } else { min };
        let first = ctx.node_ranks(ctx.node()).start as u64;
        let token = |local: usize| PROBE_TOKEN ^ (first + local as u64);
        // Read by the others until they all say they are done below; left
        // to them (leaked, 8 bytes) where this rank times out before.
        let probe = Box::new(token(local));
        let at = std::ptr::from_ref::<u64>(&probe) as u64;
        let r = self.probe_waits((threshold, min), &token, at, deadline);
        if r.as_ref().is_err_and(Error::is_timeout) {
            Box::leak(probe);
        } else {
            drop(probe);
        }
        r?;
        if (0..local_num).all(|l| self.line(l, PROBE).load(SeqCst) == 3) {
            self.once_min = usize::try_from(min).unwrap_or(usize::MAX).max(1);
            self.measured = measured;
            // Measured now rather than in the first call.
            crate::sys::cross_copy_slow_offsets();
        }
        Ok(())
    }

    /// The probe's two waits for the node's ranks, the first skipped where
    /// this rank got past it in an earlier call: its token is at `at`.
    fn probe_waits(
        &self,
        (threshold, min): (u64, u64),
        token: &impl Fn(usize) -> u64,
        at: u64,
        deadline: Deadline,
    ) -> Result<()> {
        let local = self.ctx.local_rank() as usize;
        if self.line(local, PROBE).load(SeqCst) < 2 {
            self.line(local, THRESHOLD).store(threshold, SeqCst);
            self.line(local, ADDRESS).store(at, SeqCst);
            self.line(local, PROBE).store(1, SeqCst);
            self.wake();
            self.await_lines::<PROBE>(1, deadline)?;
            self.judge_probe(threshold, min, token);
        }
        self.await_lines::<PROBE>(2, deadline)
    }

    /// Say (this rank's probe word: 3 yes, 2 no) whether every other
    /// rank's token came right and every threshold is this rank's
    /// `threshold` (from `min`).
    fn judge_probe(&self, threshold: u64, min: u64, token: &impl Fn(usize) -> u64) {
        let ctx = self.ctx;
        let (local, local_num) = (ctx.local_rank() as usize, ctx.local_num() as usize);
        let readable = |l: usize| {
            let mut word = [0u8; 8];
            let at = usize::try_from(self.line(l, ADDRESS).load(SeqCst)).unwrap_or(0);
            ctx.read_from_process(ctx.node_ranks(ctx.node()).start + l as Rank, at, &mut word)
                .is_ok()
                && u64::from_ne_bytes(word) == token(l)
        };
        let same = (0..local_num).all(|l| self.line(l, THRESHOLD).load(SeqCst) == threshold);
        let ok = min != usize::MAX as u64
            && min & MEASURED == 0
            && same
            && (0..local_num).filter(|&l| l != local).all(readable);
        self.line(local, PROBE).store(2 + u64::from(ok), SeqCst);
        self.wake();
    }

    /// Announce this call: the buffers this rank sends from and receives
    /// into, where its pieces for and from this node's ranks lie in them
    /// ([`Alltoallv::place_word`]), and whether it reads its large pieces
    /// from this node's ranks itself (`pull`: then `recv` holds them at
    /// `Alltoallv::recv_at`).
    pub(super) fn announce(&mut self, send: &[T], recv: Option<&[T]>, pull: bool) {
        let local = self.ctx.local_rank() as usize;
        self.pull = pull;
        let ranks = self.ctx.node_ranks(self.ctx.node());
        let first = ranks.start as usize;
        if pull {
            for j in 0..ranks.len() {
                let at = self.recv_at[first + j] as u64;
                self.place_word(local, true, j).store(at, SeqCst);
            }
        }
        let recv = recv.map_or(0, |r| r.as_ptr() as usize as u64);
        self.line(local, RECV_ADDRESS).store(recv, SeqCst);
        self.announce_send(send);
        self.line(local, ANNOUNCE)
            .store(2 * (self.calls + 1) + u64::from(pull), SeqCst);
        self.wake();
    }

    /// Say where this rank's pieces for its node's ranks lie: its send
    /// buffer's address and their places in it. A call that goes on after
    /// it took back an announcement not yet decided on
    /// ([`Alltoallv::withdraw`]) says so again (its caller may give the
    /// same pieces in another buffer) and makes the announcement valid
    /// again.
    pub(super) fn announce_send(&self, send: &[T]) {
        let local = self.ctx.local_rank() as usize;
        let ranks = self.ctx.node_ranks(self.ctx.node());
        for (j, t) in ranks.map(usize::from).enumerate() {
            // (In the window there is no send buffer: all is pushed.)
            if let Some(&at) = self.send_at.get(t).filter(|_| !self.in_window) {
                self.place_word(local, false, j).store(at as u64, SeqCst);
            }
        }
        self.line(local, ADDRESS)
            .store(send.as_ptr() as usize as u64, SeqCst);
        if self.withdrawn() == WITHDRAWN {
            self.line(local, ANNOUNCE).fetch_and(!WITHDRAWN, SeqCst);
            self.wake();
        }
    }

    /// The bits of this rank's announcement that say its call in progress
    /// failed and took it back ([`WITHDRAWN`]) and moved the pieces to be
    /// read into the window ([`MOVED`]; see [`Alltoallv::withdraw`]). A new
    /// call's announcement clears both.
    pub(super) fn withdrawn(&self) -> u64 {
        let local = self.ctx.local_rank() as usize;
        self.line(local, ANNOUNCE).load(SeqCst) & (WITHDRAWN | MOVED)
    }

    /// Take back this rank's announcement of the call in progress, if it
    /// made one (single copies), and wait until no rank of its node reads
    /// out of its send buffer any more: a call that fails returns only
    /// then, and its caller may free the buffer or give up the call. A
    /// reader counts itself in the sender's [`READERS`] word before it
    /// looks at the announcement and out after its copy
    /// (`Alltoallv::pull_piece`): so either it sees the announcement taken
    /// back, or this rank sees it counted until its copy is done. Where
    /// the rank has decided its push mask (its node's ranks may read), it
    /// then copies the pieces they were to read into the window, as it
    /// copies the others, and says so ([`MOVED`]): a reader that finds
    /// that takes its piece from the window, whether or not the call ever
    /// goes on (a caller that polls with short timeouts, out of the call
    /// most of the time, does not hold its node's ranks up). Before its
    /// decision nobody reads (readers wait for it); the call, when it goes
    /// on, announces again ([`Alltoallv::announce_send`]: its caller may
    /// give its pieces in another buffer) before it decides.
    pub(super) fn withdraw(&self, send: &[T], send_counts: &[usize]) {
        let local = self.ctx.local_rank() as usize;
        let word = self.line(local, ANNOUNCE);
        let tag = 2 * (self.calls + 1);
        if word.load(SeqCst) & !(WITHDRAWN | MOVED) < tag || self.withdrawn() & MOVED != 0 {
            return; // not announced in this call, or moved already
        }
        word.fetch_or(WITHDRAWN, SeqCst);
        let readers = self.line(local, READERS);
        let ranks = self.ctx.node_ranks(self.ctx.node());
        let failed = || {
            let _ = self.ctx.engine.faults();
            ranks.clone().any(|r| !self.ctx.engine.running(r))
        };
        wait_out(|| readers.load(SeqCst) != 0, failed);
        // (In the window nothing is read: every piece was pushed.)
        if self.line(local, DECIDED).load(SeqCst) == tag && !self.in_window {
            self.stage(send, send_counts, Staged::Read);
            word.fetch_or(MOVED, SeqCst);
            self.wake();
        }
    }

    /// Decide, once per call, which of its large pieces for this node's
    /// ranks this rank copies into the window (its push mask): those for
    /// ranks that do not pull, or whose buffers are not [`aligned`]. A rank
    /// that pulls itself (whose node likely calls `run_into` alike) waits
    /// up to [`SINGLE_COPY_PATIENCE`] (within the call's `deadline`) for
    /// the node's ranks to announce the call: a late receiver delays the
    /// call's end anyway, so waiting for it costs nothing, and only one
    /// that has announced can read its piece itself (where the ranks share
    /// cores, a sender that did not wait found few receivers announced,
    /// and the call was no faster than two copies). A rank of `run` does
    /// not wait: a receiver not seen yet gets its piece through the
    /// window, and learns so from the mask.
    ///
    /// [`aligned`]: Alltoallv::aligned
    pub(super) fn decide(&self, send: &[T], deadline: Deadline) -> Result<()> {
        let p = self.plan.as_ref().expect("planned");
        let ctx = self.ctx;
        let (me, local) = (ctx.rank() as usize, ctx.local_rank() as usize);
        let tag = 2 * (self.calls + 1);
        if self.line(local, DECIDED).load(SeqCst) == tag {
            return Ok(()); // a call resumed after a timeout
        }
        let ranks = p.layout.node_ranks(p.layout.node_of(me));
        let first = ranks.start;
        let targets: Vec<usize> = ranks.filter(|&t| self.single(p, me, t)).collect();
        let announced = |t: usize| self.line(t - first, ANNOUNCE).load(SeqCst) >= tag;
        let patience = ctx.engine.patience();
        if self.pull {
            let until = match self.around_reads {
                Some(_) => deadline,
                None => brief(deadline, SINGLE_COPY_PATIENCE),
            };
            let all = || targets.iter().all(|&t| announced(t)).then_some(());
            let waited = patience.wait(self.window.object().notifications().ww, until, all, || {
                ctx.engine.faults()
            });
            match waited {
                Err(e) if !e.is_timeout() || deadline.expired() => return Err(e),
                _ => {}
            }
        }
        let src = send.as_ptr() as usize as u64;
        let mut mask = vec![0u64; ctx.ranks_per_node().div_ceil(64)];
        for t in targets {
            let lt = t - first;
            // (A rank whose call failed still reads its pieces itself when
            // it goes on: the bits of `withdraw` concern its send buffer.)
            let word = self.line(lt, ANNOUNCE).load(SeqCst) & !(WITHDRAWN | MOVED);
            let dst = self.line(lt, RECV_ADDRESS).load(SeqCst);
            // In the window, every piece for this node is in place.
            if self.in_window || word != tag + 1 || !self.aligned(lt, src, dst) {
                mask[lt / 64] |= 1 << (lt % 64);
            }
        }
        for (k, &m) in mask.iter().enumerate() {
            self.mask_word(local, k).store(m, SeqCst);
        }
        self.line(local, DECIDED).store(tag, SeqCst);
        self.wake();
        Ok(())
    }

    /// Whether this rank's piece for local rank `lt` (sending from buffer
    /// `src`, `lt` receiving into buffer `dst`) may go in one copy, both at
    /// their places ([`Alltoallv::place_word`]): its destination does not
    /// lie 1 to 31 bytes past its source's offset within a 4 KiB page (1
    /// to 15 on AMD Zen 5), or the kernel's copy is not slow there. The
    /// kernel copies with `rep movsb`, which on AMD EPYC VMs runs 10-30
    /// times slower at such offsets (see `engine::memcopy`), and on an
    /// Intel Xeon VM 1.1 times: each process measures where
    /// ([`crate::sys::cross_copy_slow_offsets`]), and those pieces go
    /// through the window. (Buffers at such offsets are
    /// common: a `Vec` of 128 KiB or more starts 16 bytes into a page,
    /// and once a program has freed a large buffer, glibc serves the next
    /// ones from its heap, at any 16-byte offset; refusing them everywhere
    /// made a private alltoallv of 1 MiB per pair 1.4-1.5 times slower on
    /// the Xeon.)
    fn aligned(&self, lt: usize, src: u64, dst: u64) -> bool {
        let (elem, local) = (
            std::mem::size_of::<T>() as u64,
            self.ctx.local_rank() as usize,
        );
        // Wrapping: only the offset within a page matters.
        let before = self.place_word(local, false, lt).load(SeqCst);
        let at = self.place_word(lt, true, local).load(SeqCst);
        let src = src.wrapping_add(before.wrapping_mul(elem));
        let dst = dst.wrapping_add(at.wrapping_mul(elem));
        kernel_copy_fast(src, dst)
    }

    /// Read this rank's large pieces from the ranks of its node straight
    /// out of their send buffers into `recv`, at their places
    /// (`Alltoallv::recv_at`).
    pub(super) fn pull_pieces(&mut self, recv: &mut [T], deadline: Deadline) -> Result<()> {
        let p = self.plan.as_ref().expect("planned");
        let me = self.ctx.rank() as usize;
        let ranks = p.layout.node_ranks(p.layout.node_of(me));
        let (first, local_num) = (ranks.start, ranks.len());
        let tag = 2 * (self.calls + 1);
        let at = &self.recv_at;
        // The node's ranks in turn from the next one on, so that the
        // receivers do not all read one sender's pages at once (pinning
        // them contends on the pages' counts).
        let mut pending: Vec<usize> = (1..local_num)
            .map(|j| first + (me - first + j) % local_num)
            .filter(|&s| self.single(p, s, me))
            .collect();
        let mut pulled_from = vec![false; p.layout.ranks];
        while !pending.is_empty() {
            let before = pending.len();
            let mut result = Ok(());
            pending.retain(|&s| {
                let l = s - first;
                if result.is_err() || self.line(l, DECIDED).load(SeqCst) < tag {
                    return true;
                }
                // The sender's decision says whether it copied the piece
                // into the window.
                if !self.pushes(l, me - first) {
                    let dst = &mut recv[at[s]..at[s] + p.count(s, me)];
                    match self.pull_piece(p, s, dst) {
                        Ok(Pulled::Read) => pulled_from[s] = true,
                        Ok(Pulled::Moved) => {} // in the window
                        Ok(Pulled::NotNow) => return true,
                        Err(e) => result = Err(e),
                    }
                }
                false
            });
            result?;
            if pending.len() == before {
                let l = pending[0] - first;
                if self.line(l, DECIDED).load(SeqCst) < tag {
                    self.await_words::<DECIDED>(l..l + 1, tag, deadline)?;
                } else {
                    // Its call failed: wait until it has moved its piece
                    // into the window.
                    let ctx = self.ctx;
                    let back = || {
                        let word = self.line(l, ANNOUNCE).load(SeqCst);
                        (word & WITHDRAWN == 0 || word & MOVED != 0).then_some(())
                    };
                    let ww = self.window.object().notifications().ww;
                    ctx.engine
                        .patience()
                        .wait(ww, deadline, back, || ctx.engine.faults())?;
                }
            }
        }
        self.pulled_from = pulled_from;
        self.pulled_into = Some((recv.as_ptr() as usize, recv.len()));
        Ok(())
    }

    /// Read rank `s`'s piece for this rank out of its send buffer into
    /// `dst`, unless `s` took its announcement back (its call failed:
    /// [`Alltoallv::withdraw`]) and nothing was read.
    fn pull_piece(&self, p: &AlltoallvPlan, s: usize, dst: &mut [T]) -> Result<Pulled> {
        let first = p.layout.node_ranks(p.layout.node_of(s)).start;
        let readers = self.line(s - first, READERS);
        let around = |read| {
            if let Some(AroundCopies(hook)) = &self.around_reads {
                hook(s as Rank, read);
            }
        };
        readers.fetch_add(1, SeqCst);
        around(false);
        let read = self.read_piece(p, s, dst);
        if let Ok(Pulled::Read) = read {
            around(true);
        }
        readers.fetch_sub(1, SeqCst);
        read
    }

    /// [`Alltoallv::pull_piece`], once counted among `s`'s readers.
    fn read_piece(&self, p: &AlltoallvPlan, s: usize, dst: &mut [T]) -> Result<Pulled> {
        let me = self.ctx.rank() as usize;
        let first = p.layout.node_ranks(p.layout.node_of(s)).start;
        let l = s - first;
        let word = self.line(l, ANNOUNCE).load(SeqCst);
        if word & MOVED != 0 {
            return Ok(Pulled::Moved);
        }
        if word & WITHDRAWN != 0 {
            return Ok(Pulled::NotNow);
        }
        // Where the piece starts in the sender's buffer.
        let before = self.place_word(l, false, me - first).load(SeqCst);
        let base = self.line(l, ADDRESS).load(SeqCst);
        let remote = usize::try_from(before)
            .ok()
            .and_then(|b| b.checked_mul(std::mem::size_of::<T>()))
            .and_then(|b| usize::try_from(base).ok()?.checked_add(b))
            .ok_or_else(|| {
                Error::Environment(format!(
                    "rank {s} announced a send buffer at an impossible address"
                ))
            })?;
        let bytes = bytemuck::cast_slice_mut(dst);
        self.ctx
            .read_from_process(s as Rank, remote, bytes)
            .or_else(|e| {
                self.ctx.engine.faults()?;
                Err(e)
            })?;
        Ok(Pulled::Read)
    }
}
