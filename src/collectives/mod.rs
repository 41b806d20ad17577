//! Groups and the collectives over them (`gaspi_group_*`, `gaspi_barrier`,
//! `gaspi_allreduce`).
//!
//! A group is built locally ([`Context::group_create`],
//! [`Context::group_add`]) and then committed by all its members together
//! ([`Context::group_commit`]); only committed groups run collectives. Every
//! member must build the same member list. [`GroupId::ALL`] is committed by
//! `Context::init`.
//!
//! A collective that times out stays in progress: call it again (same
//! arguments) to keep waiting. Until it completes, a different collective on
//! the same group fails with [`Error::ActiveCollective`].

mod allgatherv;
mod allreduce;
mod barrier;
mod hierarchical;
pub mod model;
pub mod plan;

pub use allgatherv::{Allgatherv, AllgathervOptions};
pub(crate) use allreduce::with_op;
pub use allreduce::{ReduceOp, Reducible};
pub(crate) use hierarchical::NodeReduce;
pub use hierarchical::{Allreduce, AllreduceAlgorithm, AllreduceOptions};

use crate::context::Context;
use crate::engine::group::GroupShared;
use crate::error::{Error, Result};
use crate::types::{
    Deadline, GroupId, Local, Notification, QueueId, Rank, Remote, SegmentId, Timeout,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// `write_notify` `len` bytes from `local` of this rank's segment `segment`
/// to `remote` of `to`'s (a `notify` alone when `len` is 0), on `queue`. A
/// full queue is waited for (within `deadline`) and the post retried: the
/// collectives post more than a queue holds.
pub(crate) fn post(
    ctx: &Context,
    segment: SegmentId,
    queue: QueueId,
    to: Rank,
    (local, remote, len): (usize, usize, usize),
    n: Notification,
    deadline: Deadline,
) -> Result<()> {
    loop {
        let r = if len == 0 {
            ctx.notify(to, segment, n, queue, Timeout::Block)
        } else {
            ctx.write_notify(
                Local::new(segment, local),
                Remote::new(to, segment, remote),
                len,
                n,
                queue,
                Timeout::Block,
            )
        };
        match r {
            Err(Error::QueueFull { .. }) => ctx.wait(queue, deadline.timeout())?,
            r => return r,
        }
    }
}

/// A collective that was started on a group and has not completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pending {
    Barrier {
        generation: u32,
    },
    /// The node-aware barrier over all ranks.
    NodeBarrier,
    /// GPI-2's barrier of a group spanning hosts.
    RemoteBarrier,
    /// GPI-2's allreduce of a group spanning hosts.
    RemoteAllreduce {
        bytes: usize,
    },
    Allreduce {
        generation: u32,
        parity: usize,
        bytes: usize,
    },
}

/// Per-group state of the collectives, owned by one caller at a time.
#[derive(Debug, Default)]
pub(crate) struct CollState {
    pub(crate) pending: Option<Pending>,
    pub(crate) allreduce_calls: u64,
}

/// A committed group as this rank sees it.
#[derive(Debug)]
pub(crate) struct Committed {
    pub(crate) id: GroupId,
    pub(crate) members: Vec<Rank>,
    /// This rank's position in `members`.
    pub(crate) index: usize,
    pub(crate) sync: GroupSync,
    state: Mutex<CollState>,
}

/// Where a committed group's barrier and allreduce run.
#[derive(Debug)]
pub(crate) enum GroupSync {
    /// Members on one host: an object in its shared memory.
    Shared(Arc<GroupShared>),
    /// Members on several hosts (GPI-2 engine): GPI-2's group of the same
    /// id, which no shared memory needs.
    Remote(u8),
}

impl Committed {
    /// The collective state, or `ActiveCollective` if another thread runs a
    /// collective on this group now.
    pub(crate) fn state(&self) -> Result<MutexGuard<'_, CollState>> {
        match self.state.try_lock() {
            Ok(g) => Ok(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {
                Err(Error::ActiveCollective { group: self.id })
            }
        }
    }
}

#[derive(Debug)]
enum GroupEntry {
    /// Being defined with `group_add`.
    Building(Vec<Rank>),
    /// Commit started: waiting for the leader's object.
    Opening {
        members: Vec<Rank>,
        epoch: u32,
    },
    /// Commit started: arrived at the commit barrier.
    Committing {
        members: Vec<Rank>,
        shared: Arc<GroupShared>,
        generation: u32,
    },
    /// Commit of a group spanning hosts started: members added to GPI-2's
    /// group, whose commit may need calling again.
    RemoteCommitting(Vec<Rank>),
    Committed(Arc<Committed>),
}

