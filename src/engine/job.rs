//! The job control block: one shared object per job, mapped by every rank
//! and by the launcher.
//!
//! It holds the job's shape, an init barrier, and one [`RankSlot`] per rank:
//! the rank's pid, its state (running, terminated, failed) and its segment
//! directory, which peers read to find and validate that rank's segments.
//! Segment data, notification tables, inboxes and group state live in
//! objects of their own, created by the rank that owns them, so creating and
//! finding them never goes through one rank.
//!
//! Every object of a job is named `gaspi.<token>.<what>`, where `token` is
//! 128 random bits: [`sweep`] removes a job's objects by that prefix.
//!
//! `/dev/shm` is world-listable, so the token of a running job is public.
//! The names of the objects its ranks make later are not predictable:
//! each ends in a tag computed from a secret key that only the job's
//! owner-only control block holds ([`Names`]), so another user cannot
//! pre-create a future name to make a segment creation fail.

use super::shm::{self, Mapping, Shared};
use super::wait::WaitWord;
use crate::extent;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

const MAGIC: u64 = 0x4741_5350_494A_4F42; // "GASPIJOB"
const VERSION: u32 = 3;

/// The number of segment ids a rank's directory holds.
pub(crate) const SEGMENT_SLOTS: usize = 256;

/// A rank that has not attached yet.
pub(crate) const ABSENT: u32 = 0;
/// A rank that attached and has not terminated.
pub(crate) const RUNNING: u32 = 1;
/// A rank that called `proc_term`.
pub(crate) const TERMINATED: u32 = 2;
/// A rank that died without `proc_term`.
pub(crate) const FAILED: u32 = 3;

/// The job-wide header.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct JobHeader {
    magic: AtomicU64,
    version: AtomicU32,
    nranks: AtomicU32,
    ppn: AtomicU32,
    launcher_pid: AtomicU32,
    launcher_start: AtomicU64,
    /// The pid namespace the pids are from (its inode number).
    pid_namespace: AtomicU64,
    /// Ranks that reached the init barrier.
    pub(crate) arrived: AtomicU32,
    /// Ranks marked failed (a fast check for waiters).
    pub(crate) failed: AtomicU32,
    /// The first rank marked failed, plus one (0: none): the root cause
    /// when one failure leads others to give up.
    pub(crate) first_failed: AtomicU32,
    /// Ranks that terminated cleanly.
    pub(crate) terminated: AtomicU32,
    /// Ranks joined, not terminated, and not asleep in a futex wait: the
    /// ranks competing for the cores (see `wait`).
    pub(crate) awake: AtomicU32,
    /// Woken when `arrived` or a rank's state changes.
    pub(crate) ww: WaitWord,
    /// The secret key of the job's object names ([`Names`]).
    name_key: [AtomicU64; 2],
}

// SAFETY: atomics only (WaitWord is Shared).
unsafe impl Shared for JobHeader {}

/// One segment id of a rank's directory.
///
/// `object` is the [`ObjectId`] of the shared object backing the segment,
/// packed (0: no segment). Every creation makes a new object, so a peer
/// that mapped object `o` knows its mapping is current while `object == o`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct SegmentEntry {
    pub(crate) object: AtomicU64,
    pub(crate) size: AtomicU64,
}

/// What kind of memory backs a segment id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ObjectKind {
    /// The rank's own segment.
    Segment,
    /// A node-shared window, created by its node's leader and used as the
    /// segment of every member of the node.
    Window,
}

/// The shared object behind a segment id: its kind, the rank that created
/// it (and whose name it carries), and a number unique among that rank's
/// objects of that kind and segment id. Packed into one word so that a
/// directory entry changes atomically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ObjectId {
    pub(crate) kind: ObjectKind,
    pub(crate) owner: u16,
    pub(crate) number: u64,
}

impl ObjectId {
    const NUMBER_BITS: u32 = 47;

    /// The packed form, never 0.
    pub(crate) fn pack(self) -> u64 {
        assert!(self.number > 0 && self.number < 1 << Self::NUMBER_BITS);
        let kind = match self.kind {
            ObjectKind::Segment => 0,
            ObjectKind::Window => 1u64 << 63,
        };
        kind | (self.owner as u64) << Self::NUMBER_BITS | self.number
    }

