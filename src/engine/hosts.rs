//! Groups that span hosts: no shared memory reaches all their members, so
//! they live in the transport (a twin of the same id there), and their
//! commit, barrier and allreduce are the transport's.
//!
//! A transport's collectives may spin while they wait (GPI-2's do), which
//! no other rank of a core can afford, and know nothing of the failures
//! this host's control block records. So they run in slices ([`Native::
//! sliced`]), with the members' health checked between slices.

use super::Native;
use super::lent::Lent;
use super::transport::{Combine, Contribution, Key};
use super::wait::poll_with_backoff;
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, Timeout};
use std::time::{Duration, Instant};

impl Native {
    /// A twin for our new group `id`, if the job spans hosts.
    pub(crate) fn host_group_create(&self, id: u8) -> Result<()> {
        match self.across_hosts() {
            Some(t) => t.group_create(id),
            None => Ok(()),
        }
    }

    /// Our group `id` was deleted.
    pub(crate) fn host_group_delete(&self, id: u8) {
        if let Some(t) = self.across_hosts() {
            t.group_delete(id);
        }
    }

    /// Prepare the twin of `id` for a commit with `members` (which span
    /// hosts, [`Native::spans_hosts`]).
    pub(crate) fn host_group_prepare(&self, id: u8, members: &[Rank]) -> Result<()> {
        self.hosts()?.group_prepare(id, members)
    }

    /// Commit the twin of `id` with `members` until `deadline`.
    pub(crate) fn host_group_commit(
        &self,
        id: u8,
        members: &[Rank],
        deadline: Deadline,
    ) -> Result<()> {
        let t = self.hosts()?;
        let patience = self.patience();
        self.sliced(members, deadline, false, |s| {
            t.group_commit(id, s, &patience)
        })
    }

    /// Barrier over the twin of `id` (members `members`) until `deadline`.
    pub(crate) fn host_barrier(&self, id: u8, members: &[Rank], deadline: Deadline) -> Result<()> {
        let t = self.hosts()?;
        let patience = self.patience();
        self.sliced(members, deadline, true, |s| t.barrier(id, s, &patience))
    }

    /// Allreduce in member order over the twin of `id` (members `members`)
    /// until `deadline`: the same [`Error::InvalidArgument`] on every
    /// member where their contributions' shapes differ
    /// ([`Contribution::shape`]).
    pub(crate) fn host_allreduce(
        &self,
        id: u8,
        members: &[Rank],
        mine: Contribution<'_>,
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        deadline: Deadline,
    ) -> Result<()> {
        let t = self.hosts()?;
        let patience = self.patience();
        self.sliced(members, deadline, true, |s| {
            t.allreduce_ordered(id, mine, recv, combine, s, &patience)
        })
    }

    /// Whether small messages with keys cross hosts
    /// ([`Transport::keyed_send`](super::transport::Transport::keyed_send)).
    pub(crate) fn host_keyed(&self) -> bool {
        self.across_hosts().is_some_and(|t| t.keyed_messages())
    }

    /// Send `data` to `to` (on another host) as the message of `key`, as
    /// much as the transport takes now: `true` once all of it went.
    pub(crate) fn host_keyed_send(&self, to: Rank, key: Key, data: &Lent) -> Result<bool> {
        self.hosts()?.keyed_send(to, key, data)
    }

    /// Take `from`'s message of `key` into `into` if it has arrived
    /// (older ones are dropped).
    pub(crate) fn host_keyed_take(&self, from: Rank, key: Key, into: &Lent) -> Result<bool> {
        self.hosts()?.keyed_take(from, key, into)
    }

    /// Bytes of `from`'s message of `key` landed so far, from its start
    /// ([`Transport::keyed_landed`](super::transport::Transport::keyed_landed)).
    pub(crate) fn host_keyed_landed(&self, from: Rank, key: Key) -> usize {
        self.across_hosts().map_or(0, |t| t.keyed_landed(from, key))
    }

    /// Object `object` is gone: its keyed messages being taken are given
    /// up ([`Transport::keyed_forget`](super::transport::Transport::keyed_forget)).
    pub(crate) fn host_keyed_forget(&self, object: u64) {
        if let Some(t) = self.across_hosts() {
            t.keyed_forget(object);
        }
    }

    /// Object `object` with keyed messages was made by every rank
    /// ([`Transport::keyed_made`](super::transport::Transport::keyed_made)).
    pub(crate) fn host_keyed_made(&self, object: u64) {
        if let Some(t) = self.across_hosts() {
            t.keyed_made(object);
        }
    }

    fn hosts(&self) -> Result<&dyn super::transport::Transport> {
        self.across_hosts()
            .ok_or_else(|| Error::Environment("a group spans hosts in a job of one host".into()))
    }

    /// Run `call` (a transport collective that takes a timeout and may be
    /// called again after one) in slices until `deadline`, checking
    /// `members` between slices. With `poll`: a first slice of 1 ms, then
    /// single tests, with a yield between them while this rank's core is
    /// its own, with naps (5 us growing to 0.5 ms) while more ranks are
    /// awake than there are cores; else slices of 100 ms. (A test, not a
    /// slice: GPI-2's barrier spins inside for as long as it is given,
    /// and its device thread shares the rank's core.)
    ///
    /// A rank waiting here gives the transport the progress that
    /// passive-target operations to this process may need (MPI's
    /// one-sided operations to a dynamic window, served as active
    /// messages: Intel MPI's `shm` fabric, MPICH over UCX). Naps of up to
    /// 0.5 ms in every wait made each flush to a rank waiting in a
    /// barrier last as long: with Intel MPI, 2 emulated hosts of a rank on
    /// the 2-core AMD EPYC VM, an uncontended `lock + put + unlock` took
    /// about 290 us, a `put + flush` 40 us (docs/guide/mpi.md, "Passive
    /// target while the target waits").
    fn sliced(
        &self,
        members: &[Rank],
        deadline: Deadline,
        poll: bool,
        mut call: impl FnMut(Timeout) -> Result<()>,
    ) -> Result<()> {
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
            if let Err(e @ Error::RankFailed { .. }) = self.member_faults(members) {
                // It may have done its part before it died (its last
                // messages still on their way): a short grace.
                let grace = Deadline::At(Instant::now() + Duration::from_millis(200));
                return match poll_with_backoff(grace, || match call(Timeout::Test) {
                    Err(Error::Timeout) => Ok(None),
                    done => done.map(Some),
                }) {
                    Err(Error::Timeout) => Err(e),
                    done => done,
                };
            }
            let napping = poll && self.patience().oversubscribed();
            match deadline.remaining() {
                Some(l) if l.is_zero() => return Err(Error::Timeout),
                Some(l) if napping => std::thread::sleep(nap.min(l)),
                None if napping => std::thread::sleep(nap),
                _ if poll => std::thread::yield_now(),
                _ => {}
            }
            if poll {
                attempt = Duration::ZERO;
            }
            if napping {
                nap = (nap * 2).min(Duration::from_micros(500));
            }
        }
    }
}
