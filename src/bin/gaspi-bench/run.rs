//! How each benchmark of the catalogue runs, on one rank.

use crate::benches::{self, Bench};
use crate::catalog::BenchName;
use crate::cli::Cli;
use crate::printer::Printer;
use crate::report::{Format, Row};
use crate::{adapters, alltoallv, collectives, kernels};
use gaspi::Context;

impl BenchName {
    /// Run it on this rank; rank 0 emits the rows.
    pub fn run(self, s: &Session, out: &mut Printer) {
        match self {
            BenchName::WriteNotifyLat => write_notify_lat(s, out),
            BenchName::WriteBw => write_bw(s, out),
            BenchName::ReadLat => read_lat(s, out),
            BenchName::AtomicLat => out.emit(
                "atomic-lat: atomic_fetch_add from rank 0 on a word of rank 1",
                benches::atomic_lat(&s.b),
            ),
            BenchName::PassiveLat => {
                let sizes = s.sizes(&pow2(1, 32 << 10), &[8, 4096]);
                out.emit(
                    "passive-lat: one-way latency of passive_send + passive_receive (ping-pong, ranks 0-1)",
                    benches::passive_lat(&s.b, &sizes),
                )
            }
            BenchName::Barrier => {
                let rows = s.with_twin(
                    &[0],
                    |_| benches::barrier(&s.b),
                    |_| twin!(s.twin, [], |m| m.barrier(&s.b)),
                );
                out.emit("barrier: over all ranks", rows)
            }
            BenchName::Allreduce => allreduce(s, out),
            BenchName::Allgatherv => allgatherv(s, out),
            BenchName::Alltoallv => alltoallv(s, out),
            BenchName::Fence => fence(s, out),
            BenchName::FenceOverlap => {
                let sizes = s.sizes(&pow2(1024, 1 << 20), &[65_536]);
                out.emit(
                    "fence-overlap: put to the right + computation + fence; overlap = (comm + compute - total) / comm",
                    adapters::fence_overlap(&s.b, &sizes, &s.fence_designs()),
                )
            }
            BenchName::Lock => lock(s, out),
            BenchName::Bcast => bcast(s, out),
            BenchName::PutLatDistance => {
                let sizes = s.sizes(&[8, 1 << 20], &[8]);
                out.emit(
                    "put-lat-distance: write-notify-lat from rank 0 to each rank (impl: intra/inter node : target)",
                    benches::put_lat_distance(&s.b, &sizes),
                )
            }
            BenchName::SharedNotifyLat => {
                if s.b.ctx.num_nodes() > 1 {
                    out.emit(
                        "shared-notify-lat: rank 0's write_notify into node 1's window until a rank of node 1 claims it, one way",
                        benches::shared_notify_lat(&s.b),
                    )
                }
            }
            BenchName::Stencil | BenchName::Gups if !full_nodes(s) => {
                if out.prints() {
                    println!("# {}: skipped, it needs full nodes", self.name());
                }
            }
            BenchName::Stencil => stencil(s, out),
            BenchName::Gups => gups(s, out),
            BenchName::All | BenchName::Model => {}
        }
    }
}

/// Powers of two from `a` to `b`.
fn pow2(a: usize, b: usize) -> Vec<usize> {
    crate::cli::parse_sizes(&format!("{a}:{b}")).expect("a valid range")
}

/// The MPI side of the comparisons, when run under `mpirun` (feature
/// `mpi`); never present otherwise.
#[cfg(feature = "mpi")]
pub type Twin<'a> = Option<&'a crate::mpi_twin::Mpi>;
#[cfg(not(feature = "mpi"))]
pub type Twin<'a> = Option<&'a std::convert::Infallible>;

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
use twin;

