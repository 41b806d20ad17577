//! The stencil on GASPI, flat and node-shared, in one piece of code: a
//! *domain* is a rank's block (flat: a segment per rank) or a node's block
//! (node-shared: the node's window, one row band per rank of the node).
//!
//! A domain's memory holds, per parity of the iteration, the block with a
//! halo row above and below, the columns left and right of it as received
//! (`west_in`, `east_in`), and the packed columns it sends (`west_out`,
//! `east_out`). Sweep `t` reads parity `t % 2` and writes the other; then
//! each rank sends what its neighbouring domains need for sweep `t + 1`:
//! boundary rows by one `write_notify` straight into the neighbour's halo
//! row, boundary columns packed, then one `write_notify` each. Inside a
//! node-shared domain nothing is copied: the rank above and below read the
//! band's rows in place, and a notification in the node's table tells them
//! the band is done. Every notification is waited for by exactly one rank
//! and carries the number of the sweep it completes, which is checked.
//!
//! Why two parities suffice: a rank writes into parity `p` of a
//! neighbour's domain at the end of sweep `t` (`p = (t + 1) % 2`); the
//! neighbour last read parity `p` in sweep `t - 1`, which it finished
//! before it could send what this rank needed to start sweep `t`.

use super::{Dir, Shape, sweep};
use crate::sharing::Sharing;
use gaspi::{
    Context, Error, GroupId, Local, Notification, Rank, Remote, SegmentId, SegmentView, Timeout,
};

const B: Timeout = Timeout::Block;
const F64: usize = std::mem::size_of::<f64>();

/// What a notification says has arrived (ids: per parity, kind and band).
#[derive(Clone, Copy)]
enum Kind {
    /// The halo row above / below (from the domain to the north / south).
    FromNorth = 0,
    FromSouth,
    /// The band's part of the column left / right of the domain.
    FromWest,
    FromEast,
    /// The band above / below in the same domain finished its sweep.
    BandAbove,
    BandBelow,
}
const KINDS: u32 = 6;

/// One rank's part of a running stencil.
pub struct Stencil<'a> {
    ctx: &'a Context,
    shape: Shape,
    seg: SegmentId,
    queue: u8,
    view: SegmentView<f64>,
    /// The domain's interior rows and columns.
    rows: usize,
    cols: usize,
    /// This rank's band of the domain's rows, and the number of bands.
    band: usize,
    bands: usize,
    /// A rank of each neighbouring domain (the one with this band), if any:
    /// north, south, west, east.
    next: [Option<Rank>; 4],
    /// Sweeps done.
    done: usize,
}