impl GroupEntry {
    fn members(&self) -> &[Rank] {
        match self {
            GroupEntry::Building(m)
            | GroupEntry::Opening { members: m, .. }
            | GroupEntry::Committing { members: m, .. }
            | GroupEntry::RemoteCommitting(m) => m,
            GroupEntry::Committed(c) => &c.members,
        }
    }
}

/// The groups of a rank.
#[derive(Debug)]
pub(crate) struct Groups {
    /// User groups `0..max` (0: all ranks), then the node group at `max`.
    table: Mutex<Vec<Option<GroupEntry>>>,
    /// Windows made per segment id and node member list: names the next.
    windows: Mutex<HashMap<(SegmentId, Vec<Rank>), u64>>,
    /// How often each member list was committed: names the next commit.
    epochs: Mutex<HashMap<Vec<Rank>, u32>>,
    /// A `segment_create` whose closing barrier timed out.
    pending_create: Mutex<Option<(SegmentId, GroupId)>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Groups {
    pub(crate) fn new(max: usize) -> Groups {
        Groups {
            table: Mutex::new((0..=max).map(|_| None).collect()),
            windows: Mutex::new(HashMap::new()),
            epochs: Mutex::new(HashMap::new()),
            pending_create: Mutex::new(None),
        }
    }

    /// How many windows of segment id `segment` this rank made with the
    /// node members `node`.
    pub(crate) fn window_count(&self, segment: SegmentId, node: &[Rank]) -> u64 {
        lock(&self.windows)
            .get(&(segment, node.to_vec()))
            .copied()
            .unwrap_or(0)
    }

    /// Count one more such window.
    pub(crate) fn count_window(&self, segment: SegmentId, node: &[Rank]) {
        *lock(&self.windows)
            .entry((segment, node.to_vec()))
            .or_insert(0) += 1;
    }

    pub(crate) fn take_pending_create(&self, segment: SegmentId, group: GroupId) -> bool {
        let mut p = lock(&self.pending_create);
        if *p == Some((segment, group)) {
            *p = None;
            true
        } else {
            false
        }
    }

    pub(crate) fn set_pending_create(&self, segment: SegmentId, group: GroupId) {
        *lock(&self.pending_create) = Some((segment, group));
    }

    /// At term: drop every group; a leader whose commit never completed
    /// removes the object's name.
    pub(crate) fn release_all(&self, ctx: &Context) {
        let mut t = lock(&self.table);
        for e in t.iter_mut() {
            if let Some(e) = e.take() {
                release(ctx, e);
            }
        }
    }
}

fn release(ctx: &Context, e: GroupEntry) {
    if let GroupEntry::Committing {
        members, shared, ..
    } = e
    {
        if members[0] == ctx.rank() {
            shared.unlink();
        }
    }
}

impl Context {
    fn group_slot<R>(
        &self,
        group: GroupId,
        f: impl FnOnce(&mut Option<GroupEntry>) -> Result<R>,
    ) -> Result<R> {
        let mut t = lock(&self.groups.table);
        let slot = t
            .get_mut(group.0 as usize)
            .ok_or_else(|| Error::InvalidGroup { group })?;
        f(slot)
    }

    /// The committed group `group`.
    pub(crate) fn committed(&self, group: GroupId) -> Result<Arc<Committed>> {
        self.group_slot(group, |slot| match slot {
            Some(GroupEntry::Committed(c)) => Ok(c.clone()),
            Some(_) => Err(Error::GroupNotCommitted { group }),
            None => Err(Error::InvalidGroup { group }),
        })
    }

    /// Wait until the barrier generation `generation` of `shared` has
    /// passed, failing if a member of `members` dies or leaves first.
    pub(crate) fn await_generation(
        &self,
        shared: &GroupShared,
        generation: u32,
        members: &[Rank],
        watch: barrier::Watch,
        deadline: Deadline,
    ) -> Result<()> {
        self.engine.patience().wait(
            shared.ww(),
            deadline,
            || shared.passed(generation).then_some(()),
            || match watch {
                barrier::Watch::Members => self.engine.member_faults(members),
                barrier::Watch::Everyone => self.engine.faults(),
            },
        )
    }

    pub(crate) fn committed_members(&self, group: GroupId) -> Result<Vec<Rank>> {
        Ok(self.committed(group)?.members.clone())
    }

