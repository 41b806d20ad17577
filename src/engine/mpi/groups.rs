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

use super::intake::{InFlight, reap};
use super::{Mpi, ffi};
use crate::engine::transport::Combine;
use crate::engine::wait::lock;
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, Timeout};
use std::time::Duration;

/// A receive outstanding and the buffer it fills.
type Receive = (ffi::Request, Vec<u8>);

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
        recvs: Vec<(usize, Option<Receive>)>,
    },
    /// Contributions sent; receives from every other member.
    Allreduce { recvs: Vec<Receive>, mine: Vec<u8> },
}

/// Our twin of one of our groups.
#[derive(Default)]
pub(super) struct Twin {
    members: Vec<Rank>,
    /// Commits completed under this id with these members.
    commits: u32,
    step: Option<Step>,
    sends: Vec<InFlight>,
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
    /// its sends completed by MPI alone (their buffers leaked).
    pub(super) fn abandon(&mut self) {
        match self.step.take() {
            Some(Step::Barrier { recv: Some(r), .. }) => {
                r.cancel();
            }
            Some(Step::Commit { recvs }) => {
                for (r, buf) in recvs.into_iter().filter_map(|(_, r)| r) {
                    if !r.cancel() {
                        drop(buf);
                    }
                }
            }
            Some(Step::Allreduce { recvs, .. }) => {
                for (r, buf) in recvs {
                    if !r.cancel() {
                        drop(buf);
                    }
                }
            }
            _ => {}
        }
        for (r, buf) in self.sends.drain(..) {
            r.release();
            std::mem::forget(buf);
        }
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
    pub(super) fn group_commit(&self, id: u8, timeout: Timeout) -> Result<()> {
        self.poll(timeout.deadline(), |me| {
            let mut twins = lock(&me.twins);
            let t = twins.get_mut(&id).ok_or_else(no_twin)?;
            reap(&mut t.sends);
            let tag = t.tag(id, KIND_COMMIT);
            let digest = digest(&t.members).to_ne_bytes();
            if !matches!(t.step, Some(Step::Commit { .. })) {
                t.abandon();
                let mut recvs = Vec::new();
                for &m in t.members.iter().filter(|&&m| m as usize != me.rank) {
                    let buf = digest.to_vec();
                    // SAFETY: the buffer is kept with its request.
                    let s = unsafe { ffi::isend(me.coll, &buf, m as usize, tag)? };
                    t.sends.push((s, buf));
                    recvs.push((m as usize, None));
                }
                t.step = Some(Step::Commit { recvs });
                // Post the receives below.
                if let Some(Step::Commit { recvs }) = &mut t.step {
                    for (m, r) in recvs.iter_mut() {
                        let mut into = vec![0u8; 8];
                        // SAFETY: the buffer is kept with its request.
                        let q = unsafe { ffi::irecv(me.coll, &mut into, *m, tag)? };
                        *r = Some((q, into));
                    }
                }
            }
            let Some(Step::Commit { recvs }) = &mut t.step else {
                unreachable!("set above")
            };
            for (m, slot) in recvs.iter_mut() {
                let Some((r, buf)) = slot else { continue };
                if !r.test()? {
                    continue;
                }
                if buf[..] == digest {
                    *slot = None;
                } else {
                    // SAFETY: as above.
                    let q = unsafe { ffi::irecv(me.coll, buf, *m, tag)? };
                    *r = q;
                }
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
    pub(super) fn barrier(&self, id: u8, timeout: Timeout) -> Result<()> {
        self.poll(timeout.deadline(), |me| {
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
                    // SAFETY: empty messages.
                    let s = unsafe { ffi::isend(me.coll, &[], to, tag)? };
                    // SAFETY: as above.
                    *recv = Some(unsafe { ffi::irecv(me.coll, &mut [], from, tag)? });
                    t.sends.push((s, Vec::new()));
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
    pub(super) fn allreduce_ordered(
        &self,
        id: u8,
        index: usize,
        send: &[u8],
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
    ) -> Result<()> {
        let deadline = timeout.deadline();
        let parts = self.poll(deadline, |me| {
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
                    let buf = send.to_vec();
                    // SAFETY: the buffer is kept with its request.
                    let s = unsafe { ffi::isend(me.coll, &buf, m as usize, tag)? };
                    t.sends.push((s, buf));
                    let mut into = vec![0u8; send.len()];
                    // SAFETY: as above.
                    let r = unsafe { ffi::irecv(me.coll, &mut into, m as usize, tag)? };
                    recvs.push((r, into));
                }
                t.step = Some(Step::Allreduce {
                    recvs,
                    mine: send.to_vec(),
                });
            }
            let Some(Step::Allreduce { recvs, .. }) = &mut t.step else {
                unreachable!("set above")
            };
            for (r, _) in recvs.iter_mut() {
                if !r.test()? {
                    return Ok(None);
                }
            }
            let Some(Step::Allreduce { recvs, mine }) = t.step.take() else {
                unreachable!("matched above")
            };
            let mut parts: Vec<Vec<u8>> = recvs.into_iter().map(|(_, b)| b).collect();
            parts.insert(index, mine);
            Ok(Some(parts))
        })?;
        let mut acc = parts[0].clone();
        for p in &parts[1..] {
            combine(&acc.clone(), p, &mut acc);
        }
        recv.copy_from_slice(&acc);
        Ok(())
    }

    /// Poll `step` (which gets the engine) with short naps, letting MPI
    /// progress, until it yields or `deadline` passes.
    fn poll<T>(
        &self,
        deadline: Deadline,
        mut step: impl FnMut(&Mpi) -> Result<Option<T>>,
    ) -> Result<T> {
        crate::engine::wait::poll_with_naps(deadline, Duration::from_micros(50), || step(self))
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
