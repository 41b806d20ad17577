//! Allgatherv as a pipelined ring over nodes with node-shared windows and
//! shared notifications (Al Ahad et al. 2018, section II, algorithm 1).
//!
//! The result lives in a node-shared window: every rank of a node reads it
//! in place, nobody copies it at the end ([`Allgatherv::run`]);
//! [`Allgatherv::run_into`] also copies it into a private buffer, which
//! costs one read of the whole result per rank: on one node, each block
//! as soon as its rank has copied it in (step 3); with several nodes, the
//! node's own blocks once the rank has sent its share (while the first
//! blocks of other nodes are on their way), the others when all have
//! come; adjacent blocks in one piece.
//!
//! One call, on every rank:
//! 1. the rank says in its opening word (in its control line, after the
//!    result areas) that it has entered the call, and waits until every
//!    rank of the node has: nobody of the node still reads the previous
//!    result (a barrier of this collective's own, like step 3's wait).
//!    The node's first rank tells the previous node that this node is
//!    ready (a "credit" notification, instead of a global barrier). For
//!    results of up to 256 KiB, calls take turns between two result areas
//!    (each with its block ids and credit) instead, and this wait is left
//!    out (see `Allgatherv::area`);
//! 2. local allgatherv: the rank copies its contribution into the window
//!    (on a job of one node, block by block, counting them in its
//!    progress word), with ordinary or, in the calls with a private result
//!    whose timing says so, non-temporal stores (see
//!    `Allgatherv::streaming`);
//! 3. the rank says so in its copied word (in its control line) and
//!    waits until every rank of the node has:
//!    the node's data is all in the window (a wait of this collective's
//!    own, so that a given-up call of another leaves nothing in it). On a
//!    job of one node, a rank with a private result copies the others'
//!    blocks out as their progress words count them meanwhile, so that a
//!    rank that contributes much more than the others does not hold them
//!    up for the whole of its copy;
//! 4. once the next node's credit for this call has arrived, the rank
//!    writes its share of the node's blocks (see [`AllgathervPlan`]) with
//!    `write_notify` to the rank with the same local rank on the next node
//!    (formula 1), the block id as notification id. Where the node's ranks
//!    are all bound to one CPU, and elsewhere up to 64 KiB of the node's
//!    contributions, the node's last rank to copy its own in (a count in
//!    the window tells) writes all the node's blocks instead, and the
//!    others write none and say so at once, without the node's wait of
//!    step 3 first (`Allgatherv::one_sender`);
//! 5. every rank of the node claims blocks from the node's one table until
//!    the node has all blocks of other nodes, and forwards each block it
//!    claims to the next node unless that node is the block's own. Faster
//!    ranks claim, and so forward, more. Where a rank is bound to one CPU
//!    on which only ranks of its node may run, and those have sent their
//!    shares too ([`SENT`]), its claims spin instead of yielding: the
//!    blocks come from other CPUs, and a yield would only hand the CPU to
//!    a rank that hands it back (as the alltoallv's claims).
//!
//! Every block crosses every node boundary once: `blocks * (nodes - 1)`
//! inter-node writes per call, plus one credit per node
//! ([`AllgathervPlan::inter_node_messages`]).
//!
//! Between hosts of an engine whose transport has messages (the MPI
//! engine's, where its one-sided calls cross a network: over TCP a
//! notified write costs round trips that a message does not), steps 4 and
//! 5 are one message per pair of nodes instead ([`Messages`]): each node's
//! first rank sends its node's contributions to every other node's first
//! rank and takes theirs straight into the window (copying them into the
//! caller's buffer as they land); the node's other ranks copy what it
//! saw land as it lands (`run_into`) and wait for its word. No credits
//! are needed: a message lands only where its receiver asked for it. See
//! [`AllgathervOptions::messages`].
//!
//! Block ids are the window's notification ids. `mSize` is chosen from
//! the total so that the blocks fit the ids (at most
//! `NOTIFICATION_LIMIT - 1` blocks): the window's table has one id per
//! block, plus the credit. Calls reuse the window and the ids: every block
//! of a call is claimed before the call ends, and no node starts writing
//! the next call before its next node's credit, so calls cannot mix.

use super::agree::Shape;
use super::creation::Creation;
use super::memory::NodeMemory;
use super::plan::{AllgathervPlan, Layout};
use super::timed_choice::{CallTimes, ChoicePair};
use super::{await_control, control_word};
use crate::context::Context;
use crate::context::traffic::Op;
use crate::engine::lent::Lent;
use crate::error::{Error, Result};
use crate::extent;
use crate::segments::SegmentView;
use crate::types::{Deadline, GroupId, Notification, QueueId, Rank, SegmentId, Timeout};
use crate::windows::{Window, WindowOptions};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

/// Options of an [`Allgatherv`].
///
/// ```
/// use gaspi::{Allgatherv, AllgathervOptions, Config, Context, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let n = ctx.num_ranks() as usize;
/// // 4 KiB blocks (512 u64s) on queue 1.
/// let opts = AllgathervOptions { block_bytes: 4096, queue: 1, ..Default::default() };
/// let counts = vec![1000; n];
/// let displs = gaspi::plan::displacements(&counts);
/// let ag = Allgatherv::<u64>::with_options(&ctx, 0, &counts, &displs, opts, Timeout::Block)?;
/// assert_eq!(ag.plan().block_elems, 512);
/// // The default (0) is the engine's choice: 64 KiB inside a host.
/// drop(ag);
/// let ag = Allgatherv::<u64>::with_options(&ctx, 0, &counts, &displs, Default::default(), Timeout::Block)?;
/// assert_eq!(ag.plan().block_elems, AllgathervOptions::DEFAULT_BLOCK_BYTES / 8);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllgathervOptions {
    /// Target size of a block in bytes: smaller blocks pipeline sooner,
    /// larger ones cost fewer messages. 0 (the default): the engine's
    /// choice, [`AllgathervOptions::DEFAULT_BLOCK_BYTES`], or 1 MiB where
    /// blocks cross hosts on the MPI engine (each notified write there
    /// costs round trips: see the guide's MPI page).
    pub block_bytes: usize,
    /// The queue the collective posts on (default 0).
    pub queue: QueueId,
    /// Whether blocks cross hosts as one message per pair of nodes and
    /// call, among the nodes' first ranks, instead of the ring's notified
    /// writes: `None` (the default), the engine's choice: messages where
    /// the transport between hosts has them and its one-sided calls cross
    /// a network (the MPI engine between hosts that MPI sees; over TCP a
    /// notified write costs round trips a message does not). Only where
    /// every node's contributions lie side by side in the result; the
    /// same on every rank.
    pub messages: Option<bool>,
}

impl AllgathervOptions {
    /// The block size chosen for `block_bytes: 0` inside a host and on the
    /// native and GPI-2 engines: 64 KiB.
    pub const DEFAULT_BLOCK_BYTES: usize = 64 << 10;
}

/// The most bytes of results (of all the nodes' windows on one host: on
/// one machine with emulated nodes, all of them) for which calls take
/// turns between two result areas and leave out the wait before the
/// copies (step 1). That wait (a node barrier when this was measured)
/// costs 1-3 us of 2-40 us per call on 2 cores;
/// beyond this size the second area's lines, colder when a call comes
/// back to them, cost more than that. Measured on the 2-core Xeon VM
/// (2026-11-29, B/A against one area; `docs/guide/benchmarking.md`,
/// "Allgatherv: two result areas"): 0.50-0.83 up to 256 KiB of results
/// on one node, 0.80-0.89 on 2 and 4 nodes; 512 KiB on one node 0.76-0.87
/// read in place but 1.03-1.07 copied out; 4 nodes of 256 KiB copied out
/// 1.12-1.21.
const TWO_AREAS_MAX_BYTES: usize = 256 << 10;

