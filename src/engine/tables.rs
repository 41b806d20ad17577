//! The tables behind this rank's segment lookups (see `directory.rs`): its
//! own segments, its mappings of other ranks', the inboxes it mapped.

use super::epoch::{Epochs, Published};
use super::inbox::Inbox;
use super::job;
use super::segment::SegmentObject;
use crate::types::Rank;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};

/// An object of another rank (a segment, or a window of another node) as
/// this rank mapped it.
#[derive(Debug)]
pub(crate) struct PeerSegment {
    pub(crate) obj: SegmentObject,
    pub(crate) registered: AtomicBool,
}

pub(crate) type PeerRow = Box<[Published<PeerSegment>]>;

/// The tables behind the lookups.
#[derive(Debug)]
pub(crate) struct Tables {
    /// Readers of the two tables below pin these for one operation.
    pub(crate) epochs: Epochs,
    /// This rank's segments; creation and deletion hold `local_writer`.
    pub(crate) local: Box<[Published<SegmentObject>]>,
    pub(crate) local_writer: Mutex<()>,
    /// Objects of other ranks as mapped here, by owner and segment id (a
    /// node's window is mapped once, whichever of its ranks is addressed);
    /// remaps hold `peer_writer`.
    pub(crate) peers: Box<[OnceLock<PeerRow>]>,
    pub(crate) peer_writer: Mutex<()>,
    /// Deleted segments that ranks of other hosts may still write to.
    pub(crate) retired: Mutex<Vec<Arc<SegmentObject>>>,
    /// The inboxes of this host's ranks, mapped on first use.
    pub(crate) peer_inboxes: Box<[OnceLock<Inbox>]>,
    /// Numbers this rank's next segment object.
    pub(crate) next_object: AtomicU64,
}

impl Tables {
    pub(crate) fn new(nranks: usize) -> Tables {
        Tables {
            epochs: Epochs::default(),
            local: (0..job::SEGMENT_SLOTS)
                .map(|_| Published::default())
                .collect(),
            local_writer: Mutex::new(()),
            peers: (0..nranks).map(|_| OnceLock::new()).collect(),
            peer_writer: Mutex::new(()),
            retired: Mutex::new(Vec::new()),
            peer_inboxes: (0..nranks).map(|_| OnceLock::new()).collect(),
            next_object: AtomicU64::new(1),
        }
    }
}

impl Tables {
    /// The mappings of `owner`'s objects, made on first use.
    pub(crate) fn peer_row(&self, owner: Rank) -> &PeerRow {
        self.peers[owner as usize].get_or_init(|| {
            (0..job::SEGMENT_SLOTS)
                .map(|_| Published::default())
                .collect()
        })
    }
}
