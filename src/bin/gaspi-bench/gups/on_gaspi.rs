//! Random Access on GASPI, flat and node-shared, exact.
//!
//! Flat: the table's part of each rank in a segment of its own. Per round
//! a rank buckets its updates by owner, applies its own, and sends every
//! other rank its bucket with one `write_notify` (the notification's value
//! is the count + 1, so an empty bucket is a notification alone); then it
//! applies the buckets sent to it. Only a part's owner writes it.
//!
//! Node-shared: a node's parts in one node window. Updates of the node's
//! words are applied at once in the window, exactly with atomic XORs
//! (`lock_free` false), or as HPCC's lock-free variant with a plain load
//! and store, where two ranks updating one word at once may lose one of
//! the updates (HPCC tolerates errors in 1% of the table); the others
//! are bucketed by node (not by rank) and sent with one `write_notify` per
//! other node, into a slot of the target node's window. There the
//! buckets of source rank `s` are applied (atomically, beside the node's
//! own) by the node's local rank `s % ppn`, so the node's ranks share the
//! work and every slot has one reader.
//!
//! Words are reached as atomics (`SegmentView::atomic_u64s`): a relaxed
//! load and store are plain moves, and a part only its owner writes (flat)
//! needs nothing more.
//!
//! Slots alternate by round parity. A rank writes a slot of round `r + 2`
//! only after it has applied the reader's bucket of round `r + 1`, which
//! the reader sent after applying what this rank wrote in round `r` (in
//! both variants every pair of sender and reader exchange in every round).

use super::{CHUNK, Table, next, stream_start};
use crate::sharing::Sharing;
use gaspi::{
    Context, Error, GroupId, Local, Notification, Remote, SegmentId, SegmentView, Timeout,
};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

const B: Timeout = Timeout::Block;
const WORD: usize = std::mem::size_of::<u64>();

/// One rank's part of a running Random Access.
pub struct Gups<'a> {
    ctx: &'a Context,
    table: Table,
    /// Updates applied with atomic XORs (node-shared and not lock-free).
    atomic: bool,
    seg: SegmentId,
    queue: u8,
    view: SegmentView<u64>,
    /// Ranks per node (1 when flat: every rank a domain of its own).
    ppn: usize,
    /// This rank's domain (its rank when flat, its node when node-shared),
    /// the number of domains, and its place in the domain.
    domain: usize,
    domains: usize,
    local: usize,
    /// The stream's last number.
    a: u64,
    /// Per domain, this round's bucket.
    buckets: Vec<Vec<u64>>,
    /// A received bucket, copied out of its slot.
    scratch: Vec<u64>,
    rounds: usize,
}

