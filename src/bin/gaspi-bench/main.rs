//! `gaspi-bench`: benchmarks of the GASPI runtime on local ranks.
//!
//! `gaspi-bench BENCH -n N` launches itself on N ranks (through the same
//! launcher as `gaspi-run`); run under `gaspi-run` it is a rank already.
//! Rank 0 prints an IMB-style table or CSV rows; every row says whether the
//! data the benchmark moved was verified.

#![warn(clippy::undocumented_unsafe_blocks)]

mod adapters;
mod benches;
mod collectives;
#[cfg(feature = "mpi")]
mod mpi_rma;
#[cfg(feature = "mpi")]
mod mpi_twin;
mod report;

use benches::Bench;
use gaspi::launcher::{Binding, Launch, Output};
use gaspi::{Config, Context};
use report::{CSV_HEADER, Format, Row, csv_line, table};
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str = "\
Usage: gaspi-bench BENCH [-n N] [--ppn P] [--sizes A:B] [--iters K] [--impl I,J] [--dist D,E]
                         [--format table|csv] [--wait MODE] [--engine E [--emulate-hosts]]

Benchmarks (each verifies the data it moves):
  write-notify-lat  ping-pong of write_notify + notify_waitsome (ranks 0, 1), one-way latency
  write-bw          streamed writes rank 0 -> 1, then one notification; beside single-thread memcpy
  read-lat          read + wait (rank 0 reads from rank 1)
  atomic-lat        atomic_fetch_add on rank 1's word from rank 0
  passive-lat       ping-pong of passive_send + passive_receive (ranks 0, 1), one-way latency
  barrier           barrier over all ranks (impl gaspi: GroupId::ALL, node-aware with
                    several nodes; gaspi-flat: one shared counter; gaspi-node: a node)
  allreduce         sum of f64 over all ranks; --impl auto (default), dissemination, ring,
                    direct (seed 002 on node windows, result read in the node's window;
                    add -private for a copy in the caller's buffer), naive (everyone
                    writes to everyone), gaspi (GASPI's allreduce, up to 255 elements)
  allgatherv        u64 elements; --impl ring-shared (default, result in the node window),
                    ring-private (copied out), naive (everyone writes to everyone);
                    --dist regular (default), decreasing, bcast; bytes = total / ranks
  fence             RMA window epochs: the puts of --pattern zero|single|neighbors8|halo4|
                    halo8 (seed 003), then MPI_Win_fence, per --design notified|opt|deferred;
                    bytes per put (default: single, every design)
  fence-overlap     put to the right, compute as long as the epoch takes, fence: the
                    overlap percentage (seed 003, figure 6) per design
  lock              lock + put + unlock per --design mcs-rw|two-level, --mode excl-same|
                    excl-distinct|shared-same|lock-all|put-flush (put + flush inside one
                    lock_all), with 1..N --contenders locking at once (seed 004, figure 8);
                    bytes per put (default 8)
  bcast             RMA broadcast from rank 0 into every rank's window + flush (seed 000):
                    --impl linear (lock_all + puts), binomial (broadcaster threads), node
                    (one copy per node); reports the crossover
  put-lat-distance  write-notify-lat from rank 0 to each other rank (impl: intra:R / inter:R)
  shared-notify-lat remote write_notify into node 1's shared window until some rank of
                    node 1 claims it, one way (needs 2 nodes: --ppn)
  all               every benchmark briefly on 4 ranks in 2 nodes (default), with a summary
  model             the cost models of the collectives (gaspi::model) for 1 to 65,536 nodes,
                    from the schedules they run, with this machine's parameters or
                    --latency-us L --overhead-us O --bandwidth-mbps B --atomic-us Q
                    --request-us R (a cluster's); --ppn ranks per node (default 1)

Options:
  -n N               ranks (default 2; 4 for 'all', 8 for 'put-lat-distance')
  --ppn P            ranks per node (default: all on one node; 2 for 'all')
  --sizes A:B        message sizes: powers of two from A to B, or a list A,B,C
                     (suffixes K, M: --sizes 8:4M)
  --iters K          repetitions per size (default: by size)
  --impl I,J         implementations side by side (allreduce, allgatherv)
  --replicate-max B  allreduce: largest message every local rank reduces whole (default 4K)
  --node-replicate-max B  the same for a job of one node (default 2K)
  --shared-replicate-max B  --replicate-max while ranks share cores (each node
                     sends one partial, one rank reduces for all; default 32K)
  --shared-node-replicate-max B  the same for a job of one node (default 8K)
  --share-reduction S  allreduce, replicated: one local rank reduces for its node
                     (yes), every rank for itself (no), or yes while ranks share
                     cores (auto, the default)
  --ring-min B       allreduce auto: smallest message for the ring (default 128K)
  --dist D,E         allgatherv data distributions
  --pattern P,Q      fence communication patterns
  --design D,E       fence designs (fence, fence-overlap) or lock designs (lock)
  --mode M,N         lock: what the contenders do
  --contenders C,D   lock: how many ranks lock at once (default 1, 2, 4, ... N)
  --format F         table (IMB columns) or csv (bench,impl,procs,ppn,bytes,reps,
                     t_min_us,t_median_us,t_max_us,mbps,verified)
  --wait MODE        how ranks wait: auto, spin, yield or block (GASPI_WAIT)
  --bind B           block (default: consecutive ranks share CPUs) or none (gaspi-run --bind)
  --engine E         native (default) or gpi2 (built with feature gpi2: between nodes
                     through GPI-2; also GASPI_ENGINE=gpi2)
  --emulate-hosts    with --engine gpi2: every node a host of its own (no shared
                     memory between nodes, as on a cluster)";

const BENCHES: [&str; 16] = [
    "write-notify-lat",
    "write-bw",
    "read-lat",
    "atomic-lat",
    "passive-lat",
    "barrier",
    "allreduce",
    "allgatherv",
    "fence",
    "fence-overlap",
    "lock",
    "bcast",
    "put-lat-distance",
    "shared-notify-lat",
    "all",
    "model",
];

struct Args {
    bench: String,
    ranks: Option<usize>,
    ppn: Option<usize>,
    sizes: Option<Vec<usize>>,
    iters: Option<usize>,
    impls: Option<Vec<String>>,
    dists: Option<Vec<String>>,
    patterns: Option<Vec<String>>,
    designs: Option<Vec<String>>,
    modes: Option<Vec<String>>,
    contenders: Option<Vec<usize>>,
    format: Format,
    wait: Option<String>,
    engine: Option<gaspi::Engine>,
    binding: Binding,
    emulate_hosts: bool,
    allreduce: gaspi::AllreduceOptions,
    /// `model`: the machine's parameters.
    params: gaspi::model::CostParams,
}

/// A comma-separated list of names, each one of `known`.
fn parse_names(v: Option<&String>, option: &str, known: &[&str]) -> Result<Vec<String>, String> {
    let v = v.ok_or(format!("{option} needs a value"))?;
    v.split(',')
        .map(|x| {
            if known.contains(&x) {
                Ok(x.to_string())
            } else {
                Err(format!("{option} {x}: one of {}", known.join(", ")))
            }
        })
        .collect()
}

fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .map(|n| n * mult)
        .map_err(|_| format!("'{s}' is not a size"))
}

fn parse_sizes(s: &str) -> Result<Vec<usize>, String> {
    if let Some((a, b)) = s.split_once(':') {
        let (a, b) = (parse_size(a)?, parse_size(b)?);
        if a == 0 || a > b {
            return Err(format!("--sizes {s}: need 0 < A <= B"));
        }
        let mut v = vec![a];
        while let Some(next) = v.last().unwrap().checked_mul(2).filter(|&x| x <= b) {
            v.push(next);
        }
        Ok(v)
    } else {
        s.split(',').map(parse_size).collect()
    }
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args {
        bench: String::new(),
        ranks: None,
        ppn: None,
        sizes: None,
        iters: None,
        impls: None,
        dists: None,
        patterns: None,
        designs: None,
        modes: None,
        contenders: None,
        format: Format::Table,
        wait: None,
        engine: None,
        binding: Binding::Block,
        emulate_hosts: false,
        allreduce: gaspi::AllreduceOptions::default(),
        params: gaspi::model::CostParams::this_machine(),
    };
    let mut it = args.iter();
    let real = |v: Option<&String>, o: &str| -> Result<f64, String> {
        v.ok_or(format!("{o} needs a value"))?
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or(format!("{o} needs a non-negative number"))
    };
    let num = |v: Option<&String>, o: &str| -> Result<usize, String> {
        v.ok_or(format!("{o} needs a value"))?
            .parse()
            .map_err(|_| format!("{o} needs a number"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "-n" => a.ranks = Some(num(it.next(), "-n")?),
            "--ppn" => a.ppn = Some(num(it.next(), "--ppn")?),
            "--latency-us" => a.params.latency_us = real(it.next(), "--latency-us")?,
            "--overhead-us" => a.params.overhead_us = real(it.next(), "--overhead-us")?,
            "--atomic-us" => a.params.atomic_us = real(it.next(), "--atomic-us")?,
            "--request-us" => a.params.request_us = real(it.next(), "--request-us")?,
            "--bandwidth-mbps" => {
                let mbps = real(it.next(), "--bandwidth-mbps")?;
                if mbps == 0.0 {
                    return Err("--bandwidth-mbps must be positive".into());
                }
                a.params.gap_per_byte_us = 1.0 / mbps;
            }
            "--iters" => a.iters = Some(num(it.next(), "--iters")?),
            "--sizes" => a.sizes = Some(parse_sizes(it.next().ok_or("--sizes needs a value")?)?),
            "--impl" => {
                let known: Vec<&str> = collectives::ALLREDUCE_IMPLS
                    .iter()
                    .chain(&collectives::ALLGATHERV_IMPLS)
                    .chain(&adapters::BCAST_IMPLS)
                    .copied()
                    .collect();
                a.impls = Some(parse_names(it.next(), "--impl", &known)?);
            }
            "--dist" => {
                a.dists = Some(parse_names(
                    it.next(),
                    "--dist",
                    &collectives::DISTRIBUTIONS,
                )?)
            }
            "--pattern" => {
                a.patterns = Some(parse_names(it.next(), "--pattern", &adapters::PATTERNS)?)
            }
            "--design" => {
                let known: Vec<&str> = adapters::DESIGNS
                    .iter()
                    .chain(&adapters::LOCK_DESIGNS)
                    .copied()
                    .collect();
                a.designs = Some(parse_names(it.next(), "--design", &known)?)
            }
            "--mode" => a.modes = Some(parse_names(it.next(), "--mode", &adapters::LOCK_MODES)?),
            "--contenders" => {
                let v = it.next().ok_or("--contenders needs a value")?;
                a.contenders = Some(
                    v.split(',')
                        .map(|c| c.parse().map_err(|_| format!("--contenders {v}: numbers")))
                        .collect::<Result<_, _>>()?,
                );
            }
            "--format" => {
                a.format = match it.next().map(String::as_str) {
                    Some("table") => Format::Table,
                    Some("csv") => Format::Csv,
                    _ => return Err("--format is table or csv".into()),
                }
            }
            "--replicate-max" => {
                a.allreduce.replicate_max =
                    parse_size(it.next().ok_or("--replicate-max needs a value")?)?
            }
            "--node-replicate-max" => {
                a.allreduce.node_replicate_max =
                    parse_size(it.next().ok_or("--node-replicate-max needs a value")?)?
            }
            "--share-reduction" => {
                a.allreduce.share_reduction = match it.next().map(String::as_str) {
                    Some("auto") => None,
                    Some("yes") => Some(true),
                    Some("no") => Some(false),
                    _ => return Err("--share-reduction is auto, yes or no".into()),
                }
            }
            "--shared-replicate-max" => {
                a.allreduce.shared_replicate_max =
                    parse_size(it.next().ok_or("--shared-replicate-max needs a value")?)?
            }
            "--shared-node-replicate-max" => {
                a.allreduce.shared_node_replicate_max = parse_size(
                    it.next()
                        .ok_or("--shared-node-replicate-max needs a value")?,
                )?
            }
            "--ring-min" => {
                a.allreduce.ring_min = parse_size(it.next().ok_or("--ring-min needs a value")?)?
            }
            "--bind" => {
                let v = it.next().ok_or("--bind needs a value")?;
                a.binding =
                    Binding::parse(v).ok_or(format!("--bind {v}: use none, block or spread"))?;
            }
            "--emulate-hosts" => a.emulate_hosts = true,
            "--engine" => {
                let v = it.next().ok_or("--engine needs a value")?;
                a.engine = Some(
                    gaspi::Engine::parse(v).ok_or(format!("--engine {v}: use native or gpi2"))?,
                );
            }
            "--wait" => {
                let w = it.next().ok_or("--wait needs a value")?;
                gaspi::WaitMode::parse(w)
                    .ok_or(format!("--wait {w}: use auto, spin, yield or block"))?;
                a.wait = Some(w.clone());
            }
            s if !s.starts_with('-') && a.bench.is_empty() => {
                if !BENCHES.contains(&s) {
                    return Err(format!("unknown benchmark '{s}'"));
                }
                a.bench = s.to_string();
            }
            s => return Err(format!("unexpected argument '{s}'")),
        }
    }
    if a.bench.is_empty() {
        return Err("name a benchmark".into());
    }
    if let Some(impls) = &a.impls {
        let known: &[&str] = match a.bench.as_str() {
            "allreduce" => &collectives::ALLREDUCE_IMPLS,
            "allgatherv" => &collectives::ALLGATHERV_IMPLS,
            "bcast" => &adapters::BCAST_IMPLS,
            _ => &[],
        };
        if let Some(bad) = impls.iter().find(|i| !known.contains(&i.as_str())) {
            return Err(format!("{} has no implementation '{bad}'", a.bench));
        }
    }
    if let Some(designs) = &a.designs {
        let known: &[&str] = match a.bench.as_str() {
            "fence" | "fence-overlap" => &adapters::DESIGNS,
            "lock" => &adapters::LOCK_DESIGNS,
            _ => &[],
        };
        if let Some(bad) = designs.iter().find(|d| !known.contains(&d.as_str())) {
            return Err(format!("{} has no design '{bad}'", a.bench));
        }
    }
    Ok(Some(a))
}

/// This machine in one line, for the record.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    // The job's CPUs (the launcher's): a bound rank sees only its own.
    let cores = std::env::var(gaspi::env::CPUS)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(0, |n| n.get()));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {cores} cores, Linux {}", kernel.trim())
}

