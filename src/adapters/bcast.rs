//! RMA broadcast (Paznikov 2023): the root's data lands at the same
//! displacement in every member's window elements.
//!
//! - [`BcastImpl::Linear`]: the root puts to every member inside a
//!   `lock_all` epoch ([`RmaWindow::bcast_linear`]).
//! - [`BcastImpl::Binomial`]: a binomial tree over the members, relayed by
//!   a *broadcaster* thread on every member: a parent writes the data and
//!   an operation description (root, displacement, length, sequence) into
//!   the child's window and control window, then notifies the child's
//!   request id; the child's broadcaster claims the request, relays to its
//!   own children (largest subtree first, where the paper goes smallest
//!   first: the deepest subtree starts earliest) and adds one to the root's
//!   done counter with an atomic. The root's call returns after its own
//!   writes; [`Broadcaster::flush`] waits until every member is done,
//!   [`Broadcaster::test`] asks.
//! - [`BcastImpl::Node`]: the same tree over nodes: one write per node into
//!   the node-shared window (the elements of the node's first member), which
//!   every local rank reads in place ([`Broadcaster::node_copy`]).
//!
//! Broadcasts never mix data: each takes a ticket from a counter at the
//! group's first member and starts only when every earlier broadcast, from
//! any root, is complete at every member (the paper waits for the
//! previous operation); a relaying member counts itself done only after its
//! own writes completed, so its elements stay unchanged while it relays.
//!
//! The broadcaster threads live in [`RmaWindow::broadcaster`]'s scope:
//! started when it opens, stopped (after every broadcast has completed)
//! when it closes, also if the scope's closure panics. A scope, not a
//! window field, because the threads borrow the [`Context`]: Rust can only
//! guarantee that they end before it does inside a scope.

use super::rma::{RmaElem, RmaWindow};
use super::window::Assert;
use super::words::{Word, Words};
use crate::collectives::plan::binomial_children;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::segments::SegmentView;
use crate::types::{Deadline, Local, Notification, QueueId, Rank, Remote, SegmentId, Timeout};
use crate::windows::WindowOptions;
use std::cell::Cell;
use std::sync::Mutex;

/// How a broadcast travels (Paznikov 2023, and the node-aware variant).
///
/// ```
/// use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let win = RmaWindow::<f64>::new(&ctx, 0, 8, GroupId::ALL, Timeout::Block)?;
/// win.broadcaster(1, Timeout::Block, |b| {
///     if ctx.rank() == 0 {
///         b.bcast(&[1.0; 8], 0, BcastImpl::Node, Timeout::Block)?;
///     }
///     b.wait_received(1, Timeout::Block)?;
///     // A node broadcast lands once per node: read the node's copy in place.
///     assert_eq!(b.node_copy().get(7), 1.0);
///     Ok::<(), gaspi::Error>(())
/// })??;
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BcastImpl {
    /// The root puts to every member in a `lock_all` epoch.
    Linear,
    /// A binomial tree over the members, relayed by broadcaster threads.
    Binomial,
    /// A binomial tree over nodes, one copy per node read in place.
    Node,
}

/// Words of a member's line in the control window: the description of the
/// broadcast it received last, then its counters.
const SEQ: usize = 0;
/// The root, and 1 << 32 for a node broadcast.
const ROOT: usize = 8;
const DISP: usize = 16;
const LEN: usize = 24;
const EXPECT: usize = 32;
const DESC_BYTES: usize = 40;
/// Non-zero while the member's own thread waits on `RECEIVED` or `DONE`:
/// only then do changes of them wake the node.
const WATCH: usize = 40;
/// Broadcasts whose data this member can read.
const RECEIVED: usize = 48;
/// At a root: members (or nodes) done with its broadcasts, cumulative.
const DONE: usize = 56;
/// The global line (at the first member's node): tickets taken and
/// broadcasts completed.
const TICKET: usize = 0;
const COMPLETED: usize = 8;
/// Ranks waiting for `COMPLETED` to grow.
const COMPLETED_WATCH: usize = 16;

/// The description of a broadcast, as written into control lines.
#[derive(Clone, Copy, Debug)]
struct Desc {
    /// Ticket + 1.
    seq: u64,
    root: Rank,
    /// Element displacement and count.
    disp: usize,
    len: usize,
    /// The root's done count once this broadcast is complete.
    expect: u64,
    node: bool,
}

