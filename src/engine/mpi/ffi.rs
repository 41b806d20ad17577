//! The MPI calls of the MPI engine: thin wrappers over rsmpi's raw
//! bindings (`mpi::ffi`), each a checked call that returns our error.
//! Those that hand MPI a buffer it uses after the call are `unsafe fn`s.
//!
//! Handles (communicators, the window, requests) are plain values in the
//! MPICH ABI (MPICH, Intel MPI) and pointers in Open MPI's; they are
//! wrapped so that the engine's threads may share them (the library runs
//! with `MPI_THREAD_MULTIPLE`).

use crate::engine::lent::Lent;
use crate::error::{Error, Result};
use mpi::ffi;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

/// An MPI handle that threads may share: MPI with `MPI_THREAD_MULTIPLE`
/// lets any thread use it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Handle<T>(pub(super) T);
// SAFETY: the handles are opaque values the MPI library owns; under
// MPI_THREAD_MULTIPLE (checked at start) every thread may pass them to MPI.
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above; nothing is reached through `&Handle` but copies.
unsafe impl<T> Sync for Handle<T> {}

pub(super) type Comm = Handle<ffi::MPI_Comm>;
pub(super) type Win = Handle<ffi::MPI_Win>;

/// An outstanding nonblocking message and the buffer MPI reads or fills:
/// the request owns it, so it lives as long as MPI may use it. Dropped
/// before it completed, the request is left to MPI (`MPI_Request_free`)
/// and its buffer leaked.
#[derive(Debug)]
pub(super) struct Request {
    handle: Handle<ffi::MPI_Request>,
    finished: bool,
    buf: Vec<u8>,
    /// Lent memory MPI reads or fills instead of `buf` ([`send_lent`],
    /// [`recv_lent`]): kept mapped until MPI is done with it.
    keep: Option<Lent>,
    /// Bytes a receive took ([`Request::test_count`]).
    received: usize,
}

macro_rules! konst {
    ($name:ident) => {{
        #[allow(unused_unsafe)]
        // SAFETY: an immutable handle constant rsmpi's C shim exports.
        let v = unsafe { ffi::$name };
        v
    }};
}

/// `MPI_REPLACE`, which rsmpi does not export: a fixed value in the MPICH
/// ABI (MPICH, Intel MPI, MVAPICH, Cray MPICH), recognised by the value of
/// `MPI_SUM`; `None` for other MPI libraries (Open MPI's handles are
/// pointers to objects of its own).
pub(super) fn replace_op() -> Option<ffi::MPI_Op> {
    const SUM: c_int = 0x5800_0003;
    const REPLACE: c_int = 0x5800_000d;
    if std::mem::size_of::<ffi::MPI_Op>() != std::mem::size_of::<c_int>() {
        return None;
    }
    let sum = konst!(RSMPI_SUM);
    // SAFETY: both types have the size of a c_int (checked above), and
    // every c_int is a valid bit pattern of either (MPICH's handle is a
    // plain integer; a mismatch is caught by the MPI_SUM check).
    unsafe {
        (std::mem::transmute_copy::<ffi::MPI_Op, c_int>(&sum) == SUM)
            .then(|| std::mem::transmute_copy::<c_int, ffi::MPI_Op>(&REPLACE))
    }
}

/// An MPI return code as our error.
pub(super) fn check(call: &'static str, code: c_int) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(Error::Engine {
        call,
        code,
        name: "an MPI error (the MPI library printed or returned its text)",
    })
}

pub(super) fn world() -> Comm {
    Handle(konst!(RSMPI_COMM_WORLD))
}

/// Whether MPI is initialised (and not finalised).
pub(super) fn initialized() -> bool {
    let (mut i, mut f) = (0, 0);
    // SAFETY: out pointers to locals; both calls are allowed at any time.
    unsafe {
        ffi::MPI_Initialized(&mut i);
        ffi::MPI_Finalized(&mut f);
    }
    i != 0 && f == 0
}

/// `MPI_Init_thread` asking for `MPI_THREAD_MULTIPLE`; the level given.
pub(super) fn init_thread() -> Result<c_int> {
    let mut provided = 0;
    // SAFETY: null argc/argv are allowed; out pointer to a local.
    let code = unsafe {
        ffi::MPI_Init_thread(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            konst!(RSMPI_THREAD_MULTIPLE),
            &mut provided,
        )
    };
    check("MPI_Init_thread", code)?;
    Ok(provided)
}

