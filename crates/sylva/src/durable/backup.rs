//! Online backup: a copy of a store, taken while its writers run, that opens as the store
//! holding exactly the writes whose log records precede one LSN (the *end LSN*), every write
//! acknowledged before the backup began among them. The scheme is InnoDB's hot backup (and
//! `xtrabackup`'s): the page file as of a checkpoint, copied *fuzzily* while writers go on,
//! and the log from that checkpoint on, replayed by the copy's own recovery when it is opened.
//! Unlike InnoDB's, the checkpoint is the last one the store took, not one the backup takes.
//!
//! **Steps** ([`Durable::backup_to`]):
//! 1. The target must be new or an empty directory ([`crate::Error::NotEmpty`] otherwise); it
//!    is created with its name durable in its parent.
//! 2. The checkpoint lock is taken for the rest of the copy of the source: no checkpoint runs
//!    meanwhile (a writer that would start one skips it; the checkpoint thread waits), so the
//!    meta pages, the recorded free space and the log's older segment stay as they are, and
//!    the log only grows. The engine starts noting the page runs it writes without logging
//!    their bytes ([`Engine::note_unlogged_runs`]; for `Db`, values over 1 MiB). The last
//!    durable checkpoint, at LSN `l`, is where the copy's recovery starts.
//! 3. The page file is copied whole while writers go on ([`PARTIAL_DATA_FILE`] in the target).
//! 4. With writers held back (the same exclusive gate a checkpoint's rotation takes) the log is
//!    synced and its end noted: the end LSN `e` and, per segment, the bytes holding records
//!    below it ([`crate::wal::Wal::durable_end`]); the unlogged runs noted so far are taken.
//! 5. Those runs' pages are copied again, then each log segment up to its noted length.
//! 6. The checkpoint lock is released; every target file is fsynced, then the directory; the
//!    page file is renamed to [`super::DATA_FILE`] and the directory fsynced again.
//!
//! **Why the copy is consistent.** It is the state a power loss at the moment of step 4 could
//! have left, which recovery already handles: the meta page of checkpoint `l` (durable, and not
//! rewritten before the copy ends, since no checkpoint runs between `l` and then), the log
//! durable to `e`, and each page of the file in some version written since `l`, or torn. A page
//! copied at step 3 holds changes whose log records were durable before it was written (the
//! buffer pool's WAL rule), so below `e`: the copy never holds a page newer than its log. A page
//! changed after `l` logged its full image first (full-page writes start again at every
//! checkpoint, `l` the last), so redo rebuilds it from the log whatever version was copied (a
//! torn read included); a page not changed since `l` holds what checkpoint `l` flushed, which
//! is what the copy reads. What the log does not carry is the bytes of the unlogged runs, which
//! the engine makes durable before the record that names them: a run written before step 3
//! began is in the file when step 3 reads it, and one written after the noting began is copied
//! again at step 5. Its pages cannot change between step 4 and step 5, nor those of a run
//! written since `l` at all: a run is freed only with a deferred free, which becomes
//! allocatable after a checkpoint, and none runs from `l` to the end of the copy. Pages a
//! writer allocates at the file's end after step 3 read the file's length are not copied:
//! checkpoint `l` lists them free, and redo writes again those that records below `e` use
//! (tree pages from their images, logged runs from their records, unlogged runs from step 5).
//! The log segments hold every record from `l` on: only a checkpoint rotates or empties them.
//!
//! **Why no checkpoint of its own.** One taken at step 2 would shorten the log the copy holds
//! (and its recovery replays), but after it every page's first change logs a full image again:
//! writers during the backup log far more, and the checkpoint's writes compete with the copy.
//! Starting from the last one costs instead copying the log written since it, as much as the
//! store's recovery after a crash would read: bounded by `checkpoint_bytes` plus the log of the
//! backup's own duration. The first open of the copy takes as long as that recovery. Measured
//! both ways: `docs/results/db.md`, "Issue 23: online backup, session 21".
//!
//! **The copy** is a pipeline ([`copy`]): a reading thread fills [`PIECES`] buffers of
//! [`CHUNK`] bytes from the source (with direct I/O, as the page file is open) while the
//! backup's thread writes the full ones to the target, so the device reads ahead while the
//! last piece is written, as `cp`'s kernel copy does with readahead and write-back. A kernel
//! copy (`copy_file_range`) was not used for the page file: on a file system without shared
//! extents it reads through the page cache, which the store's direct writes bypass and only
//! invalidate after they land. A read racing such a write can leave a stale page cached (the
//! kernel warns "Page cache invalidation failure on direct I/O" when it notices), which a later
//! backup would copy as a version older than `l`, one redo does not repair.
//!
//! **Writers** are held back once, briefly: by step 4's log sync. The copy competes with them
//! only for the device (and for the log it grows, since no checkpoint runs meanwhile).
//!
//! **Failure.** The backup only reads the source's files: an error or a crash leaves the
//! source as it was. A target left by a backup that did not end holds [`PARTIAL_DATA_FILE`]
//! and no [`super::DATA_FILE`], and opening it is refused ([`crate::Error::NotSylva`]): it is
//! not mistaken for an empty database.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Durable, Engine, DATA_FILE, WAL_FILE, WAL_FILE_2};
use crate::error::{Error, Result};
use crate::io::{create_dir_all_durable, AlignedBuf, Io, OpenFile, Vfs};

