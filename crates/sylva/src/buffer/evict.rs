//! Eviction of the buffer pool's pages. When a load or an allocation finds the pool full, the
//! loading thread runs the clock (second chance): an unmarked resident page gets marked; a
//! marked page that is not locked is locked, written back if dirty, discarded and left evicted.
//! A page whose copy is being written by a checkpoint (*in flight*, the pool's module docs) is
//! passed over. The budget is counted in pages, so the resident set (the RSS this pool causes)
//! stays within it. Eviction writes a victim straight from the frame, holding the exclusive
//! lock: nobody uses a page that is being evicted, so there is no one to hold up.
//!
//! A full pool evicts a *batch*: a sixty-fourth of the budget, 1 to 32 pages, so that the next
//! loads find room without taking the clock's lock, and the victims' frames are discarded
//! together, with one system call (`region`: the per-call cost is mostly the TLB shootdown
//! that interrupts the other CPUs). A clean victim leaves the clock's list and the count when
//! it is chosen and stays locked until its batch is discarded; a dirty one is written back
//! first, and the batch so far is discarded and released before that write, so no victim is
//! held for another's I/O. Between a victim's choice and its discard its frame is no longer
//! counted: the resident set may exceed the budget by the batch of each thread evicting, for
//! the length of one system call.
//!
//! The clock's lock (the list of resident pages and the hand) is held to choose a victim, not
//! to write one back: the evicting thread releases it for the log flush and the write, and takes
//! it again to drop the page from the list. Meanwhile other threads run the clock and load pages
//! (passing over the locked victim); a reader of the victim waits for its lock as for a writer's,
//! then loads it from the file, which holds its bytes by then (the write ends before the page
//! is released evicted, and nothing else can lock, load or reuse it until then). A checkpoint's
//! flush that meets the victim waits for the lock too, so the page is in the file before the
//! flush ends. Several threads may so write victims back at once, and together evict up to one
//! batch each more than the budget needs.
//!
//! **Reused runs.** An engine that writes a run of pages to the file itself
//! ([`crate::io::PageFile::write_run`], past the pool) into page ids it freed and allocated
//! again calls [`BufferPool::forget_run`] first: the pool drops its frames of those ids
//! unwritten, advances their versions and leaves them evicted (and no longer freed), and waits
//! until no older copy of them is in flight, so the run's write lands after any the pool
//! started.
//!
//! **Deferred write-backs.** A thread that must not wait for a write (the PA-Tree worker,
//! [`BufferPool::begin_load_deferring`]) does not write back a dirty victim whose records the
//! log already holds durably: it seals it in its frame and hands it out, still locked, as a
//! [`WriteBack`] (a victim the log does not cover yet is written back as by any thread); the
//! caller submits the write through its own ring and ends it with
//! [`BufferPool::complete_write_back`], which takes the page out of the
//! clock's list and the count, discards the frame and leaves the page evicted. Until then the
//! page is in the list and counted, as a victim written back by the evicting thread is, so a
//! checkpoint's flush meeting it waits for its lock (the page is in the file before the flush
//! ends); the eviction counts it as gone, so the pool is over its budget by the write-backs in
//! flight.
//!
//! **Pinned pages.** A thread that loads a page for others to read later (the PA-Tree worker,
//! whose tasks waiting on the page run after the read completes) pins it as it becomes
//! resident ([`BufferPool::complete_load_pinned`]) and unpins it once per waiter that ran
//! ([`BufferPool::unpin`]): until then the clock passes over it, as over a locked page, so the
//! loads those waiters' neighbours make cannot evict it first. Pins are counted per page in
//! the clock's state (one lock, taken by loads anyway); a pinned page is not locked, so
//! readers and writers use it as any other. A pool whose resident pages are all pinned evicts
//! nothing and overshoots its budget (the clock gives up after three turns): by at most the
//! pages pinned, which a worker bounds by the tasks it keeps in flight.
//!
//! Discarding is `region`'s ([`super::region::Region::discard_many`]).

use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;

use super::state::{is_evicted, BUSY, DIRTY, EVICTED, FREED, IN_FLIGHT, MARKED};
use super::{BufferPool, WriteBack};
use crate::error::{Error, Result};
use crate::sync::backoff;

/// Pages an eviction evicts at once at most (the discard of their frames is one system call).
pub(super) const MAX_EVICT_BATCH: usize = 32;

/// Victims of an eviction waiting for the discard of their frames: locked, clean, and no
/// longer in the clock's list or the resident count.
#[derive(Default)]
struct Victims {
    ids: [u64; MAX_EVICT_BATCH],
    len: usize,
}