/// The thread level MPI was initialised with.
pub(super) fn thread_level() -> c_int {
    let mut l = 0;
    // SAFETY: out pointer to a local.
    unsafe { ffi::MPI_Query_thread(&mut l) };
    l
}

pub(super) fn thread_multiple() -> c_int {
    konst!(RSMPI_THREAD_MULTIPLE)
}

/// Whether MPI may be finalised when the process exits: the process's last
/// engine met the others at its last barrier. (MPICH's finalize waits for
/// every other rank: a process that exits without leaving its job, or
/// after a peer died, must not call it.)
static FINALIZE_AT_EXIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Finalise MPI when the process exits (`atexit`) if [`may_finalize`] said
/// so last: MPI may be initialised only once per process, so a process
/// that makes several contexts keeps it until then.
pub(super) fn finalize_at_exit() {
    extern "C" fn finalize() {
        if FINALIZE_AT_EXIT.load(std::sync::atomic::Ordering::SeqCst) && initialized() {
            // SAFETY: plain call at exit, once (registered once).
            unsafe { ffi::MPI_Finalize() };
        }
    }
    // SAFETY: registers a function with C linkage that takes nothing.
    unsafe { libc::atexit(finalize) };
}

/// Whether MPI is to be finalised at exit: only after every rank met at
/// the last barrier (else finalising could wait for a rank for ever).
pub(super) fn may_finalize(yes: bool) {
    FINALIZE_AT_EXIT.store(yes, std::sync::atomic::Ordering::SeqCst);
}

/// Errors on `comm` (and the window) are returned, not fatal.
pub(super) fn errors_return(comm: Comm) {
    // SAFETY: plain call on a valid communicator.
    unsafe { ffi::MPI_Comm_set_errhandler(comm.0, konst!(RSMPI_ERRORS_RETURN)) };
}

pub(super) fn rank_size(comm: Comm) -> (usize, usize) {
    let (mut r, mut n) = (0, 0);
    // SAFETY: out pointers to locals.
    unsafe {
        ffi::MPI_Comm_rank(comm.0, &mut r);
        ffi::MPI_Comm_size(comm.0, &mut n);
    }
    (r as usize, n as usize)
}

pub(super) fn dup(comm: Comm) -> Result<Comm> {
    let mut c = konst!(RSMPI_COMM_NULL);
    // SAFETY: out pointer to a local.
    check("MPI_Comm_dup", unsafe { ffi::MPI_Comm_dup(comm.0, &mut c) })?;
    errors_return(Handle(c));
    Ok(Handle(c))
}

/// The ranks of `comm` sharing memory with this one (`MPI_COMM_TYPE_SHARED`).
pub(super) fn split_shared(comm: Comm) -> Result<Comm> {
    let mut c = konst!(RSMPI_COMM_NULL);
    let (rank, _) = rank_size(comm);
    // SAFETY: out pointer to a local.
    let code = unsafe {
        ffi::MPI_Comm_split_type(
            comm.0,
            konst!(RSMPI_COMM_TYPE_SHARED),
            rank as c_int,
            konst!(RSMPI_INFO_NULL),
            &mut c,
        )
    };
    check("MPI_Comm_split_type", code)?;
    Ok(Handle(c))
}

pub(super) fn comm_free(mut comm: Comm) {
    // SAFETY: a communicator this engine made.
    unsafe { ffi::MPI_Comm_free(&mut comm.0) };
}

/// Allreduce of `v` (u64, in place) with `max` or sum.
pub(super) fn allreduce_u64(comm: Comm, v: &mut [u64], max: bool) -> Result<()> {
    let send = v.to_vec();
    let op = if max {
        konst!(RSMPI_MAX)
    } else {
        konst!(RSMPI_SUM)
    };
    // SAFETY: two buffers of v.len() u64s, alive for the call.
    let code = unsafe {
        ffi::MPI_Allreduce(
            send.as_ptr().cast(),
            v.as_mut_ptr().cast(),
            v.len() as c_int,
            konst!(RSMPI_UINT64_T),
            op,
            comm.0,
        )
    };
    check("MPI_Allreduce", code)
}

