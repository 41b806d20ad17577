use gaspi::{Alloc, Config, Context, Local, Notification, Remote, Timeout};
fn main() {
    let ctx = Context::init(Config::default()).unwrap();
    ctx.segment_alloc(0, 1 << 20, Alloc::Initialized).unwrap();
    let me = ctx.rank();
    let t = Timeout::Block;
    let n: usize = std::env::args()
        .nth(1)
        .map_or(20_000_000, |a| a.parse().unwrap());
    for _ in 0..n {
        ctx.write_notify(
            Local::new(0, 0),
            Remote::new(me, 0, 4096),
            8,
            Notification::new(1, 1),
            0,
            t,
        )
        .unwrap();
        ctx.wait(0, t).unwrap();
        let id = ctx.notify_waitsome(0, 1..2, t).unwrap();
        std::hint::black_box(ctx.notify_reset(0, id).unwrap());
    }
}
