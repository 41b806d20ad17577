//! The reaper: a forked copy of a launcher (or of a job's first rank) that
//! outlives it just long enough to clean up after it.
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
//! A job that `mpirun`, `srun` or GPI-2's `gaspi_run` started has no
//! launcher of ours: the first rank of each host forks the host's reaper
//! instead (its pipe closes when that rank goes), which waits for every
//! rank of the host. `mpirun` ending a job whose rank died kills the
//! others before they clean up; the reaper then does.
//!
//! The child of a fork of a threaded process may only make system calls
//! (another thread may have held any lock, the allocator's included): the
//! reaper runs on descriptors, names and buffers prepared before the fork,
//! never allocates, never panics, and ends with `_exit`. It is made by
//! the `clone` system call, not libc's `fork`, so that no library's
//! `pthread_atfork` handler runs in it (an MPI library's may lock or
//! allocate).

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A running reaper: ended and reaped by [`Reaper::finish`] or on drop.
#[derive(Debug)]
pub(crate) struct Reaper {
    pid: rustix::process::Pid,
    /// The pipe's write end: the reaper reads end of file once it closes.
    pipe: Option<OwnedFd>,
    /// The child's plan and stack, freed once it has been reaped.
    memory: Option<ChildMemory>,
}

/// The memory a reaper runs on: its plan (a box given up to raw) and its
/// stack (a mapping of [`STACK`] bytes).
#[derive(Debug)]
struct ChildMemory {
    plan: std::ptr::NonNull<Plan>,
    stack: std::ptr::NonNull<libc::c_void>,
}

// SAFETY: two addresses that this process never dereferences; whichever
// thread ends the reaper frees them, once, after the child has exited.
unsafe impl Send for ChildMemory {}
// SAFETY: as above; a shared reference gives no access to them at all.
unsafe impl Sync for ChildMemory {}

impl ChildMemory {
    /// Free the plan and the stack.
    ///
    /// # Safety
    /// The child that ran on them has exited (it has been reaped).
    unsafe fn free(self) {
        // SAFETY: the plan came from `Box::into_raw` in `spawn` and, the
        // child gone, nothing refers to it.
        drop(unsafe { Box::from_raw(self.plan.as_ptr()) });
        // SAFETY: the stack is the mapping of STACK bytes made in `spawn`,
        // unused since the child exited. An error leaves it mapped.
        let _ = unsafe { rustix::mm::munmap(self.stack.as_ptr(), STACK) };
    }
}

/// What the child works with, all made before the clone and never freed:
/// the child shares this process's memory and may outlive it.
struct Plan {
    pipe: RawFd,
    null: RawFd,
    dir: RawFd,
    /// The ranks' process file descriptors.
    ranks: Vec<RawFd>,
    /// Every descriptor the child keeps, ascending.
    keep: Vec<libc::c_int>,
    prefixes: Vec<Vec<u8>>,
    /// This user: only its entries go (another user's under the same
    /// names are not the job's).
    uid: u32,
    files: Vec<CString>,
    entries: Vec<MaybeUninit<u8>>,
}

/// The child's stack.
const STACK: usize = 256 << 10;

