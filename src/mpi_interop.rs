//! Interoperability with MPI (feature `mpi`, through rsmpi): a program
//! started by `mpirun` joins our runtime from an MPI communicator, so the
//! same processes call MPI and GASPI side by side, and flat-MPI codes can
//! move to notified communication one kernel at a time (the shared-window
//! paper's own implementation mixes both).
//!
//! Ranks, the job identity and the node layout come from MPI: the
//! communicator's ranks are the GASPI ranks (same numbers), rank 0 makes
//! the job token and broadcasts it, and `MPI_Comm_split_type(SHARED)`
//! checks that every rank shares this machine's memory (the native engine
//! is a shared-memory engine; clusters are served by the GPI-2 engine).
//! Nodes may be emulated with `GASPI_PPN`, as under `gaspi-run --ppn`.
//!
//! Building: rsmpi finds MPI with `pkg-config` (`mpich` or `ompi`), or the
//! `MPICC` wrapper (`mpicc -show`), or `MPI_PKG_CONFIG` naming another
//! `.pc`; it needs `libclang` for its bindings. With MPICH from Debian:
//! `apt-get install libmpich-dev libclang-dev`. Intel MPI from PyPI: its
//! `mpicc` wrapper cannot find `mpi.h` (the install prefix is left
//! unsubstituted), so point the build at the virtualenv directly, e.g.
//! `MPI_PKG_CONFIG` at a `.pc` whose `includedir`/`libdir` are the
//! virtualenv's `include/` and `lib/`; run with `I_MPI_FABRICS=shm` on one
//! machine.
//!
//! A job started this way has no launcher to clean up after a crash: if a
//! rank dies, MPI aborts the job and shared-memory objects named
//! `gaspi.<token>.*` may stay in `/dev/shm`; a normal end removes them.

use crate::config::{Config, Engine};
use crate::context::Context;
use crate::engine::job::new_token;
use crate::engine::spec::job_spec;
use crate::engine::start::Origin;
use crate::error::{Error, Result};
use mpi::topology::Communicator;
use mpi::traits::Root;

/// Bytes of a job token on the wire.
const TOKEN_BYTES: usize = 64;

impl Context {
    /// Join a job made of the processes of MPI communicator `comm`
    /// (collective over `comm`): GASPI rank = rank in `comm`. On the native
    /// engine all ranks of `comm` must share this machine; with
    /// `config.engine` (or `GASPI_ENGINE`) [`Engine::Mpi`] they may be on
    /// any hosts (the MPI engine, on `comm`; MPI must then be initialised
    /// with `MPI_THREAD_MULTIPLE`). MPI stays usable beside the context.
    ///
    /// ```no_run
    /// use mpi::traits::*;
    /// use gaspi::{Config, Context, GroupId, ReduceOp, Timeout};
    /// let universe = mpi::initialize().unwrap();
    /// let world = universe.world();
    /// let ctx = Context::init_mpi(&world, Config::default())?;
    /// assert_eq!(ctx.rank() as i32, world.rank());
    /// let mut ours = [0u64];
    /// ctx.allreduce(&[1u64], &mut ours, ReduceOp::Sum, GroupId::ALL, Timeout::Block)?;
    /// let mut theirs = 0u64;
    /// world.all_reduce_into(&1u64, &mut theirs, mpi::collective::SystemOperation::sum());
    /// assert_eq!(ours[0], theirs);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "mpi")))]
    pub fn init_mpi<C: Communicator>(comm: &C, config: Config) -> Result<Context> {
        if config.clone().with_env()?.engine == Engine::Mpi {
            // The MPI engine on this communicator's ranks, on any hosts.
            return Context::init_from(config, Origin::Comm(comm.as_raw()));
        }
        let (rank, size) = (comm.rank(), comm.size());
        let shared = comm.split_shared(rank);
        if shared.size() != size {
            return Err(Error::Environment(format!(
                "{} of the communicator's {size} ranks share this machine: the native \
                 engine needs all of them on one machine (clusters: the GPI-2 engine)",
                shared.size()
            )));
        }
        let mut token = [0u8; TOKEN_BYTES];
        if rank == 0 {
            // On failure rank 0 still broadcasts (an empty token), so that
            // every rank fails alike instead of waiting.
            let t = new_token().unwrap_or_default();
            token[..t.len()].copy_from_slice(t.as_bytes());
        }
        comm.process_at_rank(0).broadcast_into(&mut token[..]);
        let len = token.iter().position(|&b| b == 0).unwrap_or(TOKEN_BYTES);
        if len == 0 {
            return Err(Error::Environment(
                "rank 0 could not draw a job token (getrandom failed)".into(),
            ));
        }
        let token = String::from_utf8_lossy(&token[..len]).into_owned();
        Context::init_from(
            config,
            Origin::Spec(job_spec(
                token,
                rank as usize,
                size as usize,
                size as usize,
                false,
            )?),
        )
    }
}
