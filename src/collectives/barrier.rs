//! `gaspi_barrier`, flat (one shared counter per group) and node-aware
//! (over all ranks of a job of several nodes).

use super::Pending;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{Deadline, GroupId, Timeout};

/// Whose failure ends a wait in a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Watch {
    /// The group's members.
    Members,
    /// Every rank: for node barriers inside a collective over all ranks,
    /// where a local rank may never arrive because a rank of another node
    /// failed.
    Everyone,
}

impl Context {
    /// Wait until every member of `group` has called `barrier`
    /// (`gaspi_barrier`).
    ///
    /// On timeout this rank's arrival is kept: calling `barrier` again
    /// (as GASPI programs do) waits for the same barrier, it does not start
    /// a new one.
    ///
    /// In a job of several nodes the barrier over [`GroupId::ALL`] is
    /// node-aware: the node's ranks count themselves in through shared
    /// memory, the first rank of each node runs a dissemination (with the
    /// partial steps of seed 002) with the other nodes' first ranks by
    /// notifications, and a node barrier releases the node. No rank maps
    /// another node's memory. Other groups use one shared counter, or,
    /// when their members are on several hosts (GPI-2 engine), GPI-2's
    /// barrier.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::ms(1000))?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn barrier(&self, group: GroupId, timeout: Timeout) -> Result<()> {
        let c = self.committed(group)?;
        let mut st = c.state()?;
        let deadline = timeout.deadline();
        if group == GroupId::ALL && self.num_nodes() > 1 {
            let mut nodes = super::lock(&self.all_nodes);
            if let Some(nr) = nodes.as_mut() {
                match st.pending {
                    None | Some(Pending::NodeBarrier) => {}
                    Some(_) => return Err(Error::ActiveCollective { group }),
                }
                st.pending = Some(Pending::NodeBarrier);
                crate::context::internal(|| {
                    nr.run::<u8, _>(self, &[], &|a, _| *a, None, deadline)
                })?;
                st.pending = None;
                return Ok(());
            }
        }
        self.flat_barrier(&c, &mut st, deadline, Watch::Members)
    }

    /// The barrier of one shared counter over `c`'s members.
    pub(crate) fn flat_barrier(
        &self,
        c: &super::Committed,
        st: &mut super::CollState,
        deadline: Deadline,
        watch: Watch,
    ) -> Result<()> {
        let shared = match &c.sync {
            super::GroupSync::Shared(shared) => shared,
            super::GroupSync::Remote(id) => {
                match st.pending {
                    None | Some(Pending::RemoteBarrier) => {}
                    Some(_) => return Err(Error::ActiveCollective { group: c.id }),
                }
                st.pending = Some(Pending::RemoteBarrier);
                let g = self.engine.cross_host().expect("a job spanning hosts");
                self.remote_sliced(&c.members, deadline, true, |t| g.barrier(*id, t))?;
                st.pending = None;
                return Ok(());
            }
        };
        let generation = match st.pending {
            None => shared.arrive(),
            Some(Pending::Barrier { generation }) => generation,
            Some(_) => return Err(Error::ActiveCollective { group: c.id }),
        };
        st.pending = Some(Pending::Barrier { generation });
        self.await_generation(shared, generation, &c.members, watch, deadline)?;
        st.pending = None;
        Ok(())
    }

    /// The node barrier of a collective over all ranks: fails as soon as
    /// any rank has failed (see [`Watch::Everyone`]).
    pub(crate) fn node_barrier_watching_all(&self, deadline: Deadline) -> Result<()> {
        let c = self.committed(self.node_group())?;
        let mut st = c.state()?;
        self.flat_barrier(&c, &mut st, deadline, Watch::Everyone)
    }
}
