//! The GPI-2 engine's transport (feature `gpi2`): operations whose target
//! is on another node go through GPI-2; everything inside a node stays on
//! the native engine's shared memory (seed 001's load/store path).
//!
//! # Segments
//! Every segment and every node-shared window of this rank is also bound
//! as the GPI-2 segment of the same id (`gaspi_segment_bind` on the same
//! memory), and registered (`gaspi_segment_register`) with the ranks of
//! other nodes it is registered with. A window is bound by every rank of
//! its node, on the one shared mapping: a remote write addressed to any of
//! them lands once, in the node's memory.
//!
//! # Notifications across nodes (shared notifications)
//! GPI-2 keeps each rank's notification table in that process's private
//! memory, so a `gaspi_write_notify` from another node sets a value that
//! only its target process can see. The engine moves such values into the
//! table our waiters watch (the node-shared one for a window) — it *relays*
//! them:
//!
//! 1. the sender posts `gaspi_write_notify(data, id, value)` on one queue:
//!    GPI-2 guarantees that the notification becomes visible at the target
//!    only after the data (the one ordering GASPI promises; a second write
//!    on the same queue would not be ordered after the first);
//! 2. in the target process, whoever relays — the rank itself while it
//!    waits (it pumps the ids it waits for), or its relay thread for
//!    windows (every id, so that the other ranks of the node see
//!    notifications addressed to a rank that is not waiting) — takes the
//!    value with `gaspi_notify_reset` (an atomic swap in GPI-2) and only
//!    then posts it into our table with a `SeqCst` store, which wakes the
//!    node's waiters;
//! 3. a waiter that reads our table (`SeqCst`) therefore happens-after the
//!    relay's reset, which happens-after GPI-2 wrote the notification,
//!    which is after the data: it sees the data.
//!
//! Nothing here needs GPI-2 features beyond its main branch. Relaying
//! keeps GASPI's semantics with one difference: two notifications with the
//! same id that arrive before a relay count once in a window's
//! `posted` counter (the value is overwritten either way, as in GASPI).
//!
//! # Atomics across nodes
//! GPI-2's atomics are atomic only with respect to each other, applied by
//! the target's device: its TCP device thread does a plain read, compare
//! and store, and an InfiniBand adapter's atomics do not exclude the CPU's.
//! So once a job has several nodes, every atomic goes through GPI-2, on
//! this node too: a CPU atomic by a rank of the target's node could lose
//! a GPI-2 atomic's update, or the reverse. (Loads stay plain: the device
//! stores whole words.) A word must be addressed through the same rank by
//! everyone (its owner, for the adapters' protocol words; the rank named
//! in the call for the user's), which the TCP device needs to serialise
//! them. The waiters of the target's node are woken by the requester
//! itself on its node, or by a notification on the reserved id
//! [`DOORBELL`], which the relay turns into a wake-up.
//!
//! # Passive messages across hosts
//! Pulled by the receiver's relay thread from the sender's outbox, with
//! notifications past the relayed ids (see `gpi2/passive.rs`).
//!
//! # Remote completion
//! `gaspi_wait` completes writes locally (GPI-2's TCP device: once in the
//! socket). [`Gpi2::flush`] adds remote completion for MPI's flush and
//! unlock: a one-byte read from every rank written to, on the same queue.
//!
//! # Launching
//! GPI-2 reads `GASPI_RANK`, `GASPI_NRANKS`, `GASPI_SOCKET` (the rank on
//! its host) and `GASPI_MFILE` (the machine file); its own `gaspi_run`
//! sets them (ssh, Slurm), and so does our `gaspi-run --engine gpi2` on one
//! machine, without ssh. [`PORT_VAR`] moves GPI-2's ports (so that several
//! jobs can share a machine).

mod passive;
mod watch;

use crate::config::Config;
use crate::engine::remote::{
    AtomicOp, Combine, DOORBELL, IDS, PORT_SPAN, PORT_VAR, Post, QUEUES, Transfer,
};
use crate::engine::segment::SegmentObject;
use crate::error::{Error, Result};
use crate::types::{NotificationId, QueueId, Rank, SegmentId, Timeout};
use gpi2_sys as sys;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

