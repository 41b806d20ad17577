//! Node-shared windows: one region of memory per node, mapped by every rank
//! of the node, that is also a segment every rank outside the node can
//! write, read and notify (Al Ahad et al. 2018's shared windows with shared
//! notifications; Zhou et al. 2015's shared-memory window nested in the RMA window).
//!
//! [`Context::window_create`] is collective over a group. On each node, the
//! group's lowest rank creates the node's window and the node's other
//! members map it; then the window is segment `segment` of every member of
//! the node. So:
//!
//! - every rank of the node reads and writes the window directly, through
//!   [`Window::view`] (plain loads and stores, no copy);
//! - a rank of another node writes into it with `write`, `write_notify`,
//!   `read`, ... addressing *any* rank of the node: all of them reach the
//!   same memory;
//! - its notification table is the node's: a notification aimed at the
//!   window through any of the node's ranks, by a rank of any node, lands
//!   in one table that every rank of the node sees; resetting is atomic, so
//!   of several ranks claiming one notification exactly one gets it
//!   ([`Context::notify_claim`]);
//! - the table counts notifications posted into it and claimed from it,
//!   node-wide and only ever increasing ([`Context::notify_counts`]), so a
//!   rank can wait for "the node has received K more" without scanning.
//!
//! # Concurrent access
//! Ranks of the node share the memory like threads share a buffer: reads
//! and writes of the same bytes from two ranks at once are a race whose
//! result the program must not depend on. Order them with notifications,
//! [`Context::node_barrier`], or atomics ([`SegmentView::atomic_u64`]).
//! Bytes written by a remote `write_notify` are visible to every rank of
//! the node that sees its notification.
//!
//! # Reusing windows and notification ids
//! The counters never go back, so "K more than at the start of my round"
//! cannot be confused with an earlier round. Ids are only safe to reuse
//! once their previous notification was claimed: alternate two id ranges
//! by round parity (or tag values with the round) and let a round start
//! only after the round two back has been consumed, which a node barrier
//! per round guarantees. `tests/windows.rs` runs 1,000 rounds that way.
//!
//! # Nodes
//! Nodes are consecutive ranks, `ranks_per_node` each (`gaspi-run --ppn`).
//! On one machine they are emulated: the engine carries operations between
//! them like an RDMA network card (a copy into the target's memory), while
//! the API refuses direct access to other nodes' memory
//! ([`Error::OtherNode`]) and [`Context::traffic`] counts inter-node
//! operations apart from intra-node ones.

use crate::config::{Config, NOTIFICATION_LIMIT};
use crate::context::Context;
use crate::engine::job::{ObjectId, ObjectKind};
use crate::engine::segment::{SegmentKey, SegmentObject};
use crate::error::{Error, Result};
use crate::segments::SegmentView;
use crate::types::{GroupId, Rank, SegmentId, Timeout};
use bytemuck::Pod;
use std::sync::Arc;

/// Options of a window.
///
/// ```
/// // A small metadata window without a notification table.
/// let opts = gaspi::WindowOptions::default().notifications(0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowOptions {
    notifications: Option<u32>,
}

impl WindowOptions {
    /// Size of the window's notification table (default:
    /// [`Config::notification_num`]). Windows that carry no notifications
    /// can have 0 and cost no table.
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, Notification, Timeout, WindowOptions};
    /// let ctx = Context::init(Config::default())?;
    /// let opts = WindowOptions::default().notifications(16);
    /// let _win = ctx.window_create_with(1, 4096, GroupId::ALL, opts, Timeout::Block)?;
    /// // Ids past the table are refused.
    /// assert!(ctx.notify(ctx.rank(), 1, Notification::new(16, 1), 0, Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn notifications(mut self, num: u32) -> WindowOptions {
        self.notifications = Some(num);
        self
    }

    fn table_size(&self, config: &Config) -> u32 {
        self.notifications.unwrap_or(config.notification_num)
    }
}

/// This rank's handle on its node's window of one segment id.
///
/// ```
/// use gaspi::{Config, Context, GroupId, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let win = ctx.window_create(5, 4096, GroupId::ALL, Timeout::Block)?;
/// let words = win.view::<u64>();
/// words.set(ctx.local_rank() as usize, 42); // every rank of the node sees it
/// ctx.node_barrier(Timeout::Block)?;
/// assert_eq!(words.get(0), 42);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Window {
    obj: Arc<SegmentObject>,
    segment: SegmentId,
    node: usize,
}

