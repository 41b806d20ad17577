//! Allreduce (and barrier) over nodes with node-shared windows and shared
//! notifications: the algorithm of Al Ahad et al. 2018 (notified
//! communication in shared windows, GASPI), section III.
//!
//! # One call
//! 1. Every rank copies its contribution into its input slot of the node's
//!    window and then sets its arrival word (one cache line per local rank,
//!    written only by its rank: no read-modify-write on a line that the
//!    whole node polls). From 256 KiB on, with ordinary or non-temporal
//!    stores, whichever its calls have measured faster
//!    ([`AllreduceOptions::stream_inputs`], `stream_choice.rs`).
//! 2. The node's ranks split the work into *instances*, each reducing the
//!    node's inputs over an element range and then combining it with the
//!    same instance on every other node. Instance `i` of node `q` runs on
//!    the node's local rank `i % local_num(q)`, so on full nodes the ranks
//!    with the same local rank talk to each other (Al Ahad et al. 2018: "all ranks
//!    subsequently perform the above dissemination algorithm with ranks
//!    which share the same node-local rank id").
//!    - **Replicated** (small messages): one instance per local rank, each
//!      over the whole message. Every rank computes the whole result; no
//!      rank waits for another after its own instance. With the direct
//!      exchange or on one node, while the node's ranks share cores, the
//!      first local rank to see every input reduces them once for the
//!      whole node into its window and the others wait for that (a
//!      *shared reduction*, [`AllreduceOptions::share_reduction`]): ranks
//!      that take turns on a core would otherwise each spend their turn on
//!      the same reduction. Each rank reads every local input, so on one
//!      node with a core per rank the largest replicated call shrinks
//!      with the node's ranks ([`AllreduceOptions::node_replicate_inputs`]).
//!    - **Split** (larger messages): the message is cut into fractions,
//!      one per local rank (`message size / local ranks`, fractions of at
//!      least [`AllreduceOptions::fraction_min`] bytes); each rank reduces
//!      its fraction, and a node barrier ends the call. A rank does not
//!      put in the elements of its own fraction: it reduces them straight
//!      from its input. On a job of one node, calls from
//!      [`AllreduceOptions::pipeline_min`] bytes on (where the node's data
//!      outgrows the caches) are **pipelined**: cut into chunks that pass
//!      through a small ring of staging slots, each put in, reduced and
//!      copied out while it is still in the caches (`pipeline.rs`); the
//!      copies into the caller's buffer take ordinary or non-temporal
//!      stores, whichever the calls have measured faster
//!      ([`AllreduceOptions::stream_copies`], `stream_choice.rs`).
//! 3. Between nodes ([`AllreduceAlgorithm`]), an instance runs
//!    - the **dissemination** with partial reductions
//!      ([`Dissemination`](crate::plan::Dissemination)): `floor(log2 n)` steps, partial results sent
//!      out of band as soon as they exist; latency-optimal, for small
//!      messages on many nodes;
//!    - a pipelined **ring** reduce-scatter + allgather: the fraction is cut
//!      into one chunk per node and chunks into blocks; each block is
//!      reduced along the ring and then written, complete, straight into
//!      every node's result area. Bandwidth-optimal, for large messages;
//!    - or, replicated only, the **direct** exchange for few nodes: every
//!      rank writes its input once into each other node's window (any rank
//!      of a node reaches the node's window) and every rank reduces all
//!      inputs itself, in rank order. One round instead of a node phase
//!      plus `log2 n` steps; `nodes - 1` messages per rank, so
//!      [`AllreduceAlgorithm::Auto`] takes it while that is no more than
//!      the dissemination's `steps + partials`. While the job's ranks
//!      share cores (agreed by all ranks when the allreduce is created),
//!      the direct exchange sends **node partials** instead: the last local
//!      rank to put in its input reduces the node's inputs in local-rank
//!      order and writes that one partial into each other node's window,
//!      and the first local rank to see every node's partial reduces them
//!      in node order into the node's window (`nodes - 1` messages per
//!      node, one reduction per node; replicated up to
//!      [`AllreduceOptions::shared_replicate_max`]). Node partials are
//!      exchanged directly beyond the dissemination's message count too,
//!      on up to 16 nodes, while a node's partials to the others come to
//!      at most 64 KiB: one round instead of `log2 n` rounds of hand-offs
//!      between ranks that wait for a core (`options::auto_direct_max`).
//!
//!    Where the MPI engine spans hosts (its messages beat its notified
//!    writes), the automatic algorithm's replicated calls (up to 16 nodes;
//!    replicated while a node's partials to the others come to at most
//!    [`AllreduceOptions::message_replicate_max`], 6 MiB, divided by the
//!    node's ranks where each has a core; 256 KiB between hosts emulated
//!    on one machine) exchange node
//!    partials as MPI messages between the nodes' first ranks: the node's
//!    partial as above, sent by its first rank to every other node's,
//!    which puts the ones it receives into its node's window, where the
//!    node reduces them as if notified writes had brought them. The
//!    messages carry the `Allreduce`'s number and the call's, so that
//!    what a rank sent for a call it gave up is never taken for another
//!    (`engine/mpi/keyed.rs`).
//! 4. The result lies in the node's window: the whole message (split or
//!    shared reduction), or each rank's own copy (replicated).
//!
//! # Determinism
//! Each value is reduced in a fixed order. The same inputs give
//! bit-identical results call after call and run after run.
//! - Ring and direct: every block is reduced once (ring), all inputs are
//!   reduced in rank order (direct, by every rank or once per node), or
//!   every node's partial (its inputs in local-rank order) is reduced in
//!   node order (direct with node partials, also as messages), so
//!   **every rank gets bit-identical results**,
//!   floating point included.
//! - Dissemination: every rank of a node gets bit-identical results (split:
//!   one copy per node; replicated: the same operations on the same
//!   values); ranks of *different* nodes combine the node values in
//!   different (cyclically rotated) orders, so floating-point sums and
//!   products may differ between nodes in the last bits. Integers, `min`
//!   and `max` are exact everywhere.
//!
//! The reduction must be associative and commutative (up to rounding).
//!
//! # Reuse
//! Calls reuse the window and the notification ids. Inputs, the direct
//! exchange's slots and the dissemination's receive slots alternate by call
//! parity; a rank can only be two calls ahead of another after that one
//! finished the call two back. Ring blocks use one id per block and
//! direction: a node receives a block of the next call only after its
//! successor received the whole result of this call, which includes this
//! node's having consumed every block of it.
//!
//! # Files
//! - `options.rs`: the public options, and which algorithm a call of a
//!   given size runs;
//! - `areas.rs`, `call_plan.rs`: the window's memory map, and what one call
//!   does (instances, ring blocks);
//! - `memory.rs`: the only raw access to the window's bytes;
//! - `node_reduce.rs`: the engine of a call (create, plan, advance, resume);
//! - `strategies.rs`: the replicated reductions (own, shared, node
//!   partials) and the direct exchange;
//! - `dissemination.rs`, `ring.rs`: the exchanges between nodes;
//! - `pipeline.rs`: the pipelined call of a job of one node;
//! - `kernels.rs`: the element-wise reduction loops;
//! - `allreduce.rs`: the public [`Allreduce`].

mod allreduce;
mod areas;
mod call_plan;
mod dissemination;
mod kernels;
mod node_reduce;
mod options;
mod pipeline;
mod ring;
mod scatter;
mod strategies;
mod stream_choice;

pub use allreduce::Allreduce;
pub(crate) use node_reduce::NodeReduce;
pub use options::{AllreduceAlgorithm, AllreduceOptions};