    /// The id packed in `word`, `None` for 0 (no segment).
    pub(crate) fn unpack(word: u64) -> Option<ObjectId> {
        (word != 0).then(|| ObjectId {
            kind: if word >> 63 == 1 {
                ObjectKind::Window
            } else {
                ObjectKind::Segment
            },
            owner: (word >> Self::NUMBER_BITS) as u16,
            number: word & ((1 << Self::NUMBER_BITS) - 1),
        })
    }

    /// The name of this object as segment `seg` of the job of `names`.
    pub(crate) fn name(self, names: &Names, seg: u8) -> String {
        let kind = match self.kind {
            ObjectKind::Segment => 's',
            ObjectKind::Window => 'w',
        };
        names.object(&format!("r{}.{kind}{seg}.{}", self.owner, self.number))
    }
}

// SAFETY: atomics only.
unsafe impl Shared for SegmentEntry {}

/// What the job knows about one rank.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct RankSlot {
    pub(crate) pid: AtomicU32,
    pub(crate) state: AtomicU32,
    /// The wait status recorded by the launcher, plus one (0: unknown).
    pub(crate) exit: AtomicU32,
    /// The CPUs the rank may run on, as [`cpu_span`] packs them (0:
    /// unknown), recorded when it joins.
    pub(crate) cpus: AtomicU32,
    /// The rank that asked for this rank's end (`proc_kill`), plus one (0:
    /// none): its death is then no failure of the job (see
    /// [`JobBlock::mark_killed`]).
    pub(crate) killed_by: AtomicU32,
    pub(crate) start_time: AtomicU64,
    pub(crate) segments: [SegmentEntry; SEGMENT_SLOTS],
}

// SAFETY: atomics only.
unsafe impl Shared for RankSlot {}

/// The job object's name.
pub(crate) fn job_object(token: &str) -> String {
    format!("gaspi.{token}.job")
}

/// The prefix shared by all objects of a job.
pub(crate) fn prefix(token: &str) -> String {
    format!("gaspi.{token}.")
}

/// How the objects of one job are named, other than its control block:
/// `gaspi.<token>.<what>.<tag>`, where `what` says what the object is
/// (`r3.s7.2`: segment 7 of rank 3, its second object) and `tag` is
/// SipHash-2-4 of `what` under the job's secret key. Names stay readable
/// and are swept by the job's prefix, but a user who can list `/dev/shm`
/// and read the token still cannot tell the name of an object not made
/// yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Names {
    token: String,
    key: [u64; 2],
}

impl Names {
    /// The names of job `token` under `key`.
    pub(crate) fn new(token: &str, key: [u64; 2]) -> Names {
        Names {
            token: token.to_string(),
            key,
        }
    }

    /// Names of a job made up for an in-process test: a fresh token and
    /// key.
    #[cfg(test)]
    pub(crate) fn fresh() -> Names {
        Names::new(&new_token().unwrap(), random_key().unwrap())
    }

    /// The job's token.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The name of the object `what`.
    pub(crate) fn object(&self, what: &str) -> String {
        use std::hash::Hasher;
        let mut h = siphasher::sip::SipHasher24::new_with_keys(self.key[0], self.key[1]);
        h.write(what.as_bytes());
        format!("gaspi.{}.{what}.{:016x}", self.token, h.finish())
    }

    /// The passive-communication inbox of `rank`.
    pub(crate) fn inbox(&self, rank: usize) -> String {
        self.object(&format!("r{rank}.inbox"))
    }

    /// The shared state of a group being committed, created by its leader
    /// (the lowest member) and unlinked once every member has it mapped.
    pub(crate) fn group(&self, leader: usize, key: u64) -> String {
        self.object(&format!("g{leader}.{key:016x}"))
    }
}

/// The host of `rank` when hosts are blocks of `per_host` ranks: its
/// first rank and its number of ranks.
#[cfg(any(feature = "gpi2", feature = "mpi"))]
pub(crate) fn host_of(rank: usize, nranks: usize, per_host: usize) -> (usize, usize) {
    let first = rank / per_host * per_host;
    (first, per_host.min(nranks - first))
}

/// The lowest and highest of `cpus` (a rank's allowed CPUs, ascending)
/// packed into one word for [`RankSlot::cpus`]: `lowest | (highest + 1) << 16`,
/// 0 where there are none or they do not fit.
pub(crate) fn cpu_span(cpus: &[usize]) -> u32 {
    match (cpus.first(), cpus.last()) {
        (Some(&lo), Some(&hi)) if hi < 0xffff => (lo as u32) | ((hi as u32 + 1) << 16),
        _ => 0,
    }
}

