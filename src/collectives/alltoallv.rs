//! Alltoallv on node-shared windows with node-level aggregation: the
//! future work of Al Ahad et al. 2018, section V (an AlltoallV on shared
//! windows, and one message set per pair of nodes instead of one per pair
//! of ranks), built on [`AlltoallvPlan`].
//!
//! Every node has one window with two copies of its data area, used by
//! calls in turn (by the parity of the call number): a staging area for
//! its sections to other nodes and a receive area with one section per
//! source node (see [`crate::plan::AlltoallvPlan`]). Two copies let a call
//! start while the previous result is still being read, so no barrier
//! opens a call. One call with counts known at creation
//! ([`Alltoallv::new`]), on every rank:
//! 1. from the third call on, the node's ranks tell every node that sends
//!    to it, and to which it sends nothing, that it may write this call's
//!    copy (a "credit" notification per such node, shared out among them):
//!    having passed the previous call's closing wait, every rank of the
//!    node is done with the result of the call before, which used the same
//!    copy. Where the two nodes send each other data, no credit is needed:
//!    a node's chunks of the previous call said as much (a node writes its
//!    chunks only once all its ranks have staged, that is, once all are
//!    done with the call before);
//! 2. the rank copies its pieces for other nodes into the staging area, at
//!    their place in their node pair's section, and says so in its
//!    progress word (a cache line per local rank at the window's start);
//! 3. the rank waits until every rank of its node has staged, if it sends
//!    chunks at all, and writes its share of the node's chunks (balanced by
//!    bytes among the local ranks) with `write_notify`, each once its
//!    target node's credit for this call is there. Up to
//!    [`AlltoallvOptions::one_sender_max`] bytes going out of the node
//!    (64 KiB by default), the node's last rank to stage (a counter in the
//!    window tells) writes all the node's chunks instead, and no rank waits
//!    for the others' staging. Then the rank copies its pieces for ranks of
//!    its own node straight into the receive area while the chunks travel,
//!    and says so in its word (where ranks read pieces out of each other's
//!    send buffers, below, once it has also read its own: before it claims
//!    chunks);
//! 4. the node's ranks claim the node's incoming chunks from its one table
//!    until all have come; the rank waits until every rank of the node has
//!    placed its pieces for the node: every piece is in place, and no send
//!    buffer of the node is still read. It need not wait for the others to
//!    see the chunks too, which costs a hand-off of the cores where ranks
//!    share them.
//!
//! The waits on the progress words are one-sided: a rank that arrives
//! last does not wait for a release, unlike a barrier's. On one node a
//! call is one copy per piece and one such wait. An empty node pair
//! sends nothing, credits included. The result stays in the window
//! ([`Alltoallv::received`]) until the rank's next call, or is copied into
//! the caller's buffer ([`Alltoallv::run_into`]; a rank's piece for itself
//! then goes straight from its send buffer into that buffer), at
//! `MPI_Alltoallv`'s displacements where given
//! ([`Alltoallv::run_into_displaced`]).
//!
//! **Large pieces unstaged** ([`AlltoallvOptions::direct_min`]): where
//! the pieces of a node pair are large, each rank of the sending node
//! writes its own pieces for that node straight from its send buffer into
//! the target's receive area in step 2 (after the target's credit),
//! complete there before it says it has staged, and the node's chunks of
//! that pair in step 3 carry only their notifications: one copy where
//! staging and the aggregated write make two.
//!
//! **Pieces made in the window** ([`Alltoallv::outgoing`],
//! [`Alltoallv::run_in_window`]): a rank may write its pieces for the next
//! call where steps 2 and 3 would copy them (its slots of the staging area,
//! its sections of the receive area) and skip both copies: inside a node a
//! piece then moves not at all, between nodes once. The places of a call
//! are free from when the rank's previous call has returned: that call's
//! closing wait saw every rank of the node done with the call before it
//! (which used the same copy), and its chunk writes completed.
//!
//! **Single copies** inside a node, for private results: two copies
//! through the window cost each byte a write and a read of lines another
//! core has just written. Where the node's ranks may read each other's
//! memory, a rank of [`Alltoallv::run_into`] reads its large pieces from
//! the node's ranks straight out of their send buffers with
//! `process_vm_readv` (one copy, by the kernel; see
//! [`AlltoallvOptions::single_copy_min`]) in the calls whose way the job
//! has measured faster (`timed_choice.rs`; every rank of the node takes
//! the same way in a call, `Alltoallv::choice_word` says how). Each rank
//! of such a call announces it in
//! its control line (its buffers' addresses, where its pieces for and
//! from the node's ranks lie in them, and whether it reads its pieces
//! itself); before copying its pieces for its node, a sender that
//! reads its own pieces waits briefly for its receivers' announcements,
//! and every sender publishes a push mask:
//! the receivers it copies for as before (they call `run`, came too late,
//! or their buffers lie at offsets where the kernel's copy is slow). A
//! receiver reads the mask of each sender, in turn from the next rank on,
//! and reads the pieces not pushed; the closing wait keeps every send
//! buffer in place until all have read it. A rank whose call fails takes
//! its announcement back, waits for the readers at work (a count in its
//! control line) and copies the pieces still to be read into the window,
//! as it copies the others, before it returns: nothing is read out of its
//! buffer once the call has returned, and its node's ranks need not wait
//! for the call to go on (a caller that polls with short timeouts is out
//! of its call most of the time).
//!
//! **Single copies between nodes**, for private results where the other
//! nodes' windows are mapped here (the native engine's emulated nodes):
//! an unstaged piece would be copied twice, by its sender into the
//! target's receive area and by its receiver out of it (a read of lines
//! another core has just written: at 64 KiB per pair on 2 nodes of 2,
//! half of the call's time). So each rank offers its `run_into` buffer
//! at the start of the call in a word of its node's window (the call's
//! tag and the buffer's address), in the calls whose measured way
//! copies once (the same choice as the single copies inside the node:
//! the kernel's copy has a fixed cost per piece that two `memcpy`s
//! through the window may undercut); a sender of another node that finds
//! the offer writes its piece straight into that buffer with
//! `process_vm_writev` (into the process the job recorded for the rank,
//! while it runs: `crate::engine::processes`), the inter-node message of
//! this transport (as MPI libraries write large messages straight into a
//! posted receive buffer), and sets its bit in the receiver's mask.
//! Offers, masks and a count of the writers at work are reached with the
//! engine's remote
//! atomics, like any word of another node. A sender that does not find
//! the offer soon, or finds none (`run`, displacements, a receiver that
//! took its offer back), writes into the window as before, and the
//! receiver copies out the pieces whose bits are clear: either way is
//! right. A receiver whose call fails takes its offer back and waits for
//! the writers at work before it returns, so nothing is written into its
//! buffer once the call has returned.
//!
//! Calls in which a rank sends [`STREAM_MIN_BYTES`] or more measure
//! whether the copies into the windows (staged pieces, and pieces written
//! unstaged into other nodes' windows) and out of them into the caller's
//! buffer are faster with non-temporal stores, which do not read each
//! line before writing it ([`AlltoallvOptions::stream_stores`]); the same
//! calls time that choice and the single copies' (`ChoicePair`), and the
//! word the node's first rank publishes carries both. Every node takes
//! the ways of the job's first node where that node measured them (a
//! call later, `Alltoallv::next_choice_word`): one node's ways change the
//! others' calls.
//!
//! With sizes unknown in advance ([`Alltoallv::with_unknown_sizes`]), each
//! call starts with a size phase: every rank writes its row of counts into
//! the node's count matrix, and each node writes its rows to every other
//! node in one notified write (shared out among its ranks). That message is
//! also the credit: a node sends it only once its ranks are done with the
//! previous call (the call opens with a wait on the progress words until
//! the node's rows are all written). Once all rows have come, every rank
//! computes the same plan and the data moves as above. Count matrices and their ids alternate
//! between two copies by the parity of the call, so a node one call ahead
//! never overwrites rows still being read.

use super::alltoallv_plan::{AlltoallvPlan, Chunk};
use super::layout::Layout;
use super::timed_choice::ChoicePair;
use super::{await_control, control_word};
use crate::context::Context;
use crate::engine::memcopy::copy_slice_with;
use crate::engine::transfer::PutFrom;
use crate::error::{Error, Result};
use crate::extent;
use crate::segments::SegmentView;
use crate::types::{
    Deadline, GroupId, Local, Notification, QueueId, Rank, Remote, SegmentId, Timeout,
};
use crate::windows::{Window, WindowOptions};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

