//! A user's program: an allreduce of a derived plain-old-data type
//! (value, rank of the minimum) over all ranks, checked on every rank.
//!
//! ```sh
//! cargo build --release && gaspi-run -n 4 target/release/downstream
//! ```

use gaspi::{Allreduce, Config, Context, Timeout};

#[derive(Clone, Copy, Debug, PartialEq, gaspi::Pod, gaspi::Zeroable)]
#[bytemuck(crate = "gaspi::bytemuck")]
#[repr(C)]
struct MinLoc {
    value: f64,
    rank: u64,
}

fn main() -> gaspi::Result<()> {
    let ctx = Context::init(Config::default())?;
    let me = ctx.rank();
    let mut ar = Allreduce::<MinLoc>::new(&ctx, 0, 1, Timeout::Block)?;
    let mine = MinLoc {
        value: 100.0 - f64::from(me),
        rank: u64::from(me),
    };
    let min = |a: &MinLoc, b: &MinLoc| if b.value < a.value { *b } else { *a };
    let r = ar.run_with(&[mine], min, Timeout::Block)?.get(0);
    let last = ctx.num_ranks() - 1;
    assert_eq!(r, MinLoc { value: 100.0 - f64::from(last), rank: u64::from(last) });
    println!("rank {me}: minimum {} at rank {}", r.value, r.rank);
    drop(ar);
    ctx.term()
}