/// Rank 0's printer.
struct Printer {
    format: Format,
    rows: Vec<Row>,
}

impl Printer {
    fn emit(&mut self, title: &str, rows: Vec<Row>) {
        let mut out = std::io::stdout().lock();
        match self.format {
            Format::Table => {
                let _ = writeln!(out, "\n# {title}");
                let _ = write!(out, "{}", table(&rows));
            }
            Format::Csv => {
                for r in &rows {
                    let _ = writeln!(out, "{}", csv_line(r));
                }
            }
        }
        let _ = out.flush();
        self.rows.extend(rows);
    }

    fn find(&self, bench: &str, imp: &str, bytes: usize) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.bench == bench && r.imp == imp && r.bytes == bytes)
    }

    fn summary(&self, ranks: usize, secs: f64) {
        let mut lines = Vec::new();
        let us = |r: Option<&Row>| r.map_or("-".to_string(), |r| format!("{:.3} us", r.median()));
        lines.push(format!(
            "write-notify-lat   8 B       {} one way (ranks 0-1)",
            us(self.find("write-notify-lat", "gaspi", 8))
        ));
        if let (Some(g), Some(m)) = (
            self.find("write-bw", "gaspi", 4 << 20),
            self.find("write-bw", "memcpy", 4 << 20),
        ) {
            lines.push(format!(
                "write-bw           4 MiB     {:.0} MB/s = {:.0}% of memcpy ({:.0} MB/s, same run)",
                g.mbps(),
                100.0 * g.mbps() / m.mbps(),
                m.mbps()
            ));
        }
        lines.push(format!(
            "read-lat           8 B       {}",
            us(self.find("read-lat", "gaspi", 8))
        ));
        lines.push(format!(
            "atomic-lat         8 B       {}",
            us(self.find("atomic-lat", "gaspi", 8))
        ));
        lines.push(format!(
            "passive-lat        8 B       {} one way (ranks 0-1)",
            us(self.find("passive-lat", "gaspi", 8))
        ));
        lines.push(format!(
            "barrier            {ranks} ranks   {}",
            us(self.find("barrier", "gaspi", 0))
        ));
        lines.push(format!(
            "allreduce          8 B       {} ({ranks} ranks; naive {}, GASPI's {})",
            us(self.find("allreduce", "auto", 8)),
            us(self.find("allreduce", "naive", 8)),
            us(self.find("allreduce", "gaspi", 8))
        ));
        for size in [1 << 20] {
            if let (Some(r), Some(nv)) = (
                self.find("allgatherv-regular", "ring-shared", size),
                self.find("allgatherv-regular", "naive", size),
            ) {
                lines.push(format!(
                    "allgatherv         1 MiB     {:.1} us per call, naive {:.1} us (per rank, regular)",
                    r.median(),
                    nv.median()
                ));
            }
        }
        lines.push(format!(
            "fence              8 B       {} per epoch, one put to the right (notified; opt {}, deferred {})",
            us(self.find("fence", "single:notified", 8)),
            us(self.find("fence", "single:opt", 8)),
            us(self.find("fence", "single:deferred", 8))
        ));
        lines.push(format!(
            "lock               8 B       {} exclusive lock + put + unlock of rank {} (two-level; mcs-rw {}); {} contenders: {}",
            us(self.find("lock", "two-level:excl-same:c1", 8)),
            ranks - 1,
            us(self.find("lock", "mcs-rw:excl-same:c1", 8)),
            ranks,
            us(self.find("lock", &format!("two-level:excl-same:c{ranks}"), 8)),
        ));
        lines.push(format!(
            "bcast              1 MiB     {} binomial, {} linear, {} node (rank 0 to {ranks} ranks, + flush)",
            us(self.find("bcast", "binomial", 1 << 20)),
            us(self.find("bcast", "linear", 1 << 20)),
            us(self.find("bcast", "node", 1 << 20)),
        ));
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        for place in ["intra", "inter"] {
            let mut m: Vec<f64> = self
                .rows
                .iter()
                .filter(|r| {
                    r.bench == "put-lat-distance" && r.bytes == 8 && r.imp.starts_with(place)
                })
                .map(Row::median)
                .collect();
            if let Some(x) = median(&mut m) {
                lines.push(format!(
                    "put-lat-distance   8 B       {x:.3} us to ranks {place}-node (median over targets)"
                ));
            }
        }
        lines.push(format!(
            "shared-notify-lat  16 B      {} one way, remote write_notify to a claim in node 1",
            us(self.find("shared-notify-lat", "gaspi", 16))
        ));
        let verified = self.rows.iter().all(|r| r.verified);
        println!("\n# summary (medians over batches), {ranks} ranks, {secs:.1} s");
        for l in lines {
            println!("#   {l}");
        }
        println!(
            "#   data verified in every benchmark: {}",
            if verified { "yes" } else { "NO" }
        );
    }
}

