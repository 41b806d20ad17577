//! GASPI for Rust: segments of remotely accessible memory, queues of
//! one-sided operations, and notifications that tell a target its data has
//! arrived.
//!
//! The default engine runs the ranks of a job as processes on one machine
//! sharing memory: a write is a copy into the target's segment, a
//! notification a store after it, waiting spins briefly and then sleeps in
//! the kernel. Start jobs with the `gaspi-run` launcher (or
//! [`launcher::Launch`] from code), or run a program on its own as a job of
//! one rank.
//!
//! ```
//! use gaspi::{Alloc, Config, Context, GroupId, Local, Notification, Remote, Timeout};
//!
//! let ctx = Context::init(Config::default())?;
//! let (me, n) = (ctx.rank(), ctx.num_ranks());
//! ctx.segment_create(0, 1 << 16, GroupId::ALL, Timeout::Block, Alloc::Initialized)?;
//!
//! // Put my rank into slot `me` of my right neighbour's segment and notify it.
//! let seg = ctx.segment::<u64>(0)?;
//! seg.set(0, me as u64);
//! let right = (me + 1) % n;
//! let slot = 8 * (1 + me as usize);
//! ctx.write_notify(Local::new(0, 0), Remote::new(right, 0, slot), 8,
//!                  Notification::new(me as u32, 1), 0, Timeout::Block)?;
//!
//! // Wait for my left neighbour's notification, take it, read the data.
//! let left = (me + n - 1) % n;
//! let id = ctx.notify_waitsome(0, left as u32..left as u32 + 1, Timeout::Block)?;
//! ctx.notify_reset(0, id)?;
//! assert_eq!(seg.get(1 + left as usize), left as u64);
//! ctx.wait(0, Timeout::Block)?;
//! # Ok::<(), gaspi::Error>(())
//! ```
//!
//! Modules by GASPI chapter: start and stop in [`Context`]; segments in
//! [`SegmentView`] and the `segment_*` methods; one-sided communication
//! (`write`, `read`, `*_notify`, lists, `notify`) and queues (`wait`,
//! `queue_*`); notifications (`notify_waitsome`, `notify_reset`); atomics;
//! passive communication; groups and collectives (`group_*`, `barrier`,
//! `allreduce`); the collectives on node windows ([`Allgatherv`],
//! [`Allreduce`], [`Alltoallv`]). The README maps every GASPI procedure to its call.
//! ARCHITECTURE.md shows the layers of the source, bottom up.
//!
//! # Where `unsafe` lives
//! - The engine's memory modules (`engine/`: `shm.rs`, which owns every
//!   `mmap`, and `segment.rs`, `notify.rs`, `inbox.rs`, `group.rs`,
//!   `job.rs`, `epoch.rs`, `wait.rs`; `memcopy.rs`, the one copy routine
//!   every transfer uses, with AVX2 intrinsics, non-temporal stores
//!   included; `lent.rs`, window memory lent to a transport's nonblocking
//!   messages, which keeps the mapping alive while MPI may use it), each
//!   block next to the bounds it relies on.
//! - The GPI-2 transport (`engine/gpi2/`, feature `gpi2`): calls into
//!   GPI-2's C API.
//! - The MPI transport (`engine/mpi/`, feature `mpi`): `ffi.rs` wraps MPI's
//!   C API; its `unsafe fn`s (puts, gets, nonblocking messages, messages
//!   sent from or received into lent window memory) and their callers
//!   keep each buffer alive until MPI is done with it.
//! - `sys.rs`: the three `pre_exec` closures that run in a forked rank
//!   (parent-death signal, CPU binding, the process manager's socket for
//!   MPI jobs), and libc's `process_vm_readv` and `process_vm_writev`
//!   (rustix has neither): the first copies another process's memory into
//!   a buffer borrowed mutably (the alltoallv's single copies), or this
//!   process's own memory between two buffers it borrows (to time that
//!   copy once); the second copies a borrowed buffer into another
//!   process's memory that it offered (the alltoallv's single copies
//!   between nodes), writing nothing of this process. Every other system call goes
//!   through rustix's safe functions (`mmap`/`munmap` excepted, unsafe by
//!   nature), none through raw syscall numbers.
//! - `reaper.rs`: the fork of the process that cleans up after a killed
//!   launcher or job, and what that child may call only unsafely (libc's
//!   `clone` on a stack of its own, as a fork that runs no library's fork
//!   handlers, and the freeing of that stack and the child's plan once it
//!   has been reaped; libc's `signal` and `_exit`; `close_range` by its
//!   number; rustix wraps neither).
//! - The collectives' window access (`collectives/memory.rs`) and its
//!   callers (the node reduction in `collectives/hierarchical/`, the
//!   allgatherv's messages between hosts), each naming the step of the
//!   call protocol that keeps other writers away; in `hierarchical/
//!   kernels.rs`, the call of the reduction loop's AVX2 build, made only once
//!   the CPU is known to have AVX2.
//! - The public `unsafe fn`s [`Context::segment_bind`],
//!   [`Context::segment_use`], [`SegmentView::as_slice`] and
//!   [`SegmentView::as_mut_slice`], which forward their callers' promises.
//!
//! Every `unsafe` block carries a `SAFETY:` comment (clippy's
//! `undocumented_unsafe_blocks`, denied in CI).

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Every unsafe block says why it holds (CI denies warnings).
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]
// `ok_or(Error::X { .. })` builds the error (and, Error having drop glue,
// drops it) even on success; callgrind showed that on the hot path of every
// lookup, so errors are built lazily even where clippy finds it needless.
#![allow(clippy::unnecessary_lazy_evaluations)]

