//! Who this process is in which job: from the launcher's environment, or
//! as a caller (MPI) or a transport (GPI-2's launcher) says; and mapping
//! the job's control block.

use super::job::{self, JobBlock};
use super::wait::poll_with_backoff;
use crate::env;
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank};
use std::io;

/// Who this process is in which job, as the launcher (or the caller) says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobSpec {
    pub(crate) token: String,
    pub(crate) rank: Rank,
    pub(crate) nranks: usize,
    pub(crate) ppn: usize,
    /// A launcher supervises the ranks (marks failures, cleans up).
    pub(crate) launched: bool,
    /// CPUs the job runs on.
    pub(crate) cores: usize,
    /// Ranks that join this machine's control block: all of them, except
    /// where each host has a block of its own (GPI-2's launcher, emulated
    /// hosts).
    pub(crate) attach: usize,
    /// The first of the `attach` ranks (this host's first rank).
    pub(crate) host_first: usize,
    /// Ranks of the job on this machine: `attach`, or more where hosts
    /// are emulated.
    pub(crate) machine: usize,
    /// Whether this rank's CPUs are its own among the machine's ranks
    /// ([`job::cpus_of_its_own`]), where the engine's start learnt it (MPI
    /// across emulated hosts, whose control blocks do not show the other
    /// hosts' ranks); `None`: found from the control block once every rank
    /// of the machine has joined it.
    pub(crate) own_cpus: Option<bool>,
}

impl JobSpec {
    /// Join as if each block of `per_host` consecutive ranks ran on a host
    /// of its own (`GASPI_HOST_RANKS`): this host's control block only,
    /// and the host's share of the CPUs (the emulated hosts share the
    /// machine's, and each host counts only its own awake ranks).
    #[cfg(any(feature = "gpi2", feature = "mpi"))]
    pub(crate) fn emulate_host(&mut self, per_host: usize) {
        (self.host_first, self.attach) =
            super::job::host_of(self.rank as usize, self.nranks, per_host);
        self.cores = self.cores.saturating_mul(self.attach) / self.nranks.max(1);
    }
}

/// The job this process belongs to, from the launcher's environment.
pub(crate) fn spec_from_env() -> Result<JobSpec> {
    let rank = env::number(env::RANK)?;
    let nranks = env::number(env::NRANKS)?;
    let token = std::env::var(env::JOB).ok();
    let launched = std::env::var_os(env::LAUNCHER).is_some();
    let (rank, nranks) = match (rank, nranks) {
        (None, None) => (0, 1),
        (Some(r), Some(n)) => (r, n),
        _ => {
            return Err(Error::Environment(format!(
                "set both {} and {} (gaspi-run does), or neither for a one-rank job",
                env::RANK,
                env::NRANKS
            )));
        }
    };
    if nranks == 0 || nranks > Rank::MAX as usize || rank >= nranks {
        return Err(Error::Environment(format!(
            "rank {rank} of {nranks} ranks is not a valid position"
        )));
    }
    let token = match token {
        Some(t) if !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric()) => t,
        Some(t) => {
            return Err(Error::Environment(format!(
                "{}={t} must be a non-empty alphanumeric token",
                env::JOB
            )));
        }
        None if nranks == 1 => {
            job::new_token().map_err(|e| Error::system("drawing a job token", e))?
        }
        None if crate::config::started_by_gpi2_run() => {
            return Err(Error::Environment(
                "started by GPI-2's gaspi_run, but this program has no GPI-2 engine: build it \
                 with feature `gpi2` (or start it with gaspi-run)"
                    .into(),
            ));
        }
        None => {
            return Err(Error::Environment(format!(
                "{} is not set: start the ranks with gaspi-run, or give every rank the same \
                 {} token",
                env::JOB,
                env::JOB
            )));
        }
    };
    // Our launcher starts every rank of a job on this machine.
    job_spec(token, rank, nranks, nranks, launched)
}