/// Every rank's `mine`, in rank order.
pub(super) fn allgather_u64(comm: Comm, mine: u64) -> Result<Vec<u64>> {
    let (_, n) = rank_size(comm);
    let mut all = vec![0u64; n];
    // SAFETY: one u64 sent, n received into a buffer of n.
    let code = unsafe {
        ffi::MPI_Allgather(
            (&mine as *const u64).cast(),
            1,
            konst!(RSMPI_UINT64_T),
            all.as_mut_ptr().cast(),
            1,
            konst!(RSMPI_UINT64_T),
            comm.0,
        )
    };
    check("MPI_Allgather", code)?;
    Ok(all)
}

// --- the window -------------------------------------------------------

/// A dynamic window over `comm`, in a passive epoch to every rank
/// (`MPI_Win_lock_all`) for its whole life.
pub(super) fn window(comm: Comm) -> Result<Win> {
    let mut w = konst!(RSMPI_WIN_NULL);
    // SAFETY: out pointer to a local.
    let code = unsafe { ffi::MPI_Win_create_dynamic(konst!(RSMPI_INFO_NULL), comm.0, &mut w) };
    check("MPI_Win_create_dynamic", code)?;
    // SAFETY: plain calls on the new window.
    unsafe { ffi::MPI_Win_set_errhandler(w, konst!(RSMPI_ERRORS_RETURN)) };
    // SAFETY: as above.
    check("MPI_Win_lock_all", unsafe { ffi::MPI_Win_lock_all(0, w) })?;
    Ok(Handle(w))
}

/// End the window's epoch and free it (collective).
pub(super) fn window_free(mut win: Win) {
    // SAFETY: the window made by `window`, used by no other thread now.
    unsafe {
        ffi::MPI_Win_unlock_all(win.0);
        ffi::MPI_Win_free(&mut win.0);
    }
}

/// The address MPI uses for `p` in a dynamic window.
pub(super) fn address(p: *const u8) -> u64 {
    let mut a: ffi::MPI_Aint = 0;
    // SAFETY: out pointer to a local; `p` is only converted.
    unsafe { ffi::MPI_Get_address(p.cast(), &mut a) };
    a as u64
}

/// Expose `len` bytes at `base` through `win`.
///
/// # Safety
/// The memory stays valid until [`detach`], and other ranks may write it
/// at any time until then.
pub(super) unsafe fn attach(win: Win, base: *mut u8, len: usize) -> Result<()> {
    // SAFETY: the caller vouches for the memory.
    let code = unsafe { ffi::MPI_Win_attach(win.0, base.cast(), len as ffi::MPI_Aint) };
    check("MPI_Win_attach", code)
}

pub(super) fn detach(win: Win, base: *mut u8) {
    // SAFETY: memory attached before (an error otherwise, ignored).
    unsafe { ffi::MPI_Win_detach(win.0, base.cast::<c_void>()) };
}

/// Largest count of one MPI transfer: longer transfers go as several.
///
/// 64 KiB, measured: MPICH 4.0 over UCX moves a put or get to a dynamic
/// window through active messages, and one of more than 64 KiB takes a
/// slower protocol: a 1 MiB put took 1160 us as one `MPI_Put` and 82-100 us
/// as sixteen of 64 KiB (4 MiB: 5007 us against 482 us), one flush after
/// them all (2 ranks, emulated hosts, AMD EPYC).
const CHUNK: usize = 64 << 10;

/// Put `len` bytes at `local` to `disp` of `rank` (`write`), or get them
/// from there into `local`, in chunks of at most 1 GiB.
///
/// # Safety
/// `local..local+len` stays valid, and unchanged (a put) or untouched (a
/// get) until the operation completes (a flush of `rank`); the remote
/// range is attached there.
pub(super) unsafe fn transfer(
    win: Win,
    write: bool,
    local: *mut u8,
    len: usize,
    rank: usize,
    disp: u64,
) -> Result<()> {
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK);
        let (count, at) = (n as c_int, (disp + done as u64) as ffi::MPI_Aint);
        let byte = konst!(RSMPI_UINT8_T);
        // SAFETY: the caller vouches for both ranges.
        let code = unsafe {
            let here = local.add(done).cast();
            if write {
                ffi::MPI_Put(here, count, byte, rank as c_int, at, count, byte, win.0)
            } else {
                ffi::MPI_Get(here, count, byte, rank as c_int, at, count, byte, win.0)
            }
        };
        check(if write { "MPI_Put" } else { "MPI_Get" }, code)?;
        done += n;
    }
    Ok(())
}

