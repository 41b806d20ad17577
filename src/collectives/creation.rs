//! The creation of a collective object (and of an RMA window) as a
//! sequence of collective steps, resumable after a timeout like any
//! collective call.
//!
//! Making an object takes several collective steps: the comparison of the
//! arguments ([`Shape::agree`]), the number
//! of its keyed messages (an allreduce), the node window (barriers), and
//! steps of its own on the window (a node barrier, a probe). Each can time
//! out while others go on. Called again with the same arguments, the
//! creation goes on with the step that timed out: the steps completed
//! give what they gave the first time (recorded in the context,
//! [`ObjectStage`]), the window made is taken as it is, and the step that
//! timed out, itself a collective call that resumes, is called again.
//! Without this, the second call would run a completed step again: a new
//! allreduce the other ranks never join, or a window made twice
//! ([`Error::SegmentExists`]).
//!
//! A creation given up after a timeout is deleted like any segment
//! ([`Context::segment_delete`](crate::Context::segment_delete) of the
//! object's segment forgets the record). A step that fails otherwise
//! (a rank failed, arguments that differ) deletes the window this rank
//! made, so that nothing is left behind.

use super::ReduceOp;
use super::agree::Shape;
use crate::context::Context;
use crate::context::groups::ObjectStage;
use crate::error::{Error, Result};
use crate::types::{Deadline, GroupId, SegmentId, Timeout};
use crate::windows::Window;

/// A creation in progress: its steps so far, its deadline.
pub(crate) struct Creation<'c> {
    ctx: &'c Context,
    stage: ObjectStage,
    /// The next step's index.
    at: usize,
    deadline: Deadline,
}

impl<'c> Creation<'c> {
    /// Begin (or resume, after a timeout) making a `kind` object on
    /// `segment` over `group`, within `timeout` for all its steps.
    pub(crate) fn begin(
        ctx: &'c Context,
        segment: SegmentId,
        group: GroupId,
        kind: &'static str,
        timeout: Timeout,
    ) -> Creation<'c> {
        let stage = ctx
            .groups
            .take_pending_object(segment, group, kind)
            .unwrap_or(ObjectStage {
                segment,
                group,
                kind,
                steps: Vec::new(),
                window_made: false,
            });
        Creation {
            ctx,
            stage,
            at: 0,
            deadline: timeout.deadline(),
        }
    }

    /// What is left of the creation's time.
    pub(crate) fn timeout(&self) -> Timeout {
        self.deadline.timeout()
    }

    /// Run collective step `f` with what is left of the time, unless an
    /// earlier call completed it: then what it gave then. A step gives a
    /// few words (the agreed numbers; nothing for a comparison).
    pub(crate) fn step(&mut self, f: impl FnOnce(Timeout) -> Result<Vec<u64>>) -> Result<Vec<u64>> {
        let at = self.at;
        self.at += 1;
        if let Some(words) = self.stage.steps.get(at) {
            return Ok(words.clone());
        }
        let words = f(self.timeout()).map_err(|e| self.failed(e))?;
        self.stage.steps.push(words.clone());
        Ok(words)
    }

    /// The first step: compare `shape`, the arguments that must agree,
    /// across the group ([`Shape::agree`]; `what` names the object in the
    /// error).
    pub(crate) fn agree(&mut self, shape: Shape, what: &str) -> Result<()> {
        let (ctx, group) = (self.ctx, self.stage.group);
        self.step(|t| shape.agree(ctx, group, what, t).map(|()| Vec::new()))
            .map(drop)
    }

    /// Agree on the number of a collective object with keyed messages
    /// ([`Transport::keyed_send`](crate::engine::transport::Transport::keyed_send)),
    /// made by every rank: the largest of the ranks' proposals
    /// ([`next_keyed_id`](super::next_keyed_id)), so that no two objects of
    /// the job share one. `more` are further words the ranks agree on by
    /// their maximum in the same allreduce over all ranks
    /// ([`Creation::agree_max`]).
    pub(crate) fn keyed_object_id(&mut self, more: &mut [u64]) -> Result<u64> {
        let mut words = vec![super::next_keyed_id()];
        words.extend_from_slice(more);
        self.agree_max(&mut words)?;
        super::keyed_id_taken(words[0]);
        more.copy_from_slice(&words[1..]);
        Ok(words[0])
    }

    /// Agree on `words` by their maximum over all ranks (written over with
    /// the agreed values): in one allreduce where the configuration
    /// allows as many elements (the default's 255 do), else in as few as
    /// it takes, each a step of its own, so that a call after a timeout
    /// resumes the allreduce that timed out.
    pub(crate) fn agree_max(&mut self, words: &mut [u64]) -> Result<()> {
        let ctx = self.ctx;
        if ctx.num_ranks() < 2 {
            return Ok(());
        }
        let per = (ctx.config.allreduce_elem_max as usize).max(1);
        for piece in words.chunks_mut(per) {
            let agreed = self.step(|t| {
                let mut all = vec![0u64; piece.len()];
                ctx.allreduce(piece, &mut all, ReduceOp::Max, GroupId::ALL, t)?;
                Ok(all)
            })?;
            piece.copy_from_slice(&agreed);
        }
        Ok(())
    }

    /// The step that makes the object's window by `f`; once made (also by
    /// an earlier call), the window of the segment.
    pub(crate) fn window(&mut self, f: impl FnOnce(Timeout) -> Result<Window>) -> Result<Window> {
        let mut made = None;
        self.step(|t| {
            made = Some(f(t)?);
            Ok(Vec::new())
        })?;
        self.stage.window_made = true;
        match made {
            Some(w) => Ok(w),
            None => self
                .ctx
                .window(self.stage.segment)
                .map_err(|e| self.failed(e)),
        }
    }

    /// `r`, the result of a last step of the object's own on its window
    /// (a node barrier, a probe): one that resumes by itself when run
    /// again, so it runs in every call and records nothing. An error fails
    /// the creation as a step's does.
    pub(crate) fn last<T>(&self, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.failed(e))
    }

    /// A step failed with `e`: after a timeout, record the steps
    /// completed for the next call; otherwise delete the window made.
    fn failed(&self, e: Error) -> Error {
        if e.is_timeout() {
            self.ctx.groups.set_pending_object(self.stage.clone());
        } else if self.stage.window_made {
            let _ = self.ctx.segment_delete(self.stage.segment);
        }
        e
    }
}
