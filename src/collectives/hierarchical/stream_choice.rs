//! Whether a call moves its data with ordinary or with non-temporal
//! (streaming) stores, chosen by measuring both: the inputs it puts into
//! the node's window, and the result a pipelined call copies into the
//! caller's buffer.
//!
//! The other ranks of the node read every input right after it is put. An
//! ordinary store leaves the line dirty in the writer's cache, and the
//! reader takes it from there: fast where the cores share a cache, slow
//! where the line must cross between sockets, dies or, on a virtual
//! machine, between wherever the host runs its virtual CPUs at the time.
//! A streaming store sends the line to memory, and the reader takes it
//! from memory: the same speed everywhere. On the project's VM (AMD EPYC,
//! 2 cores) the hand-off is the fast one most of the time and 4-5x slower
//! for stretches of seconds to minutes; a 1 MiB allreduce of 4 ranks took
//! 92-109 us with ordinary stores and about 240 with streaming ones in
//! the quick stretches, 580-715 and 160-230 in the slow ones
//! (docs/guide/benchmarking.md). No fixed choice is right in both, and
//! nothing in the machine's topology says which stretch it is in, so the
//! allreduce times its calls with each kind of store and takes the faster.
//! Below [`MIN_BYTES`] the two kinds differ by less than a call's noise
//! (at 16-64 KiB measured choices were 16-21% slower than ordinary stores
//! in the quick stretches), so smaller calls take ordinary stores.
//!
//! The private copies of a pipelined call go to memory either way (the
//! call is pipelined because its data outgrows the caches); whether
//! streaming them there is faster depends on the machine: on the EPYC VM
//! streaming copies took 0.66-0.90 of the time of ordinary ones
//! (2-8 MiB), on a Xeon VM (2 cores, 36 MiB L3) streaming 4 MiB ran at
//! 5 GB/s against 9 GB/s for `memcpy` and made the private 4 MiB call
//! about 10% slower. So that kind is measured too, by a second choice.
//!
//! [`StreamChoice`] keeps a moving average of the time per input byte for
//! each kind, takes the other kind when it is faster by a margin, and
//! tries the kind not in use in a burst of a few calls out of every
//! [`EXPLORE`]; the node's first local rank decides for the node (see
//! [`StreamChoice`]). The two choices are timed by the same calls, so
//! they try their kinds in different calls: the probes of the copies'
//! choice ([`StreamChoice::staggered`]) change kind every second call
//! where the inputs' change every call (each combination of kinds twice),
//! its bursts come half a period later, and a choice does not learn from
//! a call in which the other tries its kind not in use
//! ([`StreamChoice::exploring`]). Either kind gives the same result: only
//! the speed depends on it.

use std::time::Duration;

/// The last [`BURST`] calls of every this many try the kind not in use.
pub(super) const EXPLORE: u64 = 256;
const BURST: u64 = 4;

/// Calls whose input is smaller take ordinary stores and are not timed.
pub(super) const MIN_BYTES: usize = 256 << 10;

/// Weight of a new sample in the moving averages: high enough that one
/// burst of tries brings the other kind's average most of the way to its
/// present speed; a burst that misleads is undone within a few calls (the
/// kind in use is timed in every call).
const ALPHA: f64 = 0.3;

/// A sample counts at most this many times the average it updates (a call
/// that waited for a descheduled rank says little about its stores).
const CLAMP: f64 = 3.0;

/// The other kind must be this much faster to be taken (a fraction of the
/// time of the kind in use), so that near-ties and a call's noise do not
/// flip the kind back and forth.
const MARGIN: f64 = 0.1;

/// Calls after a reset that are not timed (the first touch of the window's
/// pages and cold caches), then calls that try the two kinds in turn
/// before the faster is chosen.
const WARMUP: u64 = 2;
const PROBES: u64 = 8;