/// How [`accumulate`] changes a remote word.
#[derive(Clone, Copy, Debug)]
pub(super) enum Change {
    /// Store a 32-bit value (`MPI_REPLACE`).
    Store32(u32),
    /// `|=` on a 64-bit word (`MPI_BOR`).
    Or64(u64),
    /// `+=` on a 64-bit word (`MPI_SUM`).
    Add64(u64),
}

/// Element-atomic `changes` (each of the word at its displacement) of
/// `rank`'s window (`MPI_Accumulate`), complete at the target on return:
/// one flush for all of them. (Completing each locally first, as its own
/// origin buffer would need, costs a round trip more per change with
/// MPICH over UCX, whose local flush is a full one.)
pub(super) fn accumulate(win: Win, rank: usize, changes: &[(u64, Change)]) -> Result<()> {
    // SAFETY: `changes` is borrowed until the flush below, which
    // completes every operation issued (after an error too).
    let issued = unsafe { issue_accumulates(win, rank, changes) };
    let flushed = flush(win, rank);
    issued.and(flushed)
}

/// [`accumulate`] without the flush: the changes are issued, and complete
/// at the target with the next flush of `rank` ([`flush`], or the window's
/// unlock) that begins after this returns.
///
/// # Safety
/// MPI reads each change's value from `changes` until then (after an
/// error too, for those issued before it): the caller keeps them where
/// they are, unchanged, until such a flush has returned.
pub(super) unsafe fn issue_accumulates(
    win: Win,
    rank: usize,
    changes: &[(u64, Change)],
) -> Result<()> {
    for (disp, change) in changes {
        let (origin, datatype, op): (*const c_void, _, _) = match change {
            Change::Store32(v) => (
                (v as *const u32).cast(),
                konst!(RSMPI_UINT32_T),
                replace_op().expect("checked at start"),
            ),
            Change::Or64(v) => (
                (v as *const u64).cast(),
                konst!(RSMPI_UINT64_T),
                konst!(RSMPI_BOR),
            ),
            Change::Add64(v) => (
                (v as *const u64).cast(),
                konst!(RSMPI_UINT64_T),
                konst!(RSMPI_SUM),
            ),
        };
        // SAFETY: one element of `changes`, which the caller keeps in place
        // until a flush of `rank` completes the operation (this function's
        // contract).
        let code = unsafe {
            ffi::MPI_Accumulate(
                origin,
                1,
                datatype,
                rank as c_int,
                *disp as ffi::MPI_Aint,
                1,
                datatype,
                op,
                win.0,
            )
        };
        check("MPI_Accumulate", code)?;
    }
    Ok(())
}

/// Atomic fetch-and-add on the u64 at `disp` of `rank`; the old value.
pub(super) fn fetch_add(win: Win, rank: usize, disp: u64, add: u64) -> Result<u64> {
    let mut old = 0u64;
    // SAFETY: one u64 in, one out, both locals; the flush below completes
    // the operation before they go.
    let code = unsafe {
        ffi::MPI_Fetch_and_op(
            (&add as *const u64).cast(),
            (&mut old as *mut u64).cast(),
            konst!(RSMPI_UINT64_T),
            rank as c_int,
            disp as ffi::MPI_Aint,
            konst!(RSMPI_SUM),
            win.0,
        )
    };
    check("MPI_Fetch_and_op", code)?;
    flush(win, rank)?;
    Ok(old)
}

/// Atomic compare-and-swap on the u64 at `disp` of `rank`; the old value.
pub(super) fn compare_swap(win: Win, rank: usize, disp: u64, old: u64, new: u64) -> Result<u64> {
    let mut seen = 0u64;
    // SAFETY: as in `fetch_add`.
    let code = unsafe {
        ffi::MPI_Compare_and_swap(
            (&new as *const u64).cast(),
            (&old as *const u64).cast(),
            (&mut seen as *mut u64).cast(),
            konst!(RSMPI_UINT64_T),
            rank as c_int,
            disp as ffi::MPI_Aint,
            win.0,
        )
    };
    check("MPI_Compare_and_swap", code)?;
    flush(win, rank)?;
    Ok(seen)
}