/// Run the benchmark(s) on this rank; returns whether everything verified.
/// The MPI side of the comparisons, when run under `mpirun` (feature
/// `mpi`); never present otherwise.
#[cfg(feature = "mpi")]
type Twin<'a> = Option<&'a mpi_twin::Mpi>;
#[cfg(not(feature = "mpi"))]
type Twin<'a> = Option<&'a std::convert::Infallible>;

/// MPI's row for one size, if there is an MPI side (`uses`: the values
/// the body takes, unused without the feature).
macro_rules! twin {
    ($t:expr, [$($uses:ident),*], |$m:ident| $body:expr) => {{
        #[cfg(feature = "mpi")]
        let row = $t.map(|$m| $body);
        #[cfg(not(feature = "mpi"))]
        let row = {
            $(let _ = &$uses;)*
            $t.map(|never| match *never {})
        };
        row
    }};
}

/// Our rows for `sizes`; with an MPI side, size by size ours then MPI's
/// (so both see the same machine state), our rows carrying ours / MPI's
/// median.
fn with_twin(
    twin: bool,
    sizes: &[usize],
    mut ours: impl FnMut(&[usize]) -> Vec<Row>,
    mut theirs: impl FnMut(usize) -> Option<Row>,
) -> Vec<Row> {
    if !twin {
        return ours(sizes);
    }
    let mut rows = Vec::new();
    for &s in sizes {
        let mut mine = ours(&[s]);
        if let Some(m) = theirs(s) {
            for r in &mut mine {
                r.vs_mpi = Some(r.median() / m.median()).filter(|v| v.is_finite());
            }
            rows.extend(mine);
            rows.push(m);
        } else {
            rows.extend(mine);
        }
    }
    rows
}

