//! The collectives of the shared-window paper on emulated nodes: an
//! allgatherv of linearly decreasing contributions whose result every rank
//! reads in its node's window, an allreduce, and the node-aggregated
//! alltoallv (the paper's future work), repeated on the same windows call
//! after call.
//!
//! ```text
//! cargo build --release --examples
//! target/release/gaspi-run -n 8 --ppn 4 target/release/examples/collectives
//! # or, as it launches itself when given -n:
//! cargo run --release --example collectives -- -n 8 --ppn 4
//! ```

use gaspi::{Allgatherv, Allreduce, Alltoallv, Config, Context, ReduceOp, Timeout};

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
    // Rank s sends s + t + 1 elements to rank t.
    let pairs: Vec<usize> = (0..n * n).map(|i| i / n + i % n + 1).collect();
    let row = &pairs[me * n..(me + 1) * n];
    let mut exchange = Alltoallv::<u64>::new(&ctx, 2, &pairs, t)?;
    let mut got = vec![0u64; (0..n).map(|s| pairs[s * n + me]).sum()];

    for it in 0..100u64 {
        // The paper's data: (iProc + 1) * (it + 1).
        let mine = vec![(me as u64 + 1) * (it + 1); counts[me]];
        let all = gather.run(&mine, t)?; // a view of the node's window: no copy
        for (r, &at) in displs.iter().enumerate() {
            assert_eq!(all.get(at), (r as u64 + 1) * (it + 1));
        }

        let x = [1.0, me as f64, it as f64, 0.5];
        let total = sum.run(&x, ReduceOp::Sum, t)?.to_vec();
        let nf = n as f64;
        assert_eq!(total, [nf, nf * (nf - 1.0) / 2.0, nf * it as f64, nf / 2.0]);

        // Each piece holds (sender, receiver, call); odd calls into my
        // buffer, every fourth made in the window (no send buffer at all).
        let piece = |s: usize, t: usize| ((s * n + t) as u64) << 32 | it;
        let send: Vec<u64> = (0..n).flat_map(|to| vec![piece(me, to); row[to]]).collect();
        if it % 2 == 1 {
            exchange.run_into(&send, row, &mut got, t)?;
        } else {
            if it % 4 == 2 {
                for to in 0..n {
                    exchange.outgoing(to as u16)?.fill(piece(me, to));
                }
                exchange.run_in_window(t)?;
            } else {
                exchange.run(&send, row, t)?;
            }
            exchange
                .received(0)?
                .copy_to_slice(0, &mut got[..pairs[me]]);
        }
        assert_eq!(got[0], piece(0, me));
    }
    if me == 0 {
        println!(
            "100 allgathervs of {} elements, 100 allreduces and 100 alltoallvs on {} ranks in {} nodes: all correct",
            counts.iter().sum::<usize>(),
            ctx.num_ranks(),
            ctx.num_nodes()
        );
    }
    Ok(())
}
