//! The NB-tree's log records (`docs/format.md`, "NB-tree log records"), in its range of record
//! types (64–95):
//!
//! ```text
//! PUT     64 | key_len u16 | key | value
//! DELETE  65 | key
//! BATCH   66 | ops u32 | ops × (op u8 (1 put, 2 delete) | key_len u16 | value_len u32 | key | value)
//! ```
//!
//! A batch is one record, so it is replayed whole or (cut off with a torn tail) not at all.
//!
//! Integers are little-endian. Both are replayed into the active root at recovery; a record of
//! another owner's type is [`Error::LogCorruption`] naming the owner.

use crate::error::{Error, Result};
use crate::wal::record::RecordOwner;

pub(crate) const PUT: u8 = 64;
pub(crate) const DELETE: u8 = 65;
pub(crate) const BATCH: u8 = 66;
const _: () = assert!(
    RecordOwner::NbTree.owns(PUT)
        && RecordOwner::NbTree.owns(DELETE)
        && RecordOwner::NbTree.owns(BATCH),
    "the NB-tree's record types lie in its range"
);

/// One decoded record, borrowing the payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    Put {
        key: &'a [u8],
        value: &'a [u8],
    },
    Delete {
        key: &'a [u8],
    },
    /// Puts (`Some(value)`) and deletes, in order.
    Batch(Vec<(&'a [u8], Option<&'a [u8]>)>),
}

/// Encodes a BATCH into `buf` (cleared first).
pub(crate) fn batch(buf: &mut Vec<u8>, ops: &[(&[u8], Option<&[u8]>)]) {
    buf.clear();
    buf.push(BATCH);
    buf.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for (k, v) in ops {
        buf.push(if v.is_some() { 1 } else { 2 });
        buf.extend_from_slice(&(k.len() as u16).to_le_bytes());
        buf.extend_from_slice(&(v.map_or(0, <[u8]>::len) as u32).to_le_bytes());
        buf.extend_from_slice(k);
        buf.extend_from_slice(v.unwrap_or(&[]));
    }
}

/// Encodes a PUT into `buf` (cleared first).
pub(crate) fn put(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    buf.clear();
    buf.push(PUT);
    buf.extend_from_slice(&(key.len() as u16).to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
}

/// Encodes a DELETE into `buf` (cleared first).
pub(crate) fn delete(buf: &mut Vec<u8>, key: &[u8]) {
    buf.clear();
    buf.push(DELETE);
    buf.extend_from_slice(key);
}

/// Decodes a payload; every length is checked.
pub(crate) fn decode(lsn: u64, payload: &[u8]) -> Result<Record<'_>> {
    let bad = |detail: String| Error::LogCorruption {
        path: None,
        detail: format!("record at LSN {lsn}: {detail}"),
    };
    let Some((&t, rest)) = payload.split_first() else {
        return Err(bad("empty payload".into()));
    };
    match t {
        PUT => {
            let Some((len, rest)) = rest.split_first_chunk::<2>() else {
                return Err(bad("PUT shorter than its key length".into()));
            };
            let len = u16::from_le_bytes(*len) as usize;
            if len == 0 || rest.len() < len {
                return Err(bad(format!(
                    "PUT key length {len} with {} bytes left",
                    rest.len()
                )));
            }
            let (key, value) = rest.split_at(len);
            Ok(Record::Put { key, value })
        }
        DELETE if !rest.is_empty() => Ok(Record::Delete { key: rest }),
        BATCH => {
            let Some((n, mut rest)) = rest.split_first_chunk::<4>() else {
                return Err(bad("BATCH shorter than its count".into()));
            };
            let n = u32::from_le_bytes(*n) as usize;
            let mut ops = Vec::with_capacity(n.min(rest.len() / 7));
            for i in 0..n {
                let Some((head, tail)) = rest.split_first_chunk::<7>() else {
                    return Err(bad(format!("BATCH ends in op {i} of {n}")));
                };
                let kl = u16::from_le_bytes([head[1], head[2]]) as usize;
                let vl = u32::from_le_bytes([head[3], head[4], head[5], head[6]]) as usize;
                if kl == 0 || tail.len() < kl.saturating_add(vl) || !(1..=2).contains(&head[0]) {
                    return Err(bad(format!("BATCH op {i} of {n} is damaged")));
                }
                let (key, tail) = tail.split_at(kl);
                let (value, tail) = tail.split_at(vl);
                ops.push((key, (head[0] == 1).then_some(value)));
                rest = tail;
            }
            if !rest.is_empty() {
                return Err(bad(format!("BATCH has {} bytes after its ops", rest.len())));
            }
            Ok(Record::Batch(ops))
        }
        DELETE => Err(bad("DELETE without a key".into())),
        t => Err(bad(match RecordOwner::of(t) {
            Some(o) if o != RecordOwner::NbTree => {
                format!("type {t} belongs to {}, not the NB-tree", o.name())
            }
            _ => format!("unknown record type {t}"),
        })),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_are_errors() {
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
        let ops: [(&[u8], Option<&[u8]>); 2] = [(b"a", Some(b"1")), (b"b", None)];
        batch(&mut b, &ops);
        assert_eq!(decode(1, &b).unwrap(), Record::Batch(ops.to_vec()));
        for cut in 1..b.len() {
            assert!(decode(1, &b[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode(1, &[]).is_err());
        assert!(decode(1, &[PUT, 5, 0, b'a']).is_err());
        assert!(decode(1, &[DELETE]).is_err());
        let e = decode(1, &[1, 0, 0]).unwrap_err().to_string();
        assert!(e.contains("Db"), "{e}");
    }
}
