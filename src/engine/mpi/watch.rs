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
//! within [`PING_WAIT`] is marked failed and told as above. The ranks up to
//! the next live one are exactly those no other host watches.
//! (`mpirun` and `srun` usually end the whole job first; our launcher
//! lets the survivors see the failure.)

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
/// relay napping). `mpirun` and `srun` end a job whose host died long
/// before this anyway, and `gaspi-run` stops the others a grace period
/// after a rank dies.
const PING_WAIT: Duration = Duration::from_secs(60);

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
        }
    }

    /// One round over `block` on communicator `comm`: answer pings, take
    /// failure notices, and every [`PERIOD`] ping and tell the other hosts
    /// of new deaths; `leaving`: this rank is terminating (it pings no
    /// more: the others may be gone normally). Whether anything happened.
    pub(super) fn step(&mut self, comm: ffi::Comm, block: &JobBlock, leaving: bool) -> bool {
        let mut busy = false;
        reap(&mut self.sends);
        while let Some((_, _, m)) = ffi::improbe(comm, None, TAG_PING) {
            let _ = ffi::mrecv(m, &mut []);
            busy = true;
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
        let reachable = |r: usize| !self.host.contains(&r) && state(r) == job::ABSENT;
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
        if block.header().failed.load(SeqCst) == 0 {
            return busy;
        }
        let dead: Vec<usize> = block
            .failed_ranks()
            .into_iter()
            .filter(|r| !self.told.contains(r))
            .collect();
        for d in dead {
            let others = (0..block.nranks()).filter(|&r| reachable(r));
            for r in others {
                let news = (d as u32).to_ne_bytes().to_vec();
                if let Ok(q) = ffi::send(comm, news, r, TAG_FAILED, false) {
                    self.sends.push(q);
                }
            }
            self.told.insert(d);
            busy = true;
        }
        busy
    }
}
