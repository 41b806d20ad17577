//! Memory lent to a transport's nonblocking operations ([`Lent`]): a
//! range of a window that a message is sent from or received into
//! directly, without a copy through a buffer of the transport's own.
//!
//! The transport may use the range after the call that lent it returned
//! (MPI reads a send's bytes, or writes a receive's, until the request
//! completes), so a [`Lent`] holds what owns the memory (the window's
//! mapping, an `Arc`): a request still unfinished when its caller gave up
//! keeps the mapping alive, and never reaches memory that was unmapped.
//! Who may touch the bytes meanwhile is the lender's promise, made where a
//! [`Lent`] is made (`unsafe`) and stated by the calls that take one
//! ([`Transport::keyed_send`], [`Transport::keyed_take`]).
//!
//! [`Transport::keyed_send`]: super::transport::Transport::keyed_send
//! [`Transport::keyed_take`]: super::transport::Transport::keyed_take

// Only the MPI transport reads lent memory so far.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

use std::sync::Arc;

/// `len` bytes at `ptr`, kept mapped by `keep` (see the module docs).
#[derive(Clone)]
pub(crate) struct Lent {
    keep: Arc<dyn Send + Sync>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `ptr` points into memory owned by `keep` (Send + Sync), which
// lives as long as this value; what a thread may do with the bytes is the
// lender's promise (`Lent::new`), not a property of the pointer.
unsafe impl Send for Lent {}
// SAFETY: as Send; `&Lent` gives only the address and the length.
unsafe impl Sync for Lent {}

impl Lent {
    /// `len` bytes at `ptr`, inside memory that `keep` owns.
    ///
    /// # Safety
    /// `ptr .. ptr + len` is valid memory for as long as `keep` (any clone
    /// of it) lives, and the lender keeps the promises of the call it lends
    /// it to about who reads or writes those bytes until the transport is
    /// done with them.
    pub(crate) unsafe fn new(keep: Arc<dyn Send + Sync>, ptr: *mut u8, len: usize) -> Lent {
        Lent { keep, ptr, len }
    }

    /// The first byte's address.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether `other` lends the same bytes.
    pub(crate) fn same(&self, other: &Lent) -> bool {
        self.ptr == other.ptr && self.len == other.len
    }

    /// Bytes `at .. at + len` of it (within it: checked by the caller,
    /// a panic otherwise).
    pub(crate) fn part(&self, at: usize, len: usize) -> Lent {
        assert!(
            at.checked_add(len).is_some_and(|end| end <= self.len),
            "a part outside the lent memory"
        );
        Lent {
            keep: self.keep.clone(),
            // `at` lies within the range (checked above), so the offset
            // stays inside the same allocation.
            ptr: self.ptr.wrapping_add(at),
            len,
        }
    }
}

impl Lent {
    /// Append its bytes to `out`.
    ///
    /// # Safety
    /// Nothing writes those bytes meanwhile (the lender's promise to the
    /// call that reads them).
    pub(crate) unsafe fn append_to(&self, out: &mut Vec<u8>) {
        // SAFETY: the lent range, valid while `keep` lives (`Lent::new`);
        // no writer meanwhile: the caller's promise.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(self.ptr, self.len) });
    }

    /// Copy `bytes` to its start.
    ///
    /// # Safety
    /// Nothing else reads or writes those bytes meanwhile (the lender's
    /// promise to the call that writes them).
    pub(crate) unsafe fn copy_in(&self, bytes: &[u8]) {
        assert!(bytes.len() <= self.len, "a copy beyond the lent memory");
        // SAFETY: inside the lent range (checked), valid while `keep`
        // lives; exclusive meanwhile: the caller's promise; `bytes` is
        // ordinary memory of ours, apart from any window.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, bytes.len()) }
    }
}

impl std::fmt::Debug for Lent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lent")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}
