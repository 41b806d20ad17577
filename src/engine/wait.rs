//! Waiting that does not starve the machine: check, spin, yield, then sleep.
//!
//! A [`WaitWord`] lives in shared memory next to whatever a rank waits for
//! (a notification table, a barrier, an inbox). Producers make their change
//! with a `SeqCst` operation and then call [`WaitWord::wake`], which costs one
//! load unless someone sleeps. Consumers call [`Patience::wait`] with a `poll`
//! closure that checks the condition.
//!
//! Why no wake-up is lost: a sleeper increments `sleepers` (SeqCst), reads
//! `seq`, polls once more, and only then sleeps on `seq`. A producer stores
//! its change (SeqCst) and then loads `sleepers` (SeqCst). In the single
//! total order of SeqCst operations either the producer's load sees the
//! sleeper (and bumps `seq` and wakes it; a sleeper that read `seq` before
//! the bump finds the word changed and does not block), or the sleeper's
//! final poll comes after the producer's store and sees the change.
//!
//! Whether a waiter spins depends on how many ranks of the job compete for
//! the cores *now* ([`WaitMode::Auto`]): the job header counts the ranks
//! that are `awake` (joined, not terminated, not asleep in a futex wait).
//! With a core for each of them a waiter spins, because the cache-line
//! hand-off is ~0.1 us while a futex wake costs ~8 us; with more awake ranks
//! than cores, spinning would steal the core that the awaited rank needs, so
//! the waiter yields at once (a `sched_yield` hand-off costs ~1 us here), and
//! a spinner that sees the count rise past the cores starts yielding. After
//! the yield phase it sleeps in the kernel (and stops counting as awake),
//! waking at least every `slice` to check for failed ranks.
//!
//! A job with a transport between hosts gives it [`Progress`] as its ranks
//! wait: every few looks while they spin or yield (MPI serves one-sided
//! operations to a process only while it calls MPI, on transports without
//! remote memory access in hardware), none while they sleep (the
//! transport's relay thread does then).

use super::futex;
use super::shm::Shared;
use crate::config::WaitMode;
use crate::error::{Error, Result};
use crate::types::Deadline;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A futex word and its sleeper count, on a cache line of its own.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct WaitWord {
    seq: AtomicU32,
    sleepers: AtomicU32,
    /// Sleepers a waker already counted as awake again (see
    /// [`WaitWord::credit`]).
    credit: AtomicU32,
}

// SAFETY: three atomics, valid for any bit pattern.
unsafe impl Shared for WaitWord {}

/// The job's count of awake threads, for wakers (one job per process; set
/// while an engine lives, null otherwise).
static AWAKE: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());

/// Point wakers at the job's awake count (`None`: the engine is gone).
///
/// # Safety
/// `awake` must stay valid until this is called again with `None`, and no
/// thread may wake anything after that call while the memory is freed.
pub(crate) unsafe fn set_awake_counter(awake: Option<&AtomicU32>) {
    let p = awake.map_or(std::ptr::null_mut(), |a| (a as *const AtomicU32).cast_mut());
    AWAKE.store(p, SeqCst);
}

fn awake_counter() -> Option<&'static AtomicU32> {
    let p = AWAKE.load(SeqCst);
    // SAFETY: set_awake_counter's contract keeps a non-null pointer valid
    // while an engine lives, which is while anything can wake.
    unsafe { p.as_ref() }
}

impl WaitWord {
    /// Wake sleepers, if any, after a condition was made true by a SeqCst
    /// operation.
    #[inline]
    pub(crate) fn wake(&self) {
        let s = self.sleepers.load(SeqCst);
        if s != 0 {
            self.seq.fetch_add(1, SeqCst);
            self.credit(s);
            futex::wake_all(&self.seq);
        }
    }

    /// Whether a thread sleeps (or is about to) on this word.
    #[cfg(any(feature = "gpi2", feature = "mpi"))]
    pub(crate) fn has_sleepers(&self) -> bool {
        self.sleepers.load(SeqCst) != 0
    }

    /// Advance the sequence (when the sequence itself is the condition, as
    /// a barrier's generation) and wake sleepers.
    pub(crate) fn advance(&self) {
        self.seq.fetch_add(1, SeqCst);
        let s = self.sleepers.load(SeqCst);
        if s != 0 {
            self.credit(s);
            futex::wake_all(&self.seq);
        }
    }

