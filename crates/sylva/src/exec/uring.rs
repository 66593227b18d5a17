//! [`Uring`]: a [`Backend`] on Linux's io_uring, through the `io-uring` crate (the kernel's
//! interface as it is, kept up by the tokio project; nothing of it is ours to write).
//!
//! The ring is set up `SINGLE_ISSUER | DEFER_TASKRUN | TASKRUN_FLAG`: one thread submits and
//! collects, and the kernel posts completions only when that thread enters it asking for them,
//! flagging in the submission ring that some are waiting. A probe therefore enters the kernel
//! only when that flag is up or something is queued; a wait is one enter with a minimum count
//! and a timeout. Files are registered (fixed descriptors: no file lookup per request). A read
//! is kept armed on an eventfd so that another thread can end a wait ([`Waker`]). A write
//! with `sync` is a write linked to an `fdatasync`: the kernel runs the sync only if the write
//! wrote everything, and the two complete as one request.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use io_uring::types::{Fd, Fixed, FsyncFlags, SubmitArgs, Timespec};
use io_uring::{opcode, squeue, IoUring};

use super::{
    registered, tag_too_large, Backend, Completion, FileId, Request, Waker, WakerKind, MAX_TAG,
};
use crate::error::{Error, Result};
use crate::io::Io;

/// The user data of the write half of a linked write and sync (the sync carries the tag).
const LINK_WRITE: u64 = 1 << 62;
/// The user data of the read armed on the eventfd.
const WAKE: u64 = 1 << 63;
/// Files a ring can register.
const MAX_FILES: u32 = 64;

/// What a request in flight needs for its completion: its file (for errors) and what it must
/// transfer.
#[derive(Clone, Copy)]
struct InFlight {
    file: FileId,
    /// Bytes a write must write whole (0 for a read or a sync: a short read is the caller's).
    write_len: u32,
    /// A write linked to a sync: its last completion is the sync's.
    linked: bool,
}

/// io_uring, used from one thread: the first to enter it (submit or collect). It may be made
/// on another and moved before that; used from a second thread afterwards, every enter fails
/// (the kernel refuses a second issuer with `EEXIST`).
pub struct Uring {
    ring: IoUring,
    files: Vec<Arc<dyn Io>>,
    in_flight: HashMap<u64, InFlight, rapidhash::fast::RandomState>,
    /// Errors of the write halves of linked requests, by tag, until their sync completes.
    link_errors: HashMap<u64, Error>,
    wake_fd: Arc<OwnedFd>,
    /// The eventfd read's buffer (boxed: its address stays put while the kernel may write it).
    wake_buf: Box<[u8; 8]>,
    wake_armed: bool,
    enters: u64,
    /// Entries in the submission ring not yet handed to the kernel.
    unsubmitted: usize,
    /// The completion ring's entries as one reap copies them out (reused).
    cqes: Vec<(u64, i32)>,
    /// Whether the ring was enabled: it is made disabled (`R_DISABLED`) and enabled by its
    /// first enter, which makes the thread entering it its only issuer (`SINGLE_ISSUER`).
    enabled: bool,
}

fn os_error(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        path: None,
        source: std::io::Error::new(e.kind(), format!("{what}: {e}")),
    }
}

impl Uring {
    /// A ring with room for `entries` requests in flight (rounded up to a power of two).
    pub fn new(entries: u32) -> Result<Self> {
        let entries = entries.clamp(1, 4096).next_power_of_two();
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .setup_cqsize(entries * 2)
            // Disabled until first used: a ring made on one thread may be handed to another
            // before it submits anything (a session made by one thread, run by another).
            .setup_r_disabled()
            .build(entries)
            .map_err(|e| os_error("io_uring setup (SINGLE_ISSUER|DEFER_TASKRUN)", e))?;
        ring.submitter()
            .register_files_sparse(MAX_FILES)
            .map_err(|e| os_error("io_uring file registration", e))?;
        // SAFETY: a plain syscall; its result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(os_error("eventfd", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a new descriptor nobody else owns.
        let wake_fd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut ring = Uring {
            ring,
            files: Vec::new(),
            in_flight: HashMap::default(),
            link_errors: HashMap::new(),
            wake_fd,
            wake_buf: Box::new([0; 8]),
            wake_armed: false,
            enters: 0,
            unsubmitted: 0,
            cqes: Vec::new(),
            enabled: false,
        };
        ring.arm_wake()?;
        Ok(ring)
    }

