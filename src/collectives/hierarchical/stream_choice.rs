//! Whether a call puts its input into the node's window with ordinary or
//! with non-temporal (streaming) stores, chosen by measuring both.
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
//! [`StreamChoice`] keeps a moving average of the time per input byte for
//! each kind, takes the other kind when it is faster by a margin, and
//! tries the kind not in use in a burst of a few calls out of every
//! [`EXPLORE`]; the node's first local rank decides for the node (see
//! [`StreamChoice`]). Either kind gives the same result: only the speed
//! depends on it.

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
}

impl StreamChoice {
    /// Whether call number `call` streams, where the node's kind in use is
    /// `in_use`: ordinary stores while warming up, then the two kinds in
    /// turn, then the kind in use, and the other one in the last [`BURST`]
    /// calls of every [`EXPLORE`].
    pub(super) fn pick(&self, call: u64, in_use: bool) -> bool {
        match call.saturating_sub(self.since) {
            k if k < WARMUP => false,
            k if k < WARMUP + PROBES => (k - WARMUP) % 2 == 1,
            _ => in_use ^ (call % EXPLORE >= EXPLORE - BURST),
        }
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
            ..StreamChoice::default()
        };
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
}
