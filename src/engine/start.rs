//! The one place that picks the engine's transport at start-up.

use super::Native;
#[cfg(feature = "mpi")]
use super::spec::JobSpec;
use super::spec::spec_from_env;
use crate::config::{Config, Engine};
#[cfg(not(all(feature = "gpi2", feature = "mpi")))]
use crate::error::Error;
use crate::error::Result;

/// Who says where this process stands in its job.
pub(crate) enum Origin {
    /// The launcher's environment (ours, GPI-2's, MPI's).
    Env,
    /// The caller placed the ranks (MPI, all on this host's memory).
    #[cfg(feature = "mpi")]
    Spec(JobSpec),
    /// The ranks of an MPI communicator, on the MPI engine.
    #[cfg(feature = "mpi")]
    Comm(mpi::ffi::MPI_Comm),
}

/// Start the engine `config` names for this process: join the job and
/// start its transport. A transport may adjust `config` to its limits
/// (GPI-2 has fewer segment ids, and its threads cannot wake a sleeping
/// waiter).
pub(crate) fn start(config: &mut Config, origin: Origin) -> Result<Native> {
    super::memcopy::prepare();
    match origin {
        Origin::Env => {}
        #[cfg(feature = "mpi")]
        Origin::Spec(spec) => {
            config.engine = Engine::Native;
            return Native::attach(&spec, config, None);
        }
        #[cfg(feature = "mpi")]
        Origin::Comm(comm) => {
            config.engine = Engine::Mpi;
            return super::mpi::start::start(config, Some(comm));
        }
    }
    match config.engine {
        Engine::Native => Native::attach(&spec_from_env()?, config, None),
        #[cfg(feature = "gpi2")]
        Engine::Gpi2 => super::gpi2::start::start(config),
        #[cfg(not(feature = "gpi2"))]
        Engine::Gpi2 => Err(Error::Config(
            "the GPI-2 engine needs the crate built with feature `gpi2`".into(),
        )),
        #[cfg(feature = "mpi")]
        Engine::Mpi => super::mpi::start::start(config, None),
        #[cfg(not(feature = "mpi"))]
        Engine::Mpi => Err(Error::Config(
            "the MPI engine needs the crate built with feature `mpi`".into(),
        )),
    }
}