// The layers, bottom up (ARCHITECTURE.md; each imports only from those
// above it in this list, which tests/layers.rs checks).
// Vocabulary:
mod config;
pub mod env;
mod error;
mod extent;
mod reaper;
mod sys;
mod types;
// The engine: mapped memory, wake-ups, job control, transports.
mod engine;
// The launcher.
pub mod launcher;
// The context: the state a rank holds.
mod context;
// The GASPI chapters (`impl Context`).
mod atomics;
mod notifications;
mod onesided;
mod passive;
mod queues;
mod segments;
mod traffic;
mod windows;
// Collectives on windows, MPI-semantic adapters, start-up.
mod adapters;
mod collectives;
#[cfg(feature = "mpi")]
mod mpi_interop;
mod start;
pub mod testing;

pub use adapters::{
    AccumulateOp, Assert, BcastImpl, Broadcaster, FenceDesign, LockDesign, LockType, RmaElem,
    RmaOptions, RmaWindow,
};
pub use collectives::{
    Allgatherv, AllgathervOptions, Allreduce, AllreduceAlgorithm, AllreduceOptions, Alltoallv,
    AlltoallvOptions, ReduceOp, Reducible, model, plan,
};
pub use config::{
    Config, Engine, GROUP_LIMIT, NOTIFICATION_LIMIT, QUEUE_MAX, QUEUE_SIZE_LIMIT, RELAY_NAP_MAX,
    SEGMENT_LIMIT, WaitMode,
};
pub use context::Context;
pub use context::traffic::{Traffic, TrafficCounts};
pub use error::{Error, Result, Side};
pub use notifications::NotifyCounts;
pub use segments::SegmentView;
pub use types::{
    Alloc, GroupId, ListEntry, Local, Notification, NotificationId, NotificationValue, QueueId,
    Rank, RankState, Remote, SegmentId, Timeout,
};
pub use windows::{Window, WindowOptions};

/// Compile-time proof of the thread-safety claims in the documentation.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Context>();
    send_sync::<SegmentView<u8>>();
    send_sync::<Error>();
};

/// Plain-old-data marker traits for segment views and reductions
/// (re-exported from `bytemuck`, with its derive).
///
/// A crate that does not depend on `bytemuck` itself derives them by
/// pointing the derive at this re-export:
///
/// ```
/// #[derive(Clone, Copy, gaspi::Pod, gaspi::Zeroable)]
/// #[bytemuck(crate = "gaspi::bytemuck")]
/// #[repr(C)]
/// struct MinLoc {
///     value: f64,
///     rank: u64,
/// }
/// let v: &[u8] = gaspi::bytemuck::bytes_of(&MinLoc { value: 1.0, rank: 2 });
/// assert_eq!(v.len(), 16);
/// ```
pub use bytemuck::{Pod, Zeroable};

/// The `bytemuck` crate, for `#[bytemuck(crate = "gaspi::bytemuck")]` on
/// the derives of [`Pod`] and [`Zeroable`] (and its casts).
pub use bytemuck;

/// The README and the guide's chapters: their ```rust blocks run as doc
/// tests, so they cannot drift from the API.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/guide/windows.md")]
    struct Windows;
    #[doc = include_str!("../docs/guide/collectives.md")]
    struct Collectives;
    #[doc = include_str!("../docs/guide/launching.md")]
    struct Launching;
    #[doc = include_str!("../docs/guide/porting.md")]
    struct Porting;
    #[doc = include_str!("../docs/guide/porting-stencil.md")]
    struct PortingStencil;
    #[doc = include_str!("../docs/guide/engines.md")]
    struct Engines;
    #[doc = include_str!("../docs/guide/mpi.md")]
    struct MpiEngine;
    #[doc = include_str!("../docs/guide/semantics.md")]
    struct Semantics;
    #[doc = include_str!("../docs/guide/benchmarking.md")]
    struct Benchmarking;
    #[doc = include_str!("../docs/guide/troubleshooting.md")]
    struct Troubleshooting;
}