impl Window {
    /// The segment id the window is on every rank of its node.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let win = ctx.window_create(3, 64, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// assert_eq!(win.segment(), 3);
    /// assert_eq!(ctx.segment_list(), vec![3]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment(&self) -> SegmentId {
        self.segment
    }

    /// The node the window belongs to.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let win = ctx.window_create(0, 64, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// assert_eq!(win.node(), ctx.node());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node(&self) -> usize {
        self.node
    }

    /// Size in bytes.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let win = ctx.window_create(0, 1000, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// assert_eq!(win.len(), 1000);
    /// assert_eq!(win.view::<u64>().len(), 125);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.obj.size()
    }

    /// True for a window of no bytes (never: windows have at least one).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let win = ctx.window_create(0, 8, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// assert!(!win.is_empty());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.obj.size() == 0
    }

    /// The window's object.
    pub(crate) fn object(&self) -> &Arc<SegmentObject> {
        &self.obj
    }

    /// Typed access to the whole window (see the module documentation for
    /// the rules of concurrent access).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let win = ctx.window_create(0, 4096, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// // Each local rank fills its own share; after a node barrier all read all.
    /// let all = win.view::<f32>();
    /// let (share, lr) = (all.len() / ctx.local_num() as usize, ctx.local_rank() as usize);
    /// all.sub(lr * share..(lr + 1) * share).fill(lr as f32);
    /// ctx.node_barrier(gaspi::Timeout::Block)?;
    /// assert_eq!(all.get(all.len() - 1), (ctx.local_num() - 1) as f32);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn view<T: Pod>(&self) -> SegmentView<T> {
        SegmentView::of(self.obj.clone())
    }

    /// `len` elements of the window from byte `start` on (any byte: the
    /// areas of the collectives are laid out in bytes).
    pub(crate) fn view_at<T: Pod>(&self, start: usize, len: usize) -> SegmentView<T> {
        SegmentView::at(self.obj.clone(), start, len)
    }
}