/// The page file of a backup being written: renamed to [`super::DATA_FILE`] once the backup is
/// whole and durable.
pub const PARTIAL_DATA_FILE: &str = "data.sylva.partial";

/// Bytes copied per read and write.
const CHUNK: usize = 8 << 20;

/// Buffers of [`CHUNK`] bytes in a pipelined copy: one being read, one being written, and
/// spares so that neither side waits for the other's slowest piece.
const PIECES: usize = 4;

/// What an online backup copied ([`crate::Db::backup_to`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// The LSN the copy's recovery starts at (the source's last checkpoint when the backup
    /// began).
    pub checkpoint_lsn: u64,
    /// The copy holds exactly the writes whose log records are below this LSN.
    pub end_lsn: u64,
    /// Bytes of the page file copied.
    pub page_bytes: u64,
    /// Bytes of pages copied again: runs written during the copy without logging their bytes.
    pub recopied_bytes: u64,
    /// Bytes of log copied (both segments).
    pub log_bytes: u64,
    /// How long writers were held back while the log's end was noted (step 4 of the module
    /// docs).
    pub writers_held: Duration,
    /// From the call to the copy durable.
    pub duration: Duration,
}

/// Ends the engine's noting of unlogged runs when the backup ends early.
struct Noting<'a, E: Engine> {
    engine: &'a E,
    on: bool,
}

impl<'a, E: Engine> Noting<'a, E> {
    fn start(engine: &'a E) -> Result<Self> {
        engine.note_unlogged_runs(true)?;
        Ok(Noting { engine, on: true })
    }

    fn finish(mut self) -> Result<Vec<(u64, u64)>> {
        self.on = false;
        self.engine.note_unlogged_runs(false)
    }
}

impl<E: Engine> Drop for Noting<'_, E> {
    fn drop(&mut self) {
        if self.on {
            let _ = self.engine.note_unlogged_runs(false);
        }
    }
}

