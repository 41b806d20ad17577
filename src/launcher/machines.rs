//! Machine files (GPI-2's and MPI's lists of hosts).

use crate::sys;
use std::io;
use std::path::Path;

/// The host names in a GPI-2 machinefile: one per line, `#` comments and
/// blank lines ignored.
///
/// ```
/// let path = std::env::temp_dir().join(format!("machinefile-doc-{}", std::process::id()));
/// std::fs::write(&path, "# two hosts\nnode01\n\nnode02 slots=2\n")?;
/// assert_eq!(gaspi::launcher::read_machinefile(&path)?, vec!["node01", "node02"]);
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_machinefile(path: &Path) -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or(l).to_string())
        .collect())
}

/// Whether `host` names this machine.
///
/// ```
/// use gaspi::launcher::is_local_host;
/// assert!(is_local_host("localhost") && is_local_host("127.0.0.1"));
/// assert!(!is_local_host("some-other-host.example"));
/// ```
pub fn is_local_host(host: &str) -> bool {
    let me = sys::hostname();
    let short = me.split('.').next().unwrap_or(&me);
    host == "localhost"
        || host == "ip6-localhost"
        || host == "::1"
        || host.starts_with("127.")
        || (!me.is_empty() && (host == me || host == short))
}
