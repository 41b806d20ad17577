//! How many copies of the data area the calls turn through where the
//! calls measure it
//! ([`AlltoallvOptions::copies`](super::AlltoallvOptions::copies) `None`
//! where ranks share cores): the first two, or all of them, in each call
//! as the first node has measured faster; and how the job agrees on it.
//!
//! Where a rank shares its core, the lines its node's readers took are in
//! that core's caches; a writer on another core must take them back, one
//! line at a time, unless the calls between two uses of a copy have
//! pushed them out. On a 2-core AMD EPYC (Zen 4) VM, 4 ranks in 2 nodes
//! of 2, private results took 0.63-0.70 of the time at 16-32 KiB per pair
//! with 16 copies where the two cores were near (a cache line's round
//! trip 50 ns), 0.88-1.06 where they were far (330 ns); with 8 ranks, far,
//! up to 1.25 (private) and 1.97 (in place) of the time. Nothing the
//! program can read says which holds, so the calls time it: the third
//! choice of the node's [`Choices`](crate::collectives::timed_choice::Choices),
//! which the first node's first rank times in its calls with private
//! results: in place, the reader's lines stay in its cache, and more
//! copies only miss them (a stretch whose way the first rank published
//! in a call in place is not measured: its calls take two copies).
//!
//! Which copy a call uses must be the same on every node (a node's ranks
//! write into the other nodes' copies), where the other choices need only
//! agree inside a node. So the job takes the first node's way in
//! stretches of [`EPOCH`] calls: its first rank publishes the way in use
//! for the next stretch at the start of the stretch's call [`PUBLISH`] in
//! a word of its window (one per parity of the stretch), and every rank
//! reads it at the start of call [`READ`], [`READ`]` - `[`PUBLISH`] calls
//! later, waiting for it if the first node is that far behind
//! (`Alltoallv::agree_rotation`, a step of the call). Every
//! rank then knows the way of the next stretch before its last call
//! before it ends, so `Alltoallv::outgoing` names the next call's
//! places. Which calls take the other way (the choice's probes, its
//! bursts of tries) follows from the call number alone, the same on every
//! rank. The first rank writes a stretch's word only once every rank has
//! read the word it overwrites (a count of reads): a node that exchanges
//! nothing with the first node may lag it by any number of calls; for the
//! same reason it drops its window only once every rank has read every
//! word of its calls (the `Drop` of `Alltoallv`).
//!
//! Mixing the two ways is safe: the copies are even in number, so call `k`
//! uses a copy of `k`'s parity either way, and the last call before it to
//! use the same copy is call `k - 2` or older: what the credits and the
//! closing waits guard.

use crate::collectives::timed_choice::TimedChoice;
use crate::error::{Error, Result};

/// Calls per stretch with one agreed way of turning through the copies.
pub(super) const EPOCH: u64 = 64;

/// The call of a stretch at whose start the first node's first rank
/// publishes the way in use for the next stretch.
pub(super) const PUBLISH: u64 = 16;

/// The call of a stretch at whose start every rank reads that way.
pub(super) const READ: u64 = 48;

/// What the first node's word says of a stretch: its calls are measured
/// (the first node's first rank's call [`PUBLISH`] before it had a
/// private result), and the way in use is all the copies (see
/// [`Rotation::word`]).
const MEASURED: u64 = 0b10;
const ALL: u64 = 0b01;

/// The bits of the stretch's number in the first node's word.
const STRETCH: u32 = 2;

/// The ways of turning through the copies agreed for stretches of calls:
/// `(stretch, MEASURED | ALL bits)` by the parity of the stretch (the
/// stretch in progress and, from its [`READ`]th call on, the next).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rotation {
    agreed: [(u64, u64); 2],
}

impl Default for Rotation {
    /// The first stretch is not measured: its calls turn through the first
    /// two copies, but for the first turn through all (see
    /// [`Rotation::turns_all`]).
    fn default() -> Rotation {
        Rotation {
            agreed: [(0, 0), (u64::MAX, 0)],
        }
    }
}

