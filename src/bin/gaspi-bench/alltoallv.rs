//! The alltoallv benchmark: the node-aggregated [`Alltoallv`] with the
//! result in place or copied out, with sizes known or exchanged in the
//! call, and a flat alltoallv (one notified write per pair of ranks) —
//! every result verified. Sizes are the mean bytes per pair of ranks.
//!
//! Each call changes both ends of every piece (so a stale result shows)
//! and checks the ends of every received piece; after the timed calls one
//! more call is checked element by element on every rank.

use crate::benches::Bench;
use crate::report::Row;
use gaspi::{Alltoallv, GroupId, Local, Notification, Remote, SegmentId, Timeout};

const B: Timeout = Timeout::Block;
/// Segment ids of the windows and the flat variant's buffers.
const WINDOW: SegmentId = 22;
const FLAT: SegmentId = 23;
/// The flat variant's queue.
const QUEUE: u8 = 1;

/// The implementations `--impl` can name: `aggregated` (counts fixed at
/// creation, result in the node's window), `aggregated-private` (copied
/// into the caller's buffer), `aggregated-window` (pieces made in the
/// window, `Alltoallv::run_in_window`: each call writes the ends of every
/// piece there, the first two calls every element; result in the window),
/// `aggregated-displaced` (as `aggregated-private`, with `MPI_Alltoallv`'s
/// displacements: [`DISPLACED_GAP`] elements after every piece in both
/// buffers, `Alltoallv::run_into_displaced`), `unknown-private` (counts
/// exchanged in each call, result copied out), `unknown-varying` (the
/// same with counts that change from call to call: every other call adds
/// an element to every other non-empty piece, [`varied`]), `flat` (every
/// rank writes every other rank's piece into its segment with its own
/// notification).
pub const ALLTOALLV_IMPLS: [&str; 7] = [
    "aggregated",
    "aggregated-private",
    "aggregated-window",
    "aggregated-displaced",
    "unknown-private",
    "unknown-varying",
    "flat",
];
/// The elements after every piece, in the send and the receive buffer, of
/// `aggregated-displaced`: a cache line, so that the pieces keep their
/// offsets within a line and only the displacements differ.
pub const DISPLACED_GAP: usize = 8;
/// The count distributions.
pub const ALLTOALLV_DISTS: [&str; 3] = ["regular", "random", "sparse"];

/// A small deterministic hash, for counts every rank computes alike.
fn mix(a: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 32)
}

/// The `n * n` counts of distribution `dist` with mean `c` per pair:
/// regular `c`; random uniform in `0..=2c`; sparse: `8c` from each rank to
/// the next and in about one other pair of eight, nothing elsewhere.
pub fn pair_counts(dist: &str, n: usize, c: usize) -> Vec<usize> {
    (0..n * n)
        .map(|i| {
            let h = mix(i as u64 + 1);
            let ring = i % n == (i / n + 1) % n;
            match dist {
                "random" => (h % (2 * c as u64 + 1)) as usize,
                "sparse" if ring || h % 8 == 0 => 8 * c,
                "sparse" => 0,
                _ => c,
            }
        })
        .collect()
}

/// The counts of `unknown-varying`'s odd calls: `counts` with one element
/// more in every non-empty piece at an odd index (so that each call's
/// counts differ from the last call's, as sizes unknown in advance may).
pub fn varied(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &k)| k + usize::from(k > 0 && i % 2 == 1))
        .collect()
}

/// Element `i` of the `k`-element piece from `s` to `t` in call `it`: the
/// call at both ends, fixed elsewhere.
pub fn value(s: usize, t: usize, i: usize, k: usize, it: usize) -> u64 {
    let pair = (s as u64) << 48 | (t as u64) << 32;
    if i == 0 || i + 1 == k {
        pair | it as u64
    } else {
        pair | 1 << 31 | i as u64
    }
}

/// Where pieces of `counts` elements lie in a buffer with `gap` elements
/// after each, in order: their displacements, and the buffer's length.
fn places(counts: &[usize], gap: usize) -> (Vec<usize>, usize) {
    let mut len = 0;
    let displs = counts
        .iter()
        .map(|&k| {
            let at = len;
            len += k + gap;
            at
        })
        .collect();
    (displs, len)
}