impl Session<'_> {
    /// Our rows for `sizes`; with an MPI side, size by size ours then MPI's
    /// (MPI's first with `--mpi-first`, so that comparison scripts can
    /// alternate the order between rounds: a process's later runs may find
    /// the machine in another state), our rows carrying ours / MPI's median.
    fn with_twin(
        &self,
        sizes: &[usize],
        mut ours: impl FnMut(&[usize]) -> Vec<Row>,
        mut theirs: impl FnMut(usize) -> Option<Row>,
    ) -> Vec<Row> {
        if self.twin.is_none() {
            return ours(sizes);
        }
        let mut rows = Vec::new();
        for &s in sizes {
            let (mut mine, m) = if self.cli.mpi_first {
                let m = theirs(s);
                (ours(&[s]), m)
            } else {
                let mine = ours(&[s]);
                (mine, theirs(s))
            };
            if let Some(m) = m {
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
}

/// What a benchmark runs with: the rank's harness, the command line, and
/// the MPI side.
pub struct Session<'a> {
    pub b: Bench<'a>,
    pub cli: &'a Cli,
    pub twin: Twin<'a>,
    /// `all`: brief runs.
    pub quick: bool,
}

impl Session<'_> {
    /// The sizes given, else `default` (or `brief` under `all`).
    fn sizes(&self, default: &[usize], brief: &[usize]) -> Vec<usize> {
        self.cli
            .sizes
            .clone()
            .unwrap_or_else(|| if self.quick { brief } else { default }.to_vec())
    }

    /// The implementations given, else `default` (or `brief`).
    fn impls(&self, default: &[&str], brief: &[&str]) -> Vec<String> {
        let d = if self.quick { brief } else { default };
        self.cli
            .impls
            .clone()
            .unwrap_or_else(|| d.iter().map(|s| s.to_string()).collect())
    }

    /// The fence designs given, else all of them.
    fn fence_designs(&self) -> Vec<String> {
        self.cli
            .designs
            .clone()
            .unwrap_or_else(|| adapters::DESIGNS.iter().map(|s| s.to_string()).collect())
    }

    fn ranks(&self) -> usize {
        self.b.ctx.num_ranks() as usize
    }
}

fn write_notify_lat(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(1, 4 << 20), &[8, 4096, 65_536, 1 << 20]);
    out.emit(
        "write-notify-lat: one-way latency of write_notify + notify_waitsome (ping-pong, ranks 0-1)",
        benches::write_notify_lat(&s.b, &sizes),
    );
}

fn write_bw(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(1024, 4 << 20), &[65_536, 1 << 20, 4 << 20]);
    out.emit(
        "write-bw: streamed writes rank 0 -> rank 1 (+1 notification per batch), and memcpy on rank 0",
        benches::write_bw(&s.b, &sizes),
    );
}

fn read_lat(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(1, 4 << 20), &[8, 4096, 1 << 20]);
    out.emit(
        "read-lat: read + wait, rank 0 reads from rank 1",
        benches::read_lat(&s.b, &sizes),
    );
}

fn allreduce(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(8, 4 << 20), &[8, 4096, 1 << 20]);
    let impls = s.impls(&["auto"], &["auto", "naive", "gaspi"]);
    let rows = s.with_twin(
        &sizes,
        |z| collectives::allreduce(&s.b, z, &impls),
        |z| twin!(s.twin, [z], |m| m.allreduce(&s.b, (z / 8).max(1))),
    );
    out.emit(
        "allreduce: sum of f64 over all ranks (bytes per rank)",
        rows,
    );
}

fn allgatherv(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(1024, 4 << 20), &[65_536, 1 << 20]);
    let dists = s
        .cli
        .dists
        .clone()
        .unwrap_or_else(|| vec!["regular".into()]);
    let impls = s.impls(&["ring-shared"], &["ring-shared", "naive"]);
    let mut rows = Vec::new();
    for dist in &dists {
        rows.extend(s.with_twin(
            &sizes,
            |z| collectives::allgatherv(&s.b, z, &impls, std::slice::from_ref(dist)),
            |z| twin!(s.twin, [z], |m| m.allgatherv(&s.b, dist, (z / 8).max(1))),
        ));
    }
    out.emit(
        "allgatherv: u64 elements over all ranks (bytes = total / ranks)",
        rows,
    );
}

