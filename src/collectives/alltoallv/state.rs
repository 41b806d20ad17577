//! The collective's state ([`Alltoallv`]'s fields) and its words in the
//! node's window (at the places [`Controls`] gives): each local rank's
//! control line (progress, announcements of single copies, the probe, the
//! count of readers), the offers, places and push masks after them, the
//! node's counters and choice words, and the count matrices of unknown
//! sizes; the phases a call resumes from. Every other file of the
//! collective adds methods on top of this one.

use super::control::Controls;
use super::options::AlltoallvOptions;
use super::rotation::{EPOCH, Rotation};
use crate::collectives::alltoallv_plan::AlltoallvPlan;
use crate::collectives::control_word;
use crate::collectives::timed_choice::{CallTimes, Choices};
use crate::context::Context;
use crate::engine::transfer::PutFrom;
use crate::segments::SegmentView;
use crate::types::{Rank, SegmentId};
use crate::windows::Window;
use bytemuck::Pod;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};

/// The words of a rank's control line (a cache line per local rank at the
/// window's start, written only by its rank): its progress (see
/// `Alltoallv::publish`), then for single copies its announcement of a
/// call (`2 * (call + 1) + pull`, where `pull` says it reads its pieces
/// from this node's ranks itself), the address of its send buffer in that
/// call, the state of the probe made at creation, the
/// address of its receive buffer in the call, the call (`2 * (call + 1)`)
/// whose push mask it has written (see `Alltoallv::decide`), the
/// smallest piece it copies once with [`MEASURED`] set where it measures
/// which calls do (the same on the whole node, or no single copies), and
/// how many ranks of the node are reading out of its send buffer (the
/// one word that other ranks write: see `Alltoallv::withdraw`).
pub(super) const PROGRESS: usize = 0;
pub(super) const ANNOUNCE: usize = 1;
pub(super) const ADDRESS: usize = 2;
pub(super) const PROBE: usize = 3;
pub(super) const RECV_ADDRESS: usize = 4;
pub(super) const DECIDED: usize = 5;
pub(super) const THRESHOLD: usize = 6;
pub(super) const READERS: usize = 7;

/// The steps of a call that a rank's [`PROGRESS`] word says it has reached:
/// `STEPS * call + j`, for `j` one of [`ROWS`] (with sizes unknown in
/// advance: its row of counts written), [`SENT`] (the node's count rows
/// that it sends to other nodes sent), [`STAGED`] (its pieces staged) and
/// [`PLACED`] (its pieces for its node's ranks placed, and its reads out
/// of its node's send buffers done). With counts known, a call's word
/// goes from the last call's `PLACED` straight to `STAGED`.
pub(super) const STEPS: u64 = 4;
pub(super) const ROWS: u64 = 1;
pub(super) const SENT: u64 = 2;
pub(super) const STAGED: u64 = 3;
pub(super) const PLACED: u64 = 4;

/// The bit of a rank's [`ANNOUNCE`] word that says its call failed and
/// took the announcement back (`Alltoallv::withdraw`): its send buffer may
/// be gone.
pub(super) const WITHDRAWN: u64 = 1 << 63;

/// The bit of a rank's [`ANNOUNCE`] word, beside [`WITHDRAWN`], that says
/// it copied the pieces that its node's ranks were to read out of its send
/// buffer into the window instead: they take them from there.
pub(super) const MOVED: u64 = 1 << 62;

/// The bits of a node's choice word ([`Alltoallv::choice_word`]) that say
/// which of its two choices its first rank has measured (the first's bit,
/// then the second's; shifted by [`LEARNED`]).
pub(super) const LEARNED: u32 = 2;

/// The bits of a node's choice word that say its ways in use (the first
/// two choices'; the third's is agreed apart, `rotation.rs`).
pub(super) const WAYS: u64 = (1 << LEARNED) - 1;

/// The bit of a rank's [`THRESHOLD`] word that says it measures which
/// calls copy once (see [`AlltoallvOptions::single_copy_min`]).
pub(super) const MEASURED: u64 = 1 << 63;

/// A hook run around each write into another rank's offered buffer
/// ([`Alltoallv::testing_around_writes`]) or each read out of a local
/// rank's send buffer ([`Alltoallv::testing_around_reads`]).
pub(super) struct AroundCopies<'a>(pub(super) Box<dyn Fn(Rank, bool) + Send + Sync + 'a>);

