//! One call, as its caller makes it: [`Alltoallv::run`] (result in the
//! window), [`Alltoallv::run_into`] and [`Alltoallv::run_into_displaced`]
//! (into the caller's buffer), [`Alltoallv::run_in_window`] (pieces made in
//! the window); the checks of the buffers and counts, the way the call
//! takes (single copies, streaming stores), resuming after a timeout and
//! what a failing call leaves behind, and the copy of the result out of
//! the window.

use super::control::OFFER_MASK;
use super::state::{Alltoallv, Phase, Sizes, WITHDRAWN};
use crate::collectives::alltoallv_plan::AlltoallvPlan;
use crate::collectives::timed_choice::CallTimes;
use crate::engine::memcopy::copy_slice_with;
use crate::error::{Error, Result};
use crate::extent;
use crate::types::Timeout;
use bytemuck::Pod;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Instant;

/// Calls in which a rank sends fewer bytes make their stores into the
/// windows ordinary (cached), but private calls (below); from this size
/// on, the job measures whether streaming (non-temporal) stores are
/// faster (`Alltoallv::choice`), and a call that streams makes its copies
/// into the caller's buffer streaming too: its data outgrow the caches.
/// On the 2-core Xeon VM, streaming stores took 0.63-0.64 of the time of
/// an in-place call of 8 ranks at 1 MiB per pair (8 MiB per rank), made no
/// difference at 4 MiB per rank (4 ranks), and measuring them cost 2-6% at
/// 2 MiB per rank (8 ranks at 256 KiB per pair), where ordinary stores are
/// as fast (docs/guide/benchmarking.md).
const STREAM_MIN_BYTES: usize = 4 << 20;

/// Private calls ([`Alltoallv::run_into`]) in which a rank sends a piece
/// of this many bytes or more to another rank measure streaming stores
/// into the windows. Their receivers copy every piece out of the window
/// inside the call, so the call's time includes what the stores cost the
/// readers: where the reader's core is far from the writer's (another
/// core complex, another socket), a line it reads from memory comes
/// sooner than one it takes from the writer's cache. On the 2-core AMD
/// EPYC Zen 4 VM, whose two cores are now near (a cache line's round trip
/// 50-65 ns) and now far apart (320-360 ns), 2 ranks in 2 nodes of 1 took
/// 5.2 us at 8 KiB per pair with ordinary stores and 2.6 with streaming
/// ones while far; measured from 4 KiB, their calls of 4 KiB took 0.81
/// of the time while far but 1.15 while near, where ordinary stores win
/// and measuring costs (docs/guide/benchmarking.md).
const STREAM_PRIVATE_MIN_PIECE: usize = 8 << 10;

/// [`STREAM_PRIVATE_MIN_PIECE`] where ranks of the node share a CPU (more
/// ranks than cores, bound in blocks): a rank's pieces for the ranks of
/// its CPU stay ordinary (`Alltoallv::streams_to`), and those for the
/// other CPUs gain from smaller sizes on. With 4 and 8 ranks on the Zen 4
/// VM's 2 cores, 2 KiB per pair took 0.58-0.90 of the time while far and
/// 1.03-1.05 while near, 4 KiB 0.45-0.60 and 1.00-1.03.
const STREAM_SHARED_MIN_PIECE: usize = 2 << 10;

/// What a call sends from and where its pieces lie in the caller's
/// buffers: in the window ([`Alltoallv::run_in_window`]), or in `send`
/// and `recv` at `MPI_Alltoallv`'s send and receive displacements where
/// given ([`Alltoallv::run_into_displaced`]), packed otherwise.
#[derive(Clone, Copy, Debug, Default)]
struct Given<'b> {
    pub(super) in_window: bool,
    pub(super) send_displs: Option<&'b [usize]>,
    pub(super) recv_displs: Option<&'b [usize]>,
}