/// Rank `me`'s pieces and where they lie in its buffers, computed once
/// (outside the timed calls): sent by target, received by source, with
/// `gap` elements after each piece (packed: 0).
pub struct Pieces {
    me: usize,
    pub row: Vec<usize>,
    pub send_displs: Vec<usize>,
    send_len: usize,
    col: Vec<usize>,
    pub recv_displs: Vec<usize>,
    pub recv_len: usize,
}

impl Pieces {
    /// Rank `me`'s pieces of the `n * n` `counts`.
    pub fn new(counts: &[usize], n: usize, me: usize, gap: usize) -> Pieces {
        let row = counts[me * n..(me + 1) * n].to_vec();
        let col: Vec<usize> = (0..n).map(|s| counts[s * n + me]).collect();
        let (send_displs, send_len) = places(&row, gap);
        let (recv_displs, recv_len) = places(&col, gap);
        Pieces {
            me,
            row,
            send_displs,
            send_len,
            col,
            recv_displs,
            recv_len,
        }
    }

    /// The send buffer for call `it` (gaps hold `u64::MAX`).
    pub fn send_buffer(&self, it: usize) -> Vec<u64> {
        let mut send = vec![u64::MAX; self.send_len];
        for (t, (&k, &at)) in self.row.iter().zip(&self.send_displs).enumerate() {
            for (i, v) in send[at..at + k].iter_mut().enumerate() {
                *v = value(self.me, t, i, k, it);
            }
        }
        send
    }

    /// Set both ends of every piece of `send` to call `it`'s values.
    pub fn touch(&self, send: &mut [u64], it: usize) {
        for (t, (&k, &at)) in self.row.iter().zip(&self.send_displs).enumerate() {
            if k > 0 {
                send[at] = value(self.me, t, 0, k, it);
                send[at + k - 1] = value(self.me, t, k - 1, k, it);
            }
        }
    }

    /// Whether `recv` holds call `it`'s pieces: both ends of each, or
    /// every element if `full`.
    pub fn received_ok(&self, recv: &[u64], it: usize, full: bool) -> bool {
        let me = self.me;
        let mut ok = true;
        for (s, (&k, &at)) in self.col.iter().zip(&self.recv_displs).enumerate() {
            let piece = &recv[at..at + k];
            ok &= if full {
                piece
                    .iter()
                    .enumerate()
                    .all(|(i, &v)| v == value(s, me, i, k, it))
            } else {
                k == 0
                    || (piece[0] == value(s, me, 0, k, it)
                        && piece[k - 1] == value(s, me, k - 1, k, it))
            };
        }
        ok
    }
}

/// `alltoallv`: u64 elements, per distribution, implementation and mean
/// bytes per pair of ranks.
pub fn alltoallv(b: &Bench, sizes: &[usize], impls: &[String], dists: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for dist in dists {
        for imp in impls {
            for &size in sizes {
                rows.push(alltoallv_one(b, dist, imp, (size / 8).max(1)));
            }
        }
    }
    rows
}

/// The bench column of an alltoallv row with distribution `dist`.
pub fn alltoallv_bench(dist: &str) -> &'static str {
    match dist {
        "random" => "alltoallv-random",
        "sparse" => "alltoallv-sparse",
        _ => "alltoallv-regular",
    }
}

