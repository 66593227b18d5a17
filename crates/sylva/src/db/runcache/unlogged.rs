//! Values the log does not carry (longer than `logged_value_max`, at most a sixteenth of the
//! cache; [`crate::db::overflow`], "Writing"). They enter dirty and *unlogged*, and leave as
//! any dirty value does, by eviction or a checkpoint; but they must also be in the file, synced,
//! before the log's sync that makes their records durable. [`RunCache::write_unlogged`] is the
//! log's [`BeforeSync`] hook: it writes every unlogged value still dirty (a list of their first
//! pages, emptied by each call) and fsyncs the page file if any unlogged value was written since
//! its last fsync, by it or by a write-back (a count of such writes, taken before the entries
//! are marked clean or leave, and the count its last fsync covered). The hook runs after the
//! log took the records it syncs, each of whose values entered the cache before its record was
//! appended, so every value it must see is either still dirty here or written and counted. Two
//! rules differ from logged values:
//! - an unlogged value freed while dirty is written all the same (marked freed, it leaves once
//!   written), whenever it was put: its record may become durable before the record that freed
//!   it, and recovery, finding the run missing, would end the log there;
//! - the hook never waits for the log (it runs inside the log's flush): an unlogged value is
//!   never put over reused pages whose freeing record is not durable (those are logged).
//!
//! **Written behind.** Left to the hook, a `batch` boundary's sync writes every unlogged value
//! put since the last one, and the writer reaching the next boundary while that sync still
//! runs waits for it and then writes its own batch: the device idles while values are put and
//! the writer idles while they are written. A database with background threads starts a
//! thread (`sylva-write-behind`) that writes the unlogged values dirty whenever 1 MiB of them
//! was put since its last pass ([`WRITE_BEHIND_BYTES`](super::WRITE_BEHIND_BYTES)), without a sync, in passes of at most
//! [`BEHIND_PASS_BYTES`] (a hook waits for the pass in progress); the hook then finds most of
//! them written and counted, and only syncs. It takes the list under the same lock as
//! the hook, so the hook's argument above holds: a value either is on the list, or was written
//! and counted by a pass that ended before the hook took the lock. A failed write puts its
//! values back on the list for the hook, whose failure is the one reported. The thread holds
//! the cache only while it writes, and is stopped and joined when the cache is dropped.

use std::collections::hash_map::Entry as MapEntry;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::run_pages;
use super::{RunCache, Victim, BEHIND_PASS_BYTES};
use crate::error::Result;
use crate::io::PageFile;
use crate::wal::BeforeSync;

impl RunCache {
    /// The runs (first page, pages) of the dirty values whose records do not carry them.
    pub(crate) fn dirty_unlogged(&self, page_size: usize) -> Vec<(u64, u64)> {
        let inner = self.inner.read();
        inner
            .map
            .iter()
            .filter(|(_, e)| e.dirty && e.unlogged)
            .map(|(&first, e)| (first, run_pages(e.len(), page_size)))
            .collect()
    }