/// Threads of this process inside [`flush`] now.
static FLUSHING: AtomicU32 = AtomicU32::new(0);
/// Flushes this process began.
static FLUSHES: AtomicU64 = AtomicU64::new(0);

/// Remote completion of every operation to `rank` (`MPI_Win_flush`).
pub(super) fn flush(win: Win, rank: usize) -> Result<()> {
    FLUSHES.fetch_add(1, SeqCst);
    FLUSHING.fetch_add(1, SeqCst);
    // SAFETY: plain call.
    let code = unsafe { ffi::MPI_Win_flush(rank as c_int, win.0) };
    FLUSHING.fetch_sub(1, SeqCst);
    check("MPI_Win_flush", code)
}

/// The flushes begun so far while a thread of this process waits in
/// [`flush`] now, `None` while none does: a caller that sees the same
/// number twice some time apart knows that a flush took at least that
/// long. A flush may wait for a rank that itself waits in a flush to this
/// process: MPICH 4 over UCX serves the puts that arrive for a dynamic
/// window (active messages) only now and then inside a flush, so two
/// ranks flushing to each other wait until one of them calls MPI otherwise
/// (the relay thread, `relay.rs`).
pub(super) fn flushing() -> Option<u64> {
    let begun = FLUSHES.load(SeqCst);
    (FLUSHING.load(SeqCst) != 0).then_some(begun)
}

/// Synchronise the window's public and private copies here
/// (`MPI_Win_sync`), before reading what other ranks wrote.
pub(super) fn sync(win: Win) {
    // SAFETY: plain call inside the window's passive epoch.
    unsafe { ffi::MPI_Win_sync(win.0) };
}

// --- messages ------------------------------------------------------------

/// `MPI_Isend` (`MPI_Issend` if `synchronous`) of the `len` bytes at `p`.
///
/// # Safety
/// The bytes stay valid and unwritten until the request completes.
unsafe fn isend(
    comm: Comm,
    (p, len): (*const u8, usize),
    rank: usize,
    tag: c_int,
    synchronous: bool,
) -> Result<ffi::MPI_Request> {
    let mut r = konst!(RSMPI_REQUEST_NULL);
    let (p, n, byte) = (p.cast(), len as c_int, konst!(RSMPI_UINT8_T));
    // SAFETY: the caller's promise about the bytes; an out pointer to a
    // local.
    let code = unsafe {
        if synchronous {
            ffi::MPI_Issend(p, n, byte, rank as c_int, tag, comm.0, &mut r)
        } else {
            ffi::MPI_Isend(p, n, byte, rank as c_int, tag, comm.0, &mut r)
        }
    };
    check(
        if synchronous {
            "MPI_Issend"
        } else {
            "MPI_Isend"
        },
        code,
    )?;
    Ok(r)
}

/// `MPI_Irecv` into the `len` bytes at `p`.
///
/// # Safety
/// The bytes stay valid, and nothing else reads or writes them, until the
/// request completes or is cancelled.
unsafe fn irecv(
    comm: Comm,
    (p, len): (*mut u8, usize),
    rank: usize,
    tag: c_int,
) -> Result<ffi::MPI_Request> {
    let mut r = konst!(RSMPI_REQUEST_NULL);
    // SAFETY: the caller's promise about the bytes; an out pointer to a
    // local.
    let code = unsafe {
        ffi::MPI_Irecv(
            p.cast(),
            len as c_int,
            konst!(RSMPI_UINT8_T),
            rank as c_int,
            tag,
            comm.0,
            &mut r,
        )
    };
    check("MPI_Irecv", code)?;
    Ok(r)
}

/// Send `msg` to `rank` with `tag`, nonblocking; `synchronous`: complete
/// only once the receiver took it (`MPI_Issend`), else `MPI_Isend`.
pub(super) fn send(
    comm: Comm,
    msg: Vec<u8>,
    rank: usize,
    tag: c_int,
    synchronous: bool,
) -> Result<Request> {
    // SAFETY: `msg` moves into the request below, which keeps its heap
    // buffer (unchanged: nothing writes it) until MPI is done with it.
    let r = unsafe { isend(comm, (msg.as_ptr(), msg.len()), rank, tag, synchronous) }?;
    Ok(Request::new(r, msg))
}

/// Receive `len` bytes from `rank` with `tag`, nonblocking; read them with
/// [`Request::data`] once complete.
pub(super) fn recv(comm: Comm, len: usize, rank: usize, tag: c_int) -> Result<Request> {
    recv_into(comm, vec![0u8; len], rank, tag)
}

