//! The relay thread's sleep, cut short when GPI-2's TCP device receives.
//!
//! GPI-2 writes what other hosts send (data, notifications, the answers
//! to reads) into this process's memory from its device thread and wakes
//! nobody, so a rank that sleeps in the kernel (`GASPI_WAIT=block`) learns
//! of a notification only when the relay thread next looks (`relay.rs`):
//! every 20 us while someone sleeps, plus the timer's slack (50 us on
//! Linux). The TCP device receives on sockets, one per connected rank,
//! which the kernel marks readable the moment bytes arrive; the device
//! thread waits for them with `epoll`. While a thread of the rank sleeps,
//! the relay thread waits on the same sockets (an `epoll` set of its own,
//! edge-triggered, so that the device thread's reads take nothing from
//! it), with its nap as the timeout, and looks as soon as bytes arrive:
//! a notification is usually written by the time its last bytes wake the
//! relay, or by the next arrival's. The 20 us naps stay for what arrives
//! otherwise (GPI-2's InfiniBand device writes by RDMA, which wakes
//! nobody). Waiting on the sockets, a blocking write_notify across two
//! emulated hosts took 0.59-0.68 of the time of the naps alone from 8 B to
//! 64 KiB, 0.87 at 1 MiB (docs/guide/benchmarking.md).
//!
//! Which sockets: every IPv4 or IPv6 socket of this process (GPI-2 does
//! not say which descriptors are its own), found in `/proc/self/fd` and
//! put into the set through a duplicate (`pidfd_getfd`) that is closed at
//! once: an `epoll` set watches a socket while any descriptor still refers
//! to it and forgets it when GPI-2 closes it, so nothing here keeps a
//! connection open. GPI-2 connects on first use, so the list is read again
//! while someone sleeps: [`RESCAN`] after a look that found a new socket,
//! twice as long after each look that found none, up to [`RESCAN_MAX`]
//! (a job of thousands of ranks has as many sockets). A socket that is not
//! GPI-2's only makes the relay look for nothing; without `epoll` or
//! `pidfd_getfd` (Linux before 5.6) the relay naps as before.

use rustix::event::{PollFd, PollFlags, Timespec, epoll, poll};
use rustix::fd::OwnedFd;
use rustix::net::{AddressFamily, sockopt};
use std::collections::HashSet;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

/// How soon the list of sockets is read again after a look that found a
/// new one.
const RESCAN: Duration = Duration::from_millis(100);
/// The longest time between two looks while someone sleeps.
const RESCAN_MAX: Duration = Duration::from_millis(3200);

/// An `epoll` set over this process's network sockets.
pub(super) struct Arrivals {
    /// The set, and this process as a pidfd (for `pidfd_getfd`); `None`
    /// where the kernel lacks either: naps only.
    set: Option<(OwnedFd, OwnedFd)>,
    /// Sockets looked at, by descriptor number and inode (a number that
    /// GPI-2 closed and reused for another socket is a new one).
    seen: HashSet<(i32, u64)>,
    /// When the list was last read, and how long until the next look.
    scanned: Option<(Instant, Duration)>,
}

impl Arrivals {
    /// An empty set (filled on the first sleep).
    pub(super) fn new() -> Self {
        use rustix::process::{PidfdFlags, getpid, pidfd_open};
        let set = epoll::create(epoll::CreateFlags::CLOEXEC)
            .ok()
            .zip(pidfd_open(getpid(), PidfdFlags::empty()).ok());
        Arrivals {
            set,
            seen: HashSet::new(),
            scanned: None,
        }
    }

    /// Sleep for `nap`; while someone `waited` for what GPI-2 delivers,
    /// only until bytes arrive on a socket, if that is sooner.
    pub(super) fn nap(&mut self, nap: Duration, waited: bool) {
        let (Some((epoll, me)), Ok(timeout)) = (
            self.set.as_ref().filter(|_| waited),
            Timespec::try_from(nap),
        ) else {
            std::thread::sleep(nap);
            return;
        };
        if self.scanned.is_none_or(|(t, every)| t.elapsed() >= every) {
            let now = scan(epoll, me, &self.seen);
            let every = next_look(self.scanned.map(|(_, e)| e), !now.is_subset(&self.seen));
            self.scanned = Some((Instant::now(), every));
            self.seen = now;
        }
        let mut fds = [PollFd::new(epoll, PollFlags::IN)];
        // A timeout, a signal or an error: the caller looks again anyway.
        if let Ok(1..) = poll(&mut fds, Some(&timeout)) {
            drain(epoll);
        }
    }
}

