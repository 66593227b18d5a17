//! TreeLine's log records (types 32–63, [`RecordOwner::TreeLine`]; every byte in
//! `docs/format.md`, "TreeLine log records").
//!
//! ```text
//! PUT          32 | key_len u16 | key | value
//! DELETE       33 | key
//! PAGE_IMAGE   34 | page u64 | kind u8 | page bytes 32.. (page size − 32)
//! REORG_START  35 | production u64 | pre u16 | pre × (first page u64, production u64)
//!                 | post u16 | post × (first page u64, pages u16)
//! REORG_END    36 | production u64
//! BATCH        37 | ops u32 | ops × (op u8 (1 put, 2 delete) | key_len u16 | value_len u32
//!                 | key | value)
//! ```
//! A BATCH is a write batch, applied whole or (cut off by a crash) not at all.
//! Integers are little-endian.

use crate::error::{Error, Result};
use crate::io::page_header::PageKind;
use crate::wal::record::RecordOwner;

const PUT: u8 = 32;
const DELETE: u8 = 33;
const PAGE_IMAGE: u8 = 34;
const REORG_START: u8 = 35;
const REORG_END: u8 = 36;
const BATCH: u8 = 37;
const _: () = assert!(
    RecordOwner::TreeLine.owns(PUT)
        && RecordOwner::TreeLine.owns(DELETE)
        && RecordOwner::TreeLine.owns(PAGE_IMAGE)
        && RecordOwner::TreeLine.owns(REORG_START)
        && RecordOwner::TreeLine.owns(REORG_END)
        && RecordOwner::TreeLine.owns(BATCH),
    "TreeLine's record types lie in its range"
);

/// A decoded record, borrowing the payload.
#[derive(Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A put of a key.
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// A delete of a key.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// A page's image, logged before its first write after a checkpoint.
    PageImage {
        /// The page.
        page: u64,
        /// Its kind.
        kind: PageKind,
        /// Its bytes after the common header.
        bytes: &'a [u8],
    },
    /// A reorganization began: its production ID, the segments it replaces and the ones it
    /// writes.
    ReorgStart(ReorgStart),
    /// A write batch: puts (`Some` value) and deletes, in order.
    Batch(Vec<(&'a [u8], Option<&'a [u8]>)>),
    /// A reorganization's index update is done.
    ReorgEnd {
        /// Its production ID.
        production: u64,
    },
}

/// What REORG_START records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReorgStart {
    /// The post segments' production ID.
    pub production: u64,
    /// The pre segments: first page and production ID.
    pub pre: Vec<(u64, u64)>,
    /// The post segments: first page and page count.
    pub post: Vec<(u64, u16)>,
}

/// Encodes a PUT into `out` (cleared first).
pub fn put(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.clear();
    out.push(PUT);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Encodes a DELETE into `out` (cleared first).
pub fn delete(out: &mut Vec<u8>, key: &[u8]) {
    out.clear();
    out.push(DELETE);
    out.extend_from_slice(key);
}

/// Encodes a PAGE_IMAGE of `page` (the whole page; its common header is left out).
pub fn page_image(out: &mut Vec<u8>, id: u64, kind: PageKind, page: &[u8]) {
    out.clear();
    out.push(PAGE_IMAGE);
    out.extend_from_slice(&id.to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(&page[crate::io::page_header::PAGE_HEADER_LEN..]);
}

/// Encodes a REORG_START.
pub fn reorg_start(out: &mut Vec<u8>, r: &ReorgStart) {
    out.clear();
    out.push(REORG_START);
    out.extend_from_slice(&r.production.to_le_bytes());
    out.extend_from_slice(&(r.pre.len() as u16).to_le_bytes());
    for (page, prod) in &r.pre {
        out.extend_from_slice(&page.to_le_bytes());
        out.extend_from_slice(&prod.to_le_bytes());
    }
    out.extend_from_slice(&(r.post.len() as u16).to_le_bytes());
    for (page, pages) in &r.post {
        out.extend_from_slice(&page.to_le_bytes());
        out.extend_from_slice(&pages.to_le_bytes());
    }
}

/// Encodes a BATCH of puts (`Some` value) and deletes.
pub fn batch<'k>(
    out: &mut Vec<u8>,
    ops: impl ExactSizeIterator<Item = (&'k [u8], Option<&'k [u8]>)>,
) {
    out.clear();
    out.push(BATCH);
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for (k, v) in ops {
        out.push(if v.is_some() { 1 } else { 2 });
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(&(v.map_or(0, <[u8]>::len) as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v.unwrap_or(&[]));
    }
}

/// Encodes a REORG_END.
pub fn reorg_end(out: &mut Vec<u8>, production: u64) {
    out.clear();
    out.push(REORG_END);
    out.extend_from_slice(&production.to_le_bytes());
}

/// Bounds-checked reads of a payload.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    lsn: u64,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .b
            .get(self.at..self.at.saturating_add(n))
            .ok_or_else(|| self.bad("a field runs past the record's end"))?;
        self.at += n;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.bytes(8)?);
        Ok(u64::from_le_bytes(w))
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = self.b.get(self.at..).unwrap_or(&[]);
        self.at = self.b.len();
        s
    }
    fn end(&self) -> Result<()> {
        if self.at == self.b.len() {
            Ok(())
        } else {
            Err(self.bad("bytes after the record's last field"))
        }
    }
    fn bad(&self, what: &str) -> Error {
        Error::LogCorruption {
            path: None,
            detail: format!("record {}: TreeLine record: {what}", self.lsn),
        }
    }
}

