//! Memory for the run cache's long values ([`super::runcache`], "Memory"): a value of 8 KiB or
//! more lives in an anonymous mapping of its own, returned to the system when it leaves.
//!
//! **Why this pool.** A fresh mapping is backed page by page at first touch: a fault and a
//! zeroed page per 4 KiB, paid by the put that copies its value in, and for long values costing
//! more than the copy itself (measured in `docs/results/db.md`, issue 23, session 26). Two ways
//! around it:
//! - *Recycled.* A value leaving the cache hands its mapping back here, and the next value of
//!   the same page count takes it: no fault, no zeroing, no `munmap`. The bytes past the new
//!   value's length are left from the old one; a value only ever exposes its own length
//!   ([`super::runcache`]'s `Bytes`), so they are never read.
//! - *Faulted in ahead.* A database with background threads gets a thread of this pool's own
//!   (`sylva-prefault`, started at the first miss) that maps mappings of the page count last asked
//!   for and not found and faults them in (one `madvise` per mapping), so a load, whose values
//!   never leave, finds them ready and its put only copies. The thread spends what the put saved,
//!   but on the other core, while the put goes on. Without background threads a miss maps as before
//!   (no extra threads, as [`crate::DbOptions::background`] promises).
//!
//! Spares are kept by exact page count (a value of another size maps afresh, as before) and
//! total at most [`Mappings::new`]'s `max` bytes (the run cache passes 16 MiB or an eighth of its
//! budget, whichever is less), outside the cache's budget; a mapping handed back to a full pool
//! is unmapped. The thread makes room for the page count asked for by unmapping spares of other
//! sizes.
//!
//! Why by hand: the global allocator would recycle memory too (glibc's heap did), but it keeps
//! freed memory from the system (the run cache's values were moved off the heap for that,
//! session 21), and no allocator faults memory in ahead of a request.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::btree::store::Zeroed;

/// The granularity mappings are sized and classed in.
const PAGE: usize = 4096;

/// Spare mappings for long values (module docs).
pub(crate) struct Mappings {
    spares: Mutex<Spares>,
    /// Wakes the thread when a page count was asked for and missed, or at `stop`.
    wanted: Condvar,
    /// Bytes of spares kept at most.
    max: usize,
    /// Whether a thread faults mappings in ahead.
    ahead: bool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Spares {
    by_pages: HashMap<usize, Vec<Zeroed>>,
    /// Bytes in `by_pages`.
    bytes: usize,
    /// The page count last asked for and missed, for the thread to stock.
    want: Option<usize>,
    stop: bool,
}

/// A long value's mapping: handed back to its pool when dropped.
pub(crate) struct Mapping {
    map: Option<Zeroed>,
    pool: Arc<Mappings>,
}

impl Mapping {
    /// The mapping's first byte; it holds at least the length asked of [`Mappings::take`].
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.map
            .as_ref()
            .map_or(std::ptr::null_mut(), Zeroed::as_ptr)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(map) = self.map.take() {
            self.pool.give_back(map);
        }
    }
}

impl Mappings {
    /// A pool keeping at most `max` bytes of spares; `ahead`: fault them in on a thread of its
    /// own (module docs).
    pub(crate) fn new(max: usize, ahead: bool) -> Arc<Self> {
        Arc::new(Mappings {
            spares: Mutex::new(Spares::default()),
            wanted: Condvar::new(),
            max,
            ahead,
            thread: Mutex::new(None),
        })
    }

    /// A mapping of at least `len` bytes (> 0): a spare of the same page count, else a new one;
    /// `None` if the kernel refuses a new one (address space or map count exhausted).
    pub(crate) fn take(self: &Arc<Self>, len: usize) -> Option<Mapping> {
        let pages = len.div_ceil(PAGE);
        let mut s = self.spares.lock();
        if let Some(map) = s.by_pages.get_mut(&pages).and_then(Vec::pop) {
            s.bytes -= pages * PAGE;
            drop(s);
            return Some(Mapping {
                map: Some(map),
                pool: self.clone(),
            });
        }
        if self.ahead && self.max >= pages * PAGE {
            s.want = Some(pages);
            drop(s);
            self.wanted.notify_one();
            self.start_thread();
        } else {
            drop(s);
        }
        let map = Zeroed::try_new(pages * PAGE)?;
        Some(Mapping {
            map: Some(map),
            pool: self.clone(),
        })
    }

    /// Keeps `map` as a spare if there is room, else unmaps it.
    fn give_back(&self, map: Zeroed) {
        let mut s = self.spares.lock();
        if !s.stop && s.bytes + map.len() <= self.max {
            s.bytes += map.len();
            s.by_pages.entry(map.len() / PAGE).or_default().push(map);
        } else {
            drop(s);
            drop(map);
        }
    }

