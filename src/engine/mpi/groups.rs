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
use crate::engine::transport::{Combine, Contribution, contributions_differ};
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
    /// Contributions sent; per other member, its contribution on its way.
    Allreduce { incoming: Vec<Incoming> },
}

/// The first message of a contribution to an allreduce: two header words
/// (the contribution's shape and length) and its data up to this many
/// bytes in all; the rest, if any, follows in a second message. Every
/// member receives the first messages into buffers of this size, so that
/// no message is longer than its receive (MPI's truncation error, which
/// MPICH 4.0.2 reported through `MPI_COMM_WORLD`'s handler, fatal by
/// default, whatever the communicator's), and receives the rest with the length the
/// first announced: a member that gives a longer contribution than the
/// others breaks nothing, and all see that it differs.
const FIRST_MESSAGE: usize = 4096;
const HEAD: usize = 16;

/// One other member's contribution to an allreduce on its way.
enum Incoming {
    /// Its first message, into a buffer of [`FIRST_MESSAGE`] bytes.
    First(ffi::Request),
    /// The rest, announced by the first message (`buf`).
    Rest {
        shape: u64,
        buf: Vec<u8>,
        recv: ffi::Request,
    },
    /// All of it: its first message's buffer, and its whole data where
    /// it came in two messages.
    Done {
        shape: u64,
        buf: Vec<u8>,
        len: usize,
        whole: Option<Vec<u8>>,
    },
}

impl Incoming {
    /// The contribution's data, once done.
    fn data(&self) -> &[u8] {
        match self {
            Incoming::Done { whole: Some(w), .. } => w,
            Incoming::Done { buf, len, .. } => &buf[HEAD..HEAD + len],
            _ => unreachable!("read once all are done"),
        }
    }

    /// Go on receiving from `from` with `tag`: `Ok(true)` once done.
    fn progress(&mut self, comm: ffi::Comm, from: usize, tag: i32) -> Result<bool> {
        loop {
            match self {
                Incoming::Done { .. } => return Ok(true),
                Incoming::First(r) => {
                    let Some(n) = r.test_count()? else {
                        return Ok(false);
                    };
                    let buf = r.take_buf().expect("completed");
                    let word = |k: usize| {
                        u64::from_ne_bytes(buf[8 * k..8 * k + 8].try_into().expect("8 bytes"))
                    };
                    let (shape, len) = (word(0), usize::try_from(word(1)).unwrap_or(usize::MAX));
                    let first = len.min(FIRST_MESSAGE - HEAD);
                    if n < HEAD || n != HEAD + first || len > crate::config::ALLREDUCE_BYTES_MAX {
                        return Err(contributions_differ());
                    }
                    *self = if len == first {
                        Incoming::Done {
                            shape,
                            buf,
                            len,
                            whole: None,
                        }
                    } else {
                        let recv = ffi::recv(comm, len - first, from, tag)?;
                        Incoming::Rest { shape, buf, recv }
                    };
                }
                Incoming::Rest { shape, buf, recv } => {
                    if !recv.test()? {
                        return Ok(false);
                    }
                    let mut whole = buf[HEAD..FIRST_MESSAGE].to_vec();
                    whole.extend_from_slice(recv.data());
                    let len = whole.len();
                    let (shape, buf) = (*shape, std::mem::take(buf));
                    *self = Incoming::Done {
                        shape,
                        buf,
                        len,
                        whole: Some(whole),
                    };
                }
            }
        }
    }
}

