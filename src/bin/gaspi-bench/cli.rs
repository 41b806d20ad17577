//! `gaspi-bench`'s command line (clap: the help, `--version` and usage
//! errors come from this one definition).

use crate::adapters::{BCAST_IMPLS, DESIGNS, LOCK_DESIGNS, LOCK_MODES, LOCK_TARGETS, PATTERNS};
use crate::alltoallv::{ALLTOALLV_DISTS, ALLTOALLV_IMPLS};
use crate::catalog::BenchName;
use crate::collectives::{ALLGATHERV_IMPLS, ALLREDUCE_IMPLS, DISTRIBUTIONS};
use crate::kernels::{DECOMPS, GUPS_IMPLS, STENCIL_IMPLS};
use crate::report::Format;
use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, ValueEnum};
use gaspi::launcher::{Binding, LAUNCH_FAILED};

/// Benchmarks of the GASPI runtime on local ranks; each verifies the data
/// it moves. Started on its own it launches itself on `-n` ranks (as
/// `gaspi-run` would); under `gaspi-run` or `mpirun` it is a rank already.
/// `gaspi-bench plot CSV... -o OUT.svg` draws `--format csv` rows (see
/// `gaspi-bench plot --help`).
#[derive(Parser, Debug)]
#[command(name = "gaspi-bench", version, max_term_width = 100)]
pub struct Cli {
    /// The benchmark.
    #[arg(value_enum)]
    pub bench: BenchName,

    /// Ranks [default: 2; 4 for all; 8 for put-lat-distance and
    /// shared-notify-lat].
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub ranks: Option<u16>,

    /// Ranks per node [default: all on one node; 2 for all; 4 for
    /// put-lat-distance and shared-notify-lat; 1 for model].
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    pub ppn: Option<u16>,

    /// Message sizes: powers of two from A to B, or a list A,B,C
    /// (suffixes K, M, G: 8:4M).
    #[arg(long, value_name = "A:B", value_parser = parse_sizes)]
    pub sizes: Option<Sizes>,

    /// Repetitions per size [default: by size].
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: Option<u64>,

    /// Time every call on its own: min, median and max of single calls
    /// (the statistic of GPI-2's and OSU's micro-benchmarks) instead of 25
    /// batch means, which include the slow calls of a noisy machine.
    #[arg(long)]
    pub per_op: bool,

    /// Under mpirun, run MPI's side of each size before ours instead of
    /// after (comparison scripts alternate it between rounds).
    #[arg(long)]
    pub mpi_first: bool,

