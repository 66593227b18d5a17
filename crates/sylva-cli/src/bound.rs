//! `sylva bench --memory-limit`: hold each engine to a memory limit that counts the operating
//! system's page cache, so engines that cache through the kernel (LMDB's memory map, the buffered
//! reads of RocksDB, fjall, redb and sled) are bounded like `db`, whose O_DIRECT reads are served
//! by its own pool only.
//!
//! How: for each engine, `sylva bench` creates a fresh child of its own memory cgroup with
//! `memory.limit_in_bytes` = the limit and runs the engine in a child process (the same binary),
//! which generates its workload, then joins the cgroup just before opening the engine. A cgroup
//! only counts memory allocated while a task is in it (v1 `memory.move_charge_at_immigrate` is
//! 0 by default, and this module sets it to 0 explicitly), so the generated workload stays
//! outside the limit; what counts is everything the engine allocates and every page of its files
//! the kernel caches, plus the small per-phase bookkeeping of the harness (latency histograms).
//! When the cgroup is full the kernel reclaims page cache first; anonymous memory above the limit
//! (an engine that does not keep to it) ends in the kernel's out-of-memory killer, which kills
//! only that engine's child process: the parent reports it (`memory.oom_control` counts the
//! kills) and goes on with the next engine.
//!
//! cgroup v1 only (the memory controller at `/sys/fs/cgroup/memory`, as on this project's
//! machines), and it needs permission to create cgroups (root or a delegated hierarchy). cgroup
//! v2 forbids processes in a cgroup whose children have controllers enabled ("no internal
//! processes"), so a process cannot bound itself this way there; `scripts/memory-bound.sh`
//! bounds a whole command instead, on either version.

use std::path::{Path, PathBuf};

const V1_ROOT: &str = "/sys/fs/cgroup/memory";

/// A memory cgroup of the bench: created (and removed on drop) by the parent, or joined by the
/// child process that runs one engine in it.
pub struct MemoryBound {
    dir: PathBuf,
    home: PathBuf,
    /// Created by this process, so it removes it on drop.
    owned: bool,
    /// This process moved itself in.
    entered: bool,
}