/// The word of a rank's control line that counts the calls it has
/// entered (step 1, one area).
const OPENED: usize = 0;
/// The word of a rank's control line that counts the calls in which it
/// has copied its contribution into the window (step 3).
const COPIED: usize = 1;
/// The word of the first local rank's control line that counts the calls
/// whose blocks from other nodes it has taken, where they come as messages
/// ([`Messages`]).
const RECEIVED: usize = 2;
/// The word of a rank's control line that counts the blocks of its
/// contribution it has copied into the window in the call ([`landed_word`]:
/// the call's number above the count), on a job of one node: the node's
/// ranks with private results copy each block out as it lands instead of
/// waiting for the whole contribution ([`Allgatherv::copy_as_they_land`]).
const PROGRESS: usize = 3;
/// The word of a rank's control line that counts the calls in which it has
/// sent its share of the node's blocks (step 4; where one rank sends them
/// all, the others say so as soon as they know they are not that rank):
/// where every rank that may run on its CPU is of its node and has got
/// there too (`Allgatherv::core_idle`), a rank's claims spin.
const SENT: usize = 5;
/// The word of the first local rank's control line that counts the node's
/// ranks' copies into the window, in all calls, where one rank sends all
/// the node's blocks ([`Allgatherv::one_sender`]): the rank whose copy
/// makes the count whole is the node's last and sends them.
const COPIES: usize = 6;

/// The most bytes of a node's contributions that its last rank to copy
/// its own in sends alone ([`Allgatherv::one_sender`]) where the node's
/// ranks may run on several CPUs, as the alltoallv's
/// `AlltoallvOptions::DEFAULT_ONE_SENDER_MAX`: below it the others'
/// shares would cost more hand-offs of the CPUs than their copies take,
/// above it one CPU's stores into the next node's window take longer than
/// the shares' stores from several CPUs at once. Where the node's ranks
/// are all bound to one CPU, their shares would go one after the other
/// from that CPU anyway, and one rank sends them all whatever their size.
const ONE_SENDER_MAX_BYTES: usize = 64 << 10;
/// The word of the first local rank's control line that says which stores
/// the node's ranks put their contributions into the window and the blocks
/// into the next node's with, in the calls that measure it ([`ChoicePair::word`]: bit 0 set, non-temporal;
/// see `Allgatherv::streaming`), published by that rank.
const STREAM_CHOICE: usize = 4;

/// The smallest result (over all ranks) whose calls with a private result
/// measure which stores put the contributions into the window and write
/// the blocks into the next node's. Other ranks read each right after it
/// is put. An ordinary store leaves the line in the writer's cache and
/// must first take it from the caches of the ranks that read it in the
/// last call on this area; a non-temporal one sends it to memory. On the
/// project's AMD EPYC VM (2 cores, 4 ranks on one node) the first was the
/// faster where the two cores were near each other (a cache line's round
/// trip about 50 ns: 29 us against 34 at 64 KiB per rank) and 2.3x slower
/// where they were far (about 330 ns: 78 us against 34; 1 MiB per rank,
/// 1,230 against 516), a state that changes for stretches of minutes
/// (`docs/guide/benchmarking.md`, "The allgatherv's stores, chosen by
/// timing"). Below this size (the allreduce's, for the same reason) a
/// call's time says too little: at 8 KiB per rank the node's first rank
/// timed its calls faster streaming while the job ran slower, and took
/// each kind in turn. Results read in place take ordinary stores: a
/// reader that reads little of the result does not pay for the hand-off.
const STREAM_IN_MIN_BYTES: usize = 256 << 10;

/// The smallest result (over all ranks) whose copies into the caller's
/// buffer take non-temporal stores: such a copy outgrows the caches, and
/// streaming it to memory spares the reads of the lines it overwrites.
/// 4 ranks on one node, 2 cores, B (streaming) / A (ordinary), alternated
/// rounds: Intel Xeon VM (model 207, 2026-12-02) 0.66-0.97 at 16 MiB of
/// result (0.65 in 2 nodes of 2), 0.96-1.06 at 8 MiB, 0.99-1.07 at 4 MiB,
/// 1.05 at 1 MiB; another Xeon VM (2026-11-27) 0.88-0.92 at 16 MiB, 0.93
/// at 8 MiB, 0.99-1.12 at 4 MiB, 1.22-1.25 at 256 KiB-1 MiB
/// (benchmarking.md, "Larger results" and "The allgatherv's private
/// copies as the blocks land").
const STREAM_OUT_MIN_BYTES: usize = 16 << 20;

/// How many bytes of its contribution a rank copies into the window
/// between two wake-ups of the node's sleeping ranks ([`PROGRESS`]).
const PROGRESS_WAKE_BYTES: usize = 1 << 20;

/// Bits of a landed word ([`Allgatherv::exchange`]) that count elements;
/// the bits above hold the call's number (its low 16 bits). A window holds
/// far fewer than 2^48 elements.
const LANDED_BITS: u32 = 48;

/// A landed word: `landed` elements of a node's message in call `call`.
fn landed_word(call: u64, landed: usize) -> u64 {
    debug_assert!((landed as u64) < 1 << LANDED_BITS);
    (call << LANDED_BITS) | landed as u64
}

/// The elements a landed word counts for call `call` (0 if it is
/// another call's: the previous one's, not yet written over).
fn landed_in(word: u64, call: u64) -> usize {
    let tag_mask = u64::MAX >> LANDED_BITS;
    if (word >> LANDED_BITS) == (call & tag_mask) {
        (word & ((1 << LANDED_BITS) - 1)) as usize
    } else {
        0
    }
}

/// Where a call stopped (to resume after a timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Step 1: the node's ranks' wait before touching the window (one
    /// area).
    Start,
    /// Step 1 done: this call's credit, then step 2, the local copy.
    Opened,
    /// Step 2 done, step 3: the wait until the node's copies are done;
    /// then this rank sends blocks `first..end` (its share, all the node's
    /// blocks, or none: [`Allgatherv::one_sender`]).
    Copied { first: usize, end: usize },
    /// Step 4: waiting for the credit, then sending from block `next` to
    /// `end`.
    Sending { next: usize, end: usize },
    /// Step 5: claiming and forwarding.
    Receiving,
    /// Steps 4 and 5 as messages ([`Messages`]).
    Exchanging,
}

/// Blocks between hosts as messages: where the engine's transport between
/// hosts has keyed messages, each node's first rank sends its node's
/// contributions (side by side in the result) to every other node's first
/// rank as one message per call, and takes theirs straight into the
/// window; the node's other ranks copy what it saw land ([`landed_word`])
/// and wait for its word ([`RECEIVED`]). No
/// credits (a message lands only where its receiver asked, once its node
/// no longer reads that area) and no claims; the same bytes cross hosts
/// as on the ring (every node's data to every other node once), in
/// `nodes - 1` messages per node and call instead of a notified write per
/// block and node boundary.
#[derive(Debug)]
struct Messages {
    /// The object's number in the keys of its messages.
    id: u64,
    /// Each node's contributions in the result (elements), side by side;
    /// empty for a node that contributes nothing (no message).
    spans: Vec<Range<usize>>,
    mem: NodeMemory,
}

/// How far a node's message came in the call in progress, on the node's
/// first rank ([`Allgatherv::exchange`]), or how far a node's other rank
/// copied it ([`Allgatherv::follow`]).
#[derive(Clone, Copy, Debug, Default)]
struct Moved {
    /// Elements that landed and were copied into the caller's buffer (if
    /// there is one).
    landed: usize,
    /// Taken whole (this node's: sent to every other node).
    done: bool,
}

