//! The in-memory index (§4.3): segment lower bound → first page, page count, model, production
//! ID, in a [`crate::btree::BTree`]. Segments cover the key space without gaps or overlaps, so
//! a key's segment is the floor of its lower bounds ([`crate::btree::BTree::floor`]) and its
//! upper bound the next segment's lower bound.
//!
//! The tree refuses empty keys and the first segment's lower bound is empty, so every lower
//! bound is stored behind a zero byte (order is kept). That makes index keys up to 257 bytes:
//! the tree has 8 KiB pages (keys up to 512 bytes).

use super::model::Model;
use crate::btree::{BTree, Layout, Options};
use crate::error::{Error, Result};

/// Length of the largest index key (a 256-byte lower bound behind its zero byte).
const MAX_INDEX_KEY: usize = 257;
const VALUE_LEN: usize = 46;

/// One segment as the index knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Lower bound (inclusive; empty for the first segment).
    pub lower: Vec<u8>,
    /// Its first page.
    pub first: u64,
    /// Its pages: 1, 2, 4, 8 or 16.
    pub pages: u16,
    /// How many of its base pages have an overflow page (reorganization potential, §4.5.3).
    pub overflows: u16,
    /// Its model.
    pub model: Model,
    /// Its production ID.
    pub production: u64,
}

impl Segment {
    fn encode(&self) -> [u8; VALUE_LEN] {
        let mut b = [0u8; VALUE_LEN];
        b[0..8].copy_from_slice(&self.first.to_le_bytes());
        b[8..10].copy_from_slice(&self.pages.to_le_bytes());
        b[10..12].copy_from_slice(&self.overflows.to_le_bytes());
        b[12..14].copy_from_slice(&self.model.prefix_len.to_le_bytes());
        b[14..22].copy_from_slice(&self.model.x0.to_le_bytes());
        b[22..30].copy_from_slice(&self.model.slope.to_bits().to_le_bytes());
        b[30..38].copy_from_slice(&self.model.intercept.to_bits().to_le_bytes());
        b[38..46].copy_from_slice(&self.production.to_le_bytes());
        b
    }

    fn decode(index_key: &[u8], b: &[u8]) -> Result<Segment> {
        if b.len() != VALUE_LEN || index_key.first() != Some(&0) {
            return Err(Error::Corruption {
                page: 0,
                detail: "a malformed segment index entry".into(),
            });
        }
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        Ok(Segment {
            lower: index_key[1..].to_vec(),
            first: u64_at(0),
            pages: u16_at(8),
            overflows: u16_at(10),
            model: Model {
                prefix_len: u16_at(12),
                x0: u64_at(14),
                slope: f64::from_bits(u64_at(22)),
                intercept: f64::from_bits(u64_at(30)),
            },
            production: u64_at(38),
        })
    }

    /// The page of the segment `key` belongs to.
    #[inline]
    pub fn page_of(&self, key: &[u8]) -> usize {
        self.model.page_of(key, self.pages as usize)
    }
}

fn index_key(lower: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(lower.len() + 1);
    k.push(0);
    k.extend_from_slice(lower);
    k
}

/// The index (module docs).
pub struct SegmentIndex {
    map: BTree,
    len: usize,
    /// Changes made to the index ([`SegmentIndex::version`]).
    version: u64,
}

impl SegmentIndex {
    /// An empty index.
    pub fn new() -> Result<Self> {
        Ok(SegmentIndex {
            map: BTree::new(Options {
                layout: Layout::Hints,
                page_size: 8192,
                ..Options::default()
            })?,
            len: 0,
            version: 0,
        })
    }

    /// Segments indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// How many changes the index has seen: a segment found under one version is the key's
    /// segment as long as the version is the same.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Bytes of memory the index takes: its tree's pages (those it freed too, kept for reuse).
    pub fn memory_bytes(&self) -> usize {
        self.map.resident_bytes()
    }

    /// Adds a segment; an error if its lower bound is indexed already.
    pub fn insert(&mut self, s: &Segment) -> Result<()> {
        let k = index_key(&s.lower);
        let mut v = Vec::new();
        if self.map.get_into(&k, &mut v)? {
            return Err(Error::Corruption {
                page: s.first,
                detail: "two segments with the same lower bound".into(),
            });
        }
        self.version += 1;
        self.map.put(&k, &s.encode())?;
        self.len += 1;
        Ok(())
    }

    /// Replaces the entry of the segment with `s`'s lower bound.
    pub fn update(&mut self, s: &Segment) -> Result<()> {
        self.version += 1;
        self.map.put(&index_key(&s.lower), &s.encode())
    }

