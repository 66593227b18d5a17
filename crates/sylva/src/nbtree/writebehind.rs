//! Write-behind for a d-tree's writer: a thread writes the pages built so far while the writer
//! builds the next ones.
//!
//! A merge builds a d-tree's pages into a buffer and writes the buffer when it is full. Written
//! on the merger's own thread, each write (and the page checksums sealed into it) held the merge,
//! which bounds a load (`docs/results/nbtree.md`). Here the writer hands the full buffer to a
//! thread of its own and goes on in a second one; at most one write is in flight, so the writer
//! waits for it before it hands over the next (the buffer it gets back is the one it fills
//! then, never made again: a buffer is zeroed when made). The thread counts each write as the
//! job's step when it completes ([`Job::advance`]), as the writer did. A failed write ends the thread and is the writer's
//! error at its next hand-over or at [`WriteBehind::finish`]; the writer's drop waits for the
//! write in flight, so no page of a run is written after its writer is gone (a run a failed merge
//! leaves is freed and may be reused).

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::cascade::Job;
use crate::error::{Error, Result};
use crate::io::page_header::PageKind;
use crate::io::{AlignedBuf, PageFile};

/// A write handed over: the first page, the buffer, the bytes of it to write, each page's kind
/// and sealing argument.
struct Write {
    first: u64,
    buf: AlignedBuf,
    len: usize,
    kinds: Vec<(PageKind, u64)>,
}

/// The writer's end of the writing thread.
pub(crate) struct WriteBehind {
    writes: Option<SyncSender<Write>>,
    done: Receiver<Result<AlignedBuf>>,
    thread: Option<JoinHandle<()>>,
    in_flight: bool,
}

impl WriteBehind {
    /// Starts the thread that writes to `file`, counting each write as a step of `job`.
    pub(crate) fn start(file: Arc<PageFile>, job: Option<Arc<Job>>) -> Result<WriteBehind> {
        let (writes, writes_rx) = mpsc::sync_channel::<Write>(1);
        let (done_tx, done) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("sylva-nb-write".into())
            .spawn(move || {
                for mut w in writes_rx {
                    let r = file.write_frames(w.first, &mut w.buf[..w.len], &w.kinds);
                    let failed = r.is_err();
                    if r.is_ok() {
                        if let Some(j) = &job {
                            j.advance(w.len as u64);
                        }
                    }
                    if done_tx.send(r.map(|()| w.buf)).is_err() || failed {
                        return;
                    }
                }
            })?;
        Ok(WriteBehind {
            writes: Some(writes),
            done,
            thread: Some(thread),
            in_flight: false,
        })
    }

    /// Hands over the first `len` bytes of `buf` to be written from page `first`, `kinds`
    /// giving each page's kind and sealing argument, and puts the buffer to build the next
    /// pages in into `buf`: the one the write before this one used (waiting for it), or
    /// `spare()` when none is in flight.
    pub(crate) fn submit(
        &mut self,
        first: u64,
        buf: &mut AlignedBuf,
        len: usize,
        kinds: Vec<(PageKind, u64)>,
        spare: impl FnOnce() -> AlignedBuf,
    ) -> Result<()> {
        let next = if self.in_flight {
            self.in_flight = false;
            self.wait()?
        } else {
            spare()
        };
        let full = std::mem::replace(buf, next);
        let sender = self.writes.as_ref().ok_or_else(ended)?;
        sender
            .send(Write {
                first,
                buf: full,
                len,
                kinds,
            })
            .map_err(|_| ended())?;
        self.in_flight = true;
        Ok(())
    }

    /// Waits for the write in flight, if any; its error if it failed.
    pub(crate) fn finish(&mut self) -> Result<()> {
        if self.in_flight {
            self.in_flight = false;
            self.wait()?;
        }
        Ok(())
    }

    fn wait(&self) -> Result<AlignedBuf> {
        self.done.recv().map_err(|_| ended())?
    }
}

/// The thread is gone without an answer: it only ends early after a failed write, whose error
/// was returned, so this is a write asked for after that.
fn ended() -> Error {
    Error::Io {
        path: None,
        source: std::io::Error::other("a d-tree's write-behind thread ended after a failed write"),
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        // Closing the channel ends the thread after the write in flight.
        self.writes = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use crate::io::{Fault, FaultyIo, MemIo, PageFile};
    use crate::nbtree::dtree::{Bound, Writer, TAG_PUT};

    fn record(i: u32) -> ([u8; 8], Vec<u8>) {
        let mut v = vec![TAG_PUT];
        v.extend(std::iter::repeat_n((i % 251) as u8, 128));
        (u64::from(i).to_be_bytes(), v)
    }

    /// A d-tree of `n` records whose run is several buffers long, built with `fault` armed
    /// once the first buffer is handed over; what `finish` returns.
    fn build(n: u32, fault: Option<Fault>) -> crate::error::Result<u64> {
        let (io, faults) = FaultyIo::new(MemIo::new(Vec::new()));
        let file = Arc::new(PageFile::create_io(Box::new(io), 4096, false).unwrap());
        let mut bound = Bound::default();
        for i in 0..n {
            let (k, v) = record(i);
            bound.record(&k, &v);
        }
        let mut w = Writer::new(&file, bound, 10, None, 1 << 30);
        for i in 0..n {
            if i == n / 3 {
                if let Some(f) = fault {
                    faults.arm(f);
                }
            }
            let (k, v) = record(i);
            w.push(&k, &v)?;
        }
        Ok(w.finish()?.map_or(0, |d| d.extent.records))
    }

    #[test]
    fn a_run_of_many_buffers_is_written_whole() {
        // 30,000 records of 137 bytes: over 1,000 leaves, four 1 MiB writes and more.
        assert_eq!(build(30_000, None).unwrap(), 30_000);
    }

    #[test]
    fn a_failed_write_behind_is_the_writers_error() {
        for fault in [Fault::FailWrite, Fault::ShortWrite(4096)] {
            let err = build(30_000, Some(fault)).unwrap_err();
            assert!(
                err.to_string().contains("injected fault"),
                "{fault:?}: {err}"
            );
        }
    }
}