/// Options of an [`Alltoallv`].
///
/// ```
/// use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let n = ctx.num_ranks() as usize;
/// // Chunks of 4 KiB on queue 1.
/// let opts = AlltoallvOptions { block_bytes: 4096, queue: 1, ..Default::default() };
/// let a = Alltoallv::<u64>::with_options(&ctx, 0, &vec![1000; n * n], opts, Timeout::Block)?;
/// assert_eq!(a.plan().unwrap().block_elems, 512);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlltoallvOptions {
    /// The most bytes in one notified write between nodes: larger sections
    /// are cut into chunks that the node's ranks share out. 0 (the
    /// default): the engine's choice, as for the allgatherv's blocks.
    pub block_bytes: usize,
    /// The queue the collective posts on (default 0).
    pub queue: QueueId,
    /// Up to this many bytes going out of a node per call, the node's last
    /// rank to stage its pieces writes all the node's chunks, and no rank
    /// waits for the others to stage; above, the node's ranks share the
    /// chunks out by bytes and each waits until all have staged. 0: always
    /// share. Default [`AlltoallvOptions::DEFAULT_ONE_SENDER_MAX`].
    pub one_sender_max: usize,
    /// With private results ([`Alltoallv::run_into`]), a piece of at least
    /// this many bytes between two ranks of one node is copied once,
    /// straight from the sender's buffer into the receiver's, by the
    /// kernel (Linux cross-memory attach, `process_vm_readv`), instead of
    /// twice through the node's window. `None` (the default):
    /// [`AlltoallvOptions::DEFAULT_SINGLE_COPY_MIN`] where the ranks have
    /// a core each, [`AlltoallvOptions::DEFAULT_SHARED_SINGLE_COPY_MIN`]
    /// where they share cores, in the calls whose way the job's calls
    /// have measured faster (once or twice: on a 2-core AMD EPYC VM two
    /// copies won, on a 2-core Intel Xeon VM one; on a 16-core Xeon with
    /// a core per rank, where every such piece went in one copy, a private
    /// call of 2 nodes of 2 took 3.5 times the in-place one at 16 KiB per
    /// pair; see the guide's alltoallv figures, docs/guide/benchmarking.md; the
    /// measuring is that of the allreduce's stores,
    /// [`AllreduceOptions::stream_inputs`](crate::AllreduceOptions::stream_inputs)).
    /// `Some(bytes)`: in every call; `Some(usize::MAX)`: never. In every
    /// case only where all ranks of the node may read each other's memory
    /// (tried when the alltoallv is made: same user, and no Yama
    /// `ptrace_scope` or seccomp rule against it) and chose the same value.
    ///
    /// Pieces of at least this many bytes (the default as above, in the
    /// same calls) from ranks of other nodes that reach this node unstaged
    /// ([`AlltoallvOptions::direct_min`]) and whose windows are mapped here
    /// (the native engine) go in one copy too: their senders write them
    /// straight into the receiver's buffer (`process_vm_writev`) where it
    /// offered it (a `run_into` without displacements), and where they may;
    /// the others come through the window.
    pub single_copy_min: Option<usize>,
    /// Pieces between two nodes that average at least this many bytes
    /// (over the non-empty pieces of the node pair) are not aggregated:
    /// every rank writes its pieces for the other node straight from its
    /// send buffer into that node's receive area, one copy where staging
    /// and the aggregated write make two, and the node's chunks carry only
    /// their notifications. Only to nodes the engine can write to from any
    /// memory (the native engine's mapped windows, and MPI; not GPI-2,
    /// which writes only from registered segments: with the GPI-2 engine,
    /// through which every operation between nodes goes, the pieces are
    /// staged whatever this says). `None` (the default):
    /// [`AlltoallvOptions::DEFAULT_DIRECT_MIN`] on the native engine,
    /// [`AlltoallvOptions::DEFAULT_TRANSPORT_DIRECT_MIN`] through MPI (the
    /// MPI engine's other nodes); `Some(usize::MAX)`: never. Every rank of
    /// a node must choose the same.
    pub direct_min: Option<usize>,
    /// Whether a call copies the pieces it stages in its node's window,
    /// those it writes unstaged into other nodes' windows (where this
    /// process makes that copy: the native engine) and, with private
    /// results ([`Alltoallv::run_into`]), those it copies from the window
    /// into the caller's buffer with non-temporal stores (`Some(true)`:
    /// the lines go to memory, not into this core's cache), with ordinary
    /// ones (`Some(false)`), or, `None` (the default), whichever the
    /// job's calls have measured faster, in calls where this rank sends
    /// 4 MiB or more (smaller calls take ordinary stores): the first
    /// node's first rank times each kind, keeps the faster by a margin of
    /// 10% and tells the ranks, which try the other kind in 4 calls of
    /// every 256, as
    /// [`AllreduceOptions::stream_inputs`](crate::AllreduceOptions::stream_inputs)
    /// does. Where a call's data outgrow the caches, streaming stores save
    /// reading each line before writing it (on a 2-core Xeon VM, 8 ranks
    /// at 1 MiB per pair took 0.64 of the time in place, 0.82-0.93 with
    /// private results); below, the receivers read the pieces from the
    /// cache instead of memory. The result is the same either way.
    ///
    /// ```
    /// use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let cached = AlltoallvOptions { stream_stores: Some(false), ..Default::default() };
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 2, 4, cached, Timeout::Block)?;
    /// a.run(&vec![ctx.rank() as u64; 4 * n], &vec![4; n], Timeout::Block)?;
    /// assert_eq!(a.received(0)?.to_vec(), [0; 4]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub stream_stores: Option<bool>,
}

impl Default for AlltoallvOptions {
    fn default() -> AlltoallvOptions {
        AlltoallvOptions {
            block_bytes: 0,
            queue: 0,
            one_sender_max: AlltoallvOptions::DEFAULT_ONE_SENDER_MAX,
            single_copy_min: None,
            direct_min: None,
            stream_stores: None,
        }
    }
}

impl AlltoallvOptions {
    /// The chunk size chosen for `block_bytes: 0` inside a host: 1 MiB
    /// (an aggregated section is usually sent whole).
    pub const DEFAULT_BLOCK_BYTES: usize = 1 << 20;
    /// The default of `one_sender_max`: 64 KiB. Measured here (4 and 8
    /// ranks on 2 cores, alternated rounds): one sender took 0.85-0.96 of
    /// the shared-out time at 1-8 KiB per pair, 1.10 at 64-256 KiB on 2
    /// nodes of 2 (256 KiB going out per node).
    pub const DEFAULT_ONE_SENDER_MAX: usize = 64 << 10;
    /// The smallest piece that may go in one copy where the ranks have a
    /// core each (`single_copy_min: None`, the calls' way measured): 16
    /// KiB. A model of both designs
    /// (`scripts/alltoall_model.c`) put the crossover between 1 and 16 KiB
    /// per piece on a 16-core Xeon (8 and 16 ranks), where the single copy
    /// took 0.2-0.7 of the time of two from 16 KiB to 1 MiB per piece.
    pub const DEFAULT_SINGLE_COPY_MIN: usize = 16 << 10;
    /// The smallest piece that may go in one copy where the ranks share
    /// cores (`single_copy_min: None`, the calls' way measured): 32 KiB.
    /// On a 2-core Intel Xeon VM, 4 ranks, one copy took 1.12-1.25 of the
    /// time of two at 16 KiB per pair, about the same at 32 KiB, 0.75 at
    /// 64 KiB; near a tie, measuring costs more than it finds.
    pub const DEFAULT_SHARED_SINGLE_COPY_MIN: usize = 32 << 10;
    /// The smallest piece (on average) written unstaged to a node whose
    /// window this process maps (`direct_min: None`; the native engine):
    /// 16 KiB. On a 2-core Intel Xeon VM, 4 and 8 ranks in nodes of 2,
    /// unstaged took 0.62-0.86 of the staged time at 16 KiB per pair and
    /// 0.50-0.61 from 64 KiB to 1 MiB (results in place; private
    /// 0.68-0.93 from 16 KiB), the same at 1 KiB (see the guide's
    /// alltoallv figures, docs/guide/benchmarking.md).
    pub const DEFAULT_DIRECT_MIN: usize = 16 << 10;
    /// The same through a transport (the MPI engine's other nodes;
    /// `direct_min: None`): 256 KiB. Every piece is then a put of its
    /// own, and a node's pieces one flush: through MPICH between emulated
    /// hosts, unstaged was slower at 16 KiB per pair, mixed at 64-256 KiB,
    /// 0.7-0.9 of the staged time at 1 MiB.
    pub const DEFAULT_TRANSPORT_DIRECT_MIN: usize = 256 << 10;
}

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
const PROGRESS: usize = 0;
const ANNOUNCE: usize = 1;
const ADDRESS: usize = 2;
const PROBE: usize = 3;
const RECV_ADDRESS: usize = 4;
const DECIDED: usize = 5;
const THRESHOLD: usize = 6;
const READERS: usize = 7;

/// The bit of a rank's [`ANNOUNCE`] word that says its call failed and
/// took the announcement back (`Alltoallv::withdraw`): its send buffer may
/// be gone.
const WITHDRAWN: u64 = 1 << 63;

/// The bit of a rank's [`ANNOUNCE`] word, beside [`WITHDRAWN`], that says
/// it copied the pieces that its node's ranks were to read out of its send
/// buffer into the window instead: they take them from there.
const MOVED: u64 = 1 << 62;

/// Which of its pieces a rank copies into its node's window
/// (`Alltoallv::stage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Staged {
    /// Those for other nodes, into the staging area.
    Out,
    /// Those for this node's ranks that they do not read themselves, into
    /// the receive area.
    Node,
    /// Those that this node's ranks were to read themselves, into the
    /// receive area.
    Read,
}

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

/// Calls in which a rank sends fewer bytes make their stores into the
/// windows and the caller's buffer ordinary (cached); from this size on,
/// the job measures whether streaming (non-temporal) stores are faster
/// (`Alltoallv::choice`). On the 2-core Xeon VM, streaming stores took
/// 0.63-0.64 of the time of an in-place call of 8 ranks at 1 MiB per pair
/// (8 MiB per rank), made no difference at 4 MiB per rank (4 ranks), and
/// measuring them cost 2-6% at 2 MiB per rank (8 ranks at 256 KiB per
/// pair), where ordinary stores are as fast (docs/guide/benchmarking.md).
const STREAM_MIN_BYTES: usize = 4 << 20;

/// The bits of a node's choice word ([`Alltoallv::choice_word`]) that say
/// which of its two choices its first rank has measured (the first's bit,
/// then the second's; shifted by [`LEARNED`]).
const LEARNED: u32 = 2;

/// The bit of a rank's [`THRESHOLD`] word that says it measures which
/// calls copy once (see [`AlltoallvOptions::single_copy_min`]).
const MEASURED: u64 = 1 << 63;

/// How long a rank about to copy its pieces for its node's ranks waits for
/// their announcements of the call before it copies those it has not seen
/// into the window (see `Alltoallv::decide`). On a 16-core Xeon, waiting
/// 5 us saw 6-66% of the receivers, 100 us all of them.
const SINGLE_COPY_PATIENCE: std::time::Duration = std::time::Duration::from_millis(1);

/// How long a sender waits for the offer of a rank of another node that
/// took its previous call's result privately (see `Alltoallv::push_into`)
/// before it writes the piece into the window instead. As for
/// [`SINGLE_COPY_PATIENCE`], the receiver's lateness delays the call's end
/// anyway; a wait that gives up sends the receiver a copy out of the window
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

/// A hook run around each write into another rank's offered buffer
/// ([`Alltoallv::testing_around_writes`]) or each read out of a local
/// rank's send buffer ([`Alltoallv::testing_around_reads`]).
struct AroundCopies<'a>(Box<dyn Fn(Rank, bool) + Send + Sync + 'a>);

impl std::fmt::Debug for AroundCopies<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AroundCopies")
    }
}

