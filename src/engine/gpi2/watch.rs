//! Failures across hosts.
//!
//! A rank's death is seen first on its own host: our launcher marks it in
//! the host's control block, or, under GPI-2's `gaspi_run`, the ranks'
//! probes of process ids find it. GPI-2 itself learns of it only when a
//! request to the dead rank fails. So the relay threads pass deaths on:
//!
//! - the lowest running rank of a host notifies every rank of the other
//!   hosts on the reserved segment, id [`failed_id`] of the dead rank, once
//!   per death (if it dies meanwhile, the next one does);
//! - a relay that takes such a notification marks the rank failed in its
//!   host's control block, which fails waits there as on one host;
//! - a rank GPI-2's state vector marks corrupt (a request to it failed) is
//!   marked failed too;
//! - a rank that terminates cleanly says so the same way, once, on id
//!   [`left_id`] of itself (before its segments go): the others mark it terminated at once, so that their
//!   operations on it fail with `RankTerminated` instead of going on until
//!   GPI-2 finds the connection closed, and nobody pings or tells it
//!   anything afterwards;
//! - a host that dies as a whole tells nobody, so every [`PING_PERIOD`]
//!   the lowest running rank of each host pings the ranks after its host
//!   (`gaspi_proc_ping`, wrapping around, skipping ranks known failed)
//!   until one answers: a dead rank there is marked corrupt by GPI-2 and
//!   then told as above. The ranks up to the next live one are exactly
//!   those no other host watches.
//!
//! Collectives inside GPI-2 (`gaspi_barrier`, `gaspi_allreduce_user`) run
//! in slices and check their members between slices, so they end too.

use super::intake::{failed_id, left_id, notify_all, take};
use crate::engine::job::{self, JobBlock};
use crate::types::{NotificationId, Rank};
use gpi2_sys as sys;
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

/// How often the watch probes processes and the state vector.
const PERIOD: Duration = Duration::from_millis(100);
/// How often a host's lowest running rank pings the ranks after its host.
const PING_PERIOD: Duration = Duration::from_millis(500);
/// How long one ping may take.
const PING_MS: u64 = 1_000;

/// Whether `rank` is a rank of another host than `host` that has neither
/// failed nor terminated (other hosts' ranks are absent from a host's
/// `block` until then).
fn reachable(block: &JobBlock, host: &Range<usize>, rank: usize) -> bool {
    !host.contains(&rank) && block.slot(rank).state.load(SeqCst) == job::ABSENT
}

/// The failure watch of one rank, run by its relay thread.
#[derive(Debug)]
pub(crate) struct Watch {
    /// This host's control block, mapped for the relay.
    block: JobBlock,
    /// Ranks of this host.
    host: Range<usize>,
    rank: usize,
    /// No launcher of ours watches the job: probe process ids.
    probe: bool,
    /// Deaths the other hosts know of: told by this rank, or by another
    /// host.
    told: BTreeSet<usize>,
    /// This rank told the others that it terminated.
    announced: bool,
    last: Instant,
    last_ping: Instant,
}

impl Watch {
    /// A watch for `rank` of the host `host`, over its host's `block`;
    /// `probe` when no launcher of ours marks deaths.
    pub(crate) fn new(block: JobBlock, host: Range<usize>, rank: usize, probe: bool) -> Watch {
        Watch {
            block,
            host,
            rank,
            probe,
            told: BTreeSet::new(),
            announced: false,
            last: Instant::now(),
            last_ping: Instant::now(),
        }
    }

    /// Tell every rank of the other hosts, once, that this rank has
    /// terminated (before its segments go, while its peers can still take
    /// the notification).
    pub(super) fn announce_departure(&mut self) {
        if std::mem::replace(&mut self.announced, true) {
            return;
        }
        let n = self.block.nranks();
        let others: Vec<Rank> = (0..n)
            .filter(|&r| reachable(&self.block, &self.host, r))
            .map(|r| r as Rank)
            .collect();
        notify_all(&others, left_id(self.rank, n), 1);
    }

    /// One round: take deaths from other hosts, and every [`PERIOD`] look
    /// for new ones and tell the other hosts of them; `leaving`: this rank
    /// is terminating (it pings no more: the others may be gone
    /// normally). Returns whether anything happened.
    pub(super) fn step(&mut self, leaving: bool, corrupt: impl Fn() -> Vec<Rank>) -> bool {
        let n = self.block.nranks();
        let mut busy = false;
        let first = failed_id(0, n);
        while let Some((id, _)) = take(first, n as NotificationId) {
            let dead = (id - first) as usize;
            self.block.mark_failed(dead);
            self.told.insert(dead); // its host told everyone
            busy = true;
        }
        let first = left_id(0, n);
        while let Some((id, _)) = take(first, n as NotificationId) {
            self.block.mark_departed((id - first) as usize);
            busy = true;
        }
        if self.last.elapsed() < PERIOD {
            return busy;
        }
        self.last = Instant::now();
        let state = |r: usize| self.block.slot(r).state.load(SeqCst);
        let reachable = |r: usize| reachable(&self.block, &self.host, r);
        if self.probe {
            self.block.probe();
        }
        if self.host.clone().find(|&r| state(r) == job::RUNNING) != Some(self.rank) {
            // Another rank of this host watches and tells.
            for r in corrupt() {
                busy |= self.block.mark_failed(r as usize);
            }
            return busy;
        }
        if !leaving && self.last_ping.elapsed() >= PING_PERIOD {
            self.last_ping = Instant::now();
            let after = (1..n)
                .map(|k| (self.host.end - 1 + k) % n)
                .filter(|&r| reachable(r));
            for r in after {
                // SAFETY: plain call; a dead rank is marked corrupt by it.
                if unsafe { sys::gaspi_proc_ping(r as Rank, PING_MS) } == sys::GASPI_SUCCESS {
                    break;
                }
            }
        }
        for r in corrupt() {
            busy |= self.block.mark_failed(r as usize);
        }
        if self.block.header().failed.load(SeqCst) == 0 {
            return busy;
        }
        let dead: Vec<usize> = self
            .block
            .failed_ranks()
            .into_iter()
            .filter(|r| !self.told.contains(r))
            .collect();
        if dead.is_empty() {
            return busy;
        }
        let others: Vec<Rank> = (0..n)
            .filter(|&r| reachable(r))
            .map(|r| r as Rank)
            .collect();
        for d in dead {
            notify_all(&others, failed_id(d, n), 1);
            self.told.insert(d);
        }
        true
    }
}