    /// Implementations side by side (allreduce, allgatherv, alltoallv, bcast,
    /// stencil, gups).
    #[arg(long = "impl", value_name = "I,J", value_delimiter = ',',
          value_parser = PossibleValuesParser::new(known_impls()))]
    pub impls: Option<Vec<String>>,

    /// Data distributions (allgatherv: regular, decreasing, bcast;
    /// alltoallv: regular, random, sparse).
    #[arg(long = "dist", value_name = "D,E", value_delimiter = ',',
          value_parser = PossibleValuesParser::new(known_dists()))]
    pub dists: Option<Vec<String>>,

    /// stencil: how the grid is cut (1d: row bands; 2d: blocks).
    #[arg(long = "decomp", value_name = "D,E", value_delimiter = ',',
          value_parser = PossibleValuesParser::new(DECOMPS))]
    pub decomps: Option<Vec<String>>,

    /// fence communication patterns.
    #[arg(long = "pattern", value_name = "P,Q", value_delimiter = ',',
          value_parser = PossibleValuesParser::new(PATTERNS))]
    pub patterns: Option<Vec<String>>,

    /// fence designs (fence, fence-overlap) or lock designs (lock).
    #[arg(long = "design", value_name = "D,E", value_delimiter = ',',
          value_parser = PossibleValuesParser::new(known_designs()))]
    pub designs: Option<Vec<String>>,

    /// lock: what the contenders do.
    #[arg(long = "mode", value_name = "M,N", value_delimiter = ',',
          value_parser = PossibleValuesParser::new(LOCK_MODES))]
    pub modes: Option<Vec<String>>,

    /// lock: how many ranks lock at once [default: 1, 2, 4, ... N].
    #[arg(long, value_name = "C,D", value_delimiter = ',',
          value_parser = clap::value_parser!(u16).range(1..))]
    pub contenders: Option<Vec<u16>>,

    /// lock: what the ranks that do not lock do meanwhile: wait in the
    /// library (a barrier), or compute without calling it until every
    /// contender is done (the passive target that MPI progress cannot
    /// reach but through the engine's relay thread).
    #[arg(long = "target", value_name = "T,U", value_delimiter = ',',
          value_parser = PossibleValuesParser::new(LOCK_TARGETS))]
    pub targets: Option<Vec<String>>,

    /// table (IMB-style columns, see README) or csv.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// How ranks wait (GASPI_WAIT).
    #[arg(long, value_name = "MODE", value_parser = ["auto", "spin", "yield", "block"])]
    pub wait: Option<String>,

    /// CPU binding: block (consecutive ranks share CPUs), spread, none
    /// (gaspi-run --bind).
    #[arg(long, value_name = "B", default_value = "block", value_parser = parse_binding)]
    pub bind: Binding,

    /// native, or gpi2 (built with feature gpi2: between nodes through
    /// GPI-2; also GASPI_ENGINE=gpi2).
    #[arg(long, value_name = "E", value_parser = parse_engine)]
    pub engine: Option<gaspi::Engine>,

    /// With --engine gpi2 or mpi: every node a host of its own (no shared memory
    /// between nodes, as on a cluster).
    #[arg(long)]
    pub emulate_hosts: bool,

    #[command(flatten, next_help_heading = "Allreduce")]
    pub allreduce: AllreduceArgs,

    /// Alltoallv with private results: smallest piece between two ranks of
    /// a node copied once, straight between their buffers (cross-memory
    /// attach); `off`: always two copies through the window [default: 16K
    /// where ranks have a core each; where they share cores, 32K in the
    /// calls whose way the job measured faster].
    #[arg(long, value_name = "B", value_parser = parse_size_or_off, help_heading = "Alltoallv")]
    pub single_copy_min: Option<usize>,

    /// Alltoallv: pieces between two nodes averaging at least this many
    /// bytes go straight from the sender's buffer into the target node's
    /// window, unstaged; `off`: always staged and aggregated [default: 8K
    /// on the native engine, 256K through MPI].
    #[arg(long, value_name = "B", value_parser = parse_size_or_off, help_heading = "Alltoallv")]
    pub direct_min: Option<usize>,

    /// Alltoallv: pieces copied into the windows (and, in calls of 4 MiB
    /// or more per rank, private results out of them) with non-temporal
    /// stores (yes), ordinary ones (no), or whichever the calls measure
    /// faster where a rank sends 4 MiB or more, or with private results a
    /// piece of 8 KiB or more, 2 KiB where ranks share a CPU (auto).
    #[arg(long = "a2a-stream-stores", value_name = "S", default_value = "auto", value_parser = ["auto", "yes", "no"], help_heading = "Alltoallv")]
    pub a2a_stream_stores: String,

    /// Alltoallv: copies of the node window's data area that the calls use
    /// in turn (an even number, at least 2), or `auto` (the library's
    /// default): 2 where a rank receives under 16 KiB per call, else enough
    /// that 2 MiB of a rank's results lie between two uses of a copy (at
    /// most 64 copies and 32 MiB), through which the calls turn where no
    /// rank shares its cores, and where ranks share them, as the calls
    /// measure faster, or through the first two [default: auto].
    #[arg(long = "a2a-copies", value_name = "C", default_value = "auto", value_parser = parse_copies, help_heading = "Alltoallv")]
    pub a2a_copies: Copies,

    #[command(flatten, next_help_heading = "Model (a cluster's parameters)")]
    pub model: ModelArgs,
}

/// A size, or `off` (`usize::MAX`).
fn parse_size_or_off(s: &str) -> Result<usize, String> {
    if s == "off" {
        Ok(usize::MAX)
    } else {
        parse_size(s)
    }
}

/// `--a2a-copies`: a number, or `auto` (`None`: the rule of
/// `gaspi::AlltoallvOptions::copies`).
#[derive(Clone, Copy, Debug)]
pub struct Copies(pub Option<usize>);

fn parse_copies(s: &str) -> Result<Copies, String> {
    if s == "auto" {
        return Ok(Copies(None));
    }
    let c = s
        .parse()
        .map_err(|_| format!("{s:?}: a number of copies or auto"))?;
    // The library's own check (an even number, at least 2).
    let opts = gaspi::AlltoallvOptions {
        copies: Some(c),
        ..Default::default()
    };
    opts.copies_for(0, 0, None).map_err(|e| e.to_string())?;
    Ok(Copies(Some(c)))
}

