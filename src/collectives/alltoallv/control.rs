//! Where the alltoallv's control words lie at the start of every node's
//! window, in bytes: the same on every node, so that a rank of another
//! node reaches a word with the engine's remote atomics at the offset
//! that a rank of the node reads it at. In order:
//! 1. a cache line per local rank (its progress, announcements and probe:
//!    `state::PROGRESS` and the words after it);
//! 2. the node's line: the count of stagings, the two choice words (one
//!    per parity of the call), the count of rows, the two rotation words
//!    (one per parity of the stretch of calls; the first node's are the
//!    job's) and the count of their reads (`rotation.rs`);
//! 3. each local rank's push mask (a bit per local rank);
//! 4. each local rank's places (a word per local rank for its send
//!    buffer, then one per local rank for its receive buffer);
//! 5. each local rank's offer ([`OFFER`] and the words after it).
//!
//! Every part starts on a cache line, and each rank's share of it too.

/// The words of a rank's offer (see `Alltoallv::offer`), after the
/// places: the offer itself, the address of its receive buffer, then a
/// bit per rank of the job, set by each sender that wrote its piece
/// straight into that buffer, then ([`offer_busy`]) a bit per rank of the
/// job, set by each sender while it may hold a writer's place (so that a
/// receiver whose call failed waits for the living writers, not only
/// until some rank failed). (Its process is the one the job recorded for
/// its rank, never one a word names: see `crate::engine::processes`.)
pub(super) const OFFER: usize = 0;
pub(super) const OFFER_ADDRESS: usize = 1;
pub(super) const OFFER_MASK: usize = 2;

/// The first of the offer's words of senders at work among `ranks`
/// ranks, after its mask.
pub(super) fn offer_busy(ranks: usize) -> usize {
    OFFER_MASK + ranks.div_ceil(64)
}

/// Bytes to the next multiple of a cache line.
fn lines(bytes: usize) -> usize {
    bytes.div_ceil(64) * 64
}

/// The control words of a node's window for `rpn` ranks per node among
/// `ranks` ranks (see the module's doc for the order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Controls {
    rpn: usize,
    ranks: usize,
}

impl Controls {
    pub(super) fn new(rpn: usize, ranks: usize) -> Self {
        Controls { rpn, ranks }
    }

    /// The node's line, after the ranks' lines.
    fn node_line(self) -> usize {
        64 * self.rpn
    }

    /// How many times the node's ranks have staged in one-sender calls.
    pub(super) fn staged_count(self) -> usize {
        self.node_line()
    }

    /// The node's ways in use for calls of `call`'s parity.
    pub(super) fn choice(self, call: u64) -> usize {
        self.node_line() + 8 * (1 + (call % 2) as usize)
    }

    /// How many times the node's ranks have written their rows of counts
    /// in one-sender calls.
    pub(super) fn rows_count(self) -> usize {
        self.node_line() + 24
    }

    /// The first node's way of turning through the copies agreed for the
    /// stretch of calls `epoch` (and its number), a word per parity of
    /// the stretch (`rotation.rs`).
    pub(super) fn rotation(self, epoch: u64) -> usize {
        self.node_line() + 8 * (4 + (epoch % 2) as usize)
    }

    /// How many times the job's ranks have read a rotation word of the
    /// first node, in all.
    pub(super) fn rotation_reads(self) -> usize {
        self.node_line() + 48
    }

    /// Where the push masks start: after the node's line.
    fn masks(self) -> usize {
        self.node_line() + 64
    }

    /// Bytes of one rank's push mask: a bit per local rank.
    fn mask_stride(self) -> usize {
        lines(8 * self.rpn.div_ceil(64))
    }

    /// Word `k` of local rank `local`'s push mask.
    pub(super) fn mask(self, local: usize, k: usize) -> usize {
        self.masks() + local * self.mask_stride() + 8 * k
    }

    /// Where the places start: after the push masks.
    fn places(self) -> usize {
        self.masks() + self.rpn * self.mask_stride()
    }

    /// Bytes of one rank's places: two words per local rank.
    fn places_stride(self) -> usize {
        lines(16 * self.rpn)
    }

    /// Local rank `local`'s place word for local rank `j`: of its send
    /// buffer, or (`recv`) of its receive buffer.
    pub(super) fn place(self, local: usize, recv: bool, j: usize) -> usize {
        self.places() + local * self.places_stride() + 8 * (usize::from(recv) * self.rpn + j)
    }

    /// Where the offers start: after the places.
    fn offers(self) -> usize {
        self.places() + self.rpn * self.places_stride()
    }

    /// Bytes of one rank's offer: its words, a mask of writers and one of
    /// writers at work, a bit per rank of the job each.
    fn offer_stride(self) -> usize {
        lines(8 * (offer_busy(self.ranks) + self.ranks.div_ceil(64)))
    }

    /// Word `k` of local rank `local`'s offer ([`OFFER`] and after).
    pub(super) fn offer(self, local: usize, k: usize) -> usize {
        self.offers() + local * self.offer_stride() + 8 * k
    }

    /// Bytes of all the control words: where the count matrices of sizes
    /// unknown start.
    pub(super) fn bytes(self) -> usize {
        self.offers() + self.rpn * self.offer_stride()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word of every part, as (offset, what).
    fn words(c: Controls) -> Vec<(usize, String)> {
        let (rpn, ranks) = (c.rpn, c.ranks);
        let mut w: Vec<(usize, String)> = Vec::new();
        for l in 0..rpn {
            w.extend((0..8).map(|k| (64 * l + 8 * k, format!("line {l}.{k}"))));
            let masks = rpn.div_ceil(64);
            w.extend((0..masks).map(|k| (c.mask(l, k), format!("mask {l}.{k}"))));
            for recv in [false, true] {
                w.extend((0..rpn).map(|j| (c.place(l, recv, j), format!("place {l}.{recv}.{j}"))));
            }
            let offer = offer_busy(ranks) + ranks.div_ceil(64);
            w.extend((0..offer).map(|k| (c.offer(l, k), format!("offer {l}.{k}"))));
        }
        w.push((c.staged_count(), "staged".into()));
        w.extend((0..2).map(|p| (c.choice(p), format!("choice {p}"))));
        w.push((c.rows_count(), "rows".into()));
        w.extend((0..2).map(|e| (c.rotation(e), format!("rotation {e}"))));
        w.push((c.rotation_reads(), "rotation reads".into()));
        w
    }

    /// No two words share a place, all lie before `bytes`, and each part
    /// starts on a cache line.
    #[test]
    fn control_words_are_apart_and_inside() {
        for (rpn, ranks) in [
            (1, 1),
            (2, 4),
            (3, 6),
            (4, 8),
            (64, 128),
            (65, 130),
            (130, 65_536),
        ] {
            let c = Controls::new(rpn, ranks);
            let mut w = words(c);
            w.sort();
            for pair in w.windows(2) {
                assert!(pair[0].0 < pair[1].0, "{rpn}/{ranks}: {pair:?}");
            }
            assert!(w.last().unwrap().0 + 8 <= c.bytes(), "{rpn}/{ranks}");
            for at in [c.masks(), c.places(), c.offers(), c.bytes()] {
                assert_eq!(at % 64, 0, "{rpn}/{ranks}");
            }
            assert_eq!(c.mask(1.min(rpn - 1), 0) % 64, 0);
        }
    }
}
