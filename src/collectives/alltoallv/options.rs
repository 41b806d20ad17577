//! [`AlltoallvOptions`]: chunk size, queue, the one-sender limit, the
//! thresholds of single copies, unstaged pieces and streaming stores, and
//! the copies of the window's data area, with the measurements behind
//! their defaults.

use crate::error::{Error, Result};
use crate::types::QueueId;

/// Options of an [`Alltoallv`](crate::Alltoallv).
///
/// ```
/// use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
/// let ctx = Context::init(Config::default())?;
/// let n = ctx.num_ranks() as usize;
/// // Chunks of 4 KiB on queue 1.
/// let opts = AlltoallvOptions { block_bytes: 4096, queue: 1, ..Default::default() };
/// let a = Alltoallv::<u64>::with_options(&ctx, 0, &vec![1000; n * n], opts, Timeout::Block)?;
/// assert_eq!(a.plan().unwrap().block_elems, 512);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlltoallvOptions {
    /// The most bytes in one notified write between nodes: larger sections
    /// are cut into chunks that the node's ranks share out. 0 (the
    /// default): the engine's choice, as for the allgatherv's blocks.
    pub block_bytes: usize,
    /// The queue the collective posts on (default 0).
    pub queue: QueueId,
    /// Up to this many bytes going out of a node per call, the node's last
    /// rank to stage its pieces writes all the node's chunks, and no rank
    /// waits for the others to stage; above, the node's ranks share the
    /// chunks out by bytes and each waits until all have staged. With
    /// sizes unknown, the same for the node's rows of counts: up to this
    /// many bytes of them, the node's last rank to write its row sends
    /// them all. `Some(0)`: always share. `None` (the default):
    /// [`AlltoallvOptions::DEFAULT_ONE_SENDER_MAX`] where the node's ranks
    /// may run on several CPUs, and no limit where they are all bound to
    /// one CPU (as `gaspi-run --bind block` binds a node of ranks that
    /// share cores): their shares would go one after the other from that
    /// CPU anyway, each after a hand-off of it. The node's ranks must
    /// agree (the same value on all of them).
    pub one_sender_max: Option<usize>,
    /// With private results
    /// ([`Alltoallv::run_into`](crate::Alltoallv::run_into)), a piece of
    /// at least this many bytes between two ranks of one node is copied once,
    /// straight from the sender's buffer into the receiver's, by the
    /// kernel (Linux cross-memory attach, `process_vm_readv`), instead of
    /// twice through the node's window. `None` (the default):
    /// [`AlltoallvOptions::DEFAULT_SINGLE_COPY_MIN`] where the ranks have
    /// a core each, [`AlltoallvOptions::DEFAULT_SHARED_SINGLE_COPY_MIN`]
    /// where they share cores, in the calls whose way the job's calls
    /// have measured faster (once or twice: on a 2-core AMD EPYC VM two
    /// copies won, on a 2-core Intel Xeon VM one; on a 16-core Xeon with
    /// a core per rank, where every such piece went in one copy, a private
    /// call of 2 nodes of 2 took 3.5 times the in-place one at 16 KiB per
    /// pair; see the guide's alltoallv figures, docs/guide/benchmarking.md; the
    /// measuring is that of the allreduce's stores,
    /// [`AllreduceOptions::stream_inputs`](crate::AllreduceOptions::stream_inputs)).
    /// `Some(bytes)`: in every call; `Some(usize::MAX)`: never. In every
    /// case only where all ranks of the node may read each other's memory
    /// (tried when the alltoallv is made: same user, and no Yama
    /// `ptrace_scope` or seccomp rule against it) and chose the same value.
    ///
    /// Pieces of at least this many bytes (the default as above, in the
    /// same calls) from ranks of other nodes that reach this node unstaged
    /// ([`AlltoallvOptions::direct_min`]) and whose windows are mapped here
    /// (the native engine) go in one copy too: their senders write them
    /// straight into the receiver's buffer (`process_vm_writev`) where it
    /// offered it (a `run_into` without displacements), and where they may;
    /// the others come through the window.
    pub single_copy_min: Option<usize>,
    /// Pieces between two nodes that average at least this many bytes
    /// (over the non-empty pieces of the node pair) are not aggregated:
    /// every rank writes its pieces for the other node straight from its
    /// send buffer into that node's receive area, one copy where staging
    /// and the aggregated write make two, and the node's chunks carry only
    /// their notifications. Only to nodes the engine can write to from any
    /// memory (the native engine's mapped windows, and MPI; not GPI-2,
    /// which writes only from registered segments: with the GPI-2 engine,
    /// through which every operation between nodes goes, the pieces are
    /// staged whatever this says). `None` (the default):
    /// [`AlltoallvOptions::DEFAULT_DIRECT_MIN`] on the native engine,
    /// [`AlltoallvOptions::DEFAULT_TRANSPORT_DIRECT_MIN`] through MPI (the
    /// MPI engine's other nodes); `Some(usize::MAX)`: never. Every rank of
    /// a node must choose the same.
    pub direct_min: Option<usize>,
    /// Whether a call copies the pieces it stages in its node's window,
    /// those it writes unstaged into other nodes' windows, and the node's
    /// messages it writes into other nodes' windows (where this process
    /// makes those copies: the native engine) with non-temporal stores
    /// (`Some(true)`: the lines go to memory, not into this core's
    /// cache), with ordinary ones (`Some(false)`), or, `None` (the
    /// default), whichever the job's calls have measured faster, in calls
    /// where this rank sends 4 MiB or more, or, with private results
    /// ([`Alltoallv::run_into`](crate::Alltoallv::run_into)), whose
    /// readers copy every piece out within the call, a piece of 8 KiB or
    /// more to another rank (2 KiB where ranks of the node share a CPU),
    /// where the nodes are on one machine (the native engine; a transport
    /// between hosts would take a round trip per call to share the
    /// measured kind); other calls take ordinary stores. Below 4 MiB per
    /// rank, a measured call that streams keeps its stores ordinary for
    /// data whose readers are all bound to the writer's one CPU (the line
    /// is in the cache they read from). The first node's first rank times
    /// each kind, keeps the faster by a margin of 10% and tells the ranks, which try
    /// the other kind in 4 calls of every 256, as
    /// [`AllreduceOptions::stream_inputs`](crate::AllreduceOptions::stream_inputs)
    /// does. A streaming call of 4 MiB or more per rank also copies its
    /// private results out of the window with non-temporal stores. Where a
    /// call's data outgrow the caches, streaming stores save reading each
    /// line before writing it (on a 2-core Xeon VM, 8 ranks at 1 MiB per
    /// pair took 0.64 of the time in place, 0.82-0.93 with private
    /// results); where the reader's core is far from the writer's (another
    /// core complex or socket), it takes a line from memory sooner than
    /// from the writer's cache (on an AMD EPYC VM whose two cores were now
    /// near, now far apart, 8 KiB per pair with private results took
    /// about 0.6 of the time while far, and 4 ranks sharing the 2 cores
    /// about 0.55 at 4 KiB); below, and between near cores,
    /// the receivers read the pieces from the cache instead of memory.
    /// The result is the same either way.
    ///
    /// ```
    /// use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let cached = AlltoallvOptions { stream_stores: Some(false), ..Default::default() };
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 2, 4, cached, Timeout::Block)?;
    /// a.run(&vec![ctx.rank() as u64; 4 * n], &vec![4; n], Timeout::Block)?;
    /// assert_eq!(a.received(0)?.to_vec(), [0; 4]);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub stream_stores: Option<bool>,
    /// How many copies of the node window's data area (staging and receive
    /// areas) the calls use in turn, call `k` copy `k % copies`: an even
    /// number, at least 2 (two let a call start while the previous result
    /// is still read; an even number keeps consecutive calls in copies of
    /// different parity, which is what the calls' credits guard). A rank's
    /// piece for itself turns through the first two copies only: its
    /// writer and its reader are the same core.
    ///
    /// A rank that reads its result (out of the window into its buffer, or
    /// in place) takes the window's lines into its cache; when a sender
    /// writes the same lines two calls later, each store must first take
    /// them back from that cache, one line at a time. With enough copies
    /// the lines have left the reader's cache by then; but a call whose
    /// result nobody reads then writes lines no cache holds.
    ///
    /// `None` (the default): copies by a rule: 2 where a rank receives
    /// less than [`AlltoallvOptions::ROTATE_MIN`] bytes per call, else
    /// enough that each rank's results of
    /// [`AlltoallvOptions::ROTATION_BYTES`] lie between two uses of a
    /// copy, at most [`AlltoallvOptions::MAX_AUTO_COPIES`] and no more
    /// than fit [`AlltoallvOptions::ROTATION_WINDOW_MAX`] of window or a
    /// quarter of the shared memory free (never below 2), the same on
    /// every rank. Where some rank of the job shares its cores with other
    /// ranks (agreed when the alltoallv is made), the calls then measure
    /// whether turning through all of them or through the first two is
    /// faster, and the job takes the first node's way (in stretches of 64
    /// calls; a call's copy is the same on every node): the reader's lines
    /// are then in the writer's caches too, and more copies gain where
    /// the cores hand lines over fast and lose elsewhere (on a 2-core AMD
    /// EPYC (Zen 4) VM, 4 ranks in 2 nodes of 2, private results took
    /// 0.63-0.70 of the time at 16-32 KiB per pair with 16 copies where
    /// the cores were near, 0.88-1.06 where far; 8 ranks, far, 1.00-1.25
    /// and in place up to 1.97; on a 2-core Zen 5 VM, 8 ranks in 2 nodes
    /// of 4, 1.1-1.6). Where no rank shares its cores, the calls turn
    /// through all. Measured on a 2-core AMD EPYC (Zen 4) VM, a core per
    /// rank, 20 alternated rounds, the rule against 2 copies, medians of
    /// the per-round ratios (the guide's alltoallv figures,
    /// docs/guide/benchmarking.md): private results 0.73 and 0.65 of the
    /// time at 16 and 64 KiB per pair on one node of 2, 0.69 and 0.64 on
    /// 2 nodes of 1, 0.92-1.02 at 256 KiB and 1 MiB; results in place
    /// that the benchmark leaves unread (it reads the ends of each piece)
    /// 1.01-1.13 times as long (1.09-1.30 at 16-64 KiB before a rank's own
    /// piece kept to two copies).
    /// `Some(c)`: `c` copies. Every rank must give the same; an odd number
    /// or 0 is [`Error::InvalidArgument`] when the alltoallv is made.
    ///
    /// ```
    /// use gaspi::{Alltoallv, AlltoallvOptions, Config, Context, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// let n = ctx.num_ranks() as usize;
    /// let four = AlltoallvOptions { copies: Some(4), ..Default::default() };
    /// let mut a = Alltoallv::<u64>::alltoall(&ctx, 2, 4, four, Timeout::Block)?;
    /// assert_eq!(a.copies(), 4);
    /// for call in 0..5 {
    ///     a.run(&vec![call; 4 * n], &vec![4; n], Timeout::Block)?;
    ///     assert_eq!(a.received(0)?.to_vec(), [call; 4]);
    /// }
    /// let three = AlltoallvOptions { copies: Some(3), ..Default::default() };
    /// assert!(Alltoallv::<u64>::alltoall(&ctx, 3, 4, three, Timeout::Block).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub copies: Option<usize>,
}

