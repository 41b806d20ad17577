//! Our segments and windows as GPI-2 segments: binding, registration,
//! and the sizes of other ranks' segments.

use super::Gpi2;
use super::codes::{check, ms, sid};
use super::relay::Bound;
use crate::config::RESERVED_SEGMENT;
use crate::engine::segment::SegmentObject;
use crate::engine::wait::lock;
use crate::error::Result;
use crate::types::{Rank, SegmentId, Timeout};
use gpi2_sys as sys;
use std::sync::Arc;

/// The word and bit of GPI-2 segment id `id` in a set of ids
/// (`Gpi2::described`, `Gpi2::parked`).
fn id_bit(id: sys::gaspi_segment_id_t) -> (usize, u64) {
    (id as usize / 64, 1 << (id % 64))
}

impl Gpi2 {
    /// Bind `obj`, this rank's segment or its node's window `segment`, as
    /// GPI-2 segment `segment`; a window's table is relayed.
    pub(crate) fn bind(
        &self,
        segment: SegmentId,
        obj: &Arc<SegmentObject>,
        window: bool,
    ) -> Result<()> {
        // GPI-2 refuses empty segments; one byte past an empty one is never
        // accessed (every range is checked against our size first).
        let size = obj.size().max(1) as u64;
        let mut described = lock(&self.described);
        let id = sid(segment);
        let (word, bit) = id_bit(id);
        let mut parked = lock(&self.parked);
        if parked[word] & bit != 0 {
            // SAFETY: plain call on an id GPI-2 binds (parked by `unbind`).
            let _ = unsafe { sys::gaspi_segment_delete(id) };
            parked[word] &= !bit;
        }
        drop(parked);
        // SAFETY: the memory is the object's mapping. This process
        // reaches it through GPI-2 only while the segment exists (every
        // call checks our table first); GPI-2's device writes what other
        // hosts send into it until the id is bound again or GPI-2 ends,
        // and the engine keeps it mapped that long wherever a rank of
        // another host registered it (`Directory::remove_segment`).
        let code = unsafe { sys::gaspi_segment_bind(id, obj.data().cast(), size, 0) };
        check("gaspi_segment_bind", code, None)?;
        described[word] |= bit;
        drop(described);
        lock(&self.shared.bound).push(Bound {
            segment,
            obj: obj.clone(),
            window,
        });
        Ok(())
    }

    /// Undo [`Gpi2::bind`] as far as this rank can see: the relay stops
    /// watching the segment, and the id is *parked*, still bound in GPI-2
    /// until it is bound again ([`Gpi2::bind`]) or GPI-2 ends. Ranks of
    /// other hosts keep their registration and cannot see the deletion:
    /// what they still send lands through GPI-2's device at the addresses
    /// they registered, the data in memory the engine keeps mapped (see
    /// `Directory::remove_segment`), the notifications in GPI-2's table of
    /// the segment, which `gaspi_segment_delete` would free (`free`: such
    /// a notification was seen to land in the memory of a segment made
    /// next, tests/hardening.rs
    /// `notifications_to_a_deleted_segment_harm_nobody`; where the table's
    /// pages are unmapped it kills the process with SIGSEGV).
    pub(crate) fn unbind(&self, segment: SegmentId) {
        let mut bound = lock(&self.shared.bound);
        if segment == RESERVED_SEGMENT {
            // Kept bound (see `Gpi2::kept`): only the relay lets it go.
            let obj = bound
                .iter()
                .find(|r| r.segment == segment)
                .map(|r| r.obj.clone());
            *lock(&self.kept) = obj;
            bound.retain(|r| r.segment != segment);
            return;
        }
        bound.retain(|r| r.segment != segment);
        drop(bound);
        let (word, bit) = id_bit(sid(segment));
        lock(&self.parked)[word] |= bit;
    }

    /// Let `rank` (on another node) access segment `segment`.
    pub(crate) fn register(&self, segment: SegmentId, rank: Rank, timeout: Timeout) -> Result<()> {
        // SAFETY: plain call.
        let code = unsafe { sys::gaspi_segment_register(sid(segment), rank, ms(timeout)) };
        check("gaspi_segment_register", code, Some(rank))
    }

    /// Size of segment `segment` of `rank` as GPI-2 knows it (registered
    /// with this rank), or `None`.
    pub(crate) fn remote_size(&self, rank: Rank, segment: SegmentId) -> Option<usize> {
        self.describe(segment).ok()?;
        let mut size: sys::gaspi_size_t = 0;
        // SAFETY: out pointer to a local.
        let code = unsafe { sys::gaspi_segment_size(sid(segment), rank, &mut size) };
        (code == sys::GASPI_SUCCESS && size > 0).then_some(size as usize)
    }

    /// Make sure GPI-2 has its table of remote descriptions of `segment`:
    /// GPI-2 creates it when the process binds the id or a peer registers
    /// one with it, and its production library reads the table without a
    /// check (`gaspi_segment_size` of an id nobody registered crashes).
    /// Binding the scratch page under the id for a moment creates it; the
    /// table stays after the delete. Nothing is sent to other ranks.
    fn describe(&self, segment: SegmentId) -> Result<()> {
        let id = sid(segment);
        let (word, bit) = id_bit(id);
        let mut described = lock(&self.described);
        if described[word] & bit != 0 {
            return Ok(());
        }
        // SAFETY: the scratch page is leaked, so valid for any binding;
        // the id is not bound here (binds mark it described, under this
        // lock), and it is deleted again at once.
        let code = unsafe { sys::gaspi_segment_bind(id, self.page as *mut _, 1, 0) };
        check("gaspi_segment_bind", code, None)?;
        // SAFETY: the segment just bound.
        unsafe { sys::gaspi_segment_delete(id) };
        described[word] |= bit;
        Ok(())
    }
}
