//! Keyed messages between hosts ([`Transport::keyed_send`]): messages on
//! the collective communicator, each headed by its key (a collective
//! object's number and its call's), for exchanges whose calls may be
//! given up. A receiver asks for one sender's message of one key and
//! keeps receives posted for it until it comes: over TCP a message that
//! finds its receive posted arrived 2-3 us sooner than one probed for
//! (`MPI_Improbe`; Intel MPI 2021.18, 2 hosts of one rank on the 2-core
//! AMD EPYC VM, 2026-11-30).
//!
//! # Heads and data
//! Every object has two tags: one for heads, one for data. A head is the
//! key, a place in the message (0) and the message's length. A message
//! of up to [`INLINE`] bytes is one head with the data behind it (copied
//! into and out of buffers of ours: one message, the least latency). A
//! longer one is one head, then its pieces of [`PIECE`] bytes alone on the
//! data tag, in order, each sent from where it lies and received straight
//! into where it belongs (memory lent by the caller, [`Lent`]), so a large
//! message costs no copy of ours. Exchanging 256 KiB to 4 MiB between 2
//! hosts over TCP, pieces of 512 KiB sent from and received into their
//! place took 0.6-0.75x the time of the same pieces copied through
//! buffers behind their heads, and one message of a head and the piece
//! described by an `MPI_Type_create_hindexed` type took 4-5x at 1 and 4
//! MiB (`scripts/mpi/piece_exchange.c`, rows in
//! `docs/piece-exchange-tcp-2026-11-30.csv`; Intel MPI 2021.18's tcp
//! provider, 2-core AMD EPYC VM, 2026-11-30).
//!
//! # Receives posted before the pieces come
//! A sender hands a message's pieces one after another with no other data
//! on the tag between them: a message it began is handed whole before any
//! other message to the same receiver on the same tags (of another call,
//! or of an object 4096 numbers away), and when its object is forgotten.
//! So a head tells its receiver what the next data messages on the tag
//! are, and it posts their receives at once: every piece of the message
//! it is taking, straight into the lent memory (MPI keeps each sender's
//! messages of one tag in order, so they take the pieces in order; each
//! is the size of its piece), and at most [`DEPTH`] at a time into
//! buffers of ours for any other. A piece that finds its receive posted
//! is not held as an unexpected message: with receives posted only as
//! each piece's own head came (until 2026-12-01), exchanging 4 MiB took
//! 1.5x the time of receives posted before the data (the `headed` and
//! `contig` ways of the exchange, 2 hosts over TCP), and the exchange
//! inside an allreduce of 4 MiB took 0.7x the time once receives were
//! posted ahead. Heads are received into buffers of [`INLINE`] bytes
//! more than a head (no head is longer), posted ahead: one for each
//! message being taken on the tag whose head has not come, at most
//! [`DEPTH`].
//!
//! # Receives posted before the head
//! Where no two objects made share a tag pair (fewer than 4096 objects
//! with keyed messages made in the job: [`Transport::keyed_made`]), a
//! receiver that asks for a long message with nothing owed or posted on
//! its tag from that sender posts every piece's receive at once, before
//! the head comes ([`Keyed::prepost`]): every earlier message of the
//! object was taken whole, and a sender hands a message whole before the
//! next, so the next data on the tag is this message's. The head still
//! comes and must be this message's (any other long head before it is an
//! error, never data in the wrong place unnoticed); a take ends only once
//! it has. Allreduce calls of 128 to 512 KiB between 2 hosts of one rank
//! over TCP took 0.87-0.95x the time (medians of 6-12 alternated rounds:
//! their one message each way no longer waits for its head before its
//! receives are posted); scattered calls of 1 to 4 MiB 0.93-1.04x (Intel
//! MPI 2021.18, AMD EPYC VM, 2026-12-01; docs/guide/mpi.md).
//!
//! # Stale messages
//! The tags carry the object's number (12 bits: the kind-3 tags of the
//! group twins' layout, `groups.rs`, which they never use), so a receive
//! posted for one object never takes what a rank sent for an object
//! given up since (its messages wait unmatched, and are dropped when the
//! rank leaves). Within an object no message goes stale: a call ends only
//! once every message of it was taken (a call given up is tried again
//! with the same key, or its object deleted). The heads catch what the
//! tags cannot tell apart (an object 4096 numbers back): a head of
//! another key is read out of turn, its pieces received into buffers of
//! ours (dropped if an older call of the object asked now, else set aside
//! for when its key is asked for). `GASPI_KEYED_SLOTS=1` makes every
//! object share one tag pair, so a test meets all of this at once
//! (`tests/allreduce.rs`, `objects_sharing_tags_after_calls_given_up`).
//!
//! # Flow
//! The sender keeps at most [`FLIGHT`] pieces to one receiver with MPI at
//! a time, and a long message counts as sent once MPI is done with all of
//! it (so its memory may be written again).
//!
//! [`Transport::keyed_send`]: crate::engine::transport::Transport::keyed_send
//! [`Transport::keyed_made`]: crate::engine::transport::Transport::keyed_made

