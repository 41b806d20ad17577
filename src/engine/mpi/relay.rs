//! The relay thread: what other hosts deliver to this process while its
//! rank does not look (notifications into windows, doorbells, passive
//! messages, departures) is moved where the node's ranks see it, and MPI
//! is given the progress that passive-target operations to this process
//! need (MPICH over UCX, for one, serves puts to a dynamic window only
//! when the target calls into MPI).

use super::ffi;
use super::intake::Intake;
use super::landing::Landing;
use super::watch::Watch;
use crate::engine::job::JobBlock;
use crate::engine::segment::SegmentObject;
use crate::engine::transport::IDS;
use crate::engine::wait::{lock, relay_naps};
use crate::types::SegmentId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A segment or window attached to the window.
pub(super) struct Bound {
    pub(super) obj: Arc<SegmentObject>,
    /// Its data's attachment (shared with the segment it lies inside).
    pub(super) data: Arc<Attached>,
    pub(super) landing: Arc<Landing>,
    /// A node-shared window: its landing is relayed always.
    pub(super) window: bool,
    /// Ranks whose directories describe it.
    pub(super) registered: BTreeSet<usize>,
}

/// Memory attached to the window, detached when the last segment whose
/// data lies in it goes: a segment bound inside another's data shares
/// that one's attachment, as MPI forbids attaching memory twice.
pub(super) struct Attached {
    pub(super) win: ffi::Win,
    pub(super) base: *mut u8,
}

// SAFETY: the address is only handed to MPI (thread-multiple), never
// dereferenced here.
unsafe impl Send for Attached {}
// SAFETY: as Send.
unsafe impl Sync for Attached {}

impl Drop for Attached {
    fn drop(&mut self) {
        ffi::detach(self.win, self.base);
    }
}

/// What the relay thread shares with the rank.
pub(super) struct Shared {
    pub(super) bound: Mutex<BTreeMap<SegmentId, Bound>>,
    pub(super) stop: AtomicBool,
    /// The rank is terminating (its watch pings no more).
    pub(super) leaving: AtomicBool,
    pub(super) intake: Mutex<Option<Intake>>,
    pub(super) block: Mutex<Option<JobBlock>>,
    /// Failures across hosts, once enabled.
    pub(super) watch: Mutex<Option<Watch>>,
    pub(super) win: ffi::Win,
    pub(super) comm: ffi::Comm,
    /// When the rank last gave MPI progress itself and moved what it
    /// waits for ([`Shared::since`]).
    pub(super) pumped: AtomicU64,
    /// What [`Shared::since`] counts from.
    pub(super) epoch: Instant,
}

impl Shared {
    /// Microseconds since `epoch` (saturating: 584,000 years).
    pub(super) fn since(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

/// Microseconds since the rank last gave MPI progress itself
/// ([`Shared::pumped`]) within which the relay leaves a round out: the
/// rank is polling, and moves what it waits for.
const POLLED_US: u64 = 200;

/// The longest time, in microseconds, between two rounds of the relay
/// while the rank polls: what only the relay moves (other ids and
/// segments, doorbells, passive messages, failure news) waits no longer.
/// Each round takes the rank's core (`mpirun` binds the relay with its
/// rank): with Intel MPI, 2 hosts of one rank on the 2-core AMD EPYC VM,
/// rounds every 20 us made a notified write 1.3 times as long and an
/// allreduce of notified writes of up to 4 KiB 1.6 times as long
/// (docs/guide/mpi.md, "The relay thread, left out while the rank
/// polls").
const POLLED_ROUND_US: u64 = 1000;

/// Move what landed for the bound segments: every window, and segments
/// with a sleeping waiter; take doorbells. Whether anything moved, and
/// whether someone sleeps or a flush outlasted the last round (`flushes`:
/// [`ffi::flushing`] at the last round, kept by the caller). Left out
/// (nothing moved, no one waits) while the rank polls, up to
/// [`POLLED_ROUND_US`] after the last round (`last`).
fn relay_once(sh: &Shared, flushes: &mut Option<u64>, last: &mut u64) -> (bool, bool) {
    let now_us = sh.since();
    if now_us.saturating_sub(sh.pumped.load(SeqCst)) < POLLED_US
        && now_us.saturating_sub(*last) < POLLED_ROUND_US
    {
        return (false, false);
    }
    *last = now_us;
    ffi::progress(sh.comm);
    ffi::sync(sh.win);
    // A flush that was under way at the last round already: it may wait
    // for a rank that waits in a flush to this one.
    let now = ffi::flushing();
    let before = std::mem::replace(flushes, now);
    let stuck = now.is_some() && before == now;
    let (mut busy, mut waited) = (false, stuck);
    // Looked through without the lock, which the rank takes for every
    // transfer it posts.
    let bound: Vec<(Arc<SegmentObject>, Arc<Landing>, bool)> = lock(&sh.bound)
        .values()
        .map(|b| (b.obj.clone(), b.landing.clone(), b.window))
        .collect();
    for (obj, landing, window) in &bound {
        let sleeping = obj.notifications().ww.has_sleepers();
        waited |= sleeping;
        if *window && landing.take_doorbell() {
            obj.notifications().ww.wake();
            busy = true;
        }
        if *window || sleeping {
            busy |= landing.pump(obj, 0..IDS) > 0;
        }
    }
    drop(bound);
    if let Some(i) = lock(&sh.intake).as_mut() {
        busy |= i.step(sh.comm, lock(&sh.block).as_ref());
    }
    if let (Some(w), Some(b)) = (lock(&sh.watch).as_mut(), lock(&sh.block).as_ref()) {
        busy |= w.step(sh.comm, b, sh.leaving.load(SeqCst));
    }
    (busy, waited)
}

/// The longest nap of the relay thread while a thread of its process
/// waits in a flush (which may wait for this process's progress,
/// [`ffi::flushing`]). Napping only 20 us whenever a flush is under way
/// cost a rank whose flushes do not wait (2 hosts of 2 ranks on 2 cores:
/// 64 KiB allreduce 1.46x the time, 8 B notified write 1.09x; 2026-11-28).
const NAP_WHILE_FLUSHING: Duration = Duration::from_micros(100);

/// The relay thread: [`relay_once`] in [`relay_naps`]' rhythm (naps of
/// up to `longest`), napping no longer than [`NAP_WHILE_FLUSHING`] while a
/// flush is under way and as briefly as while a rank sleeps once a flush
/// outlasted a round.
pub(super) fn relay_loop(sh: &Shared, longest: Duration) {
    let (mut flushes, mut last) = (None, 0);
    relay_naps(
        &sh.stop,
        longest,
        || relay_once(sh, &mut flushes, &mut last),
        |time, _| {
            std::thread::sleep(match ffi::flushing() {
                Some(_) => time.min(NAP_WHILE_FLUSHING),
                None => time,
            })
        },
    );
}
