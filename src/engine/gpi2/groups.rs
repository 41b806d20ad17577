//! Groups spanning hosts live in GPI-2: a twin of each of our groups (same
//! id), its commit (after its members told each other that they hold it,
//! see [`Twin`]), barrier, and an allreduce that keeps member order.

use super::codes::{check, ms, poll_yielding};
use super::intake::{notify_each, ready_id, take};
use super::twin::{Held, Twin, Twins};
use super::{Gpi2, Placement};
use crate::engine::transport::{Combine, Contribution, contributions_differ};
use crate::engine::wait::lock;
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, Timeout};
use gpi2_sys as sys;

impl Gpi2 {
    /// Make sure GPI-2 has a twin of our new group `id` (groups spanning
    /// hosts live in GPI-2): one kept from an earlier group of this id, or
    /// a new one. GPI-2 and we both hand out the lowest free id and kept
    /// twins sit on ids free on our side, so the ids stay equal; a
    /// mismatch is an error, never a silent mix-up.
    pub(crate) fn group_create(&self, id: u8) -> Result<()> {
        let mut t = lock(&self.twins);
        if t.twins.contains_key(&id) {
            return Ok(());
        }
        Self::twin_create(id)?;
        t.twins.insert(id, Twin::empty());
        Ok(())
    }

    /// `gaspi_group_create`, checked to give `id`.
    fn twin_create(id: u8) -> Result<()> {
        let mut g: sys::gaspi_group_t = 0;
        // SAFETY: out pointer to a local.
        let code = unsafe { sys::gaspi_group_create(&mut g) };
        check("gaspi_group_create", code, None)?;
        if g != id {
            // SAFETY: plain call on the group GPI-2 just created.
            unsafe { sys::gaspi_group_delete(g) };
            return Err(Error::Engine {
                call: "gaspi_group_create",
                code: sys::GASPI_ERR_INV_GROUP,
                name: "GPI-2 gave the group another id than ours",
            });
        }
        Ok(())
    }

    /// `gaspi_group_delete`.
    fn twin_delete(id: u8) {
        // SAFETY: plain call; an unknown group gives an error.
        let _ = unsafe { sys::gaspi_group_delete(id) };
    }

    /// Our group `id` was deleted: keep its twin if it may stay (see
    /// [`Twin`]), else delete it in GPI-2.
    pub(crate) fn group_delete(&self, id: u8) {
        let mut t = lock(&self.twins);
        if t.twins.get(&id).is_some_and(|t| !t.keepable()) {
            t.twins.remove(&id);
            Self::twin_delete(id);
        }
    }

    /// Prepare GPI-2's twin of group `id` for a commit with `members`:
    /// recorded here; the commit makes the new GPI-2 group (see [`Twin`]).
    pub(crate) fn group_prepare(&self, id: u8, members: &[Rank]) -> Result<()> {
        let mut t = lock(&self.twins);
        let twin = t
            .twins
            .get_mut(&id)
            .ok_or_else(|| no_twin("gaspi_group_add"))?;
        twin.prepare(members.to_vec());
        Ok(())
    }

    /// Delete GPI-2's group under `id` and make a new, empty one.
    fn twin_renew(twin: &mut Twin, id: u8) -> Result<()> {
        Self::twin_delete(id);
        twin.held = Held::Empty;
        Self::twin_create(id)
    }

    /// After the first handshake of a commit of `id`: delete an older
    /// GPI-2 group under it (no member of the commit writes into it any
    /// more) and make the new one with the commit's members. If adding
    /// fails, the group is left empty, so a retry adds every member again.
    fn twin_build(&self, id: u8) -> Result<()> {
        let mut t = lock(&self.twins);
        let twin = t
            .twins
            .get_mut(&id)
            .ok_or_else(|| no_twin("gaspi_group_add"))?;
        match twin.held {
            Held::Added | Held::Committed => return Ok(()),
            Held::Older => Self::twin_renew(twin, id)?,
            Held::Empty => {}
        }
        let added = twin.members.iter().try_for_each(|&m| {
            // SAFETY: plain call.
            check(
                "gaspi_group_add",
                unsafe { sys::gaspi_group_add(id, m) },
                Some(m),
            )
        });
        if let Err(e) = added {
            Self::twin_renew(twin, id)?;
            return Err(e);
        }
        twin.held = Held::Added;
        Ok(())
    }