impl Victims {
    fn push(&mut self, id: u64) {
        self.ids[self.len] = id;
        self.len += 1;
    }

    fn is_full(&self) -> bool {
        self.len == MAX_EVICT_BATCH
    }

    fn ids(&self) -> &[u64] {
        &self.ids[..self.len]
    }

    fn clear(&mut self) {
        self.len = 0;
    }
}

impl BufferPool {
    /// Takes one pin off page `id` ([`BufferPool::complete_load_pinned`]); the clock may evict
    /// it again once none is left. A page without pins is left as it is.
    pub fn unpin(&self, id: u64) {
        let mut clock = self.clock.lock();
        if let Some(n) = clock.pinned.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                clock.pinned.remove(&id);
            }
        }
    }

    /// Pages pinned now.
    pub fn pinned_pages(&self) -> usize {
        self.clock.lock().pinned.len()
    }

    /// Forgets what the pool holds of pages `first..first + n`, for a run of page ids that is
    /// being reused with contents written to the file directly, past the pool
    /// ([`crate::io::PageFile::write_run`]): each resident frame is discarded without being
    /// written back (its bytes are obsolete), each page's version advances (an optimistic read
    /// begun before fails its validation) and the page is left evicted and no longer freed, so
    /// its next use reads the file. Returns once no write of an older copy of these pages is in
    /// flight, so a run written after it lands last.
    ///
    /// Call it before writing the run, while nothing references the pages (they were freed and
    /// are not yet linked into anything): a page read between this call and the run's write
    /// would bring the old contents back.
    pub fn forget_run(&self, first: u64, n: u64) -> Result<()> {
        let end = first.checked_add(n).filter(|&end| end <= self.capacity);
        let Some(end) = end else {
            return Err(Error::InvalidArgument {
                what: format!("pages {first}..+{n} are beyond the pool's reserved address space"),
                limit: self.capacity as usize,
            });
        };
        let mut start = first;
        while start < end {
            let stop = end.min(start + MAX_EVICT_BATCH as u64);
            self.forget_pages(start, stop)?;
            start = stop;
        }
        Ok(())
    }

    /// [`BufferPool::forget_run`] for at most [`MAX_EVICT_BATCH`] pages `first..end` (within
    /// the capacity): locks each, waits for its write in flight, then drops the resident ones
    /// from the clock and discards their frames together.
    fn forget_pages(&self, first: u64, end: u64) -> Result<()> {
        let mut resident = Victims::default();
        for id in first..end {
            let st = self.state(id)?;
            let mut spins = 0;
            let s = loop {
                let s = st.load();
                if s & BUSY != 0 {
                    st.wait(s, BUSY, &mut spins);
                } else if st.try_lock(s) {
                    break s;
                }
            };
            // The flusher that wrote an older copy clears IN_FLIGHT when its write ends,
            // whoever holds the page; it does not wake anyone (rare: a page freed while its
            // copy was being written).
            let mut spins = 0;
            while st.load() & IN_FLIGHT != 0 {
                backoff(&mut spins);
            }
            if !is_evicted(s) && s & FREED == 0 {
                resident.push(id);
            }
        }
        let ids = resident.ids();
        let mut discarded = Ok(());
        if !ids.is_empty() {
            // Every resident page of the range is locked by us: nobody else adds or removes
            // it from the list meanwhile.
            self.clock
                .lock()
                .pages
                .retain(|p| !(first..end).contains(p));
            self.resident.fetch_sub(ids.len() as u64, Ordering::Relaxed);
            // As in `release`: a refused discard leaves bytes nobody reads as a page, since
            // every page here is released evicted.
            discarded = self.discard_frames(ids);
        }
        for id in first..end {
            self.state(id)?.unlock(EVICTED, false);
        }
        discarded
    }

    /// Makes room for one more page: if the pool is full, evicts a batch of pages (module docs,
    /// eviction).
    pub(super) fn make_room(&self) -> Result<()> {
        self.make_room_deferring(None)
    }

    /// [`BufferPool::make_room`]; with `defer`, for a thread that must not wait for a write:
    /// dirty victims whose records the log holds durably are not written back here but sealed
    /// and handed to the caller in `defer` (module docs, *deferred write-backs*).
    pub(super) fn make_room_deferring(&self, defer: Option<&mut Vec<WriteBack>>) -> Result<()> {
        if self.resident.load(Ordering::Relaxed) < self.budget() {
            return Ok(());
        }
        let mut victims = Victims::default();
        let evicted = self.evict(&mut victims, defer);
        let released = self.release(&mut victims);
        evicted.and(released)
    }

    /// Ends a write-back [`BufferPool::begin_load_deferring`] handed out, with the outcome of
    /// its write (the bytes written): written whole, the page is discarded and left evicted;
    /// otherwise it stays resident and dirty (its bytes are the only copy of its changes), and
    /// the error is returned (the caller poisons the database: a failed write is a failed
    /// device).
    pub fn complete_write_back(&self, write: WriteBack, written: Result<usize>) -> Result<()> {
        let mut done = vec![(write, written)];
        self.complete_write_backs(&mut done)
    }

    /// [`BufferPool::complete_write_back`] for many, whose frames are discarded together (one
    /// system call per [`MAX_EVICT_BATCH`]); empties `done`. Returns the first failure.
    pub fn complete_write_backs(&self, done: &mut Vec<(WriteBack, Result<usize>)>) -> Result<()> {
        let mut first_error = Ok(());
        let mut gone = Victims::default();
        for (write, written) in done.drain(..) {
            let id = write.id;
            let st = match self.state(id) {
                Ok(st) => st,
                Err(e) => {
                    first_error = first_error.and(Err(e));
                    continue;
                }
            };
            let written = written.and_then(|n| {
                if n == write.len {
                    Ok(())
                } else {
                    Err(Error::io_at(
                        self.file.io().path(),
                        std::io::Error::new(
                            std::io::ErrorKind::WriteZero,
                            format!("short write of page {id}: {n} of {} bytes", write.len),
                        ),
                    ))
                }
            });
            if let Err(e) = written {
                // Still in the list and counted: it stays resident, dirty.
                st.unlock(0, true);
                first_error = first_error.and(Err(e));
                continue;
            }
            self.writebacks.fetch_add(1, Ordering::Relaxed);
            {
                // Where the clock left it, unless a removal moved it since (only the last entry
                // moves, by `swap_remove`): rare, so a search then.
                let mut clock = self.clock.lock();
                let at = if clock.pages.get(write.at) == Some(&id) {
                    Some(write.at)
                } else {
                    clock.pages.iter().position(|&p| p == id)
                };
                if let Some(at) = at {
                    clock.pages.swap_remove(at);
                }
            }
            self.resident.fetch_sub(1, Ordering::Relaxed);
            // Clean now, out of the list and the count: a victim like any other from here.
            gone.push(id);
            if gone.is_full() {
                first_error = first_error.and(self.release(&mut gone));
            }
        }
        first_error.and(self.release(&mut gone))
    }

    /// Runs the clock until the pool is `evict_batch - 1` pages below its budget; leaves the
    /// last victims (locked, clean, no longer counted) in `victims` for the caller to release.
    /// With `defer`, a dirty victim the log covers is sealed and handed to the caller instead of
    /// written back (one it does not cover is written back here, after the log).
    fn evict(&self, victims: &mut Victims, mut defer: Option<&mut Vec<WriteBack>>) -> Result<()> {
        let mut clock = self.clock.lock();
        let budget = self.budget();
        if self.resident.load(Ordering::Relaxed) < budget {
            return Ok(()); // another thread made room while we waited for the clock
        }
        // A batch is at most the budget chosen at `new`; a budget moved lower since
        // (`set_budget`) may be below a batch, and then the clock empties the pool.
        let low = (budget + 1).saturating_sub(self.evict_batch as u64).max(1);
        let mut passes = 0usize;
        // Write-backs handed out by this call (deferring): on their way out.
        let mut handed = 0u64;
        while self.resident.load(Ordering::Relaxed).saturating_sub(handed) >= low {
            let n = clock.pages.len();
            if n == 0 || passes > 3 * n {
                // Everything resident is locked by someone: allow a brief overshoot rather
                // than deadlock; the next load evicts again.
                break;
            }
            passes += 1;
            clock.hand %= n;
            let id = clock.pages[clock.hand];
            let st = self.state(id)?;
            let s = st.load();
            // A page in flight stays: dropping it would let a reader reload the older bytes on
            // disk, and writing it here could land before the copy's write.
            if s & (BUSY | EVICTED | FREED | IN_FLIGHT) != 0 {
                clock.hand += 1;
                continue;
            }
            if !clock.pinned.is_empty() && clock.pinned.contains_key(&id) {
                clock.hand += 1;
                continue;
            }
            if s & MARKED == 0 {
                let _ =
                    st.0.compare_exchange(s, s | MARKED, Ordering::AcqRel, Ordering::Relaxed);
                clock.hand += 1;
                continue;
            }
            // A thread with a log flush of its own in flight (a PA-Tree session) passes over a
            // dirty page whose records are not durable yet: writing it back would wait for the
            // log, that is for the flush only this thread completes.
            if s & DIRTY != 0 && crate::sync::own_log_flush() && !self.log_covers(id) {
                clock.hand += 1;
                continue;
            }
            if !st.try_lock(s) {
                clock.hand += 1;
                continue;
            }
            // A thread deferring its write-backs hands out a dirty victim whose records are
            // durable (its LSN cannot change while we hold it); one whose records are not is
            // written back here, after the log, as for any thread (passing over it instead
            // left only the few clean pages to evict, and a pool of dirty pages evicted each
            // page it loaded before its waiter ran).
            if let (Some(out), true) = (defer.as_deref_mut(), s & DIRTY != 0 && self.log_covers(id))
            {
                // Handed out, still locked, in the list and counted (as a victim being written
                // back here is: a checkpoint's flush waits for its lock, so the page is in the
                // file before the flush ends); `complete_write_back` takes it out. The loop's
                // target counts it as gone.
                let at = clock.hand;
                match self.seal_for_write(id, at) {
                    Ok(write) => out.push(write),
                    Err(e) => {
                        st.unlock(0, true);
                        return Err(e);
                    }
                }
                handed += 1;
                clock.hand += 1;
                continue;
            }
            if s & DIRTY == 0 {
                // Its bytes are in the file: it leaves the list (the hand now points at the
                // page moved into its place) and the count at once, before its discard.
                let at = clock.hand;
                clock.pages.swap_remove(at);
            } else {
                let at = clock.hand;
                // Written back without the clock (module docs, eviction): other threads make
                // room and load pages meanwhile; only this page, locked, waits for the I/O.
                // The victims so far are released first, so they are not held for the write.
                let written = MutexGuard::unlocked(&mut clock, || {
                    self.release(victims)?;
                    self.write_back(id)
                });
                if let Err(e) = written {
                    st.unlock(0, true);
                    return Err(e);
                }
                // The entry is where the hand found it unless, while the clock was released,
                // it was the last one and a removal moved it (`swap_remove`): rare, so a
                // search then. Nothing else removes or adds it while we hold the page.
                let at = if clock.pages.get(at) == Some(&id) {
                    Some(at)
                } else {
                    clock.pages.iter().position(|&p| p == id)
                };
                if let Some(at) = at {
                    clock.pages.swap_remove(at);
                }
            }
            self.resident.fetch_sub(1, Ordering::Relaxed);
            victims.push(id);
            if victims.is_full() {
                MutexGuard::unlocked(&mut clock, || self.release(victims))?;
            }
        }
        Ok(())
    }

    /// Seals dirty page `id` (locked by the caller, its records durable in the log) in its
    /// frame for a write the caller submits.
    fn seal_for_write(&self, id: u64, at: usize) -> Result<WriteBack> {
        let (kind, lsn) = self.frame_header(id)?;
        // SAFETY: the caller holds the page's exclusive lock.
        let frame = unsafe { self.frame_slice(id) };
        let offset = self.file.seal_frame(id, frame, kind, lsn)?;
        Ok(WriteBack {
            id,
            offset,
            frame: self.frame(id),
            len: self.page_size,
            at,
        })
    }

    /// Whether page `id`'s last change is durable in the log (always, without a log).
    fn log_covers(&self, id: u64) -> bool {
        self.log
            .as_ref()
            .is_none_or(|log| self.page_lsn(id) < log.durable_below())
    }

    /// Discards the frames of `ids` (at most [`MAX_EVICT_BATCH`], each locked by the caller)
    /// together.
    fn discard_frames(&self, ids: &[u64]) -> Result<()> {
        let mut offsets = [0usize; MAX_EVICT_BATCH];
        for (o, &id) in offsets.iter_mut().zip(ids) {
            *o = id as usize * self.page_size;
        }
        let n = ids.len().min(MAX_EVICT_BATCH);
        self.frames.discard_many(&offsets[..n], self.page_size)
    }

    /// Discards the frames of `victims` (locked, clean, out of the clock's list and the count)
    /// together and releases them evicted; empties `victims`.
    fn release(&self, victims: &mut Victims) -> Result<()> {
        let ids = victims.ids();
        if ids.is_empty() {
            return Ok(());
        }
        // If the kernel refused a discard, some frames may still hold their bytes (memory the
        // count no longer sees), but every victim is clean: released evicted, it is read again
        // from the file at its next use, so nobody reads a discarded frame as a valid page.
        let discarded = self.discard_frames(ids);
        for &id in ids {
            if let Ok(st) = self.state(id) {
                st.unlock(EVICTED, false);
            }
        }
        self.evictions
            .fetch_add(ids.len() as u64, Ordering::Relaxed);
        victims.clear();
        discarded
    }
}
