//! The Db's log records: the payloads it writes into [`crate::wal`] records. Every byte is in
//! `docs/format.md`.
//!
//! ```text
//! PUT     1 | page u64 | key_len u16 | key | value
//! DELETE  2 | page u64 | key
//! PAGES   3 | changed u16 | freed u16 | delta i64 | changed × page u64 | freed × page u64
//!           | changed × (head_len u32 | tail_len u32 | head | tail)
//! BATCH   4 | ops u32 | ops × (op u8 (1 put, 2 delete) | key_len u16 | value_len u32 | key | value)
//! BATCH_END 5
//! PAGES_EDIT 6 | changed u16 | changed × page u64 | changed × (head_len u32 | tail_len u32 | head | tail)
//!           | parent u64 | remove u16 (0xFFFF: none) | inserts u16
//!           | inserts × (child u64 | separator_len u16 | separator)
//! RUNS    7 | written u8 | freed u8
//!           | written × (first u64 | value_len u32 | crc u32 | logged u8 | value if logged)
//!           | freed × (first u64 | pages u32)
//!           | the wrapped record: a PUT, DELETE or PAGES record
//! ```
//! Integers are little-endian. `delta` is the change in the record count the images carry (a
//! full-page image logged in place of a put or delete after a checkpoint). An image is a page's
//! engine bytes (page size − 32) without the free gap between a slotted node's slots and its
//! heap: `head` is the start, `tail` the end, and the gap between reads as zeros. A page after a
//! split is about half empty, so this roughly halves the log's image bytes.
//!
//! PAGES_EDIT is a split's or a redistribution's record: the images of the leaves (or inner
//! nodes) it rewrote, and the parent's change as a [`ParentEdit`] (the separator removed, the
//! separators inserted, untruncated) instead of the parent's image. A parent holds hundreds of
//! separators, so its image was about a third of such a record; the edit is some 30 bytes.
//! The parent's first change after a checkpoint still logs its image (full-page writes).
//!
//! RUNS is a put or delete that wrote or freed an out-of-line value's run ([`super::overflow`]):
//! the runs it wrote (with the value when it is at most 1 MiB, `logged` 1; else `logged` 0
//! and the run was durable before the record was appended), the runs it freed, then the tree's
//! own record of the leaf change (a PUT of the reference, a DELETE, or the leaf's full image as
//! a PAGES record when it was the leaf's first change since a checkpoint). Redo marks the
//! written runs in use (rewriting the logged ones) and frees the freed ones whatever the leaf's
//! LSN, and redoes the wrapped record as any.
//!
//! The types are in `Db`'s range of record types ([`RecordOwner::Db`], 1–31, shared with the
//! PA-Tree mode); [`decode`] answers any other type with an [`Error::LogCorruption`] that says
//! whose range it is in. PAGES_EDIT is in logs of format version 2 and later (builds before it
//! refuse a version 3 log as too new; see [`crate::wal::record`], "Versions"); RUNS in logs of
//! version 4 and later.

use crate::btree::ParentEdit;
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::wal::record::RecordOwner;

const PUT: u8 = 1;
const DELETE: u8 = 2;
const PAGES: u8 = 3;
const BATCH: u8 = 4;
const BATCH_END: u8 = 5;
const PAGES_EDIT: u8 = 6;
const RUNS: u8 = 7;
/// `remove` of a PAGES_EDIT that removes nothing.
const NO_REMOVE: u16 = u16::MAX;
const _: () = assert!(
    RecordOwner::Db.owns(PUT)
        && RecordOwner::Db.owns(DELETE)
        && RecordOwner::Db.owns(PAGES)
        && RecordOwner::Db.owns(BATCH)
        && RecordOwner::Db.owns(BATCH_END)
        && RecordOwner::Db.owns(PAGES_EDIT)
        && RecordOwner::Db.owns(RUNS),
    "Db's record types lie in Db's range"
);

/// One decoded record, borrowing the payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    Put {
        page: PageId,
        key: &'a [u8],
        value: &'a [u8],
    },
    Delete {
        page: PageId,
        key: &'a [u8],
    },
    Pages {
        changed: Vec<(PageId, Image<'a>)>,
        freed: Vec<PageId>,
        delta: i64,
    },
    Batch(Vec<BatchEntry<'a>>),
    BatchEnd,
    PagesEdit {
        changed: Vec<(PageId, Image<'a>)>,
        parent: PageId,
        edit: ParentEdit<'a>,
    },
    Runs {
        written: Vec<RunWritten<'a>>,
        freed: Vec<RunFreed>,
        inner: Box<Record<'a>>,
    },
}

/// A run a RUNS record wrote: its first page, the value's length and CRC32C, and the value
/// itself when the record carries it.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) struct RunWritten<'a> {
    pub first: PageId,
    pub len: u32,
    pub crc: u32,
    pub value: Option<&'a [u8]>,
}

/// A run a RUNS record freed.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) struct RunFreed {
    pub first: PageId,
    pub pages: u32,
}

