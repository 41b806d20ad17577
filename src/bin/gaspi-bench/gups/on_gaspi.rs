//! Random Access on GASPI, flat and node-shared, exact.
//!
//! Flat: the table's part of each rank in a segment of its own. Per round
//! a rank buckets its updates by owner, applies its own, and sends every
//! other rank its bucket with one `write_notify` (the notification's value
//! is the count + 1, so an empty bucket is a notification alone); then it
//! applies the buckets sent to it. Only a part's owner writes it.
//!
//! Node-shared: a node's parts in one node window; updates for other
//! nodes are bucketed by node (not by rank) and sent with one
//! `write_notify` per other node, into a slot of the target node's window,
//! where local rank `s % ppn` reads the buckets of source rank `s`, so
//! the node's ranks share the work and every slot has one reader. How a
//! node's words are updated ([`Updates`]):
//! - [`Updates::Owner`]: only a part's owner writes it, with plain loads
//!   and stores, as in the flat variant. Updates of a mate's part (made
//!   here or read from another node's bucket) go into a bucket for that
//!   mate in the window (a slot per writer, reader and parity, and a
//!   notification inside the node, no copy through a message), which the
//!   mate applies at the end of the round.
//! - [`Updates::Atomic`]: every rank of the node applies any update of the
//!   node's words at once, with atomic XORs. Each is a locked instruction
//!   that waits for its cache miss before the next may start: 1.1-1.5x
//!   the owners' time on a 2-core Xeon VM, but 0.6x on one node with
//!   8 MiB per rank, where no update leaves the rank that makes it
//!   (`docs/guide/benchmarking.md`, "GUPS inside a node").
//! - [`Updates::LockFree`]: as `Atomic` with HPCC's lock-free update, a
//!   plain load and store, where two ranks updating one word at once may
//!   lose one of the updates (HPCC tolerates errors in 1% of the table).
//!
//! Words are reached as atomics (`SegmentView::atomic_u64s`): a relaxed
//! load and store are plain moves, and a part only its owner writes
//! needs nothing more.
//!
//! Slots alternate by round parity. A rank writes a slot of round `r + 2`
//! only after it has applied the reader's bucket of round `r + 1`, which
//! the reader sent after applying what this rank wrote in round `r` (every
//! pair of sender and reader exchange in every round: the node buckets'
//! pairs, and with `Owner` every pair of mates).

use super::{CHUNK, Table, next, stream_start};
use crate::sharing::Sharing;
use gaspi::{
    Context, Error, GroupId, Local, Notification, Remote, SegmentId, SegmentView, Timeout,
};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

const B: Timeout = Timeout::Block;
const WORD: usize = std::mem::size_of::<u64>();

/// How the ranks of a node update the node's words (node-shared; the flat
/// variant's owners always update their own part alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updates {
    /// Each part by its owner alone, plain; other ranks' updates of it
    /// reach it through a bucket in the window. Exact.
    Owner,
    /// Any rank, with atomic XORs. Exact.
    Atomic,
    /// Any rank, with a plain load and store (HPCC's lock-free variant):
    /// may lose updates where two ranks meet on a word.
    LockFree,
}

/// One rank's part of a running Random Access.
pub struct Gups<'a> {
    ctx: &'a Context,
    table: Table,
    /// Updates of the node's words by any of its ranks (`Atomic`,
    /// `LockFree`) or by the word's owner alone (`Owner`, and flat).
    updates: Updates,
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
    /// Per local rank, this round's updates of its part (`Owner`).
    mates: Vec<Vec<u64>>,
    /// A received bucket, copied out of its slot.
    scratch: Vec<u64>,
    /// Where the domain's send, receive and mates' slots start in its
    /// segment or window, in words (after its parts of the table).
    slots: Slots,
    rounds: usize,
}

/// Where the slot regions start (see `Gups::new`), in words.
#[derive(Clone, Copy)]
struct Slots {
    send: usize,
    recv: usize,
    mates: usize,
}