    /// Writes every dirty value whose record does not carry it and syncs the page file if any
    /// such value was written since the last time (module docs, "Values the log does not
    /// carry"): the log's [`crate::wal::BeforeSync`], run before each of its syncs.
    pub(crate) fn write_unlogged(&self, file: &PageFile) -> Result<()> {
        // Set before the entry's record is appended, so before any sync that covers it.
        if !self.any_unlogged.load(Ordering::Acquire) {
            return Ok(());
        }
        self.write_unlogged_runs(file, None)?;
        let written = self.unlogged_written.load(Ordering::Acquire);
        if self.unlogged_synced.load(Ordering::Relaxed) < written {
            file.sync()?;
            self.unlogged_synced.store(written, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes every dirty value whose record does not carry it, without a sync: the first half
    /// of [`RunCache::write_unlogged`], and the write-behind thread's pass. A value whose write
    /// failed goes back on the list, for the next pass or the log's hook to try again (the
    /// hook's failure is the one reported).
    ///
    /// With `limit`, the pass takes only the values first put, up to about that many bytes, so
    /// the hook, which waits for a pass to end, never waits long; the result then says whether
    /// more are left.
    fn write_unlogged_runs(&self, file: &PageFile, limit: Option<u64>) -> Result<bool> {
        let mut buf = self.unlogged_lock.lock();
        let (mut victims, more): (Vec<Victim>, bool) = {
            let mut inner = self.inner.write();
            let inner = &mut *inner;
            let mut taken = 0u64;
            let mut victims = Vec::new();
            let mut end = 0;
            for &first in &inner.unlogged {
                if limit.is_some_and(|l| taken >= l) {
                    break;
                }
                end += 1;
                if let Some(e) = inner.map.get(&first).filter(|e| e.dirty && e.unlogged) {
                    taken += e.len() as u64;
                    victims.push(e.victim(first));
                }
            }
            inner.unlogged.drain(..end);
            inner.unlogged_bytes = if inner.unlogged.is_empty() {
                0
            } else {
                inner.unlogged_bytes.saturating_sub(taken)
            };
            (victims, !inner.unlogged.is_empty())
        };
        if !victims.is_empty() {
            victims.sort_unstable_by_key(|v| v.first);
            victims.dedup_by_key(|v| v.first);
            let sorted: Vec<&Victim> = victims.iter().collect();
            let result = self.write_refs(&sorted, file, None, &mut buf);
            let mut inner = self.inner.write();
            for v in &victims {
                if let MapEntry::Occupied(mut o) = inner.map.entry(v.first) {
                    if !Arc::ptr_eq(&o.get().value, &v.value) {
                        continue;
                    }
                    if result.is_err() {
                        inner.unlogged.push(v.first);
                        inner.unlogged_bytes += v.value.len() as u64;
                    } else if o.get().freed {
                        let e = o.remove();
                        self.bytes.fetch_sub(e.charge(), Ordering::Relaxed);
                    } else {
                        o.get_mut().dirty = false;
                    }
                }
            }
            result?;
        }
        Ok(more)
    }

    /// Starts the write-behind thread (module docs, "Written behind"), writing to `file`; once.
    pub(crate) fn start_write_behind(self: &Arc<Self>, file: Arc<PageFile>) {
        if !self.enabled() || self.behind.get().is_some() {
            return;
        }
        let behind = Arc::new(Behind {
            wake: Mutex::new(Wake::default()),
            cv: Condvar::new(),
            thread: Mutex::new(None),
        });
        if self.behind.set(behind.clone()).is_err() {
            return;
        }
        let runs = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("sylva-write-behind".into())
            .spawn(move || write_behind_loop(&behind, &runs, &file));
        if let (Some(b), Ok(handle)) = (self.behind.get(), spawned) {
            *b.thread.lock() = Some(handle);
        }
        // Not spawned: the log's hook writes everything, as without the thread.
    }
}

/// What starts and stops the write-behind thread (module docs, "Written behind").
pub(super) struct Behind {
    wake: Mutex<Wake>,
    cv: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Default)]
struct Wake {
    requested: bool,
    stop: bool,
}

impl Behind {
    pub(super) fn request(&self) {
        let mut w = self.wake.lock();
        if !w.requested {
            w.requested = true;
            self.cv.notify_one();
        }
    }

    /// Stops the thread and waits for it, unless it is the caller (the thread held the cache's
    /// last reference through a pass: it returns on its own).
    pub(super) fn stop(&self) {
        self.wake.lock().stop = true;
        self.cv.notify_one();
        let handle = self.thread.lock().take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    /// Waits for a request; `false` once stopped.
    fn wait(&self) -> bool {
        let mut w = self.wake.lock();
        while !w.requested && !w.stop {
            self.cv.wait(&mut w);
        }
        w.requested = false;
        !w.stop
    }
}

/// The write-behind thread: on each request, writes the unlogged values dirty until none is
/// left. It holds the cache only while it writes, so dropping the database's last reference
/// stops it.
fn write_behind_loop(behind: &Behind, runs: &std::sync::Weak<RunCache>, file: &PageFile) {
    while behind.wait() {
        let Some(cache) = runs.upgrade() else {
            return;
        };
        // In passes of a few writes each, until the list is empty. A failure leaves the values
        // on the list; the log's hook retries and reports it.
        while let Ok(true) = cache.write_unlogged_runs(file, Some(BEHIND_PASS_BYTES)) {}
    }
}

/// The log's [`BeforeSync`] for a database whose run cache holds values their records do not
/// carry: [`RunCache::write_unlogged`].
pub(crate) struct UnloggedRuns {
    pub(crate) runs: Arc<RunCache>,
    pub(crate) file: Arc<PageFile>,
}

impl BeforeSync for UnloggedRuns {
    fn before_log_sync(&self) -> Result<()> {
        self.runs.write_unlogged(&self.file)
    }
}
