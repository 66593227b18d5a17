//! Out-of-line values: a value too long for a leaf lives in a run of contiguous pages of the page
//! file, and the leaf keeps the key with a 17-byte *reference* (issue 23; LMDB's overflow pages
//! are the anchor). Every byte is in `docs/format.md`, "Out-of-line values".
//!
//! **In the leaf.** A database created by this build stores every value in one of three forms
//! (the *value tags*, [`Tags::RefShape`], database state version 4):
//! - a reference to a run, exactly 17 bytes: `0xFF | first page u64 | length u32 | CRC32C u32`,
//!   for a value whose stored form would not fit a leaf ([`crate::btree::max_value_len`] of the
//!   node: 752 bytes with 4 KiB pages);
//! - a value of a reference's *shape* (`0xFE` repeated j ≥ 0 times, `0xFF`, 16 more bytes) behind
//!   one escape byte `0xFE`;
//! - every other value as it is: the small-value path keeps no extra byte and no copy, and a
//!   value shorter than 17 bytes never changes length, so leaves of fixed-size values stay as
//!   dense as before out-of-line values. Telling them apart costs a length comparison, and for
//!   17 bytes or more a look at one byte (two or more only for values starting with `0xFE`).
//!
//! State version 3 ([`Tags::FirstByte`], sessions 14–17) told them apart by the first byte and
//! escaped every value starting with `0xFE` or `0xFF`: one random value in 128 grew by a byte,
//! which left leaves of 8-byte random values under dense keys at 2.3× the pages. A database
//! created as version 3 keeps that rule.
//!
//! A database created before (its meta-page state version 1 or 2) stores values as they are and
//! has no out-of-line values: it refuses a value over the leaf limit as before, and saying so
//! names `sylva dump`/`sylva load` as the way to a database that takes them. The state records
//! which kind a database is ([`super::state`]).
//!
//! **The run.** `ceil((48 + length) / page size)` contiguous pages. The first starts with the
//! common page header (kind [`PageKind::OverflowValue`], its id, the LSN of the record that
//! wrote it, the CRC32C of the whole first page), then a 16-byte run header (`length u32 |
//! pages u32 | value CRC32C u32 | zero u32`), then the value; the value continues through the
//! following pages, which carry no header of their own (so a read lands the value contiguously
//! in the caller's buffer), and the last page is padded with zeros. Integrity: the first page's
//! checksum, and the value's CRC32C, held both in the run header and in the leaf's reference
//! (a read checks it against the reference, so a stale or misdirected run is caught).
//!
//! **Writing** (a put whose value goes out of line), under the store's write gate (a checkpoint
//! cannot begin between the run's allocation and the record that links it, so every allocation a
//! checkpoint's free space shows is explained by its state or by a record after it):
//! 1. allocate the run (best fit among the free extents, or the file's end);
//! 2. the WAL rule for reused pages: a page freed at once (a tree page a merge freed) may still be
//!    what the durable state points at until the record that freed it is durable, so the log is
//!    synced up to the last such record, if it is not yet, before the run is written (rare:
//!    merges happen on deletes);
//! 3. forget the pool's frames of those pages ([`crate::buffer::BufferPool::forget_run`]);
//! 4. one of three ways to the file:
//!    - *logged*: a value of at most [`crate::DbOptions::logged_value_max`] bytes (64 KiB by
//!      default) is carried whole by the log record, like an inline put's value, and the run
//!      needs no fsync of its own: recovery rewrites it from the record, and the checkpoint that
//!      no longer redoes the record writes and fsyncs it first. It enters the run cache
//!      ([`super::runcache`]) dirty and is written later, by the cache's eviction or a
//!      checkpoint (the log synced first up to the record that freed reused pages, if step 2
//!      asked for it). Without the run cache (`run_cache=false`) it is written here, with one
//!      I/O (runs over 64 MiB in 64 MiB pieces, to bound the buffer), after step 2's sync. A
//!      value over reused pages whose freeing record is not durable yet is logged up to 1 MiB
//!      whatever the option says (rare: merges happen on deletes), since only a logged value's
//!      write may wait for the log;
//!    - *before the log's sync*: a longer value, if the run cache takes it (at most a
//!      sixteenth of the cache), enters it dirty and *unlogged*: the record carries only the
//!      reference, and the run cache writes the run, and fsyncs the page file, in the log's
//!      [`crate::wal::BeforeSync`] hook, which every sync of the log runs after taking the
//!      records it makes durable and before its own fsync. So a value is written once, not in
//!      the log and again in its run, and a `SyncMode::Never` or `Batch` load leaves the runs
//!      to be written together, sequentially, by the next sync or checkpoint; a
//!      `SyncMode::Always` commit costs two fsyncs instead of one. The record may still reach
//!      the disk without its run, written behind without a sync or left by a killed process;
//!      recovery checks the runs of the records the log does not claim synced and ends the log
//!      before the first whose run is missing (`super::recovery`, [`run_in_file`]). The run's
//!      bytes count towards `checkpoint_bytes` as logged bytes do, which bounds that check;
//!    - *at the put*: a value too long for the cache, or any unlogged value without it, is
//!      written here and made durable (the page file's fsync) *before* its record is appended,
//!      so the record never reaches disk without it (a 1 GiB value is not written twice, and no
//!      record exceeds the log's 64 MiB limit).
//!
//!    While an online backup runs, an unlogged run is noted for it to copy again
//!    ([`crate::durable::backup`]: the log cannot bring it back), and so is every unlogged run
//!    the cache holds unwritten when it starts;
//! 5. the leaf put, logged as a RUNS record wrapping the tree's own record (`super::log`).
//!
//! **Freeing.** An overwrite or delete of a key whose value is out of line frees the run with a
//! *deferred* free ([`crate::io::PageFile::free_run_deferred`]): the pages become allocatable
//! only once a checkpoint that no longer points at them is durable, so the run a crash recovers
//! is never overwritten by a new one. The freed run is named in the same RUNS record as the
//! leaf change (the tree reports the old value under the leaf's latch,
//! [`crate::btree::NodeStore::replaced`]), so recovery frees it exactly when it redoes that
//! record, whatever the leaf's LSN: no leak, no double free.
//!
//! **Recovery** (redo of a RUNS record, whatever the pages' LSNs): every run it wrote is marked
//! in use and, if the record carries the value, written again; the wrapped record is redone as
//! any; every run it freed is freed (deferred). [`super::Db::check`] verifies every run: read
//! whole, intact, referenced exactly once, not free, and every page of the file is a meta page,
//! free-space page, free page, tree page or run page.
//!
//! **Reading.** A get finds the reference under the leaf's optimistic latch, then copies the
//! value from the run cache if it holds it ([`super::runcache`]: the entry's length and CRC
//! must match the reference's), else reads the run's value bytes with one read straight into
//! the caller's buffer (with direct I/O, through an aligned buffer), checks them against the
//! reference's CRC32C and enters them in the cache. A concurrent overwrite frees the run
//! deferred, so it is not reused before a checkpoint ends; a read that still loses that race
//! sees a CRC mismatch and looks the key up again, and only a mismatch on an unchanged
//! reference is reported.
//!
//! Limits: values up to `u32::MAX` bytes (4 GiB − 1). A value goes out of line only when it
//! does not fit a leaf, so values from the leaf limit up take at least one page each (a 1 KiB
//! value takes a 4 KiB page with 4 KiB pages).
//!
//! **Keys** (issue 23: 1 KiB at every page size; state versions 5 and 6). Design: keys stay in
//! the leaf whole; what limits them is the slotted node, which keeps both fence keys whole in its
//! heap, and the condition every split relies on (`crate::btree::limits`: a node holds its
//! header, two fences of the longest key and three records of the longest record). Version 4
//! sized both as fixed fractions of the node (keys 1/16, records 1/4: 254-byte keys with 4 KiB
//! pages). Version 5 trades them against each other: the key limit is the longest key whose
//! record with a 17-byte reference still leaves room for two fences and three such records
//! (`(node − 96 − 81) / 5`), and a record's budget is what the condition then leaves
//! (`crate::btree::long_max_record_len`). A value whose stored form would push its record past
//! the budget goes out of line ([`form`], through [`crate::btree::BTree`]'s
//! `max_inline_value`), so a longest key takes values of any size; the tree refuses a record
//! past the budget as a last guard. With keys up to 42 bytes (4 KiB pages) values are stored
//! exactly as in version 4: the small-value path does not change.
//!
//! Limits by page size: 777 bytes (4 KiB), 1,596 (8 KiB), 3,235 (16 KiB), 6,511 (32 KiB),
//! 13,065 (64 KiB). 1 KiB keys with 4 KiB pages are not reached in the tree: two whole 1 KiB
//! fences and the 96-byte header leave 1,920 bytes, not room for two records of a 1 KiB key even
//! with the value out of line (1,051 bytes each). State version 6 takes them (up to 16 KiB at
//! every page size) in buckets under their first 776 bytes, values of this module's kind
//! ([`super::buckets`]), so the tree's limits above still hold for every key it sees.
//! A database created before version 5 keeps its limits: its leaves may hold 1,006-byte
//! records, which beside fences longer than 254 bytes could leave a split without room.

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use super::store::PoolStore;
use crate::btree::{BTree, NodeStore};
use crate::error::{Error, Result};
use crate::io::page_header::{self, PageKind, PAGE_HEADER_LEN};
use crate::io::{AlignedBuf, PageFile};

