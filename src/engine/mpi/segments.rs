//! Our segments and windows in the MPI window: attaching, registration
//! through each rank's directory, and the sizes of other ranks' segments.
//!
//! MPI windows are made collectively, GASPI segments are not: the engine
//! makes one dynamic window over all ranks at start (DART-MPI's design:
//! Zhou, Idrees, Gracia, Euro-Par 2015) and attaches each segment's memory
//! (and its landing) to it locally. Registering segment `s` with rank `r`
//! writes its description (address, size, landing) into `r`'s directory,
//! an array exposed through the same window at an address every rank
//! learnt at start, in the slot of (`s`, this rank); `r` reads its own
//! directory locally. Deleting a segment clears the slots it was written
//! to; its memory stays attached until a barrier over every rank it was
//! registered with has ended (see [`Mpi::release_buried`]).

use super::ffi;
use super::landing::Landing;
use super::relay::Attached;
use super::{Bound, Mpi};
use crate::engine::segment::SegmentObject;
use crate::engine::wait::lock;
use crate::error::{Error, Result};
use crate::types::{Rank, SegmentId, Timeout};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Deleted segments still attached ([`Mpi::unbind`]), in order of
/// deletion.
#[derive(Default)]
pub(super) struct Graves {
    buried: Vec<Bound>,
    /// How many of `buried` were there when this rank last entered a
    /// barrier.
    before_barrier: usize,
}

/// Segment ids: ours are `0..=255`.
pub(super) const SEGMENTS: usize = 256;
/// Words of one directory slot: data address, size | VALID, landing
/// values address, landing words address, and their seal ([`seal`]).
pub(super) const SLOT_WORDS: usize = 5;
/// Set in a slot's size word when it describes a segment.
const VALID: u64 = 1 << 63;

/// The last word of a slot: a hash of its first four. The owner writes a
/// slot (registering, or clearing it when the segment goes) with one
/// `MPI_Put`, which MPI does not make atomic, while this rank may read it:
/// a slot read half old and half new (or half cleared) fails its seal
/// and reads as not registered, instead of an address of neither.
fn seal(words: &[u64]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15_u64;
    for &w in words {
        h = (h ^ w).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 31;
    }
    h
}

/// Where a segment of another rank is, as registered with this rank.
#[derive(Clone, Copy, Debug)]
pub(super) struct Remote {
    pub(super) data: u64,
    pub(super) size: usize,
    pub(super) values: u64,
    pub(super) words: u64,
}

impl Remote {
    /// Where this rank's bound segment `b` is.
    fn of(b: &Bound) -> Remote {
        Remote {
            data: ffi::address(b.obj.data()),
            size: b.obj.size(),
            values: ffi::address(b.landing.values.as_ptr() as *const u8),
            words: ffi::address(b.landing.words.as_ptr() as *const u8),
        }
    }

    /// The directory slot that describes it, sealed.
    fn slot(&self) -> [u64; SLOT_WORDS] {
        let mut w = [
            self.data,
            self.size as u64 | VALID,
            self.values,
            self.words,
            0,
        ];
        w[SLOT_WORDS - 1] = seal(&w[..SLOT_WORDS - 1]);
        w
    }

    /// What a slot read from the directory describes: nothing if it is
    /// clear, or torn (its seal does not match).
    fn from_slot(w: [u64; SLOT_WORDS]) -> Option<Remote> {
        let sealed = w[SLOT_WORDS - 1] == seal(&w[..SLOT_WORDS - 1]);
        (sealed && w[1] & VALID != 0).then(|| Remote {
            data: w[0],
            size: (w[1] & !VALID) as usize,
            values: w[2],
            words: w[3],
        })
    }
}

/// This rank's directory: a slot per (segment, rank).
pub(super) fn directory(nranks: usize) -> Box<[AtomicU64]> {
    (0..SEGMENTS * nranks * SLOT_WORDS)
        .map(|_| AtomicU64::new(0))
        .collect()
}

/// Detach what [`Mpi::bind`] attached (the data once no other segment
/// lies in it).
fn detach(win: ffi::Win, b: Bound) {
    ffi::detach(win, b.landing.values.as_ptr() as *mut u8);
    ffi::detach(win, b.landing.words.as_ptr() as *mut u8);
}

impl Mpi {
    fn slot_index(&self, segment: SegmentId, owner: usize) -> usize {
        (segment as usize * self.nranks + owner) * SLOT_WORDS
    }

