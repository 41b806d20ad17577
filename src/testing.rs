//! Run the body of a `#[test]` as a real multi-process job.
//!
//! [`Job::run`] called from a test starts `N` copies of the test binary
//! through the [`launcher`](crate::launcher), each told to run only this
//! test; inside those copies the same call sees that it is a rank, builds a
//! [`Context`] and runs the body. The parent checks that every rank
//! succeeded and that the job left no shared memory behind, and prints the
//! ranks' output if not. A panic (a failed `assert!`) in any rank fails the
//! test. A test may start several jobs one after the other; each rank runs
//! only the body of the job it was started for.
//!
//! ```no_run
//! // in tests/my_test.rs
//! #[test]
//! fn ring() {
//!     gaspi::testing::Job::new(&[2, 4]).run(|ctx| {
//!         ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block).unwrap();
//!     });
//! }
//! ```

use crate::config::{Config, Engine};
use crate::context::Context;
use crate::launcher::{Binding, Launch, Output, Report, describe_status};
use std::time::Duration;

/// Set in the ranks of a test job: the name of the test they run.
const TEST_VAR: &str = "GASPI_TEST_NAME";
/// Set in the ranks of a test job: which of the test's jobs they belong to.
const JOB_VAR: &str = "GASPI_TEST_JOB";
const PPN_VAR: &str = "GASPI_TEST_PPN";
/// `all`: run every layout of [`layouts`] across hosts too.
const LAYOUTS_VAR: &str = "GASPI_TEST_LAYOUTS";