fn alltoallv_one(b: &Bench, dist: &str, imp: &str, c: usize) -> Row {
    let ctx = b.ctx;
    let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
    let counts = pair_counts(dist, n, c);
    let total: usize = counts.iter().sum();
    let reps = b.reps(total * 8 / n.max(1), 5_000, 1 << 30);
    let gap = if imp == "aggregated-displaced" {
        DISPLACED_GAP
    } else {
        0
    };
    // The counts of each call in turn (two where they vary), their pieces
    // and send buffers.
    let mut turns = vec![counts.clone()];
    if imp == "unknown-varying" {
        turns.push(varied(&counts));
    }
    let pieces: Vec<Pieces> = turns.iter().map(|c| Pieces::new(c, n, me, gap)).collect();
    let mut sends: Vec<Vec<u64>> = pieces.iter().map(|p| p.send_buffer(0)).collect();
    let mut recv = vec![0u64; pieces.iter().map(|p| p.recv_len).max().unwrap_or(0)];
    let most = turns
        .iter()
        .flat_map(|counts| {
            (0..n).map(move |r| {
                let sent: usize = counts[r * n..(r + 1) * n].iter().sum();
                let got: usize = (0..n).map(|s| counts[s * n + r]).sum();
                sent.max(got)
            })
        })
        .max()
        .unwrap_or(0);
    let mut a = match imp {
        "flat" => None,
        "unknown-private" | "unknown-varying" => Some(
            Alltoallv::<u64>::with_unknown_sizes(ctx, WINDOW, most, b.alltoallv, B)
                .expect("Alltoallv"),
        ),
        _ => Some(
            Alltoallv::<u64>::with_options(ctx, WINDOW, &counts, b.alltoallv, B)
                .expect("Alltoallv"),
        ),
    };
    let mut flat = (imp == "flat").then(|| Flat::new(b, &counts));
    let mut ok = true;
    let mut call = |it: usize, full: bool, recv: &mut [u64]| {
        let turn = it % pieces.len();
        let (pieces, send) = (&pieces[turn], &mut sends[turn]);
        let row = &pieces.row;
        pieces.touch(send, it);
        match (a.as_mut(), flat.as_mut()) {
            (Some(a), _) if imp == "aggregated" || imp == "aggregated-window" => {
                if imp == "aggregated" {
                    a.run(send, row, B).expect("alltoallv");
                } else {
                    // What `touch` changed (all of it in the first call of
                    // each copy), made in the window.
                    let mut at = 0;
                    for (t, &k) in row.iter().enumerate() {
                        let view = a.outgoing(t as u16).expect("outgoing");
                        if it < 2 {
                            view.copy_from_slice(0, &send[at..at + k]);
                        } else if k > 0 {
                            view.set(0, send[at]);
                            view.set(k - 1, send[at + k - 1]);
                        }
                        at += k;
                    }
                    a.run_in_window(B).expect("alltoallv");
                }
                let mut at = 0;
                for s in 0..n {
                    let view = a.received(s as u16).expect("received");
                    let k = view.len();
                    // Ends only (or all): the view is read in place.
                    if full {
                        view.copy_to_slice(0, &mut recv[at..at + k]);
                    } else if k > 0 {
                        recv[at] = view.get(0);
                        recv[at + k - 1] = view.get(k - 1);
                    }
                    at += k;
                }
            }
            (Some(a), _) if gap > 0 => {
                let (sd, rd) = (&pieces.send_displs, &pieces.recv_displs);
                a.run_into_displaced(send, row, sd, recv, rd, B)
                    .expect("alltoallv")
            }
            (Some(a), _) => a.run_into(send, row, recv, B).expect("alltoallv"),
            (None, Some(f)) => f.run(it, send, recv, full),
            (None, None) => unreachable!(),
        }
        ok &= pieces.received_ok(recv, it, full);
    };
    b.barrier();
    let warm = reps / 10;
    for it in 0..warm {
        call(it, false, &mut recv);
    }
    let samples = b.batches(reps, 1.0, |i| call(warm + i, false, &mut recv));
    call(warm + reps, true, &mut recv);
    drop(a);
    drop(flat);
    let verified = b.all_ok(ok);
    let samples = if me == 0 { samples } else { Vec::new() };
    b.row(alltoallv_bench(dist), imp, c * 8, reps, samples, verified)
}

