//! What the engine's remote transport (GPI-2, feature `gpi2`) is asked to
//! do, in types that exist with or without the feature, and the stand-in
//! transport of builds without it (which never exists at run time).

#![cfg_attr(not(feature = "gpi2"), allow(dead_code))]

use crate::types::{NotificationId, NotificationValue, SegmentId};

/// Notification ids a write can carry to another node: `0..IDS`.
pub(crate) const IDS: NotificationId = 65_536;
/// The GPI-2 notification id the relay turns into a wake-up of the node.
pub(crate) const DOORBELL: NotificationId = IDS;
/// GPI-2 queues used: all it has; the runtime's own queue is the last.
pub(crate) const QUEUES: u32 = 16;
/// Environment variable with the base of GPI-2's ports for this job: the SN daemon listens on
/// `base + local rank` and `base + 256 + local rank`, the TCP device on
/// `base + 512 + local rank`.
pub(crate) const PORT_VAR: &str = "GASPI_GPI2_PORT";
/// Ports a job of `n` ranks on one host occupies above its base.
pub(crate) const PORT_SPAN: u16 = 768;

/// Longest nap of a passive sender waiting for its acknowledgement from
/// another host, and of a receiver pulling other hosts' messages itself.
pub(crate) const PASSIVE_NAP: std::time::Duration = std::time::Duration::from_micros(100);

/// Combines two partial allreduce results of adjacent member ranges,
/// `(lower, upper, out)`, as bytes.
pub(crate) type Combine<'a> = dyn FnMut(&[u8], &[u8], &mut [u8]) + 'a;

/// An atomic as GPI-2 offers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    FetchAdd(u64),
    CompareSwap { old: u64, new: u64 },
}

impl AtomicOp {
    /// Run it on a word of this node; returns the old value.
    pub(crate) fn apply(self, w: &std::sync::atomic::AtomicU64) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        match self {
            AtomicOp::FetchAdd(v) => w.fetch_add(v, SeqCst),
            AtomicOp::CompareSwap { old, new } => {
                match w.compare_exchange(old, new, SeqCst, SeqCst) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
    }
}

/// One transfer: (segment, offset) here and there, and its size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transfer {
    pub(crate) local: (SegmentId, u64),
    pub(crate) remote: (SegmentId, u64),
    pub(crate) size: u64,
}

/// What a list of transfers is, with its notification: for writes (segment
/// of the target, id, value), for reads (local segment, id; GPI-2 sets 1).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Post {
    Write(Option<(SegmentId, NotificationId, NotificationValue)>),
    Read(Option<(SegmentId, NotificationId)>),
}

/// The transport of a build without feature `gpi2`: no value of it exists,
/// so every call site compiles and none runs.
#[cfg(not(feature = "gpi2"))]
#[derive(Debug)]
pub(crate) enum Gpi2 {}

#[cfg(not(feature = "gpi2"))]
#[allow(clippy::unused_self, dead_code)]
impl Gpi2 {
    pub(crate) fn bind(
        &self,
        _: SegmentId,
        _: &std::sync::Arc<crate::engine::segment::SegmentObject>,
        _: bool,
    ) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn unbind(&self, _: SegmentId) {
        match *self {}
    }
    pub(crate) fn register(
        &self,
        _: SegmentId,
        _: crate::Rank,
        _: crate::Timeout,
    ) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn remote_size(&self, _: crate::Rank, _: SegmentId) -> Option<usize> {
        match *self {}
    }
    pub(crate) fn post(
        &self,
        _: crate::Rank,
        _: &[Transfer],
        _: Post,
        _: crate::QueueId,
    ) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn ring(
        &self,
        _: crate::Rank,
        _: SegmentId,
        _: crate::QueueId,
    ) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn atomic(
        &self,
        _: crate::Rank,
        _: SegmentId,
        _: usize,
        _: AtomicOp,
        _: crate::Timeout,
    ) -> crate::Result<u64> {
        match *self {}
    }
    pub(crate) fn wait(&self, _: crate::QueueId, _: crate::Timeout) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn corrupt_ranks(&self) -> Vec<crate::Rank> {
        match *self {}
    }
    pub(crate) fn passive_pump(&self) -> bool {
        match *self {}
    }
    pub(crate) fn purge(&self, _: crate::QueueId, _: crate::Timeout) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn flush(
        &self,
        _: crate::QueueId,
        _: (SegmentId, u64),
        _: crate::Timeout,
    ) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn pump(
        &self,
        _: SegmentId,
        _: &crate::engine::segment::SegmentObject,
        _: std::ops::Range<NotificationId>,
    ) {
        match *self {}
    }
    pub(crate) fn term(&self, _: bool, _: bool) {
        match *self {}
    }
    pub(crate) fn relay_enable(
        &self,
        _: crate::engine::inbox::Inbox,
        _: crate::engine::job::JobBlock,
        _: std::ops::Range<usize>,
        _: bool,
    ) {
        match *self {}
    }
    /// # Safety
    /// As the GPI-2 engine's.
    pub(crate) unsafe fn passive_send(
        &self,
        _: crate::Rank,
        _: *const u8,
        _: usize,
        _: crate::types::Deadline,
        _: impl Fn(crate::Rank) -> crate::Result<()>,
    ) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn group_create(&self, _: u8) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn group_delete(&self, _: u8) {
        match *self {}
    }
    pub(crate) fn group_prepare(&self, _: u8, _: &[crate::Rank]) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn group_commit(&self, _: u8, _: crate::Timeout) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn barrier(&self, _: u8, _: crate::Timeout) -> crate::Result<()> {
        match *self {}
    }
    pub(crate) fn allreduce_ordered(
        &self,
        _: u8,
        _: usize,
        _: &[u8],
        _: &mut [u8],
        _: &mut Combine<'_>,
        _: crate::Timeout,
    ) -> crate::Result<()> {
        match *self {}
    }
}

#[cfg(feature = "gpi2")]
pub(crate) use super::gpi2::Gpi2;