/// How long after a look at the sockets the next is due, given the time
/// between the last two (`None`: this was the first) and whether this one
/// found a new socket.
fn next_look(last: Option<Duration>, found_new: bool) -> Duration {
    match last {
        Some(every) if !found_new => (every * 2).min(RESCAN_MAX),
        _ => RESCAN,
    }
}

/// Take the reported events out of `epoll` (edge-triggered: each arrival
/// is reported once; the set stays readable until they are taken).
fn drain(epoll: &OwnedFd) {
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut events = [MaybeUninit::<epoll::Event>::uninit(); 16];
    while let Ok((got, _)) = epoll::wait(epoll, &mut events, Some(&zero)) {
        if got.len() < events.len() {
            break;
        }
    }
}

/// Add to `epoll` the network sockets of this process (`me`) that are not
/// in `seen`; returns the sockets open now.
fn scan(epoll: &OwnedFd, me: &OwnedFd, seen: &HashSet<(i32, u64)>) -> HashSet<(i32, u64)> {
    use rustix::fs::{FileType, fstat, stat};
    use rustix::process::{PidfdGetfdFlags, pidfd_getfd};
    let mut now = HashSet::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return now;
    };
    for entry in dir.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // Follows the link: the socket's own inode.
        let Ok(st) = stat(entry.path()) else {
            continue;
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Socket {
            continue;
        }
        let key = (fd, st.st_ino);
        now.insert(key);
        if seen.contains(&key) {
            continue;
        }
        let Ok(dup) = pidfd_getfd(me, fd, PidfdGetfdFlags::empty()) else {
            continue;
        };
        let inet = matches!(
            sockopt::socket_domain(&dup),
            Ok(AddressFamily::INET | AddressFamily::INET6)
        );
        // Still the socket listed (not closed and reused meanwhile).
        if inet && fstat(&dup).is_ok_and(|d| d.st_ino == st.st_ino) {
            let flags = epoll::EventFlags::IN | epoll::EventFlags::ET;
            let _ = epoll::add(epoll, &dup, epoll::EventData::new_u64(0), flags);
        }
        // `dup` closes here; the set watches the socket while GPI-2's
        // descriptor refers to it.
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// A connected pair of TCP sockets on the loopback interface.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    /// Far longer than any of these naps may take.
    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn a_nap_ends_when_bytes_arrive_on_a_socket_opened_before_or_after_it() {
        let mut arrivals = Arrivals::new();
        assert!(arrivals.set.is_some(), "epoll and pidfd_getfd (Linux 5.6)");
        let (mut client, _server) = pair();
        // Bytes sent while the relay is asleep: the nap ends (a 30 s
        // nap that runs out fails the test).
        let writer = std::thread::spawn(move || {
            client.write_all(b"x").unwrap();
            client
        });
        let start = Instant::now();
        arrivals.nap(LONG, true);
        assert!(start.elapsed() < LONG / 2, "woken by the arrival");
        let _client = writer.join().unwrap();
        // A connection made later is found at the next look (made due
        // here rather than waited for).
        let (mut late, _late_server) = pair();
        late.write_all(b"y").unwrap();
        arrivals.scanned = None;
        let start = Instant::now();
        arrivals.nap(LONG, true);
        assert!(start.elapsed() < LONG / 2, "a socket opened later wakes it");
        // Nobody waits: a plain nap, the sockets are not looked at.
        let start = Instant::now();
        arrivals.nap(Duration::from_millis(1), false);
        assert!(start.elapsed() >= Duration::from_millis(1));
    }

    #[test]
    fn looks_at_the_sockets_grow_rarer_while_none_appear() {
        assert_eq!(next_look(None, false), RESCAN);
        let mut every = next_look(None, true);
        let mut seen = vec![every];
        while every < RESCAN_MAX {
            every = next_look(Some(every), false);
            seen.push(every);
        }
        assert_eq!(seen.len(), 6, "100 ms doubled up to 3.2 s: {seen:?}");
        assert_eq!(next_look(Some(RESCAN_MAX), false), RESCAN_MAX);
        assert_eq!(next_look(Some(RESCAN_MAX), true), RESCAN);
    }

    #[test]
    fn watching_a_socket_keeps_no_connection_open() {
        let mut arrivals = Arrivals::new();
        let (mut client, server) = pair();
        arrivals.nap(Duration::from_millis(1), true);
        assert!(arrivals.seen.len() >= 2, "both ends were looked at");
        // The owner closes its end: the peer sees the end of the stream
        // (a duplicate left open would keep it alive: the read times out).
        drop(server);
        client.set_read_timeout(Some(LONG)).unwrap();
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).unwrap(), 0);
    }
}
