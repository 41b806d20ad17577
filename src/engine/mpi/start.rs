//! Starting the MPI engine: MPI says who is where, and the job is joined
//! accordingly.

use super::groups::Twin;
use super::relay::{Shared, relay_loop};
use super::{Mpi, ffi, keyed, segments};
use crate::config::Config;
use crate::engine::Native;
use crate::engine::job;
use crate::engine::spec::{JobSpec, job_spec, spec_from_env};
use crate::env;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Start the MPI engine for this process. Under our launcher (which
/// serves MPI's process manager interface itself) the job is joined first,
/// with its token and node emulation, as the launcher watches the ranks;
/// under `mpirun` or `srun` the token comes from rank 0 through MPI, hosts
/// are MPI's shared-memory domains, and each host's ranks share a control
/// block of their own.
pub(crate) fn start(config: &mut Config, comm: Option<mpi::ffi::MPI_Comm>) -> Result<Native> {
    let emulated = env::number(env::HOST_RANKS)?.filter(|&h| h > 0);
    init()?;
    let comm = comm.map_or_else(ffi::world, ffi::Handle);
    let (rank, nranks) = ffi::rank_size(comm);
    let relay_nap = config.relay_nap;
    let launch = |host| Mpi::launch(comm, rank, nranks, host, emulated.is_some(), relay_nap);
    if std::env::var_os(env::LAUNCHER).is_some() {
        let mut spec = spec_from_env()?;
        if (spec.rank as usize, spec.nranks) != (rank, nranks) {
            return Err(Error::Environment(format!(
                "MPI says rank {rank} of {nranks}, our launcher rank {} of {}: start the job \
                 with `gaspi-run --engine mpi` or with mpirun alone",
                spec.rank, spec.nranks
            )));
        }
        let host = match emulated {
            Some(h) => {
                spec.emulate_host(h);
                spec.host_first..spec.host_first + spec.attach
            }
            None => 0..nranks,
        };
        let mut engine = Native::attach(&spec, config, None)?;
        match launch(host) {
            Ok(m) => engine.set_transport(Box::new(m)),
            Err(e) => {
                engine.term(true);
                return Err(e);
            }
        }
        return Ok(engine);
    }
    let host = match emulated {
        Some(h) => {
            let (first, num) = job::host_of(rank, nranks, h);
            first..first + num
        }
        None => shared_host(comm)?,
    };
    // Emulated hosts share this machine; real ones are MPI's.
    let machine = if emulated.is_some() {
        nranks
    } else {
        host.len()
    };
    let mut spec = job_spec_mpi(comm, rank, nranks, &host, machine)?;
    if let Some(h) = emulated {
        spec.emulate_host(h);
        // The other hosts' ranks share this machine but not this host's
        // control block: MPI tells whether this rank's CPUs are its own
        // (mpirun binding each rank to a core: it sees one, and its host's
        // share of that one rounds to none, so without this it never spun).
        let spans =
            ffi::allgather_u64(comm, u64::from(job::cpu_span(&crate::sys::allowed_cpus())))?;
        let others = spans.iter().enumerate().filter(|&(o, _)| o != rank);
        spec.own_cpus = Some(job::cpus_of_its_own(
            spans[rank] as u32,
            others.map(|(_, &s)| s as u32),
        ));
    }
    let m = launch(host)?;
    Native::attach(&spec, config, Some(Box::new(m)))
}

/// Initialise MPI unless the program (or an earlier context) did.
fn init() -> Result<()> {
    if !ffi::initialized() {
        ffi::init_thread()?;
        ffi::finalize_at_exit();
    }
    // Until this context leaves with everyone, exiting must not finalise.
    ffi::may_finalize(false);
    if ffi::thread_level() < ffi::thread_multiple() {
        return Err(Error::Environment(
            "the MPI engine needs MPI_THREAD_MULTIPLE (its relay thread calls MPI): \
             initialise MPI with it, or use an MPI library that provides it"
                .into(),
        ));
    }
    if ffi::replace_op().is_none() {
        return Err(Error::Environment(
            "the MPI engine needs an MPI library of the MPICH ABI (MPICH, Intel MPI, MVAPICH, \
             Cray MPICH); this one is not"
                .into(),
        ));
    }
    let version = mpi::environment::library_version().unwrap_or_default();
    let asks = std::env::var(INTEL_ASYNC_PROGRESS).ok();
    if intel_async_progress(&version, asks.as_deref()) {
        return Err(Error::Environment(format!(
            "{INTEL_ASYNC_PROGRESS} is on: Intel MPI's progress thread crashes or hangs with the \
             dynamic window the MPI engine uses (scripts/mpi/async_progress_rma.c shows it without \
             this library); unset it, and for ranks that compute outside the library set \
             GASPI_RELAY_NAP_US instead (docs/guide/mpi.md, \"A target that computes\")"
        )));
    }
    Ok(())
}

/// The tag pairs of keyed messages ([`crate::env::KEYED_SLOTS`]; 0, the
/// default, where unset or unreadable; above 4096 counts as 4096).
fn keyed_slots() -> u64 {
    std::env::var(env::KEYED_SLOTS)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
}

/// Intel MPI's switch for its asynchronous progress thread.
const INTEL_ASYNC_PROGRESS: &str = "I_MPI_ASYNC_PROGRESS";

/// Whether the MPI library (`version`: `MPI_Get_library_version`) is
/// Intel's and its progress thread is on (`asks`: the value of
/// [`INTEL_ASYNC_PROGRESS`], which Intel MPI takes as on for 1, yes, on,
/// true or enable). With Intel MPI 2021.18 (shared memory), one-sided
/// operations to a dynamic window crashed in that thread or hung, and
/// `MPI_Win_set_errhandler` on one hung (2026-11-30): the engine would
/// hang at start.
fn intel_async_progress(version: &str, asks: Option<&str>) -> bool {
    let on = asks.is_some_and(|v| {
        ["1", "yes", "on", "true", "enable"].contains(&v.trim().to_ascii_lowercase().as_str())
    });
    on && version.contains("Intel")
}

/// The ranks sharing this machine's memory, which must be consecutive.
fn shared_host(world: ffi::Comm) -> Result<Range<usize>> {
    let (rank, _) = ffi::rank_size(world);
    let local = ffi::split_shared(world)?;
    let (lrank, lnum) = ffi::rank_size(local);
    let mut ends = [rank as u64 - lrank as u64, u64::MAX - rank as u64];
    let ok = ffi::allreduce_u64(local, &mut ends, true);
    ffi::comm_free(local);
    ok?;
    // The largest first rank and the smallest rank of the host must be
    // the first rank: the host is a block.
    let first = rank - lrank;
    if ends[0] != first as u64 || u64::MAX - ends[1] != first as u64 {
        return Err(Error::Environment(
            "the ranks of a host are not consecutive: place ranks by block \
             (mpirun -ppn N / --map-by core, srun --distribution=block)"
                .into(),
        ));
    }
    Ok(first..first + lnum)
}

/// The job as MPI placed this process: one token per host, nodes that
/// nest in hosts (`GASPI_PPN`, else the largest size dividing every host);
/// `machine_ranks` of the job's ranks run on this machine.
fn job_spec_mpi(
    world: ffi::Comm,
    rank: usize,
    nranks: usize,
    host: &Range<usize>,
    machine_ranks: usize,
) -> Result<JobSpec> {
    let mine = if rank == 0 {
        u64::from_str_radix(
            &job::new_token().map_err(|e| Error::system("drawing a job token", e))?[..15],
            16,
        )
        .unwrap_or(1)
            | 1
    } else {
        0
    };
    let mut token = [mine];
    ffi::allreduce_u64(world, &mut token, true)?;
    let token = job::host_token(&format!("m{:x}", token[0]), host.start);
    if rank == host.start {
        // No launcher of ours cleans up after mpirun's jobs: remove what
        // killed ones left on this host.
        job::sweep_stale();
    }
    let mut spec = job_spec(token, rank, nranks, machine_ranks, false)?;
    if std::env::var_os(env::PPN).is_none() {
        let sizes = ffi::allgather_u64(world, host.len() as u64)?;
        let gcd = |a: u64, b: u64| {
            let (mut a, mut b) = (a, b);
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        spec.ppn = sizes.into_iter().fold(0, gcd).max(1) as usize;
    }
    spec.attach = host.len();
    spec.host_first = host.start;
    let node = rank / spec.ppn * spec.ppn;
    if node < host.start || (node + spec.ppn).min(nranks) > host.end {
        return Err(Error::Environment(format!(
            "rank {rank}'s node (ranks {node}.. in blocks of {}) spans hosts: set GASPI_PPN \
             to a size that divides every host's ranks",
            spec.ppn
        )));
    }
    Ok(spec)
}

impl Mpi {
    /// Make the engine's communicators, window and directory, and start
    /// the relay (collective over all ranks).
    fn launch(
        world: ffi::Comm,
        rank: usize,
        nranks: usize,
        host: Range<usize>,
        emulated: bool,
        relay_nap: Duration,
    ) -> Result<Mpi> {
        let comm = ffi::dup(world)?;
        let coll = ffi::dup(world)?;
        let win = ffi::window(comm)?;
        let directory: &'static [AtomicU64] = Box::leak(segments::directory(nranks));
        // SAFETY: the directory is leaked (valid for ever); other ranks
        // write whole slots of it.
        unsafe { ffi::attach(win, directory.as_ptr() as *mut u8, directory.len() * 8)? };
        let directories = ffi::allgather_u64(world, ffi::address(directory.as_ptr().cast()))?;
        let shared = Arc::new(Shared {
            bound: Mutex::new(BTreeMap::new()),
            stop: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            intake: Mutex::new(None),
            block: Mutex::new(None),
            watch: Mutex::new(None),
            win,
            comm,
            pumped: Default::default(),
            epoch: std::time::Instant::now(),
        });
        let relay = {
            let shared = shared.clone();
            // It floats over the launcher's CPUs (ours, under gaspi-run);
            // the rank stays bound.
            crate::sys::with_helpers_unbound(|| {
                std::thread::Builder::new()
                    .name("gaspi-mpi-relay".into())
                    .spawn(move || relay_loop(&shared, relay_nap))
            })
            .map_err(|e| Error::system("starting the MPI relay thread", e))?
        };
        Ok(Mpi {
            rank,
            nranks,
            host,
            emulated,
            win,
            coll,
            directories,
            directory,
            shared,
            relay: Mutex::new(Some(relay)),
            terminated: AtomicBool::new(false),
            unflushed: Mutex::default(),
            // Group 0, all ranks, exists from the start (GASPI_GROUP_ALL).
            twins: Mutex::new(BTreeMap::from([(0, Twin::all(nranks))])),
            outbox: Mutex::default(),
            keyed: Mutex::new(keyed::Keyed::with_slots(keyed_slots())),
            graves: Mutex::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::intel_async_progress;

    #[test]
    fn intel_mpis_progress_thread_is_refused_and_nothing_else() {
        let intel = "Intel(R) MPI Library 2021.18 for Linux* OS";
        let mpich = "MPICH Version:      4.0.2";
        assert!(intel_async_progress(intel, Some("1")));
        assert!(intel_async_progress(intel, Some(" Enable ")));
        assert!(!intel_async_progress(intel, Some("0")));
        assert!(!intel_async_progress(intel, Some("disable")));
        assert!(!intel_async_progress(intel, None));
        assert!(!intel_async_progress(mpich, Some("1")));
    }
}
