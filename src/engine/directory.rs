//! This rank's segments and its mappings of the other ranks' segments.
//!
//! A rank publishes its segment objects in two places: its own table
//! (`local`, read under an epoch pin) and its directory entries in the job
//! control block (`RankSlot::segments`: object id and size), where peers
//! find them. A peer maps an object on first use and keeps the mapping in
//! its `peers` table; when the directory names another object (deleted,
//! re-created), a lookup asks for a remap, which happens unpinned, and the
//! operation runs again ([`Native::run`]). Mappings are freed only after
//! every thread that could be reading them has left its pin
//! ([`super::epoch`]).

use super::Native;
use super::epoch::Pin;
use super::inbox::Inbox;
use super::job::{self, ObjectId, ObjectKind};
use super::segment::{SegmentKey, SegmentObject};
use super::tables::PeerSegment;
use super::transport::Transport;
use super::wait::{lock, poll_with_backoff};
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, SegmentId};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// Why a lookup under a pin did not produce a segment.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// A real error for the caller.
    Fail(Error),
    /// This rank's mapping of the peer's segment is missing or stale:
    /// remap it (unpinned) and run the operation again.
    Remap { rank: Rank, segment: SegmentId },
}

impl From<Error> for Lookup {
    fn from(e: Error) -> Lookup {
        Lookup::Fail(e)
    }
}

