//! What a rank sent (`Context::traffic`): intra-node and inter-node
//! operations apart, so that a test can check that an algorithm sent
//! exactly the inter-node messages its cost model says. The counters live
//! in the context (`context/traffic.rs`).

use crate::context::Context;
use crate::context::traffic::Traffic;
use crate::types::Rank;

impl Context {
    /// Whether `rank` is on another node than this rank.
    pub(crate) fn is_inter(&self, rank: Rank) -> bool {
        self.node_of(rank) != self.node()
    }

    /// What this rank has sent since init or the last
    /// [`Context::reset_traffic`], intra-node and inter-node apart.
    ///
    /// ```
    /// use gaspi::{Config, Context, Notification, Timeout};
    /// let ctx = Context::init(Config::default())?;
    /// ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// ctx.notify(ctx.rank(), 0, Notification::new(1, 1), 0, Timeout::Block)?;
    /// let t = ctx.traffic();
    /// assert_eq!((t.intra.notifications, t.inter.messages()), (1, 0));
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn traffic(&self) -> Traffic {
        self.traffic.snapshot()
    }

    /// Start counting from zero.
    ///
    /// ```
    /// # use gaspi::{Config, Context, Notification, Timeout};
    /// # let ctx = Context::init(Config::default())?;
    /// # ctx.segment_alloc(0, 64, gaspi::Alloc::Initialized)?;
    /// ctx.notify(ctx.rank(), 0, Notification::new(0, 1), 0, Timeout::Block)?;
    /// ctx.reset_traffic();
    /// assert_eq!(ctx.traffic().intra.messages(), 0);
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn reset_traffic(&self) {
        self.traffic.reset();
    }
}
