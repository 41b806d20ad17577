//! `gaspi-run`: start a GASPI program on N local ranks (GPI-2's `gaspi_run`
//! and `mpirun` for the native shared-memory engine).

use clap::Parser;
use gaspi::Engine;
use gaspi::launcher::{Binding, LAUNCH_FAILED, Launch, Output, is_local_host, read_machinefile};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const EXIT_STATUS: &str = "\
Exit status: 0 if every rank succeeded; else the status of the first rank that
failed (128+N if it was killed by signal N); 124 if --timeout passed; 125 if
gaspi-run could not start the job (a usage error, a program that cannot run).

mpirun's spellings are taken too: -np N, -ppn P, --bind-to core|none.";

/// Starts N ranks of PROGRAM on this machine as one GASPI job and waits for
/// them.
#[derive(Parser, Debug)]
#[command(name = "gaspi-run", version, after_help = EXIT_STATUS)]
struct Cli {
    /// Number of ranks (default: the machinefile's lines)
    #[arg(short = 'n', long = "np", visible_alias = "nodes", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    ranks: Option<u16>,

    /// GPI-2 machinefile; every host in it must be this machine
    #[arg(short = 'm', long = "machinefile", value_name = "FILE")]
    machinefile: Option<PathBuf>,

    /// Ranks per node: consecutive ranks form emulated nodes of P ranks
    /// (default: all ranks on one node)
    #[arg(long = "ppn", value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    ppn: Option<u16>,

    /// Stop the job after SECS seconds (more than 0)
    #[arg(long, value_name = "SECS", value_parser = positive_seconds)]
    timeout: Option<Duration>,

    /// With --timeout: print every thread's backtrace (through gdb) of
    /// each rank still running when the time is up, beside the state and
    /// kernel wait of each thread that are printed anyway
    #[arg(long, requires = "timeout")]
    backtraces: bool,

    /// After a rank fails, stop the others after SECS seconds (default 2)
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    grace: Option<Duration>,

    /// CPU binding: block cuts the CPUs into consecutive groups, one per
    /// rank in rank order (a node's ranks share CPUs); spread deals them
    /// out round-robin; none lets the kernel place ranks
    #[arg(long = "bind", value_name = "HOW", default_value = "block",
          value_parser = ["block", "spread", "none"])]
    bind: String,

    /// mpirun's binding option: core (= --bind block) or none
    #[arg(long = "bind-to", value_name = "WHAT", conflicts_with = "bind",
          value_parser = ["core", "none"])]
    bind_to: Option<String>,

    /// The ranks' engine (default: GASPI_ENGINE, else native); gpi2 needs a
    /// program built with feature gpi2 (between emulated nodes through
    /// GPI-2's TCP device, started here without ssh), mpi one built with
    /// feature mpi (between emulated nodes through MPI one-sided
    /// communication; gaspi-run serves MPI's process manager itself)
    #[arg(long, value_name = "ENGINE", value_parser = ["native", "gpi2", "mpi"])]
    engine: Option<String>,

    /// With --engine gpi2 or mpi: each node runs as a host of its own, sharing no
    /// memory with the others (a cluster on one machine; also
    /// GASPI_EMULATE_HOSTS=1)
    #[arg(long)]
    emulate_hosts: bool,

    /// Prefix every output line with its rank, in brackets
    #[arg(short = 't', long = "tag-output")]
    tag: bool,

    /// Run PROGRAM as rank 0 instead
    #[arg(short = 'b', long = "binary", value_name = "PROGRAM")]
    first: Option<PathBuf>,

    /// Accepted for gaspi_run compatibility (every host is this machine)
    #[arg(short = 'p', long = "ping")]
    ping: bool,

    /// gaspi_run's "rank 0 under a debugger": refused (see the message)
    #[arg(short = 'd', long = "debug")]
    debug: bool,

    /// gaspi_run's NUMA placement: refused (use --bind)
    #[arg(short = 'N', long = "NUMA")]
    numa: bool,

    /// The program and its arguments
    #[arg(
        required = true,
        trailing_var_arg = true,
        value_name = "PROGRAM [ARGS]"
    )]
    command: Vec<OsString>,
}

fn seconds(v: &str) -> Result<Duration, String> {
    let s: f64 = v.parse().map_err(|_| format!("'{v}' is not a number"))?;
    Duration::try_from_secs_f64(s).map_err(|_| "give seconds >= 0".to_string())
}

/// A job's timeout: 0 would stop it as it starts (`timeout(1)` reads 0 as
/// none), so it is refused.
fn positive_seconds(v: &str) -> Result<Duration, String> {
    match seconds(v)? {
        d if d.is_zero() => Err("give seconds > 0 (leave --timeout out for no timeout)".into()),
        d => Ok(d),
    }
}

