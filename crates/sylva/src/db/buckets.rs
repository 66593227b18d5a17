//! Keys longer than the tree takes, in *buckets* (issue 23: keys of at least 1 KiB at every page
//! size; database state version 6). Every byte is in `docs/format.md`, "Long keys in buckets".
//!
//! **Why not in the tree.** The slotted node keeps its two fence keys whole and must hold three
//! of the longest records beside them (`crate::btree::limits`): with 4 KiB pages that stops keys
//! at 777 bytes. Out-of-line keys or fences (a key's prefix inline, the rest in a page run) would
//! put page reads into every comparison that ties on the prefix — inside the optimistic,
//! restartable descents, the prefix truncation, the separators a split chooses, the fences a
//! merge joins — in code the in-memory trees share. This scheme leaves the tree untouched: it
//! maps long keys onto tree keys the tree already takes, and onto values, which go out of line
//! through [`super::overflow`] with its deferred frees, recovery and checks.
//!
//! **The mapping.** Let `D` be the tree's key limit ([`crate::btree::long_max_key_len`], 777
//! bytes with 4 KiB pages) and `T = D − 1` the *prefix length*. A key of at most `T` bytes is a
//! tree key as it is. Every key `K` longer than `T` bytes (up to [`MAX_KEY_LEN`]) lives in the
//! *bucket* of its first `T` bytes `P`: the tree record whose key is `B(P) = P ++ [0x00]` (exactly
//! `D` bytes, so no key stored as it is has that length) and whose value is the bucket: every
//! such key's remainder (its *suffix*, `K[T..]`, at least one byte) with its value, sorted by
//! suffix. A bucket holds one key unless several long keys share their first `T` bytes.
//!
//! **Order.** A walk of the tree in key order that expands each bucket in suffix order sees the
//! keys in byte order: (1) for a key `R` of at most `T` bytes and a long key `K = P ++ s`,
//! `R < K ⇔ R < B(P)`: if `R` is a prefix of `P` (or `P` itself) both are longer than `R`;
//! otherwise `R` and `P` differ within `R`'s length, which decides both comparisons the same
//! way; (2) long keys of different buckets compare as their prefixes, as the buckets' tree keys
//! do; (3) within a bucket, as their suffixes. Also `B(P) ≤ K` for every `K` in `B(P)`. So a
//! range bound or seek key `S` longer than `T` bytes starts the tree at `B(S[..T])` and drops that
//! bucket's suffixes below `S[T..]`; an end bound `E` longer than `T` bytes ends the tree after
//! `B(E[..T])`; short bounds need nothing.
//!
//! **Writes.** A put or delete of a long key reads the bucket (through the tree and
//! [`super::overflow::resolve`]), changes it and puts it back (or deletes its record when it
//! empties): one tree put or delete, logged and recovered as any, the old bucket's run freed
//! through the deferred frees in the same RUNS record. Long-key writes are serialised by one
//! mutex (`Db`'s `bucket_lock`), taken before the store's write gate, so no two read-modify-write
//! the same bucket at once; a write batch holding long keys takes it before closing the gate, and
//! recovery's re-application of a cut-short batch runs alone. Reads need no lock: a bucket is
//! replaced whole by one tree put, and a get or scan sees one version of it.
//!
//! **Costs.** A long key's read reads its bucket's run (one page for a 1 KiB key and a small
//! value); a write rewrites the whole bucket, so keys sharing their first `T` bytes cost in
//! proportion to their bucket (all of them and their values, stored together). Keys of at most
//! `T` bytes — the small-value path — pay one length comparison per operation (a scan one per
//! record), nothing else.
//!
//! **Counting.** The tree counts a bucket as one record: [`super::Db::check`] and
//! [`super::Db::stats`] (which walk the tree) count every key of a bucket, the quick statistics of
//! the `KvStore` trait count the tree's records.
//!
//! A database created before version 6 has no buckets and keeps its key limit.

use super::overflow;
use super::store::PoolStore;
use crate::btree::BTree;
use crate::error::{Error, Result};

/// The longest key of a database with buckets, at every page size.
pub const MAX_KEY_LEN: usize = 16 * 1024;
/// The last byte of a bucket's tree key.
pub(crate) const MARKER: u8 = 0x00;
/// Bytes before a bucket's entries: their count (`u32`).
const COUNT_LEN: usize = 4;
/// Bytes before an entry's suffix: its length and its value's length (`u32` each).
const ENTRY_HEADER_LEN: usize = 8;

/// Where a database's keys split between the tree and buckets (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buckets {
    /// `T`: keys longer than this live in buckets.
    pub(crate) prefix: usize,
}

/// One key of a bucket: its suffix and value, borrowed from the bucket's bytes.
pub(crate) type Entry<'a> = (&'a [u8], &'a [u8]);

