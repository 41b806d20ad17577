//! An MPI program that also speaks GASPI: `mpirun` starts the ranks, MPI
//! hands them to `Context::init_mpi` (GASPI rank = MPI rank), and both
//! libraries work on the same data side by side: an MPI allreduce and a
//! GASPI one must agree, then a GASPI notified ring.
//!
//! ```sh
//! cargo build --release --features mpi --example mpi_interop
//! mpirun -n 4 target/release/examples/mpi_interop
//! ```

use gaspi::{Alloc, Config, Context, GroupId, Local, Notification, ReduceOp, Remote, Timeout};
use mpi::traits::*;

fn main() -> Result<(), gaspi::Error> {
    let universe = mpi::initialize().expect("MPI_Init");
    let world = universe.world();
    let ctx = Context::init_mpi(&world, Config::default())?;
    assert_eq!(ctx.rank() as i32, world.rank());
    let t = Timeout::Block;

    // The same reduction through both libraries.
    let mine = u64::from(ctx.rank()) + 1;
    let mut theirs = 0u64;
    world.all_reduce_into(&mine, &mut theirs, mpi::collective::SystemOperation::sum());
    let mut ours = [0u64];
    ctx.allreduce(&[mine], &mut ours, ReduceOp::Sum, GroupId::ALL, t)?;
    assert_eq!(ours[0], theirs);

    // A GASPI notified ring between MPI ranks.
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    ctx.segment_create(0, 16, GroupId::ALL, t, Alloc::Initialized)?;
    let seg = ctx.segment::<u64>(0)?;
    seg.set(0, u64::from(me));
    let right = (me + 1) % n;
    ctx.write_notify(
        Local::new(0, 0),
        Remote::new(right, 0, 8),
        8,
        Notification::new(0, 1),
        0,
        t,
    )?;
    ctx.notify_waitsome(0, 0..1, t)?;
    assert_eq!(seg.get(1), u64::from((me + n - 1) % n));
    ctx.wait(0, t)?;
    world.barrier(); // MPI and GASPI synchronisation mix freely
    println!("rank {me}: MPI and GASPI agree on {ours:?}", ours = ours[0]);
    ctx.barrier(GroupId::ALL, t)?;
    Ok(())
}
