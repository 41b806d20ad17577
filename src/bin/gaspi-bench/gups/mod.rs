//! Random Access (HPCC's GUPS) of `gaspi-bench gups`: a table of 64-bit
//! words spread over the ranks, `T[i] = i` at the start, and a stream of
//! pseudo-random numbers `a`, each an update `T[a mod size] ^= a`. Three
//! variants apply the same updates, each exactly (no update lost): flat MPI
//! (`on_mpi.rs`: buckets by owner, `MPI_Alltoallv`), flat GASPI and
//! node-shared GASPI (`on_gaspi.rs`). This module holds what they share:
//! HPCC's random stream, who owns what, and the check.
//!
//! Updates go in rounds of [`CHUNK`] per rank (HPCC lets a process keep
//! up to 1024 updates in flight). Differences from HPCC's rules, for any
//! number of ranks and a run of any length: the index is `a mod size`
//! (the same as HPCC's mask where the size is a power of two), and rank `r`'s stream starts at
//! position `r * 2^40` of HPCC's sequence, whatever the number of rounds.

pub mod on_gaspi;
#[cfg(feature = "mpi")]
pub mod on_mpi;

/// Updates per rank and round.
pub const CHUNK: usize = 1024;

/// HPCC's primitive polynomial and the period of its sequence.
const POLY: u64 = 0x7;
const PERIOD: u64 = 1_317_624_576_693_539_401;

/// The number after `a` in HPCC's sequence.
#[inline(always)]
pub fn next(a: u64) -> u64 {
    (a << 1) ^ if (a as i64) < 0 { POLY } else { 0 }
}

/// Element `n` of HPCC's sequence (`HPCC_starts`), in O(log n) steps.
pub fn starts(n: u64) -> u64 {
    let n = n % PERIOD;
    if n == 0 {
        return 1;
    }
    let mut m2 = [0u64; 64];
    let mut temp = 1u64;
    for m in m2.iter_mut() {
        *m = temp;
        temp = next(next(temp));
    }
    let mut i = 63 - n.leading_zeros() as i32;
    let mut ran = 2u64;
    while i > 0 {
        let mut t = 0;
        for (j, m) in m2.iter().enumerate() {
            if (ran >> j) & 1 == 1 {
                t ^= m;
            }
        }
        ran = t;
        i -= 1;
        if (n >> i) & 1 == 1 {
            ran = next(ran);
        }
    }
    ran
}

/// Where rank `rank`'s stream starts.
pub fn stream_start(rank: usize) -> u64 {
    starts((rank as u64) << 40)
}

/// The table: `ranks` ranks of `words` words each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    pub ranks: usize,
    pub words: usize,
    /// `size - 1` where the size is a power of two (HPCC's mask), and
    /// `log2(words)` where `words` is one: divisions become bit operations.
    mask: Option<u64>,
    shift: Option<u32>,
}

impl Table {
    /// A table of `words` words per rank on `ranks` ranks.
    pub fn new(ranks: usize, words: usize) -> Result<Table, String> {
        match ranks.checked_mul(words) {
            Some(size) if size > 0 && size <= isize::MAX as usize / 8 => Ok(Table {
                ranks,
                words,
                mask: size.is_power_of_two().then(|| size as u64 - 1),
                shift: words.is_power_of_two().then(|| words.trailing_zeros()),
            }),
            _ => Err(format!(
                "gups: a table of {ranks} x {words} words is empty or too large"
            )),
        }
    }

    /// Words in all.
    pub fn size(&self) -> u64 {
        (self.ranks * self.words) as u64
    }

    /// The word update `a` changes.
    #[inline(always)]
    pub fn index(&self, a: u64) -> usize {
        match self.mask {
            Some(m) => (a & m) as usize,
            None => (a % self.size()) as usize,
        }
    }

    /// The rank that owns word `index`.
    #[inline(always)]
    pub fn owner(&self, index: usize) -> usize {
        match self.shift {
            Some(s) => index >> s,
            None => index / self.words,
        }
    }
}

/// Apply to `part` (rank `me`'s words) every update of every rank's
/// first `rounds` rounds that falls in it: run after the measured updates,
/// this undoes them (`x ^ a ^ a = x`). Returns the number of words that
/// are then not their index: HPCC's error count, 0 when no update was lost.
pub fn check(table: &Table, me: usize, rounds: usize, part: &mut [u64]) -> usize {
    let lo = me * table.words;
    for r in 0..table.ranks {
        let mut a = stream_start(r);
        for _ in 0..rounds * CHUNK {
            a = next(a);
            let i = table.index(a);
            if table.owner(i) == me {
                part[i - lo] ^= a;
            }
        }
    }
    part.iter()
        .enumerate()
        .filter(|&(k, &v)| v != (lo + k) as u64)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_walks_the_sequence() {
        let mut a = starts(0);
        assert_eq!(a, 1);
        for n in 1..200u64 {
            a = next(a);
            assert_eq!(starts(n), a, "position {n}");
        }
        // Jumps agree with walks far out too.
        let mut b = starts(1 << 40);
        for _ in 0..1000 {
            b = next(b);
        }
        assert_eq!(starts((1 << 40) + 1000), b);
    }

    #[test]
    fn check_counts_lost_updates() {
        let t = Table::new(2, 64).unwrap();
        let mut whole: Vec<u64> = (0..128).collect();
        for r in 0..2 {
            let mut a = stream_start(r);
            for _ in 0..CHUNK {
                a = next(a);
                whole[t.index(a)] ^= a;
            }
        }
        let (mut lo, mut hi) = (whole[..64].to_vec(), whole[64..].to_vec());
        assert_eq!(check(&t, 0, 1, &mut lo) + check(&t, 1, 1, &mut hi), 0);
        let mut one_lost: Vec<u64> = (64..128).collect();
        assert!(check(&t, 1, 1, &mut one_lost) > 0);
        assert!(Table::new(0, 8).is_err() && Table::new(usize::MAX, 2).is_err());
    }
}