impl Buckets {
    /// The buckets of a tree whose key limit is `tree_max_key`.
    pub(crate) fn for_tree(tree_max_key: usize) -> Self {
        Buckets {
            prefix: tree_max_key.saturating_sub(1),
        }
    }

    /// Whether `key` lives in a bucket.
    #[inline]
    pub(crate) fn holds(&self, key: &[u8]) -> bool {
        key.len() > self.prefix
    }

    /// Whether a tree key is a bucket's.
    #[inline]
    pub(crate) fn is_bucket_key(&self, tree_key: &[u8]) -> bool {
        tree_key.len() == self.prefix + 1
    }

    /// The tree key of the bucket holding `key` (longer than [`Buckets::prefix`]).
    pub(crate) fn tree_key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix + 1);
        k.extend_from_slice(&key[..self.prefix]);
        k.push(MARKER);
        k
    }

    /// `key` as the tree sees it when positioning: itself, or its bucket's tree key.
    pub(crate) fn position<'a>(&self, key: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        if self.holds(key) {
            std::borrow::Cow::Owned(self.tree_key(key))
        } else {
            std::borrow::Cow::Borrowed(key)
        }
    }

    /// The full key of a bucket entry: the bucket's prefix and the suffix, in `out`.
    pub(crate) fn full_key(&self, tree_key: &[u8], suffix: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&tree_key[..self.prefix]);
        out.extend_from_slice(suffix);
    }

    /// Decodes a bucket (the value of a record whose key [`Buckets::is_bucket_key`]) and checks
    /// its tree key's marker: every length bounds-checked, at least one entry, suffixes non-empty,
    /// strictly ascending, keys within [`MAX_KEY_LEN`]. A failure is [`Error::Corruption`].
    pub(crate) fn decode<'a>(&self, tree_key: &[u8], bytes: &'a [u8]) -> Result<Vec<Entry<'a>>> {
        let bad = |detail: String| Error::Corruption { page: 0, detail };
        if tree_key.last() != Some(&MARKER) {
            return Err(bad(format!(
                "a tree key of {} bytes (a bucket's) not ending in {MARKER:#04x}",
                tree_key.len()
            )));
        }
        let u32_at = |at: usize| -> Option<usize> {
            let b = bytes.get(at..at + 4)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let count = u32_at(0).ok_or_else(|| bad("a bucket shorter than its count".into()))?;
        if count == 0 {
            return Err(bad("an empty bucket".into()));
        }
        let mut entries: Vec<Entry<'a>> = Vec::with_capacity(count.min(bytes.len() / 9));
        let mut at = COUNT_LEN;
        for i in 0..count {
            let (Some(sl), Some(vl)) = (u32_at(at), u32_at(at + 4)) else {
                return Err(bad(format!("bucket entry {i} of {count} cut short")));
            };
            let start = at + ENTRY_HEADER_LEN;
            let end = start
                .checked_add(sl)
                .and_then(|e| e.checked_add(vl))
                .filter(|&e| e <= bytes.len())
                .ok_or_else(|| bad(format!("bucket entry {i} of {count} cut short")))?;
            if sl == 0 || self.prefix + sl > MAX_KEY_LEN {
                return Err(bad(format!("bucket entry {i}: a suffix of {sl} bytes")));
            }
            let suffix = &bytes[start..start + sl];
            if entries.last().is_some_and(|(prev, _)| *prev >= suffix) {
                return Err(bad(format!("bucket entry {i}: suffixes out of order")));
            }
            entries.push((suffix, &bytes[start + sl..end]));
            at = end;
        }
        if at != bytes.len() {
            return Err(bad(format!(
                "{} bytes after a bucket's last entry",
                bytes.len() - at
            )));
        }
        Ok(entries)
    }
}

/// Encodes `entries` (sorted by suffix) as a bucket into `out`.
pub(crate) fn encode(entries: &[Entry<'_>], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (suffix, value) in entries {
        out.extend_from_slice(&(suffix.len() as u32).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
        out.extend_from_slice(suffix);
        out.extend_from_slice(value);
    }
}

/// Bytes of a bucket holding `entries`.
fn encoded_len(entries: &[Entry<'_>]) -> usize {
    COUNT_LEN
        + entries
            .iter()
            .map(|(s, v)| ENTRY_HEADER_LEN + s.len() + v.len())
            .sum::<usize>()
}

/// An error for a key past [`MAX_KEY_LEN`].
fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::InvalidArgument {
            what: format!("key of {} bytes is longer than the maximum", key.len()),
            limit: MAX_KEY_LEN,
        });
    }
    Ok(())
}

