//! The boundary between the engine and a way to reach ranks whose memory
//! this process cannot map: the [`Transport`] trait and the requests it
//! takes.
//!
//! The engine ([`Native`](super::Native)) reaches every rank of its host
//! through mapped memory. A job that spans hosts (or nodes emulated as
//! hosts) also has a transport, chosen once at start-up
//! ([`super::start`]), that carries what crosses hosts: transfers and
//! their notifications, atomics, segment registration and remote sizes,
//! groups and their collectives, passive messages, failure news and queue
//! completion. The GASPI API never calls a transport: it asks the engine,
//! which asks the transport only for what its mappings cannot do.
//!
//! Two implementations exist: GPI-2 (feature `gpi2`, `engine::gpi2`) and
//! MPI-3 one-sided communication (feature `mpi`, `engine::mpi`).

// Without a transport feature no implementation reads the requests.
#![cfg_attr(not(any(feature = "gpi2", feature = "mpi")), allow(dead_code))]

use super::inbox::Inbox;
use super::job::{JobBlock, ObjectId};
use super::lent::Lent;
use super::segment::{SegmentObject, Span};
use super::wait::{Patience, Progress};
use crate::config::Engine;
use crate::error::{Error, Result};
use crate::types::{
    Deadline, NotificationId, NotificationValue, QueueId, Rank, SegmentId, Timeout,
};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Notification ids a write can carry to another host: `0..IDS`.
pub(crate) const IDS: NotificationId = 65_536;

/// Longest nap of a passive sender waiting for its acknowledgement from
/// another host, and of a receiver pulling other hosts' messages itself.
pub(crate) const PASSIVE_NAP: std::time::Duration = std::time::Duration::from_micros(100);

/// A passive message that left for another host while its send timed out
/// before the receiver answered: by its arguments (receiver, segment
/// object, offset, length) and the thread that sent it. GASPI lets the
/// caller repeat a call that timed out to go on waiting, so the next send
/// of that thread with the same arguments continues this one (waits for
/// its answer, sends nothing); any other send waits for that answer first,
/// then sends its own (and keeps the answer for the repeat, if another
/// thread sent the message: [`KeptAnswers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SentMessage {
    pub(crate) rank: Rank,
    object: ObjectId,
    offset: usize,
    len: usize,
    thread: std::thread::ThreadId,
}

thread_local! {
    /// This thread's id, for [`SentMessage`] (`thread::current` clones a
    /// handle on every call).
    static THREAD: std::thread::ThreadId = std::thread::current().id();
}

/// Answers that a send took for other threads' messages that timed out
/// ([`SentMessage`]): each kept until its thread's next send, which
/// returns with it if it repeats that message and drops it otherwise (the
/// thread gave the message up). One per thread; `A` is the engine's answer.
#[derive(Debug)]
pub(crate) struct KeptAnswers<A>(Vec<(SentMessage, A)>);

impl<A> Default for KeptAnswers<A> {
    fn default() -> Self {
        KeptAnswers(Vec::new())
    }
}

impl<A: Copy> KeptAnswers<A> {
    /// `answer` answered `message`, taken by a send of `taker`'s thread:
    /// kept if another thread sent the message.
    pub(crate) fn keep(&mut self, message: SentMessage, answer: A, taker: &SentMessage) {
        if message.thread != taker.thread {
            self.0.retain(|(m, _)| m.thread != message.thread);
            self.0.push((message, answer));
        }
    }

    /// The answer kept for `this` send if it repeats its thread's message;
    /// any other answer kept for its thread is dropped.
    pub(crate) fn take_for(&mut self, this: &SentMessage) -> Option<A> {
        let i = self.0.iter().position(|(m, _)| m.thread == this.thread)?;
        let (m, answer) = self.0.swap_remove(i);
        (m == *this).then_some(answer)
    }
}

/// What the answer to a passive message of `len` bytes means for its
/// send: delivered, or (`refused`) refused by `rank`'s relay as larger
/// than its inbox's slots.
pub(crate) fn delivered(refused: bool, len: usize, rank: Rank) -> Result<()> {
    if refused {
        return Err(Error::InvalidArgument(format!(
            "a passive message of {len} bytes does not fit rank {rank}'s inbox \
             (its Config::passive_transfer_size_max is smaller)"
        )));
    }
    Ok(())
}

impl SentMessage {
    /// The message `msg` to `rank`, sent by this thread.
    pub(crate) fn new(rank: Rank, msg: &Span<'_>) -> SentMessage {
        SentMessage {
            rank,
            object: msg.obj.id(),
            offset: msg.off,
            len: msg.len,
            thread: THREAD.with(|t| *t),
        }
    }
}

/// Combines two partial allreduce results of adjacent member ranges,
/// `(lower, upper, out)`, as bytes.
pub(crate) type Combine<'a> = dyn FnMut(&[u8], &[u8], &mut [u8]) + 'a;

