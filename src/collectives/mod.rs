//! Groups and the collectives over them (`gaspi_group_*`, `gaspi_barrier`,
//! `gaspi_allreduce`).
//!
//! A group is built locally ([`Context::group_create`],
//! [`Context::group_add`]) and then committed by all its members together
//! ([`Context::group_commit`]); only committed groups run collectives. Every
//! member must build the same member list. [`GroupId::ALL`](crate::GroupId::ALL) is committed by
//! `Context::init`.
//!
//! A collective that times out stays in progress: call it again (same
//! arguments) to keep waiting. Until it completes, a different collective on
//! the same group fails with [`Error::ActiveCollective`], or with
//! [`Error::RankFailed`] where a failed rank keeps the unfinished one from
//! ever completing (a member; any rank, for the collectives over all ranks).

pub(crate) mod agree;
mod allgatherv;
mod alltoallv;
mod alltoallv_plan;
mod barrier;
pub(crate) mod creation;
mod group_allreduce;
mod groups;
mod hierarchical;
mod layout;
mod memory;
pub mod model;
pub mod plan;
mod reduce_op;
mod timed_choice;

pub use allgatherv::{Allgatherv, AllgathervOptions};
pub use alltoallv::{Alltoallv, AlltoallvOptions};
pub use hierarchical::{Allreduce, AllreduceAlgorithm, AllreduceOptions};
pub use reduce_op::{ReduceOp, Reducible};

use crate::context::Context;
use crate::engine::wait::WaitWord;
use crate::error::{Error, Result};
use crate::segments::SegmentView;
use crate::types::{Deadline, Local, Notification, QueueId, Rank, Remote, SegmentId, Timeout};
use crate::windows::Window;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

/// Whether every rank of this rank's node is bound to one CPU, the same
/// as this rank's, by the CPUs the ranks were bound to when they joined
/// (the same answer on every rank of the node). Then a node's ranks take
/// their turns on that CPU whatever they do, and one of them sends all the
/// node's data to other nodes whatever its size (the allgatherv's blocks,
/// the alltoallv's chunks by default), where elsewhere each sends a share
/// from its own CPU above a few KiB.
pub(crate) fn node_on_one_cpu(ctx: &Context) -> bool {
    let me = ctx.rank();
    let mut node = ctx.node_ranks(ctx.node());
    node.all(|r| ctx.engine.one_cpu_together(me, r))
}

/// The local ranks that may run on this rank's CPU, where this rank is
/// bound to one CPU and every rank that may run on it is of this node
/// (`None` elsewhere, and in a job across hosts: the ranks of other hosts
/// are not known here). While they all wait in a collective's call, as
/// this rank does, for ranks of other CPUs, the call's waits may spin
/// instead of yielding: a yield would only hand the CPU to a rank that
/// hands it back (the alltoallv's and the allgatherv's claims).
pub(crate) fn core_mates(ctx: &Context) -> Option<Vec<usize>> {
    let (me, ranks) = (ctx.rank(), 0..ctx.num_ranks());
    let node = ctx.node_ranks(ctx.node());
    let engine = &ctx.engine;
    // `one_cpu_together(me, me)`: this rank is bound to one CPU.
    if !ranks.clone().all(|r| engine.same_host(r)) || !engine.one_cpu_together(me, me) {
        return None;
    }
    let mates: Vec<Rank> = ranks
        .filter(|&r| r != me && engine.may_share_cpu(me, r))
        .collect();
    let locals = mates.iter().map(|&r| (r - node.start) as usize);
    mates
        .iter()
        .all(|r| node.contains(r))
        .then(|| locals.collect())
}

/// Whether word `k` of the control line (in `control`, [`control_word`])
/// of every local rank in `mates` ([`core_mates`]: `None` where they are
/// not known) is at least `at_least`: the ranks that may run on this
/// rank's CPU have all reached a step of a call from which they only wait
/// for ranks of other CPUs, as this rank does, and its wait may spin.
pub(crate) fn core_mates_reached(
    mates: Option<&[usize]>,
    control: &SegmentView<u64>,
    k: usize,
    at_least: u64,
) -> bool {
    mates.is_some_and(|m| {
        m.iter()
            .all(|&l| control_word(control, l, k).load(SeqCst) >= at_least)
    })
}

/// Count this rank's arrival in round `round` (from 1) at a node's
/// `counter`, a word to which each of the node's `ranks` ranks adds one in
/// every round it counts, and say whether it was the round's last arrival
/// (the count is then `round * ranks`): the node's rank that sends for
/// all of them (the alltoallv's chunks and count rows, the allgatherv's
/// blocks). The add is sequentially consistent, so what the others did
/// before their arrivals (their copies into the window) happened before
/// the last one's.
pub(crate) fn last_to_arrive(counter: &AtomicU64, round: u64, ranks: u64) -> bool {
    counter.fetch_add(1, SeqCst) + 1 == round * ranks
}

/// Word `k` of local rank `local`'s control line in `control`: a
/// collective's progress words, a cache line (eight words) per local rank
/// at the start of the view, each written by its rank only.
pub(crate) fn control_word(control: &SegmentView<u64>, local: usize, k: usize) -> &AtomicU64 {
    control
        .atomic_u64(64 * local + 8 * k)
        .expect("the control lines lie 64-byte aligned in the window")
}

