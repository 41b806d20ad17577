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
/// GPI-2 does the same, `scripts/gpi2/group_aba.c`). And GPI-2's TCP device
/// writes what a peer sends into the address it was given, unchecked: a
/// member still in a barrier of the older group (it learnt of a failure
/// later than this rank, say) writes into that group's buffer after this
/// rank freed it. So every commit makes a new GPI-2 group, in two
/// handshakes among the members ([`Pair`]): first each tells the others
/// that it reached this commit (it is done with any older group of the
/// id), and only then deletes its older group and makes the new one; then
/// each tells the others that it holds the new one, and only then calls
/// `gaspi_group_commit`: the check meets new incarnations only, and no
/// member of the new group writes into a freed one.
///
/// After our delete a committed twin with no collective unfinished stays
/// in GPI-2, unused, until the id is committed again (GPI-2 and we both
/// hand out the lowest free id, and kept twins sit on ids free on our
/// side, so the ids stay equal); any other (never committed, a collective
/// that timed out and was abandoned) is deleted at once, so that no peer
/// can take it for the one it waits for.
#[derive(Debug)]
pub(super) struct Twin {
    /// Members of the commit being made, or made last, ascending.
    pub(super) members: Vec<Rank>,
    /// What GPI-2's group under the id holds.
    pub(super) held: Held,
    /// Whether no collective on it is unfinished.
    pub(super) settled: bool,
    /// Handshakes of the commit being made that ended (0, 1 or 2).
    pub(super) handshakes: u8,
    /// Members that have not yet answered the handshake under way; `None`:
    /// this rank has not told them yet.
    pub(super) waiting: Option<Vec<Rank>>,
}

/// What GPI-2's group under one of our ids holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// No members (just created in GPI-2).
    Empty,
    /// The members of the commit being made, not committed yet.
    Added,
    /// The members of the last commit, committed.
    Committed,
    /// An older incarnation (committed, or added for a commit given up):
    /// deleted once every member of the next commit said it reached it.
    Older,
}

impl Twin {
    /// A twin without members (just created in GPI-2).
    pub(super) fn empty() -> Twin {
        Twin {
            members: Vec::new(),
            held: Held::Empty,
            settled: true,
            handshakes: 0,
            waiting: None,
        }
    }

    /// Whether it may stay in GPI-2 after our delete.
    pub(super) fn keepable(&self) -> bool {
        match self.held {
            Held::Empty => true,
            Held::Committed | Held::Older => self.settled,
            Held::Added => false,
        }
    }

    /// A new incarnation of the id with `members`: what GPI-2 holds is
    /// older now, and no handshake has begun.
    pub(super) fn prepare(&mut self, members: Vec<Rank>) {
        if self.held != Held::Empty {
            self.held = Held::Older;
        }
        self.members = members;
        self.handshakes = 0;
        self.waiting = None;
    }
}

/// How far this rank and one peer got in telling each other about new
/// twins of one group id: the *epoch* is the number of handshakes (two per
/// commit, see [`Twin`]) in which this rank heard from the peer. For a
/// handshake this rank notifies the peer `epoch + 1` and waits until the
/// peer notified at least that much. Notifications of one id overwrite
/// each other, hence numbers that only grow rather than messages to be
/// counted: a peer that moved on to its next handshake before this rank
/// looked notified `epoch + 2`, which also answers this handshake (and the
/// next: the peer holds its new group, so it reached the commit too).
///
/// A member that gives a commit up in a handshake after its peer heard
/// from it, but before it heard from the peer, stays one epoch behind that
/// peer; at their next handshake of the id its word repeats the number the
/// peer last heard, and a *new* notification of that number (each is
/// taken, so it was sent since) answers the peer's handshake: the peer
/// keeps its epoch, and the pair is even again. (The lagging member then
/// takes the peer's word of that handshake as the answer to its own, one
/// handshake further: after a commit given up in its first handshake, the
/// next commit's second handshake may end one step early for it.)
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Pair {
    /// Handshakes in which this rank heard from the peer.
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
