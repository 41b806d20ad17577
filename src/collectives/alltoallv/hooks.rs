//! Hooks for tests (hidden from the documentation): code run around each
//! cross-memory copy, the times of measured calls, the ways a call took.

use super::options::AlltoallvOptions;
use super::state::{Alltoallv, AroundCopies};
use crate::collectives::timed_choice::CallTimes;
use crate::types::Rank;
use bytemuck::Pod;

impl<'a, T: Pod> Alltoallv<'a, T> {
    /// Testing aid, not part of the API (it may change in any release):
    /// `hook(t, written)` runs on this rank just before (`written` false)
    /// and just after (true) each write of one of its pieces straight into
    /// the offered receive buffer of rank `t` of another node (see
    /// [`AlltoallvOptions::single_copy_min`]), while this rank holds a
    /// writer's place in that offer, so that the receiver's call cannot
    /// return in between. While a hook is set, this rank waits for the
    /// offers of its calls' receivers as long as the call's deadline
    /// allows, not only briefly, so that a test knows which pieces take
    /// that way. For tests of a call that fails while ranks of other
    /// nodes write into its buffer.
    ///
    /// ```no_run
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let counts = vec![4096; (ctx.num_ranks() as usize).pow(2)];
    /// let mut a = Alltoallv::<u64>::new(&ctx, 1, &counts, Timeout::Block)?;
    /// a.testing_around_writes(|t, written| println!("into rank {t}: written {written}"));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn testing_around_writes(&mut self, hook: impl Fn(Rank, bool) + Send + Sync + 'a) {
        self.around_writes = Some(AroundCopies(Box::new(hook)));
    }

    /// Testing aid, not part of the API (it may change in any release):
    /// `hook(s, read)` runs on this rank just before (`read` false) and
    /// just after (true) each read of one of its pieces straight out of
    /// the send buffer of rank `s` of its node (see
    /// [`AlltoallvOptions::single_copy_min`]), while this rank is counted
    /// among that buffer's readers, so that `s`'s call cannot return in
    /// between; a read found the buffer taken back (`s`'s call failed)
    /// if the second run does not come. While a hook is set, this rank
    /// waits for its node's ranks to announce their calls as long as the
    /// call's deadline allows, not only briefly, so that a test knows
    /// which pieces take that way. For tests of a call that fails while
    /// ranks of its node read out of its buffer.
    ///
    /// ```no_run
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # let counts = vec![4096; (ctx.num_ranks() as usize).pow(2)];
    /// let mut a = Alltoallv::<u64>::new(&ctx, 1, &counts, Timeout::Block)?;
    /// a.testing_around_reads(|s, read| println!("out of rank {s}: read {read}"));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn testing_around_reads(&mut self, hook: impl Fn(Rank, bool) + Send + Sync + 'a) {
        self.around_reads = Some(AroundCopies(Box::new(hook)));
    }

    /// Test aid: `times(call, [once, streaming, all_copies])` is taken for
    /// the time of each call that this rank times for its node's
    /// measurements (the node's first rank, in calls whose ways are
    /// measured: see [`AlltoallvOptions::single_copy_min`],
    /// [`AlltoallvOptions::stream_stores`] and
    /// [`AlltoallvOptions::copies`]), given the ways the call took,
    /// instead of the time it took. For tests of which ways the nodes
    /// choose; [`Alltoallv::testing_ways`] says which they took.
    ///
    /// ```no_run
    /// # use gaspi::{Alltoallv, Config, Context, Timeout};
    /// # use std::time::Duration;
    /// # let ctx = Context::init(Config::default())?;
    /// # let counts = vec![1 << 17; (ctx.num_ranks() as usize).pow(2)];
    /// let mut a = Alltoallv::<u64>::new(&ctx, 1, &counts, Timeout::Block)?;
    /// // Streaming stores seem twice as fast.
    /// a.testing_call_times(|_, [_, streaming, _]| Duration::from_millis(2 - streaming as u64));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn testing_call_times(
        &mut self,
        times: impl Fn(u64, [bool; 3]) -> std::time::Duration + Send + Sync + 'a,
    ) {
        self.call_times = Some(CallTimes(Box::new(times)));
    }

    /// Test aid: the bytes this rank's last call stored into windows
    /// with streaming stores (its pieces, and the node's messages it
    /// wrote into other nodes' windows mapped here).
    #[doc(hidden)]
    pub fn testing_streamed(&self) -> u64 {
        self.streamed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Test aid: the local ranks that may run on this rank's CPU, where
    /// this rank is bound to one CPU and no rank of another node may run
    /// on it (`None` elsewhere): while they all wait in a call, as this
    /// rank does, for ranks of other CPUs, its waits spin instead of
    /// yielding.
    #[doc(hidden)]
    pub fn testing_core_mates(&self) -> Option<Vec<usize>> {
        self.core_mates.clone()
    }

    /// Test aid: up to how many bytes going out of the node in a call the
    /// node's last rank to be ready sends them all
    /// ([`AlltoallvOptions::one_sender_max`](crate::AlltoallvOptions::one_sender_max),
    /// resolved: `usize::MAX` for no limit).
    #[doc(hidden)]
    pub fn testing_one_sender_max(&self) -> usize {
        self.one_sender_max
    }

    /// Test aid: the ways the last call took, `[once, streaming]`: whether
    /// it copied large pieces inside the node once, whether its stores
    /// into the windows streamed.
    #[doc(hidden)]
    pub fn testing_ways(&self) -> [bool; 2] {
        [self.once, self.streaming]
    }

    /// Test aid, not part of the API (it may change in any release): the
    /// calls measure how many copies of the data area they turn through
    /// (all, or the first two: [`AlltoallvOptions::copies`] `None` where
    /// ranks share cores) even where no rank shares its cores, so that a
    /// test sees it on any machine. Every rank must call it before its
    /// first call, or none; `false` (and nothing changes) where the
    /// window has two copies or more than 64, or calls were made.
    #[doc(hidden)]
    pub fn testing_measure_copies(&mut self) -> bool {
        // (At most 64 copies, as by the rule: the first turn through them
        // ends before the second stretch of calls.)
        let turn = (3..=AlltoallvOptions::MAX_AUTO_COPIES).contains(&self.copies);
        let fits = turn && self.calls == 0 && self.phase.is_none();
        if fits {
            self.measure_rotation();
        }
        fits
    }

    /// Test aid: the copy of the data area that the last call completed
    /// used (call `k`: `k % copies`, or `k % 2` where the calls measure
    /// how many copies they turn through and took the first two), and
    /// whether the calls measure it.
    #[doc(hidden)]
    pub fn testing_copy(&self) -> (usize, bool) {
        (self.copy_of(self.last), self.rotation.is_some())
    }
}