use super::{Mpi, ffi};
use crate::engine::lent::Lent;
use crate::engine::transport::Key;
use crate::engine::wait::lock;
use crate::error::{Error, Result};
use crate::types::Rank;
use std::collections::{BTreeMap, VecDeque};

/// A head's bytes: the key, the piece's place in the message and the
/// message's length (four little-endian `u64`s).
const HEADER: usize = 32;
/// The longest message that goes as one head with its data behind it.
const INLINE: usize = 64 << 10;
/// The most data bytes of one piece of a longer message: exchanging 1 and
/// 4 MiB over TCP, 512 KiB pieces took 0.55-0.68x the time of 128 KiB
/// pieces (both sent from and received into their place; medians of 6
/// rounds of 40, `scripts/mpi/piece_exchange.c`, Intel MPI 2021.18, AMD
/// EPYC VM, 2026-11-30).
const PIECE: usize = 512 << 10;
/// The most heads posted ahead on one tag of one sender, and the most
/// receives into buffers of ours posted on its data tag.
const DEPTH: usize = 8;
/// The most pieces to one receiver that MPI holds at a time (1 MiB):
/// allreduce calls of 4 MiB between 2 hosts over TCP took 5000-5700 us
/// with 2, 6200-7600 with 4 and 8 (pieces received as their heads came,
/// 2026-11-30), and their exchange 1800-2200 us with 2 against 2900-3200
/// with 8 (receives posted ahead, 2026-12-01).
const FLIGHT: usize = 2;
/// The most buffers kept for later messages, of each kind.
const SPARE: usize = 32;

/// The tag of the heads (`data` false) or the data of the objects whose
/// numbers are `slot` modulo 4096: `((slot mod 4096) << 1 | data) << 2 |
/// 3`, below 32768 (the smallest `MPI_TAG_UB` MPI allows).
fn tag(slot: u64, data: bool) -> i32 {
    (((slot % SLOTS) as i32) << 1 | data as i32) << 2 | 3
}

/// A message's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    key: Key,
    /// The piece's first byte in the message.
    at: usize,
    /// The message's length.
    total: usize,
}

impl Head {
    fn bytes(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        let words = [self.key.0, self.key.1, self.at as u64, self.total as u64];
        for (chunk, w) in b.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    fn parse(b: &[u8]) -> Option<Head> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        Some(Head {
            key: (word(0)?, word(1)?),
            at: usize::try_from(word(2)?).ok()?,
            total: usize::try_from(word(3)?).ok()?,
        })
    }

    /// The piece's length, if the head describes a piece of a long
    /// message.
    fn piece(&self) -> Option<usize> {
        (self.total > INLINE && self.at < self.total && self.at % PIECE == 0)
            .then(|| PIECE.min(self.total - self.at))
    }
}

/// The pieces of a message of `len` bytes (one, with its head, up to
/// [`INLINE`]).
fn pieces(len: usize) -> usize {
    if len <= INLINE {
        1
    } else {
        len.div_ceil(PIECE)
    }
}

/// The tag pairs objects share by default, and at most: 4096 (their
/// numbers modulo 4096).
const SLOTS: u64 = 4096;