impl<'a> Gups<'a> {
    /// Set up collectively: the table (`T[i] = i`) and the slots in
    /// segment (flat) or window (node-shared) `seg`; `updates`: how a
    /// node's ranks update its words (flat ones are exact anyway).
    pub fn new(
        ctx: &'a Context,
        table: Table,
        sharing: Sharing,
        updates: Updates,
        seg: SegmentId,
        queue: u8,
    ) -> Result<Gups<'a>, Error> {
        let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
        if table.ranks != n {
            return Err(Error::InvalidArgument(
                "the table is not spread over this job's ranks".into(),
            ));
        }
        let (ppn, updates) = match sharing {
            Sharing::Flat => (1, Updates::Owner),
            Sharing::Node => (ctx.ranks_per_node(), updates),
        };
        if n % ppn != 0 {
            return Err(Error::InvalidArgument(format!(
                "node-shared gups needs full nodes: {n} ranks, {ppn} per node"
            )));
        }
        let domains = n / ppn;
        let fail = || Error::InvalidArgument("gups: the slots do not fit".into());
        // Notification ids: the node buckets', then the mates' (Owner).
        if 2 * (n + ppn * ppn) > ctx.notification_num() as usize {
            return Err(fail());
        }
        // The domain's words: its parts of the table, then per local rank
        // its send slots (parity, domain), then the receive slots (parity,
        // source rank), then the mates' slots (parity, reader, writer) of
        // `domains` chunks each: a rank's own updates of a mate's part and
        // those it read from each other node. The slot functions below
        // index inside these regions.
        let after = |start: usize, chunks: [usize; 3]| {
            chunks
                .into_iter()
                .try_fold(CHUNK, usize::checked_mul)
                .and_then(|w| start.checked_add(w))
                .ok_or_else(fail)
        };
        let send = ppn.checked_mul(table.words).ok_or_else(fail)?;
        let recv = after(send, [2, ppn, domains])?;
        let mates = after(recv, [2, n, 1])?;
        let end = after(mates, [2 * ppn, ppn, domains])?;
        let bytes = end.checked_mul(WORD).ok_or_else(fail)?;
        let view = sharing.create(ctx, seg, bytes)?;
        let g = Gups {
            ctx,
            table,
            updates,
            seg,
            queue,
            view,
            ppn,
            domain: me / ppn,
            domains,
            local: me % ppn,
            a: stream_start(me),
            buckets: vec![Vec::with_capacity(CHUNK); domains],
            mates: vec![Vec::with_capacity(CHUNK); ppn],
            scratch: vec![0; CHUNK],
            slots: Slots { send, recv, mates },
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
        self.slots.send + ((self.local * 2 + p) * self.domains + d) * CHUNK
    }

    /// Where the receive slot of source rank `s` in parity `p` starts.
    fn recv_slot(&self, p: usize, s: usize) -> usize {
        self.slots.recv + (p * self.table.ranks + s) * CHUNK
    }

    /// Where local rank `writer`'s slot for local rank `reader`'s part in
    /// parity `p` starts (`domains` chunks).
    fn mate_slot(&self, p: usize, reader: usize, writer: usize) -> usize {
        self.slots.mates + ((p * self.ppn + reader) * self.ppn + writer) * CHUNK * self.domains
    }

    /// The notification id of local rank `writer`'s slot for `reader` in
    /// parity `p` (after the node buckets' `2 * ranks`).
    fn mate_id(&self, p: usize, reader: usize, writer: usize) -> u32 {
        (2 * self.table.ranks + (p * self.ppn + reader) * self.ppn + writer) as u32
    }