thread_local! {
    /// An escaped value being put, reused.
    static ESCAPED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The first byte of a reference to an out-of-line value.
pub(crate) const REF_TAG: u8 = 0xFF;
/// The byte before an escaped inline value (in version 4, one of a reference's shape).
pub(crate) const ESCAPE_TAG: u8 = 0xFE;
/// Bytes of a reference in the leaf.
pub(crate) const REF_LEN: usize = 17;
/// Bytes before the value in a run's first page: the common header and the run header.
pub const RUN_HEADER_LEN: usize = PAGE_HEADER_LEN + 16;
/// The longest value (its length is a `u32`).
pub const MAX_VALUE_LEN: usize = u32::MAX as usize;
/// Values over reused pages up to this many bytes are carried whole by their log record,
/// whatever [`crate::DbOptions::logged_value_max`] says (module docs, "Writing").
const LOGGED_VALUE_CAP: usize = 1 << 20;

/// How a put's out-of-line value reaches the file (module docs, "Writing", step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// Carried by its log record; the run is written later (by the run cache) or now.
    Logged,
    /// Not logged: the run cache writes it before the log's next sync.
    BeforeSync,
    /// Not logged: written and fsynced now, before its record.
    AtPut,
}
/// The largest single write or direct read of a run.
const IO_CHUNK: usize = 64 << 20;