    /// Commit the group of all ranks and, if the job has several nodes,
    /// the group of this rank's node (at init, where every rank takes
    /// part).
    pub(crate) fn commit_initial_groups(&self) -> Result<()> {
        let node = GroupId(self.config.group_max as u8);
        let mut initial = vec![(GroupId::ALL, (0..self.num_ranks()).collect::<Vec<_>>())];
        if self.num_nodes() > 1 {
            initial.push((node, self.node_ranks(self.node()).collect()));
        }
        for (g, members) in initial {
            self.group_slot(g, |slot| {
                *slot = Some(GroupEntry::Building(members));
                Ok(())
            })?;
            self.group_commit(g, self.config.init_timeout)?;
        }
        Ok(())
    }

    /// With several nodes, the node-aware barrier over all ranks: a window
    /// on the reserved segment (at init, where every rank takes part).
    pub(crate) fn create_node_collectives(&self) -> Result<()> {
        if self.num_nodes() < 2 {
            return Ok(());
        }
        let opts = AllreduceOptions {
            queue: crate::context::RESERVED_QUEUE,
            ..Default::default()
        };
        let nr = crate::context::internal(|| {
            NodeReduce::create(
                self,
                crate::context::RESERVED_SEGMENT,
                0,
                true,
                opts,
                self.config.init_timeout,
            )
        })?;
        *lock(&self.all_nodes) = Some(nr);
        Ok(())
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
        let mut t = lock(&self.groups.table);
        let user = self.config.group_max as usize; // t[user]: the node group
        let free = t[..user]
            .iter()
            .skip(1)
            .position(|e| e.is_none())
            .ok_or_else(|| Error::TooManyGroups {
                max: self.config.group_max,
            })?
            + 1;
        if let Some(g) = self.engine.cross_host() {
            g.group_create(free as u8)?;
        }
        t[free] = Some(GroupEntry::Building(Vec::new()));
        Ok(GroupId(free as u8))
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
        self.group_slot(group, |slot| match slot {
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
            Open(Vec<Rank>, u32),
            Wait,
            Remote(Vec<Rank>),
        }
        let step = self.group_slot(group, |slot| match slot {
            None => Err(Error::InvalidGroup { group }),
            Some(GroupEntry::Committed(_)) => Ok(Step::Done),
            Some(GroupEntry::Committing { .. }) => Ok(Step::Wait),
            Some(GroupEntry::Opening { members, epoch }) => Ok(Step::Open(members.clone(), *epoch)),
            Some(GroupEntry::RemoteCommitting(m)) => Ok(Step::Remote(m.clone())),
            Some(GroupEntry::Building(m)) => {
                if !m.contains(&me) {
                    return Err(Error::GroupMismatch {
                        group,
                        reason: format!("it does not contain this rank ({me}); add it first"),
                    });
                }
                if let Some(g) = self
                    .engine
                    .cross_host()
                    .filter(|_| self.engine.spans_hosts(m))
                {
                    // GPI-2's group 0 is all ranks, committed by GPI-2.
                    if group != GroupId::ALL {
                        g.group_prepare(group.0, m)?;
                    }
                    let members = std::mem::take(m);
                    *slot = Some(GroupEntry::RemoteCommitting(members.clone()));
                    return Ok(Step::Remote(members));
                }
                let mut epochs = lock(&self.groups.epochs);
                let e = epochs.entry(m.clone()).or_insert(0);
                let epoch = *e;
                *e += 1;
                let members = std::mem::take(m);
                *slot = Some(GroupEntry::Opening {
                    members: members.clone(),
                    epoch,
                });
                Ok(Step::Open(members, epoch))
            }
        })?;
        match step {
            Step::Done => return Ok(()),
            Step::Wait => {}
            Step::Remote(members) => {
                if group != GroupId::ALL {
                    let g = self.engine.cross_host().expect("a job spanning hosts");
                    self.remote_sliced(&members, deadline, false, |t| g.group_commit(group.0, t))?;
                }
                return self.group_committed(group, members, GroupSync::Remote(group.0));
            }
            Step::Open(members, epoch) => {
                // The leader creates the object, the others find it.
                let token = self.engine.token().to_string();
                let shared = if members[0] == me {
                    GroupShared::create(&token, &members, epoch, self.config.allreduce_slot_bytes())
                        .map_err(|e| {
                            Error::system(
                                format!("creating the shared state of group {}", group.0),
                                e,
                            )
                        })?
                } else {
                    crate::engine::poll_with_backoff(deadline, || {
                        self.engine.member_faults(&members)?;
                        GroupShared::open(&token, &members, epoch).map_err(|e| {
                            Error::system(
                                format!("opening the shared state of group {}", group.0),
                                e,
                            )
                        })
                    })?
                };
                let shared = Arc::new(shared);
                let generation = shared.arrive();
                self.group_slot(group, |slot| {
                    *slot = Some(GroupEntry::Committing {
                        members,
                        shared,
                        generation,
                    });
                    Ok(())
                })?;
            }
        }
        let (members, shared, generation) = self.group_slot(group, |slot| match slot {
            Some(GroupEntry::Committing {
                members,
                shared,
                generation,
            }) => Ok((members.clone(), shared.clone(), *generation)),
            _ => Err(Error::GroupNotCommitted { group }),
        })?;
        self.await_generation(
            &shared,
            generation,
            &members,
            barrier::Watch::Members,
            deadline,
        )?;
        if members[0] == me {
            shared.unlink(); // every member has it mapped now
        }
        self.group_committed(group, members, GroupSync::Shared(shared))
    }

    /// Run `call`, a resumable GPI-2 call over group members `members`,
    /// until `deadline`, checking the members for failures after attempts:
    /// GPI-2 does not notice a dead member by itself, the engine's failure
    /// watch does. GPI-2 spins while it waits, so collectives (`poll`) get one
    /// attempt of 1 ms, then single checks between growing naps (5 us to
    /// 0.5 ms) that leave the core to others; a commit (SN round trips)
    /// gets attempts of 100 ms.
    pub(crate) fn remote_sliced(
        &self,
        members: &[Rank],
        deadline: Deadline,
        poll: bool,
        mut call: impl FnMut(Timeout) -> Result<()>,
    ) -> Result<()> {
        use std::time::Duration;
        let mut nap = Duration::from_micros(5);
        let mut attempt = if poll {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(100)
        };
        loop {
            let t = match deadline.remaining() {
                _ if attempt.is_zero() => Timeout::Test,
                Some(l) if l.is_zero() => Timeout::Test,
                Some(l) => Timeout::After(l.min(attempt)),
                None => Timeout::After(attempt),
            };
            match call(t) {
                Err(Error::Timeout) => {}
                done => return done,
            }
            // Only failures end the wait: a member that terminated has done
            // its part (GPI-2 keeps it reachable until every rank leaves).
            if let Err(e @ Error::RankFailed { .. }) = self.engine.member_faults(members) {
                // It may have done its part before it died (its last
                // messages still on their way): a short grace.
                let grace = Deadline::At(std::time::Instant::now() + Duration::from_millis(200));
                return match crate::engine::poll_with_backoff(grace, || match call(Timeout::Test) {
                    Err(Error::Timeout) => Ok(None),
                    done => done.map(Some),
                }) {
                    Err(Error::Timeout) => Err(e),
                    done => done,
                };
            }
            match deadline.remaining() {
                Some(l) if l.is_zero() => return Err(Error::Timeout),
                Some(l) if poll => std::thread::sleep(nap.min(l)),
                None if poll => std::thread::sleep(nap),
                _ => {}
            }
            if poll {
                attempt = Duration::ZERO;
                nap = (nap * 2).min(Duration::from_micros(500));
            }
        }
    }

    fn group_committed(&self, group: GroupId, members: Vec<Rank>, sync: GroupSync) -> Result<()> {
        let index = members
            .binary_search(&self.rank())
            .expect("member list contains this rank");
        self.group_slot(group, |slot| {
            *slot = Some(GroupEntry::Committed(Arc::new(Committed {
                id: group,
                members,
                index,
                sync,
                state: Mutex::new(CollState::default()),
            })));
            Ok(())
        })
    }

    /// Delete `group` (`gaspi_group_delete`). [`GroupId::ALL`] cannot be
    /// deleted.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let g = ctx.group_create()?;
    /// ctx.group_delete(g)?;
    /// assert!(ctx.group_delete(gaspi::GroupId::ALL).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn group_delete(&self, group: GroupId) -> Result<()> {
        if group == GroupId::ALL || group.0 as u32 == self.config.group_max {
            return Err(Error::InvalidArgument(
                "GroupId::ALL and the node group cannot be deleted".into(),
            ));
        }
        let e = self.group_slot(group, |slot| {
            slot.take().ok_or_else(|| Error::InvalidGroup { group })
        })?;
        if let Some(g) = self.engine.cross_host() {
            g.group_delete(group.0);
        }
        release(self, e);
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
        let user = self.config.group_max as usize;
        lock(&self.groups.table)[..user]
            .iter()
            .filter(|e| e.is_some())
            .count()
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
        self.group_slot(group, |slot| {
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
