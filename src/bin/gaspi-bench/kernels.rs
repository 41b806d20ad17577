//! The application kernels: the five-point stencil (`stencil/`), timed per
//! sweep and checked bit for bit against the sequential reference (sizes:
//! the bytes of one rank's block, `side x side` f64s), and Random Access
//! (`gups/`), timed per round of 1024 updates per rank and checked as HPCC
//! does (sizes: the bytes of one rank's part of the table).

use crate::benches::Bench;
use crate::gups::on_gaspi::{Gups, Updates};
use crate::gups::{CHUNK, Table};
use crate::report::Row;
use crate::sharing::Sharing;
use crate::stencil::Shape;
use crate::stencil::on_gaspi::Stencil;

/// The segment (or window) and queue of the GASPI variants.
const SEGMENT: gaspi::SegmentId = 24;
const QUEUE: u8 = 1;

/// The implementations `--impl` can name for the stencil: `flat` (a
/// segment per rank, `write_notify` to every neighbour), `node` (a window
/// per node: rows of the node read in place, only node edges sent).
pub const STENCIL_IMPLS: [&str; 2] = ["flat", "node"];
/// The same for gups: `flat` (a segment per rank, a bucket per owner),
/// `node` (a window per node, a bucket per node; each part of the node's
/// table updated by its owner, the others' updates of it handed over in
/// the window), `node-atomic` (the node's words updated by any of its
/// ranks, with atomics), `node-lockfree` (the same with HPCC's lock-free
/// updates: a load and a store).
pub const GUPS_IMPLS: [&str; 4] = ["flat", "node", "node-atomic", "node-lockfree"];
/// The cuts `--decomp` can name: row bands only, or a grid of blocks.
pub const DECOMPS: [&str; 2] = ["1d", "2d"];

/// The side of a square block of about `bytes` bytes of f64.
pub fn side_of(bytes: usize) -> usize {
    ((bytes / 8) as f64).sqrt().round().max(1.0) as usize
}

/// The bench column of a stencil row.
pub fn stencil_bench(decomp: &str) -> &'static str {
    if decomp == "1d" {
        "stencil-1d"
    } else {
        "stencil-2d"
    }
}

/// The cut of this job for `decomp` and block bytes `bytes`.
pub fn shape(b: &Bench, decomp: &str, bytes: usize) -> Shape {
    let ctx = b.ctx;
    Shape::new(
        ctx.num_ranks() as usize,
        ctx.ranks_per_node(),
        side_of(bytes),
        decomp == "2d",
    )
    .unwrap_or_else(|e| panic!("stencil: {e}"))
}

/// Sweeps for a block of `bytes`: `--iters`, or `most` (fewer for blocks
/// beyond 1 MiB: about 2 GB of blocks).
pub fn sweeps(b: &Bench, bytes: usize, most: usize) -> usize {
    b.reps(bytes, most, 2 << 30)
}