/// [`recv`] into `buf` (a buffer used before): a message of up to its
/// length ([`Request::test_count`] says how long).
pub(super) fn recv_into(comm: Comm, mut buf: Vec<u8>, rank: usize, tag: c_int) -> Result<Request> {
    // SAFETY: `buf` moves into the request below, which keeps its heap
    // buffer untouched until MPI is done with it.
    let r = unsafe { irecv(comm, (buf.as_mut_ptr(), buf.len()), rank, tag) }?;
    Ok(Request::new(r, buf))
}

/// Send `data`'s bytes to `rank` with `tag`, nonblocking, read where they
/// lie (no copy); the request keeps the memory mapped.
///
/// # Safety
/// Nothing writes `data`'s bytes until the request completed.
pub(super) unsafe fn send_lent(
    comm: Comm,
    data: &Lent,
    rank: usize,
    tag: c_int,
) -> Result<Request> {
    // SAFETY: `data` is valid memory while the request (which keeps it
    // mapped) lives, not written meanwhile: the caller's promise.
    let r = unsafe {
        isend(
            comm,
            (data.ptr().cast_const(), data.len()),
            rank,
            tag,
            false,
        )
    }?;
    Ok(Request::lent(r, data))
}

/// Receive a message of up to `into`'s length from `rank` with `tag` into
/// `into`, written where it lies (no copy), nonblocking; the request keeps
/// the memory mapped, and [`Request::test_count`] says how many bytes
/// came.
///
/// # Safety
/// Nothing reads or writes `into`'s bytes until the request completed or
/// was cancelled ([`Request::cancel`]).
pub(super) unsafe fn recv_lent(
    comm: Comm,
    into: &Lent,
    rank: usize,
    tag: c_int,
) -> Result<Request> {
    // SAFETY: `into` is valid memory while the request (which keeps it
    // mapped) lives, left alone meanwhile: the caller's promise.
    let r = unsafe { irecv(comm, (into.ptr(), into.len()), rank, tag) }?;
    Ok(Request::lent(r, into))
}

/// A nonblocking barrier over `comm`.
pub(super) fn ibarrier(comm: Comm) -> Result<Request> {
    let mut r = konst!(RSMPI_REQUEST_NULL);
    // SAFETY: out pointer to a local.
    check("MPI_Ibarrier", unsafe { ffi::MPI_Ibarrier(comm.0, &mut r) })?;
    Ok(Request::new(r, Vec::new()))
}

impl Request {
    fn new(r: ffi::MPI_Request, buf: Vec<u8>) -> Request {
        Request {
            handle: Handle(r),
            finished: false,
            buf,
            keep: None,
            received: 0,
        }
    }

    /// A request on lent memory, which it keeps mapped.
    fn lent(r: ffi::MPI_Request, memory: &Lent) -> Request {
        let mut req = Request::new(r, Vec::new());
        req.keep = Some(memory.clone());
        req
    }

    /// The buffer (a receive's data once complete).
    pub(super) fn data(&self) -> &[u8] {
        &self.buf
    }

    /// Whether it completed (then it is gone: further tests say true).
    pub(super) fn test(&mut self) -> Result<bool> {
        if self.finished {
            return Ok(true);
        }
        let mut flag = 0;
        // SAFETY: a live request; status ignored.
        let code =
            unsafe { ffi::MPI_Test(&mut self.handle.0, &mut flag, konst!(RSMPI_STATUS_IGNORE)) };
        check("MPI_Test", code)?;
        if flag != 0 {
            self.finished = true;
            self.keep = None;
        }
        Ok(self.finished)
    }

    /// A receive's test: once it completed, the bytes it took.
    pub(super) fn test_count(&mut self) -> Result<Option<usize>> {
        if !self.finished {
            let mut flag = 0;
            // SAFETY: an all-zero MPI_Status (integers) is a valid value.
            let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: a live request and a status to fill.
            let code = unsafe { ffi::MPI_Test(&mut self.handle.0, &mut flag, &mut st) };
            check("MPI_Test", code)?;
            if flag == 0 {
                return Ok(None);
            }
            self.finish(&st);
        }
        Ok(Some(self.received))
    }

