//! The write-ahead log: checksummed records, group commit, three durability modes, and recovery
//! that cuts a torn tail.
//!
//! The record format is in [`record`] and `docs/format.md`. Each record gets the next LSN (a
//! counter, not a byte offset, so a checkpoint can restart the file without renumbering).
//!
//! **Segments.** A log is one file, or two used in turn ([`Wal::open_segments`], the database's
//! log): [`Wal::rotate`] syncs the active file and continues in the other, emptied, so a fuzzy
//! checkpoint can drop the records it covers while keeping those appended since it began. At
//! open, the records of both are returned in LSN order when one continues the other.
//!
//! **Dropping a segment in steps.** The segment a finished checkpoint no longer needs is cut
//! from its end `DROP_STEP` bytes at a time, each cut followed by an fsync, and only then
//! emptied ([`Wal::drop_other`], on the checkpoint thread). Cut in one go, a gigabyte's blocks
//! were freed by one journal commit, which on a filesystem mounted with `discard` (this
//! machine's ext4) waits for the device to trim them all, and every fsync of the active segment
//! issued meanwhile waited behind it: the worst write latency of a 10M-record load, 0.28–0.42 s,
//! came from there. In steps, each commit trims 8 MiB, and the worst latency fell to 22–131 ms
//! in such loads and 17–22 ms in a 20M-operation update run (`docs/results/db.md`, session
//! 10). Reusing the segment in place (rewriting only its header, as PostgreSQL and RocksDB
//! recycle log files) avoided the trims as well, but left a gigabyte of dead records that
//! recovery after a crash reads through in its search for intact records beyond a cut: opening
//! after a crash took 4.95 s against 1.23 s, so it was dropped.
//!
//! **Durability.** The log does not decide when to fsync: [`Wal::append`] only buffers the
//! record and returns its LSN, and the caller makes records durable with [`Wal::sync_to`] (up to
//! an LSN) or [`Wal::sync`] (everything appended). The policy, [`SyncMode`], is applied in one
//! place, by the database after each write (`Db::after_write`): `Always` syncs to the write's
//! last LSN before the write returns, `Batch` at batch boundaries, `Never` only on an explicit
//! sync. The buffer is handed to the OS without an fsync once it holds 1 MiB (`WRITE_BEHIND`),
//! and what is written that way goes to the device at once
//! ([`crate::io::Io::start_writeback`], RocksDB's `wal_bytes_per_sync` idea), so that a later
//! fsync does not find a gigabyte of dirty log to write while writers wait.
//!
//! **Page cache.** Only recovery reads the log, so what a sync has made durable is dropped from
//! the OS page cache at once ([`crate::io::Io::drop_cache`], `posix_fadvise(DONTNEED)`), a
//! little after every sync. Otherwise a segment's gigabyte stays cached, counted in the
//! process's memory (and against a memory limit), until the checkpoint that empties the segment
//! frees it all at once: that truncation took 0.4–0.8 s of CPU in the kernel, stolen from the
//! readers of a two-thread run on two cores.
//!
//! **Group commit.** Appends only encode into a shared buffer under a short lock. A thread that
//! needs durability becomes the *leader* if no flush is in flight: it takes the whole buffer (its
//! own record and everyone else's), writes and fsyncs it outside the lock, then wakes the
//! *followers*, whose records that flush covered. Concurrent committers so share one fsync. A
//! writer that must not block (the PA-Tree mode's worker) leads a flush without writing it:
//! [`Wal::begin_flush`] hands it the buffer and its place, it submits the write (and fsync)
//! asynchronously, and [`Wal::end_flush`] ends the flush as a leader's write would.
//!
//! **Before a sync.** A log's user may need something durable before the records a sync covers
//! (`Db`'s out-of-line values their records do not carry): its [`BeforeSync`] hook runs in every
//! durable flush (a leader's, [`Wal::begin_flush`]'s, a rotation's) after the flush took its
//! records and before the log's fsync.
//!
//! **Failure.** A failed write or fsync poisons the log: the kernel may have dropped the dirty
//! pages, so nothing after it could be acknowledged honestly. Every later call returns
//! [`Error::Poisoned`] until the database is reopened (and recovery reads what really reached disk).
//!
//! **Recovery** ([`Wal::open`]) reads records from the header on while each is intact and has the
//! next LSN; the first that is not ends the log, and everything from it on is cut off and
//! reported in [`Recovered::cut_bytes`]. That is a torn tail after a crash mid-write. Recovery
//! also looks beyond the cut for intact records with later LSNs and reports the first in
//! [`Recovered::intact_after_cut`]. That is expected after a power failure in any mode: the OS
//! may write a flush's pages back out of order, and records not yet synced were never
//! acknowledged as durable. It is damage to acknowledged records only if the hole had been
//! synced, and each record says how far the log was synced when it was appended (the synced gap
//! of [`record`]'s frame), so an intact record beyond the cut that claims the hole's LSN was
//! durable sets [`Recovered::hole_was_synced`]. What this cannot see: damage inside the last
//! synced flush when nothing was appended after it (no later record makes the claim); that cut
//! is reported like a torn tail. Recovery itself never needs a human: the log that remains is
//! always a valid prefix. The same claims give [`Wal::claimed_durable_below`]: records below it
//! were synced before the crash, records from it on may have reached the disk written behind.
//! A caller replaying with [`Wal::replay_until`] may end the log before one of the latter (what
//! it needs is not on disk: it was never acknowledged), and the log is cut there as a torn tail.
//!
//! Recovery reads the log twice, through a window of 1 MiB (or one record, if larger), and never
//! holds it whole: [`Wal::open`] checks every record and counts them, then the caller reads them
//! with [`Wal::replay`] (from the OS page cache, as a rule). Memory during recovery so does not
//! grow with the log's length (`tests/wal_recovery_memory.rs`).

