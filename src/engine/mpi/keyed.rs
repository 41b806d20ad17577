//! Keyed messages between hosts ([`Transport::keyed_send`]): small
//! messages on the collective communicator, each headed by its key (a
//! collective object's number and its call's), for exchanges whose calls
//! may be given up. A receiver asks for one sender's message of one key
//! and keeps a receive posted for it until it comes: over TCP a message
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
//!
//! [`Transport::keyed_send`]: crate::engine::transport::Transport::keyed_send

use super::intake::reap;
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

/// The tag of object `object`'s messages: `(object mod 8192) << 2 | 3`,
/// below 32768 (the smallest `MPI_TAG_UB` MPI allows).
fn tag(object: u64) -> i32 {
    ((object % 8192) as i32) << 2 | 3
}

/// This rank's keyed messages: sends MPI still holds, per sender the
/// message being taken (its key, the bytes taken so far, and the receive
/// posted for its next piece), and pieces taken ahead of their key.
#[derive(Default)]
pub(super) struct Keyed {
    sends: Vec<ffi::Request>,
    posted: BTreeMap<usize, Taking>,
    ahead: BTreeMap<usize, VecDeque<(Key, Vec<u8>)>>,
}

/// A message being taken from one sender.
pub(super) struct Taking {
    key: Key,
    /// Data bytes taken so far.
    at: usize,
    recv: Option<ffi::Request>,
}

impl Mpi {
    pub(super) fn keyed_send(&self, rank: Rank, key: Key, data: &[u8]) -> Result<()> {
        let mut k = lock(&self.keyed);
        reap(&mut k.sends);
        let mut pieces = data.chunks(PIECE).peekable();
        let empty: &[u8] = &[];
        if pieces.peek().is_none() {
            return self.send_piece(&mut k, rank, key, empty);
        }
        for piece in pieces {
            self.send_piece(&mut k, rank, key, piece)?;
        }
        Ok(())
    }

    fn send_piece(&self, k: &mut Keyed, rank: Rank, key: Key, piece: &[u8]) -> Result<()> {
        let mut msg = Vec::with_capacity(HEADER + piece.len());
        msg.extend_from_slice(&key.0.to_le_bytes());
        msg.extend_from_slice(&key.1.to_le_bytes());
        msg.extend_from_slice(piece);
        let r = ffi::send(self.coll, msg, rank as usize, tag(key.0), false)?;
        k.sends.push(r);
        Ok(())
    }

    pub(super) fn keyed_take(&self, rank: Rank, key: Key, into: &mut [u8]) -> Result<bool> {
        let from = rank as usize;
        let mut k = lock(&self.keyed);
        // A message of an older key (a call given up) goes, with its
        // receive.
        if k.posted.get(&from).is_some_and(|t| t.key != key) {
            if let Some(r) = k.posted.remove(&from).and_then(|t| t.recv) {
                r.cancel();
            }
        }
        let mut at = k.posted.get(&from).map_or(0, |t| t.at);
        // Pieces taken ahead of their key.
        if let Some(q) = k.ahead.get_mut(&from) {
            while q.front().is_some_and(|(k0, _)| *k0 < key) {
                q.pop_front();
            }
            while q.front().is_some_and(|(k0, _)| *k0 == key) {
                let (_, piece) = q.pop_front().expect("looked at");
                at = place(rank, &piece, into, at)?;
            }
        }
        loop {
            if at == into.len() && at > 0 {
                k.posted.remove(&from);
                return Ok(true);
            }
            let t = k.posted.entry(from).or_insert(Taking {
                key,
                at,
                recv: None,
            });
            t.at = at;
            if t.recv.is_none() {
                let len = (into.len() - at).min(PIECE);
                t.recv = Some(ffi::recv(self.coll, HEADER + len, from, tag(key.0))?);
            }
            let r = t.recv.as_mut().expect("posted");
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
                    None
                }
                std::cmp::Ordering::Greater => Some(piece.to_vec()),
            };
            t.recv = None;
            if let Some(piece) = later {
                k.ahead.entry(from).or_default().push_back((k0, piece));
                return Ok(false);
            }
            if k0 == key && into.is_empty() {
                k.posted.remove(&from);
                return Ok(true); // the one empty piece of an empty message
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
            if let Some(r) = t.recv {
                r.cancel();
            }
        }
        while let Some((_, len, m)) = ffi::improbe(self.coll, None, ffi::any_tag()) {
            let _ = ffi::mrecv(m, &mut vec![0u8; len]);
        }
        k.ahead.clear();
        reap(&mut k.sends);
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