impl Context {
    /// The node of `rank`.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// assert_eq!(ctx.node_of(ctx.rank()), ctx.node());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node_of(&self, rank: Rank) -> usize {
        rank as usize / self.ranks_per_node()
    }

    /// The ranks of node `node`; none (an empty range) for a node past the
    /// last.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// let mine = ctx.node_ranks(ctx.node());
    /// assert!(mine.contains(&ctx.rank()));
    /// assert_eq!(mine.len(), ctx.local_num() as usize);
    /// assert!(ctx.node_ranks(usize::MAX).is_empty());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn node_ranks(&self, node: usize) -> std::ops::Range<Rank> {
        let ppn = self.ranks_per_node();
        let first = node.saturating_mul(ppn).min(self.num_ranks() as usize);
        let end = (first + ppn).min(self.num_ranks() as usize);
        first as Rank..end as Rank
    }

    /// Collectively create node-shared windows of `size` bytes as segment
    /// `segment` on every member of `group`: one window per node, shared by
    /// the group's members on that node and registered with every member.
    /// After it returns on all members, every member can access every
    /// node's window. Made, then registered after a barrier, then a
    /// closing barrier, as [`Context::segment_create`] (where it says why);
    /// on a timeout of either barrier, call again. The node's first member
    /// makes the window with its `size` and table: a member of the node
    /// that asked for another gets [`Error::InvalidArgument`] after the
    /// barriers and holds no window (the others keep theirs).
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, Local, Notification, Remote, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let win = ctx.window_create(0, 4096, GroupId::ALL, Timeout::Block)?;
    /// // Ranks of this node see this store at once; other nodes' ranks write
    /// // into the window with one-sided operations, offsets in the window.
    /// win.view::<u64>().set(1, 7);
    /// let first_of_next_node = ctx.node_ranks((ctx.node() + 1) % ctx.num_nodes()).start;
    /// ctx.write_notify(Local::new(0, 8), Remote::new(first_of_next_node, 0, 16), 8,
    ///                  Notification::new(ctx.rank() as u32, 1), 0, Timeout::Block)?;
    /// ctx.notify_claim(0, 0..ctx.num_ranks() as u32, Timeout::Block)?;
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn window_create(
        &self,
        segment: SegmentId,
        size: usize,
        group: GroupId,
        timeout: Timeout,
    ) -> Result<Window> {
        self.window_create_with(segment, size, group, WindowOptions::default(), timeout)
    }

    /// [`Context::window_create`] with options (e.g. the table size).
    ///
    /// ```
    /// use gaspi::{Config, Context, GroupId, Timeout, WindowOptions};
    /// let ctx = Context::init(Config::default())?;
    /// // A metadata window without a notification table.
    /// let meta = ctx.window_create_with(2, 256, GroupId::ALL, WindowOptions::default().notifications(0), Timeout::Block)?;
    /// assert_eq!(meta.len(), 256);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn window_create_with(
        &self,
        segment: SegmentId,
        size: usize,
        group: GroupId,
        options: WindowOptions,
        timeout: Timeout,
    ) -> Result<Window> {
        Self::check_segment_size(size)?;
        let notifications = options.table_size(&self.config);
        if notifications > NOTIFICATION_LIMIT {
            return Err(Error::Config(format!(
                "a window has at most {} notifications",
                NOTIFICATION_LIMIT
            )));
        }
        let members = self.committed_members(group)?;
        let node: Vec<Rank> = members
            .iter()
            .copied()
            .filter(|&r| self.node_of(r) == self.node())
            .collect();
        let deadline = timeout.deadline();
        let mut shape = self.shape(size);
        shape.notification_num = notifications;
        shape.counting = true;
        // Every member checks what only the node's leader will make, so
        // that all fail alike instead of waiting for a window never made.
        SegmentObject::check_shape(&shape, false)
            .map_err(|e| Error::making(format!("the window of segment {segment}"), size, e))?;
        self.collective_segment(segment, group, &members, timeout, || {
            // Every member of the node counts the windows it made with this
            // id and these node members alike: the count names the object.
            let number = self.groups.window_count(segment, &node) + 1;
            let key = SegmentKey {
                names: self.engine.names(),
                segment,
                id: ObjectId {
                    kind: ObjectKind::Window,
                    owner: node[0],
                    number,
                },
            };
            let obj = if node[0] == self.rank() {
                SegmentObject::create(&key, &shape).map_err(|e| {
                    Error::making(format!("the window of segment {segment}"), size, e)
                })?
            } else {
                self.engine.open_window(&key, &node, deadline)?
            };
            self.engine.add_window(segment, obj)?;
            self.groups.count_window(segment, &node);
            Ok(())
        })?;
        // The node's window as its first member made it, checked once the
        // creation is through (also where a retry resumed it): a member
        // that asked for another shape has passed the barriers with the
        // others, so none waits for it, and leaves the window, which it
        // cannot use as asked (a smaller one would cut its writes short).
        let win = self.window(segment)?;
        let (bytes, table) = (win.len(), win.object().notification_num());
        if (bytes, table) != (size, notifications) {
            drop(win);
            self.segment_delete(segment)?;
            return Err(Error::InvalidArgument(format!(
                "window_create of segment {segment}: this rank asked for {size} bytes and \
                 {notifications} notifications, its node's window (made by rank {}) has {bytes} \
                 and {table}: the ranks of a node must ask alike",
                node[0]
            )));
        }
        Ok(win)
    }

    /// This rank's node window of segment `segment`.
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.window_create(4, 64, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// // Later, elsewhere in the program:
    /// let win = ctx.window(4)?;
    /// assert_eq!(win.segment(), 4);
    /// assert!(ctx.window(5).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn window(&self, segment: SegmentId) -> Result<Window> {
        self.window_of(self.rank(), segment)
    }

    /// The window of segment `segment` of `rank`, which must be a rank of
    /// this rank's node ([`Error::OtherNode`] otherwise: other nodes'
    /// memory is reached with one-sided operations only).
    ///
    /// ```
    /// # let ctx = gaspi::Context::init(gaspi::Config::default())?;
    /// ctx.window_create(0, 64, gaspi::GroupId::ALL, gaspi::Timeout::Block)?;
    /// let first = ctx.node_ranks(ctx.node()).start;
    /// // The same shared memory as my own handle.
    /// assert_eq!(ctx.window_of(first, 0)?.view::<u8>().as_ptr(), ctx.window(0)?.view::<u8>().as_ptr());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn window_of(&self, rank: Rank, segment: SegmentId) -> Result<Window> {
        self.engine.check_rank(rank)?;
        self.check_segment_id(segment)?;
        let (node, this_node) = (self.node_of(rank), self.node());
        if node != this_node {
            return Err(Error::OtherNode {
                rank,
                node,
                this_node,
            });
        }
        let obj = self.engine.local_arc(segment)?;
        let theirs = self
            .engine
            .entry(rank, segment)
            .ok_or_else(|| Error::SegmentNotFound { rank, segment })?;
        if obj.id().kind != ObjectKind::Window || obj.id() != theirs {
            return Err(Error::NotAWindow { rank, segment });
        }
        Ok(Window { obj, segment, node })
    }
}