/// The flat alltoallv: each rank's segment holds its send pieces and two
/// receive areas (by call parity); every rank writes its piece for `t`
/// into `t`'s receive area with notification id `parity * n + me` (a bare
/// notification for an empty piece, so that every pair hears from each
/// other every call: that is what makes the two areas enough), and
/// claims one from every other rank.
struct Flat<'a> {
    b: &'a Bench<'a>,
    view: gaspi::SegmentView<u64>,
    counts: Vec<usize>,
    /// Elements before the receive areas, and in one.
    sent: usize,
    area: usize,
    /// Per source: where its piece for this rank lies in a receive area;
    /// per target: where this rank's piece lies in the target's, and in
    /// this rank's send buffer.
    from_at: Vec<usize>,
    to_at: Vec<usize>,
    send_at: Vec<usize>,
}

impl<'a> Flat<'a> {
    fn new(b: &'a Bench<'a>, counts: &[usize]) -> Flat<'a> {
        let ctx = b.ctx;
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        // Every rank's segment has room for the largest send and receive.
        let sent = (0..n)
            .map(|r| counts[r * n..(r + 1) * n].iter().sum::<usize>())
            .max()
            .unwrap_or(0);
        let area = (0..n)
            .map(|r| (0..n).map(|s| counts[s * n + r]).sum::<usize>())
            .max()
            .unwrap_or(0);
        if ctx.segment_list().contains(&FLAT) {
            ctx.segment_delete(FLAT).expect("segment_delete");
        }
        ctx.segment_create(
            FLAT,
            8 * (sent + 2 * area).max(1),
            GroupId::ALL,
            B,
            gaspi::Alloc::Initialized,
        )
        .expect("segment_create");
        let view = ctx.segment::<u64>(FLAT).expect("segment");
        let at = |t: usize, s: usize| (0..s).map(|x| counts[x * n + t]).sum::<usize>();
        Flat {
            b,
            view,
            counts: counts.to_vec(),
            sent,
            area,
            from_at: (0..n).map(|s| at(me, s)).collect(),
            to_at: (0..n).map(|t| at(t, me)).collect(),
            send_at: (0..n)
                .map(|t| counts[me * n..me * n + t].iter().sum())
                .collect(),
        }
    }

    /// One call: `send` in, `recv` out (ends only unless `full`).
    fn run(&mut self, it: usize, send: &[u64], recv: &mut [u64], full: bool) {
        let ctx = self.b.ctx;
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        let parity = it % 2;
        let base = self.sent + parity * self.area;
        self.view.copy_from_slice(0, send);
        // From the next rank on, so that not all write to the same one.
        for k in 1..=n {
            let t = (me + k) % n;
            let len = self.counts[me * n + t];
            let at = self.send_at[t];
            if t == me {
                self.view
                    .copy_from_slice(base + self.from_at[me], &send[at..at + len]);
            } else {
                let note = Notification::new((parity * n + me) as u32, 1);
                let remote = Remote::new(t as u16, FLAT, 8 * (base + self.to_at[t]));
                loop {
                    let r = if len == 0 {
                        ctx.notify(t as u16, FLAT, note, QUEUE, B)
                    } else {
                        let local = Local::new(FLAT, 8 * at);
                        ctx.write_notify(local, remote, 8 * len, note, QUEUE, B)
                    };
                    match r {
                        Err(gaspi::Error::QueueFull { .. }) => ctx.wait(QUEUE, B).expect("wait"),
                        r => break r.expect("write_notify"),
                    }
                }
            }
        }
        ctx.wait(QUEUE, B).expect("wait");
        let ids = (parity * n) as u32..((parity + 1) * n) as u32;
        for _ in 1..n {
            let id = ctx
                .notify_waitsome(FLAT, ids.clone(), B)
                .expect("notify_waitsome");
            ctx.notify_reset(FLAT, id).expect("notify_reset");
        }
        // The result is in the segment; the ends (or all) into `recv`.
        let mut at = 0;
        for s in 0..n {
            let k = self.counts[s * n + me];
            let from = base + self.from_at[s];
            if full {
                self.view.copy_to_slice(from, &mut recv[at..at + k]);
            } else if k > 0 {
                recv[at] = self.view.get(from);
                recv[at + k - 1] = self.view.get(from + k - 1);
            }
            at += k;
        }
    }
}

impl Drop for Flat<'_> {
    fn drop(&mut self) {
        let _ = self.b.ctx.segment_delete(FLAT);
    }
}
