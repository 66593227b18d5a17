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
//! backup's thread writes the full ones to the target (the page file's copy with direct I/O
//! too), so the device reads ahead while the last piece is written, as `cp`'s kernel copy
//! does with readahead and write-back. A kernel copy (`copy_file_range`) was not used for the
//! page file: on a file system without shared extents it reads through the page cache, which
//! the store's direct writes bypass and only invalidate after they land. A read racing such a
//! write can leave a stale page cached (the kernel warns "Page cache invalidation failure on
//! direct I/O" when it notices), which a later backup would copy as a version older than `l`,
//! one redo does not repair.
//!
//! **Writers** are held back once, briefly: by step 4's log sync. The copy competes with them
//! only for the device (and for the log it grows, since no checkpoint runs meanwhile).
//!
//! **Sharing the device.** A read or a log write of the store's that reaches the device behind
//! the copy's requests waits for them: a store whose pages are not all cached reads all along,
//! and writers log all along (a commit waits for the log's fsync under `sync=always`, and at
//! each boundary under `batch`). So the copy makes room for the store's I/O, as a background
//! job should, at the price of a longer backup while it goes on (measured: `docs/results/db.md`,
//! "Issue 23: writers during a backup", sessions 29 and 30):
//! - its requests are short: [`CHUNK`] (1 MiB) while the store does no I/O, [`SHARED_PIECE`]
//!   (128 KiB) while it does. A request of the store's that arrives while one of the copy's is
//!   served waits for the rest of it: with the copy's requests a quarter of the device's time,
//!   on average an eighth of one request's service time;
//! - the page file's copy is written with direct I/O (when the source is), and every target
//!   is synced each [`SYNC_EVERY`] bytes, so that what the copy writes reaches the disk while
//!   the copy holds it, not in a write-back that the kernel (or the host of a virtual disk)
//!   runs later, under the store's I/O;
//! - after each piece, if the store has read its page file ([`Engine::reads_made`]: the pool's
//!   and the run cache's misses) or appended to its log within the last [`RECENT`], the
//!   reading thread waits `1 / `[`BackupOptions::device_share`]` - 1` times as long as that
//!   piece's read and the last write took, so the copy keeps that share of the device's time
//!   (a quarter by default). The share is the caller's choice between the backup's speed and
//!   the store's. A store that goes idle (or only reads pages it has cached) gets the copy back
//!   at full speed [`RECENT`] later.
//!
//! With the store busy all along the backup takes more than `1 / device_share` times as long
//! (its short pieces move fewer bytes per unit of the device's time than long ones), and the
//! log it copies (and the copy's first open replays) grows with it, as does the page file when
//! writers free runs (their pages are reused only after a checkpoint): the price of the
//! store's speed, which the caller sets. The time waited is reported
//! ([`BackupReport::yielded`]). The I/O priority classes (`ioprio_set`) are not used: the
//! idle class starved the copy without sparing the readers (`docs/results/db.md`, "Issue 23:
//! online backup, session 21").
//!
//! **Watching.** After each piece written the backup's thread shows a watcher how far the copy
//! has got ([`BackupProgress`]: bytes copied, and the bytes it knows it will copy, which grow
//! by the log's length at step 4). The copy waits while the watcher runs, its reading thread at
//! most [`PIECES`] pieces ahead, so a watcher that sleeps pauses the backup (checkpoints wait
//! on): `sylva backup` draws its progress bar from it, and the `backup_latency` example
//! alternates stretches of copying with pauses to measure the writers with and without the copy
//! on the same disk minutes.
//!
//! **Failure.** The backup only reads the source's files: an error or a crash leaves the
//! source as it was. A target left by a backup that did not end holds [`PARTIAL_DATA_FILE`]
//! and no [`super::DATA_FILE`], and opening it is refused ([`crate::Error::NotSylva`]): it is
//! not mistaken for an empty database.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Durable, Engine, DATA_FILE, WAL_FILE, WAL_FILE_2};
use crate::error::{Error, Result};
use crate::io::{create_dir_all_durable, AlignedBuf, Io, OpenFile, Vfs};

/// The page file of a backup being written: renamed to [`super::DATA_FILE`] once the backup is
/// whole and durable.
pub const PARTIAL_DATA_FILE: &str = "data.sylva.partial";

/// Bytes copied per read and write while the store does no I/O.
const CHUNK: usize = 1 << 20;

