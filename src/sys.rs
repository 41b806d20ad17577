//! The operating-system calls of the launcher and the runtime, wrapped
//! safely: process file descriptors, poll, signals to children,
//! parent-death signals, CPU binding, signal forwarding, and reading
//! another process's memory (cross-memory attach, for single-copy
//! collectives). The calls are rustix's (safe functions, no raw syscalls)
//! except `process_vm_readv`, which rustix lacks (libc's); what stays
//! unsafe is that call and `pre_exec`, whose closures run in the forked
//! child.

use rustix::event::{self, PollFd, PollFlags, Timespec};
use rustix::process;
use rustix::thread::{self, CpuSet};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// A file descriptor that becomes readable when process `pid` exits.
pub(crate) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = pid_of(pid)?;
    Ok(process::pidfd_open(pid, process::PidfdFlags::empty())?)
}

/// `pid` as rustix's non-zero, positive process id.
fn pid_of(pid: u32) -> io::Result<process::Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(process::Pid::from_raw)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Wait until one of `fds` is readable or `timeout` passes (forever if
/// `None`). Returns one flag per descriptor.
pub(crate) fn poll_readable(
    fds: &[BorrowedFd<'_>],
    timeout: Option<Duration>,
) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|&fd| PollFd::from_borrowed_fd(fd, PollFlags::IN))
        .collect();
    // A timeout too large for a timespec is as good as none.
    let ts = timeout.and_then(|t| Timespec::try_from(t).ok());
    match event::poll(&mut pfds, ts.as_ref()) {
        Ok(_) => Ok(pfds.iter().map(|p| !p.revents().is_empty()).collect()),
        Err(rustix::io::Errno::INTR) => Ok(vec![false; fds.len()]),
        Err(e) => Err(e.into()),
    }
}

/// Whether `fd` is readable right now (a pidfd: its process has exited),
/// without waiting and without allocating: for a check before each of
/// many copies. An error counts as readable (the caller then copies
/// nothing).
pub(crate) fn readable_now(fd: BorrowedFd<'_>) -> bool {
    let mut pfd = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    match event::poll(&mut pfd, Some(&Timespec::default())) {
        Ok(_) => !pfd[0].revents().is_empty(),
        Err(_) => true,
    }
}

/// Send `signal` to the child `pid`. Only call it for children that have
/// not been reaped: until then the pid cannot belong to anyone else.
pub(crate) fn signal_child(pid: u32, signal: i32) {
    if let (Ok(pid), Some(sig)) = (pid_of(pid), process::Signal::from_named_raw(signal)) {
        let _ = process::kill_process(pid, sig);
    }
}

/// Send SIGKILL to the process `pidfd` names (not to whatever holds its
/// pid now: a pidfd names one process).
pub(crate) fn pidfd_kill(pidfd: BorrowedFd<'_>) -> io::Result<()> {
    Ok(process::pidfd_send_signal(pidfd, process::Signal::KILL)?)
}

/// Send SIGKILL to this process (`proc_kill` asked for from another host).
#[cfg(feature = "mpi")]
pub(crate) fn kill_self() {
    let _ = process::kill_process(process::getpid(), process::Signal::KILL);
}

/// Make the child started by `cmd` receive SIGKILL if the launcher dies, so
/// that no rank outlives it.
pub(crate) fn kill_with_parent(cmd: &mut Command) {
    let parent = process::getpid();
    // SAFETY: the closure makes two system calls (prctl(PR_SET_PDEATHSIG)
    // and getppid, async-signal-safe) and allocates nothing, as pre_exec
    // requires in the forked child.
    unsafe {
        cmd.pre_exec(move || {
            process::set_parent_process_death_signal(Some(process::Signal::KILL))?;
            // The parent may have died before prctl: then nobody will send
            // the signal, so give up now.
            if process::getppid() != Some(parent) {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            Ok(())
        });
    }
}

/// A connected pair of Unix stream sockets, both closed on exec.
pub(crate) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Let the child started by `cmd` inherit `fd` (and only that child: the
/// descriptor stays close-on-exec in the launcher); returns its number,
/// which the child sees too. `cmd` keeps `fd` open until it is dropped.
pub(crate) fn inherit_fd(cmd: &mut Command, fd: OwnedFd) -> i32 {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    // SAFETY: the closure makes one system call (fcntl(F_SETFD),
    // async-signal-safe) on a descriptor it owns, and allocates nothing, as
    // pre_exec requires in the forked child.
    unsafe {
        cmd.pre_exec(move || {
            rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty())?;
            Ok(())
        });
    }
    raw
}

/// The CPUs this process may run on, ascending.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match thread::sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&i| set.is_set(i)).collect(),
        Err(_) => Vec::new(),
    }
}