impl<E: Engine> Durable<E> {
    /// Copies the store into the directory `target` (new or empty) while writers go on; the
    /// copy opens as the store holding exactly the writes logged below
    /// [`BackupReport::end_lsn`]. See the module docs.
    ///
    /// `after_page_copy` runs between steps 3 and 4 (tests write there what the copy of the
    /// page file has missed).
    pub(crate) fn backup_to(
        &self,
        vfs: &dyn Vfs,
        target: &Path,
        after_page_copy: &mut dyn FnMut(),
    ) -> Result<BackupReport> {
        self.check_open()?;
        let started = Instant::now();
        prepare_target(vfs, target)?;
        let core = &self.core;
        let engine = &core.engine;
        let file = engine.page_file();
        let ps = file.page_size() as u64;
        let create = OpenFile {
            create: true,
            direct: false,
        };
        let partial = target.join(PARTIAL_DATA_FILE);
        let pages_out = vfs.open(&partial, create)?.io;
        // Its name durable before any other: a target a crash leaves with files in it always
        // holds this one, and so is refused by open, not taken for an unfinished creation.
        vfs.sync_dir(target)?;
        let mut report = BackupReport::default();
        let new_buf = || file.buffer(CHUNK / ps as usize);
        let mut buf = new_buf();
        let mut logs_out = Vec::new();
        {
            let _one = core.checkpoint_lock.lock();
            let noting = Noting::start(engine)?;
            // Checkpoint `l`, the last: the lock keeps it the last until the copy ends.
            report.checkpoint_lsn = core.durable_checkpoint.load(Ordering::Acquire);
            let pages_in = file.io();
            let len = pages_in.file_len()? / ps * ps;
            copy(&**pages_in, &*pages_out, 0, len, &mut buf, &new_buf)?;
            report.page_bytes = len;
            after_page_copy();

            // Most of the log's fsync before writers are held back, so theirs is short.
            core.poison.guard(core.wal.sync())?;
            let held = Instant::now();
            let (end, runs) = {
                let _gate = engine.hold_writers();
                let end = core.poison.guard(core.wal.durable_end())?;
                (end, noting.finish()?)
            };
            report.writers_held = held.elapsed();
            report.end_lsn = end.next_lsn;

            for (first, pages) in runs {
                copy(
                    &**pages_in,
                    &*pages_out,
                    first * ps,
                    pages * ps,
                    &mut buf,
                    &new_buf,
                )?;
                report.recopied_bytes += pages * ps;
            }
            for (i, &len) in end.lengths.iter().enumerate() {
                let name = [WAL_FILE, WAL_FILE_2]
                    .get(i)
                    .ok_or_else(|| Error::InvalidArgument {
                        what: "a log of more than two segments".into(),
                        limit: 2,
                    })?;
                let segment = core.wal.segment(i).ok_or_else(|| Error::InvalidArgument {
                    what: format!("the log has no segment {i}"),
                    limit: end.lengths.len(),
                })?;
                let out = vfs.open(&target.join(name), create)?.io;
                copy(&*segment, &*out, 0, len, &mut buf, &new_buf)?;
                report.log_bytes += len;
                logs_out.push(out);
            }
        }
        // The source is no longer read: checkpoints go on while the copy is made durable.
        pages_out.sync()?;
        for out in &logs_out {
            out.sync()?;
        }
        vfs.sync_dir(target)?;
        vfs.rename(&partial, &target.join(DATA_FILE))?;
        vfs.sync_dir(target)?;
        report.duration = started.elapsed();
        Ok(report)
    }
}

/// Refuses a target that exists and is not an empty directory, and creates it (its name
/// durable in its parent) if it does not exist.
fn prepare_target(vfs: &dyn Vfs, target: &Path) -> Result<()> {
    if vfs.exists(target)? {
        if let Some(name) = vfs.list(target)?.into_iter().next() {
            return Err(Error::NotEmpty {
                path: target.to_path_buf(),
                first: name.to_string_lossy().into_owned(),
            });
        }
    }
    create_dir_all_durable(vfs, target)
}