/// The job of rank `rank` of `nranks` named `token`, with the node layout
/// (`GASPI_PPN`) and CPUs from the environment; `machine_ranks` of its
/// ranks run on this machine (all of them on one machine, emulated hosts
/// included).
pub(crate) fn job_spec(
    token: String,
    rank: usize,
    nranks: usize,
    machine_ranks: usize,
    launched: bool,
) -> Result<JobSpec> {
    let ppn = ppn_from_env(nranks)?;
    let cores = cores_from_env(nranks)?;
    Ok(JobSpec {
        token,
        rank: rank as Rank,
        nranks,
        ppn: ppn.min(nranks),
        launched: launched && nranks > 0,
        cores,
        attach: nranks,
        host_first: 0,
        machine: machine_ranks,
        own_cpus: None,
    })
}

/// Ranks per node: `GASPI_PPN` (the launcher's `--ppn`), else all.
fn ppn_from_env(nranks: usize) -> Result<usize> {
    let ppn = env::number(env::PPN)?.unwrap_or(nranks);
    if ppn == 0 {
        return Err(Error::Environment(format!("{} must be positive", env::PPN)));
    }
    Ok(ppn)
}

/// The CPUs a waiter may count on, for a job of `nranks` ranks.
fn cores_from_env(nranks: usize) -> Result<usize> {
    // The job's CPUs as the launcher says (a bound rank sees only its
    // own), else this process's.
    let cores = match env::number(env::CPUS)? {
        Some(c) if c > 0 => c,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // A rank bound to part of the job's CPUs in a job with more ranks than
    // CPUs shares its CPUs with other ranks (gaspi-run --bind block): when
    // it waits for one of them, spinning only keeps it off the CPU, so it
    // never spins (it yields at once, which is as fast as spinning when its
    // CPU-mates sleep). Measured: a ping-pong between ranks 0 and 1 of 4 on
    // 2 CPUs took 100 us one way with spinning, 0.5-1 us without.
    let bound = crate::sys::allowed_cpus().len();
    Ok(if bound > 0 && bound < cores && nranks > cores {
        0
    } else {
        cores
    })
}

/// Map the job's control block, creating it if no launcher did.
pub(crate) fn open_job(spec: &JobSpec, deadline: Deadline) -> Result<JobBlock> {
    let token = &spec.token;
    if !spec.launched {
        // No launcher made the block: the first rank to get here does, and
        // removes what earlier jobs without a launcher of ours left when
        // they were killed (MPI's or GPI-2's launcher aborting a job: no
        // gaspi-run or reaper cleans up after those), as gaspi-run does
        // for every job it starts.
        match JobBlock::create(token, spec.nranks, spec.ppn, None) {
            Ok(b) => {
                job::sweep_stale();
                return Ok(b);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::system("creating the job control block", e)),
        }
    }
    poll_with_backoff(deadline, || {
        JobBlock::try_open(token).map_err(|e| Error::system(format!("opening job {token}"), e))
    })
    .map_err(|e| match e {
        Error::Timeout => Error::Environment(format!(
            "job {token} does not exist (was its launcher stopped?)"
        )),
        e => e,
    })
}

#[cfg(all(test, any(feature = "gpi2", feature = "mpi")))]
mod tests {
    use super::*;

    #[test]
    fn an_emulated_host_gets_its_ranks_and_its_share_of_the_cores() {
        let spec = |rank, nranks, cores| JobSpec {
            token: "t".into(),
            rank,
            nranks,
            ppn: 1,
            launched: true,
            cores,
            attach: nranks,
            host_first: 0,
            machine: nranks,
            own_cpus: None,
        };
        let mut s = spec(5, 8, 2);
        s.emulate_host(4);
        assert_eq!((s.host_first, s.attach, s.cores), (4, 4, 1));
        let mut s = spec(1, 2, 2);
        s.emulate_host(1);
        assert_eq!((s.host_first, s.attach, s.cores), (1, 1, 1));
        // The last host may be smaller; a share below one core is none.
        let mut s = spec(6, 7, 2);
        s.emulate_host(3);
        assert_eq!((s.host_first, s.attach, s.cores), (6, 1, 0));
        let mut s = spec(0, 4, usize::MAX);
        s.emulate_host(2);
        assert_eq!(s.cores, usize::MAX / 4);
    }
}