/// Sizes, parsed.
pub type Sizes = Vec<usize>;

/// The allreduce's thresholds (`gaspi::AllreduceOptions`).
#[derive(Args, Debug)]
pub struct AllreduceArgs {
    /// Largest message every local rank reduces whole [default: 4K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub replicate_max: Option<usize>,
    /// The same for a job of one node [default: 2K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub node_replicate_max: Option<usize>,
    /// One node, a core per rank: largest replicated call's inputs, all
    /// local ranks together [default: 4K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub node_replicate_inputs: Option<usize>,
    /// --replicate-max while ranks share cores (each node sends one
    /// partial, one rank reduces for all) [default: 32K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub shared_replicate_max: Option<usize>,
    /// The same for a job of one node [default: 8K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub shared_node_replicate_max: Option<usize>,
    /// --replicate-max where node partials cross hosts as MPI messages
    /// (the MPI engine between hosts): a node's partials to the others
    /// together [default: no limit for hosts of one rank, else 6M; 256K
    /// between emulated hosts].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub message_replicate_max: Option<usize>,
    /// Replicated calls: one local rank reduces for its node (yes), every
    /// rank for itself (no), or yes while ranks share cores (auto).
    #[arg(long, value_name = "S", default_value = "auto", value_parser = ["auto", "yes", "no"])]
    pub share_reduction: String,
    /// Inputs put into the node's window with non-temporal stores (yes),
    /// ordinary ones (no), or whichever the calls measure faster (auto).
    #[arg(long, value_name = "S", default_value = "auto", value_parser = ["auto", "yes", "no"])]
    pub stream_inputs: String,
    /// One node, pipelined calls: results copied into the callers'
    /// buffers with non-temporal stores (yes), ordinary ones (no), or
    /// whichever the calls measure faster (auto).
    #[arg(long, value_name = "S", default_value = "auto", value_parser = ["auto", "yes", "no"])]
    pub stream_copies: String,
    /// auto: smallest message for the ring [default: 128K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub ring_min: Option<usize>,
    /// One node: smallest split message reduced in pipelined chunks
    /// [default: a quarter of the last-level cache per rank, at least
    /// 256K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub pipeline_min: Option<usize>,
    /// One rank's part of a pipelined chunk [default: 128K].
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub pipeline_chunk: Option<usize>,
}

impl AllreduceArgs {
    /// The options these arguments give.
    pub fn options(&self) -> gaspi::AllreduceOptions {
        let d = gaspi::AllreduceOptions::default();
        gaspi::AllreduceOptions {
            replicate_max: self.replicate_max.unwrap_or(d.replicate_max),
            node_replicate_max: self.node_replicate_max.unwrap_or(d.node_replicate_max),
            node_replicate_inputs: self
                .node_replicate_inputs
                .unwrap_or(d.node_replicate_inputs),
            shared_replicate_max: self.shared_replicate_max.unwrap_or(d.shared_replicate_max),
            shared_node_replicate_max: self
                .shared_node_replicate_max
                .unwrap_or(d.shared_node_replicate_max),
            message_replicate_max: self.message_replicate_max,
            share_reduction: yes_no_auto(&self.share_reduction),
            stream_inputs: yes_no_auto(&self.stream_inputs),
            stream_copies: yes_no_auto(&self.stream_copies),
            ring_min: self.ring_min.unwrap_or(d.ring_min),
            pipeline_min: self.pipeline_min.unwrap_or(d.pipeline_min),
            pipeline_chunk: self.pipeline_chunk.unwrap_or(d.pipeline_chunk),
            ..d
        }
    }
}

