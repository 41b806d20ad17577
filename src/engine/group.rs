//! Shared state of a committed group: a barrier and allreduce buffers.
//!
//! The group's leader (its lowest rank) creates the object at commit under a
//! name derived from the member list and a per-member-list commit count, so
//! every member computes the same name without talking to anyone; members
//! open it, check the member list, and meet at a first barrier. After that
//! barrier everyone has it mapped and the leader removes the name, so a
//! committed group leaves nothing in /dev/shm.
//!
//! The barrier is a sense-reversing counter: each member reads the current
//! generation, increments `count`, and the last arriver resets `count` and
//! advances the generation, which the others wait for. It completes when
//! every member has arrived once; a member whose wait timed out keeps its
//! arrival and, called again, only waits (GASPI's barrier retry semantics).
//! The generation is a word of its own, so that the futex word can also
//! wake waiters for other reasons without passing the barrier.
//!
//! Allreduce contributions are double buffered by call parity, so one
//! barrier per allreduce suffices: a rank can only write the buffer of call
//! k+2 after the barrier of call k+1, which every rank reaches only after it
//! finished reading the buffers of call k.

use super::job::Names;
use super::memcopy;
use super::shm::{self, Mapping, Shared};
use super::wait::WaitWord;
use crate::extent;
use crate::types::Rank;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

const MAGIC: u64 = 0x4741_5350_4947_5250; // "GASPIGRP"

#[repr(C)]
#[derive(Debug)]
struct GroupHeader {
    magic: AtomicU64,
    key: AtomicU64,
    slot_bytes: AtomicU64,
    nmembers: AtomicU32,
    _pad_members: AtomicU32,
    _pad: [AtomicU64; 4],
    count: AtomicU32,
    generation: AtomicU32,
    _pad_count: [AtomicU32; 14],
    /// Wakes waiters for `generation`.
    ww: WaitWord,
}

// SAFETY: atomics only.
unsafe impl Shared for GroupHeader {}

/// FNV-1a hash of a sorted member list: the group's key.
pub(crate) fn members_key(members: &[Rank]) -> u64 {
    members.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &r| {
        let h = (h ^ (r as u64 & 0xff)).wrapping_mul(0x0100_0000_01b3);
        (h ^ (r as u64 >> 8)).wrapping_mul(0x0100_0000_01b3)
    })
}

struct GroupLayout {
    /// Where each call's contribution shapes start (a word per member and
    /// parity).
    shapes: usize,
    buffers: usize,
    /// Bytes from one member's contribution slot to the next.
    stride: usize,
    total: usize,
}

/// Contribution slots start this far apart at least: members writing
/// their own slots at once share no cache line, nor a pair of lines that
/// the adjacent-line prefetcher fetches together.
const SLOT_ALIGN: usize = 128;

/// Where the member list starts.
const fn members_offset() -> usize {
    extent::align_const(std::mem::size_of::<GroupHeader>(), 64)
}

fn layout(n: usize, slot_bytes: usize) -> io::Result<GroupLayout> {
    use extent::{add, align_up, mul};
    let what = "group object size";
    let members = members_offset();
    let shapes = mul(what, 4, n)
        .and_then(|m| add(what, members, m))
        .and_then(|b| align_up(what, b, 8))
        .map_err(extent::io_error)?;
    let buffers = mul(what, 16, n)
        .and_then(|m| add(what, shapes, m))
        .and_then(|b| align_up(what, b, SLOT_ALIGN))
        .map_err(extent::io_error)?;
    let stride = align_up(what, slot_bytes, SLOT_ALIGN).map_err(extent::io_error)?;
    let slots = mul(what, 2, n).and_then(|s| mul(what, s, stride));
    let total = slots.and_then(|s| add(what, buffers, s));
    Ok(GroupLayout {
        shapes,
        buffers,
        stride,
        total: total.map_err(extent::io_error)?,
    })
}

/// A mapped group object.
#[derive(Debug)]
pub(crate) struct GroupShared {
    map: Mapping,
    name: String,
    n: usize,
    slot_bytes: usize,
    stride: usize,
    shapes: usize,
    buffers: usize,
}

