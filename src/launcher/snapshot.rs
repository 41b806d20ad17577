//! Where a rank is when its job runs past its timeout: each thread's
//! scheduler state and the kernel function it sleeps in (from `/proc`,
//! always), and its backtraces from `gdb` when asked for and installed.
//!
//! A hung job is otherwise a pair of "killed by SIGTERM" lines; this is
//! what tells a lost wake-up (every thread asleep in `futex_wait`) from a
//! spin (running) or a full pipe (`pipe_write`).

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `gdb` attach may take before it is given up.
const GDB_LIMIT: Duration = Duration::from_secs(30);

/// A description of process `pid`: a line per thread, then (with
/// `backtraces`, if `gdb` runs) every thread's backtrace.
pub(super) fn describe(pid: u32, backtraces: bool) -> String {
    let mut out = threads(pid);
    if backtraces {
        match gdb(pid) {
            Ok(bt) => out.push_str(&bt),
            Err(why) => {
                let _ = writeln!(out, "(no backtraces: {why})");
            }
        }
    }
    out
}

/// `tid name state wchan` for each thread of `pid`, the main thread (whose
/// id is `pid`) first, then the others by id (ids wrap, so the main thread's
/// need not be the smallest).
fn threads(pid: u32) -> String {
    let dir = format!("/proc/{pid}/task");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return format!("(cannot read {dir})\n");
    };
    let mut tids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable_by_key(|&tid| (tid != pid, tid));
    let mut out = String::new();
    for tid in tids {
        let read =
            |f: &str| std::fs::read_to_string(format!("{dir}/{tid}/{f}")).unwrap_or_default();
        let stat = read("stat");
        // "tid (comm) S ...": the name may hold spaces and parentheses.
        let (name, state) = match (stat.find('('), stat.rfind(')')) {
            (Some(a), Some(b)) if a < b => (
                &stat[a + 1..b],
                stat[b + 1..].split_whitespace().next().unwrap_or("?"),
            ),
            _ => ("?", "?"),
        };
        let wchan = read("wchan");
        let wchan = match wchan.trim() {
            "" | "0" => "-",
            w => w,
        };
        let _ = writeln!(
            out,
            "thread {tid} ({name}): state {state}, waiting in {wchan}"
        );
    }
    out
}

/// Every thread's backtrace through `gdb -p`, or why there is none.
fn gdb(pid: u32) -> Result<String, String> {
    let mut child = Command::new("gdb")
        .args(["-nx", "-batch", "-p", &pid.to_string()])
        .args(["-ex", "thread apply all bt"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("gdb: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let until = Instant::now() + GDB_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("gdb did not finish within {GDB_LIMIT:?}"));
            }
        }
    }
    let text = reader.join().unwrap_or_default();
    // Keep the frames, not gdb's chatter about symbols and threads.
    let frames: String = text
        .lines()
        .filter(|l| l.starts_with('#') || l.starts_with("Thread "))
        .fold(String::new(), |mut s, l| {
            s.push_str(l);
            s.push('\n');
            s
        });
    if frames.is_empty() {
        return Err("gdb could not attach".into());
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_described_thread_by_thread() {
        let me = std::process::id();
        let d = describe(me, false);
        let first = d.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("thread {me} (")) && first.contains("state "),
            "{d}"
        );
        assert!(describe(u32::MAX, false).starts_with("(cannot read"));
    }
}