    /// MPI is done with it: let the lent memory go, and note the bytes
    /// received.
    fn finish(&mut self, st: &ffi::MPI_Status) {
        self.finished = true;
        self.keep = None;
        let mut count = 0;
        // SAFETY: a status MPI filled.
        unsafe { ffi::MPI_Get_count(st, konst!(RSMPI_UINT8_T), &mut count) };
        self.received = count.max(0) as usize;
    }

    /// Its buffer, once it completed (for the next request); `None`
    /// while MPI may still use it.
    pub(super) fn take_buf(&mut self) -> Option<Vec<u8>> {
        self.finished.then(|| std::mem::take(&mut self.buf))
    }

    /// Cancel it and wait for that: `None` if it was cancelled, else (it
    /// completed first) the bytes it took. Either way MPI is done with its
    /// memory.
    pub(super) fn cancel(&mut self) -> Option<usize> {
        if self.finished {
            return Some(self.received);
        }
        // SAFETY: an all-zero MPI_Status (integers) is a valid value.
        let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: a live request; the wait ends MPI's use of the memory.
        unsafe {
            ffi::MPI_Cancel(&mut self.handle.0);
            ffi::MPI_Wait(&mut self.handle.0, &mut st);
        }
        let mut flag = 0;
        // SAFETY: a status MPI filled.
        unsafe { ffi::MPI_Test_cancelled(&st, &mut flag) };
        self.finish(&st);
        (flag == 0).then_some(self.received)
    }
}

/// A message waiting on `comm` with `tag` from `from` (any rank: `None`):
/// its sender and length, and the handle to receive it with ([`mrecv`]).
pub(super) fn improbe(
    comm: Comm,
    from: Option<usize>,
    tag: c_int,
) -> Option<(usize, usize, Handle<ffi::MPI_Message>)> {
    let source = from.map_or(konst!(RSMPI_ANY_SOURCE), |r| r as c_int);
    let mut flag = 0;
    let mut m = konst!(RSMPI_MESSAGE_NULL);
    // SAFETY: zeroed status is valid output space.
    let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
    // SAFETY: out pointers to locals.
    let code = unsafe { ffi::MPI_Improbe(source, tag, comm.0, &mut flag, &mut m, &mut st) };
    if code != 0 || flag == 0 {
        return None;
    }
    let mut count = 0;
    // SAFETY: a status MPI filled.
    unsafe { ffi::MPI_Get_count(&st, konst!(RSMPI_UINT8_T), &mut count) };
    Some((st.MPI_SOURCE as usize, count.max(0) as usize, Handle(m)))
}

/// Receive the message `m` into `buf` (at least its length).
pub(super) fn mrecv(mut m: Handle<ffi::MPI_Message>, buf: &mut [u8]) -> Result<()> {
    // SAFETY: `buf` holds the whole message (checked by the caller with
    // the probed length; MPI fails rather than overrun).
    let code = unsafe {
        ffi::MPI_Mrecv(
            buf.as_mut_ptr().cast(),
            buf.len() as c_int,
            konst!(RSMPI_UINT8_T),
            &mut m.0,
            konst!(RSMPI_STATUS_IGNORE),
        )
    };
    check("MPI_Mrecv", code)
}

/// `MPI_ANY_TAG`, for [`improbe`].
pub(super) fn any_tag() -> c_int {
    konst!(RSMPI_ANY_TAG)
}

/// Let MPI make progress (passive-target RMA to this process needs it on
/// transports without remote memory access in hardware).
pub(super) fn progress(comm: Comm) {
    let mut flag = 0;
    // SAFETY: out pointer to a local; status ignored.
    unsafe {
        ffi::MPI_Iprobe(
            konst!(RSMPI_ANY_SOURCE),
            konst!(RSMPI_ANY_TAG),
            comm.0,
            &mut flag,
            konst!(RSMPI_STATUS_IGNORE),
        )
    };
}

impl Drop for Request {
    /// Let an unfinished request complete without us (`MPI_Request_free`);
    /// its buffer is leaked, as MPI may still use it.
    fn drop(&mut self) {
        if !self.finished {
            // SAFETY: a live request; MPI completes it on its own.
            unsafe { ffi::MPI_Request_free(&mut self.handle.0) };
            std::mem::forget(std::mem::take(&mut self.buf));
            // The lent memory stays mapped for good.
            std::mem::forget(self.keep.take());
        }
    }
}
