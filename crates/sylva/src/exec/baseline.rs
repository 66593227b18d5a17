//! The PA-Tree paper's two synchronous baselines (`pa-tree.txt`, V-A), for `patree:mode=dedicated`
//! and `patree:mode=shared`: the ordinary `Db`, one blocking operation per thread, whose page
//! reads go through io_uring instead of `pread`.
//!
//! - **Dedicated**: each thread reads through a ring of its own, submitting the read and
//!   waiting in `io_uring_enter` for its completion (a thread blocks per read, as with `pread`,
//!   but through the same kernel path as the PA-Tree worker's reads).
//! - **Shared**: every thread hands its read to one I/O thread, which submits the reads of all
//!   threads through one ring and wakes each requester when its read completes (the paper's
//!   "shared" design: one queue pair for many threads, a wake-up per I/O).
//!
//! Both are a [`Vfs`] that wraps the files another `Vfs` opens ([`RingVfs`]): reads of a file
//! with an OS descriptor go through the ring, everything else (writes, syncs, lengths, files
//! without a descriptor) goes to the wrapped file unchanged. So the tree, the pool, the log and
//! recovery are `Db`'s, and only the read path differs from `db`.
//!
//! The rings here are plain `io_uring` instances without registered files or the
//! single-issuer flags of [`super::Uring`]: a dedicated ring's only user is its thread and it
//! has one request in flight at a time, and the shared thread is the only submitter of its
//! ring; registration would save one file-table lookup per read.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, Thread};

use io_uring::{opcode, types, IoUring};
use parking_lot::Mutex;

use super::BlockingMode;
use crate::error::{Error, Result};
use crate::io::{Io, LockGuard, OpenFile, Opened, Vfs};

/// A [`Vfs`] whose files are read through io_uring the way `mode` says (module docs).
pub struct RingVfs {
    inner: Arc<dyn Vfs>,
    mode: BlockingMode,
    /// The shared mode's I/O thread, started with the first file opened.
    shared: Mutex<Option<Arc<SharedRing>>>,
}

impl RingVfs {
    /// Wraps `inner`'s files.
    pub fn new(inner: Arc<dyn Vfs>, mode: BlockingMode) -> Self {
        RingVfs {
            inner,
            mode,
            shared: Mutex::new(None),
        }
    }

    fn reader(&self) -> Result<Reader> {
        Ok(match self.mode {
            BlockingMode::Dedicated => Reader::Dedicated,
            BlockingMode::Shared => {
                let mut shared = self.shared.lock();
                let ring = match &*shared {
                    Some(ring) => Arc::clone(ring),
                    None => Arc::clone(shared.insert(Arc::new(SharedRing::start()?))),
                };
                Reader::Shared(ring)
            }
        })
    }
}

impl Vfs for RingVfs {
    fn open(&self, path: &Path, how: OpenFile) -> Result<Opened> {
        let opened = self.inner.open(path, how)?;
        Ok(Opened {
            io: Box::new(RingIo {
                inner: opened.io,
                reader: self.reader()?,
            }),
            direct: opened.direct,
        })
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.inner.exists(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<std::ffi::OsString>> {
        self.inner.list(dir)
    }

    fn create_dir(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.inner.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path, owner: &Path) -> Result<Box<dyn LockGuard>> {
        self.inner.lock(path, owner)
    }
}

enum Reader {
    Dedicated,
    Shared(Arc<SharedRing>),
}

/// A file whose reads go through a ring (module docs).
struct RingIo {
    inner: Box<dyn Io>,
    reader: Reader,
}

impl RingIo {
    fn read_through_ring(&self, fd: RawFd, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut done = 0usize;
        // A read may come back short (a signal, the file's end): go on from where it stopped;
        // nothing more at all is reading past the end, an error as `Io::read_at` says.
        while done < buf.len() {
            let rest = &mut buf[done..];
            let n = match &self.reader {
                Reader::Dedicated => dedicated_read(fd, rest, offset + done as u64),
                Reader::Shared(ring) => ring.read(fd, rest, offset + done as u64),
            }
            .map_err(|e| Error::io_at(self.inner.path(), e))?;
            if n == 0 {
                return Err(Error::io_at(
                    self.inner.path(),
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("read of {} bytes at {offset} past the end", buf.len()),
                    ),
                ));
            }
            done += n;
        }
        Ok(())
    }
}

impl Io for RingIo {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        match self.inner.raw_fd() {
            Some(fd) => self.read_through_ring(fd, buf, offset),
            None => self.inner.read_at(buf, offset),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }

    fn set_file_len(&self, len: u64) -> Result<()> {
        self.inner.set_file_len(len)
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        self.inner.start_writeback(offset, len)
    }

    fn drop_cache(&self, offset: u64, len: u64) {
        self.inner.drop_cache(offset, len)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.inner.raw_fd()
    }
}

/// Entries of a dedicated ring (one read in flight at a time).
const DEDICATED_ENTRIES: u32 = 4;
/// Entries of the shared ring.
const SHARED_ENTRIES: u32 = 256;
/// The shared ring's wake-up read.
const WAKE: u64 = u64::MAX;

thread_local! {
    /// This thread's ring for dedicated reads, made at its first read.
    static DEDICATED: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// One read through this thread's ring, waiting for it: the bytes read.
fn dedicated_read(fd: RawFd, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    DEDICATED.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(IoUring::new(DEDICATED_ENTRIES)?);
        }
        let ring = cell
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no ring"))?;
        let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        let entry = opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), len)
            .offset(offset)
            .build()
            .user_data(1);
        // SAFETY: `buf` stays borrowed (valid, untouched by anyone else) until the loop below
        // has reaped this read's completion: the only request this ring ever has in flight.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| std::io::Error::other("io_uring submission ring full"))?;
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
            if let Some(c) = ring.completion().next() {
                let res = c.result();
                return if res < 0 {
                    Err(std::io::Error::from_raw_os_error(-res))
                } else {
                    Ok(res as usize)
                };
            }
        }
    })
}

/// A read handed to the shared I/O thread, and where its result goes.
struct SharedRequest {
    fd: RawFd,
    buf: *mut u8,
    len: u32,
    offset: u64,
    done: Arc<Done>,
}

// SAFETY: the buffer pointer is used only by the I/O thread while the requester, which owns
// the buffer, waits for `done` (`SharedRing::read`).
unsafe impl Send for SharedRequest {}

/// A requester's wait for its read.
struct Done {
    /// The result (bytes read, or a negative errno) once `finished`.
    result: AtomicI32,
    finished: AtomicBool,
    thread: Thread,
}

