//! A choice between two ways of doing a collective's work, made by timing
//! calls done each way: which stores an allreduce puts its inputs in with
//! and copies a pipelined result out with (`hierarchical/stream_choice.rs`),
//! whether an alltoallv copies the pieces inside a node once or twice
//! where its ranks share cores (`alltoallv/`), and which stores an
//! allgatherv with a private result puts the contributions and the blocks
//! between nodes in with (`allgatherv.rs`). Which way is faster
//! depends on the machine (the two VMs of the workplace disagree on both)
//! and, on virtual machines, on stretches of time; nothing the program can
//! read says which, so the calls measure it.
//!
//! [`TimedChoice`] first tries the two ways in turn ([`PROBES`] calls, in
//! runs of [`RUN`] calls each way) and takes the other way if, in the
//! median of its pairs of probes, it is faster by a margin; a pair is two
//! calls that differ in this choice's way only, the other choice timed by
//! the same calls taking the same way in both, so neither choice's tries
//! blur the other's comparison, and one call slowed by a descheduled rank
//! moves one ratio of eight, not the decision. From then on it keeps a
//! moving average of the time per byte of each way, takes the other way
//! when it is faster by the margin, and tries the way not in use in a
//! burst of a few calls out of every [`EXPLORE`].
//!
//! Only settled calls are timed ([`ChoicePair`]): the first [`SETTLE`]
//! calls after the ways changed pay for the change, not for their ways.
//! A call that starts while the ranks still finish the last one's copies
//! out of the window, or whose buffers' lines lie in the caches where the
//! other way left them, takes longer than the calls after it: on a 2-core
//! Xeon VM, 4 ranks, 1 MiB per pair, single copies took 1.4-2x their
//! settled time (880 us) in the first two calls after calls that copied
//! twice. Probes that changed way every call charged every single-copy
//! probe with the two copies before it, and the job settled on two
//! copies (1,300-1,500 us a call) in most runs.
//!
//! The node's first local rank times the calls and publishes the way in
//! use in a word of the node's window; every rank of the node picks by
//! that word and the call number, so that all take the same way in the
//! same call. Choices timed by the same calls try their ways in
//! different calls: a staggered one ([`TimedChoice::phased`] 1) changes way every
//! `2 * RUN` calls in its probes where a default one changes every
//! [`RUN`], a third every `4 * RUN` (each combination of ways in turn),
//! and their bursts come half and a quarter of a period apart. Either way
//! gives the same result: only the speed depends on it. [`Choices`] are
//! two or three such choices timed by the same calls ([`ChoicePair`]:
//! two). The alltoallv's third choice, of the copies its calls turn
//! through, must be the same on every node in every call (its writers
//! write into another node's copy): there the first node's way in use is
//! agreed for stretches of calls (`alltoallv/rotation.rs`).

use std::time::Duration;

/// The last [`BURST`] calls of every this many try the way not in use.
pub(crate) const EXPLORE: u64 = 256;
pub(crate) const BURST: u64 = 4;

/// Weight of a new sample in the moving averages: high enough that the
/// settled calls of one burst of tries (two in a [`ChoicePair`]) bring the
/// other way's average half of the way to its present speed (a way much
/// faster than its average says is taken after one burst, one a little
/// faster after a few); a burst that misleads is undone within a few
/// calls (the way in use is timed in every settled call).
const ALPHA: f64 = 0.3;

/// A sample counts at most this many times the average it updates (a call
/// that waited for a descheduled rank says little about the way it took).
const CLAMP: f64 = 3.0;

/// The other way must be this much faster to be taken (a fraction of the
/// time of the way in use), so that near-ties and a call's noise do not
/// flip the choice back and forth.
const MARGIN: f64 = 0.1;