pub mod record;
mod recover;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::buffer::LogFlush;
use crate::error::{Error, Result};
use crate::io::Io;
use record::{decode_header, encode_header, encode_record, Header, HEADER_LEN, VERSION};
pub use recover::Recovered;
use recover::{arrange, recover, Recovery, Scan};

/// When a database's writes become durable (the modes after the PA-Tree paper's strong and weak
/// persistent buffering, section III.C). The log itself does not apply it: its user does, by
/// syncing the log up to a write's position (`Wal::sync_to`, `Wal::sync`; module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Durable before the write returns.
    Always,
    /// Durable after `ops` writes or `interval`, whichever comes first, or at `sync()` (the
    /// paper syncs every 1,000 updates). Until then a write is kept in the process's memory (the
    /// log hands its buffer to the OS at a boundary, or once it holds 1 MiB), so a crash of the
    /// process loses the writes since the last boundary, as a power loss does; engines that
    /// hand every write to the OS at once (RocksDB's default) lose them only to a power loss.
    Batch {
        /// Writes per batch.
        ops: u64,
        /// Longest time between syncs while writes keep coming.
        interval: Duration,
    },
    /// Durable only at `sync()` (and checkpoints and close); until then a crash of the process
    /// may lose writes the log still buffers, as under `Batch`.
    Never,
}

impl SyncMode {
    /// Applies one of the string options every durable engine shares (`sync=always|batch|never`,
    /// `batch_ops=N`, `batch_ms=N`; a batch option turns `Batch` on, keeping its other
    /// parameter or the default 1,000 writes / 10 ms); `None` for any other key.
    pub(crate) fn set_option(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let (ops, interval) = match *self {
            SyncMode::Batch { ops, interval } => (ops, interval),
            _ => (1000, Duration::from_millis(10)),
        };
        let set = match key {
            "sync" => match value {
                "always" => Ok(SyncMode::Always),
                "never" => Ok(SyncMode::Never),
                "batch" => Ok(SyncMode::Batch { ops, interval }),
                _ => Err(format!("sync '{value}' is not always, batch or never")),
            },
            "batch_ops" => parse_number(key, value).map(|n| SyncMode::Batch {
                ops: n.max(1),
                interval,
            }),
            "batch_ms" => parse_number(key, value).map(|ms| SyncMode::Batch {
                ops,
                interval: Duration::from_millis(ms),
            }),
            _ => return None,
        };
        Some(set.map(|mode| *self = mode))
    }
}

/// A whole number option's value, or an error naming the option.
pub(crate) fn parse_number(key: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{key} '{value}' is not a whole number"))
}

/// Bytes buffered before `Never` and `Batch` hand the buffer to the OS without an fsync.
const WRITE_BEHIND: usize = 1 << 20;

/// Bytes [`Wal::drop_other`] cuts from a segment per step (see the module docs).
const DROP_STEP: u64 = 8 << 20;

/// The OS page size the page-cache hints round to (x86-64 and most aarch64 Linux; a larger
/// page only makes the hint drop less).
const OS_PAGE: u64 = 4096;

