//! What GPI-2's twin of one of our groups holds.

use crate::types::Rank;

/// What GPI-2's group of one of our ids holds.
///
/// GPI-2 cannot tell two incarnations of a group apart: re-creating a group
/// resets its collective counters and buffers, and `gaspi_group_commit`
/// checks only the size and the xor of the member list. A member still
/// finishing the last collective of the old incarnation then takes the
/// first one of the new incarnation for it (its sync byte has the same
/// value at the same place), and a member committing early fetches the
/// buffer address of a peer's old incarnation, which that peer frees
/// later. So a group committed across hosts is never deleted while it may
/// serve again: our delete keeps it, and committing the same member list
/// under the same id again reuses it; its counters go on, every member's
/// buffers stay where they were, and the commit only refreshes the
/// addresses. A group is deleted in GPI-2 only when its id is committed
/// with another member list (GPI-2's check then keeps the incarnations
/// apart: members wait until every peer has the new list) or when it is
/// in an unknown state (members added but never committed, a collective
/// that timed out and was abandoned).
#[derive(Debug)]
pub(super) struct Twin {
    /// Members added to it, ascending; empty: none yet.
    pub(super) members: Vec<Rank>,
    /// Whether it may be kept at our delete and serve a later commit: no
    /// members yet, or committed with no collective left unfinished.
    pub(super) reusable: bool,
}

impl Twin {
    pub(super) fn empty() -> Twin {
        Twin {
            members: Vec::new(),
            reusable: true,
        }
    }
}