/// This rank's keyed messages.
#[derive(Default)]
pub(super) struct Keyed {
    /// The tag pairs the objects share (their numbers modulo this, at
    /// most [`SLOTS`]; 0: [`SLOTS`]).
    slots: u64,
    /// Sends MPI may still hold.
    sends: Vec<Sent>,
    /// Per receiver and object, the message being sent (kept until a
    /// message of a later call replaces it, or the object is forgotten).
    sending: BTreeMap<(usize, u64), Sending>,
    /// Per sender and tag pair ([`Keyed::slot`]), the receives posted.
    streams: BTreeMap<(usize, u64), Stream>,
    /// Per sender and object, the message being taken.
    taking: BTreeMap<(usize, u64), Taking>,
    /// Per sender, pieces that came before their key was asked for.
    aside: BTreeMap<usize, Vec<Piece>>,
    /// Buffers for heads to be received (each a head and [`INLINE`]
    /// bytes long).
    head_spare: Vec<Vec<u8>>,
    /// The largest number of an object made with keyed messages
    /// ([`Mpi::keyed_made`]).
    newest: u64,
    /// Buffers for short messages to be sent: a fresh one above glibc's
    /// 128 KiB mmap threshold came as new pages on every call, and their
    /// page faults took longer than the message (perf, 2026-11-30).
    send_spare: Vec<Vec<u8>>,
}

struct Sent {
    to: usize,
    key: Key,
    /// A piece sent from the lender's memory.
    lent: bool,
    req: ffi::Request,
}

/// The message being sent to one receiver.
struct Sending {
    key: Key,
    data: Lent,
    /// Pieces handed to MPI so far.
    handed: usize,
}

impl Sending {
    /// Begun and not yet handed whole: its receiver expects the rest next
    /// on its tags.
    fn open(&self) -> bool {
        self.handed > 0 && self.handed < pieces(self.data.len())
    }
}

/// The receives posted for one sender's messages of one tag pair, each
/// queue in the order MPI matches them, and the pieces announced whose
/// receives are still to be posted.
#[derive(Default)]
struct Stream {
    heads: VecDeque<ffi::Request>,
    data: VecDeque<Data>,
    owed: VecDeque<Owed>,
    /// The long message whose pieces' receives were posted before its
    /// head came ([`Keyed::prepost`]; one at a time): its head announces
    /// nothing more.
    preposted: Option<Key>,
}

/// The pieces of a long message from `next` on, announced by its head:
/// the next data messages on the stream.
struct Owed {
    head: Head,
    next: usize,
}

impl Owed {
    /// The head of piece `next`.
    fn piece_head(&self) -> Head {
        Head {
            at: self.next * PIECE,
            ..self.head
        }
    }
}

/// A receive of a piece announced by its head, and where it went.
struct Data {
    req: ffi::Request,
    dest: Dest,
}

enum Dest {
    /// Into the lent memory of the message of `key` being taken from
    /// this sender for object `key.0`: `len` bytes.
    Mine { key: Key, len: usize },
    /// Into the request's buffer, to be set aside.
    Aside(Head),
    /// Into the request's buffer, to be dropped (an older call's).
    Drop,
}

/// A message being taken from one sender.
struct Taking {
    key: Key,
    /// Where it lands.
    into: Lent,
    /// Its head came (no head receive is posted for it).
    headed: bool,
    /// Pieces with a receive posted into `into`, or placed there.
    announced: usize,
    /// Pieces that landed.
    landed: usize,
}

/// A piece set aside: its head and its data.
struct Piece {
    head: Head,
    data: Vec<u8>,
}

impl Keyed {
    /// Keyed messages whose objects share `slots` tag pairs (see
    /// [`Keyed::slot`]; the `GASPI_KEYED_SLOTS` testing knob,
    /// [`crate::env::KEYED_SLOTS`]).
    pub(super) fn with_slots(slots: u64) -> Keyed {
        Keyed {
            slots,
            ..Keyed::default()
        }
    }

    /// The tag pairs the objects share.
    fn modulus(&self) -> u64 {
        match self.slots {
            0 => SLOTS,
            n => n.min(SLOTS),
        }
    }

    /// The tag pair (slot) of `object`.
    fn slot(&self, object: u64) -> u64 {
        object % self.modulus()
    }

    /// Drop the sends MPI is done with, keeping their buffers.
    fn reap(&mut self) {
        let mut i = 0;
        while i < self.sends.len() {
            if self.sends[i].req.test().unwrap_or(true) {
                let mut s = self.sends.swap_remove(i);
                if let Some(b) = s.req.take_buf().filter(|b| b.capacity() > HEADER) {
                    if self.send_spare.len() < SPARE {
                        self.send_spare.push(b);
                    }
                }
            } else {
                i += 1;
            }
        }
    }

    /// Pieces of `to`'s message of `key` MPI still holds.
    fn flying(&self, to: usize, key: Key) -> usize {
        self.sends
            .iter()
            .filter(|s| s.lent && s.to == to && s.key == key)
            .count()
    }

