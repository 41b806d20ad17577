//! What a caller reads between calls: the plan, whether calls copy once,
//! the result in the node's window ([`Alltoallv::received`]), the counts
//! received, and where to write the next call's pieces in the window
//! ([`Alltoallv::outgoing`]).

use super::state::Alltoallv;
use crate::collectives::alltoallv_plan::AlltoallvPlan;
use crate::error::{Error, Result};
use crate::segments::SegmentView;
use crate::types::{Rank, SegmentId};
use bytemuck::Pod;

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// The plan of every call (fixed counts), or of the last call (sizes
    /// unknown in advance; `None` before the first).
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let a = Alltoallv::<u8>::new(&ctx, 0, &vec![1; n * n], Timeout::Block)?;
    /// let p = a.plan().unwrap();
    /// // One message per node pair instead of one per rank pair.
    /// assert!(p.inter_node_messages() <= p.flat_inter_node_messages());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn plan(&self) -> Option<&AlltoallvPlan> {
        self.plan.as_ref()
    }

    /// Whether every rank of this node can read the others' memory, so
    /// that [`Alltoallv::run_into`] copies large pieces between them once
    /// (see
    /// [`AlltoallvOptions::single_copy_min`](crate::AlltoallvOptions::single_copy_min));
    /// decided when the alltoallv was made, the same on every rank of the node.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let off = AlltoallvOptions { single_copy_min: Some(usize::MAX), ..Default::default() };
    /// let a = Alltoallv::<u8>::alltoall(&ctx, 0, 1, off, Timeout::Block)?;
    /// assert!(!a.single_copy());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn single_copy(&self) -> bool {
        self.once_min != usize::MAX
    }

    /// How many copies of the data area the calls use in turn (see
    /// [`AlltoallvOptions::copies`](crate::AlltoallvOptions::copies)),
    /// the same on every rank: all of them, or, by the rule where ranks
    /// share cores, all or the first two as the calls measure faster.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// // A few bytes per call: two copies.
    /// let a = Alltoallv::<u8>::alltoall(&ctx, 0, 1, Default::default(), Timeout::Block)?;
    /// assert_eq!(a.copies(), 2);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn copies(&self) -> usize {
        self.copies
    }

    /// The segment id of the node windows.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let a = Alltoallv::<u8>::alltoall(&ctx, 7, 1, Default::default(), Timeout::Block)?;
    /// assert_eq!(a.segment(), 7);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment(&self) -> SegmentId {
        self.segment
    }

    /// What `source` sent this rank in the last call, in place in the
    /// node's window (valid until this rank calls again).
    /// [`Error::InvalidRank`] for a rank that does not exist;
    /// [`Error::InvalidArgument`] after a [`Alltoallv::run_into`] whose
    /// piece from `source` went straight into the caller's buffer: this
    /// rank's own piece always, large pieces from the ranks of its node
    /// and from ranks of other nodes where they went in one copy (see
    /// [`AlltoallvOptions::single_copy_min`](crate::AlltoallvOptions::single_copy_min)).
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 0, 1, Default::default(), Timeout::Block)?;
    /// let send: Vec<u64> = (0..n as u64).map(|t| 100 * ctx.rank() as u64 + t).collect();
    /// a.run(&send, &vec![1; n], Timeout::Block)?;
    /// assert_eq!(a.received(0)?.get(0), ctx.rank() as u64);
    /// assert!(a.received(n as u16).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn received(&self, source: Rank) -> Result<SegmentView<T>> {
        self.ctx.engine.check_rank(source)?;
        let me = self.ctx.rank() as usize;
        let view = self.window.view::<T>();
        Ok(match &self.plan {
            Some(_)
                if self
                    .pulled_from
                    .get(source as usize)
                    .copied()
                    .unwrap_or(false) =>
            {
                return Err(Error::InvalidArgument(format!(
                    "rank {source}'s piece went straight into the buffer of the last \
                     run_into (single copy), not through the window"
                )));
            }
            Some(p) => {
                let at = self.recv_place(p, self.last, source as usize, me);
                view.sub(at..at + p.count(source as usize, me))
            }
            None => view.sub(0..0),
        })
    }

    /// How many elements this rank received from each rank in the last
    /// call (all zero before the first call with unknown sizes).
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let a = Alltoallv::<u8>::alltoall(&ctx, 0, 3, Default::default(), Timeout::Block)?;
    /// assert_eq!(a.recv_counts(), vec![3; n]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn recv_counts(&self) -> Vec<usize> {
        let (n, me) = (self.ctx.num_ranks() as usize, self.ctx.rank() as usize);
        match &self.plan {
            Some(p) => (0..n).map(|s| p.count(s, me)).collect(),
            None => vec![0; n],
        }
    }

    /// Where this rank's piece for `target` of its next call lies in the
    /// node's window, to be written there by the caller and sent by
    /// [`Alltoallv::run_in_window`], which copies nothing in: a piece for
    /// another node's rank lies at its place in the node's staging area, a
    /// piece for a rank of this node (this rank included) at its place in
    /// the receive area, where its receiver finds it
    /// ([`Alltoallv::received`]).
    ///
    /// The places turn through the window's [`Alltoallv::copies`] copies
    /// with the call number (call `k` uses copy `k % copies`; this rank's
    /// piece for itself through the first two, copy `k % 2`), and each is
    /// this rank's alone: what is written for one call stays for the call
    /// `copies` calls later (unless a call in between wrote that place:
    /// one of [`Alltoallv::run`] or [`Alltoallv::run_into`], which copy
    /// their send buffers there, or for the piece for itself any call of
    /// the same parity), so that a piece that does not change is written
    /// once per copy (with two copies,
    /// [`AlltoallvOptions::copies`](crate::AlltoallvOptions::copies), once
    /// per parity of the call). Where the copies are left to their rule
    /// (`copies: None`) and ranks share cores, the calls turn through all
    /// copies or the first two as they measure faster (call `k` then uses
    /// copy `k % copies` or `k % 2`), so a place may hold what an older
    /// call wrote: write every piece for every call there, or set
    /// `copies`.
    /// Valid from when the previous call has returned (before the first,
    /// at once) until the next call starts. Fixed counts only: with sizes
    /// unknown in advance the places are known only inside a call
    /// ([`Error::InvalidArgument`]); [`Error::InvalidArgument`] too while
    /// a call that timed out is unfinished, and [`Error::InvalidRank`] for
    /// a rank that does not exist.
    ///
    /// ```
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u64);
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 0, 2, Default::default(), Timeout::Block)?;
    /// for t in 0..n as u16 {
    ///     // Rank `me`'s two elements for rank t, made in place.
    ///     a.outgoing(t)?.copy_from_slice(0, &[me, t as u64]);
    /// }
    /// a.run_in_window(Timeout::Block)?;
    /// assert_eq!(a.received(0)?.to_vec(), [0, me]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn outgoing(&self, target: Rank) -> Result<SegmentView<T>> {
        self.ctx.engine.check_rank(target)?;
        let (p, me) = (self.window_plan()?, self.ctx.rank() as usize);
        let t = target as usize;
        let at = match p.stage_at(me, t) {
            Some(staged) => self.area(self.ctx.node(), self.calls) + staged,
            None => self.recv_place(p, self.calls, me, t),
        };
        Ok(self.window.view::<T>().sub(at..at + p.count(me, t)))
    }

    /// The plan of a call whose pieces the caller writes into the window:
    /// fixed counts, no call unfinished.
    fn window_plan(&self) -> Result<&AlltoallvPlan> {
        if self.phase.is_some() {
            return Err(Error::InvalidArgument(
                "a call of this alltoallv timed out and is unfinished: call it again first".into(),
            ));
        }
        self.window_plan_for_call()
    }
}
