//! The database's state in the page file's meta area, written at each checkpoint
//! (`docs/format.md`, "Database state").

use std::path::Path;

use super::overflow::Tags;
use crate::btree;
use crate::error::{Error, Result};
use crate::page::PageId;

/// Magic and version of the Db's state in the page file's meta area.
const STATE_MAGIC: &[u8; 8] = b"sylvaDB\0";
/// Version 2 added the log's second segment (`wal.2.log`): a build that knows only `wal.log`
/// must refuse such a directory rather than miss records in the second file. Version 1
/// directories are read (their log is one file; the second segment is created empty).
/// Version 3 (issue 23): values carry the tag of [`super::overflow`] and may be out of line
/// (flag byte 13, bit 0); a database created before stays version 2 (its values are untagged),
/// and a build before version 3 refuses a version 3 database instead of misreading its values.
/// Version 4 (session 17): only values of a reference's shape are escaped
/// ([`Tags::RefShape`], flag bit 1), so values shorter than 17 bytes keep their length and
/// leaves of fixed-size values can be dense again; a version 3 database keeps its first-byte
/// escapes ([`Tags::FirstByte`]), and a build before version 4 refuses a version 4 database.
/// Version 5 (issue 23, long keys): version 4 with the tree's long-key limits
/// ([`crate::btree::long_max_key_len`], flag bit 2): keys up to 777 bytes with 4 KiB pages and
/// records of a long key force their value out of line. A database created before keeps its
/// limits (its leaves may hold records longer than the long-key limits allow beside long
/// fences), and a build before version 5 refuses a version 5 database, whose fences and keys
/// it would not expect.
/// Version 6 (issue 23, keys of 1 KiB at every page size): version 5 with keys longer than the
/// tree takes in buckets ([`super::buckets`], flag bit 3): keys up to
/// [`super::buckets::MAX_KEY_LEN`] (16 KiB) at every page size. A database created before keeps
/// its key limit, and a build before version 6 refuses a version 6 database, whose buckets it
/// would show as records.
pub(super) const STATE_VERSION: u32 = 6;
/// The version of a database with the long-key limits and no buckets.
const LONG_KEYS_STATE_VERSION: u32 = 5;
/// The version of a database with [`Tags::RefShape`] and the default key limits.
const REF_SHAPE_STATE_VERSION: u32 = 4;
/// The version of a database whose values are escaped by their first byte.
const FIRST_BYTE_STATE_VERSION: u32 = 3;
/// The version of a database without out-of-line values.
const UNTAGGED_STATE_VERSION: u32 = 2;
/// Flag byte 13, bit 0: values are tagged and may be out of line.
const FLAG_TAGGED: u8 = 0x01;
/// Flag byte 13, bit 1 (version 4): only values of a reference's shape are escaped.
const FLAG_REF_SHAPE: u8 = 0x02;
/// Flag byte 13, bit 2 (version 5): the tree has the long-key limits.
const FLAG_LONG_KEYS: u8 = 0x04;
/// Flag byte 13, bit 3 (version 6): keys longer than the tree takes live in buckets.
const FLAG_KEY_BUCKETS: u8 = 0x08;
const OLDEST_STATE_VERSION: u32 = 1;
pub(super) const STATE_LEN: usize = 40;

/// The Db's state recorded at a checkpoint (in the page file's meta area; `docs/format.md`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct State {
    pub(super) layout: btree::Layout,
    pub(super) meta_page: PageId,
    pub(super) records: u64,
    /// Redo starts at this LSN.
    pub(super) checkpoint_lsn: u64,
    /// Values are tagged and may be out of line ([`super::overflow`]), told apart as `Tags`
    /// says; `None`: stored as they are (a database created before out-of-line values).
    pub(super) tags: Option<Tags>,
    /// The tree has the long-key limits (version 5; [`crate::btree::long_max_key_len`]).
    pub(super) long_keys: bool,
    /// Keys longer than the tree takes live in buckets (version 6; [`super::buckets`]).
    pub(super) buckets: bool,
}