/// Run the benchmark(s) on this rank as a rank of a `gaspi-run` job.
fn run_rank(a: &Args) -> Result<bool, gaspi::Error> {
    run_on(a, Context::init(Config::default())?, None)
}

/// Run the benchmark(s) under `mpirun`: our context from MPI_COMM_WORLD,
/// and MPI's collectives beside ours.
#[cfg(feature = "mpi")]
fn run_mpi_rank(a: &Args) -> Result<bool, gaspi::Error> {
    let universe = mpi::initialize()
        .ok_or_else(|| gaspi::Error::Environment("MPI was initialised already".into()))?;
    let world = universe.world();
    let ctx = Context::init_mpi(&world, Config::default())?;
    let twin = mpi_twin::Mpi { world };
    run_on(a, ctx, Some(&twin))
}

fn run_on(a: &Args, ctx: Context, twin: Twin) -> Result<bool, gaspi::Error> {
    let n = ctx.num_ranks() as usize;
    let ppn = ctx.ranks_per_node();
    let two = [
        "write-notify-lat",
        "write-bw",
        "read-lat",
        "atomic-lat",
        "put-lat-distance",
    ];
    let need = if n < 2 && (two.contains(&a.bench.as_str()) || a.bench == "all") {
        Some("at least 2 ranks")
    } else if a.bench == "shared-notify-lat" && ctx.num_nodes() < 2 {
        Some("at least 2 nodes (--ppn)")
    } else {
        None
    };
    if let Some(need) = need {
        if ctx.rank() == 0 {
            eprintln!("gaspi-bench: {} needs {need}", a.bench);
        }
        return Ok(false);
    }
    let b = Bench {
        ctx: &ctx,
        ppn,
        iters: a.iters,
        allreduce: a.allreduce,
    };
    let quick = a.bench == "all";
    let sizes = |default: &[usize], brief: &[usize]| -> Vec<usize> {
        a.sizes.clone().unwrap_or_else(|| {
            if quick {
                brief.to_vec()
            } else {
                default.to_vec()
            }
        })
    };
    let pow2 = |a: usize, b: usize| parse_sizes(&format!("{a}:{b}")).expect("valid range");
    let mut p = Printer {
        format: a.format,
        rows: Vec::new(),
    };
    let me = ctx.rank();
    if me == 0 {
        let wait = std::env::var(gaspi::env::WAIT).unwrap_or_else(|_| "auto".into());
        match a.format {
            Format::Table => println!(
                "# gaspi-bench {} on {n} ranks ({ppn} per node), engine {:?}, wait {wait}, bind {:?}, gaspi {}\n# machine: {}",
                a.bench,
                ctx.engine(),
                a.binding,
                Context::version(),
                machine()
            ),
            Format::Csv => println!("{CSV_HEADER}"),
        }
    }
    let start = Instant::now();
    let mut emit = |title: &str, rows: Vec<Row>| {
        if me == 0 {
            p.emit(title, rows);
        }
    };
    let selected = |name: &str| quick || a.bench == name;
    if selected("write-notify-lat") {
        let s = sizes(&pow2(1, 4 << 20), &[8, 4096, 65_536, 1 << 20]);
        emit(
            "write-notify-lat: one-way latency of write_notify + notify_waitsome (ping-pong, ranks 0-1)",
            benches::write_notify_lat(&b, &s),
        );
    }
    if selected("write-bw") {
        let s = sizes(&pow2(1024, 4 << 20), &[65_536, 1 << 20, 4 << 20]);
        emit(
            "write-bw: streamed writes rank 0 -> rank 1 (+1 notification per batch), and memcpy on rank 0",
            benches::write_bw(&b, &s),
        );
    }
    if selected("read-lat") {
        let s = sizes(&pow2(1, 4 << 20), &[8, 4096, 1 << 20]);
        emit(
            "read-lat: read + wait, rank 0 reads from rank 1",
            benches::read_lat(&b, &s),
        );
    }
    if selected("atomic-lat") {
        emit(
            "atomic-lat: atomic_fetch_add from rank 0 on a word of rank 1",
            benches::atomic_lat(&b),
        );
    }
    if selected("passive-lat") {
        let s = sizes(&pow2(1, 32 << 10), &[8, 4096]);
        emit(
            "passive-lat: one-way latency of passive_send + passive_receive (ping-pong, ranks 0-1)",
            benches::passive_lat(&b, &s),
        );
    }
    if selected("barrier") {
        let rows = with_twin(
            twin.is_some(),
            &[0],
            |_| benches::barrier(&b),
            |_| twin!(twin, [], |m| m.barrier(&b)),
        );
        emit("barrier: over all ranks", rows);
    }
    let names = |default: &[&str], brief: &[&str]| -> Vec<String> {
        let d = if quick { brief } else { default };
        a.impls
            .clone()
            .unwrap_or_else(|| d.iter().map(|s| s.to_string()).collect())
    };
    if selected("allreduce") {
        let s = sizes(&pow2(8, 4 << 20), &[8, 4096, 1 << 20]);
        let impls = names(&["auto"], &["auto", "naive", "gaspi"]);
        let rows = with_twin(
            twin.is_some(),
            &s,
            |s| collectives::allreduce(&b, s, &impls),
            |s| twin!(twin, [s], |m| m.allreduce(&b, (s / 8).max(1))),
        );
        emit(
            "allreduce: sum of f64 over all ranks (bytes per rank)",
            rows,
        );
    }
    if selected("allgatherv") {
        let s = sizes(&pow2(1024, 4 << 20), &[65_536, 1 << 20]);
        let dists = a.dists.clone().unwrap_or_else(|| vec!["regular".into()]);
        let impls = names(&["ring-shared"], &["ring-shared", "naive"]);
        let mut rows = Vec::new();
        for dist in &dists {
            rows.extend(with_twin(
                twin.is_some(),
                &s,
                |s| collectives::allgatherv(&b, s, &impls, std::slice::from_ref(dist)),
                |s| twin!(twin, [s], |m| m.allgatherv(&b, dist, (s / 8).max(1))),
            ));
        }
        emit(
            "allgatherv: u64 elements over all ranks (bytes = total / ranks)",
            rows,
        );
    }
    let designs = || {
        a.designs
            .clone()
            .unwrap_or_else(|| adapters::DESIGNS.iter().map(|s| s.to_string()).collect())
    };
    if selected("fence") {
        let s = sizes(&pow2(8, 64 << 10), &[8, 4096]);
        let patterns = a.patterns.clone().unwrap_or_else(|| {
            if quick {
                vec!["single".into(), "halo4".into()]
            } else {
                vec!["single".into()]
            }
        });
        let mut rows = Vec::new();
        for pattern in &patterns {
            // Epochs without puts have one size: 0.
            let ps: &[usize] = if pattern == "zero" { &[0] } else { &s };
            rows.extend(with_twin(
                twin.is_some(),
                ps,
                |s| adapters::fence(&b, s, std::slice::from_ref(pattern), &designs()),
                |s| twin!(twin, [s], |m| m.fence(&b, pattern, s)),
            ));
        }
        emit(
            "fence: RMA epoch = the pattern's puts (bytes each) + MPI_Win_fence (impl pattern:design)",
            rows,
        );
    }
    if selected("fence-overlap") {
        let s = sizes(&pow2(1024, 1 << 20), &[65_536]);
        emit(
            "fence-overlap: put to the right + computation + fence; overlap = (comm + compute - total) / comm",
            adapters::fence_overlap(&b, &s, &designs()),
        );
    }
    if selected("lock") {
        let s = sizes(&[8], &[8]);
        let designs = a.designs.clone().unwrap_or_else(|| {
            adapters::LOCK_DESIGNS
                .iter()
                .map(|s| s.to_string())
                .collect()
        });
        let modes = a.modes.clone().unwrap_or_else(|| {
            let m: &[&str] = if quick {
                &["excl-same"]
            } else {
                &["excl-same", "excl-distinct", "shared-same"]
            };
            m.iter().map(|s| s.to_string()).collect()
        });
        let contenders = a.contenders.clone().unwrap_or_else(|| {
            if quick {
                vec![1, n]
            } else {
                std::iter::successors(Some(1), |c| Some(c * 2).filter(|&c| c < n))
                    .chain([n])
                    .collect()
            }
        });
        let mut rows = Vec::new();
        for mode in &modes {
            for &c in contenders.iter().filter(|&&c| (1..=n).contains(&c)) {
                rows.extend(with_twin(
                    twin.is_some(),
                    &s,
                    |s| adapters::lock(&b, s, &designs, std::slice::from_ref(mode), &[c]),
                    |s| twin!(twin, [s], |m| m.lock(&b, mode, c, s)),
                ));
            }
        }
        emit(
            "lock: lock + put + unlock per contender, time on rank 0 (impl design:mode:contenders)",
            rows,
        );
    }
    if selected("bcast") {
        let s = sizes(&pow2(8, 16 << 20), &[8, 65_536, 1 << 20]);
        let impls = names(&adapters::BCAST_IMPLS, &adapters::BCAST_IMPLS);
        let rows = with_twin(
            twin.is_some(),
            &s,
            |s| adapters::bcast(&b, s, &impls),
            |s| twin!(twin, [s], |m| m.bcast(&b, s)),
        );
        let cross = adapters::bcast_crossover(&rows);
        emit(
            "bcast: rank 0's broadcast into every rank's window + flush (impl linear / binomial / node)",
            rows,
        );
        if me == 0 && a.format == Format::Table {
            for c in cross {
                println!("# bcast crossover: {c}");
            }
        }
    }
    if selected("put-lat-distance") {
        let s = sizes(&[8, 1 << 20], &[8]);
        emit(
            "put-lat-distance: write-notify-lat from rank 0 to each rank (impl: intra/inter node : target)",
            benches::put_lat_distance(&b, &s),
        );
    }
    if selected("shared-notify-lat") && ctx.num_nodes() > 1 {
        emit(
            "shared-notify-lat: rank 0's write_notify into node 1's window until a rank of node 1 claims it, one way",
            benches::shared_notify_lat(&b),
        );
    }
    let verified = p.rows.iter().all(|r| r.verified);
    if me == 0 && quick && a.format == Format::Table {
        p.summary(n, start.elapsed().as_secs_f64());
    }
    ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    Ok(me != 0 || verified)
}