/// Each node's contributions as one range of the result, if every node's
/// lie side by side (in any order of its ranks).
fn node_spans(plan: &AllgathervPlan) -> Option<Vec<Range<usize>>> {
    let layout = plan.layout;
    (0..layout.nodes())
        .map(|q| {
            let mut parts: Vec<Range<usize>> = layout
                .node_ranks(q)
                .filter(|&r| plan.counts[r] > 0)
                .map(|r| plan.displs[r]..plan.displs[r] + plan.counts[r])
                .collect();
            parts.sort_unstable_by_key(|p| p.start);
            let first = parts.first().map_or(0, |p| p.start);
            parts.iter().try_fold(first..first, |span, p| {
                (p.start == span.end).then_some(span.start..p.end)
            })
        })
        .collect()
}

/// An allgatherv over all ranks with fixed counts and displacements, run
/// as often as needed (Al Ahad et al. 2018's algorithm; see the module documentation).
///
/// ```
/// use gaspi::{Allgatherv, Config, Context, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let n = ctx.num_ranks() as usize;
/// let counts: Vec<usize> = (0..n).map(|r| r + 1).collect();
/// let displs: Vec<usize> = (0..n).map(|r| r * (r + 1) / 2).collect();
/// let mut ag = Allgatherv::<u32>::new(&ctx, 3, &counts, &displs, Timeout::Block)?;
/// let mine = vec![ctx.rank() as u32; ctx.rank() as usize + 1];
/// let result = ag.run(&mine, Timeout::Block)?; // in the node's window
/// assert_eq!(result.get(0), 0);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug)]
pub struct Allgatherv<'a, T> {
    ctx: &'a Context,
    segment: SegmentId,
    plan: AllgathervPlan,
    window: Window,
    options: AllgathervOptions,
    /// Calls completed.
    calls: u64,
    /// The call in progress, if one timed out.
    phase: Option<Phase>,
    /// Elements of the result (the furthest end of a contribution).
    len: usize,
    /// The control lines after the result areas: a cache line per local
    /// rank, whose words count the calls the rank has entered
    /// ([`OPENED`]) and those in which it has copied its contribution into
    /// the window ([`COPIED`]); steps 1 and 3 wait on them.
    control: SegmentView<u64>,
    /// Result areas in the window, each with its notification ids: 2 for
    /// a result of up to [`TWO_AREAS_MAX_BYTES`] (calls use them in turn,
    /// so a call needs no barrier before its copy: see
    /// [`Allgatherv::area`]), 1 otherwise.
    areas: usize,
    /// `run_into`: the blocks this rank has copied into the caller's
    /// buffer in the call in progress (by block id).
    copied: Vec<bool>,
    /// The measured choice of stores for the contributions (the first of
    /// the pair; the second is not used), timed by the node's first rank
    /// in the calls with a private result of [`STREAM_IN_MIN_BYTES`] or
    /// more.
    stream: ChoicePair,
    /// Whether the call in progress puts this rank's contribution into
    /// the window, and its blocks into the next node's, with non-temporal
    /// stores (where [`Allgatherv::in_streams`] and
    /// [`Allgatherv::out_streams`] let it): as the node's word
    /// ([`STREAM_CHOICE`]) and the call's number say, in the calls that
    /// measure it (the node's ranks take the same way in a call unless
    /// one reads the word just as the first rank changes it: a matter of
    /// speed only, and one call's).
    streaming: bool,
    /// Whether some rank that reads this rank's contribution in the window
    /// (another rank of its node) may run on another CPU than this rank's
    /// one CPU (`Native::one_cpu_together`): else the contribution's
    /// lines are read from this CPU's cache, and streaming stores would
    /// send them to memory.
    in_streams: bool,
    /// The same for the blocks this rank writes into the next node's
    /// window, read by that node's ranks.
    out_streams: bool,
    /// Test aid: the times of measured calls (`testing_call_times`).
    call_times: Option<CallTimes<'a>>,
    /// The local ranks that may run on this rank's CPU, where all of them
    /// are of this node ([`super::core_mates`]).
    core_mates: Option<Vec<usize>>,
    /// Whether the node's last rank to copy its contribution into the
    /// window sends all the node's blocks to the next node (with several
    /// ranks per node, on the ring; up to [`ONE_SENDER_MAX_BYTES`] of them
    /// unless the node's ranks are all bound to one CPU,
    /// [`super::node_on_one_cpu`]): the others send nothing, say so at
    /// once ([`SENT`]) and need not run for the call to go on, so the
    /// node's ranks that share a CPU hand it over once per call instead of
    /// twice.
    one_sender: bool,
    /// Blocks between hosts as messages, where they are.
    messages: Option<Messages>,
    /// After the control lines, a word per node: with messages, how much
    /// of that node's message the node's first rank has seen land in the
    /// call in progress ([`landed_word`]), so that the node's other ranks
    /// copy it into their buffers while the rest comes.
    landed: SegmentView<u64>,
    /// With messages, in the call in progress: by node, how far its
    /// message came (on the node's first rank) or was copied into the
    /// caller's buffer (on its other ranks, [`Allgatherv::follow`]).
    moved: Vec<Moved>,
    _t: PhantomData<T>,
}

