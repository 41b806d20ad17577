//! The stencil as a flat-MPI code is written before it is ported: every
//! rank owns its block with a halo, and before each sweep it exchanges
//! edges with its four neighbours by `MPI_Irecv` / `MPI_Isend` (columns
//! packed) and `MPI_Waitall`. Same cut, same sweep, same numbers as the
//! GASPI variants (`on_gaspi.rs`).

use super::{Dir, Shape, sweep};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// One rank's part of the flat-MPI stencil.
pub struct MpiStencil<'a> {
    world: &'a SimpleCommunicator,
    shape: Shape,
    /// Per parity: the block with a halo row above and below.
    field: [Vec<f64>; 2],
    /// The columns left and right of the block (received, or the border).
    west_in: Vec<f64>,
    east_in: Vec<f64>,
    /// The block's first and last columns, packed for sending.
    west_out: Vec<f64>,
    east_out: Vec<f64>,
    /// North, south, west, east.
    next: [Option<i32>; 4],
    done: usize,
}

impl<'a> MpiStencil<'a> {
    /// This rank's part, with the initial values.
    pub fn new(world: &'a SimpleCommunicator, shape: Shape) -> MpiStencil<'a> {
        let me = world.rank() as usize;
        let (block, west, east) = super::initial_block(&shape, me);
        let s = shape.side;
        MpiStencil {
            world,
            shape,
            field: [block.clone(), block],
            west_in: west,
            east_in: east,
            west_out: vec![0.0; s],
            east_out: vec![0.0; s],
            next: [Dir::North, Dir::South, Dir::West, Dir::East]
                .map(|d| shape.rank_next(me, d).map(|r| r as i32)),
            done: 0,
        }
    }

    /// One sweep: exchange the halo of the current values, then compute.
    pub fn step(&mut self) {
        let (s, p) = (self.shape.side, self.done % 2);
        let [north, south, west, east] = self.next;
        let (cur, nxt) = match &mut self.field {
            [a, b] if p == 0 => (a, b),
            [a, b] => (b, a),
        };
        for i in 0..s {
            self.west_out[i] = cur[(i + 1) * s];
            self.east_out[i] = cur[(i + 2) * s - 1];
        }
        let (top, rest) = cur.split_at_mut(s);
        let (mid, bottom) = rest.split_at_mut(s * s);
        // Tags name the direction a message travels.
        let (to_n, to_s, to_w, to_e) = (0, 1, 2, 3);
        let world = self.world;
        mpi::request::multiple_scope(8, |scope, coll| {
            let at = |r: i32| world.process_at_rank(r);
            if let Some(r) = north {
                coll.add(at(r).immediate_receive_into_with_tag(scope, &mut top[..], to_s));
                coll.add(at(r).immediate_send_with_tag(scope, &mid[..s], to_n));
            }
            if let Some(r) = south {
                coll.add(at(r).immediate_receive_into_with_tag(scope, &mut bottom[..], to_n));
                coll.add(at(r).immediate_send_with_tag(scope, &mid[(s - 1) * s..], to_s));
            }
            if let Some(r) = west {
                coll.add(at(r).immediate_receive_into_with_tag(scope, &mut self.west_in[..], to_e));
                coll.add(at(r).immediate_send_with_tag(scope, &self.west_out[..], to_w));
            }
            if let Some(r) = east {
                coll.add(at(r).immediate_receive_into_with_tag(scope, &mut self.east_in[..], to_w));
                coll.add(at(r).immediate_send_with_tag(scope, &self.east_out[..], to_e));
            }
            coll.wait_all(&mut Vec::new());
        });
        sweep(
            cur,
            &self.west_in,
            &self.east_in,
            s,
            &mut nxt[s..(s + 1) * s],
        );
        self.done += 1;
    }

    /// Sweeps done so far.
    pub fn done(&self) -> usize {
        self.done
    }

    /// This rank's block after the sweeps done (`side x side`, by rows).
    pub fn block(&self) -> Vec<f64> {
        let s = self.shape.side;
        self.field[self.done % 2][s..(s + 1) * s].to_vec()
    }
}