impl Rotation {
    /// The copy of `copies` (an even number) that call number `call` uses
    /// where `rotation` (`None`: the copies are fixed, all in turn) and
    /// the measured `choice` say ([`Rotation::turns_all`]): `call %
    /// copies` or `call % 2`, of the call's parity either way.
    pub(super) fn copy_of(
        rotation: Option<&Rotation>,
        call: u64,
        copies: usize,
        choice: &TimedChoice,
    ) -> usize {
        let all = Rotation::all_of(rotation, call, copies, choice);
        let turn = if all { copies } else { 2 };
        (call % turn as u64) as usize
    }

    /// Whether call number `call` turns through all `copies` where
    /// `rotation` (`None`: the copies are fixed) and the measured `choice`
    /// say ([`Rotation::turns_all`]).
    pub(super) fn all_of(
        rotation: Option<&Rotation>,
        call: u64,
        copies: usize,
        choice: &TimedChoice,
    ) -> bool {
        rotation.is_none_or(|r| r.turns_all(call, copies, choice))
    }

    /// Whether call number `call` turns through all `copies`: in the first
    /// turn (so that each page has been touched before the calls time
    /// either way); then in a measured stretch as the measured `choice`
    /// picks by the way agreed (its probes, its way in use, its bursts of
    /// tries); in a stretch not measured never. Known for the stretch in
    /// progress and, from its [`READ`]th call, the next: the call in
    /// progress, the next and the last one completed.
    pub(super) fn turns_all(&self, call: u64, copies: usize, choice: &TimedChoice) -> bool {
        if call < copies as u64 {
            return true;
        }
        let bits = self.agreed(call);
        bits & MEASURED != 0 && choice.pick(call, bits & ALL != 0)
    }

    /// The bits agreed for the stretch of call `call` (none where it is
    /// not known: never for a call whose places are asked for).
    fn agreed(&self, call: u64) -> u64 {
        let stretch = call / EPOCH;
        match self.agreed[(stretch % 2) as usize] {
            (s, bits) if s == stretch => bits,
            _ => {
                debug_assert!(false, "the way of stretch {stretch} is not agreed");
                0
            }
        }
    }

    /// The stretch whose way the first node's first rank publishes at the
    /// start of call number `call` (call [`PUBLISH`] of a stretch: the
    /// next one).
    pub(super) fn publishes(call: u64) -> Option<u64> {
        (call % EPOCH == PUBLISH).then_some(call / EPOCH + 1)
    }

    /// The stretch whose way this rank reads at the start of call number
    /// `call` (call [`READ`] of a stretch: the next one), unless it has
    /// (a call resumed after a timeout).
    pub(super) fn reads(&self, call: u64) -> Option<u64> {
        let next = call / EPOCH + 1;
        let read = self.agreed[(next % 2) as usize].0 == next;
        (call % EPOCH == READ && !read).then_some(next)
    }

    /// How many reads of the first node's words the job's `ranks` ranks
    /// have made once all have read the word that `stretch`'s overwrites
    /// (`stretch - 2`'s, read at stretch `stretch - 3`'s [`READ`]):
    /// stretches from 1 on are read, so `stretch - 2` of them by then.
    pub(super) fn reads_before(stretch: u64, ranks: u64) -> u64 {
        stretch.saturating_sub(2).saturating_mul(ranks)
    }

    /// How many reads of the first node's words the job's `ranks` ranks
    /// make in calls `0..calls` (one each at call [`READ`] of every
    /// stretch).
    pub(super) fn reads_in(calls: u64, ranks: u64) -> u64 {
        ((calls + EPOCH - READ - 1) / EPOCH).saturating_mul(ranks)
    }

