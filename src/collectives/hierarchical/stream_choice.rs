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
//! Each is a
//! [`TimedChoice`](crate::collectives::timed_choice::TimedChoice)
//! (`collectives/timed_choice.rs`: moving
//! averages of the time per input byte, a margin, bursts of tries of the
//! kind not in use; the node's first local rank decides for the node). The
//! two are timed by the same calls, so the copies' choice is a staggered
//! one (it tries its kinds in other calls), and neither learns from a call
//! in which the other tries its kind not in use. Either kind gives the
//! same result: only the speed depends on it.

use crate::collectives::timed_choice::ChoicePair;
use std::time::Duration;

/// Calls whose input is smaller take ordinary stores and are not timed.
pub(super) const MIN_BYTES: usize = 256 << 10;

/// Which stores one call takes: streaming (`true`) or ordinary, for its
/// inputs and for the copies of a pipelined call's result into the
/// caller's buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Kinds {
    pub(super) inputs: bool,
    pub(super) copies: bool,
}

/// The two measured choices of one allreduce, timed by the same calls
/// ([`ChoicePair`]): the inputs' (the first; `true`: streaming) and the
/// copies' (the second, staggered).
#[derive(Clone, Debug, Default)]
pub(super) struct StreamChoices(ChoicePair);

impl StreamChoices {
    /// The kinds in use as the word the node's first rank publishes: bit 0
    /// the inputs', bit 1 the copies'.
    pub(super) fn word(&self) -> u64 {
        self.0.word()
    }

    /// The kinds of call number `call` where the node's word
    /// ([`StreamChoices::word`]) is `word`.
    pub(super) fn pick(&self, call: u64, word: u64) -> Kinds {
        let [inputs, copies] = self.0.pick(call, word);
        Kinds { inputs, copies }
    }

    /// Call number `call` of `bytes` input bytes took `time` with the
    /// stores `kinds`; `measured` says which of its kinds were measured
    /// choices (not fixed by the options, and for the copies, a pipelined
    /// call with a private result); see [`ChoicePair::record`].
    pub(super) fn record(
        &mut self,
        call: u64,
        (kinds, measured): (Kinds, Kinds),
        bytes: usize,
        time: Duration,
    ) {
        let ways = [kinds.inputs, kinds.copies];
        let measured = [measured.inputs, measured.copies];
        self.0.record(call, (ways, measured), bytes, time);
    }

    /// Start both over from call number `call` (the calls' size changed).
    pub(super) fn reset(&mut self, call: u64) {
        self.0.reset(call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collectives::timed_choice::{BURST, EXPLORE, PROBES, TimedChoice, WARMUP};

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
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
        let bursts = |s: &TimedChoice| -> Vec<u64> {
            (WARMUP + PROBES..4 * EXPLORE)
                .filter(|&k| s.exploring(k))
                .collect()
        };
        let (a, b) = (bursts(&c.0.choices[0]), bursts(&c.0.choices[1]));
        assert_eq!((a.len() as u64, b.len() as u64), (4 * BURST, 4 * BURST));
        assert!(a.iter().all(|k| !b.contains(k)), "{a:?} {b:?}");
        // Either word's kinds are kept outside the bursts, flipped in them.
        for word in 0..4 {
            for k in WARMUP + PROBES..2 * EXPLORE {
                let got = c.pick(k, word);
                assert_eq!(got.inputs, (word & 1 != 0) ^ c.0.choices[0].exploring(k));
                assert_eq!(got.copies, (word & 2 != 0) ^ c.0.choices[1].exploring(k));
            }
        }
    }

    #[test]
    fn each_choice_finds_its_faster_kind_and_ignores_the_others_tries() {
        // Streaming inputs cost 2 ms more (enough to move the copies'
        // choice if it learnt from the inputs' tries), streaming copies
        // 200 us less (a fifth of the time, past the margin).
        let time = |k: Kinds| us(1_000 + 2_000 * k.inputs as u64 - 200 * k.copies as u64);
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
        assert_eq!(c.0.choices[1].means(), [None, None]);
    }
}
