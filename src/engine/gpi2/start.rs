//! Starting GPI-2 and joining the job it describes.

use super::calls::Reading;
use super::codes::{GPI2_SEGMENTS, QUEUES, SCRATCH, SCRATCH_BYTES, check, ms};
use super::flush::Unflushed;
use super::intake;
use super::relay::{Shared, relay_loop};
use super::{Gpi2, Placement};
use crate::config::{Config, WaitMode};
use crate::engine::Native;
use crate::engine::job;
use crate::engine::spec::{JobSpec, job_spec, spec_from_env};
use crate::env;
use crate::error::{Error, Result};
use crate::types::Timeout;
use gpi2_sys as sys;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

unsafe extern "C" {
    /// GPI-2's configuration (exported by libGPI2 1.5 and 1.6; see `launch`).
    static mut glb_gaspi_cfg: sys::gaspi_config_t;
}

/// Start the GPI-2 engine for this process: GPI-2 starts and says who is
/// where, and the job is joined accordingly. Under our launcher the job is
/// joined first (the launcher watches the ranks, so a rank that never
/// starts fails init instead of hanging GPI-2's), with its token and node
/// emulation; under GPI-2's own launcher the token comes from rank 0
/// through GPI-2, nodes are GPI-2's hosts, and each host's ranks share a
/// control block of their own. A one-rank job started on its own needs no
/// GPI-2.
pub(crate) fn start(config: &mut Config) -> Result<Native> {
    // GPI-2 has 255 segment ids; the runtime takes the last two.
    config.segment_max = config.segment_max.min(GPI2_SEGMENTS - 2);
    if config.wait_mode == WaitMode::Auto {
        // GPI-2 writes data and notifications from its own threads
        // (device, NIC), which cannot wake a rank sleeping in the kernel:
        // waiters yield and look (pumping) instead of sleeping, and do not
        // spin either, which would keep those threads off the cores (the
        // MPI engine, whose transfers progress in the ranks' own calls,
        // spins first: see `Native::join`).
        config.wait_mode = WaitMode::Yield;
    }
    let emulated = env::number(env::HOST_RANKS)?.filter(|&h| h > 0);
    if std::env::var_os(env::LAUNCHER).is_some() {
        let mut spec = spec_from_env()?;
        if let Some(h) = emulated {
            spec.emulate_host(h);
        }
        let mut engine = Native::attach(&spec, config, None)?;
        match Gpi2::launch(config) {
            Ok(g) => engine.set_transport(Box::new(g)),
            Err(e) => {
                engine.term(true);
                return Err(e);
            }
        }
        return Ok(engine);
    }
    if std::env::var_os(env::GPI2_MFILE).is_none() && std::env::var(env::NRANKS).is_err() {
        // A one-rank job started on its own: no other node to reach.
        return Native::attach(&spec_from_env()?, config, None);
    }
    let mut g = Gpi2::launch(config)?;
    if let Some(h) = emulated {
        g.emulate_hosts(h);
    }
    // Emulated hosts share this machine; real ones are GPI-2's.
    let machine = if emulated.is_some() {
        g.placement().nranks
    } else {
        g.placement().local_num
    };
    let spec = match g.job_spec(config, machine) {
        Ok(spec) => spec,
        Err(e) => {
            g.leave(true, false);
            return Err(e);
        }
    };
    Native::attach(&spec, config, Some(Box::new(g)))
}

