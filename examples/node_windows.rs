//! Node-shared windows and shared notifications on emulated nodes.
//!
//! Every node has one window with a slot per rank of the job. Ranks fill
//! their own node's window directly (plain stores, no messages) and the
//! other nodes' windows with `write_notify`, each through a different rank
//! of the target node. Every notification aimed at a node lands in its one
//! table, where the node's ranks share the work of taking them; afterwards
//! every rank reads all slots in place.
//!
//! ```text
//! cargo build --release --examples
//! target/release/gaspi-run -n 8 --ppn 4 target/release/examples/node_windows
//! # or, as it launches itself when given -n:
//! cargo run --release --example node_windows -- -n 8 --ppn 4
//! ```

use gaspi::{Alloc, Config, Context, GroupId, Local, Notification, Remote, Timeout};

fn main() -> Result<(), gaspi::Error> {
    gaspi::launcher::launch_self(); // `-n N [--ppn P]`: start N ranks of this program
    let ctx = Context::init(Config::default())?;
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let t = Timeout::Block;

    // One window per node, segment 0 on every rank; segment 1: my value.
    let win = ctx.window_create(0, 8 * n as usize, GroupId::ALL, t)?;
    ctx.segment_create(1, 8, GroupId::ALL, t, Alloc::Initialized)?;
    let value = 1000 + me as u64;
    ctx.segment::<u64>(1)?.set(0, value);

    // My own node: a plain store into the shared window.
    let slots = win.view::<u64>();
    slots.set(me as usize, value);

    // Every other node: write_notify into its window, notification id =
    // my rank, through a different rank of that node each time.
    for node in (0..ctx.num_nodes()).filter(|&k| k != ctx.node()) {
        let ranks = ctx.node_ranks(node);
        let to = ranks.start + me % ranks.len() as u16;
        ctx.write_notify(
            Local::new(1, 0),
            Remote::new(to, 0, 8 * me as usize),
            8,
            Notification::new(me as u32, 1),
            0,
            t,
        )?;
    }
    ctx.wait(0, t)?;

    // My node expects one notification from each rank of the other nodes;
    // its ranks take them in turns until all are taken.
    let expected = (n - ctx.local_num()) as u64;
    let mut taken = Vec::new();
    while let Some((id, _)) = ctx.notify_claim_until(0, 0..n as u32, expected, t)? {
        taken.push(id);
    }
    ctx.node_barrier(t)?;

    // Every rank of the node now sees every value in place.
    let all = slots.to_vec();
    assert_eq!(all, (0..n as u64).map(|r| 1000 + r).collect::<Vec<_>>());
    let traffic = ctx.traffic();
    println!(
        "rank {me} (node {}, local rank {}): window holds {:?}; I took the notifications of ranks {:?}; \
         I sent {} inter-node writes",
        ctx.node(),
        ctx.local_rank(),
        all,
        taken,
        traffic.inter.writes
    );
    ctx.barrier(GroupId::ALL, t)?;
    Ok(())
}