    /// Heads still to come for the messages being taken from `from` on
    /// tag slot `slot`.
    fn heads_wanted(&self, from: usize, slot: u64) -> usize {
        self.taking
            .iter()
            .filter(|((f, o), t)| *f == from && self.slot(*o) == slot && !t.headed)
            .count()
    }

    /// Place a piece of the message being taken in `t` (in order): its
    /// head and data.
    fn place(t: &mut Taking, from: usize, head: &Head, data: &[u8]) -> Result<()> {
        let len = t.into.len();
        if t.announced >= pieces(len) {
            return Err(short(from, head.total, len));
        }
        let (at, n) = if len <= INLINE {
            (0, len)
        } else {
            (t.announced * PIECE, PIECE.min(len - t.announced * PIECE))
        };
        if head.total != len || head.at != at || data.len() != n {
            return Err(short(from, head.total, len));
        }
        // SAFETY: this piece's part of the lent memory, with no receive
        // posted into it (its receive went into a buffer of ours); the
        // lender leaves it alone until the message is taken.
        unsafe { t.into.part(at, n).copy_in(data) };
        t.headed = true;
        t.announced += 1;
        t.landed += 1;
        Ok(())
    }

    /// Place the pieces set aside from `from` for the messages being taken
    /// from it, each in turn.
    fn settle(&mut self, from: usize) -> Result<()> {
        let Some(aside) = self.aside.get_mut(&from).filter(|a| !a.is_empty()) else {
            return Ok(());
        };
        for ((_, _), t) in self.taking.range_mut((from, 0)..=(from, u64::MAX)) {
            loop {
                let at = t.announced.saturating_mul(PIECE);
                let Some(i) = aside.iter().position(|p| {
                    p.head.key == t.key && (p.head.at == at || t.into.len() <= INLINE)
                }) else {
                    break;
                };
                let p = aside.swap_remove(i);
                Keyed::place(t, from, &p.head, &p.data)?;
            }
        }
        Ok(())
    }

    /// Post the receives of every piece of `from`'s long message of `key`,
    /// just asked for, straight into its lent memory before its head
    /// comes, where the next data on its tag from `from` is sure to be
    /// that message: no two objects made share a tag pair
    /// ([`Keyed::newest`]), and nothing is owed or posted on the tag (every
    /// earlier message of the object was taken whole, head and pieces; a
    /// sender hands a message whole before the next). Its head, when it
    /// comes, announces nothing more; the head of any other long message
    /// before it is an error (data in the wrong place is never taken
    /// unnoticed).
    fn prepost(&mut self, comm: ffi::Comm, from: usize, key: Key) -> Result<()> {
        let slot = self.slot(key.0);
        if self.newest >= self.modulus() {
            return Ok(());
        }
        let Some(t) = self.taking.get_mut(&(from, key.0)) else {
            return Ok(());
        };
        let len = t.into.len();
        if len <= INLINE || t.headed || t.announced > 0 {
            return Ok(());
        }
        let st = self.streams.entry((from, slot)).or_default();
        if !st.owed.is_empty() || !st.data.is_empty() || st.preposted.is_some() {
            return Ok(());
        }
        st.preposted = Some(key);
        let data_tag = tag(slot, true);
        for i in 0..pieces(len) {
            let (at, n) = (i * PIECE, PIECE.min(len - i * PIECE));
            // SAFETY: this piece's part of the lent memory; the lender
            // leaves it alone until the message is taken or its object
            // forgotten, and the request keeps it mapped (keyed_take's
            // promise). The receive is the size of the piece, and takes
            // it: the next data on this tag from `from` is this message,
            // whole and in order (above).
            let req = unsafe { ffi::recv_lent(comm, &t.into.part(at, n), from, data_tag) }?;
            st.data.push_back(Data {
                req,
                dest: Dest::Mine { key, len: n },
            });
            t.announced += 1;
        }
        Ok(())
    }

