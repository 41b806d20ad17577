//! The two-dimensional five-point stencil of `gaspi-bench stencil`: a
//! Jacobi sweep `u' = (u_n + u_s + u_w + u_e) / 4` over a grid whose border
//! stays fixed, in three variants that compute the same numbers bit for
//! bit: flat MPI (`on_mpi.rs`), flat GASPI and node-shared GASPI
//! (`on_gaspi.rs`). This module holds what they share: how the grid is cut
//! ([`Shape`]), the initial values, the sweep of one row, and the
//! sequential reference every result is checked against.
//!
//! The cut is the same for all three, so that they do the same work: the
//! nodes form a `nodes_y x nodes_x` grid of node blocks, and each node
//! block is cut into one row band per rank of the node (`side x side`
//! points each). The flat variants give every rank its band as a block of
//! its own; the node-shared one keeps the whole node block in one node
//! window, where ranks read their neighbours' rows in place.

pub mod on_gaspi;
#[cfg(feature = "mpi")]
pub mod on_mpi;

/// How the grid is cut: `ranks` ranks, `ppn` per node, each rank a block
/// of `side x side` interior points, node blocks `nodes_y x nodes_x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub ranks: usize,
    pub ppn: usize,
    pub side: usize,
    pub nodes_x: usize,
    pub nodes_y: usize,
}

/// A neighbour direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    North,
    South,
    West,
    East,
}

impl Shape {
    /// The cut of a job of `ranks` ranks with `ppn` per node into blocks of
    /// `side x side` points: the node blocks in one column (`two_d` false,
    /// a 1-D cut into row bands) or in the grid of nodes that makes the
    /// rank grid squarest (`two_d`, [`gaspi::model::halo_node_columns`]). Every node must be full (the
    /// node-shared variant gives each node block `ppn` equal bands).
    pub fn new(ranks: usize, ppn: usize, side: usize, two_d: bool) -> Result<Shape, String> {
        if ranks == 0 || ppn == 0 || side == 0 {
            return Err("the stencil needs ranks, ranks per node and a side of at least 1".into());
        }
        if ranks % ppn != 0 {
            return Err(format!(
                "the stencil needs full nodes: {ranks} ranks are not a multiple of {ppn} per node"
            ));
        }
        let nodes = ranks / ppn;
        let nodes_x = if two_d {
            gaspi::model::halo_node_columns(nodes, ppn)
        } else {
            1
        };
        let shape = Shape {
            ranks,
            ppn,
            side,
            nodes_x,
            nodes_y: nodes / nodes_x,
        };
        // Every index below fits if the bytes of the grid with its border do.
        let rows = (nodes / nodes_x * ppn).checked_mul(side);
        let cols = nodes_x.checked_mul(side);
        rows.zip(cols)
            .and_then(|(r, c)| r.checked_add(2)?.checked_mul(c.checked_add(2)?))
            .and_then(|n| n.checked_mul(8))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| format!("a stencil grid of {ranks} blocks of {side}^2 is too large"))?;
        Ok(shape)
    }

    /// Interior rows of the whole grid.
    pub fn rows(&self) -> usize {
        self.nodes_y * self.ppn * self.side
    }

    /// Interior columns of the whole grid.
    pub fn cols(&self) -> usize {
        self.nodes_x * self.side
    }

    /// Node `node`'s place in the grid of nodes: (row, column).
    pub fn node_at(&self, node: usize) -> (usize, usize) {
        (node / self.nodes_x, node % self.nodes_x)
    }

    /// The node at (row, column) of the grid of nodes, if inside it.
    pub fn node_of(&self, row: isize, col: isize) -> Option<usize> {
        let inside =
            (0..self.nodes_y as isize).contains(&row) && (0..self.nodes_x as isize).contains(&col);
        inside.then(|| row as usize * self.nodes_x + col as usize)
    }

    /// The node next to `node` in direction `d`.
    pub fn node_next(&self, node: usize, d: Dir) -> Option<usize> {
        let (r, c) = self.node_at(node);
        let (r, c) = (r as isize, c as isize);
        match d {
            Dir::North => self.node_of(r - 1, c),
            Dir::South => self.node_of(r + 1, c),
            Dir::West => self.node_of(r, c - 1),
            Dir::East => self.node_of(r, c + 1),
        }
    }

    /// The rank next to `rank` in direction `d` (ranks of a node are its
    /// bands from north to south).
    pub fn rank_next(&self, rank: usize, d: Dir) -> Option<usize> {
        let (node, band) = (rank / self.ppn, rank % self.ppn);
        match d {
            Dir::North if band > 0 => Some(rank - 1),
            Dir::South if band + 1 < self.ppn => Some(rank + 1),
            Dir::North => self.node_next(node, d).map(|n| n * self.ppn + self.ppn - 1),
            Dir::South => self.node_next(node, d).map(|n| n * self.ppn),
            Dir::West | Dir::East => self.node_next(node, d).map(|n| n * self.ppn + band),
        }
    }

    /// The first interior row and column of `rank`'s block (from 0).
    pub fn origin(&self, rank: usize) -> (usize, usize) {
        let (node, band) = (rank / self.ppn, rank % self.ppn);
        let (r, c) = self.node_at(node);
        ((r * self.ppn + band) * self.side, c * self.side)
    }
}

/// The initial value at row `i`, column `j` of the grid with its border
/// (the border is row and column 0 and `rows + 1`, `cols + 1`; it keeps
/// these values).
pub fn initial(i: usize, j: usize) -> f64 {
    ((i.wrapping_mul(7_919) ^ j.wrapping_mul(104_729)) % 1_000) as f64 / 1_000.0
}