/// A leaf's reference to an out-of-line value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValueRef {
    pub(crate) first: u64,
    pub(crate) len: u32,
    pub(crate) crc: u32,
}

impl ValueRef {
    pub(crate) fn encode(&self) -> [u8; REF_LEN] {
        let mut b = [0u8; REF_LEN];
        b[0] = REF_TAG;
        b[1..9].copy_from_slice(&self.first.to_le_bytes());
        b[9..13].copy_from_slice(&self.len.to_le_bytes());
        b[13..17].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// Pages of the run with `page_size`-byte pages.
    pub(crate) fn pages(&self, page_size: usize) -> u64 {
        run_pages(self.len as usize, page_size)
    }
}

/// What a stored value (the bytes in a leaf of a database with out-of-line values) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored<'a> {
    /// The value itself.
    Inline(&'a [u8]),
    /// A reference to a run.
    Ref(ValueRef),
}

/// How a database with out-of-line values tells a stored value from a reference (its state
/// version, `docs/format.md`, "Out-of-line values").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tags {
    /// State version 3: every value that starts with `0xFE` or `0xFF` is escaped (one in 128
    /// random values grows by a byte, which keeps most leaves of random fixed-size values from
    /// being fully dense).
    FirstByte,
    /// State version 4: only a value of a reference's shape is escaped: `0xFE` repeated `j ≥ 0`
    /// times, then `0xFF`, then 16 bytes (17 + j bytes). A reference is exactly 17 bytes
    /// starting with `0xFF`, an escaped value is one more `0xFE` before such a value, and every
    /// other value is stored as it is: values under 17 bytes never change length.
    RefShape,
}