impl Gpi2 {
    /// The job as GPI-2 placed this process: one token per host (ranks of
    /// different hosts share no object, which emulated hosts rely on),
    /// nodes that nest in hosts; `machine_ranks` of the job's ranks run on
    /// this machine.
    fn job_spec(&self, config: &Config, machine_ranks: usize) -> Result<JobSpec> {
        let p = self.placement();
        let mine = u64::from_str_radix(
            &job::new_token().map_err(|e| Error::system("drawing a job token", e))?[..15],
            16,
        )
        .unwrap_or(1)
            | 1;
        let token = job::host_token(
            &format!("g{:x}", self.agree(mine, config.init_timeout)?),
            p.rank as usize - p.local_rank,
        );
        if p.local_rank == 0 {
            // No launcher of ours cleans up after jobs of GPI-2's: remove
            // what killed ones left on this host.
            job::sweep_stale();
        }
        let mut spec = job_spec(token, p.rank as usize, p.nranks, machine_ranks, false)?;
        if std::env::var_os(env::PPN).is_none() {
            // Nodes are hosts when all hosts have as many ranks, else the
            // largest size that divides every host.
            spec.ppn = self.host_size_gcd(config.init_timeout)?;
        }
        spec.attach = p.local_num;
        spec.host_first = p.rank as usize - p.local_rank;
        // Nodes (GPI-2's hosts, or emulated ones inside them) must be
        // blocks of consecutive ranks within one host.
        let host = spec.host_first;
        let node = p.rank as usize / spec.ppn * spec.ppn;
        if node < host || (node + spec.ppn).min(p.nranks) > host + p.local_num {
            return Err(Error::Environment(format!(
                "rank {}'s node (ranks {node}.. in blocks of {}) spans hosts under GPI-2: \
                 list each host's ranks consecutively in the machine file",
                p.rank, spec.ppn
            )));
        }
        Ok(spec)
    }