/// What relaying needs, shared by the root's call and the broadcaster
/// thread (everything here is `Sync`).
struct Relay<'a> {
    ctx: &'a Context,
    data: SegmentId,
    control: SegmentId,
    /// The control window's words.
    words: Words<'a>,
    members: Vec<Rank>,
    /// The first member of each node that has members, by node.
    leaders: Vec<Rank>,
    /// Byte offset of each member's elements in the data window.
    region: Vec<usize>,
    elem: usize,
    ppn: usize,
    /// The queue of the broadcaster thread.
    queue: QueueId,
}

impl Relay<'_> {
    fn local_of(&self, r: Rank) -> usize {
        r as usize % self.ppn
    }

    fn line(&self, r: Rank) -> Word {
        Word {
            rank: r,
            at: self.local_of(r) * 64,
        }
    }

    fn global(&self) -> Word {
        Word {
            rank: self.members[0],
            at: self.ppn * 64,
        }
    }

    fn index(&self, r: Rank) -> usize {
        self.members.binary_search(&r).expect("a member")
    }

    fn leader_of(&self, r: Rank) -> Rank {
        let node = self.ctx.node_of(r);
        *self
            .leaders
            .iter()
            .find(|&&l| self.ctx.node_of(l) == node)
            .expect("every member's node has a leader")
    }

    fn region(&self, r: Rank) -> usize {
        self.region[self.index(r)]
    }

    fn read_desc(&self, me: Rank) -> Result<Desc> {
        let l = self.line(me);
        let w = |off| self.words.load(l.plus(off));
        Ok(Desc {
            seq: w(SEQ)?,
            root: (w(ROOT)? & 0xffff_ffff) as Rank,
            disp: w(DISP)? as usize,
            len: w(LEN)? as usize,
            expect: w(EXPECT)?,
            node: w(ROOT)? >> 32 == 1,
        })
    }

    fn write_desc(&self, me: Rank, d: &Desc) {
        let l = self.line(me);
        for (off, v) in [
            (SEQ, d.seq),
            (ROOT, d.root as u64 | (d.node as u64) << 32),
            (DISP, d.disp as u64),
            (LEN, d.len as u64),
            (EXPECT, d.expect),
        ] {
            self.words.store_own(l.plus(off), v);
        }
    }

    /// The ranks `me` relays `d` to: its children in the binomial tree over
    /// the members (or over the nodes' leaders, for its node), numbered
    /// from the root (or the root's node).
    fn children(&self, d: &Desc, me: Rank) -> Vec<Rank> {
        let ring: &[Rank] = if d.node { &self.leaders } else { &self.members };
        let pos_of = |r: Rank| {
            if d.node {
                let node = self.ctx.node_of(r);
                ring.iter()
                    .position(|&l| self.ctx.node_of(l) == node)
                    .expect("a node with members")
            } else {
                self.index(r)
            }
        };
        let p = ring.len();
        let rel = (pos_of(me) + p - pos_of(d.root)) % p;
        binomial_children(rel, p)
            .into_iter()
            .map(|c| ring[(c + pos_of(d.root)) % p])
            .collect()
    }

    /// Write `d`'s data and description to every child of `me` and notify
    /// their requests; complete on `queue`.
    fn send(&self, d: &Desc, me: Rank, queue: QueueId) -> Result<()> {
        let ctx = self.ctx;
        let src = if d.node { self.leader_of(me) } else { me };
        let bytes = d.len * self.elem;
        let at = d.disp * self.elem;
        for child in self.children(d, me) {
            if bytes > 0 {
                ctx.write(
                    Local::new(self.data, self.region(src) + at),
                    Remote::new(child, self.data, self.region(child) + at),
                    bytes,
                    queue,
                    Timeout::Block,
                )?;
            }
            ctx.write(
                Local::new(self.control, self.line(me).at),
                Remote::new(child, self.control, self.line(child).at),
                DESC_BYTES,
                queue,
                Timeout::Block,
            )?;
            let request = Notification::new(2 * self.local_of(child) as u32, 1);
            ctx.notify(child, self.control, request, queue, Timeout::Block)?;
        }
        ctx.wait(queue, Timeout::Block)
    }

    /// The data of `d` is readable by `me` (and, for a node copy, by its
    /// node's members).
    fn arrived(&self, d: &Desc, me: Rank) -> Result<()> {
        if d.node {
            let node = self.ctx.node_of(me);
            for &r in self
                .members
                .iter()
                .filter(|&&r| self.ctx.node_of(r) == node)
            {
                self.bump(r, RECEIVED)?;
            }
        } else {
            self.bump(me, RECEIVED)?;
        }
        Ok(())
    }

    /// Add one to counter `which` of member `r`, waking its node only if
    /// `r`'s own thread waits on it.
    fn bump(&self, r: Rank, which: usize) -> Result<u64> {
        let l = self.line(r);
        self.words
            .fetch_add_watched(l.plus(which), 1, l.plus(WATCH))
    }

    /// Wait (as member `me`'s own thread) until counter `which` of `me`
    /// satisfies `pred`.
    fn await_counter(
        &self,
        me: Rank,
        which: usize,
        pred: impl Fn(u64) -> bool,
        timeout: Timeout,
    ) -> Result<u64> {
        let l = self.line(me);
        self.words
            .await_watched(l.plus(which), l.plus(WATCH), pred, timeout.deadline())
    }

    /// One more broadcast is complete everywhere.
    fn complete(&self) -> Result<u64> {
        let g = self.global();
        self.words
            .fetch_add_watched(g.plus(COMPLETED), 1, g.plus(COMPLETED_WATCH))
    }

    /// Wait until `n` broadcasts are complete.
    fn await_completed(&self, n: u64, deadline: Deadline) -> Result<u64> {
        let g = self.global();
        self.words.await_watched(
            g.plus(COMPLETED),
            g.plus(COMPLETED_WATCH),
            |c| c >= n,
            deadline,
        )
    }

    /// `me` is done with `d`: tell the root; the last one completes it.
    fn done(&self, d: &Desc) -> Result<()> {
        let old = self.bump(d.root, DONE)?;
        if old + 1 == d.expect {
            self.complete()?;
        }
        Ok(())
    }

    /// The broadcaster thread: claim requests until the stop notification.
    fn serve(&self, me: Rank, failure: &Mutex<Option<Error>>) {
        let _counted = self.ctx.engine.count_thread();
        let l = 2 * self.local_of(me) as u32;
        loop {
            match self
                .ctx
                .notify_claim(self.control, l..l + 2, Timeout::Block)
            {
                Ok((id, _)) if id == l + 1 => return,
                Ok(_) => {
                    // Arrival counted before done: once the root's test is
                    // true, every member's `received` counts it too.
                    let relayed = self.read_desc(me).and_then(|d| {
                        self.send(&d, me, self.queue)?;
                        self.arrived(&d, me)?;
                        self.done(&d)
                    });
                    if let Err(e) = relayed {
                        failure.lock().expect("not poisoned").get_or_insert(e);
                    }
                }
                Err(e) => {
                    failure.lock().expect("not poisoned").get_or_insert(e);
                    return;
                }
            }
        }
    }
}