    /// Count the `s` sleepers about to be woken as awake *before* they run:
    /// a woken thread counts itself only once it has a CPU, and until then
    /// spinners that see free cores would keep it from getting one. The
    /// credit is topped up to `s` (never above the sleepers registered) and
    /// each registered thread settles one unit when it leaves
    /// ([`WaitWord::settle`]), so the count never drifts.
    fn credit(&self, s: u32) {
        let Some(awake) = awake_counter() else { return };
        let mut c = self.credit.load(SeqCst);
        while c < s {
            match self.credit.compare_exchange(c, s, SeqCst, SeqCst) {
                Ok(_) => {
                    awake.fetch_add(s - c, Relaxed);
                    return;
                }
                Err(now) => c = now,
            }
        }
    }

    /// A registered sleeper leaves (`slept`: it uncounted itself from
    /// `awake` and slept): take a credit if there is one, and put `awake`
    /// right.
    fn settle(&self, awake: &AtomicU32, slept: bool) {
        let mut c = self.credit.load(SeqCst);
        let credited = loop {
            if c == 0 {
                break false;
            }
            match self.credit.compare_exchange(c, c - 1, SeqCst, SeqCst) {
                Ok(_) => break true,
                Err(now) => c = now,
            }
        };
        match (credited, slept) {
            (true, false) => {
                awake.fetch_sub(1, Relaxed);
            }
            (false, true) => {
                awake.fetch_add(1, Relaxed);
            }
            _ => {}
        }
        self.sleepers.fetch_sub(1, SeqCst);
    }
}

/// How long each phase of a wait lasts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waiter {
    /// Spin (with `spin_loop` hints) for this long...
    spin: Duration,
    /// ...while at most this many ranks are awake (`u32::MAX`: always).
    spin_while_awake: u32,
    /// Then yield the CPU between checks for this long.
    yield_for: Duration,
    /// Then sleep on the futex, waking at least this often.
    slice: Duration,
}

impl Waiter {
    /// The policy for `mode` on a machine with `cores` cores.
    pub(crate) fn new(mode: WaitMode, cores: usize) -> Waiter {
        let slice = Duration::from_millis(10);
        let (spin, spin_while_awake, yield_for) = match mode {
            WaitMode::Spin => (Duration::MAX, u32::MAX, Duration::ZERO),
            WaitMode::Yield => (Duration::ZERO, 0, Duration::MAX),
            WaitMode::Block => (Duration::ZERO, 0, Duration::ZERO),
            WaitMode::Auto => (
                Duration::from_micros(100),
                cores.min(u32::MAX as usize) as u32,
                Duration::from_millis(2),
            ),
        };
        Waiter {
            spin,
            spin_while_awake,
            yield_for,
            slice,
        }
    }

    /// This policy without its sleeping phase where it has a yielding
    /// one (the automatic mode keeps its spinning, then yields for as
    /// long as the wait lasts). For a job with a transport between hosts:
    /// what other hosts send lands in memory that nothing wakes a sleeper
    /// for, so waiters look (and pump) rather than sleep.
    /// (`GASPI_WAIT=block` still sleeps: the relay threads wake sleepers,
    /// later than a look would see.)
    pub(crate) fn sleepless(self) -> Waiter {
        Waiter {
            yield_for: if self.yield_for.is_zero() {
                Duration::ZERO
            } else {
                Duration::MAX
            },
            ..self
        }
    }

    /// This policy for a rank with CPUs that no other of the `ranks` ranks
    /// of its machine may run on: its spinning takes no core that another
    /// rank needs, so it spins (where the policy spins at all) while no
    /// more threads are awake than those ranks, whatever CPUs it was told
    /// of (a launcher that binds each rank to one CPU leaves it seeing
    /// one). Helper threads awake beyond the ranks still stop it.
    pub(crate) fn own_cpus(self, ranks: usize) -> Waiter {
        let ranks = ranks.min(u32::MAX as usize) as u32;
        Waiter {
            spin_while_awake: if self.spin.is_zero() {
                self.spin_while_awake
            } else {
                self.spin_while_awake.max(ranks)
            },
            ..self
        }
    }

    /// This policy with the job's count of awake ranks.
    pub(crate) fn with<'a>(&'a self, awake: &'a AtomicU32) -> Patience<'a> {
        Patience {
            policy: self,
            awake,
            progress: None,
        }
    }
}