    fn raw_wake_fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.wake_fd.as_raw_fd()
    }

    /// Arms the read on the eventfd.
    fn arm_wake(&mut self) -> Result<()> {
        let entry = opcode::Read::new(Fd(self.raw_wake_fd()), self.wake_buf.as_mut_ptr(), 8)
            .build()
            .user_data(WAKE);
        // SAFETY: the buffer is boxed in `self` and outlives the request (`Drop` reaps it).
        unsafe { self.push(&[entry])? };
        self.wake_armed = true;
        Ok(())
    }

    /// Pushes `entries` together (a linked pair stays contiguous), submitting first if the
    /// submission ring has no room for them.
    ///
    /// # Safety
    /// Every buffer the entries name stays valid until their completions are reaped.
    unsafe fn push(&mut self, entries: &[squeue::Entry]) -> Result<()> {
        let room = {
            let sq = self.ring.submission();
            sq.capacity() - sq.len()
        };
        if room < entries.len() {
            self.enter(0, None)?;
        }
        let mut sq = self.ring.submission();
        // SAFETY: the caller keeps the buffers valid; the room was made above.
        let pushed = unsafe { sq.push_multiple(entries) };
        self.unsubmitted = sq.len();
        pushed.map_err(|_| Error::Io {
            path: None,
            source: std::io::Error::other("io_uring submission ring full after a submit"),
        })
    }

    /// Enters the kernel: submits what is queued and, with `min` > 0, waits for that many
    /// completions or the timeout.
    fn enter(&mut self, min: usize, timeout: Option<Duration>) -> Result<()> {
        if !self.enabled {
            self.ring
                .submitter()
                .register_enable_rings()
                .map_err(|e| os_error("io_uring enable (the ring's first use)", e))?;
            self.enabled = true;
        }
        self.enters += 1;
        let submitter = self.ring.submitter();
        let result = match timeout {
            Some(t) if min > 0 => {
                let ts = Timespec::from(t);
                let args = SubmitArgs::new().timespec(&ts);
                submitter.submit_with_args(min, &args)
            }
            _ => submitter.submit_and_wait(min),
        };
        self.unsubmitted = self.ring.submission().len();
        match result {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                // The timeout passed, a signal came, or the completion ring is full (the
                // caller reaps and comes back).
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) => Ok(()),
                _ => Err(os_error("io_uring_enter", e)),
            },
        }
    }

    fn file(&self, id: FileId) -> Result<&Arc<dyn Io>> {
        registered(&self.files, id)
    }

    /// Reaps the completion ring into `out`; how many of the caller's requests completed.
    fn reap(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        let mut n = 0;
        let mut rearm = false;
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        for &(data, res) in &cqes {
            if data == WAKE {
                self.wake_armed = false;
                rearm = true;
                continue;
            }
            if data & LINK_WRITE != 0 {
                let tag = data & !LINK_WRITE;
                if let Some(e) = self.failure(tag, res, true) {
                    self.link_errors.insert(tag, e);
                }
                continue;
            }
            let linked = self.in_flight.get(&data).is_some_and(|f| f.linked);
            let result = match self.link_errors.remove(&data) {
                Some(e) => Err(e),
                None => match self.failure(data, res, !linked) {
                    Some(e) => Err(e),
                    // A linked pair reports the bytes its write wrote.
                    None if linked => Ok(self.in_flight.get(&data).map_or(0, |f| f.write_len)),
                    None => Ok(res as u32),
                },
            };
            self.in_flight.remove(&data);
            out.push(Completion { tag: data, result });
            n += 1;
        }
        self.cqes = cqes;
        if rearm {
            // Drain the counter (nonblocking; it may be zero if the read consumed it).
            let mut b = [0u8; 8];
            // SAFETY: reads at most 8 bytes into a live local buffer from our own eventfd.
            unsafe { libc::read(self.raw_wake_fd(), b.as_mut_ptr().cast(), 8) };
            self.arm_wake()?;
        }
        Ok(n)
    }

    /// The error a completion's result `res` means for request `tag`, if any; `whole`: a write
    /// must have written all its bytes (a plain write, or the write half of a linked pair).
    fn failure(&self, tag: u64, res: i32, whole: bool) -> Option<Error> {
        let flight = self.in_flight.get(&tag).copied();
        let io_error =
            |source: std::io::Error| match flight.and_then(|f| self.files.get(f.file.0 as usize)) {
                Some(io) => Error::io_at(io.path(), source),
                None => Error::Io { path: None, source },
            };
        if res < 0 {
            return Some(io_error(std::io::Error::from_raw_os_error(-res)));
        }
        let want = flight.map_or(0, |f| f.write_len);
        if whole && want != 0 && res as u32 != want {
            return Some(io_error(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                format!("short write: {res} of {want} bytes"),
            )));
        }
        None
    }
}

