//! MPI windows for the one-sided twins of `fence` and `lock` (feature
//! `mpi`). rsmpi has no RMA interface, so this module calls `MPI_Win_*`
//! through `mpi::ffi`; it holds all of gaspi-bench's unsafe MPI code.
//!
//! Contract of [`RawWin`]: created and freed collectively (every rank of
//! the communicator, in the same order), used from one thread, and its
//! memory read only by [`RawWin::local`] when no access to it can be in
//! flight (after a fence, or after the accessors' unlocks and a barrier).

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use std::os::raw::{c_int, c_void};

fn check(rc: c_int, call: &str) {
    assert_eq!(rc, 0, "{call} failed with MPI error {rc}");
}

/// An `MPI_Win_allocate`d window of `len` u64 per rank, zeroed.
pub struct RawWin {
    win: ffi::MPI_Win,
    base: *mut u64,
    len: usize,
}

impl RawWin {
    /// `MPI_Win_allocate` over `comm` (collective).
    pub fn allocate(comm: &SimpleCommunicator, len: usize) -> RawWin {
        let mut base: *mut u64 = std::ptr::null_mut();
        // SAFETY: reading an extern static handle of the MPI library.
        let mut win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: MPI writes the base address and the handle through the
        // two valid pointers; the info handle is MPI_INFO_NULL and the
        // communicator a live one; every rank calls this (collective).
        let rc = unsafe {
            ffi::MPI_Win_allocate(
                (len.max(1) * 8) as ffi::MPI_Aint,
                8,
                ffi::RSMPI_INFO_NULL,
                comm.as_raw(),
                (&mut base as *mut *mut u64).cast::<c_void>(),
                &mut win,
            )
        };
        check(rc, "MPI_Win_allocate");
        // SAFETY: MPI allocated len u64 at base; nobody accesses the
        // window before the first synchronisation call.
        unsafe { std::ptr::write_bytes(base, 0, len) };
        RawWin { win, base, len }
    }

    /// `MPI_Win_fence(assert)`.
    pub fn fence(&self, assert: u32) {
        // SAFETY: a live window; collective, called by every rank.
        check(
            unsafe { ffi::MPI_Win_fence(assert as c_int, self.win) },
            "MPI_Win_fence",
        );
    }

    /// `MPI_Put` of `data` to element `disp` of `target`.
    pub fn put(&self, data: &[u64], target: i32, disp: usize) {
        assert!(disp + data.len() <= self.len, "put past the window");
        // SAFETY: `data` is valid for its length until the epoch's
        // synchronisation, which the caller reaches before dropping it
        // (every put here is followed by a fence, flush or unlock in the
        // same function); the target range is inside every rank's window.
        let rc = unsafe {
            ffi::MPI_Put(
                data.as_ptr().cast(),
                data.len() as c_int,
                ffi::RSMPI_UINT64_T,
                target,
                disp as ffi::MPI_Aint,
                data.len() as c_int,
                ffi::RSMPI_UINT64_T,
                self.win,
            )
        };
        check(rc, "MPI_Put");
    }

    /// `MPI_Win_lock(EXCLUSIVE or SHARED, target)`.
    pub fn lock(&self, exclusive: bool, target: i32) {
        let kind = if exclusive {
            ffi::MPI_LOCK_EXCLUSIVE
        } else {
            ffi::MPI_LOCK_SHARED
        };
        // SAFETY: a live window and a valid rank.
        check(
            unsafe { ffi::MPI_Win_lock(kind as c_int, target, 0, self.win) },
            "MPI_Win_lock",
        );
    }

    /// `MPI_Win_unlock(target)`.
    pub fn unlock(&self, target: i32) {
        // SAFETY: a live window, locked by this rank.
        check(
            unsafe { ffi::MPI_Win_unlock(target, self.win) },
            "MPI_Win_unlock",
        );
    }

    /// `MPI_Win_lock_all(0)`.
    pub fn lock_all(&self) {
        // SAFETY: a live window.
        check(
            unsafe { ffi::MPI_Win_lock_all(0, self.win) },
            "MPI_Win_lock_all",
        );
    }

    /// `MPI_Win_unlock_all()`.
    pub fn unlock_all(&self) {
        // SAFETY: a live window in a lock_all epoch of this rank.
        check(
            unsafe { ffi::MPI_Win_unlock_all(self.win) },
            "MPI_Win_unlock_all",
        );
    }

    /// `MPI_Win_flush(target)`.
    pub fn flush(&self, target: i32) {
        // SAFETY: a live window in a passive epoch of this rank.
        check(
            unsafe { ffi::MPI_Win_flush(target, self.win) },
            "MPI_Win_flush",
        );
    }

    /// A copy of this rank's elements (see the module's contract).
    pub fn local(&self) -> Vec<u64> {
        // SAFETY: `base` holds `len` u64 for the window's life; by the
        // contract no access to them is in flight.
        unsafe { std::slice::from_raw_parts(self.base, self.len) }.to_vec()
    }
}

impl Drop for RawWin {
    fn drop(&mut self) {
        // SAFETY: a live window, freed once, collectively (the contract).
        let rc = unsafe { ffi::MPI_Win_free(&mut self.win) };
        check(rc, "MPI_Win_free");
    }
}
