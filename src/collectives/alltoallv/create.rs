//! Making an alltoallv, collectively: fixed counts ([`Alltoallv::new`],
//! [`Alltoallv::alltoall`], [`Alltoallv::with_options`]) or counts learned
//! in each call ([`Alltoallv::with_unknown_sizes`]); the window, and which
//! node pairs send their pieces unstaged.

use super::options::AlltoallvOptions;
use super::state::{Alltoallv, Sizes};
use crate::collectives::agree::Shape;
use crate::collectives::alltoallv_plan::AlltoallvPlan;
use crate::collectives::creation::Creation;
use crate::collectives::layout::Layout;
use crate::context::Context;
use crate::engine::transfer::PutFrom;
use crate::error::{Error, Result};
use crate::extent;
use crate::types::{GroupId, SegmentId, Timeout};
use crate::windows::{Window, WindowOptions};
use bytemuck::Pod;

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// Collectively prepare an alltoallv with fixed `counts` (`ranks *
    /// ranks`, the same on every rank) using segment id `segment` for the
    /// node windows.
    ///
    /// Every rank must give the same counts (capacity), element type and
    /// block size ([`AlltoallvOptions::block_bytes`]); ranks that disagree
    /// all get [`Error::InvalidArgument`], nothing made.
    ///
    /// ```
    /// use gaspi::{Alltoallv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let a = Alltoallv::<f64>::new(&ctx, 0, &vec![4; n * n], Timeout::Block)?;
    /// assert!(Alltoallv::<f64>::new(&ctx, 1, &[4], Timeout::Block).is_err() || n == 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn new(
        ctx: &'a Context,
        segment: SegmentId,
        counts: &[usize],
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        Alltoallv::with_options(ctx, segment, counts, AlltoallvOptions::default(), timeout)
    }

    /// An alltoall: `count` elements from every rank to every rank.
    ///
    /// ```
    /// use gaspi::{Alltoallv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as u8);
    /// let mut a = Alltoallv::<u8>::alltoall(&ctx, 0, 2, Default::default(), Timeout::Block)?;
    /// let mut recv = vec![0u8; 2 * n];
    /// a.run_into(&vec![me; 2 * n], &vec![2; n], &mut recv, Timeout::Block)?;
    /// assert_eq!(recv[2 * n - 1] as usize, n - 1);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn alltoall(
        ctx: &'a Context,
        segment: SegmentId,
        count: usize,
        options: AlltoallvOptions,
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        let n = ctx.num_ranks() as usize;
        let counts = vec![count; extent::mul("ranks * ranks", n, n)?];
        Alltoallv::with_options(ctx, segment, &counts, options, timeout)
    }

    /// [`Alltoallv::new`] with options.
    ///
    /// ```
    /// use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let opts = AlltoallvOptions { block_bytes: 64, ..Default::default() };
    /// let a = Alltoallv::<u64>::with_options(&ctx, 0, &vec![100; n * n], opts, Timeout::Block)?;
    /// // Sections of 100 * ppn^2 elements in chunks of 8.
    /// assert_eq!(a.plan().unwrap().block_elems, 8);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn with_options(
        ctx: &'a Context,
        segment: SegmentId,
        counts: &[usize],
        options: AlltoallvOptions,
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        let mut creation = Creation::begin(ctx, segment, GroupId::ALL, "alltoallv", timeout);
        let shape = Self::shape(Shape::new("alltoallv").numbers(counts), options);
        creation.agree(shape, "alltoallv")?;
        let elem = std::mem::size_of::<T>().max(1);
        let block = Self::block_elems(ctx, options);
        // Two sets of chunk ids (by call parity), then the credits.
        let max_ids = (crate::config::NOTIFICATION_LIMIT as usize - ctx.num_nodes() - 1) / 2;
        let plan = AlltoallvPlan::new(Layout::of(ctx), counts, elem, block, max_ids)?;
        let node = ctx.node();
        // The same table on every node: engines that cannot see a remote
        // table check ids against their own.
        let most_in = (0..ctx.num_nodes())
            .map(|k| plan.in_chunks(k))
            .max()
            .unwrap_or(0);
        let table = 2 * most_in + ctx.num_nodes();
        // Every sum and product below is at most the total of the counts,
        // whose bytes the plan checked fit in memory.
        let received = (0..plan.layout.ranks)
            .map(|t| {
                (0..plan.layout.ranks)
                    .map(|s| plan.count(s, t))
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        let largest = (0..ctx.num_nodes())
            .map(|k| plan.window_len(k))
            .max()
            .unwrap_or(0);
        let (copies, timed) =
            Self::copies_agreed(ctx, options, &mut creation, [received, largest], elem)?;
        let data = extent::mul("alltoallv window", plan.window_len(node), copies)?;
        let data_base = Self::control_bytes(ctx).div_ceil(elem);
        let elems = extent::add("alltoallv window", data_base, data)?;
        let bytes = extent::mul("alltoallv window", elems, elem)?;
        let window = Self::create_window(ctx, segment, bytes, table, &mut creation)?;
        let (sizes, plan) = (Sizes::Fixed, Some(plan));
        let a = Self::made(
            ctx,
            segment,
            window,
            options,
            (sizes, plan),
            (data_base, (copies, timed)),
        );
        a.probed(&creation)
    }

    /// Collectively prepare an alltoallv whose counts each call brings
    /// ([`Alltoallv::run`]'s `send_counts`; they may differ from call to
    /// call and between ranks): no rank sends, and no rank receives, more
    /// than `capacity` elements in one call. The counts travel in the call
    /// (a size phase before the data; see the module documentation); a
    /// call whose counts, every rank's, are those of the call before keeps
    /// that call's plan instead of computing it again.
    ///
    /// Every rank must give the same counts (capacity), element type and
    /// block size ([`AlltoallvOptions::block_bytes`]); ranks that disagree
    /// all get [`Error::InvalidArgument`], nothing made.
    ///
    /// ```
    /// use gaspi::{Alltoallv, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let (n, me) = (ctx.num_ranks() as usize, ctx.rank() as usize);
    /// let mut a = Alltoallv::<u16>::with_unknown_sizes(&ctx, 0, 64, Default::default(), Timeout::Block)?;
    /// for it in 0..3 {
    ///     // Sparse: each rank sends `it` elements to the next rank only.
    ///     let mut row = vec![0; n];
    ///     row[(me + 1) % n] += it;
    ///     a.run(&vec![me as u16; it], &row, Timeout::Block)?;
    ///     let prev = (me + n - 1) % n;
    ///     assert_eq!(a.received(prev as u16)?.to_vec(), vec![prev as u16; it]);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn with_unknown_sizes(
        ctx: &'a Context,
        segment: SegmentId,
        capacity: usize,
        options: AlltoallvOptions,
        timeout: Timeout,
    ) -> Result<Alltoallv<'a, T>> {
        let kind = "alltoallv of unknown sizes";
        let mut creation = Creation::begin(ctx, segment, GroupId::ALL, kind, timeout);
        let shape = Self::shape(Shape::new(kind).number(capacity), options);
        creation.agree(shape, "alltoallv")?;
        let elem = std::mem::size_of::<T>().max(1);
        let (n, nodes) = (ctx.num_ranks() as usize, ctx.num_nodes());
        // Copies of staging and receive areas of `capacity` per rank each,
        // for the largest node (so that every node's copies start at the
        // same place).
        let area = extent::mul("capacity * ranks per node", capacity, ctx.ranks_per_node())?;
        let copy = extent::mul("alltoallv window", area, 2)?;
        let (copies, timed) =
            Self::copies_agreed(ctx, options, &mut creation, [capacity, copy], elem)?;
        let data = extent::mul("alltoallv window", copy, copies)?;
        let data_bytes = extent::mul("alltoallv window", data, elem)?;
        let matrices = extent::mul("alltoallv count matrices", n, n)?;
        let count_bytes = extent::mul("alltoallv count matrices", matrices, 16)?;
        let control = extent::add("alltoallv window", Self::control_bytes(ctx), count_bytes)?;
        let data_base = control.div_ceil(elem);
        let bytes = extent::add("alltoallv window", data_base * elem, data_bytes)?;
        let block = Self::block_elems(ctx, options);
        // The same on every node (senders compute the ids of the count
        // rows from it): from the largest node's receive area.
        let most = crate::config::NOTIFICATION_LIMIT as usize - 2 * nodes - 1;
        let data_ids = (area.div_ceil(block) + nodes).min(most);
        let table = data_ids + 2 * nodes;
        let window = Self::create_window(ctx, segment, bytes, table, &mut creation)?;
        let sizes = Sizes::Unknown {
            capacity,
            data_ids,
            copy,
        };
        let a = Self::made(
            ctx,
            segment,
            window,
            options,
            (sizes, None),
            (data_base, (copies, timed)),
        );
        a.probed(&creation)
    }

    /// `shape` with the element type and the options that lay out the
    /// windows and the chunks between nodes (the block size and the copies
    /// of the data area; the others are each rank's own, agreed on in the
    /// calls, or the node's): what every rank must give alike.
    fn shape(shape: Shape, options: AlltoallvOptions) -> Shape {
        shape
            .debug(&std::any::type_name::<T>())
            .number(options.block_bytes)
            .debug(&options.copies)
    }

    /// The copies of the data area ([`AlltoallvOptions::copies_for`])
    /// where a rank receives at most `received` elements of `elem` bytes
    /// per call and the largest node's data area holds `area`. Where the
    /// options leave them to their rule ([`AlltoallvOptions::copies`]
    /// `None`, the same on every rank: the shapes agreed), a step of
    /// `creation` agrees on whether some rank of the job shares its cores
    /// with other ranks and on the least shared memory free among the
    /// hosts (an allreduce). With them, whether the calls measure how
    /// many they turn through ([`AlltoallvOptions::rotation_timed`]).
    fn copies_agreed(
        ctx: &Context,
        options: AlltoallvOptions,
        creation: &mut Creation,
        [received, area]: [usize; 2],
        elem: usize,
    ) -> Result<(usize, bool)> {
        // Whether cores are shared, and `u64::MAX` less the room (the
        // largest is the least room; unknown: no word of it).
        let mut words = [0, 0];
        if options.copies.is_none() {
            words[0] = u64::from(ctx.engine.host_shares_cores());
            words[1] = ctx.engine.shm_free().map_or(0, |free| u64::MAX - free);
            creation.agree_max(&mut words)?;
        }
        let room = match words[1] {
            0 => None,
            w => Some(usize::try_from(u64::MAX - w).unwrap_or(usize::MAX)),
        };
        let bytes = |elems: usize| elems.saturating_mul(elem);
        let shared = words[0] != 0;
        let copies = options.copies_for(bytes(received), bytes(area), room)?;
        Ok((copies, options.rotation_timed(copies, shared)))
    }

    /// The step of `creation` that makes the window.
    fn create_window(
        ctx: &Context,
        segment: SegmentId,
        bytes: usize,
        table: usize,
        creation: &mut Creation,
    ) -> Result<Window> {
        let table = u32::try_from(table).map_err(|_| {
            Error::InvalidArgument(format!("an alltoallv needing {table} notification ids"))
        })?;
        let opts = WindowOptions::default().notifications(table);
        creation.window(|t| ctx.window_create_with(segment, bytes.max(1), GroupId::ALL, opts, t))
    }

    /// The last step of `creation`: probe the single copies
    /// (`Alltoallv::probe_single_copy`), which resumes where a call that
    /// timed out left it. On an error the creation keeps the window for
    /// the next call (a timeout) or deletes it, not this alltoallv's drop.
    fn probed(mut self, creation: &Creation) -> Result<Self> {
        let deadline = creation.timeout().deadline();
        let r = creation.last(self.probe_single_copy(deadline));
        self.keep_window = r.is_err();
        r.map(|()| self)
    }

    /// Which of this node's sections go unstaged, straight from their
    /// senders (`Alltoallv::direct_to`), for the plan in use: those to
    /// another node whose non-empty pieces average at least
    /// [`AlltoallvOptions::direct_min`] bytes, where the engine writes
    /// from any memory. Every rank of the node finds the same.
    pub(super) fn plan_direct(&mut self) {
        let Some(p) = self.plan.as_ref() else {
            return;
        };
        let node = self.ctx.node();
        let nodes = p.layout.nodes();
        let elem = std::mem::size_of::<T>();
        let mine = p.layout.node_ranks(node);
        let direct = |to: usize| {
            let min = match (
                self.ctx.writes_from_memory_to(self.peer(to)),
                self.options.direct_min,
            ) {
                _ if to == node => return false,
                (PutFrom::No, _) | (_, Some(usize::MAX)) => return false,
                (_, Some(min)) => min,
                (PutFrom::Mapped, None) => AlltoallvOptions::DEFAULT_DIRECT_MIN,
                (PutFrom::Transport, None) => AlltoallvOptions::DEFAULT_TRANSPORT_DIRECT_MIN,
            };
            let theirs = p.layout.node_ranks(to);
            let pieces = mine
                .clone()
                .flat_map(|s| theirs.clone().map(move |t| (s, t)))
                .filter(|&(s, t)| p.count(s, t) > 0)
                .count();
            let bytes = p.section_len(node, to).saturating_mul(elem);
            pieces > 0 && bytes / pieces >= min
        };
        self.direct_to = (0..nodes).map(direct).collect();
        self.staged_len = (0..nodes)
            .filter(|&to| to != node && !self.direct_to[to])
            .map(|to| p.section_len(node, to))
            .sum();
        // (Saturating: a receiver whose buffer could hold them checked the
        // sums; no other is offered.)
        let (n, me) = (p.layout.ranks, self.ctx.rank() as usize);
        self.push_at.clear();
        self.push_at.resize(n, 0);
        for s in 0..me {
            for (t, at) in self.push_at.iter_mut().enumerate() {
                *at = at.saturating_add(p.count(s, t));
            }
        }
    }
}