/// The command line with mpirun's single-dash long options (`-np`,
/// `-ppn`) spelled as clap takes them, up to the program name.
fn conventional(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    const WITH_VALUE: [&str; 13] = [
        "-n",
        "--np",
        "-np",
        "--nodes",
        "-m",
        "--machinefile",
        "--ppn",
        "-ppn",
        "--timeout",
        "--grace",
        "--bind",
        "--bind-to",
        "--engine",
    ];
    let mut out = Vec::new();
    let mut args = args.peekable();
    let mut expect_value = false;
    while let Some(a) = args.next() {
        let s = a.to_string_lossy();
        if expect_value {
            expect_value = false;
        } else if s == "--" || !s.starts_with('-') {
            out.push(a);
            out.extend(args);
            break;
        } else {
            expect_value = WITH_VALUE.contains(&s.as_ref()) || s == "-b" || s == "--binary";
        }
        out.push(match s.as_ref() {
            "-np" => "--np".into(),
            "-ppn" => "--ppn".into(),
            _ => a,
        });
    }
    out
}

fn run(cli: Cli) -> Result<i32, String> {
    if cli.debug {
        return Err(
            "-d (rank 0 under a debugger) is not supported: attach a debugger to \
                    the running rank instead (gdb -p PID)"
                .into(),
        );
    }
    if cli.numa {
        return Err("-N (NUMA placement) is not supported: use --bind block|spread".into());
    }
    let binding = match cli.bind_to.as_deref() {
        Some("core") => Binding::Block,
        Some(_) => Binding::None,
        None => Binding::parse(&cli.bind).expect("clap checked the value"),
    };
    let mut ranks = cli.ranks.map(usize::from);
    if let Some(mf) = &cli.machinefile {
        let hosts = read_machinefile(mf)
            .map_err(|e| format!("cannot read machinefile {}: {e}", mf.display()))?;
        if hosts.is_empty() {
            return Err(format!("machinefile {} names no host", mf.display()));
        }
        if let Some(h) = hosts.iter().find(|h| !is_local_host(h)) {
            return Err(format!(
                "machinefile {} names host '{h}', which is not this machine: gaspi-run starts \
                 every rank here, whatever the engine. List only this machine (or localhost), \
                 or start a cluster job with GPI-2's gaspi_run (a program built with feature \
                 gpi2) or with mpirun/srun and GASPI_ENGINE=mpi (feature mpi).",
                mf.display()
            ));
        }
        ranks.get_or_insert(hosts.len());
    }
    let ranks = ranks.ok_or("give the number of ranks with -n N (or a machinefile with -m)")?;
    let (program, args) = cli
        .command
        .split_first()
        .expect("clap requires the program");
    let mut launch = Launch::new(program, ranks)
        .args(args)
        .output(if cli.tag {
            Output::Tagged
        } else {
            Output::Inherit
        })
        .verbose(true)
        .forward_signals(true)
        .binding(binding);
    if let Some(p) = cli.ppn {
        launch = launch.ppn(p.into());
    }
    let engine = cli.engine.as_deref().and_then(Engine::parse);
    if let Some(e) = engine {
        launch = launch.engine(e);
    }
    if cli.emulate_hosts {
        let engine = engine.or_else(|| {
            std::env::var(gaspi::env::ENGINE)
                .ok()
                .and_then(|e| Engine::parse(&e))
        });
        if !matches!(engine, Some(Engine::Gpi2 | Engine::Mpi)) {
            return Err(
                "--emulate-hosts needs --engine gpi2 or mpi (native ranks share memory)".into(),
            );
        }
        launch = launch.emulate_hosts(true);
    }
    if let Some(t) = cli.timeout {
        launch = launch.timeout(t);
    }
    launch = launch.backtraces_on_stop(cli.backtraces);
    if let Some(g) = cli.grace {
        launch = launch.grace(g);
    }
    if let Some(f) = &cli.first {
        launch = launch.first_program(f);
    }
    let report = launch.run().map_err(|e| e.to_string())?;
    for o in report.ranks.iter().filter(|_| report.timed_out) {
        if let Some(at) = &o.at_stop {
            eprint!(
                "gaspi-run: rank {} (pid {}) at the timeout:\n{at}",
                o.rank, o.pid
            );
        }
    }
    if let Some(first) = report.other_users_objects.first() {
        eprintln!(
            "gaspi-run: {} shared-memory object(s) named like this job's belong to another \
             user and were left alone (not the job's, which no one else can open): {first}{}",
            report.other_users_objects.len(),
            if report.other_users_objects.len() > 1 {
                ", ..."
            } else {
                ""
            }
        );
    }
    if !report.left_after_cleanup.is_empty() {
        eprintln!(
            "gaspi-run: could not remove shared memory {:?}",
            report.left_after_cleanup
        );
    }
    Ok(report.exit_code())
}

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "gaspi-run".into());
    let cli = match Cli::try_parse_from(std::iter::once(argv0).chain(conventional(args))) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { LAUNCH_FAILED } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(msg) => {
            eprintln!("gaspi-run: {msg}");
            ExitCode::from(LAUNCH_FAILED)
        }
    }
}