/// The measured choice of one allreduce (see the module documentation).
/// The node's first local rank times its calls and publishes the kind in
/// use in a word of the node's window; every rank of the node picks by
/// that word and the call number, so that all put in their inputs the same
/// way in the same call (each timing its own calls, the ranks disagreed,
/// and a call whose inputs are put in both ways is slower than either).
#[derive(Clone, Debug, Default)]
pub(super) struct StreamChoice {
    /// Nanoseconds per input byte: `[ordinary, streaming]`.
    mean: [Option<f64>; 2],
    /// The kind in use: streaming.
    streaming: bool,
    /// The call number of the last reset.
    since: u64,
    /// 1 for the staggered choice ([`StreamChoice::staggered`]), else 0.
    phase: u32,
}

impl StreamChoice {
    /// A choice timed by the same calls as a default one, trying its kinds
    /// in other calls: its probes take each kind for two calls in turn,
    /// its bursts come [`EXPLORE`]` / 2` calls after the default one's.
    pub(super) fn staggered() -> StreamChoice {
        StreamChoice {
            phase: 1,
            ..StreamChoice::default()
        }
    }

    /// Whether call number `call` streams, where the node's kind in use is
    /// `in_use`: ordinary stores while warming up, then the two kinds in
    /// turn (two calls each for a staggered choice), then the kind in use,
    /// and the other one in a burst of [`BURST`] calls of every
    /// [`EXPLORE`].
    pub(super) fn pick(&self, call: u64, in_use: bool) -> bool {
        match call.saturating_sub(self.since) {
            k if k < WARMUP => false,
            k if k < WARMUP + PROBES => ((k - WARMUP) >> self.phase) % 2 == 1,
            _ => in_use ^ self.exploring(call),
        }
    }

    /// Whether call number `call` is in one of this choice's bursts of
    /// tries of the kind not in use (past its warm-up and probes).
    pub(super) fn exploring(&self, call: u64) -> bool {
        let shift = u64::from(self.phase) * (EXPLORE / 2);
        call.saturating_sub(self.since) >= WARMUP + PROBES
            && (call + shift) % EXPLORE >= EXPLORE - BURST
    }

    /// The kind in use: streaming (what the node's first rank publishes).
    pub(super) fn in_use(&self) -> bool {
        self.streaming
    }

    /// Call number `call` of `bytes` input bytes took `time`, `streaming`
    /// or not (as [`StreamChoice::pick`] said); the other kind is taken if
    /// it is faster by more than [`MARGIN`].
    pub(super) fn record(&mut self, call: u64, streaming: bool, bytes: usize, time: Duration) {
        if call.saturating_sub(self.since) < WARMUP {
            return;
        }
        let sample = time.as_nanos() as f64 / bytes.max(1) as f64;
        let m = &mut self.mean[streaming as usize];
        *m = Some(match *m {
            None => sample,
            Some(avg) => avg + ALPHA * (sample.min(avg * CLAMP) - avg),
        });
        if let [Some(ordinary), Some(streams)] = self.mean {
            let (used, other) = if self.streaming {
                (streams, ordinary)
            } else {
                (ordinary, streams)
            };
            if other < used * (1.0 - MARGIN) {
                self.streaming = !self.streaming;
            }
        }
    }

    /// Start over from call number `call` (the calls' size changed).
    pub(super) fn reset(&mut self, call: u64) {
        *self = StreamChoice {
            since: call,
            phase: self.phase,
            ..StreamChoice::default()
        };
    }
}

/// Which stores one call takes: streaming (`true`) or ordinary, for its
/// inputs and for the copies of a pipelined call's result into the
/// caller's buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Kinds {
    pub(super) inputs: bool,
    pub(super) copies: bool,
}

/// The two measured choices of one allreduce, timed by the same calls:
/// the inputs' ([`StreamChoice::default`]) and the copies'
/// ([`StreamChoice::staggered`]).
#[derive(Clone, Debug)]
pub(super) struct StreamChoices {
    inputs: StreamChoice,
    copies: StreamChoice,
}