/// Copies `len` bytes at `offset` of `from` to the same offset of `to`. A copy of one piece
/// goes through `buf` (aligned, for a source opened for direct I/O: `offset` and `len` are then
/// whole pages); a longer one is a pipeline (module docs, "The copy"): a reading thread fills
/// [`PIECES`] buffers made by `new_buf` while this thread writes those already full, so the
/// device reads the next piece while the last one is written. After each write the target's
/// write-back is started, so the copy does not pile up dirty memory.
fn copy(
    from: &dyn Io,
    to: &dyn Io,
    offset: u64,
    len: u64,
    buf: &mut AlignedBuf,
    new_buf: &dyn Fn() -> AlignedBuf,
) -> Result<()> {
    let end = offset + len;
    if len <= buf.len() as u64 {
        let n = len as usize;
        from.read_at(&mut buf[..n], offset)?;
        to.write_at(&buf[..n], offset)?;
        to.start_writeback(offset, len);
        return Ok(());
    }
    let piece = buf.len() as u64;
    // Full pieces go from the reader to the writer, empty buffers back. Either side stops when
    // the other has gone: the reader after an error or at the end, the writer after an error
    // (dropping its ends, which wakes a reader waiting for an empty buffer).
    let (full_tx, full_rx) = mpsc::sync_channel::<Result<(AlignedBuf, u64, usize)>>(PIECES);
    let (empty_tx, empty_rx) = mpsc::channel::<AlignedBuf>();
    for _ in 0..PIECES {
        // The receiver is alive: it is dropped only with this function's scope below.
        let _ = empty_tx.send(new_buf());
    }
    // `move`: the writer's ends of both channels are dropped when it returns, so a reader
    // blocked on either wakes and the scope's join does not wait for it forever.
    std::thread::scope(move |s| {
        s.spawn(move || {
            let mut at = offset;
            while at < end {
                let Ok(mut buf) = empty_rx.recv() else {
                    return;
                };
                let n = (end - at).min(piece) as usize;
                let read = from.read_at(&mut buf[..n], at).map(|()| (buf, at, n));
                let failed = read.is_err();
                if full_tx.send(read).is_err() || failed {
                    return;
                }
                at += n as u64;
            }
        });
        let mut written = 0u64;
        for read in full_rx.iter() {
            let (buf, at, n) = read?;
            to.write_at(&buf[..n], at)?;
            to.start_writeback(at, n as u64);
            written += n as u64;
            // The reader may have read its last piece and gone: the buffer is then not needed.
            let _ = empty_tx.send(buf);
        }
        // The reader ends early only after sending its error, which the loop returns; were it
        // to end otherwise (a panic, propagated by the scope), this says the copy is short.
        if written == len {
            Ok(())
        } else {
            Err(Error::io_at(
                from.path(),
                std::io::Error::other(format!("the copy stopped after {written} of {len} bytes")),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Fault, FaultyIo, MemIo};

    const PIECE: usize = 4096;

    fn bytes(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    fn new_buf() -> AlignedBuf {
        AlignedBuf::new(PIECE)
    }

    #[test]
    fn a_pipelined_copy_copies_every_piece_to_its_offset() {
        // More pieces than buffers, and a last piece shorter than the others.
        let len = PIECE * (3 * PIECES + 1) + 1000;
        let from = MemIo::new(bytes(len + 3 * PIECE));
        let to = MemIo::new(vec![0xEE; PIECE]);
        let offset = 2 * PIECE as u64;
        copy(&from, &to, offset, len as u64, &mut new_buf(), &new_buf).expect("copy");
        let got = to.contents();
        assert_eq!(got.len(), offset as usize + len);
        assert_eq!(
            &got[..PIECE],
            &[0xEE; PIECE][..],
            "bytes before the range kept"
        );
        assert!(got[PIECE..offset as usize].iter().all(|&b| b == 0));
        assert!(
            got[offset as usize..]
                == bytes(len + 3 * PIECE)[offset as usize..offset as usize + len],
            "the copied range differs"
        );
    }

    #[test]
    fn a_failed_read_or_write_ends_the_copy_with_its_error() {
        let len = (PIECE * 3 * PIECES) as u64;
        let (from, faults) = FaultyIo::new(MemIo::new(bytes(len as usize)));
        faults.arm(Fault::FailRead);
        let to = MemIo::new(Vec::new());
        let err = copy(&from, &to, 0, len, &mut new_buf(), &new_buf).expect_err("read fails");
        assert!(err.to_string().contains("injected"), "{err}");

        // The writer fails while the reader has every buffer full or waits for one: the copy
        // must return, not wait for the reader.
        let from = MemIo::new(bytes(len as usize));
        let (to, faults) = FaultyIo::new(MemIo::new(Vec::new()));
        faults.arm(Fault::FailWrite);
        let err = copy(&from, &to, 0, len, &mut new_buf(), &new_buf).expect_err("write fails");
        assert!(err.to_string().contains("injected"), "{err}");
        assert_eq!(faults.pending(), 0);
    }
}