impl std::fmt::Debug for AroundCopies<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AroundCopies")
    }
}

/// Counts fixed at creation, or learned in every call.
#[derive(Clone, Copy, Debug)]
pub(super) enum Sizes {
    Fixed,
    /// At most `capacity` elements sent and received per rank and call;
    /// `data_ids` notification ids for chunks, then two sets of `nodes`
    /// for the count rows; `copy` elements per copy of the data area.
    Unknown {
        capacity: usize,
        data_ids: usize,
        copy: usize,
    },
}

/// Where a call stopped (to resume after a timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Unknown sizes: writing the rank's row of counts.
    Start,
    /// Unknown sizes: waiting until the node's ranks have written theirs,
    /// then sending this rank's share of the node's rows (`send`) or not
    /// (the node's last rank to write its row sends them all).
    Rows { send: bool },
    /// Sending credits (fixed) or count rows (unknown), from the `next`th:
    /// this rank's share, or all (`all`).
    Opening { next: usize, all: bool },
    /// Unknown sizes: waiting for the other nodes' rows.
    Counting,
    /// Copying into the staging area.
    Staging,
    /// Writing the node's chunks `next..end` (`wait`: once the node's
    /// ranks have staged), then copying the pieces for this node.
    Sending { next: usize, end: usize, wait: bool },
    /// Reading this rank's pieces out of its node's send buffers (single
    /// copies), then saying its pieces are placed and read.
    Reading,
    /// Claiming the node's incoming chunks (not reading again: a sender
    /// may have returned once this rank said it had read).
    Receiving,
    /// Waiting until every rank of the node has placed and read its
    /// pieces.
    Closing,
}