unsafe extern "C" {
    /// GPI-2's configuration (exported by libGPI2 1.5 and 1.6; see `start`).
    static mut glb_gaspi_cfg: sys::gaspi_config_t;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A GPI-2 return code as our error: timeouts and full queues as their
/// variants, a failed rank from GPI-2's state vector, anything else with
/// GPI-2's name for it.
fn check(call: &'static str, code: sys::gaspi_return_t, peer: Option<Rank>) -> Result<()> {
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
fn corrupt(rank: Rank) -> bool {
    states().get(rank as usize) == Some(&sys::GASPI_STATE_CORRUPT)
}

/// Ranks GPI-2's state vector marks corrupt.
fn corrupt_ranks() -> Vec<Rank> {
    states()
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == sys::GASPI_STATE_CORRUPT)
        .map(|(r, _)| r as Rank)
        .collect()
}

/// GPI-2's state vector (empty if GPI-2 cannot give it).
fn states() -> Vec<sys::gaspi_state_t> {
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
fn ms(t: Timeout) -> sys::gaspi_timeout_t {
    match t {
        Timeout::Block => sys::GASPI_BLOCK,
        Timeout::Test => sys::GASPI_TEST,
        Timeout::After(d) => (d.as_millis() as u64).clamp(1, sys::GASPI_BLOCK - 1),
    }
}

/// Our queue as a GPI-2 queue: user queues (`0..15` on this engine, see
/// `queues::queue_max`) one to one, the runtime's own queue on the last
/// GPI-2 queue, which is the runtime's alone.
fn queue_of(q: QueueId) -> sys::gaspi_queue_id_t {
    q.min(QUEUES as u8 - 1)
}

/// GPI-2's segment ids are `0..255`: the runtime's reserved segment (255)
/// becomes GPI-2's 254, and 253 is each process's private scratch page
/// ([`SCRATCH`]); the engine takes both from the user's ids
/// (`Config::segment_max` is at most 253 under it).
pub(crate) const GPI2_SEGMENTS: u32 = 255;

/// GPI-2 segment of this process's scratch page, where flush reads land.
const SCRATCH: SegmentId = (GPI2_SEGMENTS - 2) as SegmentId;
const SCRATCH_BYTES: usize = 4096;
/// How long a leaving rank waits for the others at its last barrier.
const TERM_BARRIER_MS: u64 = 30_000;

fn sid(s: SegmentId) -> sys::gaspi_segment_id_t {
    if s == crate::context::RESERVED_SEGMENT {
        (GPI2_SEGMENTS - 1) as u8
    } else {
        s
    }
}

/// Where this process stands in the GPI-2 job.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    pub(crate) rank: Rank,
    pub(crate) nranks: usize,
    /// Ranks GPI-2 places on this host (by machine-file host name).
    pub(crate) local_num: usize,
    /// This rank's position among them.
    pub(crate) local_rank: usize,
}

/// A segment or window bound as GPI-2 segment `segment`. The relay
/// thread watches a window's table, shared by the node, in which
/// notifications to this rank must appear even while it does not wait.
struct Bound {
    segment: SegmentId,
    obj: Arc<SegmentObject>,
    window: bool,
}

/// Allocate the `bytes` bound as GPI-2 segment [`SCRATCH`] (leaked: GPI-2
/// may write to them until the process ends): the page where flush reads
/// land, then the outbox and landing area of passive messages.
fn scratch_page(bytes: usize) -> Result<*mut u8> {
    let layout = std::alloc::Layout::from_size_align(bytes, SCRATCH_BYTES).expect("a page layout");
    // SAFETY: a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(Error::system(
            "allocating GPI-2's scratch page",
            std::io::Error::from(std::io::ErrorKind::OutOfMemory),
        ));
    }
    Ok(p)
}

/// What the relay thread shares with the rank.
struct Shared {
    bound: Mutex<Vec<Bound>>,
    stop: AtomicBool,
    /// The rank is terminating (the failure watch pings no more).
    leaving: AtomicBool,
    /// Passive messages from other hosts, once enabled.
    intake: Mutex<Option<passive::Intake>>,
    /// Failures across hosts, once enabled.
    watch: Mutex<Option<watch::Watch>>,
    /// The scratch segment's address.
    page: usize,
    /// Largest passive message.
    passive_cap: usize,
}

/// This rank's GPI-2 side.
pub(crate) struct Gpi2 {
    placement: Placement,
    shared: Arc<Shared>,
    relay: Mutex<Option<JoinHandle<()>>>,
    terminated: AtomicBool,
    /// Per GPI-2 queue, the ranks written to since its last
    /// [`Gpi2::flush`].
    unflushed: Mutex<Vec<BTreeSet<Rank>>>,
    /// GPI-2 segment ids whose table of remote descriptions exists in this
    /// process (see [`Gpi2::remote_size`]); taken by binds too.
    described: Mutex<[u64; 4]>,
    /// The scratch page (also what [`Gpi2::describe`] binds for a moment).
    page: usize,
    /// GPI-2's groups twinning ours, by id (see [`Gpi2::group_prepare`]).
    twins: Mutex<BTreeMap<u8, Twin>>,
    /// Passive messages to other hosts.
    outbox: Mutex<passive::Outbox>,
    /// Largest passive message.
    passive_cap: usize,
}

/// What GPI-2's group of one of our ids holds.
///
/// GPI-2 cannot tell two incarnations of a group apart: re-creating a group
/// resets its collective counters and buffers, and `gaspi_group_commit`
/// checks only the size and the xor of the member list. A member still
/// finishing the last collective of the old incarnation then takes the
/// first one of the new incarnation for it (its sync byte has the same
/// value at the same place), and a member committing early fetches the
/// buffer address of a peer's old incarnation, which that peer frees
/// later. So a group committed across hosts is never deleted while it may
/// serve again: our delete keeps it, and committing the same member list
/// under the same id again reuses it; its counters go on, every member's
/// buffers stay where they were, and the commit only refreshes the
/// addresses. A group is deleted in GPI-2 only when its id is committed
/// with another member list (GPI-2's check then keeps the incarnations
/// apart: members wait until every peer has the new list) or when it is
/// in an unknown state (members added but never committed, a collective
/// that timed out and was abandoned).
#[derive(Debug)]
struct Twin {
    /// Members added to it, ascending; empty: none yet.
    members: Vec<Rank>,
    /// Whether it may be kept at our delete and serve a later commit: no
    /// members yet, or committed with no collective left unfinished.
    reusable: bool,
}

