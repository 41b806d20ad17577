//! Start (`gaspi_proc_init`): the engine joins the job, then the context
//! commits the initial groups and sets up the collectives over all ranks.
//! It sits above the collectives because it sets them up; leaving is the
//! context's (`context/mod.rs`).

use crate::config::Config;
use crate::context::{Claim, Context};
use crate::engine::start::{self, Origin};
use crate::error::Result;

impl Context {
    /// Join the job (`gaspi_proc_init`): map the job, wait until every rank
    /// has started (up to [`Config::init_timeout`]), and commit
    /// [`GroupId::ALL`](crate::GroupId::ALL).
    ///
    /// Fails with [`Error::AlreadyInitialized`](crate::Error::AlreadyInitialized) if a context is alive in
    /// this process, and with [`Error::Environment`](crate::Error::Environment) if the launcher's
    /// variables are inconsistent.
    ///
    /// ```
    /// // Run on its own, a program is a job of one rank.
    /// let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.num_ranks(), 1);
    /// assert!(matches!(gaspi::Context::init(gaspi::Config::default()), Err(gaspi::Error::AlreadyInitialized)));
    /// ctx.term()?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn init(config: Config) -> Result<Context> {
        Context::start(config, Origin::Env)
    }

    /// [`Context::init`] for the job `origin` describes (from MPI).
    #[cfg(feature = "mpi")]
    pub(crate) fn init_from(config: Config, origin: Origin) -> Result<Context> {
        Context::start(config, origin)
    }

    fn start(config: Config, origin: Origin) -> Result<Context> {
        let mut config = config.with_env()?;
        config.validate()?;
        let claim = Claim::take()?;
        let engine = start::start(&mut config, origin)?;
        let ctx = Context::assemble(engine, config);
        let ready = ctx
            .commit_initial_groups()
            .and_then(|()| ctx.create_node_collectives())
            .and_then(|()| ctx.engine.enable_relay());
        match ready {
            Ok(()) => {
                claim.keep();
                Ok(ctx)
            }
            Err(e) => {
                // The context leaves the job as it drops; the claim is
                // given back after it.
                drop(ctx);
                Err(e)
            }
        }
    }
}
