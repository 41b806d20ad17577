//! Failures across hosts, as far as MPI lets a job live through them.
//!
//! A rank's death is seen first on its own host: our launcher marks it in
//! the host's control block, or (no launcher of ours) the ranks' probes of
//! process ids find it. The relay of the lowest running rank of that host
//! tells every reachable rank of the other hosts (a message with the dead
//! rank's number, [`TAG_FAILED`]); their relays mark it failed in their
//! host's control block, which fails waits there as on one host.
//!
//! A host that dies as a whole tells nobody, so every [`PING_PERIOD`] the
//! lowest running rank of each host pings the ranks after its host (a
//! synchronous empty message, [`TAG_PING`], that their relay threads take),
//! skipping ranks known gone, until one answers; one that does not answer
//! within [`PING_WAIT`] (of the watching rank's own running time: a stall
//! of its own does not count) is marked failed and told as above. The
//! ranks up to the next live one are exactly those no other host watches.
//! (`mpirun` and `srun` usually end the whole job first; our launcher
//! lets the survivors see the failure.)
//!
//! A rank of another host asks for this rank's end (`proc_kill`) with a
//! synchronous message, [`TAG_KILL`]: the relay records the request in its
//! host's control block and sends its own process SIGKILL.

use super::ffi;
use super::intake::reap;
use crate::engine::job::{self, JobBlock};
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

/// Tag of a failure notice.
pub(super) const TAG_FAILED: i32 = 4;
/// Tag of a ping.
pub(super) const TAG_PING: i32 = 5;
/// Tag of a request to end the receiving rank (`proc_kill`, from another
/// host): a synchronous empty message; the sender's rank is its source.
pub(super) const TAG_KILL: i32 = 6;
/// How often the watch looks for deaths on its host.
const PERIOD: Duration = Duration::from_millis(100);
/// How often a host's lowest running rank pings the ranks after its host.
const PING_PERIOD: Duration = Duration::from_millis(500);
/// How long a ping may go unanswered before its rank counts as dead.
///
/// Long, because a false death is worse than a late one: it fails a
/// healthy job. With 1 s, Intel MPI 2021 jobs of 5-8 ranks on 2 cores (its
/// blocking calls spin) had live ranks declared failed; with 10 s, once, a
/// job of 12 emulated hosts of one rank each under Intel MPI on 2 cores
/// beside another job (2026-11-28: the rank was alive in a barrier, its
/// relay napping); with 60 s, once in 6 runs of the allgatherv and
/// alltoallv tests under Intel MPI on 2 cores (2026-11-29), a rank frozen
/// in the kernel (in `mbind` during a workqueue lockup of 50 s and more,
/// docs/guide/mpi.md) while the rank pinging it ran on. `mpirun` and
/// `srun` end a job whose host died long before this anyway, and
/// `gaspi-run` stops the others a grace period after a rank dies.
const PING_WAIT: Duration = Duration::from_secs(180);
/// A gap between two rounds of a watch longer than this means that its own
/// rank did not run meanwhile (its relay blocked in MPI, or the machine
/// stalled); the gap does not count against a ping in flight
/// ([`discount_stall`]). Rounds come every 20 us to 2 ms normally, at
/// most [`RELAY_NAP_MAX`](crate::RELAY_NAP_MAX) (100 ms) apart.
const STALLED: Duration = Duration::from_secs(1);

/// When a ping sent at `sent` counts as sent, in a round at `now` after the
/// last round at `last`: later by the gap, if the gap shows that this rank
/// itself stood still ([`STALLED`]). A kernel stall that froze every rank
/// of a machine for minutes (2026-11-29: ranks in `mbind` behind a
/// workqueue lockup, docs/guide/mpi.md) then costs a wait, not a live rank
/// declared dead by a watch that was frozen too.
fn discount_stall(sent: Instant, last: Instant, now: Instant) -> Instant {
    let gap = now.saturating_duration_since(last);
    if gap > STALLED {
        // `sent` is at or before `last`, so this is at or before `now`.
        sent.checked_add(gap).unwrap_or(sent)
    } else {
        sent
    }
}

/// Whether `rank` is a rank of another host than `host` that has neither
/// failed nor terminated (other hosts' ranks are absent from a host's
/// `block` until then).
fn reachable(block: &JobBlock, host: &Range<usize>, rank: usize) -> bool {
    !host.contains(&rank) && block.slot(rank).state.load(SeqCst) == job::ABSENT
}

/// The failure watch of one rank, run by its relay thread.
pub(super) struct Watch {
    host: Range<usize>,
    rank: usize,
    /// No launcher of ours watches the job: probe process ids.
    probe: bool,
    /// Deaths the other hosts know of.
    told: BTreeSet<usize>,
    last: Instant,
    sends: Vec<ffi::Request>,
    /// The ping in flight: its rank, request and when it left.
    ping: Option<(usize, ffi::Request, Instant)>,
    last_ping: Instant,
    /// The last round ([`Watch::step`]).
    last_round: Instant,
}