impl<'a> Stencil<'a> {
    /// Set up collectively on every rank of `ctx`: segment (flat) or window
    /// (node-shared) `seg`, filled with the initial values.
    pub fn new(
        ctx: &'a Context,
        shape: Shape,
        sharing: Sharing,
        seg: SegmentId,
        queue: u8,
    ) -> Result<Stencil<'a>, Error> {
        let me = ctx.rank() as usize;
        if shape.ranks != ctx.num_ranks() as usize || shape.ppn != ctx.ranks_per_node() {
            return Err(Error::InvalidArgument(
                "the stencil's shape is not this job's".into(),
            ));
        }
        let (bands, band) = match sharing {
            Sharing::Flat => (1, 0),
            Sharing::Node => (shape.ppn, me % shape.ppn),
        };
        let next = [Dir::North, Dir::South, Dir::West, Dir::East].map(|d| match sharing {
            Sharing::Flat => shape.rank_next(me, d).map(|r| r as Rank),
            Sharing::Node => shape
                .node_next(me / shape.ppn, d)
                .map(|n| (n * shape.ppn + band) as Rank),
        });
        let (rows, cols) = (bands * shape.side, shape.side);
        // Shape::new checked that the whole grid's size fits; a domain is
        // smaller, its columns included.
        let bytes = 2 * ((rows + 2) * cols + 4 * rows) * F64;
        let view = sharing.create(ctx, seg, bytes)?;
        let s = Stencil {
            ctx,
            shape,
            seg,
            queue,
            view,
            rows,
            cols,
            band,
            bands,
            next,
            done: 0,
        };
        s.fill();
        // No one writes into a domain before its ranks have filled it.
        ctx.barrier(GroupId::ALL, B)?;
        Ok(s)
    }

    /// Offsets (in f64s) of parity `p`'s block (from its halo row above),
    /// received columns and packed columns.
    fn field(&self, p: usize) -> usize {
        p * ((self.rows + 2) * self.cols + 4 * self.rows)
    }
    fn west_in(&self, p: usize) -> usize {
        self.field(p) + (self.rows + 2) * self.cols
    }
    fn east_in(&self, p: usize) -> usize {
        self.west_in(p) + self.rows
    }
    fn west_out(&self, p: usize) -> usize {
        self.east_in(p) + self.rows
    }
    fn east_out(&self, p: usize) -> usize {
        self.west_out(p) + self.rows
    }

    /// The first row of this rank's band in the domain (from 0).
    fn lo(&self) -> usize {
        self.band * self.shape.side
    }

    /// The initial values of this rank's band in parity 0, and of its
    /// halo rows and columns in both parities (the grid's border keeps
    /// them; a neighbour's first values are the same numbers).
    fn fill(&self) {
        let (v, s, cols, lo) = (&self.view, self.shape.side, self.cols, self.lo());
        let (block, west, east) = super::initial_block(&self.shape, self.ctx.rank() as usize);
        for p in 0..2 {
            if p == 0 {
                v.copy_from_slice(
                    self.field(0) + (lo + 1) * cols,
                    &block[cols..(s + 1) * cols],
                );
            }
            if self.band == 0 {
                v.copy_from_slice(self.field(p), &block[..cols]);
            }
            if self.band + 1 == self.bands {
                v.copy_from_slice(
                    self.field(p) + (self.rows + 1) * cols,
                    &block[(s + 1) * cols..],
                );
            }
            v.copy_from_slice(self.west_in(p) + lo, &west);
            v.copy_from_slice(self.east_in(p) + lo, &east);
        }
    }

    fn id(&self, p: usize, kind: Kind, band: usize) -> u32 {
        ((p as u32 * KINDS + kind as u32) * self.bands as u32) + band as u32
    }

    /// Sweeps done so far.
    pub fn done(&self) -> usize {
        self.done
    }

    /// One sweep: wait for this band's inputs, compute, send what the
    /// neighbours need for the next sweep.
    pub fn step(&mut self) -> Result<(), Error> {
        let t = self.done;
        let (p, q) = (t % 2, (t + 1) % 2);
        if t > 0 {
            self.wait_inputs(p, t)?;
        }
        let (v, s, cols, lo) = (&self.view, self.shape.side, self.cols, self.lo());
        {
            let src = v.sub(self.field(p) + lo * cols..self.field(p) + (lo + s + 2) * cols);
            let west = v.sub(self.west_in(p) + lo..self.west_in(p) + lo + s);
            let east = v.sub(self.east_in(p) + lo..self.east_in(p) + lo + s);
            let out = v.sub(self.field(q) + (lo + 1) * cols..self.field(q) + (lo + 1 + s) * cols);
            // SAFETY: no one writes these bytes while the slices live. The
            // source (parity p: this band, its neighbours' edge rows, the halo
            // rows and received columns) was completed by the sweep t - 1 of
            // this band and of the bands and domains whose notifications
            // `wait_inputs` claimed; none of them writes parity p again before
            // it has this rank's news of sweep t, sent below after the slices
            // are gone. The output (this band's rows of parity q) is written by
            // this rank alone, and read by others only in sweep t + 1 (after
            // that news) and in sweep t - 1 (finished: claimed above). The
            // slices do not overlap: different parities.
            let (src, west, east, out) = unsafe {
                (
                    src.as_slice(),
                    west.as_slice(),
                    east.as_slice(),
                    out.as_mut_slice(),
                )
            };
            sweep(src, west, east, cols, out);
        }
        self.done += 1;
        self.send(q, t + 1)
    }

    /// Claim this band's notifications for parity `p` (sweep `t`'s input),
    /// each of which must say sweep `t - 1` was done.
    fn wait_inputs(&self, p: usize, t: usize) -> Result<(), Error> {
        let [north, south, west, east] = self.next.map(|n| n.is_some());
        let (first, last) = (self.band == 0, self.band + 1 == self.bands);
        let wanted = [
            (north && first, Kind::FromNorth),
            (south && last, Kind::FromSouth),
            (west, Kind::FromWest),
            (east, Kind::FromEast),
            (!first, Kind::BandAbove),
            (!last, Kind::BandBelow),
        ];
        for (_, kind) in wanted.into_iter().filter(|w| w.0) {
            let id = self.id(p, kind, self.band);
            let (_, value) = self.ctx.notify_claim(self.seg, id..id + 1, B)?;
            if value as usize != t {
                return Err(Error::InvalidArgument(format!(
                    "stencil: notification {id} says sweep {value}, expected {t}"
                )));
            }
        }
        Ok(())
    }

    /// After sweep `t - 1`: this band's edges of parity `q` to the
    /// neighbouring domains, and the news to the bands above and below.
    fn send(&self, q: usize, t: usize) -> Result<(), Error> {
        let (ctx, seg, v) = (self.ctx, self.seg, &self.view);
        let (s, cols, lo, rows) = (self.shape.side, self.cols, self.lo(), self.rows);
        let value = t as u32;
        let put = |from: usize, to: Rank, at: usize, len: usize, id: u32| {
            ctx.write_notify(
                Local::new(seg, from * F64),
                Remote::new(to, seg, at * F64),
                len * F64,
                Notification::new(id, value),
                self.queue,
                B,
            )
        };
        // The packed columns of two sweeps ago have left.
        ctx.wait(self.queue, B)?;
        let [north, south, west, east] = self.next;
        if let (Some(to), 0) = (north, self.band) {
            let id = self.id(q, Kind::FromSouth, self.bands - 1);
            put(
                self.field(q) + cols,
                to,
                self.field(q) + (rows + 1) * cols,
                cols,
                id,
            )?;
        }
        if let Some(to) = south.filter(|_| self.band + 1 == self.bands) {
            let id = self.id(q, Kind::FromNorth, 0);
            put(self.field(q) + rows * cols, to, self.field(q), cols, id)?;
        }
        // A column: packed from this band's first (west) or last (east)
        // column into its out slot, then into the neighbour's in slot.
        let columns = [
            (west, 0, self.west_out(q), self.east_in(q), Kind::FromEast),
            (
                east,
                cols - 1,
                self.east_out(q),
                self.west_in(q),
                Kind::FromWest,
            ),
        ];
        for (to, col, out, into, kind) in columns {
            let Some(to) = to else { continue };
            let (out, row) = (out + lo, |i: usize| {
                self.field(q) + (lo + 1 + i) * cols + col
            });
            (0..s).for_each(|i| v.set(out + i, v.get(row(i))));
            put(out, to, into + lo, s, self.id(q, kind, self.band))?;
        }
        let me = ctx.rank();
        let news = |kind: Kind, band: usize| {
            let n = Notification::new(self.id(q, kind, band), value);
            ctx.notify(me, seg, n, self.queue, B)
        };
        if self.band > 0 {
            news(Kind::BandBelow, self.band - 1)?;
        }
        if self.band + 1 < self.bands {
            news(Kind::BandAbove, self.band + 1)?;
        }
        Ok(())
    }

    /// This rank's block after the sweeps done (`side x side`, by rows).
    pub fn block(&self) -> Vec<f64> {
        let (s, cols, lo) = (self.shape.side, self.cols, self.lo());
        let at = self.field(self.done % 2) + (lo + 1) * cols;
        self.view.sub(at..at + s * cols).to_vec()
    }

    /// Collectively end: take the inputs of the sweep no one will run
    /// (their notifications say the data is here: a transport's `wait` and
    /// a barrier do not, and a write landing in a deleted segment is lost
    /// or, under GPI-2, a crash), wait until everyone is done, then delete
    /// the memory.
    pub fn close(self) -> Result<(), Error> {
        if self.done > 0 {
            self.wait_inputs(self.done % 2, self.done)?;
        }
        self.ctx.wait(self.queue, B)?;
        self.ctx.barrier(GroupId::ALL, B)?;
        drop(self.view);
        self.ctx.segment_delete(self.seg)
    }
}
