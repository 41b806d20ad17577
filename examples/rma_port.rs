//! A flat-MPI code ported to `RmaWindow`: the MPI-3 one-sided calls keep
//! their shape (`MPI_Win_allocate`, `MPI_Put` between `MPI_Win_fence`s,
//! `MPI_Accumulate` under `MPI_Win_lock`), and the result is in the
//! caller's own buffer as well as in the window.
//!
//! ```sh
//! cargo build --release --examples
//! target/release/gaspi-run -n 4 --ppn 2 target/release/examples/rma_port
//! # or, as it launches itself when given -n:
//! cargo run --release --example rma_port -- -n 4 --ppn 2
//! ```

use gaspi::{AccumulateOp, Assert, Config, Context, GroupId, LockType, RmaWindow, Timeout};

fn main() -> Result<(), gaspi::Error> {
    gaspi::launcher::launch_self(); // `-n N [--ppn P]`: start N ranks of this program
    let ctx = Context::init(Config::default())?;
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let t = Timeout::Block;
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);

    // MPI_Win_allocate(2 doubles): [0] from the left neighbour, [1] a sum.
    let win = RmaWindow::<f64>::new(&ctx, 0, 2, GroupId::ALL, t)?;

    // A halo exchange in a fence epoch: MPI_Win_fence; MPI_Put; MPI_Win_fence.
    win.fence(Assert::NOPRECEDE, t)?;
    win.put(&[f64::from(me) * 1.5], right, 0)?;
    win.fence(Assert::NONE, t)?;
    let mut halo = [0.0];
    win.local().copy_to_slice(0, &mut halo); // into the caller's buffer
    assert_eq!(halo[0], f64::from(left) * 1.5);

    // A sum on rank 0 under a passive-target lock:
    // MPI_Win_lock(EXCLUSIVE, 0); MPI_Accumulate(MPI_SUM); MPI_Win_unlock.
    win.fence(Assert::NOSUCCEED, t)?;
    win.lock(LockType::Exclusive, 0, Assert::NONE, t)?;
    win.accumulate(&[f64::from(me)], 0, 1, AccumulateOp::Sum)?;
    win.unlock(0)?;
    ctx.barrier(GroupId::ALL, t)?;
    if me == 0 {
        let sum = win.local().get(1);
        assert_eq!(sum, f64::from(n * (n - 1) / 2));
        println!(
            "rank 0: halo {} from rank {left}, sum of ranks {sum}",
            halo[0]
        );
    }
    ctx.barrier(GroupId::ALL, t)?;
    Ok(())
}
