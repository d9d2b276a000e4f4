//! What this process uses (RSS, malloc and SQLite memory) and the machine load, read from
//! /proc and the allocators.

/// A kB figure of /proc/self/status (VmRSS, VmHWM).
pub(crate) fn proc_status_kib(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Memory of this process, attributed as far as the allocators tell.
pub(crate) struct Mem {
    rss_kib: Option<u64>,
    /// Bytes SQLite has allocated (page caches of every connection, statements, schema).
    sqlite: i64,
    /// Bytes glibc malloc has handed out and not got back (includes `sqlite`): the C heap.
    /// Rust's own allocations go to mimalloc (the binaries' global allocator), not counted here.
    heap_used: usize,
    /// Bytes glibc malloc holds free inside its arenas (fragmentation, not returned to the OS).
    heap_free: usize,
}

impl Mem {
    pub(crate) fn now() -> Self {
        // SAFETY: both read process-wide counters and take no pointers.
        let sqlite = unsafe { libsqlite3_sys::sqlite3_memory_used() };
        let (heap_used, heap_free) = heap();
        Self {
            rss_kib: proc_status_kib("VmRSS"),
            sqlite,
            heap_used,
            heap_free,
        }
    }

    pub(crate) fn rss_mib(&self) -> f64 {
        mib(self.rss_kib)
    }
}

impl std::fmt::Display for Mem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = |b: f64| b / 1048576.0;
        write!(
            f,
            "RSS {:.0} MiB; C heap (glibc malloc) in use {:.0} MiB (of which SQLite {:.0} MiB), free but held {:.0} MiB; the rest is the Rust heap (mimalloc) and code",
            self.rss_mib(),
            m(self.heap_used as f64),
            m(self.sqlite as f64),
            m(self.heap_free as f64)
        )
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn heap() -> (usize, usize) {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let mi = unsafe { libc::mallinfo2() };
    (mi.uordblks + mi.hblkhd, mi.fordblks)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn heap() -> (usize, usize) {
    (0, 0)
}

/// The 1, 5 and 15 minute load averages.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub(crate) fn mib(kib: Option<u64>) -> f64 {
    kib.map_or(f64::NAN, |k| k as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_status() {
        assert!(proc_status_kib("VmRSS").is_some_and(|k| k > 0));
        assert_eq!(proc_status_kib("NoSuchKey"), None);
    }
}
