//! What a job needs besides our own variables, per engine: the one place
//! where the launcher learns about engines.

use super::pmi::Pmi;
use crate::config::Engine;
use crate::engine::job;
use crate::env;
use crate::sys;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The per-engine part of a job.
pub(super) enum EngineSetup {
    /// Nothing beyond our variables.
    Native,
    /// GPI-2's machine file and a port range of its own.
    Gpi2(Gpi2Setup),
    /// MPI's process manager, served by the launcher.
    Mpi(Pmi),
}

impl EngineSetup {
    /// Prepare a job `token` of `ranks` ranks on `engine`.
    pub(super) fn new(engine: Engine, token: &str, ranks: usize) -> io::Result<EngineSetup> {
        Ok(match engine {
            Engine::Native => EngineSetup::Native,
            Engine::Gpi2 => EngineSetup::Gpi2(Gpi2Setup::new(token, ranks)?),
            Engine::Mpi => EngineSetup::Mpi(Pmi::new(ranks)?),
        })
    }

    /// Whether every node may run as a host of its own (no shared memory
    /// between nodes): only where a transport carries what crosses them.
    pub(super) fn emulates_hosts(&self) -> bool {
        matches!(self, EngineSetup::Gpi2(_) | EngineSetup::Mpi(_))
    }

    /// Files of this job to remove if the launcher dies (its reaper does).
    /// Not the port range's reservation: the reaper of a launch that failed
    /// half-way runs on after the launcher has released the range, which
    /// another job may hold by then; the next launch frees a range whose
    /// launcher has gone.
    pub(super) fn files(&self) -> Vec<&Path> {
        match self {
            EngineSetup::Gpi2(g) => vec![g.machinefile.as_path()],
            _ => Vec::new(),
        }
    }

    /// Add the engine's variables to rank `rank`'s command.
    pub(super) fn rank_env(&self, cmd: &mut Command, rank: usize) {
        match self {
            EngineSetup::Native => {}
            EngineSetup::Gpi2(g) => {
                cmd.env(env::ENGINE, "gpi2")
                    .env(env::SOCKET, rank.to_string())
                    .env(env::GPI2_MFILE, &g.machinefile)
                    .env(env::GPI2_PORT, g.port.to_string());
            }
            EngineSetup::Mpi(p) => {
                cmd.env(env::ENGINE, "mpi");
                p.rank_env(cmd, rank);
            }
        }
    }
}

/// What the ranks of a GPI-2-engine job need besides our variables: the
/// machine file GPI-2 reads and the base of its ports.
pub(super) struct Gpi2Setup {
    machinefile: PathBuf,
    port: u16,
    /// This job's reservation of its port range.
    mark: PathBuf,
}

impl Gpi2Setup {
    /// A machine file naming this host once per rank, and a port range
    /// reserved for this job among the launchers of this machine (a file
    /// per range under a lock, released when the job ends or when its
    /// launcher is gone), in which nothing listens now. Both live in this
    /// user's private directory of reservations; what a job whose
    /// launcher and reaper were both killed left there goes now.
    fn new(token: &str, ranks: usize) -> io::Result<Gpi2Setup> {
        if ranks > 256 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "GPI-2 runs at most 256 ranks on one host",
            ));
        }
        let dir = ports_dir(&std::env::temp_dir())?;
        let guard = std::fs::File::create(dir.join("lock"))?;
        sys::lock_exclusive(&guard)?;
        sweep_stale(&dir);
        let seed = u64::from_str_radix(&token[..8], 16).unwrap_or(0);
        let bases = port_bases(ephemeral_ports());
        let slots = bases.len() as u64;
        for attempt in 0..slots {
            let port = bases[((seed + attempt) % slots) as usize];
            let mark = dir.join(port.to_string());
            if held(&mark) {
                continue;
            }
            let free = [0u16, 256, 512].iter().all(|&off| {
                (0..ranks as u16)
                    .all(|r| std::net::TcpListener::bind(("0.0.0.0", port + off + r)).is_ok())
            });
            if free {
                // Named after the job, not the range: the reaper of a
                // launch that failed half-way may remove it after the
                // range has passed to another job.
                let machinefile = dir.join(format!("{token}.machines"));
                std::fs::write(&mark, format!("{} {token}", std::process::id()))?;
                std::fs::write(&machinefile, "localhost\n".repeat(ranks))?;
                return Ok(Gpi2Setup {
                    machinefile,
                    port,
                    mark,
                });
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "no free port range for GPI-2 found (ports 20000-{}, outside the \
                 kernel's ephemeral range)",
                u16::MAX - env::GPI2_PORT_SPAN
            ),
        ))
    }
}