impl MemoryBound {
    /// Creates a new memory cgroup limited to `limit` bytes under this process's own, without
    /// entering it.
    pub fn create(limit: u64) -> Result<MemoryBound, String> {
        let home = own_v1_cgroup()?;
        let dir = home.join(format!(
            "sylva-bench-{}-{}",
            std::process::id(),
            unique_suffix()
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot create the memory cgroup {}: {e}", dir.display()))?;
        let bound = MemoryBound {
            dir,
            home,
            owned: true,
            entered: false,
        };
        bound.write("memory.move_charge_at_immigrate", "0")?;
        bound.write("memory.limit_in_bytes", &limit.to_string())?;
        let set: u64 = bound.read("memory.limit_in_bytes")?;
        // The kernel rounds the limit down to whole pages.
        if set > limit || limit - set >= 4096 {
            return Err(format!(
                "the memory cgroup took a limit of {set} bytes for {limit}"
            ));
        }
        Ok(bound)
    }

    /// Moves this process into the cgroup (it moves back when the bound is dropped).
    #[cfg(test)]
    fn enter(&mut self) -> Result<(), String> {
        self.write("cgroup.procs", &std::process::id().to_string())?;
        self.entered = true;
        Ok(())
    }

    /// Moves this process into the cgroup at `dir`, created by a parent process that removes it.
    pub fn join(dir: &Path) -> Result<MemoryBound, String> {
        let bound = MemoryBound {
            dir: dir.to_path_buf(),
            home: dir.parent().unwrap_or(dir).to_path_buf(),
            owned: false,
            entered: true,
        };
        bound.write("cgroup.procs", &std::process::id().to_string())?;
        Ok(bound)
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The most memory the cgroup has held since it was entered, page cache included.
    pub fn peak(&self) -> Option<u64> {
        self.read("memory.max_usage_in_bytes").ok()
    }

    /// A counter of the cgroup's `memory.stat` (`rss`: anonymous memory; `cache`: page cache).
    pub fn stat(&self, key: &str) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join("memory.stat")).ok()?;
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
    }

    /// How many processes the kernel's out-of-memory killer killed in the cgroup.
    pub fn oom_kills(&self) -> Option<u64> {
        let path = self.dir.join("memory.oom_control");
        let text = std::fs::read_to_string(path).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
    }

    /// How often the cgroup reached its limit (and the kernel had to reclaim).
    #[cfg(test)]
    fn limit_hits(&self) -> Option<u64> {
        self.read("memory.failcnt").ok()
    }

    /// Whether this process can bound engines: creates and removes a cgroup (no limit set).
    pub fn available() -> Result<(), String> {
        let dir = own_v1_cgroup()?.join(format!(
            "sylva-bench-{}-{}",
            std::process::id(),
            unique_suffix()
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot create the memory cgroup {}: {e}", dir.display()))?;
        std::fs::remove_dir(&dir)
            .map_err(|e| format!("cannot remove the memory cgroup {}: {e}", dir.display()))
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let path = self.dir.join(file);
        std::fs::write(&path, value).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn read(&self, file: &str) -> Result<u64, String> {
        let path = self.dir.join(file);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        text.trim()
            .parse()
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl Drop for MemoryBound {
    fn drop(&mut self) {
        if self.entered && self.owned {
            // Back to where the process came from.
            let _ = std::fs::write(
                self.home.join("cgroup.procs"),
                std::process::id().to_string(),
            );
        }
        if self.owned {
            // The kernel hands the cgroup's remaining charges (page cache of files still
            // cached) to the parent when the directory is removed.
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// The directory of this process's own cgroup v1 memory cgroup.
fn own_v1_cgroup() -> Result<PathBuf, String> {
    if !Path::new(V1_ROOT).join("memory.limit_in_bytes").exists() {
        return Err(format!(
            "--memory-limit needs the cgroup v1 memory controller at {V1_ROOT}; with cgroup v2, \
             bound the whole command with scripts/memory-bound.sh instead"
        ));
    }
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let path = parse_memory_line(&text)
        .ok_or("/proc/self/cgroup names no cgroup v1 memory hierarchy".to_string())?;
    Ok(Path::new(V1_ROOT).join(path.trim_start_matches('/')))
}

/// The memory controller's path in a `/proc/self/cgroup` text (`ID:memory:/path` lines).
fn parse_memory_line(text: &str) -> Option<&str> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })
}

fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_memory_hierarchy_among_the_others() {
        let text = "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n";
        assert_eq!(parse_memory_line(text), Some("/process_api/abc"));
        assert_eq!(
            parse_memory_line("3:cpu,memory:/x\n"),
            Some("/x"),
            "co-mounted controllers"
        );
        assert_eq!(parse_memory_line("0::/\n1:cpu:/\n"), None);
        assert_eq!(parse_memory_line("4:memoryx:/y\n"), None);
    }

    /// Needs root and cgroup v1 (as on the project's machines); skips itself elsewhere. Runs in
    /// a child process of its own (this test binary, filtered to this test), because the bound
    /// moves the whole process, and other tests running beside it in threads would be charged.
    #[test]
    fn a_bounded_process_cannot_keep_more_page_cache_than_its_limit() {
        const CHILD: &str = "SYLVA_BOUND_TEST_CHILD";
        if std::env::var_os(CHILD).is_none() {
            let exe = std::env::current_exe().expect("test binary");
            let out = std::process::Command::new(exe)
                .args([
                    "--exact",
                    "bound::tests::a_bounded_process_cannot_keep_more_page_cache_than_its_limit",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, "1")
                .output()
                .expect("run the child");
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "child failed:\n{text}");
            assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
            return;
        }
        let limit = 16u64 << 20;
        let mut bound = match MemoryBound::create(limit) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        bound.enter().expect("enter");
        // Write 64 MiB through the page cache: the kernel must reclaim to stay within the limit.
        let dir = tempfile::tempdir().expect("tempdir");
        let chunk = vec![7u8; 1 << 20];
        let mut file = std::fs::File::create(dir.path().join("f")).expect("create");
        for _ in 0..64 {
            std::io::Write::write_all(&mut file, &chunk).expect("write");
        }
        file.sync_all().expect("sync");
        let peak = bound.peak().expect("peak");
        assert!(peak <= limit, "peak {peak} above the limit {limit}");
        assert!(peak > limit / 2, "the writes were not charged: peak {peak}");
        let cache = bound.stat("cache").expect("memory.stat cache");
        assert!(cache > 0 && cache <= limit, "page cache {cache}");
        assert!(bound.limit_hits().expect("failcnt") > 0);
        assert_eq!(
            bound.oom_kills(),
            Some(0),
            "page cache is reclaimed, not killed for"
        );
        let dir_of_bound = bound.dir.clone();
        drop(bound);
        assert!(!dir_of_bound.exists(), "the cgroup is removed on drop");
        let own = own_v1_cgroup().expect("own cgroup");
        assert!(!own.starts_with(&dir_of_bound), "the process moved back");
    }
}
