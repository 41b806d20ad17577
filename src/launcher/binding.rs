//! Where the launcher places each rank: CPU binding.

/// How the launcher places ranks on the CPUs it may use.
///
/// ```
/// use gaspi::launcher::{Binding, Launch, Output};
/// // 4 ranks on 2 CPUs: ranks 0 and 2 share CPU 0 under Spread.
/// assert_eq!(Binding::Spread.cpus(&[0, 1], 2, 4), vec![0]);
/// let report = Launch::new("sh", 2).args(["-c", "true"]).binding(Binding::None).output(Output::Capture).run()?;
/// assert!(report.success());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Binding {
    /// Let the kernel place and move the ranks.
    None,
    /// Cut the launcher's CPUs into equal consecutive groups, one per rank
    /// in rank order (MPI launchers' default, "compact"): with more ranks
    /// than CPUs, consecutive ranks share a CPU, so an emulated node's
    /// ranks sit together as on a real node; with fewer, each rank has its
    /// own group.
    #[default]
    Block,
    /// Deal the CPUs out round-robin (Intel MPI's placement of more ranks
    /// than cores): rank `r` runs on CPU `r % cpus`, so consecutive ranks,
    /// and a node's ranks, are spread over the CPUs.
    Spread,
}

impl Binding {
    /// Parse `none`, `block` or `spread`.
    ///
    /// ```
    /// use gaspi::launcher::Binding;
    /// assert_eq!(Binding::parse("block"), Some(Binding::Block));
    /// assert_eq!(Binding::parse("socket"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Binding> {
        match s {
            "none" => Some(Binding::None),
            "block" => Some(Binding::Block),
            "spread" => Some(Binding::Spread),
            _ => None,
        }
    }

    /// The CPUs of rank `rank` of `ranks` among `cpus` (empty: unbound).
    ///
    /// ```
    /// use gaspi::launcher::Binding;
    /// let cpus = [0, 1];
    /// assert_eq!(Binding::Block.cpus(&cpus, 1, 4), vec![0]); // ranks 0, 1 on CPU 0
    /// assert_eq!(Binding::Block.cpus(&cpus, 2, 4), vec![1]);
    /// assert_eq!(Binding::Block.cpus(&[0, 1, 2, 3], 1, 2), vec![2, 3]);
    /// assert_eq!(Binding::Spread.cpus(&cpus, 2, 4), vec![0]); // ranks 0, 2 on CPU 0
    /// assert!(Binding::None.cpus(&cpus, 0, 4).is_empty());
    /// ```
    pub fn cpus(self, cpus: &[usize], rank: usize, ranks: usize) -> Vec<usize> {
        match self {
            Binding::None => Vec::new(),
            _ if cpus.is_empty() || ranks == 0 => Vec::new(),
            Binding::Spread if ranks >= cpus.len() => vec![cpus[rank % cpus.len()]],
            Binding::Spread => Binding::Block.cpus(cpus, rank, ranks),
            Binding::Block => {
                let c = cpus.len();
                let first = rank * c / ranks;
                let end = ((rank + 1) * c / ranks).max(first + 1);
                cpus[first..end].to_vec()
            }
        }
    }
}
