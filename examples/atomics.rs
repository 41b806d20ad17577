//! Remote atomics: a shared counter and a leader election, on rank 0's
//! segment (`gaspi_atomic_fetch_add`, `gaspi_atomic_compare_swap`).
//!
//! ```sh
//! cargo build --release --examples
//! target/release/gaspi-run -n 4 target/release/examples/atomics
//! # or, as it launches itself when given -n:
//! cargo run --release --example atomics -- -n 4
//! ```

use gaspi::{Alloc, Config, Context, GroupId, Remote, Timeout};

fn main() -> Result<(), gaspi::Error> {
    gaspi::launcher::launch_self(); // `-n N [--ppn P]`: start N ranks of this program
    let ctx = Context::init(Config::default())?;
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let t = Timeout::Block;
    // Segment 0: word 0 the counter, word 1 the leader (rank + 1, 0: none).
    ctx.segment_create(0, 16, GroupId::ALL, t, Alloc::Initialized)?;
    let counter = Remote::new(0, 0, 0);
    let leader = Remote::new(0, 0, 8);

    // Every rank adds 1 a hundred times; the old values are all distinct.
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen.push(ctx.atomic_fetch_add(counter, 1, t)?);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]));

    // The first compare-and-swap from 0 wins; everyone learns who.
    let old = ctx.atomic_compare_swap(leader, 0, u64::from(me) + 1, t)?;
    let winner = if old == 0 { me } else { (old - 1) as u16 };

    ctx.barrier(GroupId::ALL, t)?;
    let total = ctx.atomic_fetch_add(counter, 0, t)?;
    assert_eq!(total, 100 * u64::from(n));
    let elected = ctx.atomic_fetch_add(leader, 0, t)? - 1;
    assert_eq!(u64::from(winner), elected);
    println!("rank {me}: counter {total}, leader rank {elected}");
    ctx.barrier(GroupId::ALL, t)?;
    Ok(())
}