impl Default for StreamChoices {
    fn default() -> StreamChoices {
        StreamChoices {
            inputs: StreamChoice::default(),
            copies: StreamChoice::staggered(),
        }
    }
}

impl StreamChoices {
    /// The kinds in use as the word the node's first rank publishes: bit 0
    /// the inputs', bit 1 the copies'.
    pub(super) fn word(&self) -> u64 {
        u64::from(self.inputs.in_use()) | u64::from(self.copies.in_use()) << 1
    }

    /// The kinds of call number `call` where the node's word
    /// ([`StreamChoices::word`]) is `word`.
    pub(super) fn pick(&self, call: u64, word: u64) -> Kinds {
        Kinds {
            inputs: self.inputs.pick(call, word & 1 != 0),
            copies: self.copies.pick(call, word & 2 != 0),
        }
    }

    /// Call number `call` of `bytes` input bytes took `time` with the
    /// stores `kinds`; `measured` says which of its kinds were measured
    /// choices (not fixed by the options, and for the copies, a pipelined
    /// call with a private result). A choice does not learn from a call
    /// in which the other measured choice tries its kind not in use: the
    /// time says more about that kind than about this one's.
    pub(super) fn record(
        &mut self,
        call: u64,
        (kinds, measured): (Kinds, Kinds),
        bytes: usize,
        time: Duration,
    ) {
        if measured.inputs && !(measured.copies && self.copies.exploring(call)) {
            self.inputs.record(call, kinds.inputs, bytes, time);
        }
        if measured.copies && !(measured.inputs && self.inputs.exploring(call)) {
            self.copies.record(call, kinds.copies, bytes, time);
        }
    }

