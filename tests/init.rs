//! Start-up: rank and node information, ranks started without a launcher,
//! one-rank jobs, a bad environment.

mod common;

use common::*;
use gaspi::testing::Job;
use gaspi::{Config, Context, Error, Timeout};
use std::process::{Child, Command, Stdio};

#[test]
fn rank_and_node_information() {
    Job::new(&[8]).ppn(3).run(|ctx| {
        let me = ctx.rank() as usize;
        assert_eq!(ctx.num_ranks(), 8);
        assert_eq!(ctx.ranks_per_node(), 3);
        assert_eq!(ctx.num_nodes(), 3);
        assert_eq!(ctx.node(), me / 3);
        assert_eq!(ctx.local_rank() as usize, me % 3);
        assert_eq!(ctx.local_num(), if me < 6 { 3 } else { 2 });
        assert!(
            ctx.state_vec()
                .iter()
                .all(|s| *s == gaspi::RankState::Healthy)
        );
        for r in 0..8 {
            ctx.proc_ping(r).unwrap();
            ctx.connect(r, Timeout::Block).unwrap();
            ctx.disconnect(r).unwrap();
        }
        assert!(ctx.proc_ping(8).is_err());
        assert!(matches!(
            ctx.connect(9, Timeout::Block),
            Err(Error::InvalidRank { rank: 9, .. })
        ));
        assert!(Context::is_initialized());
        barrier(ctx);
    });
    Job::new(&[4]).ppn(4).run(|ctx| {
        assert_eq!((ctx.num_nodes(), ctx.local_num()), (1, 4));
        assert_eq!(ctx.local_rank(), ctx.rank());
    });
}

/// Start the current test binary as a process running only test `name`,
/// with `case` telling it what to do and `envs` as its environment. These
/// are the native engine's ways to start without a launcher (the GPI-2
/// engine needs GPI-2's variables for more than one rank), so the native
/// engine is asked for even when the suite runs on GPI-2.
fn spawn(name: &str, case: &str, envs: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1", "-q"])
        .env("INIT_TEST_CASE", case)
        .env("GASPI_ENGINE", "native");
    for var in [
        "GASPI_RANK",
        "GASPI_NRANKS",
        "GASPI_JOB",
        "GASPI_PPN",
        "GASPI_LAUNCHER",
        "GASPI_TEST_NAME",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().expect("spawning a rank")
}

/// Start `n` ranks of job `token` without a launcher, as [`spawn`] does.
fn spawn_ranks(name: &str, case: &str, n: usize, token: &str) -> Vec<Child> {
    (0..n)
        .map(|r| {
            spawn(
                name,
                case,
                &[
                    ("GASPI_RANK", r.to_string()),
                    ("GASPI_NRANKS", n.to_string()),
                    ("GASPI_JOB", token.to_string()),
                ],
            )
        })
        .collect()
}

/// Wait for `child`; its exit status, and its output for messages.
fn finish(child: Child) -> (std::process::ExitStatus, String) {
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

fn token() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}{:x}", t, std::process::id())
}

const NAME: &str = "ranks_started_without_a_launcher";

#[test]
fn ranks_started_without_a_launcher() {
    if let Ok(case) = std::env::var("INIT_TEST_CASE") {
        let ctx = Context::init(Config::default()).unwrap();
        let seg = segment(&ctx, 0, 4096);
        let (right, left) = neighbours(&ctx);
        fill(&seg, 0, 64, ctx.rank() as u64);
        ctx.write_notify(
            gaspi::Local::new(0, 0),
            gaspi::Remote::new(right, 0, 1024),
            64,
            gaspi::Notification::new(0, 1),
            0,
            Timeout::Block,
        )
        .unwrap();
        ctx.notify_waitsome(0, 0..1, Timeout::Block).unwrap();
        check(&seg, 1024, 64, left as u64, "ring data");
        barrier(&ctx);
        if case == "one-dies" {
            if ctx.rank() == 2 {
                std::process::exit(9);
            }
            // No launcher marks it: the survivors find the dead process themselves.
            match ctx.notify_waitsome(0, 5..6, Timeout::Block) {
                Err(Error::RankFailed { rank: 2 }) => {}
                other => panic!("expected RankFailed(2), got {other:?}"),
            }
        }
        return;
    }
    for (case, dead) in [("ok", None), ("one-dies", Some(2))] {
        let t = token();
        let kids = spawn_ranks(NAME, case, 3, &t);
        for (r, k) in kids.into_iter().enumerate() {
            let (status, out) = finish(k);
            if Some(r) == dead {
                assert_eq!(status.code(), Some(9), "{out}");
            } else {
                assert!(
                    status.success(),
                    "{case}: rank {r} ended with {status}:\n{out}"
                );
            }
        }
        // The last rank out removed everything, the dead rank's objects too.
        assert_eq!(shm_objects_of(&t), Vec::<String>::new(), "{case}");
    }
}

