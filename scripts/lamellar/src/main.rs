//! The Lamellar side of `scripts/compare-lamellar.sh`: what a Lamellar
//! (0.7.1, `shmem` backend) program does for the operations `gaspi-bench`
//! measures, timed the same way (25 batches, the median of the batch
//! means, after a tenth of the repetitions as warm-up) and verified.
//!
//! ```text
//! lamellar-bench put-lat [SIZES] [spin|yield]
//!                                 # put data, put a flag, the target polls it: ping-pong, one way
//! lamellar-bench am-lat           # an active message that returns a value: half a round trip
//! lamellar-bench atomic-lat       # fetch_add on an AtomicArray element of PE 1, from PE 0
//! lamellar-bench barrier [REPS]   # world.barrier() over every PE
//! lamellar-bench sum [REPS]       # AtomicArray::sum of one u64 per PE, on every PE at once
//! ```
//!
//! Started by the script with Lamellar's launch variables
//! (`LAMELLAR_BACKEND=shmem`, `LAMELLAR_NUM_PES`, `LAMELLAR_PE_ID`,
//! `LAMELLAR_JOB_ID`, `LAMELLAR_THREADS`), as `lamellar_run.sh` does. PE 0
//! prints CSV rows: `bench,impl,pes,bytes,reps,median_us,verified`.
//! `REPS` (barrier, sum) replaces the default repetitions (20,000 and
//! 5,000), for PEs that share cores: Lamellar's waits spin, and 4 PEs on 2
//! cores take milliseconds per call.
//!
//! Puts use `blocking_put`, which Lamellar documents as complete on
//! return, so the flag put after the data is ordered after it on every
//! backend; on `shmem` both `put` and `blocking_put` are a `memcpy` into
//! the target's mapping.

use lamellar::active_messaging::prelude::*;
use lamellar::array::prelude::*;
use lamellar::memregion::prelude::*;
use std::time::Instant;

const BATCHES: usize = 25;

#[lamellar::AmData(Debug, Clone)]
struct Ping {
    v: usize,
}

#[lamellar::am]
impl LamellarAM for Ping {
    async fn exec(self) -> usize {
        self.v + 1
    }
}

/// Repetitions for `bytes` per message: `default`, at most `budget / bytes`,
/// a multiple of the batches (as gaspi-bench's `Bench::reps`).
fn reps(bytes: usize, default: usize, budget: usize) -> usize {
    let r = default.min(budget / bytes.max(1)).max(BATCHES);
    r.div_ceil(BATCHES) * BATCHES
}

/// Run `f(i)` for `reps` repetitions after `reps / 10` warm-up ones; the
/// median over 25 batches of the mean time per repetition, in us, divided
/// by `per` (2 for a ping-pong's one way).
fn batches(reps: usize, per: f64, mut f: impl FnMut(usize)) -> f64 {
    let warm = reps / 10;
    (0..warm).for_each(&mut f);
    let each = reps / BATCHES;
    let mut means: Vec<f64> = (0..BATCHES)
        .map(|b| {
            let t = Instant::now();
            for i in 0..each {
                f(warm + b * each + i);
            }
            t.elapsed().as_secs_f64() * 1e6 / each as f64 / per
        })
        .collect();
    means.sort_by(|a, b| a.total_cmp(b));
    means[BATCHES / 2]
}

fn row(
    world: &LamellarWorld,
    bench: &str,
    variant: &str,
    bytes: usize,
    reps: usize,
    us: f64,
    ok: bool,
) {
    if world.my_pe() == 0 {
        println!(
            "{bench},{variant},{},{bytes},{reps},{us:.3},{ok}",
            world.num_pes()
        );
    }
}

/// The stamp of message `i` (first and last byte), as gaspi-bench's.
fn stamp(i: usize) -> u8 {
    (i % 251) as u8 + 1
}

