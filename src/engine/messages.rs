//! Passive messages: into the receiver's inbox directly (a rank of this
//! host), or through the transport (a rank of another host, whose relay
//! pulls the message into its inbox).

use super::Native;
use super::segment::Span;
use super::transport::PASSIVE_NAP;
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank};

impl Native {
    /// The largest message `rank` takes: its inbox's slot size on this
    /// host; unknown (`usize::MAX`) on another host, whose relay refuses
    /// what does not fit.
    pub(crate) fn passive_capacity(&self, rank: Rank) -> Result<usize> {
        if self.same_host(rank) {
            Ok(self.peer_inbox(rank)?.max_message())
        } else {
            Ok(usize::MAX)
        }
    }

    /// Send the message `msg` to `rank`; returns once it is in `rank`'s
    /// inbox, waiting for room until `deadline`.
    pub(crate) fn passive_send(&self, rank: Rank, msg: Span<'_>, deadline: Deadline) -> Result<()> {
        let alive = |r| self.check_alive(r);
        match self.across_hosts().filter(|_| !self.same_host(rank)) {
            Some(t) => t.passive_send(rank, msg, deadline, &alive, &self.patience()),
            None => self
                .peer_inbox(rank)?
                .send(self.rank, msg, &self.patience(), deadline, || alive(rank)),
        }
    }

    /// Take the oldest message of this rank's inbox into `into`, waiting
    /// until `deadline`; while it waits, other hosts' messages are pulled
    /// in through the transport. Returns the sender and the length.
    pub(crate) fn passive_receive(
        &self,
        into: Span<'_>,
        deadline: Deadline,
    ) -> Result<(Rank, usize)> {
        let inbox = self.inbox();
        let faults = || self.faults();
        let Some(t) = self.across_hosts() else {
            return inbox.receive(into, &self.patience(), deadline, faults);
        };
        self.patience().poll(deadline, PASSIVE_NAP, || {
            let into = Span { ..into };
            match inbox.receive(into, &self.patience(), Deadline::Now, faults) {
                Err(Error::Timeout) => {
                    t.passive_pump();
                    Ok(None)
                }
                done => done.map(Some),
            }
        })
    }
}