/// An alltoallv over all ranks with node-level aggregation, created once
/// and run as often as needed (see the module documentation).
///
/// Rank `s` sends `counts[s * ranks + t]` elements to rank `t`; its send
/// buffer holds its pieces packed in target order, and a private receive
/// buffer holds the received pieces packed in source order (the
/// displacements are the prefix sums, [`crate::plan::displacements`]).
///
/// ```
/// use gaspi::{Alltoallv, Config, Context, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
/// // Rank s sends s + 1 elements to every rank.
/// let counts: Vec<usize> = (0..n * n).map(|i| i / n + 1).collect();
/// let mut a = Alltoallv::<u32>::new(&ctx, 3, &counts, Timeout::Block)?;
/// let row = &counts[me * n..(me + 1) * n];
/// let send = vec![me as u32; row.iter().sum()];
/// a.run(&send, row, Timeout::Block)?;
/// // In place, in the node's window: what rank 0 sent me.
/// assert_eq!(a.received(0)?.to_vec(), [0]);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug)]
pub struct Alltoallv<'a, T> {
    pub(super) ctx: &'a Context,
    pub(super) segment: SegmentId,
    pub(super) window: Window,
    pub(super) options: AlltoallvOptions,
    pub(super) sizes: Sizes,
    /// The plan of every call (fixed counts) or of the last call started.
    pub(super) plan: Option<AlltoallvPlan>,
    /// The window as words: the progress words, then (unknown sizes) the
    /// two count matrices.
    pub(super) control: SegmentView<u64>,
    /// Elements of `T` before the data areas.
    pub(super) data_base: usize,
    /// Copies of the data area, used by calls in turn (an even number, at
    /// least 2: [`AlltoallvOptions::copies`]).
    pub(super) copies: usize,
    /// Where the calls measure whether they turn through all the copies
    /// or the first two: the ways agreed (`rotation.rs`).
    pub(super) rotation: Option<Rotation>,
    /// The copies of the last two calls asked for, by the call's parity
    /// (`Alltoallv::copy_of`: asked for each piece, it does not change).
    pub(super) copy_known: Cell<[(u64, usize); 2]>,
    /// The call whose result the window holds (the last completed).
    pub(super) last: u64,
    /// Calls completed.
    pub(super) calls: u64,
    /// Claims on the node's table in the calls completed.
    pub(super) claimed: u64,
    /// Calls in which the node's last rank to stage sends all its chunks
    /// ([`Alltoallv::staged_count`]), and, with sizes unknown, in which
    /// the last rank to write its row sends all the node's rows
    /// ([`Alltoallv::rows_count`]): at the last rank of such a call, the
    /// node's count is this times its ranks.
    pub(super) stagings_counted: u64,
    pub(super) rows_counted: u64,
    /// The call in progress, if one timed out.
    pub(super) phase: Option<Phase>,
    /// The smallest piece copied once inside the node (see
    /// [`AlltoallvOptions::single_copy_min`]); `usize::MAX` where the
    /// node's ranks do not (cannot read each other's memory, or chose
    /// otherwise).
    pub(super) once_min: usize,
    /// The call in progress (or the last one) copies large pieces once:
    /// its ranks announce it, decide their push masks and read pieces from
    /// each other (every rank of the node alike).
    pub(super) once: bool,
    /// The call in progress (or the last one) reads its large pieces from
    /// this node's ranks straight into the caller's buffer.
    pub(super) pull: bool,
    /// The call in progress (or the last one) copies this rank's piece for
    /// itself straight from its send buffer into its receive buffer, not
    /// through the window (a `run_into` whose buffer holds the result).
    pub(super) own_direct: bool,
    /// The sources whose pieces that call read so (by rank; empty if
    /// none).
    pub(super) pulled_from: Vec<bool>,
    /// The receive buffer (address, elements) that the call in progress
    /// has read pieces into out of its node's send buffers, once it has.
    pub(super) pulled_into: Option<(usize, usize)>,
    /// The call in progress (or the last one) sends what the caller wrote
    /// into the window ([`Alltoallv::run_in_window`]), copying nothing in.
    pub(super) in_window: bool,
    /// Whether the call in progress has made its offer, and the receive
    /// buffer (address, elements) it offered to senders of other nodes, if
    /// it did (see `Alltoallv::offer`).
    pub(super) offer_made: bool,
    pub(super) offered: Option<(usize, usize)>,
    /// A write into another rank's buffer failed (no right to): this rank
    /// writes its pieces through the window from then on.
    pub(super) push_failed: AtomicBool,
    /// By rank: the call up to which this rank writes its pieces for that
    /// rank into the window without looking at its offer
    /// (`offers::WINDOW_CALLS`). (Atomics, though only this rank's calls use
    /// them, so that an `Alltoallv` may be shared between threads.)
    pub(super) window_until: Vec<AtomicU64>,
    /// The testing aid of [`Alltoallv::testing_around_writes`], if set.
    pub(super) around_writes: Option<AroundCopies<'a>>,
    /// The testing aid of [`Alltoallv::testing_around_reads`], if set.
    pub(super) around_reads: Option<AroundCopies<'a>>,
    /// Test aid: the times of measured calls (`testing_call_times`).
    pub(super) call_times: Option<CallTimes<'a, 3>>,
    /// Where each target's piece starts in the send buffer of the call in
    /// progress, and whether these are the packed places of the fixed
    /// counts (kept from call to call).
    pub(super) send_at: Vec<usize>,
    pub(super) send_packed: bool,
    /// The receive displacements given to the call in progress (by
    /// source; `None`: packed), and where each source's piece goes in its
    /// receive buffer once the counts are known and the buffer holds them.
    pub(super) recv_displs: Option<Vec<usize>>,
    pub(super) recv_at: Vec<usize>,
    /// Whether `recv_at` holds the places of the call in progress, and
    /// where they end if these are the packed places of the fixed counts
    /// (kept from call to call).
    pub(super) recv_placed: bool,
    pub(super) recv_packed: Option<usize>,
    /// By target node: whether this node's ranks write their pieces there
    /// themselves, unstaged (see [`AlltoallvOptions::direct_min`]), for
    /// the plan in use; and the elements this node stages in all.
    pub(super) direct_to: Vec<bool>,
    pub(super) staged_len: usize,
    /// By target rank, for the plan in use: where this rank's piece starts
    /// in the target's receive buffer when it holds its pieces packed (in
    /// elements; see `Alltoallv::push_into`).
    pub(super) push_at: Vec<usize>,
    /// Sizes unknown: the count matrix the call in progress read (kept
    /// from call to call, so that reading it allocates nothing).
    pub(super) matrix: Vec<u64>,
    /// Sizes unknown: the plan before the one in use, in whose memory the
    /// next plan is made (`AlltoallvPlan::renew`).
    pub(super) spare_plan: Option<AlltoallvPlan>,
    /// Whether each call copies large pieces once or twice by the node's
    /// measurements (`single_copy_min: None`): inside the node, and into
    /// offered buffers from other nodes.
    pub(super) measured: bool,
    /// The way of single copies that the call in progress takes: where
    /// `measured`, the node's pick (then its ranks copy the node's large
    /// pieces once and offer their buffers to other nodes), else `true`.
    pub(super) once_way: bool,
    /// Whether the call in progress copies its result into the caller's
    /// buffer (`run_into`).
    pub(super) private: bool,
    /// Whether every node's window is mapped here (the native engine's
    /// emulated nodes; a job of one node, trivially): then the first
    /// node's word of measured ways is read with a plain atomic in every
    /// call that measures (`Alltoallv::next_choice_word`), where a
    /// transport between hosts would take a round trip, which the private
    /// calls that measure streaming stores from
    /// `calls::STREAM_PRIVATE_MIN_PIECE` need not pay.
    pub(super) nodes_mapped: bool,
    /// Whether the call in progress has its way of single copies measured
    /// (`Alltoallv::measures_once`, found once its plan is known).
    pub(super) once_measured: bool,
    /// Whether the call in progress is large enough for its stores into
    /// the windows to be measured (`calls::STREAM_MIN_BYTES`, or
    /// `calls::STREAM_PRIVATE_MIN_PIECE` with private results), and whether
    /// it makes them streaming (non-temporal).
    pub(super) stream_measured: bool,
    pub(super) streaming: bool,
    /// Whether this rank sends `calls::STREAM_MIN_BYTES` or more in the call
    /// in progress: then a streaming call's copies into the caller's buffer
    /// stream too (`Alltoallv::streaming_out`).
    pub(super) outgrows_caches: bool,
    /// By rank: whether it is bound to the one CPU this rank is bound to
    /// (this rank too, if bound so; fixed at creation;
    /// `Alltoallv::streams_to`); and whether some rank of this node shares
    /// its one CPU with another rank.
    pub(super) cpu_mates: Vec<bool>,
    pub(super) shares_cpu: bool,
    /// The local ranks that may run on this rank's CPU, where this rank is
    /// bound to one CPU and no rank of another node may run on it (`None`
    /// elsewhere; fixed at creation): while all of them are done with
    /// their part of a call and wait, as this rank does, for ranks of other
    /// CPUs, its waits spin instead of yielding (`Alltoallv::core_idle`).
    pub(super) core_mates: Option<Vec<usize>>,
    /// Up to this many bytes going out of the node in a call (chunks, or
    /// with sizes unknown rows of counts), the node's last rank to be
    /// ready sends them all: [`AlltoallvOptions::one_sender_max`], by
    /// default resolved by where the node's ranks run (fixed at creation,
    /// the same on every rank of the node).
    pub(super) one_sender_max: usize,
    /// Bytes this rank stored into windows with streaming stores in its
    /// call in progress or last call (`Alltoallv::testing_streamed`).
    pub(super) streamed: AtomicU64,
    /// The node's measurements, timed by its first rank: the first
    /// whether calls copy once (`true`) inside the node (where
    /// `measured`), the second whether their stores into the windows and
    /// the caller's buffer stream (where `stream_measured`), the third
    /// whether they turn through all the copies of the data area (where
    /// `rotation`). The first node's are the job's
    /// (`Alltoallv::next_choice_word`; `rotation.rs`).
    pub(super) choice: Choices<3>,
    /// Its creation failed probing the single copies: the creation
    /// (`Creation`) keeps the window for its next call or deletes it, not
    /// this alltoallv's drop.
    pub(super) keep_window: bool,
    pub(super) _t: PhantomData<T>,
}

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// The collective on its new `window`, before its first call: its data
    /// areas after `data_base` elements, `copies` of them, through which
    /// the calls turn as they measure faster where `timed`.
    pub(super) fn made(
        ctx: &'a Context,
        segment: SegmentId,
        window: Window,
        options: AlltoallvOptions,
        (sizes, plan): (Sizes, Option<AlltoallvPlan>),
        (data_base, (copies, timed)): (usize, (usize, bool)),
    ) -> Alltoallv<'a, T> {
        let nodes_mapped = (0..ctx.num_nodes()).all(|node| {
            let first = ctx.node_ranks(node).start;
            ctx.writes_from_memory_to(first) == PutFrom::Mapped
        });
        let together = |a: Rank, b: Rank| ctx.engine.one_cpu_together(a, b);
        let ranks = 0..ctx.num_ranks();
        let cpu_mates = ranks.clone().map(|r| together(ctx.rank(), r)).collect();
        let shares_cpu = ctx
            .node_ranks(ctx.node())
            .any(|s| ranks.clone().any(|t| t != s && together(s, t)));
        let core_mates = crate::collectives::core_mates(ctx);
        let one_sender_max =
            options
                .one_sender_max
                .unwrap_or(match crate::collectives::node_on_one_cpu(ctx) {
                    true => usize::MAX,
                    false => AlltoallvOptions::DEFAULT_ONE_SENDER_MAX,
                });
        let mut a = Alltoallv {
            ctx,
            nodes_mapped,
            segment,
            control: window.view(),
            window,
            options,
            sizes,
            plan,
            data_base,
            copies,
            rotation: timed.then(Rotation::default),
            copy_known: Cell::new([(u64::MAX, 0); 2]),
            last: 0,
            calls: 0,
            claimed: 0,
            stagings_counted: 0,
            rows_counted: 0,
            phase: None,
            once_min: usize::MAX,
            once: false,
            pull: false,
            own_direct: false,
            pulled_from: Vec::new(),
            pulled_into: None,
            in_window: false,
            offer_made: false,
            offered: None,
            push_failed: AtomicBool::new(false),
            window_until: (0..ctx.num_ranks()).map(|_| AtomicU64::new(0)).collect(),
            around_writes: None,
            around_reads: None,
            call_times: None,
            send_at: Vec::new(),
            send_packed: false,
            recv_displs: None,
            recv_at: Vec::new(),
            recv_placed: false,
            recv_packed: None,
            direct_to: Vec::new(),
            staged_len: 0,
            push_at: Vec::new(),
            matrix: Vec::new(),
            spare_plan: None,
            measured: false,
            once_way: true,
            private: false,
            stream_measured: false,
            streaming: false,
            once_measured: false,
            outgrows_caches: false,
            cpu_mates,
            shares_cpu,
            core_mates,
            one_sender_max,
            streamed: AtomicU64::new(0),
            choice: Choices::default(),
            keep_window: false,
            _t: PhantomData,
        };
        a.plan_direct();
        // The first turn through more copies than two touches each page
        // of the window for the first time in this process (a fault per
        // page): the calls start measuring their ways once it is over.
        a.choice.reset(copies as u64 - 2);
        if a.rotation.is_some() {
            a.measure_rotation();
        }
        a
    }

    /// The smallest piece this rank would copy once (`usize::MAX`: none),
    /// from its options.
    pub(super) fn single_min(&self) -> usize {
        self.options
            .single_copy_min
            .unwrap_or(if self.ctx.engine.host_shares_cores() {
                AlltoallvOptions::DEFAULT_SHARED_SINGLE_COPY_MIN
            } else {
                AlltoallvOptions::DEFAULT_SINGLE_COPY_MIN
            })
    }

    /// Whether the piece from rank `s` to rank `t` goes in one copy when
    /// its receiver asks for that (same node, large enough).
    pub(super) fn single(&self, p: &AlltoallvPlan, s: usize, t: usize) -> bool {
        let bytes = p.count(s, t).saturating_mul(std::mem::size_of::<T>());
        s != t && p.layout.node_of(s) == p.layout.node_of(t) && bytes >= self.once_min
    }

    /// The first notification id of `node`'s chunks in a call of
    /// `parity`. Fixed counts: a set per parity, since with no barrier
    /// opening a call a node may write the next call's chunks before the
    /// target has claimed this call's; unknown sizes: one set (a node
    /// writes only after the target's count rows for that call).
    pub(super) fn chunk_ids(&self, node: usize, parity: usize) -> usize {
        match (self.sizes, &self.plan) {
            (Sizes::Fixed, Some(p)) => parity * p.in_chunks(node),
            _ => 0,
        }
    }

    /// Where the copy of `node`'s data area that call number `call` uses
    /// starts in its window: copy `call % copies`, or where the calls
    /// measure it `call % 2` in some ([`Alltoallv::copy_of`]). The copies
    /// are even in number, so two calls in a row use copies of different
    /// parity, and a copy's last user before `call` is call `call - 2` or
    /// older: what the credits and the closing waits of the calls guard.
    pub(super) fn area(&self, node: usize, call: u64) -> usize {
        let len = match (self.sizes, &self.plan) {
            (Sizes::Fixed, Some(p)) => p.window_len(node),
            (Sizes::Unknown { copy, .. }, _) => copy,
            (Sizes::Fixed, None) => unreachable!("fixed counts have a plan"),
        };
        // The window holds `copies * len` elements after `data_base`.
        self.data_base + self.copy_of(call) * len
    }

    /// Where the calls measure how many copies they turn through: all
    /// three choices start over at the second stretch of calls, the first
    /// that may be measured (`rotation.rs`; the first turn through the
    /// copies, at most 64, is over by then), so that they probe in the
    /// same calls (each pair of probes of one takes the same ways of the
    /// others only where their runs start together).
    pub(super) fn measure_rotation(&mut self) {
        self.rotation.get_or_insert_with(Rotation::default);
        self.choice.reset(EPOCH);
    }

    /// The copy of the data area that call number `call` uses: `call %
    /// copies`, or where the calls measure how many copies they turn
    /// through, `call % copies` or `call % 2` as the way agreed for its
    /// stretch of calls and the choice's tries say ([`Rotation::copy_of`]).
    /// Asked for the call in progress, the next one or the last one
    /// completed.
    pub(super) fn copy_of(&self, call: u64) -> usize {
        let mut known = self.copy_known.get();
        let i = (call % 2) as usize;
        if known[i].0 != call {
            let choice = &self.choice.choices[2];
            let copy = Rotation::copy_of(self.rotation.as_ref(), call, self.copies, choice);
            known[i] = (call, copy);
            self.copy_known.set(known);
        }
        known[i].1
    }

    /// Whether call number `call` turns through all the copies (the way of
    /// the measured choice; where the copies are fixed, always).
    pub(super) fn turns_all(&self, call: u64) -> bool {
        let choice = &self.choice.choices[2];
        Rotation::all_of(self.rotation.as_ref(), call, self.copies, choice)
    }

    /// Where the piece from rank `s` to rank `t` of call number `call`
    /// lies in the window of `t`'s node (in elements), in plan `p`: its
    /// place in that call's copy of the receive area ([`Alltoallv::area`]),
    /// but a rank's piece for itself turns through the first two copies
    /// only (copy `call % 2`). Its one writer and one reader are the same
    /// rank, whose cache still holds the lines two calls later; more
    /// copies would only miss them (the copies are for lines that another
    /// core read, see [`AlltoallvOptions::copies`]).
    pub(super) fn recv_place(&self, p: &AlltoallvPlan, call: u64, s: usize, t: usize) -> usize {
        let call = if s == t { call % 2 } else { call };
        self.area(p.layout.node_of(t), call) + p.recv_at(s, t)
    }

    /// Where the control words lie in every node's window
    /// ([`Controls`]).
    pub(super) fn controls(ctx: &Context) -> Controls {
        Controls::new(ctx.ranks_per_node(), ctx.num_ranks() as usize)
    }

    /// Bytes of the control words at the window's start.
    pub(super) fn control_bytes(ctx: &Context) -> usize {
        Self::controls(ctx).bytes()
    }

    /// The byte offset in every node's window of word `k` of local rank
    /// `local`'s offer (`control::OFFER` and the words after it).
    pub(super) fn offer_at(&self, local: usize, k: usize) -> usize {
        Self::controls(self.ctx).offer(local, k)
    }

    /// Word `k` of this node's local rank `local`'s offer.
    pub(super) fn offer_word(&self, local: usize, k: usize) -> &AtomicU64 {
        self.control_at(Self::controls(self.ctx).offer(local, k))
    }

    /// Local rank `local`'s word for local rank `j` in a call with single
    /// copies, after the push masks: where (in elements) its piece for `j`
    /// starts in its send buffer, or (`recv`) where the piece from `j` goes
    /// in its receive buffer. Written only by `local`, before its
    /// announcement, so that the node's ranks find pieces at any
    /// displacements ([`Alltoallv::run_into_displaced`]).
    pub(super) fn place_word(&self, local: usize, recv: bool, j: usize) -> &AtomicU64 {
        self.control_at(Self::controls(self.ctx).place(local, recv, j))
    }

    /// Word `k` of local rank `local`'s push mask in a call with single
    /// copies: bit `t % 64` of word `t / 64` set says that `local` copies
    /// its piece for local rank `t` into the window (`t` does not read it
    /// itself). Written only by `local`, before its announcement.
    pub(super) fn mask_word(&self, local: usize, k: usize) -> &AtomicU64 {
        self.control_at(Self::controls(self.ctx).mask(local, k))
    }

    /// The control word at byte `at` of this node's window.
    pub(super) fn control_at(&self, at: usize) -> &AtomicU64 {
        self.control
            .atomic_u64(at)
            .expect("the control words lie at the window's aligned start")
    }

    /// Whether local rank `s` copies its piece for local rank `t` into the
    /// window (its mask says so).
    pub(super) fn pushes(&self, s: usize, t: usize) -> bool {
        self.mask_word(s, t / 64).load(SeqCst) >> (t % 64) & 1 == 1
    }

    /// How many times the node's ranks have staged in calls whose last
    /// rank to stage sends all the node's chunks, in all (see
    /// [`AlltoallvOptions::one_sender_max`]): the cache line after the
    /// progress words.
    pub(super) fn staged_count(&self) -> &AtomicU64 {
        self.control_at(Self::controls(self.ctx).staged_count())
    }

    /// With sizes unknown, how many times the node's ranks have written
    /// their rows of counts in calls whose last rank to write sends all the
    /// node's rows, in all (see [`AlltoallvOptions::one_sender_max`]):
    /// beside [`Alltoallv::staged_count`] and the choice words.
    pub(super) fn rows_count(&self) -> &AtomicU64 {
        self.control_at(Self::controls(self.ctx).rows_count())
    }

    /// Where the ways of a call are measured, the node's ways in use for
    /// call number `call` (as [`Choices::word`]: bit 0 set, copies
    /// once; bit 1 set, streaming stores; and the [`LEARNED`] bits of
    /// [`Alltoallv::next_choice_word`]), after
    /// [`Alltoallv::staged_count`]: a word per parity of the call. The
    /// node's first rank writes the next call's during a call, before it
    /// says its pieces for the node are placed and read (its [`PLACED`]
    /// step), and every rank reads its call's at staging: so all read the
    /// same value (no rank starts the next call before the first rank's
    /// `PLACED`, nor does the first rank write this parity's word again
    /// before every rank's `PLACED` of the next call). That
    /// every rank takes the same way keeps a call from waiting for an
    /// announcement or a push mask that a rank copying twice never makes.
    pub(super) fn choice_word(&self, call: u64) -> &AtomicU64 {
        self.control_at(self.choice_at(call))
    }

    /// Where [`Alltoallv::choice_word`] of `call` lies in a node's window.
    pub(super) fn choice_at(&self, call: u64) -> usize {
        Self::controls(self.ctx).choice(call)
    }

    /// Whether this rank's stores into a window of data that `readers`
    /// read next take non-temporal stores: where the call in progress
    /// streams (`Alltoallv::streaming`), but not where its timed choice
    /// made it stream in a call that fits the caches and every reader is
    /// bound to this rank's CPU: a line it stores is then in the cache
    /// they read from, where a streaming store would send it to memory.
    pub(super) fn streams_to(&self, mut readers: impl Iterator<Item = usize>) -> bool {
        let chosen = self.options.stream_stores.is_none() && !self.outgrows_caches;
        self.streaming && !(chosen && readers.all(|r| self.cpu_mates[r]))
    }

    /// Count `bytes` stored into a window in `Alltoallv::streamed` where
    /// they took streaming stores (`streams`).
    pub(super) fn count_streamed(&self, bytes: usize, streams: bool) {
        if streams {
            self.streamed.fetch_add(bytes as u64, Relaxed);
        }
    }

    /// Whether a call planned as `p` has a piece between two ranks of this
    /// node that may go in one copy (none where the node copies nothing
    /// once: [`Alltoallv::single_copy`]).
    pub(super) fn has_single(&self, p: &AlltoallvPlan) -> bool {
        let ranks = p.layout.node_ranks(self.ctx.node());
        ranks
            .clone()
            .any(|s| ranks.clone().any(|t| self.single(p, s, t)))
    }

    /// Unknown sizes: the word index of count matrix `parity` (row `s`,
    /// column `t` at `s * ranks + t` from there).
    pub(super) fn matrix_at(&self, parity: usize) -> usize {
        let n = self.ctx.num_ranks() as usize;
        Self::control_bytes(self.ctx) / 8 + parity * n * n
    }

    pub(super) fn block_elems(ctx: &Context, options: AlltoallvOptions) -> usize {
        let bytes = ctx
            .engine
            .block_bytes(options.block_bytes, AlltoallvOptions::DEFAULT_BLOCK_BYTES);
        (bytes / std::mem::size_of::<T>().max(1)).max(1)
    }

    /// The rank of node `node` this rank writes to: the same local rank,
    /// or fewer if the node has fewer ranks.
    pub(super) fn peer(&self, node: usize) -> Rank {
        let ranks = self.ctx.node_ranks(node);
        let local = self.ctx.local_rank() as usize % ranks.len();
        ranks.start + local as Rank
    }

    /// Word `k` of local rank `local`'s control line (see [`PROGRESS`]).
    pub(super) fn line(&self, local: usize, k: usize) -> &AtomicU64 {
        control_word(&self.control, local, k)
    }

    /// Whether every local rank that may run on this rank's CPU has
    /// reached `step` of its calls (`Alltoallv::core_mates`). From
    /// [`PLACED`] of a call on (pieces placed, reads done), such a rank
    /// only waits for the node's chunks and its ranks' placing, as this
    /// rank does, and cannot return before this rank's wait ends; from
    /// [`ROWS`] (or [`SENT`]) on, with sizes unknown, it waits for the
    /// node's rows (or the other nodes' rows) as this rank does, while they
    /// have not all come. Where none of them can run, a yield would only
    /// hand the CPU to one that yields it back.
    pub(super) fn core_idle(&self, step: u64) -> bool {
        let mates = self.core_mates.as_deref();
        crate::collectives::core_mates_reached(mates, &self.control, PROGRESS, step)
    }

    /// Wake the node's ranks waiting on a control line.
    pub(super) fn wake(&self) {
        self.window.object().notifications().ww.wake();
    }
}

