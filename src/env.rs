//! Environment variables: the ones a launcher sets for each rank, the
//! ones a user may set to override the configuration, and the ones GPI-2's
//! own launcher sets (read by the GPI-2 engine).

use crate::error::{Error, Result};

/// This rank (GPI-2's name).
///
/// ```
/// // A rank started by a launcher knows its rank before init.
/// let rank: Option<u16> = std::env::var(gaspi::env::RANK).ok().and_then(|r| r.parse().ok());
/// # let _ = rank;
/// ```
pub const RANK: &str = "GASPI_RANK";
/// Number of ranks (GPI-2's name).
///
/// ```
/// let ranks = std::env::var(gaspi::env::NRANKS).map_or(1, |n| n.parse::<usize>().unwrap_or(1));
/// assert!(ranks >= 1);
/// ```
pub const NRANKS: &str = "GASPI_NRANKS";
/// Ranks per node (consecutive ranks form a node).
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// let report = Launch::new("sh", 2).args(["-c", &format!("echo ${}", gaspi::env::PPN)]).ppn(1).output(Output::Capture).run()?;
/// assert_eq!(report.ranks[0].stdout, b"1\n");
/// # Ok::<(), std::io::Error>(())
/// ```
pub const PPN: &str = "GASPI_PPN";
/// The job's token: names its shared-memory objects.
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// // Every rank of a job gets the same token.
/// let report = Launch::new("sh", 2).args(["-c", &format!("echo ${}", gaspi::env::JOB)]).output(Output::Capture).run()?;
/// assert_eq!(report.ranks[0].stdout, report.ranks[1].stdout);
/// assert_eq!(report.ranks[0].stdout, format!("{}\n", report.token).into_bytes());
/// # Ok::<(), std::io::Error>(())
/// ```
pub const JOB: &str = "GASPI_JOB";
/// Pid of the supervising launcher, if any.
///
/// ```
/// let supervised = std::env::var_os(gaspi::env::LAUNCHER).is_some();
/// # let _ = supervised;
/// ```
pub const LAUNCHER: &str = "GASPI_LAUNCHER";
/// Overrides [`Config::wait_mode`](crate::Config::wait_mode): `auto|spin|yield|block`.
///
/// ```
/// use gaspi::launcher::Launch;
/// // The same as `GASPI_WAIT=block gaspi-run ...`.
/// let job = Launch::new("target/release/examples/ring", 4).env(gaspi::env::WAIT, "block");
/// # let _ = job;
/// ```
pub const WAIT: &str = "GASPI_WAIT";
/// CPUs the whole job runs on (the launcher's; each rank may be bound
/// to fewer): what waiting compares the awake ranks with.
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// let report = Launch::new("sh", 1).args(["-c", &format!("echo ${}", gaspi::env::CPUS)]).output(Output::Capture).run()?;
/// let cpus: usize = String::from_utf8_lossy(&report.ranks[0].stdout).trim().parse().unwrap();
/// assert!(cpus >= 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub const CPUS: &str = "GASPI_CPUS";
/// Overrides [`Config::engine`](crate::Config::engine): `native|gpi2`.
///
/// ```
/// // `GASPI_ENGINE=gpi2 ./program` runs the same binary on GPI-2.
/// let engine = std::env::var(gaspi::env::ENGINE).ok().and_then(|e| gaspi::Engine::parse(&e));
/// let configured = gaspi::Config { engine: engine.unwrap_or_default(), ..Default::default() };
/// assert!(configured.validate().is_ok());
/// ```
pub const ENGINE: &str = "GASPI_ENGINE";
/// For testing the GPI-2 engine on one machine: ranks per emulated
/// host (consecutive blocks) under GPI-2's own `gaspi_run`. Ranks of
/// different emulated hosts share no shared-memory object, as if they
/// ran on different machines; everything between them goes through
/// GPI-2.
///
/// ```text
/// GASPI_HOST_RANKS=2 gaspi_run -m machines -n 4 ./program   # hosts of 2 ranks
/// ```
pub const HOST_RANKS: &str = "GASPI_HOST_RANKS";

/// Turns on [`Launch::emulate_hosts`](crate::launcher::Launch::emulate_hosts)
/// (`1`): for testing cluster behaviour on one machine, every node a host of
/// its own.
///
/// ```
/// // `GASPI_EMULATE_HOSTS=1 gaspi-run --engine gpi2 --ppn 2 ...` runs each
/// // node of 2 ranks as a host of its own.
/// assert_eq!(gaspi::env::EMULATE_HOSTS, "GASPI_EMULATE_HOSTS");
/// ```
pub const EMULATE_HOSTS: &str = "GASPI_EMULATE_HOSTS";

/// Overrides [`Config::relay_nap`](crate::Config::relay_nap), in
/// microseconds (`0` to [`RELAY_NAP_MAX`](crate::RELAY_NAP_MAX)): how long
/// the relay thread of the MPI and GPI-2 engines naps at most while
/// nothing arrives.
///
/// ```text
/// # a rank that computes for long stretches is served within ~50 us
/// mpirun -n 64 -genv GASPI_ENGINE mpi -genv GASPI_RELAY_NAP_US 50 ./program
/// ```
pub const RELAY_NAP_US: &str = "GASPI_RELAY_NAP_US";

/// A testing knob of the MPI engine: how many tag pairs the keyed
/// messages of collective objects share (`1` to `4096`, the default, which
/// any other value means; objects whose numbers are equal modulo it share
/// one). Fewer make the
/// messages of objects given up meet those of later objects on the same
/// tags soon, which the engine must tell apart by their heads
/// (`tests/allreduce.rs` runs calls given up with `1`); every rank of a
/// job must see the same value.
///
/// ```text
/// mpirun -n 4 -genv GASPI_ENGINE mpi -genv GASPI_KEYED_SLOTS 1 ./program
/// ```
pub const KEYED_SLOTS: &str = "GASPI_KEYED_SLOTS";

/// GPI-2's machine file (set by GPI-2's `gaspi_run`, and by `gaspi-run
/// --engine gpi2`).
pub(crate) const GPI2_MFILE: &str = "GASPI_MFILE";
/// The rank's position in its node (GPI-2's local rank: GPI-2 reads it,
/// and `gaspi-run` sets it for every engine; under GPI-2 the position on
/// the rank's host).
///
/// ```
/// use gaspi::launcher::{Launch, Output};
/// let report = Launch::new("sh", 4).args(["-c", &format!("echo ${}", gaspi::env::SOCKET)]).ppn(2).output(Output::Capture).run()?;
/// assert_eq!(report.ranks[3].stdout, b"1\n");
/// # Ok::<(), std::io::Error>(())
/// ```
pub const SOCKET: &str = "GASPI_SOCKET";
/// The base of GPI-2's ports for a job our launcher started: the SN daemon
/// listens on `base + local rank` and `base + 256 + local rank`, the TCP
/// device on `base + 512 + local rank`.
pub(crate) const GPI2_PORT: &str = "GASPI_GPI2_PORT";
/// Ports a job of up to 256 ranks on one host occupies above its
/// [`GPI2_PORT`] base.
pub(crate) const GPI2_PORT_SPAN: u16 = 768;

/// The number in variable `name`: `None` if unset, an error if it is not a
/// number.
pub(crate) fn number(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Environment(format!("{name}={v} is not a number"))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(_) => Err(Error::Environment(format!("{name} is not valid UTF-8"))),
    }
}
