//! Page writes in groups: one log sync for many pages (the group commit of page writes).
//!
//! The WAL rule asks that a page reach disk only after the log records it reflects are durable,
//! its image among them when it is the page's first write since the checkpoint. Written one at
//! a time, every page that logs an image waits for an fsync of the log of its own: a checkpoint
//! that writes 10,000 pages spent 17–26 s in log fsyncs (`docs/results/treeline.md`). In a
//! group, pages are built, their images appended to the log, and the pages kept; when the group
//! closes (or fills), the log is synced once to the group's highest LSN and then every page is
//! written, in page order, consecutive pages with one I/O. The rule holds for each page: its
//! records and its image have LSNs at most the group's highest, durable before any of the
//! group's writes is issued.
//!
//! What the thesis has not got and this needs: the thesis ran without a log (§5.1.1), so its
//! flushes had no log to wait for.
//!
//! **Reads see the group.** A page waiting in a group is newer than the file's copy. Pages join
//! under the store's exclusive lock and may wait across its release (an eviction's page waits
//! for the next log sync), so every read of a segment page or an overflow page first asks
//! [`Store::settle`], which writes the group out if it holds one of the pages to read; a
//! reorganization writes it out before it reads the pre segments.
//!
//! **A failed write-out fails every later read.** When the log sync or a page write of a
//! write-out fails, the group's pages are dropped, and the cache entries they carried are
//! already clean or gone: the file's older pages would answer for them. The store is
//! poisoned, but by its caller, after the error has travelled up, and a reader can run in
//! between (a background checkpoint's write-out failing while a scan reads). So the group
//! remembers the failure before its mutex is released, and [`Store::settle`] refuses every
//! read from then on: a scan that met the file's older pages returned a deleted record and
//! missed a put (`power_loss_treeline_with_background_threads`, seed 17179869563).
//!
//! **Order.** Pages of a group are written in page order, not in the order they were built: an
//! overflow page and its base page of one flush may reach disk in either order. Neither the
//! power-loss contract (writes not covered by an fsync may be lost or torn in any combination)
//! nor Check I relies on that order: a base page whose overflow write was lost drops the link,
//! an overflow page whose base page's write was lost is linked again, and in both cases the
//! records concerned are dirty entries whose log records are still in the log (the checkpoint
//! that would drop them has not completed).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::store::{Counters, Store};
use crate::error::{Error, Result};
use crate::io::page_header::PageKind;
use crate::io::AlignedBuf;

/// The most pages the group holds before it is written out (1 MiB of buffers at 4 KiB, inside
/// the store's fixed allowance).
pub(crate) const GROUP_PAGES: usize = 256;

/// The longest run of consecutive pages written with one I/O.
const MAX_RUN: usize = 16;

/// A page built and waiting for the group's log sync.
struct Waiting {
    id: u64,
    kind: PageKind,
    lsn: u64,
    buf: AlignedBuf,
}

/// The pages waiting (module docs).
#[derive(Default)]
struct PageGroup {
    pages: Vec<Waiting>,
    /// The highest LSN a waiting page covers.
    max_lsn: u64,
}

/// The group, with a count of its pages that reads test without the mutex.
#[derive(Default)]
pub(crate) struct Groups {
    group: parking_lot::Mutex<PageGroup>,
    waiting: AtomicUsize,
    /// A write-out failed and dropped its pages (module docs): no page may be read.
    failed: AtomicBool,
    /// Pages that ever joined the group (a checkpoint's flush takes the lock a group at a time).
    pub(crate) joined: AtomicU64,
}

impl Store {
    /// Puts page `id` of `kind`, built (not sealed) in `page` and covering the log up to `lsn`,
    /// in the group; writes the group out when it is full, or when the log is durable past
    /// every page in it (before the page joins, and after). A page already waiting is replaced
    /// by its newer version.
    pub(crate) fn group_page(&self, id: u64, kind: PageKind, page: &[u8], lsn: u64) -> Result<()> {
        let ps = self.page_size();
        let mut g = self.groups.group.lock();
        if !g.pages.is_empty() && self.wal.durable_below() > g.max_lsn {
            self.write_out(&mut g)?;
        }
        g.max_lsn = g.max_lsn.max(lsn);
        self.groups.joined.fetch_add(1, Ordering::Relaxed);
        if let Some(w) = g.pages.iter_mut().find(|w| w.id == id) {
            w.buf[..ps].copy_from_slice(&page[..ps]);
            w.kind = kind;
            w.lsn = w.lsn.max(lsn);
        } else {
            let mut buf = self.file.buffer(1);
            buf[..ps].copy_from_slice(&page[..ps]);
            g.pages.push(Waiting { id, kind, lsn, buf });
            self.groups.waiting.store(g.pages.len(), Ordering::Release);
        }
        if g.pages.len() >= GROUP_PAGES || self.wal.durable_below() > g.max_lsn {
            self.write_out(&mut g)?;
        }
        Ok(())
    }