    /// `from`'s message being taken for `object`, which is being
    /// forgotten, was preposted and its head has not come: its receives
    /// that took nothing are withdrawn, from the last. If none took
    /// anything, the message may never come (its head is read as any
    /// other's if it does); else it did begin (its head comes), and those
    /// withdrawn are posted again into buffers of ours, to be dropped.
    /// Called before the taking is dropped: the pieces that landed and
    /// were read already show only in its count.
    fn unpost(&mut self, comm: ffi::Comm, from: usize, object: u64) -> Result<()> {
        let Some(t) = self.taking.get(&(from, object)) else {
            return Ok(());
        };
        let (key, landed) = (t.key, t.landed);
        let slot = self.slot(object);
        let Some(st) = self.streams.get_mut(&(from, slot)) else {
            return Ok(());
        };
        if st.preposted != Some(key) {
            return Ok(());
        }
        let mut withdrawn = Vec::new();
        while let Some(d) = st.data.back_mut() {
            let Dest::Mine { key: k, len } = d.dest else {
                break;
            };
            if k != key || d.req.cancel().is_some() {
                break;
            }
            st.data.pop_back();
            withdrawn.push(len);
        }
        let began = landed > 0
            || st
                .data
                .iter()
                .any(|d| matches!(d.dest, Dest::Mine { key: k, .. } if k == key));
        if !began {
            st.preposted = None;
            return Ok(());
        }
        for len in withdrawn.into_iter().rev() {
            st.data.push_back(Data {
                req: ffi::recv(comm, len, from, tag(slot, true))?,
                dest: Dest::Drop,
            });
        }
        Ok(())
    }

    /// Hand piece `i` of `data`, the message of `key` to `to`, to MPI: a
    /// short message with its head, a long one's first piece after its
    /// head, any other piece alone.
    fn hand(&mut self, comm: ffi::Comm, to: usize, key: Key, data: &Lent, i: usize) -> Result<()> {
        let len = data.len();
        let slot = self.slot(key.0);
        let inline = len <= INLINE;
        if i == 0 {
            let mut b = self.send_spare.pop().unwrap_or_default();
            b.clear();
            b.extend_from_slice(
                &Head {
                    key,
                    at: 0,
                    total: len,
                }
                .bytes(),
            );
            if inline {
                // SAFETY: the lender leaves `data` unwritten during this
                // call (keyed_send's promise); it is copied here.
                unsafe { data.append_to(&mut b) };
            }
            let req = ffi::send(comm, b, to, tag(slot, false), false)?;
            self.sends.push(Sent {
                to,
                key,
                lent: false,
                req,
            });
        }
        if !inline {
            let at = i * PIECE;
            let n = PIECE.min(len - at);
            // SAFETY: the lender leaves `data` unwritten until a send of
            // `key` returned true (every piece's send complete), or for good
            // if it gives the message up, and the request keeps the memory
            // mapped (keyed_send's promise).
            let req = unsafe { ffi::send_lent(comm, &data.part(at, n), to, tag(slot, true)) }?;
            self.sends.push(Sent {
                to,
                key,
                lent: true,
                req,
            });
        }
        Ok(())
    }

    /// Hand the rest of every message to `to` on tag slot `slot` (of every
    /// object, `None`, or of `object`) that was begun, but for `key`'s: its
    /// receiver posted receives for all of it, and takes the next data on
    /// the tag as its pieces.
    fn finish_open(
        &mut self,
        comm: ffi::Comm,
        to: Option<usize>,
        slot: u64,
        object: Option<u64>,
        key: Option<Key>,
    ) -> Result<()> {
        let open: Vec<(usize, u64)> = self
            .sending
            .iter()
            .filter(|&(&(t, o), s)| {
                to.is_none_or(|to| to == t)
                    && self.slot(o) == slot
                    && object.is_none_or(|object| object == o)
                    && key.is_none_or(|key| key != s.key)
                    && s.open()
            })
            .map(|(&k, _)| k)
            .collect();
        for at in open {
            let (key, data, handed) = {
                let s = &self.sending[&at];
                (s.key, s.data.clone(), s.handed)
            };
            for i in handed..pieces(data.len()) {
                self.hand(comm, at.0, key, &data, i)?;
                if let Some(s) = self.sending.get_mut(&at) {
                    s.handed = i + 1;
                }
            }
        }
        Ok(())
    }
}