impl Reaper {
    /// Fork a reaper for the ranks whose process file descriptors are
    /// `ranks`: once this process is gone and they have all exited, it
    /// removes the entries of directory `dir` whose names start with one
    /// of `prefixes` and that belong to this user, and the files `files`.
    ///
    /// The child is a process of its own (its own descriptors, signal
    /// handlers and session) that shares this process's memory
    /// (`CLONE_VM`): nothing is copied, so no page that a network card
    /// writes into (InfiniBand, with GPI-2 or MPI) turns copy-on-write in
    /// this process, as a `fork` would make it on kernels before 5.13
    /// unless the library asked for fork safety. Its plan and stack are
    /// freed when [`Reaper::finish`] (or the drop) reaps it; a reaper that
    /// outlives this process (a host's, or one whose job this process
    /// gave up) keeps them (a few hundred KiB of address space) for as
    /// long as it runs.
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
        let ranks: Vec<RawFd> = ranks.iter().map(|f| f.as_raw_fd()).collect();
        let mut keep: Vec<libc::c_int> =
            vec![0, 1, 2, read.as_raw_fd(), null.as_raw_fd(), dir.as_raw_fd()];
        keep.extend(&ranks);
        keep.sort_unstable();
        keep.dedup();
        // SAFETY: a fresh private anonymous mapping, no address requested;
        // rustix checks the result.
        let stack = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                STACK,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::STACK,
            )?
        };
        let plan = Box::into_raw(Box::new(Plan {
            pipe: read.as_raw_fd(),
            null: null.as_raw_fd(),
            dir: dir.as_raw_fd(),
            ranks,
            keep,
            prefixes: prefixes.iter().map(|p| p.as_bytes().to_vec()).collect(),
            uid: rustix::process::geteuid().as_raw(),
            files,
            entries: vec![MaybeUninit::uninit(); 16 << 10],
        }));
        // SAFETY: `clone` with CLONE_VM runs `child` on the new stack (its
        // top: the stack grows down), in a process that shares this
        // memory; this process does not touch the plan or the stack again
        // but to free them once the child has been reaped, so the child
        // has them to itself for as long as it lives. `child` makes system
        // calls only, allocates nothing and never returns (see the module
        // doc). No library's fork handler runs (this is not `fork`).
        let pid = unsafe {
            libc::clone(
                child,
                stack.cast::<u8>().add(STACK).cast(),
                libc::CLONE_VM | libc::SIGCHLD,
                plan.cast(),
            )
        };
        let failed = (pid == -1).then(io::Error::last_os_error);
        let memory = ChildMemory {
            plan: std::ptr::NonNull::new(plan).expect("a box is not null"),
            stack: std::ptr::NonNull::new(stack).expect("mmap checked its result"),
        };
        // The child has its own copies of the descriptors (no
        // CLONE_FILES): this process closes its ends here, but the pipe's
        // write end.
        drop((read, null, dir));
        match failed {
            Some(e) => {
                // SAFETY: no child was made.
                unsafe { memory.free() };
                Err(e)
            }
            None => Ok(Reaper {
                pid: rustix::process::Pid::from_raw(pid).expect("clone returns a positive pid"),
                pipe: Some(write),
                memory: Some(memory),
            }),
        }
    }

    /// End the reaper once every rank has exited (it finds them so, and
    /// the job cleaned up) and collect its status.
    pub(crate) fn finish(mut self) {
        self.end(rustix::process::WaitOptions::empty());
    }

    /// Close the pipe, then reap the reaper (empty `options`: wait for it;
    /// `NOHANG`: only if it has already exited) and free what it ran on.
    fn end(&mut self, options: rustix::process::WaitOptions) {
        if self.pipe.take().is_some() {
            // Our own child, not reaped before (the pipe was still open).
            let reaped = loop {
                match rustix::process::waitpid(Some(self.pid), options) {
                    Err(rustix::io::Errno::INTR) => {}
                    r => break matches!(r, Ok(Some(_))),
                }
            };
            if let (true, Some(memory)) = (reaped, self.memory.take()) {
                // SAFETY: the child has exited: waitpid returned its status.
                unsafe { memory.free() };
            }
            // A reaper still running (`NOHANG` found it alive) keeps its
            // plan and stack for good, on purpose: it runs on them, and
            // nothing here waits for its end to free them. That is the
            // stack's 256 KiB and the plan per launch that failed half-way.
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

/// The child's entry: [`reap`] with the plan `arg` points to.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `spawn` passes its plan, which nothing else uses while this
    // child lives.
    reap(unsafe { &mut *arg.cast::<Plan>() })
}

/// The reaper's life in the child (system calls only).
fn reap(plan: &mut Plan) -> ! {
    let fd = |raw: RawFd| {
        // SAFETY: the plan's descriptors were open in the parent at the
        // clone, so they are open in this process's copy of its
        // descriptor table, and `close_all_but` keeps them.
        unsafe { BorrowedFd::borrow_raw(raw) }
    };
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
    let _ = rustix::stdio::dup2_stdin(fd(plan.null));
    let _ = rustix::stdio::dup2_stdout(fd(plan.null));
    let _ = rustix::stdio::dup2_stderr(fd(plan.null));
    close_all_but(&plan.keep);
    // The launcher goes: end of file (or an error: nothing more to learn).
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(fd(plan.pipe), &mut byte) {
            Ok(0) => break,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    // Every rank exits (one after the other: all must).
    for &rank in &plan.ranks {
        use rustix::event::{PollFd, PollFlags, poll};
        let mut fds = [PollFd::from_borrowed_fd(fd(rank), PollFlags::IN)];
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
    let mut entries = rustix::fs::RawDir::new(fd(plan.dir), &mut plan.entries);
    while let Some(Ok(e)) = entries.next() {
        let name = e.file_name();
        let ours = || {
            rustix::fs::statat(fd(plan.dir), name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_uid == plan.uid)
        };
        if plan.prefixes.iter().any(|p| name.to_bytes().starts_with(p)) && ours() {
            let _ = rustix::fs::unlinkat(fd(plan.dir), name, rustix::fs::AtFlags::empty());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A reaper with no ranks to wait for removes what it was told to once
    /// its pipe closes; reaped, it leaves no memory behind (a process that
    /// launches job after job does not grow).
    #[test]
    fn a_finished_reaper_removes_its_entries_and_is_freed() {
        let dir = std::env::temp_dir().join(format!("gaspi-reaper-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a-file");
        for name in ["job.1", "job.2", "other.1", "a-file", "job.theirs"] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        // Another user's entry under the job's names stays (as root, the
        // tests' user in CI, it could be removed; another user cannot
        // give files away, so elsewhere the entry is ours and goes).
        let foreign = rustix::process::geteuid().is_root();
        if foreign {
            std::os::unix::fs::chown(dir.join("job.theirs"), Some(65534), Some(65534)).unwrap();
        }
        for _ in 0..3 {
            let mut r = Reaper::spawn(&[], &dir, &["job."], &[&file]).unwrap();
            assert!(r.memory.is_some());
            r.end(rustix::process::WaitOptions::empty());
            assert!(
                r.memory.is_none(),
                "the reaped reaper's plan and stack are freed"
            );
        }
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        if foreign {
            assert_eq!(left, ["job.theirs", "other.1"]);
        } else {
            assert_eq!(left, ["other.1"]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