/// Calls after a reset that are not timed (the first touch of the window's
/// pages and cold caches: on a 2-core Xeon VM, 4 ranks at 1 MiB per pair
/// took 15, 5 and 4 times a settled call's time in the first three calls),
/// then calls that try the two ways in turn, in runs of [`RUN`] calls,
/// before the faster is chosen: for each choice 8 pairs of settled calls
/// ([`SETTLE`]).
pub(crate) const WARMUP: u64 = 4;
pub(crate) const PROBES: u64 = 32;

/// A default choice's probes take each way for this many calls in turn (a
/// staggered one for twice as many, a third choice four times).
pub(crate) const RUN: u64 = 4;

/// Calls after a change of ways that are not timed ([`ChoicePair::record`];
/// see the module documentation).
pub(crate) const SETTLE: u64 = 2;

/// The measured choice between the usual way (`false`) and the other
/// (`true`) of one collective (see the module documentation). Each rank
/// of a node keeps one; all pick alike from the node's word.
#[derive(Clone, Debug, Default)]
pub(crate) struct TimedChoice {
    /// Nanoseconds per byte: `[usual, other]` (set once the probes are
    /// over).
    mean: [Option<f64>; 2],
    /// Nanoseconds per byte of each probe call timed, by its place among
    /// the probes.
    probes: [Option<f64>; PROBES as usize],
    /// The way in use: the other.
    other: bool,
    /// The call number of the last reset.
    since: u64,
    /// 0 for a default choice, 1 for a staggered one, 2 for the third of
    /// [`Choices`] ([`TimedChoice::phased`]).
    phase: u32,
}

impl TimedChoice {
    /// A choice of phase `phase` (0: a default one; 1: a staggered one,
    /// the second of [`Choices`]; 2: the third): its
    /// probes take each way for `RUN << phase` calls in turn (so that the
    /// two calls of each of its pairs of probes take the same ways of the
    /// choices of lower phases, and each pair of theirs the same way of
    /// this one: [`PROBES`] is `2 * (RUN << 2)`), its bursts come
    /// [`EXPLORE`]` >> phase` calls before the default one's (phase 1:
    /// half a period; phase 2: a quarter, between the others').
    pub(crate) fn phased(phase: u32) -> TimedChoice {
        debug_assert!(phase <= 2, "PROBES holds pairs of runs up to phase 2");
        TimedChoice {
            phase,
            ..TimedChoice::default()
        }
    }

    /// Whether call number `call` takes the other way, where the node's
    /// way in use is `in_use`: the usual way while warming up, then the
    /// two in turn (runs of [`RUN`] calls each, `2 * RUN` for a staggered
    /// choice), then the way in use, and the other one in a burst of
    /// [`BURST`] calls of every [`EXPLORE`].
    pub(crate) fn pick(&self, call: u64, in_use: bool) -> bool {
        match call.saturating_sub(self.since) {
            k if k < WARMUP => false,
            k if k < WARMUP + PROBES => self.probe_takes_other((k - WARMUP) as usize),
            _ => in_use ^ self.exploring(call),
        }
    }

    /// Whether call number `call` is in one of this choice's bursts of
    /// tries of the way not in use (past its warm-up and probes).
    pub(crate) fn exploring(&self, call: u64) -> bool {
        let shift = (EXPLORE >> self.phase) % EXPLORE;
        call.saturating_sub(self.since) >= WARMUP + PROBES
            && (call + shift) % EXPLORE >= EXPLORE - BURST
    }

    /// The way in use: the other (what the node's first rank publishes).
    pub(crate) fn in_use(&self) -> bool {
        self.other
    }

