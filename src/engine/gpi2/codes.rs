//! How our ids, timeouts and errors translate to GPI-2's and back.

use crate::config::RESERVED_SEGMENT;
use crate::engine::transport::IDS;
use crate::error::{Error, Result};
use crate::types::{Deadline, NotificationId, QueueId, Rank, SegmentId, Timeout};
use gpi2_sys as sys;

/// GPI-2 queues used: all it has; the runtime's own queue is the last,
/// the flush's reads ([`FLUSH_QUEUE`]) take the one before it, the user
/// has the others.
pub(super) const QUEUES: u32 = 16;

/// The GPI-2 queue of flush reads (`calls.rs`), the runtime's alone: a
/// read whose target dies after taking it never completes on GPI-2's TCP
/// device (only requests being sent or answered when a connection drops
/// get an error completion), so the queue it was posted on never drains
/// again. Here no `gaspi_wait` ever waits for it: a read's completion is
/// seen by its notification, and the queue is drained by tests.
pub(super) const FLUSH_QUEUE: QueueId = QUEUES as QueueId - 2;

/// The GPI-2 notification id the relay turns into a wake-up of the node.
pub(super) const DOORBELL: NotificationId = IDS;

/// A GPI-2 return code as our error: timeouts and full queues as their
/// variants, a failed rank from GPI-2's state vector, anything else with
/// GPI-2's name for it.
pub(super) fn check(
    call: &'static str,
    code: sys::gaspi_return_t,
    peer: Option<Rank>,
) -> Result<()> {
    match code {
        sys::GASPI_SUCCESS => Ok(()),
        sys::GASPI_TIMEOUT => Err(Error::Timeout),
        sys::GASPI_QUEUE_FULL => Err(Error::QueueFull {
            queue: 0,
            posted: 0,
            max: 0,
        }),
        _ => {
            if let Some(rank) = peer.filter(|&r| corrupt(r)) {
                return Err(Error::RankFailed { rank });
            }
            Err(Error::Engine {
                call,
                code,
                name: sys::return_name(code).unwrap_or("unknown GPI-2 return code"),
            })
        }
    }
}

/// Whether GPI-2's state vector marks `rank` as corrupt (a failed
/// operation on it: the rank is dead or unreachable).
pub(super) fn corrupt(rank: Rank) -> bool {
    states().get(rank as usize) == Some(&sys::GASPI_STATE_CORRUPT)
}

/// Ranks GPI-2's state vector marks corrupt.
pub(super) fn corrupt_ranks() -> Vec<Rank> {
    states()
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == sys::GASPI_STATE_CORRUPT)
        .map(|(r, _)| r as Rank)
        .collect()
}

/// GPI-2's state vector (empty if GPI-2 cannot give it).
pub(super) fn states() -> Vec<sys::gaspi_state_t> {
    let mut n: sys::gaspi_rank_t = 0;
    // SAFETY: out pointer to a local.
    if unsafe { sys::gaspi_proc_num(&mut n) } != sys::GASPI_SUCCESS {
        return Vec::new();
    }
    let mut states = vec![sys::GASPI_STATE_HEALTHY; n as usize];
    // SAFETY: GPI-2 writes one state per rank into a vector of that length.
    let ok = unsafe { sys::gaspi_state_vec_get(states.as_mut_ptr()) } == sys::GASPI_SUCCESS;
    if ok { states } else { Vec::new() }
}

/// A timeout in GPI-2's milliseconds.
pub(super) fn ms(t: Timeout) -> sys::gaspi_timeout_t {
    match t {
        Timeout::Block => sys::GASPI_BLOCK,
        Timeout::Test => sys::GASPI_TEST,
        Timeout::After(d) => (d.as_millis() as u64).clamp(1, sys::GASPI_BLOCK - 1),
    }
}

/// Our queue as a GPI-2 queue: user queues (`0..14` on this engine, see
/// `Engine::queue_max`) and [`FLUSH_QUEUE`] one to one, the runtime's own
/// queue on the last GPI-2 queue, which is the runtime's alone.
pub(super) fn queue_of(q: QueueId) -> sys::gaspi_queue_id_t {
    q.min(QUEUES as u8 - 1)
}

/// GPI-2's segment ids are `0..255`: the runtime's reserved segment (255)
/// becomes GPI-2's 254, and 253 is each process's private scratch page
/// ([`SCRATCH`]); the engine takes both from the user's ids
/// (`Config::segment_max` is at most 253 under it).
pub(super) const GPI2_SEGMENTS: u32 = 255;

/// GPI-2 segment of this process's scratch page, where flush reads land.
pub(super) const SCRATCH: SegmentId = (GPI2_SEGMENTS - 2) as SegmentId;
pub(super) const SCRATCH_BYTES: usize = 4096;

pub(super) fn sid(s: SegmentId) -> sys::gaspi_segment_id_t {
    if s == RESERVED_SEGMENT {
        (GPI2_SEGMENTS - 1) as u8
    } else {
        s
    }
}

/// How long [`poll_yielding`] yields before it naps.
const YIELDING: std::time::Duration = std::time::Duration::from_micros(100);

/// Poll `step` until it yields a value, fails, or `deadline` passes
/// ([`Error::Timeout`]; `step` runs at least once): the first
/// [`YIELDING`] it yields the CPU between tries, then naps (up to 50 us).
/// For completions that GPI-2's device thread posts: with fewer cores than
/// busy threads, spinning would keep that thread off its core, and a
/// completion posted within microseconds costs no nap (a nap from the
/// start cost 50-100 us more per passive message across hosts, measured).
pub(super) fn poll_yielding<T>(
    deadline: Deadline,
    mut step: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    if let Some(v) = step()? {
        return Ok(v);
    }
    let start = std::time::Instant::now();
    while start.elapsed() < YIELDING && !deadline.expired() {
        std::thread::yield_now();
        if let Some(v) = step()? {
            return Ok(v);
        }
    }
    crate::engine::wait::poll_with_naps(deadline, std::time::Duration::from_micros(50), step)
}

/// `gaspi_wait` on `q` until `timeout`, testing with [`poll_yielding`]:
/// GPI-2's own wait spins holding the mutex of the queue's completions,
/// which its device thread needs to post them, so with fewer cores than
/// busy threads a completion waited for that way arrives a scheduler slice
/// late. Used by the runtime's own waits (the relay's passive intake); a
/// user's `wait` still spins in GPI-2 (see `calls.rs`).
pub(super) fn wait_napping(q: sys::gaspi_queue_id_t, timeout: Timeout) -> sys::gaspi_return_t {
    // SAFETY: plain call.
    let test = || unsafe { sys::gaspi_wait(q, sys::GASPI_TEST) };
    let waited = poll_yielding(timeout.deadline(), || {
        Ok(match test() {
            sys::GASPI_TIMEOUT => None,
            code => Some(code),
        })
    });
    waited.unwrap_or(sys::GASPI_TIMEOUT)
}