/// Whether a rank whose CPUs span `mine` ([`cpu_span`]) has them to
/// itself: no span of `others` (the other ranks of its machine) overlaps
/// it. Unknown spans (0) may overlap anything. Spans compare lowest and
/// highest CPU only, so ranks bound to interleaved sets count as sharing.
pub(crate) fn cpus_of_its_own(mine: u32, others: impl IntoIterator<Item = u32>) -> bool {
    let range = |s: u32| (s & 0xffff, (s >> 16).wrapping_sub(1));
    let (lo, hi) = range(mine);
    mine != 0
        && others.into_iter().all(|o| {
            let (olo, ohi) = range(o);
            o != 0 && (ohi < lo || olo > hi)
        })
}

/// Whether ranks whose CPUs span `a` and `b` ([`cpu_span`]) are both
/// bound to one and the same CPU: a line one of them writes is in the
/// cache the other reads from. Unknown spans (0) share nothing known.
pub(crate) fn one_cpu_shared(a: u32, b: u32) -> bool {
    let single = |s: u32| s != 0 && (s >> 16) == (s & 0xffff) + 1;
    single(a) && a == b
}

/// The token of the host whose first rank is `first` in a job of emulated
/// hosts (what its ranks' shared-memory objects are named after).
pub(crate) fn host_token(token: &str, first: usize) -> String {
    format!("{token}h{first}")
}

/// Remove every object of the job `token`. Returns how many were removed.
/// Only this user's: an object of another user under the job's names is
/// not the job's (anyone may make one, the token being public), and
/// removing it would disturb that user (as root) or fail (as anyone else).
pub(crate) fn sweep(token: &str) -> usize {
    shm::list_by_owner(&prefix(token))
        .own
        .iter()
        .filter(|n| shm::unlink(n).is_ok())
        .count()
}