impl GroupShared {
    fn object_name(names: &Names, members: &[Rank]) -> String {
        names.group(members[0] as usize, members_key(members))
    }

    /// The leader's side: create the object for `members` (sorted).
    pub(crate) fn create(
        names: &Names,
        members: &[Rank],
        slot_bytes: usize,
    ) -> io::Result<GroupShared> {
        let name = GroupShared::object_name(names, members);
        let l = layout(members.len(), slot_bytes)?;
        let fd = shm::create(&name, l.total)?;
        let map = Mapping::new(&fd, l.total, 0, false)?;
        let g = GroupShared {
            map,
            name,
            n: members.len(),
            slot_bytes,
            stride: l.stride,
            shapes: l.shapes,
            buffers: l.buffers,
        };
        for (slot, &r) in g.member_slots().iter().zip(members) {
            slot.store(r as u32, SeqCst);
        }
        let h = g.header();
        h.key.store(members_key(members), SeqCst);
        h.nmembers.store(members.len() as u32, SeqCst);
        h.slot_bytes.store(slot_bytes as u64, SeqCst);
        h.magic.store(MAGIC, SeqCst);
        Ok(g)
    }

    /// A member's side: open the object of `members` if the leader created
    /// it already (`Ok(None)` if not yet), and check the member list.
    ///
    /// The name carries no count of earlier commits, so that a commit a
    /// rank gave up on (timed out, then deleted the group) cannot leave
    /// the members disagreeing about which object the next commit uses.
    /// An object whose commit barrier has already completed is the
    /// previous commit's, which its leader has not unlinked yet: `Ok(None)`
    /// too (its barrier cannot have completed without this member).
    pub(crate) fn open(names: &Names, members: &[Rank]) -> io::Result<Option<GroupShared>> {
        let name = GroupShared::object_name(names, members);
        let (fd, len) = match shm::open(&name) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if len < std::mem::size_of::<GroupHeader>() {
            return Ok(None);
        }
        let map = Mapping::new(&fd, len, 0, false)?;
        let h = map.at::<GroupHeader>(0);
        if h.magic.load(SeqCst) != MAGIC || h.generation.load(SeqCst) != 0 {
            return Ok(None);
        }
        let slot_bytes = h.slot_bytes.load(SeqCst) as usize;
        let n = h.nmembers.load(SeqCst) as usize;
        let l = layout(n, slot_bytes).ok().filter(|l| l.total == len);
        let Some(l) = l.filter(|_| n == members.len()) else {
            return Err(io::Error::other(
                "group object does not match the member list",
            ));
        };
        let g = GroupShared {
            map,
            name,
            n,
            slot_bytes,
            stride: l.stride,
            shapes: l.shapes,
            buffers: l.buffers,
        };
        if g.member_slots()
            .iter()
            .zip(members)
            .any(|(s, &r)| s.load(SeqCst) != r as u32)
        {
            return Err(io::Error::other(
                "group object does not match the member list",
            ));
        }
        Ok(Some(g))
    }

    /// Remove the name (the leader, once every member has the object mapped).
    pub(crate) fn unlink(&self) {
        let _ = shm::unlink(&self.name);
    }

    fn header(&self) -> &GroupHeader {
        self.map.at(0)
    }

    fn member_slots(&self) -> &[AtomicU32] {
        self.map.slice(members_offset(), self.n)
    }

    /// Bytes each member can contribute to an allreduce.
    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The barrier's wake-up word.
    pub(crate) fn ww(&self) -> &WaitWord {
        &self.header().ww
    }

    /// Arrive at the barrier; returns the generation to wait past.
    pub(crate) fn arrive(&self) -> u32 {
        let h = self.header();
        let generation = h.generation.load(SeqCst);
        if h.count.fetch_add(1, SeqCst) + 1 == self.n as u32 {
            h.count.store(0, SeqCst);
            h.generation.fetch_add(1, SeqCst);
            h.ww.advance();
        }
        generation
    }

    /// Whether the barrier of generation `generation` has completed.
    pub(crate) fn passed(&self, generation: u32) -> bool {
        self.header().generation.load(SeqCst) != generation
    }