impl Backend for Uring {
    fn register(&mut self, io: Arc<dyn Io>) -> Result<FileId> {
        let Some(fd) = io.raw_fd() else {
            return Err(Error::InvalidArgument {
                what: format!(
                    "{}: not an OS file (io_uring needs a descriptor; use backend=inline)",
                    io.path().display()
                ),
                limit: 0,
            });
        };
        let slot = self.files.len() as u32;
        if slot >= MAX_FILES {
            return Err(Error::InvalidArgument {
                what: "files registered with one ring".into(),
                limit: MAX_FILES as usize,
            });
        }
        self.ring
            .submitter()
            .register_files_update(slot, &[fd])
            .map_err(|e| Error::io_at(io.path(), e))?;
        self.files.push(io);
        Ok(FileId(slot))
    }

    unsafe fn submit(&mut self, tag: u64, request: Request) -> Result<()> {
        if tag > MAX_TAG {
            return Err(tag_too_large(tag));
        }
        if self.in_flight.contains_key(&tag) {
            return Err(Error::InvalidArgument {
                what: format!("request tag {tag} (already in flight)"),
                limit: 0,
            });
        }
        let (file, write_len, linked) = match request {
            Request::Read { file, .. } | Request::Sync { file } => (file, 0, false),
            Request::Write {
                file, len, sync, ..
            } => (file, len, sync),
        };
        self.file(file)?;
        let fixed = Fixed(file.0);
        let pushed = match request {
            Request::Read {
                buf, len, offset, ..
            } => {
                let e = opcode::Read::new(fixed, buf, len).offset(offset).build();
                // SAFETY: the caller keeps `buf` valid until the completion (the contract).
                unsafe { self.push(&[e.user_data(tag)]) }
            }
            Request::Write {
                buf,
                len,
                offset,
                sync: false,
                ..
            } => {
                let e = opcode::Write::new(fixed, buf, len).offset(offset).build();
                // SAFETY: as above.
                unsafe { self.push(&[e.user_data(tag)]) }
            }
            Request::Write {
                buf,
                len,
                offset,
                sync: true,
                ..
            } => {
                let write = opcode::Write::new(fixed, buf, len)
                    .offset(offset)
                    .build()
                    .flags(squeue::Flags::IO_LINK)
                    .user_data(tag | LINK_WRITE);
                let sync = opcode::Fsync::new(fixed)
                    .flags(FsyncFlags::DATASYNC)
                    .build()
                    .user_data(tag);
                // SAFETY: as above.
                unsafe { self.push(&[write, sync]) }
            }
            Request::Sync { .. } => {
                let e = opcode::Fsync::new(fixed)
                    .flags(FsyncFlags::DATASYNC)
                    .build();
                // SAFETY: a sync names no buffer.
                unsafe { self.push(&[e.user_data(tag)]) }
            }
        };
        pushed?;
        self.in_flight.insert(
            tag,
            InFlight {
                file,
                write_len,
                linked,
            },
        );
        Ok(())
    }

    fn complete(
        &mut self,
        min: usize,
        timeout: Option<Duration>,
        out: &mut Vec<Completion>,
    ) -> Result<usize> {
        // What completed already (posted by an earlier enter).
        let mut n = self.reap(out)?;
        let queued = !self.ring.submission().is_empty();
        if n >= min {
            // A probe: enter only if something waits to be submitted or posted.
            if queued || self.ring.submission().taskrun() {
                self.enter(0, None)?;
                n += self.reap(out)?;
            }
            return Ok(n);
        }
        // Wait for the rest (a wake completes the eventfd read and ends the wait too).
        self.enter(min - n, timeout)?;
        n += self.reap(out)?;
        Ok(n)
    }

    fn outstanding(&self) -> usize {
        self.in_flight.len()
    }

    fn waker(&self) -> Waker {
        Waker(WakerKind::EventFd(self.wake_fd.clone()))
    }

    fn enters(&self) -> u64 {
        self.enters
    }

    fn unsubmitted(&self) -> usize {
        self.unsubmitted
    }

    fn may_have_completions(&mut self) -> bool {
        // Posted already, or waiting for an enter to post them (`DEFER_TASKRUN`).
        !self.ring.completion().is_empty() || self.ring.submission().taskrun()
    }
}

impl Drop for Uring {
    /// Waits until the kernel is done with every buffer it was given: the callers' (their
    /// requests in flight) and the eventfd read's (ended by a wake of our own).
    fn drop(&mut self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local buffer to our own eventfd.
        unsafe { libc::write(self.raw_wake_fd(), one.as_ptr().cast(), 8) };
        // Bounded: each round reaps at least one completion or times out; a kernel that never
        // completes a request would otherwise hold the thread forever.
        for _ in 0..10_000 {
            if self.in_flight.is_empty() && !self.wake_armed {
                break;
            }
            if self.enter(1, Some(Duration::from_millis(100))).is_err() {
                break;
            }
            let cqes: Vec<u64> = self.ring.completion().map(|c| c.user_data()).collect();
            for data in cqes {
                if data == WAKE {
                    self.wake_armed = false;
                } else if data & LINK_WRITE == 0 {
                    self.in_flight.remove(&data);
                }
            }
        }
    }
}
