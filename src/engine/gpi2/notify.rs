//! Relaying notifications: moving the values GPI-2 set in this process's
//! private table into the table our waiters watch (see the module
//! documentation of `gpi2`).

use super::codes::{DOORBELL, sid};
use crate::engine::segment::SegmentObject;
use crate::engine::transport::IDS;
use crate::types::{NotificationId, SegmentId};
use gpi2_sys as sys;
use std::ops::Range;

/// Returns how many notifications it moved.
pub(super) fn pump(segment: SegmentId, obj: &SegmentObject, ids: Range<NotificationId>) -> usize {
    let mut moved = 0;
    let end = ids.end.min(IDS).min(obj.notification_num());
    let mut begin = ids.start;
    let table = obj.notifications();
    while begin < end {
        let mut first: sys::gaspi_notification_id_t = 0;
        // SAFETY: out pointer to a local; the range is within GPI-2's
        // table (IDS + 1 ids) and the segment is bound while `obj` is ours.
        let code = unsafe {
            sys::gaspi_notify_waitsome(
                sid(segment),
                begin,
                end - begin,
                &mut first,
                sys::GASPI_TEST,
            )
        };
        if code != sys::GASPI_SUCCESS || first >= end {
            break;
        }
        let mut value: sys::gaspi_notification_t = 0;
        // SAFETY: out pointer to a local; `first` is in range.
        unsafe { sys::gaspi_notify_reset(sid(segment), first, &mut value) };
        if value != 0 {
            table.post(first, value);
            moved += 1;
        }
        begin = first + 1;
    }
    moved
}

/// Take the doorbell of the relayed window `segment` (object `obj`): a
/// wake-up for its node.
pub(super) fn doorbell(segment: SegmentId, obj: &SegmentObject) -> bool {
    let mut first: sys::gaspi_notification_id_t = 0;
    // SAFETY: out pointer to a local; DOORBELL is within GPI-2's table.
    let code = unsafe {
        sys::gaspi_notify_waitsome(sid(segment), DOORBELL, 1, &mut first, sys::GASPI_TEST)
    };
    if code != sys::GASPI_SUCCESS {
        return false;
    }
    let mut value = 0;
    // SAFETY: out pointer to a local.
    unsafe { sys::gaspi_notify_reset(sid(segment), DOORBELL, &mut value) };
    obj.notifications().ww.wake();
    true
}