impl AlltoallvOptions {
    /// The chunk size chosen for `block_bytes: 0` inside a host: 1 MiB
    /// (an aggregated section is usually sent whole).
    pub const DEFAULT_BLOCK_BYTES: usize = 1 << 20;
    /// The limit of `one_sender_max: None` where the node's ranks may run
    /// on several CPUs: 64 KiB. Measured here (4 and 8 ranks on 2 cores,
    /// alternated rounds): one sender took 0.85-0.96 of the shared-out
    /// time at 1-8 KiB per pair, 1.10 at 64-256 KiB on 2 nodes of 2 (256
    /// KiB going out per node). Where the node's ranks are all on one CPU
    /// (a node per CPU), no limit against this one, later (2026-12-05,
    /// Zen 4 VM): 0.90 at 32 KiB per pair in 2 nodes of 2 (128 KiB going
    /// out), 0.85 and 0.99 at 8 KiB in 2 nodes of 4 (two runs, the cores
    /// near and far), 0.99-1.01 at 64-256 KiB; hence no limit there.
    pub const DEFAULT_ONE_SENDER_MAX: usize = 64 << 10;
    /// The smallest piece that may go in one copy where the ranks have a
    /// core each (`single_copy_min: None`, the calls' way measured): 16
    /// KiB. A model of both designs
    /// (`scripts/alltoall_model.c`) put the crossover between 1 and 16 KiB
    /// per piece on a 16-core Xeon (8 and 16 ranks), where the single copy
    /// took 0.2-0.7 of the time of two from 16 KiB to 1 MiB per piece.
    /// On a 2-core AMD EPYC (Zen 5) VM, 2 ranks in 2 nodes of 1, the two
    /// copies through the window turned 3-5 times slower than usual for
    /// stretches of seconds (so did a C model of them), the kernel's copy
    /// not: measuring from 16 KiB lets the calls take it then.
    pub const DEFAULT_SINGLE_COPY_MIN: usize = 16 << 10;
    /// The smallest piece that may go in one copy where the ranks share
    /// cores (`single_copy_min: None`, the calls' way measured): 32 KiB.
    /// On a 2-core Intel Xeon VM, 4 ranks, one copy took 1.12-1.25 of the
    /// time of two at 16 KiB per pair, about the same at 32 KiB, 0.75 at
    /// 64 KiB; near a tie, measuring costs more than it finds.
    pub const DEFAULT_SHARED_SINGLE_COPY_MIN: usize = 32 << 10;
    /// The smallest piece (on average) written unstaged to a node whose
    /// window this process maps (`direct_min: None`; the native engine):
    /// 8 KiB. On a 2-core Intel Xeon VM, 4 and 8 ranks in nodes of 2,
    /// unstaged took 0.62-0.86 of the staged time at 16 KiB per pair and
    /// 0.50-0.61 from 64 KiB to 1 MiB (results in place; private
    /// 0.68-0.93 from 16 KiB), the same at 1 KiB; on a 2-core AMD EPYC
    /// (Zen 5) VM, 8 and 16 ranks in nodes of 2 and 4, 0.67-0.74 at 8-12
    /// KiB (private 0.72-0.81), the same at 4 KiB, 1.06-1.11 at 1 KiB; 4
    /// ranks in nodes of 2 the same at 8-12 KiB (see the guide's
    /// alltoallv figures, docs/guide/benchmarking.md).
    pub const DEFAULT_DIRECT_MIN: usize = 8 << 10;
    /// The same through a transport (the MPI engine's other nodes;
    /// `direct_min: None`): 256 KiB. Every piece is then a put of its
    /// own, and a node's pieces one flush: through MPICH between emulated
    /// hosts, unstaged was slower at 16 KiB per pair, mixed at 64-256 KiB,
    /// 0.7-0.9 of the staged time at 1 MiB.
    pub const DEFAULT_TRANSPORT_DIRECT_MIN: usize = 256 << 10;
    /// The fewest bytes a rank receives per call for which `copies: None`
    /// takes more than two copies: 16 KiB (below, a call moves few lines;
    /// not measured there).
    pub const ROTATE_MIN: usize = 16 << 10;
    /// How many bytes of each rank's results `copies: None` puts between
    /// two uses of a copy: 2 MiB, more than a core's level-2 cache (1 MiB
    /// on AMD Zen 5, 2 MiB on Intel Sapphire Rapids). On a 2-core Zen 5
    /// VM, 2 ranks in 2 nodes of 1 at 16 KiB per pair, private results
    /// gained nothing from 16 copies (512 KiB of a rank's results between
    /// uses) and took 0.66 of the time with 64 (2 MiB).
    pub const ROTATION_BYTES: usize = 2 << 20;
    /// The most copies `copies: None` takes: 64.
    pub const MAX_AUTO_COPIES: usize = 64;
    /// The largest window (all copies of a node's data area) for which
    /// `copies: None` takes more than two copies: 32 MiB, and no more than
    /// a [`AlltoallvOptions::ROTATION_ROOM_SHARE`]-th of the free space of
    /// the shared-memory file system (`/dev/shm`: 64 MiB in a container
    /// by default) on the host with the least.
    pub const ROTATION_WINDOW_MAX: usize = 32 << 20;
    /// `copies: None` takes more than two copies only into a window of at
    /// most this fraction of the shared memory free (4: a quarter).
    pub const ROTATION_ROOM_SHARE: usize = 4;