impl Twin {
    fn empty() -> Twin {
        Twin {
            members: Vec::new(),
            reusable: true,
        }
    }
}

impl std::fmt::Debug for Gpi2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpi2")
            .field("placement", &self.placement)
            .finish_non_exhaustive()
    }
}

impl Gpi2 {
    /// Start GPI-2 (`gaspi_proc_init`) configured after `config`: as many
    /// queues as it has, notification tables of [`IDS`] + 1 ids, ports
    /// from [`PORT_VAR`] when set. Waits for every rank up to
    /// `config.init_timeout`.
    pub(crate) fn start(config: &Config) -> Result<Gpi2> {
        // SAFETY: an all-zero gaspi_config_t is a valid value (integers
        // and a null pointer) that gaspi_config_get overwrites.
        let mut c: sys::gaspi_config_t = unsafe { std::mem::zeroed() };
        // SAFETY: out pointer to a local of the header's layout.
        check(
            "gaspi_config_get",
            unsafe { sys::gaspi_config_get(&mut c) },
            None,
        )?;
        if let Some(base) = port_from_env()? {
            c.sn_port = base as u32;
            c.dev_config.params.tcp.port = base as u32 + 512;
        }
        c.logger = 0;
        c.queue_num = QUEUES;
        c.queue_size_max = config.queue_size_max.max(c.queue_size_max);
        // Ids past IDS: the doorbell, passive messages (one id per sender
        // rank), failures (one per rank); GPI-2's gaspi_run always sets
        // GASPI_NRANKS.
        let nranks: usize = std::env::var("GASPI_NRANKS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 16);
        c.notification_num = passive::notification_num(nranks);
        c.segment_max = GPI2_SEGMENTS;
        // Our user groups (0: all ranks) have GPI-2 twins of the same ids
        // when they span hosts; contributions to an allreduce over them
        // travel with one header word (see `allreduce_ordered`).
        c.group_max = config.group_max;
        c.allreduce_elem_max = c
            .allreduce_elem_max
            .max((config.allreduce_slot_bytes() + 8).div_ceil(8) as u32);
        c.transfer_size_max = (config.transfer_size_max as u64).max(c.transfer_size_max);
        c.rw_list_elem_max = config.rw_list_elem_max.max(c.rw_list_elem_max);
        // SAFETY: a config read from GPI-2 with checked fields changed.
        check(
            "gaspi_config_set",
            unsafe { sys::gaspi_config_set(c) },
            None,
        )?;
        if c.network == sys::GASPI_ETHERNET && std::env::var_os(PORT_VAR).is_some() {
            // GPI-2 1.5/1.6's gaspi_config_set copies only the InfiniBand
            // device parameters (GPI2_CONFIG.c), so the TCP device would
            // listen on its default ports whatever we ask: two jobs on one
            // machine would collide. Set the port in GPI-2's configuration
            // itself, only for jobs our launcher started (it reserved the
            // range); GPI-2's own gaspi_run jobs keep GPI-2's defaults.
            // SAFETY: `glb_gaspi_cfg` is the gaspi_config_t that
            // gaspi_config_get/set read and write (same layout, checked by
            // gpi2-sys against the installed version); no GPI-2 thread runs
            // before gaspi_proc_init, and this rank's threads do not call
            // GPI-2 concurrently with init.
            unsafe {
                (*std::ptr::addr_of_mut!(glb_gaspi_cfg))
                    .dev_config
                    .params
                    .tcp
                    .port = c.dev_config.params.tcp.port;
            }
        }
        // SAFETY: called once per process (Context allows one at a time,
        // and GPI-2 is never terminated and restarted by us: see `term`).
        let code = unsafe { sys::gaspi_proc_init(ms(config.init_timeout)) };
        check("gaspi_proc_init", code, None).map_err(|e| {
            Error::Environment(format!(
                "GPI-2 did not start ({e}); start the ranks with GPI-2's gaspi_run or \
                 `gaspi-run --engine gpi2`, which set GASPI_RANK, GASPI_NRANKS, \
                 GASPI_SOCKET and GASPI_MFILE"
            ))
        })?;
        let (mut rank, mut num, mut lrank, mut lnum) = (0, 0, 0, 0);
        // SAFETY (four calls): out pointers to locals; GPI-2 is initialised.
        unsafe {
            check("gaspi_proc_rank", sys::gaspi_proc_rank(&mut rank), None)?;
            check("gaspi_proc_num", sys::gaspi_proc_num(&mut num), None)?;
            check(
                "gaspi_proc_local_rank",
                sys::gaspi_proc_local_rank(&mut lrank),
                None,
            )?;
            check(
                "gaspi_proc_local_num",
                sys::gaspi_proc_local_num(&mut lnum),
                None,
            )?;
        }
        let cap = config.passive_transfer_size_max;
        let bytes = passive::scratch_bytes(cap);
        let page = scratch_page(bytes)?;
        // SAFETY: the memory is GPI-2's for the rest of the process (leaked).
        let code = unsafe { sys::gaspi_segment_bind(SCRATCH, page.cast(), bytes as u64, 0) };
        check("gaspi_segment_bind", code, None)?;
        let shared = Arc::new(Shared {
            bound: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            intake: Mutex::new(None),
            watch: Mutex::new(None),
            page: page as usize,
            passive_cap: cap,
        });
        let relay = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("gaspi-gpi2-relay".into())
                .spawn(move || relay_loop(&shared))
                .map_err(|e| Error::system("starting the GPI-2 relay thread", e))?
        };
        Ok(Gpi2 {
            placement: Placement {
                rank,
                nranks: num as usize,
                local_num: lnum as usize,
                local_rank: lrank as usize,
            },
            shared,
            relay: Mutex::new(Some(relay)),
            terminated: AtomicBool::new(false),
            unflushed: Mutex::new(vec![BTreeSet::new(); QUEUES as usize]),
            described: Mutex::new([0; 4]),
            page: page as usize,
            twins: Mutex::new(BTreeMap::new()),
            outbox: Mutex::default(),
            passive_cap: cap,
        })
    }

