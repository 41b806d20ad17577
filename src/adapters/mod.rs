//! MPI-semantic adapters: MPI-3 one-sided communication on top of notified
//! communication, for teams porting flat-MPI codes.
//!
//! - [`RmaWindow`]: `MPI_Win` with `put`, `get`, `accumulate`,
//!   `get_accumulate`, `fetch_and_op` and `compare_and_swap`, each
//!   documented with its MPI counterpart;
//! - active-target synchronisation with [`RmaWindow::fence`] in three
//!   designs (Santhanaraman et al. 2009, [`FenceDesign`]): notified (Fence-Imm-RI),
//!   immediate-optimised (Fence-Imm-Opt) and deferred (Fence-Def);
//! - passive-target synchronisation with [`RmaWindow::lock`],
//!   [`RmaWindow::lock_all`], their unlocks and the flushes, over an MCS
//!   readers-writer queue lock (Hatanaka et al. 2015) in two designs ([`LockDesign`]);
//! - RMA broadcast (Paznikov 2023): linear ([`RmaWindow::bcast_linear`]),
//!   binomial tree relayed by broadcaster threads and its node-aware
//!   variant ([`RmaWindow::broadcaster`], [`Broadcaster`]).
//!
//! The window's memory is a node-shared window ([`Context::window_create`]):
//! an operation whose target is on the caller's node is a plain load or
//! store into the target's region (Zhou et al. 2015), one whose target is on
//! another node goes through the queues like any GASPI operation.
//!
//! [`Context::window_create`]: crate::Context::window_create

mod bcast;
mod fence;
mod gate;
mod lock;
mod mcs;
#[cfg(all(test, gaspi_loom))]
mod mcs_model;
mod rma;
mod window;
mod words;

pub use bcast::{BcastImpl, Broadcaster};
pub use rma::{RmaElem, RmaWindow};
pub use window::{AccumulateOp, Assert, FenceDesign, LockDesign, LockType, RmaOptions};
