//! The receiving side of passive messages between hosts (run by the relay
//! thread, or by the rank while it waits for a message), departures, and
//! the sends this transport keeps alive until MPI is done with them. See
//! `passive.rs` for the protocol.

use super::ffi;
use crate::engine::inbox::Inbox;
use crate::engine::job::JobBlock;
use crate::engine::transport::{KeptAnswers, SentMessage};
use crate::types::Rank;

pub(super) const TAG_MESSAGE: i32 = 1;
pub(super) const TAG_ACK: i32 = 2;
pub(super) const TAG_DEPART: i32 = 3;
pub(super) const DELIVERED: u8 = 1;
pub(super) const REFUSED: u8 = 2;
pub(super) const HEADER: usize = 8;
/// How long a terminating rank waits for the other hosts to take the news.
pub(super) const DEPART_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Drop the sends that completed.
pub(super) fn reap(sends: &mut Vec<ffi::Request>) {
    sends.retain_mut(|r| !r.test().unwrap_or(true));
}

/// This process's sending side.
#[derive(Default)]
pub(super) struct Outbox {
    pub(super) seq: u64,
    pub(super) sends: Vec<ffi::Request>,
    /// The last message sent and its sequence number, until it is
    /// answered (past its send, if that timed out).
    pub(super) unanswered: Option<(SentMessage, u64)>,
    /// Answers taken for other threads' messages, for their repeats.
    pub(super) kept: KeptAnswers<u8>,
}

/// This rank's receiving side (run by the relay, or by the rank).
pub(super) struct Intake {
    inbox: Inbox,
    /// A message taken from MPI that waits for a free slot.
    aside: Option<(usize, u64, Vec<u8>)>,
    acks: Vec<ffi::Request>,
}

impl Intake {
    pub(super) fn new(inbox: Inbox) -> Intake {
        Intake {
            inbox,
            aside: None,
            acks: Vec::new(),
        }
    }

    /// Take departures and one passive message; whether anything happened.
    pub(super) fn step(&mut self, comm: ffi::Comm, block: Option<&JobBlock>) -> bool {
        let mut busy = false;
        reap(&mut self.acks);
        while let Some((from, _, m)) = ffi::improbe(comm, None, TAG_DEPART) {
            let _ = ffi::mrecv(m, &mut []);
            if let Some(b) = block {
                b.mark_departed(from);
            }
            busy = true;
        }
        if self.aside.is_none() {
            if let Some((from, len, m)) = ffi::improbe(comm, None, TAG_MESSAGE) {
                let mut buf = vec![0u8; len];
                if ffi::mrecv(m, &mut buf).is_ok() && len >= HEADER {
                    let seq = u64::from_ne_bytes(buf[..HEADER].try_into().expect("8 bytes"));
                    if len - HEADER > self.inbox.max_message() {
                        self.ack(comm, from, seq, REFUSED);
                    } else {
                        self.aside = Some((from, seq, buf));
                    }
                }
                busy = true;
            }
        }
        if let Some((from, seq, buf)) = self.aside.take() {
            if self.inbox.offer(from as Rank, &buf[HEADER..]) {
                self.ack(comm, from, seq, DELIVERED);
                busy = true;
            } else {
                self.aside = Some((from, seq, buf));
            }
        }
        busy
    }

    fn ack(&mut self, comm: ffi::Comm, to: usize, seq: u64, answer: u8) {
        let mut buf = seq.to_ne_bytes().to_vec();
        buf.push(answer);
        if let Ok(r) = ffi::send(comm, buf, to, TAG_ACK, false) {
            self.acks.push(r);
        }
    }
}