    /// Before pages `first..first + n` are read: writes the group out if one of them waits in
    /// it; `Poisoned` once a write-out has failed (module docs).
    pub(crate) fn settle(&self, first: u64, n: u64) -> Result<()> {
        if self.groups.waiting.load(Ordering::Acquire) != 0 {
            let mut g = self.groups.group.lock();
            if g.pages.iter().any(|w| w.id >= first && w.id - first < n) {
                self.write_out(&mut g)?;
            }
        }
        // Set before `waiting` is cleared and the mutex released: a reader that saw either
        // sees it.
        if self.groups.failed.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// Writes every waiting page out.
    pub(crate) fn write_group(&self) -> Result<()> {
        let mut g = self.groups.group.lock();
        self.write_out(&mut g)
    }

    /// Drops the waiting pages after a failure (the caller poisons the store; recovery decides
    /// what is on disk); from now on no page is read.
    pub(crate) fn drop_group(&self) {
        let mut g = self.groups.group.lock();
        self.groups.failed.store(true, Ordering::Release);
        g.pages.clear();
        g.max_lsn = 0;
        self.groups.waiting.store(0, Ordering::Release);
    }

    /// The log synced to the group's highest LSN, then its pages written in page order,
    /// consecutive ones with one I/O. On a failure the pages are dropped (the caller's error
    /// poisons the store).
    fn write_out(&self, g: &mut PageGroup) -> Result<()> {
        if g.pages.is_empty() {
            return Ok(());
        }
        let mut pages = std::mem::take(&mut g.pages);
        let lsn = std::mem::take(&mut g.max_lsn);
        let r = self.write_pages(&mut pages, lsn);
        if r.is_err() {
            self.groups.failed.store(true, Ordering::Release);
        }
        // Only now: a reader that saw pages waiting waits for the mutex until they are written.
        self.groups.waiting.store(0, Ordering::Release);
        r
    }

    fn write_pages(&self, pages: &mut [Waiting], lsn: u64) -> Result<()> {
        if lsn > 0 {
            self.wal.sync_to(lsn)?;
        }
        pages.sort_unstable_by_key(|w| w.id);
        let ps = self.page_size();
        let mut run: Option<AlignedBuf> = None;
        let mut at = 0;
        while at < pages.len() {
            let mut end = at + 1;
            while end < pages.len() && end - at < MAX_RUN && pages[end].id == pages[end - 1].id + 1
            {
                end += 1;
            }
            let n = end - at;
            if n == 1 {
                let w = &mut pages[at];
                self.file
                    .write_frame(w.id, &mut w.buf[..ps], w.kind, w.lsn)?;
            } else {
                let run = run.get_or_insert_with(|| self.file.buffer(MAX_RUN));
                let mut meta = Vec::with_capacity(n);
                for (i, w) in pages[at..end].iter().enumerate() {
                    run[i * ps..(i + 1) * ps].copy_from_slice(&w.buf[..ps]);
                    meta.push((w.kind, w.lsn));
                }
                self.file
                    .write_frames(pages[at].id, &mut run[..n * ps], &meta)?;
            }
            Counters::add(&self.counters.page_writes, n as u64);
            at = end;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::io::{Fault, FaultyIo, Io, MemIo};
    use crate::kv::KvStore;
    use crate::treeline::{TreeLine, TreeLineOptions};
    use crate::{Error, SyncMode};

    /// The window the module docs close: a write-out fails and drops a page whose delete
    /// marker its flush had already removed from the cache; until the caller poisons the store,
    /// a read met the file's older page and found the deleted record.
    #[test]
    fn after_a_failed_write_out_no_read_serves_the_older_pages() {
        let (log0, faults0) = FaultyIo::new(MemIo::new(Vec::new()));
        let (log1, faults1) = FaultyIo::new(MemIo::new(Vec::new()));
        let db = TreeLine::open_io(
            Box::new(MemIo::new(Vec::new())),
            [Box::new(log0) as Box<dyn Io>, Box::new(log1)],
            TreeLineOptions {
                sync: SyncMode::Never,
                background: false,
                forecast: false,
                checkpoint_bytes: 1 << 40,
                ..TreeLineOptions::default()
            },
        )
        .unwrap();
        let key = |i: u64| (i * 7919).to_be_bytes();
        for i in 0..200 {
            db.put(&key(i), b"value").unwrap();
        }
        db.checkpoint().unwrap();
        let gone = key(100);
        assert!(db.delete(&gone).unwrap());
        let store = db.store();
        {
            // What an eviction does: the page is written without the record, the marker
            // leaves the cache, and the page waits in the group for a log sync.
            let mut inner = store.inner.write();
            store.flush_key(&mut inner, &gone, false, false).unwrap();
            assert!(inner.cache.get(&gone).is_none());
        }
        assert!(!store.groups.group.lock().pages.is_empty());
        faults0.arm(Fault::FailSync);
        faults1.arm(Fault::FailSync);
        assert!(store.write_group().is_err(), "the log sync fails");
        // The store is not poisoned yet (the error has not reached a caller that would).
        assert!(
            matches!(db.get(&gone), Err(Error::Poisoned)),
            "{:?}",
            db.get(&gone)
        );
        let mut seen = Vec::new();
        let r = KvStore::scan(&db, &[], usize::MAX, &mut |k, _| {
            seen.push(k.to_vec());
            true
        });
        assert!(
            matches!(r, Err(Error::Poisoned)),
            "{r:?}; the deleted key seen: {}",
            seen.contains(&gone.to_vec())
        );
    }
}