/// The shared mode's I/O thread and what it is given.
struct SharedRing {
    queue: Arc<Mutex<VecDeque<SharedRequest>>>,
    /// Written to wake the I/O thread (a new request, or the end).
    wake: Arc<File>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SharedRing {
    fn start() -> Result<SharedRing> {
        let ring = IoUring::new(SHARED_ENTRIES).map_err(|e| Error::Io {
            path: None,
            source: std::io::Error::new(e.kind(), format!("io_uring setup: {e}")),
        })?;
        // SAFETY: eventfd with valid flags; a negative result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Io {
                path: None,
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let wake = Arc::new(unsafe { File::from_raw_fd(fd) });
        let queue = Arc::new(Mutex::new(VecDeque::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (queue, wake, stop) = (Arc::clone(&queue), Arc::clone(&wake), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("sylva-shared-io".into())
                .spawn(move || shared_loop(ring, &queue, &wake, &stop))
                .map_err(|e| Error::Io {
                    path: None,
                    source: e,
                })?
        };
        Ok(SharedRing {
            queue,
            wake,
            stop,
            thread: Some(thread),
        })
    }

    fn kick(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// One read through the I/O thread, waiting for it: the bytes read.
    fn read(&self, fd: RawFd, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let done = Arc::new(Done {
            result: AtomicI32::new(0),
            finished: AtomicBool::new(false),
            thread: std::thread::current(),
        });
        self.queue.lock().push_back(SharedRequest {
            fd,
            buf: buf.as_mut_ptr(),
            len: u32::try_from(buf.len()).unwrap_or(u32::MAX),
            offset,
            done: Arc::clone(&done),
        });
        self.kick();
        while !done.finished.load(Ordering::Acquire) {
            std::thread::park();
        }
        let res = done.result.load(Ordering::Relaxed);
        if res < 0 {
            Err(std::io::Error::from_raw_os_error(-res))
        } else {
            Ok(res as usize)
        }
    }
}

impl Drop for SharedRing {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.kick();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The shared I/O thread: submits queued reads, waits for completions or a wake, hands each
/// result to its requester. A read is in flight from its submission until its completion is
/// reaped, and its requester waits meanwhile, so its buffer stays valid. The loop ends only
/// when stopped ([`SharedRing`]'s drop: no file uses it any more) with nothing in flight.
fn shared_loop(
    mut ring: IoUring,
    queue: &Mutex<VecDeque<SharedRequest>>,
    wake: &File,
    stop: &AtomicBool,
) {
    let mut counter = [0u8; 8];
    let mut wake_armed = false;
    let mut in_flight: Vec<Option<Arc<Done>>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    loop {
        let stopping = stop.load(Ordering::Acquire);
        // Not armed again once stopping: the wake read must be done before `counter` goes.
        if !wake_armed && !stopping {
            let e = opcode::Read::new(types::Fd(wake.as_raw_fd()), counter.as_mut_ptr(), 8)
                .build()
                .user_data(WAKE);
            // SAFETY: `counter` lives as long as this loop, and the ring is drained (the wake
            // completed or the ring dropped, which waits) before it goes.
            if unsafe { ring.submission().push(&e) }.is_ok() {
                wake_armed = true;
            }
        }
        let taken: Vec<SharedRequest> = {
            let mut q = queue.lock();
            let room = (SHARED_ENTRIES as usize).saturating_sub(ring.submission().len() + 1);
            let n = q.len().min(room);
            q.drain(..n).collect()
        };
        for r in taken {
            let slot = free.pop().unwrap_or_else(|| {
                in_flight.push(None);
                in_flight.len() - 1
            });
            let e = opcode::Read::new(types::Fd(r.fd), r.buf, r.len)
                .offset(r.offset)
                .build()
                .user_data(slot as u64);
            // SAFETY: the requester keeps the buffer valid and waits until `done` is set,
            // which happens only once this read's completion is reaped below.
            if unsafe { ring.submission().push(&e) }.is_ok() {
                in_flight[slot] = Some(r.done);
            } else {
                r.done.result.store(-libc::EAGAIN, Ordering::Relaxed);
                r.done.finished.store(true, Ordering::Release);
                r.done.thread.unpark();
                free.push(slot);
            }
        }
        let pending = in_flight.iter().any(Option::is_some);
        // The end: nothing in flight, not even the wake read (the stop's kick completes it).
        if stopping && !pending && !wake_armed {
            return;
        }
        if let Err(e) = ring.submit_and_wait(1) {
            // EINTR, EBUSY (the completion ring is full: reap, then enter again) and the like
            // pass; any other failure is retried after a pause rather than failing the reads
            // in flight, whose buffers the kernel may still hold.
            if !matches!(
                e.raw_os_error(),
                Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
            ) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (data, res) in done {
            if data == WAKE {
                wake_armed = false;
                continue;
            }
            let slot = data as usize;
            if let Some(d) = in_flight.get_mut(slot).and_then(Option::take) {
                d.result.store(res, Ordering::Relaxed);
                d.finished.store(true, Ordering::Release);
                d.thread.unpark();
                free.push(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::io::OsFs;

    /// Both modes read what the file holds, from several threads at once, and a read past the
    /// end is an error, not short bytes.
    #[test]
    fn reads_through_the_rings_match_the_file() {
        if IoUring::new(4).is_err() {
            eprintln!("skipping: this kernel refuses io_uring");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..256 * 1024u32)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        for mode in [BlockingMode::Dedicated, BlockingMode::Shared] {
            let vfs = RingVfs::new(Arc::new(OsFs), mode);
            let file = vfs.open(&path, OpenFile::default()).unwrap().io;
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let (file, bytes) = (&file, &bytes);
                    s.spawn(move || {
                        let mut x = t + 1;
                        for _ in 0..200 {
                            x = x
                                .wrapping_mul(6364136223846793005)
                                .wrapping_add(1442695040888963407);
                            let offset = (x >> 33) % (bytes.len() as u64 - 5000);
                            let len = 1 + ((x >> 20) % 4096) as usize;
                            let mut buf = vec![0u8; len];
                            file.read_at(&mut buf, offset).unwrap();
                            assert_eq!(buf[..], bytes[offset as usize..offset as usize + len]);
                        }
                    });
                }
            });
            let mut buf = vec![0u8; 100];
            let past = file.read_at(&mut buf, bytes.len() as u64 - 50);
            assert!(past.is_err(), "{mode:?}: a read past the end must fail");
        }
    }
}
