//! `gaspi-run`: start a GASPI program on N local ranks (GPI-2's `gaspi_run`
//! for the native shared-memory engine).

use gaspi::Engine;
use gaspi::launcher::{Binding, Launch, Output, is_local_host, read_machinefile};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "\
Usage: gaspi-run -n N [OPTIONS] PROGRAM [ARGS...]
       gaspi-run -m MACHINEFILE [OPTIONS] PROGRAM [ARGS...]

Starts N ranks of PROGRAM on this machine as one GASPI job and waits for them.
Exits with the status of the first rank that failed (128+N for signal N),
124 if --timeout passed, 0 if every rank succeeded.

Options:
  -n, --nodes N            number of ranks (default: lines of the machinefile)
  -m, --machinefile FILE   GPI-2 machinefile; every host must be this machine
      --ppn P              ranks per node: consecutive ranks form emulated
                           nodes of P ranks (default: all ranks on one node)
      --timeout SECS       stop the job after SECS seconds
      --grace SECS         after a rank fails, stop the others after SECS
                           seconds (default 2)
      --bind none|block    block (default): the CPUs are cut into consecutive
                           groups, one per rank in rank order, so a node's
                           ranks share CPUs; none: the kernel places ranks
      --engine native|gpi2 the ranks' engine (default: GASPI_ENGINE, else
                           native); gpi2 needs a program built with feature
                           gpi2: between emulated nodes through GPI-2 (its TCP
                           device), started here without ssh
      --emulate-hosts      with --engine gpi2: each node runs as a host of its
                           own, sharing no memory with the others (a cluster
                           on one machine; also GASPI_EMULATE_HOSTS=1)
  -t, --tag-output         prefix every output line with [rank]
  -b, --binary PROGRAM     run PROGRAM as rank 0 instead
  -p, --ping               accepted for gaspi_run compatibility (hosts are local)
  -h, --help               this help";

struct Args {
    ranks: Option<usize>,
    machinefile: Option<PathBuf>,
    ppn: Option<usize>,
    timeout: Option<Duration>,
    grace: Option<Duration>,
    tag: bool,
    first: Option<PathBuf>,
    binding: Binding,
    engine: Option<Engine>,
    emulate_hosts: bool,
    program: PathBuf,
    args: Vec<String>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a = Args {
        ranks: None,
        machinefile: None,
        ppn: None,
        timeout: None,
        grace: None,
        tag: false,
        first: None,
        binding: Binding::Block,
        engine: None,
        emulate_hosts: false,
        program: PathBuf::new(),
        args: Vec::new(),
    };
    fn value(it: &mut impl Iterator<Item = String>, opt: &str) -> Result<String, String> {
        it.next().ok_or(format!("{opt} needs a value"))
    }
    fn number<T: std::str::FromStr>(v: String, opt: &str) -> Result<T, String> {
        v.parse()
            .map_err(|_| format!("{opt}: '{v}' is not a number"))
    }
    fn seconds(v: String, opt: &str) -> Result<Duration, String> {
        let s: f64 = number(v, opt)?;
        Duration::try_from_secs_f64(s).map_err(|_| format!("{opt}: give seconds >= 0"))
    }
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "-n" | "--nodes" | "--np" => a.ranks = Some(number(value(&mut it, &arg)?, &arg)?),
            "-m" | "--machinefile" => a.machinefile = Some(value(&mut it, &arg)?.into()),
            "--ppn" => a.ppn = Some(number(value(&mut it, &arg)?, &arg)?),
            "--timeout" => a.timeout = Some(seconds(value(&mut it, &arg)?, &arg)?),
            "--grace" => a.grace = Some(seconds(value(&mut it, &arg)?, &arg)?),
            "-t" | "--tag-output" => a.tag = true,
            "--bind" => {
                let v = value(&mut it, &arg)?;
                a.binding =
                    Binding::parse(&v).ok_or(format!("--bind {v}: use none, block or spread"))?;
            }
            "--engine" => {
                let v = value(&mut it, &arg)?;
                a.engine =
                    Some(Engine::parse(&v).ok_or(format!("--engine {v}: use native or gpi2"))?);
            }
            "--emulate-hosts" => a.emulate_hosts = true,
            "-b" | "--binary" => a.first = Some(value(&mut it, &arg)?.into()),
            "-p" | "--ping" => {}
            "-N" | "--NUMA" | "-d" | "--debug" => {
                return Err(format!("{arg} is not supported by the native engine"));
            }
            "--" => break,
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => {
                a.program = arg.into();
                a.args = it.collect();
                return Ok(Some(a));
            }
        }
    }
    match it.next() {
        Some(p) => {
            a.program = p.into();
            a.args = it.collect();
            Ok(Some(a))
        }
        None => Err("no program given".into()),
    }
}

fn run() -> Result<i32, String> {
    let Some(a) = parse(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(0);
    };
    let mut ranks = a.ranks;
    if let Some(mf) = &a.machinefile {
        let hosts = read_machinefile(mf)
            .map_err(|e| format!("cannot read machinefile {}: {e}", mf.display()))?;
        if hosts.is_empty() {
            return Err(format!("machinefile {} names no host", mf.display()));
        }
        if let Some(h) = hosts.iter().find(|h| !is_local_host(h)) {
            return Err(format!(
                "machinefile {} names host '{h}', which is not this machine; the native engine \
                 runs every rank on one machine. List only this machine (or localhost), or run \
                 on a cluster with a multi-node engine (GPI-2, MPI).",
                mf.display()
            ));
        }
        ranks.get_or_insert(hosts.len());
    }
    let ranks = ranks.ok_or("give the number of ranks with -n N (or a machinefile with -m)")?;
    if ranks == 0 {
        return Err("-n must be at least 1".into());
    }
    if a.ppn == Some(0) {
        return Err("--ppn must be at least 1".into());
    }
    let mut launch = Launch::new(&a.program, ranks)
        .args(&a.args)
        .output(if a.tag {
            Output::Tagged
        } else {
            Output::Inherit
        })
        .verbose(true)
        .forward_signals(true)
        .binding(a.binding);
    if let Some(p) = a.ppn {
        launch = launch.ppn(p);
    }
    if let Some(e) = a.engine {
        launch = launch.engine(e);
    }
    if a.emulate_hosts {
        let engine = a.engine.or_else(|| {
            std::env::var(gaspi::env::ENGINE)
                .ok()
                .and_then(|e| Engine::parse(&e))
        });
        if engine != Some(Engine::Gpi2) {
            return Err("--emulate-hosts needs --engine gpi2 (native ranks share memory)".into());
        }
        launch = launch.emulate_hosts(true);
    }
    if let Some(t) = a.timeout {
        launch = launch.timeout(t);
    }
    if let Some(g) = a.grace {
        launch = launch.grace(g);
    }
    if let Some(f) = &a.first {
        launch = launch.first_program(f);
    }
    let report = launch.run().map_err(|e| e.to_string())?;
    if !report.left_after_cleanup.is_empty() {
        eprintln!(
            "gaspi-run: could not remove shared memory {:?}",
            report.left_after_cleanup
        );
    }
    Ok(report.exit_code())
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(msg) => {
            eprintln!("gaspi-run: {msg}");
            if msg.contains("needs a value")
                || msg.starts_with("unknown option")
                || msg.starts_with("no program")
            {
                eprintln!("{USAGE}");
            }
            ExitCode::from(2)
        }
    }
}
