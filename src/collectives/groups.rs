//! Groups (`gaspi_group_*`): built locally, committed by all members
//! together, deleted locally. [`GroupId::ALL`] (and, with several nodes,
//! the node group) is committed at init.
//!
//! A group whose members share one host commits through an object in its
//! shared memory (the leader creates it, the others open it, all meet at
//! its barrier); one that spans hosts commits its twin in the transport.

use crate::context::Context;
use crate::context::groups::{Committed, FaultScope, GroupEntry, GroupSync, release};
use crate::engine::group::GroupShared;
use crate::engine::wait::poll_with_backoff;
use crate::error::{Error, Result};
use crate::types::{Deadline, GroupId, Rank, Timeout};
use std::sync::Arc;

impl Context {
    /// The committed group `group`.
    pub(crate) fn committed(&self, group: GroupId) -> Result<Arc<Committed>> {
        self.groups.slot(group, |slot| match slot {
            Some(GroupEntry::Committed(c)) => Ok(c.clone()),
            Some(_) => Err(Error::GroupNotCommitted { group }),
            None => Err(Error::InvalidGroup { group }),
        })
    }

    /// Wait until the barrier generation `generation` of `shared` has
    /// passed, failing if a member of `members` dies or leaves first (with
    /// [`FaultScope::Everyone`]: if any rank has failed, passed or not).
    pub(crate) fn await_generation(
        &self,
        shared: &GroupShared,
        generation: u32,
        members: &[Rank],
        scope: FaultScope,
        deadline: Deadline,
    ) -> Result<()> {
        self.engine.patience().wait(
            shared.ww(),
            deadline,
            || shared.passed(generation).then_some(()),
            || match scope {
                FaultScope::Members => self.engine.member_faults(members),
                FaultScope::Everyone => self.engine.faults(),
            },
        )?;
        // Inside a collective over all ranks, a failure anywhere fails the
        // call even where its generation passed: a node mate that left such
        // a call for the failure and entered the next collective arrives at
        // the same generation, and what this call would read (that mate's
        // part of a node allreduce, say) is not this call's. It saw the
        // failure before it arrived, so this rank sees it now.
        match scope {
            FaultScope::Everyone => self.engine.faults(),
            FaultScope::Members => Ok(()),
        }
    }

    /// The error for a collective refused on group `c` because another
    /// one is unfinished there: the failure (in `scope`) that keeps that
    /// one from ever completing where one is known, which tells the caller
    /// more than [`Error::ActiveCollective`] (which it is otherwise).
    pub(crate) fn busy(&self, c: &Committed, scope: FaultScope) -> Error {
        let known = match scope {
            FaultScope::Members => self.engine.member_faults(&c.members),
            FaultScope::Everyone => self.engine.faults(),
        };
        known
            .err()
            .unwrap_or(Error::ActiveCollective { group: c.id })
    }

    pub(crate) fn committed_members(&self, group: GroupId) -> Result<Vec<Rank>> {
        Ok(self.committed(group)?.members.clone())
    }

    /// Commit the group of all ranks and, if the job has several nodes,
    /// the group of this rank's node, and where the node-aware barrier
    /// crosses hosts through the transport's collectives
    /// ([`Context::leaders_group`]), the group of the nodes' first ranks
    /// on those ranks (at init, where every rank takes part).
    pub(crate) fn commit_initial_groups(&self) -> Result<()> {
        let node = GroupId(self.config.group_max as u8);
        let mut initial = vec![(GroupId::ALL, (0..self.num_ranks()).collect::<Vec<_>>())];
        if self.num_nodes() > 1 {
            initial.push((node, self.node_ranks(self.node()).collect()));
        }
        if let Some(leaders) = self.leaders_group() {
            let first = |n| self.node_ranks(n).next();
            let members: Vec<Rank> = (0..self.num_nodes()).filter_map(first).collect();
            if members.contains(&self.rank()) {
                initial.push((leaders, members));
            }
        }
        for (g, members) in initial {
            self.groups.slot(g, |slot| {
                *slot = Some(GroupEntry::Building(members));
                Ok(())
            })?;
            self.group_commit(g, self.config.init_timeout)?;
        }
        Ok(())
    }

    /// The group of the first rank of every node, committed at init on
    /// those ranks, where the job spans hosts through a transport whose
    /// group collectives beat notified writes (the MPI engine's): the
    /// node-aware barrier crosses hosts through it. `None` elsewhere.
    pub(crate) fn leaders_group(&self) -> Option<GroupId> {
        (self.num_nodes() > 1 && self.engine.host_collectives_fast())
            .then(|| GroupId(self.config.group_max as u8 + 1))
    }