/// Where each source's piece goes in a receive buffer of `len` elements
/// (into `out`, by source) for the counts of plan `p`: packed by source,
/// or at `displs`, which must hold every non-empty piece inside the
/// buffer without overlap (`MPI_Alltoallv` writes no place twice).
/// Returns where the pieces end.
fn recv_places(
    p: &AlltoallvPlan,
    me: usize,
    displs: Option<&[usize]>,
    len: usize,
    elem: usize,
    out: &mut Vec<usize>,
) -> Result<usize> {
    out.clear();
    match displs {
        None => {
            let mut total = 0;
            for s in 0..p.layout.ranks {
                out.push(total);
                total = extent::add("sum of receive counts", total, p.count(s, me))?;
            }
            if len < total {
                return Err(Error::InvalidArgument(format!(
                    "the receive buffer holds {len} elements, this rank receives {total}"
                )));
            }
            Ok(total)
        }
        Some(displs) => {
            let counts: Vec<usize> = (0..p.layout.ranks).map(|s| p.count(s, me)).collect();
            // Empty pieces may lie anywhere, even where no buffer could.
            let placed: Vec<usize> = counts
                .iter()
                .zip(displs)
                .map(|(&c, &d)| if c == 0 { 0 } else { d })
                .collect();
            let end = crate::collectives::plan::check_extents(&counts, &placed, elem).map_err(
                |e| match e {
                    Error::InvalidArgument(m) => Error::InvalidArgument(format!(
                        "the receive displacements (by source): {m}"
                    )),
                    e => e,
                },
            )?;
            if len < end {
                return Err(Error::InvalidArgument(format!(
                    "the receive displacements and counts reach element {end}, \
                     the receive buffer holds {len}"
                )));
            }
            out.extend_from_slice(displs);
            Ok(end)
        }
    }
}

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// Send `send` (this rank's pieces packed in target order,
    /// `send_counts[t]` elements for rank `t`) to every rank; the result
    /// stays in the node's window ([`Alltoallv::received`]). With fixed
    /// counts, `send_counts` must be this rank's row of them. On a
    /// timeout, call again with the same arguments to continue. A call
    /// stopped by a rank's failure ([`Error::RankFailed`]) cannot go on:
    /// the next call returns that failure again, whatever its arguments.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let mut a = Alltoallv::<i32>::alltoall(&ctx, 0, 1, Default::default(), Timeout::Block)?;
    /// // Wrong length or counts: a clear error, nothing sent.
    /// assert!(a.run(&[1], &vec![1; n + 1], Timeout::Block).is_err());
    /// assert!(a.run(&vec![1; n + 1], &vec![1; n], Timeout::Block).is_err());
    /// a.run(&vec![1; n], &vec![1; n], Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run(&mut self, send: &[T], send_counts: &[usize], timeout: Timeout) -> Result<()> {
        self.call_as(Given::default(), send, send_counts, None, timeout)
    }

    /// [`Alltoallv::run`], then copy what this rank received into `recv`,
    /// packed in source order. This rank's piece for itself goes straight
    /// from `send` into `recv`, not through the window; large pieces from
    /// ranks of this node may come in one copy, read by the kernel straight
    /// out of their senders' buffers, and large pieces from ranks of other
    /// nodes written by them straight into `recv`
    /// ([`AlltoallvOptions::single_copy_min`](crate::AlltoallvOptions::single_copy_min));
    /// so until the call has returned `Ok`, a call retried after a timeout must be given the same
    /// pieces in `send` (in the same buffer or another) and the same
    /// `recv`, untouched (another is refused with
    /// [`Error::InvalidArgument`] where pieces may have been written into
    /// the first). Once the call has returned, whatever it returned,
    /// nothing is written into `recv` and nothing is read out of `send`: a
    /// call that fails waits, before it returns, for the senders writing
    /// into `recv` and the ranks of its node reading out of `send` at that
    /// moment, each one kernel copy, which a process stopped by a signal
    /// in between holds until it runs again, and a failed one ends. With
    /// fixed counts, a `recv` too small is refused before the call; with
    /// unknown sizes it is found once the counts are known: the call
    /// completes (the result is in the window) and returns
    /// [`Error::InvalidArgument`], `recv` untouched.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u64);
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 0, 1, Default::default(), Timeout::Block)?;
    /// let send: Vec<u64> = (0..n as u64).map(|t| 100 * me + t).collect();
    /// let mut recv = vec![0; n];
    /// a.run_into(&send, &vec![1; n], &mut recv, Timeout::Block)?;
    /// assert_eq!(recv, (0..n as u64).map(|s| 100 * s + me).collect::<Vec<_>>());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_into(
        &mut self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        timeout: Timeout,
    ) -> Result<()> {
        self.call_as(Given::default(), send, send_counts, Some(recv), timeout)
    }

    /// [`Alltoallv::run_into`] with `MPI_Alltoallv`'s displacements: this
    /// rank's piece for rank `t` starts at element `send_displs[t]` of
    /// `send`, and the piece from rank `s` goes to element `recv_displs[s]`
    /// of `recv`, so a code ported from MPI keeps its buffers as they are.
    /// Pieces may lie anywhere in their buffers and in any order; pieces
    /// sent may overlap, pieces received may not (each place of `recv` is
    /// written at most once, as MPI requires); empty pieces may have any
    /// displacement. Displacements that reach past a buffer or overlap are
    /// [`Error::InvalidArgument`], sizes that overflow
    /// [`Error::SizeOverflow`]: with fixed counts before the call; for
    /// `recv` with sizes unknown in advance once the counts are known (the
    /// call completes, its result is in the window, and `recv` is
    /// untouched).
    ///
    /// Large pieces from ranks of this node come in one copy as with
    /// [`Alltoallv::run_into`], wherever the displacements put them: each
    /// rank tells its node's ranks where its pieces for and from them lie.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u64);
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 0, 1, Default::default(), Timeout::Block)?;
    /// // Send from every other element, receive in reverse source order
    /// // behind a header of 2 elements.
    /// let send: Vec<u64> = (0..2 * n as u64).map(|i| 100 * me + i / 2).collect();
    /// let send_displs: Vec<usize> = (0..n).map(|t| 2 * t).collect();
    /// let recv_displs: Vec<usize> = (0..n).map(|s| 2 + n - 1 - s).collect();
    /// let mut recv = vec![u64::MAX; n + 2];
    /// a.run_into_displaced(&send, &vec![1; n], &send_displs, &mut recv, &recv_displs, Timeout::Block)?;
    /// for s in 0..n {
    ///     assert_eq!(recv[recv_displs[s]], 100 * s as u64 + me);
    /// }
    /// assert_eq!(recv[..2], [u64::MAX; 2]);
    /// // A receive displacement past the buffer: refused, nothing sent.
    /// let past = vec![n + 2; n];
    /// assert!(a.run_into_displaced(&send, &vec![1; n], &send_displs, &mut recv, &past, Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_into_displaced(
        &mut self,
        send: &[T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [T],
        recv_displs: &[usize],
        timeout: Timeout,
    ) -> Result<()> {
        let given = Given {
            in_window: false,
            send_displs: Some(send_displs),
            recv_displs: Some(recv_displs),
        };
        self.call_as(given, send, send_counts, Some(recv), timeout)
    }

    /// [`Alltoallv::run`] with the pieces this rank wrote into the window
    /// ([`Alltoallv::outgoing`]) instead of a send buffer: nothing is
    /// copied in, so inside a node a piece moves not at all and between
    /// nodes once, by the node's aggregated writes. The result stays in
    /// the window ([`Alltoallv::received`]). Ranks may mix this call with
    /// [`Alltoallv::run`] and [`Alltoallv::run_into`] in one call of the
    /// collective. Fixed counts only ([`Error::InvalidArgument`]
    /// otherwise). On a timeout, call it again to continue.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u32);
    /// let mut a = Alltoallv::<u32>::alltoall(&ctx, 0, 1, Default::default(), Timeout::Block)?;
    /// for it in 0..4 {
    ///     for t in 0..n as u16 {
    ///         a.outgoing(t)?.set(0, 1000 * it + me);
    ///     }
    ///     a.run_in_window(Timeout::Block)?;
    ///     assert_eq!(a.received(0)?.get(0), 1000 * it);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_in_window(&mut self, timeout: Timeout) -> Result<()> {
        let p = self.window_plan_for_call()?;
        let me = self.ctx.rank() as usize;
        let row: Vec<usize> = (0..p.layout.ranks).map(|t| p.count(me, t)).collect();
        let given = Given {
            in_window: true,
            ..Given::default()
        };
        self.call_as(given, &[], &row, None, timeout)
    }

    /// The plan of an in-window call: fixed counts.
    pub(super) fn window_plan_for_call(&self) -> Result<&AlltoallvPlan> {
        match (self.sizes, &self.plan) {
            (Sizes::Fixed, Some(p)) => Ok(p),
            _ => Err(Error::InvalidArgument(
                "pieces in the window need counts fixed at creation \
                 (with sizes unknown in advance their places are known only inside a call)"
                    .into(),
            )),
        }
    }

    /// One call, from `send` or from the pieces the caller wrote into the
    /// window, with its buffers laid out as `given` says; resumed where a
    /// timeout stopped it.
    fn call_as(
        &mut self,
        given: Given<'_>,
        send: &[T],
        send_counts: &[usize],
        recv: Option<&mut [T]>,
        timeout: Timeout,
    ) -> Result<()> {
        let in_window = given.in_window;
        if self.phase.is_some() {
            // A call stopped by a rank's failure cannot go on: say so
            // again, before asking for the stopped call's buffers.
            self.ctx.engine.faults()?;
        }
        if self.phase.is_some() && self.in_window != in_window {
            let how = if self.in_window {
                "run_in_window"
            } else {
                "run, run_into or run_into_displaced"
            };
            return Err(Error::InvalidArgument(format!(
                "a call of this alltoallv timed out and is unfinished: continue it with {how}"
            )));
        }
        if let (Some(_), Some(written)) = (self.phase, self.offered.or(self.pulled_into)) {
            let given = recv.as_deref().map(|r| (r.as_ptr() as usize, r.len()));
            if given != Some(written) {
                return Err(Error::InvalidArgument(
                    "a call of this alltoallv timed out after pieces may have been written \
                     into its receive buffer: continue it with the same buffer"
                        .into(),
                ));
            }
        }
        let (n, me) = (self.ctx.num_ranks() as usize, self.ctx.rank() as usize);
        if send_counts.len() != n {
            return Err(Error::InvalidArgument(format!(
                "an alltoallv needs one send count per rank ({n}), got {}",
                send_counts.len()
            )));
        }
        let total = extent::sum("sum of send counts", send_counts.iter().copied())?;
        for (what, displs) in [("send", given.send_displs), ("receive", given.recv_displs)] {
            if let Some(d) = displs.filter(|d| d.len() != n) {
                return Err(Error::InvalidArgument(format!(
                    "an alltoallv needs one {what} displacement per rank ({n}), got {}",
                    d.len()
                )));
            }
        }
        let fixed = match (self.sizes, &self.plan) {
            (Sizes::Fixed, Some(p)) => Some(p),
            _ => None,
        };
        if let Some(p) = fixed {
            if p.counts[me * n..(me + 1) * n] != *send_counts {
                return Err(Error::InvalidArgument(
                    "the send counts differ from this rank's row of the alltoallv's counts".into(),
                ));
            }
        }
        match given.send_displs {
            _ if in_window => {}
            None if send.len() != total => {
                return Err(Error::InvalidArgument(format!(
                    "the send counts add up to {total} elements, the send buffer holds {}",
                    send.len()
                )));
            }
            None if fixed.is_some() && self.send_packed => {}
            None => {
                // (No overflow: `total` is their sum.)
                self.send_at.clear();
                self.send_at.extend(send_counts.iter().scan(0, |at, &c| {
                    *at += c;
                    Some(*at - c)
                }));
                self.send_packed = fixed.is_some();
            }
            Some(displs) => {
                // (Empty pieces may lie anywhere.)
                for (t, (&d, &c)) in displs.iter().zip(send_counts).enumerate() {
                    if c == 0 {
                        continue;
                    }
                    let end = extent::end("send displacement + count", d, c)?;
                    if end > send.len() {
                        return Err(Error::InvalidArgument(format!(
                            "the piece for rank {t} (elements {d}..{end}) lies past the send \
                             buffer of {} elements",
                            send.len()
                        )));
                    }
                }
                self.send_at.clear();
                self.send_at.extend_from_slice(displs);
                self.send_packed = false;
            }
        }
        match given.recv_displs {
            Some(d) => {
                let kept = self.recv_displs.get_or_insert_with(Vec::new);
                kept.clear();
                kept.extend_from_slice(d);
            }
            None => self.recv_displs = None,
        }
        // With fixed counts, a receive buffer that cannot hold them is
        // refused before the call. (A capacity exceeded is found by every
        // rank alike once the counts are known: refusing here would leave
        // the others waiting.)
        self.recv_placed = false;
        if let (true, Some(recv)) = (fixed.is_some(), recv.as_deref()) {
            self.place_recv(recv.len())?;
        }
        let deadline = timeout.deadline();
        let mut phase = self.phase.take().unwrap_or(Phase::Start);
        // The node's first rank times the new calls (not resumed after a
        // timeout) whose way of copying is measured.
        let mut timed = None;
        if phase == Phase::Start {
            self.in_window = in_window;
            self.streamed.store(0, Relaxed);
            self.private = recv.is_some();
            self.pull = false;
            self.own_direct = false;
            self.pulled_from.clear();
            self.pulled_into = None;
            (self.offer_made, self.offered) = (false, None);
            let elem = std::mem::size_of::<T>();
            let bytes = total.saturating_mul(elem);
            // (This rank's piece for itself goes straight into `recv`.)
            let others = send_counts.iter().enumerate().filter(|&(t, _)| t != me);
            let piece = others.map(|(_, &c)| c).max().unwrap_or(0);
            let min_piece = match self.shares_cpu {
                true => STREAM_SHARED_MIN_PIECE,
                false => STREAM_PRIVATE_MIN_PIECE,
            };
            let private_large =
                recv.is_some() && piece.saturating_mul(elem) >= min_piece && self.nodes_mapped;
            self.stream_measured = self.options.stream_stores.is_none()
                && (bytes >= STREAM_MIN_BYTES || private_large);
            self.outgrows_caches = bytes >= STREAM_MIN_BYTES;
            // (The copies turned through: with private results only, see
            // `Alltoallv::turns_all`.)
            let rotation = self.rotation.is_some();
            let measures = ((self.measured || rotation) && recv.is_some()) || self.stream_measured;
            if measures && self.ctx.local_rank() == 0 {
                timed = Some(Instant::now());
            }
        }
        let mut recv = recv;
        if self.withdrawn() == WITHDRAWN {
            self.announce_send(send);
        }
        let result = self.advance(&mut phase, send, send_counts, recv.as_deref_mut(), deadline);
        match result {
            Ok(Some(refused)) => {
                self.calls += 1;
                Err(refused)
            }
            Ok(None) => {
                let call = self.calls;
                self.last = call;
                self.calls += 1;
                let p = self.plan.as_ref().expect("a completed call has a plan");
                let total: usize = (0..n).map(|s| p.count(s, me)).sum();
                // Only the node's first rank times calls (`timed`).
                let rotation = self.rotation.is_some() && self.private;
                let measured =
                    timed.map(|t| (t, [self.once_measured, self.stream_measured, rotation]));
                let ways = [self.once_way, self.streaming, self.turns_all(call)];
                let bytes = total.saturating_mul(std::mem::size_of::<T>());
                // The first rank writes its ways in use into the word of
                // the call after next during the next call (see
                // `Alltoallv::choice_word`).
                let record = |a: &mut Self| {
                    if let Some((t, measured)) = measured.filter(|(_, m)| m.contains(&true)) {
                        let time = match &a.call_times {
                            Some(CallTimes(times)) => times(call, ways),
                            None => t.elapsed(),
                        };
                        a.choice.record(call, (ways, measured), bytes, time);
                    }
                };
                // (Placed in this call, or the error why not.)
                let fits = match recv.as_deref() {
                    Some(r) => self.place_recv(r.len()),
                    None => Ok(()),
                };
                fits?;
                if let Some(recv) = recv {
                    self.copy_out(send, recv);
                }
                record(self);
                Ok(())
            }
            Err(e) => {
                self.phase = Some(phase);
                self.revoke();
                self.withdraw(send, send_counts);
                Err(e)
            }
        }
    }

    /// Work out where the call's pieces go in a receive buffer of `len`
    /// elements (`Alltoallv::recv_at`), once per call: the packed places
    /// of fixed counts are kept from call to call. Its plan must be known.
    pub(super) fn place_recv(&mut self, len: usize) -> Result<()> {
        if self.recv_placed {
            return Ok(());
        }
        let packed = self.recv_displs.is_none();
        let fixed = matches!(self.sizes, Sizes::Fixed);
        if !(packed && fixed && self.recv_packed.is_some_and(|end| len >= end)) {
            self.recv_packed = None;
            let p = self.plan.as_ref().expect("planned");
            let (me, elem) = (self.ctx.rank() as usize, std::mem::size_of::<T>());
            let displs = self.recv_displs.as_deref();
            let end = recv_places(p, me, displs, len, elem, &mut self.recv_at)?;
            self.recv_packed = (packed && fixed).then_some(end);
        }
        self.recv_placed = true;
        Ok(())
    }

    /// Whether the call in progress copies into the caller's buffer with
    /// streaming stores: where it streams into the windows and its data
    /// outgrow the caches (`Alltoallv::outgrows_caches`). Below that, the
    /// caller's core likely reads its result next, from its cache.
    fn streaming_out(&self) -> bool {
        self.streaming && self.outgrows_caches
    }

    /// Copy this rank's received pieces into `recv` at their places
    /// (`Alltoallv::recv_at`), but those it read straight from their
    /// senders: its own piece from `send` where the call left it out of
    /// the window (`Alltoallv::own_direct`).
    fn copy_out(&mut self, send: &[T], recv: &mut [T]) {
        let me = self.ctx.rank() as usize;
        if self.own_direct {
            let p = self.plan.as_ref().expect("a completed call has a plan");
            let len = p.count(me, me);
            if len > 0 {
                let (from, to) = (self.send_at[me], self.recv_at[me]);
                let (dst, src) = (&mut recv[to..to + len], &send[from..from + len]);
                copy_slice_with(dst, src, self.streaming_out());
            }
            let n = p.layout.ranks.max(self.pulled_from.len());
            self.pulled_from.resize(n, false);
            self.pulled_from[me] = true;
        }
        let p = self.plan.as_ref().expect("a completed call has a plan");
        let n = p.layout.ranks;
        if self.offered.is_some() {
            // The pieces that their senders wrote into `recv` themselves.
            let local = self.ctx.local_rank() as usize;
            self.pulled_from
                .resize(n.max(self.pulled_from.len()), false);
            for s in 0..n {
                if self.offer_word(local, OFFER_MASK + s / 64).load(SeqCst) >> (s % 64) & 1 == 1 {
                    self.pulled_from[s] = true;
                }
            }
        }
        let view = self.window.view::<T>();
        let place = |s: usize| self.recv_place(p, self.last, s, me);
        let left =
            |s: usize| p.count(s, me) > 0 && !self.pulled_from.get(s).copied().unwrap_or(false);
        let mut s = 0;
        // Sources whose pieces follow each other in the window and in
        // `recv` go in one copy (the sources of one node, packed).
        while s < n {
            if !left(s) {
                s += 1;
                continue;
            }
            let (start, at) = (place(s), self.recv_at[s]);
            let mut len = p.count(s, me);
            s += 1;
            while s < n && left(s) && place(s) == start + len && self.recv_at[s] == at + len {
                len += p.count(s, me);
                s += 1;
            }
            view.copy_to_slice_with(start, &mut recv[at..at + len], self.streaming_out());
        }
    }
}