/// This rank's contribution to an allreduce over a twin
/// ([`Transport::allreduce_ordered`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Contribution<'a> {
    /// This rank's position in the group.
    pub(crate) index: usize,
    /// What every member's contribution must share (its length and
    /// element type), as one word: contributions that differ in it are
    /// not combined, and every member fails alike.
    pub(crate) shape: u64,
    /// The bytes.
    pub(crate) send: &'a [u8],
}

/// The error of an allreduce whose members' contributions differ in
/// length or element type ([`Contribution::shape`]), on every member.
pub(crate) fn contributions_differ() -> Error {
    Error::InvalidArgument(
        "allreduce: the members gave contributions of different lengths or element types".into(),
    )
}

/// An atomic on an 8-byte word, as every engine offers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    FetchAdd(u64),
    CompareSwap { old: u64, new: u64 },
}

impl AtomicOp {
    /// Run it on a mapped word; returns the old value.
    pub(crate) fn apply(self, w: &AtomicU64) -> u64 {
        match self {
            AtomicOp::FetchAdd(v) => w.fetch_add(v, SeqCst),
            AtomicOp::CompareSwap { old, new } => {
                match w.compare_exchange(old, new, SeqCst, SeqCst) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
    }
}

/// One transfer: (segment, offset) here and there, and its size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transfer {
    pub(crate) local: (SegmentId, u64),
    pub(crate) remote: (SegmentId, u64),
    pub(crate) size: u64,
}

/// What a list of transfers is, with its notification: for writes (segment
/// of the target, id, value), for reads (local segment, id; set to 1).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Post {
    Write(Option<(SegmentId, NotificationId, NotificationValue)>),
    Read(Option<(SegmentId, NotificationId)>),
}

/// A way to reach ranks whose memory this process cannot map.
///
/// Calls name segments by our ids (the reserved segment included) and
/// queues by our ids (the reserved queue included); the implementation maps
/// them onto its own. Every call has been checked by the engine against
/// what it knows (ranks, local ranges, notification ids); remote ranges are
/// checked against [`Transport::remote_size`].
pub(crate) trait Transport: Send + Sync + std::fmt::Debug {
    /// Which engine this transport makes ([`Engine`]).
    fn kind(&self) -> Engine;

    /// Whether every notification a target receives through this transport
    /// counts once in a window's `posted` counter. A transport that moves
    /// notifications into the node's table after the fact (a relay) may
    /// count two with the same id that arrive between two moves once.
    fn counts_each_notification(&self) -> bool;

    // --- segments -------------------------------------------------------

    /// Make `obj`, this rank's segment or its node's window `segment`,
    /// reachable through the transport.
    fn bind(&self, segment: SegmentId, obj: &Arc<SegmentObject>, window: bool) -> Result<()>;
    /// Undo [`Transport::bind`].
    fn unbind(&self, segment: SegmentId);
    /// Whether ranks of other hosts may still write into a segment after
    /// [`Transport::unbind`] (their registration outlives it): then the
    /// engine keeps the memory until this rank terminates.
    fn writes_after_delete(&self) -> bool;
    /// The smallest pipelining block the collectives should cut for
    /// another host (0: no floor): below it a notified write's fixed cost
    /// outweighs what pipelining gains.
    fn block_bytes_min(&self) -> usize;
    /// Whether the transport's group collectives ([`Transport::barrier`],
    /// [`Transport::allreduce_ordered`]) beat notified writes between
    /// hosts (MPI: one message where a notified write takes two round
    /// trips): then the node-aware barrier crosses hosts through them,
    /// among the first ranks of the nodes.
    fn host_collectives_fast(&self) -> bool;
    /// Whether one-sided calls between this job's hosts are memory copies
    /// (hosts emulated on one machine, whose bytes MPI moves through its
    /// shared memory): then notified writes cost little against messages.
    fn one_sided_in_memory(&self) -> bool {
        false
    }
    /// Let `rank` access segment `segment` of this rank.
    fn register(&self, segment: SegmentId, rank: Rank, timeout: Timeout) -> Result<()>;
    /// Size of segment `segment` of `rank` as registered with this rank.
    fn remote_size(&self, rank: Rank, segment: SegmentId) -> Option<usize>;

    // --- one-sided ------------------------------------------------------