struct State {
    /// Encoded records not yet handed to the OS.
    buf: Vec<u8>,
    /// LSN the next record gets.
    next_lsn: u64,
    /// File offset the buffer will be written at.
    write_offset: u64,
    /// Every record with an LSN below this is durable.
    durable_below: u64,
    /// The file's format version, which appended records follow (a version 1 log is appended
    /// to as version 1 until a truncation rewrites its header).
    version: u32,
    /// A leader is writing; others wait.
    flushing: bool,
    /// The allocation of the buffer the leader writes (0 when none is).
    flushing_capacity: usize,
    /// The segment appends go to.
    active: usize,
    /// The start LSN in each segment's header.
    starts: [u64; 2],
    /// Bytes in the segment that is not active (its records precede the active one's).
    other_len: u64,
    /// The active segment's bytes below this offset (a multiple of [`OS_PAGE`]) are durable
    /// and dropped from the page cache; those from it up to the last sync are dropped next.
    uncached_below: u64,
}

/// The write-ahead log over one file, or over two segments used in turn (see [`Wal::rotate`]).
pub struct Wal {
    segments: Vec<Arc<dyn Io>>,
    /// The recovered records, for [`Wal::replay`]: per segment, in LSN order, the byte range
    /// they fill and the file's format version.
    recovered: Mutex<Vec<Recovery>>,
    /// Every recovered record below this LSN was durable before the crash: a later record's
    /// frame says so, or a segment that another continues holds it (module docs, "Recovery").
    claimed_below: u64,
    state: Mutex<State>,
    flushed: Condvar,
    poisoned: AtomicBool,
    /// What must be durable before any of the log's records are ([`BeforeSync`]).
    before_sync: OnceLock<Arc<dyn BeforeSync>>,
    /// Buffered bytes handed to the OS without an fsync ([`WRITE_BEHIND`] unless a test sets
    /// it, [`Wal::set_write_behind`]).
    write_behind: AtomicUsize,
    /// Bytes allocated for the buffer appends fill and the one a leader writes.
    buffer_bytes: AtomicUsize,
}

/// What a log's user must make durable before records it appended become durable: run by the
/// thread that makes records durable (the leader of a durable flush, a rotation), after it took
/// them and before its `fdatasync`, so that every record the sync covers was appended before
/// the hook ran. `Db` writes and syncs the out-of-line values whose records do not carry them
/// ([`crate::db::overflow`]). It must not wait for the log.
pub(crate) trait BeforeSync: Send + Sync {
    fn before_log_sync(&self) -> Result<()>;
}

impl Wal {
    /// Opens (or creates, if the file is empty) the log in `io`, recovering its records. The next
    /// record's LSN is one past the last recovered record, and at least `min_next_lsn` (so LSNs
    /// stay monotonic across a checkpoint that emptied the log).
    pub fn open(io: Box<dyn Io>, min_next_lsn: u64) -> Result<(Wal, Recovered)> {
        Self::open_with(vec![io], min_next_lsn, false)
    }

    /// Like [`Wal::open`], but a log whose damage lost synced records
    /// ([`Recovered::hole_was_synced`]) is refused with [`Error::LogCorruption`] and left as it is,
    /// and so is a log whose first LSN is above `min_next_lsn` (it no longer reaches back to the
    /// checkpoint the caller recovers from). A hole in records that were never synced is cut
    /// like a torn tail.
    pub fn open_strict(io: Box<dyn Io>, min_next_lsn: u64) -> Result<(Wal, Recovered)> {
        Self::open_with(vec![io], min_next_lsn, true)
    }

    /// Like [`Wal::open_strict`], over two segments that [`Wal::rotate`] uses in turn (the
    /// database opens its log this way). Recovery returns the records of both in LSN order when
    /// they continue each other, else only those of the newer one if it reaches back to
    /// `min_next_lsn`; a gap recovery would need is [`Error::LogCorruption`].
    pub fn open_segments(
        segments: [Box<dyn Io>; 2],
        min_next_lsn: u64,
    ) -> Result<(Wal, Recovered)> {
        Self::open_with(segments.into(), min_next_lsn, true)
    }

