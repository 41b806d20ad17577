//! The launcher's reaper: a forked copy of the launcher that outlives it
//! just long enough to clean up after it.
//!
//! A launcher killed with SIGKILL cannot remove its job's shared memory:
//! its ranks die with it (their parent-death signal), and their objects
//! would stay in `/dev/shm` until the next launcher of the same user swept
//! them. So every job has a reaper, forked once its ranks run: it waits
//! for the launcher to go (end of file on a pipe only the launcher
//! writes), then for every rank to exit (their process file descriptors),
//! then removes the job's objects and files, and exits. When the job ends
//! normally the launcher cleans up itself, closes the pipe and reaps the
//! reaper, which finds nothing left to do.
//!
//! The child of a fork of a threaded process may only make system calls
//! (another thread may have held any lock, the allocator's included): the
//! reaper runs on descriptors, names and buffers prepared before the fork,
//! never allocates, never panics, and ends with `_exit`.

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A running reaper: ended and reaped by [`Reaper::finish`] or on drop.
pub(crate) struct Reaper {
    pid: rustix::process::Pid,
    /// The pipe's write end: the reaper reads end of file once it closes.
    pipe: Option<OwnedFd>,
}

/// What the forked child works with, all made before the fork.
struct Plan<'a> {
    pipe: OwnedFd,
    null: OwnedFd,
    dir: OwnedFd,
    ranks: Vec<BorrowedFd<'a>>,
    /// Every descriptor the child keeps, ascending.
    keep: Vec<libc::c_int>,
    prefixes: &'a [&'a str],
    files: Vec<CString>,
    entries: Vec<MaybeUninit<u8>>,
}

impl Reaper {
    /// Fork a reaper for the ranks whose process file descriptors are
    /// `ranks`: once this process is gone and they have all exited, it
    /// removes the entries of directory `dir` whose names start with one
    /// of `prefixes`, and the files `files`.
    pub(crate) fn spawn(
        ranks: &[BorrowedFd<'_>],
        dir: &Path,
        prefixes: &[&str],
        files: &[&Path],
    ) -> io::Result<Reaper> {
        use rustix::fs::{Mode, OFlags, open};
        // Closed on exec: no rank inherits the write end, so end of file
        // means the launcher has closed it or died.
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let null = open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?;
        let dir = open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let files = files
            .iter()
            .map(|f| CString::new(f.as_os_str().as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut keep: Vec<libc::c_int> =
            vec![0, 1, 2, read.as_raw_fd(), null.as_raw_fd(), dir.as_raw_fd()];
        keep.extend(ranks.iter().map(|f| f.as_raw_fd()));
        keep.sort_unstable();
        keep.dedup();
        let plan = Plan {
            pipe: read,
            null,
            dir,
            ranks: ranks.to_vec(),
            keep,
            prefixes,
            files,
            entries: vec![MaybeUninit::uninit(); 16 << 10],
        };
        // SAFETY: fork has no memory-safety preconditions of its own; the
        // child only runs `reap`, which makes system calls on what `plan`
        // prepared, allocates nothing and never returns (see the module
        // doc), as a child of a threaded process must.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => reap(plan),
            pid => Ok(Reaper {
                pid: rustix::process::Pid::from_raw(pid).expect("fork returns a positive pid"),
                pipe: Some(write),
            }),
        }
    }

    /// End the reaper once every rank has exited (it finds them so, and
    /// the job cleaned up) and collect its status.
    pub(crate) fn finish(mut self) {
        self.end(rustix::process::WaitOptions::empty());
    }

    /// Close the pipe, then reap the reaper (empty `options`: wait for it;
    /// `NOHANG`: only if it has already exited).
    fn end(&mut self, options: rustix::process::WaitOptions) {
        if self.pipe.take().is_some() {
            // Our own child, not reaped before (the pipe was still open).
            while let Err(rustix::io::Errno::INTR) =
                rustix::process::waitpid(Some(self.pid), options)
            {}
        }
    }
}

impl Drop for Reaper {
    /// Without [`Reaper::finish`] (a launch that failed half-way, ranks
    /// perhaps still running): let it go without waiting for them.
    fn drop(&mut self) {
        self.end(rustix::process::WaitOptions::NOHANG);
    }
}

/// The reaper's life in the forked child (system calls only).
fn reap(mut plan: Plan<'_>) -> ! {
    // Out of the launcher's session (a signal to its process group or a
    // closed terminal does not end the cleanup) and off its output (whoever
    // reads the launcher's output is not kept waiting by the reaper).
    let _ = rustix::process::setsid();
    // The launcher's signal handlers (forwarding to its ranks) mean nothing
    // here: SIGINT, SIGTERM and SIGHUP end the reaper as they would any
    // process.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: restores a default disposition; signal() is
        // async-signal-safe and touches no memory of ours.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    let _ = rustix::stdio::dup2_stdin(&plan.null);
    let _ = rustix::stdio::dup2_stdout(&plan.null);
    let _ = rustix::stdio::dup2_stderr(&plan.null);
    close_all_but(&plan.keep);
    // The launcher goes: end of file (or an error: nothing more to learn).
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(&plan.pipe, &mut byte) {
            Ok(0) => break,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    // Every rank exits (one after the other: all must).
    for rank in &plan.ranks {
        use rustix::event::{PollFd, PollFlags, poll};
        let mut fds = [PollFd::from_borrowed_fd(*rank, PollFlags::IN)];
        loop {
            match poll(&mut fds, None) {
                Ok(_) if fds[0].revents().is_empty() => {}
                Err(rustix::io::Errno::INTR) => {}
                Ok(_) | Err(_) => break,
            }
        }
    }
    // The job's objects and files go: `job::sweep`'s work, which
    // allocates, done here by system calls on the buffer made before the
    // fork.
    let mut entries = rustix::fs::RawDir::new(plan.dir.as_fd(), &mut plan.entries);
    while let Some(Ok(e)) = entries.next() {
        let name = e.file_name();
        if plan
            .prefixes
            .iter()
            .any(|p| name.to_bytes().starts_with(p.as_bytes()))
        {
            let _ = rustix::fs::unlinkat(plan.dir.as_fd(), name, rustix::fs::AtFlags::empty());
        }
    }
    for f in &plan.files {
        let _ = rustix::fs::unlink(f.as_c_str());
    }
    // SAFETY: ends this process at once, without running the launcher's
    // exit handlers or destructors (they belong to the launcher).
    unsafe { libc::_exit(0) }
}

/// Close every descriptor of this process but those in `keep` (ascending).
fn close_all_but(keep: &[libc::c_int]) {
    let mut from: libc::c_uint = 0;
    for &k in keep.iter().chain(std::iter::once(&libc::c_int::MAX)) {
        let k = k as libc::c_uint;
        if k > from {
            close_range(from, k - 1);
        }
        from = k.saturating_add(1);
    }
}

/// Close the descriptors `first..=last`: close_range (Linux 5.9; rustix
/// has no wrapper for it), or one by one up to the descriptor limit.
fn close_range(first: libc::c_uint, last: libc::c_uint) {
    // SAFETY: close_range takes plain integers; this process (the forked
    // reaper) uses none of the descriptors it closes.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    if r == 0 {
        return;
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(1 << 20, |l| l.min(1 << 20)) as libc::c_uint;
    for fd in first..=last.min(limit) {
        // SAFETY: as above, one descriptor at a time (an unused number
        // fails with EBADF, which rustix ignores).
        unsafe { rustix::io::close(fd as std::os::fd::RawFd) };
    }
}
