//! The operating-system calls of the launcher, wrapped safely: process
//! file descriptors, poll, signals to children, parent-death signals and
//! signal forwarding.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// A file descriptor that becomes readable when process `pid` exits.
pub(crate) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; it does not touch our memory.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Wait until one of `fds` is readable or `timeout` passes (forever if
/// `None`). Returns one flag per descriptor.
pub(crate) fn poll_readable(
    fds: &[BorrowedFd<'_>],
    timeout: Option<Duration>,
) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    // SAFETY: pfds is a valid array of pfds.len() pollfd structs that poll
    // may write `revents` into.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(pfds.iter().map(|p| p.revents != 0).collect())
}

/// Send `signal` to the child `pid`. Only call it for children that have
/// not been reaped: until then the pid cannot belong to anyone else.
pub(crate) fn signal_child(pid: u32, signal: i32) {
    // SAFETY: kill has no memory effects; the caller guarantees pid is an
    // unreaped child of ours.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// Make the child started by `cmd` receive SIGKILL if the launcher dies, so
/// that no rank outlives it.
pub(crate) fn kill_with_parent(cmd: &mut Command) {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure calls only prctl(PR_SET_PDEATHSIG) and getppid,
    // which are async-signal-safe, and allocates nothing, as pre_exec
    // requires in the forked child.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl: then nobody will send
            // the signal, so give up now.
            if libc::getppid() != parent {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            Ok(())
        });
    }
}

/// The CPUs this process may run on, ascending.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i < CPU_SETSIZE, the size of the set.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// Make the child started by `cmd` run on `cpus` only.
pub(crate) fn bind_to(cmd: &mut Command, cpus: &[usize]) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: c < CPU_SETSIZE, the size of the set.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: the closure makes one system call on a set built before the
    // fork, allocating nothing, as pre_exec requires in the forked child.
    // A failure (a CPU gone meanwhile) leaves the rank unbound: not fatal.
    unsafe {
        cmd.pre_exec(move || {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
}

/// SIGINT, SIGTERM and SIGHUP routed to the launcher instead of killing
/// it: a socket that becomes readable when one arrives (to poll beside the
/// ranks' pidfds) and a flag per signal. signal-hook installs the
/// handlers (they only set a flag and write a byte: async-signal-safe), so
/// no handler is hand-written here.
#[derive(Debug)]
pub(crate) struct SignalPipe {
    read: std::os::unix::net::UnixStream,
    flags: Vec<(i32, std::sync::Arc<std::sync::atomic::AtomicBool>)>,
}

impl SignalPipe {
    /// The descriptor to poll.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// The signals that arrived since the last call.
    pub(crate) fn drain(&self) -> Vec<i32> {
        use std::io::Read;
        let mut buf = [0u8; 64];
        while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {}
        self.flags
            .iter()
            .filter(|(_, f)| f.swap(false, SeqCst))
            .map(|&(sig, _)| sig)
            .collect()
    }
}

/// Route SIGINT, SIGTERM and SIGHUP to a [`SignalPipe`] for the rest of
/// the process's life.
pub(crate) fn forward_signals() -> io::Result<SignalPipe> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let (read, write) = std::os::unix::net::UnixStream::pair()?;
    read.set_nonblocking(true)?;
    write.set_nonblocking(true)?;
    let mut flags = Vec::new();
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(sig, flag.clone())?;
        signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        flags.push((sig, flag));
    }
    Ok(SignalPipe { read, flags })
}

/// The name of a signal, e.g. "SIGKILL".
///
/// ```
/// assert_eq!(gaspi::launcher::signal_name(9), "SIGKILL");
/// assert_eq!(gaspi::launcher::signal_name(15), "SIGTERM");
/// ```
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// This machine's host name.
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Hold an exclusive advisory lock on `file` until it is closed (`flock`):
/// launchers on one machine take turns through it.
pub(crate) fn lock_exclusive(file: &std::fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor the File owns; no memory involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