impl Watch {
    pub(super) fn new(host: Range<usize>, rank: usize, probe: bool) -> Watch {
        Watch {
            host,
            rank,
            probe,
            told: BTreeSet::new(),
            last: Instant::now(),
            sends: Vec::new(),
            ping: None,
            last_ping: Instant::now(),
            last_round: Instant::now(),
        }
    }

    /// One round over `block` on communicator `comm`: answer pings, take
    /// failure notices, and every [`PERIOD`] ping and tell the other hosts
    /// of new deaths; `leaving`: this rank is terminating (it pings no
    /// more: the others may be gone normally). Whether anything happened.
    pub(super) fn step(&mut self, comm: ffi::Comm, block: &JobBlock, leaving: bool) -> bool {
        let mut busy = false;
        let now = Instant::now();
        if let Some((_, _, sent)) = self.ping.as_mut() {
            *sent = discount_stall(*sent, self.last_round, now);
        }
        self.last_round = now;
        reap(&mut self.sends);
        while let Some((_, _, m)) = ffi::improbe(comm, None, TAG_PING) {
            let _ = ffi::mrecv(m, &mut []);
            busy = true;
        }
        if let Some((from, _, m)) = ffi::improbe(comm, None, TAG_KILL) {
            if ffi::mrecv(m, &mut []).is_ok() && from < block.nranks() {
                // Recorded first, so that the launcher reports the death
                // as asked for.
                block.mark_killed(self.rank, from);
                crate::sys::kill_self();
            }
        }
        while let Some((_, len, m)) = ffi::improbe(comm, None, TAG_FAILED) {
            let mut buf = vec![0u8; len.max(4)];
            if ffi::mrecv(m, &mut buf).is_ok() {
                let dead = u32::from_ne_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
                if dead < block.nranks() {
                    block.mark_failed(dead);
                    self.told.insert(dead);
                }
            }
            busy = true;
        }
        if self.last.elapsed() < PERIOD {
            return busy;
        }
        self.last = Instant::now();
        if self.probe {
            block.probe();
        }
        let state = |r: usize| block.slot(r).state.load(SeqCst);
        let host = self.host.clone();
        let reachable = |r: usize| reachable(block, &host, r);
        if self.host.clone().find(|&r| state(r) == job::RUNNING) != Some(self.rank) {
            return busy;
        }
        // A ping that ends here (answered, refused, or given up) drops,
        // which leaves an unanswered one to MPI.
        if let Some((r, mut q, sent)) = self.ping.take() {
            match q.test() {
                // Answered; or MPI refuses the request (after another
                // rank's failure MPICH may fail operations on the
                // communicator): no verdict on this rank.
                Ok(true) | Err(_) => {}
                Ok(false) if leaving || !reachable(r) => {}
                Ok(false) if sent.elapsed() >= PING_WAIT => busy |= block.mark_failed(r),
                Ok(false) => self.ping = Some((r, q, sent)),
            }
        }
        if self.ping.is_none() && !leaving && self.last_ping.elapsed() >= PING_PERIOD {
            self.last_ping = Instant::now();
            let n = block.nranks();
            let next = (1..n)
                .map(|k| (self.host.end - 1 + k) % n)
                .find(|&r| reachable(r));
            if let Some(r) = next {
                if let Ok(q) = ffi::send(comm, Vec::new(), r, TAG_PING, true) {
                    self.ping = Some((r, q, Instant::now()));
                }
            }
        }
        busy | self.tell_deaths(comm, block)
    }

    /// Tell every reachable rank of the other hosts of the deaths marked
    /// in `block` that they have not heard of from this rank; whether
    /// there were any. Also when this rank leaves (`Mpi::depart`), so that
    /// a death it saw last, or caused (`proc_kill`), reaches the others
    /// even if no rank of its host stays to watch.
    pub(super) fn tell_deaths(&mut self, comm: ffi::Comm, block: &JobBlock) -> bool {
        if block.header().failed.load(SeqCst) == 0 {
            return false;
        }
        let dead: Vec<usize> = block
            .failed_ranks()
            .into_iter()
            .filter(|r| !self.told.contains(r))
            .collect();
        for &d in &dead {
            for r in (0..block.nranks()).filter(|&r| reachable(block, &self.host, r)) {
                let news = (d as u32).to_ne_bytes().to_vec();
                if let Ok(q) = ffi::send(comm, news, r, TAG_FAILED, false) {
                    self.sends.push(q);
                }
            }
        }
        self.told.extend(&dead);
        !dead.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_of_the_watch_itself_does_not_count_against_a_ping() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // Rounds 2 ms apart: the ping's age is its age.
        let last = t0 + s(30);
        let now = last + Duration::from_millis(2);
        assert_eq!(discount_stall(t0, last, now), t0);
        // The watch stood still for 100 s after its round at 1 s: the ping
        // has waited 1 s of this rank's running time, not 101 s.
        let (last, now) = (t0 + s(1), t0 + s(101));
        let sent = discount_stall(t0, last, now);
        assert_eq!(now.duration_since(sent), s(1));
        assert!(now.duration_since(sent) < PING_WAIT);
        // Just at the bound, nothing is discounted.
        assert_eq!(discount_stall(t0, last, last + STALLED), t0);
    }
}