thread_local! {
    /// Set on a rank's helper threads (broadcasters), which never spin: a
    /// helper's spinning would hold a core that the rank's own threads or
    /// the threads it just woke need, and a helper's latency matters less.
    static HELPER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Mark (or unmark) the calling thread as a helper thread.
pub(crate) fn set_helper(helper: bool) {
    HELPER.with(|h| h.set(helper));
}

/// What a waiter gives its transport while it looks: progress for what
/// other processes do to this one (MPI's passive target, which needs the
/// target to call into MPI on transports without remote memory access in
/// hardware).
pub(crate) trait Progress: std::fmt::Debug {
    /// One cheap call into the transport.
    fn progress(&self);
}

/// A wait policy, the job's count of awake ranks, and the transport the
/// waiter gives progress to while it looks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Patience<'a> {
    policy: &'a Waiter,
    awake: &'a AtomicU32,
    progress: Option<&'a dyn Progress>,
}

impl<'a> Patience<'a> {
    /// This patience, giving `progress` to the transport every few looks
    /// once it spins or yields (not while it sleeps: the transport's relay
    /// thread does then).
    pub(crate) fn progressing(self, progress: Option<&'a dyn Progress>) -> Patience<'a> {
        Patience { progress, ..self }
    }

    fn progress(&self) {
        if let Some(p) = self.progress {
            p.progress();
        }
    }

    /// Whether spinning cannot take a core from a rank that needs it.
    fn may_spin(&self) -> bool {
        self.awake.load(Relaxed) <= self.policy.spin_while_awake && !HELPER.with(|h| h.get())
    }

    /// Whether more ranks are awake than there are cores for spinning
    /// (always in the yield and block wait modes, never in spin mode).
    pub(crate) fn oversubscribed(&self) -> bool {
        self.shares_cores(self.awake.load(Relaxed))
    }

    /// Whether `ranks` awake ranks would be more than there are cores for
    /// spinning.
    pub(crate) fn shares_cores(&self, ranks: u32) -> bool {
        ranks > self.policy.spin_while_awake
    }

    /// The spinning and yielding phases of a wait ([`Patience::wait`],
    /// [`Patience::poll`]): `Some` once `poll` succeeded, the deadline
    /// passed or `check` failed; `None` when it is time to sleep. In the
    /// yielding phase of the automatic mode, a look at which `idle_core`
    /// says yes spins instead of yielding ([`Patience::wait_or_spin`]).
    fn busy<T>(
        &self,
        deadline: Deadline,
        poll: &mut impl FnMut() -> Option<T>,
        check: &mut impl FnMut() -> Result<()>,
        idle_core: &mut impl FnMut() -> bool,
    ) -> Option<Result<T>> {
        macro_rules! check {
            () => {
                if let Err(e) = check() {
                    return Some(poll().ok_or(e));
                }
            };
        }
        let w = self.policy;

        // Phase 1: spin, while there are cores for every awake rank.
        if !w.spin.is_zero() && self.may_spin() {
            let start = Instant::now();
            let mut i: u32 = 0;
            loop {
                std::hint::spin_loop();
                if let Some(v) = poll() {
                    return Some(Ok(v));
                }
                i = i.wrapping_add(1);
                if i % 128 == 0 {
                    if start.elapsed() >= w.spin || !self.may_spin() {
                        break;
                    }
                    // Progress now and then only (every 1024 looks): a call
                    // into MPI costs many looks, and a spinner should see
                    // what it waits for as soon as it lands.
                    if i % 1024 == 0 {
                        self.progress();
                    }
                    check!();
                    if deadline.expired() {
                        return Some(Err(Error::Timeout));
                    }
                }
            }
        }

        // Phase 2: yield. The clock is read, and the transport given
        // progress, every 8 yields only (a yield that hands the core over
        // costs ~1 us; a clock read ~25 ns, and the waits of a small
        // collective are a yield or two).
        if !w.yield_for.is_zero() {
            let mut yield_start = None;
            let mut i: u32 = 0;
            let may_spin = !w.spin.is_zero();
            loop {
                if may_spin && idle_core() {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                if let Some(v) = poll() {
                    return Some(Ok(v));
                }
                i = i.wrapping_add(1);
                if i % 8 == 0 {
                    self.progress();
                    check!();
                    if deadline.expired() {
                        return Some(Err(Error::Timeout));
                    }
                    let since = *yield_start.get_or_insert_with(Instant::now);
                    if since.elapsed() >= w.yield_for {
                        break;
                    }
                }
            }
        }

        None
    }

    /// Wait until `step` returns a value or an error, or `deadline` passes
    /// ([`Error::Timeout`]), for something that nothing wakes us for (a
    /// transport's completion or notification): spin and yield as
    /// [`Patience::wait`] does, then poll with naps of up to `longest`
    /// instead of sleeping on a futex.
    pub(crate) fn poll<T>(
        &self,
        deadline: Deadline,
        longest: Duration,
        mut step: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        // A step's error ends the wait like its value: both are `Some`.
        let mut poll = || step().transpose();
        if let Some(done) = self.busy(deadline, &mut poll, &mut || Ok(()), &mut || false) {
            return done?;
        }
        poll_with_naps(deadline, longest, step)
    }

    /// Wait until `poll` returns `Some`, the deadline passes
    /// ([`Error::Timeout`]) or `check` reports an error (a failed rank).
    ///
    /// `poll` must read the awaited state with SeqCst loads and `ww` must be
    /// the word the producers of that state wake. A failure reported by
    /// `check` wins only if a poll right after it still fails: a peer may
    /// complete what we wait for and then terminate or die, and then the
    /// completion came first.
    pub(crate) fn wait<T>(
        &self,
        ww: &WaitWord,
        deadline: Deadline,
        poll: impl FnMut() -> Option<T>,
        check: impl FnMut() -> Result<()>,
    ) -> Result<T> {
        self.wait_or_spin(ww, deadline, poll, || false, check)
    }

    /// [`Patience::wait`] for a caller that knows the ranks sharing its
    /// core: while `idle_core` says that none of them has work to do (they
    /// all wait for the same thing as this rank, on other cores), the
    /// automatic mode spins where it would yield. A yield would hand the
    /// core to a rank that can only yield it back (about 1 us each way);
    /// a spin sees the awaited state as soon as another core writes it.
    /// `idle_core` must say no whenever a rank that may run on this core
    /// could have work: a spin holds the core for up to a scheduler slice.
    pub(crate) fn wait_or_spin<T>(
        &self,
        ww: &WaitWord,
        deadline: Deadline,
        poll: impl FnMut() -> Option<T>,
        idle_core: impl FnMut() -> bool,
        check: impl FnMut() -> Result<()>,
    ) -> Result<T> {
        let slice = self.policy.slice;
        self.wait_sliced(ww, deadline, (slice, slice), poll, idle_core, check)
    }

    /// [`Patience::wait`] for what either a wake-up of `ww` (this host's
    /// ranks) or nothing (a transport's message, which `poll` takes)
    /// brings: its sleeps on the futex last 5 us, then twice as long each
    /// time up to `longest`, as [`poll_with_naps`]'s naps.
    pub(crate) fn wait_or_poll<T>(
        &self,
        ww: &WaitWord,
        deadline: Deadline,
        longest: Duration,
        poll: impl FnMut() -> Option<T>,
        check: impl FnMut() -> Result<()>,
    ) -> Result<T> {
        let first = Duration::from_micros(5).min(longest);
        self.wait_sliced(ww, deadline, (first, longest), poll, || false, check)
    }

    fn wait_sliced<T>(
        &self,
        ww: &WaitWord,
        deadline: Deadline,
        (mut slice, longest): (Duration, Duration),
        mut poll: impl FnMut() -> Option<T>,
        mut idle_core: impl FnMut() -> bool,
        mut check: impl FnMut() -> Result<()>,
    ) -> Result<T> {
        macro_rules! check {
            () => {
                if let Err(e) = check() {
                    return poll().ok_or(e);
                }
            };
        }
        if let Some(v) = poll() {
            return Ok(v);
        }
        check!();
        if let Deadline::Now = deadline {
            return Err(Error::Timeout);
        }
        if let Some(done) = self.busy(deadline, &mut poll, &mut check, &mut idle_core) {
            return done;
        }
        // Phase 3: sleep on the futex.
        loop {
            check!();
            let remaining = deadline.remaining();
            if remaining == Some(Duration::ZERO) {
                return Err(Error::Timeout);
            }
            ww.sleepers.fetch_add(1, SeqCst);
            let seq = ww.seq.load(SeqCst);
            if let Some(v) = poll() {
                ww.settle(self.awake, false);
                return Ok(v);
            }
            let nap = remaining.map_or(slice, |r| r.min(slice));
            slice = (slice * 2).min(longest);
            self.awake.fetch_sub(1, Relaxed);
            futex::wait(&ww.seq, seq, Some(nap));
            ww.settle(self.awake, true);
            if let Some(v) = poll() {
                return Ok(v);
            }
        }
    }
}

/// A mutex's guard, also after a thread panicked while holding it (the
/// engine's tables stay consistent under every lock: a panic leaves
/// nothing half-written that a later holder could see).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lock `m` (poisoned or not), waiting with [`poll_with_backoff`] until
/// `deadline` while another thread holds it.
#[cfg(any(feature = "gpi2", feature = "mpi"))]
pub(crate) fn lock_until<T>(m: &Mutex<T>, deadline: Deadline) -> Result<MutexGuard<'_, T>> {
    poll_with_backoff(deadline, || {
        Ok(match m.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        })
    })
}