impl Mpi {
    pub(super) fn keyed_send(&self, rank: Rank, key: Key, data: &Lent) -> Result<bool> {
        let to = rank as usize;
        let mut guard = lock(&self.keyed);
        let k = &mut *guard;
        k.reap();
        let len = data.len();
        let at = (to, key.0);
        match k.sending.get(&at) {
            Some(s) if s.key == key && s.data.len() != len => {
                return Err(Error::InvalidArgument(format!(
                    "a call given up with {} bytes is tried again with {len}: \
                     try it again with the same length, or delete the object",
                    s.data.len()
                )));
            }
            Some(s) if s.key == key => {}
            _ => {
                // Messages on a tag go whole, one after another.
                k.finish_open(self.coll, Some(to), k.slot(key.0), None, Some(key))?;
                k.sending.insert(
                    at,
                    Sending {
                        key,
                        data: data.clone(),
                        handed: 0,
                    },
                );
            }
        }
        let all = pieces(len);
        let room = if len <= INLINE {
            1
        } else {
            FLIGHT.saturating_sub(k.flying(to, key))
        };
        let mut handed = k.sending[&at].handed;
        for _ in 0..room.min(all.saturating_sub(handed)) {
            k.hand(self.coll, to, key, data, handed)?;
            handed += 1;
            if let Some(s) = k.sending.get_mut(&at) {
                s.handed = handed;
            }
        }
        Ok(handed >= all && k.flying(to, key) == 0)
    }

    pub(super) fn keyed_take(&self, rank: Rank, key: Key, into: &Lent) -> Result<bool> {
        let from = rank as usize;
        let mut guard = lock(&self.keyed);
        let k = &mut *guard;
        let (object, slot) = (key.0, k.slot(key.0));
        match k.taking.get(&(from, object)) {
            Some(t) if t.key != key => {
                return Err(Error::InvalidArgument(format!(
                    "rank {rank}'s message {} of this object (of a call given up) is \
                     still being taken: try that call again, or delete the object",
                    t.key.1
                )));
            }
            Some(t) if !t.into.same(into) => {
                return Err(Error::InvalidArgument(format!(
                    "a call given up with {} bytes is tried again with {}: \
                     try it again with the same length, or delete the object",
                    t.into.len(),
                    into.len()
                )));
            }
            Some(_) => {}
            None => {
                // What came before it was asked for: older calls' go.
                if let Some(aside) = k.aside.get_mut(&from) {
                    aside.retain(|p| p.head.key.0 != object || p.head.key.1 >= key.1);
                }
                // Its head came already if pieces of it did, or are on
                // their way.
                let st = k.streams.get(&(from, slot));
                let headed = k
                    .aside
                    .get(&from)
                    .is_some_and(|a| a.iter().any(|p| p.head.key == key))
                    || st.is_some_and(|st| {
                        st.owed.iter().any(|o| o.head.key == key)
                            || st
                                .data
                                .iter()
                                .any(|d| matches!(d.dest, Dest::Aside(h) if h.key == key))
                    });
                k.taking.insert(
                    (from, object),
                    Taking {
                        key,
                        into: into.clone(),
                        headed,
                        announced: 0,
                        landed: 0,
                    },
                );
                k.prepost(self.coll, from, key)?;
            }
        }
        self.pump(k, from, slot)?;
        let t = &k.taking[&(from, object)];
        // (Its head too: a preposted message's pieces may land first.)
        if t.landed < pieces(t.into.len()) || !t.headed {
            return Ok(false);
        }
        k.taking.remove(&(from, object));
        Ok(true)
    }

    pub(super) fn keyed_landed(&self, rank: Rank, key: Key) -> usize {
        let k = lock(&self.keyed);
        match k.taking.get(&(rank as usize, key.0)) {
            Some(t) if t.key == key => {
                let len = t.into.len();
                if len <= INLINE {
                    len * t.landed.min(1)
                } else {
                    t.landed.saturating_mul(PIECE).min(len)
                }
            }
            _ => 0,
        }
    }