/// Bytes copied per read and write while the store reads its pages or logs: a request of the
/// store's that arrives while one of the copy's is served waits for a fraction of a
/// millisecond (module docs, "Sharing the device"). A multiple of every page size.
const SHARED_PIECE: u64 = 128 << 10;

/// How long after the store's last read of its pages or append to its log the copy still makes
/// room for its I/O. That comes and goes at the pace of its operations, many per millisecond
/// or a few per second: a short piece of the copy often sees none of it, so without this the
/// copy would take the device back between two of them.
const RECENT: Duration = Duration::from_millis(100);

/// Bytes of the copy written between syncs of the target: what the copy writes reaches the
/// disk while the copy holds it, not later, when the store's I/O would wait for it (module
/// docs, "Sharing the device").
const SYNC_EVERY: u64 = 8 << 20;

/// [`BackupOptions::device_share`] by default.
pub const DEFAULT_DEVICE_SHARE: f64 = 0.25;

/// How an online backup shares the device with the store's own I/O (module docs, "Sharing the
/// device").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackupOptions {
    /// The part of the device's time the copy takes while the store's operations read its
    /// pages or log, over 0 and at most 1: after each piece of the copy they did so during,
    /// the copy waits `1 / device_share - 1` times as long as the piece took. 1: it never
    /// waits, and takes the device as `cp` would.
    pub device_share: f64,
}

impl Default for BackupOptions {
    fn default() -> Self {
        BackupOptions {
            device_share: DEFAULT_DEVICE_SHARE,
        }
    }
}

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
    /// How long the copy waited for the store's own I/O (module docs, "Sharing the device").
    pub yielded: Duration,
    /// From the call to the copy durable.
    pub duration: Duration,
}

/// How far an online backup has got: what its watcher sees after each piece the copy writes
/// ([`crate::Db::backup_watched`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackupProgress {
    /// Bytes written to the target so far.
    pub copied: u64,
    /// Bytes the copy knows it will write: the page file's length until the log's end is noted
    /// (step 4 of the module docs), then also the runs copied again and the log.
    pub total: u64,
}

/// Counts what the copy wrote and shows it to the backup's watcher.
struct Watch<'a> {
    progress: BackupProgress,
    watcher: &'a mut dyn FnMut(&BackupProgress),
}