    /// Start both over from call number `call` (the calls' size changed).
    pub(super) fn reset(&mut self, call: u64) {
        self.inputs.reset(call);
        self.copies.reset(call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// A choice past its warm-up and probes, where ordinary calls took
    /// `ordinary` us and streaming ones `streaming`; the next call number.
    fn measured(ordinary: u64, streaming: u64) -> (StreamChoice, u64) {
        let mut c = StreamChoice::default();
        for call in 0..WARMUP + PROBES {
            let s = c.pick(call, c.in_use());
            c.record(call, s, 1 << 20, us(if s { streaming } else { ordinary }));
        }
        (c, WARMUP + PROBES)
    }

    #[test]
    fn warm_up_untimed_then_both_kinds_in_turn_then_the_faster_and_tries_of_the_other() {
        let mut c = StreamChoice::default();
        // The first calls (page faults, cold caches) say nothing.
        for k in 0..WARMUP {
            assert!(!c.pick(k, c.in_use()));
            c.record(k, false, 1 << 20, us(5_000));
        }
        let kinds: Vec<bool> = (WARMUP..WARMUP + PROBES)
            .map(|k| {
                let s = c.pick(k, c.in_use());
                c.record(k, s, 1 << 20, us(if s { 250 } else { 100 }));
                s
            })
            .collect();
        assert_eq!(kinds, [false, true].repeat(PROBES as usize / 2));
        assert!(!c.in_use());
        // Ordinary stores are faster: kept, except in the bursts of tries.
        let streamed: Vec<u64> = (10..2 * EXPLORE)
            .filter(|&k| c.pick(k, c.in_use()))
            .collect();
        let burst = |e: u64| (e - BURST..e).collect::<Vec<_>>();
        assert_eq!(streamed, [burst(EXPLORE), burst(2 * EXPLORE)].concat());
    }

    #[test]
    fn a_slow_stretch_moves_the_choice_and_its_end_moves_it_back() {
        let (mut c, mut call) = measured(100, 250);
        assert!(!c.pick(call, c.in_use()));
        // Ordinary stores slow down to 600 us; streaming ones stay.
        let start = call;
        while !c.pick(call, c.in_use()) {
            c.record(call, false, 1 << 20, us(600));
            call += 1;
        }
        assert!(call - start <= 3, "switched after {} calls", call - start);
        // The slow stretch ends: the bursts of tries of ordinary stores
        // bring them back.
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
    fn near_ties_keep_the_kind_in_use() {
        let (mut c, call) = measured(100, 90);
        assert!(!c.in_use());
        c.record(call, true, 1 << 20, us(60));
        assert!(c.in_use() && c.pick(call, c.in_use()));
        c.record(call, false, 1 << 20, us(80));
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
    fn reset_starts_over_and_empty_inputs_do_not_divide_by_zero() {
        let mut c = StreamChoice::default();
        for k in 0..WARMUP + PROBES {
            let s = c.pick(k, c.in_use());
            c.record(k, s, 0, us(if s { 1 } else { 5 }));
        }
        assert!(c.in_use());
        // From call 100 on: warm-up and probes again.
        c.reset(100);
        assert!(!c.in_use());
        let kinds: Vec<bool> = (100..100 + WARMUP + PROBES)
            .map(|k| c.pick(k, true))
            .collect();
        assert_eq!(kinds[..WARMUP as usize], [false, false]);
        assert_eq!(
            kinds[WARMUP as usize..],
            [false, true].repeat(PROBES as usize / 2)
        );
    }
    #[test]
    fn staggered_probes_cover_every_pair_of_kinds_and_bursts_never_meet() {
        let c = StreamChoices::default();
        let probes: Vec<Kinds> = (WARMUP..WARMUP + PROBES).map(|k| c.pick(k, 0)).collect();
        for inputs in [false, true] {
            for copies in [false, true] {
                let n = probes
                    .iter()
                    .filter(|&&k| k == Kinds { inputs, copies })
                    .count();
                assert_eq!(n as u64, PROBES / 4, "{inputs} {copies} in {probes:?}");
            }
        }
        let bursts = |s: &StreamChoice| -> Vec<u64> {
            (WARMUP + PROBES..4 * EXPLORE)
                .filter(|&k| s.exploring(k))
                .collect()
        };
        let (a, b) = (bursts(&c.inputs), bursts(&c.copies));
        assert_eq!((a.len() as u64, b.len() as u64), (4 * BURST, 4 * BURST));
        assert!(a.iter().all(|k| !b.contains(k)), "{a:?} {b:?}");
        // Either word's kinds are kept outside the bursts, flipped in them.
        for word in 0..4 {
            for k in WARMUP + PROBES..2 * EXPLORE {
                let got = c.pick(k, word);
                assert_eq!(got.inputs, (word & 1 != 0) ^ c.inputs.exploring(k));
                assert_eq!(got.copies, (word & 2 != 0) ^ c.copies.exploring(k));
            }
        }
    }

    #[test]
    fn each_choice_finds_its_faster_kind_and_ignores_the_others_tries() {
        // Streaming inputs cost 2 ms more (enough to move the copies'
        // choice if it learnt from the inputs' tries), streaming copies
        // 100 us less.
        let time = |k: Kinds| us(1_000 + 2_000 * k.inputs as u64 - 100 * k.copies as u64);
        let mut c = StreamChoices::default();
        let both = Kinds {
            inputs: true,
            copies: true,
        };
        for call in 0..3 * EXPLORE {
            let k = c.pick(call, c.word());
            c.record(call, (k, both), 1 << 20, time(k));
            if call >= WARMUP + PROBES {
                assert_eq!(c.word(), 0b10, "call {call}");
            }
        }
        // A choice that is not measured is left as it was.
        let mut c = StreamChoices::default();
        let inputs_only = Kinds {
            inputs: true,
            copies: false,
        };
        for call in 0..EXPLORE {
            let k = c.pick(call, c.word());
            c.record(call, (k, inputs_only), 1 << 20, time(k));
        }
        assert_eq!(c.word(), 0b00);
        assert_eq!(c.copies.mean, [None, None]);
    }
}
