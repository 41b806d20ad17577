//! The one place that picks the engine's transport at start-up.

use super::Native;
use super::spec::{JobSpec, spec_from_env};
use crate::config::{Config, Engine};
#[cfg(not(feature = "gpi2"))]
use crate::error::Error;
use crate::error::Result;

/// Start the engine `config` names for this process: join the job and
/// start its transport. `spec`: the job as the caller knows it (MPI);
/// else the launcher's environment says. A transport may adjust `config`
/// to its limits (GPI-2 has fewer segment ids, and its threads cannot wake
/// a sleeping waiter).
pub(crate) fn start(config: &mut Config, spec: Option<JobSpec>) -> Result<Native> {
    if let Some(spec) = spec {
        // The caller placed the ranks (MPI): all on this host's memory.
        config.engine = Engine::Native;
        return Native::attach(&spec, config, None);
    }
    match config.engine {
        Engine::Native => Native::attach(&spec_from_env()?, config, None),
        #[cfg(feature = "gpi2")]
        Engine::Gpi2 => super::gpi2::start::start(config),
        #[cfg(not(feature = "gpi2"))]
        Engine::Gpi2 => Err(Error::Config(
            "the GPI-2 engine needs the crate built with feature `gpi2`".into(),
        )),
    }
}