/// Wait until word `K` of the control lines (in `control`, a view of
/// `window`; [`control_word`]) of local ranks `locals` is at least
/// `at_least`, failing early where a rank has failed. Ranks that get
/// there later than others need not wait for them: the waits are
/// one-sided, unlike a barrier's. `K` is a constant of each build of this
/// function: as an argument it cost the allgatherv's 8-byte call 6-11%
/// (`docs/guide/benchmarking.md`, "The allgatherv's opening wait on its
/// own words").
pub(crate) fn await_control<const K: usize>(
    ctx: &Context,
    lines: (&Window, &SegmentView<u64>),
    locals: Range<usize>,
    at_least: u64,
    deadline: Deadline,
) -> Result<()> {
    await_control_or_spin::<K>(ctx, lines, locals, at_least, deadline, || false)
}

/// [`await_control`] for a caller that knows when the ranks that may run
/// on its core have nothing to do but wait, as it does, for ranks of other
/// cores: while `idle_core` says so, the automatic mode spins where it
/// would yield ([`Patience::wait_or_spin`](crate::engine::wait::Patience::wait_or_spin)).
pub(crate) fn await_control_or_spin<const K: usize>(
    ctx: &Context,
    (window, control): (&Window, &SegmentView<u64>),
    locals: Range<usize>,
    at_least: u64,
    deadline: Deadline,
    idle_core: impl FnMut() -> bool,
) -> Result<()> {
    ctx.engine.patience().wait_or_spin(
        window.object().notifications().ww,
        deadline,
        || {
            locals
                .clone()
                .all(|l| control_word(control, l, K).load(SeqCst) >= at_least)
                .then_some(())
        },
        idle_core,
        || ctx.engine.faults(),
    )
}

/// The number the next collective object with keyed messages made in
/// this process proposes
/// ([`Creation::keyed_object_id`](creation::Creation::keyed_object_id)).
static NEXT_KEYED_ID: AtomicU64 = AtomicU64::new(1);

/// This process's proposal for the number of the next collective object
/// with keyed messages.
pub(crate) fn next_keyed_id() -> u64 {
    NEXT_KEYED_ID.load(SeqCst)
}

/// The ranks agreed on number `id` (the largest of their proposals):
/// numbers only grow in a process, so no two objects of the job share
/// one.
pub(crate) fn keyed_id_taken(id: u64) {
    NEXT_KEYED_ID.fetch_max(id.saturating_add(1), SeqCst);
}

/// Run `step` until it says that the keyed messages it moves are done
/// (`Ok(true)`) or fails, in the rhythm of a wait: woken through `ww` (a
/// window's table, where the local ranks wake each other), and in naps of
/// at most 50 us for the messages, which wake nobody.
pub(crate) fn poll_keyed(
    ctx: &Context,
    ww: &WaitWord,
    deadline: Deadline,
    mut step: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let longest = Duration::from_micros(50);
    let poll = || match step() {
        Ok(false) => None,
        done => Some(done.map(|_| ())),
    };
    let check = || ctx.engine.faults();
    ctx.engine
        .patience()
        .wait_or_poll(ww, deadline, longest, poll, check)?
}

/// The notification value that tags call `call` of a collective object:
/// the call number plus one, wrapping but never 0 (credits are compared in
/// wrapping order, [`tag_reached`](crate::notifications::tag_reached)).
pub(crate) fn call_tag(call: u64) -> u32 {
    let t = (call + 1) as u32;
    if t == 0 { 1 } else { t }
}

/// `write_notify` `len` bytes from `local` of this rank's segment `segment`
/// to `remote` of `to`'s (a `notify` alone when `len` is 0), on `queue`. A
/// full queue is waited for (within `deadline`) and the post retried: the
/// collectives post more than a queue holds.
pub(crate) fn post(
    ctx: &Context,
    segment: SegmentId,
    queue: QueueId,
    to: Rank,
    bytes: (usize, usize, usize),
    n: Notification,
    deadline: Deadline,
) -> Result<()> {
    post_with(ctx, segment, queue, to, bytes, n, false, deadline)
}

/// [`post`], the copy made with non-temporal stores where `streaming`
/// and this process makes it ([`Context::write_notify_with`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn post_with(
    ctx: &Context,
    segment: SegmentId,
    queue: QueueId,
    to: Rank,
    (local, remote, len): (usize, usize, usize),
    n: Notification,
    streaming: bool,
    deadline: Deadline,
) -> Result<()> {
    let (src, dst) = (Local::new(segment, local), Remote::new(to, segment, remote));
    with_room(ctx, queue, deadline, || match len {
        0 => ctx.notify(to, segment, n, queue, Timeout::Block),
        _ => ctx.write_notify_with(src, dst, len, n, queue, streaming),
    })
}

/// Run `op`, a post on `queue`; while the queue is full, wait for it
/// (within `deadline`) and run `op` again.
pub(crate) fn with_room(
    ctx: &Context,
    queue: QueueId,
    deadline: Deadline,
    mut op: impl FnMut() -> Result<()>,
) -> Result<()> {
    loop {
        match op() {
            Err(Error::QueueFull { .. }) => ctx.wait(queue, deadline.timeout())?,
            r => return r,
        }
    }
}

/// What a collective object (and an `RmaWindow`) does when dropped: wait
/// for its queue, so that nothing it posted (in a call that timed out and
/// was given up) still reads or writes its window, then delete the window
/// segment. Errors are ignored: a drop cannot report them, and a queue
/// aimed at a failed rank fails its wait instead of hanging.
pub(crate) fn release(ctx: &Context, segment: SegmentId, queue: QueueId) {
    let _ = ctx.wait(queue, Timeout::Block);
    let _ = ctx.segment_delete(segment);
}