    /// The copies of the data area for these options (see
    /// [`AlltoallvOptions::copies`]), where a rank receives at most
    /// `received` bytes per call, the largest node's data area (one copy)
    /// holds `area` bytes and `room` is the least free
    /// space of the shared-memory file system among the job's hosts
    /// (`None`: unknown).
    ///
    /// ```
    /// use gaspi::AlltoallvOptions;
    /// let auto = AlltoallvOptions::default();
    /// assert_eq!(auto.copies_for(8 << 10, 16 << 10, None)?, 2);
    /// assert_eq!(auto.copies_for(64 << 10, 192 << 10, None)?, 32);
    /// assert_eq!(auto.copies_for(4 << 20, 8 << 20, None)?, 2);
    /// // A quarter of 12 MiB free: 16 copies of 192 KiB.
    /// assert_eq!(auto.copies_for(64 << 10, 192 << 10, Some(12 << 20))?, 16);
    /// let two = AlltoallvOptions { copies: Some(2), ..auto };
    /// assert_eq!(two.copies_for(64 << 10, 192 << 10, None)?, 2);
    /// let odd = AlltoallvOptions { copies: Some(5), ..auto };
    /// assert!(odd.copies_for(1, 1, None).is_err());
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn copies_for(&self, received: usize, area: usize, room: Option<usize>) -> Result<usize> {
        match self.copies {
            Some(c) if c < 2 || c % 2 == 1 => Err(Error::InvalidArgument(format!(
                "an alltoallv's copies of its data area must be an even number, at least 2; got {c}"
            ))),
            Some(c) => Ok(c),
            None if received < Self::ROTATE_MIN => Ok(2),
            None => {
                let wanted = Self::ROTATION_BYTES
                    .div_ceil(received)
                    .min(Self::MAX_AUTO_COPIES);
                let window = room.map_or(Self::ROTATION_WINDOW_MAX, |r| {
                    (r / Self::ROTATION_ROOM_SHARE).min(Self::ROTATION_WINDOW_MAX)
                });
                let fit = window / area.max(1);
                Ok((wanted.min(fit) & !1).max(2))
            }
        }
    }

    /// Whether the calls of an alltoallv with `copies` copies, made with
    /// these options where `cores_shared` says whether some rank of the
    /// job shares its cores, measure how many they turn through (all, or
    /// the first two: see [`AlltoallvOptions::copies`]).
    pub(super) fn rotation_timed(&self, copies: usize, cores_shared: bool) -> bool {
        self.copies.is_none() && cores_shared && copies > 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_measure_the_copies_only_by_the_rule_where_cores_are_shared() {
        let options = AlltoallvOptions::default();
        assert!(options.rotation_timed(4, true));
        assert!(!options.rotation_timed(2, true));
        assert!(!options.rotation_timed(4, false));
        let set = AlltoallvOptions {
            copies: Some(4),
            ..options
        };
        assert!(!set.rotation_timed(4, true));
    }
}
