//! Traffic counters: what a rank sent, intra-node and inter-node apart, so
//! that a test can check that an algorithm sent exactly the inter-node
//! messages its cost model says.
//!
//! Each operation is counted once, by the rank that posts it, when it
//! succeeds: a list counts one write (or read) per element, a
//! `write_notify` one write and one notification, and so does a keyed
//! message between hosts that stands for one (the window allreduce's
//! node partials as MPI messages). Notifications a rank sets in its own
//! tables by `read_notify` are not traffic.
//!
//! Counting costs no locked instruction: every thread adds to a cell of
//! its own (a plain load and store), and `Context::traffic` sums the
//! cells of all threads.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Counts of one direction of traffic.
///
/// ```
/// use gaspi::{Alloc, Config, Context, Local, Remote, Timeout};
/// let ctx = Context::init(Config::default())?;
/// ctx.segment_alloc(0, 64, Alloc::Initialized)?;
/// ctx.write(Local::new(0, 0), Remote::new(ctx.rank(), 0, 32), 16, 0, Timeout::Block)?;
/// let sent = ctx.traffic().intra;
/// assert_eq!((sent.writes, sent.bytes), (1, 16));
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficCounts {
    /// Writes (list elements count one each).
    pub writes: u64,
    /// Reads (list elements count one each).
    pub reads: u64,
    /// Notifications posted to another rank's table.
    pub notifications: u64,
    /// Atomic operations.
    pub atomics: u64,
    /// Passive messages sent.
    pub passive: u64,
    /// Payload bytes of writes, reads and passive messages.
    pub bytes: u64,
}

impl TrafficCounts {
    /// All messages: writes, reads, notifications, atomics, passive.
    ///
    /// ```
    /// let c = gaspi::TrafficCounts { writes: 2, notifications: 1, ..Default::default() };
    /// assert_eq!(c.messages(), 3);
    /// ```
    pub fn messages(&self) -> u64 {
        self.writes + self.reads + self.notifications + self.atomics + self.passive
    }
}

/// What this rank sent, by locality of the target.
///
/// ```
/// # use gaspi::{Config, Context, Notification, Timeout};
/// let ctx = Context::init(Config::default())?;
/// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
/// ctx.notify(ctx.rank(), 0, Notification::new(0, 1), 0, Timeout::Block)?;
/// // On one node, nothing crosses a node boundary.
/// let t: gaspi::Traffic = ctx.traffic();
/// assert_eq!(t.inter, gaspi::TrafficCounts::default());
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// To ranks of this rank's node (itself included).
    pub intra: TrafficCounts,
    /// To ranks of other nodes.
    pub inter: TrafficCounts,
}

/// Kinds of operation, indexes into a cell.
#[derive(Clone, Copy)]
pub(crate) enum Op {
    Write = 0,
    Read = 1,
    Notify = 2,
    Atomic = 3,
    Passive = 4,
}

const BYTES: usize = 5;
const SLOTS: usize = 6;

type Sums = [[u64; SLOTS]; 2];

/// One thread's counts, written by that thread only.
#[derive(Default)]
struct Cell([[AtomicU64; SLOTS]; 2]);

impl Cell {
    fn add(&self, inter: usize, slot: usize, n: u64) {
        let c = &self.0[inter][slot];
        c.store(c.load(Relaxed) + n, Relaxed);
    }
}

thread_local! {
    /// This thread's cell and the book it belongs to.
    static MINE: RefCell<Option<(usize, Arc<Cell>)>> = const { RefCell::new(None) };
}

/// The counters of one context.
pub(crate) struct Book {
    /// Unique among all books of the process (addresses can be reused).
    id: usize,
    cells: Mutex<Vec<Arc<Cell>>>,
    baseline: Mutex<Sums>,
}

impl Default for Book {
    fn default() -> Book {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
        Book {
            id: NEXT.fetch_add(1, Relaxed),
            cells: Mutex::new(Vec::new()),
            baseline: Mutex::new([[0; SLOTS]; 2]),
        }
    }
}

impl std::fmt::Debug for Book {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("traffic::Book")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Book {
    /// Count `n` operations of kind `op` moving `bytes` bytes.
    #[inline]
    pub(crate) fn count(&self, inter: bool, op: Op, n: u64, bytes: u64) {
        let me = self.id;
        MINE.with(|mine| {
            let mut mine = mine.borrow_mut();
            let cell = match mine.as_ref() {
                Some((book, cell)) if *book == me => cell,
                _ => {
                    let cell = Arc::new(Cell::default());
                    lock(&self.cells).push(cell.clone());
                    &mine.insert((me, cell)).1
                }
            };
            cell.add(inter as usize, op as usize, n);
            if bytes > 0 {
                cell.add(inter as usize, BYTES, bytes);
            }
        })
    }

    fn sums(&self) -> Sums {
        let mut s = [[0; SLOTS]; 2];
        for cell in lock(&self.cells).iter() {
            for (d, row) in s.iter_mut().enumerate() {
                for (k, v) in row.iter_mut().enumerate() {
                    *v += cell.0[d][k].load(Relaxed);
                }
            }
        }
        s
    }

    /// What was counted since the last [`Book::reset`], intra-node and
    /// inter-node apart.
    pub(crate) fn snapshot(&self) -> Traffic {
        let now = self.sums();
        let base = *lock(&self.baseline);
        let counts = |d: usize| {
            let v = |k: usize| now[d][k] - base[d][k];
            TrafficCounts {
                writes: v(Op::Write as usize),
                reads: v(Op::Read as usize),
                notifications: v(Op::Notify as usize),
                atomics: v(Op::Atomic as usize),
                passive: v(Op::Passive as usize),
                bytes: v(BYTES),
            }
        };
        Traffic {
            intra: counts(0),
            inter: counts(1),
        }
    }

    /// Count from zero.
    pub(crate) fn reset(&self) {
        *lock(&self.baseline) = self.sums();
    }
}
