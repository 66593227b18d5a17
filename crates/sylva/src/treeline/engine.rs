//! TreeLine's engine over [`crate::durable`]: redo into the record cache, checkpoints that
//! write the dirty entries to their pages, and the state the meta page keeps
//! (`docs/format.md`, "TreeLine state").

use std::path::Path;
use std::sync::atomic::Ordering;

use parking_lot::RwLockWriteGuard;

use super::log::{self, Record};
use super::store::Store;
use crate::durable::Engine;
use crate::error::{Error, Result};
use crate::io::PageFile;

const STATE_MAGIC: &[u8; 8] = b"sylvaTL\0";
/// The state's version (1: this format).
pub(crate) const STATE_VERSION: u32 = 1;
const STATE_LEN: usize = 40;

/// TreeLine's state in the page file's meta area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    /// Redo starts here.
    pub(crate) checkpoint_lsn: u64,
    /// The next production ID to give out.
    pub(crate) next_production: u64,
    /// The goal and epsilon in force when it was written (for `sylva stats`; an existing store
    /// may be reopened with others).
    pub(crate) goal: u32,
    pub(crate) epsilon: u32,
}

impl State {
    pub(crate) fn encode(&self) -> [u8; STATE_LEN] {
        let mut b = [0u8; STATE_LEN];
        b[0..8].copy_from_slice(STATE_MAGIC);
        b[8..12].copy_from_slice(&STATE_VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.next_production.to_le_bytes());
        b[32..36].copy_from_slice(&self.goal.to_le_bytes());
        b[36..40].copy_from_slice(&self.epsilon.to_le_bytes());
        b
    }

    pub(crate) fn decode(path: &Path, user: &[u8]) -> Result<Option<State>> {
        if user.is_empty() {
            return Ok(None);
        }
        if user.len() < STATE_LEN || &user[0..8] != STATE_MAGIC {
            let what = if user.starts_with(b"sylva") {
                "another engine's state (a Db directory?)"
            } else {
                "no TreeLine state"
            };
            return Err(Error::NotSylva {
                path: path.to_path_buf(),
                expected: "TreeLine store",
                detail: format!("the page file's meta area holds {what}"),
            });
        }
        let version = u32::from_le_bytes([user[8], user[9], user[10], user[11]]);
        if version != STATE_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: STATE_VERSION,
            });
        }
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&user[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let u32_at =
            |at: usize| u32::from_le_bytes([user[at], user[at + 1], user[at + 2], user[at + 3]]);
        Ok(Some(State {
            checkpoint_lsn: u64_at(16),
            next_production: u64_at(24),
            goal: u32_at(32),
            epsilon: u32_at(36),
        }))
    }
}

impl Store {
    pub(crate) fn add_log_bytes(&self, n: usize) {
        self.log_bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl Engine for Store {
    type State = State;
    type Writers<'a> = RwLockWriteGuard<'a, ()>;

    fn decode_state(path: &Path, user: &[u8]) -> Result<Option<(State, u64)>> {
        Ok(State::decode(path, user)?.map(|s| (s, s.checkpoint_lsn)))
    }

    /// PUT and DELETE go back into the record cache, dirty (their keys' presence on the pages
    /// unknown); the rest was applied before redo, at the page scan (`super::recovery`).
    fn redo(&mut self, lsn: u64, payload: &[u8]) -> Result<()> {
        let mut inner = self.inner.write();
        inner.redoing = true;
        match log::decode(lsn, payload)? {
            Record::Put { key, value } => self.cache_write(&mut inner, key, Some(value), lsn, None),
            Record::Delete { key } => self.cache_write(&mut inner, key, None, lsn, None),
            Record::Batch(ops) => {
                for (key, value) in ops {
                    self.cache_write(&mut inner, key, value, lsn, None)?;
                }
                Ok(())
            }
            Record::PageImage { .. } | Record::ReorgStart(_) | Record::ReorgEnd { .. } => Ok(()),
        }
    }

    fn redo_end(&mut self) -> Result<bool> {
        let mut inner = self.inner.write();
        inner.redoing = false;
        self.evict_to_budget(&mut inner)?;
        Ok(false)
    }

    /// The gate writers hold shared (a fuzzy checkpoint's rotation of the log).
    fn hold_writers(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write()
    }

    /// Holds writers back and writes every dirty entry before returning: the quiet checkpoint
    /// then takes its LSN with nothing left to write, so its flush appends no page image after
    /// that LSN (the log it empties next must hold nothing the checkpoint does not cover). A
    /// failure is kept for [`Engine::flush`], which the checkpoint calls next.
    fn hold_writers_quiet(&self) -> RwLockWriteGuard<'_, ()> {
        let gate = self.gate.write();
        if self.inner.read().held_flush_error.is_none() {
            if let Err(e) = self.flush_all() {
                self.inner.write().held_flush_error = Some(e);
            }
        }
        gate
    }

    fn begin_checkpoint(&self, lsn: u64) -> Vec<u8> {
        let mut inner = self.inner.write();
        // Emptied and given back: after a load it held every page the interval wrote (and
        // its capacity stays charged while it exists).
        inner.imaged = std::collections::HashSet::new();
        self.log_bytes.store(0, Ordering::Relaxed);
        State {
            checkpoint_lsn: lsn,
            next_production: inner.next_production,
            goal: self.options.goal as u32,
            epsilon: self.options.epsilon as u32,
        }
        .encode()
        .to_vec()
    }

    /// Every dirty entry, whatever its LSN.
    fn flush(&self, _lsn: u64) -> Result<()> {
        if let Some(e) = self.inner.write().held_flush_error.take() {
            return Err(e);
        }
        self.flush_all()
    }

    fn page_file(&self) -> &PageFile {
        &self.file
    }

    fn logged_bytes(&self) -> u64 {
        self.log_bytes.load(Ordering::Relaxed)
    }
}