/// Whether `s` has a reference's shape behind `0xFE` bytes: `0xFE`{j}, `0xFF`, 16 bytes.
#[inline]
fn ref_shaped(s: &[u8]) -> bool {
    s.len() >= REF_LEN && {
        let j = s.len() - REF_LEN;
        s[j] == REF_TAG && s[..j].iter().all(|&b| b == ESCAPE_TAG)
    }
}

/// Decodes a stored value (`page` only names where it came from in errors: the leaf page,
/// when known).
pub(crate) fn classify(stored: &[u8], page: u64, tags: Tags) -> Result<Stored<'_>> {
    if tags == Tags::RefShape {
        return Ok(if stored.len() == REF_LEN && stored[0] == REF_TAG {
            Stored::Ref(decode_ref(stored))
        } else if stored.len() > REF_LEN && ref_shaped(stored) {
            Stored::Inline(&stored[1..])
        } else {
            Stored::Inline(stored)
        });
    }
    match stored.first() {
        Some(&REF_TAG) => {
            if stored.len() != REF_LEN {
                return Err(Error::Corruption {
                    page,
                    detail: format!(
                        "a value reference of {} bytes (a reference has {REF_LEN})",
                        stored.len()
                    ),
                });
            }
            Ok(Stored::Ref(decode_ref(stored)))
        }
        Some(&ESCAPE_TAG) => Ok(Stored::Inline(&stored[1..])),
        _ => Ok(Stored::Inline(stored)),
    }
}

/// The reference in `stored` (exactly [`REF_LEN`] bytes).
fn decode_ref(stored: &[u8]) -> ValueRef {
    let u32_at = |at: usize| {
        u32::from_le_bytes([stored[at], stored[at + 1], stored[at + 2], stored[at + 3]])
    };
    let mut w = [0u8; 8];
    w.copy_from_slice(&stored[1..9]);
    ValueRef {
        first: u64::from_le_bytes(w),
        len: u32_at(9),
        crc: u32_at(13),
    }
}

/// Whether `value` needs the escape byte to be stored inline.
#[inline]
pub(crate) fn needs_escape(value: &[u8], tags: Tags) -> bool {
    match tags {
        Tags::FirstByte => value.first().is_some_and(|&b| b >= ESCAPE_TAG),
        Tags::RefShape => ref_shaped(value),
    }
}

/// Whether a stored value (of a tagged database) is not the value itself: a reference or an
/// escaped value.
#[inline]
pub(crate) fn is_tagged(stored: &[u8], tags: Tags) -> bool {
    match tags {
        Tags::FirstByte => stored.first().is_some_and(|&b| b >= ESCAPE_TAG),
        Tags::RefShape => ref_shaped(stored),
    }
}

/// Whether a stored value (of a tagged database) is a reference to a run.
#[inline]
pub(crate) fn is_ref(stored: &[u8], tags: Tags) -> bool {
    stored.first() == Some(&REF_TAG) && (tags == Tags::FirstByte || stored.len() == REF_LEN)
}

/// Pages a run holding `len` value bytes takes.
pub(crate) fn run_pages(len: usize, page_size: usize) -> u64 {
    (RUN_HEADER_LEN + len).div_ceil(page_size) as u64
}

/// A run's header, decoded from its first page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunHeader {
    /// The value's length.
    pub len: u32,
    /// Pages in the run.
    pub pages: u32,
    /// CRC32C of the value.
    pub crc: u32,
}

/// Verifies the first page of a run (`page`, one page, read as page `id`) and decodes its run
/// header. Every failure is an [`Error::Corruption`] or [`Error::ChecksumMismatch`] naming `id`.
pub fn decode_run_header(page: &[u8], id: u64) -> Result<RunHeader> {
    let h = page_header::verify(page, id)?;
    let bad = |detail: String| Error::Corruption { page: id, detail };
    if h.kind != PageKind::OverflowValue {
        return Err(bad(format!(
            "expected the first page of a value's run, found a {:?} page",
            h.kind
        )));
    }
    if page.len() < RUN_HEADER_LEN {
        return Err(bad("page too short for a run header".into()));
    }
    let u32_at =
        |at: usize| u32::from_le_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]]);
    let at = PAGE_HEADER_LEN;
    let header = RunHeader {
        len: u32_at(at),
        pages: u32_at(at + 4),
        crc: u32_at(at + 8),
    };
    if u32_at(at + 12) != 0 {
        return Err(bad("the run header's reserved bytes are not zero".into()));
    }
    if u64::from(header.pages) != run_pages(header.len as usize, page.len()) {
        return Err(bad(format!(
            "a run of {} pages for a value of {} bytes (it takes {})",
            header.pages,
            header.len,
            run_pages(header.len as usize, page.len())
        )));
    }
    Ok(header)
}