/// One point's new value from its four neighbours, in the one order every
/// variant uses (so that all agree bit for bit).
#[inline(always)]
pub fn update(north: f64, south: f64, west: f64, east: f64) -> f64 {
    0.25 * ((north + south) + (west + east))
}

/// New values of one row: `mid` is the row (interior points), `up` and
/// `down` the rows above and below, `west` and `east` the points left and
/// right of it; all rows as long as `out`.
pub fn sweep_row(up: &[f64], mid: &[f64], down: &[f64], west: f64, east: f64, out: &mut [f64]) {
    let c = out.len();
    assert!(up.len() == c && mid.len() == c && down.len() == c && c > 0);
    if c == 1 {
        out[0] = update(up[0], down[0], west, east);
        return;
    }
    out[0] = update(up[0], down[0], west, mid[1]);
    out[c - 1] = update(up[c - 1], down[c - 1], mid[c - 2], east);
    let inner = out[1..c - 1]
        .iter_mut()
        .zip(&up[1..c - 1])
        .zip(&down[1..c - 1])
        .zip(&mid[..c - 2])
        .zip(&mid[2..]);
    for ((((o, &n), &s), &w), &e) in inner {
        *o = update(n, s, w, e);
    }
}

/// New values of a block of rows: `src` holds the rows with one row above
/// and one below (`cols` points each), `west` and `east` the points left
/// and right of each row; `out` the block's rows.
pub fn sweep(src: &[f64], west: &[f64], east: &[f64], cols: usize, out: &mut [f64]) {
    let rows = out.len() / cols;
    assert!(src.len() == (rows + 2) * cols && west.len() == rows && east.len() == rows);
    for (r, o) in out.chunks_exact_mut(cols).enumerate() {
        let row = |k: usize| &src[k * cols..(k + 1) * cols];
        sweep_row(row(r), row(r + 1), row(r + 2), west[r], east[r], o);
    }
}

/// The exact values of the block of `rows x cols` points at interior row
/// `row0`, column `col0` after `iters` sweeps, computed sequentially. Only
/// the block's light cone is computed: after `k` sweeps a point depends on
/// the points within `k` of it, so a region `iters + 1` larger on each side
/// (cut at the grid's border) gives exact values inside.
pub fn reference(
    shape: &Shape,
    iters: usize,
    (row0, col0): (usize, usize),
    (rows, cols): (usize, usize),
) -> Vec<f64> {
    // The region in coordinates with the border (interior row i is i + 1).
    let lo = |x: usize| (x + 1).saturating_sub(iters + 1);
    let hi = |x: usize, n: usize, all: usize| (x + 1 + n + iters + 1).min(all + 2);
    let (ia, ib) = (lo(row0), hi(row0, rows, shape.rows()));
    let (ja, jb) = (lo(col0), hi(col0, cols, shape.cols()));
    let (h, w) = (ib - ia, jb - ja);
    let mut a: Vec<f64> = (ia..ib)
        .flat_map(|i| (ja..jb).map(move |j| initial(i, j)))
        .collect();
    let mut b = a.clone();
    for _ in 0..iters {
        for i in 1..h - 1 {
            for j in 1..w - 1 {
                b[i * w + j] = update(
                    a[(i - 1) * w + j],
                    a[(i + 1) * w + j],
                    a[i * w + j - 1],
                    a[i * w + j + 1],
                );
            }
        }
        std::mem::swap(&mut a, &mut b);
    }
    let (di, dj) = (row0 + 1 - ia, col0 + 1 - ja);
    (0..rows)
        .flat_map(|i| a[(di + i) * w + dj..(di + i) * w + dj + cols].to_vec())
        .collect()
}

/// The initial values of `rank`'s block with one row above and one below
/// (`(side + 2) x side`), and of the columns left and right of it.
pub fn initial_block(shape: &Shape, rank: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (r0, c0) = shape.origin(rank);
    let s = shape.side;
    let block = (r0..r0 + s + 2)
        .flat_map(|i| (c0 + 1..c0 + 1 + s).map(move |j| initial(i, j)))
        .collect();
    let west = (r0 + 1..r0 + 1 + s).map(|i| initial(i, c0)).collect();
    let east = (r0 + 1..r0 + 1 + s)
        .map(|i| initial(i, c0 + s + 1))
        .collect();
    (block, west, east)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts() {
        let s = Shape::new(8, 2, 4, true).unwrap();
        assert_eq!((s.nodes_y, s.nodes_x), (2, 2));
        assert_eq!((s.rows(), s.cols()), (16, 8));
        assert_eq!(s.origin(3), (4, 4));
        assert_eq!(s.rank_next(0, Dir::South), Some(1));
        assert_eq!(s.rank_next(1, Dir::South), Some(4));
        assert_eq!(s.rank_next(1, Dir::East), Some(3));
        assert_eq!(s.rank_next(3, Dir::East), None);
        assert_eq!(Shape::new(4, 1, 4, false).unwrap().nodes_x, 1);
        assert!(Shape::new(5, 2, 4, false).is_err());
        assert!(Shape::new(2, 1, usize::MAX / 4, true).is_err());
    }

    #[test]
    fn the_light_cone_is_exact() {
        let s = Shape::new(4, 2, 6, true).unwrap();
        let all = reference(&s, 5, (0, 0), (s.rows(), s.cols()));
        let part = reference(&s, 5, (6, 6), (6, 6));
        for i in 0..6 {
            for j in 0..6 {
                assert_eq!(
                    part[i * 6 + j].to_bits(),
                    all[(6 + i) * s.cols() + 6 + j].to_bits()
                );
            }
        }
    }
}