/// The start of a RUNS record: its type, counts and entries, to which the wrapped record's
/// bytes are appended ([`runs_prefix`]).
pub(crate) fn runs_prefix(out: &mut Vec<u8>, written: Option<RunWritten<'_>>, freed: &[RunFreed]) {
    out.clear();
    out.push(RUNS);
    out.push(u8::from(written.is_some()));
    out.push(freed.len() as u8);
    if let Some(w) = written {
        out.extend_from_slice(&w.first.to_le_bytes());
        out.extend_from_slice(&w.len.to_le_bytes());
        out.extend_from_slice(&w.crc.to_le_bytes());
        out.push(u8::from(w.value.is_some()));
        if let Some(v) = w.value {
            out.extend_from_slice(v);
        }
    }
    for f in freed {
        out.extend_from_slice(&f.first.to_le_bytes());
        out.extend_from_slice(&f.pages.to_le_bytes());
    }
}

/// A logged page image: its first and last bytes; the gap between them is zero.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) struct Image<'a> {
    pub head: &'a [u8],
    pub tail: &'a [u8],
}

impl Image<'_> {
    /// Writes the image over `page` (the engine bytes of a page).
    pub(crate) fn restore(&self, page: &mut [u8]) {
        let (h, t) = (self.head.len(), self.tail.len());
        let n = page.len();
        page[..h].copy_from_slice(self.head);
        page[h..n - t].fill(0);
        page[n - t..].copy_from_slice(self.tail);
    }
}

/// One operation of a logged batch: a put (with its value) or a delete (`None`).
pub(crate) type BatchEntry<'a> = (&'a [u8], Option<&'a [u8]>);

pub(crate) fn put(out: &mut Vec<u8>, page: PageId, key: &[u8], value: &[u8]) {
    out.clear();
    out.push(PUT);
    out.extend_from_slice(&page.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

pub(crate) fn delete(out: &mut Vec<u8>, page: PageId, key: &[u8]) {
    out.clear();
    out.push(DELETE);
    out.extend_from_slice(&page.to_le_bytes());
    out.extend_from_slice(key);
}

/// A PAGES record; `image(id)` gives each changed page's image.
pub(crate) fn pages<'a>(
    out: &mut Vec<u8>,
    changed: &[PageId],
    freed: &[PageId],
    delta: i64,
    image: impl Fn(PageId) -> Image<'a>,
) {
    out.clear();
    out.push(PAGES);
    out.extend_from_slice(&(changed.len() as u16).to_le_bytes());
    out.extend_from_slice(&(freed.len() as u16).to_le_bytes());
    out.extend_from_slice(&delta.to_le_bytes());
    for id in changed.iter().chain(freed) {
        out.extend_from_slice(&id.to_le_bytes());
    }
    write_images(out, changed, image);
}

/// Each page's image: `head_len u32 | tail_len u32 | head | tail`.
fn write_images<'a>(out: &mut Vec<u8>, pages: &[PageId], image: impl Fn(PageId) -> Image<'a>) {
    for &id in pages {
        let img = image(id);
        out.extend_from_slice(&(img.head.len() as u32).to_le_bytes());
        out.extend_from_slice(&(img.tail.len() as u32).to_le_bytes());
        out.extend_from_slice(img.head);
        out.extend_from_slice(img.tail);
    }
}

/// A PAGES_EDIT record; `image(id)` gives each changed page's image.
pub(crate) fn pages_edit<'a>(
    out: &mut Vec<u8>,
    changed: &[PageId],
    image: impl Fn(PageId) -> Image<'a>,
    parent: PageId,
    edit: &ParentEdit<'_>,
) {
    out.clear();
    out.push(PAGES_EDIT);
    out.extend_from_slice(&(changed.len() as u16).to_le_bytes());
    for id in changed {
        out.extend_from_slice(&id.to_le_bytes());
    }
    write_images(out, changed, image);
    out.extend_from_slice(&parent.to_le_bytes());
    let remove = edit.remove.map_or(NO_REMOVE, |r| r as u16);
    out.extend_from_slice(&remove.to_le_bytes());
    out.extend_from_slice(&(edit.insert.len() as u16).to_le_bytes());
    for &(sep, child) in &edit.insert {
        out.extend_from_slice(&child.to_le_bytes());
        out.extend_from_slice(&(sep.len() as u16).to_le_bytes());
        out.extend_from_slice(sep);
    }
}

pub(crate) fn batch<'a>(out: &mut Vec<u8>, ops: impl ExactSizeIterator<Item = BatchEntry<'a>>) {
    out.clear();
    out.push(BATCH);
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for (key, value) in ops {
        out.push(if value.is_some() { PUT } else { DELETE });
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        let v = value.unwrap_or(&[]);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(v);
    }
}

