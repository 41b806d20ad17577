//! `MPI_IN_PLACE` beside separate buffers, timed: `Allreduce::run_in_place`
//! and `Allgatherv::run_in_place` against `run_into` from a separate input
//! (and, for the allreduce, `run` then a copy of the window's result), in
//! alternated rounds in one job; every call's result is checked. Prints
//! medians of 10 rounds, microseconds per call, and the ratios to
//! `run_into`.
//!
//! ```text
//! cargo build --release --examples
//! target/release/gaspi-run -n 4 target/release/examples/in_place
//! ```

use gaspi::{Allgatherv, Allreduce, Config, Context, GroupId, ReduceOp, Timeout};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), gaspi::Error> {
    gaspi::launcher::launch_self();
    let ctx = Context::init(Config::default())?;
    let (me, n) = (ctx.rank() as usize, ctx.num_ranks() as usize);
    let t = Timeout::Block;
    for len in [1usize, 512, 8192, 131_072, 524_288] {
        let mut ar = Allreduce::<f64>::new(&ctx, 1, len, t)?;
        let counts = vec![len; n];
        let displs = gaspi::plan::displacements(&counts);
        let mut ag = Allgatherv::<f64>::new(&ctx, 2, &counts, &displs, t)?;
        let reps = (200_000_000 / (len * 8 * n + 4096)).clamp(20, 20_000);
        let (mut send, mut recv, mut all) = (vec![1.0; len], vec![0.0; len], vec![0.0; len * n]);
        // Per way: allreduce into, in place, run + copy; allgatherv into, in place.
        let mut times: [Vec<f64>; 5] = Default::default();
        let mut timed = |way: usize, f: &mut dyn FnMut() -> Result<(), gaspi::Error>| {
            ctx.barrier(GroupId::ALL, t)?;
            let start = Instant::now();
            for _ in 0..reps {
                f()?;
            }
            times[way].push(start.elapsed().as_secs_f64() * 1e6 / reps as f64);
            Ok::<(), gaspi::Error>(())
        };
        for round in 0..10 {
            // Alternate the order of the ways from round to round.
            let order: Vec<usize> = if round % 2 == 0 {
                vec![0, 1, 2, 3, 4]
            } else {
                vec![4, 3, 2, 1, 0]
            };
            for way in order {
                match way {
                    0 => timed(0, &mut || {
                        send.fill(1.0);
                        ar.run_into(&send, &mut recv, ReduceOp::Sum, t)
                    })?,
                    1 => timed(1, &mut || {
                        recv.fill(1.0);
                        ar.run_in_place(&mut recv, ReduceOp::Sum, t)
                    })?,
                    2 => timed(2, &mut || {
                        send.fill(1.0);
                        let result = ar.run(&send, ReduceOp::Sum, t)?;
                        result.copy_to_slice(0, &mut recv);
                        Ok(())
                    })?,
                    3 => timed(3, &mut || ag.run_into(&send, &mut all, t))?,
                    _ => timed(4, &mut || ag.run_in_place(&mut all, t))?,
                }
                if way < 3 {
                    assert!(recv.iter().all(|&x| x == n as f64), "allreduce way {way}");
                } else {
                    assert!(all.iter().all(|&x| x == 1.0), "allgatherv way {way}");
                }
            }
        }
        if me == 0 {
            let m: Vec<f64> = times.iter().map(|v| median(v.clone())).collect();
            println!(
                "{:>8} B per rank: allreduce into {:.2} us, in place {:.3}x, run + copy {:.3}x | \
                 allgatherv into {:.2} us, in place {:.3}x",
                len * 8,
                m[0],
                m[1] / m[0],
                m[2] / m[0],
                m[3],
                m[4] / m[3]
            );
        }
    }
    ctx.term()
}