    /// Attach `obj` (and a landing for its notifications) to the window.
    pub(super) fn bind(
        &self,
        segment: SegmentId,
        obj: &Arc<SegmentObject>,
        window: bool,
    ) -> Result<()> {
        let landing = Arc::new(Landing::new());
        let data = match obj.inside_of() {
            Some((source, _)) => self.attachment_of(source).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "segment {segment} lies inside a segment not attached to the MPI window"
                ))
            })?,
            None => {
                // SAFETY: the object's mapping stays until `unbind` detaches
                // it (called before the object goes; a segment inside it
                // keeps both); other ranks write only ranges checked against
                // the size registered with them.
                unsafe { ffi::attach(self.win, obj.data(), obj.size().max(1))? };
                Arc::new(Attached {
                    win: self.win,
                    base: obj.data(),
                })
            }
        };
        let words = landing.words.as_ptr() as *mut u8;
        let values = landing.values.as_ptr() as *mut u8;
        // SAFETY: the landing's boxes live in `Bound` until `unbind`
        // detaches them; other ranks only accumulate whole aligned words.
        let attached = unsafe {
            ffi::attach(self.win, words, landing.words.len() * 8)
                .and_then(|_| ffi::attach(self.win, values, landing.values.len() * 4))
        };
        if let Err(e) = attached {
            ffi::detach(self.win, words);
            return Err(e);
        }
        lock(&self.shared.bound).insert(
            segment,
            Bound {
                obj: obj.clone(),
                data,
                landing,
                window,
                registered: Default::default(),
            },
        );
        Ok(())
    }

    /// The attachment of `source`'s data: its own, or that of a segment
    /// inside it, bound or buried.
    fn attachment_of(&self, source: &Arc<SegmentObject>) -> Option<Arc<Attached>> {
        let of = |b: &Bound| {
            let root = b.obj.inside_of().map_or(&b.obj, |(s, _)| s);
            Arc::ptr_eq(root, source).then(|| b.data.clone())
        };
        let bound = lock(&self.shared.bound).values().find_map(of);
        bound.or_else(|| lock(&self.graves).buried.iter().find_map(of))
    }

    /// Undo [`Mpi::bind`]: clear the slots registered, and keep the
    /// memory attached until [`Mpi::release_buried`] may detach it.
    pub(super) fn unbind(&self, segment: SegmentId) {
        let Some(b) = lock(&self.shared.bound).remove(&segment) else {
            return;
        };
        let zero = [0u64; SLOT_WORDS];
        // Not to a rank known gone: a flush to it could wait for ever.
        for &r in b.registered.iter().filter(|&&r| !self.gone(r)) {
            let disp = self.directories[r] + 8 * self.slot_index(segment, self.rank) as u64;
            // SAFETY: a local array; the flush completes the put before it
            // goes. Best effort: a rank gone cannot be told.
            let _ = unsafe {
                ffi::transfer(
                    self.win,
                    true,
                    zero.as_ptr() as *mut u8,
                    8 * SLOT_WORDS,
                    r,
                    disp,
                )
            }
            .and_then(|_| ffi::flush(self.win, r));
        }
        // A rank that read its slot just before it was cleared may still
        // put into this memory: it stays until a barrier shows that no
        // such put can be in flight. Not the caller's own memory
        // (`segment_bind`), which goes back to the caller now, as
        // `segment_delete` promises (a put racing the deletion may land
        // in it).
        if b.obj.is_user_memory() {
            detach(self.win, b);
        } else {
            lock(&self.graves).buried.push(b);
        }
    }

    /// Before a barrier ([`Transport::flush_written`]): complete every
    /// transfer not yet flushed, on every queue, to ranks that `alive`
    /// says are running (a wait still reports the others), and mark the
    /// segments buried so far as buried before this rank entered.
    ///
    /// [`Transport::flush_written`]: crate::engine::transport::Transport::flush_written
    pub(super) fn flush_all(&self, alive: &dyn Fn(Rank) -> bool) -> Result<()> {
        let targets = lock(&self.unflushed).ranks();
        for r in targets.into_iter().filter(|&r| alive(r as Rank)) {
            self.flush_parked(r)?;
            lock(&self.unflushed).flushed(r);
        }
        let mut graves = lock(&self.graves);
        graves.before_barrier = graves.buried.len();
        Ok(())
    }

    /// A barrier over `members` ended: every member completed its
    /// transfers before it entered ([`Mpi::flush_all`]), and reads a
    /// cleared slot once it leaves (the slots were cleared, and the
    /// clearing flushed, before this rank entered). So no put can still
    /// reach a segment buried before this rank entered whose
    /// registrations were all with `members` (or ranks gone): detach
    /// those. Transfers that another
    /// thread of a member posts while that member is in the barrier are
    /// not covered.
    pub(super) fn release_buried(&self, members: &[Rank]) {
        let mut graves = lock(&self.graves);
        let entered = std::mem::take(&mut graves.before_barrier).min(graves.buried.len());
        if entered == 0 {
            return;
        }
        let reachable_by_others = |b: &Bound| {
            b.registered
                .iter()
                .any(|&r| !self.gone(r) && !members.contains(&(r as Rank)))
        };
        let mut kept = Vec::new();
        let mut freed = Vec::new();
        for (i, b) in graves.buried.drain(..).enumerate() {
            if i < entered && !reachable_by_others(&b) {
                freed.push(b);
            } else {
                kept.push(b);
            }
        }
        graves.buried = kept;
        drop(graves);
        for b in freed {
            detach(self.win, b);
        }
    }

    /// Let `rank` access segment `segment` of this rank: write its
    /// description into `rank`'s directory (complete when this returns).
    pub(super) fn register(&self, segment: SegmentId, rank: Rank, _timeout: Timeout) -> Result<()> {
        let r = rank as usize;
        let slot = {
            let mut bound = lock(&self.shared.bound);
            let b = bound.get_mut(&segment).ok_or_else(|| {
                Error::InvalidArgument(format!("segment {segment} is not bound to the MPI window"))
            })?;
            b.registered.insert(r);
            Remote::of(b).slot()
        };
        let disp = self.directories[r] + 8 * self.slot_index(segment, self.rank) as u64;
        // SAFETY: a local array; the flush completes the put before it goes.
        unsafe {
            ffi::transfer(
                self.win,
                true,
                slot.as_ptr() as *mut u8,
                8 * SLOT_WORDS,
                r,
                disp,
            )?
        };
        ffi::flush(self.win, r)
    }

    /// Segment `segment` of `rank` as registered with this rank.
    pub(super) fn remote(&self, rank: Rank, segment: SegmentId) -> Option<Remote> {
        ffi::sync(self.win);
        self.remote_synced(rank, segment)
    }

    /// [`Mpi::remote`] after the caller's `MPI_Win_sync` (which makes the
    /// directory's words that other ranks put visible to this rank's loads).
    pub(super) fn remote_synced(&self, rank: Rank, segment: SegmentId) -> Option<Remote> {
        if rank as usize == self.rank {
            // A rank's own segments need no registration.
            let bound = lock(&self.shared.bound);
            return bound.get(&segment).map(Remote::of);
        }
        let i = self.slot_index(segment, rank as usize);
        // One copy of the slot, checked and used as a whole.
        Remote::from_slot(std::array::from_fn(|k| self.directory[i + k].load(SeqCst)))
    }

    /// Size of segment `segment` of `rank` as registered with this rank.
    pub(super) fn remote_size(&self, rank: Rank, segment: SegmentId) -> Option<usize> {
        self.remote(rank, segment).map(|r| r.size)
    }

    /// Address of byte `offset` of this rank's bound segment `segment`.
    pub(super) fn local(&self, segment: SegmentId, offset: u64) -> Result<*mut u8> {
        let bound = lock(&self.shared.bound);
        let b = bound.get(&segment).ok_or_else(|| {
            Error::InvalidArgument(format!("segment {segment} is not bound to the MPI window"))
        })?;
        Ok(b.obj.data().wrapping_add(offset as usize))
    }

    /// Where `rank`'s segment `segment` is, or the error the native engine
    /// gives for a segment not registered with this rank (a deleted one's
    /// slot is cleared alike, so the two read the same here).
    pub(super) fn remote_of(&self, rank: Rank, segment: SegmentId) -> Result<Remote> {
        ffi::sync(self.win);
        self.remote_synced_of(rank, segment)
    }

    /// [`Mpi::remote_of`] after the caller's `MPI_Win_sync`.
    pub(super) fn remote_synced_of(&self, rank: Rank, segment: SegmentId) -> Result<Remote> {
        self.remote_synced(rank, segment)
            .ok_or(Error::SegmentNotRegistered { rank, segment })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(base: u64, size: usize) -> Remote {
        Remote {
            data: base,
            size,
            values: base + 0x10_000,
            words: base + 0x20_000,
        }
    }

    /// A whole slot reads back as written; a clear one, and every mix of
    /// a slot's words with a clear slot's or another registration's (the
    /// torn reads of a put being written), reads as nothing.
    #[test]
    fn only_whole_slots_read_as_registered() {
        let old = remote(0x7f00_0000_0000, 4096).slot();
        let new = remote(0x7f10_0000_0000, 65536).slot();
        let got = Remote::from_slot(old).expect("a whole slot");
        assert_eq!((got.data, got.size), (0x7f00_0000_0000, 4096));
        assert!(Remote::from_slot([0; SLOT_WORDS]).is_none());
        for other in [[0; SLOT_WORDS], new] {
            for mask in 1..(1u32 << SLOT_WORDS) - 1 {
                let mixed: [u64; SLOT_WORDS] =
                    std::array::from_fn(|k| if mask >> k & 1 == 1 { other[k] } else { old[k] });
                assert!(
                    Remote::from_slot(mixed).is_none(),
                    "words {mask:#07b} of {other:x?} over {old:x?} read as registered"
                );
            }
        }
    }
}