thread_local! {
    /// Jobs started so far by the test running on this thread (each test
    /// runs on a thread of its own, in the parent and in the ranks alike).
    static JOBS_SEEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Number this job within its test.
fn next_job_index() -> usize {
    JOBS_SEEN.with(|c| {
        let i = c.get();
        c.set(i + 1);
        i
    })
}

/// What this process is for the job numbered `index` of the running test.
enum Role {
    /// The test itself: start the job.
    Parent,
    /// A rank of this job: run the body.
    Rank,
    /// A rank of another job of the same test: do nothing.
    Bystander,
}

/// A job of the current test: sizes, node layout, config, time limit.
///
/// ```no_run
/// // in tests/ring.rs: 2 and 4 ranks, in nodes of 2, each rank checks its data.
/// use gaspi::testing::Job;
/// use gaspi::{Alloc, GroupId, Local, Notification, Remote, Timeout};
/// #[test]
/// fn ring_write_notify() {
///     Job::new(&[2, 4]).ppn(2).run(|ctx| {
///         ctx.segment_create(0, 64, GroupId::ALL, Timeout::Block, Alloc::Initialized).unwrap();
///         let (me, n) = (ctx.rank(), ctx.num_ranks());
///         ctx.segment::<u64>(0).unwrap().set(0, me as u64);
///         let to = Remote::new((me + 1) % n, 0, 8);
///         ctx.write_notify(Local::new(0, 0), to, 8, Notification::new(0, 1), 0, Timeout::Block).unwrap();
///         ctx.notify_waitsome(0, 0..1, Timeout::Block).unwrap();
///         assert_eq!(ctx.segment::<u64>(0).unwrap().get(1), ((me + n - 1) % n) as u64);
///         ctx.wait(0, Timeout::Block).unwrap();
///         ctx.barrier(GroupId::ALL, Timeout::Block).unwrap();
///     });
/// }
/// ```
#[derive(Clone, Debug)]
pub struct Job {
    sizes: Vec<usize>,
    ppn: Option<usize>,
    config: Config,
    timeout: Duration,
    env: Vec<(String, String)>,
    binding: Binding,
}

/// Ranks per node of the jobs whose test gives no layout:
/// `GASPI_TEST_PPN`, else all ranks on one node. `GASPI_TEST_PPN=1` runs
/// such tests with every rank a node of its own, so that everything they
/// do crosses nodes (and, on the GPI-2 engine, GPI-2).
fn default_ppn() -> Option<usize> {
    std::env::var(PPN_VAR).ok()?.parse().ok().filter(|&p| p > 0)
}

/// The layouts `(ranks, ranks per node)` a test that tries many runs its
/// jobs on: all of `all`, or where the tests are [`trimmed`] a covering
/// few: the first layout, the one with the most nodes (of at most
/// [`WIDEST_NODES_MAX`]) and the first whose last node is partly filled.
/// The choice depends on the environment only, so the ranks of a test see
/// the same jobs as its parent.
///
/// ```no_run
/// // in a test: every layout on the native engine, three across hosts.
/// for (ranks, ppn) in gaspi::testing::layouts(&[(4, 4), (6, 2), (7, 3), (12, 1)]) {
///     gaspi::testing::Job::new(&[ranks]).ppn(ppn).run(|ctx| {
///         ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block).unwrap();
///     });
/// }
/// ```
pub fn layouts(all: &[(usize, usize)]) -> Vec<(usize, usize)> {
    if trimmed() {
        covering(all)
    } else {
        all.to_vec()
    }
}

/// Whether tests trim what they try to a covering few: on an engine with
/// a transport between hosts ([`through_transport`]), unless
/// `GASPI_TEST_LAYOUTS=all` asks for everything there too. Every job
/// there costs seconds (GPI-2 1.6's `gaspi_proc_init` samples the clock
/// for about a second of CPU in every rank; over MPI each notified write
/// between emulated hosts waits for its target to be scheduled, a
/// fraction of a millisecond when the ranks share a few cores), so
/// [`layouts`] keeps three layouts, and the crate's own tests run fewer
/// calls and jobs of fewer ranks.
///
/// ```
/// // A test that repeats a call 100 times, 10 where trimmed.
/// let calls = if gaspi::testing::trimmed() { 10 } else { 100 };
/// // On the native engine nothing is trimmed.
/// if std::env::var(gaspi::env::ENGINE).is_err() {
///     assert_eq!(calls, 100);
/// }
/// ```
pub fn trimmed() -> bool {
    through_transport() && !std::env::var(LAYOUTS_VAR).is_ok_and(|v| v == "all")
}

/// Whether the tests run on an engine with a transport between hosts
/// (`GASPI_ENGINE=gpi2` or `mpi`), where what crosses hosts costs far more
/// than on the native engine's shared memory and some of its choices
/// differ (how much a test tries there: [`trimmed`]).
///
/// ```
/// // A check of a choice the native engine makes on shared memory only.
/// let shared_memory_only = !gaspi::testing::through_transport();
/// // Without GASPI_ENGINE, the native engine: no transport.
/// if std::env::var(gaspi::env::ENGINE).is_err() {
///     assert!(shared_memory_only);
/// }
/// ```
pub fn through_transport() -> bool {
    std::env::var(crate::env::ENGINE)
        .is_ok_and(|e| matches!(Engine::parse(&e), Some(Engine::Gpi2 | Engine::Mpi)))
}

/// Whether this machine's kernel copies between processes three or more
/// times slower where the destination lies a few bytes past the source's
/// offset within a page (8 or 24, measured once per process): where it does, an
/// [`Alltoallv`](crate::Alltoallv) sends pieces between such buffers through
/// the window rather than in one copy.
///
/// ```
/// // In a test of an alltoallv whose buffers lie at different offsets
/// // within a cache line: whether its large pieces may come in one copy.
/// let one_copy_expected = !gaspi::testing::kernel_copy_offsets_slow();
/// println!("single copies expected: {one_copy_expected}");
/// ```
pub fn kernel_copy_offsets_slow() -> bool {
    crate::sys::cross_copy_slow_offsets() > 0
}

/// The most nodes of the widest layout [`layouts`] keeps across hosts
/// (where `all` has one that small). 12 emulated hosts of one rank on a
/// 2-core machine took 45 of the 60 s that `tests/allreduce.rs`'s small
/// calls ran on the MPI engine (8 hosts cover every path that 12 do: the
/// non-power-of-two counts come with the partly filled layout).
pub const WIDEST_NODES_MAX: usize = 8;

/// The layouts of `all` that [`layouts`] keeps across hosts, in this order:
/// the first, the one with the most nodes up to [`WIDEST_NODES_MAX`] (of
/// those, the fewest ranks; the one with the fewest nodes where none is
/// that small), the first with a partly filled last node.
fn covering(all: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let nodes = |&(ranks, ppn): &(usize, usize)| ranks.div_ceil(ppn.max(1));
    // Up to the cap, more nodes first; past it, fewer.
    let width = |l: &(usize, usize)| match nodes(l) {
        n if n <= WIDEST_NODES_MAX => n as isize,
        n => -(n as isize),
    };
    let widest = all
        .iter()
        .copied()
        .max_by_key(|l| (width(l), std::cmp::Reverse(l.0)));
    let partial = all.iter().copied().find(|&(r, p)| p > 0 && r % p != 0);
    let mut few = Vec::new();
    for l in all
        .first()
        .copied()
        .into_iter()
        .chain(widest)
        .chain(partial)
    {
        if !few.contains(&l) {
            few.push(l);
        }
    }
    few
}

/// The running test's name as libtest and nextest give it (the thread name).
fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .expect("gaspi::testing must be called from a #[test] function's thread")
        .to_string()
}

