//! The checkpoint's flush: every dirty resident page written back in page order, each run of
//! consecutive dirty pages copied into one buffer and written with one write, after the log
//! covering the copies (the pool's module docs: a writer waits for a page's copy, never for
//! the I/O; a page in flight is only kept from eviction).

use std::sync::atomic::Ordering;

use super::state::{BUSY, DIRTY, EVICTED, FREED};
use super::BufferPool;
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::io::AlignedBuf;

/// A run of consecutive pages copied into the flush buffer and in flight, waiting for its write.
struct Run {
    first: u64,
    /// Each copied page's kind and LSN, in page order.
    pages: Vec<(PageKind, u64)>,
    max_lsn: u64,
}

impl Run {
    fn ids(&self) -> std::ops::Range<u64> {
        self.first..self.first + self.pages.len() as u64
    }
}

impl BufferPool {
    /// Writes back every dirty resident page (they stay resident, now clean), in page order,
    /// each run of consecutive dirty pages with one write from a copy (module docs: a writer
    /// waits for a page's copy, never for the I/O). When it returns, every change made to a
    /// page before it began is in the file.
    pub fn flush_all(&self) -> Result<()> {
        // Make the log durable first: most copies need nothing more, so most runs are written
        // without a log fsync in between. `durable`: how far the log is known durable; asked
        // again (a lock) only for a run whose LSN is past it.
        let mut durable = match &self.log {
            Some(log) => log.flush_to(u64::MAX)?,
            None => 0,
        };
        // One flush at a time: so a page in flight is always one of our own run's (and a
        // page that is neither dirty nor in flight is in the file).
        let mut buf = self.flush_buf.lock();
        let buf = buf.get_or_insert_with(|| self.file.buffer(self.run_pages));
        let mut pages: Vec<u64> = self.clock.lock().pages.clone();
        pages.sort_unstable();
        pages.dedup();
        let mut run = Run {
            first: 0,
            pages: Vec::with_capacity(self.run_pages),
            max_lsn: 0,
        };
        for id in pages {
            let st = match self.state(id) {
                Ok(st) => st,
                Err(e) => return self.end_run(&mut run, Err(e)),
            };
            let mut spins = 0;
            loop {
                let s = st.load();
                if s & (EVICTED | FREED) != 0 || s & DIRTY == 0 {
                    break;
                }
                if !run.pages.is_empty()
                    && (run.ids().end != id || run.pages.len() >= self.run_pages)
                {
                    self.write_run(&mut run, buf, &mut durable)?;
                }
                if !st.try_lock_writing(s) {
                    // A writer holds it (briefly) or the mark changed. Our run's pages hold
                    // nobody up meanwhile (only eviction skips them).
                    if s & BUSY != 0 {
                        st.wait(s, BUSY, &mut spins);
                    }
                    continue;
                }
                if run.pages.is_empty() {
                    run.first = id;
                }
                let (kind, lsn) = match self.frame_header(id) {
                    Ok(header) => header,
                    Err(e) => {
                        st.unlock_writing();
                        return self.end_run(&mut run, Err(e));
                    }
                };
                let slot = run.pages.len() * self.page_size;
                let copy = &mut buf[slot..slot + self.page_size];
                // SAFETY: we hold the page for writing: no writer changes its frame, which is
                // `page_size` bytes of our mapping, disjoint from the buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.frame(id).as_ptr(),
                        copy.as_mut_ptr(),
                        self.page_size,
                    )
                };
                st.unlock_copied();
                run.pages.push((kind, lsn));
                run.max_lsn = run.max_lsn.max(lsn);
                break;
            }
        }
        self.write_run(&mut run, buf, &mut durable)
    }

    /// Writes `run` (its pages copied into `buf` and in flight) with one write, after the log
    /// covering the copies, and ends it.
    fn write_run(&self, run: &mut Run, buf: &mut AlignedBuf, durable: &mut u64) -> Result<()> {
        if run.pages.is_empty() {
            return Ok(());
        }
        let result = (|| {
            if let Some(log) = self.log.as_ref().filter(|_| run.max_lsn > 0) {
                if run.max_lsn >= *durable {
                    // No page is held meanwhile: in flight, they are only kept from eviction.
                    *durable = log.flush_to(run.max_lsn)?;
                }
            }
            self.file.write_frames(
                run.first,
                &mut buf[..run.pages.len() * self.page_size],
                &run.pages,
            )
        })();
        self.end_run(run, result)
    }

    /// Ends the write of `run` with `result`: its pages leave flight, dirty again if it failed.
    fn end_run(&self, run: &mut Run, result: Result<()>) -> Result<()> {
        for id in run.ids() {
            if let Ok(st) = self.state(id) {
                st.end_io(result.is_ok());
            }
        }
        if result.is_ok() {
            self.writebacks
                .fetch_add(run.pages.len() as u64, Ordering::Relaxed);
        }
        run.pages.clear();
        run.max_lsn = 0;
        result
    }

    /// Flushes every dirty page, then checkpoints the file with `user` meta bytes.
    pub fn checkpoint(&self, user: &[u8]) -> Result<()> {
        self.flush_all()?;
        self.file.checkpoint(user)
    }
}