    /// Call number `call` of `bytes` bytes took `time`, the other way or
    /// not (as [`TimedChoice::pick`] said); the way not in use is taken if
    /// it is faster by more than [`MARGIN`].
    pub(crate) fn record(&mut self, call: u64, other: bool, bytes: usize, time: Duration) {
        let k = call.saturating_sub(self.since);
        if k < WARMUP {
            return;
        }
        let sample = time.as_nanos() as f64 / bytes.max(1) as f64;
        if k < WARMUP + PROBES {
            // (Kept only if the call took the way its probe said.)
            if other == self.pick(call, self.other) {
                self.probes[(k - WARMUP) as usize] = Some(sample);
            }
            if k + 1 == WARMUP + PROBES {
                self.decide();
            }
            return;
        }
        if self.mean == [None, None] {
            // Probes not all timed (calls that measured nothing).
            self.decide();
        }
        let m = &mut self.mean[other as usize];
        *m = Some(match *m {
            None => sample,
            Some(avg) => avg + ALPHA * (sample.min(avg * CLAMP) - avg),
        });
        if let [Some(usual), Some(others)] = self.mean {
            let (used, not_used) = if self.other {
                (others, usual)
            } else {
                (usual, others)
            };
            if not_used < used * (1.0 - MARGIN) {
                self.other = !self.other;
            }
        }
    }

    /// Whether probe number `i` (from 0) takes the other way: in runs of
    /// [`RUN`] calls in turn, of `2 * RUN` for a staggered choice.
    fn probe_takes_other(&self, i: usize) -> bool {
        (i / self.run()) % 2 == 1
    }

    /// The length of this choice's runs of probes.
    fn run(&self) -> usize {
        (RUN as usize) << self.phase
    }

    /// The probes' verdict: the median over the pairs of probes of the
    /// other way's time / the usual way's, each pair two calls a run apart
    /// (in which a choice timed by the same calls takes the same way);
    /// the other way if that median is below `1 - MARGIN`. The averages
    /// start from the usual way's median probe and that ratio. Probes not
    /// timed (not settled, for one) leave their pairs out; with no whole
    /// pair, the medians of each way's probes.
    fn decide(&mut self) {
        let step = self.run();
        let ratios: Vec<f64> = (0..self.probes.len())
            .filter(|&i| !self.probe_takes_other(i))
            .filter_map(|i| match (self.probes[i], self.probes.get(i + step)) {
                (Some(usual), Some(&Some(other))) if usual > 0.0 => Some(other / usual),
                _ => None,
            })
            .collect();
        let way = |other: bool| -> Vec<f64> {
            (0..self.probes.len())
                .filter(|&i| self.probe_takes_other(i) == other)
                .filter_map(|i| self.probes[i])
                .collect()
        };
        let usual = median(way(false));
        self.mean = match (median(ratios), usual) {
            (Some(ratio), Some(usual)) => [Some(usual), Some(usual * ratio)],
            _ => [usual, median(way(true))],
        };
        self.other = match self.mean {
            [Some(usual), Some(other)] => other < usual * (1.0 - MARGIN),
            _ => false,
        };
    }

    /// Start over from call number `call` (the calls changed, their size
    /// for one).
    pub(crate) fn reset(&mut self, call: u64) {
        *self = TimedChoice {
            since: call,
            phase: self.phase,
            ..TimedChoice::default()
        };
    }

    /// The averages `[usual, other]`, for tests.
    #[cfg(test)]
    pub(crate) fn means(&self) -> [Option<f64>; 2] {
        self.mean
    }
}

/// A test hook that gives the time of each call a node's first rank
/// measures, from the call's number and its ways (choice `i`'s at `i` of
/// its [`Choices`]), instead of the time it took
/// (`Alltoallv::testing_call_times`, `Allgatherv::testing_call_times`).
pub(crate) struct CallTimes<'a, const N: usize = 2>(
    pub(crate) Box<dyn Fn(u64, [bool; N]) -> Duration + Send + Sync + 'a>,
);

impl<const N: usize> std::fmt::Debug for CallTimes<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallTimes")
    }
}