/// A hook that gives the time of each call the node's first rank measures
/// ([`Alltoallv::testing_call_times`]).
struct CallTimes<'a>(Box<dyn Fn(u64, [bool; 2]) -> std::time::Duration + Send + Sync + 'a>);

impl std::fmt::Debug for CallTimes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallTimes")
    }
}

/// The end of a brief wait (at most `most`) within `deadline`.
/// Wait while `busy` says that ranks are copying into or out of this
/// rank's buffer, unless `failed` says they failed: kernel copies of a
/// piece each, short, so a brief spin, then yields.
fn wait_out(mut busy: impl FnMut() -> bool, mut failed: impl FnMut() -> bool) {
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

fn brief(deadline: Deadline, most: std::time::Duration) -> Deadline {
    match (deadline.remaining(), most) {
        (Some(left), most) if left < most => deadline,
        (_, most) => Timeout::After(most).deadline(),
    }
}

/// Whether the kernel copies a piece from address `src` to address `dst`
/// at full speed: the destination does not lie 1 to 31 bytes past the
/// source's offset within a 4 KiB page, or this machine's kernel copy is
/// not slow there ([`crate::sys::cross_copy_offsets_slow`]; see
/// `Alltoallv::aligned`). Wrapping: only the offset within a page
/// matters.
fn kernel_copy_fast(src: u64, dst: u64) -> bool {
    !crate::engine::memcopy::offsets_alias(src as usize, dst as usize)
        || !crate::sys::cross_copy_offsets_slow()
}

/// The words of a rank's offer (see `Alltoallv::offer`), after the
/// places: the offer itself, the address of its receive buffer, then a
/// bit per rank of the job, set by each sender that wrote its piece
/// straight into that buffer, then ([`offer_busy`]) a bit per rank of the
/// job, set by each sender while it may hold a writer's place (so that a
/// receiver whose call failed waits for the living writers, not only
/// until some rank failed). (Its process is the one the job recorded for
/// its rank, never one a word names: see `crate::engine::processes`.)
const OFFER: usize = 0;
const OFFER_ADDRESS: usize = 1;
const OFFER_MASK: usize = 2;

/// The first of the offer's words of senders at work among `ranks`
/// ranks, after its mask.
fn offer_busy(ranks: usize) -> usize {
    OFFER_MASK + ranks.div_ceil(64)
}

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

/// What a rank's probe word holds at creation (xor its rank), read by the
/// node's other ranks through `process_vm_readv`: a value no other process
/// would hold at that address.
const PROBE_TOKEN: u64 = 0x6761_7370_692d_6131;

/// Counts fixed at creation, or learned in every call.
#[derive(Clone, Copy, Debug)]
enum Sizes {
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

/// What a call sends from and where its pieces lie in the caller's
/// buffers: in the window ([`Alltoallv::run_in_window`]), or in `send`
/// and `recv` at `MPI_Alltoallv`'s send and receive displacements where
/// given ([`Alltoallv::run_into_displaced`]), packed otherwise.
#[derive(Clone, Copy, Debug, Default)]
struct Given<'b> {
    in_window: bool,
    send_displs: Option<&'b [usize]>,
    recv_displs: Option<&'b [usize]>,
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
            let end = super::plan::check_extents(&counts, &placed, elem).map_err(|e| match e {
                Error::InvalidArgument(m) => {
                    Error::InvalidArgument(format!("the receive displacements (by source): {m}"))
                }
                e => e,
            })?;
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

/// Where a call stopped (to resume after a timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Unknown sizes: writing the rank's row of counts.
    Start,
    /// Unknown sizes: waiting until the node's ranks have written theirs.
    Rows,
    /// Sending credits (fixed) or count rows (unknown), from the `next`th.
    Opening { next: usize },
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
    ctx: &'a Context,
    segment: SegmentId,
    window: Window,
    options: AlltoallvOptions,
    sizes: Sizes,
    /// The plan of every call (fixed counts) or of the last call started.
    plan: Option<AlltoallvPlan>,
    /// The window as words: the progress words, then (unknown sizes) the
    /// two count matrices.
    control: SegmentView<u64>,
    /// Elements of `T` before the data areas.
    data_base: usize,
    /// The copy of the data area that holds the last result.
    last: usize,
    /// Calls completed.
    calls: u64,
    /// Claims on the node's table in the calls completed.
    claimed: u64,
    /// Calls that staged (all but those refused for their sizes).
    stagings: u64,
    /// The call in progress, if one timed out.
    phase: Option<Phase>,
    /// The smallest piece copied once inside the node (see
    /// [`AlltoallvOptions::single_copy_min`]); `usize::MAX` where the
    /// node's ranks do not (cannot read each other's memory, or chose
    /// otherwise).
    once_min: usize,
    /// The call in progress (or the last one) copies large pieces once:
    /// its ranks announce it, decide their push masks and read pieces from
    /// each other (every rank of the node alike).
    once: bool,
    /// The call in progress (or the last one) reads its large pieces from
    /// this node's ranks straight into the caller's buffer.
    pull: bool,
    /// The call in progress (or the last one) copies this rank's piece for
    /// itself straight from its send buffer into its receive buffer, not
    /// through the window (a `run_into` whose buffer holds the result).
    own_direct: bool,
    /// The sources whose pieces that call read so (by rank; empty if
    /// none).
    pulled_from: Vec<bool>,
    /// The receive buffer (address, elements) that the call in progress
    /// has read pieces into out of its node's send buffers, once it has.
    pulled_into: Option<(usize, usize)>,
    /// The call in progress (or the last one) sends what the caller wrote
    /// into the window ([`Alltoallv::run_in_window`]), copying nothing in.
    in_window: bool,
    /// Whether the call in progress has made its offer, and the receive
    /// buffer (address, elements) it offered to senders of other nodes, if
    /// it did (see `Alltoallv::offer`).
    offer_made: bool,
    offered: Option<(usize, usize)>,
    /// A write into another rank's buffer failed (no right to): this rank
    /// writes its pieces through the window from then on.
    push_failed: AtomicBool,
    /// By rank: the call up to which this rank writes its pieces for that
    /// rank into the window without looking at its offer
    /// ([`WINDOW_CALLS`]). (Atomics, though only this rank's calls use
    /// them, so that an `Alltoallv` may be shared between threads.)
    window_until: Vec<AtomicU64>,
    /// The testing aid of [`Alltoallv::testing_around_writes`], if set.
    around_writes: Option<AroundCopies<'a>>,
    /// The testing aid of [`Alltoallv::testing_around_reads`], if set.
    around_reads: Option<AroundCopies<'a>>,
    /// Test aid: the times of measured calls (`testing_call_times`).
    call_times: Option<CallTimes<'a>>,
    /// Where each target's piece starts in the send buffer of the call in
    /// progress, and whether these are the packed places of the fixed
    /// counts (kept from call to call).
    send_at: Vec<usize>,
    send_packed: bool,
    /// The receive displacements given to the call in progress (by
    /// source; `None`: packed), and where each source's piece goes in its
    /// receive buffer once the counts are known and the buffer holds them.
    recv_displs: Option<Vec<usize>>,
    recv_at: Vec<usize>,
    /// Whether `recv_at` holds the places of the call in progress, and
    /// where they end if these are the packed places of the fixed counts
    /// (kept from call to call).
    recv_placed: bool,
    recv_packed: Option<usize>,
    /// By target node: whether this node's ranks write their pieces there
    /// themselves, unstaged (see [`AlltoallvOptions::direct_min`]), for
    /// the plan in use; and the elements this node stages in all.
    direct_to: Vec<bool>,
    staged_len: usize,
    /// By target rank, for the plan in use: where this rank's piece starts
    /// in the target's receive buffer when it holds its pieces packed (in
    /// elements; see `Alltoallv::push_into`).
    push_at: Vec<usize>,
    /// Whether each call copies large pieces once or twice by the node's
    /// measurements (`single_copy_min: None`): inside the node, and into
    /// offered buffers from other nodes.
    measured: bool,
    /// The way of single copies that the call in progress takes: where
    /// `measured`, the node's pick (then its ranks copy the node's large
    /// pieces once and offer their buffers to other nodes), else `true`.
    once_way: bool,
    /// Whether the call in progress copies its result into the caller's
    /// buffer (`run_into`).
    private: bool,
    /// Whether the call in progress is large enough for its stores into
    /// the windows to be measured ([`STREAM_MIN_BYTES`]), and whether it
    /// makes them streaming (non-temporal).
    stream_measured: bool,
    streaming: bool,
    /// The node's measurements, timed by its first rank: the first of the
    /// pair whether calls copy once (`true`) inside the node (where
    /// `measured`), the second whether their stores into the windows and
    /// the caller's buffer stream (where `stream_measured`). The first
    /// node's are the job's (`Alltoallv::next_choice_word`).
    choice: ChoicePair,
    _t: PhantomData<T>,
}

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// Collectively prepare an alltoallv with fixed `counts` (`ranks *
    /// ranks`, the same on every rank) using segment id `segment` for the
    /// node windows.
    ///
    /// ```
    /// use gaspi::{Alltoallv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let a = Alltoallv::<f64>::new(&ctx, 0, &vec![4; n * n], Timeout::Block)?;
    /// assert!(Alltoallv::<f64>::new(&ctx, 1, &[4], Timeout::Block).is_err() || n == 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn new(
        ctx: &'a Context,
        segment: SegmentId,
        counts: &[usize],
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        Alltoallv::with_options(ctx, segment, counts, AlltoallvOptions::default(), timeout)
    }

    /// An alltoall: `count` elements from every rank to every rank.
    ///
    /// ```
    /// use gaspi::{Alltoallv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u8);
    /// let mut a = Alltoallv::<u8>::alltoall(&ctx, 0, 2, Default::default(), Timeout::Block)?;
    /// let mut recv = vec![0u8; 2 * n];
    /// a.run_into(&vec![me; 2 * n], &vec![2; n], &mut recv, Timeout::Block)?;
    /// assert_eq!(recv[2 * n - 1] as usize, n - 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn alltoall(
        ctx: &'a Context,
        segment: SegmentId,
        count: usize,
        options: AlltoallvOptions,
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        let n = ctx.num_ranks() as usize;
        let counts = vec![count; extent::mul("ranks * ranks", n, n)?];
        Alltoallv::with_options(ctx, segment, &counts, options, timeout)
    }

    /// [`Alltoallv::new`] with options.
    ///
    /// ```
    /// use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let opts = AlltoallvOptions { block_bytes: 64, ..Default::default() };
    /// let a = Alltoallv::<u64>::with_options(&ctx, 0, &vec![100; n * n], opts, Timeout::Block)?;
    /// // Sections of 100 * ppn^2 elements in chunks of 8.
    /// assert_eq!(a.plan().unwrap().block_elems, 8);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn with_options(
        ctx: &'a Context,
        segment: SegmentId,
        counts: &[usize],
        options: AlltoallvOptions,
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        let elem = std::mem::size_of::<T>().max(1);
        let block = Self::block_elems(ctx, options);
        // Two sets of chunk ids (by call parity), then the credits.
        let max_ids = (crate::config::NOTIFICATION_LIMIT as usize - ctx.num_nodes() - 1) / 2;
        let plan = AlltoallvPlan::new(Layout::of(ctx), counts, elem, block, max_ids)?;
        let node = ctx.node();
        // The same table on every node: engines that cannot see a remote
        // table check ids against their own.
        let most_in = (0..ctx.num_nodes())
            .map(|k| plan.in_chunks(k))
            .max()
            .unwrap_or(0);
        let table = 2 * most_in + ctx.num_nodes();
        let two = extent::mul("alltoallv window", plan.window_len(node), 2)?;
        let data_base = Self::control_bytes(ctx).div_ceil(elem);
        let elems = extent::add("alltoallv window", data_base, two)?;
        let bytes = extent::mul("alltoallv window", elems, elem)?;
        let deadline = timeout.deadline();
        let window = Self::create_window(ctx, segment, bytes, table, timeout)?;
        let mut a = Self::made(
            ctx,
            segment,
            window,
            options,
            Sizes::Fixed,
            Some(plan),
            data_base,
        );
        a.probe_single_copy(deadline)?;
        Ok(a)
    }

    /// Collectively prepare an alltoallv whose counts each call brings
    /// ([`Alltoallv::run`]'s `send_counts`; they may differ from call to
    /// call and between ranks): no rank sends, and no rank receives, more
    /// than `capacity` elements in one call. The counts travel in the call
    /// (a size phase before the data; see the module documentation).
    ///
    /// ```
    /// use gaspi::{Alltoallv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
    /// let mut a = Alltoallv::<u16>::with_unknown_sizes(&ctx, 0, 64, Default::default(), Timeout::Block)?;
    /// for it in 0..3 {
    ///     // Sparse: each rank sends `it` elements to the next rank only.
    ///     let mut row = vec![0; n];
    ///     row[(me + 1) % n] += it;
    ///     a.run(&vec![me as u16; it], &row, Timeout::Block)?;
    ///     let prev = (me + n - 1) % n;
    ///     assert_eq!(a.received(prev as u16)?.to_vec(), vec![prev as u16; it]);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn with_unknown_sizes(
        ctx: &'a Context,
        segment: SegmentId,
        capacity: usize,
        options: AlltoallvOptions,
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        let elem = std::mem::size_of::<T>().max(1);
        let (n, nodes) = (ctx.num_ranks() as usize, ctx.num_nodes());
        // Two copies of staging and receive areas of `capacity` per rank
        // each, for the largest node (so that every node's copies start at
        // the same place).
        let area = extent::mul("capacity * ranks per node", capacity, ctx.ranks_per_node())?;
        let copy = extent::mul("alltoallv window", area, 2)?;
        let data = extent::mul("alltoallv window", copy, 2)?;
        let data_bytes = extent::mul("alltoallv window", data, elem)?;
        let matrices = extent::mul("alltoallv count matrices", n, n)?;
        let count_bytes = extent::mul("alltoallv count matrices", matrices, 16)?;
        let control = extent::add("alltoallv window", Self::control_bytes(ctx), count_bytes)?;
        let data_base = control.div_ceil(elem);
        let bytes = extent::add("alltoallv window", data_base * elem, data_bytes)?;
        let block = Self::block_elems(ctx, options);
        // The same on every node (senders compute the ids of the count
        // rows from it): from the largest node's receive area.
        let most = crate::config::NOTIFICATION_LIMIT as usize - 2 * nodes - 1;
        let data_ids = (area.div_ceil(block) + nodes).min(most);
        let deadline = timeout.deadline();
        let window = Self::create_window(ctx, segment, bytes, data_ids + 2 * nodes, timeout)?;
        let sizes = Sizes::Unknown {
            capacity,
            data_ids,
            copy,
        };
        let mut a = Self::made(ctx, segment, window, options, sizes, None, data_base);
        a.probe_single_copy(deadline)?;
        Ok(a)
    }

    /// The collective on its new `window`, before its first call.
    fn made(
        ctx: &'a Context,
        segment: SegmentId,
        window: Window,
        options: AlltoallvOptions,
        sizes: Sizes,
        plan: Option<AlltoallvPlan>,
        data_base: usize,
    ) -> Alltoallv<'a, T> {
        let mut a = Alltoallv {
            ctx,
            segment,
            control: window.view(),
            window,
            options,
            sizes,
            plan,
            data_base,
            last: 0,
            calls: 0,
            claimed: 0,
            stagings: 0,
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
            measured: false,
            once_way: true,
            private: false,
            stream_measured: false,
            streaming: false,
            choice: ChoicePair::default(),
            _t: PhantomData,
        };
        a.plan_direct();
        a
    }

    /// Which of this node's sections go unstaged, straight from their
    /// senders (`Alltoallv::direct_to`), for the plan in use: those to
    /// another node whose non-empty pieces average at least
    /// [`AlltoallvOptions::direct_min`] bytes, where the engine writes
    /// from any memory. Every rank of the node finds the same.
    fn plan_direct(&mut self) {
        let Some(p) = self.plan.as_ref() else {
            return;
        };
        let node = self.ctx.node();
        let nodes = p.layout.nodes();
        let elem = std::mem::size_of::<T>();
        let mine = p.layout.node_ranks(node);
        let direct = |to: usize| {
            let min = match (
                self.ctx.writes_from_memory_to(self.peer(to)),
                self.options.direct_min,
            ) {
                _ if to == node => return false,
                (PutFrom::No, _) | (_, Some(usize::MAX)) => return false,
                (_, Some(min)) => min,
                (PutFrom::Mapped, None) => AlltoallvOptions::DEFAULT_DIRECT_MIN,
                (PutFrom::Transport, None) => AlltoallvOptions::DEFAULT_TRANSPORT_DIRECT_MIN,
            };
            let theirs = p.layout.node_ranks(to);
            let pieces = mine
                .clone()
                .flat_map(|s| theirs.clone().map(move |t| (s, t)))
                .filter(|&(s, t)| p.count(s, t) > 0)
                .count();
            let bytes = p.section_len(node, to).saturating_mul(elem);
            pieces > 0 && bytes / pieces >= min
        };
        self.direct_to = (0..nodes).map(direct).collect();
        self.staged_len = (0..nodes)
            .filter(|&to| to != node && !self.direct_to[to])
            .map(|to| p.section_len(node, to))
            .sum();
        // (Saturating: a receiver whose buffer could hold them checked the
        // sums; no other is offered.)
        let (n, me) = (p.layout.ranks, self.ctx.rank() as usize);
        self.push_at.clear();
        self.push_at.resize(n, 0);
        for s in 0..me {
            for (t, at) in self.push_at.iter_mut().enumerate() {
                *at = at.saturating_add(p.count(s, t));
            }
        }
    }

    /// The smallest piece this rank would copy once (`usize::MAX`: none),
    /// from its options.
    fn single_min(&self) -> usize {
        self.options
            .single_copy_min
            .unwrap_or(if self.ctx.engine.host_shares_cores() {
                AlltoallvOptions::DEFAULT_SHARED_SINGLE_COPY_MIN
            } else {
                AlltoallvOptions::DEFAULT_SINGLE_COPY_MIN
            })
    }

    /// Find out whether the ranks of this node copy large pieces once
    /// (`once_min`): each publishes its threshold and the address of a
    /// word holding a token, reads every other rank's
    /// token, says whether all came right and all thresholds are its own,
    /// and all agree. Every rank of the node takes part, wanting single
    /// copies or not, so that none waits for another in vain. On an error
    /// the alltoallv is dropped, which deletes its window.
    fn probe_single_copy(&mut self, deadline: Deadline) -> Result<()> {
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
        self.line(local, THRESHOLD).store(threshold, SeqCst);
        let first = ctx.node_ranks(ctx.node()).start as u64;
        let token = |local: usize| PROBE_TOKEN ^ (first + local as u64);
        // Read by the others until they all say they are done below.
        let probe = Box::new(token(local));
        self.line(local, ADDRESS)
            .store(std::ptr::from_ref::<u64>(&probe) as u64, SeqCst);
        self.line(local, PROBE).store(1, SeqCst);
        self.wake();
        self.await_lines::<PROBE>(1, deadline)?;
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
        self.await_lines::<PROBE>(2, deadline)?;
        drop(probe);
        if (0..local_num).all(|l| self.line(l, PROBE).load(SeqCst) == 3) {
            self.once_min = usize::try_from(min).unwrap_or(usize::MAX).max(1);
            self.measured = measured;
            // Measured now rather than in the first call.
            crate::sys::cross_copy_offsets_slow();
        }
        Ok(())
    }

    /// Whether the piece from rank `s` to rank `t` goes in one copy when
    /// its receiver asks for that (same node, large enough).
    fn single(&self, p: &AlltoallvPlan, s: usize, t: usize) -> bool {
        let bytes = p.count(s, t).saturating_mul(std::mem::size_of::<T>());
        s != t && p.layout.node_of(s) == p.layout.node_of(t) && bytes >= self.once_min
    }

    /// The first notification id of `node`'s chunks in a call of
    /// `parity`. Fixed counts: a set per parity, since with no barrier
    /// opening a call a node may write the next call's chunks before the
    /// target has claimed this call's; unknown sizes: one set (a node
    /// writes only after the target's count rows for that call).
    fn chunk_ids(&self, node: usize, parity: usize) -> usize {
        match (self.sizes, &self.plan) {
            (Sizes::Fixed, Some(p)) => parity * p.in_chunks(node),
            _ => 0,
        }
    }

    /// Where copy `parity` of `node`'s data area starts in its window.
    fn area(&self, node: usize, parity: usize) -> usize {
        let len = match (self.sizes, &self.plan) {
            (Sizes::Fixed, Some(p)) => p.window_len(node),
            (Sizes::Unknown { copy, .. }, _) => copy,
            (Sizes::Fixed, None) => unreachable!("fixed counts have a plan"),
        };
        self.data_base + parity * len
    }

    /// Bytes of the control words at the window's start: a cache line per
    /// local rank, one for the node's count of stagings and its way of
    /// copying, then each local rank's push mask (see
    /// [`Alltoallv::mask_word`]), places and offer
    /// ([`Alltoallv::offer_at`]).
    fn control_bytes(ctx: &Context) -> usize {
        let (rpn, n) = (ctx.ranks_per_node(), ctx.num_ranks() as usize);
        Self::offers_at(rpn) + rpn * Self::offer_stride(n)
    }

    /// Where the offers start: after the places.
    fn offers_at(rpn: usize) -> usize {
        64 * (rpn + 1) + rpn * (Self::mask_stride(rpn) + Self::places_stride(rpn))
    }

    /// Bytes of one rank's offer among `ranks` ranks, in whole cache lines.
    fn offer_stride(ranks: usize) -> usize {
        (8 * (offer_busy(ranks) + ranks.div_ceil(64))).div_ceil(64) * 64
    }

    /// The byte offset in every node's window of word `k` of local rank
    /// `local`'s offer ([`OFFER`] and the words after it).
    fn offer_at(&self, local: usize, k: usize) -> usize {
        let (rpn, n) = (self.ctx.ranks_per_node(), self.ctx.num_ranks() as usize);
        Self::offers_at(rpn) + local * Self::offer_stride(n) + 8 * k
    }

    /// Word `k` of this node's local rank `local`'s offer.
    fn offer_word(&self, local: usize, k: usize) -> &AtomicU64 {
        self.control
            .atomic_u64(self.offer_at(local, k))
            .expect("the offers lie in the control words")
    }

    /// Bytes of one rank's places (see [`Alltoallv::place_word`]), in
    /// whole cache lines.
    fn places_stride(rpn: usize) -> usize {
        (16 * rpn).div_ceil(64) * 64
    }

    /// Local rank `local`'s word for local rank `j` in a call with single
    /// copies, after the push masks: where (in elements) its piece for `j`
    /// starts in its send buffer, or (`recv`) where the piece from `j` goes
    /// in its receive buffer. Written only by `local`, before its
    /// announcement, so that the node's ranks find pieces at any
    /// displacements ([`Alltoallv::run_into_displaced`]).
    fn place_word(&self, local: usize, recv: bool, j: usize) -> &AtomicU64 {
        let rpn = self.ctx.ranks_per_node();
        let at = 64 * (rpn + 1)
            + rpn * Self::mask_stride(rpn)
            + local * Self::places_stride(rpn)
            + 8 * (usize::from(recv) * rpn + j);
        self.control
            .atomic_u64(at)
            .expect("the places lie in the control lines")
    }

    /// Bytes of one rank's push mask: a bit per local rank, in whole
    /// cache lines.
    fn mask_stride(rpn: usize) -> usize {
        rpn.div_ceil(64).div_ceil(8) * 64
    }

    /// Word `k` of local rank `local`'s push mask in a call with single
    /// copies: bit `t % 64` of word `t / 64` set says that `local` copies
    /// its piece for local rank `t` into the window (`t` does not read it
    /// itself). Written only by `local`, before its announcement.
    fn mask_word(&self, local: usize, k: usize) -> &AtomicU64 {
        let rpn = self.ctx.ranks_per_node();
        let at = 64 * (rpn + 1) + local * Self::mask_stride(rpn) + 8 * k;
        self.control
            .atomic_u64(at)
            .expect("the push masks lie in the control lines")
    }

    /// Whether local rank `s` copies its piece for local rank `t` into the
    /// window (its mask says so).
    fn pushes(&self, s: usize, t: usize) -> bool {
        self.mask_word(s, t / 64).load(SeqCst) >> (t % 64) & 1 == 1
    }

    /// How many times the node's ranks have staged, in all (see
    /// [`AlltoallvOptions::one_sender_max`]): the cache line after the
    /// progress words.
    fn staged_count(&self) -> &AtomicU64 {
        self.control
            .atomic_u64(64 * self.ctx.ranks_per_node())
            .expect("the control lines lie at the window's aligned start")
    }

    /// Where the ways of a call are measured, the node's ways in use for
    /// call number `call` (as [`ChoicePair::word`]: bit 0 set, copies
    /// once; bit 1 set, streaming stores; and the [`LEARNED`] bits of
    /// [`Alltoallv::next_choice_word`]), after
    /// [`Alltoallv::staged_count`]: a word per parity of the call. The
    /// node's first rank writes the next call's during a call, before it
    /// says its pieces for the node are placed and read (its step 3 of
    /// `Alltoallv::publish`), and every rank reads its call's at staging:
    /// so all read the same value (no rank starts the next call before the
    /// first rank's step 3, nor does the first rank write this parity's
    /// word again before every rank's step 3 of the next call). That
    /// every rank takes the same way keeps a call from waiting for an
    /// announcement or a push mask that a rank copying twice never makes.
    fn choice_word(&self, call: u64) -> &AtomicU64 {
        self.control
            .atomic_u64(self.choice_at(call))
            .expect("the control lines lie at the window's aligned start")
    }

    /// Where [`Alltoallv::choice_word`] of `call` lies in a node's window.
    fn choice_at(&self, call: u64) -> usize {
        64 * self.ctx.ranks_per_node() + 8 * (1 + (call % 2) as usize)
    }

    /// The ways in use that the node's first rank writes, during the call
    /// in progress, for the call after it ([`Alltoallv::choice_word`]):
    /// for each choice, the way that the job's first node uses in this
    /// call where it has measured that choice (its [`LEARNED`] bit), else
    /// this node's own. The nodes take the same ways (a call later than the
    /// first node) because each node's ways change the others' calls: its
    /// ranks' single copies land in their buffers, and the timing of its
    /// chunks sets when they can scatter theirs. The first node wrote its
    /// word for this call in its previous call, just after it sent its
    /// chunks of that call, which this node has received (it is in this
    /// call); the first node's rank may not have stored it yet, and where
    /// the two nodes exchange nothing the word may be a call older or
    /// newer, which costs speed only (each node's own word keeps its ranks
    /// alike).
    fn next_choice_word(&self) -> u64 {
        let [a, b] = self.choice.learned();
        let own = self.choice.word() | (u64::from(a) | u64::from(b) << 1) << LEARNED;
        // Where this call measured no way, the next one likely measures
        // none either and takes no way from the word: no remote atomic
        // (through a transport, a round trip per call).
        let once = self.plan.as_ref().is_some_and(|p| self.measures_once(p));
        if self.ctx.node() == 0 || !(once || self.stream_measured) {
            return own;
        }
        let first = self.ctx.node_ranks(0).start;
        let at = Remote::new(first, self.segment, self.choice_at(self.calls));
        // Where node 0 could not be read, this node goes its own way.
        let theirs = self
            .ctx
            .atomic_fetch_add(at, 0, Timeout::Block)
            .unwrap_or(0);
        let taken = theirs >> LEARNED & 0b11;
        (own & !taken) | (theirs & (taken | taken << LEARNED))
    }

    /// Whether the call in progress, planned as `p`, has its way of single
    /// copies measured: by default, with private results, where some piece
    /// may go in one copy (inside the node, or into an offered buffer).
    fn measures_once(&self, p: &AlltoallvPlan) -> bool {
        self.measured && self.private && (self.has_single(p) || self.has_offered(p))
    }

    /// Whether a call planned as `p` has a piece between two ranks of this
    /// node that may go in one copy (none where the node copies nothing
    /// once: [`Alltoallv::single_copy`]).
    fn has_single(&self, p: &AlltoallvPlan) -> bool {
        let ranks = p.layout.node_ranks(self.ctx.node());
        ranks
            .clone()
            .any(|s| ranks.clone().any(|t| self.single(p, s, t)))
    }

    /// Unknown sizes: the word index of count matrix `parity` (row `s`,
    /// column `t` at `s * ranks + t` from there).
    fn matrix_at(&self, parity: usize) -> usize {
        let n = self.ctx.num_ranks() as usize;
        Self::control_bytes(self.ctx) / 8 + parity * n * n
    }

    fn block_elems(ctx: &Context, options: AlltoallvOptions) -> usize {
        let bytes = ctx
            .engine
            .block_bytes(options.block_bytes, AlltoallvOptions::DEFAULT_BLOCK_BYTES);
        (bytes / std::mem::size_of::<T>().max(1)).max(1)
    }

    fn create_window(
        ctx: &Context,
        segment: SegmentId,
        bytes: usize,
        table: usize,
        timeout: Timeout,
    ) -> Result<Window> {
        let table = u32::try_from(table).map_err(|_| {
            Error::InvalidArgument(format!("an alltoallv needing {table} notification ids"))
        })?;
        let opts = WindowOptions::default().notifications(table);
        ctx.window_create_with(segment, bytes.max(1), GroupId::ALL, opts, timeout)
    }

    /// The plan of every call (fixed counts), or of the last call (sizes
    /// unknown in advance; `None` before the first).
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let a = Alltoallv::<u8>::new(&ctx, 0, &vec![1; n * n], Timeout::Block)?;
    /// let p = a.plan().unwrap();
    /// // One message per node pair instead of one per rank pair.
    /// assert!(p.inter_node_messages() <= p.flat_inter_node_messages());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn plan(&self) -> Option<&AlltoallvPlan> {
        self.plan.as_ref()
    }

    /// Whether every rank of this node can read the others' memory, so
    /// that [`Alltoallv::run_into`] copies large pieces between them once
    /// (see [`AlltoallvOptions::single_copy_min`]); decided when the
    /// alltoallv was made, the same on every rank of the node.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let off = AlltoallvOptions { single_copy_min: Some(usize::MAX), ..Default::default() };
    /// let a = Alltoallv::<u8>::alltoall(&ctx, 0, 1, off, Timeout::Block)?;
    /// assert!(!a.single_copy());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn single_copy(&self) -> bool {
        self.once_min != usize::MAX
    }

    /// Testing aid, not part of the API (it may change in any release):
    /// `hook(t, written)` runs on this rank just before (`written` false)
    /// and just after (true) each write of one of its pieces straight into
    /// the offered receive buffer of rank `t` of another node (see
    /// [`AlltoallvOptions::single_copy_min`]), while this rank holds a
    /// writer's place in that offer, so that the receiver's call cannot
    /// return in between. While a hook is set, this rank waits for the
    /// offers of its calls' receivers as long as the call's deadline
    /// allows, not only briefly, so that a test knows which pieces take
    /// that way. For tests of a call that fails while ranks of other
    /// nodes write into its buffer.
    ///
    /// ```no_run
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let counts = vec![4096; (ctx.num_ranks() as usize).pow(2)];
    /// let mut a = Alltoallv::<u64>::new(&ctx, 1, &counts, Timeout::Block)?;
    /// a.testing_around_writes(|t, written| println!("into rank {t}: written {written}"));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn testing_around_writes(&mut self, hook: impl Fn(Rank, bool) + Send + Sync + 'a) {
        self.around_writes = Some(AroundCopies(Box::new(hook)));
    }

    /// Testing aid, not part of the API (it may change in any release):
    /// `hook(s, read)` runs on this rank just before (`read` false) and
    /// just after (true) each read of one of its pieces straight out of
    /// the send buffer of rank `s` of its node (see
    /// [`AlltoallvOptions::single_copy_min`]), while this rank is counted
    /// among that buffer's readers, so that `s`'s call cannot return in
    /// between; a read found the buffer taken back (`s`'s call failed)
    /// if the second run does not come. While a hook is set, this rank
    /// waits for its node's ranks to announce their calls as long as the
    /// call's deadline allows, not only briefly, so that a test knows
    /// which pieces take that way. For tests of a call that fails while
    /// ranks of its node read out of its buffer.
    ///
    /// ```no_run
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let counts = vec![4096; (ctx.num_ranks() as usize).pow(2)];
    /// let mut a = Alltoallv::<u64>::new(&ctx, 1, &counts, Timeout::Block)?;
    /// a.testing_around_reads(|s, read| println!("out of rank {s}: read {read}"));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn testing_around_reads(&mut self, hook: impl Fn(Rank, bool) + Send + Sync + 'a) {
        self.around_reads = Some(AroundCopies(Box::new(hook)));
    }

    /// Test aid: `times(call, [once, streaming])` is taken for the time of
    /// each call that this rank times for its node's measurements (the
    /// node's first rank, in calls whose ways are measured: see
    /// [`AlltoallvOptions::single_copy_min`] and
    /// [`AlltoallvOptions::stream_stores`]), given the ways the call took,
    /// instead of the time it took. For tests of which ways the nodes
    /// choose; [`Alltoallv::testing_ways`] says which they took.
    ///
    /// ```no_run
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # use std::time::Duration;
    /// # let ctx = Context::init(Config::default())?;
    /// # let counts = vec![1 << 17; (ctx.num_ranks() as usize).pow(2)];
    /// let mut a = Alltoallv::<u64>::new(&ctx, 1, &counts, Timeout::Block)?;
    /// // Streaming stores seem twice as fast.
    /// a.testing_call_times(|_, [_, streaming]| Duration::from_millis(2 - streaming as u64));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn testing_call_times(
        &mut self,
        times: impl Fn(u64, [bool; 2]) -> std::time::Duration + Send + Sync + 'a,
    ) {
        self.call_times = Some(CallTimes(Box::new(times)));
    }

    /// Test aid: the ways the last call took, `[once, streaming]`: whether
    /// it copied large pieces inside the node once, whether its stores
    /// into the windows and the caller's buffer streamed.
    #[doc(hidden)]
    pub fn testing_ways(&self) -> [bool; 2] {
        [self.once, self.streaming]
    }

    /// The segment id of the node windows.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let a = Alltoallv::<u8>::alltoall(&ctx, 7, 1, Default::default(), Timeout::Block)?;
    /// assert_eq!(a.segment(), 7);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment(&self) -> SegmentId {
        self.segment
    }

    /// What `source` sent this rank in the last call, in place in the
    /// node's window (valid until this rank calls again).
    /// [`Error::InvalidRank`] for a rank that does not exist;
    /// [`Error::InvalidArgument`] after a [`Alltoallv::run_into`] whose
    /// piece from `source` went straight into the caller's buffer: this
    /// rank's own piece always, large pieces from the ranks of its node
    /// and from ranks of other nodes where they went in one copy (see
    /// [`AlltoallvOptions::single_copy_min`]).
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 0, 1, Default::default(), Timeout::Block)?;
    /// let send: Vec<u64> = (0..n as u64).map(|t| 100 * ctx.rank() as u64 + t).collect();
    /// a.run(&send, &vec![1; n], Timeout::Block)?;
    /// assert_eq!(a.received(0)?.get(0), ctx.rank() as u64);
    /// assert!(a.received(n as u16).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn received(&self, source: Rank) -> Result<SegmentView<T>> {
        self.ctx.engine.check_rank(source)?;
        let me = self.ctx.rank() as usize;
        let view = self.window.view::<T>();
        Ok(match &self.plan {
            Some(_)
                if self
                    .pulled_from
                    .get(source as usize)
                    .copied()
                    .unwrap_or(false) =>
            {
                return Err(Error::InvalidArgument(format!(
                    "rank {source}'s piece went straight into the buffer of the last \
                     run_into (single copy), not through the window"
                )));
            }
            Some(p) => {
                let at = self.area(self.ctx.node(), self.last) + p.recv_at(source as usize, me);
                view.sub(at..at + p.count(source as usize, me))
            }
            None => view.sub(0..0),
        })
    }

    /// How many elements this rank received from each rank in the last
    /// call (all zero before the first call with unknown sizes).
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let a = Alltoallv::<u8>::alltoall(&ctx, 0, 3, Default::default(), Timeout::Block)?;
    /// assert_eq!(a.recv_counts(), vec![3; n]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn recv_counts(&self) -> Vec<usize> {
        let (n, me) = (self.ctx.num_ranks() as usize, self.ctx.rank() as usize);
        match &self.plan {
            Some(p) => (0..n).map(|s| p.count(s, me)).collect(),
            None => vec![0; n],
        }
    }

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
    /// ([`AlltoallvOptions::single_copy_min`]); so until the call has
    /// returned `Ok`, a call retried after a timeout must be given the same
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

    /// Where this rank's piece for `target` of its next call lies in the
    /// node's window, to be written there by the caller and sent by
    /// [`Alltoallv::run_in_window`], which copies nothing in: a piece for
    /// another node's rank lies at its place in the node's staging area, a
    /// piece for a rank of this node (this rank included) at its place in
    /// the receive area, where its receiver finds it
    /// ([`Alltoallv::received`]).
    ///
    /// The places alternate between two copies by the parity of the call,
    /// and each is this rank's alone: what is written for one call stays
    /// for the call after next (unless a call of [`Alltoallv::run`] or
    /// [`Alltoallv::run_into`] in between copied its send buffer there),
    /// so that a piece that does not change is written once per parity.
    /// Valid from when the previous call has returned (before the first,
    /// at once) until the next call starts. Fixed counts only: with sizes
    /// unknown in advance the places are known only inside a call
    /// ([`Error::InvalidArgument`]); [`Error::InvalidArgument`] too while
    /// a call that timed out is unfinished, and [`Error::InvalidRank`] for
    /// a rank that does not exist.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u64);
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 0, 2, Default::default(), Timeout::Block)?;
    /// for t in 0..n as u16 {
    ///     // Rank `me`'s two elements for rank t, made in place.
    ///     a.outgoing(t)?.copy_from_slice(0, &[me, t as u64]);
    /// }
    /// a.run_in_window(Timeout::Block)?;
    /// assert_eq!(a.received(0)?.to_vec(), [0, me]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn outgoing(&self, target: Rank) -> Result<SegmentView<T>> {
        self.ctx.engine.check_rank(target)?;
        let (p, me) = (self.window_plan()?, self.ctx.rank() as usize);
        let t = target as usize;
        let at = match p.stage_at(me, t) {
            Some(staged) => staged,
            None => p.recv_at(me, t),
        };
        let at = self.area(self.ctx.node(), (self.calls % 2) as usize) + at;
        Ok(self.window.view::<T>().sub(at..at + p.count(me, t)))
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

    /// The plan of a call whose pieces the caller writes into the window:
    /// fixed counts, no call unfinished.
    fn window_plan(&self) -> Result<&AlltoallvPlan> {
        if self.phase.is_some() {
            return Err(Error::InvalidArgument(
                "a call of this alltoallv timed out and is unfinished: call it again first".into(),
            ));
        }
        self.window_plan_for_call()
    }

    /// The plan of an in-window call: fixed counts.
    fn window_plan_for_call(&self) -> Result<&AlltoallvPlan> {
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
            self.private = recv.is_some();
            self.pull = false;
            self.own_direct = false;
            self.pulled_from.clear();
            self.pulled_into = None;
            (self.offer_made, self.offered) = (false, None);
            self.stream_measured = self.options.stream_stores.is_none()
                && total.saturating_mul(std::mem::size_of::<T>()) >= STREAM_MIN_BYTES;
            let measures = (self.measured && recv.is_some()) || self.stream_measured;
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
                self.last = (call % 2) as usize;
                self.calls += 1;
                let p = self.plan.as_ref().expect("a completed call has a plan");
                let total: usize = (0..n).map(|s| p.count(s, me)).sum();
                // Only the node's first rank times calls (`timed`).
                let measured = timed.map(|t| (t, [self.measures_once(p), self.stream_measured]));
                let ways = [self.once_way, self.streaming];
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
    fn place_recv(&mut self, len: usize) -> Result<()> {
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
                copy_slice_with(dst, src, self.streaming);
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
        let base = self.area(self.ctx.node(), self.last);
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
            let (start, at) = (p.recv_at(s, me), self.recv_at[s]);
            let mut len = p.count(s, me);
            s += 1;
            while s < n && left(s) && p.recv_at(s, me) == start + len && self.recv_at[s] == at + len
            {
                len += p.count(s, me);
                s += 1;
            }
            view.copy_to_slice_with(base + start, &mut recv[at..at + len], self.streaming);
        }
    }

    /// Announce this call: the buffers this rank sends from and receives
    /// into, where its pieces for and from this node's ranks lie in them
    /// ([`Alltoallv::place_word`]), and whether it reads its large pieces
    /// from this node's ranks itself (`pull`: then `recv` holds them at
    /// `Alltoallv::recv_at`).
    fn announce(&mut self, send: &[T], recv: Option<&[T]>, pull: bool) {
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
    fn announce_send(&self, send: &[T]) {
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
    fn withdrawn(&self) -> u64 {
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
    fn withdraw(&self, send: &[T], send_counts: &[usize]) {
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
            self.stage(send, send_counts, Staged::Read, (self.calls % 2) as usize);
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
    fn decide(&self, send: &[T], deadline: Deadline) -> Result<()> {
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
    /// lie 1 to 31 bytes past its source's offset within a 4 KiB page, or
    /// the kernel's copy is not slow there. The kernel copies with `rep
    /// movsb`, which on an AMD EPYC VM runs 20-30 times slower at such
    /// offsets (see `engine::memcopy`), and on an Intel Xeon VM 1.1 times:
    /// each process measures which
    /// ([`crate::sys::cross_copy_offsets_slow`]), and where it is slow
    /// those pieces go through the window. (Buffers at such offsets are
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
    fn pull_pieces(&mut self, recv: &mut [T], deadline: Deadline) -> Result<()> {
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

    /// The rank of node `node` this rank writes to: the same local rank,
    /// or fewer if the node has fewer ranks.
    fn peer(&self, node: usize) -> Rank {
        let ranks = self.ctx.node_ranks(node);
        let local = self.ctx.local_rank() as usize % ranks.len();
        ranks.start + local as Rank
    }

    /// Run the call's phases from `phase` on, updating it as they finish.
    /// `Ok(Some(e))`: the call ended on every rank with error `e` (unknown
    /// sizes beyond the capacity).
    fn advance(
        &mut self,
        phase: &mut Phase,
        send: &[T],
        send_counts: &[usize],
        mut recv: Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<Option<Error>> {
        let ctx = self.ctx;
        let (node, nodes) = (ctx.node(), ctx.num_nodes());
        let (local, local_num) = (ctx.local_rank() as usize, ctx.local_num() as usize);
        let tag = super::call_tag(self.calls);
        let parity = (self.calls % 2) as usize;
        // What each rank's progress word says in this call: rows written,
        // pieces staged, pieces for the node placed and pieces read out of
        // the node's send buffers (see `publish`).
        let calls = self.calls;
        let step = |j: u64| 3 * calls + j;
        loop {
            match *phase {
                Phase::Start => {
                    if let Sizes::Unknown { .. } = self.sizes {
                        self.write_row(parity, send_counts);
                        self.publish(step(1));
                        *phase = Phase::Rows;
                    } else {
                        *phase = Phase::Opening { next: 0 };
                    }
                }
                Phase::Rows => {
                    self.gather(step(1), deadline)?;
                    *phase = Phase::Opening { next: 0 };
                }
                Phase::Opening { next } => {
                    // Fixed: a credit to each node that sends here. Unknown:
                    // this node's count rows to every node. Shared out: the
                    // k-th such message is local rank k's (mod the node's).
                    let targets: Vec<usize> = match self.sizes {
                        // The first two calls use copies never written.
                        Sizes::Fixed if self.calls < 2 => Vec::new(),
                        Sizes::Fixed => {
                            let p = self.plan().expect("fixed");
                            p.senders_to(node)
                                .filter(|&m| p.needs_credit(m, node))
                                .collect()
                        }
                        Sizes::Unknown { .. } => (1..nodes).map(|k| (node + k) % nodes).collect(),
                    };
                    for (k, &to) in targets.iter().enumerate().skip(next) {
                        if k % local_num != local {
                            continue;
                        }
                        *phase = Phase::Opening { next: k };
                        self.open_to(to, parity, tag, deadline)?;
                    }
                    *phase = match self.sizes {
                        Sizes::Fixed => Phase::Staging,
                        Sizes::Unknown { .. } => Phase::Counting,
                    };
                }
                Phase::Counting => {
                    if let Err(refused) = self.count(parity, deadline)? {
                        // Every rank ends here alike; the words still say
                        // this call is over.
                        self.publish(step(3));
                        return Ok(Some(refused));
                    }
                    *phase = Phase::Staging;
                }
                Phase::Staging => {
                    // Where the pieces go in `recv`, if it holds them.
                    let fits = recv
                        .as_ref()
                        .is_some_and(|r| self.place_recv(r.len()).is_ok());
                    // Measured: every rank of the node picks alike.
                    let word = self.choice_word(self.calls).load(SeqCst);
                    let [once, streaming] = self.choice.pick(self.calls, word);
                    self.once_way = once || !self.measured;
                    if !self.offer_made {
                        self.offer(tag, recv.as_deref(), fits, self.once_way);
                    }
                    self.streaming = match self.options.stream_stores {
                        Some(fixed) => fixed,
                        None => self.stream_measured && streaming,
                    };
                    // First what goes straight to other nodes (it may wait
                    // for credits: a call resumed redoes only this).
                    self.write_direct(send, send_counts, parity, deadline)?;
                    let p = self.plan.as_ref().expect("planned");
                    let once = self.has_single(p) && self.once_way;
                    // (In the window there is no `recv`: nothing to read.)
                    (self.once, self.own_direct) = (once, fits);
                    if self.once {
                        self.announce(send, recv.as_deref(), fits);
                    }
                    if !self.in_window {
                        self.stage(send, send_counts, Staged::Out, parity);
                    }
                    self.publish(step(2));
                    self.stagings += 1;
                    let p = self.plan().expect("planned");
                    let elem = std::mem::size_of::<T>();
                    let outgoing = self.staged_len.saturating_mul(elem);
                    *phase = if outgoing <= self.options.one_sender_max {
                        // The node's last rank to stage sends it all, at
                        // once: nobody waits for the others to stage.
                        let arrived = self.staged_count().fetch_add(1, SeqCst) + 1;
                        let last = arrived == self.stagings * local_num as u64;
                        let all = if last { p.chunks(node).len() } else { 0 };
                        Phase::Sending {
                            next: 0,
                            end: all,
                            wait: false,
                        }
                    } else {
                        let share = p.sends(ctx.rank() as usize);
                        Phase::Sending {
                            next: share.start,
                            end: share.end,
                            wait: true,
                        }
                    };
                }
                Phase::Sending { next, end, wait } => {
                    let p = self.plan.as_ref().expect("planned");
                    if wait && next < end {
                        // A chunk holds pieces of every local rank.
                        self.gather(step(2), deadline)?;
                    }
                    for i in next..end {
                        *phase = Phase::Sending { next: i, end, wait };
                        let c = p.chunks(node)[i];
                        self.send_chunk(p, &c, parity, deadline)?;
                    }
                    // The pieces for this node's ranks, while chunks travel.
                    if self.once {
                        self.decide(send, deadline)?;
                    }
                    if !self.in_window {
                        self.stage(send, send_counts, Staged::Node, parity);
                    }
                    if local == 0 {
                        let word = self.next_choice_word();
                        self.choice_word(self.calls + 1).store(word, SeqCst);
                    }
                    *phase = Phase::Reading;
                }
                Phase::Reading => {
                    if let (true, Some(recv)) = (self.pull, recv.as_deref_mut()) {
                        self.pull_pieces(recv, deadline)?;
                    }
                    // Placed and read: this rank's pieces for its node's
                    // ranks are in place (or announced for them to read),
                    // and it reads nothing more out of its node's send
                    // buffers in this call.
                    self.publish(step(3));
                    *phase = Phase::Receiving;
                }
                Phase::Receiving => {
                    let expect = self.plan().expect("planned").in_chunks(node);
                    if expect > 0 {
                        let first = self.chunk_ids(node, parity) as u32;
                        let ids = first..first + expect as u32;
                        let until = self.claimed + expect as u64;
                        while let Some((_, v)) = ctx.notify_claim_until(
                            self.segment,
                            ids.clone(),
                            until,
                            deadline.timeout(),
                        )? {
                            debug_assert_eq!(v, tag);
                        }
                    }
                    // Sends complete locally before staging is rewritten
                    // (in the call after next, once every rank of the node
                    // has said it reached a step of the next call).
                    ctx.wait(self.options.queue, Timeout::Block)?;
                    self.claimed += expect as u64;
                    *phase = Phase::Closing;
                }
                Phase::Closing => {
                    // Every piece for this rank is in place once its node's
                    // chunks have come (this rank's claims saw them all) and
                    // every local rank has placed its pieces, and every send
                    // buffer of the node may go once every local rank has
                    // read what it reads out of them (single copies): no
                    // need to wait for the others to see the chunks too (a
                    // hand-off of the cores each, where ranks share them).
                    self.gather(step(3), deadline)?;
                    return Ok(None);
                }
            }
        }
    }

    /// Word `k` of local rank `local`'s control line (see [`PROGRESS`]).
    fn line(&self, local: usize, k: usize) -> &AtomicU64 {
        control_word(&self.control, local, k)
    }

    /// Wake the node's ranks waiting on a control line.
    fn wake(&self) {
        self.window.object().notifications().ww.wake();
    }

    /// [`await_control`] on this alltoallv's control lines.
    fn await_words<const K: usize>(
        &self,
        locals: std::ops::Range<usize>,
        at_least: u64,
        deadline: Deadline,
    ) -> Result<()> {
        let lines = (&self.window, &self.control);
        await_control::<K>(self.ctx, lines, locals, at_least, deadline)
    }

    /// [`Alltoallv::await_words`] for every local rank.
    fn await_lines<const K: usize>(&self, at_least: u64, deadline: Deadline) -> Result<()> {
        self.await_words::<K>(0..self.ctx.local_num() as usize, at_least, deadline)
    }

    /// Say that this rank has reached `step` of its calls (`3 * call + j`:
    /// 1 its row of counts written, 2 its pieces staged, 3 its pieces for
    /// its node's ranks placed and its reads out of its node's send
    /// buffers done), and wake the node's waiters. A rank reaches a step
    /// of a call only after it is done with the previous call (its claims
    /// and sends included), so a word at a step also says that.
    fn publish(&self, step: u64) {
        self.line(self.ctx.local_rank() as usize, PROGRESS)
            .store(step, SeqCst);
        self.wake();
    }

    /// Wait until every rank of the node has reached `step`.
    fn gather(&self, step: u64, deadline: Deadline) -> Result<()> {
        self.await_lines::<PROGRESS>(step, deadline)
    }

    /// Copy this rank's pieces from `send` into copy `parity` of the data
    /// area: those for other nodes into the staging area (`Staged::Out`),
    /// or those for this node's ranks into the receive area
    /// (`Staged::Node`), but those that their receivers read themselves,
    /// or only those (`Staged::Read`: a call that failed moves them, see
    /// [`Alltoallv::withdraw`]).
    fn stage(&self, send: &[T], send_counts: &[usize], which: Staged, parity: usize) {
        let p = self.plan.as_ref().expect("planned");
        let (me, local) = (self.ctx.rank() as usize, self.ctx.local_rank() as usize);
        let first = p.layout.node_ranks(p.layout.node_of(me)).start;
        let base = self.area(self.ctx.node(), parity);
        let view = self.window.view::<T>();
        // Whether `t` reads this rank's piece for it out of `send` itself.
        let read = |t: usize| self.once && self.single(p, me, t) && !self.pushes(local, t - first);
        for (t, &c) in send_counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let to = match (p.stage_at(me, t), which) {
                (Some(_), Staged::Out) if self.direct_to[p.layout.node_of(t)] => continue,
                (Some(staged), Staged::Out) => staged,
                (None, Staged::Node) if t == me && self.own_direct => continue,
                (None, Staged::Node) if read(t) => continue,
                (None, Staged::Node) => p.recv_at(me, t),
                (None, Staged::Read) if read(t) => p.recv_at(me, t),
                _ => continue,
            };
            let piece = &send[self.send_at[t]..self.send_at[t] + c];
            view.copy_from_slice_with(base + to, piece, self.streaming);
        }
    }

    /// Write chunk `c` of plan `p` from and to copy `parity` of the data
    /// areas, with its notification (the call's tag).
    fn send_chunk(
        &self,
        p: &AlltoallvPlan,
        c: &Chunk,
        parity: usize,
        deadline: Deadline,
    ) -> Result<()> {
        self.await_credit(p, c.to, deadline)?;
        self.post_chunk(p, c, parity, super::call_tag(self.calls), deadline)
    }

    /// From the third call on, node `to`'s credit for this call (or a
    /// later one) to write into its receive area, unless its chunks of the
    /// previous call said it.
    fn await_credit(&self, p: &AlltoallvPlan, to: usize, deadline: Deadline) -> Result<()> {
        let node = self.ctx.node();
        if let (Sizes::Fixed, 2..) = (self.sizes, self.calls) {
            if p.needs_credit(node, to) {
                let credit = (2 * p.in_chunks(node) + to) as u32;
                let tag = super::call_tag(self.calls);
                self.ctx
                    .await_notification_tag(self.segment, credit, tag, deadline)?;
            }
        }
        Ok(())
    }

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
    fn offer(&mut self, tag: u32, recv: Option<&[T]>, fits: bool, now: bool) {
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
    fn has_offered(&self, p: &AlltoallvPlan) -> bool {
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
    fn revoke(&self) {
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
    /// not look for [`WINDOW_CALLS`] calls after `t` offered nothing. The
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
        if self.calls < window_until
            || self.push_failed.load(Relaxed)
            || piece.len() < self.single_min()
            || ctx.writes_from_memory_to(rank) != PutFrom::Mapped
        {
            return Ok(false);
        }
        let lt = t - p.layout.node_ranks(p.layout.node_of(t)).start;
        let at = |k: usize| Remote::new(rank, self.segment, self.offer_at(lt, k));
        let fetch = |k: usize| ctx.atomic_fetch_add(at(k), 0, Timeout::Block);
        let tag = u64::from(super::call_tag(self.calls));
        // The previous call's tag: `t` has not started this call yet, and
        // offered nothing in that one. (Before the first call the word
        // holds no tag, 0: `t` may yet offer.)
        let before = (self.calls.checked_sub(1)).map(|c| u64::from(super::call_tag(c)));
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
    fn write_direct(
        &self,
        send: &[T],
        send_counts: &[usize],
        parity: usize,
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
            let place = |t: usize| (self.area(to, parity) + p.recv_at(me, t)) * elem;
            if self.in_window {
                for (t, &c) in ranks.zip(counts).filter(|&(_, &c)| c > 0) {
                    let staged = p
                        .stage_at(me, t)
                        .expect("a piece for another node is staged");
                    let here = Local::new(self.segment, (self.area(node, parity) + staged) * elem);
                    let remote = Remote::new(self.peer(to), self.segment, place(t));
                    let queue = self.options.queue;
                    super::with_room(self.ctx, queue, deadline, || {
                        self.ctx
                            .write(here, remote, c * elem, queue, Timeout::Block)
                    })?;
                }
                posted = true;
            } else {
                // One call per node: the engine completes them together.
                // Pieces whose receivers offered their buffers go there.
                let mut pieces = Vec::with_capacity(counts.len());
                for (t, &c) in ranks.zip(counts).filter(|&(_, &c)| c > 0) {
                    let from = self.send_at[t];
                    let piece: &[u8] = bytemuck::cast_slice(&send[from..from + c]);
                    if !self.push_into(p, t, piece, deadline)? {
                        pieces.push((piece, place(t)));
                    }
                }
                if !pieces.is_empty() {
                    self.ctx.write_from_memory(
                        self.peer(to),
                        self.segment,
                        &pieces,
                        self.streaming,
                    )?;
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

    /// Post chunk `c` (see `send_chunk`).
    fn post_chunk(
        &self,
        p: &AlltoallvPlan,
        c: &Chunk,
        parity: usize,
        tag: u32,
        deadline: Deadline,
    ) -> Result<()> {
        let elem = std::mem::size_of::<T>();
        let (from, to) = p.chunk_at(c);
        let from = (self.area(self.ctx.node(), parity) + from) * elem;
        let to = (self.area(c.to, parity) + to) * elem;
        // A section written unstaged: only the notification.
        let len = if self.direct_to[c.to] {
            0
        } else {
            c.len * elem
        };
        super::post(
            self.ctx,
            self.segment,
            self.options.queue,
            self.peer(c.to),
            (from, to, len),
            Notification::new((self.chunk_ids(c.to, parity) + c.id) as u32, tag),
            deadline,
        )
    }

    /// Fixed counts: node `to` may write here (a credit). Unknown sizes:
    /// this node's rows of count matrix `parity` to node `to`.
    fn open_to(&self, to: usize, parity: usize, tag: u32, deadline: Deadline) -> Result<()> {
        let (ctx, node) = (self.ctx, self.ctx.node());
        let (id, bytes) = match self.sizes {
            Sizes::Fixed => {
                let id = 2 * self.plan().expect("fixed").in_chunks(to) + node;
                (id, (0, 0, 0))
            }
            Sizes::Unknown { data_ids, .. } => {
                let n = ctx.num_ranks() as usize;
                let rows = ctx.node_ranks(node);
                let at = 8 * (self.matrix_at(parity) + rows.start as usize * n);
                (
                    data_ids + parity * ctx.num_nodes() + node,
                    (at, at, 8 * rows.len() * n),
                )
            }
        };
        super::post(
            ctx,
            self.segment,
            self.options.queue,
            self.peer(to),
            bytes,
            Notification::new(id as u32, tag),
            deadline,
        )
    }

    /// Unknown sizes: this rank's row of count matrix `parity`.
    fn write_row(&self, parity: usize, send_counts: &[usize]) {
        let n = send_counts.len();
        let me = self.ctx.rank() as usize;
        let row: Vec<u64> = send_counts.iter().map(|&c| c as u64).collect();
        self.control
            .copy_from_slice(self.matrix_at(parity) + me * n, &row);
    }

    /// Unknown sizes: wait for every other node's count rows, then plan the
    /// call from the whole matrix. Every rank computes the same plan, so a
    /// capacity exceeded ends the call on all alike (`Ok(Err(_))`).
    fn count(&mut self, parity: usize, deadline: Deadline) -> Result<Result<()>> {
        let Sizes::Unknown {
            capacity, data_ids, ..
        } = self.sizes
        else {
            return Ok(Ok(()));
        };
        let ctx = self.ctx;
        let (n, nodes) = (ctx.num_ranks() as usize, ctx.num_nodes());
        if nodes > 1 {
            let first = (data_ids + parity * nodes) as u32;
            let until = self.claimed + nodes as u64 - 1;
            while ctx
                .notify_claim_until(
                    self.segment,
                    first..first + nodes as u32,
                    until,
                    deadline.timeout(),
                )?
                .is_some()
            {}
            self.claimed = until;
        }
        let mut matrix = vec![0u64; n * n];
        self.control
            .copy_to_slice(self.matrix_at(parity), &mut matrix);
        let counts: Vec<usize> = matrix.iter().map(|&c| c as usize).collect();
        let elem = std::mem::size_of::<T>().max(1);
        let block = Self::block_elems(ctx, self.options);
        let plan = AlltoallvPlan::new(Layout::of(ctx), &counts, elem, block, data_ids);
        let over = |what: &str, r: usize, total: usize| {
            Error::InvalidArgument(format!(
                "rank {r} {what} {total} elements in this call, the alltoallv's capacity is {capacity}"
            ))
        };
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => return Ok(Err(e)),
        };
        for r in 0..n {
            let sent: usize = (0..n).map(|t| plan.count(r, t)).sum();
            let got: usize = (0..n).map(|s| plan.count(s, r)).sum();
            if sent > capacity {
                return Ok(Err(over("sends", r, sent)));
            }
            if got > capacity {
                return Ok(Err(over("receives", r, got)));
            }
        }
        self.plan = Some(plan);
        self.plan_direct();
        Ok(Ok(()))
    }
}

impl<T> Drop for Alltoallv<'_, T> {
    /// Deletes this rank's window segment, once its queue is done. When a
    /// call returns, every chunk for this node has arrived, so no more
    /// writes come in (after a call given up, see
    /// [`Context::segment_create`] for why a new one is still safe).
    fn drop(&mut self) {
        super::release(self.ctx, self.segment, self.options.queue);
    }
}