/// Writes `value` as the run at `first` (its pages allocated and forgotten by the pool), its
/// first page stamped with `lsn`: one write for a run of up to 64 MiB.
pub(crate) fn write_run(
    file: &PageFile,
    first: u64,
    value: &[u8],
    crc: u32,
    lsn: u64,
) -> Result<()> {
    let ps = file.page_size();
    let total = run_pages(value.len(), ps) as usize * ps;
    let mut buf = AlignedBuf::new(total.min(IO_CHUNK.next_multiple_of(ps)));
    // The first piece: the header page and as much of the value as fits.
    let head = buf.len().min(total);
    let in_head = lay_out(&mut buf[..head], ps, first, value, crc, lsn);
    file.write_raw_run(first, &buf[..head])?;
    // Runs longer than one piece: the rest, piece by piece.
    let mut done = in_head;
    let mut page = first + (head / ps) as u64;
    while done < value.len() {
        let n = (value.len() - done).min(buf.len());
        let bytes = n.next_multiple_of(ps);
        buf[..n].copy_from_slice(&value[done..done + n]);
        buf[n..bytes].fill(0);
        file.write_raw_run(page, &buf[..bytes])?;
        done += n;
        page += (bytes / ps) as u64;
    }
    Ok(())
}

/// Lays out the start of `value`'s run at page `first` in `buf` (whole pages, the first of them
/// the header page, sealed with `lsn`; the rest of the value follows, then zeros to `buf`'s end)
/// and returns how many of the value's bytes it took: all of them when `buf` is the whole run.
pub(crate) fn lay_out(
    buf: &mut [u8],
    page_size: usize,
    first: u64,
    value: &[u8],
    crc: u32,
    lsn: u64,
) -> usize {
    let pages = run_pages(value.len(), page_size) as u32;
    let in_head = (buf.len() - RUN_HEADER_LEN).min(value.len());
    buf[..PAGE_HEADER_LEN].fill(0);
    buf[PAGE_HEADER_LEN..PAGE_HEADER_LEN + 4].copy_from_slice(&(value.len() as u32).to_le_bytes());
    buf[PAGE_HEADER_LEN + 4..PAGE_HEADER_LEN + 8].copy_from_slice(&pages.to_le_bytes());
    buf[PAGE_HEADER_LEN + 8..PAGE_HEADER_LEN + 12].copy_from_slice(&crc.to_le_bytes());
    buf[PAGE_HEADER_LEN + 12..RUN_HEADER_LEN].fill(0);
    buf[RUN_HEADER_LEN..RUN_HEADER_LEN + in_head].copy_from_slice(&value[..in_head]);
    buf[RUN_HEADER_LEN + in_head..].fill(0);
    page_header::seal(&mut buf[..page_size], PageKind::OverflowValue, first, lsn);
    in_head
}

/// Reads the value `r` refers to into `out` (replacing its contents) and checks it against the
/// reference's CRC32C: [`Error::ChecksumMismatch`] naming the run's first page if it differs.
pub(crate) fn read_value(file: &PageFile, r: ValueRef, out: &mut Vec<u8>) -> Result<()> {
    let len = r.len as usize;
    out.clear();
    out.resize(len, 0);
    if !file.direct_io() {
        file.read_raw(r.first, RUN_HEADER_LEN, out)?;
    } else {
        // Direct I/O reads whole aligned pages: through an aligned buffer, a piece at a time.
        let ps = file.page_size();
        let total = r.pages(ps) as usize * ps;
        let mut buf = AlignedBuf::new(total.min(IO_CHUNK.next_multiple_of(ps)));
        let (mut at, mut done) = (0usize, 0usize);
        while done < len {
            let n = (total - at).min(buf.len());
            file.read_raw(r.first, at, &mut buf[..n])?;
            let skip = if at == 0 { RUN_HEADER_LEN } else { 0 };
            let take = (n - skip).min(len - done);
            out[done..done + take].copy_from_slice(&buf[skip..skip + take]);
            done += take;
            at += n;
        }
    }
    let got = crc32c::crc32c(out);
    if got != r.crc {
        return Err(Error::ChecksumMismatch {
            page: r.first,
            expected: r.crc,
            got,
        });
    }
    Ok(())
}