/// The median of `v` (the mean of the middle two of an even count), or
/// `None` if it is empty.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Measured choices of one collective, timed by the same calls: choice
/// `i` is a [`TimedChoice::phased`] one of phase `i` (it tries its ways
/// in other calls than the others: see the module documentation). Two
/// ([`ChoicePair`]): the allreduce's stores for its inputs and for its
/// private copies (`hierarchical/stream_choice.rs`); the allgatherv's
/// stores (the first only: `allgatherv.rs`). Three: the alltoallv's
/// single copies inside a node, its stores into the windows and how many
/// copies of its window its calls turn through (`alltoallv/`). It times
/// only settled calls: those whose ways were taken by the [`SETTLE`]
/// calls recorded before them, one after the other.
#[derive(Clone, Debug)]
pub(crate) struct Choices<const N: usize> {
    pub(crate) choices: [TimedChoice; N],
    /// The last call recorded and its ways.
    last: Option<(u64, [bool; N])>,
    /// How many calls in a row, up to the last, took its ways.
    streak: u64,
}

/// Two measured choices ([`Choices`]).
pub(crate) type ChoicePair = Choices<2>;

impl<const N: usize> Default for Choices<N> {
    fn default() -> Choices<N> {
        Choices {
            choices: std::array::from_fn(|i| TimedChoice::phased(i as u32)),
            last: None,
            streak: 0,
        }
    }
}

impl<const N: usize> Choices<N> {
    /// The ways in use as the word the node's first rank publishes: bit
    /// `i` choice `i`'s.
    pub(crate) fn word(&self) -> u64 {
        (0..N).fold(0, |w, i| w | u64::from(self.choices[i].in_use()) << i)
    }

    /// Which of the choices have decided from timed calls (their probes
    /// are over; since their reset): before, a choice's way in use says
    /// nothing.
    pub(crate) fn learned(&self) -> [bool; N] {
        self.choices
            .each_ref()
            .map(|c| c.mean.iter().any(Option::is_some))
    }

    /// The ways (choice `i`'s at `i`) of call number `call` where the
    /// node's word ([`Choices::word`]) is `word`.
    pub(crate) fn pick(&self, call: u64, word: u64) -> [bool; N] {
        std::array::from_fn(|i| self.choices[i].pick(call, word >> i & 1 != 0))
    }

    /// Call number `call` of `bytes` bytes took `time` the ways `ways`;
    /// `measured` says which of its ways were measured choices (the
    /// others were fixed, and that choice learns nothing). A choice does
    /// not learn from a call in which another measured choice tries its
    /// way not in use: the time says more about that way than about this
    /// choice's. None learns from a call that is not settled: fewer
    /// than [`SETTLE`] calls before it, each recorded right after the
    /// other, took its ways (a call not recorded, one refused or timed out
    /// for one, starts the count over).
    pub(crate) fn record(
        &mut self,
        call: u64,
        (ways, measured): ([bool; N], [bool; N]),
        bytes: usize,
        time: Duration,
    ) {
        let follows = self
            .last
            .is_some_and(|(last, before)| before == ways && last.checked_add(1) == Some(call));
        self.streak = if follows {
            self.streak.saturating_add(1)
        } else {
            1
        };
        self.last = Some((call, ways));
        if self.streak <= SETTLE {
            return;
        }
        let exploring: [bool; N] =
            std::array::from_fn(|j| measured[j] && self.choices[j].exploring(call));
        for i in 0..N {
            let others_explore = (0..N).any(|j| j != i && exploring[j]);
            if measured[i] && !others_explore {
                self.choices[i].record(call, ways[i], bytes, time);
            }
        }
    }

