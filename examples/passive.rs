//! Passive messages: every rank sends a short report to rank 0, which
//! receives them in whatever order they come (`gaspi_passive_send`,
//! `gaspi_passive_receive`).
//!
//! ```sh
//! cargo build --release --examples
//! target/release/gaspi-run -n 4 target/release/examples/passive
//! # or, as it launches itself when given -n:
//! cargo run --release --example passive -- -n 4
//! ```

use gaspi::{Alloc, Config, Context, GroupId, Local, Timeout};

fn main() -> Result<(), gaspi::Error> {
    gaspi::launcher::launch_self(); // `-n N [--ppn P]`: start N ranks of this program
    let ctx = Context::init(Config::default())?;
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let t = Timeout::Block;
    // Segment 0: the message to send at 0, the one received at 256.
    ctx.segment_alloc(0, 512, Alloc::Initialized)?;
    let seg = ctx.segment::<u8>(0)?;
    if me != 0 {
        let msg = format!("rank {me} of {n} is ready");
        seg.copy_from_slice(0, msg.as_bytes());
        ctx.passive_send(Local::new(0, 0), 0, msg.len(), t)?;
    } else {
        let mut from = Vec::new();
        for _ in 1..n {
            let (sender, len) = ctx.passive_receive(Local::new(0, 256), 256, t)?;
            let mut text = vec![0u8; len];
            seg.copy_to_slice(256, &mut text);
            let text = String::from_utf8(text).expect("a text message");
            assert_eq!(text, format!("rank {sender} of {n} is ready"));
            println!("rank 0 got: {text}");
            from.push(sender);
        }
        from.sort_unstable();
        assert_eq!(from, (1..n).collect::<Vec<_>>());
    }
    ctx.barrier(GroupId::ALL, t)?;
    Ok(())
}