/// Whether the run `r` refers to is in the file whole: its first page intact with a run header
/// that agrees with the reference, and its value's CRC32C the reference's. Read past the
/// allocator (recovery asks before redo marks the run in use), in pieces of at most 64 MiB;
/// a file that ends inside the run answers no. Errors only for failed reads.
pub(crate) fn run_in_file(file: &PageFile, r: ValueRef) -> Result<bool> {
    let ps = file.page_size();
    let io = file.io();
    let start = r.first * ps as u64;
    let total = r.pages(ps) * ps as u64;
    if io.file_len()? < start + total {
        return Ok(false);
    }
    let mut buf = AlignedBuf::new((total as usize).min(IO_CHUNK));
    let (mut at, mut crc, mut left) = (0u64, 0u32, r.len as usize);
    while at < total {
        let n = ((total - at) as usize).min(buf.len());
        io.read_at(&mut buf[..n], start + at)?;
        let mut bytes = &buf[..n];
        if at == 0 {
            match decode_run_header(&bytes[..ps], r.first) {
                Ok(h) if h.len == r.len && h.crc == r.crc => {}
                Ok(_) | Err(Error::ChecksumMismatch { .. } | Error::Corruption { .. }) => {
                    return Ok(false)
                }
                Err(e) => return Err(e),
            }
            bytes = &bytes[RUN_HEADER_LEN..];
        }
        let take = bytes.len().min(left);
        crc = crc32c::crc32c_append(crc, &bytes[..take]);
        left -= take;
        at += n as u64;
    }
    Ok(crc == r.crc)
}

/// Verifies the run `r` refers to whole: its first page and run header (which must agree with
/// the reference) and its value's CRC32C.
pub(crate) fn check_run(file: &PageFile, r: ValueRef, scratch: &mut Vec<u8>) -> Result<()> {
    let mut first = file.buffer(1);
    let ps = file.page_size();
    file.read_raw(r.first, 0, &mut first[..ps])?;
    let h = decode_run_header(&first[..ps], r.first)?;
    if h.len != r.len || h.crc != r.crc {
        return Err(Error::Corruption {
            page: r.first,
            detail: format!(
                "the run holds a value of {} bytes with CRC {:#010x}; its reference says {} \
                 bytes with CRC {:#010x}",
                h.len, h.crc, r.len, r.crc
            ),
        });
    }
    read_value(file, r, scratch)
}

/// Looks `key` up in the tree of a database and turns its stored value into the value
/// ([`resolve`]); whether the key is there.
pub(crate) fn get_value(tree: &BTree<PoolStore>, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
    if !tree.get_into(key, out)? {
        return Ok(false);
    }
    if !tree.store.escaped || !is_tagged(out, tree.store.tags) {
        return Ok(true);
    }
    resolve(tree, key, out)
}