pub(crate) fn batch_end(out: &mut Vec<u8>) {
    out.clear();
    out.push(BATCH_END);
}

/// Whether `payload` is a RUNS record.
pub(crate) fn is_runs(payload: &[u8]) -> bool {
    payload.first() == Some(&RUNS)
}

/// Reads a record; `image_len` is the engine bytes of a page.
pub(crate) fn decode(lsn: u64, payload: &[u8], image_len: usize) -> Result<Record<'_>> {
    let mut r = Reader {
        lsn,
        b: payload,
        at: 0,
    };
    let record = match r.u8()? {
        PUT => {
            let page = r.u64()?;
            let klen = r.u16()? as usize;
            let key = r.take(klen)?;
            let value = r.rest();
            Record::Put { page, key, value }
        }
        DELETE => {
            let page = r.u64()?;
            Record::Delete {
                page,
                key: r.rest(),
            }
        }
        PAGES => {
            let (n, m) = (r.u16()? as usize, r.u16()? as usize);
            let delta = r.u64()? as i64;
            let ids = (0..n + m).map(|_| r.u64()).collect::<Result<Vec<_>>>()?;
            Record::Pages {
                changed: r.images(&ids[..n], image_len)?,
                freed: ids[n..].to_vec(),
                delta,
            }
        }
        PAGES_EDIT => {
            let n = r.u16()? as usize;
            let ids = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>>>()?;
            let changed = r.images(&ids, image_len)?;
            let parent = r.u64()?;
            let remove = match r.u16()? {
                NO_REMOVE => None,
                slot => Some(slot as usize),
            };
            let inserts = r.u16()? as usize;
            let mut insert = Vec::with_capacity(inserts);
            for _ in 0..inserts {
                let child = r.u64()?;
                let len = r.u16()? as usize;
                insert.push((r.take(len)?, child));
            }
            Record::PagesEdit {
                changed,
                parent,
                edit: ParentEdit { remove, insert },
            }
        }
        BATCH => {
            let n = r.u32()? as usize;
            let mut ops = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                let op = r.u8()?;
                let (klen, vlen) = (r.u16()? as usize, r.u32()? as usize);
                let key = r.take(klen)?;
                let value = r.take(vlen)?;
                ops.push((key, (op == PUT).then_some(value)));
            }
            Record::Batch(ops)
        }
        BATCH_END => Record::BatchEnd,
        RUNS => {
            let (w, f) = (r.u8()? as usize, r.u8()? as usize);
            let mut written = Vec::with_capacity(w);
            for _ in 0..w {
                let first = r.u64()?;
                let (len, crc) = (r.u32()?, r.u32()?);
                let value = match r.u8()? {
                    0 => None,
                    1 => Some(r.take(len as usize)?),
                    _ => return Err(r.bad("a run's logged flag is neither 0 nor 1")),
                };
                written.push(RunWritten {
                    first,
                    len,
                    crc,
                    value,
                });
            }
            let mut freed = Vec::with_capacity(f);
            for _ in 0..f {
                let first = r.u64()?;
                freed.push(RunFreed {
                    first,
                    pages: r.u32()?,
                });
            }
            let inner = decode(lsn, r.rest(), image_len)?;
            if !matches!(
                inner,
                Record::Put { .. } | Record::Delete { .. } | Record::Pages { .. }
            ) {
                return Err(r.bad("a RUNS record wraps a record other than PUT, DELETE or PAGES"));
            }
            Record::Runs {
                written,
                freed,
                inner: Box::new(inner),
            }
        }
        other => return Err(RecordOwner::Db.unknown_type(lsn, other)),
    };
    if r.at != payload.len()
        && !matches!(
            record,
            Record::Put { .. } | Record::Delete { .. } | Record::Runs { .. }
        )
    {
        return Err(r.bad("trailing bytes"));
    }
    Ok(record)
}

