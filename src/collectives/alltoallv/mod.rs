//! Alltoallv on node-shared windows with node-level aggregation: the
//! future work of Al Ahad et al. 2018, section V (an AlltoallV on shared
//! windows, and one message set per pair of nodes instead of one per pair
//! of ranks), built on [`AlltoallvPlan`](crate::plan::AlltoallvPlan).
//!
//! Every node has one window with copies of its data area, used by calls
//! in turn (call `k` copy `k % copies`, an even number of them: two for
//! small calls, more for results that are read,
//! [`AlltoallvOptions::copies`]; where ranks share cores, `k % copies` or
//! `k % 2` as the calls measure faster, the same on every node:
//! `rotation.rs`):
//! a staging area for its sections to other nodes and a receive area
//! with one section per source node (see
//! [`crate::plan::AlltoallvPlan`]). Two copies let a call start while the
//! previous result is still being read, so no barrier opens a call; more
//! let the lines a rank read leave its cache before a sender writes them
//! again. Two calls in a row use copies of different parity, so the last
//! call before this one to use its copy is the call before the previous
//! one, or older. One call with counts known at creation
//! ([`Alltoallv::new`]), on every rank:
//! 1. from the third call on, the node's ranks tell every node that sends
//!    to it, and to which it sends nothing, that it may write this call's
//!    copy (a "credit" notification per such node, shared out among them):
//!    having passed the previous call's closing wait, every rank of the
//!    node is done with the result of the call before, and so with every
//!    older call that used this copy. Where the two nodes send each other
//!    data, no credit is needed: a node's chunks of the previous call
//!    said as much (a node writes its chunks only once all its ranks have
//!    staged, that is, once all are done with the call before);
//! 2. the rank copies its pieces for other nodes into the staging area, at
//!    their place in their node pair's section, and says so in its
//!    progress word (a cache line per local rank at the window's start);
//! 3. the rank waits until every rank of its node has staged, if it sends
//!    chunks at all, and writes its share of the node's chunks (balanced by
//!    bytes among the local ranks) with `write_notify`, each once its
//!    target node's credit for this call is there. Up to
//!    [`AlltoallvOptions::one_sender_max`] bytes going out of the node
//!    (by default 64 KiB, or no limit where the node's ranks are all bound
//!    to one CPU), the node's last rank to stage (a counter in the
//!    window tells) writes all the node's chunks instead, and no rank waits
//!    for the others' staging. Then the rank copies its pieces for ranks of
//!    its own node straight into the receive area while the chunks travel,
//!    and says so in its word (where ranks read pieces out of each other's
//!    send buffers, below, once it has also read its own: before it claims
//!    chunks);
//! 4. the node's ranks claim the node's incoming chunks from its one table
//!    until all have come; the rank waits until every rank of the node has
//!    placed its pieces for the node: every piece is in place, and no send
//!    buffer of the node is still read. It need not wait for the others to
//!    see the chunks too, which costs a hand-off of the cores where ranks
//!    share them. Where a rank is bound to one CPU on which only ranks of
//!    its node may run (`Alltoallv::core_mates`), and those have placed
//!    their pieces, both waits spin instead of yielding: the ranks they
//!    wait for run on other CPUs, and a yield would only hand the CPU to
//!    a rank that hands it back.
//!
//! The waits on the progress words are one-sided: a rank that arrives
//! last does not wait for a release, unlike a barrier's. On one node a
//! call is one copy per piece and one such wait. An empty node pair
//! sends nothing, credits included. The result stays in the window
//! ([`Alltoallv::received`]) until the rank's next call, or is copied into
//! the caller's buffer ([`Alltoallv::run_into`]; a rank's piece for itself
//! then goes straight from its send buffer into that buffer), at
//! `MPI_Alltoallv`'s displacements where given
//! ([`Alltoallv::run_into_displaced`]).
//!
//! **Large pieces unstaged** ([`AlltoallvOptions::direct_min`]): where
//! the pieces of a node pair are large, each rank of the sending node
//! writes its own pieces for that node straight from its send buffer into
//! the target's receive area in step 2 (after the target's credit),
//! complete there before it says it has staged, and the node's chunks of
//! that pair in step 3 carry only their notifications: one copy where
//! staging and the aggregated write make two.
//!
//! **Pieces made in the window** ([`Alltoallv::outgoing`],
//! [`Alltoallv::run_in_window`]): a rank may write its pieces for the next
//! call where steps 2 and 3 would copy them (its slots of the staging area,
//! its sections of the receive area) and skip both copies: inside a node a
//! piece then moves not at all, between nodes once. The places of a call
//! are free from when the rank's previous call has returned: that call's
//! closing wait saw every rank of the node done with the call before it
//! (and so with every older call that used the same copy), and its chunk
//! writes completed.
//!
//! **Single copies** inside a node, for private results: two copies
//! through the window cost each byte a write and a read of lines another
//! core has just written. Where the node's ranks may read each other's
//! memory, a rank of [`Alltoallv::run_into`] reads its large pieces from
//! the node's ranks straight out of their send buffers with
//! `process_vm_readv` (one copy, by the kernel; see
//! [`AlltoallvOptions::single_copy_min`]) in the calls whose way the job
//! has measured faster (`timed_choice.rs`; every rank of the node takes
//! the same way in a call, `Alltoallv::choice_word` says how). Each rank
//! of such a call announces it in
//! its control line (its buffers' addresses, where its pieces for and
//! from the node's ranks lie in them, and whether it reads its pieces
//! itself); before copying its pieces for its node, a sender that
//! reads its own pieces waits briefly for its receivers' announcements,
//! and every sender publishes a push mask:
//! the receivers it copies for as before (they call `run`, came too late,
//! or their buffers lie at offsets where the kernel's copy is slow). A
//! receiver reads the mask of each sender, in turn from the next rank on,
//! and reads the pieces not pushed; the closing wait keeps every send
//! buffer in place until all have read it. A rank whose call fails takes
//! its announcement back, waits for the readers at work (a count in its
//! control line) and copies the pieces still to be read into the window,
//! as it copies the others, before it returns: nothing is read out of its
//! buffer once the call has returned, and its node's ranks need not wait
//! for the call to go on (a caller that polls with short timeouts is out
//! of its call most of the time).
//!
//! **Single copies between nodes**, for private results where the other
//! nodes' windows are mapped here (the native engine's emulated nodes):
//! an unstaged piece would be copied twice, by its sender into the
//! target's receive area and by its receiver out of it (a read of lines
//! another core has just written: at 64 KiB per pair on 2 nodes of 2,
//! half of the call's time). So each rank offers its `run_into` buffer
//! at the start of the call in a word of its node's window (the call's
//! tag and the buffer's address), in the calls whose measured way
//! copies once (the same choice as the single copies inside the node:
//! the kernel's copy has a fixed cost per piece that two `memcpy`s
//! through the window may undercut); a sender of another node that finds
//! the offer writes its piece straight into that buffer with
//! `process_vm_writev` (into the process the job recorded for the rank,
//! while it runs: `crate::engine::processes`), the inter-node message of
//! this transport (as MPI libraries write large messages straight into a
//! posted receive buffer), and sets its bit in the receiver's mask.
//! Offers, masks and a count of the writers at work are reached with the
//! engine's remote
//! atomics, like any word of another node. A sender that does not find
//! the offer soon, or finds none (`run`, displacements, a receiver that
//! took its offer back), writes into the window as before, and the
//! receiver copies out the pieces whose bits are clear: either way is
//! right. A receiver whose call fails takes its offer back and waits for
//! the writers at work before it returns, so nothing is written into its
//! buffer once the call has returned.
//!
//! Calls in which a rank sends `calls::STREAM_MIN_BYTES` or more, and
//! private calls with a piece of `calls::STREAM_PRIVATE_MIN_PIECE` or more
//! (`calls::STREAM_SHARED_MIN_PIECE` where ranks of the node share a CPU;
//! nodes on one machine), measure
//! whether the copies into the windows (staged pieces, pieces written
//! unstaged into other nodes' windows, and the node's messages) are
//! faster with non-temporal
//! stores, which do not read each line before writing it and leave it in
//! memory rather than in the writer's cache, where a reader on a far core
//! gets it sooner ([`AlltoallvOptions::stream_stores`]); in the smaller
//! of those calls, data whose readers are all bound to the writer's one
//! CPU stay in its cache (`Alltoallv::streams_to`); the copies out
//! of the window into the caller's buffer stream with them in the large
//! calls only, whose data outgrow the caches; the same
//! calls time that choice and the single copies' (`ChoicePair`), and the
//! word the node's first rank publishes carries both. Every node takes
//! the ways of the job's first node where that node measured them (a
//! call later, `Alltoallv::next_choice_word`): one node's ways change the
//! others' calls.
//!
//! With sizes unknown in advance ([`Alltoallv::with_unknown_sizes`]), each
//! call starts with a size phase: every rank writes its row of counts into
//! the node's count matrix, and each node writes its rows to every other
//! node in one notified write (by the node's last rank to write its row, or
//! above [`AlltoallvOptions::one_sender_max`] bytes shared out among its
//! ranks once all have written). That message is
//! also the credit: a node sends it only once its ranks are done with the
//! previous call (each has written its row of this call). Where a rank's
//! CPU runs only ranks of its node, its waits for the node's rows and for
//! the other nodes' spin while every rank of the CPU waits for them too, as
//! the waits of step 4 do. Once all rows have come, every rank
//! computes the same plan (or keeps the last call's, where the counts are
//! those of the last call: a pattern that repeats costs no planning) and
//! the data moves as above. Count matrices and their ids alternate
//! between two copies by the parity of the call, so a node one call ahead
//! never overwrites rows still being read.
//!
//! The files, bottom-up: `options.rs`, `control.rs` (where the control
//! words lie in the window), `state.rs` (the fields and the window's
//! words), `rotation.rs` (which copy of the data area a call uses, and
//! how the job agrees on it), `steps.rs` (a call's steps), `single_copy.rs` (reads
//! inside a node), `offers.rs` (writes between nodes), then what callers
//! use: `create.rs`, `calls.rs`, `results.rs` and `hooks.rs` (for tests).

mod calls;
mod control;
mod create;
mod hooks;
mod offers;
mod options;
mod results;
mod rotation;
mod single_copy;
mod state;
mod steps;

pub use options::AlltoallvOptions;
pub use state::Alltoallv;
