//! What a job needs besides our own variables, per engine: the one place
//! where the launcher learns about engines.

use super::pmi::Pmi;
use crate::config::Engine;
use crate::engine::job;
use crate::env;
use crate::sys;
use std::io;
use std::path::PathBuf;
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
    /// launcher is gone), in which nothing listens now.
    fn new(token: &str, ranks: usize) -> io::Result<Gpi2Setup> {
        if ranks > 256 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "GPI-2 runs at most 256 ranks on one host",
            ));
        }
        let dir = std::env::temp_dir().join("gaspi-gpi2-ports");
        std::fs::create_dir_all(&dir)?;
        let guard = std::fs::File::create(dir.join("lock"))?;
        sys::lock_exclusive(&guard)?;
        let seed = u64::from_str_radix(&token[..8], 16).unwrap_or(0);
        let slots = (u16::MAX - env::GPI2_PORT_SPAN - 20_000) as u64 / 1024;
        for attempt in 0..slots {
            let port = 20_000 + ((seed + attempt) % slots) as u16 * 1024;
            let mark = dir.join(port.to_string());
            if let Ok(pid) = std::fs::read_to_string(&mark) {
                let alive = pid
                    .trim()
                    .parse()
                    .is_ok_and(|p| job::process_info(p).is_some_and(|(_, zombie)| !zombie));
                if alive {
                    continue;
                }
            }
            let free = [0u16, 256, 512].iter().all(|&off| {
                (0..ranks as u16)
                    .all(|r| std::net::TcpListener::bind(("0.0.0.0", port + off + r)).is_ok())
            });
            if free {
                std::fs::write(&mark, std::process::id().to_string())?;
                let machinefile = std::env::temp_dir().join(format!("gaspi-{token}.machines"));
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
            "no free port range for GPI-2 found (ports 20000-64767)",
        ))
    }
}

impl Drop for Gpi2Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.machinefile);
        let _ = std::fs::remove_file(&self.mark);
    }
}