    /// Rounds done so far.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// One round: [`CHUNK`] updates of this rank, and the buckets sent to it.
    pub fn round(&mut self) -> Result<(), Error> {
        let (ctx, seg, queue) = (self.ctx, self.seg, self.queue);
        let (table, me) = (self.table, ctx.rank() as usize);
        let (n, p) = (table.ranks, self.rounds % 2);
        let base = self.domain * self.ppn * table.words;
        let view = self.view.sub(0..self.ppn * table.words);
        let words = view.atomic_u64s()?;
        let (updates, local, ppn) = (self.updates, self.local, self.ppn);
        let owner = updates == Updates::Owner;
        self.buckets.iter_mut().for_each(Vec::clear);
        self.mates.iter_mut().for_each(Vec::clear);
        // Apply an update of this node's words, or keep it for its owner.
        let update = |mates: &mut [Vec<u64>], a: u64| {
            let w = table.index(a) - base;
            let mate = w / table.words;
            if owner && mate != local {
                mates[mate].push(a);
            } else {
                apply(words, w, a, updates);
            }
        };
        for _ in 0..CHUNK {
            self.a = next(self.a);
            let i = table.index(self.a);
            let d = table.owner(i) / ppn;
            if d == self.domain {
                update(&mut self.mates, self.a);
            } else {
                self.buckets[d].push(self.a);
            }
        }
        // The slots of two rounds ago have left.
        ctx.wait(queue, B)?;
        for d in (0..self.domains).filter(|&d| d != self.domain) {
            let (bucket, from) = (&self.buckets[d], self.send_slot(p, d));
            // The reader of this rank's buckets in domain d.
            let to = (d * ppn + local) as gaspi::Rank;
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
            let s = d * ppn + local;
            let k = self.claim((p * n + s) as u32, CHUNK, s)?;
            let mut got = std::mem::take(&mut self.scratch);
            self.view.copy_to_slice(self.recv_slot(p, s), &mut got[..k]);
            got[..k].iter().for_each(|&a| update(&mut self.mates, a));
            self.scratch = got;
        }
        if owner && ppn > 1 {
            self.exchange_with_mates(p, words, base)?;
        }
        self.rounds += 1;
        Ok(())
    }

    /// `Owner`: hand each mate this round's updates of its part (in its
    /// slot of the window, and a notification), and apply theirs of ours
    /// (`words`: the node's table, from word `base` of the whole).
    fn exchange_with_mates(&self, p: usize, words: &[AtomicU64], base: usize) -> Result<(), Error> {
        let (ctx, local, first) = (self.ctx, self.local, self.domain * self.ppn);
        for m in (0..self.ppn).filter(|&m| m != local) {
            let bucket = &self.mates[m];
            self.view
                .copy_from_slice(self.mate_slot(p, m, local), bucket);
            let note = Notification::new(self.mate_id(p, m, local), bucket.len() as u32 + 1);
            ctx.notify((first + m) as gaspi::Rank, self.seg, note, self.queue, B)?;
        }
        for m in (0..self.ppn).filter(|&m| m != local) {
            let k = self.claim(self.mate_id(p, local, m), CHUNK * self.domains, first + m)?;
            let at = self.mate_slot(p, local, m);
            for a in self.view.sub(at..at + k).atomic_u64s()? {
                let a = a.load(Relaxed);
                apply(words, self.table.index(a) - base, a, Updates::Owner);
            }
        }
        Ok(())
    }

    /// Take notification `id` (a bucket of rank `from`): how many updates
    /// the bucket holds, at most `most`.
    fn claim(&self, id: u32, most: usize, from: usize) -> Result<usize, Error> {
        let (_, value) = self.ctx.notify_claim(self.seg, id..id + 1, B)?;
        let k = value as usize - 1;
        if k > most {
            return Err(Error::InvalidArgument(format!(
                "gups: rank {from} says it sent {k} updates, at most {most} fit"
            )));
        }
        Ok(k)
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
fn apply(words: &[AtomicU64], w: usize, a: u64, updates: Updates) {
    if updates == Updates::Atomic {
        words[w].fetch_xor(a, Relaxed);
    } else {
        words[w].store(words[w].load(Relaxed) ^ a, Relaxed);
    }
}
