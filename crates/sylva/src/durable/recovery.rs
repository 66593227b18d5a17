//! Open → verify → redo → quiet checkpoint (the module docs of [`super`], "The protocol"), then
//! the background threads.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::Mutex;

use super::background::checkpoint_loop;
use super::dir::Files;
use super::{Core, Durable, Engine, Options, SyncCadence};
use crate::error::{Error, Result};
use crate::io::PageFile;
use crate::wal::{SyncMode, Wal};

/// What recovery found when the database was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log records redone.
    pub records_redone: u64,
    /// Bytes of torn or corrupt log tail cut off, and of records cut because an out-of-line
    /// value they name without carrying it never reached the page file (never acknowledged:
    /// the log's sync writes such values first).
    pub cut_bytes: u64,
    /// File offset of an intact record beyond the cut. Recovery opens only when none of them
    /// says the cut records had been synced (so they were never acknowledged as durable: the OS
    /// wrote an unsynced flush back out of order before a power failure); otherwise it refuses
    /// with `Error::Corruption`.
    pub intact_after_cut: Option<u64>,
    /// A write batch whose page records were cut short was applied again from its log record.
    pub batch_reapplied: bool,
    /// What was wrong with the page file's older meta page (the checkpoint before the one
    /// recovered from), if anything: a torn write by a crash during a checkpoint, or damage.
    /// Harmless (the next checkpoint rewrites it); `sylva check` reports it.
    pub older_meta_damage: Option<String>,
}

impl<E: Engine> Durable<E> {
    /// Opens a store on `files`: the page file synced and its meta page's state decoded, the
    /// log opened at the checkpoint's LSN, the engine built by `build` (over the page file, the
    /// log, the decoded state and that LSN), the log redone into it, a quiet checkpoint if
    /// anything was redone, cut or created, and the background threads started.
    pub(crate) fn start(
        files: Files,
        options: Options,
        build: impl FnOnce(PageFile, Arc<Wal>, Option<E::State>, u64) -> Result<E>,
    ) -> Result<(Self, RecoveryReport)> {
        let Files {
            file,
            meta,
            wal_io,
            lock,
            path,
        } = files;
        // A process that died (`kill -9`) may have left page-file writes the OS holds but has
        // not written: the meta page this open reads among them. Durable first, before anything
        // acknowledged is built on them (the log's segments are synced at open for the same
        // reason).
        file.sync()?;
        let state = match &meta {
            Some(m) => E::decode_state(&path, &m.user)?,
            None => None,
        };
        let existing = state.is_some();
        let checkpoint_lsn = state.as_ref().map_or(1, |(_, lsn)| *lsn);
        let older_meta_damage = file.meta_damage_at_open().map(str::to_owned);
        let (wal, recovered) = Wal::open_segments(wal_io, checkpoint_lsn)?;
        let wal = Arc::new(wal);
        let engine = build(file, wal.clone(), state.map(|(s, _)| s), checkpoint_lsn)?;
        let mut core = Core {
            engine,
            wal,
            poison: Default::default(),
            checkpoints: AtomicU64::new(0),
            checkpointing: AtomicBool::new(false),
            checkpoint_lock: Mutex::new(()),
            durable_checkpoint: AtomicU64::new(checkpoint_lsn),
            fuzzy: options.fuzzy_checkpoints,
        };
        let mut report = RecoveryReport {
            older_meta_damage,
            cut_bytes: recovered.cut_bytes,
            intact_after_cut: recovered.intact_after_cut,
            ..RecoveryReport::default()
        };
        if existing {
            let Core { engine, wal, .. } = &mut core;
            let mut redone = 0;
            // Record by record as the log is read again: memory does not grow with the log.
            let cut = wal.replay_until(|lsn, payload| {
                if lsn < checkpoint_lsn {
                    return Ok(true);
                }
                if engine.log_ends_before(lsn, payload)? {
                    return Ok(false);
                }
                engine.redo(lsn, payload)?;
                redone += 1;
                Ok(true)
            })?;
            report.records_redone = redone;
            report.cut_bytes += cut;
        }
        report.batch_reapplied = core.engine.redo_end()?;
        if !existing || report.records_redone > 0 || report.cut_bytes > 0 {
            core.checkpoint_quiet()?;
        }
        let core = Arc::new(core);
        let background = options.background;
        let cadence = match options.sync {
            SyncMode::Batch { .. } if background => {
                // The log sync thread: a failure poisons the store (the log poisons itself
                // too, so the next write fails).
                let theirs = core.clone();
                SyncCadence::with_thread(options.sync, "sylva-log-sync", move || {
                    let r = theirs.wal.sync();
                    if r.is_err() {
                        theirs.poison.set();
                    }
                    r
                })
            }
            mode => Ok(SyncCadence::new(mode)),
        };
        let durable = Durable {
            core,
            options,
            _lock: lock,
            closed: AtomicBool::new(false),
            cadence: cadence.map_err(|e| Error::io_at(&path, e))?,
            checkpointer: Arc::default(),
            checkpoint_thread: Mutex::new(None),
        };
        if background {
            let (core, checkpointer) = (durable.core.clone(), durable.checkpointer.clone());
            let thread = std::thread::Builder::new()
                .name("sylva-checkpoint".into())
                .spawn(move || checkpoint_loop(core, checkpointer))
                .map_err(|e| Error::io_at(&path, e))?;
            *durable.checkpoint_thread.lock() = Some(thread);
        }
        Ok((durable, report))
    }
}
