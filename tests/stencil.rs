//! The five-point stencil of `gaspi-bench stencil` (its very code, included
//! from the benchmark) on emulated node layouts, 1-D and 2-D cuts, flat
//! and node-shared: every rank's block after k sweeps equals a plain
//! sequential Jacobi sweep over the whole grid, bit for bit; the memory
//! can be made again after closing; bad shapes are refused; the porting
//! guide quotes this code word for word.

#[path = "../src/bin/gaspi-bench/sharing.rs"]
mod sharing;
#[allow(dead_code)]
#[path = "../src/bin/gaspi-bench/stencil/mod.rs"]
mod stencil;

use gaspi::testing::Job;
use gaspi::{Context, Error};
use sharing::Sharing;
use stencil::Shape;
use stencil::on_gaspi::Stencil;

/// The whole grid after `iters` sweeps, written as plainly as possible
/// (the border fixed at its initial values), interior points by rows.
fn whole_grid(shape: &Shape, iters: usize) -> Vec<f64> {
    let (h, w) = (shape.rows() + 2, shape.cols() + 2);
    let mut a: Vec<Vec<f64>> = (0..h)
        .map(|i| (0..w).map(|j| stencil::initial(i, j)).collect())
        .collect();
    for _ in 0..iters {
        let b = a.clone();
        for i in 1..h - 1 {
            for j in 1..w - 1 {
                a[i][j] = 0.25 * ((b[i - 1][j] + b[i + 1][j]) + (b[i][j - 1] + b[i][j + 1]));
            }
        }
    }
    a[1..h - 1]
        .iter()
        .flat_map(|row| row[1..w - 1].to_vec())
        .collect()
}

/// Run `iters` sweeps and check this rank's block against the whole grid.
fn check(ctx: &Context, side: usize, two_d: bool, sharing: Sharing, iters: usize) {
    let (n, ppn, me) = (
        ctx.num_ranks() as usize,
        ctx.ranks_per_node(),
        ctx.rank() as usize,
    );
    let shape = Shape::new(n, ppn, side, two_d).unwrap();
    let mut st = Stencil::new(ctx, shape, sharing, 5, 0).unwrap();
    for _ in 0..iters {
        st.step().unwrap();
    }
    assert_eq!(st.done(), iters);
    let block = st.block();
    st.close().unwrap();
    let all = whole_grid(&shape, iters);
    let (r0, c0) = shape.origin(me);
    for i in 0..side {
        for j in 0..side {
            let want = all[(r0 + i) * shape.cols() + c0 + j];
            assert_eq!(
                block[i * side + j].to_bits(),
                want.to_bits(),
                "rank {me} of {n} ({ppn} per node, {sharing:?}, 2-D {two_d}): point ({i}, {j}) after {iters} sweeps"
            );
        }
    }
}

#[test]
fn every_layout_matches_the_sequential_sweep() {
    for (ranks, ppn) in [
        (1, 1),
        (2, 1),
        (4, 1),
        (4, 2),
        (4, 4),
        (6, 2),
        (6, 3),
        (8, 2),
    ] {
        Job::new(&[ranks]).ppn(ppn).run(|ctx| {
            for two_d in [false, true] {
                for sharing in [Sharing::Flat, Sharing::Node] {
                    check(ctx, 5, two_d, sharing, 13);
                }
            }
        });
    }
}

#[test]
fn one_point_blocks_and_zero_sweeps() {
    Job::new(&[4]).ppn(2).run(|ctx| {
        for sharing in [Sharing::Flat, Sharing::Node] {
            check(ctx, 1, true, sharing, 7);
            check(ctx, 3, false, sharing, 0);
            check(ctx, 2, true, sharing, 1);
        }
    });
}

#[test]
fn bad_shapes_are_refused() {
    assert!(Shape::new(6, 4, 8, false).is_err());
    assert!(Shape::new(4, 2, 0, true).is_err());
    assert!(Shape::new(4, 2, usize::MAX / 2, true).is_err());
    Job::new(&[4]).ppn(2).run(|ctx| {
        // A shape for another job is refused before anything is made.
        let other = Shape::new(8, 2, 4, true).unwrap();
        let e = Stencil::new(ctx, other, Sharing::Node, 5, 0).err();
        assert!(matches!(e, Some(Error::InvalidArgument(_))), "{e:?}");
        assert!(ctx.segment_list().is_empty());
    });
}

#[test]
fn the_porting_guide_quotes_the_tested_code() {
    let root = env!("CARGO_MANIFEST_DIR");
    let page = std::fs::read_to_string(format!("{root}/docs/guide/porting-stencil.md")).unwrap();
    let mut quotes = 0;
    for block in page.split("```rust,ignore\n").skip(1) {
        let code = block.split("\n```").next().unwrap();
        let (first, body) = code.split_once('\n').unwrap();
        let path = first
            .strip_prefix("// from ")
            .expect("a quote names its file");
        let source = std::fs::read_to_string(format!("{root}/{path}")).unwrap();
        // The quote, line by line, is a run of the file's lines (indented alike).
        let lines: Vec<&str> = body.lines().collect();
        let found = source
            .lines()
            .collect::<Vec<_>>()
            .windows(lines.len())
            .any(|w| {
                let indent = w[0].len() - w[0].trim_start().len();
                w.iter().zip(&lines).all(|(s, q)| {
                    s.get(indent.min(s.len())..).unwrap_or("") == *q
                        && (s.trim().is_empty() || s.len() - s.trim_start().len() >= indent)
                })
            });
        assert!(
            found,
            "docs/guide/porting-stencil.md quotes from {path} what it does not hold:\n{body}"
        );
        quotes += 1;
    }
    assert!(quotes >= 5, "the guide lost its quotes");
}
