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
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A segment or window attached to the window.
pub(super) struct Bound {
    pub(super) obj: Arc<SegmentObject>,
    pub(super) landing: Arc<Landing>,
    /// A node-shared window: its landing is relayed always.
    pub(super) window: bool,
    /// Ranks whose directories describe it.
    pub(super) registered: BTreeSet<usize>,
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
}

/// Move what landed for the bound segments: every window, and segments
/// with a sleeping waiter; take doorbells. Whether anything moved, and
/// whether someone sleeps or a flush outlasted the last round (`flushes`:
/// [`ffi::flushing`] at the last round, kept by the caller).
fn relay_once(sh: &Shared, flushes: &mut Option<u64>) -> (bool, bool) {
    ffi::progress(sh.comm);
    ffi::sync(sh.win);
    // A flush that was under way at the last round already: it may wait
    // for a rank that waits in a flush to this one.
    let now = ffi::flushing();
    let before = std::mem::replace(flushes, now);
    let stuck = now.is_some() && before == now;
    let (mut busy, mut waited) = (false, stuck);
    let bound = lock(&sh.bound);
    for b in bound.values() {
        let sleeping = b.obj.notifications().ww.has_sleepers();
        waited |= sleeping;
        if b.window && b.landing.take_doorbell() {
            b.obj.notifications().ww.wake();
            busy = true;
        }
        if b.window || sleeping {
            busy |= b.landing.pump(&b.obj, 0..IDS) > 0;
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

/// The relay thread: [`relay_once`] in [`relay_naps`]' rhythm, napping no
/// longer than [`NAP_WHILE_FLUSHING`] while a flush is under way and as
/// briefly as while a rank sleeps once a flush outlasted a round.
pub(super) fn relay_loop(sh: &Shared) {
    let mut flushes = None;
    relay_naps(
        &sh.stop,
        || relay_once(sh, &mut flushes),
        |time, _| {
            std::thread::sleep(match ffi::flushing() {
                Some(_) => time.min(NAP_WHILE_FLUSHING),
                None => time,
            })
        },
    );
}
