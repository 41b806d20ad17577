//! Passive-target synchronisation (Hatanaka et al. 2015): `MPI_Win_lock`,
//! `MPI_Win_unlock`, `MPI_Win_lock_all`, `MPI_Win_unlock_all` and the
//! flushes, over the window's atomics.
//!
//! # Designs ([`LockDesign`])
//! - [`LockDesign::McsRw`], the paper's: one global MCS readers-writer
//!   queue lock with reader preference per window (MCS-RW-RP,
//!   Mellor-Crummey & Scott 1991), held by the window's first member.
//!   `lock(Shared)` and `lock_all` are `ReaderLock` (one `fetch_add` when
//!   no writer is active), `lock(Exclusive)` is `WriterLock`. Exclusive
//!   locks on different targets serialise on the one writer queue.
//! - [`LockDesign::TwoLevel`], foMPI's: a global word counting `lock_all`
//!   holders and exclusive holders (the two classes exclude each other; a
//!   rank that finds the other class backs off and waits for it to drain),
//!   plus one MCS-RW-RP lock per target, so exclusive locks on different
//!   targets proceed in parallel. `lock(Shared)` takes only the target's
//!   lock, `lock(Exclusive)` the global word then the target's lock,
//!   `lock_all` only the global word.
//!
//! # The MCS-RW-RP protocol
//! In `mcs.rs` (`QueueLock`), over this window's words: a waiter waits on
//! its own queue node only, spinning briefly, then yielding, then sleeping
//! on its node's futex word, which every hand-off wakes. Exactly one
//! hand-off unblocks each queued waiter, which is what makes a lock
//! request that timed out resumable: calling `lock` again with the same
//! arguments goes on waiting.
//!
//! # Completion
//! Operations on a target of this node are complete when they return.
//! Those to another node go through the window's queue: `flush*` and
//! `unlock*` wait for it, which on this engine completes them at the
//! target as well.

use super::gate::{Class, Gate};
use super::mcs::{Acquired, QueueLock};
use super::rma::{RmaElem, RmaWindow};
use super::window::{
    Assert, GLOBAL_LINE, GLOBAL_WORD, Held, LOCAL_LINE, LockDesign, LockRequest, LockStep,
    LockType, Mcs, QNODE_LINE, WindowState,
};
use super::words::{Word, Words};
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank, Timeout};
use std::sync::atomic::Ordering::SeqCst;