/// `yes`, `no` or `auto` (the arguments' parser allows no other) as an
/// option's `Some(true)`, `Some(false)` or `None`.
pub fn yes_no_auto(s: &str) -> Option<bool> {
    match s {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// `model`'s parameters [default: this machine's].
#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Latency L per message, us.
    #[arg(long, value_name = "L", value_parser = non_negative)]
    pub latency_us: Option<f64>,
    /// Overhead o per message, us.
    #[arg(long, value_name = "O", value_parser = non_negative)]
    pub overhead_us: Option<f64>,
    /// Bandwidth, MB/s.
    #[arg(long, value_name = "B", value_parser = positive)]
    pub bandwidth_mbps: Option<f64>,
    /// Remote atomic, us.
    #[arg(long, value_name = "Q", value_parser = non_negative)]
    pub atomic_us: Option<f64>,
    /// Request overhead, us.
    #[arg(long, value_name = "R", value_parser = non_negative)]
    pub request_us: Option<f64>,
}

impl ModelArgs {
    /// This machine's parameters with the given ones replaced.
    pub fn params(&self) -> gaspi::model::CostParams {
        let mut p = gaspi::model::CostParams::this_machine();
        p.latency_us = self.latency_us.unwrap_or(p.latency_us);
        p.overhead_us = self.overhead_us.unwrap_or(p.overhead_us);
        p.atomic_us = self.atomic_us.unwrap_or(p.atomic_us);
        p.request_us = self.request_us.unwrap_or(p.request_us);
        if let Some(b) = self.bandwidth_mbps {
            p.gap_per_byte_us = 1.0 / b;
        }
        p
    }
}

fn known_impls() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for i in ALLREDUCE_IMPLS
        .iter()
        .chain(&ALLGATHERV_IMPLS)
        .chain(&ALLTOALLV_IMPLS)
        .chain(&BCAST_IMPLS)
        .chain(&STENCIL_IMPLS)
        .chain(&GUPS_IMPLS)
    {
        if !v.contains(i) {
            v.push(i);
        }
    }
    v
}

fn known_dists() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = DISTRIBUTIONS.to_vec();
    v.extend(
        ALLTOALLV_DISTS
            .iter()
            .filter(|d| !DISTRIBUTIONS.contains(d)),
    );
    v
}

fn known_designs() -> Vec<&'static str> {
    DESIGNS.iter().chain(&LOCK_DESIGNS).copied().collect()
}

impl Cli {
    /// Parse the command line (MPI-style `-np N` and `-ppn P` are taken
    /// too), exiting with a short usage error (status 125,
    /// [`LAUNCH_FAILED`]) when it is wrong.
    pub fn parse_args(args: &[String]) -> Cli {
        let args =
            std::iter::once("gaspi-bench".to_string()).chain(args.iter().map(
                |a| match a.as_str() {
                    "-np" => "--np".to_string(),
                    "-ppn" => "--ppn".to_string(),
                    _ => a.clone(),
                },
            ));
        let exit = |e: clap::Error| -> ! {
            let _ = e.print();
            let code = if e.use_stderr() { LAUNCH_FAILED } else { 0 };
            std::process::exit(code.into())
        };
        let cli = Cli::try_parse_from(args).unwrap_or_else(|e| exit(e));
        if let Err(msg) = cli.check() {
            use clap::CommandFactory;
            exit(Cli::command().error(clap::error::ErrorKind::ArgumentConflict, msg));
        }
        cli
    }

    /// What clap cannot check alone: options that belong to another
    /// benchmark.
    pub fn check(&self) -> Result<(), String> {
        let name = self.bench.name();
        if let Some(impls) = &self.impls {
            let known: &[&str] = match self.bench {
                BenchName::Allreduce => &ALLREDUCE_IMPLS,
                BenchName::Allgatherv => &ALLGATHERV_IMPLS,
                BenchName::Alltoallv => &ALLTOALLV_IMPLS,
                BenchName::Bcast => &BCAST_IMPLS,
                BenchName::Stencil => &STENCIL_IMPLS,
                BenchName::Gups => &GUPS_IMPLS,
                _ => &[],
            };
            if let Some(bad) = impls.iter().find(|i| !known.contains(&i.as_str())) {
                return Err(format!("{name} has no implementation '{bad}'"));
            }
        }
        if let Some(dists) = &self.dists {
            let known: &[&str] = match self.bench {
                BenchName::Allgatherv => &DISTRIBUTIONS,
                BenchName::Alltoallv => &ALLTOALLV_DISTS,
                _ => &[],
            };
            if let Some(bad) = dists.iter().find(|d| !known.contains(&d.as_str())) {
                return Err(format!("{name} has no distribution '{bad}'"));
            }
        }
        if let Some(designs) = &self.designs {
            let known: &[&str] = match self.bench {
                BenchName::Fence | BenchName::FenceOverlap => &DESIGNS,
                BenchName::Lock => &LOCK_DESIGNS,
                _ => &[],
            };
            if let Some(bad) = designs.iter().find(|d| !known.contains(&d.as_str())) {
                return Err(format!("{name} has no design '{bad}'"));
            }
        }
        let passive_max = gaspi::Config::default().passive_transfer_size_max;
        let bad_size = match (self.bench, &self.sizes) {
            (BenchName::PassiveLat, Some(sizes)) => {
                sizes.iter().find(|&&b| b == 0 || b > passive_max)
            }
            _ => None,
        };
        if let Some(bad) = bad_size {
            return Err(format!(
                "{name} sends messages of 1..={passive_max} bytes \
                 (Config::passive_transfer_size_max), not {bad}"
            ));
        }
        if self.emulate_hosts
            && !matches!(self.engine, Some(gaspi::Engine::Gpi2 | gaspi::Engine::Mpi))
        {
            let env_gpi2 =
                std::env::var(gaspi::env::ENGINE).is_ok_and(|e| e == "gpi2" || e == "mpi");
            if !env_gpi2 {
                return Err(
                    "--emulate-hosts needs --engine gpi2 or mpi (native ranks share memory)".into(),
                );
            }
        }
        Ok(())
    }
}

