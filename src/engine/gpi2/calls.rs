//! One-sided calls through GPI-2: transfers and their notifications,
//! atomics, queue completion, flush and purge.

use super::Gpi2;
use super::codes::{DOORBELL, FLUSH_QUEUE, check, corrupt_ranks, ms, queue_of, sid};
use crate::engine::transport::{AtomicOp, Post, Transfer};
use crate::engine::wait::lock;
use crate::error::{Error, Result};
use crate::types::{QueueId, Rank, SegmentId, Timeout};
use gpi2_sys as sys;
use std::collections::BTreeSet;
use std::time::Duration;

/// How long a wait on a queue with reads in flight runs inside GPI-2
/// between looks at the reads' targets ([`Gpi2::watching_reads`]).
const READ_WATCH: Duration = Duration::from_millis(1);

/// A GPI-2 queue's reads in flight.
#[derive(Clone, Debug, Default)]
pub(super) struct Reading {
    /// The ranks read from since the queue last drained.
    from: BTreeSet<Rank>,
    /// Whether a wait found a read whose target failed (see
    /// [`Gpi2::stuck`]).
    stuck: bool,
}

impl Gpi2 {
    /// Post the transfers `list` with `rank` (writes or reads), and the
    /// notification `notify` after them.
    pub(crate) fn post(
        &self,
        rank: Rank,
        list: &[Transfer],
        post: Post,
        queue: QueueId,
    ) -> Result<()> {
        let q = queue_of(queue);
        let t = sys::GASPI_BLOCK;
        let mapped: Vec<Transfer>;
        let list = if list.iter().any(|x| x.local.0 == 255 || x.remote.0 == 255) {
            mapped = list
                .iter()
                .map(|x| Transfer {
                    local: (sid(x.local.0), x.local.1),
                    remote: (sid(x.remote.0), x.remote.1),
                    size: x.size,
                })
                .collect();
            &mapped[..]
        } else {
            list
        };
        let post = match post {
            Post::Write(Some((seg, id, v))) => Post::Write(Some((sid(seg), id, v))),
            Post::Read(Some((seg, id))) => Post::Read(Some((sid(seg), id))),
            p => p,
        };
        let code = match (list, post) {
            ([], Post::Write(Some((seg, id, v)))) => {
                // SAFETY: plain call with checked arguments.
                unsafe { sys::gaspi_notify(seg, rank, id, v, q, t) }
            }
            ([x], Post::Write(None)) => {
                // SAFETY: both ranges checked against the segments.
                unsafe {
                    sys::gaspi_write(
                        x.local.0, x.local.1, rank, x.remote.0, x.remote.1, x.size, q, t,
                    )
                }
            }
            ([x], Post::Write(Some((seg, id, v)))) if seg == x.remote.0 => {
                // SAFETY: as above; the notification goes to x's segment.
                unsafe {
                    sys::gaspi_write_notify(
                        x.local.0, x.local.1, rank, x.remote.0, x.remote.1, x.size, id, v, q, t,
                    )
                }
            }
            ([x], Post::Read(None)) => {
                // SAFETY: both ranges checked against the segments.
                unsafe {
                    sys::gaspi_read(
                        x.local.0, x.local.1, rank, x.remote.0, x.remote.1, x.size, q, t,
                    )
                }
            }
            ([x], Post::Read(Some((seg, id)))) if seg == x.local.0 => {
                // SAFETY: as above; the notification is set in x's local segment.
                unsafe {
                    sys::gaspi_read_notify(
                        x.local.0, x.local.1, rank, x.remote.0, x.remote.1, x.size, id, q, t,
                    )
                }
            }
            (many, post) => {
                let n = many.len() as u32;
                let mut ls: Vec<_> = many.iter().map(|x| x.local.0).collect();
                let mut lo: Vec<_> = many.iter().map(|x| x.local.1).collect();
                let mut rs: Vec<_> = many.iter().map(|x| x.remote.0).collect();
                let mut ro: Vec<_> = many.iter().map(|x| x.remote.1).collect();
                let mut sz: Vec<_> = many.iter().map(|x| x.size).collect();
                let (ls, lo, rs, ro, sz) = (
                    ls.as_mut_ptr(),
                    lo.as_mut_ptr(),
                    rs.as_mut_ptr(),
                    ro.as_mut_ptr(),
                    sz.as_mut_ptr(),
                );
                // SAFETY: in each arm, five arrays of `n` elements, alive
                // for the call (GPI-2 copies them into its queue entries).
                unsafe {
                    match post {
                        Post::Write(None) => {
                            sys::gaspi_write_list(n, ls, lo, rank, rs, ro, sz, q, t)
                        }
                        Post::Write(Some((seg, id, v))) => sys::gaspi_write_list_notify(
                            n, ls, lo, rank, rs, ro, sz, seg, id, v, q, t,
                        ),
                        Post::Read(None) => sys::gaspi_read_list(n, ls, lo, rank, rs, ro, sz, q, t),
                        Post::Read(Some((seg, id))) => {
                            sys::gaspi_read_list_notify(n, ls, lo, rank, rs, ro, sz, seg, id, q, t)
                        }
                    }
                }
            }
        };
        check("gaspi_write/read", code, Some(rank)).map_err(|e| match e {
            Error::QueueFull { .. } => Error::QueueFull {
                queue,
                posted: self.queue_size(queue),
                max: self.queue_size_max(),
            },
            e => e,
        })?;
        match post {
            Post::Write(_) => lock(&self.unflushed).written(q as usize, rank),
            // The flush's reads are watched by their notifications.
            Post::Read(_) if queue != FLUSH_QUEUE => {
                lock(&self.reading)[q as usize].from.insert(rank);
            }
            Post::Read(_) => {}
        }
        Ok(())
    }

