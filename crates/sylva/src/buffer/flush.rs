//! The checkpoint's flush: every dirty resident page written back in page order, each run of
//! consecutive dirty pages copied into one buffer and written with one write, after the log
//! covering the copies (the pool's module docs: a writer waits for a page's copy, never for
//! the I/O; a page in flight is only kept from eviction).
//!
//! **Writes in flight.** One write at a time runs at the device's latency, and a checkpoint
//! after random updates finds its dirty pages scattered, one or a few to a run. With
//! [`BufferPool::set_flush_writers`] above one (`Db` with background threads), the copy buffer
//! is cut into that many slices and as many scoped threads write the runs copied into them
//! while the flush copies the next: that many writes in flight, each run at most a slice long.
//! The buffer is the same one (no memory beyond it); without the setting the flush writes each
//! run itself, in page order, as the power-loss simulation's replays by seed need.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

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

/// Where [`BufferPool::flush_all`] sends the runs it copies: a buffer for the run being copied,
/// and what to do with a full one.
trait Sink {
    /// The buffer the run being copied goes into (at least [`Sink::run_pages`] pages).
    fn buf(&mut self) -> &mut [u8];
    /// The most pages a run holds.
    fn run_pages(&self) -> usize;
    /// Writes `run` (copied into [`Sink::buf`]) or hands it to a writer, and ends it; the next
    /// run goes into whatever `buf` returns then.
    fn ship(&mut self, run: &mut Run) -> Result<()>;
}

/// The flush's own writes, one at a time.
struct Serial<'a> {
    pool: &'a BufferPool,
    buf: &'a mut AlignedBuf,
    durable: u64,
}

impl Sink for Serial<'_> {
    fn buf(&mut self) -> &mut [u8] {
        &mut self.buf[..]
    }

    fn run_pages(&self) -> usize {
        self.pool.run_pages
    }

    fn ship(&mut self, run: &mut Run) -> Result<()> {
        self.pool
            .write_run(run, &mut self.buf[..], &mut self.durable)
    }
}

/// A run handed to a writer thread, with the slice of the buffer it was copied into.
type Job<'a> = (Run, &'a mut [u8]);

/// Runs written by threads (module docs, "Writes in flight").
struct Parallel<'a> {
    pool: &'a BufferPool,
    /// The slice the run being copied goes into.
    current: Option<&'a mut [u8]>,
    /// Slices no run holds.
    free: Vec<&'a mut [u8]>,
    slice_pages: usize,
    jobs: Option<std::sync::mpsc::SyncSender<Job<'a>>>,
    done: std::sync::mpsc::Receiver<(&'a mut [u8], Result<()>)>,
    /// Jobs handed over and not yet back.
    out: usize,
}

impl<'a> Parallel<'a> {
    /// Waits for one job to come back; its slice is free again.
    fn take_back(&mut self) -> Result<()> {
        let (slice, result) = self.done.recv().map_err(|_| writer_gone())?;
        self.out -= 1;
        self.free.push(slice);
        result
    }