/// Posts the broadcaster's stop notification when dropped (also when the
/// scope's closure unwinds), so the thread always ends.
struct StopOnDrop<'r, 'a> {
    relay: &'r Relay<'a>,
    me: Rank,
    /// The main thread's queue.
    queue: QueueId,
}

impl Drop for StopOnDrop<'_, '_> {
    fn drop(&mut self) {
        let r = self.relay;
        let stop = Notification::new(2 * r.local_of(self.me) as u32 + 1, 1);
        // Posting to this rank's own window cannot fail while it exists.
        let _ = r
            .ctx
            .notify(self.me, r.control, stop, self.queue, Timeout::Block);
        let _ = r.ctx.wait(self.queue, Timeout::Block);
    }
}

/// The root's side of the broadcasts of a [`RmaWindow::broadcaster`]
/// scope (Paznikov 2023's `RMABcast*` calls).
///
/// ```
/// use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let win = RmaWindow::<u32>::new(&ctx, 0, 16, GroupId::ALL, Timeout::Block)?;
/// // Every rank broadcasts its rank to element `rank` of everyone.
/// win.broadcaster(1, Timeout::Block, |b| {
///     b.bcast(&[ctx.rank() as u32], ctx.rank() as usize, BcastImpl::Linear, Timeout::Block)?;
///     b.wait_received(ctx.num_ranks() as u64, Timeout::Block)?;
///     Ok::<(), gaspi::Error>(())
/// })??;
/// assert_eq!(win.local().get(0), 0);
/// # Ok::<(), gaspi::Error>(())
/// ```
pub struct Broadcaster<'s, 'a, T: RmaElem> {
    win: &'s RmaWindow<'a, T>,
    relay: &'s Relay<'a>,
    failure: &'s Mutex<Option<Error>>,
    /// This rank's done count once its broadcasts are complete.
    expected: Cell<u64>,
    /// A ticket taken by a call that timed out waiting for its turn.
    pending: Cell<Option<u64>>,
}