/// Decodes the payload of the record at `lsn`. Another engine's record type, or damage, is an
/// [`Error::LogCorruption`] that says which.
pub fn decode(lsn: u64, payload: &[u8]) -> Result<Record<'_>> {
    let Some((&t, body)) = payload.split_first() else {
        return Err(Error::LogCorruption {
            path: None,
            detail: format!("record {lsn}: empty payload"),
        });
    };
    let mut r = Reader {
        b: body,
        at: 0,
        lsn,
    };
    let rec = match t {
        PUT => {
            let n = r.u16()? as usize;
            let key = r.bytes(n)?;
            Record::Put {
                key,
                value: r.rest(),
            }
        }
        DELETE => Record::Delete { key: r.rest() },
        PAGE_IMAGE => {
            let page = r.u64()?;
            let k = r.bytes(1)?[0];
            let kind = match PageKind::from_u8(k) {
                Some(k @ (PageKind::SegmentPage | PageKind::SegmentOverflow)) => k,
                _ => return Err(r.bad(&format!("page image of kind {k}"))),
            };
            Record::PageImage {
                page,
                kind,
                bytes: r.rest(),
            }
        }
        REORG_START => {
            let production = r.u64()?;
            let n = r.u16()? as usize;
            let mut pre = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                pre.push((r.u64()?, r.u64()?));
            }
            let n = r.u16()? as usize;
            let mut post = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                post.push((r.u64()?, r.u16()?));
            }
            r.end()?;
            Record::ReorgStart(ReorgStart {
                production,
                pre,
                post,
            })
        }
        REORG_END => {
            let production = r.u64()?;
            r.end()?;
            Record::ReorgEnd { production }
        }
        BATCH => {
            let n = {
                let b = r.bytes(4)?;
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
            };
            let mut ops = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let op = r.bytes(1)?[0];
                let kl = r.u16()? as usize;
                let vl = {
                    let b = r.bytes(4)?;
                    u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
                };
                let key = r.bytes(kl)?;
                let value = r.bytes(vl)?;
                if key.is_empty() {
                    return Err(r.bad("an empty key in a batch"));
                }
                ops.push(match op {
                    1 => (key, Some(value)),
                    2 if vl == 0 => (key, None),
                    _ => return Err(r.bad(&format!("batch op {op} with a {vl}-byte value"))),
                });
            }
            r.end()?;
            Record::Batch(ops)
        }
        t => return Err(RecordOwner::TreeLine.unknown_type(lsn, t)),
    };
    if let Record::Put { key, .. } | Record::Delete { key } = rec {
        if key.is_empty() {
            return Err(r.bad("an empty key"));
        }
    }
    Ok(rec)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_an_error() {
        let mut b = Vec::new();
        put(&mut b, b"key", b"value");
        assert_eq!(
            decode(1, &b).unwrap(),
            Record::Put {
                key: b"key",
                value: b"value"
            }
        );
        delete(&mut b, b"k");
        assert_eq!(decode(1, &b).unwrap(), Record::Delete { key: b"k" });
        let page = vec![7u8; 4096];
        page_image(&mut b, 9, PageKind::SegmentOverflow, &page);
        assert_eq!(
            decode(1, &b).unwrap(),
            Record::PageImage {
                page: 9,
                kind: PageKind::SegmentOverflow,
                bytes: &page[32..]
            }
        );
        let s = ReorgStart {
            production: 5,
            pre: vec![(2, 1), (3, 4)],
            post: vec![(10, 16), (26, 1)],
        };
        reorg_start(&mut b, &s);
        assert_eq!(decode(1, &b).unwrap(), Record::ReorgStart(s));
        for cut in 1..b.len() {
            assert!(decode(1, &b[..cut]).is_err(), "cut at {cut}");
        }
        reorg_end(&mut b, 5);
        assert_eq!(decode(1, &b).unwrap(), Record::ReorgEnd { production: 5 });
        let ops: Vec<(&[u8], Option<&[u8]>)> =
            vec![(b"a", Some(b"1")), (b"b", None), (b"c", Some(b""))];
        batch(&mut b, ops.iter().copied());
        assert_eq!(decode(1, &b).unwrap(), Record::Batch(ops));
        for cut in 1..b.len() {
            assert!(decode(1, &b[..cut]).is_err(), "batch cut at {cut}");
        }
        assert!(
            matches!(decode(3, &[1, 0, 0]), Err(Error::LogCorruption { detail, .. }) if detail.contains("Db"))
        );
        assert!(decode(3, &[]).is_err());
        assert!(decode(3, &[33]).is_err());
        put(&mut b, b"", b"v");
        assert!(decode(3, &b).is_err());
    }
}