    /// Read what came from `from` on tag slot `slot`: heads in order (a
    /// short message's data is placed at once, a long one's pieces are
    /// owed), receives posted for the pieces owed, pieces read in order,
    /// pieces set aside placed; heads are posted ahead for the messages
    /// being taken.
    fn pump(&self, k: &mut Keyed, from: usize, slot: u64) -> Result<()> {
        // A message that came before its head's receive was posted
        // completes the receive at once (tested below).
        self.post_heads(k, from, slot)?;
        loop {
            let st = k.streams.entry((from, slot)).or_default();
            let Some(front) = st.heads.front_mut() else {
                break;
            };
            let Some(count) = front.test_count()? else {
                break;
            };
            let mut req = st.heads.pop_front().expect("looked at");
            let buf = req.take_buf().expect("complete");
            let head = Head::parse(&buf[..count.min(HEADER)]).ok_or_else(|| unreadable(from))?;
            if head.total <= INLINE {
                // A short message, its data behind the head.
                let data = &buf[HEADER..count];
                if head.at != 0 || data.len() != head.total {
                    return Err(unreadable(from));
                }
                match k.taking.get_mut(&(from, head.key.0)) {
                    Some(t) if t.key == head.key => Keyed::place(t, from, &head, data)?,
                    Some(t) if t.key > head.key => {}
                    _ => k.aside.entry(from).or_default().push(Piece {
                        head,
                        data: data.to_vec(),
                    }),
                }
            } else {
                // A long message: its pieces are the next data on the tag
                // (their receives are posted already if it was preposted).
                if head.piece().is_none() || head.at != 0 {
                    return Err(unreadable(from));
                }
                let preposted = st.preposted == Some(head.key);
                if !preposted && st.preposted.is_some() {
                    return Err(out_of_turn(from));
                }
                if let Some(t) = k.taking.get_mut(&(from, head.key.0)) {
                    if t.key == head.key {
                        if head.total != t.into.len() {
                            return Err(short(from, head.total, t.into.len()));
                        }
                        t.headed = true;
                    }
                }
                if preposted {
                    st.preposted = None;
                } else {
                    st.owed.push_back(Owed { head, next: 0 });
                }
            }
            if k.head_spare.len() < SPARE {
                k.head_spare.push(buf);
            }
        }
        self.post_data(k, from, slot)?;
        loop {
            let st = k.streams.get_mut(&(from, slot)).expect("made above");
            let Some(front) = st.data.front_mut() else {
                break;
            };
            let Some(count) = front.req.test_count()? else {
                break;
            };
            let Data { mut req, dest } = st.data.pop_front().expect("looked at");
            match dest {
                Dest::Mine { key, len } => {
                    if count != len {
                        return Err(short(from, count, len));
                    }
                    if let Some(t) = k.taking.get_mut(&(from, key.0)).filter(|t| t.key == key) {
                        t.landed += 1;
                    }
                }
                Dest::Aside(head) => {
                    let mut data = req.take_buf().expect("complete");
                    data.truncate(count);
                    k.aside.entry(from).or_default().push(Piece { head, data });
                }
                Dest::Drop => {}
            }
        }
        k.settle(from)?;
        self.post_data(k, from, slot)?;
        // Heads posted ahead: as many as are still to come, at most DEPTH;
        // more (an object forgotten) are cancelled from the last, while
        // they took nothing.
        let want = self.post_heads(k, from, slot)?;
        let st = k.streams.get_mut(&(from, slot)).expect("made above");
        while st.heads.len() > want {
            let mut r = st.heads.pop_back().expect("more than wanted");
            if r.cancel().is_some() {
                // It took a head: read in turn by the next pump.
                st.heads.push_back(r);
                break;
            }
            if let Some(b) = r.take_buf().filter(|_| k.head_spare.len() < SPARE) {
                k.head_spare.push(b);
            }
        }
        Ok(())
    }

    /// Post receives for the pieces owed by `from` on tag slot `slot`, in
    /// order: straight into the lent memory for the message being taken
    /// (every piece at once), into buffers of ours for any other (at most
    /// [`DEPTH`] of them posted at a time).
    fn post_data(&self, k: &mut Keyed, from: usize, slot: u64) -> Result<()> {
        let Keyed {
            streams, taking, ..
        } = k;
        let st = streams.entry((from, slot)).or_default();
        let data_tag = tag(slot, true);
        while let Some(owed) = st.owed.front_mut() {
            let head = owed.piece_head();
            let n = head.piece().ok_or_else(|| unreadable(from))?;
            let data = match taking.get_mut(&(from, head.key.0)) {
                Some(t) if t.key == head.key && head.total != t.into.len() => {
                    return Err(short(from, head.total, t.into.len()));
                }
                Some(t) if t.key == head.key && t.announced.saturating_mul(PIECE) == head.at => {
                    t.announced += 1;
                    // SAFETY: this piece's part of the lent memory; the
                    // lender leaves it alone until the message is taken or
                    // its object forgotten, and the request keeps it mapped
                    // (keyed_take's promise). The receive is the size of
                    // the piece its head announced, and takes it: the
                    // sender hands a message's pieces one after another,
                    // with no other data on the tag between them.
                    let req = unsafe {
                        ffi::recv_lent(self.coll, &t.into.part(head.at, n), from, data_tag)
                    }?;
                    Data {
                        req,
                        dest: Dest::Mine {
                            key: head.key,
                            len: n,
                        },
                    }
                }
                other => {
                    let buffered = st
                        .data
                        .iter()
                        .filter(|d| !matches!(d.dest, Dest::Mine { .. }))
                        .count();
                    if buffered >= DEPTH {
                        break;
                    }
                    // Read into a buffer of ours: an older call's piece is
                    // dropped, any other set aside.
                    Data {
                        req: ffi::recv(self.coll, n, from, data_tag)?,
                        dest: match other {
                            Some(t) if t.key > head.key => Dest::Drop,
                            _ => Dest::Aside(head),
                        },
                    }
                }
            };
            st.data.push_back(data);
            owed.next += 1;
            if owed.next >= pieces(owed.head.total) {
                st.owed.pop_front();
            }
        }
        Ok(())
    }