impl Watch<'_> {
    fn wrote(&mut self, bytes: u64) {
        self.progress.copied += bytes;
        (self.watcher)(&self.progress);
    }
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
    /// `watcher` sees the progress after each piece written, on the backup's thread: while it
    /// runs the copy waits (its reading thread reads at most [`PIECES`] pieces ahead).
    /// `after_page_copy` runs between steps 3 and 4 (tests write there what the copy of the
    /// page file has missed).
    pub(crate) fn backup_to(
        &self,
        vfs: &dyn Vfs,
        target: &Path,
        options: BackupOptions,
        watcher: &mut dyn FnMut(&BackupProgress),
        after_page_copy: &mut dyn FnMut(),
    ) -> Result<BackupReport> {
        self.check_open()?;
        // Also refuses NaN.
        if !(options.device_share > 0.0 && options.device_share <= 1.0) {
            return Err(Error::InvalidArgument {
                what: format!(
                    "a backup's device share of {} (over 0 and at most 1)",
                    options.device_share
                ),
                limit: 1,
            });
        }
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
        // Written as it is read, with direct I/O when the source is (whole pages, from aligned
        // buffers): the copy's writes then take the device when the copy does, not when the
        // kernel's write-back gets to them (module docs, "Sharing the device").
        let pages_create = OpenFile {
            direct: file.direct_io(),
            ..create
        };
        let pages_out = vfs.open(&partial, pages_create)?.io;
        // Its name durable before any other: a target a crash leaves with files in it always
        // holds this one, and so is refused by open, not taken for an unfinished creation.
        vfs.sync_dir(target)?;
        let mut report = BackupReport::default();
        let new_buf = || file.buffer(CHUNK / ps as usize);
        let mut buf = new_buf();
        let mut logs_out = Vec::new();
        // The store uses the device when it reads pages its caches miss and when it logs: a
        // sum that moves when either does.
        let busy = || engine.reads_made() + core.wal.next_lsn();
        let pace = Pace::new(&busy, options);
        let mut watch = Watch {
            progress: BackupProgress::default(),
            watcher,
        };
        {
            let _one = core.checkpoint_lock.lock();
            let noting = Noting::start(engine)?;
            // Checkpoint `l`, the last: the lock keeps it the last until the copy ends.
            report.checkpoint_lsn = core.durable_checkpoint.load(Ordering::Acquire);
            let pages_in = file.io();
            let len = pages_in.file_len()? / ps * ps;
            watch.progress.total = len;
            copy(
                &**pages_in,
                &*pages_out,
                (0, len),
                &mut buf,
                &new_buf,
                &pace,
                &mut watch,
            )?;
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
            watch.progress.total += runs.iter().map(|&(_, pages)| pages * ps).sum::<u64>()
                + end.lengths.iter().sum::<u64>();

            for (first, pages) in runs {
                copy(
                    &**pages_in,
                    &*pages_out,
                    (first * ps, pages * ps),
                    &mut buf,
                    &new_buf,
                    &pace,
                    &mut watch,
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
                copy(
                    &*segment,
                    &*out,
                    (0, len),
                    &mut buf,
                    &new_buf,
                    &pace,
                    &mut watch,
                )?;
                report.log_bytes += len;
                logs_out.push(out);
            }
        }
        report.yielded = pace.waited();
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

/// How a copy shares the device with the store's own I/O (module docs, "Sharing the device").
struct Pace<'a> {
    /// A count that moves whenever the store reads pages or logs (module docs, "Sharing the
    /// device").
    busy: &'a (dyn Fn() -> u64 + Sync),
    /// How long the copy waits per unit of its own I/O time after a piece the store did I/O
    /// during (`1 / device_share - 1`).
    factor: f64,
    /// How long the last write of a piece took, in nanoseconds.
    last_write: AtomicU64,
    /// How long the copy has waited for the store's I/O, in nanoseconds.
    waited: AtomicU64,
}

impl<'a> Pace<'a> {
    fn new(busy: &'a (dyn Fn() -> u64 + Sync), options: BackupOptions) -> Self {
        Pace {
            busy,
            factor: 1.0 / options.device_share - 1.0,
            last_write: AtomicU64::new(0),
            waited: AtomicU64::new(0),
        }
    }

    /// After a piece read in `read`: if the store has done I/O within [`RECENT`] (its
    /// count moved from `seen.0`, noted at `seen.1`), waits `factor` times as long as the
    /// piece's read and the last write took, and says so; the next piece is then a short one.
    fn after_piece(&self, read: Duration, seen: &mut (u64, Option<Instant>)) -> bool {
        let look = |seen: &mut (u64, Option<Instant>)| {
            let now = (self.busy)();
            if now != seen.0 {
                *seen = (now, Some(Instant::now()));
            }
        };
        look(seen);
        let shared = self.factor > 0.0 && seen.1.is_some_and(|at| at.elapsed() < RECENT);
        if shared {
            let busy = read + Duration::from_nanos(self.last_write.load(Ordering::Relaxed));
            let wait = busy.mul_f64(self.factor);
            std::thread::sleep(wait);
            self.waited
                .fetch_add(wait.as_nanos() as u64, Ordering::Relaxed);
            look(seen);
        }
        shared
    }

    fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited.load(Ordering::Relaxed))
    }
}