/// The CPUs our launcher (process `launcher`, `GASPI_LAUNCHER`) may use,
/// when they are more than this thread's: the set a rank's helper threads
/// may float over while the rank itself stays bound.
#[cfg(any(feature = "gpi2", feature = "mpi", test))]
fn launcher_cpus(launcher: u32) -> Option<CpuSet> {
    let wide = thread::sched_getaffinity(Some(pid_of(launcher).ok()?)).ok()?;
    let mine = thread::sched_getaffinity(None).ok()?;
    let count = |s: &CpuSet| (0..CpuSet::MAX_CPU).filter(|&i| s.is_set(i)).count();
    let covers = (0..CpuSet::MAX_CPU).all(|i| !mine.is_set(i) || wide.is_set(i));
    (covers && count(&wide) > count(&mine)).then_some(wide)
}

/// Run `f` (which starts helper threads: a transport's progress or device
/// threads) with the calling thread allowed on every CPU of the job's
/// launcher (ours, [`env::LAUNCHER`](crate::env::LAUNCHER)), then bind the
/// thread again as it was. Threads started meanwhile keep the wider set: a
/// helper that wakes to receive then runs on an idle CPU instead of waiting
/// for the bound rank it serves to give up its own. Without our launcher,
/// or nothing wider, `f` just runs.
#[cfg(any(feature = "gpi2", feature = "mpi"))]
pub(crate) fn with_helpers_unbound<T>(f: impl FnOnce() -> T) -> T {
    let launcher = std::env::var(crate::env::LAUNCHER)
        .ok()
        .and_then(|v| v.parse().ok());
    unbound_during(launcher, f)
}

/// [`with_helpers_unbound`] with the launcher's process id given.
#[cfg(any(feature = "gpi2", feature = "mpi", test))]
fn unbound_during<T>(launcher: Option<u32>, f: impl FnOnce() -> T) -> T {
    let Some(wide) = launcher.and_then(launcher_cpus) else {
        return f();
    };
    let Ok(mine) = thread::sched_getaffinity(None) else {
        return f();
    };
    if thread::sched_setaffinity(None, &wide).is_err() {
        return f();
    }
    let out = f();
    // Restoring can fail only if a CPU of ours went offline meanwhile:
    // the thread then stays on the wider set, which is correct, only
    // placed differently.
    let _ = thread::sched_setaffinity(None, &mine);
    out
}