/// Whether `block` (after `done` sweeps) is rank `me`'s block of the
/// sequential reference, bit for bit.
pub fn block_ok(shape: &Shape, me: usize, done: usize, block: &[f64]) -> bool {
    let want = crate::stencil::reference(shape, done, shape.origin(me), (shape.side, shape.side));
    want.len() == block.len()
        && want
            .iter()
            .zip(block)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// `stencil`: time per sweep, per cut, implementation and block size.
pub fn stencil(
    b: &Bench,
    sizes: &[usize],
    impls: &[String],
    decomp: &str,
    most: usize,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for &bytes in sizes {
        for imp in impls.iter().filter(|i| STENCIL_IMPLS.contains(&i.as_str())) {
            rows.push(stencil_one(b, decomp, imp, bytes, most));
        }
    }
    rows
}

fn stencil_one(b: &Bench, decomp: &str, imp: &str, bytes: usize, most: usize) -> Row {
    let shape = shape(b, decomp, bytes);
    let sharing = if imp == "node" {
        Sharing::Node
    } else {
        Sharing::Flat
    };
    let mut st = Stencil::new(b.ctx, shape, sharing, SEGMENT, QUEUE).expect("stencil setup");
    let reps = sweeps(b, bytes, most);
    for _ in 0..reps / 10 {
        st.step().expect("sweep");
    }
    let samples = b.batches(reps, 1.0, |_| st.step().expect("sweep"));
    let me = b.ctx.rank() as usize;
    let ok = block_ok(&shape, me, st.done(), &st.block());
    st.close().expect("stencil close");
    let side = shape.side;
    b.row(
        stencil_bench(decomp),
        imp,
        side * side * 8,
        reps,
        samples,
        b.all_ok(ok),
    )
}

fn sharing_of(imp: &str) -> Sharing {
    if imp.starts_with("node") {
        Sharing::Node
    } else {
        Sharing::Flat
    }
}

/// The table of this job with `bytes` bytes per rank.
pub fn table(b: &Bench, bytes: usize) -> Table {
    Table::new(b.ctx.num_ranks() as usize, (bytes / 8).max(1)).unwrap_or_else(|e| panic!("{e}"))
}

/// Rounds of updates: `--iters`, or `most` (1000: about a million
/// updates per rank).
pub fn gups_rounds(b: &Bench, most: usize) -> usize {
    b.reps(1, most, usize::MAX)
}

/// HPCC's error count of rank `me`'s `part` after `rounds` rounds: its
/// words that lost an update (0 when exact).
pub fn gups_errors(table: &Table, me: usize, rounds: usize, mut part: Vec<u64>) -> usize {
    crate::gups::check(table, me, rounds, &mut part)
}

/// A gups row: time per round, and in the bandwidth column the updates of
/// all ranks per microsecond (millions per second).
pub fn gups_row(row: Row, ranks: usize) -> Row {
    Row {
        bw_bytes: ranks * CHUNK,
        ..row
    }
}

/// `gups`: time per round of 1024 updates per rank, per implementation
/// and table bytes per rank.
pub fn gups(b: &Bench, sizes: &[usize], impls: &[String], most: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    for &bytes in sizes {
        for imp in impls.iter().filter(|i| GUPS_IMPLS.contains(&i.as_str())) {
            rows.push(gups_one(b, imp, bytes, most));
        }
    }
    rows
}

fn gups_one(b: &Bench, imp: &str, bytes: usize, most: usize) -> Row {
    let table = table(b, bytes);
    let updates = match imp {
        "node-atomic" => Updates::Atomic,
        "node-lockfree" => Updates::LockFree,
        _ => Updates::Owner,
    };
    let mut g =
        Gups::new(b.ctx, table, sharing_of(imp), updates, SEGMENT, QUEUE).expect("gups setup");
    let reps = gups_rounds(b, most);
    for _ in 0..reps / 10 {
        g.round().expect("round");
    }
    let samples = b.batches(reps, 1.0, |_| g.round().expect("round"));
    let rounds = g.rounds();
    let part = g.finish().expect("gups finish");
    let errors = gups_errors(&table, b.ctx.rank() as usize, rounds, part) as u64;
    let mut all = [0u64];
    b.ctx
        .allreduce(
            &[errors],
            &mut all,
            gaspi::ReduceOp::Sum,
            gaspi::GroupId::ALL,
            gaspi::Timeout::Block,
        )
        .expect("allreduce of the error counts");
    // HPCC accepts errors in 1% of the table from a lock-free variant.
    let allowed = if updates == Updates::LockFree {
        table.size() / 100
    } else {
        0
    };
    if all[0] > 0 && b.ctx.rank() == 0 {
        eprintln!(
            "gups {imp}: {} of {} words lost an update (allowed {allowed})",
            all[0],
            table.size()
        );
    }
    let row = b.row(
        "gups",
        imp,
        table.words * 8,
        reps,
        samples,
        all[0] <= allowed,
    );
    gups_row(row, table.ranks)
}