    pub(crate) fn placement(&self) -> Placement {
        self.placement
    }

    /// Place the ranks as if each block of `per_host` consecutive ranks ran
    /// on a host of its own (`GASPI_HOST_RANKS`, for testing on one
    /// machine).
    pub(crate) fn emulate_hosts(&mut self, per_host: usize) {
        let p = &mut self.placement;
        let (first, num) = crate::context::host_of(p.rank as usize, p.nranks, per_host);
        p.local_rank = p.rank as usize - first;
        p.local_num = num;
    }

    /// A value every rank agrees on: rank 0's `mine` (an allreduce-max
    /// where the others give 0). For the job token under GPI-2's launcher.
    pub(crate) fn agree(&self, mine: u64, timeout: Timeout) -> Result<u64> {
        let send = if self.placement.rank == 0 { mine } else { 0 };
        Ok(self.allreduce_u64(&[send], sys::GASPI_OP_MAX, timeout)?[0])
    }

    /// The greatest common divisor of the job's host sizes (ranks per
    /// host): the largest node size that lets nodes of equal size nest in
    /// every host. Each host's first rank counts its size in a histogram
    /// summed over all ranks (16-bit counters, four to a word: a job has
    /// fewer than 2^16 hosts).
    pub(crate) fn host_size_gcd(&self, timeout: Timeout) -> Result<usize> {
        const SIZES: usize = 256; // GPI-2's GASPI_MAX_PPN
        let p = self.placement;
        let mut histogram = [0u64; SIZES / 4];
        if p.local_rank == 0 && (1..=SIZES).contains(&p.local_num) {
            let s = p.local_num - 1;
            histogram[s / 4] = 1 << (16 * (s % 4));
        }
        let sum = self.allreduce_u64(&histogram, sys::GASPI_OP_SUM, timeout)?;
        let present = (0..SIZES).filter(|s| (sum[s / 4] >> (16 * (s % 4))) & 0xffff != 0);
        let gcd = |a: usize, b: usize| -> usize {
            let (mut a, mut b) = (a, b);
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        Ok(present.map(|s| s + 1).fold(0, gcd).max(1))
    }

    /// GPI-2's allreduce of `send` over all ranks (`op`: sum, min, max).
    fn allreduce_u64(
        &self,
        send: &[u64],
        op: sys::gaspi_operation_t,
        timeout: Timeout,
    ) -> Result<Vec<u64>> {
        let mut recv = vec![0u64; send.len()];
        // SAFETY: GPI-2 reads `send.len()` u64s from `send` and writes as
        // many into `recv`; both live for the call (GPI-2 copies them).
        let code = unsafe {
            sys::gaspi_allreduce(
                send.as_ptr() as *mut std::ffi::c_void,
                recv.as_mut_ptr().cast(),
                send.len() as u32,
                op,
                sys::GASPI_TYPE_ULONG,
                sys::GASPI_GROUP_ALL,
                ms(timeout),
            )
        };
        check("gaspi_allreduce", code, None)?;
        Ok(recv)
    }

    /// Make sure GPI-2 has a twin of our new group `id` (groups spanning
    /// hosts live in GPI-2): one kept from an earlier group of this id, or
    /// a new one. GPI-2 and we both hand out the lowest free id and kept
    /// twins sit on ids free on our side, so the ids stay equal; a
    /// mismatch is an error, never a silent mix-up.
    pub(crate) fn group_create(&self, id: u8) -> Result<()> {
        let mut twins = lock(&self.twins);
        if twins.contains_key(&id) {
            return Ok(());
        }
        Self::twin_create(id)?;
        twins.insert(id, Twin::empty());
        Ok(())
    }

    /// `gaspi_group_create`, checked to give `id`.
    fn twin_create(id: u8) -> Result<()> {
        let mut g: sys::gaspi_group_t = 0;
        // SAFETY: out pointer to a local.
        check(
            "gaspi_group_create",
            unsafe { sys::gaspi_group_create(&mut g) },
            None,
        )?;
        if g != id {
            // SAFETY: plain call on the group GPI-2 just created.
            unsafe { sys::gaspi_group_delete(g) };
            return Err(Error::Engine {
                call: "gaspi_group_create",
                code: sys::GASPI_ERR_INV_GROUP,
                name: "GPI-2 gave the group another id than ours",
            });
        }
        Ok(())
    }

    /// `gaspi_group_delete`.
    fn twin_delete(id: u8) {
        // SAFETY: plain call; an unknown group gives an error.
        let _ = unsafe { sys::gaspi_group_delete(id) };
    }

    /// Our group `id` was deleted: keep its twin if it may serve again
    /// (see [`Twin`]), else delete it in GPI-2.
    pub(crate) fn group_delete(&self, id: u8) {
        let mut twins = lock(&self.twins);
        if twins.get(&id).is_some_and(|t| !t.reusable) {
            twins.remove(&id);
            Self::twin_delete(id);
        }
    }

    /// Prepare GPI-2's twin of group `id` for a commit with `members`: a
    /// twin committed with these members before is reused as it is, an
    /// empty one gets them added, any other is replaced. If adding fails,
    /// the twin is left empty, so a retry adds every member again.
    pub(crate) fn group_prepare(&self, id: u8, members: &[Rank]) -> Result<()> {
        let mut twins = lock(&self.twins);
        let twin = twins.get(&id).ok_or(Error::Engine {
            call: "gaspi_group_add",
            code: sys::GASPI_ERR_INV_GROUP,
            name: "GPI-2 has no twin of this group",
        })?;
        if twin.reusable && twin.members == members {
            return Ok(());
        }
        if !twin.members.is_empty() {
            Self::twin_renew(&mut twins, id)?;
        }
        let added = members.iter().try_for_each(|&m| {
            // SAFETY: plain call.
            check(
                "gaspi_group_add",
                unsafe { sys::gaspi_group_add(id, m) },
                Some(m),
            )
        });
        if let Err(e) = added {
            Self::twin_renew(&mut twins, id)?;
            return Err(e);
        }
        twins.insert(
            id,
            Twin {
                members: members.to_vec(),
                reusable: false,
            },
        );
        Ok(())
    }

    /// Replace the twin of `id` by a new, empty one.
    fn twin_renew(twins: &mut BTreeMap<u8, Twin>, id: u8) -> Result<()> {
        twins.remove(&id);
        Self::twin_delete(id);
        Self::twin_create(id)?;
        twins.insert(id, Twin::empty());
        Ok(())
    }

    /// Commit GPI-2's group `id` (`gaspi_group_commit`: call again after
    /// a timeout). Committing a reused twin again fetches every peer's
    /// buffer address afresh and changes nothing else.
    pub(crate) fn group_commit(&self, id: u8, timeout: Timeout) -> Result<()> {
        // SAFETY: plain call.
        check(
            "gaspi_group_commit",
            unsafe { sys::gaspi_group_commit(id, ms(timeout)) },
            None,
        )?;
        self.twin_settled(id, true);
        Ok(())
    }

    /// Record whether the twin of `id` is between collectives.
    fn twin_settled(&self, id: u8, settled: bool) {
        if let Some(t) = lock(&self.twins).get_mut(&id) {
            t.reusable = settled;
        }
    }

    /// GPI-2's barrier over group `id` (call again after a timeout).
    pub(crate) fn barrier(&self, id: u8, timeout: Timeout) -> Result<()> {
        self.twin_settled(id, false);
        // SAFETY: plain call.
        check(
            "gaspi_barrier",
            unsafe { sys::gaspi_barrier(id, ms(timeout)) },
            None,
        )?;
        self.twin_settled(id, true);
        Ok(())
    }

    /// Allreduce over GPI-2's group `id` that combines contributions in
    /// member order, so that every member gets the same bits and `combine`
    /// need not be commutative: `combine(lower, upper, out)` reduces two
    /// partial results of adjacent member ranges.
    ///
    /// GPI-2's `gaspi_allreduce_user` is recursive doubling (after pairing
    /// ranks `2i, 2i + 1` when the group size is not a power of two): each
    /// step combines two partial results of adjacent, aligned ranges of
    /// members, but passes them as (own, received), whichever is lower.
    /// Each contribution therefore travels as one element, a header word
    /// with the first member index it covers, then the data: the callback
    /// puts the lower range first. `index` is this rank's position in the
    /// group. `send` and `recv` have the same length, at most
    /// [`Gpi2::allreduce_bytes`].
    pub(crate) fn allreduce_ordered(
        &self,
        id: u8,
        index: usize,
        send: &[u8],
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
    ) -> Result<()> {
        const HEADER: usize = 8;
        let len = send.len();
        let mut mine = vec![0u8; HEADER + len];
        mine[..HEADER].copy_from_slice(&(index as u64).to_ne_bytes());
        mine[HEADER..].copy_from_slice(send);
        let mut out = vec![0u8; HEADER + len];
        self.twin_settled(id, false);
        struct State<'a> {
            combine: &'a mut Combine<'a>,
            len: usize,
            panic: Option<Box<dyn std::any::Any + Send>>,
        }
        unsafe extern "C" fn op(
            one: sys::gaspi_pointer_t,
            two: sys::gaspi_pointer_t,
            res: sys::gaspi_pointer_t,
            state: sys::gaspi_reduce_state_t,
            _num: sys::gaspi_number_t,
            _size: sys::gaspi_size_t,
            _timeout: sys::gaspi_timeout_t,
        ) -> sys::gaspi_return_t {
            // SAFETY: `state` is the `State` passed to gaspi_allreduce_user
            // below, alive and not otherwise borrowed during the call; GPI-2
            // passes three distinct buffers of one element (HEADER + len
            // bytes) each.
            let (st, one, two, res) = unsafe {
                let st = &mut *(state as *mut State<'_>);
                let n = HEADER + st.len;
                (
                    st,
                    std::slice::from_raw_parts(one as *const u8, n),
                    std::slice::from_raw_parts(two as *const u8, n),
                    std::slice::from_raw_parts_mut(res as *mut u8, n),
                )
            };
            let first = |b: &[u8]| u64::from_ne_bytes(b[..HEADER].try_into().expect("8 bytes"));
            let (lo, hi) = if first(one) <= first(two) {
                (one, two)
            } else {
                (two, one)
            };
            res[..HEADER].copy_from_slice(&lo[..HEADER]);
            let (lo, hi, out) = (&lo[HEADER..], &hi[HEADER..], &mut res[HEADER..]);
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (st.combine)(lo, hi, out)
            })) {
                Ok(()) => sys::GASPI_SUCCESS,
                Err(p) => {
                    st.panic = Some(p);
                    sys::GASPI_ERROR
                }
            }
        }
        let mut state = State {
            combine,
            len,
            panic: None,
        };
        // SAFETY: one element of HEADER + len bytes in `mine` and `out`,
        // which outlive the call; `state` is what `op` expects.
        let code = unsafe {
            sys::gaspi_allreduce_user(
                mine.as_mut_ptr().cast(),
                out.as_mut_ptr().cast(),
                1,
                (HEADER + len) as u64,
                Some(op),
                (&mut state as *mut State<'_>).cast(),
                id,
                ms(timeout),
            )
        };
        if let Some(p) = state.panic.take() {
            std::panic::resume_unwind(p);
        }
        check("gaspi_allreduce_user", code, None)?;
        self.twin_settled(id, true);
        recv.copy_from_slice(&out[HEADER..]);
        Ok(())
    }

    /// Bind `obj`, this rank's segment or its node's window `segment`, as
    /// GPI-2 segment `segment`; a window's table is relayed.
    pub(crate) fn bind(
        &self,
        segment: SegmentId,
        obj: &Arc<SegmentObject>,
        window: bool,
    ) -> Result<()> {
        // GPI-2 refuses empty segments; one byte past an empty one is never
        // accessed (every range is checked against our size first).
        let size = obj.size().max(1) as u64;
        let mut described = lock(&self.described);
        // SAFETY: the memory is the object's mapping, which stays mapped
        // until `unbind` (called before the object is dropped).
        let code = unsafe { sys::gaspi_segment_bind(sid(segment), obj.data().cast(), size, 0) };
        check("gaspi_segment_bind", code, None)?;
        let id = sid(segment);
        described[id as usize / 64] |= 1 << (id % 64);
        drop(described);
        lock(&self.shared.bound).push(Bound {
            segment,
            obj: obj.clone(),
            window,
        });
        Ok(())
    }

    /// Undo [`Gpi2::bind`].
    pub(crate) fn unbind(&self, segment: SegmentId) {
        lock(&self.shared.bound).retain(|r| r.segment != segment);
        // SAFETY: plain call; a segment that is not bound gives an error.
        let _ = unsafe { sys::gaspi_segment_delete(sid(segment)) };
    }

    /// Let `rank` (on another node) access segment `segment`.
    pub(crate) fn register(&self, segment: SegmentId, rank: Rank, timeout: Timeout) -> Result<()> {
        // SAFETY: plain call.
        let code = unsafe { sys::gaspi_segment_register(sid(segment), rank, ms(timeout)) };
        check("gaspi_segment_register", code, Some(rank))
    }

    /// Size of segment `segment` of `rank` as GPI-2 knows it (registered
    /// with this rank), or `None`.
    pub(crate) fn remote_size(&self, rank: Rank, segment: SegmentId) -> Option<usize> {
        self.describe(segment).ok()?;
        let mut size: sys::gaspi_size_t = 0;
        // SAFETY: out pointer to a local.
        let code = unsafe { sys::gaspi_segment_size(sid(segment), rank, &mut size) };
        (code == sys::GASPI_SUCCESS && size > 0).then_some(size as usize)
    }

    /// Make sure GPI-2 has its table of remote descriptions of `segment`:
    /// GPI-2 creates it when the process binds the id or a peer registers
    /// one with it, and its production library reads the table without a
    /// check (`gaspi_segment_size` of an id nobody registered crashes).
    /// Binding the scratch page under the id for a moment creates it; the
    /// table stays after the delete. Nothing is sent to other ranks.
    fn describe(&self, segment: SegmentId) -> Result<()> {
        let id = sid(segment);
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        let mut described = lock(&self.described);
        if described[word] & bit != 0 {
            return Ok(());
        }
        // SAFETY: the scratch page is leaked, so valid for any binding;
        // the id is not bound here (binds mark it described, under this
        // lock), and it is deleted again at once.
        let code = unsafe { sys::gaspi_segment_bind(id, self.page as *mut _, 1, 0) };
        check("gaspi_segment_bind", code, None)?;
        // SAFETY: the segment just bound.
        unsafe { sys::gaspi_segment_delete(id) };
        described[word] |= bit;
        Ok(())
    }

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
                // SAFETY (each arm): five arrays of `n` elements, alive for
                // the call (GPI-2 copies them into its queue entries).
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
        if let Post::Write(_) = post {
            lock(&self.unflushed)[q as usize].insert(rank);
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
        self.wait(queue, Timeout::Block)
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
        // SAFETY (both arms): out pointer to a local; offset checked.
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

    /// Remote completion: wait for `queue`, then make every write posted
    /// to it since the last flush visible at its target. `gaspi_wait` only
    /// promises local completion (GPI-2's TCP device completes a write once
    /// it is in the socket), so a rank that learns of the write through
    /// another path (a lock handed over, a third rank) could read the old
    /// data. A one-byte read from each target written to, on the same
    /// queue, completes only after the writes before it: GPI-2 sends every
    /// request to a rank over one connection that the target serves in
    /// order (TCP), or one queue pair that executes in order (InfiniBand:
    /// a read does not pass earlier writes on its queue pair).
    /// `remote` is (segment, offset) of a byte that every rank has
    /// registered with every other.
    pub(crate) fn flush(
        &self,
        queue: QueueId,
        remote: (SegmentId, u64),
        timeout: Timeout,
    ) -> Result<()> {
        let q = queue_of(queue) as usize;
        self.wait(queue, timeout)?;
        let ranks = std::mem::take(&mut lock(&self.unflushed)[q]);
        let read = Transfer {
            local: (SCRATCH, 0),
            remote,
            size: 1,
        };
        let done = || {
            for &r in &ranks {
                loop {
                    match self.post(r, &[read], Post::Read(None), queue) {
                        Err(Error::QueueFull { .. }) => self.wait(queue, timeout)?,
                        res => break res?,
                    }
                }
            }
            self.wait(queue, timeout)
        };
        done().inspect_err(|_| lock(&self.unflushed)[q].extend(&ranks))
    }

    /// Wait until the requests posted on `queue` have completed locally
    /// (`gaspi_wait`).
    /// A request that failed (its target died) ends the wait with
    /// [`Error::RankFailed`] naming a rank GPI-2's state vector marks
    /// corrupt; GPI-2 has taken that request off the queue, so waiting
    /// again waits for the others.
    pub(crate) fn wait(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        // SAFETY: plain call.
        let code = unsafe { sys::gaspi_wait(queue_of(queue), ms(timeout)) };
        match self.corrupt_ranks().first() {
            Some(&rank) if code == sys::GASPI_ERROR => Err(Error::RankFailed { rank }),
            _ => check("gaspi_wait", code, None),
        }
    }

    /// Discard the requests of `queue` (`gaspi_queue_purge`).
    pub(crate) fn purge(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        // SAFETY: plain call.
        let code = unsafe { sys::gaspi_queue_purge(queue_of(queue), ms(timeout)) };
        check("gaspi_queue_purge", code, None)
    }

    /// Ranks GPI-2's state vector marks corrupt (a request to them failed).
    pub(crate) fn corrupt_ranks(&self) -> Vec<Rank> {
        corrupt_ranks()
    }

    /// Move notifications `ids` of GPI-2 segment `segment` into `obj`'s
    /// table (see the module docs). Cheap when none is set: one scan.
    pub(crate) fn pump(&self, segment: SegmentId, obj: &SegmentObject, ids: Range<NotificationId>) {
        pump(segment, obj, ids);
    }

    /// Leave GPI-2: drain the queues (briefly), wait at a barrier of
    /// every rank (up to [`TERM_BARRIER_MS`]; skipped when a rank is known
    /// dead: `peers_failed`, or GPI-2's state vector), stop the relay, then
    /// `gaspi_proc_term`. After a failure of this rank only the relay is
    /// stopped.
    ///
    /// The barrier keeps a rank that finished from tearing down its
    /// connections while its last writes are on their way (GPI-2's wait is
    /// local completion: a closed socket may drop them) or while its relay
    /// is still needed by the other ranks of its node.
    pub(crate) fn term(&self, failed: bool, peers_failed: bool) {
        if self.terminated.swap(true, SeqCst) {
            return;
        }
        self.shared.leaving.store(true, SeqCst);
        if !failed {
            for q in 0..QUEUES {
                // SAFETY: plain call.
                let _ = unsafe { sys::gaspi_wait(q as u8, 2_000) };
            }
            // Not with a dead rank: the barrier could only time out.
            if !peers_failed && !states().contains(&sys::GASPI_STATE_CORRUPT) {
                // SAFETY: plain call. A timeout (a rank that stays much
                // longer) only ends the wait.
                let _ = unsafe { sys::gaspi_barrier(sys::GASPI_GROUP_ALL, TERM_BARRIER_MS) };
            }
        }
        self.shared.stop.store(true, SeqCst);
        if let Some(h) = lock(&self.relay).take() {
            let _ = h.join();
        }
        lock(&self.shared.bound).clear();
        if failed {
            return;
        }
        // SAFETY: plain call; nothing of ours uses GPI-2 after it.
        let _ = unsafe { sys::gaspi_proc_term(10_000) };
    }
}