/// Whether reservation `mark` (its launcher's pid and job token) names a
/// launcher that still runs.
fn held(mark: &Path) -> bool {
    std::fs::read_to_string(mark).is_ok_and(|text| {
        text.split_whitespace()
            .next()
            .and_then(|pid| pid.parse().ok())
            .is_some_and(|p| job::process_info(p).is_some_and(|(_, zombie)| !zombie))
    })
}

/// Remove the reservations in `dir` whose launchers are gone, with the
/// machine files of their jobs (a launcher killed with its reaper leaves
/// both; the caller holds the directory's lock).
fn sweep_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let is_range = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u16>().is_ok());
        if !is_range || held(&e.path()) {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        // A job token is hex digits (nothing that leaves the directory).
        if let Some(token) = text
            .split_whitespace()
            .nth(1)
            .filter(|t| t.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            let _ = std::fs::remove_file(dir.join(format!("{token}.machines")));
        }
        let _ = std::fs::remove_file(e.path());
    }
}

/// The directory of this user's port reservations: `gaspi-gpi2-ports-UID`
/// in `base` (the temporary directory), made with mode 0700 (another user can
/// neither read nor take this user's reservations, nor block them with a
/// lock file of theirs). One that exists must be a directory of this
/// user's that no one else may write.
fn ports_dir(base: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = rustix::process::geteuid().as_raw();
    let dir = base.join(format!("gaspi-gpi2-ports-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => return Ok(dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = std::fs::symlink_metadata(&dir)?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of this user's: remove it, or set TMPDIR \
                 to another directory",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// The first port of every range a GPI-2 job may reserve: 1024 apart from
/// 20000, each with its [`env::GPI2_PORT_SPAN`] ports outside `ephemeral`
/// (the ports the kernel hands to outgoing connections: a range inside
/// it could be taken, between our check and GPI-2's listen, by any
/// process's connection, another job's included). All of them where the
/// ephemeral range leaves none.
fn port_bases(ephemeral: Option<(u16, u16)>) -> Vec<u16> {
    let all: Vec<u16> = (20_000..=u16::MAX - env::GPI2_PORT_SPAN)
        .step_by(1024)
        .collect();
    let outside: Vec<u16> = match ephemeral {
        Some((lo, hi)) => all
            .iter()
            .copied()
            .filter(|&p| p + env::GPI2_PORT_SPAN <= lo || p > hi)
            .collect(),
        None => Vec::new(),
    };
    if outside.is_empty() { all } else { outside }
}

/// The kernel's ephemeral port range (`ip_local_port_range`), if it can be
/// read.
fn ephemeral_ports() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<u16>().ok());
    Some((it.next()??, it.next()??))
}

impl Drop for Gpi2Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.machinefile);
        let _ = std::fs::remove_file(&self.mark);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_reservations_live_in_a_private_directory() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("gaspi-ports-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let dir = ports_dir(&base).unwrap();
        let mode = |d: &Path| std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(ports_dir(&base).unwrap(), dir, "found again");
        // One that others may write is refused, as is a link to elsewhere.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ports_dir(&base).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("TMPDIR"), "{e}");
        std::fs::remove_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&base, &dir).unwrap();
        assert_eq!(
            ports_dir(&base).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn reservations_of_launchers_gone_are_swept_with_their_machine_files() {
        let dir = std::env::temp_dir().join(format!("gaspi-sweep-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A launcher gone (no pid reaches i32::MAX: Linux's pid_max is at
        // most 2^22), one that runs (this process), and a reservation in
        // the form before job tokens (a pid alone).
        for (port, pid, token) in [
            (20000, i32::MAX as u32, "0a1b"),
            (21024, std::process::id(), "2c3d"),
        ] {
            std::fs::write(dir.join(port.to_string()), format!("{pid} {token}")).unwrap();
            std::fs::write(dir.join(format!("{token}.machines")), "localhost\n").unwrap();
        }
        std::fs::write(dir.join("22048"), (i32::MAX as u32).to_string()).unwrap();
        std::fs::write(dir.join("lock"), "").unwrap();
        sweep_stale(&dir);
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["21024", "2c3d.machines", "lock"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn gpi2_port_ranges_avoid_the_ephemeral_ports() {
        // Linux's default 32768-60999: 12 ranges below, 3 above.
        let b = port_bases(Some((32768, 60999)));
        assert_eq!(b.len(), 15);
        assert_eq!((b[0], b[11], b[12]), (20_000, 31_264, 61_984));
        for &p in &b {
            let end = p + env::GPI2_PORT_SPAN; // one past the last port
            assert!(end <= 32768 || p > 60999, "{p}..{end}");
        }
        // A range covering every candidate leaves all of them (the bind
        // check still applies), as does an unreadable one.
        let all = port_bases(None);
        assert_eq!(all.len(), 44);
        assert_eq!(port_bases(Some((1024, 65535))), all);
        assert_eq!(*all.last().unwrap(), 20_000 + 43 * 1024);
    }
}