    /// Stops the thread, if one runs, and unmaps every spare; mappings handed back later are
    /// unmapped. Called when the run cache is dropped.
    pub(crate) fn stop(&self) {
        let spares = {
            let mut s = self.spares.lock();
            s.stop = true;
            s.bytes = 0;
            std::mem::take(&mut s.by_pages)
        };
        self.wanted.notify_all();
        drop(spares);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    fn start_thread(self: &Arc<Self>) {
        let mut thread = self.thread.lock();
        if thread.is_some() || self.spares.lock().stop {
            return;
        }
        let pool = self.clone();
        // A pool without its thread still works (a miss maps at once), so a refused spawn is
        // not an error.
        *thread = std::thread::Builder::new()
            .name("sylva-prefault".into())
            .spawn(move || pool.fault_ahead())
            .ok();
    }

    /// The thread: stocks the page count last missed until the spares are full, then waits.
    fn fault_ahead(&self) {
        loop {
            let pages = {
                let mut s = self.spares.lock();
                loop {
                    if s.stop {
                        return;
                    }
                    if let Some(p) = s.want {
                        if self.make_room(&mut s, p * PAGE) {
                            break p;
                        }
                        s.want = None;
                    }
                    self.wanted.wait(&mut s);
                }
            };
            let Some(map) = Zeroed::try_new(pages * PAGE) else {
                self.spares.lock().want = None;
                continue;
            };
            fault_in(&map);
            let mut s = self.spares.lock();
            if s.stop || !self.make_room(&mut s, map.len()) {
                drop(s);
                drop(map);
                continue;
            }
            s.bytes += map.len();
            s.by_pages.entry(pages).or_default().push(map);
        }
    }
}

/// Backs every page of `map` (zeroed by the kernel): with one `madvise(MADV_POPULATE_WRITE)`,
/// which faults the whole range in one call instead of taking a fault per page, or, on a kernel
/// without it (before Linux 5.14), a write to each page.
fn fault_in(map: &Zeroed) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the range is exactly the mapping, which this thread alone holds; populating
        // it changes no byte (its pages read as zero either way).
        let r = unsafe { libc::madvise(map.as_ptr().cast(), map.len(), libc::MADV_POPULATE_WRITE) };
        if r == 0 {
            return;
        }
    }
    for at in (0..map.len()).step_by(PAGE) {
        // SAFETY: `at` is inside the mapping, which this thread alone holds; the write faults
        // the page in (zeroed by the kernel) and leaves it zero.
        unsafe { map.as_ptr().add(at).write_volatile(0) };
    }
}

impl Mappings {
    /// Whether `len` more bytes of spares fit, after unmapping spares of other page counts to
    /// make room (the thread's; `s` locked).
    fn make_room(&self, s: &mut Spares, len: usize) -> bool {
        let pages = len / PAGE;
        while s.bytes + len > self.max {
            let Some(other) = s
                .by_pages
                .iter_mut()
                .find(|(p, v)| **p != pages && !v.is_empty())
                .and_then(|(_, v)| v.pop())
            else {
                return false;
            };
            s.bytes -= other.len();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycles_a_mapping_of_the_same_page_count() {
        let pool = Mappings::new(1 << 20, false);
        let a = pool.take(10_000).unwrap();
        let at = a.as_ptr();
        drop(a);
        // 10,000 and 12,000 bytes both take three pages.
        let b = pool.take(12_000).unwrap();
        assert_eq!(b.as_ptr(), at);
        drop(b);
        let c = pool.take(20_000).unwrap();
        assert_ne!(c.as_ptr(), at);
    }

    #[test]
    fn keeps_at_most_max_bytes() {
        let pool = Mappings::new(2 * PAGE * 3, false);
        let maps: Vec<_> = (0..4).map(|_| pool.take(3 * PAGE).unwrap()).collect();
        drop(maps);
        assert_eq!(pool.spares.lock().bytes, 2 * PAGE * 3);
        pool.stop();
        assert_eq!(pool.spares.lock().bytes, 0);
        drop(pool.take(PAGE));
        assert_eq!(pool.spares.lock().bytes, 0, "a stopped pool keeps nothing");
    }

    #[test]
    fn the_thread_stocks_the_page_count_missed() {
        let pool = Mappings::new(8 * 16 * PAGE, true);
        let first = pool.take(16 * PAGE).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while pool.spares.lock().bytes < 8 * 16 * PAGE {
            assert!(
                std::time::Instant::now() < deadline,
                "the pool was not stocked"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let spare = pool.take(16 * PAGE).unwrap();
        // SAFETY: the mapping holds 16 pages; the thread left them zero.
        let bytes = unsafe { std::slice::from_raw_parts(spare.as_ptr(), 16 * PAGE) };
        assert!(bytes.iter().all(|&b| b == 0));
        // Another size: the thread unmaps spares of the first to make room for it.
        drop(pool.take(4 * PAGE).unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while pool.spares.lock().by_pages.get(&4).map_or(0, Vec::len) < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the new size was not stocked"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(pool.spares.lock().bytes <= 8 * 16 * PAGE);
        drop((first, spare));
        pool.stop();
        assert!(pool.thread.lock().is_none());
    }
}