const CPUS_NAME: &str = "ranks_bound_apart_by_another_launcher_have_cpus_of_their_own";

/// mpirun and srun bind each rank to a core of its own without telling it
/// the job's CPUs (each sees one, and counted one CPU for two ranks: its
/// waits never spun): ranks find out when they join that their CPUs are
/// their own. Ranks bound to one CPU together, or not bound, do not.
#[test]
fn ranks_bound_apart_by_another_launcher_have_cpus_of_their_own() {
    if let Ok(case) = std::env::var("INIT_TEST_CASE") {
        let cpus = allowed_cpus();
        let rank: usize = std::env::var("GASPI_RANK").unwrap().parse().unwrap();
        let bind = match case.as_str() {
            "apart" => Some(cpus[rank % cpus.len()]),
            "together" => Some(cpus[0]),
            _ => None,
        };
        if let Some(cpu) = bind {
            // As mpirun's proxy would before starting the rank.
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            rustix::thread::sched_setaffinity(None, &set).unwrap();
        }
        let ctx = Context::init(Config::default()).unwrap();
        assert_eq!(
            ctx.cpus_of_its_own(),
            case == "apart",
            "{case}: rank {} on {:?}",
            ctx.rank(),
            allowed_cpus()
        );
        barrier(&ctx);
        return;
    }
    if allowed_cpus().len() < 2 {
        eprintln!("one CPU: no ranks to bind apart");
        return;
    }
    for case in ["apart", "together", "unbound"] {
        let t = token();
        for (r, k) in spawn_ranks(CPUS_NAME, case, 2, &t).into_iter().enumerate() {
            let (status, out) = finish(k);
            assert!(
                status.success(),
                "{case}: rank {r} ended with {status}:\n{out}"
            );
        }
        assert_eq!(shm_objects_of(&t), Vec::<String>::new(), "{case}");
    }
}

const KILLED_NAME: &str = "a_job_killed_without_a_launcher_is_swept_by_the_next_one";

/// Ranks started by another launcher (MPI's, GPI-2's) that are all killed
/// at once, with the reaper their first rank forked, leave their objects:
/// no survivor, no reaper and no gaspi-run cleans up. The next job started
/// without a launcher of ours removes them at its start. (With the reaper
/// alive, it removes them: `tests/mpi.rs`.)
#[test]
fn a_job_killed_without_a_launcher_is_swept_by_the_next_one() {
    if let Ok(case) = std::env::var("INIT_TEST_CASE") {
        let ctx = Context::init(Config::default()).unwrap();
        let _seg = segment(&ctx, 0, 4096);
        if case == "wait" {
            println!("ready");
            let _ = ctx.notify_waitsome(0, 0..1, Timeout::Block);
            unreachable!("nobody notifies");
        }
        return;
    }
    use std::io::BufRead;
    /// The ranks, killed (SIGKILL, our own children) and waited for when
    /// dropped: also if the test fails half-way.
    struct Ranks(Vec<Child>);
    impl Drop for Ranks {
        fn drop(&mut self) {
            for k in &mut self.0 {
                let _ = k.kill();
                let _ = k.wait();
            }
        }
    }
    let t = token();
    let mut ranks = Ranks(spawn_ranks(KILLED_NAME, "wait", 2, &t));
    for k in &mut ranks.0 {
        // libtest's own lines come first.
        let ready = std::io::BufReader::new(k.stdout.as_mut().unwrap())
            .lines()
            .map_while(|l| l.ok())
            .any(|l| l.trim() == "ready");
        assert!(ready, "a rank ended before it was ready");
    }
    assert!(!shm_objects_of(&t).is_empty(), "the job made its objects");
    // Rank 0's child: the job's reaper, killed first.
    let children = children_of(&ranks.0[0].id().to_string());
    assert_eq!(children.len(), 1, "rank 0 forked the job's reaper");
    let reaper = rustix::process::Pid::from_raw(children[0]).unwrap();
    rustix::process::kill_process(reaper, rustix::process::Signal::KILL).unwrap();
    drop(ranks);
    // A job of one rank, started on its own, sweeps the abandoned job.
    let (status, out) = finish(spawn(KILLED_NAME, "alone", &[]));
    assert!(status.success(), "{out}");
    assert_eq!(shm_objects_of(&t), Vec::<String>::new());
}

const ENV_NAME: &str = "environment_errors_and_one_rank_jobs";