impl<T: RmaElem> Broadcaster<'_, '_, T> {
    /// Broadcast `buf` from this rank into elements `disp..` of every
    /// member (`RMABcastLinear` / `RMABcastBinomial`; with
    /// [`BcastImpl::Node`], into every node's copy). Waits (up to
    /// `timeout`) until every earlier broadcast is complete, then returns
    /// after this rank's own writes; [`Broadcaster::flush`] waits for the
    /// rest. After a timeout the turn is kept: the next call uses it.
    ///
    /// ```
    /// use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u32>::new(&ctx, 13, 4, GroupId::ALL, Timeout::Block)?;
    /// win.broadcaster(14, Timeout::Block, |b| {
    ///     if ctx.rank() == 0 {
    ///         b.bcast(&[7, 8], 1, BcastImpl::Binomial, Timeout::Block)?;
    ///         b.flush(Timeout::Block)?; // every member has it
    ///     }
    ///     b.wait_received(1, Timeout::Block)?;
    ///     assert_eq!(win.local().get(2), 8);
    ///     Ok::<(), gaspi::Error>(())
    /// })??;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn bcast(&self, buf: &[T], disp: usize, how: BcastImpl, timeout: Timeout) -> Result<()> {
        self.failed()?;
        let win = self.win;
        win.check_range(win.ctx.rank(), disp, buf.len())?;
        let r = self.relay;
        let me = win.ctx.rank();
        let ticket = match self.pending.take() {
            Some(t) => t,
            None => r.words.fetch_add_quiet(r.global().plus(TICKET), 1)?,
        };
        let turn = r.await_completed(ticket, timeout.deadline());
        if let Err(e) = turn {
            self.pending.set(Some(ticket));
            return Err(e);
        }
        if how == BcastImpl::Linear {
            let put = win.bcast_linear(buf, disp);
            if put.is_ok() {
                for &m in &r.members {
                    r.bump(m, RECEIVED)?;
                }
            }
            // Complete (also when failed): the next broadcast may start.
            r.complete()?;
            return put;
        }
        let node = how == BcastImpl::Node;
        let (copy, others) = if node {
            (r.leader_of(me), r.leaders.len() - 1)
        } else {
            (me, r.members.len() - 1)
        };
        win.region_of(copy).copy_from_slice(disp, buf);
        let d = Desc {
            seq: ticket + 1,
            root: me,
            disp,
            len: buf.len(),
            expect: self.expected.get() + others as u64,
            node,
        };
        r.write_desc(me, &d);
        self.expected.set(d.expect);
        let sent = r.send(&d, me, win.opts.queue);
        r.arrived(&d, me)?;
        if others == 0 {
            r.complete()?;
        }
        sent
    }

    /// Wait until every member (or node) has received this rank's
    /// broadcasts (`RMABcastFlush`).
    ///
    /// ```
    /// # use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 4, GroupId::ALL, Timeout::Block)?;
    /// win.broadcaster(1, Timeout::Block, |b| {
    ///     if ctx.rank() == 0 {
    ///         b.bcast(&[5], 0, BcastImpl::Binomial, Timeout::Block)?;
    ///         b.flush(Timeout::Block)?;
    ///         assert!(b.test()?); // complete at every member
    ///     }
    ///     Ok::<(), gaspi::Error>(())
    /// })??;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn flush(&self, timeout: Timeout) -> Result<()> {
        self.failed()?;
        let r = self.relay;
        let want = self.expected.get();
        r.await_counter(self.win.ctx.rank(), DONE, |v| v >= want, timeout)
            .map(drop)
    }

    /// Whether this rank's broadcasts are complete everywhere
    /// (`RMABcastTest`).
    ///
    /// ```
    /// # use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 4, GroupId::ALL, Timeout::Block)?;
    /// win.broadcaster(1, Timeout::Block, |b| {
    ///     if ctx.rank() == 0 {
    ///         b.bcast(&[5], 0, BcastImpl::Binomial, Timeout::Block)?;
    ///         // Overlap: do other work until the broadcast is complete.
    ///         while !b.test()? {
    ///             std::hint::spin_loop();
    ///         }
    ///     }
    ///     Ok::<(), gaspi::Error>(())
    /// })??;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn test(&self) -> Result<bool> {
        self.failed()?;
        let r = self.relay;
        Ok(r.words.load(r.line(self.win.ctx.rank()).plus(DONE))? >= self.expected.get())
    }

    /// How many broadcasts (from any root, since the scope opened) this
    /// rank can read: in its own elements, or in its node's copy.
    ///
    /// ```
    /// # use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 4, GroupId::ALL, Timeout::Block)?;
    /// win.broadcaster(1, Timeout::Block, |b| {
    ///     assert_eq!(b.received()?, 0);
    ///     if ctx.rank() == 0 {
    ///         b.bcast(&[5], 0, BcastImpl::Linear, Timeout::Block)?;
    ///     }
    ///     b.wait_received(1, Timeout::Block)?;
    ///     assert!(b.received()? >= 1);
    ///     Ok::<(), gaspi::Error>(())
    /// })??;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn received(&self) -> Result<u64> {
        let r = self.relay;
        r.words.load(r.line(self.win.ctx.rank()).plus(RECEIVED))
    }

    /// Wait until [`Broadcaster::received`] is at least `count`.
    ///
    /// ```
    /// # use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 4, GroupId::ALL, Timeout::Block)?;
    /// win.broadcaster(1, Timeout::Block, |b| {
    ///     // Nothing broadcast yet: a test times out.
    ///     assert!(b.wait_received(1, Timeout::Test).unwrap_err().is_timeout());
    ///     Ok::<(), gaspi::Error>(())
    /// })??;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn wait_received(&self, count: u64, timeout: Timeout) -> Result<()> {
        let r = self.relay;
        let got = r.await_counter(self.win.ctx.rank(), RECEIVED, |v| v >= count, timeout);
        self.failed()?;
        got.map(drop)
    }

    /// This node's copy of [`BcastImpl::Node`] broadcasts (the elements of
    /// the node's first member), read in place.
    ///
    /// ```
    /// # use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let win = RmaWindow::<u32>::new(&ctx, 0, 4, GroupId::ALL, Timeout::Block)?;
    /// win.broadcaster(1, Timeout::Block, |b| {
    ///     if ctx.rank() == 0 {
    ///         b.bcast(&[1, 2, 3, 4], 0, BcastImpl::Node, Timeout::Block)?;
    ///     }
    ///     b.wait_received(1, Timeout::Block)?;
    ///     assert_eq!(b.node_copy().to_vec(), vec![1, 2, 3, 4]);
    ///     Ok::<(), gaspi::Error>(())
    /// })??;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node_copy(&self) -> SegmentView<T> {
        self.win
            .region_of(self.relay.leader_of(self.win.ctx.rank()))
    }

    /// An error the broadcaster thread met.
    fn failed(&self) -> Result<()> {
        match self.failure.lock().expect("not poisoned").take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Close the scope: give back a kept turn, then wait until every
    /// broadcast of every root is complete (collective).
    fn close(&self, timeout: Timeout) -> Result<()> {
        let r = self.relay;
        let deadline = timeout.deadline();
        if let Some(t) = self.pending.take() {
            r.await_completed(t, deadline)?;
            r.complete()?;
        }
        let ctx = self.win.ctx;
        ctx.barrier(self.win.group, deadline.timeout())?;
        let tickets = r.words.load(r.global().plus(TICKET))?;
        r.await_completed(tickets, deadline)?;
        self.failed()
    }
}

