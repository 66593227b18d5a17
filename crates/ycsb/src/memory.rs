//! Process memory, for bytes-per-record figures.

/// Resident set size of this process in bytes, from `/proc/self/statm` (`None` off Linux).
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

fn page_size() -> u64 {
    sysconf_or(libc::_SC_PAGESIZE, 4096)
}

/// A system constant from `sysconf`, or `fallback` where the system does not give one.
pub(crate) fn sysconf_or(name: libc::c_int, fallback: u64) -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let value = unsafe { libc::sysconf(name) };
    if value > 0 {
        value as u64
    } else {
        fallback
    }
}

/// Returns freed heap memory to the operating system, so that one engine's garbage does not hide
/// the next engine's growth in RSS.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory held by glibc's allocator; it is safe to
    // call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
