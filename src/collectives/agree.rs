//! The arguments that every rank must give a collective object alike
//! (counts, displacements, the element type, the layout options),
//! compared across ranks when the object is made: ranks that disagree
//! would otherwise write to offsets and notification ids the others do
//! not expect, and the calls would return wrong results, time out or
//! hang. MPI and GASPI leave such calls undefined; here every rank gets
//! the same [`Error::InvalidArgument`] instead, before anything is made.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{GroupId, Timeout};
use std::fmt::Debug;

/// A fingerprint (64-bit FNV-1a) of the arguments that must agree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape(u64);

impl Shape {
    /// The fingerprint of collective `what` (its name is part of it).
    pub(crate) fn new(what: &str) -> Shape {
        Shape(0xcbf2_9ce4_8422_2325).bytes(what.as_bytes())
    }

    fn bytes(mut self, bytes: &[u8]) -> Shape {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// The fingerprint.
    pub(crate) fn value(self) -> u64 {
        self.0
    }

    /// Add a number.
    pub(crate) fn number(self, v: usize) -> Shape {
        self.bytes(&(v as u64).to_le_bytes())
    }

    /// Add a list of numbers, its length included.
    pub(crate) fn numbers(self, vs: &[usize]) -> Shape {
        vs.iter().fold(self.number(vs.len()), |s, &v| s.number(v))
    }

    /// Add a value by its `Debug` form (option structs).
    pub(crate) fn debug(self, v: &impl Debug) -> Shape {
        self.bytes(format!("{v:?}").as_bytes())
    }

    /// Compare the fingerprints of all members of `group` before they
    /// make a collective object (an allreduce of one word over the
    /// group): `Ok` where every member has this one, the same
    /// [`Error::InvalidArgument`] on every member where any differs. The
    /// first step of a creation
    /// ([`Creation::agree`](super::creation::Creation::agree)): on a timeout, make
    /// the object again with the same arguments to go on.
    pub(crate) fn agree(
        self,
        ctx: &Context,
        group: GroupId,
        what: &str,
        timeout: Timeout,
    ) -> Result<()> {
        // Never 0, which stands for "they differ": an associative
        // reduction, so any order of the members gives the same answer,
        // of one word, which fits the smallest allreduce the
        // configuration allows.
        let mine = self.0 | 1;
        let mut all = [0u64];
        let same = |a: &u64, b: &u64| if a == b { *a } else { 0 };
        ctx.allreduce_user(&[mine], &mut all, same, group, timeout)?;
        if all[0] == mine {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "{what}: the ranks were given different arguments (counts, displacements, \
                 lengths, element type and options must be the same on every rank)"
            )))
        }
    }
}