impl State {
    pub(super) fn encode(&self) -> [u8; STATE_LEN] {
        let mut b = [0u8; STATE_LEN];
        b[0..8].copy_from_slice(STATE_MAGIC);
        let (version, flags) = match (self.tags, self.long_keys, self.buckets) {
            (None, _, _) => (UNTAGGED_STATE_VERSION, 0),
            (Some(Tags::FirstByte), _, _) => (FIRST_BYTE_STATE_VERSION, FLAG_TAGGED),
            (Some(Tags::RefShape), false, _) => {
                (REF_SHAPE_STATE_VERSION, FLAG_TAGGED | FLAG_REF_SHAPE)
            }
            (Some(Tags::RefShape), true, false) => (
                LONG_KEYS_STATE_VERSION,
                FLAG_TAGGED | FLAG_REF_SHAPE | FLAG_LONG_KEYS,
            ),
            (Some(Tags::RefShape), true, true) => (
                STATE_VERSION,
                FLAG_TAGGED | FLAG_REF_SHAPE | FLAG_LONG_KEYS | FLAG_KEY_BUCKETS,
            ),
        };
        b[8..12].copy_from_slice(&version.to_le_bytes());
        b[12] = self.layout.code();
        b[13] = flags;
        b[16..24].copy_from_slice(&self.meta_page.to_le_bytes());
        b[24..32].copy_from_slice(&self.records.to_le_bytes());
        b[32..40].copy_from_slice(&self.checkpoint_lsn.to_le_bytes());
        b
    }

    pub(super) fn decode(path: &Path, user: &[u8]) -> Result<Option<State>> {
        if user.is_empty() {
            return Ok(None);
        }
        let not_db = |detail: String| Error::NotSylva {
            path: path.to_path_buf(),
            expected: "database",
            detail,
        };
        if user.len() < STATE_LEN || &user[0..8] != STATE_MAGIC {
            return Err(not_db(
                "the page file's meta area holds no database state".into(),
            ));
        }
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&user[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let version = u32::from_le_bytes([user[8], user[9], user[10], user[11]]);
        if !(OLDEST_STATE_VERSION..=STATE_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: STATE_VERSION,
            });
        }
        let layout = btree::Layout::from_code(user[12])
            .ok_or_else(|| not_db(format!("unknown layout {}", user[12])))?;
        let known = match version {
            FIRST_BYTE_STATE_VERSION => FLAG_TAGGED,
            REF_SHAPE_STATE_VERSION => FLAG_TAGGED | FLAG_REF_SHAPE,
            LONG_KEYS_STATE_VERSION => FLAG_TAGGED | FLAG_REF_SHAPE | FLAG_LONG_KEYS,
            STATE_VERSION => FLAG_TAGGED | FLAG_REF_SHAPE | FLAG_LONG_KEYS | FLAG_KEY_BUCKETS,
            _ => 0,
        };
        if version >= FIRST_BYTE_STATE_VERSION && user[13] & !known != 0 {
            return Err(not_db(format!("unknown state flags {:#04x}", user[13])));
        }
        let tags =
            (version >= FIRST_BYTE_STATE_VERSION && user[13] & FLAG_TAGGED != 0).then(|| {
                if user[13] & FLAG_REF_SHAPE != 0 {
                    Tags::RefShape
                } else {
                    Tags::FirstByte
                }
            });
        Ok(Some(State {
            layout,
            meta_page: u64_at(16),
            records: u64_at(24),
            checkpoint_lsn: u64_at(32),
            tags,
            long_keys: version >= LONG_KEYS_STATE_VERSION && user[13] & FLAG_LONG_KEYS != 0,
            buckets: version >= STATE_VERSION
                && user[13] & FLAG_LONG_KEYS != 0
                && user[13] & FLAG_KEY_BUCKETS != 0,
        }))
    }
}