impl<'a, T: RmaElem> RmaWindow<'a, T> {
    /// The linear broadcast (Paznikov 2023, figure 3): `lock_all`, a put of
    /// `buf` to elements `disp..` of every member, `unlock_all`. Complete
    /// everywhere when it returns; receivers learn of it by other means
    /// (inside a [`RmaWindow::broadcaster`] scope, use
    /// [`Broadcaster::bcast`] with [`BcastImpl::Linear`], which counts it).
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 15, 2, GroupId::ALL, Timeout::Block)?;
    /// if ctx.rank() == 0 {
    ///     win.bcast_linear(&[42], 0)?;
    /// }
    /// ctx.barrier(GroupId::ALL, Timeout::Block)?;
    /// assert_eq!(win.local().get(0), 42);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn bcast_linear(&self, buf: &[T], disp: usize) -> Result<()> {
        self.lock_all(Assert::NONE, Timeout::Block)?;
        let put = self
            .members
            .iter()
            .try_for_each(|&m| self.put(buf, m, disp));
        let unlocked = self.unlock_all();
        put.and(unlocked)
    }

    /// Run `f` with a broadcaster thread on every member (Paznikov 2023's
    /// runtime): collective over the window's group, which every member
    /// enters and leaves. Opening creates the control window on segment
    /// `control` (requests, descriptions, done counters) and starts the
    /// threads; closing waits until every broadcast is complete, stops the
    /// threads and deletes the control window. Returns `f`'s value, or the
    /// first error of opening or closing.
    ///
    /// The threads relay on queue [`RmaOptions::relay_queue`](crate::RmaOptions::relay_queue);
    /// `f` must leave it to them.
    ///
    /// ```
    /// use gaspi::{BcastImpl, Config, Context, GroupId, RmaWindow, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = RmaWindow::<u64>::new(&ctx, 0, 1, GroupId::ALL, Timeout::Block)?;
    /// // The scope's value comes back once every broadcast is complete.
    /// let got = win.broadcaster(1, Timeout::Block, |b| {
    ///     if ctx.rank() == 0 {
    ///         b.bcast(&[99], 0, BcastImpl::Binomial, Timeout::Block)?;
    ///     }
    ///     b.wait_received(1, Timeout::Block)?;
    ///     Ok::<u64, gaspi::Error>(win.local().get(0))
    /// })??;
    /// assert_eq!(got, 99);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn broadcaster<R>(
        &self,
        control: SegmentId,
        timeout: Timeout,
        f: impl FnOnce(&Broadcaster<'_, 'a, T>) -> R,
    ) -> Result<R> {
        let ctx = self.ctx;
        let ppn = ctx.ranks_per_node();
        let queue = self.opts.relay_queue;
        if queue == self.opts.queue {
            return Err(Error::InvalidArgument(
                "RmaOptions::relay_queue must differ from RmaOptions::queue".into(),
            ));
        }
        ctx.queues.check(queue)?;
        let table = WindowOptions::default().notifications(2 * ppn as u32);
        let win = ctx.window_create_with(control, (ppn + 1) * 64, self.group, table, timeout)?;
        let mut leaders: Vec<Rank> = Vec::new();
        for &m in &self.members {
            if leaders
                .last()
                .is_none_or(|&l| ctx.node_of(l) != ctx.node_of(m))
            {
                leaders.push(m);
            }
        }
        let relay = Relay {
            ctx,
            data: self.segment(),
            control,
            words: Words::new(ctx, control, win.object().clone()),
            region: self.members.iter().map(|&m| self.offset(m, 0)).collect(),
            members: self.members.clone(),
            leaders,
            elem: std::mem::size_of::<T>(),
            ppn,
            queue,
        };
        let failure = Mutex::new(None);
        let me = ctx.rank();
        let (out, closed) = std::thread::scope(|s| {
            let thread = s.spawn(|| relay.serve(me, &failure));
            let stop = StopOnDrop {
                relay: &relay,
                me,
                queue: self.opts.queue,
            };
            let b = Broadcaster {
                win: self,
                relay: &relay,
                failure: &failure,
                expected: Cell::new(0),
                pending: Cell::new(None),
            };
            let out = f(&b);
            let closed = b.close(timeout);
            drop(stop);
            let joined = thread.join();
            (
                out,
                closed.and(
                    joined.map_err(|_| Error::RmaSync("the broadcaster thread panicked".into())),
                ),
            )
        });
        let left = ctx.barrier(self.group, timeout);
        let deleted = ctx.segment_delete(control);
        closed.and(left).and(deleted).map(|()| out)
    }
}