struct Reader<'a> {
    lsn: u64,
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bad(&self, what: &str) -> Error {
        Error::LogCorruption {
            path: None,
            detail: format!("record {}: {what}", self.lsn),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .b
            .get(self.at..self.at + n)
            .ok_or_else(|| self.bad("too short"))?;
        self.at += n;
        Ok(s)
    }

    /// The images of pages `ids`, each at most `image_len` bytes.
    fn images(&mut self, ids: &[PageId], image_len: usize) -> Result<Vec<(PageId, Image<'a>)>> {
        let mut changed = Vec::with_capacity(ids.len());
        for &id in ids {
            let (h, t) = (self.u32()? as usize, self.u32()? as usize);
            if h.checked_add(t).is_none_or(|len| len > image_len) {
                return Err(self.bad("page image longer than a page"));
            }
            let head = self.take(h)?;
            let tail = self.take(t)?;
            changed.push((id, Image { head, tail }));
        }
        Ok(changed)
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.at.min(self.b.len())..];
        self.at = self.b.len();
        s
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(w))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_truncations_are_errors() {
        let mut b = Vec::new();
        put(&mut b, 7, b"key", b"value");
        assert_eq!(
            decode(1, &b, 4).unwrap(),
            Record::Put {
                page: 7,
                key: b"key",
                value: b"value"
            }
        );
        delete(&mut b, 9, b"k");
        assert_eq!(
            decode(1, &b, 4).unwrap(),
            Record::Delete { page: 9, key: b"k" }
        );
        let img = Image {
            head: &[1u8, 2],
            tail: &[4u8],
        };
        pages(&mut b, &[3, 4], &[5], -1, |_| img);
        assert_eq!(
            decode(1, &b, 4).unwrap(),
            Record::Pages {
                changed: vec![(3, img), (4, img)],
                freed: vec![5],
                delta: -1
            }
        );
        let edit = ParentEdit {
            remove: Some(2),
            insert: vec![(&b"m"[..], 11), (&b"mz"[..], 12)],
        };
        pages_edit(&mut b, &[3, 4], |_| img, 10, &edit);
        assert_eq!(
            decode(1, &b, 4).unwrap(),
            Record::PagesEdit {
                changed: vec![(3, img), (4, img)],
                parent: 10,
                edit: edit.clone()
            }
        );
        assert!(decode(1, &b, 2).is_err(), "an image longer than a page");
        for cut in 1..b.len() {
            assert!(decode(1, &b[..cut], 4).is_err(), "cut at {cut}");
        }
        let split = ParentEdit {
            remove: None,
            insert: vec![(&b"k"[..], 5)],
        };
        pages_edit(&mut b, &[6], |_| img, 1, &split);
        assert!(matches!(
            decode(1, &b, 4).unwrap(),
            Record::PagesEdit { edit, .. } if edit == split
        ));
        pages(&mut b, &[3, 4], &[5], -1, |_| img);
        let mut page = [9u8; 4];
        img.restore(&mut page);
        assert_eq!(page, [1, 2, 0, 4]);
        assert!(decode(1, &b, 2).is_err(), "an image longer than a page");
        for cut in 1..b.len() {
            assert!(decode(1, &b[..cut], 4).is_err(), "cut at {cut}");
        }
        let ops: Vec<BatchEntry> = vec![(b"a", Some(b"1")), (b"b", None)];
        batch(&mut b, ops.clone().into_iter());
        assert_eq!(decode(1, &b, 4).unwrap(), Record::Batch(ops));
        for cut in 1..b.len() {
            assert!(decode(1, &b[..cut], 4).is_err(), "cut at {cut}");
        }
        batch_end(&mut b);
        assert_eq!(decode(1, &b, 4).unwrap(), Record::BatchEnd);
        let w = RunWritten {
            first: 40,
            len: 3,
            crc: 9,
            value: Some(b"abc"),
        };
        let f = [RunFreed {
            first: 50,
            pages: 2,
        }];
        let mut inner = Vec::new();
        put(&mut inner, 7, b"key", b"ref");
        runs_prefix(&mut b, Some(w), &f);
        b.extend_from_slice(&inner);
        let expect = Record::Runs {
            written: vec![w],
            freed: f.to_vec(),
            inner: Box::new(Record::Put {
                page: 7,
                key: b"key",
                value: b"ref",
            }),
        };
        assert_eq!(decode(1, &b, 4).unwrap(), expect);
        for cut in 1..b.len() - inner.len() + 9 {
            assert!(decode(1, &b[..cut], 4).is_err(), "RUNS cut at {cut}");
        }
        let mut nested = Vec::new();
        runs_prefix(&mut nested, None, &[]);
        nested.extend_from_slice(&b);
        assert!(
            decode(1, &nested, 4).is_err(),
            "a RUNS record inside a RUNS record"
        );
        assert!(decode(1, &[99], 4).is_err());
        assert!(decode(1, &[], 4).is_err());
    }

    #[test]
    fn types_outside_what_db_writes_are_log_corruption_naming_their_owner() {
        for (t, says) in [
            (0u8, "unassigned"),
            (8, "in Db's range (1–31) but not one this build writes"),
            (31, "in Db's range"),
            (32, "TreeLine's (32–63), not Db's (1–31)"),
            (70, "the NB-tree's (64–95), not Db's"),
            (200, "unassigned"),
        ] {
            match decode(12, &[t, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 4) {
                Err(Error::LogCorruption { detail, .. }) => {
                    assert!(
                        detail.contains("record 12") && detail.contains(says),
                        "{t}: {detail}"
                    );
                }
                other => panic!("type {t}: {other:?}"),
            }
        }
    }
}