/// `gaspi-bench model`: the cost models for 1 to 65,536 nodes (no job).
fn model(a: &Args) {
    use gaspi::model::Model;
    let m = Model::new(a.params);
    let p = a.params;
    let ppn = a.ppn.unwrap_or(1);
    let mut nodes: Vec<usize> = (0..=16).map(|k| 1usize << k).collect();
    nodes.extend([7, 11]);
    nodes.sort_unstable();
    println!(
        "# gaspi-bench model: L {} us, o {} us, G {:.3e} us/B ({:.0} MB/s), local {:.3e} us/B, q {} us, o_r {} us; {ppn} rank(s) per node; times in us",
        p.latency_us,
        p.overhead_us,
        p.gap_per_byte_us,
        1.0 / p.gap_per_byte_us,
        p.local_per_byte_us,
        p.atomic_us,
        p.request_us
    );
    let header = "nodes,allgatherv_16MiB_total,allgatherv_1MiB_per_rank,allreduce_8B,allreduce_1MiB,bcast_binomial_1MiB,bcast_linear_1MiB,bcast_binomial_8B,bcast_linear_8B";
    println!("{header}");
    for &n in &nodes {
        let ranks = n * ppn;
        println!(
            "{n},{:.1},{:.1},{:.2},{:.1},{:.1},{:.1},{:.2},{:.2}",
            m.allgatherv(n, ppn, 16 << 20),
            m.allgatherv(n, ppn, ranks << 20),
            m.allreduce(n, ppn, 8),
            m.allreduce(n, ppn, 1 << 20),
            m.bcast_binomial(ranks, 1 << 20),
            m.bcast_linear(ranks, 1 << 20),
            m.bcast_binomial(ranks, 8),
            m.bcast_linear(ranks, 8),
        );
    }
    for bytes in [8usize, 64 << 10, 1 << 20, 16 << 20] {
        let cross = (1..=17)
            .map(|k| 1usize << k)
            .find(|&r| m.bcast_binomial(r, bytes) < m.bcast_linear(r, bytes));
        match cross {
            Some(r) => {
                println!("# bcast crossover at {bytes} B: binomial beats linear from {r} ranks")
            }
            None => println!("# bcast crossover at {bytes} B: linear wins up to 131072 ranks"),
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = match parse(&args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("gaspi-bench: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    #[cfg(feature = "mpi")]
    let under_mpi = mpi_twin::under_mpirun();
    #[cfg(not(feature = "mpi"))]
    let under_mpi = false;
    if a.bench == "model" {
        model(&a);
        return ExitCode::SUCCESS;
    }
    if std::env::var_os(gaspi::env::RANK).is_some() || under_mpi {
        #[cfg(feature = "mpi")]
        let ran = if under_mpi {
            run_mpi_rank(&a)
        } else {
            run_rank(&a)
        };
        #[cfg(not(feature = "mpi"))]
        let ran = run_rank(&a);
        return match ran {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("gaspi-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Not a rank yet: launch this program on the ranks.
    let (ranks, ppn) = match a.bench.as_str() {
        "all" => (a.ranks.unwrap_or(4), a.ppn.or(Some(2))),
        "put-lat-distance" | "shared-notify-lat" => (a.ranks.unwrap_or(8), a.ppn.or(Some(4))),
        _ => (a.ranks.unwrap_or(2), a.ppn),
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("gaspi-bench: cannot find my own program: {e}");
            return ExitCode::from(2);
        }
    };
    let mut launch = Launch::new(exe, ranks)
        .args(&args)
        .output(Output::Inherit)
        .verbose(true)
        .forward_signals(true)
        .binding(a.binding);
    if let Some(p) = ppn {
        launch = launch.ppn(p);
    }
    if let Some(w) = &a.wait {
        launch = launch.env(gaspi::env::WAIT, w);
    }
    if let Some(e) = a.engine {
        launch = launch.engine(e);
    }
    if a.emulate_hosts {
        let gpi2 = a.engine == Some(gaspi::Engine::Gpi2)
            || std::env::var(gaspi::env::ENGINE).is_ok_and(|e| e == "gpi2");
        if !gpi2 {
            eprintln!(
                "gaspi-bench: --emulate-hosts needs --engine gpi2 (native ranks share memory)"
            );
            return ExitCode::from(2);
        }
        launch = launch.emulate_hosts(true);
    }
    match launch.run() {
        Ok(report) => ExitCode::from(report.exit_code().clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("gaspi-bench: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("8:64").unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(parse_sizes("1K:4K").unwrap(), vec![1024, 2048, 4096]);
        assert_eq!(parse_sizes("8,1M").unwrap(), vec![8, 1 << 20]);
        assert!(parse_sizes("64:8").is_err());
        assert!(parse_sizes("x").is_err());
    }

    #[test]
    fn arguments_parse() {
        let a = parse(&[
            "barrier".into(),
            "-n".into(),
            "8".into(),
            "--format".into(),
            "csv".into(),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (a.bench.as_str(), a.ranks, a.format),
            ("barrier", Some(8), Format::Csv)
        );
        assert!(parse(&["nope".into()]).is_err());
        assert!(parse(&[]).is_err());
        assert!(parse(&["all".into(), "--wait".into(), "nap".into()]).is_err());
    }
}
