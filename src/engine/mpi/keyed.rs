//! Keyed messages between hosts ([`Transport::keyed_send`]): small
//! messages on the collective communicator, each headed by its key (a
//! collective object's number and its call's), for exchanges whose calls
//! may be given up. A receiver asks for one sender's message of one key
//! and keeps receives posted for it until it comes: over TCP a message
//! that finds its receive posted arrived 2-3 us sooner than one probed for
//! (`MPI_Improbe`; Intel MPI 2021.18, 2 hosts of one rank on the 2-core
//! AMD EPYC VM, 2026-11-30).
//!
//! The tag carries the object's number (13 bits: the kind-3 tags of the
//! group twins' layout, `groups.rs`, which they never use), so a receive
//! posted for one object never takes what a rank sent for an object
//! given up since (its messages wait unmatched, and are dropped when the
//! rank leaves). Within an object no message goes stale: a call ends only
//! once every message of it was taken, and MPI keeps each sender's
//! messages of one tag in order. The key in each message's head catches
//! what the tag cannot tell apart (an object 8192 numbers back): older
//! keys are dropped, newer ones kept for later.
//!
//! Data of more than [`PIECE`] bytes goes as pieces of that size, one
//! message each (in order, as MPI keeps them): over TCP one 256 KiB
//! message took 430-460 us where 192 KiB took 150 and 64 KiB 55 (Intel MPI
//! 2021.18's tcp provider, 2 hosts of one rank, AMD EPYC VM, 2026-11-30).
//! The receiver keeps receives posted for up to [`DEPTH`] pieces ahead,
//! each the size of the piece it expects, and never more than the pieces
//! still to come (so none takes a message of a later key). The sender
//! keeps at most [`FLIGHT`] pieces to one receiver with MPI at a time.
//! Message buffers are kept for the next messages.
//!
//! [`Transport::keyed_send`]: crate::engine::transport::Transport::keyed_send

use super::{Mpi, ffi};
use crate::engine::transport::Key;
use crate::engine::wait::lock;
use crate::error::{Error, Result};
use crate::types::Rank;
use std::collections::{BTreeMap, VecDeque};

/// The key's bytes ahead of the data.
const HEADER: usize = 16;
/// The most data bytes of one message.
const PIECE: usize = 128 << 10;
/// The most receives posted ahead for one sender's pieces (1 MiB).
const DEPTH: usize = 8;
/// The most pieces to one receiver that MPI holds at a time (512 KiB):
/// over TCP a 1 MiB message sent as 8 pieces at once took 1.5-1.6x the
/// time of pieces 4 or 2 at a time (Intel MPI 2021.18, 2 hosts of one
/// rank, AMD EPYC VM, 2026-11-30: MPI's `Isend` writes into the socket
/// until it is full, while the receiver, sending too, does not read).
const FLIGHT: usize = 4;
/// The most buffers kept for later messages ([`Keyed::spare`]).
const SPARE: usize = 32;

/// The tag of object `object`'s messages: `(object mod 8192) << 2 | 3`,
/// below 32768 (the smallest `MPI_TAG_UB` MPI allows).
fn tag(object: u64) -> i32 {
    ((object % 8192) as i32) << 2 | 3
}

/// This rank's keyed messages: sends MPI still holds and, per receiver,
/// how far the message being sent got; per sender the message being
/// taken (its key, the bytes taken so far, and the receives posted for
/// its next pieces); pieces taken ahead of their key; and buffers of
/// messages MPI is done with.
#[derive(Default)]
pub(super) struct Keyed {
    /// Sends MPI may still hold, by receiver.
    sends: Vec<(usize, ffi::Request)>,
    /// Per receiver, the message being sent: its key and the pieces
    /// handed to MPI so far.
    sending: BTreeMap<usize, (Key, usize)>,
    posted: BTreeMap<usize, Taking>,
    ahead: BTreeMap<usize, VecDeque<(Key, Vec<u8>)>>,
    /// Buffers for the next messages: a fresh one of a piece's size
    /// (above glibc's 128 KiB mmap threshold) came as new pages from the
    /// kernel on every call, and their page faults and zeroing took more
    /// time than the message (perf, 256 KiB calls over TCP, 2026-11-30).
    spare: Vec<Vec<u8>>,
}

impl Keyed {
    /// An empty buffer with room for `len` bytes.
    fn buffer(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.reserve(len);
        b
    }

    /// Keep `b` for a later message.
    fn keep(&mut self, b: Vec<u8>) {
        if self.spare.len() < SPARE {
            self.spare.push(b);
        }
    }

    /// Drop the sends MPI is done with, keeping their buffers.
    fn reap(&mut self) {
        let mut i = 0;
        while i < self.sends.len() {
            if self.sends[i].1.test().unwrap_or(true) {
                if let Some(b) = self.sends.swap_remove(i).1.into_buf() {
                    self.keep(b);
                }
            } else {
                i += 1;
            }
        }
    }
}

/// A message being taken from one sender.
pub(super) struct Taking {
    key: Key,
    /// Data bytes taken so far.
    at: usize,
    /// Receives posted for its next pieces, in order, each for the piece
    /// it expects: never more than the pieces still to come, so that none
    /// takes a message of a later key.
    recvs: VecDeque<ffi::Request>,
}

/// The pieces of a message of `len` bytes still to come once `at` bytes
/// were taken (an empty message is one empty piece).
fn pieces_left(len: usize, at: usize) -> usize {
    if len == 0 {
        1
    } else {
        (len - at).div_ceil(PIECE)
    }
}