fn role(index: usize) -> Role {
    if !std::env::var(TEST_VAR).is_ok_and(|n| n == test_name()) {
        return Role::Parent;
    }
    match std::env::var(JOB_VAR) {
        Ok(i) if i == index.to_string() => Role::Rank,
        _ => Role::Bystander,
    }
}

/// Print what every rank said, for a failed job: first the ranks that
/// ended on their own (the cause: an error, a panic), then those the
/// launcher stopped, then where the stopped ones were (long backtraces
/// last, so that a truncated log still shows the cause).
fn dump(report: &Report) -> String {
    let mut s = String::new();
    let (own, stopped): (Vec<_>, Vec<_>) =
        report.ranks.iter().partition(|o| !o.stopped_by_launcher);
    for o in own.iter().chain(&stopped) {
        s.push_str(&format!(
            "--- rank {} (pid {}) {}{} ---\n{}{}",
            o.rank,
            o.pid,
            describe_status(o.status),
            if o.stopped_by_launcher {
                ", stopped by the launcher"
            } else {
                ""
            },
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    for o in &stopped {
        if let Some(at) = &o.at_stop {
            s.push_str(&format!(
                "--- rank {} when the launcher stopped it ---\n{at}",
                o.rank
            ));
        }
    }
    s
}

impl Job {
    /// A job run once for each number of ranks in `sizes`.
    ///
    /// ```no_run
    /// // One job of 1 rank, then one of 3.
    /// gaspi::testing::Job::new(&[1, 3]).run(|ctx| assert!(ctx.rank() < ctx.num_ranks()));
    /// ```
    pub fn new(sizes: &[usize]) -> Job {
        Job {
            sizes: sizes.to_vec(),
            ppn: None,
            config: Config::default(),
            timeout: Duration::from_secs(120),
            env: Vec::new(),
            binding: Binding::default(),
        }
    }

    /// Ranks per node (`gaspi-run --ppn`).
    ///
    /// ```no_run
    /// // 6 ranks in 3 nodes of 2.
    /// gaspi::testing::Job::new(&[6]).ppn(2).run(|ctx| assert_eq!(ctx.num_nodes(), 3));
    /// ```
    pub fn ppn(mut self, ppn: usize) -> Job {
        self.ppn = Some(ppn);
        self
    }

    /// The configuration every rank initialises with.
    ///
    /// ```no_run
    /// let cfg = gaspi::Config { queue_num: 2, ..Default::default() };
    /// gaspi::testing::Job::new(&[2]).config(cfg).run(|ctx| assert_eq!(ctx.queue_num(), 2));
    /// ```
    pub fn config(mut self, config: Config) -> Job {
        self.config = config;
        self
    }

    /// Set `key` to `value` in every rank's environment (the launcher's
    /// own variables win).
    ///
    /// ```no_run
    /// gaspi::testing::Job::new(&[2]).env("MY_SETTING", "1").run(|_ctx| {
    ///     assert_eq!(std::env::var("MY_SETTING").as_deref(), Ok("1"));
    /// });
    /// ```
    pub fn env(mut self, key: &str, value: &str) -> Job {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// How the ranks are bound to the CPUs the test may use
    /// (`gaspi-run --bind`; default [`Binding::Block`]).
    ///
    /// ```no_run
    /// use gaspi::launcher::Binding;
    /// // 4 ranks in nodes of 2, each node's ranks on different CPUs.
    /// gaspi::testing::Job::new(&[4]).ppn(2).binding(Binding::Spread).run(|ctx| {
    ///     ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block).unwrap();
    /// });
    /// ```
    pub fn binding(mut self, binding: Binding) -> Job {
        self.binding = binding;
        self
    }

    /// Stop and fail the job if it runs longer (default 120 s).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// // A hang fails the test after 10 s instead of 120 s.
    /// gaspi::testing::Job::new(&[2]).timeout(Duration::from_secs(10)).run(|ctx| {
    ///     ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::Block).unwrap();
    /// });
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Job {
        self.timeout = timeout;
        self
    }

    fn launch(&self, index: usize, n: usize) -> Report {
        let name = test_name();
        let exe = std::env::current_exe().expect("path of the test binary");
        let mut l = Launch::new(exe, n)
            .args([
                "--exact",
                name.as_str(),
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env(TEST_VAR, &name)
            .env(JOB_VAR, index.to_string())
            .env("RUST_BACKTRACE", "1")
            .output(Output::Capture)
            .timeout(self.timeout)
            .backtraces_on_stop(true)
            .grace(Duration::from_secs(5))
            .binding(self.binding);
        for (k, v) in &self.env {
            l = l.env(k, v);
        }
        if let Some(p) = self.ppn.or_else(default_ppn) {
            l = l.ppn(p);
        }
        let report = l.run().expect("starting the test job");
        assert!(
            report.left_after_cleanup.is_empty(),
            "the launcher could not remove {:?}",
            report.left_after_cleanup
        );
        report
    }

    /// Run `body` on every rank, for each size; every rank must return
    /// normally and the job must leave no shared memory behind.
    ///
    /// ```no_run
    /// gaspi::testing::Job::new(&[4]).run(|ctx| {
    ///     let mut sum = [0u32];
    ///     ctx.allreduce(&[1u32], &mut sum, gaspi::ReduceOp::Sum, gaspi::GroupId::ALL, gaspi::Timeout::Block).unwrap();
    ///     assert_eq!(sum[0], 4);
    /// });
    /// ```
    pub fn run(self, body: impl Fn(&Context)) {
        let index = next_job_index();
        match role(index) {
            Role::Parent => {}
            Role::Bystander => return,
            Role::Rank => {
                let ctx = Context::init(self.config.clone()).expect("Context::init in a test rank");
                body(&ctx);
                ctx.term().expect("proc_term");
                return;
            }
        }
        for &n in &self.sizes {
            let report = self.launch(index, n);
            assert!(
                report.success(),
                "job of {n} ranks failed{}:\n{}",
                if report.timed_out { " (timed out)" } else { "" },
                dump(&report)
            );
            assert!(
                report.left_by_ranks.is_empty(),
                "job of {n} ranks left shared memory behind: {:?}",
                report.left_by_ranks
            );
        }
    }

    /// Run `body` on every rank without creating a context for it (to test
    /// initialisation itself), then let `check` judge each job's report in
    /// the parent.
    ///
    /// ```no_run
    /// // Every rank initialises by itself; the parent judges the report.
    /// gaspi::testing::Job::new(&[2]).run_raw(
    ///     || {
    ///         let bad = gaspi::Config { queue_num: 0, ..Default::default() };
    ///         assert!(gaspi::Context::init(bad).is_err());
    ///     },
    ///     |_, report| assert!(report.success()),
    /// );
    /// ```
    pub fn run_raw(self, body: impl Fn(), check: impl Fn(usize, &Report)) {
        let index = next_job_index();
        match role(index) {
            Role::Parent => {}
            Role::Bystander => return,
            Role::Rank => return body(),
        }
        for &n in &self.sizes {
            let report = self.launch(index, n);
            let context = dump(&report);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(n, &report)));
            if let Err(e) = r {
                eprintln!("job of {n} ranks, per rank:\n{context}");
                std::panic::resume_unwind(e);
            }
        }
    }

    /// Like [`Job::run`], but `check` judges each job's report in the parent
    /// instead of requiring success (for jobs in which a rank is meant to
    /// die).
    ///
    /// ```no_run
    /// // Rank 1 dies on purpose; the others must see it and end cleanly.
    /// gaspi::testing::Job::new(&[3]).run_and_check(
    ///     |ctx| {
    ///         if ctx.rank() == 1 {
    ///             std::process::abort();
    ///         }
    ///         let _ = ctx.barrier(gaspi::GroupId::ALL, gaspi::Timeout::ms(5_000));
    ///     },
    ///     |_, report| assert!(!report.ranks[1].status.success()),
    /// );
    /// ```
    pub fn run_and_check(self, body: impl Fn(&Context), check: impl Fn(usize, &Report)) {
        let config = self.config.clone();
        self.run_raw(
            || {
                let ctx = Context::init(config.clone()).expect("Context::init in a test rank");
                body(&ctx);
                ctx.term().expect("proc_term");
            },
            check,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::covering;

    #[test]
    fn the_covering_layouts_are_the_first_the_widest_and_a_partial_one() {
        let all = [(4, 4), (6, 2), (7, 3), (12, 1), (5, 5), (11, 1)];
        // The widest of at most 8 nodes (3; of those, fewer ranks).
        assert_eq!(covering(&all), [(4, 4), (6, 2), (7, 3)]);
        let all = [(1, 1), (12, 1), (8, 1), (9, 1), (7, 2)];
        assert_eq!(covering(&all), [(1, 1), (8, 1), (7, 2)]);
        // None of at most 8 nodes: the fewest.
        assert_eq!(covering(&[(12, 1), (10, 1), (9, 1)]), [(12, 1), (9, 1)]);
        // The first is the widest; no partial node.
        assert_eq!(covering(&[(8, 1), (4, 2), (2, 2)]), [(8, 1)]);
        assert_eq!(
            covering(&[(1, 1), (8, 2), (5, 2)]),
            [(1, 1), (8, 2), (5, 2)]
        );
        assert!(covering(&[]).is_empty());
    }
}
