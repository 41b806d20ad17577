//! The size of the machine's last-level cache, which decides when a
//! collective's data cannot stay in the caches anyway (and is then
//! pipelined through them, its private copies streamed past them).

use std::sync::OnceLock;

/// What [`last_level_cache_bytes`] assumes where the system does not say
/// (8 MiB: small for a server, so large calls are treated as large).
const UNKNOWN: usize = 8 << 20;

/// Bytes of the largest cache of CPU 0 that Linux reports
/// (`/sys/devices/system/cpu/cpu0/cache/index*/size`, usually the L3),
/// read once; [`UNKNOWN`] where there is none to read.
pub(crate) fn last_level_cache_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        (0..8)
            .filter_map(|i| {
                let path = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
                parse_size(&std::fs::read_to_string(path).ok()?)
            })
            .max()
            .unwrap_or(UNKNOWN)
    })
}

/// A cache size as sysfs writes it: `32768K`, `1M`, or bytes.
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: usize = digits.parse().ok()?;
    let shift = match unit {
        "" => 0,
        "K" | "KB" | "KiB" => 10,
        "M" | "MB" | "MiB" => 20,
        "G" | "GB" | "GiB" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift).filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_sizes_parse() {
        assert_eq!(parse_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("0K"), None);
        assert_eq!(parse_size("12Q"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }
}