fn alltoallv(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(1024, 1 << 20), &[1024, 65_536]);
    let dists = s
        .cli
        .dists
        .clone()
        .unwrap_or_else(|| vec!["regular".into()]);
    let impls = s.impls(
        &["aggregated", "aggregated-private"],
        &alltoallv::ALLTOALLV_IMPLS,
    );
    let mut rows = Vec::new();
    for dist in &dists {
        rows.extend(s.with_twin(
            &sizes,
            |z| alltoallv::alltoallv(&s.b, z, &impls, std::slice::from_ref(dist)),
            |z| twin!(s.twin, [z], |m| m.alltoallv(&s.b, dist, (z / 8).max(1))),
        ));
    }
    out.emit(
        "alltoallv: u64 elements between every pair of ranks (bytes = mean per pair)",
        rows,
    );
}

/// Whether every node has `--ppn` ranks (the kernels need it; `all` may
/// run on other layouts).
fn full_nodes(s: &Session) -> bool {
    s.ranks() % s.b.ppn.max(1) == 0
}

fn stencil(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(
        &[32 << 10, 512 << 10, 8 << 20, 32 << 20],
        &[32 << 10, 512 << 10],
    );
    let decomps = s.cli.decomps.clone().unwrap_or_else(|| {
        let d: &[&str] = if s.quick { &["2d"] } else { &kernels::DECOMPS };
        d.iter().map(|d| d.to_string()).collect()
    });
    let impls = s.impls(&kernels::STENCIL_IMPLS, &kernels::STENCIL_IMPLS);
    // Brief under `all`: the check sweeps the blocks' light cones again.
    let most = if s.quick { 200 } else { 2_000 };
    for decomp in &decomps {
        let rows = s.with_twin(
            &sizes,
            |z| kernels::stencil(&s.b, z, &impls, decomp, most),
            |z| twin!(s.twin, [z, most], |m| m.stencil(&s.b, decomp, z, most)),
        );
        out.emit(
            &format!(
                "{}: one five-point sweep with its halo exchange, grid cut {decomp} (bytes = one rank's block)",
                kernels::stencil_bench(decomp)
            ),
            rows,
        );
    }
}

fn gups(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&[8 << 20, 64 << 20, 512 << 20], &[8 << 20]);
    let impls = s.impls(&kernels::GUPS_IMPLS, &kernels::GUPS_IMPLS[..3]);
    let most = if s.quick { 200 } else { 1_000 };
    let rows = s.with_twin(
        &sizes,
        |z| kernels::gups(&s.b, z, &impls, most),
        |z| twin!(s.twin, [z, most], |m| m.gups(&s.b, z, most)),
    );
    out.emit(
        "gups: a round of 1024 random XOR updates per rank (bytes = one rank's table; MB/s column = million updates per second, all ranks)",
        rows,
    );
}

fn fence(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(8, 64 << 10), &[8, 4096]);
    let patterns = s.cli.patterns.clone().unwrap_or_else(|| {
        if s.quick {
            vec!["single".into(), "halo4".into()]
        } else {
            vec!["single".into()]
        }
    });
    let mut rows = Vec::new();
    for pattern in &patterns {
        // Epochs without puts have one size: 0.
        let ps: &[usize] = if pattern == "zero" { &[0] } else { &sizes };
        rows.extend(s.with_twin(
            ps,
            |z| adapters::fence(&s.b, z, std::slice::from_ref(pattern), &s.fence_designs()),
            |z| twin!(s.twin, [z], |m| m.fence(&s.b, pattern, z)),
        ));
    }
    out.emit(
        "fence: RMA epoch = the pattern's puts (bytes each) + MPI_Win_fence (impl pattern:design)",
        rows,
    );
}