    fn open_with(
        segments: Vec<Box<dyn Io>>,
        min_next_lsn: u64,
        strict: bool,
    ) -> Result<(Wal, Recovered)> {
        let mut scans = Vec::with_capacity(segments.len());
        for io in &segments {
            let len = io.file_len()?;
            scans.push(if len == 0 {
                io.write_at(&encode_header(min_next_lsn), 0)?;
                io.sync()?;
                Scan::empty(min_next_lsn)
            } else {
                recover(&**io, len, min_next_lsn)?
            });
        }
        let path = |i: usize| segments[i].path().display().to_string();
        let (active, used) =
            arrange(&scans, min_next_lsn).map_err(|detail| Error::LogCorruption {
                path: None,
                detail: format!("{} and {}: {detail}", path(0), path(1)),
            })?;
        let scan = &scans[active];
        let cut_bytes = scan.len.max(HEADER_LEN) - scan.end;
        let first_start = used.first().map_or(scan.start_lsn, |&i| scans[i].start_lsn);
        if strict {
            if let Some(at) = scan.intact_after_cut.filter(|_| scan.hole_was_synced) {
                return Err(Error::LogCorruption {
                    path: Some(segments[active].path().to_path_buf()),
                    detail: format!(
                        "damaged at offset {}, and an intact record at offset {at} says the damaged \
                         records had been synced: acknowledged records are unreadable; the log is left as it is",
                        scan.end
                    ),
                });
            }
            if first_start > min_next_lsn {
                return Err(Error::LogCorruption {
                    path: Some(segments[active].path().to_path_buf()),
                    detail: format!(
                        "it starts at LSN {first_start}, after the checkpoint being recovered \
                         (LSN {min_next_lsn}): the newest checkpoint is damaged and the log no longer covers the one before"
                    ),
                });
            }
        }
        let io = &segments[active];
        if cut_bytes > 0 {
            io.set_file_len(scan.end)?;
            io.sync()?;
        }
        let mut recovered = Vec::new();
        let mut last_lsn = None;
        for &i in &used {
            if scans[i].count > 0 {
                // Records a crashed process left in the page cache may not be on disk yet; the
                // records appended from now on claim that these are (see `State::durable_below`).
                segments[i].sync()?;
                last_lsn = Some(scans[i].start_lsn + scans[i].count - 1);
                recovered.push(Recovery {
                    segment: i,
                    end: scans[i].end,
                    version: scans[i].version,
                    first_lsn: scans[i].start_lsn,
                    count: scans[i].count,
                });
            }
        }
        let scan = &scans[active];
        let next_lsn = last_lsn
            .map_or(scan.start_lsn, |lsn| lsn + 1)
            .max(min_next_lsn);
        let mut version = scan.version;
        let mut starts = [scan.start_lsn; 2];
        let mut write_offset = scan.end;
        let active_next = scan.start_lsn + scan.count;
        if active_next != next_lsn || (scan.count == 0 && version != VERSION) {
            // The next record would not continue this segment: it is empty with an older header
            // (a truncation cut short by a crash, or an older format), or all its records are
            // older than `min_next_lsn`, which the caller's checkpoint covers. Start it over, so
            // the records appended next have the LSNs its header promises.
            start_over(&**io, next_lsn)?;
            // Its records, if any, are all older than `min_next_lsn`: none to replay.
            recovered.retain(|r| r.segment != active);
            version = VERSION;
            starts[active] = next_lsn;
            write_offset = HEADER_LEN;
        }
        let other_len = if segments.len() == 2 {
            starts[1 - active] = scans[1 - active].start_lsn;
            scans[1 - active].len.max(HEADER_LEN)
        } else {
            0
        };
        let state = State {
            buf: Vec::with_capacity(WRITE_BEHIND),
            next_lsn,
            write_offset,
            durable_below: next_lsn,
            version,
            flushing: false,
            flushing_capacity: 0,
            active,
            starts,
            other_len,
            uncached_below: 0,
        };
        let (intact_after_cut, hole_was_synced) = (
            scans[active].intact_after_cut,
            scans[active].hole_was_synced,
        );
        let records = recovered.iter().map(|r| r.count).sum();
        // A segment another continues was synced whole before the other's header was written.
        let claimed_below = recovered
            .iter()
            .map(|r| {
                let continued = r.segment != active;
                scans[r.segment].claimed_below.max(if continued {
                    r.first_lsn + r.count
                } else {
                    0
                })
            })
            .max()
            .unwrap_or(0);
        let wal = Wal {
            segments: segments.into_iter().map(Arc::from).collect(),
            recovered: Mutex::new(recovered),
            claimed_below,
            state: Mutex::new(state),
            flushed: Condvar::new(),
            poisoned: AtomicBool::new(false),
            before_sync: OnceLock::new(),
            write_behind: AtomicUsize::new(WRITE_BEHIND),
            buffer_bytes: AtomicUsize::new(WRITE_BEHIND),
        };
        Ok((
            wal,
            Recovered {
                records,
                cut_bytes,
                intact_after_cut,
                hole_was_synced,
            },
        ))
    }