impl<'a, T: Pod> Allgatherv<'a, T> {
    /// Collectively prepare an allgatherv of `counts[r]` elements from rank
    /// `r` placed at element `displs[r]` of the result, using segment id
    /// `segment` for the node-shared result window on every rank.
    ///
    /// Every rank must give the same counts, displacements, element type
    /// and options (the queue aside); ranks that disagree all get
    /// [`Error::InvalidArgument`], nothing made.
    ///
    /// ```
    /// use gaspi::{Allgatherv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// // Contributions in reverse rank order in the result.
    /// let counts = vec![2; n];
    /// let displs: Vec<usize> = (0..n).map(|r| 2 * (n - 1 - r)).collect();
    /// let mut ag = Allgatherv::<i64>::new(&ctx, 1, &counts, &displs, Timeout::Block)?;
    /// let out = ag.run(&[ctx.rank() as i64; 2], Timeout::Block)?;
    /// assert_eq!(out.get(2 * (n - 1)), 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn new(
        ctx: &'a Context,
        segment: SegmentId,
        counts: &[usize],
        displs: &[usize],
        timeout: Timeout,
    ) -> Result<Allgatherv<'a, T>> {
        Allgatherv::with_options(
            ctx,
            segment,
            counts,
            displs,
            AllgathervOptions::default(),
            timeout,
        )
    }

    /// [`Allgatherv::new`] with options.
    ///
    /// ```
    /// use gaspi::{Allgatherv, AllgathervOptions, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let counts = vec![1 << 16; ctx.num_ranks() as usize];
    /// let displs = gaspi::plan::displacements(&counts);
    /// // Smaller blocks start the pipeline sooner.
    /// let opts = AllgathervOptions { block_bytes: 16 << 10, ..Default::default() };
    /// let mut ag = Allgatherv::<u8>::with_options(&ctx, 0, &counts, &displs, opts, Timeout::Block)?;
    /// ag.run(&vec![1u8; 1 << 16], Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn with_options(
        ctx: &'a Context,
        segment: SegmentId,
        counts: &[usize],
        displs: &[usize],
        options: AllgathervOptions,
        timeout: Timeout,
    ) -> Result<Allgatherv<'a, T>> {
        let mut creation = Creation::begin(ctx, segment, GroupId::ALL, "allgatherv", timeout);
        let shape = Shape::new("allgatherv")
            .debug(&std::any::type_name::<T>())
            .numbers(counts)
            .numbers(displs)
            .debug(&AllgathervOptions {
                queue: 0,
                ..options
            });
        creation.agree(shape, "allgatherv")?;
        let n = ctx.num_ranks() as usize;
        if counts.len() != n || displs.len() != n {
            return Err(Error::InvalidArgument(format!(
                "allgatherv needs one count and one displacement per rank ({n}), got {} and {}",
                counts.len(),
                displs.len()
            )));
        }
        let elem = std::mem::size_of::<T>().max(1);
        let len = super::plan::check_extents(counts, displs, elem)?;
        let layout = Layout::of(ctx);
        // The windows of the nodes on one host share its caches.
        let windows_here = ctx.engine.nodes_per_host(layout.nodes());
        let areas = if layout.ranks > 1
            && (len * elem).saturating_mul(windows_here) <= TWO_AREAS_MAX_BYTES
        {
            2
        } else {
            1
        };
        // Each area has its block ids and its credit.
        let max_blocks = crate::config::NOTIFICATION_LIMIT as usize / areas - 1;
        let block_bytes = ctx
            .engine
            .block_bytes(options.block_bytes, AllgathervOptions::DEFAULT_BLOCK_BYTES);
        let block_elems = (block_bytes / elem).max(1);
        let plan = AllgathervPlan::new(layout, counts, displs, block_elems, max_blocks);
        let table = (plan.total_blocks() as u32 + 1) * areas as u32; // + the credits
        let opts = WindowOptions::default().notifications(table);
        let bytes = extent::mul("allgatherv result size * areas", len * elem, areas)?;
        // The control lines, 64-byte aligned after the areas.
        let control_at = extent::end("allgatherv result areas", bytes, 63)? / 64 * 64;
        let lines = extent::mul("allgatherv control lines", layout.ppn, 64)?;
        let landed_at = extent::end("allgatherv control lines", control_at, lines)?;
        let landed_len = extent::mul("allgatherv landed words", layout.nodes(), 8)?;
        let bytes = extent::end("allgatherv window", landed_at, landed_len)?;
        let window =
            creation.window(|t| ctx.window_create_with(segment, bytes, GroupId::ALL, opts, t))?;
        let words = control_at / 8;
        let control = window.view::<u64>().sub(words..words + lines / 8);
        let landed = window.view::<u64>().sub(landed_at / 8..bytes / 8);
        let messages = match node_spans(&plan) {
            Some(spans)
                if layout.nodes() > 1
                    && ctx.engine.host_keyed()
                    && options
                        .messages
                        .unwrap_or(!ctx.engine.host_one_sided_in_memory()) =>
            {
                let id = creation.keyed_object_id(&mut [])?;
                ctx.engine.host_keyed_made(id);
                let mem = NodeMemory::new(&window);
                Some(Messages { id, spans, mem })
            }
            _ => None,
        };
        // Whether a rank of `ranks` but this one may run on another CPU
        // than this rank's one CPU (where it reads what this rank stores).
        let me = ctx.rank();
        let elsewhere = |ranks: Range<usize>| {
            let other = |r: usize| !ctx.engine.one_cpu_together(me, r as Rank);
            ranks.filter(|&r| r != me as usize).any(other)
        };
        let next = (layout.node_of(me as usize) + 1) % layout.nodes();
        let node = layout.node_ranks(layout.node_of(me as usize));
        let node_bytes = counts[node.clone()]
            .iter()
            .sum::<usize>()
            .saturating_mul(elem);
        let one_sender = layout.nodes() > 1
            && node.len() > 1
            && messages.is_none()
            && (node_bytes <= ONE_SENDER_MAX_BYTES || super::node_on_one_cpu(ctx));
        Ok(Allgatherv {
            ctx,
            segment,
            plan,
            window,
            options,
            calls: 0,
            phase: None,
            len,
            control,
            areas,
            copied: Vec::new(),
            stream: ChoicePair::default(),
            streaming: false,
            in_streams: elsewhere(node),
            out_streams: layout.nodes() > 1 && elsewhere(layout.node_ranks(next)),
            call_times: None,
            core_mates: super::core_mates(ctx),
            one_sender,
            messages,
            landed,
            moved: Vec::new(),
            _t: PhantomData,
        })
    }

    /// The first element of call `call`'s result in the window.
    ///
    /// With two areas, calls alternate between them, each area with its
    /// own block ids and credit id ([`Allgatherv::ids`]). A rank that
    /// starts call `k + 1` has passed call `k`'s wait after the copies
    /// (step 3), which every rank of its node reached only after it had
    /// finished call `k - 1` and returned, and so had stopped reading that
    /// call's result (the area that call `k + 1` writes) in `run_into` and
    /// in place after `run`, and claiming its blocks: the call needs no
    /// barrier before its copy (step 1), and the node's first rank may
    /// send the call's credit at once (the previous node may then write
    /// call `k + 1`'s blocks while ranks of this node still claim call
    /// `k`'s, in the other area under the other ids). (Not sooner, in step
    /// 3 of call `k`: the previous node may have finished its calls and
    /// deleted its window by then.)
    fn area(&self, call: u64) -> usize {
        (call % self.areas as u64) as usize * self.len
    }

    /// The first notification id of call `call`'s area: its blocks' ids
    /// follow, then its credit's.
    fn ids(&self, call: u64) -> u32 {
        (call % self.areas as u64) as u32 * (self.plan.total_blocks() as u32 + 1)
    }

    /// The notification id of call `call`'s credit: after its area's block
    /// ids.
    fn credit_id(&self, call: u64) -> u32 {
        self.ids(call) + self.plan.total_blocks() as u32
    }

    /// Tell the previous node that call `call` may write this node's
    /// window (its area, under its ids).
    fn send_credit(&self, call: u64, deadline: Deadline) -> Result<()> {
        let (ctx, nodes) = (self.ctx, self.ctx.num_nodes());
        let prev = ctx.node_ranks((ctx.node() + nodes - 1) % nodes).start;
        let tag = super::call_tag(call);
        let credit = Notification::new(self.credit_id(call), tag);
        self.post(prev, (0, 0), credit, false, deadline)
    }

    /// Say that this rank has reached progress `WORD` of the call
    /// ([`OPENED`] or [`COPIED`]: a count of calls, in its control line),
    /// and wait until every rank of the node has said so (a rank that gets
    /// there last does not wait). Each collective has its own lines, so
    /// what a given-up call of another collective left behind does not
    /// count here, as an arrival it left in the node's barrier would.
    fn node_reached<const WORD: usize>(&self, deadline: Deadline) -> Result<()> {
        let ctx = self.ctx;
        let call = self.calls + 1;
        control_word(&self.control, ctx.local_rank() as usize, WORD).store(call, SeqCst);
        self.window.object().notifications().ww.wake();
        let lines = (&self.window, &self.control);
        await_control::<WORD>(ctx, lines, 0..ctx.local_num() as usize, call, deadline)?;
        // As after the node's barrier in a collective over all ranks: a
        // failure anywhere fails the call even where its wait was met.
        ctx.engine.faults()
    }

    /// The plan this allgatherv executes.
    ///
    /// ```
    /// # use gaspi::{Allgatherv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let counts = vec![10; ctx.num_ranks() as usize];
    /// let displs = gaspi::plan::displacements(&counts);
    /// let ag = Allgatherv::<u32>::new(&ctx, 0, &counts, &displs, Timeout::Block)?;
    /// // What one call sends between nodes.
    /// let per_call = ag.plan().inter_node_messages();
    /// assert_eq!(per_call, ag.plan().total_blocks() * (ctx.num_nodes() - 1));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn plan(&self) -> &AllgathervPlan {
        &self.plan
    }

    /// The result of the last call: the node's window. A view taken
    /// before a call may show another call's result after it (calls of
    /// up to 256 KiB of result take turns between two areas of the
    /// window): take the view anew after each call.
    ///
    /// ```
    /// # use gaspi::{Allgatherv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let counts = vec![1; ctx.num_ranks() as usize];
    /// let displs = gaspi::plan::displacements(&counts);
    /// let mut ag = Allgatherv::<u32>::new(&ctx, 0, &counts, &displs, Timeout::Block)?;
    /// ag.run(&[7], Timeout::Block)?;
    /// // Later: the last result, still in the window.
    /// assert_eq!(ag.result().get(ctx.rank() as usize), 7);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn result(&self) -> SegmentView<T> {
        let at = self.area(self.calls.wrapping_sub(1));
        self.window.view().sub(at..at + self.len)
    }

    /// Gather every rank's `send` (its `counts[rank]` elements) into the
    /// node's result window and return a view of it. On a timeout, call
    /// again (with the same `send`) to continue where it stopped.
    ///
    /// ```
    /// use gaspi::{Allgatherv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let counts = vec![4; n];
    /// let displs = gaspi::plan::displacements(&counts);
    /// let mut ag = Allgatherv::<f64>::new(&ctx, 0, &counts, &displs, Timeout::Block)?;
    /// for it in 0..3 {
    ///     let mine = [(ctx.rank() as f64 + 1.0) * (it as f64 + 1.0); 4];
    ///     let all = ag.run(&mine, Timeout::Block)?;
    ///     for r in 0..n {
    ///         assert_eq!(all.get(4 * r), (r as f64 + 1.0) * (it as f64 + 1.0));
    ///     }
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run(&mut self, send: &[T], timeout: Timeout) -> Result<SegmentView<T>> {
        self.call(send, None, timeout)?;
        Ok(self.result())
    }

    /// Gather every rank's `send` into `recv` (which must hold the whole
    /// result), each contribution at its displacement; elements of `recv`
    /// that no contribution covers are left as they were. The node's
    /// window holds the result too ([`Allgatherv::result`]). On a timeout,
    /// call again with the same `send` and `recv` to continue.
    ///
    /// With several nodes, the copy of the node's own blocks overlaps the
    /// transfers from other nodes (see the module documentation).
    ///
    /// ```
    /// # use gaspi::{Allgatherv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let counts = vec![1; n];
    /// let displs = gaspi::plan::displacements(&counts);
    /// let mut ag = Allgatherv::<u16>::new(&ctx, 0, &counts, &displs, Timeout::Block)?;
    /// let mut mine = vec![0u16; n];
    /// ag.run_into(&[ctx.rank()], &mut mine, Timeout::Block)?;
    /// assert_eq!(mine, (0..n as u16).collect::<Vec<_>>());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_into(&mut self, send: &[T], recv: &mut [T], timeout: Timeout) -> Result<()> {
        if recv.len() < self.len {
            return Err(Error::InvalidArgument(format!(
                "the result has {} elements, the receive buffer {}",
                self.len,
                recv.len()
            )));
        }
        self.call(send, Some(recv), timeout)
    }

    /// [`Allgatherv::run_into`] with this rank's contribution taken from
    /// its place in `buf` (its displacement), as `MPI_Allgatherv` with
    /// `MPI_IN_PLACE`: the result is made in the node's window from that
    /// place ([`Allgatherv::run`]) and the other contributions are then
    /// copied into `buf` (adjacent ones in one piece; elements no
    /// contribution covers are left as they were). On a timeout, call
    /// again with the same `buf` to continue (it is written only once the
    /// call has completed).
    ///
    /// ```
    /// # use gaspi::{Allgatherv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
    /// let counts = vec![2; n];
    /// let displs = gaspi::plan::displacements(&counts);
    /// let mut ag = Allgatherv::<u32>::new(&ctx, 0, &counts, &displs, Timeout::Block)?;
    /// let mut buf = vec![0u32; 2 * n];
    /// buf[displs[me]..displs[me] + 2].fill(me as u32);
    /// ag.run_in_place(&mut buf, Timeout::Block)?;
    /// assert_eq!(buf[2 * n - 1], n as u32 - 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn run_in_place(&mut self, buf: &mut [T], timeout: Timeout) -> Result<()> {
        if buf.len() < self.len {
            return Err(Error::InvalidArgument(format!(
                "the result has {} elements, the buffer {}",
                self.len,
                buf.len()
            )));
        }
        let me = self.ctx.rank() as usize;
        // (An empty contribution may lie anywhere, even past the result.)
        let (at, count) = (self.plan.displs[me], self.plan.counts[me]);
        let mine = if count == 0 { 0..0 } else { at..at + count };
        let result = self.run(&buf[mine], timeout)?;
        // The others' contributions, by place, adjacent ones together.
        let mut spans: Vec<(usize, usize)> = (0..self.plan.counts.len())
            .filter(|&r| r != me && self.plan.counts[r] > 0)
            .map(|r| {
                (
                    self.plan.displs[r],
                    self.plan.displs[r] + self.plan.counts[r],
                )
            })
            .collect();
        spans.sort_unstable();
        let mut k = 0;
        while k < spans.len() {
            let (start, mut end) = spans[k];
            k += 1;
            while k < spans.len() && spans[k].0 == end {
                end = spans[k].1;
                k += 1;
            }
            result
                .sub(start..end)
                .copy_to_slice_with(0, &mut buf[start..end], self.stream_out());
        }
        Ok(())
    }

    /// One call of [`Allgatherv::run`] (`recv` = `None`) or
    /// [`Allgatherv::run_into`], resumed where a timeout stopped it.
    fn call(&mut self, send: &[T], recv: Option<&mut [T]>, timeout: Timeout) -> Result<()> {
        let count = self.plan.counts[self.ctx.rank() as usize];
        if send.len() != count {
            return Err(Error::InvalidArgument(format!(
                "this rank contributes {count} elements to the allgatherv, not {}",
                send.len()
            )));
        }
        let deadline = timeout.deadline();
        let mut phase = self.phase.take().unwrap_or(Phase::Start);
        // The node's first rank times the new calls (not resumed after a
        // timeout) that measure their stores.
        let mut timed = None;
        let bytes = self.len.saturating_mul(std::mem::size_of::<T>());
        if phase == Phase::Start {
            let may_stream = self.in_streams || self.out_streams;
            let measured = recv.is_some() && bytes >= STREAM_IN_MIN_BYTES && may_stream;
            let word = control_word(&self.control, 0, STREAM_CHOICE).load(SeqCst);
            self.streaming = measured && self.stream.pick(self.calls, word)[0];
            if measured && self.ctx.local_rank() == 0 {
                timed = Some(Instant::now());
            }
            self.copied.clear();
            self.copied.resize(self.plan.total_blocks(), false);
            self.moved.clear();
            self.moved
                .resize(self.plan.layout.nodes(), Moved::default());
        }
        let mut copied = std::mem::take(&mut self.copied);
        let mut moved = std::mem::take(&mut self.moved);
        let result = self.advance(&mut phase, send, recv, (&mut copied, &mut moved), deadline);
        self.copied = copied;
        self.moved = moved;
        match result {
            Ok(()) => {
                if let Some(t) = timed {
                    let ways = [self.streaming, false];
                    let time = match &self.call_times {
                        Some(CallTimes(times)) => times(self.calls, ways),
                        None => t.elapsed(),
                    };
                    self.stream
                        .record(self.calls, (ways, [true, false]), bytes, time);
                    control_word(&self.control, 0, STREAM_CHOICE).store(self.stream.word(), SeqCst);
                }
                self.calls += 1;
                Ok(())
            }
            Err(e) => {
                self.phase = Some(phase);
                Err(e)
            }
        }
    }

    /// The blocks this rank sends to the next node in the call in
    /// progress, just after copying its contribution in: its share of the
    /// node's (`AllgathervPlan::sends`), or, where one rank sends them all
    /// ([`Allgatherv::one_sender`]), all if its copy completed the node's
    /// (then the node's data is in the window) and else none, said at once
    /// ([`SENT`]). Called once per call.
    fn my_sends(&self, plan: &AllgathervPlan) -> (usize, usize) {
        let me = self.ctx.rank() as usize;
        if !self.one_sender {
            let share = plan.sends(me);
            return (share.start, share.end);
        }
        let (local, local_num) = (self.ctx.local_rank() as usize, self.ctx.local_num() as u64);
        let call = self.calls + 1;
        if super::last_to_arrive(control_word(&self.control, 0, COPIES), call, local_num) {
            let node = plan.layout.node_of(me);
            return (plan.node_first[node], plan.node_first[node + 1]);
        }
        control_word(&self.control, local, SENT).store(call, SeqCst);
        (0, 0)
    }

    /// Whether every local rank that may run on this rank's CPU
    /// (`Allgatherv::core_mates`) has sent its share of call `call`'s
    /// blocks ([`SENT`]): nothing that such a rank still does in the call
    /// lets the other nodes' blocks come sooner (it claims them, as this
    /// rank does, or, with a private result, copies its node's blocks out
    /// first, which a spin delays until this rank's claims end), and a
    /// yield would hand the CPU to a rank that hands it back.
    fn core_idle(&self, call: u64) -> bool {
        let mates = self.core_mates.as_deref();
        super::core_mates_reached(mates, &self.control, SENT, call)
    }

    /// Write block `id` with its notification (value `tag`) to the rank
    /// of this local rank on the next node (with the stores of
    /// `Allgatherv::streaming` where this process copies it and
    /// `Allgatherv::out_streams`).
    fn send_block(&self, id: usize, tag: u32, deadline: Deadline) -> Result<()> {
        let b = self.plan.blocks[id];
        let elem = std::mem::size_of::<T>();
        let to = self.next_rank(self.ctx.rank() as usize);
        let bytes = ((self.area(self.calls) + b.offset) * elem, b.len * elem);
        let n = Notification::new(self.ids(self.calls) + id as u32, tag);
        self.post(to, bytes, n, self.streaming && self.out_streams, deadline)
    }

    /// Copy blocks `ids` from the window into `recv` (if there is one),
    /// except those there already; they must be complete. Blocks that
    /// follow each other in the result are copied in one piece (one call
    /// of the engine's copy loop instead of one per block).
    fn copy_blocks(&self, ids: Range<usize>, recv: &mut Option<&mut [T]>, copied: &mut [bool]) {
        let Some(recv) = recv.as_deref_mut() else {
            return;
        };
        let view = self.window.view::<T>();
        let at = self.area(self.calls);
        let blocks = &self.plan.blocks;
        let mut id = ids.start;
        while id < ids.end {
            if copied[id] {
                id += 1;
                continue;
            }
            let start = blocks[id].offset;
            let mut end = start + blocks[id].len;
            copied[id] = true;
            id += 1;
            while id < ids.end && !copied[id] && blocks[id].offset == end {
                end += blocks[id].len;
                copied[id] = true;
                id += 1;
            }
            view.copy_to_slice_with(at + start, &mut recv[start..end], self.stream_out());
        }
    }

    /// Whether the copies of the result into the caller's buffer take
    /// non-temporal stores: from [`STREAM_OUT_MIN_BYTES`] of result.
    fn stream_out(&self) -> bool {
        self.len.saturating_mul(std::mem::size_of::<T>()) >= STREAM_OUT_MIN_BYTES
    }

    /// Step 2: copy this rank's contribution `send` into the window (with
    /// the stores of `Allgatherv::streaming`, where
    /// `Allgatherv::in_streams`). On a
    /// job of one node, a contribution of several blocks goes block by
    /// block, each counted in the [`PROGRESS`] word as it lands, so that
    /// the node's ranks with private results copy it out meanwhile
    /// ([`Allgatherv::copy_as_they_land`]): a rank that contributes much
    /// more than the others (a broadcast-like distribution) no longer
    /// holds them all up for the whole of its copy.
    fn copy_in(&self, send: &[T]) {
        let plan = &self.plan;
        let me = self.ctx.rank() as usize;
        let view = self.window.view::<T>();
        let at = self.area(self.calls);
        let blocks = plan.first_block[me]..plan.first_block[me + 1];
        let streaming = self.streaming && self.in_streams;
        if self.ctx.num_nodes() > 1 || blocks.len() < 2 {
            view.copy_from_slice_with(at + plan.displs[me], send, streaming);
            return;
        }
        let word = control_word(&self.control, self.ctx.local_rank() as usize, PROGRESS);
        let ww = &self.window.object().notifications().ww;
        let call = self.calls + 1;
        let elem = std::mem::size_of::<T>();
        let mut unwoken = 0;
        for (k, id) in blocks.enumerate() {
            let b = plan.blocks[id];
            let from = b.offset - plan.displs[me];
            view.copy_from_slice_with(at + b.offset, &send[from..from + b.len], streaming);
            word.store(landed_word(call, k + 1), SeqCst);
            // Sleepers woken every PROGRESS_WAKE_BYTES (the ones that
            // poll see every block): a wake per block cost more than
            // the copies it let start early.
            unwoken += b.len * elem;
            if unwoken >= PROGRESS_WAKE_BYTES {
                ww.wake();
                unwoken = 0;
            }
        }
    }

    /// Step 3 on a job of one node, for a rank with a private result
    /// `recv`: say that this rank's contribution is in the window, then,
    /// until every rank of the node has said so, copy into `recv` the
    /// blocks of the others' contributions as they land (their
    /// [`PROGRESS`] words; `copied`: the blocks already there).
    fn copy_as_they_land(
        &self,
        recv: &mut Option<&mut [T]>,
        copied: &mut [bool],
        deadline: Deadline,
    ) -> Result<()> {
        let ctx = self.ctx;
        let plan = &self.plan;
        let call = self.calls + 1;
        let ww = &self.window.object().notifications().ww;
        control_word(&self.control, ctx.local_rank() as usize, COPIED).store(call, SeqCst);
        ww.wake();
        let node = plan.layout.node_ranks(ctx.node());
        ctx.engine.patience().wait(
            ww,
            deadline,
            || {
                let mut all = true;
                for (l, r) in node.clone().enumerate() {
                    let blocks = plan.first_block[r]..plan.first_block[r + 1];
                    let done = control_word(&self.control, l, COPIED).load(SeqCst) >= call;
                    let landed = if done {
                        blocks.len()
                    } else {
                        let word = control_word(&self.control, l, PROGRESS).load(SeqCst);
                        landed_in(word, call).min(blocks.len())
                    };
                    self.copy_blocks(blocks.start..blocks.start + landed, recv, copied);
                    all &= done;
                }
                all.then_some(())
            },
            || ctx.engine.faults(),
        )?;
        // As after the node's barrier in a collective over all ranks: a
        // failure anywhere fails the call even where its wait was met.
        ctx.engine.faults()
    }

    /// Run the call's phases from `phase` on, updating it as they finish;
    /// with `recv`, copy the result into it on the way (`copied`: the
    /// blocks already there; `moved`: the messages, [`Allgatherv::exchange`]).
    fn advance(
        &self,
        phase: &mut Phase,
        send: &[T],
        mut recv: Option<&mut [T]>,
        (copied, moved): (&mut [bool], &mut [Moved]),
        deadline: Deadline,
    ) -> Result<()> {
        let ctx = self.ctx;
        let plan = &self.plan;
        let node = ctx.node();
        let nodes = ctx.num_nodes();
        let tag = super::call_tag(self.calls);
        let ids = self.ids(self.calls);
        let credit = self.credit_id(self.calls);
        // Every block not copied yet; all must be complete.
        let copy_rest = |recv: &mut Option<&mut [T]>, copied: &mut [bool]| {
            self.copy_blocks(0..plan.total_blocks(), recv, copied);
        };
        loop {
            match *phase {
                Phase::Start => {
                    if self.areas == 1 {
                        // Step 1 with one area: every rank of the node has
                        // returned from the previous call.
                        self.node_reached::<OPENED>(deadline)?;
                    }
                    *phase = Phase::Opened;
                }
                Phase::Opened => {
                    // Tell the previous node: this node may be written.
                    if nodes > 1 && ctx.local_rank() == 0 && self.messages.is_none() {
                        self.send_credit(self.calls, deadline)?;
                    }
                    self.copy_in(send);
                    let (first, end) = self.my_sends(plan);
                    *phase = Phase::Copied { first, end };
                }
                Phase::Copied { first, end } => {
                    if nodes == 1 && recv.is_some() {
                        self.copy_as_they_land(&mut recv, copied, deadline)?;
                        copy_rest(&mut recv, copied);
                        return Ok(());
                    }
                    self.node_reached::<COPIED>(deadline)?;
                    if nodes == 1 {
                        copy_rest(&mut recv, copied);
                        return Ok(());
                    }
                    *phase = match self.messages {
                        Some(_) => Phase::Exchanging,
                        None => Phase::Sending { next: first, end },
                    };
                }
                Phase::Sending { next, end } => {
                    // The next node's credit for this call (or a later one:
                    // then this rank has nothing left to send for this call,
                    // or the next node could not have finished it). Awaited
                    // by the ranks that send nothing too: no credit comes in
                    // after a rank's last call, once it gives up its window.
                    ctx.await_notification_tag(self.segment, credit, tag, deadline)?;
                    for id in next..end {
                        *phase = Phase::Sending { next: id, end };
                        self.send_block(id, tag, deadline)?;
                    }
                    // The node's blocks, complete since step 3, while
                    // the first blocks of other nodes travel.
                    let node_blocks = plan.node_first[node]..plan.node_first[node + 1];
                    self.copy_blocks(node_blocks, &mut recv, copied);
                    *phase = Phase::Receiving;
                }
                Phase::Receiving => {
                    if plan.received_by(node) == 0 {
                        // Sends complete locally before the window may be
                        // rewritten (a transport reads it after the post).
                        ctx.wait(self.options.queue, Timeout::Block)?;
                        copy_rest(&mut recv, copied);
                        return Ok(());
                    }
                    let call = self.calls + 1;
                    control_word(&self.control, ctx.local_rank() as usize, SENT)
                        .store(call, SeqCst);
                    let expect = call * plan.received_by(node) as u64;
                    let range = ids..ids + plan.total_blocks() as u32;
                    // The blocks come from other nodes, so from other
                    // CPUs where `core_idle` can say yes.
                    while let Some((id, v)) = ctx.notify_claim_until_or_spin(
                        self.segment,
                        range.clone(),
                        expect,
                        deadline.timeout(),
                        || self.core_idle(call),
                    )? {
                        debug_assert_eq!(v, tag);
                        let id = (id - ids) as usize;
                        if plan.forwards(node, id) {
                            self.send_block(id, tag, deadline)?;
                        }
                    }
                    ctx.wait(self.options.queue, Timeout::Block)?;
                    // Every block of the call has arrived: the node claimed
                    // them all.
                    copy_rest(&mut recv, copied);
                    return Ok(());
                }
                Phase::Exchanging => {
                    let call = self.calls + 1;
                    if ctx.local_rank() == 0 {
                        self.exchange(moved, &mut recv, deadline)?;
                        control_word(&self.control, 0, RECEIVED).store(call, SeqCst);
                        self.window.object().notifications().ww.wake();
                    } else {
                        // The node's blocks while the others' come.
                        let node_blocks = plan.node_first[node]..plan.node_first[node + 1];
                        self.copy_blocks(node_blocks, &mut recv, copied);
                        if recv.is_some() {
                            self.follow(moved, &mut recv, deadline)?;
                        } else {
                            let lines = (&self.window, &self.control);
                            await_control::<RECEIVED>(ctx, lines, 0..1, call, deadline)?;
                        }
                        ctx.engine.faults()?;
                    }
                    // The other nodes' blocks are in `recv` (if any) already.
                    for q in (0..nodes).filter(|&q| q != node) {
                        copied[plan.node_first[q]..plan.node_first[q + 1]].fill(true);
                    }
                    copy_rest(&mut recv, copied);
                    return Ok(());
                }
            }
        }
    }

    /// The node's first rank's messages of this call ([`Messages`]): this
    /// node's contributions to every other node's first rank, theirs taken
    /// into the window and copied into `recv` (if there is one) as they
    /// land, until all went and came (`moved`, by node, kept across a
    /// timeout).
    fn exchange(
        &self,
        moved: &mut [Moved],
        recv: &mut Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<()> {
        let ctx = self.ctx;
        let m = self.messages.as_ref().expect("an exchange has messages");
        let layout = self.plan.layout;
        let (me, nodes) = (ctx.node(), layout.nodes());
        let elem = std::mem::size_of::<T>();
        let area = self.area(self.calls);
        let key = (m.id, self.calls);
        let first = |q: usize| layout.node_ranks(q).start as Rank;
        let lent: Vec<Option<Lent>> = m
            .spans
            .iter()
            .map(|s| {
                let (at, len) = ((area + s.start) * elem, s.len() * elem);
                // SAFETY: a node's contributions (`s`) in this call's area. This
                // node's (sent from): its ranks wrote them in step 2 and said so
                // (step 3, passed); they write them again only in the next call
                // of this area, which they enter after this rank finished this
                // call (one area: step 1 waits for this rank; two: they finish
                // the call in between only after this rank's word for it, which
                // it writes after finishing this call), and this rank finishes
                // only once its sends went. Another node's (taken into): only the
                // transport writes them, until the message is taken or the object
                // is dropped (`keyed_forget`); the node's ranks read only what
                // this rank saw land (its landed word for this call, or its word
                // for the call, each stored after the bytes it counts landed,
                // which the transport no longer writes), and stopped reading this
                // area's previous result before they passed step 3 of this call
                // (one area) or of the call before (two).
                (!s.is_empty()).then(|| unsafe { m.mem.lend(at, len) })
            })
            .collect();
        let others = || (0..nodes).filter(move |&q| q != me);
        let step = || -> Result<bool> {
            match &lent[me] {
                Some(data) if !moved[me].done => {
                    let mut all = true;
                    for q in others() {
                        all &= ctx.engine.host_keyed_send(first(q), key, data)?;
                    }
                    if all {
                        // Each counted as the notified write it stands for.
                        let n = others().count() as u64;
                        ctx.traffic.count(true, Op::Write, n, data.len() as u64 * n);
                        ctx.traffic.count(true, Op::Notify, n, 0);
                    }
                    moved[me].done = all;
                }
                Some(_) => {}
                None => moved[me].done = true,
            }
            let mut all = moved[me].done;
            for q in others() {
                let span = &m.spans[q];
                let Some(into) = lent[q].as_ref().filter(|_| !moved[q].done) else {
                    moved[q].done = true; // (nothing comes from an empty node)
                    continue;
                };
                // (The message is taken only once its head came too.)
                moved[q].done = ctx.engine.host_keyed_take(first(q), key, into)?;
                let landed = if moved[q].done {
                    span.len()
                } else {
                    (ctx.engine.host_keyed_landed(first(q), key) / elem).min(span.len())
                };
                if landed > moved[q].landed {
                    // What landed, while the rest comes; the node's other
                    // ranks copy it too (the word after the data: they
                    // read the data after the word).
                    self.copy_landed(span, &mut moved[q], landed, recv);
                    self.landed_at(q)
                        .store(landed_word(self.calls, landed), SeqCst);
                }
                all &= moved[q].done;
            }
            Ok(all)
        };
        super::poll_keyed(ctx, m.mem.table().ww, deadline, step)
    }

    /// Node `q`'s landed word ([`Allgatherv::landed`]).
    fn landed_at(&self, q: usize) -> &AtomicU64 {
        self.landed
            .atomic_u64(8 * q)
            .expect("the landed words lie 8-byte aligned in the window")
    }

    /// Copy the elements of `span` (a node's message) that landed since
    /// `moved.landed`, up to `landed`, from this call's area into `recv`
    /// (if there is one).
    fn copy_landed(
        &self,
        span: &Range<usize>,
        moved: &mut Moved,
        landed: usize,
        recv: &mut Option<&mut [T]>,
    ) {
        if let Some(recv) = recv.as_deref_mut() {
            let part = span.start + moved.landed..span.start + landed;
            let area = self.area(self.calls);
            self.window
                .view::<T>()
                .copy_to_slice(area + part.start, &mut recv[part]);
        }
        moved.landed = moved.landed.max(landed);
    }

    /// On a node's other ranks, with messages: copy the other nodes'
    /// messages into `recv` as the node's first rank sees them land (its
    /// landed words), until its word for this call ([`RECEIVED`]) says all
    /// came; then the other nodes' blocks are all in `recv`.
    fn follow(
        &self,
        moved: &mut [Moved],
        recv: &mut Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<()> {
        let ctx = self.ctx;
        let m = self.messages.as_ref().expect("following needs messages");
        let (node, call) = (ctx.node(), self.calls + 1);
        let step = || -> Result<bool> {
            // The word first: once it is there, every message came whole.
            let all = control_word(&self.control, 0, RECEIVED).load(SeqCst) >= call;
            for (q, span) in m.spans.iter().enumerate().filter(|&(q, _)| q != node) {
                let landed = match all {
                    true => span.len(),
                    false => landed_in(self.landed_at(q).load(SeqCst), self.calls),
                };
                if landed > moved[q].landed {
                    self.copy_landed(span, &mut moved[q], landed, recv);
                }
            }
            Ok(all)
        };
        super::poll_keyed(ctx, self.window.object().notifications().ww, deadline, step)
    }

    /// Whether this allgatherv's blocks cross hosts as one message per
    /// pair of nodes and call ([`AllgathervOptions::messages`]) rather
    /// than as the ring's notified writes.
    ///
    /// ```
    /// # use gaspi::{Allgatherv, AllgathervOptions, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let counts = vec![8; ctx.num_ranks() as usize];
    /// let displs = gaspi::plan::displacements(&counts);
    /// let opts = AllgathervOptions { messages: Some(true), ..Default::default() };
    /// let ag = Allgatherv::<u8>::with_options(&ctx, 0, &counts, &displs, opts, Timeout::Block)?;
    /// // Only between hosts of an engine with messages (the MPI engine's).
    /// if ctx.num_nodes() == 1 {
    ///     assert!(!ag.messages());
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn messages(&self) -> bool {
        self.messages.is_some()
    }

    /// The segment id of the result window.
    ///
    /// ```
    /// # use gaspi::{Allgatherv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let counts = vec![1; ctx.num_ranks() as usize];
    /// # let displs = gaspi::plan::displacements(&counts);
    /// let ag = Allgatherv::<u8>::new(&ctx, 9, &counts, &displs, Timeout::Block)?;
    /// assert_eq!(ag.segment(), 9);
    /// assert!(ctx.window(9)?.len() >= counts.iter().sum::<usize>());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment(&self) -> SegmentId {
        self.segment
    }

    /// Test aid, not part of the API (it may change in any release):
    /// `times(call, streaming)` is taken for the time of each call that
    /// this rank times for its node's choice of stores (the node's first
    /// rank, in the calls with a private result that measure it), given
    /// the stores the call took, instead of the time it took. For tests of
    /// the choice; [`Allgatherv::testing_streaming`] says which stores a
    /// call took.
    ///
    /// ```no_run
    /// # use gaspi::{Allgatherv, Config, Context, Timeout};
    /// # use std::time::Duration;
    /// # let ctx = Context::init(Config::default())?;
    /// # let n = ctx.num_ranks() as usize;
    /// let displs: Vec<usize> = (0..n).map(|r| 8192 * r).collect();
    /// let mut ag = Allgatherv::<u64>::new(&ctx, 1, &vec![8192; n], &displs, Timeout::Block)?;
    /// // Streaming stores seem twice as fast.
    /// ag.testing_call_times(|_, streaming| Duration::from_millis(2 - streaming as u64));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn testing_call_times(
        &mut self,
        times: impl Fn(u64, bool) -> std::time::Duration + Send + Sync + 'a,
    ) {
        self.call_times = Some(CallTimes(Box::new(move |call, [streaming, _]| {
            times(call, streaming)
        })));
    }

    /// Test aid: whether the last call (or the one in progress) took
    /// non-temporal stores, where [`Allgatherv::testing_may_stream`].
    #[doc(hidden)]
    pub fn testing_streaming(&self) -> bool {
        self.streaming
    }

    /// Test aid: the local ranks that may run on this rank's CPU, where
    /// this rank is bound to one CPU and no rank of another node may run
    /// on it (`None` elsewhere): once they all claim blocks of other
    /// nodes, as this rank does, its claims spin instead of yielding.
    #[doc(hidden)]
    pub fn testing_core_mates(&self) -> Option<Vec<usize>> {
        self.core_mates.clone()
    }

    /// Test aid: whether the node's last rank to copy its contribution in
    /// sends all the node's blocks (see `ONE_SENDER_MAX_BYTES`): with
    /// several nodes and several ranks per node, up to 64 KiB of the
    /// node's contributions, or where the node's ranks are all bound to
    /// one CPU.
    #[doc(hidden)]
    pub fn testing_one_sender(&self) -> bool {
        self.one_sender
    }

    /// Test aid: whether this rank's calls with a large private result
    /// measure their stores: some rank that reads what this rank stores
    /// may run on another CPU than this rank's one CPU.
    #[doc(hidden)]
    pub fn testing_may_stream(&self) -> bool {
        self.in_streams || self.out_streams
    }

    /// The rank with the same local rank as `rank` on the next node
    /// (formula 1), or the next node's last if it has fewer ranks.
    fn next_rank(&self, rank: usize) -> Rank {
        let layout = self.plan.layout;
        let next = layout.node_ranks((layout.node_of(rank) + 1) % layout.nodes());
        let local = rank - layout.node_ranks(layout.node_of(rank)).start;
        (next.start + local.min(next.len() - 1)) as Rank
    }

    /// `write_notify` the `len` bytes at byte `off` of this rank's window
    /// to the same place of the window on `to` (none: a `notify`), with
    /// non-temporal stores where `streaming` and this process copies them.
    fn post(
        &self,
        to: Rank,
        (off, len): (usize, usize),
        n: Notification,
        streaming: bool,
        deadline: Deadline,
    ) -> Result<()> {
        let (ctx, seg, queue) = (self.ctx, self.segment, self.options.queue);
        super::post_with(ctx, seg, queue, to, (off, off, len), n, streaming, deadline)
    }
}