impl<'a> Gups<'a> {
    /// Set up collectively: the table (`T[i] = i`) and the slots in
    /// segment (flat) or window (node-shared) `seg`; `lock_free`: HPCC's
    /// lock-free updates in a node's window (flat ones are exact anyway).
    pub fn new(
        ctx: &'a Context,
        table: Table,
        sharing: Sharing,
        lock_free: bool,
        seg: SegmentId,
        queue: u8,
    ) -> Result<Gups<'a>, Error> {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        if table.ranks != n {
            return Err(Error::InvalidArgument(
                "the table is not spread over this job's ranks".into(),
            ));
        }
        let ppn = match sharing {
            Sharing::Flat => 1,
            Sharing::Node => ctx.ranks_per_node(),
        };
        if n % ppn != 0 {
            return Err(Error::InvalidArgument(format!(
                "node-shared gups needs full nodes: {n} ranks, {ppn} per node"
            )));
        }
        let domains = n / ppn;
        // The domain's words: its parts of the table, then per local rank
        // its send slots (parity, domain), then the receive slots (parity,
        // source rank). Table::new checked the table's bytes.
        let bytes = (2 * (ppn * domains + n))
            .checked_mul(CHUNK)
            .and_then(|slots| slots.checked_add(ppn * table.words))
            .and_then(|w| w.checked_mul(WORD))
            .ok_or_else(|| Error::InvalidArgument("gups: the slots do not fit".into()))?;
        let view = sharing.create(ctx, seg, bytes)?;
        let g = Gups {
            ctx,
            table,
            atomic: sharing == Sharing::Node && !lock_free,
            seg,
            queue,
            view,
            ppn,
            domain: me / ppn,
            domains,
            local: me % ppn,
            a: stream_start(me),
            buckets: vec![Vec::with_capacity(CHUNK); domains],
            scratch: vec![0; CHUNK],
            rounds: 0,
        };
        let first = me * table.words;
        let mine: Vec<u64> = (first as u64..(first + table.words) as u64).collect();
        g.view.copy_from_slice(g.local * table.words, &mine);
        // No update before every part holds its start.
        ctx.barrier(GroupId::ALL, B)?;
        Ok(g)
    }

    /// Where this rank's send slot for domain `d` in parity `p` starts.
    fn send_slot(&self, p: usize, d: usize) -> usize {
        self.ppn * self.table.words + ((self.local * 2 + p) * self.domains + d) * CHUNK
    }

    /// Where the receive slot of source rank `s` in parity `p` starts.
    fn recv_slot(&self, p: usize, s: usize) -> usize {
        let ranks = self.table.ranks;
        self.ppn * self.table.words + (2 * self.ppn * self.domains + p * ranks + s) * CHUNK
    }

    /// Rounds done so far.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// One round: [`CHUNK`] updates of this rank, and the buckets sent to it.
    pub fn round(&mut self) -> Result<(), Error> {
        let (ctx, seg, queue) = (self.ctx, self.seg, self.queue);
        let (n, me) = (self.table.ranks, ctx.rank() as usize);
        let p = self.rounds % 2;
        let base = self.domain * self.ppn * self.table.words;
        let view = self.view.sub(0..self.ppn * self.table.words);
        let (words, atomic) = (view.atomic_u64s()?, self.atomic);
        self.buckets.iter_mut().for_each(Vec::clear);
        for _ in 0..CHUNK {
            self.a = next(self.a);
            let i = self.table.index(self.a);
            let o = self.table.owner(i);
            let d = if self.ppn == 1 { o } else { o / self.ppn };
            if d == self.domain {
                apply(words, i - base, self.a, atomic);
            } else {
                self.buckets[d].push(self.a);
            }
        }
        // The slots of two rounds ago have left.
        ctx.wait(queue, B)?;
        for d in (0..self.domains).filter(|&d| d != self.domain) {
            let (bucket, from) = (&self.buckets[d], self.send_slot(p, d));
            // The reader of this rank's buckets in domain d.
            let to = (d * self.ppn + self.local) as gaspi::Rank;
            let note = Notification::new((p * n + me) as u32, bucket.len() as u32 + 1);
            if bucket.is_empty() {
                ctx.notify(to, seg, note, queue, B)?;
            } else {
                self.view.copy_from_slice(from, bucket);
                ctx.write_notify(
                    Local::new(seg, from * WORD),
                    Remote::new(to, seg, self.recv_slot(p, me) * WORD),
                    bucket.len() * WORD,
                    note,
                    queue,
                    B,
                )?;
            }
        }
        for d in (0..self.domains).filter(|&d| d != self.domain) {
            let s = d * self.ppn + self.local;
            let id = (p * n + s) as u32;
            let (_, value) = ctx.notify_claim(seg, id..id + 1, B)?;
            let k = value as usize - 1;
            if k > CHUNK {
                return Err(Error::InvalidArgument(format!(
                    "gups: rank {s} says it sent {k} updates, at most {CHUNK} fit"
                )));
            }
            let at = self.recv_slot(p, s);
            let mut got = std::mem::take(&mut self.scratch);
            self.view.copy_to_slice(at, &mut got[..k]);
            for &a in &got[..k] {
                apply(words, self.table.index(a) - base, a, atomic);
            }
            self.scratch = got;
        }
        self.rounds += 1;
        Ok(())
    }

    /// Collectively end: once every rank is done, this rank's part of the
    /// table (`table.words` words); then delete the memory.
    pub fn finish(self) -> Result<Vec<u64>, Error> {
        self.ctx.wait(self.queue, B)?;
        self.ctx.barrier(GroupId::ALL, B)?;
        let w = self.table.words;
        let part = self.view.sub(self.local * w..(self.local + 1) * w).to_vec();
        drop(self.view);
        self.ctx.segment_delete(self.seg)?;
        Ok(part)
    }
}

/// `T[w] ^= a`: with an atomic XOR, or a load and a store (exact where one
/// rank alone writes the word).
#[inline(always)]
fn apply(words: &[AtomicU64], w: usize, a: u64, atomic: bool) {
    if atomic {
        words[w].fetch_xor(a, Relaxed);
    } else {
        words[w].store(words[w].load(Relaxed) ^ a, Relaxed);
    }
}
