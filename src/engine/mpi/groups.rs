//! Groups spanning hosts: our groups' members and collectives over MPI
//! point-to-point messages on the engine's collective communicator.
//!
//! MPI's communicators are made collectively and without a timeout, GASPI
//! groups are committed with one and may be retried or abandoned: the
//! engine keeps its own twin of each group (its members) and runs the
//! barrier (dissemination) and the ordered allreduce (every member sends
//! its contribution to every other, each folds them in member order, so
//! all get the same bits) as nonblocking messages whose state survives a
//! timeout: calling again resumes. A commit is a barrier of the members.
//! Tags keep groups and their incarnations apart: (id, commits so far,
//! kind).

use super::intake::reap;
use super::{Mpi, ffi};
use crate::engine::transport::Combine;
use crate::engine::wait::{Patience, lock};
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, Timeout};
use std::time::Duration;

/// A collective in progress on a twin.
enum Step {
    /// Dissemination round `round`, its receive outstanding.
    Barrier {
        round: u32,
        recv: Option<ffi::Request>,
    },
    /// Member lists exchanged: per other member, its receive (`None` once
    /// it sent the same list).
    Commit {
        recvs: Vec<(usize, Option<ffi::Request>)>,
    },
    /// Contributions sent; receives from every other member.
    Allreduce {
        recvs: Vec<ffi::Request>,
        mine: Vec<u8>,
    },
}

/// Our twin of one of our groups.
#[derive(Default)]
pub(super) struct Twin {
    members: Vec<Rank>,
    /// Commits completed under this id with these members.
    commits: u32,
    step: Option<Step>,
    sends: Vec<ffi::Request>,
}

const KIND_BARRIER: i32 = 0;
const KIND_COMMIT: i32 = 1;
const KIND_ALLREDUCE: i32 = 2;

impl Twin {
    /// The twin of the group of all `nranks` ranks, committed.
    pub(super) fn all(nranks: usize) -> Twin {
        Twin {
            members: (0..nranks as Rank).collect(),
            ..Twin::default()
        }
    }

    fn tag(&self, id: u8, kind: i32) -> i32 {
        // 8 + 5 + 2 bits: below 32768, the smallest MPI_TAG_UB allowed.
        (id as i32) << 7 | ((self.commits & 31) as i32) << 2 | kind
    }

    /// Forget a collective left unfinished: its receives are cancelled,
    /// its sends left to MPI (dropped unfinished).
    pub(super) fn abandon(&mut self) {
        let recvs: Vec<ffi::Request> = match self.step.take() {
            Some(Step::Barrier { recv, .. }) => recv.into_iter().collect(),
            Some(Step::Commit { recvs }) => recvs.into_iter().filter_map(|(_, r)| r).collect(),
            Some(Step::Allreduce { recvs, .. }) => recvs,
            None => Vec::new(),
        };
        for mut r in recvs {
            r.cancel();
        }
        self.sends.clear();
    }
}

impl Mpi {
    pub(super) fn group_create(&self, id: u8) -> Result<()> {
        lock(&self.twins).entry(id).or_default();
        Ok(())
    }

    pub(super) fn group_delete(&self, id: u8) {
        if let Some(mut t) = lock(&self.twins).remove(&id) {
            t.abandon();
        }
    }

    pub(super) fn group_prepare(&self, id: u8, members: &[Rank]) -> Result<()> {
        let mut twins = lock(&self.twins);
        let t = twins.entry(id).or_default();
        if t.members != members {
            t.abandon();
            *t = Twin {
                members: members.to_vec(),
                ..Twin::default()
            };
        }
        Ok(())
    }

    /// Commit twin `id`: every member sends a digest of its member list
    /// to every other and waits for the same digest from each (a different
    /// one, from a member with another list or from an abandoned commit, is
    /// dropped and waited past: a mismatch ends in a timeout, as in GPI-2).
    /// Resumed after a timeout.
    pub(super) fn group_commit(
        &self,
        id: u8,
        timeout: Timeout,
        patience: &Patience<'_>,
    ) -> Result<()> {
        self.poll(timeout.deadline(), patience, |me| {
            let mut twins = lock(&me.twins);
            let t = twins.get_mut(&id).ok_or_else(no_twin)?;
            reap(&mut t.sends);
            let tag = t.tag(id, KIND_COMMIT);
            let digest = digest(&t.members).to_ne_bytes();
            if !matches!(t.step, Some(Step::Commit { .. })) {
                t.abandon();
                let mut recvs = Vec::new();
                for m in t
                    .members
                    .iter()
                    .map(|&m| m as usize)
                    .filter(|&m| m != me.rank)
                {
                    t.sends
                        .push(ffi::send(me.coll, digest.to_vec(), m, tag, false)?);
                    recvs.push((m, Some(ffi::recv(me.coll, digest.len(), m, tag)?)));
                }
                t.step = Some(Step::Commit { recvs });
            }
            let Some(Step::Commit { recvs }) = &mut t.step else {
                unreachable!("set above")
            };
            for (m, slot) in recvs.iter_mut() {
                let Some(r) = slot else { continue };
                if !r.test()? {
                    continue;
                }
                *slot = match r.data() == digest {
                    true => None,
                    false => Some(ffi::recv(me.coll, digest.len(), *m, tag)?),
                };
            }
            if recvs.iter().any(|(_, r)| r.is_some()) {
                return Ok(None);
            }
            t.step = None;
            t.commits = t.commits.wrapping_add(1);
            Ok(Some(()))
        })
    }