    /// Post receives for the heads still to come from `from` on tag slot
    /// `slot`, up to [`DEPTH`] ahead; how many are wanted.
    fn post_heads(&self, k: &mut Keyed, from: usize, slot: u64) -> Result<usize> {
        let want = k.heads_wanted(from, slot).min(DEPTH);
        let st = k.streams.entry((from, slot)).or_default();
        while st.heads.len() < want {
            let mut b = k.head_spare.pop().unwrap_or_default();
            b.resize(HEADER + INLINE, 0);
            st.heads
                .push_back(ffi::recv_into(self.coll, b, from, tag(slot, false))?);
        }
        Ok(want)
    }

    /// Object `object` with keyed messages was made by every rank: while
    /// every object's number is below the tag pairs' count, no two share
    /// tags and long messages' receives are posted before their heads
    /// ([`Keyed::prepost`]).
    pub(super) fn keyed_made(&self, object: u64) {
        let mut k = lock(&self.keyed);
        k.newest = k.newest.max(object);
    }

    /// Object `object` is gone: the rest of every message it began is
    /// handed to MPI (its receivers take the next data on its tag as those
    /// pieces), the messages it was taking are given up, and its pieces
    /// set aside dropped. Pieces already announced still land in its
    /// memory (kept mapped by their receives), read by the next pump of
    /// their tag or when the rank leaves; those posted before their head
    /// came that took nothing yet are withdrawn ([`Keyed::unpost`]).
    pub(super) fn keyed_forget(&self, object: u64) {
        let mut guard = lock(&self.keyed);
        let k = &mut *guard;
        let slot = k.slot(object);
        let _ = k.finish_open(self.coll, None, slot, Some(object), None);
        k.sending.retain(|&(_, o), _| o != object);
        let senders: Vec<usize> = k
            .taking
            .keys()
            .filter(|&&(_, o)| o == object)
            .map(|&(f, _)| f)
            .collect();
        for &from in &senders {
            let _ = k.unpost(self.coll, from, object);
        }
        k.taking.retain(|&(_, o), _| o != object);
        for q in k.aside.values_mut() {
            q.retain(|p| p.head.key.0 != object);
        }
        for from in senders {
            let _ = self.pump(k, from, slot);
        }
        k.reap();
    }

    /// Leaving (every rank met at the last barrier): cancel the receives
    /// still posted, take the messages nobody asked for (of calls given
    /// up: their senders' MPI may wait for them), and drop the sends MPI
    /// is done with.
    pub(super) fn keyed_leave(&self) {
        let mut k = lock(&self.keyed);
        for (_, st) in std::mem::take(&mut k.streams) {
            for mut r in st.heads {
                r.cancel();
            }
            for mut d in st.data {
                d.req.cancel();
            }
        }
        while let Some((_, len, m)) = ffi::improbe(self.coll, None, ffi::any_tag()) {
            let _ = ffi::mrecv(m, &mut vec![0u8; len]);
        }
        k.taking.clear();
        k.aside.clear();
        k.sending.clear();
        k.reap();
    }
}

fn short(rank: usize, got: usize, want: usize) -> Error {
    Error::InvalidArgument(format!(
        "rank {rank} sent {got} bytes for this call, this rank expects {want}: \
         every rank must call with the same length"
    ))
}

fn out_of_turn(rank: usize) -> Error {
    Error::Environment(format!(
        "rank {rank} sent a message before the one this rank posted receives for \
         (a message of a call this rank never made?)"
    ))
}

fn unreadable(rank: usize) -> Error {
    Error::Environment(format!(
        "rank {rank} sent a keyed message this rank cannot read (another version \
         of the library?)"
    ))
}