    /// Post `list` with `rank` (writes or reads) and the notification
    /// after them; the notification is never seen before the data.
    fn post(&self, rank: Rank, list: &[Transfer], post: Post, queue: QueueId) -> Result<()>;
    /// Whether [`Transport::put_from`] works (GPI-2 writes only from
    /// registered memory: no).
    fn puts_from_memory(&self) -> bool {
        false
    }
    /// Write `pieces`, each memory of this process that need not lie in a
    /// segment and its offset in `rank`'s `segment`, complete at the
    /// target when the call returns, on no queue. The engine checked the
    /// ranges against [`Transport::remote_size`].
    fn put_from(&self, rank: Rank, _segment: SegmentId, _pieces: &[(&[u8], usize)]) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "the {:?} engine writes to rank {rank} only from registered segments",
            self.kind()
        )))
    }
    /// Wake the waiters of `rank`'s node on window `segment` (after an
    /// atomic on it).
    fn ring(&self, rank: Rank, segment: SegmentId, queue: QueueId) -> Result<()>;
    /// An atomic on the word at `offset` of `rank`'s `segment`.
    fn atomic(
        &self,
        rank: Rank,
        segment: SegmentId,
        offset: usize,
        op: AtomicOp,
        timeout: Timeout,
    ) -> Result<u64>;
    /// Local completion of `queue`'s requests. A request whose target
    /// `alive` rules out may end the wait with
    /// [`Error::RankFailed`] where the
    /// transport could not complete it otherwise.
    fn wait(&self, queue: QueueId, timeout: Timeout, alive: &dyn Fn(Rank) -> bool) -> Result<()>;
    /// Whether `queue` holds a request that will never complete (its last
    /// wait failed for it), so that waiting again cannot help.
    fn stuck(&self, _queue: QueueId) -> bool {
        false
    }
    /// Wait for `queue`, then make every write posted to it since the last
    /// flush visible at its target (`remote`: a byte of a segment every
    /// rank has registered with every other). A target that `alive` says
    /// has failed or left, or that fails meanwhile, fails the flush
    /// ([`Error::RankFailed`]) instead of
    /// holding it up.
    fn flush(
        &self,
        queue: QueueId,
        remote: (SegmentId, u64),
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()>;
    /// Before a barrier: [`Transport::flush`] every user queue with writes
    /// since its last flush, so that a write completed by `wait` is at its
    /// target once the barrier ends. Nothing where `wait` completes writes
    /// at their targets already (the default). Targets that `alive` says
    /// have failed or left, or that fail meanwhile, are skipped: nothing
    /// can complete a write to them.
    fn flush_written(
        &self,
        _remote: (SegmentId, u64),
        _timeout: Timeout,
        _alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        Ok(())
    }
    /// A barrier over `members` has just ended on this rank: every member
    /// ran [`Transport::flush_written`] before it entered, so memory of
    /// segments deleted before this rank entered, that only `members` (or
    /// ranks gone) could reach, may go now. Nothing by default.
    fn barrier_passed(&self, _members: &[Rank]) {}
    /// Discard `queue`'s requests (`alive` as for [`Transport::wait`]).
    fn purge(&self, queue: QueueId, timeout: Timeout, alive: &dyn Fn(Rank) -> bool) -> Result<()>;
    /// Move notifications `ids` of `segment` that arrived through the
    /// transport into `obj`'s table.
    fn pump(&self, segment: SegmentId, obj: &SegmentObject, ids: Range<NotificationId>);
    /// One cheap call that lets the transport serve what other processes
    /// do to this one (MPI's passive target: one-sided operations to a
    /// dynamic window are active messages on transports without remote
    /// memory access in hardware, served only while the target calls
    /// MPI). Every wait gives it as it spins and yields
    /// ([`Patience::progressing`]). Nothing by default.
    fn progress(&self) {}

    // --- failures -------------------------------------------------------

    /// Ranks a request to failed (dead or unreachable).
    fn corrupt_ranks(&self) -> Vec<Rank>;

    /// End `rank`, a running rank of another host (`proc_kill`); returns
    /// once the rank's host took the request (the rank ends then).
    fn kill(&self, rank: Rank, timeout: Timeout) -> Result<()>;

    // --- passive --------------------------------------------------------

    /// Send the message `msg` to `rank` on another host; returns once it is
    /// in its inbox. `alive` fails if `rank` is known gone; `patience` is
    /// how to wait for the receiver's answer. A send that timed out after
    /// its message left is continued by the next with the same arguments
    /// ([`SentMessage`]).
    fn passive_send(
        &self,
        rank: Rank,
        msg: Span<'_>,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
        patience: &Patience<'_>,
    ) -> Result<()>;
    /// Take one passive message from another host into this rank's inbox,
    /// if one waits; whether anything was done.
    fn passive_pump(&self) -> bool;
    /// Start serving other hosts: their passive messages into `inbox`,
    /// failures between this host (`host`, whose control block is `block`)
    /// and the others; `probe`: look for dead processes of this host
    /// (nobody else does).
    fn relay_enable(&self, inbox: Inbox, block: JobBlock, host: Range<usize>, probe: bool);

    // --- groups spanning hosts -------------------------------------------

    /// Make sure the transport has a twin of our new group `id`.
    fn group_create(&self, id: u8) -> Result<()>;
    /// Our group `id` was deleted.
    fn group_delete(&self, id: u8);
    /// Prepare the twin of `id` for a commit with `members`.
    fn group_prepare(&self, id: u8, members: &[Rank]) -> Result<()>;
    /// Commit the twin of `id` (call again after a timeout). `patience`
    /// is how a transport that waits in our code (not in its library's
    /// calls) waits, as for [`Transport::passive_send`].
    fn group_commit(&self, id: u8, timeout: Timeout, patience: &Patience<'_>) -> Result<()>;
    /// Barrier over the twin of `id` (call again after a timeout).
    fn barrier(&self, id: u8, timeout: Timeout, patience: &Patience<'_>) -> Result<()>;
    /// Allreduce over the twin of `id` that combines contributions in
    /// member order: bit-identical on every member, `combine` need not be
    /// commutative. Where the members' shapes differ, every member gets
    /// [`contributions_differ`] (and nothing is combined); a member whose
    /// contribution is longer must not break the others' receives.
    fn allreduce_ordered(
        &self,
        id: u8,
        mine: Contribution<'_>,
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
        patience: &Patience<'_>,
    ) -> Result<()>;

    // --- keyed messages between hosts ------------------------------------

    /// Whether [`Transport::keyed_send`] and [`Transport::keyed_take`]
    /// work (the collectives exchange small node partials through them).
    fn keyed_messages(&self) -> bool {
        false
    }
    /// Send `data` to `rank` as the message of `key` (a collective object's
    /// number, then its call's), as much of it as the transport takes now:
    /// `true` once all of it went and the transport is done with `data`.
    /// Until then call again with the same key and data (a call with
    /// another key starts that message, once the rest of the old one went:
    /// a message begun is always sent whole). Keys from one sender to one
    /// receiver only grow. The
    /// transport reads `data` where it lies, also after this returns: the
    /// lender leaves its bytes unwritten until a call for `key` returned
    /// `true`, or for good if it gives the message up.
    fn keyed_send(&self, _rank: Rank, _key: Key, _data: &Lent) -> Result<bool> {
        Err(Error::Environment(
            "this transport has no keyed messages".into(),
        ))
    }
    /// Take `rank`'s message of `key` into `into`, if it has arrived
    /// (`false`: not yet). Its messages of smaller keys of the same object
    /// are stale (a call given up) and are dropped; larger ones are kept
    /// for later. A message of `key` of another length than `into`'s is
    /// an error. The transport writes `into` where it lies, also after this
    /// returns: the lender neither reads nor writes its bytes until a call
    /// for `key` returned `true`, a call for a later key of the same
    /// object from `rank` returned, or [`Transport::keyed_forget`] of the
    /// object did; every call for `key` lends the same bytes.
    fn keyed_take(&self, _rank: Rank, _key: Key, _into: &Lent) -> Result<bool> {
        Err(Error::Environment(
            "this transport has no keyed messages".into(),
        ))
    }
    /// How many bytes of `rank`'s message of `key` have landed in the
    /// memory lent to [`Transport::keyed_take`], counted from its start
    /// (pieces land in order): the caller may read them while the rest
    /// comes. 0 where nothing is known (the message is not being taken,
    /// or was taken whole).
    fn keyed_landed(&self, _rank: Rank, _key: Key) -> usize {
        0
    }
    /// Object `object` is gone: the messages it was taking are given up
    /// (their memory is the lender's again), and the rest of the messages
    /// it began to send goes (from memory the transport keeps mapped).
    fn keyed_forget(&self, _object: u64) {}
    /// Object `object`, which sends and takes keyed messages, was made by
    /// every rank of the job (objects' numbers only grow): while no two
    /// objects share their tags, a receiver may post a message's receives
    /// before its head comes.
    fn keyed_made(&self, _object: u64) {}

    // --- the end --------------------------------------------------------

    /// This rank has terminated cleanly (its state is published on its
    /// host): tell the ranks of other hosts, before its segments go, so
    /// that their operations on it fail at once as on one host.
    fn depart(&self);

    /// Leave: `failed` if this rank is going down abnormally,
    /// `peers_failed` if another rank is known dead. Returns whether the
    /// transport stays up until the process exits (it could not leave
    /// together with every rank): ranks of other hosts may then still
    /// write into memory this rank gave it, deleted segments included,
    /// and the engine keeps that memory mapped until the process exits.
    fn term(&self, failed: bool, peers_failed: bool) -> bool;
}

/// What a keyed message belongs to ([`Transport::keyed_send`]): a
/// collective object's number (the same on every rank) and its call's.
pub(crate) type Key = (u64, u64);

impl Progress for Box<dyn Transport> {
    fn progress(&self) {
        Transport::progress(self.as_ref());
    }
}