    fn contribution(&self, parity: usize, member: usize, len: usize) -> *mut u8 {
        assert!(parity < 2 && member < self.n && len <= self.slot_bytes);
        self.map
            .ptr()
            .wrapping_add(self.buffers + (parity * self.n + member) * self.stride)
    }

    /// Store `data` as `member`'s contribution to a call of parity
    /// `parity`, and `shape` (what the call's members must agree on: its
    /// length and element type) beside it.
    pub(crate) fn put_contribution(&self, parity: usize, member: usize, data: &[u8], shape: u64) {
        let dst = self.contribution(parity, member, data.len());
        // SAFETY: dst..dst+len is inside this member's slot of the mapping
        // (asserted by `contribution`); `data` is a separate Rust buffer.
        unsafe { memcopy::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        self.shape_word(parity, member).store(shape, SeqCst);
    }

    /// The shape `member` gave its contribution of parity `parity`.
    pub(crate) fn shape_of(&self, parity: usize, member: usize) -> u64 {
        self.shape_word(parity, member).load(SeqCst)
    }

    fn shape_word(&self, parity: usize, member: usize) -> &AtomicU64 {
        assert!(parity < 2 && member < self.n);
        &self.map.slice::<AtomicU64>(self.shapes, 2 * self.n)[parity * self.n + member]
    }

    /// Read `member`'s contribution of parity `parity` into `out`.
    pub(crate) fn get_contribution(&self, parity: usize, member: usize, out: &mut [u8]) {
        let src = self.contribution(parity, member, out.len());
        // SAFETY: src..src+len is inside the slot (asserted); `out` is a
        // separate Rust buffer.
        unsafe { memcopy::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_depends_on_members() {
        assert_ne!(members_key(&[0, 1, 2]), members_key(&[0, 1, 3]));
        assert_ne!(members_key(&[1, 2]), members_key(&[2, 1]));
        assert_eq!(members_key(&[4, 9]), members_key(&[4, 9]));
    }

    #[test]
    fn create_open_barrier_and_buffers() {
        let names = Names::fresh();
        let members = [0u16, 2, 5];
        assert!(GroupShared::open(&names, &members).unwrap().is_none());
        let a = GroupShared::create(&names, &members, 64).unwrap();
        let b = GroupShared::open(&names, &members).unwrap().unwrap();
        assert!(GroupShared::open(&names, &[0, 2]).unwrap().is_none());
        let g0 = a.arrive();
        let g1 = b.arrive();
        assert_eq!(g0, g1);
        assert!(!a.passed(g0));
        b.arrive(); // third member
        assert!(a.passed(g0) && b.passed(g1));
        // Its commit barrier is done: a member of the next commit of the
        // same members does not take it for the next one's.
        assert!(GroupShared::open(&names, &members).unwrap().is_none());
        a.put_contribution(1, 2, &[7; 64], 99);
        let mut out = [0u8; 64];
        b.get_contribution(1, 2, &mut out);
        assert_eq!((out, b.shape_of(1, 2), b.shape_of(0, 2)), ([7; 64], 99, 0));
        a.unlink();
        assert_eq!(crate::engine::job::sweep(names.token()), 0);
    }

    #[test]
    fn small_contribution_slots_share_no_cache_lines() {
        let names = Names::fresh();
        let g = GroupShared::create(&names, &[0, 1, 2, 3], 40).unwrap();
        assert_eq!(g.slot_bytes(), 40);
        let at = |parity, member| g.contribution(parity, member, 40) as usize;
        for i in 0..8 {
            let (p, m) = (i / 4, i % 4);
            assert_eq!(at(p, m) % SLOT_ALIGN, 0, "slot {p}/{m} is aligned");
            if i > 0 {
                let (q, k) = ((i - 1) / 4, (i - 1) % 4);
                assert_eq!(at(p, m) - at(q, k), SLOT_ALIGN);
            }
        }
        // Distinct slots keep distinct contributions.
        for m in 0..4 {
            g.put_contribution(0, m, &[m as u8 + 1; 40], m as u64);
        }
        for m in 0..4 {
            let mut out = [0u8; 40];
            g.get_contribution(0, m, &mut out);
            assert_eq!((out, g.shape_of(0, m)), ([m as u8 + 1; 40], m as u64));
        }
        g.unlink();
    }
}