    /// Start all over from call number `call` (the calls' size changed).
    pub(crate) fn reset(&mut self, call: u64) {
        for c in &mut self.choices {
            c.reset(call);
        }
        (self.last, self.streak) = (None, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// The ways of the probes of a choice whose runs are `run` calls long.
    fn runs(run: u64) -> Vec<bool> {
        let block = [vec![false; run as usize], vec![true; run as usize]].concat();
        block.repeat((PROBES / (2 * run)) as usize)
    }

    /// A choice past its warm-up and probes, where calls the usual way took
    /// `usual` us and the other way `other`; the next call number.
    fn measured(usual: u64, other: u64) -> (TimedChoice, u64) {
        let mut c = TimedChoice::default();
        for call in 0..WARMUP + PROBES {
            let s = c.pick(call, c.in_use());
            c.record(call, s, 1 << 20, us(if s { other } else { usual }));
        }
        (c, WARMUP + PROBES)
    }

    #[test]
    fn warm_up_untimed_then_both_ways_in_turn_then_the_faster_and_tries_of_the_other() {
        let mut c = TimedChoice::default();
        // The first calls (page faults, cold caches) say nothing.
        for k in 0..WARMUP {
            assert!(!c.pick(k, c.in_use()));
            c.record(k, false, 1 << 20, us(5_000));
        }
        let ways: Vec<bool> = (WARMUP..WARMUP + PROBES)
            .map(|k| {
                let s = c.pick(k, c.in_use());
                c.record(k, s, 1 << 20, us(if s { 250 } else { 100 }));
                s
            })
            .collect();
        assert_eq!(ways, runs(RUN));
        assert!(!c.in_use());
        // The usual way is faster: kept, except in the bursts of tries.
        let tried: Vec<u64> = (WARMUP + PROBES..2 * EXPLORE)
            .filter(|&k| c.pick(k, c.in_use()))
            .collect();
        let burst = |e: u64| (e - BURST..e).collect::<Vec<_>>();
        assert_eq!(tried, [burst(EXPLORE), burst(2 * EXPLORE)].concat());
    }

    #[test]
    fn a_slow_stretch_moves_the_choice_and_its_end_moves_it_back() {
        let (mut c, mut call) = measured(100, 250);
        assert!(!c.pick(call, c.in_use()));
        // The usual way slows down to 600 us; the other stays.
        let start = call;
        while !c.pick(call, c.in_use()) {
            c.record(call, false, 1 << 20, us(600));
            call += 1;
        }
        assert!(call - start <= 3, "switched after {} calls", call - start);
        // The slow stretch ends: the bursts of tries of the usual way bring
        // it back.
        let mut tries = 0;
        loop {
            if c.pick(call, c.in_use()) {
                c.record(call, true, 1 << 20, us(250));
            } else if call % EXPLORE >= EXPLORE - BURST {
                c.record(call, false, 1 << 20, us(100));
                tries += 1;
            } else {
                break;
            }
            call += 1;
        }
        assert!((1..=2 * BURST).contains(&tries), "back after {tries} tries");
    }

    #[test]
    fn near_ties_keep_the_way_in_use() {
        let (mut c, call) = measured(100, 90);
        assert!(!c.in_use());
        c.record(call, true, 1 << 20, us(60));
        assert!(c.in_use() && c.pick(call, c.in_use()));
        c.record(call, false, 1 << 20, us(80));
        assert!(c.in_use());
    }

    #[test]
    fn one_slow_probe_does_not_decide() {
        // The other way is 20% faster; its first probe waited 10 ms for a
        // descheduled rank (a moving average started there would keep it
        // slower for hundreds of calls).
        let mut c = TimedChoice::default();
        for call in 0..WARMUP + PROBES {
            let s = c.pick(call, c.in_use());
            let t = match (s, call) {
                (true, k) if k == WARMUP + RUN => 10_000,
                (true, _) => 80,
                (false, _) => 100,
            };
            c.record(call, s, 1 << 20, us(t));
        }
        assert!(c.in_use());
        let [usual, other] = c.means().map(Option::unwrap);
        assert!((other / usual - 0.8).abs() < 1e-9, "{usual} {other}");
    }

    #[test]
    fn probes_compare_calls_in_which_the_other_choice_took_the_same_way() {
        // The first choice's other way saves 2 ms per call, the second's
        // 200 us: each choice's pairs see only its own. (Averages of the
        // probes as they came kept the second on its usual way here.)
        let time = |[a, b]: [bool; 2]| us(3_000 - 2_000 * a as u64 - 200 * b as u64);
        let mut pair = ChoicePair::default();
        for call in 0..WARMUP + PROBES {
            let ways = pair.pick(call, pair.word());
            pair.record(call, (ways, [true, true]), 1 << 20, time(ways));
        }
        assert_eq!(pair.word(), 0b11);
        assert_eq!(pair.learned(), [true, true]);
        // A pair of probes not timed is left out; the others decide.
        let mut c = TimedChoice::phased(1);
        for call in 0..WARMUP + PROBES {
            let s = c.pick(call, c.in_use());
            if call != WARMUP + 2 {
                c.record(call, s, 1 << 20, us(if s { 70 } else { 100 }));
            }
        }
        assert!(c.in_use());
    }

    #[test]
    fn one_outlier_does_not_flip_the_choice() {
        let (mut c, call) = measured(100, 250);
        // A call that waited 10 ms for a descheduled rank.
        c.record(call, false, 1 << 20, us(10_000));
        assert!(!c.in_use() && !c.pick(call, c.in_use()));
    }

    #[test]
    fn reset_starts_over_and_empty_calls_do_not_divide_by_zero() {
        let mut c = TimedChoice::default();
        for k in 0..WARMUP + PROBES {
            let s = c.pick(k, c.in_use());
            c.record(k, s, 0, us(if s { 1 } else { 5 }));
        }
        assert!(c.in_use());
        // From call 100 on: warm-up and probes again.
        c.reset(100);
        assert!(!c.in_use());
        let ways: Vec<bool> = (100..100 + WARMUP + PROBES)
            .map(|k| c.pick(k, true))
            .collect();
        assert_eq!(ways[..WARMUP as usize], [false; WARMUP as usize]);
        assert_eq!(ways[WARMUP as usize..], runs(RUN));
    }

    #[test]
    fn staggered_probes_take_runs_twice_as_long_and_bursts_come_half_a_period_later() {
        let (plain, staggered) = (TimedChoice::default(), TimedChoice::phased(1));
        let probes = |c: &TimedChoice| -> Vec<bool> {
            (WARMUP..WARMUP + PROBES)
                .map(|k| c.pick(k, false))
                .collect()
        };
        assert_eq!(probes(&plain), runs(RUN));
        assert_eq!(probes(&staggered), runs(2 * RUN));
        let bursts = |c: &TimedChoice| -> Vec<u64> {
            (WARMUP + PROBES..2 * EXPLORE)
                .filter(|&k| c.exploring(k))
                .collect()
        };
        let burst = |e: u64| (e - BURST..e).collect::<Vec<_>>();
        assert_eq!(
            bursts(&plain),
            [burst(EXPLORE), burst(2 * EXPLORE)].concat()
        );
        let half = EXPLORE / 2;
        assert_eq!(
            bursts(&staggered),
            [burst(half), burst(EXPLORE + half)].concat()
        );
    }

    #[test]
    fn a_pair_learns_only_the_choices_its_calls_measured() {
        let mut pair = ChoicePair::default();
        assert_eq!(pair.learned(), [false, false]);
        for call in 0..WARMUP + PROBES {
            let ways = pair.pick(call, pair.word());
            // Only the second choice measured; its other way twice as fast.
            let time = us(if ways[1] { 100 } else { 200 });
            pair.record(call, (ways, [false, true]), 1 << 20, time);
        }
        assert_eq!(pair.learned(), [false, true]);
        assert_eq!(pair.word(), 0b10);
        pair.reset(WARMUP + PROBES);
        assert_eq!(pair.learned(), [false, false]);
    }

    #[test]
    fn a_pair_times_only_settled_calls() {
        // The other way of the first choice is 20% faster once settled,
        // but the first two calls after a change to it take 1 ms more (as
        // single copies after calls that copied twice: the ranks still
        // finish the calls before, the caches hold what the other way
        // left). Probes that counted those calls would find the other way
        // slower (the median of their ratios 1.3), and each return to it
        // after a burst of tries would move it back.
        let time = |ways: [bool; 2], fresh: bool| {
            us(if ways[0] {
                800 + 1_000 * u64::from(fresh)
            } else {
                1_000
            })
        };
        let mut pair = ChoicePair::default();
        let mut before = None;
        let mut streak = 0;
        for call in 0..2 * EXPLORE {
            // The second choice is fixed (not measured): its usual way.
            let ways = [pair.pick(call, pair.word())[0], false];
            streak = if before == Some(ways) { streak + 1 } else { 1 };
            before = Some(ways);
            pair.record(
                call,
                (ways, [true, false]),
                1 << 20,
                time(ways, streak <= 2),
            );
            if call >= WARMUP + PROBES {
                assert_eq!(pair.word() & 1, 1, "call {call}");
            }
        }
        assert_eq!(pair.choices[0].means().map(|m| m.is_some()), [true, true]);
    }

    #[test]
    fn a_call_not_recorded_starts_the_settling_over() {
        let mut pair = ChoicePair::default();
        let ways = [false, false];
        // Calls 0 and 1 recorded, 2 not (refused, say), 3 and 4 recorded:
        // call 4 is not settled, call 5 is.
        for call in [0, 1, 3, 4] {
            pair.record(call, (ways, [true, true]), 1, us(1));
            assert!(pair.streak <= SETTLE, "call {call}");
        }
        pair.record(5, (ways, [true, true]), 1, us(1));
        assert_eq!(pair.streak, SETTLE + 1);
        pair.reset(6);
        assert_eq!((pair.last, pair.streak), (None, 0));
    }

    #[test]
    fn three_choices_compare_pairs_that_differ_in_their_own_way_only() {
        // Each choice's other way takes its own share of the time: 0.5,
        // 0.8 and 0.7. Every pair of probes of each choice differs in that
        // choice's way only, so each finds its own ratio.
        let time = |w: [bool; 3]| {
            let share = [0.5, 0.8, 0.7];
            let t = (0..3).fold(4_000.0, |t, i| if w[i] { t * share[i] } else { t });
            Duration::from_secs_f64(t * 1e-6)
        };
        let mut three = Choices::<3>::default();
        let probes: Vec<[bool; 3]> = (WARMUP..WARMUP + PROBES)
            .map(|call| three.pick(call, 0))
            .collect();
        for (i, &w) in probes.iter().enumerate() {
            for (c, run) in [(0, RUN), (1, 2 * RUN), (2, 4 * RUN)] {
                // The pairs of choice `c`: probe i (usual way) and i + run.
                if (i as u64 / run) % 2 == 0 {
                    let partner = probes[i + run as usize];
                    for other in (0..3).filter(|&o| o != c) {
                        assert_eq!(w[other], partner[other], "choice {c}, probe {i}");
                    }
                    assert!(!w[c] && partner[c]);
                }
            }
        }
        for call in 0..WARMUP + PROBES {
            let ways = three.pick(call, three.word());
            three.record(call, (ways, [true; 3]), 1 << 20, time(ways));
        }
        assert_eq!(three.word(), 0b111);
        assert_eq!(three.learned(), [true; 3]);
        // The third choice's bursts come a quarter of a period before the
        // first's, between them and the second's.
        let bursts: Vec<u64> = (WARMUP + PROBES..EXPLORE)
            .filter(|&k| three.choices[2].exploring(k))
            .collect();
        let quarter = EXPLORE - EXPLORE / 4;
        assert_eq!(bursts, (quarter - BURST..quarter).collect::<Vec<_>>());
    }
}