impl Native {
    /// Run `op` pinned, so that it can borrow segment objects from the
    /// tables without reference counting. If a lookup asks for a remap,
    /// remap unpinned and run `op` again: `op` must not have done anything
    /// visible before its lookups succeeded.
    #[inline]
    pub(crate) fn run<R>(
        &self,
        mut op: impl FnMut(&Pin<'_>) -> std::result::Result<R, Lookup>,
    ) -> Result<R> {
        loop {
            let outcome = {
                let pin = self.tables.epochs.pin();
                op(&pin)
            };
            match outcome {
                Ok(r) => return Ok(r),
                Err(Lookup::Fail(e)) => return Err(self.explain(e)),
                Err(Lookup::Remap { rank, segment }) => {
                    self.remap(rank, segment).map_err(|e| self.explain(e))?
                }
            }
        }
    }

    /// A segment of another rank that is missing because that rank has
    /// left the job (its segments go with it) is reported as the rank's
    /// departure, not as a missing segment.
    fn explain(&self, e: Error) -> Error {
        match e {
            Error::SegmentNotFound { rank, .. } if rank != self.rank => {
                self.check_alive(rank).err().unwrap_or(e)
            }
            e => e,
        }
    }

    /// This rank's segment `seg`, borrowed for the pin.
    #[inline]
    pub(crate) fn local<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        seg: SegmentId,
    ) -> Result<&'p SegmentObject> {
        self.tables.local[seg as usize]
            .get(pin)
            .ok_or_else(|| Error::SegmentNotFound {
                rank: self.rank,
                segment: seg,
            })
    }

    /// This rank's segment `seg`, to keep beyond a pin (views, blocking waits).
    pub(crate) fn local_arc(&self, seg: SegmentId) -> Result<Arc<SegmentObject>> {
        let pin = self.tables.epochs.pin();
        self.tables.local[seg as usize]
            .get_arc(&pin)
            .ok_or_else(|| Error::SegmentNotFound {
                rank: self.rank,
                segment: seg,
            })
    }

    /// The object backing segment `seg` of `rank`, as its directory says.
    pub(crate) fn entry(&self, rank: Rank, seg: SegmentId) -> Option<ObjectId> {
        let word = self.job.slot(rank as usize).segments[seg as usize]
            .object
            .load(SeqCst);
        ObjectId::unpack(word)
    }

    /// Segment `seg` of `rank` (this rank included), checked for existence,
    /// registration with this rank, and the owner's health.
    #[inline]
    pub(crate) fn target<'p>(
        &'p self,
        pin: &'p Pin<'_>,
        rank: Rank,
        seg: SegmentId,
    ) -> std::result::Result<&'p SegmentObject, Lookup> {
        if rank == self.rank {
            return Ok(self.local(pin, seg)?);
        }
        self.check_rank(rank)?;
        self.check_alive(rank)?;
        let Some(id) = self.entry(rank, seg) else {
            // Deleted: drop our mapping of it (remap does, then reports it
            // gone), so that its owner's memory can be freed.
            let stale = self.tables.peer_row(rank)[seg as usize]
                .get(pin)
                .is_some_and(|p| p.obj.id().owner == rank);
            return Err(if stale {
                Lookup::Remap { rank, segment: seg }
            } else {
                Error::SegmentNotFound { rank, segment: seg }.into()
            });
        };
        // A window of this rank's node is this rank's segment too.
        if let Some(own) = self.tables.local[seg as usize]
            .get(pin)
            .filter(|o| o.id() == id)
        {
            return Ok(own);
        }
        match self.tables.peer_row(id.owner)[seg as usize].get(pin) {
            Some(p) if p.obj.id() == id => {
                if !p.registered.load(SeqCst) {
                    if !p.obj.is_registered(self.rank) {
                        return Err(Error::SegmentNotRegistered { rank, segment: seg }.into());
                    }
                    p.registered.store(true, SeqCst);
                }
                Ok(&p.obj)
            }
            _ => Err(Lookup::Remap { rank, segment: seg }),
        }
    }

    /// Map the object now backing segment `seg` of `rank`, replacing a
    /// stale mapping. Must not be called while pinned.
    fn remap(&self, rank: Rank, seg: SegmentId) -> Result<()> {
        let _w = lock(&self.tables.peer_writer);
        let Some(id) = self.entry(rank, seg) else {
            let cell = &self.tables.peer_row(rank)[seg as usize];
            let stale = cell
                .get(&self.tables.epochs.pin())
                .is_some_and(|p| p.obj.id().owner == rank);
            if stale {
                cell.replace(None, &self.tables.epochs);
            }
            return Err(Error::SegmentNotFound { rank, segment: seg });
        };
        let cell = &self.tables.peer_row(id.owner)[seg as usize];
        if cell
            .get(&self.tables.epochs.pin())
            .is_some_and(|p| p.obj.id() == id)
        {
            return Ok(()); // another thread did it
        }
        let key = SegmentKey {
            names: self.names(),
            segment: seg,
            id,
        };
        let obj = match SegmentObject::open(&key) {
            Ok(o) => o,
            // Deleted between our look at the directory and the open.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::SegmentNotFound { rank, segment: seg });
            }
            Err(e) => {
                return Err(Error::system(
                    format!("mapping segment {seg} of rank {rank}"),
                    e,
                ));
            }
        };
        let fresh = PeerSegment {
            obj,
            registered: AtomicBool::new(false),
        };
        cell.replace(Some(Arc::new(fresh)), &self.tables.epochs);
        Ok(())
    }

    /// Size of segment `seg` of `rank`: as its directory says, or, for a
    /// rank the transport reaches, as the transport knows it (see
    /// [`Native::remote_size`]).
    pub(crate) fn segment_size(&self, rank: Rank, seg: SegmentId) -> Result<usize> {
        self.check_rank(rank)?;
        if let Some(t) = self.to_node_of(rank) {
            return self.remote_size(t, rank, seg);
        }
        if self.entry(rank, seg).is_none() {
            return Err(Error::SegmentNotFound { rank, segment: seg });
        }
        let entry = &self.job.slot(rank as usize).segments[seg as usize];
        Ok(entry.size.load(SeqCst) as usize)
    }

    /// Size of `rank`'s segment `segment` as the transport `t` knows it.
    ///
    /// A transport knows the segments registered with this rank, and may
    /// keep a deleted one's registration (GPI-2 does). For a rank of this
    /// host the directory tells a missing or deleted segment
    /// ([`Error::SegmentNotFound`]) from one not registered with this rank
    /// ([`Error::SegmentNotRegistered`]); for a rank of another host neither
    /// is visible: an unknown segment is [`Error::SegmentNotRegistered`],
    /// and an access to a segment its owner deleted is not detected (as in
    /// GPI-2; the owner keeps such memory until it terminates, so the
    /// access does no harm).
    pub(crate) fn remote_size(
        &self,
        t: &dyn Transport,
        rank: Rank,
        segment: SegmentId,
    ) -> Result<usize> {
        if self.same_host(rank) && self.entry(rank, segment).is_none() {
            return Err(Error::SegmentNotFound { rank, segment });
        }
        t.remote_size(rank, segment)
            .ok_or(Error::SegmentNotRegistered { rank, segment })
    }

    /// Make `seg` a new segment of this rank (of `size` bytes) from the
    /// object `make` creates under the key it is given.
    pub(crate) fn add_segment(
        &self,
        seg: SegmentId,
        size: usize,
        make: impl FnOnce(&SegmentKey) -> io::Result<SegmentObject>,
    ) -> Result<()> {
        let _w = lock(&self.tables.local_writer);
        self.check_free(seg)?;
        let key = SegmentKey {
            names: self.names(),
            segment: seg,
            id: ObjectId {
                kind: ObjectKind::Segment,
                owner: self.rank,
                number: self.tables.next_object.fetch_add(1, SeqCst),
            },
        };
        let obj = make(&key)
            .map_err(|e| Error::making(format!("the shared memory of segment {seg}"), size, e))?;
        obj.register(self.rank);
        let obj = self.install(seg, obj);
        self.bind_transport(seg, &obj, false)
    }

    /// Where `len` bytes at `ptr` lie among this rank's segments: inside
    /// the data of one (the object that holds that data, and the offset
    /// in it), or apart from all. An error if they overlap a segment
    /// without lying inside it, or lie in a window's memory.
    pub(crate) fn segment_around(
        &self,
        ptr: *const u8,
        len: usize,
    ) -> Result<Option<(Arc<SegmentObject>, usize)>> {
        let start = ptr as usize;
        let end = start.checked_add(len).ok_or_else(|| {
            Error::InvalidArgument(format!("{len} bytes at {ptr:p} run past the address space"))
        })?;
        let pin = self.tables.epochs.pin();
        for s in 0..job::SEGMENT_SLOTS {
            let Some(obj) = self.tables.local[s].get_arc(&pin) else {
                continue;
            };
            let (d, n) = (obj.data() as usize, obj.size());
            if end <= d || d + n <= start {
                continue;
            }
            let within = d <= start && end <= d + n;
            let window = obj.id().kind == ObjectKind::Window;
            if window || !within {
                let what = if within { "lie in" } else { "overlap" };
                let kind = if window { "window" } else { "segment" };
                return Err(Error::InvalidArgument(format!(
                    "{len} bytes at {ptr:p} {what} the memory of {kind} {s} ({n} bytes at \
                     {:p}): memory bound as a segment must lie inside one segment of this \
                     rank or apart from all",
                    obj.data()
                )));
            }
            return Ok(Some(match obj.inside_of() {
                Some((source, off)) => (source.clone(), off + (start - d)),
                None => (obj.clone(), start - d),
            }));
        }
        Ok(None)
    }

    /// Make `obj` (a window of this rank's node) this rank's segment `seg`.
    pub(crate) fn add_window(&self, seg: SegmentId, obj: SegmentObject) -> Result<()> {
        let _w = lock(&self.tables.local_writer);
        self.check_free(seg)?;
        let obj = self.install(seg, obj);
        self.bind_transport(seg, &obj, true)
    }

    /// Bind a new segment or window as the transport's segment too; undo
    /// the segment if that fails.
    fn bind_transport(&self, seg: SegmentId, obj: &Arc<SegmentObject>, window: bool) -> Result<()> {
        let Some(t) = self.transport() else {
            return Ok(());
        };
        t.bind(seg, obj, window).inspect_err(|_| {
            let entry = &self.job.slot(self.rank as usize).segments[seg as usize];
            entry.object.store(0, SeqCst);
            if let Some(o) = self.tables.local[seg as usize].replace(None, &self.tables.epochs) {
                if o.id().owner == self.rank && !window {
                    o.unlink();
                }
            }
        })
    }

    fn check_free(&self, seg: SegmentId) -> Result<()> {
        if self.tables.local[seg as usize]
            .get(&self.tables.epochs.pin())
            .is_some()
        {
            return Err(Error::SegmentExists { segment: seg });
        }
        Ok(())
    }

    /// Publish `obj` as segment `seg`: in the local table, then in the
    /// directory where peers find it. Callers hold `local_writer`.
    fn install(&self, seg: SegmentId, obj: SegmentObject) -> Arc<SegmentObject> {
        let entry = &self.job.slot(self.rank as usize).segments[seg as usize];
        let id = obj.id();
        entry.size.store(obj.size() as u64, SeqCst);
        let obj = Arc::new(obj);
        self.tables.local[seg as usize].replace(Some(obj.clone()), &self.tables.epochs);
        entry.object.store(id.pack(), SeqCst);
        obj
    }

    /// Delete segment `seg` of this rank (for a window, this rank's use of
    /// it; its creator also removes its name).
    pub(crate) fn remove_segment(&self, seg: SegmentId) -> Result<()> {
        let _w = lock(&self.tables.local_writer);
        let entry = &self.job.slot(self.rank as usize).segments[seg as usize];
        if entry.object.swap(0, SeqCst) == 0 {
            return Err(Error::SegmentNotFound {
                rank: self.rank,
                segment: seg,
            });
        }
        if let Some(t) = self.transport() {
            t.unbind(seg);
        }
        if let Some(obj) = self.tables.local[seg as usize].replace(None, &self.tables.epochs) {
            if obj.id().owner == self.rank {
                obj.unlink();
            }
            // A rank of another host cannot see the deletion and may still
            // write through the transport (GPI-2's device writes straight
            // into this memory): keep the memory until this rank terminates.
            // Not the caller's own memory (`segment_bind`): it goes back to
            // the caller now, as `segment_delete` promises.
            if !obj.is_user_memory()
                && self.transport().is_some_and(|t| t.writes_after_delete())
                && (0..self.nranks() as Rank).any(|r| !self.same_host(r) && obj.is_registered(r))
            {
                lock(&self.tables.retired).push(obj);
            }
        }
        Ok(())
    }

    /// Open the window `key` that this node's leader creates, waiting until
    /// `deadline` for it to appear; fails if a rank of `node` dies first.
    pub(crate) fn open_window(
        &self,
        key: &SegmentKey,
        node: &[Rank],
        deadline: Deadline,
    ) -> Result<SegmentObject> {
        poll_with_backoff(deadline, || {
            self.member_faults(node)?;
            match SegmentObject::open(key) {
                Ok(o) => Ok(Some(o)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::system(
                    format!("opening the window of segment {}", key.segment),
                    e,
                )),
            }
        })
    }

    /// Ids of this rank's segments, ascending.
    pub(crate) fn segment_ids(&self) -> Vec<SegmentId> {
        let pin = self.tables.epochs.pin();
        (0..job::SEGMENT_SLOTS)
            .filter(|&s| self.tables.local[s].get(&pin).is_some())
            .map(|s| s as SegmentId)
            .collect()
    }

    /// The inbox of `rank`, a rank of this host, mapped on first use.
    pub(crate) fn peer_inbox(&self, rank: Rank) -> Result<&Inbox> {
        debug_assert!(self.same_host(rank), "the inbox of another host's rank");
        if rank == self.rank {
            return Ok(&self.inbox);
        }
        let cell = &self.tables.peer_inboxes[rank as usize];
        if let Some(i) = cell.get() {
            return Ok(i);
        }
        let inbox = Inbox::open(self.names(), rank as usize)
            .map_err(|e| Error::system(format!("mapping the passive inbox of rank {rank}"), e))?;
        let _ = cell.set(inbox);
        Ok(cell.get().expect("set above"))
    }

    /// Move notifications `ids` of segment `seg` (object `obj`) that came
    /// from other nodes through the transport into `obj`'s table; nothing
    /// without a transport.
    #[inline]
    pub(crate) fn pump(&self, seg: SegmentId, obj: &SegmentObject, ids: std::ops::Range<u32>) {
        if let Some(t) = self.transport() {
            t.pump(seg, obj, ids);
        }
    }
}