    /// Commit GPI-2's twin of group `id` until `timeout` (call again after
    /// a timeout): once every other member said it reached this commit
    /// ([`Gpi2::handshake`]), make the new GPI-2 group; once every other
    /// member said it holds its new one too, `gaspi_group_commit`.
    pub(crate) fn group_commit(&self, id: u8, timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        self.handshake(id, 1, deadline)?;
        self.twin_build(id)?;
        self.handshake(id, 2, deadline)?;
        // SAFETY: plain call.
        let code = unsafe { sys::gaspi_group_commit(id, ms(deadline.timeout())) };
        check("gaspi_group_commit", code, None)?;
        if let Some(t) = lock(&self.twins).twins.get_mut(&id) {
            t.held = Held::Committed;
        }
        Ok(())
    }

    /// Handshake `n` (1 or 2) of the commit of `id` under way, unless it
    /// ended: tell the other members of the commit that this rank got this
    /// far (the first call for it), then wait until `deadline` until each
    /// of them told this rank the same ([`Pair`](super::twin::Pair)).
    fn handshake(&self, id: u8, n: u8, deadline: Deadline) -> Result<()> {
        let Placement {
            rank: me, nranks, ..
        } = self.placement;
        let group_max = self.group_max;
        let ready = |rank: Rank| ready_id(rank as usize, id, nranks, group_max);
        let tell = {
            let mut t = lock(&self.twins);
            let Twins { twins, pairs } = &mut *t;
            let twin = twins
                .get_mut(&id)
                .ok_or_else(|| no_twin("gaspi_group_commit"))?;
            if twin.handshakes >= n {
                return Ok(());
            }
            if twin.waiting.is_some() {
                Vec::new()
            } else {
                let others: Vec<Rank> = twin.members.iter().copied().filter(|&m| m != me).collect();
                twin.waiting = Some(others.clone());
                others
                    .into_iter()
                    .map(|p| (p, pairs.entry((id, p)).or_default().epoch.wrapping_add(1)))
                    .collect()
            }
        };
        if !tell.is_empty() {
            notify_each(tell, ready(me));
        }
        poll_yielding(deadline, || {
            let mut t = lock(&self.twins);
            let Twins { twins, pairs } = &mut *t;
            let twin = twins
                .get_mut(&id)
                .ok_or_else(|| no_twin("gaspi_group_commit"))?;
            let waiting = twin
                .waiting
                .as_mut()
                .ok_or_else(|| no_twin("gaspi_group_commit"))?;
            waiting.retain(|&peer| {
                let pair = pairs.entry((id, peer)).or_default();
                let mut behind = false;
                if let Some((_, said)) = take(ready(peer), 1) {
                    // A new word of the number this rank heard last: the
                    // peer gave that handshake up before it heard from us.
                    behind = said == pair.epoch;
                    pair.seen = pair.seen.max(said);
                }
                if behind {
                    return false;
                }
                let heard = pair.seen >= pair.epoch.wrapping_add(1);
                if heard {
                    pair.epoch = pair.epoch.wrapping_add(1);
                }
                !heard
            });
            if !waiting.is_empty() {
                return Ok(None);
            }
            twin.waiting = None;
            twin.handshakes = n;
            Ok(Some(()))
        })
    }

    /// Record whether the twin of `id` is between collectives.
    fn twin_settled(&self, id: u8, settled: bool) {
        if let Some(t) = lock(&self.twins).twins.get_mut(&id) {
            t.settled = settled;
        }
    }

    /// GPI-2's barrier over group `id` (call again after a timeout).
    pub(crate) fn barrier(&self, id: u8, timeout: Timeout) -> Result<()> {
        self.twin_settled(id, false);
        // SAFETY: plain call.
        let code = unsafe { sys::gaspi_barrier(id, ms(timeout)) };
        check("gaspi_barrier", code, None)?;
        self.twin_settled(id, true);
        Ok(())
    }