impl<T: RmaElem> RmaWindow<'_, T> {
    /// `MPI_Win_lock(kind, target, assert)`: start a passive-target access
    /// epoch on `target`. Waits (up to `timeout`) until the lock is granted;
    /// after an error the request stays queued (an MCS queue cannot be
    /// left): call `lock` again with the same arguments to keep waiting.
    /// `Assert::NOCHECK` skips the protocol (the caller guarantees no
    /// conflicting lock exists).
    ///
    /// ```
    /// use gaspi::{Assert, Config, Context, GroupId, LockType, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 6, 4, GroupId::ALL, Timeout::Block)?;
    /// win.lock(LockType::Exclusive, 0, Assert::NONE, Timeout::Block)?;
    /// let old = win.fetch_and_op(1, 0, 0, gaspi::AccumulateOp::Sum)?;
    /// win.unlock(0)?;
    /// assert!(old < ctx.num_ranks() as u64);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn lock(
        &self,
        kind: LockType,
        target: Rank,
        assert: Assert,
        timeout: Timeout,
    ) -> Result<()> {
        self.member_index(target)?;
        self.request(
            LockRequest {
                kind,
                target: Some(target),
            },
            assert,
            timeout,
        )
    }

    /// `MPI_Win_lock_all(assert)`: a shared lock on every member.
    ///
    /// ```
    /// use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 7, 4, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// let mut v = [0u32];
    /// win.get(&mut v, (ctx.rank() + 1) % ctx.num_ranks(), 0)?;
    /// win.unlock_all()?;
    /// assert_eq!(v[0], 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn lock_all(&self, assert: Assert, timeout: Timeout) -> Result<()> {
        self.request(
            LockRequest {
                kind: LockType::Shared,
                target: None,
            },
            assert,
            timeout,
        )
    }

    /// `MPI_Win_unlock(target)`: complete every operation to `target` at
    /// origin and target, then release the lock.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, LockType, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.lock(LockType::Exclusive, ctx.rank(), Assert::NONE, Timeout::Block)?;
    /// win.put(&[3], ctx.rank(), 0)?;
    /// win.unlock(ctx.rank())?; // the put is complete at the target
    /// assert_eq!(win.local().get(0), 3);
    /// assert!(win.unlock(ctx.rank()).is_err()); // not locked any more
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn unlock(&self, target: Rank) -> Result<()> {
        let index = self.member_index(target)?;
        let mut st = self.state()?;
        let held = st.passive.held[index].ok_or_else(|| {
            Error::RmaSync(format!(
                "unlock of rank {target}, which this rank has not locked"
            ))
        })?;
        self.complete(&mut st, Some(target))?;
        if !held.nocheck {
            self.release(
                &mut st,
                LockRequest {
                    kind: held.kind,
                    target: Some(target),
                },
            )?;
        }
        st.passive.held[index] = None;
        Ok(())
    }

    /// `MPI_Win_unlock_all()`: complete every operation, then release the
    /// `lock_all`.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// win.accumulate(&[1], 0, 0, gaspi::AccumulateOp::Sum)?;
    /// win.unlock_all()?; // complete everywhere
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn unlock_all(&self) -> Result<()> {
        let mut st = self.state()?;
        let held = st
            .passive
            .all
            .ok_or_else(|| Error::RmaSync("unlock_all without lock_all".into()))?;
        self.complete(&mut st, None)?;
        if !held.nocheck {
            self.release(
                &mut st,
                LockRequest {
                    kind: LockType::Shared,
                    target: None,
                },
            )?;
        }
        st.passive.all = None;
        Ok(())
    }

    /// `MPI_Win_flush(target)`: every operation this rank issued to
    /// `target` is complete at origin and target.
    ///
    /// ```
    /// use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 8, 2, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// win.accumulate(&[1], 0, 0, gaspi::AccumulateOp::Sum)?;
    /// win.flush(0)?;
    /// win.unlock_all()?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn flush(&self, target: Rank) -> Result<()> {
        let index = self.member_index(target)?;
        let mut st = self.state()?;
        if !st.passive.grants(index) {
            return Err(Error::RmaSync(format!(
                "flush of rank {target}, which this rank has not locked"
            )));
        }
        self.complete(&mut st, Some(target))
    }

    /// `MPI_Win_flush_all()`: every operation this rank issued is complete
    /// at origin and target.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// for r in 0..ctx.num_ranks() {
    ///     win.accumulate(&[1], r, 0, gaspi::AccumulateOp::Sum)?;
    /// }
    /// win.flush_all()?; // every accumulate is complete, the epoch goes on
    /// win.unlock_all()?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn flush_all(&self) -> Result<()> {
        let mut st = self.state()?;
        if !st.passive.active() {
            return Err(Error::RmaSync(
                "flush_all outside a passive-target epoch".into(),
            ));
        }
        self.complete(&mut st, None)
    }

    /// `MPI_Win_flush_local(target)`: the origin buffers of operations to
    /// `target` may be reused. Every call here copies its origin data
    /// before returning, so this checks the epoch and has nothing to wait
    /// for beyond what [`RmaWindow::flush`] does.
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 0, 4, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// let mut buf = vec![1u64; 4];
    /// win.put(&buf, 0, 0)?;
    /// win.flush_local(0)?;
    /// buf.fill(2); // the origin buffer may be reused
    /// win.unlock_all()?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn flush_local(&self, target: Rank) -> Result<()> {
        self.flush(target)
    }

    /// `MPI_Win_flush_local_all()`: see [`RmaWindow::flush_local`].
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// win.put(&[1], 0, 0)?;
    /// win.flush_local_all()?;
    /// win.unlock_all()?;
    /// assert!(win.flush_local_all().is_err()); // outside an epoch
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn flush_local_all(&self) -> Result<()> {
        self.flush_all()
    }

    /// `MPI_Win_sync()`: order this rank's local loads and stores to the
    /// window with the accesses of other ranks (a full memory fence).
    ///
    /// ```
    /// # use gaspi::{Assert, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// win.lock_all(Assert::NONE, Timeout::Block)?;
    /// win.local().set(0, 5); // a local store ...
    /// win.sync(); // ... ordered before what others do next
    /// win.unlock_all()?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn sync(&self) {
        std::sync::atomic::fence(SeqCst);
    }

    /// The index of `target` among the members, or a clear error.
    pub(super) fn member_index(&self, target: Rank) -> Result<usize> {
        self.ctx.engine.check_rank(target)?;
        self.members.binary_search(&target).map_err(|_| {
            Error::InvalidArgument(format!(
                "rank {target} is not a member of the window's group {}",
                self.group.0
            ))
        })
    }

    /// Complete operations to `target` (`None`: to every rank).
    fn complete(&self, st: &mut WindowState<T>, target: Option<Rank>) -> Result<()> {
        if target.is_none_or(|t| !self.on_my_node(t)) {
            self.completed(st)?;
        }
        Ok(())
    }

    fn request(&self, req: LockRequest, assert: Assert, timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        let mut st = self.state()?;
        let step = match st.passive.pending {
            Some((p, step)) if p == req => step,
            Some((p, _)) => {
                return Err(Error::RmaSync(format!(
                    "an earlier lock request ({:?} on {}) is still queued: call it again \
                     to finish it first",
                    p.kind,
                    p.target.map_or("all".to_string(), |t| format!("rank {t}"))
                )));
            }
            None => {
                self.check_lockable(&st, req)?;
                if assert.contains(Assert::NOCHECK) {
                    self.record(&mut st, req, true);
                    return Ok(());
                }
                LockStep::Start
            }
        };
        st.passive.pending = Some((req, step));
        self.advance(&mut st, req, step, deadline)
    }

    /// MPI's rules: no lock inside a fence epoch with operations, none on a
    /// target already locked, `lock_all` alone.
    fn check_lockable(&self, st: &WindowState<T>, req: LockRequest) -> Result<()> {
        if st.fence_used() {
            return Err(Error::RmaSync(
                "lock inside a fence epoch with operations: close it with a fence first".into(),
            ));
        }
        let p = &st.passive;
        let what = match req.target {
            None if p.active() => Some("lock_all while this rank holds locks".to_string()),
            Some(_) if p.all.is_some() => Some("lock while this rank holds lock_all".to_string()),
            Some(t) if p.held[self.member_index(t)?].is_some() => Some(format!(
                "lock of rank {t}, which this rank has locked already"
            )),
            _ => None,
        };
        match what {
            Some(w) => Err(Error::RmaSync(w)),
            None => Ok(()),
        }
    }

    /// Run `req` from `step` until it is granted or an error leaves it
    /// pending at the step reached.
    fn advance(
        &self,
        st: &mut WindowState<T>,
        req: LockRequest,
        mut step: LockStep,
        deadline: Deadline,
    ) -> Result<()> {
        let global = Mcs {
            owner: self.members[0],
            qnode: 0,
        };
        loop {
            step = match step {
                LockStep::Start => match (self.opts.lock, req.target) {
                    (LockDesign::McsRw, _) => match st.passive.global {
                        Some((LockType::Shared, _)) if req.kind == LockType::Exclusive => {
                            st.passive.pending = None;
                            return Err(Error::RmaSync(
                                "the McsRw lock design cannot take an exclusive lock while \
                                 this rank holds a shared one (it would wait for itself): \
                                 unlock first or use LockDesign::TwoLevel"
                                    .into(),
                            ));
                        }
                        Some(_) => LockStep::Done,
                        None => self.mcs_lock(global, req.kind)?,
                    },
                    (LockDesign::TwoLevel, Some(t)) if req.kind == LockType::Shared => {
                        self.mcs_lock(self.target_lock(t)?, LockType::Shared)?
                    }
                    (LockDesign::TwoLevel, _) => LockStep::Global,
                },
                LockStep::Global => {
                    let class = match req.target {
                        None => Class::All,
                        Some(_) => Class::Exclusive,
                    };
                    self.gate().enter(class, deadline)?;
                    match req.target {
                        Some(t) => {
                            // Entered: from here on the global share is held.
                            let lock = self.target_lock(t)?;
                            st.passive.pending =
                                Some((req, LockStep::Queued { lock, writer: true }));
                            self.mcs_lock(lock, LockType::Exclusive)?
                        }
                        None => LockStep::Done,
                    }
                }
                LockStep::Queued { lock, writer } => {
                    self.await_grant(lock, writer, deadline)?;
                    LockStep::Done
                }
                LockStep::Done => {
                    st.passive.pending = None;
                    self.record(st, req, false);
                    return Ok(());
                }
            };
            st.passive.pending = Some((req, step));
        }
    }

    /// Note a granted lock.
    fn record(&self, st: &mut WindowState<T>, req: LockRequest, nocheck: bool) {
        let held = Some(Held {
            kind: req.kind,
            nocheck,
        });
        match req.target {
            None => st.passive.all = held,
            Some(t) => {
                let i = self.members.binary_search(&t).expect("checked");
                st.passive.held[i] = held;
            }
        }
        if self.opts.lock == LockDesign::McsRw && !nocheck {
            let g = &mut st.passive.global;
            *g = Some(match *g {
                Some((mode, n)) => (mode, n + 1),
                None => (req.kind, 1),
            });
        }
    }

    /// Release the protocol side of a granted lock.
    fn release(&self, st: &mut WindowState<T>, req: LockRequest) -> Result<()> {
        match self.opts.lock {
            LockDesign::McsRw => {
                let global = Mcs {
                    owner: self.members[0],
                    qnode: 0,
                };
                match st.passive.global {
                    Some((mode, 1)) => {
                        st.passive.global = None;
                        self.mcs_unlock(global, mode)
                    }
                    Some((mode, n)) => {
                        st.passive.global = Some((mode, n - 1));
                        Ok(())
                    }
                    None => unreachable!("a granted lock holds the global lock"),
                }
            }
            LockDesign::TwoLevel => match req.target {
                None => self.gate().leave(Class::All),
                Some(t) => {
                    let lock = self.target_lock(t)?;
                    self.mcs_unlock(lock, req.kind)?;
                    if req.kind == LockType::Exclusive {
                        self.gate().leave(Class::Exclusive)?;
                    }
                    Ok(())
                }
            },
        }
    }

    /// The two-level design's lock of target `t`.
    fn target_lock(&self, t: Rank) -> Result<Mcs> {
        Ok(Mcs {
            owner: t,
            qnode: 1 + self.member_index(t)?,
        })
    }

    // ---- the words ----

    /// Word `off` of line `line` of `rank`'s lock area.
    fn word(&self, rank: Rank, line: usize, off: usize) -> Word {
        Word {
            rank,
            at: self.lock_area(rank) + line * 64 + off,
        }
    }

    /// The lock words of `m`.
    fn lock_words(&self, m: Mcs) -> Word {
        let line = if m.qnode == 0 {
            GLOBAL_LINE
        } else {
            LOCAL_LINE
        };
        self.word(m.owner, line, 0)
    }

    /// `rank`'s queue node for `m` (rank + 1 is its pointer).
    fn qnode(&self, rank: Rank, m: Mcs) -> Word {
        self.word(rank, QNODE_LINE + m.qnode, 0)
    }

    /// The queue node a queue pointer (`rank + 1`) names; a pointer that
    /// names no member says the lock words were corrupted.
    fn qnode_of(&self, ptr: u64, m: Mcs) -> Result<Word> {
        ptr.checked_sub(1)
            .and_then(|r| Rank::try_from(r).ok())
            .filter(|r| self.members.binary_search(r).is_ok())
            .map(|r| self.qnode(r, m))
            .ok_or_else(|| {
                Error::RmaSync(format!(
                    "lock queue pointer {ptr} names no member of the window: the lock \
                     words were corrupted"
                ))
            })
    }

    /// The MCS-RW-RP lock `m` as this rank sees it.
    fn queue_lock(&self, m: Mcs) -> QueueLock<'_, Words<'_>, impl Fn(u64) -> Result<Word> + '_> {
        QueueLock {
            words: &self.words,
            lock: self.lock_words(m),
            me: self.ctx.rank() as u64 + 1,
            qnode: self.qnode(self.ctx.rank(), m),
            qnode_of: move |ptr| self.qnode_of(ptr, m),
        }
    }

    /// Request `m` (`ReaderLock`, or `WriterLock` up to its wait).
    fn mcs_lock(&self, m: Mcs, kind: LockType) -> Result<LockStep> {
        let writer = kind == LockType::Exclusive;
        Ok(match self.queue_lock(m).lock(writer)? {
            Acquired::Held => LockStep::Done,
            Acquired::Queued => LockStep::Queued { lock: m, writer },
        })
    }

    /// Wait for the hand-off of `m` (see [`QueueLock::await_grant`]).
    fn await_grant(&self, m: Mcs, writer: bool, deadline: Deadline) -> Result<()> {
        self.queue_lock(m).await_grant(writer, deadline)
    }

    /// `ReaderUnlock` / `WriterUnlock` of `m`.
    fn mcs_unlock(&self, m: Mcs, kind: LockType) -> Result<()> {
        self.queue_lock(m).unlock(kind == LockType::Exclusive)
    }

    // ---- the two-level global word ----

    /// The two-level design's global word, held by the first member.
    fn gate(&self) -> Gate<'_, Words<'_>> {
        Gate {
            words: &self.words,
            word: self.word(self.members[0], GLOBAL_LINE, GLOBAL_WORD),
        }
    }
}
