//! `gaspi_barrier`, flat (one shared counter per group) and node-aware
//! (over all ranks of a job of several nodes).

use super::creation::Creation;
use super::hierarchical::{AllreduceOptions, NodeReduce};
use crate::config::{RESERVED_QUEUE, RESERVED_SEGMENT, internal};
use crate::context::groups::{CollState, Committed, FaultScope, GroupSync, Pending};
use crate::context::{AllNodes, Context};
use crate::engine::wait::lock;
use crate::error::Result;
use crate::types::{Deadline, GroupId, Timeout};

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
    /// partial steps of Al Ahad et al. 2018's dissemination) with the other nodes' first ranks by
    /// notifications, and a node barrier releases the node (up to 16 nodes
    /// whose ranks share cores, the node's last rank to arrive sends its
    /// node's arrival to the other nodes and every rank waits for theirs:
    /// an allreduce of a byte with node partials). No rank maps
    /// another node's memory. Where the MPI engine spans hosts, the first
    /// ranks meet in MPI messages instead (a dissemination of one message
    /// per step, where a notified write takes two round trips). Other
    /// groups use one shared counter, or, when their members are on
    /// several hosts, the transport's barrier.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::ms(1000))?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn barrier(&self, group: GroupId, timeout: Timeout) -> Result<()> {
        let c = self.committed(group)?;
        self.barrier_of(&c, group, timeout)?;
        // Every member flushed its writes before it entered.
        self.engine.barrier_passed(&c.members);
        Ok(())
    }

    /// [`Context::barrier`] over the committed group `c` (`group`).
    fn barrier_of(&self, c: &Committed, group: GroupId, timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        self.flush_written(deadline.timeout())?;
        let mut st = c.state()?;
        if group == GroupId::ALL && self.num_nodes() > 1 {
            if let Some(leaders) = self.leaders_group() {
                return self.barrier_through_leaders(c, &mut st, leaders, deadline);
            }
            let mut nodes = lock(&self.all_nodes);
            if let Some(nr) = nodes.as_mut() {
                match st.pending {
                    None | Some(Pending::NodeBarrier) => {}
                    Some(_) => return Err(self.busy(c, FaultScope::Members)),
                }
                st.pending = Some(Pending::NodeBarrier);
                nr.barrier(self, deadline)?;
                st.pending = None;
                return Ok(());
            }
        }
        self.flat_barrier(c, &mut st, deadline, FaultScope::Members)
    }

    /// The barrier of one shared counter over `c`'s members.
    pub(crate) fn flat_barrier(
        &self,
        c: &Committed,
        st: &mut CollState,
        deadline: Deadline,
        scope: FaultScope,
    ) -> Result<()> {
        let shared = match &c.sync {
            GroupSync::Shared(shared) => shared,
            GroupSync::Hosts(id) => {
                match st.pending {
                    None | Some(Pending::HostBarrier) => {}
                    Some(_) => return Err(self.busy(c, scope)),
                }
                st.pending = Some(Pending::HostBarrier);
                let watched = scope.watched(&c.members, self.num_ranks());
                self.engine.host_barrier(*id, &watched, deadline)?;
                st.pending = None;
                return Ok(());
            }
        };
        let generation = match st.pending {
            None => shared.arrive(),
            Some(Pending::Barrier { generation }) => generation,
            Some(_) => return Err(self.busy(c, scope)),
        };
        st.pending = Some(Pending::Barrier { generation });
        self.await_generation(shared, generation, &c.members, scope, deadline)?;
        st.pending = None;
        Ok(())
    }

    /// The node-aware barrier over all ranks where the transport's
    /// barrier beats notified writes between hosts: a node barrier, the
    /// transport's barrier among the nodes' first ranks (`leaders`), a
    /// node barrier. Each phase resumes after a timeout, and the call
    /// resumes in the phase it stopped in. `c`, `st`: the group of all
    /// ranks and its state.
    fn barrier_through_leaders(
        &self,
        c: &Committed,
        st: &mut CollState,
        leaders: GroupId,
        deadline: Deadline,
    ) -> Result<()> {
        let mut phase = match st.pending {
            None => 0,
            Some(Pending::LeadersBarrier { phase }) => phase,
            Some(_) => return Err(self.busy(c, FaultScope::Everyone)),
        };
        let leader = self.node_ranks(self.node()).next() == Some(self.rank());
        while phase < 3 {
            st.pending = Some(Pending::LeadersBarrier { phase });
            match phase {
                1 if leader => {
                    let l = self.committed(leaders)?;
                    let mut lst = l.state()?;
                    self.flat_barrier(&l, &mut lst, deadline, FaultScope::Everyone)?;
                }
                1 => {}
                _ => self.node_barrier_watching_all(deadline)?,
            }
            phase += 1;
        }
        st.pending = None;
        Ok(())
    }

    /// The node barrier of a collective over all ranks: fails as soon as
    /// any rank has failed (see [`FaultScope::Everyone`]).
    pub(crate) fn node_barrier_watching_all(&self, deadline: Deadline) -> Result<()> {
        let c = self.committed(self.node_group())?;
        let mut st = c.state()?;
        self.flat_barrier(&c, &mut st, deadline, FaultScope::Everyone)
    }

    /// With several nodes, the node-aware barrier over all ranks: a window
    /// on the reserved segment (at init, where every rank takes part).
    ///
    /// The barrier is an allreduce over all ranks: of nothing, where the
    /// node's first rank runs the dissemination between nodes and the
    /// node waits for it; or of one byte where the allreduce of a byte
    /// exchanges one node partial per pair of nodes (up to 16 nodes, where
    /// the ranks of a node share cores): the node's last rank to arrive
    /// sends the node's partial at once and every rank waits for the other
    /// nodes' partials, with no hand-off to and from the first rank. Up to
    /// 3 nodes these are the dissemination's messages (one per node and
    /// step), beyond they are more (one per pair of nodes) in one round;
    /// on 2 cores the byte took 0.60-0.65 of the time of nothing on 2 and
    /// 3 nodes, 0.49-0.54 on 4 to 8 (`docs/guide/benchmarking.md`, "The
    /// barrier as an allreduce of a byte", "Node partials exchanged
    /// directly on up to 16 nodes").
    pub(crate) fn create_node_collectives(&self) -> Result<()> {
        if self.num_nodes() < 2 {
            return Ok(());
        }
        let opts = AllreduceOptions {
            queue: RESERVED_QUEUE,
            ..Default::default()
        };
        let nr = internal(|| {
            let timeout = self.config.init_timeout;
            let group = GroupId::ALL;
            let mut creation = Creation::begin(self, RESERVED_SEGMENT, group, "barrier", timeout);
            // Calls of a byte or of nothing: the engine decides where node
            // partials are exchanged.
            NodeReduce::create(self, RESERVED_SEGMENT, 1, false, opts, &mut creation)
        })?;
        *lock(&self.all_nodes) = Some(Box::new(nr));
        Ok(())
    }
}

/// The node-aware barrier is an allreduce over all ranks of a byte or of
/// nothing (see [`Context::create_node_collectives`]).
impl AllNodes for NodeReduce {
    fn barrier(&mut self, ctx: &Context, deadline: Deadline) -> Result<()> {
        let send: &[u8] = if self.exchanges_node_partials() {
            &[0]
        } else {
            &[]
        };
        internal(|| self.run::<u8, _>(ctx, send, &|a, _| *a, None, deadline)).map(|_| ())
    }
}
