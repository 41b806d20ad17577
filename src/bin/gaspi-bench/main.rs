//! `gaspi-bench`: benchmarks of the GASPI runtime on local ranks.
//!
//! `gaspi-bench BENCH -n N` launches itself on N ranks (through the same
//! launcher as `gaspi-run`); run under `gaspi-run` it is a rank already.
//! Rank 0 prints an IMB-style table or CSV rows; every row says whether the
//! data the benchmark moved was verified. `gaspi-bench plot CSV... -o SVG`
//! draws such rows.

#![warn(clippy::undocumented_unsafe_blocks)]

mod adapters;
mod alltoallv;
mod benches;
mod catalog;
mod cli;
mod collectives;
mod gups;
mod kernels;
#[cfg(feature = "mpi")]
mod mpi_rma;
#[cfg(feature = "mpi")]
mod mpi_twin;
mod plot;
mod printer;
mod report;
mod run;
mod sharing;
mod stencil;

use catalog::BenchName;
use cli::Cli;
use gaspi::launcher::{Launch, Output};
use gaspi::{Config, Context};
use run::run_on;
use std::process::ExitCode;

/// Run the benchmark(s) on this rank as a rank of a `gaspi-run` job.
fn run_rank(a: &Cli) -> Result<bool, gaspi::Error> {
    run_on(a, Context::init(Config::default())?, None)
}

/// Run the benchmark(s) under `mpirun` (or `--engine mpi`, whose ranks
/// our launcher starts as an MPI job): our context from MPI_COMM_WORLD,
/// and MPI's collectives beside ours. On the MPI engine (`GASPI_ENGINE=mpi`)
/// MPI runs with `MPI_THREAD_MULTIPLE`, which the engine needs; otherwise
/// with MPI's default level, so that MPI's own figures are not charged
/// for thread safety they do not need.
#[cfg(feature = "mpi")]
fn run_mpi_rank(a: &Cli) -> Result<bool, gaspi::Error> {
    let mpi_engine = std::env::var(gaspi::env::ENGINE).is_ok_and(|e| e == "mpi");
    let universe = if mpi_engine {
        mpi::initialize_with_threading(mpi::Threading::Multiple).map(|(u, _)| u)
    } else {
        mpi::initialize()
    }
    .ok_or_else(|| gaspi::Error::Environment("MPI was initialised already".into()))?;
    let world = universe.world();
    let ctx = Context::init_mpi(&world, Config::default())?;
    let twin = mpi_twin::Mpi { world };
    run_on(a, ctx, Some(&twin))
}

/// `gaspi-bench model`: the cost models for 1 to 65,536 nodes (no job).
fn model(a: &Cli) {
    use gaspi::model::Model;
    let p = a.model.params();
    let m = Model::new(p);
    let ppn = a.ppn.map_or(1, usize::from);
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
    let header = "nodes,allgatherv_16MiB_total,allgatherv_1MiB_per_rank,allreduce_8B,allreduce_1MiB,bcast_binomial_1MiB,bcast_linear_1MiB,bcast_binomial_8B,bcast_linear_8B,alltoallv_1KiB_aggregated,alltoallv_1KiB_flat,alltoallv_messages_aggregated,alltoallv_messages_flat,halo_1024_inter_messages,halo_1024_inter_bytes,halo_1024_intra_messages_flat,halo_1024_intra_bytes_flat,halo_1024_intra_messages_node,halo_1024_us_flat,halo_1024_us_node,gups_1024_inter_messages_flat,gups_1024_inter_messages_node,gups_1024_inter_bytes,gups_1024_intra_messages_flat";
    println!("{header}");
    for &n in &nodes {
        let ranks = n * ppn;
        let (flat, node) = (m.halo(n, ppn, 1024, false), m.halo(n, ppn, 1024, true));
        let (gflat, gnode) = (
            m.gups_round(n, ppn, 1024, false),
            m.gups_round(n, ppn, 1024, true),
        );
        println!(
            "{n},{:.1},{:.1},{:.2},{:.1},{:.1},{:.1},{:.2},{:.2},{:.1},{:.1},{:.0},{:.0},{:.0},{:.0},{:.0},{:.0},{:.0},{:.2},{:.2},{:.0},{:.0},{:.0},{:.0}",
            m.allgatherv(n, ppn, 16 << 20),
            m.allgatherv(n, ppn, ranks << 20),
            m.allreduce(n, ppn, 8),
            m.allreduce(n, ppn, 1 << 20),
            m.bcast_binomial(ranks, 1 << 20),
            m.bcast_linear(ranks, 1 << 20),
            m.bcast_binomial(ranks, 8),
            m.bcast_linear(ranks, 8),
            m.alltoallv(n, ppn, 1024, true),
            m.alltoallv(n, ppn, 1024, false),
            m.alltoallv_messages(n, ppn, 1024, true),
            m.alltoallv_messages(n, ppn, 1024, false),
            flat.inter.messages,
            flat.inter.bytes,
            flat.intra.messages,
            flat.intra.bytes,
            node.intra.messages,
            m.halo_time(n, ppn, 1024, false),
            m.halo_time(n, ppn, 1024, true),
            gflat.inter.messages,
            gnode.inter.messages,
            gflat.inter.bytes,
            gflat.intra.messages,
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

/// `gaspi-bench plot`: draw CSV rows as an SVG.
fn plot_main(args: &[String]) -> ExitCode {
    use clap::Parser;
    let argv = std::iter::once("gaspi-bench plot".to_string()).chain(args.iter().cloned());
    let a = match plot::PlotCli::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                gaspi::launcher::LAUNCH_FAILED
            } else {
                0
            });
        }
    };
    match plot::plot(&a) {
        Ok(n) => {
            eprintln!("gaspi-bench: {} lines plotted in {}", n, a.output.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gaspi-bench plot: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "plot") {
        return plot_main(&args[1..]);
    }
    let a = Cli::parse_args(&args);
    #[cfg(feature = "mpi")]
    let under_mpi = mpi_twin::under_mpirun();
    #[cfg(not(feature = "mpi"))]
    let under_mpi = false;
    if a.bench == BenchName::Model {
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
    let (ranks, ppn) = a.bench.layout();
    let ranks = a.ranks.map_or(ranks, usize::from);
    let ppn = a.ppn.map(usize::from).or(ppn);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("gaspi-bench: cannot find my own program: {e}");
            return ExitCode::from(gaspi::launcher::LAUNCH_FAILED);
        }
    };
    let mut launch = Launch::new(exe, ranks)
        .args(&args)
        .output(Output::Inherit)
        .verbose(true)
        .forward_signals(true)
        .binding(a.bind);
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
        launch = launch.emulate_hosts(true);
    }
    match launch.run() {
        Ok(report) => ExitCode::from(report.exit_code().clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("gaspi-bench: {e}");
            ExitCode::from(gaspi::launcher::LAUNCH_FAILED)
        }
    }
}
