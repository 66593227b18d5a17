//! The process's resident set, for the tests that bound an engine's memory.

/// `VmRSS` of this process, in bytes.
#[allow(clippy::unwrap_used)]
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}