    /// Allreduce over GPI-2's group `id` that combines contributions in
    /// member order, so that every member gets the same bits and `combine`
    /// need not be commutative: `combine(lower, upper, out)` reduces two
    /// partial results of adjacent member ranges.
    ///
    /// GPI-2's `gaspi_allreduce_user` is recursive doubling (after pairing
    /// ranks `2i, 2i + 1` when the group size is not a power of two): each
    /// step combines two partial results of adjacent, aligned ranges of
    /// members, but passes them as (own, received), whichever is lower.
    /// Each contribution therefore travels as one element, a header of two
    /// words, the first member index it covers and its shape
    /// ([`Contribution::shape`]; 0 once two differed), then the data: the
    /// callback puts the lower range first and combines only equal
    /// shapes. Contributions of different lengths are elements of
    /// different sizes, which GPI-2 writes at the same places of its
    /// buffers (set by the step and `allreduce_elem_max`, not the size),
    /// so the headers are read right. `send` and `recv` have the same
    /// length, at most what GPI-2 was configured for (`allreduce_elem_max`,
    /// set at start).
    pub(crate) fn allreduce_ordered(
        &self,
        id: u8,
        contribution: Contribution<'_>,
        recv: &mut [u8],
        combine: &mut Combine<'_>,
        timeout: Timeout,
    ) -> Result<()> {
        const HEADER: usize = 16;
        let Contribution { index, shape, send } = contribution;
        let len = send.len();
        let mut mine = vec![0u8; HEADER + len];
        mine[..8].copy_from_slice(&(index as u64).to_ne_bytes());
        mine[8..HEADER].copy_from_slice(&shape.to_ne_bytes());
        mine[HEADER..].copy_from_slice(send);
        let mut out = vec![0u8; HEADER + len];
        self.twin_settled(id, false);
        struct Reduction<'a> {
            combine: &'a mut Combine<'a>,
            len: usize,
            panic: Option<Box<dyn std::any::Any + Send>>,
        }
        unsafe extern "C" fn op(
            one: sys::gaspi_pointer_t,
            two: sys::gaspi_pointer_t,
            res: sys::gaspi_pointer_t,
            state: sys::gaspi_reduce_state_t,
            _num: sys::gaspi_number_t,
            _size: sys::gaspi_size_t,
            _timeout: sys::gaspi_timeout_t,
        ) -> sys::gaspi_return_t {
            // SAFETY: `state` is the `Reduction` passed to gaspi_allreduce_user
            // below, alive and not otherwise borrowed during the call; GPI-2
            // passes three distinct buffers of one element (HEADER + len
            // bytes) each.
            let (st, one, two, res) = unsafe {
                let st = &mut *(state as *mut Reduction<'_>);
                let n = HEADER + st.len;
                (
                    st,
                    std::slice::from_raw_parts(one as *const u8, n),
                    std::slice::from_raw_parts(two as *const u8, n),
                    std::slice::from_raw_parts_mut(res as *mut u8, n),
                )
            };
            let first = |b: &[u8]| u64::from_ne_bytes(b[..8].try_into().expect("8 bytes"));
            let (lo, hi) = if first(one) <= first(two) {
                (one, two)
            } else {
                (two, one)
            };
            res[..HEADER].copy_from_slice(&lo[..HEADER]);
            if lo[8..HEADER] != hi[8..HEADER] {
                res[8..HEADER].fill(0);
                return sys::GASPI_SUCCESS;
            }
            let (lo, hi, out) = (&lo[HEADER..], &hi[HEADER..], &mut res[HEADER..]);
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (st.combine)(lo, hi, out)
            })) {
                Ok(()) => sys::GASPI_SUCCESS,
                Err(p) => {
                    st.panic = Some(p);
                    sys::GASPI_ERROR
                }
            }
        }
        let mut state = Reduction {
            combine,
            len,
            panic: None,
        };
        // SAFETY: one element of HEADER + len bytes in `mine` and `out`,
        // which outlive the call; `state` is what `op` expects.
        let code = unsafe {
            sys::gaspi_allreduce_user(
                mine.as_mut_ptr().cast(),
                out.as_mut_ptr().cast(),
                1,
                (HEADER + len) as u64,
                Some(op),
                (&mut state as *mut Reduction<'_>).cast(),
                id,
                ms(timeout),
            )
        };
        if let Some(p) = state.panic.take() {
            std::panic::resume_unwind(p);
        }
        check("gaspi_allreduce_user", code, None)?;
        self.twin_settled(id, true);
        if out[8..HEADER] != shape.to_ne_bytes() {
            return Err(contributions_differ());
        }
        crate::engine::memcopy::copy_slice(recv, &out[HEADER..]);
        Ok(())
    }
}

/// The error when GPI-2 has no twin of a group we prepare or commit
/// (`call`: what we were about to call).
fn no_twin(call: &'static str) -> Error {
    Error::Engine {
        call,
        code: sys::GASPI_ERR_INV_GROUP,
        name: "GPI-2 has no twin of this group",
    }
}