/// Make the child started by `cmd` run on `cpus` only.
pub(crate) fn bind_to(cmd: &mut Command, cpus: &[usize]) {
    let mut set = CpuSet::new();
    for &c in cpus.iter().filter(|&&c| c < CpuSet::MAX_CPU) {
        set.set(c);
    }
    // SAFETY: the closure makes one system call on a set built before the
    // fork, allocating nothing, as pre_exec requires in the forked child.
    // A failure (a CPU gone meanwhile) leaves the rank unbound: not fatal.
    unsafe {
        cmd.pre_exec(move || {
            let _ = thread::sched_setaffinity(None, &set);
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
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// The names among `hosts` that do not resolve to an address, each once,
/// sorted.
#[cfg_attr(not(feature = "gpi2"), allow(dead_code))]
pub(crate) fn unresolved<'a>(hosts: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    use std::net::ToSocketAddrs;
    let mut hosts: Vec<&str> = hosts.collect();
    hosts.sort_unstable();
    hosts.dedup();
    hosts
        .into_iter()
        .filter(|h| (*h, 22).to_socket_addrs().is_err())
        .collect()
}

/// Copy `dst.len()` bytes at address `remote` of process `pid` into `dst`
/// (Linux cross-memory attach, `process_vm_readv`): one copy, made by the
/// kernel, between two processes' private memory. It needs the right to
/// trace `pid` (same user, and Yama's `ptrace_scope` 0 or a tracer
/// relationship; seccomp profiles may forbid it): `PermissionDenied`
/// otherwise. Reading this process itself is refused (the kernel would
/// write `dst` while the source might be borrowed elsewhere); a range
/// that `pid` has not mapped, or that wraps around the address space,
/// gives an error, never a silently short copy (`dst` may then hold part
/// of it).
pub(crate) fn read_process_memory(pid: u32, remote: usize, dst: &mut [u8]) -> io::Result<()> {
    let len = dst.len();
    cross_memory(pid, remote, len, |pid, done| {
        let rest = &mut dst[done..];
        let local = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        let far = libc::iovec {
            // In range: checked by `cross_memory`.
            iov_base: (remote + done) as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: `local` describes `rest`, memory of this process that we
        // borrow mutably, so the kernel's writes race with nothing; `far`
        // names memory of another process (checked by `cross_memory`),
        // which the kernel reads after checking it is mapped there. The
        // iovecs live across the call.
        unsafe { libc::process_vm_readv(pid, &local, 1, &far, 1, 0) }
    })
}

/// Copy `src` to address `remote` of process `pid` (Linux cross-memory
/// attach, `process_vm_writev`): one copy, made by the kernel, into
/// another process's private memory, with the rights of
/// [`read_process_memory`]. The caller answers for the range: `pid` must
/// have offered it for this write (the kernel only checks that it is
/// mapped and writable there). Writing this process itself is refused; a
/// range that `pid` has not mapped, or that wraps around the address
/// space, gives an error, never a silently short copy (part of it may
/// then have been written).
pub(crate) fn write_process_memory(pid: u32, remote: usize, src: &[u8]) -> io::Result<()> {
    cross_memory(pid, remote, src.len(), |pid, done| {
        let rest = &src[done..];
        let local = libc::iovec {
            iov_base: rest.as_ptr().cast_mut().cast(),
            iov_len: rest.len(),
        };
        let far = libc::iovec {
            // In range: checked by `cross_memory`.
            iov_base: (remote + done) as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: `local` describes `rest`, memory of this process that we
        // borrow, which the kernel only reads; `far` names memory of
        // another process (checked by `cross_memory`), which the kernel
        // writes after checking it is mapped there: nothing of this
        // process is written. The iovecs live across the call.
        unsafe { libc::process_vm_writev(pid, &local, 1, &far, 1, 0) }
    })
}

/// The checks and the loop of [`read_process_memory`] and
/// [`write_process_memory`]: `len` bytes at `remote` of another process
/// `pid`, moved by `step(pid, done)` (one system call for the bytes from
/// `done` on, returning what it returns) until all have moved.
fn cross_memory(
    pid: u32,
    remote: usize,
    len: usize,
    mut step: impl FnMut(libc::pid_t, usize) -> isize,
) -> io::Result<()> {
    if pid == std::process::id() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let pid = pid_of(pid)?.as_raw_nonzero().get();
    if remote.checked_add(len).is_none() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut done = 0;
    while done < len {
        match step(pid, done) {
            -1 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            n => done += n as usize,
        }
    }
    Ok(())
}

/// Where the kernel's cross-memory copy ([`read_process_memory`]) is
/// slow: destinations 1 to `n - 1` bytes past the source's offset within
/// a page, `n` as [`slow_copy_offsets`] finds it for `process_vm_readv`
/// from this process's own memory (0: nowhere), measured once per
/// process, the first time it is asked. The kernel copies with `rep
/// movsb`, which on AMD EPYC VMs runs 10-30 times slower at such offsets;
/// on an Intel Xeon VM 1.1 times (see `engine::memcopy`). 0 where the
/// kernel refuses the copy (no single copies are made there anyway).
pub(crate) fn cross_copy_slow_offsets() -> usize {
    static SLOW: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SLOW.get_or_init(|| slow_copy_offsets(|src, dst| copy_own_memory(src, dst).ok()))
}

/// Where `copy` is slow: `n` such that a destination 1 to `n - 1` bytes
/// past the source's offset within a 4 KiB page copies three or more
/// times slower than one at the same page offset, or 0 where neither
/// probe is. `rep movsb`, with which glibc's `memcpy` and the kernel copy
/// most sizes, is slow only there, not at those offsets within a cache
/// line alone (a destination 64 + 16 bytes past the page offset of its
/// source copies at full speed), and how far it reaches depends on the
/// CPU: 1 to 31 bytes on AMD EPYC Zen 3 (family 25 model 1; `n` = 32), 1
/// to 15 on Zen 5 (family 26 model 2; `n` = 16: 3-4 GB/s there against
/// 36-58 from 16 bytes on), so two probes, 8 and 24 bytes past, each
/// against the same offset: the best of 5 copies of 64 KiB each way, the
/// ways taken in turn so that one preemption cannot spoil every copy of
/// one way (about 0.2 ms with a fast copy). Both buffers lie at known
/// page offsets in one allocation here, since the heap places two
/// allocations at any distance (measured with two `Vec`s, this said "not
/// slow" on Zen 3). 0 where `copy` fails (returns `None`).
pub(crate) fn slow_copy_offsets(mut copy: impl FnMut(&[u8], &mut [u8]) -> Option<()>) -> usize {
    const LEN: usize = 64 << 10;
    const PAGE: usize = 4096;
    const SHIFTS: [usize; 3] = [0, 8, 24];
    // Written through (not calloc'd zero pages), so that no copy reads
    // the shared zero page or faults.
    let mut buf = vec![1u8; 2 * LEN + 3 * PAGE];
    let base = buf.as_ptr().align_offset(PAGE);
    if base >= PAGE {
        return 0;
    }
    // The source at a page boundary, the destination `shift` bytes past
    // a page boundary after it.
    let (head, tail) = buf.split_at_mut(base + LEN + PAGE);
    let src = &head[base..base + LEN];
    let mut best = [std::time::Duration::MAX; SHIFTS.len()];
    for _ in 0..5 {
        for (way, shift) in SHIFTS.into_iter().enumerate() {
            let at = std::time::Instant::now();
            if copy(src, &mut tail[shift..shift + LEN]).is_none() {
                return 0;
            }
            best[way] = best[way].min(at.elapsed());
        }
    }
    let slow = |way: usize| best[way] > best[0].saturating_mul(3);
    if slow(2) {
        32
    } else if slow(1) {
        16
    } else {
        0
    }
}

/// Copy `src` into `dst` (the same length) through `process_vm_readv` on
/// this process itself: the kernel's cross-memory copy, for
/// [`cross_copy_slow_offsets`].
fn copy_own_memory(src: &[u8], dst: &mut [u8]) -> io::Result<()> {
    assert_eq!(src.len(), dst.len(), "copy_own_memory: lengths differ");
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let far = libc::iovec {
        iov_base: src.as_ptr().cast_mut().cast(),
        iov_len: src.len(),
    };
    // SAFETY: `local` describes `dst`, which we borrow mutably, and `far`
    // describes `src`, which we borrow shared: the kernel writes only the
    // former and reads only the latter, two distinct live allocations of
    // this process that nothing else touches during the call. The iovecs
    // live across the call.
    let got = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &far, 1, 0) };
    match got {
        -1 => Err(io::Error::last_os_error()),
        n if n as usize == dst.len() => Ok(()),
        _ => Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
    }
}

/// Hold an exclusive advisory lock on `file` until it is closed (`flock`):
/// launchers on one machine take turns through it.
pub(crate) fn lock_exclusive(file: &std::fs::File) -> io::Result<()> {
    loop {
        match rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return Ok(r?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::process::Stdio;

    /// A copy twenty times as slow at offsets is told apart; a copy that
    /// fails is not called slow.
    #[test]
    fn slow_copy_offsets_finds_an_offset_penalty() {
        let slow = slow_copy_offsets(|src, dst| {
            let times = if dst.as_ptr() as usize % 64 == 0 {
                1
            } else {
                20
            };
            for _ in 0..times {
                dst.copy_from_slice(src);
                std::hint::black_box(&mut *dst);
            }
            Some(())
        });
        assert_eq!(slow, 32);
        assert_eq!(slow_copy_offsets(|_, _| None), 0);
    }

    /// The penalties of the AMD EPYC VMs, where only a destination 1 to 31
    /// (Zen 3) or 1 to 15 (Zen 5) bytes past its source's offset within a
    /// 4 KiB page copies slowly, are found and told apart wherever the
    /// allocator puts the buffers: the ways measured put the destination
    /// at the source's page offset, 8 and 24 bytes past it.
    #[test]
    fn slow_copy_offsets_finds_how_far_a_page_offset_penalty_reaches() {
        for reach in [16, 32] {
            let mut seen = std::collections::BTreeSet::new();
            let slow = slow_copy_offsets(|src, dst| {
                let apart = (dst.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096;
                seen.insert(apart);
                // A copy that takes 20 times as long where penalised
                // (spun, not copied: the CPU's own copy may be slow at
                // other offsets than this test's).
                let us = if (1..reach).contains(&apart) { 400 } else { 20 };
                let until = std::time::Instant::now() + std::time::Duration::from_micros(us);
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
                Some(())
            });
            assert_eq!(slow, reach);
            assert_eq!(seen.into_iter().collect::<Vec<_>>(), [0, 8, 24]);
        }
    }

    #[test]
    fn another_process_memory_is_read_and_written_this_one_refused_bad_ranges_fail() {
        let mut word = [0u8; 4];
        let here = [7u8; 4];
        let err = read_process_memory(std::process::id(), here.as_ptr() as usize, &mut word);
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        // A child of ours: the first mapping of its program file starts with
        // the ELF magic (a parent may read its child under every Yama
        // setting; a seccomp profile might still forbid it). `spawn` may
        // return while the kernel is still mapping the new program, so wait
        // until the child has echoed a line: then its exec is complete.
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"x\n").unwrap();
        let mut echo = [0u8; 2];
        child.stdout.take().unwrap().read_exact(&mut echo).unwrap();
        assert_eq!(&echo, b"x\n");
        let exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", child.id())).unwrap();
        let start = maps
            .lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.len() >= 6 && f[2] == "00000000" && std::path::Path::new(f[5]) == exe)
            .map(|f| usize::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap())
            .expect("the program's first page is mapped");
        match read_process_memory(child.id(), start, &mut word) {
            Ok(()) => assert_eq!(&word, b"\x7fELF"),
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
        }
        assert!(
            read_process_memory(child.id(), 8, &mut word).is_err(),
            "unmapped"
        );
        let wraps = read_process_memory(child.id(), usize::MAX - 1, &mut word);
        assert_eq!(wraps.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        // Writes: refused for this process, for a range that wraps and for
        // one the child has not mapped (or mapped read-only); a word at
        // the far end of the child's stack (the kernel maps 128 KiB and
        // more beneath what `cat` uses) is written and read back.
        let err = write_process_memory(std::process::id(), here.as_ptr() as usize, &word);
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let wraps = write_process_memory(child.id(), usize::MAX - 1, &word);
        assert_eq!(wraps.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(
            write_process_memory(child.id(), 8, &word).is_err(),
            "unmapped"
        );
        assert!(
            write_process_memory(child.id(), start, b"abcd").is_err(),
            "read-only"
        );
        let stack = maps
            .lines()
            .find(|line| line.ends_with("[stack]"))
            .map(|line| usize::from_str_radix(line.split('-').next().unwrap(), 16).unwrap())
            .expect("the child has a stack");
        match write_process_memory(child.id(), stack, b"GASP") {
            Ok(()) => {
                read_process_memory(child.id(), stack, &mut word).unwrap();
                assert_eq!(&word, b"GASP");
            }
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
        }
        drop(input); // end of input: cat ends
        assert!(child.wait().unwrap().success());
    }

    #[test]
    fn the_kernel_copy_of_own_memory_moves_every_byte_at_any_offset() {
        let src: Vec<u8> = (0..4099u32).map(|i| (i * 7 % 251) as u8).collect();
        for shift in [0, 1, 16, 63] {
            let mut dst = vec![0u8; src.len() + 64];
            match copy_own_memory(&src, &mut dst[shift..shift + src.len()]) {
                Ok(()) => {
                    assert_eq!(&dst[shift..shift + src.len()], &src[..]);
                    assert!(
                        dst[..shift]
                            .iter()
                            .chain(&dst[shift + src.len()..])
                            .all(|&b| b == 0)
                    );
                }
                // A seccomp profile may forbid the call.
                Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
            }
        }
    }

    fn cpus_of(set: &CpuSet) -> Vec<usize> {
        (0..CpuSet::MAX_CPU).filter(|&i| set.is_set(i)).collect()
    }

    #[test]
    fn helpers_float_over_the_launchers_cpus_while_the_rank_stays_bound() {
        let all = allowed_cpus();
        if all.len() < 2 {
            return; // nothing wider to float over on one CPU
        }
        // A thread of its own stands for a bound rank; this process (its
        // main thread's set) for the launcher.
        let launcher = std::process::id();
        std::thread::spawn(move || {
            let mut one = CpuSet::new();
            one.set(all[0]);
            thread::sched_setaffinity(None, &one).unwrap();
            let helper = unbound_during(Some(launcher), || {
                std::thread::spawn(|| cpus_of(&thread::sched_getaffinity(None).unwrap()))
                    .join()
                    .unwrap()
            });
            assert_eq!(helper, all, "a helper started inside floats");
            let rank = cpus_of(&thread::sched_getaffinity(None).unwrap());
            assert_eq!(rank, vec![all[0]], "the rank is bound again");
            // Not under our launcher: nothing changes.
            let helper = unbound_during(None, || {
                std::thread::spawn(|| cpus_of(&thread::sched_getaffinity(None).unwrap()))
                    .join()
                    .unwrap()
            });
            assert_eq!(helper, vec![all[0]]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn host_names_that_do_not_resolve_are_named_once() {
        let hosts = [
            "localhost",
            "no-such-host.invalid",
            "localhost",
            "no-such-host.invalid",
        ];
        assert_eq!(unresolved(hosts.into_iter()), vec!["no-such-host.invalid"]);
        assert!(unresolved(["localhost"].into_iter()).is_empty());
    }
}