    /// Removes the segment with lower bound `lower`.
    pub fn remove(&mut self, lower: &[u8]) -> Result<()> {
        self.version += 1;
        if self.map.delete(&index_key(lower))? {
            self.len -= 1;
        }
        Ok(())
    }

    /// The segment holding `key` (`key` empty: the first), with its upper bound. An error if no
    /// segment holds it (the index always covers the key space).
    pub fn find(&self, key: &[u8]) -> Result<(Segment, Option<Vec<u8>>)> {
        let s = self.segment_of(key)?;
        let upper = self.after(&s.lower)?.map(|n| n.lower);
        Ok((s, upper))
    }

    /// The segment holding `key`, without its upper bound (a point lookup needs none).
    pub fn segment_of(&self, key: &[u8]) -> Result<Segment> {
        // Lower bounds are at most 256 bytes, so a longer key (a scan's start) has the floor of
        // its first 256.
        let key = &key[..key.len().min(MAX_INDEX_KEY - 1)];
        let (k, v) = self
            .map
            .floor(&index_key(key))?
            .ok_or_else(|| Error::Corruption {
                page: 0,
                detail: "the segment index does not cover the key space".into(),
            })?;
        Segment::decode(&k, &v)
    }

    /// The segment after the one with lower bound `lower`.
    pub fn after(&self, lower: &[u8]) -> Result<Option<Segment>> {
        let mut from = index_key(lower);
        from.push(0);
        let mut found = None;
        self.map.walk(&from, None, 1, &mut |k, v| {
            found = Some(Segment::decode(k, v));
            false
        })?;
        found.transpose()
    }

    /// The segment before the one with lower bound `lower`.
    pub fn before(&self, lower: &[u8]) -> Result<Option<Segment>> {
        let Some((&last, head)) = lower.split_last() else {
            return Ok(None);
        };
        // The largest index key below `0 ++ lower`: below `0 ++ head ++ [last - 1] ++ FF…` (as
        // long as any key) if `last > 0`, else at or below `0 ++ head`.
        let mut probe = index_key(head);
        if last > 0 {
            probe.push(last - 1);
            probe.resize(MAX_INDEX_KEY, 0xFF);
        }
        match self.map.floor(&probe)? {
            Some((k, v)) => Segment::decode(&k, &v).map(Some),
            None => Ok(None),
        }
    }

    /// Every segment in key order.
    pub fn all(&self) -> Result<Vec<Segment>> {
        let mut out = Vec::with_capacity(self.len);
        let mut err = None;
        self.map.walk(
            &[0],
            None,
            usize::MAX,
            &mut |k, v| match Segment::decode(k, v) {
                Ok(s) => {
                    out.push(s);
                    true
                }
                Err(e) => {
                    err = Some(e);
                    false
                }
            },
        )?;
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn seg(lower: &[u8], first: u64) -> Segment {
        Segment {
            lower: lower.to_vec(),
            first,
            pages: 1,
            overflows: 0,
            model: Model::single(),
            production: first,
        }
    }

    #[test]
    fn find_after_and_before_walk_the_segments() {
        let mut ix = SegmentIndex::new().unwrap();
        let lowers: [&[u8]; 5] = [b"", b"b", b"b\x00", b"c", b"d\xff\xff"];
        for (i, l) in lowers.iter().enumerate() {
            ix.insert(&seg(l, i as u64 + 2)).unwrap();
        }
        assert!(ix.insert(&seg(b"c", 99)).is_err());
        assert_eq!(ix.len(), 5);
        assert_eq!(ix.find(b"a").unwrap(), (seg(b"", 2), Some(b"b".to_vec())));
        assert_eq!(ix.find(b"").unwrap().0.first, 2);
        assert_eq!(ix.find(b"b").unwrap().0.first, 3);
        assert_eq!(ix.find(b"b\x00\x01").unwrap().0.first, 4);
        assert_eq!(ix.find(b"zzz").unwrap(), (seg(b"d\xff\xff", 6), None));
        for i in 1..lowers.len() {
            assert_eq!(ix.before(lowers[i]).unwrap().unwrap().lower, lowers[i - 1]);
            assert_eq!(ix.after(lowers[i - 1]).unwrap().unwrap().lower, lowers[i]);
        }
        assert_eq!(ix.before(b"").unwrap(), None);
        assert_eq!(ix.after(b"d\xff\xff").unwrap(), None);
        ix.remove(b"b").unwrap();
        assert_eq!(ix.find(b"b").unwrap().0.first, 2);
        assert_eq!(ix.all().unwrap().len(), 4);
    }
}
