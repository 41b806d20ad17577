//! The passive-communication inbox of a rank: a bounded multi-producer,
//! multi-consumer ring in the receiver's shared memory (D. Vyukov's bounded
//! queue).
//!
//! Every slot has a sequence number. A sender may claim the slot at `tail`
//! when its sequence equals `tail`; it copies the message in and publishes it
//! by setting the sequence to `tail + 1`. A receiver may take the slot at
//! `head` when its sequence equals `head + 1`; it copies the message out and
//! frees the slot by setting the sequence to `head + slots`. Claims are CAS
//! operations on `tail`/`head` made only when the slot is ready, so a sender
//! that times out on a full inbox, or a receiver on an empty one, has taken
//! nothing and leaves the inbox usable.

use super::job::Names;
use super::memcopy;
use super::segment::Span;
use super::shm::{self, Mapping, Shared};
use super::wait::{Patience, WaitWord};
use crate::error::{Error, Result};
use crate::extent;
use crate::types::{Deadline, Rank};
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

const MAGIC: u64 = 0x4741_5350_4942_4F58; // "GASPIBOX"

#[repr(C)]
#[derive(Debug)]
struct InboxHeader {
    magic: AtomicU64,
    slots: AtomicU32,
    slot_bytes: AtomicU32,
    _pad: [AtomicU64; 6],
    head: AtomicU64,
    _pad_head: [AtomicU64; 7],
    tail: AtomicU64,
    _pad_tail: [AtomicU64; 7],
    /// Receivers sleep here for messages.
    recv_ww: WaitWord,
    /// Senders sleep here for free slots.
    send_ww: WaitWord,
}

// SAFETY: atomics only.
unsafe impl Shared for InboxHeader {}

#[repr(C, align(64))]
#[derive(Debug)]
struct SlotHeader {
    seq: AtomicU64,
    sender: AtomicU32,
    len: AtomicU32,
}

// SAFETY: atomics only.
unsafe impl Shared for SlotHeader {}

fn slot_stride(slot_bytes: usize) -> io::Result<usize> {
    let what = "passive message size";
    extent::add(what, std::mem::size_of::<SlotHeader>(), slot_bytes)
        .and_then(|n| extent::align_up(what, n, 64))
        .map_err(extent::io_error)
}

fn inbox_len(slots: usize, stride: usize) -> io::Result<usize> {
    let what = "passive inbox size";
    extent::mul(what, slots, stride)
        .and_then(|n| extent::add(what, first_slot(), n))
        .map_err(extent::io_error)
}

const fn first_slot() -> usize {
    extent::align_const(std::mem::size_of::<InboxHeader>(), 64)
}

/// A mapped inbox (the owner's or a sender's view).
#[derive(Debug)]
pub(crate) struct Inbox {
    map: Mapping,
    slots: usize,
    slot_bytes: usize,
    /// Bytes from one slot to the next.
    stride: usize,
}

impl Inbox {
    /// Create the inbox of `rank` with `slots` messages of up to
    /// `slot_bytes` bytes.
    pub(crate) fn create(
        names: &Names,
        rank: usize,
        slots: usize,
        slot_bytes: usize,
    ) -> io::Result<Inbox> {
        let name = names.inbox(rank);
        let stride = slot_stride(slot_bytes)?;
        let len = inbox_len(slots, stride)?;
        let fd = shm::create(&name, len)?;
        let map = Mapping::new(&fd, len, 0, false)?;
        let inbox = Inbox {
            map,
            slots,
            slot_bytes,
            stride,
        };
        for i in 0..slots {
            inbox.slot(i as u64).seq.store(i as u64, SeqCst);
        }
        let h = inbox.header();
        h.slots.store(slots as u32, SeqCst);
        h.slot_bytes.store(slot_bytes as u32, SeqCst);
        h.magic.store(MAGIC, SeqCst);
        Ok(inbox)
    }

