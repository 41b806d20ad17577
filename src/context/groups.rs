//! A rank's groups (`gaspi_group_*` state): the member lists being built,
//! commits in progress, committed groups with the state of their
//! collectives, and what names the shared objects of commits and windows.

use crate::engine::group::GroupShared;
use crate::error::{Error, Result};
use crate::types::{GroupId, Rank, SegmentId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A collective that was started on a group and has not completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pending {
    Barrier {
        generation: u32,
    },
    /// The node-aware barrier over all ranks.
    NodeBarrier,
    /// The node-aware barrier over all ranks through the leaders' group:
    /// the phase it stopped in (node, leaders, node).
    LeadersBarrier {
        phase: u8,
    },
    /// The transport's barrier of a group spanning hosts.
    HostBarrier,
    /// The transport's allreduce of a group spanning hosts.
    HostAllreduce {
        bytes: usize,
    },
    Allreduce {
        generation: u32,
        parity: usize,
        bytes: usize,
    },
}

/// Whose failure ends a wait in a group's collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultScope {
    /// The group's members.
    Members,
    /// Every rank: for node barriers inside a collective over all ranks,
    /// where a local rank may never arrive because a rank of another node
    /// failed.
    Everyone,
}

impl FaultScope {
    /// The ranks whose failure ends a wait of a group of `members` in a job
    /// of `num_ranks`.
    pub(crate) fn watched(self, members: &[Rank], num_ranks: Rank) -> std::borrow::Cow<'_, [Rank]> {
        match self {
            FaultScope::Members => members.into(),
            FaultScope::Everyone => (0..num_ranks).collect::<Vec<_>>().into(),
        }
    }
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
    /// Members on several hosts: the transport's twin of the same id,
    /// which no shared memory needs.
    Hosts(u8),
}

