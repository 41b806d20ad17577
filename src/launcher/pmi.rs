//! A process manager for MPI jobs of our launcher: the server side of
//! PMI-1's wire protocol ("simple PMI", as MPICH's Hydra and Intel MPI's
//! speak it), so that `gaspi-run --engine mpi` starts, supervises and
//! reports each rank itself, as for the other engines, instead of handing
//! the job to `mpirun`.
//!
//! Each rank gets one end of a socket pair (`PMI_FD`, with `PMI_RANK` and
//! `PMI_SIZE`); a thread of the launcher answers every rank's requests:
//! `init`, the limits, the key-value space (`put`, `get`), `barrier_in`
//! (answered when every rank has entered), `finalize`. The process mapping
//! says one node (all ranks on this machine). A rank whose connection
//! closes outside a barrier (it exited, or never started MPI) can never
//! enter the next one: the ranks that wait in a barrier then, or enter one
//! later, have their connections shut, so that their MPI start fails
//! instead of waiting for ever.

use crate::sys;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread::JoinHandle;
use std::time::Duration;

/// Name of the job's key-value space.
const KVS: &str = "gaspi_kvs";

/// The process manager of one job.
pub(super) struct Pmi {
    /// The ranks' ends, until each rank's command takes its own.
    ends: std::sync::Mutex<Vec<Option<OwnedFd>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Pmi {
    /// Serve a job of `ranks` ranks.
    pub(super) fn new(ranks: usize) -> io::Result<Pmi> {
        let mut ours = Vec::with_capacity(ranks);
        let mut ends = Vec::with_capacity(ranks);
        for _ in 0..ranks {
            let (a, b) = sys::socket_pair()?;
            ours.push(UnixStream::from(a));
            ends.push(Some(b));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("gaspi-pmi".into())
                .spawn(move || serve(ours, &stop))?
        };
        Ok(Pmi {
            ends: std::sync::Mutex::new(ends),
            stop,
            thread: Some(thread),
        })
    }

    /// Give rank `rank`'s command its end and the variables naming it.
    pub(super) fn rank_env(&self, cmd: &mut std::process::Command, rank: usize) {
        let end = self
            .ends
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(rank)
            .and_then(Option::take);
        let size = self.ends.lock().unwrap_or_else(|e| e.into_inner()).len();
        if let Some(end) = end {
            let fd = sys::inherit_fd(cmd, end);
            cmd.env("PMI_FD", fd.to_string())
                .env("PMI_RANK", rank.to_string())
                .env("PMI_SIZE", size.to_string());
        }
    }
}

impl Drop for Pmi {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One rank's connection.
struct Client {
    stream: UnixStream,
    pending: Vec<u8>,
    open: bool,
}

/// Answer the ranks until every connection closed or `stop`.
fn serve(streams: Vec<UnixStream>, stop: &AtomicBool) {
    let n = streams.len();
    let mut clients: Vec<Client> = streams
        .into_iter()
        .map(|stream| Client {
            stream,
            pending: Vec::new(),
            open: true,
        })
        .collect();
    let mut kvs: HashMap<String, String> = HashMap::new();
    kvs.insert("PMI_process_mapping".into(), format!("(vector,(0,1,{n}))"));
    let mut in_barrier = vec![false; n];
    // A rank left outside a barrier: no barrier can complete any more.
    let mut broken = false;
    while !stop.load(SeqCst) && clients.iter().any(|c| c.open) {
        let fds: Vec<_> = clients.iter().map(|c| c.stream.as_fd()).collect();
        let Ok(ready) = sys::poll_readable(&fds, Some(Duration::from_millis(100))) else {
            break;
        };
        for (rank, r) in ready.into_iter().enumerate() {
            if !r || !clients[rank].open {
                continue;
            }
            let mut buf = [0u8; 4096];
            let got = clients[rank].stream.read(&mut buf).unwrap_or(0);
            if got == 0 {
                clients[rank].open = false;
                broken |= !in_barrier[rank];
                continue;
            }
            clients[rank].pending.extend_from_slice(&buf[..got]);
            while let Some(end) = clients[rank].pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = clients[rank].pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                let reply = answer(&line, n, &mut kvs);
                if line.starts_with("cmd=barrier_in") {
                    in_barrier[rank] = true;
                    if in_barrier.iter().all(|&b| b) {
                        in_barrier.iter_mut().for_each(|b| *b = false);
                        // One that left inside it will not enter the next.
                        broken |= clients.iter().any(|c| !c.open);
                        for c in clients.iter_mut().filter(|c| c.open) {
                            let _ = c.stream.write_all(b"cmd=barrier_out\n");
                        }
                    }
                } else if let Some(reply) = reply {
                    let _ = clients[rank].stream.write_all(reply.as_bytes());
                }
            }
        }
        if broken {
            for (c, waiting) in clients.iter_mut().zip(&in_barrier) {
                if c.open && *waiting {
                    let _ = c.stream.shutdown(std::net::Shutdown::Both);
                    c.open = false;
                }
            }
        }
    }
}

/// The reply to one request (`None`: none now).
fn answer(line: &str, n: usize, kvs: &mut HashMap<String, String>) -> Option<String> {
    let field = |k: &str| {
        line.split(' ')
            .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or("")
            .to_string()
    };
    Some(match field("cmd").as_str() {
        "init" => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".into(),
        "get_maxes" => "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024 rc=0\n".into(),
        "get_appnum" => "cmd=appnum appnum=0 rc=0\n".into(),
        "get_my_kvsname" => format!("cmd=my_kvsname kvsname={KVS} rc=0\n"),
        "get_universe_size" => format!("cmd=universe_size size={n} rc=0\n"),
        "put" => {
            kvs.insert(field("key"), field("value"));
            "cmd=put_result rc=0\n".into()
        }
        "get" => match kvs.get(&field("key")) {
            Some(v) => format!("cmd=get_result rc=0 value={v}\n"),
            None => "cmd=get_result rc=-1 msg=key_not_found\n".into(),
        },
        "finalize" => "cmd=finalize_ack\n".into(),
        "barrier_in" | "abort" => return None,
        other => format!("cmd={other} rc=-1 msg=unsupported\n"),
    })
}
