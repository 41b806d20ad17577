//! The steps of a call, in order (`Alltoallv::advance`): credits or count
//! rows to the other nodes, staging, the node's chunks, the pieces for this
//! node, claims of the incoming chunks and the closing wait; the progress
//! words that tell the node's ranks how far each is, and the choice word
//! by which the node's first rank tells them the way of the next calls.

use super::rotation::Rotation;
use super::state::{
    Alltoallv, LEARNED, PLACED, PROGRESS, Phase, ROWS, SENT, STAGED, STEPS, Sizes, WAYS,
};
use crate::collectives::alltoallv_plan::{AlltoallvPlan, Chunk};
use crate::collectives::layout::Layout;
use crate::collectives::{await_control, await_control_or_spin, last_to_arrive};
use crate::error::{Error, Result};
use crate::types::{Deadline, Notification, Remote, Timeout};
use bytemuck::Pod;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// The longest nap of a rank that waits for the first node's way of
/// turning through the copies, or for the job's reads of it (which
/// nothing wakes it for: they come through the engine's atomics).
const ROTATION_NAP: Duration = Duration::from_micros(200);

/// Which of its pieces a rank copies into its node's window
/// (`Alltoallv::stage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Staged {
    /// Those for other nodes, into the staging area.
    Out,
    /// Those for this node's ranks that they do not read themselves, into
    /// the receive area.
    Node,
    /// Those that this node's ranks were to read themselves, into the
    /// receive area.
    Read,
}

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// The ways in use that the node's first rank writes, during the call
    /// in progress, for the call after it ([`Alltoallv::choice_word`]):
    /// for each choice, the way that the job's first node uses in this
    /// call where it has measured that choice (its [`LEARNED`] bit), else
    /// this node's own. The nodes take the same ways (a call later than the
    /// first node) because each node's ways change the others' calls: its
    /// ranks' single copies land in their buffers, and the timing of its
    /// chunks sets when they can scatter theirs. The first node wrote its
    /// word for this call in its previous call, just after it sent its
    /// chunks of that call, which this node has received (it is in this
    /// call); the first node's rank may not have stored it yet, and where
    /// the two nodes exchange nothing the word may be a call older or
    /// newer, which costs speed only (each node's own word keeps its ranks
    /// alike).
    fn next_choice_word(&self) -> u64 {
        // (The third choice's way is agreed apart: `rotation.rs`.)
        let [a, b, _] = self.choice.learned();
        let own = self.choice.word() & WAYS | (u64::from(a) | u64::from(b) << 1) << LEARNED;
        // Where this call measured no way, the next one likely measures
        // none either and takes no way from the word: no remote atomic
        // (through a transport, a round trip per call).
        if self.ctx.node() == 0 || !(self.once_measured || self.stream_measured) {
            return own;
        }
        let first = self.ctx.node_ranks(0).start;
        let at = Remote::new(first, self.segment, self.choice_at(self.calls));
        // Where node 0 could not be read, this node goes its own way.
        let theirs = self
            .ctx
            .atomic_fetch_add(at, 0, Timeout::Block)
            .unwrap_or(0);
        let taken = theirs >> LEARNED & WAYS;
        (own & !taken) | (theirs & (taken | taken << LEARNED))
    }

    /// At the start of a call, where the calls measure how many copies of
    /// the data area they turn through (`rotation.rs`): the first node's
    /// first rank publishes its way for the next stretch of calls (once
    /// every rank has read the word it overwrites), and every rank reads
    /// it, waiting for it while the first node is behind. [`Error::Timeout`]
    /// where `deadline` passes first: the call may be resumed (a word read
    /// is not read again).
    fn agree_rotation(&mut self, deadline: Deadline) -> Result<()> {
        let Some(mut rotation) = self.rotation else {
            return Ok(());
        };
        let (call, ctx) = (self.calls, self.ctx);
        let controls = Self::controls(ctx);
        let first = ctx.node_ranks(0).start;
        let word = |at: usize| Remote::new(first, self.segment, at);
        let patience = ctx.engine.patience();
        if let (Some(next), 0, 0) = (Rotation::publishes(call), ctx.node(), ctx.local_rank()) {
            let reads = Rotation::reads_before(next, u64::from(ctx.num_ranks()));
            let count = self.control_at(controls.rotation_reads());
            patience.poll(deadline, ROTATION_NAP, || {
                Ok((count.load(SeqCst) >= reads).then_some(()))
            })?;
            let all = self.choice.choices[2].in_use();
            let value = Rotation::word(next, self.private, all);
            self.control_at(controls.rotation(next))
                .store(value, SeqCst);
        }
        if let Some(next) = rotation.reads(call) {
            let at = word(controls.rotation(next));
            patience.poll(deadline, ROTATION_NAP, || {
                let value = ctx.atomic_fetch_add(at, 0, Timeout::Block)?;
                Ok(rotation.take(next, value)?.then_some(()))
            })?;
            ctx.atomic_fetch_add(word(controls.rotation_reads()), 1, Timeout::Block)?;
            self.rotation = Some(rotation);
        }
        Ok(())
    }

    /// Whether the call in progress, planned as `p`, has its way of single
    /// copies measured: by default, with private results, where some piece
    /// may go in one copy (inside the node: `single`, what
    /// [`Alltoallv::has_single`] found for `p`; or into an offered buffer).
    pub(super) fn measures_once(&self, p: &AlltoallvPlan, single: bool) -> bool {
        self.measured && self.private && (single || self.has_offered(p))
    }

    /// Run the call's phases from `phase` on, updating it as they finish.
    /// `Ok(Some(e))`: the call ended on every rank with error `e` (unknown
    /// sizes beyond the capacity).
    pub(super) fn advance(
        &mut self,
        phase: &mut Phase,
        send: &[T],
        send_counts: &[usize],
        mut recv: Option<&mut [T]>,
        deadline: Deadline,
    ) -> Result<Option<Error>> {
        let ctx = self.ctx;
        let (node, nodes) = (ctx.node(), ctx.num_nodes());
        let (local, local_num) = (ctx.local_rank() as usize, ctx.local_num() as usize);
        let tag = crate::collectives::call_tag(self.calls);
        let parity = (self.calls % 2) as usize;
        // What each rank's progress word says in this call: rows written,
        // rows sent, pieces staged, pieces for the node placed and pieces
        // read out of the node's send buffers (see `publish`).
        let calls = self.calls;
        let step = |j: u64| STEPS * calls + j;
        loop {
            match *phase {
                Phase::Start => {
                    // Where the calls measure the copies they turn
                    // through, the job's way for the next stretch.
                    self.agree_rotation(deadline)?;
                    *phase = match self.sizes {
                        Sizes::Unknown { .. } => self.write_row(parity, send_counts),
                        Sizes::Fixed => Phase::Opening {
                            next: 0,
                            all: false,
                        },
                    };
                }
                Phase::Rows { send } => {
                    // The ranks of this CPU that have written their rows
                    // wait for the same rows, of other CPUs' ranks.
                    let idle = || self.core_idle(step(ROWS));
                    self.gather_or_spin(step(ROWS), deadline, idle)?;
                    *phase = match send {
                        true => Phase::Opening {
                            next: 0,
                            all: false,
                        },
                        false => Phase::Counting,
                    };
                }
                Phase::Opening { next, all } => {
                    // Fixed: a credit to each node that sends here. Unknown:
                    // this node's count rows to every node. Shared out: the
                    // k-th such message is local rank k's (mod the node's),
                    // unless this rank sends them all.
                    let targets: Vec<usize> = match self.sizes {
                        // The first two calls use copies never written.
                        Sizes::Fixed if self.calls < 2 => Vec::new(),
                        Sizes::Fixed => {
                            let p = self.plan().expect("fixed");
                            p.senders_to(node)
                                .filter(|&m| p.needs_credit(m, node))
                                .collect()
                        }
                        Sizes::Unknown { .. } => (1..nodes).map(|k| (node + k) % nodes).collect(),
                    };
                    for (k, &to) in targets.iter().enumerate().skip(next) {
                        if !all && k % local_num != local {
                            continue;
                        }
                        *phase = Phase::Opening { next: k, all };
                        self.open_to(to, parity, tag, deadline)?;
                    }
                    *phase = match self.sizes {
                        Sizes::Fixed => Phase::Staging,
                        Sizes::Unknown { .. } => {
                            self.publish(step(SENT));
                            Phase::Counting
                        }
                    };
                }
                Phase::Counting => {
                    // The ranks of this CPU that have sent their rows wait
                    // for the same rows, of other nodes.
                    if let Err(refused) = self.count(parity, deadline, step(SENT))? {
                        // Every rank ends here alike; the words still say
                        // this call is over.
                        self.publish(step(PLACED));
                        return Ok(Some(refused));
                    }
                    *phase = Phase::Staging;
                }
                Phase::Staging => {
                    // Where the pieces go in `recv`, if it holds them.
                    let fits = recv
                        .as_ref()
                        .is_some_and(|r| self.place_recv(r.len()).is_ok());
                    // Measured: every rank of the node picks alike.
                    let word = self.choice_word(self.calls).load(SeqCst);
                    let [once, streaming, _] = self.choice.pick(self.calls, word & WAYS);
                    self.once_way = once || !self.measured;
                    let p = self.plan.as_ref().expect("planned");
                    let single = self.has_single(p);
                    self.once_measured = self.measures_once(p, single);
                    if !self.offer_made {
                        self.offer(tag, recv.as_deref(), fits, self.once_way);
                    }
                    self.streaming = match self.options.stream_stores {
                        Some(fixed) => fixed,
                        None => self.stream_measured && streaming,
                    };
                    // First what goes straight to other nodes (it may wait
                    // for credits: a call resumed redoes only this).
                    self.write_direct(send, send_counts, deadline)?;
                    let once = single && self.once_way;
                    // (In the window there is no `recv`: nothing to read.)
                    (self.once, self.own_direct) = (once, fits);
                    if self.once {
                        self.announce(send, recv.as_deref(), fits);
                    }
                    if !self.in_window {
                        self.stage(send, send_counts, Staged::Out);
                    }
                    self.publish(step(STAGED));
                    let elem = std::mem::size_of::<T>();
                    let outgoing = self.staged_len.saturating_mul(elem);
                    let one_sender = outgoing <= self.one_sender_max;
                    // (Only such calls count: with sizes unknown, the node's
                    // calls may change from one way to the other.)
                    self.stagings_counted += u64::from(one_sender);
                    let p = self.plan().expect("planned");
                    *phase = if one_sender {
                        // The node's last rank to stage sends it all, at
                        // once: nobody waits for the others to stage.
                        let (rounds, ranks) = (self.stagings_counted, local_num as u64);
                        let last = last_to_arrive(self.staged_count(), rounds, ranks);
                        let all = if last { p.chunks(node).len() } else { 0 };
                        Phase::Sending {
                            next: 0,
                            end: all,
                            wait: false,
                        }
                    } else {
                        let share = p.sends(ctx.rank() as usize);
                        Phase::Sending {
                            next: share.start,
                            end: share.end,
                            wait: true,
                        }
                    };
                }
                Phase::Sending { next, end, wait } => {
                    let p = self.plan.as_ref().expect("planned");
                    if wait && next < end {
                        // A chunk holds pieces of every local rank.
                        self.gather(step(STAGED), deadline)?;
                    }
                    for i in next..end {
                        *phase = Phase::Sending { next: i, end, wait };
                        let c = p.chunks(node)[i];
                        self.send_chunk(p, &c, deadline)?;
                    }
                    // The pieces for this node's ranks, while chunks travel.
                    if self.once {
                        self.decide(send, deadline)?;
                    }
                    if !self.in_window {
                        self.stage(send, send_counts, Staged::Node);
                    }
                    if local == 0 {
                        let word = self.next_choice_word();
                        self.choice_word(self.calls + 1).store(word, SeqCst);
                    }
                    *phase = Phase::Reading;
                }
                Phase::Reading => {
                    if let (true, Some(recv)) = (self.pull, recv.as_deref_mut()) {
                        self.pull_pieces(recv, deadline)?;
                    }
                    // Placed and read: this rank's pieces for its node's
                    // ranks are in place (or announced for them to read),
                    // and it reads nothing more out of its node's send
                    // buffers in this call.
                    self.publish(step(PLACED));
                    *phase = Phase::Receiving;
                }
                Phase::Receiving => {
                    let expect = self.plan().expect("planned").in_chunks(node);
                    if expect > 0 {
                        let first = self.chunk_ids(node, parity) as u32;
                        let ids = first..first + expect as u32;
                        let until = self.claimed + expect as u64;
                        // The chunks come from ranks of other nodes, so of
                        // other CPUs where `core_idle` can say yes.
                        while let Some((_, v)) = ctx.notify_claim_until_or_spin(
                            self.segment,
                            ids.clone(),
                            until,
                            deadline.timeout(),
                            || self.core_idle(step(PLACED)),
                        )? {
                            debug_assert_eq!(v, tag);
                        }
                    }
                    // Sends complete locally before staging is rewritten
                    // (in the call after next, once every rank of the node
                    // has said it reached a step of the next call).
                    ctx.wait(self.options.queue, Timeout::Block)?;
                    self.claimed += expect as u64;
                    *phase = Phase::Closing;
                }
                Phase::Closing => {
                    // Every piece for this rank is in place once its node's
                    // chunks have come (this rank's claims saw them all) and
                    // every local rank has placed its pieces, and every send
                    // buffer of the node may go once every local rank has
                    // read what it reads out of them (single copies): no
                    // need to wait for the others to see the chunks too (a
                    // hand-off of the cores each, where ranks share them).
                    // Once this CPU's ranks are all there, those awaited
                    // run on other CPUs.
                    let idle = || self.core_idle(step(PLACED));
                    self.gather_or_spin(step(PLACED), deadline, idle)?;
                    return Ok(None);
                }
            }
        }
    }

    /// [`await_control`] on this alltoallv's control lines.
    pub(super) fn await_words<const K: usize>(
        &self,
        locals: std::ops::Range<usize>,
        at_least: u64,
        deadline: Deadline,
    ) -> Result<()> {
        let lines = (&self.window, &self.control);
        await_control::<K>(self.ctx, lines, locals, at_least, deadline)
    }

    /// [`Alltoallv::await_words`] for every local rank.
    pub(super) fn await_lines<const K: usize>(
        &self,
        at_least: u64,
        deadline: Deadline,
    ) -> Result<()> {
        self.await_words::<K>(0..self.ctx.local_num() as usize, at_least, deadline)
    }

    /// Say that this rank has reached `step` of its calls
    /// (`STEPS * call + j`, `j` one of [`ROWS`], [`SENT`], [`STAGED`],
    /// [`PLACED`]), and wake the node's waiters. A rank reaches a step of a
    /// call only after it is done with the previous call (its claims and
    /// sends included), so a word at a step also says that.
    fn publish(&self, step: u64) {
        self.line(self.ctx.local_rank() as usize, PROGRESS)
            .store(step, SeqCst);
        self.wake();
    }

    /// Wait until every rank of the node has reached `step`.
    fn gather(&self, step: u64, deadline: Deadline) -> Result<()> {
        self.gather_or_spin(step, deadline, || false)
    }

    /// [`Alltoallv::gather`], spinning where it would yield while
    /// `idle_core` says that the ranks of this CPU all wait too.
    fn gather_or_spin(
        &self,
        step: u64,
        deadline: Deadline,
        idle_core: impl FnMut() -> bool,
    ) -> Result<()> {
        let (lines, all) = (
            (&self.window, &self.control),
            0..self.ctx.local_num() as usize,
        );
        await_control_or_spin::<PROGRESS>(self.ctx, lines, all, step, deadline, idle_core)
    }

    /// Copy this rank's pieces from `send` into the call's copy of the
    /// data area: those for other nodes into the staging area (`Staged::Out`),
    /// or those for this node's ranks into the receive area
    /// (`Staged::Node`), but those that their receivers read themselves,
    /// or only those (`Staged::Read`: a call that failed moves them, see
    /// [`Alltoallv::withdraw`]).
    pub(super) fn stage(&self, send: &[T], send_counts: &[usize], which: Staged) {
        let p = self.plan.as_ref().expect("planned");
        let (me, local) = (self.ctx.rank() as usize, self.ctx.local_rank() as usize);
        let first = p.layout.node_ranks(p.layout.node_of(me)).start;
        let base = self.area(self.ctx.node(), self.calls);
        let view = self.window.view::<T>();
        // Whether `t` reads this rank's piece for it out of `send` itself.
        let read = |t: usize| self.once && self.single(p, me, t) && !self.pushes(local, t - first);
        // Who reads a piece next: its receiver, or where it is staged the
        // node's ranks (one of them writes it on to the receiver's node).
        let node = self.ctx.node_ranks(self.ctx.node()).map(|r| r as usize);
        let staged_streams = self.streams_to(node);
        for (t, &c) in send_counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let to = match (p.stage_at(me, t), which) {
                (Some(_), Staged::Out) if self.direct_to[p.layout.node_of(t)] => continue,
                (Some(staged), Staged::Out) => base + staged,
                (None, Staged::Node) if t == me && self.own_direct => continue,
                (None, Staged::Node) if read(t) => continue,
                (None, Staged::Node) => self.recv_place(p, self.calls, me, t),
                (None, Staged::Read) if read(t) => self.recv_place(p, self.calls, me, t),
                _ => continue,
            };
            let streams = match which {
                Staged::Out => staged_streams,
                Staged::Node | Staged::Read => self.streams_to(std::iter::once(t)),
            };
            let piece = &send[self.send_at[t]..self.send_at[t] + c];
            view.copy_from_slice_with(to, piece, streams);
            self.count_streamed(std::mem::size_of_val(piece), streams);
        }
    }

    /// Write chunk `c` of plan `p` from and to the call's copies of the
    /// data areas, with its notification (the call's tag).
    fn send_chunk(&self, p: &AlltoallvPlan, c: &Chunk, deadline: Deadline) -> Result<()> {
        self.await_credit(p, c.to, deadline)?;
        self.post_chunk(p, c, crate::collectives::call_tag(self.calls), deadline)
    }

    /// From the third call on, node `to`'s credit for this call (or a
    /// later one) to write into its receive area, unless its chunks of the
    /// previous call said it.
    pub(super) fn await_credit(
        &self,
        p: &AlltoallvPlan,
        to: usize,
        deadline: Deadline,
    ) -> Result<()> {
        let node = self.ctx.node();
        if let (Sizes::Fixed, 2..) = (self.sizes, self.calls) {
            if p.needs_credit(node, to) {
                let credit = (2 * p.in_chunks(node) + to) as u32;
                let tag = crate::collectives::call_tag(self.calls);
                self.ctx
                    .await_notification_tag(self.segment, credit, tag, deadline)?;
            }
        }
        Ok(())
    }

    /// Post chunk `c` (see `send_chunk`).
    fn post_chunk(&self, p: &AlltoallvPlan, c: &Chunk, tag: u32, deadline: Deadline) -> Result<()> {
        let elem = std::mem::size_of::<T>();
        let (from, to) = p.chunk_at(c);
        let from = (self.area(self.ctx.node(), self.calls) + from) * elem;
        let to = (self.area(c.to, self.calls) + to) * elem;
        let parity = (self.calls % 2) as usize;
        // A section written unstaged: only the notification.
        let len = if self.direct_to[c.to] {
            0
        } else {
            c.len * elem
        };
        let streams = self.streams_to(self.ctx.node_ranks(c.to).map(|r| r as usize));
        crate::collectives::post_with(
            self.ctx,
            self.segment,
            self.options.queue,
            self.peer(c.to),
            (from, to, len),
            Notification::new((self.chunk_ids(c.to, parity) + c.id) as u32, tag),
            streams,
            deadline,
        )?;
        // (Through a transport the stores are not this process's.)
        self.count_streamed(len, streams && self.nodes_mapped);
        Ok(())
    }

    /// Fixed counts: node `to` may write here (a credit). Unknown sizes:
    /// this node's rows of count matrix `parity` to node `to`.
    fn open_to(&self, to: usize, parity: usize, tag: u32, deadline: Deadline) -> Result<()> {
        let (ctx, node) = (self.ctx, self.ctx.node());
        let (id, bytes) = match self.sizes {
            Sizes::Fixed => {
                let id = 2 * self.plan().expect("fixed").in_chunks(to) + node;
                (id, (0, 0, 0))
            }
            Sizes::Unknown { data_ids, .. } => {
                let n = ctx.num_ranks() as usize;
                let rows = ctx.node_ranks(node);
                let at = 8 * (self.matrix_at(parity) + rows.start as usize * n);
                (
                    data_ids + parity * ctx.num_nodes() + node,
                    (at, at, 8 * rows.len() * n),
                )
            }
        };
        crate::collectives::post(
            ctx,
            self.segment,
            self.options.queue,
            self.peer(to),
            bytes,
            Notification::new(id as u32, tag),
            deadline,
        )
    }

    /// Unknown sizes: write this rank's row of count matrix `parity`, and
    /// say so; the phase that follows. Up to `one_sender_max`
    /// ([`Alltoallv::one_sender_max`]) bytes of rows going
    /// out of the node, the node's last rank to write its row sends them all
    /// (`Phase::Opening` with `all`; it says nothing until they are sent:
    /// a word at [`ROWS`] or beyond then says that its rank has nothing to
    /// do until rows come), and the others, having nothing to send, say at
    /// once that they have sent theirs: a rank of this CPU that waits for
    /// rows then finds every rank of the CPU waiting too (`core_idle`),
    /// where a rank that had yet to send its share would need a turn.
    /// Above, every rank waits until all have written, then sends its
    /// share.
    fn write_row(&mut self, parity: usize, send_counts: &[usize]) -> Phase {
        let n = send_counts.len();
        let me = self.ctx.rank() as usize;
        let row: Vec<u64> = send_counts.iter().map(|&c| c as u64).collect();
        self.control
            .copy_from_slice(self.matrix_at(parity) + me * n, &row);
        let (nodes, local_num) = (self.ctx.num_nodes(), self.ctx.local_num() as usize);
        let outgoing = (nodes - 1)
            .saturating_mul(local_num)
            .saturating_mul(n)
            .saturating_mul(std::mem::size_of::<u64>());
        let step = STEPS * self.calls;
        if outgoing > self.one_sender_max {
            self.publish(step + ROWS);
            return Phase::Rows { send: true };
        }
        self.rows_counted += 1;
        if last_to_arrive(self.rows_count(), self.rows_counted, local_num as u64) {
            return Phase::Opening { next: 0, all: true };
        }
        self.publish(step + SENT);
        Phase::Rows { send: false }
    }

    /// Unknown sizes: wait for every other node's count rows, then plan the
    /// call from the whole matrix. Every rank computes the same plan, so a
    /// capacity exceeded ends the call on all alike (`Ok(Err(_))`).
    /// While every rank of this CPU has reached `sent` (its rows sent), it
    /// waits for the same rows, and the wait spins where it would yield
    /// ([`Alltoallv::core_idle`]).
    fn count(&mut self, parity: usize, deadline: Deadline, sent: u64) -> Result<Result<()>> {
        let Sizes::Unknown {
            capacity, data_ids, ..
        } = self.sizes
        else {
            return Ok(Ok(()));
        };
        let ctx = self.ctx;
        let (n, nodes) = (ctx.num_ranks() as usize, ctx.num_nodes());
        if nodes > 1 {
            let first = (data_ids + parity * nodes) as u32;
            let until = self.claimed + nodes as u64 - 1;
            while ctx
                .notify_claim_until_or_spin(
                    self.segment,
                    first..first + nodes as u32,
                    until,
                    deadline.timeout(),
                    || self.core_idle(sent),
                )?
                .is_some()
            {}
            self.claimed = until;
        }
        let mut matrix = std::mem::take(&mut self.matrix);
        matrix.resize(n * n, 0);
        self.control
            .copy_to_slice(self.matrix_at(parity), &mut matrix);
        // The counts of the last plan again (an application that repeats
        // its pattern): that plan, which passed the checks below, is this
        // call's; every rank finds the same, having made the same plans.
        let same = self.plan.as_ref().is_some_and(|p| {
            p.counts.len() == matrix.len()
                && p.counts.iter().zip(&matrix).all(|(&c, &m)| c as u64 == m)
        });
        if same {
            self.matrix = matrix;
            return Ok(Ok(()));
        }
        let counts: Vec<usize> = matrix.iter().map(|&c| c as usize).collect();
        self.matrix = matrix;
        let elem = std::mem::size_of::<T>().max(1);
        let block = Self::block_elems(ctx, self.options);
        let layout = Layout::of(ctx);
        // Made in the memory of the plan before the last, where there is one.
        let plan = match self.spare_plan.take() {
            Some(mut p) => p.renew(layout, &counts, elem, block, data_ids).map(|()| p),
            None => AlltoallvPlan::new(layout, &counts, elem, block, data_ids),
        };
        let over = |what: &str, r: usize, total: usize| {
            Error::InvalidArgument(format!(
                "rank {r} {what} {total} elements in this call, the alltoallv's capacity is {capacity}"
            ))
        };
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => return Ok(Err(e)),
        };
        for r in 0..n {
            let sent: usize = (0..n).map(|t| plan.count(r, t)).sum();
            let got: usize = (0..n).map(|s| plan.count(s, r)).sum();
            let refused = if sent > capacity {
                over("sends", r, sent)
            } else if got > capacity {
                over("receives", r, got)
            } else {
                continue;
            };
            // The plan in use stays (the last call's result is its).
            self.spare_plan = Some(plan);
            return Ok(Err(refused));
        }
        self.spare_plan = self.plan.replace(plan);
        self.plan_direct();
        Ok(Ok(()))
    }
}