/// Our twin of one of our groups.
#[derive(Default)]
pub(super) struct Twin {
    members: Vec<Rank>,
    /// Commits completed under this id with these members.
    commits: u32,
    step: Option<Step>,
    sends: Vec<ffi::Request>,
    /// Receive buffers of first messages ([`FIRST_MESSAGE`]), kept for
    /// the next allreduce.
    buffers: Vec<Vec<u8>>,
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
            Some(Step::Allreduce { incoming }) => incoming
                .into_iter()
                .filter_map(|i| match i {
                    Incoming::First(r) | Incoming::Rest { recv: r, .. } => Some(r),
                    Incoming::Done { .. } => None,
                })
                .collect(),
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
    /// (resumed after a timeout with the same contribution): every member
    /// sends its contribution to every other ([`FIRST_MESSAGE`]), each
    /// folds them in member order.
    pub(super) fn allreduce_ordered(
        &self,
        id: u8,
        mine: Contribution<'_>,
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
        patience: &Patience<'_>,
    ) -> Result<()> {
        let Contribution { index, shape, send } = mine;
        let deadline = timeout.deadline();
        let incoming = self.poll(deadline, patience, |me| {
            let mut twins = lock(&me.twins);
            let t = twins.get_mut(&id).ok_or_else(no_twin)?;
            reap(&mut t.sends);
            let tag = t.tag(id, KIND_ALLREDUCE);
            if !matches!(t.step, Some(Step::Allreduce { .. })) {
                t.abandon();
                let first = send.len().min(FIRST_MESSAGE - HEAD);
                let mut incoming = Vec::new();
                for m in others(&t.members, index) {
                    let mut head = Vec::with_capacity(HEAD + first);
                    head.extend_from_slice(&shape.to_ne_bytes());
                    head.extend_from_slice(&(send.len() as u64).to_ne_bytes());
                    head.extend_from_slice(&send[..first]);
                    t.sends.push(ffi::send(me.coll, head, m, tag, false)?);
                    if first < send.len() {
                        let rest = send[first..].to_vec();
                        t.sends.push(ffi::send(me.coll, rest, m, tag, false)?);
                    }
                    let buf = t.buffers.pop().unwrap_or_else(|| vec![0u8; FIRST_MESSAGE]);
                    incoming.push(Incoming::First(ffi::recv_into(me.coll, buf, m, tag)?));
                }
                t.step = Some(Step::Allreduce { incoming });
            }
            let Some(Step::Allreduce { incoming }) = &mut t.step else {
                unreachable!("set above")
            };
            let mut done = true;
            for (i, m) in incoming.iter_mut().zip(others(&t.members, index)) {
                done &= i.progress(me.coll, m, tag)?;
            }
            if !done {
                return Ok(None);
            }
            let Some(Step::Allreduce { incoming }) = t.step.take() else {
                unreachable!("matched above")
            };
            Ok(Some(incoming))
        });
        let incoming = match incoming {
            // A first message that broke the protocol: the others go on.
            Err(e @ Error::InvalidArgument(_)) => {
                if let Some(t) = lock(&self.twins).get_mut(&id) {
                    t.abandon();
                }
                return Err(e);
            }
            r => r?,
        };
        // Every member got every contribution, so every member sees one
        // that differs.
        let same = incoming.iter().all(|i| {
            matches!(i, Incoming::Done { shape: s, .. } if *s == shape)
                && i.data().len() == send.len()
        });
        if same {
            fold(index, send, &incoming, recv, combine);
        }
        // The first messages' buffers serve the next call.
        if let Some(t) = lock(&self.twins).get_mut(&id) {
            t.buffers
                .extend(incoming.into_iter().filter_map(|i| match i {
                    Incoming::Done { buf, .. } => Some(buf),
                    _ => None,
                }));
        }
        if same {
            Ok(())
        } else {
            Err(contributions_differ())
        }
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

/// The members of `members` but the one at `index`, as MPI ranks.
fn others(members: &[Rank], index: usize) -> impl Iterator<Item = usize> + '_ {
    (members.iter().enumerate())
        .filter(move |&(j, _)| j != index)
        .map(|(_, &m)| m as usize)
}

/// The left fold in member order of this rank's `send` (at `index`) and
/// the others' contributions (`incoming`, in member order), into `recv`
/// (through a copy of it from the third member on).
fn fold(
    index: usize,
    send: &[u8],
    incoming: &[Incoming],
    recv: &mut [u8],
    combine: &mut Combine<'_>,
) {
    let part = |j: usize| match j.cmp(&index) {
        std::cmp::Ordering::Less => incoming[j].data(),
        std::cmp::Ordering::Equal => send,
        std::cmp::Ordering::Greater => incoming[j - 1].data(),
    };
    let members = incoming.len() + 1;
    if members == 1 {
        crate::engine::memcopy::copy_slice(recv, send);
        return;
    }
    combine(part(0), part(1), recv);
    let mut acc = Vec::new();
    for j in 2..members {
        acc.clear();
        acc.extend_from_slice(recv);
        combine(&acc, part(j), recv);
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