    /// Appends a record and returns its LSN. It is durable once [`Wal::sync_to`] of that LSN (or
    /// a later one) or [`Wal::sync`] has returned; until then it is buffered, or written to the OS
    /// without an fsync.
    pub fn append(&self, payload: &[u8]) -> Result<u64> {
        if payload.len() > record::MAX_PAYLOAD {
            return Err(Error::InvalidArgument {
                what: format!(
                    "log record of {} bytes is longer than the maximum",
                    payload.len()
                ),
                limit: record::MAX_PAYLOAD,
            });
        }
        self.check_poisoned()?;
        let mut st = self.state.lock();
        let lsn = st.next_lsn;
        st.next_lsn += 1;
        let (version, synced_below) = (st.version, st.durable_below);
        encode_record(&mut st.buf, version, lsn, synced_below, payload);
        let need_write = st.buf.len() >= self.write_behind.load(Ordering::Relaxed);
        self.note_buffers(&st);
        drop(st);
        if need_write {
            self.commit(lsn, false)?;
        }
        Ok(lsn)
    }

    /// Every byte of each segment (tests that copy a database's state).
    #[cfg(test)]
    pub(crate) fn io_contents(&self) -> [Vec<u8>; 2] {
        let contents = |io: &dyn Io| {
            let len = io.file_len().unwrap_or(0) as usize;
            let mut bytes = vec![0u8; len];
            if io.read_at(&mut bytes, 0).is_err() {
                bytes.clear();
            }
            bytes
        };
        [0, 1].map(|i| {
            self.segments
                .get(i)
                .map_or_else(Vec::new, |io| contents(&**io))
        })
    }

    /// Makes every record appended so far durable.
    pub fn sync(&self) -> Result<()> {
        self.commit(u64::MAX, true).map(drop)
    }

    /// Makes every record up to and including `lsn` durable (every record appended so far if
    /// `lsn` is past the last): a `SyncMode::Always` write waits for its last record so. The
    /// buffer pool's WAL rule does the same through [`LogFlush`].
    pub fn sync_to(&self, lsn: u64) -> Result<()> {
        self.commit(lsn, true).map(drop)
    }

    /// Every record with an LSN below this is durable.
    pub fn durable_below(&self) -> u64 {
        self.state.lock().durable_below
    }

    /// Hands the buffer to the OS once it holds `bytes` (at least one record's worth is
    /// written at a time): tests that need records on disk without a sync, as a larger log
    /// writes them.
    #[doc(hidden)]
    pub fn set_write_behind(&self, bytes: usize) {
        self.write_behind.store(bytes.max(1), Ordering::Relaxed);
    }

    /// Bytes the log's buffers may take, for stores that charge their memory to a budget: the
    /// one appends fill and the one a leader writes, each up to twice the write-behind size, or
    /// what they hold if more (appends do not wait for a flush, so a long fsync lets one grow).
    pub fn buffer_bytes(&self) -> usize {
        let usual = 4 * self.write_behind.load(Ordering::Relaxed);
        usual.max(self.buffer_bytes.load(Ordering::Relaxed))
    }