impl Mpi {
    pub(super) fn keyed_send(&self, rank: Rank, key: Key, data: &[u8]) -> Result<bool> {
        let to = rank as usize;
        let mut k = lock(&self.keyed);
        k.reap();
        let pieces = data.len().div_ceil(PIECE).max(1);
        let mut handed = match k.sending.get(&to) {
            Some(&(k0, n)) if k0 == key => n,
            _ => 0,
        };
        let in_flight = k.sends.iter().filter(|(r, _)| *r == to).count();
        let room = FLIGHT.saturating_sub(in_flight);
        for _ in 0..room.min(pieces.saturating_sub(handed)) {
            let at = handed * PIECE;
            let piece = &data[at..(at + PIECE).min(data.len())];
            let mut msg = k.buffer(HEADER + piece.len());
            msg.extend_from_slice(&key.0.to_le_bytes());
            msg.extend_from_slice(&key.1.to_le_bytes());
            msg.extend_from_slice(piece);
            let r = ffi::send(self.coll, msg, to, tag(key.0), false)?;
            k.sends.push((to, r));
            handed += 1;
            k.sending.insert(to, (key, handed));
        }
        Ok(handed >= pieces)
    }

    pub(super) fn keyed_take(&self, rank: Rank, key: Key, into: &mut [u8]) -> Result<bool> {
        let from = rank as usize;
        let mut k = lock(&self.keyed);
        // A message of an older key (a call given up) goes, with its
        // receives.
        if k.posted.get(&from).is_some_and(|t| t.key != key) {
            for r in k.posted.remove(&from).map(|t| t.recvs).unwrap_or_default() {
                r.cancel();
            }
        }
        let mut at = k.posted.get(&from).map_or(0, |t| t.at);
        let mut whole = false;
        // Pieces taken ahead of their key.
        if let Some(q) = k.ahead.get_mut(&from) {
            while q.front().is_some_and(|(k0, _)| *k0 < key) {
                q.pop_front();
            }
            while q.front().is_some_and(|(k0, _)| *k0 == key) {
                let (_, piece) = q.pop_front().expect("looked at");
                at = place(rank, &piece, into, at)?;
                whole = at == into.len();
            }
        }
        loop {
            if whole {
                k.posted.remove(&from);
                return Ok(true);
            }
            let t = k.posted.entry(from).or_insert(Taking {
                key,
                at,
                recvs: VecDeque::new(),
            });
            t.at = at;
            // Receives posted ahead for the next pieces: a piece that
            // finds none posted is taken by MPI as unexpected (a copy
            // more, and over TCP pieces would wait for each other).
            let more = pieces_left(into.len(), at)
                .min(DEPTH)
                .saturating_sub(t.recvs.len());
            for _ in 0..more {
                let queued = k.posted.get(&from).map_or(0, |t| t.recvs.len());
                let start = (at + queued * PIECE).min(into.len());
                let len = HEADER + (into.len() - start).min(PIECE);
                let mut buf = k.buffer(len);
                buf.resize(len, 0);
                let r = ffi::recv_into(self.coll, buf, from, tag(key.0))?;
                k.posted
                    .get_mut(&from)
                    .expect("inserted")
                    .recvs
                    .push_back(r);
            }
            let t = k.posted.get_mut(&from).expect("inserted");
            let r = t.recvs.front_mut().expect("posted");
            let Some(msg) = r.test_received()? else {
                return Ok(false);
            };
            if msg.len() < HEADER {
                return Err(short(rank, 0, into.len()));
            }
            let word = |i: usize| u64::from_le_bytes(msg[i..i + 8].try_into().expect("8 bytes"));
            let k0 = (word(0), word(8));
            let piece = &msg[HEADER..];
            let later = match k0.cmp(&key) {
                std::cmp::Ordering::Less => None,
                std::cmp::Ordering::Equal => {
                    at = place(rank, piece, into, at)?;
                    whole = at == into.len();
                    None
                }
                std::cmp::Ordering::Greater => Some(piece.to_vec()),
            };
            if let Some(b) = t.recvs.pop_front().and_then(ffi::Request::into_buf) {
                k.keep(b);
            }
            if let Some(piece) = later {
                k.ahead.entry(from).or_default().push_back((k0, piece));
                return Ok(false);
            }
        }
    }

    /// Leaving (every rank met at the last barrier): cancel the receives
    /// still posted, take the messages nobody asked for (of calls given
    /// up: their senders' MPI may wait for them), and drop the sends MPI
    /// is done with.
    pub(super) fn keyed_leave(&self) {
        let mut k = lock(&self.keyed);
        for (_, t) in std::mem::take(&mut k.posted) {
            for r in t.recvs {
                r.cancel();
            }
        }
        while let Some((_, len, m)) = ffi::improbe(self.coll, None, ffi::any_tag()) {
            let _ = ffi::mrecv(m, &mut vec![0u8; len]);
        }
        k.ahead.clear();
        k.sending.clear();
        k.reap();
    }
}

/// Copy a piece of the message asked for into `into` at `at`; where the
/// next piece goes. A message longer or shorter than `into` is an error
/// (a short one shows as a piece shorter than [`PIECE`] that does not
/// end `into`).
fn place(rank: Rank, piece: &[u8], into: &mut [u8], at: usize) -> Result<usize> {
    let end = at + piece.len();
    if end > into.len() || (piece.len() < PIECE && end < into.len()) {
        return Err(short(rank, end, into.len()));
    }
    into[at..end].copy_from_slice(piece);
    Ok(end)
}

fn short(rank: Rank, got: usize, want: usize) -> Error {
    Error::InvalidArgument(format!(
        "rank {rank} sent {got} bytes for this call, this rank expects {want}: \
         every rank must call with the same length"
    ))
}
