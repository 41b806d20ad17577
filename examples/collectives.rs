//! The collectives of the shared-window paper on emulated nodes: an
//! allgatherv of linearly decreasing contributions whose result every rank
//! reads in its node's window, and an allreduce, repeated on the same
//! windows call after call.
//!
//! ```text
//! cargo build --release --examples
//! target/release/gaspi-run -n 8 --ppn 4 target/release/examples/collectives
//! # or, as it launches itself when given -n:
//! cargo run --release --example collectives -- -n 8 --ppn 4
//! ```

use gaspi::{Allgatherv, Allreduce, Config, Context, ReduceOp, Timeout};

fn main() -> Result<(), gaspi::Error> {
    gaspi::launcher::launch_self(); // `-n N [--ppn P]`: start N ranks of this program
    let ctx = Context::init(Config::default())?;
    let (me, n) = (ctx.rank() as usize, ctx.num_ranks() as usize);
    let t = Timeout::Block;

    // Rank r contributes n - r elements (Al Ahad et al. 2018's "linearly decreasing").
    let counts: Vec<usize> = (0..n).map(|r| 1000 * (n - r)).collect();
    let displs: Vec<usize> = counts
        .iter()
        .scan(0, |at, &c| {
            *at += c;
            Some(*at - c)
        })
        .collect();
    let mut gather = Allgatherv::<u64>::new(&ctx, 0, &counts, &displs, t)?;
    let mut sum = Allreduce::<f64>::new(&ctx, 1, 4, t)?;

    for it in 0..100u64 {
        // The paper's data: (iProc + 1) * (it + 1).
        let mine = vec![(me as u64 + 1) * (it + 1); counts[me]];
        let all = gather.run(&mine, t)?; // a view of the node's window: no copy
        for (r, &at) in displs.iter().enumerate() {
            assert_eq!(all.get(at), (r as u64 + 1) * (it + 1));
        }

        let x = [1.0, me as f64, it as f64, 0.5];
        let total = sum.run(&x, ReduceOp::Sum, t)?.to_vec();
        let n = n as f64;
        assert_eq!(total, [n, n * (n - 1.0) / 2.0, n * it as f64, n / 2.0]);
    }
    if me == 0 {
        println!(
            "100 allgathervs of {} elements and 100 allreduces on {} ranks in {} nodes: all correct",
            counts.iter().sum::<usize>(),
            ctx.num_ranks(),
            ctx.num_nodes()
        );
    }
    Ok(())
}