    fn queue_size(&self, queue: QueueId) -> u32 {
        let mut n = 0;
        // SAFETY: out pointer to a local.
        unsafe { sys::gaspi_queue_size(queue_of(queue), &mut n) };
        n
    }

    fn queue_size_max(&self) -> u32 {
        let mut n = 0;
        // SAFETY: out pointer to a local.
        unsafe { sys::gaspi_queue_size_max(&mut n) };
        n
    }

    /// Wake the waiters of `rank`'s node on window `segment` (after an
    /// atomic on it): the doorbell notification, relayed as a wake-up.
    pub(crate) fn ring(&self, rank: Rank, segment: SegmentId, queue: QueueId) -> Result<()> {
        self.post(rank, &[], Post::Write(Some((segment, DOORBELL, 1))), queue)?;
        // Nobody else waits for these requests.
        self.wait(queue, Timeout::Block, &|_| true)
    }

    /// A GPI-2 atomic on the word at `offset` of `rank`'s `segment`.
    pub(crate) fn atomic(
        &self,
        rank: Rank,
        segment: SegmentId,
        offset: usize,
        op: AtomicOp,
        timeout: Timeout,
    ) -> Result<u64> {
        let mut old = 0u64;
        let off = offset as u64;
        // SAFETY: in both arms, an out pointer to a local; the offset was
        // checked against the segment's size.
        let code = unsafe {
            match op {
                AtomicOp::FetchAdd(v) => {
                    sys::gaspi_atomic_fetch_add(sid(segment), off, rank, v, &mut old, ms(timeout))
                }
                AtomicOp::CompareSwap { old: c, new } => sys::gaspi_atomic_compare_swap(
                    sid(segment),
                    off,
                    rank,
                    c,
                    new,
                    &mut old,
                    ms(timeout),
                ),
            }
        };
        check("gaspi_atomic", code, Some(rank))?;
        Ok(old)
    }

    /// Wait until the requests posted on `queue` have completed locally
    /// (`gaspi_wait`).
    /// A request that failed (its target died) ends the wait with
    /// [`Error::RankFailed`] naming a rank GPI-2's state vector marks
    /// corrupt; GPI-2 has taken that request off the queue, so waiting
    /// again waits for the others. A read whose target `alive` rules out
    /// ends it with [`Error::RankFailed`] too, and the queue is then
    /// [`Gpi2::stuck`] (see [`Gpi2::watching_reads`]).
    pub(crate) fn wait(
        &self,
        queue: QueueId,
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        // GPI-2's own (spinning) wait: with `wait_napping` here, passive
        // messages and write_notify across hosts were 2-4x faster, but one
        // CI run in three saw a write completed by `wait` not yet at its
        // target after a barrier (tests/collectives.rs,
        // barrier_orders_writes_before_and_after_it): GPI-2's TCP device
        // completes a write once it is in the socket, so the race existed
        // either way (seen again with this wait); barriers now flush
        // first (`flush.rs`), and napping here could be measured again.
        // SAFETY: plain call.
        self.complete(queue, timeout, alive, "gaspi_wait", |q, t| unsafe {
            sys::gaspi_wait(q, t)
        })
    }