    /// The dissemination barrier over twin `id` (resumed after a timeout).
    pub(super) fn barrier(&self, id: u8, timeout: Timeout, patience: &Patience<'_>) -> Result<()> {
        self.poll(timeout.deadline(), patience, |me| {
            let mut twins = lock(&me.twins);
            let t = twins.get_mut(&id).ok_or_else(no_twin)?;
            reap(&mut t.sends);
            let n = t.members.len();
            let i = t
                .members
                .iter()
                .position(|&m| m as usize == me.rank)
                .ok_or_else(no_twin)?;
            let tag = t.tag(id, KIND_BARRIER);
            if !matches!(t.step, Some(Step::Barrier { .. })) {
                t.abandon();
                t.step = Some(Step::Barrier {
                    round: 0,
                    recv: None,
                });
            }
            loop {
                let Some(Step::Barrier { round, recv }) = &mut t.step else {
                    unreachable!("set above")
                };
                let dist = 1usize << *round;
                if dist >= n {
                    t.step = None;
                    return Ok(Some(()));
                }
                if recv.is_none() {
                    let to = t.members[(i + dist) % n] as usize;
                    let from = t.members[(i + n - dist % n) % n] as usize;
                    t.sends
                        .push(ffi::send(me.coll, Vec::new(), to, tag, false)?);
                    *recv = Some(ffi::recv(me.coll, 0, from, tag)?);
                }
                if !recv.as_mut().expect("posted").test()? {
                    return Ok(None);
                }
                *recv = None;
                *round += 1;
            }
        })
    }

    /// Allreduce over twin `id` combining contributions in member order
    /// (resumed after a timeout with the same `send`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn allreduce_ordered(
        &self,
        id: u8,
        index: usize,
        send: &[u8],
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
        patience: &Patience<'_>,
    ) -> Result<()> {
        let deadline = timeout.deadline();
        let parts = self.poll(deadline, patience, |me| {
            let mut twins = lock(&me.twins);
            let t = twins.get_mut(&id).ok_or_else(no_twin)?;
            reap(&mut t.sends);
            let tag = t.tag(id, KIND_ALLREDUCE);
            if !matches!(t.step, Some(Step::Allreduce { .. })) {
                t.abandon();
                let mut recvs = Vec::new();
                for (j, &m) in t.members.iter().enumerate() {
                    if j == index {
                        continue;
                    }
                    t.sends
                        .push(ffi::send(me.coll, send.to_vec(), m as usize, tag, false)?);
                    recvs.push(ffi::recv(me.coll, send.len(), m as usize, tag)?);
                }
                t.step = Some(Step::Allreduce {
                    recvs,
                    mine: send.to_vec(),
                });
            }
            let Some(Step::Allreduce { recvs, .. }) = &mut t.step else {
                unreachable!("set above")
            };
            for r in recvs.iter_mut() {
                if !r.test()? {
                    return Ok(None);
                }
            }
            let Some(Step::Allreduce { recvs, mine }) = t.step.take() else {
                unreachable!("matched above")
            };
            Ok(Some((recvs, mine)))
        })?;
        // A left fold in member order, into `recv` (through a copy of it
        // from the third member on).
        let (recvs, mine) = parts;
        let part = |j: usize| match j.cmp(&index) {
            std::cmp::Ordering::Less => recvs[j].data(),
            std::cmp::Ordering::Equal => &mine[..],
            std::cmp::Ordering::Greater => recvs[j - 1].data(),
        };
        let members = recvs.len() + 1;
        if members == 1 {
            crate::engine::memcopy::copy_slice(recv, &mine);
            return Ok(());
        }
        combine(part(0), part(1), recv);
        let mut acc = Vec::new();
        for j in 2..members {
            acc.clear();
            acc.extend_from_slice(recv);
            combine(&acc, part(j), recv);
        }
        Ok(())
    }

    /// Poll `step` (which gets the engine; its tests let MPI progress)
    /// as `patience` waits (spin, yield, then naps of up to 50 us), until
    /// it yields or `deadline` passes.
    fn poll<T>(
        &self,
        deadline: Deadline,
        patience: &Patience<'_>,
        mut step: impl FnMut(&Mpi) -> Result<Option<T>>,
    ) -> Result<T> {
        patience.poll(deadline, Duration::from_micros(50), || step(self))
    }
}

/// A digest of a member list (FNV-1a over the ranks).
fn digest(members: &[Rank]) -> u64 {
    members.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &m| {
        (h ^ u64::from(m)).wrapping_mul(0x0100_0000_01b3)
    }) ^ members.len() as u64
}

fn no_twin() -> Error {
    Error::InvalidArgument("the MPI engine has no twin of this group (or is not a member)".into())
}
