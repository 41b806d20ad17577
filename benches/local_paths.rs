//! Criterion benchmarks of the runtime's own cost, in one process (a job of
//! one rank talking to itself): what a call costs before any cache line
//! travels between cores. Multi-rank figures come from `gaspi-bench`.
//!
//! `cargo bench --bench local_paths`

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use gaspi::{Alloc, Config, Context, Local, Notification, Remote, Timeout};

fn local_paths(c: &mut Criterion) {
    let ctx = Context::init(Config::default()).expect("init");
    ctx.segment_alloc(0, 1 << 20, Alloc::Initialized).unwrap();
    let me = ctx.rank();
    let t = Timeout::Block;

    c.bench_function("write 8 B to self + wait", |b| {
        b.iter(|| {
            ctx.write(Local::new(0, 0), Remote::new(me, 0, 4096), 8, 0, t)
                .unwrap();
            ctx.wait(0, t).unwrap();
        })
    });
    c.bench_function("write_notify 8 B to self + waitsome + reset", |b| {
        b.iter(|| {
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
            black_box(ctx.notify_reset(0, id).unwrap());
        })
    });
    c.bench_function("notify_waitsome over 65536 ids, hit at the end", |b| {
        ctx.notify(me, 0, Notification::new(65_535, 1), 0, t)
            .unwrap();
        ctx.wait(0, t).unwrap();
        b.iter(|| black_box(ctx.notify_waitsome(0, 0..65_536, t).unwrap()))
    });
    c.bench_function("atomic_fetch_add on self", |b| {
        b.iter(|| black_box(ctx.atomic_fetch_add(Remote::new(me, 0, 64), 1, t).unwrap()))
    });
    c.bench_function("barrier of one rank", |b| {
        b.iter(|| ctx.barrier(gaspi::GroupId::ALL, t).unwrap())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = local_paths
}
criterion_main!(benches);