    /// Discard the requests of `queue` (`gaspi_queue_purge`; GPI-2's TCP
    /// device waits for them, so it fails as [`Gpi2::wait`] does).
    pub(crate) fn purge(
        &self,
        queue: QueueId,
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
    ) -> Result<()> {
        // SAFETY: plain call.
        self.complete(queue, timeout, alive, "gaspi_queue_purge", |q, t| unsafe {
            sys::gaspi_queue_purge(q, t)
        })
    }

    /// [`Gpi2::wait`] and [`Gpi2::purge`]: run `call` (named `name`) on
    /// `queue`'s GPI-2 queue while watching its reads; a GPI-2 error with
    /// a rank marked corrupt is that rank's failure.
    fn complete(
        &self,
        queue: QueueId,
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
        name: &'static str,
        call: impl Fn(sys::gaspi_queue_id_t, sys::gaspi_timeout_t) -> sys::gaspi_return_t,
    ) -> Result<()> {
        let q = queue_of(queue);
        let code = self.watching_reads(q, timeout, alive, |t| call(q, t))?;
        match self.corrupt_ranks().first() {
            Some(&rank) if code == sys::GASPI_ERROR => Err(Error::RankFailed { rank }),
            _ => check(name, code, None),
        }
    }

    /// Run `call` (GPI-2's wait or purge of GPI-2 queue `q`, given a
    /// timeout in ms) until `timeout`. While `q` has reads in flight (since
    /// it last drained), it runs in slices of [`READ_WATCH`] and fails
    /// with [`Error::RankFailed`] once a read's target is not `alive`: a
    /// target that dies after taking a read never answers, and GPI-2's TCP
    /// device never fails such a read (see `flush.rs`), so the queue would
    /// never drain. The queue is then [`Gpi2::stuck`] until it drains.
    fn watching_reads(
        &self,
        q: sys::gaspi_queue_id_t,
        timeout: Timeout,
        alive: &dyn Fn(Rank) -> bool,
        call: impl Fn(sys::gaspi_timeout_t) -> sys::gaspi_return_t,
    ) -> Result<sys::gaspi_return_t> {
        let from: Vec<Rank> = lock(&self.reading)[q as usize]
            .from
            .iter()
            .copied()
            .collect();
        if from.is_empty() {
            return Ok(call(ms(timeout)));
        }
        let deadline = timeout.deadline();
        let code = loop {
            let code = call(match deadline.remaining() {
                Some(left) if left.is_zero() => sys::GASPI_TEST,
                left => ms(Timeout::After(left.unwrap_or(READ_WATCH).min(READ_WATCH))),
            });
            if code != sys::GASPI_TIMEOUT {
                break code;
            }
            // A dead target before the deadline: a short timeout must not
            // turn a read that can never complete into a mere timeout.
            if let Some(&rank) = from.iter().find(|&&r| !alive(r)) {
                lock(&self.reading)[q as usize].stuck = true;
                return Err(Error::RankFailed { rank });
            }
            if deadline.expired() {
                break code;
            }
        };
        if code == sys::GASPI_SUCCESS {
            let mut reading = lock(&self.reading);
            reading[q as usize].from.retain(|r| !from.contains(r));
            reading[q as usize].stuck = false;
        }
        Ok(code)
    }

    /// Whether `queue` holds a read that its failed target will never
    /// answer (its last wait or purge said so): waiting again fails again
    /// (GPI-2 offers no way to drop the read), and only a queue that
    /// drains, if the read does complete, is whole again.
    pub(crate) fn stuck(&self, queue: QueueId) -> bool {
        lock(&self.reading)[queue_of(queue) as usize].stuck
    }

    /// Ranks GPI-2's state vector marks corrupt (a request to them failed).
    pub(crate) fn corrupt_ranks(&self) -> Vec<Rank> {
        corrupt_ranks()
    }
}
