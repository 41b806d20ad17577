//! The relay thread: what GPI-2 delivers to this process while its rank
//! does not look (notifications into windows, doorbells, passive messages
//! from other hosts, failure news) is moved where the node's ranks see it.

use super::arrivals::Arrivals;
use super::codes::corrupt_ranks;
use super::notify::{doorbell, pump};
use super::{intake, watch};
use crate::config::RESERVED_SEGMENT;
use crate::engine::segment::SegmentObject;
use crate::engine::transport::IDS;
use crate::engine::wait::{lock, relay_naps};
use crate::types::SegmentId;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A segment or window bound as GPI-2 segment `segment`. The relay
/// thread watches a window's table, shared by the node, in which
/// notifications to this rank must appear even while it does not wait.
pub(super) struct Bound {
    pub(super) segment: SegmentId,
    pub(super) obj: Arc<SegmentObject>,
    pub(super) window: bool,
}

/// What the relay thread shares with the rank.
pub(super) struct Shared {
    pub(super) bound: Mutex<Vec<Bound>>,
    pub(super) stop: AtomicBool,
    /// The rank is terminating (the failure watch pings no more).
    pub(super) leaving: AtomicBool,
    /// Passive messages from other hosts, once enabled.
    pub(super) intake: Mutex<Option<intake::Intake>>,
    /// Failures across hosts, once enabled.
    pub(super) watch: Mutex<Option<watch::Watch>>,
    /// The scratch segment's address.
    pub(super) page: usize,
    /// Largest passive message.
    pub(super) passive_cap: usize,
}

/// The relay thread: pump every window, and every segment of this rank
/// while a thread of the rank sleeps on its table (a waiter that sleeps in
/// the kernel cannot pump what GPI-2 delivers), in [`relay_naps`]' rhythm,
/// sleeping on GPI-2's sockets while a thread sleeps ([`Arrivals`]);
/// naps of up to `longest`.
pub(super) fn relay_loop(sh: &Shared, longest: Duration) {
    let mut arrivals = Arrivals::new();
    relay_naps(
        &sh.stop,
        longest,
        || relay_once(sh),
        |time, waited| arrivals.nap(time, waited),
    );
}

/// One round of the relay: whether it moved anything, and whether a
/// thread of the rank sleeps on a table.
fn relay_once(sh: &Shared) -> (bool, bool) {
    let mut busy = false;
    let mut waited = false;
    // Under the lock, so that no segment is deleted meanwhile (GPI-2
    // does not check that a segment exists when it scans its table).
    let bound = lock(&sh.bound);
    for b in bound.iter() {
        let sleeping = b.obj.notifications().ww.has_sleepers();
        waited |= sleeping;
        if b.window {
            busy |= doorbell(b.segment, &b.obj);
        }
        if b.window || sleeping {
            busy |= pump(b.segment, &b.obj, 0..IDS) > 0;
        }
    }
    let reserved = RESERVED_SEGMENT;
    if bound.iter().any(|b| b.segment == reserved) {
        if let Some(intake) = lock(&sh.intake).as_mut() {
            busy |= intake.step(sh.page, sh.passive_cap);
        }
        if let Some(watch) = lock(&sh.watch).as_mut() {
            busy |= watch.step(sh.leaving.load(SeqCst), corrupt_ranks);
        }
    }
    (busy, waited)
}
