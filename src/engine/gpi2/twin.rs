//! What GPI-2's twins of our groups hold, and how far each pair of ranks
//! got in telling each other about new ones.

use crate::types::Rank;
use std::collections::BTreeMap;

/// What GPI-2's group of one of our ids holds.
///
/// GPI-2 cannot tell two incarnations of a group apart: `gaspi_group_commit`
/// checks only the size and the xor of a peer's member list under the id,
/// then takes the buffer address of whatever group the peer has there. A
/// peer that still holds an *older* group of the same id and members (it
/// has not reached this commit yet: it is finishing a collective of the
/// old one, or kept it since) passes that check, hands out the old
/// group's address, and frees it when it makes its own new one: the
/// committer's barrier writes then go nowhere and the group hangs (seen
/// with three ranks on three hosts making groups of two in turn; plain
/// GPI-2 does the same, `scripts/gpi2/group_aba.c`). So every commit here
/// makes a new GPI-2 group, and no member calls `gaspi_group_commit` before
/// every other member told it that it holds its new one too ([`Pair`]):
/// the check then meets only new incarnations.
///
/// After our delete a committed twin with no collective unfinished stays
/// in GPI-2, unused, until the id is committed again (GPI-2 and we both
/// hand out the lowest free id, and kept twins sit on ids free on our
/// side, so the ids stay equal); any other (never committed, a collective
/// that timed out and was abandoned) is deleted at once, so that no peer
/// can take it for the one it waits for.
#[derive(Debug)]
pub(super) struct Twin {
    /// Members added to it, ascending; empty: none yet.
    pub(super) members: Vec<Rank>,
    /// Whether `gaspi_group_commit` succeeded on it.
    pub(super) committed: bool,
    /// Whether no collective on it is unfinished.
    pub(super) settled: bool,
    /// Members that have not yet told this rank that they hold their new
    /// twin; `None`: this rank has not yet told them that it holds its own.
    pub(super) waiting: Option<Vec<Rank>>,
}

impl Twin {
    /// A twin without members (just created in GPI-2).
    pub(super) fn empty() -> Twin {
        Twin::with(Vec::new())
    }

    /// A new twin with `members` added.
    pub(super) fn with(members: Vec<Rank>) -> Twin {
        Twin {
            members,
            committed: false,
            settled: true,
            waiting: None,
        }
    }

    /// Whether it may stay in GPI-2 after our delete.
    pub(super) fn keepable(&self) -> bool {
        self.members.is_empty() || (self.committed && self.settled)
    }
}

/// How far this rank and one peer got in telling each other about new
/// twins of one group id: the *epoch* is the number of commits for which
/// this rank heard from the peer. For a commit this rank notifies the peer
/// `epoch + 1` and waits until the peer notified at least that much; a
/// peer notifies only after making its new twin, so its older twins are
/// gone by then. Notifications of one id overwrite each other, hence
/// numbers that only grow rather than messages to be counted: a peer
/// that moved on to its next commit before this rank looked notified
/// `epoch + 2`, which also answers this commit (and the next).
///
/// A member that gives a commit up after its peer heard from it, but
/// before it heard from the peer, stays one epoch behind that peer; at
/// their next commit of the id its word repeats the number the peer last
/// heard, and a *new* notification of that number (each is taken, so it
/// was sent since) tells the peer that it holds its new twin: the peer
/// keeps its epoch, and the pair is even again.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Pair {
    /// Commits for which this rank heard from the peer.
    pub(super) epoch: u32,
    /// The most the peer notified.
    pub(super) seen: u32,
}

/// GPI-2's twins of our groups, by id, and the pairs' epochs by (id, peer).
#[derive(Debug, Default)]
pub(super) struct Twins {
    pub(super) twins: BTreeMap<u8, Twin>,
    pub(super) pairs: BTreeMap<(u8, Rank), Pair>,
}
