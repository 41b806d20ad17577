//! The `gaspi-run` launcher: exit codes, output, machinefiles, timeouts,
//! failures, signals, and cleaning up after a killed launcher.

mod common;

use common::shm_objects_of;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const GASPI_RUN: &str = env!("CARGO_BIN_EXE_gaspi-run");

fn gaspi_run(args: &[&str]) -> Output {
    Command::new(GASPI_RUN)
        .args(args)
        .output()
        .expect("running gaspi-run")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gaspi-launcher-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Wait until `dir` holds `n` complete one-line files (written by ranks),
/// at most 30 s, and return their lines in name order.
fn await_files(dir: &Path, n: usize) -> Vec<String> {
    let start = Instant::now();
    loop {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .collect();
        files.sort_by_key(|e| e.file_name());
        let lines: Vec<String> = files
            .iter()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter(|text| text.ends_with('\n'))
            .map(|text| text.trim().to_string())
            .collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "ranks did not report in"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` has gone (or is a zombie about to be reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'),
    }
}

fn await_gone(pid: u32) {
    let start = Instant::now();
    while !gone(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "process {pid} is still running"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn exit_status_of_the_first_failing_rank_is_returned_and_reported() {
    let out = gaspi_run(&["-n", "3", "sh", "-c", "exit $((GASPI_RANK == 1 ? 5 : 0))"]);
    assert_eq!(out.status.code(), Some(5));
    assert!(
        text(&out.stderr).contains("rank 1 (pid"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("exited with status 5"));
    let ok = gaspi_run(&["-n", "4", "true"]);
    assert_eq!(ok.status.code(), Some(0));
    // Only notes about abandoned jobs (of other tests) may appear.
    let err = text(&ok.stderr);
    assert!(err.lines().all(|l| l.contains("abandoned job")), "{err}");
}

#[test]
fn ranks_get_their_environment_and_tagged_output() {
    let out = gaspi_run(&[
        "-n",
        "4",
        "--ppn",
        "2",
        "-t",
        "sh",
        "-c",
        "echo $GASPI_RANK/$GASPI_NRANKS/$GASPI_PPN; echo err >&2",
    ]);
    assert!(out.status.success());
    let mut lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["[0] 0/4/2", "[1] 1/4/2", "[2] 2/4/2", "[3] 3/4/2"]);
    assert_eq!(
        text(&out.stderr)
            .lines()
            .filter(|l| l.ends_with("] err"))
            .count(),
        4
    );
}

/// A `Cpus_allowed_list` ("0-2,5") as CPU numbers.
fn cpu_list(s: &str) -> Vec<usize> {
    s.trim()
        .split(',')
        .flat_map(|part| match part.split_once('-') {
            Some((a, b)) => a.parse::<usize>().unwrap()..b.parse::<usize>().unwrap() + 1,
            None => part.parse::<usize>().unwrap()..part.parse::<usize>().unwrap() + 1,
        })
        .collect()
}

/// The CPUs this process may run on.
fn my_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    cpu_list(line)
}

#[test]
fn ranks_are_bound_to_their_cpus() {
    use gaspi::launcher::Binding;
    let cpus = my_cpus();
    for ranks in [1, 2, 3, 5] {
        for (name, binding) in [
            ("block", Binding::Block),
            ("spread", Binding::Spread),
            ("none", Binding::None),
        ] {
            let n = ranks.to_string();
            let out = gaspi_run(&[
                "-n",
                &n,
                "--bind",
                name,
                "-t",
                "sh",
                "-c",
                "grep Cpus_allowed_list /proc/self/status; echo cpus=$GASPI_CPUS",
            ]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            let stdout = text(&out.stdout);
            for r in 0..ranks {
                let tag = format!("[{r}] ");
                let line = stdout
                    .lines()
                    .find(|l| l.starts_with(&tag) && l.contains("Cpus_allowed_list"))
                    .unwrap();
                let got = cpu_list(line.split(':').nth(1).unwrap());
                let mut want = binding.cpus(&cpus, r, ranks);
                if want.is_empty() {
                    want = cpus.clone(); // unbound: the launcher's CPUs
                }
                assert_eq!(got, want, "{name}, rank {r} of {ranks}");
                // Every rank knows how many CPUs the job has.
                assert!(stdout.contains(&format!("{tag}cpus={}", cpus.len())));
            }
        }
    }
    assert_eq!(
        gaspi_run(&["-n", "2", "--bind", "socket", "true"])
            .status
            .code(),
        Some(125)
    );
}

#[test]
fn a_different_binary_for_rank_0() {
    let out = gaspi_run(&["-n", "2", "-t", "-b", "/bin/echo", "sh", "-c", "echo other"]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    assert!(
        s.contains("[0] -c echo other") && s.contains("[1] other"),
        "{s}"
    );
}

#[test]
fn machinefiles_name_this_machine_only() {
    let dir = scratch("mfile");
    let local = dir.join("local");
    std::fs::write(&local, "localhost\n# comment\n127.0.0.1\n\nlocalhost\n").unwrap();
    let out = gaspi_run(&[
        "-m",
        local.to_str().unwrap(),
        "sh",
        "-c",
        "echo $GASPI_NRANKS",
    ]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).lines().collect::<Vec<_>>(),
        ["3", "3", "3"]
    );
    let remote = dir.join("remote");
    std::fs::write(&remote, "localhost\nnode017.cluster\n").unwrap();
    let out = gaspi_run(&["-m", remote.to_str().unwrap(), "true"]);
    assert_eq!(out.status.code(), Some(125));
    let msg = text(&out.stderr);
    assert!(
        msg.contains("node017.cluster") && msg.contains("not this machine"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn usage_errors() {
    // A usage error is 125, apart from a rank's status (passed through).
    let out = gaspi_run(&["true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("-n N"), "{}", text(&out.stderr));
    assert_eq!(gaspi_run(&["-n", "x", "true"]).status.code(), Some(125));
    assert_eq!(gaspi_run(&["-n", "0", "true"]).status.code(), Some(125));
    let out = gaspi_run(&["-n", "2", "--bogus", "true"]);
    assert_eq!(out.status.code(), Some(125));
    // Short: the error and a usage line, not the whole help.
    assert!(
        text(&out.stderr).lines().count() < 10,
        "{}",
        text(&out.stderr)
    );
    // A timeout of 0 (or not a number) is refused, not a job stopped at once.
    for bad in ["0", "0.0", "nan", "inf", "x"] {
        let out = gaspi_run(&["-n", "2", "--timeout", bad, "true"]);
        assert_eq!(out.status.code(), Some(125), "--timeout {bad}");
        assert!(
            text(&out.stderr).contains("--timeout"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = gaspi_run(&["-n", "2", "--tiemout", "3", "true"]);
    assert!(text(&out.stderr).contains("--timeout"), "did you mean");
    let out = gaspi_run(&["-n", "2", "/no/such/program"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("/no/such/program"));
    assert_eq!(
        gaspi_run(&["-n", "2", "sh", "-c", "exit 125"])
            .status
            .code(),
        Some(125)
    );
    assert_eq!(
        gaspi_run(&["-n", "2", "sh", "-c", "exit 2"]).status.code(),
        Some(2)
    );
    // gaspi_run's debugger option is refused with a reason.
    let out = gaspi_run(&["-d", "-n", "2", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(text(&out.stderr).contains("debugger"));
    assert!(gaspi_run(&["--help"]).status.success());
    let out = gaspi_run(&["--version"]);
    assert!(out.status.success() && text(&out.stdout).starts_with("gaspi-run "));
}

/// mpirun's spellings: -np, -ppn, --bind-to; options after the program
/// are the program's.
#[test]
fn mpirun_spellings_are_taken() {
    let out = gaspi_run(&[
        "-np",
        "4",
        "-ppn",
        "2",
        "--bind-to",
        "none",
        "sh",
        "-c",
        "echo $GASPI_RANK/$GASPI_NRANKS/$GASPI_PPN \"$@\"",
        "x",
        "-np",
        "9",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    lines.sort();
    assert_eq!(
        lines,
        ["0/4/2 -np 9", "1/4/2 -np 9", "2/4/2 -np 9", "3/4/2 -np 9"]
    );
    assert_eq!(
        gaspi_run(&["-n", "2", "--bind-to", "socket", "true"])
            .status
            .code(),
        Some(125)
    );
}

#[test]
fn timeout_stops_the_job() {
    let start = Instant::now();
    let out = gaspi_run(&["-n", "2", "--timeout", "0.3", "sleep", "30"]);
    assert_eq!(out.status.code(), Some(124));
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(text(&out.stderr).contains("timeout"));
}

#[test]
fn when_a_rank_dies_the_others_are_stopped() {
    let dir = scratch("dies");
    // Rank 0 dies once every rank has written its pid (so all are running).
    let script = format!(
        "echo $$ > {d}/$GASPI_RANK; if [ $GASPI_RANK = 0 ]; then \
         while [ $(ls {d} | wc -l) -lt 3 ]; do sleep 0.01; done; kill -9 $$; fi; exec sleep 30",
        d = dir.display()
    );
    let start = Instant::now();
    let out = gaspi_run(&["-n", "3", "--grace", "0.2", "sh", "-c", &script]);
    assert_eq!(out.status.code(), Some(128 + 9));
    assert!(start.elapsed() < Duration::from_secs(10));
    let msg = text(&out.stderr);
    assert!(
        msg.contains("rank 0") && msg.contains("SIGKILL") && msg.contains("SIGTERM"),
        "{msg}"
    );
    for pid in await_files(&dir, 3) {
        assert!(gone(pid.parse().unwrap()));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigterm_to_the_launcher_stops_the_ranks() {
    let dir = scratch("sigterm");
    let script = format!("echo $$ > {}/$GASPI_RANK; exec sleep 30", dir.display());
    let mut run = Command::new(GASPI_RUN)
        .args(["-n", "2", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = await_files(&dir, 2);
    // SAFETY: signalling the gaspi-run child we started.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    for pid in pids {
        assert!(
            gone(pid.parse().unwrap()),
            "rank {pid} outlived the launcher"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// In a rank of the killed-launcher tests (their own test binary, started
/// by gaspi-run with `LAUNCHER_TEST_DIR`): join, make a segment, report
/// the pid and job, then wait for ever. Elsewhere: nothing.
fn be_a_blocked_rank_if_asked() {
    let Ok(dir) = std::env::var("LAUNCHER_TEST_DIR") else {
        return;
    };
    let ctx = gaspi::Context::init(gaspi::Config::default()).unwrap();
    ctx.segment_create(
        0,
        1 << 20,
        gaspi::GroupId::ALL,
        gaspi::Timeout::Block,
        gaspi::Alloc::Initialized,
    )
    .unwrap();
    let token = std::env::var("GASPI_JOB").unwrap();
    std::fs::write(
        format!("{dir}/{}", ctx.rank()),
        format!("{} {token}\n", std::process::id()),
    )
    .unwrap();
    let _ = ctx.notify_waitsome(0, 0..1, gaspi::Timeout::Block);
    unreachable!("nobody notifies");
}

/// A job of 2 blocked ranks, each test `test` of this binary: gaspi-run,
/// the ranks' pids, the job's token, the ranks' report directory.
fn blocked_job(test: &str) -> (std::process::Child, Vec<u32>, String, PathBuf) {
    reporting_job(test, "LAUNCHER_TEST_DIR", Stdio::inherit())
}

/// A job of 2 ranks, each test `test` of this binary, told the directory
/// to report in (pid and token) by variable `var`; gaspi-run's standard
/// error goes to `stderr`. Returns as [`blocked_job`] once both reported.
fn reporting_job(
    test: &str,
    var: &str,
    stderr: Stdio,
) -> (std::process::Child, Vec<u32>, String, PathBuf) {
    let dir = scratch(test);
    let exe = std::env::current_exe().unwrap();
    let run = Command::new(GASPI_RUN)
        .args(["-n", "2", exe.to_str().unwrap(), "--exact", test])
        .args(["--nocapture", "-q"])
        .env(var, &dir)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let reports = await_files(&dir, 2);
    let token = reports[0].split(' ').nth(1).unwrap().to_string();
    let pids = reports
        .iter()
        .map(|r| r.split(' ').next().unwrap().parse().unwrap())
        .collect();
    (run, pids, token, dir)
}

/// The children of process `pid` (of all its threads).
fn children(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("children");
        let list = std::fs::read_to_string(path).unwrap_or_default();
        all.extend(list.split_whitespace().map(|c| c.parse::<u32>().unwrap()));
    }
    all
}

/// SIGKILL `run` (our gaspi-run child) and wait for it; its ranks `pids`
/// die with it.
fn kill_launcher(mut run: std::process::Child, pids: &[u32]) {
    // SAFETY: killing the gaspi-run child we started.
    unsafe { libc::kill(run.id() as i32, libc::SIGKILL) };
    run.wait().unwrap();
    for &p in pids {
        await_gone(p);
    }
}

#[test]
fn a_killed_launcher_takes_its_ranks_along_and_its_reaper_cleans_up() {
    be_a_blocked_rank_if_asked();
    let (run, pids, token, dir) =
        blocked_job("a_killed_launcher_takes_its_ranks_along_and_its_reaper_cleans_up");
    assert!(!shm_objects_of(&token).is_empty(), "the job has objects");
    // The reaper: the launcher's child that is not a rank.
    let reapers: Vec<u32> = children(run.id())
        .into_iter()
        .filter(|c| !pids.contains(c))
        .collect();
    assert_eq!(reapers.len(), 1, "one reaper beside the ranks {pids:?}");
    kill_launcher(run, &pids);
    // It removes the job's objects once the ranks are gone, then exits;
    // no other launcher of this test runs.
    await_gone(reapers[0]);
    assert_eq!(shm_objects_of(&token), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn when_the_reaper_is_killed_too_the_next_launcher_cleans_up() {
    be_a_blocked_rank_if_asked();
    let (run, pids, token, dir) =
        blocked_job("when_the_reaper_is_killed_too_the_next_launcher_cleans_up");
    for c in children(run.id()).into_iter().filter(|c| !pids.contains(c)) {
        // SAFETY: killing the reaper that our gaspi-run child forked (by
        // pid, while gaspi-run still holds it as an unreaped child).
        unsafe { libc::kill(c as i32, libc::SIGKILL) };
    }
    kill_launcher(run, &pids);
    // The next launcher (of this test, or of another test running
    // meanwhile) sweeps the abandoned job.
    assert!(gaspi_run(&["-n", "1", "true"]).status.success());
    assert_eq!(shm_objects_of(&token), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

/// A job that runs past its timeout says where each rank still running
/// was: a line per thread (state and kernel wait) and, where gdb can
/// attach, the backtraces, which name the call the rank was stuck in.
#[test]
fn a_hung_job_says_where_each_rank_was() {
    use gaspi::testing::Job;
    use gaspi::{Alloc, Timeout};
    Job::new(&[2])
        .timeout(Duration::from_secs(3))
        .run_and_check(
            |ctx| {
                ctx.segment_alloc(0, 64, Alloc::Initialized).unwrap();
                if ctx.rank() == 1 {
                    // Nobody notifies: stuck until the launcher stops it.
                    let _ = ctx.notify_waitsome(0, 0..1, Timeout::Block);
                }
            },
            |_, report| {
                assert!(report.timed_out);
                assert!(report.ranks[0].status.success());
                assert!(report.ranks[0].at_stop.is_none());
                let at = report.ranks[1].at_stop.as_deref().unwrap_or_default();
                let pid = report.ranks[1].pid;
                assert!(at.starts_with(&format!("thread {pid} (")), "{at}");
                assert!(
                    at.contains("notify_waitsome") || at.contains("(no backtraces: "),
                    "{at}"
                );
            },
        );
}

/// An example started by hand with `-n 3` launches itself: three ranks run
/// the ring and each prints what it received; `-n 0` is a usage error.
/// (`cargo test` builds the examples beside the binaries.)
#[test]
fn a_program_given_dash_n_launches_itself() {
    let ring = Path::new(GASPI_RUN)
        .parent()
        .expect("target directory")
        .join("examples/ring");
    let out = Command::new(&ring)
        .args(["-n", "3"])
        .output()
        .expect("running examples/ring");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for (r, left) in [(0, 2), (1, 0), (2, 1)] {
        let line = format!("rank {r} of 3: received \"hello from rank {left}\"");
        assert!(stdout.contains(&line), "{line} missing from:\n{stdout}");
    }
    let bad = Command::new(&ring).args(["-n", "0"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(125));
    assert!(text(&bad.stderr).contains("-n wants a positive number"));
}

/// A rank of [`another_user_can_neither_open_nor_disturb_a_job`]: reports
/// in, waits for the test's go (a file), writes to its neighbour, checks
/// what it got, and ends cleanly.
#[test]
fn be_a_rank_that_waits_for_a_go_if_asked() {
    let Ok(dir) = std::env::var("LAUNCHER_TEST_GO") else {
        return;
    };
    use gaspi::{Alloc, GroupId, Local, Notification, Remote, Timeout};
    let ctx = gaspi::Context::init(gaspi::Config::default()).unwrap();
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    ctx.segment_create(0, 1 << 16, GroupId::ALL, Timeout::Block, Alloc::Initialized)
        .unwrap();
    let token = std::env::var("GASPI_JOB").unwrap();
    std::fs::write(
        format!("{dir}/{me}"),
        format!("{} {token}\n", std::process::id()),
    )
    .unwrap();
    let go = Path::new(&dir).join("go");
    let start = Instant::now();
    while !go.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no go");
        std::thread::sleep(Duration::from_millis(10));
    }
    let seg = ctx.segment::<u64>(0).unwrap();
    seg.set(0, 1000 + me as u64);
    let right = (me + 1) % n;
    ctx.write_notify(
        Local::new(0, 0),
        Remote::new(right, 0, 64),
        8,
        Notification::new(0, 1),
        0,
        Timeout::Block,
    )
    .unwrap();
    ctx.notify_waitsome(0, 0..1, Timeout::Block).unwrap();
    ctx.notify_reset(0, 0).unwrap();
    assert_eq!(seg.get(8), 1000 + ((me + n - 1) % n) as u64);
    ctx.wait(0, Timeout::Block).unwrap();
    ctx.barrier(GroupId::ALL, Timeout::Block).unwrap();
}

/// Another user (uid 65534, `nobody`; run as root, as CI does, to become
/// it) can list a running job's objects in `/dev/shm` but open, remove or
/// signal none of them, and may make objects of its own under the job's
/// public token: the job runs to its end undisturbed, removes all its own
/// objects, leaves the other user's alone and says so instead of
/// reporting them as its own that it could not remove.
#[test]
fn another_user_can_neither_open_nor_disturb_a_job() {
    be_a_rank_that_waits_for_a_go_if_asked();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: becoming another user needs root");
        return;
    }
    let (run, pids, token, dir) = reporting_job(
        "be_a_rank_that_waits_for_a_go_if_asked",
        "LAUNCHER_TEST_GO",
        Stdio::piped(),
    );
    let theirs = shm_objects_of(&token);
    assert!(theirs.len() >= 4, "the job has objects: {theirs:?}");
    let path = |n: &str| std::ffi::CString::new(format!("/dev/shm/{n}")).unwrap();
    let targets: Vec<_> = theirs.iter().map(|n| path(n)).collect();
    let squats: Vec<_> = (0..3).map(|i| format!("gaspi.{token}.squat{i}")).collect();
    let squat_paths: Vec<_> = squats.iter().map(|n| path(n)).collect();
    // The other user's attempts, in a child that only makes system calls
    // (this process has threads): its exit status names the first thing
    // it could do that it should not have.
    // SAFETY: the child calls async-signal-safe functions only, on memory
    // prepared before the fork, and ends with _exit.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        // SAFETY: system calls on prepared C strings; see above.
        unsafe {
            let nobody = 65534;
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(nobody, nobody, nobody) != 0
                || libc::setresuid(nobody, nobody, nobody) != 0
            {
                libc::_exit(10);
            }
            for t in &targets {
                for flags in [libc::O_RDONLY, libc::O_RDWR] {
                    let fd = libc::open(t.as_ptr(), flags);
                    if fd >= 0 {
                        libc::_exit(11);
                    }
                }
                if libc::truncate(t.as_ptr(), 0) == 0 {
                    libc::_exit(12);
                }
                if libc::unlink(t.as_ptr()) == 0 {
                    libc::_exit(13);
                }
            }
            for &p in &pids {
                if libc::kill(p as libc::pid_t, libc::SIGTERM) == 0 {
                    libc::_exit(14);
                }
            }
            for s in &squat_paths {
                let fd = libc::open(
                    s.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
                    0o644,
                );
                if fd < 0 {
                    libc::_exit(15);
                }
                libc::close(fd);
            }
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the other user could do what it should not (status {status:#x}: 11 open, \
         12 truncate, 13 unlink, 14 signal; 10, 15: the test's own set-up failed)"
    );
    std::fs::write(dir.join("go"), "").unwrap();
    let out = run.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("could not remove"), "{err}");
    assert!(
        err.contains("3 shared-memory object(s) named like this job's belong to another user"),
        "{err}"
    );
    // The job's own objects are gone; the other user's stay, theirs to
    // remove (root may).
    let mut left = shm_objects_of(&token);
    left.sort();
    assert_eq!(left, squats);
    for s in &squats {
        std::fs::remove_file(format!("/dev/shm/{s}")).unwrap();
    }
    let _ = std::fs::remove_dir_all(dir);
}