    /// The first node's word for `stretch`: its calls `measured` (the
    /// first rank's call that publishes it has a private result), and
    /// turning through `all` copies in use.
    pub(super) fn word(stretch: u64, measured: bool, all: bool) -> u64 {
        stretch << STRETCH | if measured { MEASURED } else { 0 } | u64::from(all)
    }

    /// Take the first node's word `word` for `stretch`: `Ok(true)` if it
    /// is that stretch's, `Ok(false)` if an older one's (the first node is
    /// behind: read again), an error if a newer one's (the count of reads
    /// rules it out while the ranks' calls agree).
    pub(super) fn take(&mut self, stretch: u64, word: u64) -> Result<bool> {
        match word >> STRETCH {
            s if s == stretch => {
                self.agreed[(stretch % 2) as usize] = (stretch, word & (MEASURED | ALL));
                Ok(true)
            }
            s if s < stretch => Ok(false),
            s => Err(Error::InvalidArgument(format!(
                "alltoallv: the first node published its copies of stretch {s} before this \
                 rank read stretch {stretch}'s: the ranks' calls disagree"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A choice whose probes are over, with the way in use `all`.
    fn settled() -> TimedChoice {
        let mut c = TimedChoice::phased(2);
        c.reset(EPOCH);
        c
    }

    #[test]
    fn the_first_turn_takes_all_copies_then_the_agreed_stretches_say() {
        let c = settled();
        let mut r = Rotation::default();
        // The first turn through 8 copies, then two (stretch 0 is not
        // measured); no rotation: all, always.
        let first: Vec<usize> = (0..12)
            .map(|k| Rotation::copy_of(Some(&r), k, 8, &c))
            .collect();
        assert_eq!(first, [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 0, 1]);
        assert_eq!(Rotation::copy_of(None, 13, 8, &c), 5);
        // Stretch 1 published, read at call 48: its calls measured, all
        // in use, except the choice's warm-up (calls 64-67: two) and its
        // probes (68-83 two, 84-99 all).
        assert_eq!(Rotation::publishes(16), Some(1));
        assert_eq!(Rotation::publishes(17), None);
        assert_eq!(r.reads(47), None);
        assert_eq!(r.reads(48), Some(1));
        assert_eq!(r.take(1, Rotation::word(0, true, true)).ok(), Some(false));
        assert_eq!(r.take(1, Rotation::word(1, true, true)).ok(), Some(true));
        assert_eq!(r.reads(48), None, "read once");
        let ways: Vec<bool> = [50, 65, 70, 90, 110]
            .map(|k| r.turns_all(k, 8, &c))
            .to_vec();
        assert_eq!(ways, [false, false, false, true, true]);
        assert_eq!(Rotation::copy_of(Some(&r), 110, 8, &c), 6);
        // Every copy has the call's parity.
        for k in 0..128 {
            assert_eq!(Rotation::copy_of(Some(&r), k, 8, &c) % 2, (k % 2) as usize);
        }
        // A newer stretch than asked for: the ranks disagree.
        assert!(r.take(2, Rotation::word(3, false, false)).is_err());
        // Stretch 3 overwrites stretch 1's word: all 4 ranks read it.
        assert_eq!(Rotation::reads_before(2, 4), 0);
        assert_eq!(Rotation::reads_before(3, 4), 4);
        // Reads in calls 0..k: one per rank at each call 48 + 64 i < k.
        let reads = |k| Rotation::reads_in(k, 4);
        assert_eq!(
            [reads(0), reads(48), reads(49), reads(112), reads(113)],
            [0, 0, 4, 4, 8]
        );
    }

    #[test]
    fn a_stretch_not_measured_takes_two_copies_whatever_the_way_in_use() {
        let c = settled();
        let mut r = Rotation::default();
        assert_eq!(r.take(1, Rotation::word(1, false, true)).ok(), Some(true));
        assert!((64..128).all(|k| !r.turns_all(k, 8, &c)));
    }
}