impl<T> Drop for Alltoallv<'_, T> {
    /// Deletes this rank's window segment, once its queue is done. When a
    /// call returns, every chunk for this node has arrived, so no more
    /// writes come in (after a call given up, see
    /// [`Context::segment_create`] for why a new one is still safe). The
    /// first node's words of turning through the copies are read by every
    /// rank, also by those of nodes that exchange nothing with it and may
    /// be calls behind (`rotation.rs`): where the calls measure it, the
    /// first node's first rank waits (at most 10 s: a rank that
    /// gave up its calls never reads) until every rank has read every word
    /// of the calls it made.
    fn drop(&mut self) {
        if self.keep_window {
            return;
        }
        let (ctx, first) = (self.ctx, self.ctx.rank() == 0);
        if let (Some(_), true) = (self.rotation, first) {
            let ranks = u64::from(ctx.num_ranks());
            let reads = Rotation::reads_in(self.calls, ranks);
            let controls = Controls::new(ctx.ranks_per_node(), ctx.num_ranks() as usize);
            let count = self.control.atomic_u64(controls.rotation_reads());
            let deadline = crate::types::Timeout::After(DROP_WAIT).deadline();
            // (Past the deadline the window goes: a late read fails.)
            let _ = crate::engine::wait::poll_with_backoff(deadline, || {
                let read = count.as_ref().map_or(true, |c| c.load(SeqCst) >= reads);
                Ok(read.then_some(()))
            });
        }
        crate::collectives::release(ctx, self.segment, self.options.queue);
    }
}

/// How long the first node's first rank waits, as it drops an alltoallv
/// whose calls measure the copies they turn through, for the other ranks
/// to read its words (see the `Drop` of [`Alltoallv`]).
const DROP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