/// The base of GPI-2's ports from [`PORT_VAR`].
fn port_from_env() -> Result<Option<u16>> {
    match std::env::var(PORT_VAR) {
        Ok(v) => v
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| (1024..=u16::MAX - PORT_SPAN).contains(p))
            .map(Some)
            .ok_or_else(|| {
                Error::Environment(format!(
                    "{PORT_VAR}={v} is not a port base in 1024..{}",
                    u16::MAX - PORT_SPAN
                ))
            }),
        Err(_) => Ok(None),
    }
}

/// Returns how many notifications it moved.
fn pump(segment: SegmentId, obj: &SegmentObject, ids: Range<NotificationId>) -> usize {
    let mut moved = 0;
    let end = ids.end.min(IDS).min(obj.notification_num());
    let mut begin = ids.start;
    let table = obj.notifications();
    while begin < end {
        let mut first: sys::gaspi_notification_id_t = 0;
        // SAFETY: out pointer to a local; the range is within GPI-2's
        // table (IDS + 1 ids) and the segment is bound while `obj` is ours.
        let code = unsafe {
            sys::gaspi_notify_waitsome(
                sid(segment),
                begin,
                end - begin,
                &mut first,
                sys::GASPI_TEST,
            )
        };
        if code != sys::GASPI_SUCCESS || first >= end {
            break;
        }
        let mut value: sys::gaspi_notification_t = 0;
        // SAFETY: out pointer to a local; `first` is in range.
        unsafe { sys::gaspi_notify_reset(sid(segment), first, &mut value) };
        if value != 0 {
            table.post(first, value);
            moved += 1;
        }
        begin = first + 1;
    }
    moved
}