fn parse_size(s: &str) -> usize {
    let (num, mul) = match s.as_bytes().last() {
        Some(b'K') => (&s[..s.len() - 1], 1 << 10),
        Some(b'M') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    num.parse::<usize>().expect("a size: N, NK or NM") * mul
}

/// Ping-pong between PEs 0 and 1: the message into the peer's region, then
/// an 8-byte flag (the message number) after it; the receiver polls its
/// flag, checks the stamps, answers. Every byte is checked once at the end.
fn put_lat(world: &LamellarWorld, sizes: &[usize], spin: bool) {
    let me = world.my_pe();
    let max = sizes.iter().copied().max().unwrap_or(8).max(1);
    let flag_at = max.div_ceil(64) * 64;
    let region = world.alloc_shared_mem_region::<u8>(flag_at + 8).block();
    let src = world.alloc_one_sided_mem_region::<u8>(flag_at + 8);
    // The peer writes `region` (its puts land there): read it through a
    // raw pointer, volatile, only after the flag (with an acquire fence).
    // SAFETY: this PE's own part of the region, alive until the end.
    let mine = unsafe { region.as_slice().expect("local region") }.as_ptr();
    // SAFETY: this PE's own memory, which only this thread writes.
    let out = unsafe { src.as_mut_slice().expect("local region") };
    assert_eq!(mine as usize % 8, 0, "the flag word is aligned");
    // SAFETY: `flag_at + 8` bytes were allocated.
    let flag = unsafe { mine.add(flag_at) } as *const u64;
    // SAFETY: `j` < `flag_at`, within the region.
    let byte = |j: usize| unsafe { std::ptr::read_volatile(mine.add(j)) };
    // `yield` polls as Lamellar's own bandwidth examples do, yielding the
    // CPU between looks (the PE's worker threads may need it); `spin`
    // only spins, which is faster with a core to spare and fell into
    // 4 ms hand-offs once with 2 PEs on 2 cores.
    let wait_flag = |k: u64| {
        // SAFETY: an aligned word of our region, written by the peer's put.
        while unsafe { std::ptr::read_volatile(flag) } != k {
            if spin {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    };
    let mut count: u64 = 0;
    for &size in sizes {
        world.barrier();
        let reps = reps(size, 20_000, 2 << 30);
        let base = count;
        let mut ok = true;
        let mut send = |i: usize| {
            let s = stamp(i);
            out[0] = s;
            out[size.max(1) - 1] = s;
            put_then_flag(
                &region,
                &src,
                out,
                1 - me,
                size,
                flag_at,
                base + i as u64 + 1,
            );
        };
        let mut recv = |i: usize| {
            wait_flag(base + i as u64 + 1);
            ok &= byte(0) == stamp(i) && byte(size.max(1) - 1) == stamp(i);
        };
        let total = reps + reps / 10;
        let mut us = 0.0;
        if me == 0 {
            us = batches(reps, 2.0, |i| {
                send(i);
                recv(i);
            });
        } else if me == 1 {
            for i in 0..total {
                recv(i);
                send(i);
            }
        }
        count = base + total as u64;
        // The whole message once: PE 0 sends a pattern, PE 1 checks it.
        world.barrier();
        if me == 0 {
            for (j, b) in out[..size].iter_mut().enumerate() {
                *b = (j % 253) as u8;
            }
            put_then_flag(&region, &src, out, 1, size, flag_at, count + 1);
        } else if me == 1 {
            wait_flag(count + 1);
            ok &= (0..size).all(|j| byte(j) == (j % 253) as u8);
        }
        count += 1;
        let ok = all_ok(world, ok);
        let variant = if spin {
            "lamellar-spin"
        } else {
            "lamellar-yield"
        };
        row(world, "put-lat", variant, size, reps, us, ok);
    }
}

/// Put `len` bytes (at least one) of `src` into `to`'s region, then flag
/// value `k` after them at `flag_at`; `out` is `src`'s memory.
fn put_then_flag(
    region: &SharedMemoryRegion<u8>,
    src: &OneSidedMemoryRegion<u8>,
    out: &mut [u8],
    to: usize,
    len: usize,
    flag_at: usize,
    k: u64,
) {
    out[flag_at..flag_at + 8].copy_from_slice(&k.to_ne_bytes());
    // SAFETY: `src` stays alive and unchanged until each call returns
    // (blocking_put: complete on return); both ranges lie in the regions.
    unsafe {
        region.blocking_put(to, 0, src.sub_region(0..len.max(1)));
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        region.blocking_put(to, flag_at, src.sub_region(flag_at..flag_at + 8));
    }
}

/// Whether `ok` holds on every PE (an AtomicArray of one flag per PE).
fn all_ok(world: &LamellarWorld, ok: bool) -> bool {
    let flags =
        AtomicArray::<usize>::new(world.team(), world.num_pes(), Distribution::Block).block();
    flags.store(world.my_pe(), ok as usize).block();
    flags.barrier();
    let sum = flags.sum().block();
    flags.barrier();
    sum == Some(world.num_pes())
}

fn am_lat(world: &LamellarWorld) {
    let reps = reps(8, 20_000, usize::MAX);
    let mut ok = true;
    let mut us = 0.0;
    world.barrier();
    if world.my_pe() == 0 {
        us = batches(reps, 2.0, |i| {
            ok &= world.exec_am_pe(1, Ping { v: i }).block() == i + 1;
        });
    }
    world.barrier();
    let ok = all_ok(world, ok);
    row(world, "am-lat", "lamellar", 8, reps, us, ok);
}

fn atomic_lat(world: &LamellarWorld) {
    let n = world.num_pes();
    let reps = reps(8, 20_000, usize::MAX);
    let array = AtomicArray::<usize>::new(world.team(), n, Distribution::Block).block();
    array.store(world.my_pe(), 0).block();
    array.barrier();
    let mut ok = true;
    let mut us = 0.0;
    if world.my_pe() == 0 {
        let mut expect = 0;
        us = batches(reps, 1.0, |_| {
            ok &= array.fetch_add(1, 1).block() == expect;
            expect += 1;
        });
    }
    array.barrier();
    if world.my_pe() == 1 {
        ok &= array.load(1).block() == reps + reps / 10;
    }
    let ok = all_ok(world, ok);
    row(world, "atomic-lat", "lamellar", 8, reps, us, ok);
}

fn barrier(world: &LamellarWorld, reps: usize) {
    world.barrier();
    let us = batches(reps, 1.0, |_| world.barrier());
    row(world, "barrier", "lamellar", 0, reps, us, true);
}

fn sum(world: &LamellarWorld, reps: usize) {
    let n = world.num_pes();
    let array = AtomicArray::<usize>::new(world.team(), n, Distribution::Block).block();
    array.store(world.my_pe(), world.my_pe() + 1).block();
    array.barrier();
    let mut ok = true;
    let us = batches(reps, 1.0, |_| {
        ok &= array.sum().block() == Some(n * (n + 1) / 2);
    });
    array.barrier();
    let ok = all_ok(world, ok);
    row(world, "sum", "lamellar", 8, reps, us, ok);
}

/// The repetitions given after the benchmark's name, or `default`; a
/// multiple of the batches.
fn reps_arg(args: &[String], default: usize) -> usize {
    let r = args
        .get(1)
        .map_or(default, |s| s.parse().expect("REPS: a number"));
    reps(8, r, usize::MAX)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let world = LamellarWorldBuilder::new().build();
    match args.first().map(String::as_str) {
        Some("put-lat") => {
            let sizes: Vec<usize> = args
                .get(1)
                .map_or("8,4K,64K,1M", String::as_str)
                .split(',')
                .map(parse_size)
                .collect();
            let spin = args.get(2).is_none_or(|m| m == "spin");
            put_lat(&world, &sizes, spin)
        }
        Some("am-lat") => am_lat(&world),
        Some("atomic-lat") => atomic_lat(&world),
        Some("barrier") => barrier(&world, reps_arg(&args, 20_000)),
        Some("sum") => sum(&world, reps_arg(&args, 5_000)),
        _ => {
            eprintln!("usage: lamellar-bench put-lat [SIZES] [spin|yield] | am-lat | atomic-lat | barrier [REPS] | sum [REPS]");
            std::process::exit(2);
        }
    }
    world.barrier();
}