fn lock(s: &Session, out: &mut Printer) {
    let n = s.ranks();
    let sizes = s.sizes(&[8], &[8]);
    let designs = s.cli.designs.clone().unwrap_or_else(|| {
        adapters::LOCK_DESIGNS
            .iter()
            .map(|s| s.to_string())
            .collect()
    });
    let modes = s.cli.modes.clone().unwrap_or_else(|| {
        let m: &[&str] = if s.quick {
            &["excl-same"]
        } else {
            &["excl-same", "excl-distinct", "shared-same"]
        };
        m.iter().map(|s| s.to_string()).collect()
    });
    let contenders: Vec<usize> = match &s.cli.contenders {
        Some(c) => c.iter().map(|&c| c as usize).collect(),
        None if s.quick => vec![1, n],
        None => std::iter::successors(Some(1), |c| Some(c * 2).filter(|&c| c < n))
            .chain([n])
            .collect(),
    };
    let targets = s.cli.targets.clone().unwrap_or_else(|| vec!["wait".into()]);
    let mut rows = Vec::new();
    for mode in &modes {
        for &c in contenders.iter().filter(|&&c| (1..=n).contains(&c)) {
            for target in &targets {
                let compute = target == "compute";
                if compute && c == n {
                    continue; // every rank locks: none computes
                }
                let ours = |z: &[usize]| {
                    adapters::lock(&s.b, z, &designs, std::slice::from_ref(mode), &[c], compute)
                };
                // MPI's own lock only beside waiting targets: its windows
                // are shared memory on one machine, where a computing
                // target changes nothing.
                let theirs = |z| match compute {
                    true => None,
                    false => twin!(s.twin, [z], |m| m.lock(&s.b, mode, c, z)),
                };
                rows.extend(s.with_twin(&sizes, ours, theirs));
            }
        }
    }
    out.emit(
        "lock: lock + put + unlock per contender, time on rank 0 (impl design:mode:contenders)",
        rows,
    );
}

fn bcast(s: &Session, out: &mut Printer) {
    let sizes = s.sizes(&pow2(8, 16 << 20), &[8, 65_536, 1 << 20]);
    let impls = s.impls(&adapters::BCAST_IMPLS, &adapters::BCAST_IMPLS);
    let rows = s.with_twin(
        &sizes,
        |z| adapters::bcast(&s.b, z, &impls),
        |z| twin!(s.twin, [z], |m| m.bcast(&s.b, z)),
    );
    let cross = adapters::bcast_crossover(&rows);
    out.emit(
        "bcast: rank 0's broadcast into every rank's window + flush (impl linear / binomial / node)",
        rows,
    );
    if out.prints() && s.cli.format == Format::Table {
        for c in cross {
            println!("# bcast crossover: {c}");
        }
    }
}

/// Run the benchmark(s) the command line names on this rank (of `ctx`'s
/// job); returns whether everything verified.
pub fn run_on(cli: &Cli, ctx: Context, twin: Twin) -> Result<bool, gaspi::Error> {
    let n = ctx.num_ranks() as usize;
    if let Some(need) = cli.bench.missing(n, ctx.ranks_per_node()) {
        if ctx.rank() == 0 {
            eprintln!("gaspi-bench: {} needs {need}", cli.bench.name());
        }
        return Ok(false);
    }
    let s = Session {
        b: Bench {
            ctx: &ctx,
            ppn: ctx.ranks_per_node(),
            iters: cli.iters.map(|k| k as usize),
            allreduce: cli.allreduce.options(),
            alltoallv: gaspi::AlltoallvOptions {
                single_copy_min: cli.single_copy_min,
                direct_min: cli.direct_min,
                stream_stores: crate::cli::yes_no_auto(&cli.a2a_stream_stores),
                copies: cli.a2a_copies.0,
                ..Default::default()
            },
            per_op: cli.per_op,
        },
        cli,
        twin,
        quick: cli.bench == BenchName::All,
    };
    let mut out = Printer::new(cli.format, ctx.rank() == 0);
    out.header(cli.bench.name(), &ctx, cli.bind);
    let start = std::time::Instant::now();
    for b in cli.bench.members() {
        b.run(&s, &mut out);
    }
    let verified = out.verified();
    if s.quick && cli.format == Format::Table {
        out.summary(n, start.elapsed().as_secs_f64());
    }
    ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    Ok(ctx.rank() != 0 || verified)
}