    fn note_buffers(&self, st: &State) {
        let bytes = st.buf.capacity() + st.flushing_capacity;
        self.buffer_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Sets what must be durable before the log's records are ([`BeforeSync`]); once.
    pub(crate) fn set_before_sync(&self, hook: Arc<dyn BeforeSync>) {
        let _ = self.before_sync.set(hook);
    }

    fn before_sync(&self) -> Result<()> {
        match self.before_sync.get() {
            Some(hook) => hook.before_log_sync(),
            None => Ok(()),
        }
    }

    /// Every record recovery found below this LSN was durable before the crash (a later
    /// record's frame claims so, or a segment another continues holds it); records from it on
    /// may have reached the disk without a sync (written behind, or left by a killed process).
    pub fn claimed_durable_below(&self) -> u64 {
        self.claimed_below
    }

    /// The LSN the next record will get.
    pub fn next_lsn(&self) -> u64 {
        self.state.lock().next_lsn
    }

    /// Bytes in the log's files, including buffered records.
    pub fn bytes(&self) -> u64 {
        let st = self.state.lock();
        st.write_offset + st.buf.len() as u64 + st.other_len
    }

    /// Empties the log after a checkpoint has made everything in it redundant. The caller must
    /// keep appends out while this runs. The next record keeps the current LSN sequence.
    pub fn truncate(&self) -> Result<()> {
        self.check_poisoned()?;
        self.sync()?;
        let mut st = self.state.lock();
        let next_lsn = st.next_lsn;
        let result = self
            .segments
            .iter()
            .try_for_each(|io| start_over(&**io, next_lsn));
        if let Err(e) = result {
            self.poisoned.store(true, Ordering::Release);
            return Err(e);
        }
        st.write_offset = HEADER_LEN;
        st.uncached_below = 0;
        st.version = VERSION;
        st.active = 0;
        st.starts = [next_lsn; 2];
        st.other_len = if self.segments.len() == 2 {
            HEADER_LEN
        } else {
            0
        };
        Ok(())
    }

    /// Empties the segment that is not active, once the caller's durable checkpoint no longer
    /// needs its records (`keep_from`, as for [`Wal::rotate`]): a checkpoint calls this when it
    /// has finished, so that the next rotation, which runs while writers wait, need not cut a
    /// large file. The file is cut in steps (module docs). Returns whether it did.
    pub fn drop_other(&self, keep_from: u64) -> Result<bool> {
        self.check_poisoned()?;
        if self.segments.len() < 2 {
            return Ok(false);
        }
        let (other, start) = {
            let st = self.state.lock();
            if st.starts[st.active] > keep_from || st.other_len <= HEADER_LEN {
                return Ok(false);
            }
            (1 - st.active, st.starts[1 - st.active])
        };
        // Appends never touch the other segment and only `rotate` (which the caller does not
        // run meanwhile) switches segments, so this needs no lock. Its header keeps its old
        // start LSN, below the active segment's: recovery takes it for the older one. A crash
        // between two steps leaves a prefix of its records, which recovery no longer needs
        // either (it treats the cut like a torn tail of the older segment).
        let io = &*self.segments[other];
        let result = io.file_len().and_then(|mut len| {
            while len > HEADER_LEN + DROP_STEP {
                len -= DROP_STEP;
                io.set_file_len(len)?;
                io.sync()?;
            }
            start_over(io, start)
        });
        if let Err(e) = result {
            self.poisoned.store(true, Ordering::Release);
            return Err(e);
        }
        self.state.lock().other_len = HEADER_LEN;
        Ok(true)
    }

    /// Starts appending to the other segment, whose records must all precede `keep_from` (the
    /// LSN the last durable checkpoint recovers from): a fuzzy checkpoint rotates at its start,
    /// so the records it does not cover are in the new segment, and the old segment is dropped
    /// at the next rotation. Everything appended before is durable on return. Returns `false`
    /// (and does nothing) for a one-file log, or when the other segment may still be needed.
    pub fn rotate(&self, keep_from: u64) -> Result<bool> {
        self.check_poisoned()?;
        if self.segments.len() < 2 {
            return Ok(false);
        }
        let mut st = self.state.lock();
        if st.starts[st.active] > keep_from {
            return Ok(false);
        }
        while st.flushing {
            self.flushed.wait(&mut st);
        }
        let (active, other) = (st.active, 1 - st.active);
        let buf = std::mem::take(&mut st.buf);
        let next_lsn = st.next_lsn;
        // The old segment is synced whole before the new one's header names the next LSN:
        // recovery relies on a segment that another continues being complete.
        let result = self
            .before_sync()
            .and_then(|()| self.segments[active].write_at(&buf, st.write_offset))
            .and_then(|()| self.segments[active].sync())
            .and_then(|()| start_over(&*self.segments[other], next_lsn));
        if let Err(e) = result {
            self.poisoned.store(true, Ordering::Release);
            self.flushed.notify_all();
            return Err(e);
        }
        st.other_len = st.write_offset + buf.len() as u64;
        // The old segment is durable whole now (its records are read only by recovery); its
        // cache is dropped below, after the lock.
        let uncached = (st.uncached_below, st.other_len);
        st.uncached_below = 0;
        let mut buf = buf;
        buf.clear();
        st.buf = buf;
        st.durable_below = next_lsn;
        st.active = other;
        st.starts[other] = next_lsn;
        st.write_offset = HEADER_LEN;
        st.version = VERSION;
        drop(st);
        let (from, end) = uncached;
        self.segments[active].drop_cache(from, end.saturating_sub(from));
        Ok(true)
    }

    pub(crate) fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    /// Starts a flush that the caller carries out itself, for a writer that must not block
    /// (the PA-Tree mode's worker submits it as an asynchronous write, linked to an
    /// `fdatasync` if `durable`): takes everything buffered and reserves its place in the
    /// active segment. The caller writes [`Flush::bytes`] at [`Flush::offset`] of segment
    /// [`Flush::segment`] (and syncs it if [`Flush::durable`]), then hands the flush and the
    /// outcome to [`Wal::end_flush`]. Meanwhile no other flush starts: threads needing one wait,
    /// as for any leader's flush. `None` when another flush is in flight (try again after it)
    /// or there is nothing to do (nothing buffered, and with `durable`, everything durable).
    pub fn begin_flush(&self, durable: bool) -> Result<Option<Flush>> {
        self.check_poisoned()?;
        let mut st = self.state.lock();
        let idle = if durable {
            st.durable_below >= st.next_lsn
        } else {
            st.buf.is_empty()
        };
        if st.flushing || idle {
            return Ok(None);
        }
        let flush = Self::lead(&mut st, durable);
        drop(st);
        if durable {
            // The flush's records were appended before `lead` took them: the hook sees what
            // they need (a rare blocking step on the worker: only out-of-line values ask it).
            if let Err(e) = self.before_sync() {
                let mut st = self.state.lock();
                return self.finish(&mut st, flush, Err(e)).map(|_| None);
            }
        }
        Ok(Some(flush))
    }

    /// Ends a flush [`Wal::begin_flush`] started, with the outcome of its write (and sync): on
    /// success its records are written (durable, for a durable flush) and waiting threads go
    /// on; a failure poisons the log (and is returned). Returns the LSN below which every record
    /// is durable.
    pub fn end_flush(&self, flush: Flush, result: Result<()>) -> Result<u64> {
        let mut st = self.state.lock();
        let (durable_below, uncache) = self.finish(&mut st, flush, result)?;
        drop(st);
        if let Some((segment, from, len)) = uncache {
            self.segments[segment].drop_cache(from, len);
        }
        Ok(durable_below)
    }

    /// Becomes the flush leader: takes the buffer and reserves its place.
    fn lead(st: &mut State, durable: bool) -> Flush {
        st.flushing = true;
        let buf = std::mem::take(&mut st.buf);
        st.flushing_capacity = buf.capacity();
        let offset = st.write_offset;
        st.write_offset += buf.len() as u64;
        Flush {
            buf,
            offset,
            segment: st.active,
            covers_below: st.next_lsn,
            durable,
        }
    }

    /// Ends the leader's flush: hands the buffer back, poisons the log on failure, advances
    /// what is durable and wakes the waiters. Returns the LSN below which every record is
    /// durable, and for a durable flush the range to drop from the page cache (outside the
    /// lock: segment, offset, length). Whole OS pages only: the last, partly written page stays
    /// cached, or the next append to it would have to read it back from the device first. The
    /// segment cannot change meanwhile in a way that matters: a rotation drops the rest of the
    /// old one itself, and a stale range on a segment started over is harmless.
    #[allow(clippy::type_complexity)]
    fn finish(
        &self,
        st: &mut State,
        flush: Flush,
        result: Result<()>,
    ) -> Result<(u64, Option<(usize, u64, u64)>)> {
        st.flushing = false;
        st.flushing_capacity = 0;
        let end = flush.offset + flush.buf.len() as u64;
        if st.buf.is_empty() {
            // Hand the allocation back so the buffer does not regrow every batch.
            let mut buf = flush.buf;
            buf.clear();
            st.buf = buf;
        }
        self.note_buffers(st);
        if let Err(e) = result {
            self.poisoned.store(true, Ordering::Release);
            self.flushed.notify_all();
            return Err(e);
        }
        if flush.durable {
            st.durable_below = st.durable_below.max(flush.covers_below);
        }
        self.flushed.notify_all();
        if !flush.durable {
            return Ok((st.durable_below, None));
        }
        let end = end & !(OS_PAGE - 1);
        let from = st.uncached_below.min(end);
        st.uncached_below = end;
        let uncache = (end > from).then_some((flush.segment, from, end - from));
        Ok((st.durable_below, uncache))
    }

    /// Returns once the record `lsn` is durable (every record appended so far if `lsn` is past
    /// the last), leading a flush if no other thread is; with `durable` false (a write-behind),
    /// once the buffer is written, or at once if another thread's flush is in flight. Returns
    /// the LSN below which every record is durable.
    fn commit(&self, lsn: u64, durable: bool) -> Result<u64> {
        let mut st = self.state.lock();
        let lsn = lsn.min(st.next_lsn.saturating_sub(1));
        loop {
            self.check_poisoned()?;
            if st.durable_below > lsn || (!durable && st.buf.is_empty() && !st.flushing) {
                return Ok(st.durable_below);
            }
            if st.flushing {
                if !durable {
                    // A write-behind need not wait for the flush in flight, which is usually a
                    // sync's fsync: the record stays buffered, and the next append past the
                    // threshold, or the next sync, writes it. The buffer so grows by what is
                    // appended during one flush.
                    return Ok(st.durable_below);
                }
                self.flushed.wait(&mut st);
                continue;
            }
            // Lead: take everything buffered, write it outside the lock.
            let flush = Self::lead(&mut st, durable);
            drop(st);
            let io = &self.segments[flush.segment];
            let before = if durable { self.before_sync() } else { Ok(()) };
            let result = before
                .and_then(|()| io.write_at(&flush.buf, flush.offset))
                .and_then(|()| {
                    if durable {
                        io.sync()
                    } else {
                        // Written behind (`Never`, or `Batch` between its syncs): start the
                        // device write now, so the next fsync is short (`Io::start_writeback`).
                        io.start_writeback(flush.offset, flush.buf.len() as u64);
                        Ok(())
                    }
                });
            st = self.state.lock();
            let (durable_below, uncache) = self.finish(&mut st, flush, result)?;
            if !durable {
                return Ok(durable_below);
            }
            if let Some((segment, from, len)) = uncache {
                drop(st);
                self.segments[segment].drop_cache(from, len);
                st = self.state.lock();
            }
        }
    }

    /// Makes every record appended so far durable and returns where the log ends: per
    /// segment, the bytes from the file's start that hold its records (an online backup copies
    /// exactly these, `crate::durable`'s backup), and the LSN the next record will get. The
    /// caller keeps appends out (for the database, its writers) so the point is the log's end
    /// when it returns; should a record slip in, it syncs again.
    pub fn durable_end(&self) -> Result<LogEnd> {
        loop {
            self.sync()?;
            let st = self.state.lock();
            self.check_poisoned()?;
            if !st.buf.is_empty() || st.flushing || st.durable_below < st.next_lsn {
                continue;
            }
            let mut lengths = vec![0u64; self.segments.len()];
            lengths[st.active] = st.write_offset;
            if self.segments.len() == 2 {
                lengths[1 - st.active] = st.other_len;
            }
            return Ok(LogEnd {
                lengths,
                next_lsn: st.next_lsn,
            });
        }
    }

    /// Segment `i`'s file (0 or 1; a one-file log has only 0), for a caller that writes a
    /// [`Flush`] itself.
    pub fn segment(&self, i: usize) -> Option<Arc<dyn Io>> {
        self.segments.get(i).cloned()
    }
}

/// Where a durable log ends ([`Wal::durable_end`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEnd {
    /// Per segment ([`Wal::segment`]), the bytes from the file's start holding its records.
    pub lengths: Vec<u64>,
    /// The LSN the next record gets: every record below it is durable and within `lengths`.
    pub next_lsn: u64,
}