impl<T> Drop for Allgatherv<'_, T> {
    /// Deletes this rank's result window segment, once its queue is done.
    /// When a call returns, all blocks for this node have arrived, so no
    /// more writes come in (after a call given up, see
    /// [`Context::segment_create`] for why a new one is still safe).
    fn drop(&mut self) {
        if let Some(m) = &self.messages {
            // Its messages being taken are given up (the window's memory
            // is kept mapped while the transport still writes it).
            self.ctx.engine.host_keyed_forget(m.id);
        }
        super::release(self.ctx, self.segment, self.options.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::{LANDED_BITS, landed_in, landed_word};

    /// A landed word says its count to its own call only: the previous
    /// call's word, still in place when a follower looks, counts nothing,
    /// and the tag keeps only the call number's low 16 bits.
    #[test]
    fn landed_words_count_for_their_own_call_only() {
        let most = (1usize << LANDED_BITS) - 1;
        for (call, landed) in [(0, 0), (1, 4096), (7, most), (65_535, 12), (65_536, 3)] {
            let word = landed_word(call, landed);
            assert_eq!(landed_in(word, call), landed, "call {call}");
            assert_eq!(landed_in(word, call + 1), 0, "the next call, {}", call + 1);
        }
        // Call 65,536 carries call 0's tag (only a word one call old is
        // ever read, so the wrap never meets a live word).
        assert_eq!(landed_in(landed_word(65_536, 5), 0), 5);
        assert_eq!(landed_in(landed_word(65_536, 5), 65_535), 0);
    }
}