#[test]
fn environment_errors_and_one_rank_jobs() {
    if let Ok(case) = std::env::var("INIT_TEST_CASE") {
        let r = Context::init(Config::default());
        match case.as_str() {
            "alone" => {
                // A program started on its own is rank 0 of a job of one.
                let ctx = r.unwrap();
                assert_eq!((ctx.rank(), ctx.num_ranks(), ctx.local_num()), (0, 1, 1));
                let seg = segment(&ctx, 0, 64);
                ctx.notify(0, 0, gaspi::Notification::new(3, 4), 0, Timeout::Block)
                    .unwrap();
                assert_eq!(ctx.notify_waitsome(0, 0..10, Timeout::Block).unwrap(), 3);
                let _ = seg;
            }
            "half" | "no-job" | "bad-rank" | "bad-wait" | "bad-nap" | "long-nap" => {
                let e = r.map(|_| ()).unwrap_err();
                assert!(matches!(e, Error::Environment(_)), "{case}: {e}");
                if case == "long-nap" {
                    assert!(e.to_string().contains("at most 100000 us"), "{e}");
                }
            }
            "nap" => {
                // A relay nap within its limits is taken (the native
                // engine has no relay: nothing else to see).
                let ctx = r.unwrap();
                assert_eq!(ctx.num_ranks(), 1);
            }
            other => panic!("unknown case {other}"),
        }
        return;
    }
    let cases: [(&str, Vec<(&str, String)>); 8] = [
        ("alone", vec![]),
        ("half", vec![("GASPI_RANK", "0".into())]),
        (
            "no-job",
            vec![("GASPI_RANK", "0".into()), ("GASPI_NRANKS", "2".into())],
        ),
        (
            "bad-rank",
            vec![
                ("GASPI_RANK", "2".into()),
                ("GASPI_NRANKS", "2".into()),
                ("GASPI_JOB", token()),
            ],
        ),
        ("bad-wait", vec![("GASPI_WAIT", "sometimes".into())]),
        ("bad-nap", vec![("GASPI_RELAY_NAP_US", "-5".into())]),
        ("long-nap", vec![("GASPI_RELAY_NAP_US", "100001".into())]),
        ("nap", vec![("GASPI_RELAY_NAP_US", "0".into())]),
    ];
    for (case, envs) in cases {
        let (status, out) = finish(spawn(ENV_NAME, case, &envs));
        assert!(status.success(), "case {case} ended with {status}:\n{out}");
    }
}

/// A build without feature `gpi2` says so when asked for the GPI-2 engine
/// (before it touches anything: no job is joined). Not while the
/// environment picks an engine (`GASPI_ENGINE` overrides the config).
#[cfg(not(feature = "gpi2"))]
#[test]
fn the_gpi2_engine_needs_its_feature() {
    engine_needs_its_feature(gaspi::Engine::Gpi2, "feature `gpi2`");
}

/// The same for the MPI engine and feature `mpi`.
#[cfg(not(feature = "mpi"))]
#[test]
fn the_mpi_engine_needs_its_feature() {
    engine_needs_its_feature(gaspi::Engine::Mpi, "feature `mpi`");
}

#[cfg(not(all(feature = "gpi2", feature = "mpi")))]
fn engine_needs_its_feature(engine: gaspi::Engine, says: &str) {
    if std::env::var_os("GASPI_ENGINE").is_some() {
        eprintln!("GASPI_ENGINE is set: it overrides Config::engine; nothing to check");
        return;
    }
    let cfg = gaspi::Config {
        engine,
        ..Default::default()
    };
    match gaspi::Context::init(cfg) {
        Err(gaspi::Error::Config(m)) => assert!(m.contains(says), "{m}"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

const AGREE_NAME: &str = "settings_must_agree_and_a_failed_start_leaves_nothing";

/// Two hand-started ranks that disagree on `GASPI_PPN`: the second to
/// come is refused with an environment error naming the variable (not a
/// misleading error later), the first gives up at its init timeout, and
/// the job's objects are gone afterwards.
#[test]
fn settings_must_agree_and_a_failed_start_leaves_nothing() {
    if let Ok(case) = std::env::var("INIT_TEST_CASE") {
        let cfg = Config {
            init_timeout: Timeout::ms(if case == "first" { 4000 } else { 1000 }),
            ..Config::default()
        };
        match Context::init(cfg) {
            Err(Error::Environment(m)) => {
                if case == "second" {
                    assert!(m.contains("GASPI_PPN"), "{m}");
                }
            }
            other => panic!("{case}: expected an environment error, got {other:?}"),
        }
        return;
    }
    let t = token();
    let envs = |r: usize, ppn: &str| {
        vec![
            ("GASPI_RANK", r.to_string()),
            ("GASPI_NRANKS", "2".into()),
            ("GASPI_JOB", t.clone()),
            ("GASPI_PPN", ppn.to_string()),
        ]
    };
    let first = spawn(AGREE_NAME, "first", &envs(0, "2"));
    // The second starts once the first has made the job.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while shm_objects_of(&t).is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "the first rank made no job"
        );
        std::thread::yield_now();
    }
    let second = spawn(AGREE_NAME, "second", &envs(1, "1"));
    for (who, k) in [("second", second), ("first", first)] {
        let (status, out) = finish(k);
        assert!(status.success(), "{who} rank ended with {status}:\n{out}");
    }
    assert_eq!(shm_objects_of(&t), Vec::<String>::new());
}