/// Take the doorbell of a relayed window: a wake-up for its node.
fn doorbell(r: &Bound) -> bool {
    let mut first: sys::gaspi_notification_id_t = 0;
    // SAFETY: out pointer to a local; DOORBELL is within GPI-2's table.
    let code = unsafe {
        sys::gaspi_notify_waitsome(sid(r.segment), DOORBELL, 1, &mut first, sys::GASPI_TEST)
    };
    if code != sys::GASPI_SUCCESS {
        return false;
    }
    let mut value = 0;
    // SAFETY: out pointer to a local.
    unsafe { sys::gaspi_notify_reset(sid(r.segment), DOORBELL, &mut value) };
    r.obj.notifications().ww.wake();
    true
}

/// The relay thread: pump every window, often after activity, then less
/// and less often (20 us to 2 ms) while nothing arrives.
fn relay_loop(sh: &Shared) {
    const FAST: Duration = Duration::from_micros(20);
    const SLOW: Duration = Duration::from_millis(2);
    let mut nap = SLOW;
    while !sh.stop.load(SeqCst) {
        let mut busy = false;
        // Under the lock, so that no segment is deleted meanwhile (GPI-2
        // does not check that a segment exists when it scans its table).
        let bound = lock(&sh.bound);
        for b in bound.iter().filter(|b| b.window) {
            busy |= doorbell(b);
            busy |= pump(b.segment, &b.obj, 0..IDS) > 0;
        }
        let reserved = crate::context::RESERVED_SEGMENT;
        if bound.iter().any(|b| b.segment == reserved) {
            if let Some(intake) = lock(&sh.intake).as_mut() {
                busy |= intake.step(sh.page, sh.passive_cap);
            }
            if let Some(watch) = lock(&sh.watch).as_mut() {
                busy |= watch.step(sh.leaving.load(SeqCst), corrupt_ranks);
            }
        }
        drop(bound);
        nap = if busy { FAST } else { (nap * 2).min(SLOW) };
        std::thread::sleep(nap);
    }
}
