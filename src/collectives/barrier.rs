//! `gaspi_barrier`.

use super::Pending;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{GroupId, Timeout};

impl Context {
    /// Wait until every member of `group` has called `barrier`
    /// (`gaspi_barrier`).
    ///
    /// On timeout this rank's arrival is kept: calling `barrier` again
    /// (as GASPI programs do) waits for the same barrier, it does not start
    /// a new one.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::ms(1000))?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn barrier(&self, group: GroupId, timeout: Timeout) -> Result<()> {
        let c = self.committed(group)?;
        let mut st = c.state()?;
        let generation = match st.pending {
            None => c.shared.arrive(),
            Some(Pending::Barrier { generation }) => generation,
            Some(_) => return Err(Error::ActiveCollective { group }),
        };
        st.pending = Some(Pending::Barrier { generation });
        self.await_generation(&c.shared, generation, &c.members, timeout.deadline())?;
        st.pending = None;
        Ok(())
    }
}