/// Poll `step` with growing naps (5 us to 2 ms) until it yields a value,
/// fails, or `deadline` passes ([`Error::Timeout`]). For waiting on objects
/// that another process creates, where nothing can wake us.
pub(crate) fn poll_with_backoff<T>(
    deadline: Deadline,
    step: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    poll_with_naps(deadline, Duration::from_millis(2), step)
}

/// [`poll_with_backoff`] with naps of at most `longest`.
pub(crate) fn poll_with_naps<T>(
    deadline: Deadline,
    longest: Duration,
    mut step: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let mut nap = Duration::from_micros(5);
    loop {
        if let Some(v) = step()? {
            return Ok(v);
        }
        match deadline.remaining() {
            Some(left) if left.is_zero() => return Err(Error::Timeout),
            Some(left) => std::thread::sleep(nap.min(left)),
            None => std::thread::sleep(nap),
        }
        nap = (nap * 2).min(longest);
    }
}

/// The loop of a relay thread (the GPI-2 and MPI engines'): run `round`
/// (whether it moved anything, and whether a thread of the rank sleeps
/// waiting for what it moves) until `stop`, often after activity or while
/// someone sleeps (every 20 us, or `longest` if shorter), then less and
/// less often (up to `longest`:
/// [`Config::relay_nap`](crate::Config::relay_nap), 2 ms by default)
/// while nothing arrives and nobody waits. `nap(time, waited)` sleeps
/// between rounds; it may end early when something arrives (the GPI-2
/// engine's sockets, `gpi2/arrivals.rs`). (Naps that end within 1 us of
/// their time, by a timer slack of 1 us instead of Linux's 50, woke a
/// sleeping waiter on another host no sooner on 2 cores: 0.98x the time
/// of a blocking write_notify over GPI-2, and 1.18x for a spinning one;
/// docs/guide/benchmarking.md.)
#[cfg(any(feature = "gpi2", feature = "mpi"))]
pub(crate) fn relay_naps(
    stop: &std::sync::atomic::AtomicBool,
    longest: Duration,
    mut round: impl FnMut() -> (bool, bool),
    mut nap: impl FnMut(Duration, bool),
) {
    let fast = Duration::from_micros(20).min(longest);
    let mut time = longest;
    while !stop.load(SeqCst) {
        let (busy, waited) = round();
        time = if busy || waited {
            fast
        } else {
            (time * 2).min(longest)
        };
        nap(time, waited);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    fn no_faults() -> Result<()> {
        Ok(())
    }

    #[test]
    fn a_rank_with_cpus_of_its_own_spins_while_its_machines_ranks_are_awake() {
        // Bound to one CPU of its own by mpirun, 4 ranks on the machine: it
        // saw one CPU, and spins until a fifth thread (a helper) wakes.
        let own = Waiter::new(WaitMode::Auto, 1).own_cpus(4);
        let awake = AtomicU32::new(4);
        assert!(own.with(&awake).may_spin());
        awake.store(5, SeqCst);
        assert!(!own.with(&awake).may_spin());
        // Told of more CPUs than ranks: unchanged.
        assert_eq!(
            Waiter::new(WaitMode::Auto, 8).own_cpus(4).spin_while_awake,
            8
        );
        // Modes that never spin still do not.
        for mode in [WaitMode::Yield, WaitMode::Block] {
            let w = Waiter::new(mode, 1).own_cpus(4);
            assert!(!w.with(&AtomicU32::new(1)).may_spin(), "{mode:?}");
        }
    }

    #[test]
    fn a_sleepless_policy_keeps_its_spinning_and_yields_for_ever() {
        let auto = Waiter::new(WaitMode::Auto, 4);
        let s = auto.sleepless();
        assert_eq!((s.spin, s.spin_while_awake), (auto.spin, 4));
        assert_eq!(s.yield_for, Duration::MAX);
        // Modes without a yielding phase are left as they are: blocking
        // waiters still sleep (the relay threads wake them).
        for mode in [WaitMode::Block, WaitMode::Spin] {
            let w = Waiter::new(mode, 4);
            let s = w.sleepless();
            assert_eq!((s.spin, s.yield_for), (w.spin, w.yield_for), "{mode:?}");
        }
        assert_eq!(
            Waiter::new(WaitMode::Yield, 4).sleepless().yield_for,
            Duration::MAX
        );
    }

    /// A wait word and a flag that a new thread sets, then wakes the word
    /// (the thread's handle, to join).
    fn flag_set_by_another_thread() -> (Arc<WaitWord>, Arc<AtomicBool>, std::thread::JoinHandle<()>)
    {
        let ww = Arc::new(WaitWord::default());
        let flag = Arc::new(AtomicBool::new(false));
        let (ww2, flag2) = (ww.clone(), flag.clone());
        let t = std::thread::spawn(move || {
            flag2.store(true, SeqCst);
            ww2.wake();
        });
        (ww, flag, t)
    }

    #[test]
    fn every_mode_sees_a_change_made_by_another_thread() {
        for mode in [
            WaitMode::Auto,
            WaitMode::Spin,
            WaitMode::Yield,
            WaitMode::Block,
        ] {
            let (ww, flag, t) = flag_set_by_another_thread();
            let awake = AtomicU32::new(1);
            let policy = Waiter::new(mode, 1);
            let w = policy.with(&awake);
            let got = w.wait(
                &ww,
                Deadline::Never,
                || flag.load(SeqCst).then_some(7),
                no_faults,
            );
            assert_eq!(got.unwrap(), 7);
            t.join().unwrap();
        }
    }

    #[test]
    fn polling_sees_values_errors_and_deadlines_in_every_mode() {
        for mode in [
            WaitMode::Auto,
            WaitMode::Spin,
            WaitMode::Yield,
            WaitMode::Block,
        ] {
            let (awake, policy) = (AtomicU32::new(1), Waiter::new(mode, 1));
            let w = policy.with(&awake);
            let nap = Duration::from_micros(100);
            // A value another thread makes (nothing wakes the poller).
            let flag = Arc::new(AtomicBool::new(false));
            let flag2 = flag.clone();
            let t = std::thread::spawn(move || flag2.store(true, SeqCst));
            let got = w.poll(Deadline::Never, nap, || Ok(flag.load(SeqCst).then_some(7)));
            assert_eq!(got.unwrap(), 7);
            t.join().unwrap();
            // A step's error ends the wait at its first poll.
            let mut steps = 0;
            let err = w.poll(Deadline::Never, nap, || {
                steps += 1;
                Err::<Option<()>, _>(Error::RankFailed { rank: 3 })
            });
            assert!(
                matches!(err, Err(Error::RankFailed { rank: 3 })),
                "{mode:?}"
            );
            assert_eq!(steps, 1, "{mode:?}");
            // Nothing comes: the deadline.
            let deadline = Deadline::At(Instant::now() + Duration::from_millis(5));
            let none = w.poll(deadline, nap, || Ok(None::<()>));
            assert!(matches!(none, Err(Error::Timeout)), "{mode:?}");
        }
    }

    /// A wait told that its core is idle spins where it would yield (an
    /// oversubscribed job in the automatic mode) and still sees another
    /// thread's change, a deadline and a failure; the yield and block
    /// modes ignore the hint and behave as before.
    #[test]
    fn waits_on_an_idle_core_spin_and_still_end() {
        for mode in [WaitMode::Auto, WaitMode::Yield, WaitMode::Block] {
            // 4 awake ranks on 2 cores: no spinning phase of its own.
            let (awake, policy) = (AtomicU32::new(4), Waiter::new(mode, 2));
            let w = policy.with(&awake);
            let (ww, flag, t) = flag_set_by_another_thread();
            let mut looks = 0;
            let got = w.wait_or_spin(
                &ww,
                Deadline::Never,
                || flag.load(SeqCst).then_some(7),
                || {
                    looks += 1;
                    true
                },
                no_faults,
            );
            assert_eq!(got.unwrap(), 7, "{mode:?}");
            t.join().unwrap();
            if mode != WaitMode::Auto {
                assert_eq!(looks, 0, "{mode:?} asked whether to spin");
            }
            // A wait that never succeeds: the automatic mode asks (and
            // spins) until its deadline, the others never ask.
            let d = crate::types::Timeout::ms(20).deadline();
            let mut looks = 0;
            let idle = || {
                looks += 1;
                true
            };
            let r = w.wait_or_spin(&ww, d, || None::<()>, idle, no_faults);
            assert!(matches!(r, Err(Error::Timeout)), "{mode:?}: {r:?}");
            assert_eq!(looks > 0, mode == WaitMode::Auto, "{mode:?}: {looks} looks");
            let failed = || Err(Error::RankFailed { rank: 1 });
            let r = w.wait_or_spin(&ww, Deadline::Never, || None::<()>, || true, failed);
            assert!(
                matches!(r, Err(Error::RankFailed { rank: 1 })),
                "{mode:?}: {r:?}"
            );
        }
    }

    #[test]
    fn test_and_finite_timeouts_expire_and_errors_propagate() {
        let ww = WaitWord::default();
        for mode in [WaitMode::Auto, WaitMode::Block] {
            let awake = AtomicU32::new(4);
            let policy = Waiter::new(mode, 2);
            let w = policy.with(&awake);
            assert!(matches!(
                w.wait(&ww, Deadline::Now, || None::<()>, no_faults),
                Err(Error::Timeout)
            ));
            let d = crate::types::Timeout::ms(20).deadline();
            assert!(matches!(
                w.wait(&ww, d, || None::<()>, no_faults),
                Err(Error::Timeout)
            ));
            let r = w.wait(
                &ww,
                Deadline::Never,
                || None::<()>,
                || Err(Error::RankFailed { rank: 3 }),
            );
            assert!(matches!(r, Err(Error::RankFailed { rank: 3 })));
            // A condition that holds by the time the failure is noticed wins.
            let mut polls = 0;
            let r = w.wait(
                &ww,
                Deadline::Never,
                || {
                    polls += 1;
                    (polls > 1).then_some(5)
                },
                || Err(Error::RankTerminated { rank: 1 }),
            );
            assert_eq!(r.unwrap(), 5);
        }
    }

    /// A transport's progress counter: what it serves arrives only once it
    /// has been given progress often enough.
    #[derive(Debug)]
    struct Counted(std::sync::atomic::AtomicUsize);

    impl Progress for Counted {
        fn progress(&self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// Waits that spin or yield give the transport progress as they look,
    /// and a wait for what only that progress brings ends (in the spinning
    /// phase too, and with the futex and polling waits alike).
    #[test]
    fn spinning_and_yielding_waits_give_the_transport_progress() {
        for (mode, awake) in [
            (WaitMode::Auto, 1), // spins (a core each), then yields
            (WaitMode::Auto, 4), // 4 awake on 2 cores: yields only
            (WaitMode::Spin, 1),
            (WaitMode::Yield, 1),
        ] {
            let (awake, policy) = (AtomicU32::new(awake), Waiter::new(mode, 2).sleepless());
            let counted = Counted(std::sync::atomic::AtomicUsize::new(0));
            let w = policy.with(&awake).progressing(Some(&counted));
            let served = || (counted.0.load(SeqCst) >= 3).then_some(());
            let deadline = Deadline::At(Instant::now() + Duration::from_secs(20));
            let ww = WaitWord::default();
            w.wait(&ww, deadline, served, no_faults)
                .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            let before = counted.0.load(SeqCst);
            w.poll(deadline, Duration::from_micros(50), || {
                Ok((counted.0.load(SeqCst) >= before + 3).then_some(()))
            })
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        }
    }
}