    /// Start GPI-2 (`gaspi_proc_init`) configured after `config`: as many
    /// queues as it has, notification tables of
    /// [`IDS`](crate::engine::transport::IDS) + 1 ids, ports from
    /// [`GPI2_PORT`](crate::env::GPI2_PORT) when set. Waits for every rank up to
    /// `config.init_timeout`.
    fn launch(config: &Config) -> Result<Gpi2> {
        // SAFETY: an all-zero gaspi_config_t is a valid value (integers
        // and a null pointer) that gaspi_config_get overwrites.
        let mut c: sys::gaspi_config_t = unsafe { std::mem::zeroed() };
        // SAFETY: out pointer to a local of the header's layout.
        let code = unsafe { sys::gaspi_config_get(&mut c) };
        check("gaspi_config_get", code, None)?;
        if let Some(base) = port_from_env()? {
            c.sn_port = base as u32;
            c.dev_config.params.tcp.port = base as u32 + 512;
        }
        c.logger = 0;
        c.queue_num = QUEUES;
        c.queue_size_max = config.queue_size_max.max(c.queue_size_max);
        // Ids past IDS: the doorbell, passive messages (one id per sender
        // rank), failures and departures (one per rank each), groups'
        // readiness (one per rank and group); GPI-2's gaspi_run always sets
        // GASPI_NRANKS.
        let nranks: usize = std::env::var(env::NRANKS)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 16);
        c.notification_num = intake::notification_num(nranks, config.group_max);
        c.segment_max = GPI2_SEGMENTS;
        // Our user groups (0: all ranks) have GPI-2 twins of the same ids
        // when they span hosts; contributions to an allreduce over them
        // travel behind two words, the first member's index and the
        // contribution's shape (see `allreduce_ordered`).
        c.group_max = config.group_max;
        c.allreduce_elem_max = c
            .allreduce_elem_max
            .max((config.allreduce_slot_bytes() + 16).div_ceil(8) as u32);
        c.transfer_size_max = (config.transfer_size_max as u64).max(c.transfer_size_max);
        c.rw_list_elem_max = config.rw_list_elem_max.max(c.rw_list_elem_max);
        // SAFETY: a config read from GPI-2 with checked fields changed.
        let code = unsafe { sys::gaspi_config_set(c) };
        check("gaspi_config_set", code, None)?;
        if c.network == sys::GASPI_ETHERNET && std::env::var_os(env::GPI2_PORT).is_some() {
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
        // A host name that does not resolve never gets its rank started
        // (gaspi_run's ssh fails): say so now instead of after the whole
        // init timeout.
        if let Ok(mfile) = std::env::var(env::GPI2_MFILE) {
            unresolved_hosts(&mfile)?;
        }
        // GPI-2's threads (its TCP device's) and our relay float over the
        // launcher's CPUs; the rank stays where the launcher bound it.
        // SAFETY: called once per process (Context allows one at a time,
        // and GPI-2 is never terminated and restarted by us: see `term`).
        let code = crate::sys::with_helpers_unbound(|| unsafe {
            sys::gaspi_proc_init(ms(config.init_timeout))
        });
        check("gaspi_proc_init", code, None).map_err(|e| {
            let launched = std::env::var_os(env::GPI2_MFILE).is_some()
                && std::env::var_os(env::SOCKET).is_some();
            Error::Environment(if !launched {
                format!(
                    "GPI-2 did not start ({e}); start the ranks with GPI-2's gaspi_run or \
                     `gaspi-run --engine gpi2`, which set GASPI_RANK, GASPI_NRANKS, \
                     GASPI_SOCKET and GASPI_MFILE"
                )
            } else if matches!(e, Error::Timeout) {
                format!(
                    "GPI-2 did not start within the init timeout ({:?}): not every rank of \
                     the machine file joined. Most likely a host in it did not resolve or did \
                     not answer (ssh), or its rank failed to start there; check the machine \
                     file {} and that `ssh HOST true` works for each host",
                    config.init_timeout,
                    std::env::var(env::GPI2_MFILE).unwrap_or_default()
                )
            } else {
                format!("GPI-2 did not start ({e}); check the machine file and every host in it")
            })
        })?;
        let (mut rank, mut num, mut lrank, mut lnum) = (0, 0, 0, 0);
        // SAFETY: four calls with out pointers to locals; GPI-2 is
        // initialised.
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
        let bytes = intake::scratch_bytes(cap, num as usize);
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
            let nap = config.relay_nap;
            crate::sys::with_helpers_unbound(|| {
                std::thread::Builder::new()
                    .name("gaspi-gpi2-relay".into())
                    .spawn(move || relay_loop(&shared, nap))
            })
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
            unflushed: Mutex::new(Unflushed::new(QUEUES as usize)),
            flush_reads: Mutex::default(),
            reading: Mutex::new(vec![Reading::default(); QUEUES as usize]),
            described: Mutex::new([0; 4]),
            parked: Mutex::new([0; 4]),
            kept: Mutex::new(None),
            page: page as usize,
            twins: Mutex::default(),
            group_max: config.group_max,
            outbox: Mutex::default(),
            passive_cap: cap,
        })
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    /// Place the ranks as if each block of `per_host` consecutive ranks ran
    /// on a host of its own (`GASPI_HOST_RANKS`, for testing on one
    /// machine).
    fn emulate_hosts(&mut self, per_host: usize) {
        let p = &mut self.placement;
        let (first, num) = job::host_of(p.rank as usize, p.nranks, per_host);
        p.local_rank = p.rank as usize - first;
        p.local_num = num;
    }

    /// A value every rank agrees on: rank 0's `mine` (an allreduce-max
    /// where the others give 0). For the job token under GPI-2's launcher.
    fn agree(&self, mine: u64, timeout: Timeout) -> Result<u64> {
        let send = if self.placement.rank == 0 { mine } else { 0 };
        Ok(self.allreduce_u64(&[send], sys::GASPI_OP_MAX, timeout)?[0])
    }

    /// The greatest common divisor of the job's host sizes (ranks per
    /// host): the largest node size that lets nodes of equal size nest in
    /// every host. Each host's first rank counts its size in a histogram
    /// summed over all ranks (16-bit counters, four to a word: a job has
    /// fewer than 2^16 hosts).
    fn host_size_gcd(&self, timeout: Timeout) -> Result<usize> {
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
/// The base of GPI-2's ports from [`env::GPI2_PORT`].
/// Fail, naming them, if host names of the machine file `path` do not
/// resolve (a typo, a host outside the cluster's name service); a file
/// that cannot be read is left to GPI-2.
fn unresolved_hosts(path: &str) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let hosts = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|h| !h.starts_with('#'));
    let bad = crate::sys::unresolved(hosts);
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::Environment(format!(
        "host(s) {} of the machine file {path} do not resolve: their ranks cannot be started \
         (check the names, or the cluster's host names with `getent hosts NAME`)",
        bad.join(", ")
    )))
}

fn port_from_env() -> Result<Option<u16>> {
    match std::env::var(env::GPI2_PORT) {
        Ok(v) => v
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| (1024..=u16::MAX - env::GPI2_PORT_SPAN).contains(p))
            .map(Some)
            .ok_or_else(|| {
                Error::Environment(format!(
                    "{}={v} is not a port base in 1024..{}",
                    env::GPI2_PORT,
                    u16::MAX - env::GPI2_PORT_SPAN
                ))
            }),
        Err(_) => Ok(None),
    }
}