/// A size: a number with an optional K, M or G suffix.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1usize << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("'{s}' is not a size"))
}

/// Sizes: `A:B` (powers of two from A to B) or a list `A,B,C`.
pub fn parse_sizes(s: &str) -> Result<Sizes, String> {
    if let Some((a, b)) = s.split_once(':') {
        let (a, b) = (parse_size(a)?, parse_size(b)?);
        if a == 0 || a > b {
            return Err(format!("{s}: need 0 < A <= B"));
        }
        Ok(std::iter::successors(Some(a), |x| x.checked_mul(2).filter(|&y| y <= b)).collect())
    } else {
        s.split(',').map(parse_size).collect()
    }
}

fn parse_binding(s: &str) -> Result<Binding, String> {
    Binding::parse(s).ok_or_else(|| format!("'{s}': use none, block or spread"))
}

fn parse_engine(s: &str) -> Result<gaspi::Engine, String> {
    gaspi::Engine::parse(s).ok_or_else(|| format!("'{s}': use native, gpi2 or mpi"))
}

fn non_negative(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("'{s}' is not a non-negative number"))
}

fn positive(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| format!("'{s}' is not a positive number"))
}

impl ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &[Format::Table, Format::Csv]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(match self {
            Format::Table => "table",
            Format::Csv => "csv",
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        let args = std::iter::once("gaspi-bench").chain(args.iter().copied());
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        cli.check().map(|()| cli)
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_sizes("8:64").unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(parse_sizes("1K:4K").unwrap(), vec![1024, 2048, 4096]);
        assert_eq!(parse_sizes("8,1M").unwrap(), vec![8, 1 << 20]);
        assert!(parse_sizes("64:8").is_err());
        assert!(parse_sizes("x").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }

    #[test]
    fn arguments_parse() {
        let a = parse(&["barrier", "-n", "8", "--format", "csv"]).unwrap();
        assert_eq!(
            (a.bench, a.ranks, a.format),
            (BenchName::Barrier, Some(8), Format::Csv)
        );
        assert!(parse(&["nope"]).is_err());
        assert!(parse(&[]).is_err());
        assert!(parse(&["all", "--wait", "nap"]).is_err());
        assert!(parse(&["allreduce", "--iters", "0"]).is_err());
        assert!(parse(&["allreduce", "-n", "0"]).is_err());
        assert!(parse(&["allreduce", "--impl", "linear"]).is_err());
        assert!(parse(&["bcast", "--impl", "linear"]).is_ok());
        // Every benchmark that --help says takes --impl accepts its own.
        assert!(parse(&["stencil", "--impl", "flat,node"]).is_ok());
        assert!(parse(&["gups", "--impl", "flat,node,node-atomic,node-lockfree"]).is_ok());
        assert!(parse(&["stencil", "--impl", "ring"]).is_err());
        assert!(parse(&["gups", "--impl", "linear"]).is_err());
        assert!(parse(&["lock", "--design", "opt"]).is_err());
        assert!(parse(&["passive-lat", "--sizes", "8,65535"]).is_ok());
        assert!(parse(&["passive-lat", "--sizes", "8,64K"]).is_err());
        assert!(parse(&["write-notify-lat", "--sizes", "8,64K"]).is_ok());
        assert_eq!(
            parse(&["allreduce", "--replicate-max", "8K"])
                .unwrap()
                .allreduce
                .options()
                .replicate_max,
            8 << 10
        );
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