/// The value of `key` (longer than the prefix), into `out`; whether it is there.
pub(crate) fn get(
    tree: &BTree<PoolStore>,
    b: Buckets,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Result<bool> {
    check_key(key)?;
    let tree_key = b.tree_key(key);
    let mut stored = Vec::new();
    if !overflow::get_value(tree, &tree_key, &mut stored)? {
        return Ok(false);
    }
    let entries = b.decode(&tree_key, &stored)?;
    match entries.binary_search_by(|(s, _)| (*s).cmp(&key[b.prefix..])) {
        Ok(i) => {
            out.clear();
            out.extend_from_slice(entries[i].1);
            Ok(true)
        }
        Err(_) => Ok(false),
    }
}

/// Puts `key` (longer than the prefix) with `value` into its bucket, under the caller's hold of
/// the bucket lock; the LSN of the put's last record.
pub(crate) fn put(tree: &BTree<PoolStore>, b: Buckets, key: &[u8], value: &[u8]) -> Result<u64> {
    check_key(key)?;
    let tree_key = b.tree_key(key);
    let mut stored = Vec::new();
    let found = overflow::get_value(tree, &tree_key, &mut stored)?;
    let mut entries = if found {
        b.decode(&tree_key, &stored)?
    } else {
        Vec::new()
    };
    let suffix = &key[b.prefix..];
    match entries.binary_search_by(|(s, _)| (*s).cmp(suffix)) {
        Ok(i) => entries[i].1 = value,
        Err(i) => entries.insert(i, (suffix, value)),
    }
    let len = encoded_len(&entries);
    if len > overflow::MAX_VALUE_LEN {
        return Err(Error::InvalidArgument {
            what: format!(
                "a value of {} bytes under a key of {} bytes: the keys sharing its first {} \
                 bytes and their values would take {len} bytes together",
                value.len(),
                key.len(),
                b.prefix
            ),
            limit: overflow::MAX_VALUE_LEN,
        });
    }
    let mut bytes = Vec::with_capacity(len);
    encode(&entries, &mut bytes);
    overflow::put(tree, &tree_key, &bytes)
}

/// Deletes `key` (longer than the prefix) from its bucket, under the caller's hold of the bucket
/// lock; whether it was there, and the LSN of the last record.
pub(crate) fn delete(tree: &BTree<PoolStore>, b: Buckets, key: &[u8]) -> Result<(bool, u64)> {
    check_key(key)?;
    let tree_key = b.tree_key(key);
    let mut stored = Vec::new();
    if !overflow::get_value(tree, &tree_key, &mut stored)? {
        return Ok((false, 0));
    }
    let mut entries = b.decode(&tree_key, &stored)?;
    let Ok(i) = entries.binary_search_by(|(s, _)| (*s).cmp(&key[b.prefix..])) else {
        return Ok((false, 0));
    };
    if entries.len() == 1 {
        return tree.delete_logged(&tree_key);
    }
    entries.remove(i);
    let mut bytes = Vec::with_capacity(encoded_len(&entries));
    encode(&entries, &mut bytes);
    overflow::put(tree, &tree_key, &bytes).map(|lsn| (true, lsn))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_trip_and_damage_is_refused() {
        let b = Buckets::for_tree(777);
        assert_eq!(b.prefix, 776);
        let key = b.tree_key(&[7u8; 1000]);
        assert_eq!(key.len(), 777);
        assert!(b.is_bucket_key(&key) && !b.holds(&key[..776]) && b.holds(&key));
        let entries: Vec<Entry<'_>> = vec![(b"a", b""), (b"ab", b"xyz"), (b"b\0", &[0xFF; 40])];
        let mut bytes = Vec::new();
        encode(&entries, &mut bytes);
        assert_eq!(bytes.len(), encoded_len(&entries));
        assert_eq!(b.decode(&key, &bytes).unwrap(), entries);
        // Every cut and every flipped length byte is refused, never a panic.
        for cut in 0..bytes.len() {
            assert!(b.decode(&key, &bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x80;
            let _ = b.decode(&key, &bad);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(b.decode(&key, &longer).is_err(), "trailing bytes");
        let mut bad_key = key.clone();
        *bad_key.last_mut().unwrap() = 1;
        assert!(b.decode(&bad_key, &bytes).is_err(), "marker");
        let unsorted: Vec<Entry<'_>> = vec![(b"b", b""), (b"a", b"")];
        encode(&unsorted, &mut bytes);
        assert!(b.decode(&key, &bytes).is_err(), "order");
        let dup: Vec<Entry<'_>> = vec![(b"a", b""), (b"a", b"")];
        encode(&dup, &mut bytes);
        assert!(b.decode(&key, &bytes).is_err(), "duplicate");
        encode(&[], &mut bytes);
        assert!(b.decode(&key, &bytes).is_err(), "empty");
        let empty_suffix: Vec<Entry<'_>> = vec![(b"", b"v")];
        encode(&empty_suffix, &mut bytes);
        assert!(b.decode(&key, &bytes).is_err(), "empty suffix");
    }
}