impl Committed {
    pub(crate) fn new(id: GroupId, members: Vec<Rank>, index: usize, sync: GroupSync) -> Committed {
        Committed {
            id,
            members,
            index,
            sync,
            state: Mutex::new(CollState::default()),
        }
    }

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
pub(crate) enum GroupEntry {
    /// Being defined with `group_add`.
    Building(Vec<Rank>),
    /// Commit started: waiting for the leader's object.
    Opening {
        members: Vec<Rank>,
    },
    /// Commit started: arrived at the commit barrier.
    Committing {
        members: Vec<Rank>,
        shared: Arc<GroupShared>,
        generation: u32,
    },
    /// Commit of a group spanning hosts started: members added to the
    /// transport's twin, whose commit may need calling again.
    HostsCommitting(Vec<Rank>),
    Committed(Arc<Committed>),
}

impl GroupEntry {
    pub(crate) fn members(&self) -> &[Rank] {
        match self {
            GroupEntry::Building(m)
            | GroupEntry::Opening { members: m, .. }
            | GroupEntry::Committing { members: m, .. }
            | GroupEntry::HostsCommitting(m) => m,
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
    /// A `segment_create` (or window creation) that timed out in one of
    /// its barriers, and how far it had come.
    pending_create: Mutex<Option<(SegmentId, GroupId, CreateStage)>>,
    /// A collective object's creation that timed out in one of its steps
    /// (`collectives::creation`), to resume.
    pending_object: Mutex<Option<ObjectStage>>,
}

/// How far the creation of a collective object (or of an RMA window) had
/// come when one of its steps timed out: the steps it completed and what
/// each gave, to resume from the one that timed out.
#[derive(Clone, Debug)]
pub(crate) struct ObjectStage {
    /// The object's window segment.
    pub(crate) segment: SegmentId,
    /// The group that makes it.
    pub(crate) group: GroupId,
    /// What is made (`"allgatherv"`, ...).
    pub(crate) kind: &'static str,
    /// What each completed step gave, in order.
    pub(crate) steps: Vec<Vec<u64>>,
    /// Whether one of them made the window.
    pub(crate) window_made: bool,
}

/// How far a collective segment creation had come when a barrier of it
/// timed out (see `Context::collective_segment`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CreateStage {
    /// Made here, not yet registered: waiting for every member to arrive.
    Made,
    /// Registered with every member: the closing barrier.
    Registered,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Groups {
    /// The groups of a rank with `max` user group ids: the user's, the
    /// node group (id `max`) and the leaders' group (id `max + 1`).
    pub(crate) fn new(max: usize) -> Groups {
        Groups {
            table: Mutex::new((0..=max + 1).map(|_| None).collect()),
            windows: Mutex::new(HashMap::new()),
            pending_create: Mutex::new(None),
            pending_object: Mutex::new(None),
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

    /// The stage of a timed-out creation of `segment` over `group`, to
    /// resume (taken: a new timeout sets it again).
    pub(crate) fn take_pending_create(
        &self,
        segment: SegmentId,
        group: GroupId,
    ) -> Option<CreateStage> {
        let mut p = lock(&self.pending_create);
        match *p {
            Some((s, g, stage)) if (s, g) == (segment, group) => {
                *p = None;
                Some(stage)
            }
            _ => None,
        }
    }

    pub(crate) fn set_pending_create(
        &self,
        segment: SegmentId,
        group: GroupId,
        stage: CreateStage,
    ) {
        *lock(&self.pending_create) = Some((segment, group, stage));
    }

    /// Segment `segment` was deleted: a creation of it that timed out is
    /// abandoned, and the next creation starts afresh.
    pub(crate) fn forget_pending_create(&self, segment: SegmentId) {
        let mut p = lock(&self.pending_create);
        if p.is_some_and(|(s, _, _)| s == segment) {
            *p = None;
        }
        let mut o = lock(&self.pending_object);
        if o.as_ref().is_some_and(|o| o.segment == segment) {
            *o = None;
        }
    }

    /// The steps of a timed-out creation of a `kind` object on `segment`
    /// over `group`, to resume (taken: a new timeout sets them again).
    pub(crate) fn take_pending_object(
        &self,
        segment: SegmentId,
        group: GroupId,
        kind: &str,
    ) -> Option<ObjectStage> {
        let mut o = lock(&self.pending_object);
        match &*o {
            Some(p) if (p.segment, p.group, p.kind) == (segment, group, kind) => o.take(),
            _ => None,
        }
    }

    /// A creation timed out in the step after those of `stage`: keep
    /// them for its next call.
    pub(crate) fn set_pending_object(&self, stage: ObjectStage) {
        *lock(&self.pending_object) = Some(stage);
    }

    /// At term: drop every group; a leader whose commit never completed
    /// removes the object's name.
    pub(crate) fn release_all(&self, rank: Rank) {
        let mut t = lock(&self.table);
        for e in t.iter_mut() {
            if let Some(e) = e.take() {
                release(rank, e);
            }
        }
    }

    /// Run `f` on the entry of `group` under the table lock.
    pub(crate) fn slot<R>(
        &self,
        group: GroupId,
        f: impl FnOnce(&mut Option<GroupEntry>) -> Result<R>,
    ) -> Result<R> {
        let mut t = lock(&self.table);
        let slot = t
            .get_mut(group.0 as usize)
            .ok_or_else(|| Error::InvalidGroup { group })?;
        f(slot)
    }

    /// Groups of the user (`0..max`) that exist.
    pub(crate) fn user_count(&self, max: usize) -> usize {
        lock(&self.table)[..max]
            .iter()
            .filter(|e| e.is_some())
            .count()
    }

    /// The lowest free user group id `1..max`, taken as a group being
    /// built (`make` runs first, and may refuse).
    pub(crate) fn create(
        &self,
        max: usize,
        make: impl FnOnce(u8) -> Result<()>,
    ) -> Result<Option<u8>> {
        let mut t = lock(&self.table);
        let Some(free) = t[..max]
            .iter()
            .skip(1)
            .position(|e| e.is_none())
            .map(|p| p + 1)
        else {
            return Ok(None);
        };
        make(free as u8)?;
        t[free] = Some(GroupEntry::Building(Vec::new()));
        Ok(Some(free as u8))
    }
}

/// Drop the entry `e` of this rank (`rank`); a leader whose commit never
/// completed removes the object's name.
pub(crate) fn release(rank: Rank, e: GroupEntry) {
    if let GroupEntry::Committing {
        members, shared, ..
    } = e
    {
        if members[0] == rank {
            shared.unlink();
        }
    }
}