/// Fill `b` with random bytes from the kernel; retries when interrupted,
/// fails on any other error (instead of looping for ever).
fn random_bytes(b: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < b.len() {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A fresh secret key for a job's object names.
fn random_key() -> io::Result<[u64; 2]> {
    let mut b = [0u8; 16];
    random_bytes(&mut b)?;
    let (k0, k1) = b.split_at(8);
    Ok([
        u64::from_le_bytes(k0.try_into().expect("8 bytes")),
        u64::from_le_bytes(k1.try_into().expect("8 bytes")),
    ])
}

/// A fresh job token: 128 random bits in hex (or the kernel's error if
/// it has no randomness to give).
pub(crate) fn new_token() -> io::Result<String> {
    let mut b = [0u8; 16];
    random_bytes(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Start time of `pid` in clock ticks since boot (field 22 of
/// `/proc/PID/stat`) and whether it is a zombie; `None` if it does not exist.
pub(crate) fn process_info(pid: u32) -> Option<(u64, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything: parse
    // from the last ')'. After it: state (field 3) ... starttime (field 22).
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((start, state == "Z" || state == "X"))
}

/// The inode of this process's pid namespace (0 if unknown).
fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// True if `pid` runs and is the same process that recorded `start_time`.
pub(crate) fn process_alive(pid: u32, start_time: u64) -> bool {
    matches!(process_info(pid), Some((s, false)) if s == start_time)
}

/// A mapped job control block.
#[derive(Debug)]
pub(crate) struct JobBlock {
    names: Names,
    map: Mapping,
    nranks: usize,
}

fn header_len() -> usize {
    extent::align_const(std::mem::size_of::<JobHeader>(), 4096)
}

/// The block's size for `nranks` ranks (at most 65,535 ranks: no overflow).
fn object_len(nranks: usize) -> usize {
    header_len() + nranks * std::mem::size_of::<RankSlot>()
}

impl JobBlock {
    /// Create the block of a new job of `nranks` ranks (`ppn` per node).
    /// `launcher` is the pid of the process that will supervise the ranks.
    pub(crate) fn create(
        token: &str,
        nranks: usize,
        ppn: usize,
        launcher: Option<u32>,
    ) -> io::Result<JobBlock> {
        let name = job_object(token);
        let key = random_key()?;
        let len = extent::mul("job size", nranks, std::mem::size_of::<RankSlot>())
            .and_then(|n| extent::add("job size", header_len(), n))
            .map_err(extent::io_error)?;
        let fd = shm::create(&name, len)?;
        let map = match Mapping::new(&fd, len, 0, false) {
            Ok(m) => m,
            Err(e) => {
                let _ = shm::unlink(&name);
                return Err(e);
            }
        };
        let block = JobBlock {
            names: Names::new(token, key),
            map,
            nranks,
        };
        let h = block.header();
        h.name_key[0].store(key[0], SeqCst);
        h.name_key[1].store(key[1], SeqCst);
        h.version.store(VERSION, SeqCst);
        h.nranks.store(nranks as u32, SeqCst);
        h.ppn.store(ppn as u32, SeqCst);
        h.pid_namespace.store(pid_namespace(), SeqCst);
        if let Some(pid) = launcher {
            h.launcher_pid.store(pid, SeqCst);
            h.launcher_start
                .store(process_info(pid).map_or(0, |(s, _)| s), SeqCst);
        }
        h.magic.store(MAGIC, SeqCst);
        Ok(block)
    }

    /// Open the block of job `token` if it exists and is initialised.
    /// `Ok(None)` means "not there yet".
    pub(crate) fn try_open(token: &str) -> io::Result<Option<JobBlock>> {
        let name = job_object(token);
        let (fd, size) = match shm::open(&name) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if size < header_len() {
            return Ok(None); // being created: ftruncate not done yet
        }
        let map = Mapping::new(&fd, size, 0, false)?;
        let h = map.at::<JobHeader>(0);
        if h.magic.load(SeqCst) != MAGIC {
            return Ok(None);
        }
        if h.version.load(SeqCst) != VERSION {
            return Err(io::Error::other(
                "job block of an incompatible gaspi version",
            ));
        }
        let nranks = h.nranks.load(SeqCst) as usize;
        if object_len(nranks) > size {
            return Err(io::Error::other("job block smaller than its rank count"));
        }
        let key = [h.name_key[0].load(SeqCst), h.name_key[1].load(SeqCst)];
        Ok(Some(JobBlock {
            names: Names::new(token, key),
            map,
            nranks,
        }))
    }

    pub(crate) fn token(&self) -> &str {
        self.names.token()
    }

    /// How the job's objects are named.
    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    pub(crate) fn header(&self) -> &JobHeader {
        self.map.at(0)
    }

    pub(crate) fn nranks(&self) -> usize {
        self.nranks
    }

    /// Ranks per node, as the block's creator set it.
    pub(crate) fn ppn(&self) -> usize {
        self.header().ppn.load(SeqCst) as usize
    }

    /// Pid of the supervising launcher, if the job has one.
    pub(crate) fn launcher(&self) -> Option<(u32, u64)> {
        let h = self.header();
        match h.launcher_pid.load(SeqCst) {
            0 => None,
            pid => Some((pid, h.launcher_start.load(SeqCst))),
        }
    }

    /// Whether the pids recorded in the block name processes here: the
    /// block's creator lived in this process's pid namespace.
    pub(crate) fn pids_meaningful(&self) -> bool {
        self.header().pid_namespace.load(SeqCst) == pid_namespace()
    }

    pub(crate) fn slot(&self, rank: usize) -> &RankSlot {
        assert!(rank < self.nranks);
        self.map
            .at(header_len() + rank * std::mem::size_of::<RankSlot>())
    }

    /// Mark `rank`, a rank of another host that said it terminated, as
    /// terminated unless it failed first; returns true if this call changed
    /// its state. Wakes everyone sleeping on the job header. (Only this
    /// host's ranks count in the header's `terminated`.)
    #[cfg(any(feature = "gpi2", feature = "mpi"))]
    pub(crate) fn mark_departed(&self, rank: usize) -> bool {
        if !self.end(rank, TERMINATED) {
            return false;
        }
        self.header().ww.advance();
        true
    }

    /// Move `rank` to the final state `to` unless it is in a final state
    /// already (terminated or failed); whether this call moved it.
    fn end(&self, rank: usize, to: u32) -> bool {
        let slot = self.slot(rank);
        let mut cur = slot.state.load(SeqCst);
        loop {
            if cur == TERMINATED || cur == FAILED {
                return false;
            }
            match slot.state.compare_exchange(cur, to, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Mark `rank` failed unless it terminated; returns true if this call
    /// changed its state. Wakes everyone sleeping on the job header.
    pub(crate) fn mark_failed(&self, rank: usize) -> bool {
        if !self.end(rank, FAILED) {
            return false;
        }
        let h = self.header();
        let _ = h
            .first_failed
            .compare_exchange(0, rank as u32 + 1, SeqCst, SeqCst);
        h.failed.fetch_add(1, SeqCst);
        h.ww.advance();
        true
    }

    /// Record that `by` asked for `rank`'s end (`proc_kill`), before the
    /// signal goes out: the launcher then reports its death as asked for,
    /// not as a failure of the job (the others still see it failed).
    pub(crate) fn mark_killed(&self, rank: usize, by: usize) {
        let _ = self
            .slot(rank)
            .killed_by
            .compare_exchange(0, by as u32 + 1, SeqCst, SeqCst);
    }

    /// Take back `by`'s request for `rank`'s end (it could not be carried
    /// out), unless another rank's stands.
    pub(crate) fn unmark_killed(&self, rank: usize, by: usize) {
        let _ = self
            .slot(rank)
            .killed_by
            .compare_exchange(by as u32 + 1, 0, SeqCst, SeqCst);
    }

    /// The rank that asked for `rank`'s end, if one did.
    pub(crate) fn killed_by(&self, rank: usize) -> Option<usize> {
        (self.slot(rank).killed_by.load(SeqCst) as usize).checked_sub(1)
    }

    /// Ranks currently marked failed, the first one to fail first.
    pub(crate) fn failed_ranks(&self) -> Vec<usize> {
        let first = self.header().first_failed.load(SeqCst) as usize;
        let mut v: Vec<usize> = first.checked_sub(1).into_iter().collect();
        v.extend(
            (0..self.nranks)
                .filter(|&r| r + 1 != first && self.slot(r).state.load(SeqCst) == FAILED),
        );
        v
    }

    /// Check every running rank's process and mark the dead ones failed
    /// (used when no launcher supervises the job).
    pub(crate) fn probe(&self) {
        for r in 0..self.nranks {
            let slot = self.slot(r);
            if slot.state.load(SeqCst) != RUNNING {
                continue;
            }
            let pid = slot.pid.load(SeqCst);
            if pid != 0 && !process_alive(pid, slot.start_time.load(SeqCst)) {
                self.mark_failed(r);
            }
        }
    }

    /// True if processes of this job were recorded and none of them (the
    /// launcher included) runs any more. A job whose processes have not
    /// recorded themselves yet is being set up, not abandoned; so is one
    /// with a process recorded without its start time (a rank stores its
    /// start time before its pid, so this is one whose start time could
    /// not be read: we cannot tell, and keep it).
    fn abandoned(&self) -> bool {
        if !self.pids_meaningful() {
            return false; // its pids mean nothing here: we cannot tell
        }
        let mut procs: Vec<(u32, u64)> = self.launcher().into_iter().collect();
        procs.extend((0..self.nranks).map(|r| {
            let s = self.slot(r);
            // The pid first: see `start_time`'s order in `Native::join`.
            let pid = s.pid.load(SeqCst);
            (pid, s.start_time.load(SeqCst))
        }));
        procs.retain(|&(pid, _)| pid != 0);
        !procs.is_empty()
            && procs.iter().all(|&(_, start)| start != 0)
            && !procs.iter().any(|&(pid, start)| process_alive(pid, start))
    }
}

/// Remove the objects of jobs of this user whose launcher and ranks are all
/// gone (a launcher killed with SIGKILL cannot clean up after itself).
/// Returns the tokens swept.
pub(crate) fn sweep_stale() -> Vec<String> {
    let mut swept = Vec::new();
    for name in shm::list("gaspi.") {
        let Some(token) = name
            .strip_prefix("gaspi.")
            .and_then(|n| n.strip_suffix(".job"))
        else {
            continue;
        };
        if let Ok(Some(block)) = JobBlock::try_open(token) {
            if block.abandoned() {
                sweep(token);
                swept.push(token.to_string());
            }
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_with_cpus_of_their_own_are_told_from_ranks_sharing_them() {
        let one = |c| cpu_span(&[c]);
        // Bound a CPU each (mpirun's pinning): each has its own.
        assert!(cpus_of_its_own(one(1), [one(0), one(2), one(3)]));
        // Two bound to CPU 0: neither has.
        assert!(!cpus_of_its_own(one(0), [one(0), one(1)]));
        // Blocks of CPUs, disjoint and overlapping.
        let span = |lo, hi| cpu_span(&(lo..=hi).collect::<Vec<_>>());
        assert!(cpus_of_its_own(span(0, 7), [span(8, 15)]));
        assert!(!cpus_of_its_own(span(0, 8), [span(8, 15)]));
        // An unbound rank (every CPU), or one whose CPUs are unknown,
        // may run anywhere.
        assert!(!cpus_of_its_own(one(1), [span(0, 3)]));
        assert!(!cpus_of_its_own(one(1), [0]));
        assert!(!cpus_of_its_own(0, [one(1)]));
        // Interleaved sets count as sharing (spans only).
        assert!(!cpus_of_its_own(cpu_span(&[0, 2]), [cpu_span(&[1, 3])]));
        // Alone on the machine, and CPUs past what a span holds.
        assert!(cpus_of_its_own(one(5), []));
        assert_eq!(cpu_span(&[]), 0);
        assert_eq!(cpu_span(&[70_000]), 0);
        assert!(cpus_of_its_own(one(0xfffe), [one(0)]));
    }

    #[test]
    fn ranks_bound_to_one_cpu_together_are_told_apart_from_the_rest() {
        let one = |c| cpu_span(&[c]);
        assert!(one_cpu_shared(one(3), one(3)));
        assert!(one_cpu_shared(one(0), one(0)));
        assert!(!one_cpu_shared(one(0), one(1)));
        // The same span of several CPUs (unbound ranks, or bound to a
        // block) says nothing about which CPU each runs on.
        let span = |lo, hi| cpu_span(&(lo..=hi).collect::<Vec<_>>());
        assert!(!one_cpu_shared(span(0, 1), span(0, 1)));
        assert!(!one_cpu_shared(one(0), span(0, 1)));
        // Unknown CPUs.
        assert!(!one_cpu_shared(0, 0));
        assert!(!one_cpu_shared(one(2), 0));
    }

    #[test]
    fn object_ids_pack_and_name() {
        for id in [
            ObjectId {
                kind: ObjectKind::Segment,
                owner: 0,
                number: 1,
            },
            ObjectId {
                kind: ObjectKind::Window,
                owner: 65_535,
                number: (1 << 47) - 1,
            },
            ObjectId {
                kind: ObjectKind::Window,
                owner: 7,
                number: 3,
            },
        ] {
            assert_ne!(id.pack(), 0);
            assert_eq!(ObjectId::unpack(id.pack()), Some(id));
        }
        assert_eq!(ObjectId::unpack(0), None);
        let w = ObjectId {
            kind: ObjectKind::Window,
            owner: 4,
            number: 2,
        };
        let names = Names::new("t", [1, 2]);
        let name = w.name(&names, 9);
        assert!(name.starts_with("gaspi.t.r4.w9.2."), "{name}");
        // The tag depends on the key: another job's key names it otherwise.
        assert_ne!(name, w.name(&Names::new("t", [1, 3]), 9));
        assert_eq!(name, w.name(&Names::new("t", [1, 2]), 9));
    }

    #[test]
    fn tokens_are_random_hex() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn own_process_is_alive_and_start_time_matters() {
        let me = std::process::id();
        let (start, zombie) = process_info(me).unwrap();
        assert!(!zombie);
        assert!(process_alive(me, start));
        assert!(!process_alive(me, start + 1));
    }

    #[test]
    fn create_open_fail_and_sweep() {
        let token = new_token().unwrap();
        let a = JobBlock::create(&token, 3, 3, None).unwrap();
        let b = JobBlock::try_open(&token).unwrap().unwrap();
        assert_eq!(b.nranks(), 3);
        a.slot(1).state.store(RUNNING, SeqCst);
        assert!(b.mark_failed(1));
        assert!(!b.mark_failed(1));
        assert_eq!(a.failed_ranks(), vec![1]);
        assert_eq!(a.header().failed.load(SeqCst), 1);
        assert_eq!(sweep(&token), 1);
        assert!(JobBlock::try_open(&token).unwrap().is_none());
    }

    #[test]
    fn stale_jobs_are_swept_live_ones_kept() {
        let live = new_token().unwrap();
        let _l = JobBlock::create(&live, 1, 1, Some(std::process::id())).unwrap();
        let dead = new_token().unwrap();
        let d = JobBlock::create(&dead, 1, 1, None).unwrap();
        d.slot(0).start_time.store(1, SeqCst);
        d.slot(0).pid.store(u32::MAX - 1, SeqCst); // no such process
        // A rank half-way through recording itself (pid without start
        // time) is not taken for a dead one.
        let joining = new_token().unwrap();
        let j = JobBlock::create(&joining, 1, 1, None).unwrap();
        j.slot(0).pid.store(std::process::id(), SeqCst);
        let swept = sweep_stale();
        assert!(swept.contains(&dead));
        assert!(!swept.contains(&live));
        assert!(!swept.contains(&joining));
        sweep(&live);
        sweep(&joining);
    }
}