    /// Open the inbox of `rank` as a sender.
    pub(crate) fn open(names: &Names, rank: usize) -> io::Result<Inbox> {
        let (fd, len) = shm::open(&names.inbox(rank))?;
        let map = Mapping::new(&fd, len, 0, false)?;
        let h = map.at::<InboxHeader>(0);
        if h.magic.load(SeqCst) != MAGIC {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let (slots, slot_bytes) = (
            h.slots.load(SeqCst) as usize,
            h.slot_bytes.load(SeqCst) as usize,
        );
        let stride = slot_stride(slot_bytes)?;
        if slots == 0 || inbox_len(slots, stride)? > len {
            return Err(io::Error::other("inbox with an inconsistent layout"));
        }
        Ok(Inbox {
            map,
            slots,
            slot_bytes,
            stride,
        })
    }

    /// Remove the inbox's name (its owner, at term).
    pub(crate) fn unlink(names: &Names, rank: usize) {
        let _ = shm::unlink(&names.inbox(rank));
    }

    /// Largest message this inbox takes.
    pub(crate) fn max_message(&self) -> usize {
        self.slot_bytes
    }

    fn header(&self) -> &InboxHeader {
        self.map.at(0)
    }

    fn slot_offset(&self, pos: u64) -> usize {
        // Within the mapping: checked by `inbox_len` when it was made.
        first_slot() + (pos % self.slots as u64) as usize * self.stride
    }

    fn slot(&self, pos: u64) -> &SlotHeader {
        self.map.at(self.slot_offset(pos))
    }

    fn slot_data(&self, pos: u64) -> *mut u8 {
        self.map
            .ptr()
            .wrapping_add(self.slot_offset(pos) + std::mem::size_of::<SlotHeader>())
    }

    /// Queue the bytes of `msg` as a message of `sender`, waiting for a
    /// free slot until `deadline`.
    pub(crate) fn send(
        &self,
        sender: Rank,
        msg: Span<'_>,
        waiter: &Patience<'_>,
        deadline: Deadline,
        check: impl FnMut() -> Result<()>,
    ) -> Result<()> {
        let len = msg.len;
        assert!(len <= self.slot_bytes, "unchecked passive message size");
        let src = msg.ptr();
        let pos = waiter.wait(&self.header().send_ww, deadline, || self.claim(), check)?;
        // SAFETY: src..src+len is inside `msg`'s segment (the span), which
        // cannot overlap the inbox.
        unsafe { self.publish(pos, sender, src, len) };
        Ok(())
    }

    /// Queue `msg` as a message of `sender` if a slot is free now; returns
    /// whether it did (the GPI-2 engine's relay, for other hosts' senders).
    #[cfg_attr(not(any(feature = "gpi2", feature = "mpi")), allow(dead_code))]
    pub(crate) fn offer(&self, sender: Rank, msg: &[u8]) -> bool {
        assert!(
            msg.len() <= self.slot_bytes,
            "unchecked passive message size"
        );
        match self.claim() {
            Some(pos) => {
                // SAFETY: `msg` is a slice of its own, outside the inbox.
                unsafe { self.publish(pos, sender, msg.as_ptr(), msg.len()) };
                true
            }
            None => false,
        }
    }

    /// Claim the slot at `tail` if it is free: `None` when the inbox is
    /// full.
    fn claim(&self) -> Option<u64> {
        let h = self.header();
        loop {
            let pos = h.tail.load(SeqCst);
            let seq = self.slot(pos).seq.load(SeqCst);
            match seq.wrapping_sub(pos) as i64 {
                0 if h
                    .tail
                    .compare_exchange(pos, pos + 1, SeqCst, SeqCst)
                    .is_ok() =>
                {
                    return Some(pos);
                }
                d if d < 0 => return None, // full
                _ => {}                    // another sender moved on; reload
            }
        }
    }

    /// Fill the claimed slot `pos` with `len` bytes at `src` and publish it.
    ///
    /// # Safety
    /// `pos` was claimed by this caller and not yet published; `src` is
    /// valid for `len <= slot_bytes` bytes and does not overlap the inbox.
    unsafe fn publish(&self, pos: u64, sender: Rank, src: *const u8, len: usize) {
        // SAFETY: the slot at `pos` is ours alone until we publish it; its
        // data area holds slot_bytes >= len bytes inside the mapping; the
        // caller vouches for `src`.
        unsafe { memcopy::copy_nonoverlapping(src, self.slot_data(pos), len) };
        let slot = self.slot(pos);
        slot.sender.store(sender as u32, SeqCst);
        slot.len.store(len as u32, SeqCst);
        slot.seq.store(pos + 1, SeqCst);
        self.header().recv_ww.wake();
    }

    /// Take the next message into `into` (its length is the room there),
    /// waiting until `deadline`. Returns the sender and the message length.
    pub(crate) fn receive(
        &self,
        into: Span<'_>,
        waiter: &Patience<'_>,
        deadline: Deadline,
        check: impl FnMut() -> Result<()>,
    ) -> Result<(Rank, usize)> {
        let capacity = into.len;
        let dst = into.ptr();
        let h = self.header();
        let pos = waiter.wait(
            &h.recv_ww,
            deadline,
            || loop {
                let pos = h.head.load(SeqCst);
                let slot = self.slot(pos);
                let seq = slot.seq.load(SeqCst);
                match seq.wrapping_sub(pos + 1) as i64 {
                    0 => {
                        let len = slot.len.load(SeqCst) as usize;
                        if len > capacity {
                            return Some(Err(Error::MessageTooLarge {
                                size: len,
                                capacity,
                            }));
                        }
                        if h.head
                            .compare_exchange(pos, pos + 1, SeqCst, SeqCst)
                            .is_ok()
                        {
                            return Some(Ok(pos));
                        }
                    }
                    d if d < 0 => return None, // empty
                    _ => {}
                }
            },
            check,
        )??;
        let slot = self.slot(pos);
        let (sender, len) = (
            slot.sender.load(SeqCst) as Rank,
            slot.len.load(SeqCst) as usize,
        );
        // SAFETY: the slot is ours until we free it; it holds len <= capacity
        // bytes; dst..dst+capacity is inside `into` (span) and distinct from
        // the inbox mapping.
        unsafe { memcopy::copy_nonoverlapping(self.slot_data(pos), dst, len) };
        slot.seq.store(pos + self.slots as u64, SeqCst);
        h.send_ww.wake();
        Ok((sender, len))
    }
}