/// Copies `len` bytes at `offset` of `from` to the same offset of `to`. A copy of one piece
/// goes through `buf` (aligned, for a source opened for direct I/O: `offset` and `len` are then
/// whole pages); a longer one is a pipeline (module docs, "The copy"): a reading thread fills
/// [`PIECES`] buffers made by `new_buf` while this thread writes those already full, so the
/// device reads the next piece while the last one is written, and the reading thread gives the
/// device up to the store's reads as `pace` says. After each write the target's write-back is
/// started, so the copy does not pile up dirty memory, and `watch` is told.
fn copy(
    from: &dyn Io,
    to: &dyn Io,
    (offset, len): (u64, u64),
    buf: &mut AlignedBuf,
    new_buf: &dyn Fn() -> AlignedBuf,
    pace: &Pace,
    watch: &mut Watch,
) -> Result<()> {
    let end = offset + len;
    if len <= buf.len() as u64 {
        let n = len as usize;
        from.read_at(&mut buf[..n], offset)?;
        to.write_at(&buf[..n], offset)?;
        to.start_writeback(offset, len);
        watch.wrote(len);
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
            // No I/O of the store's seen yet: the first piece is a long one.
            let mut seen = ((pace.busy)(), None);
            let mut shared = false;
            while at < end {
                let Ok(mut buf) = empty_rx.recv() else {
                    return;
                };
                let most = if shared {
                    piece.min(SHARED_PIECE)
                } else {
                    piece
                };
                let n = (end - at).min(most) as usize;
                let started = Instant::now();
                let read = from.read_at(&mut buf[..n], at).map(|()| (buf, at, n));
                let took = started.elapsed();
                let failed = read.is_err();
                if full_tx.send(read).is_err() || failed {
                    return;
                }
                at += n as u64;
                shared = pace.after_piece(took, &mut seen);
            }
        });
        let mut written = 0u64;
        for read in full_rx.iter() {
            let (buf, at, n) = read?;
            let started = Instant::now();
            to.write_at(&buf[..n], at)?;
            to.start_writeback(at, n as u64);
            if written / SYNC_EVERY != (written + n as u64) / SYNC_EVERY {
                to.sync()?;
            }
            let took = started.elapsed().as_nanos() as u64;
            pace.last_write.store(took, Ordering::Relaxed);
            written += n as u64;
            // The reader may have read its last piece and gone: the buffer is then not needed.
            let _ = empty_tx.send(buf);
            watch.wrote(n as u64);
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

    fn no_reads() -> u64 {
        0
    }

    fn no_pace() -> Pace<'static> {
        Pace::new(&no_reads, BackupOptions::default())
    }

    /// [`copy`] through [`PIECE`]-byte buffers; the bytes copied, as each watch saw them.
    fn run(from: &dyn Io, to: &dyn Io, range: (u64, u64), pace: &Pace) -> Result<Vec<u64>> {
        let mut seen = Vec::new();
        let mut watcher = |p: &BackupProgress| seen.push(p.copied);
        let mut watch = Watch {
            progress: BackupProgress::default(),
            watcher: &mut watcher,
        };
        copy(from, to, range, &mut new_buf(), &new_buf, pace, &mut watch)?;
        Ok(seen)
    }

    #[test]
    fn the_copy_waits_only_while_the_store_reads() {
        let len = PIECE * 3 * PIECES;
        let from = MemIo::new(bytes(len));
        let pace = no_pace();
        run(&from, &MemIo::new(Vec::new()), (0, len as u64), &pace).expect("copy");
        assert_eq!(
            pace.waited(),
            Duration::ZERO,
            "no reads of the store's: no wait"
        );

        // Each look at the count finds the store has read again: every piece yields.
        let reads = std::sync::atomic::AtomicU64::new(0);
        let count = || reads.fetch_add(1, Ordering::Relaxed);
        let pace = Pace::new(&count, BackupOptions::default());
        let to = MemIo::new(Vec::new());
        run(&from, &to, (0, len as u64), &pace).expect("copy");
        assert!(pace.waited() > Duration::ZERO, "the copy never yielded");
        assert!(
            to.contents() == bytes(len),
            "a yielding copy copies the same bytes"
        );
    }

    #[test]
    fn a_pipelined_copy_copies_every_piece_to_its_offset() {
        // More pieces than buffers, and a last piece shorter than the others.
        let len = PIECE * (3 * PIECES + 1) + 1000;
        let from = MemIo::new(bytes(len + 3 * PIECE));
        let to = MemIo::new(vec![0xEE; PIECE]);
        let offset = 2 * PIECE as u64;
        let seen = run(&from, &to, (offset, len as u64), &no_pace()).expect("copy");
        // One watch per piece written, each counting that piece.
        let pieces = len.div_ceil(PIECE);
        let each: Vec<u64> = (1..=pieces).map(|i| (i * PIECE).min(len) as u64).collect();
        assert_eq!(seen, each);
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
        let err = run(&from, &to, (0, len), &no_pace()).expect_err("read fails");
        assert!(err.to_string().contains("injected"), "{err}");

        // The writer fails while the reader has every buffer full or waits for one: the copy
        // must return, not wait for the reader.
        let from = MemIo::new(bytes(len as usize));
        let (to, faults) = FaultyIo::new(MemIo::new(Vec::new()));
        faults.arm(Fault::FailWrite);
        let err = run(&from, &to, (0, len), &no_pace()).expect_err("write fails");
        assert!(err.to_string().contains("injected"), "{err}");
        assert_eq!(faults.pending(), 0);
    }
}