/// A flush of the log's buffered records that the caller writes itself: see
/// [`Wal::begin_flush`].
#[derive(Debug)]
pub struct Flush {
    buf: Vec<u8>,
    offset: u64,
    segment: usize,
    covers_below: u64,
    durable: bool,
}

impl Flush {
    /// The bytes to write.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Where in the segment they go.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Which segment ([`Wal::segment`]).
    pub fn segment(&self) -> usize {
        self.segment
    }

    /// Whether the write must be followed by an `fdatasync` of the segment before
    /// [`Wal::end_flush`] (the records then count as durable).
    pub fn durable(&self) -> bool {
        self.durable
    }

    /// The LSN below which every record is written once this flush is.
    pub fn covers_below(&self) -> u64 {
        self.covers_below
    }
}

/// The buffer pool's WAL rule over this log.
impl LogFlush for Wal {
    fn flush_to(&self, lsn: u64) -> Result<u64> {
        self.commit(lsn, true)
    }

    fn durable_below(&self) -> u64 {
        Wal::durable_below(self)
    }
}

/// Empties a log file: cut first, then rewrite the header (a crash between leaves a valid empty
/// file whose older header recovery rewrites).
fn start_over(io: &dyn Io, start_lsn: u64) -> Result<()> {
    io.set_file_len(HEADER_LEN)?;
    io.sync()?;
    io.write_at(&encode_header(start_lsn), 0)?;
    io.sync()
}

#[cfg(test)]
mod flush_tests;
#[cfg(test)]
mod tests;