/// Turns the stored value of `key` in `out` (escaped or a reference) into the value. A run
/// whose CRC does not match its reference may have been freed and reused under a concurrent
/// overwrite, and one past the file's end freed and cut off by a compaction: the key is looked
/// up again, and the same failure on the same reference twice is reported. Returns whether the
/// key is (still) there.
pub(crate) fn resolve(tree: &BTree<PoolStore>, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
    let file = tree.store.pool.file();
    let tags = tree.store.tags;
    let mut tried = None;
    loop {
        if !is_tagged(out, tags) {
            return Ok(true);
        }
        let r = match classify(out, 0, tags)? {
            Stored::Inline(_) => {
                out.remove(0);
                return Ok(true);
            }
            Stored::Ref(r) => r,
        };
        if tree.store.runs.get(r, out) {
            return Ok(true);
        }
        match read_value(file, r, out) {
            Ok(()) => {
                let store = &tree.store;
                if store.runs.enabled() {
                    store.runs.insert_clean(r, out);
                    store.runs.make_room(&store.pool, &store.wal)?;
                }
                return Ok(true);
            }
            Err(Error::ChecksumMismatch { .. } | Error::Corruption { .. }) if tried != Some(r) => {
                tried = Some(r);
                if !tree.get_into(key, out)? {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Puts `key` with `value` into the tree of a database, in the stored form its format wants
/// (module docs); returns the LSN of the put's last record.
pub(crate) fn put(tree: &BTree<PoolStore>, key: &[u8], value: &[u8]) -> Result<u64> {
    // The small-value path, ahead of [`form`]: a value that fits the leaf and needs no escape
    // (or a database without tags) is stored as it is, which is what `form` would answer.
    if value.len() <= tree.max_inline_value(key.len())
        && (!tree.store.escaped || !needs_escape(value, tree.store.tags))
    {
        return tree.put_logged(key, value);
    }
    match form(tree, key, value)? {
        Form::AsIs => tree.put_logged(key, value),
        Form::Escaped => ESCAPED.with(|b| {
            let mut b = b.borrow_mut();
            escape_into(value, &mut b);
            tree.put_logged(key, &b)
        }),
        Form::OutOfLine => put_out_of_line(tree, key, value),
    }
}

/// How [`put`] stores a value in its leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// As given.
    AsIs,
    /// Behind [`ESCAPE_TAG`] ([`escape_into`]).
    Escaped,
    /// In a run of its own, the leaf holding a reference.
    OutOfLine,
}

/// How `value` is stored under `key`; an error for a value longer than a database created
/// before out-of-line values takes.
pub(crate) fn form(tree: &BTree<PoolStore>, key: &[u8], value: &[u8]) -> Result<Form> {
    let max_inline = tree.max_inline_value(key.len());
    if !tree.store.escaped {
        if value.len() > max_inline {
            tree.limits().check_key(key)?;
            return Err(Error::InvalidArgument {
                what: format!(
                    "value of {} bytes is longer than the maximum for this database, which was \
                     created before values could be stored out of line (`sylva dump` it and \
                     `sylva load` the dump into a new database to lift the limit)",
                    value.len()
                ),
                limit: max_inline,
            });
        }
        return Ok(Form::AsIs);
    }
    Ok(if !needs_escape(value, tree.store.tags) {
        if value.len() <= max_inline {
            Form::AsIs
        } else {
            Form::OutOfLine
        }
    } else if value.len() < max_inline {
        Form::Escaped
    } else {
        Form::OutOfLine
    })
}

/// `value` behind [`ESCAPE_TAG`], in `buf`.
pub(crate) fn escape_into(value: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.push(ESCAPE_TAG);
    buf.extend_from_slice(value);
}

/// Writes `value` to a new run and puts its reference under `key` (module docs, "Writing").
fn put_out_of_line(tree: &BTree<PoolStore>, key: &[u8], value: &[u8]) -> Result<u64> {
    tree.limits().check_key(key)?;
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::InvalidArgument {
            what: format!("value of {} bytes is longer than the maximum", value.len()),
            limit: MAX_VALUE_LEN,
        });
    }
    let store = &tree.store;
    let lsn = {
        let _gate = store.write_gate();
        let file = store.pool.file();
        let n = run_pages(value.len(), file.page_size());
        let first = file.allocate_run(n as usize);
        let r = ValueRef {
            first,
            len: value.len() as u32,
            crc: crc32c::crc32c(value),
        };
        let result = (|| {
            // The WAL rule for reused pages (module docs): before the run is written, here or
            // by the run cache's write-back.
            let freed_at = store.last_free_lsn.load(Ordering::Acquire);
            let log_before = if freed_at != 0 && store.wal.durable_below() <= freed_at {
                freed_at
            } else {
                0
            };
            // How the value reaches the file (module docs, "Writing", step 4). A value over
            // reused pages whose freeing record is not durable yet is logged whatever its
            // length (rare): its write must wait for the log, which a sync's hook cannot.
            let how = if value.len() <= store.logged_value_max
                || (log_before != 0 && value.len() <= LOGGED_VALUE_CAP && store.runs.enabled())
            {
                How::Logged
            } else if log_before == 0 && store.runs.takes_unlogged(value.len()) {
                How::BeforeSync
            } else {
                How::AtPut
            };
            let logged = how == How::Logged;
            store.pool.forget_run(first, n)?;
            match how {
                How::Logged | How::BeforeSync if store.runs.enabled() => {
                    let unlogged = how == How::BeforeSync;
                    store.runs.insert_dirty(
                        r,
                        value,
                        store.wal.next_lsn(),
                        log_before,
                        unlogged,
                        file.page_size(),
                    );
                    if unlogged {
                        // For an online backup, which copies it again after the log's sync
                        // that wrote it; and towards the next checkpoint, as logged bytes are.
                        store.note_unlogged_run(first, n);
                        store
                            .log_bytes
                            .fetch_add(n * file.page_size() as u64, Ordering::Relaxed);
                    }
                }
                _ => {
                    if log_before != 0 {
                        store.wal.sync_to(log_before)?;
                    }
                    write_run(file, first, value, r.crc, store.wal.next_lsn())?;
                    if !logged {
                        file.sync()?;
                        store.note_unlogged_run(first, n);
                    }
                    store.runs.insert_clean(r, value);
                }
            }
            store.note_run_written(r, logged.then_some(value));
            tree.put_logged_in_gate(key, &r.encode())
        })();
        if result.is_err() {
            store.clear_pending_runs();
            store.runs.forget(first);
        }
        result?
    };
    // Out of the write gate: the cache's eviction may write runs back.
    store.runs.make_room(&store.pool, &store.wal)?;
    Ok(lsn)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stored_forms_round_trip() {
        let r = ValueRef {
            first: 77,
            len: 123_456,
            crc: 0xDEAD_BEEF,
        };
        let v3 = Tags::FirstByte;
        assert_eq!(classify(&r.encode(), 1, v3).unwrap(), Stored::Ref(r));
        assert_eq!(classify(b"", 1, v3).unwrap(), Stored::Inline(b""));
        assert_eq!(classify(b"abc", 1, v3).unwrap(), Stored::Inline(b"abc"));
        assert_eq!(
            classify(&[ESCAPE_TAG, 0xFF, 1], 1, v3).unwrap(),
            Stored::Inline(&[0xFF, 1])
        );
        assert!(
            classify(&[REF_TAG, 1, 2], 9, v3).is_err(),
            "a short reference"
        );
        assert!(needs_escape(&[0xFE], v3) && needs_escape(&[0xFF, 0], v3));
        assert!(!needs_escape(&[0xFD], v3) && !needs_escape(b"", v3));
        let v4 = Tags::RefShape;
        assert_eq!(classify(&r.encode(), 1, v4).unwrap(), Stored::Ref(r));
        assert!(is_ref(&r.encode(), v4) && is_tagged(&r.encode(), v4));
        // Values of other shapes are stored as they are, whatever their first byte.
        for v in [
            &b""[..],
            &[0xFF, 1, 2],
            &[0xFE; 8],
            &[0xFF; 16],
            &[0xFF; 18],
            &[0xFE; 17],
        ] {
            assert!(!needs_escape(v, v4), "{v:?}");
            assert!(!is_ref(v, v4) && !is_tagged(v, v4), "{v:?}");
            assert_eq!(classify(v, 1, v4).unwrap(), Stored::Inline(v));
        }
        // A value of a reference's shape (behind any number of 0xFE) gains one escape byte.
        for j in 0..3 {
            let mut v = vec![ESCAPE_TAG; j];
            v.push(REF_TAG);
            v.extend_from_slice(&[7; 16]);
            assert!(needs_escape(&v, v4));
            let mut stored = Vec::new();
            escape_into(&v, &mut stored);
            assert!(is_tagged(&stored, v4) && !is_ref(&stored, v4));
            assert_eq!(classify(&stored, 1, v4).unwrap(), Stored::Inline(&v[..]));
        }
        assert_eq!(run_pages(1, 4096), 1);
        assert_eq!(run_pages(4096 - RUN_HEADER_LEN, 4096), 1);
        assert_eq!(run_pages(4096 - RUN_HEADER_LEN + 1, 4096), 2);
    }
}