    /// Stops the writers once every job handed over is back; the first error among them.
    fn finish(&mut self) -> Result<()> {
        self.jobs = None;
        let mut first = Ok(());
        while self.out > 0 {
            if let Err(e) = self.take_back() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl Sink for Parallel<'_> {
    fn buf(&mut self) -> &mut [u8] {
        self.current.as_deref_mut().unwrap_or_default()
    }

    fn run_pages(&self) -> usize {
        self.slice_pages
    }

    fn ship(&mut self, run: &mut Run) -> Result<()> {
        if run.pages.is_empty() {
            return Ok(());
        }
        let job = Run {
            first: run.first,
            pages: std::mem::take(&mut run.pages),
            max_lsn: std::mem::replace(&mut run.max_lsn, 0),
        };
        let slice = self.current.take().unwrap_or_default();
        let sent = match self.jobs.as_ref() {
            Some(jobs) => jobs.send((job, slice)).map_err(|e| e.0),
            None => Err((job, slice)),
        };
        if let Err((mut job, _)) = sent {
            // No writer left to take it (cannot happen while they run): its pages leave
            // flight, dirty again.
            return self.pool.end_run(&mut job, Err(writer_gone()));
        }
        self.out += 1;
        if self.free.is_empty() {
            self.take_back()?;
        }
        self.current = self.free.pop();
        Ok(())
    }
}

#[cold]
fn writer_gone() -> crate::error::Error {
    crate::error::Error::Io {
        path: None,
        source: std::io::Error::other("a checkpoint's writer thread ended before its writes"),
    }
}

impl BufferPool {
    /// Writes back every dirty resident page (they stay resident, now clean), in page order,
    /// each run of consecutive dirty pages with one write from a copy (module docs: a writer
    /// waits for a page's copy, never for the I/O), several at once with
    /// [`BufferPool::set_flush_writers`]. When it returns, every change made to a page before
    /// it began is in the file.
    pub fn flush_all(&self) -> Result<()> {
        // Make the log durable first: most copies need nothing more, so most runs are written
        // without a log fsync in between. `durable`: how far the log is known durable; asked
        // again (a lock) only for a run whose LSN is past it.
        let durable = match &self.log {
            Some(log) => log.flush_to(u64::MAX)?,
            None => 0,
        };
        // One flush at a time: so a page in flight is always one of our own runs' (and a
        // page that is neither dirty nor in flight is in the file).
        let mut buf = self.flush_buf.lock();
        let buf = buf.get_or_insert_with(|| self.file.buffer(self.run_pages));
        let mut pages: Vec<u64> = self.clock.lock().pages.clone();
        pages.sort_unstable();
        pages.dedup();
        let writers = self
            .flush_writers
            .load(Ordering::Relaxed)
            .min(self.run_pages);
        if writers <= 1 {
            let mut sink = Serial {
                pool: self,
                buf,
                durable,
            };
            return self.copy_dirty(&pages, &mut sink);
        }
        let slice_pages = self.run_pages / writers;
        let durable = AtomicU64::new(durable);
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job<'_>>(0);
        let (back, done) = std::sync::mpsc::channel();
        let queue = Mutex::new(queue);
        std::thread::scope(|scope| {
            for _ in 0..writers {
                let back = back.clone();
                let (queue, durable) = (&queue, &durable);
                scope.spawn(move || loop {
                    // The lock is let go before the write, so the writers write at once.
                    let job = queue.lock().recv();
                    let Ok((mut run, slice)) = job else {
                        return;
                    };
                    let mut known = durable.load(Ordering::Relaxed);
                    let result = self.write_run(&mut run, slice, &mut known);
                    durable.fetch_max(known, Ordering::Relaxed);
                    if back.send((slice, result)).is_err() {
                        return;
                    }
                });
            }
            let mut free: Vec<&mut [u8]> = buf[..slice_pages * writers * self.page_size]
                .chunks_exact_mut(slice_pages * self.page_size)
                .collect();
            let mut sink = Parallel {
                pool: self,
                current: free.pop(),
                free,
                slice_pages,
                jobs: Some(jobs),
                done,
                out: 0,
            };
            let copied = self.copy_dirty(&pages, &mut sink);
            let written = sink.finish();
            copied.and(written)
        })
    }

    /// Copies the dirty ones among `pages` (sorted) into runs of consecutive pages and ships
    /// each to `sink`.
    fn copy_dirty(&self, pages: &[u64], sink: &mut impl Sink) -> Result<()> {
        let mut run = Run {
            first: 0,
            pages: Vec::with_capacity(sink.run_pages()),
            max_lsn: 0,
        };
        for &id in pages {
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
                    && (run.ids().end != id || run.pages.len() >= sink.run_pages())
                {
                    sink.ship(&mut run)?;
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
                let copy = &mut sink.buf()[slot..slot + self.page_size];
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
        sink.ship(&mut run)
    }

    /// Writes `run` (its pages copied into `buf` and in flight) with one write, after the log
    /// covering the copies, and ends it.
    fn write_run(&self, run: &mut Run, buf: &mut [u8], durable: &mut u64) -> Result<()> {
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