    /// The group of the ranks of this rank's node, committed at init
    /// ([`GroupId::ALL`] when the job is one node).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.group_ranks(ctx.node_group())?.len(), ctx.local_num() as usize);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node_group(&self) -> GroupId {
        if self.num_nodes() > 1 {
            GroupId(self.config.group_max as u8)
        } else {
            GroupId::ALL
        }
    }

    /// Barrier over the ranks of this rank's node: a barrier on
    /// [`Context::node_group`], in shared memory, cheaper than the global one.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// // Everything my node's ranks stored into a window before is visible now.
    /// ctx.node_barrier(gaspi::Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node_barrier(&self, timeout: Timeout) -> Result<()> {
        self.barrier(self.node_group(), timeout)
    }

    /// Create an empty group and return its handle (`gaspi_group_create`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let g = ctx.group_create()?;
    /// ctx.group_add(g, ctx.rank())?;
    /// ctx.group_commit(g, gaspi::Timeout::Block)?;
    /// assert_eq!(ctx.group_ranks(g)?, vec![ctx.rank()]);
    /// ctx.group_delete(g)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_create(&self) -> Result<GroupId> {
        // Ids 0..group_max are the user's (0: all ranks); the node group
        // sits at group_max, the leaders' group after it.
        let user = self.config.group_max as usize;
        self.groups
            .create(user, |id| self.engine.host_group_create(id))?
            .map(GroupId)
            .ok_or(Error::TooManyGroups {
                max: self.config.group_max,
            })
    }

    /// Add `rank` to the uncommitted group `group` (`gaspi_group_add`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// // The even ranks.
    /// let g = ctx.group_create()?;
    /// for r in (0..ctx.num_ranks()).step_by(2) {
    ///     ctx.group_add(g, r)?;
    /// }
    /// assert!(matches!(ctx.group_add(g, 0), Err(gaspi::Error::GroupMismatch { .. })));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_add(&self, group: GroupId, rank: Rank) -> Result<()> {
        self.engine.check_rank(rank)?;
        self.groups.slot(group, |slot| match slot {
            Some(GroupEntry::Building(m)) => match m.binary_search(&rank) {
                Ok(_) => Err(Error::GroupMismatch {
                    group,
                    reason: format!("rank {rank} is already a member"),
                }),
                Err(pos) => {
                    m.insert(pos, rank);
                    Ok(())
                }
            },
            Some(_) => Err(Error::GroupMismatch {
                group,
                reason: "a committed group cannot change".into(),
            }),
            None => Err(Error::InvalidGroup { group }),
        })
    }

    /// Commit `group` together with its other members (`gaspi_group_commit`).
    /// Every member must have added the same ranks, this rank among them.
    /// On timeout, call again to keep waiting.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let g = ctx.group_create()?;
    /// for r in 0..ctx.num_ranks() {
    ///     ctx.group_add(g, r)?;
    /// }
    /// ctx.group_commit(g, gaspi::Timeout::ms(10_000))?;
    /// ctx.barrier(g, gaspi::Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_commit(&self, group: GroupId, timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        let me = self.rank();
        // Decide the next step under the table lock; wait outside it.
        enum Step {
            Done,
            Open(Vec<Rank>),
            Wait,
            Hosts(Vec<Rank>),
        }
        let step = self.groups.slot(group, |slot| match slot {
            None => Err(Error::InvalidGroup { group }),
            Some(GroupEntry::Committed(_)) => Ok(Step::Done),
            Some(GroupEntry::Committing { .. }) => Ok(Step::Wait),
            Some(GroupEntry::Opening { members }) => Ok(Step::Open(members.clone())),
            Some(GroupEntry::HostsCommitting(m)) => Ok(Step::Hosts(m.clone())),
            Some(GroupEntry::Building(m)) => {
                if !m.contains(&me) {
                    return Err(Error::GroupMismatch {
                        group,
                        reason: format!("it does not contain this rank ({me}); add it first"),
                    });
                }
                if self.engine.spans_hosts(m) {
                    // The transport's group 0 is all ranks, committed by it.
                    if group != GroupId::ALL {
                        self.engine.host_group_prepare(group.0, m)?;
                    }
                    let members = std::mem::take(m);
                    *slot = Some(GroupEntry::HostsCommitting(members.clone()));
                    return Ok(Step::Hosts(members));
                }
                let members = std::mem::take(m);
                *slot = Some(GroupEntry::Opening {
                    members: members.clone(),
                });
                Ok(Step::Open(members))
            }
        })?;
        match step {
            Step::Done => return Ok(()),
            Step::Wait => {}
            Step::Hosts(members) => {
                if group != GroupId::ALL {
                    self.engine.host_group_commit(group.0, &members, deadline)?;
                }
                return self.group_committed(group, members, GroupSync::Hosts(group.0));
            }
            Step::Open(members) => {
                // The leader creates the object, the others find it.
                let names = self.engine.names().clone();
                let shared = if members[0] == me {
                    GroupShared::create(&names, &members, self.config.allreduce_slot_bytes())
                        .map_err(|e| {
                            Error::system(
                                format!("creating the shared state of group {}", group.0),
                                e,
                            )
                        })?
                } else {
                    poll_with_backoff(deadline, || {
                        self.engine.member_faults(&members)?;
                        GroupShared::open(&names, &members).map_err(|e| {
                            Error::system(
                                format!("opening the shared state of group {}", group.0),
                                e,
                            )
                        })
                    })?
                };
                let shared = Arc::new(shared);
                let generation = shared.arrive();
                self.groups.slot(group, |slot| {
                    *slot = Some(GroupEntry::Committing {
                        members,
                        shared,
                        generation,
                    });
                    Ok(())
                })?;
            }
        }
        let (members, shared, generation) = self.groups.slot(group, |slot| match slot {
            Some(GroupEntry::Committing {
                members,
                shared,
                generation,
            }) => Ok((members.clone(), shared.clone(), *generation)),
            _ => Err(Error::GroupNotCommitted { group }),
        })?;
        self.await_generation(&shared, generation, &members, FaultScope::Members, deadline)?;
        if members[0] == me {
            shared.unlink(); // every member has it mapped now
        }
        self.group_committed(group, members, GroupSync::Shared(shared))
    }

    fn group_committed(&self, group: GroupId, members: Vec<Rank>, sync: GroupSync) -> Result<()> {
        let index = members
            .binary_search(&self.rank())
            .expect("member list contains this rank");
        self.groups.slot(group, |slot| {
            *slot = Some(GroupEntry::Committed(Arc::new(Committed::new(
                group, members, index, sync,
            ))));
            Ok(())
        })
    }

    /// Delete `group` (`gaspi_group_delete`). [`GroupId::ALL`] and the
    /// runtime's groups ([`Context::node_group`], and after it the MPI
    /// engine's group of the nodes' first ranks) cannot be deleted; an id
    /// that names no group is [`Error::InvalidGroup`].
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let g = ctx.group_create()?;
    /// ctx.group_delete(g)?;
    /// assert!(ctx.group_delete(gaspi::GroupId::ALL).is_err());
    /// assert!(matches!(ctx.group_delete(gaspi::GroupId(200)), Err(gaspi::Error::InvalidGroup { .. })));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_delete(&self, group: GroupId) -> Result<()> {
        let runtime = self.config.group_max..=self.config.group_max + 1;
        if group == GroupId::ALL || runtime.contains(&(group.0 as u32)) {
            return Err(Error::InvalidArgument(
                "GroupId::ALL and the runtime's groups (the node group and the one after it) \
                 cannot be deleted"
                    .into(),
            ));
        }
        let e = self.groups.slot(group, |slot| {
            slot.take().ok_or_else(|| Error::InvalidGroup { group })
        })?;
        self.engine.host_group_delete(group.0);
        release(self.rank(), e);
        Ok(())
    }

    /// Number of groups of this rank, [`GroupId::ALL`] included
    /// (`gaspi_group_num`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let before = ctx.group_num();
    /// let g = ctx.group_create()?;
    /// assert_eq!(ctx.group_num(), before + 1);
    /// # ctx.group_delete(g)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_num(&self) -> usize {
        self.groups.user_count(self.config.group_max as usize)
    }

    /// Number of members of `group` (`gaspi_group_size`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.group_size(gaspi::GroupId::ALL)?, ctx.num_ranks() as usize);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_size(&self, group: GroupId) -> Result<usize> {
        self.group_ranks(group).map(|m| m.len())
    }

    /// Members of `group`, ascending (`gaspi_group_ranks`).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let all: Vec<gaspi::Rank> = (0..ctx.num_ranks()).collect();
    /// assert_eq!(ctx.group_ranks(gaspi::GroupId::ALL)?, all);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_ranks(&self, group: GroupId) -> Result<Vec<Rank>> {
        self.groups.slot(group, |slot| {
            slot.as_ref()
                .map(|e| e.members().to_vec())
                .ok_or_else(|| Error::InvalidGroup { group })
        })
    }

    /// Most groups this rank can have at once (`gaspi_group_max`).
    ///
    /// ```
    /// let ctx = gaspi::Context::init(gaspi::Config { group_max: 4, ..Default::default() })?;
    /// assert_eq!(ctx.group_max(), 4);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_max(&self) -> u32 {
        self.config.group_max
    }
}
