//! Passive messages and departures between hosts, as MPI messages on the
//! engine's own communicator.
//!
//! A sender sends `[sequence number, message]` (`MPI_Isend`) and waits for
//! the receiver's acknowledgement carrying the same number. A send that
//! timed out leaves its message unanswered: the next send of the process
//! waits for that answer first, and if it repeats the send that timed out
//! (same arguments, [`SentMessage`]) returns with it instead of sending
//! the message again. The receiver's relay
//! (or the receiver itself while it waits for a message) takes a message
//! only into a free inbox slot: with the inbox full it keeps one message
//! aside until a slot frees, and leaves the others in MPI. It acknowledges
//! once the message is in the inbox ([`DELIVERED`](super::intake::DELIVERED)) or, for one larger than
//! the inbox's slots, at once ([`REFUSED`]). So `passive_send` returns once
//! the message is in the inbox, as on one host.

use super::intake::{DEPART_WAIT, HEADER, REFUSED, TAG_ACK, TAG_DEPART, TAG_MESSAGE, reap};
use super::{Mpi, ffi};
use crate::engine::segment::Span;
use crate::engine::transport::{PASSIVE_NAP, SentMessage, delivered};
use crate::engine::wait::{Patience, lock, lock_until};
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank};

impl Mpi {
    /// Send `msg` to the inbox of `rank`, on another host, until
    /// `deadline`; `alive` checks the receiver.
    pub(super) fn passive_send(
        &self,
        rank: Rank,
        msg: Span<'_>,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
        patience: &Patience<'_>,
    ) -> Result<()> {
        let this = SentMessage::new(rank, &msg);
        let mut outbox = lock_until(&self.outbox, deadline)?;
        reap(&mut outbox.sends);
        if let Some((before, seq)) = outbox.unanswered {
            match self.await_answer(before.rank, seq, deadline, alive, patience) {
                Ok(answer) => {
                    outbox.unanswered = None;
                    if before == this {
                        return delivered(answer == REFUSED, msg.len, rank);
                    }
                    outbox.kept.keep(before, answer, &this);
                }
                Err(e @ (Error::RankFailed { .. } | Error::RankTerminated { .. })) => {
                    outbox.unanswered = None;
                    if before == this {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(answer) = outbox.kept.take_for(&this) {
            return delivered(answer == REFUSED, msg.len, rank);
        }
        outbox.seq += 1;
        let seq = outbox.seq;
        let mut buf = Vec::with_capacity(HEADER + msg.len);
        buf.extend_from_slice(&seq.to_ne_bytes());
        // SAFETY: `msg` is a checked span of a segment its borrow keeps
        // mapped; no Rust reference covers it.
        buf.extend_from_slice(unsafe { std::slice::from_raw_parts(msg.ptr(), msg.len) });
        let r = ffi::send(self.shared.comm, buf, rank as usize, TAG_MESSAGE, false)?;
        outbox.sends.push(r);
        outbox.unanswered = Some((this, seq));
        let answer = self.await_answer(rank, seq, deadline, alive, patience)?;
        outbox.unanswered = None;
        delivered(answer == REFUSED, msg.len, rank)
    }

    /// Wait for `rank`'s answer to this process's message `seq` (older
    /// answers, of messages whose sends gave up on them, are dropped).
    fn await_answer(
        &self,
        rank: Rank,
        seq: u64,
        deadline: Deadline,
        alive: &dyn Fn(Rank) -> Result<()>,
        patience: &Patience<'_>,
    ) -> Result<u8> {
        patience.poll(deadline, PASSIVE_NAP, || {
            alive(rank)?;
            ffi::progress(self.shared.comm);
            while let Some((_, len, m)) =
                ffi::improbe(self.shared.comm, Some(rank as usize), TAG_ACK)
            {
                let mut a = vec![0u8; len.max(HEADER + 1)];
                ffi::mrecv(m, &mut a)?;
                if a[..HEADER] == seq.to_ne_bytes() {
                    return Ok(Some(a[HEADER]));
                }
            }
            Ok(None)
        })
    }

    /// Take a passive message from another host now, if the relay is not
    /// at it; whether one was taken.
    pub(super) fn passive_pump(&self) -> bool {
        let Ok(mut intake) = self.shared.intake.try_lock() else {
            return false;
        };
        let block = lock(&self.shared.block);
        intake
            .as_mut()
            .is_some_and(|i| i.step(self.shared.comm, block.as_ref()))
    }

    /// Tell every rank of the other hosts that this one terminated, and
    /// wait (up to [`DEPART_WAIT`]) until they took the news: synchronous
    /// sends, which their relays receive and record before this rank's
    /// segments go (so their operations on it fail with `RankTerminated`,
    /// not with a segment gone). A rank that does not take it in time (it
    /// failed) is left to MPI.
    pub(super) fn announce_departure(&self) {
        let mut sent: Vec<ffi::Request> = (0..self.nranks)
            .filter(|r| !self.host.contains(r))
            .filter_map(|r| ffi::send(self.shared.comm, Vec::new(), r, TAG_DEPART, true).ok())
            .collect();
        let until = std::time::Instant::now() + DEPART_WAIT;
        while std::time::Instant::now() < until {
            sent.retain_mut(|r| !r.test().unwrap_or(true));
            if sent.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        // Those not taken in time are left to MPI as they drop.
    }
}
