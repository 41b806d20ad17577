//! A node's window memory as the allreduce and the allgatherv use it: the
//! only place where the collectives touch a window's bytes directly (or
//! lend them to the engine's keyed messages), outside the engine's
//! one-sided operations.
//!
//! Every rank of a node maps the same window, and ranks of other nodes
//! write into it through the engine, so a slice of it is a promise about
//! what the others do meanwhile. [`NodeMemory::read`] and
//! [`NodeMemory::write`] (and [`NodeMemory::lend`]) are therefore `unsafe`;
//! each caller states, in its `SAFETY` comment, the step of the call protocol that
//! keeps writers away (slots alternating by call parity, claims on call
//! numbers, notifications seen before a read). Words and copies need no
//! such promise: they are atomics, and copies that no reference covers.

use crate::engine::lent::Lent;
use crate::engine::notify::NotificationTable;
use crate::engine::segment::{SegmentObject, Span};
use crate::windows::Window;
use bytemuck::Pod;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// A node's window, as the node reduction and the allgatherv use it.
#[derive(Debug)]
pub(crate) struct NodeMemory {
    obj: Arc<SegmentObject>,
}

impl NodeMemory {
    pub(crate) fn new(window: &Window) -> NodeMemory {
        NodeMemory {
            obj: window.object().clone(),
        }
    }

    /// The object, for the engine's calls on it (relaying notifications).
    pub(crate) fn object(&self) -> &SegmentObject {
        &self.obj
    }

    /// The window's notification table.
    pub(crate) fn table(&self) -> NotificationTable<'_> {
        self.obj.notifications()
    }

    /// The 8-byte word at byte `at` (8-byte aligned), as an atomic.
    pub(crate) fn word(&self, at: usize) -> &AtomicU64 {
        self.obj.atomic_u64(at)
    }

    /// Copy `bytes` to byte `at`; with `streaming`, by non-temporal stores
    /// (see `stream_choice.rs`).
    pub(crate) fn put(&self, at: usize, bytes: &[u8], streaming: bool) {
        self.obj.write_from(at, bytes, streaming)
    }

    /// `len` elements at byte `at`, to read.
    ///
    /// # Safety
    /// No rank of any node, and no other thread, writes these bytes while
    /// the slice lives.
    pub(crate) unsafe fn read<T: Pod>(&self, at: usize, len: usize) -> &[T] {
        // SAFETY: forwarded to the caller; bounds and alignment are checked
        // by the object (a panic, never an access outside the window).
        unsafe { self.obj.as_slice(at, len) }
    }

    /// `len` bytes at byte `at`, lent to the engine's keyed messages (sent
    /// from, or received into, where they lie); the lent value keeps the
    /// window mapped.
    ///
    /// # Safety
    /// The caller keeps the promises of the call it lends them to
    /// ([`Transport::keyed_send`], [`Transport::keyed_take`]) about who
    /// reads and writes these bytes until the engine is done with them.
    ///
    /// [`Transport::keyed_send`]: crate::engine::transport::Transport::keyed_send
    /// [`Transport::keyed_take`]: crate::engine::transport::Transport::keyed_take
    pub(crate) unsafe fn lend(&self, at: usize, len: usize) -> Lent {
        let ptr = Span {
            obj: &self.obj,
            off: at,
            len,
        }
        .ptr();
        let keep: Arc<dyn Send + Sync> = self.obj.clone();
        // SAFETY: `ptr .. ptr + len` lies inside the window (`Span::ptr`
        // checks it, a panic otherwise), mapped while `keep` (the object)
        // lives; the promises about access are forwarded to the caller.
        unsafe { Lent::new(keep, ptr, len) }
    }

    /// `len` elements at byte `at`, to write.
    ///
    /// # Safety
    /// Nothing else (any rank, any thread, any other slice) reads or
    /// writes these bytes while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn write<T: Pod>(&self, at: usize, len: usize) -> &mut [T] {
        // SAFETY: as `read`, with exclusivity promised by the caller.
        unsafe { self.obj.as_mut_slice(at, len) }
    }
}
