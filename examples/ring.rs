//! A first GASPI program: every rank sends a message around a ring with
//! `write_notify` and checks what it received.
//!
//! Run it on 4 local ranks:
//!
//! ```text
//! cargo build --release --examples
//! target/release/gaspi-run -n 4 target/release/examples/ring
//! # or, as it launches itself when given -n:
//! cargo run --release --example ring -- -n 4
//! ```

use gaspi::{Alloc, Config, Context, GroupId, Local, Notification, Remote, Timeout};

fn main() -> Result<(), gaspi::Error> {
    gaspi::launcher::launch_self(); // `-n N [--ppn P]`: start N ranks of this program
    let ctx = Context::init(Config::default())?;
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);

    // Segment 0: slot 0 is my outgoing message, slot 1 the incoming one.
    ctx.segment_create(0, 2 * 64, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
    let seg = ctx.segment::<u8>(0)?;
    let msg = format!("hello from rank {me}");
    seg.copy_from_slice(0, msg.as_bytes());

    // Write it into my right neighbour's slot 1 and notify it (id 0, value = length).
    ctx.write_notify(
        Local::new(0, 0),
        Remote::new(right, 0, 64),
        msg.len(),
        Notification::new(0, msg.len() as u32),
        0,
        Timeout::Block,
    )?;

    // Wait for my left neighbour's message.
    let id = ctx.notify_waitsome(0, 0..1, Timeout::Block)?;
    let len = ctx.notify_reset(0, id)? as usize;
    let mut got = vec![0u8; len];
    seg.copy_to_slice(64, &mut got);
    let got = String::from_utf8_lossy(&got);
    assert_eq!(got, format!("hello from rank {left}"));
    println!("rank {me} of {n}: received \"{got}\"");

    ctx.wait(0, Timeout::Block)?;
    ctx.barrier(GroupId::ALL, Timeout::Block)?;
    Ok(())
}
