//! Cursors: ordered iteration over a key range, forward or reverse, with seek.
//!
//! A cursor holds a private copy of one leaf's records (taken by a validated optimistic read)
//! and the leaf's fences; it holds no latch between calls. It moves to the next leaf by
//! descending again: forward with `upper ++ [0]`, reverse with `lower` (leaf ranges are
//! `(lower, upper]`). So a cursor never blocks writers, survives splits and merges, and sees
//! each record at most once, in order: every record present in the range for the cursor's whole
//! life is returned; records written meanwhile may or may not be.
//!
//! A bucket of long keys ([`super::buckets`]) met in the leaf is read whole and its keys
//! returned in order before the leaf's next record. A seek to a long key starts at its bucket's
//! tree key and drops that bucket's keys before it (after it, in reverse); moving on between
//! leaves is by tree keys (fences) as before.

use std::collections::VecDeque;
use std::ops::Bound;

use super::Db;
use crate::btree::Records;
use crate::error::Result;

/// An ordered iterator over a key range, forward or reverse; see [`Db::range`].
pub struct Cursor<'db> {
    db: &'db Db,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    /// The current leaf's records, and the next index to return (forward) or one past it
    /// (reverse).
    leaf: Records,
    pos: usize,
    /// Where the next leaf is found (`None`: no next leaf), once `leaf` is used up.
    next: Option<Vec<u8>>,
    /// Where to start: a key to load the first leaf with; `None` once loaded.
    start: Option<Vec<u8>>,
    /// The key the cursor was last positioned at by a seek, while it is in that leaf: a
    /// bucket's keys before it (after it, in reverse) are not returned.
    from: Option<Vec<u8>>,
    /// The keys of the bucket being returned, in the cursor's order.
    bucket: VecDeque<(Vec<u8>, Vec<u8>)>,
    done: bool,
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl<'db> Cursor<'db> {
    pub(crate) fn new(db: &'db Db, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Self {
        let mut c = Cursor {
            db,
            lower: owned(lower),
            upper: owned(upper),
            reverse: false,
            leaf: Records::default(),
            pos: 0,
            next: None,
            start: None,
            from: None,
            bucket: VecDeque::new(),
            done: false,
        };
        c.restart();
        c
    }

    /// Turns the cursor around: it now yields the range in descending order, starting from the
    /// top of the range.
    pub fn rev(mut self) -> Self {
        self.reverse = !self.reverse;
        self.restart();
        self
    }

    /// Moves to the first key `>= key` (forward) or the last key `<= key` (reverse), within the
    /// range.
    pub fn seek(&mut self, key: &[u8]) {
        self.done = false;
        self.leaf.clear();
        self.bucket.clear();
        self.pos = 0;
        // A key outside the range starts at the range's own end, not leaves away from it.
        let key = if self.reverse {
            match &self.upper {
                Bound::Included(u) | Bound::Excluded(u) if key > u.as_slice() => u.as_slice(),
                _ => key,
            }
        } else {
            match &self.lower {
                Bound::Included(l) | Bound::Excluded(l) if key < l.as_slice() => l.as_slice(),
                _ => key,
            }
        };
        self.start = Some(key.to_vec());
    }

    /// Starts from the bottom (forward) or the top (reverse) of the range.
    fn restart(&mut self) {
        let start = if self.reverse {
            match &self.upper {
                Bound::Included(k) | Bound::Excluded(k) => k.clone(),
                // Longer than any key can be, so above every key.
                Bound::Unbounded => vec![0xFF; self.db.limits().max_key + 1],
            }
        } else {
            match &self.lower {
                Bound::Included(k) | Bound::Excluded(k) => k.clone(),
                Bound::Unbounded => Vec::new(),
            }
        };
        self.seek(&start);
    }

    fn in_range(&self, key: &[u8]) -> bool {
        let above_lower = match &self.lower {
            Bound::Included(l) => key >= l.as_slice(),
            Bound::Excluded(l) => key > l.as_slice(),
            Bound::Unbounded => true,
        };
        let below_upper = match &self.upper {
            Bound::Included(u) => key <= u.as_slice(),
            Bound::Excluded(u) => key < u.as_slice(),
            Bound::Unbounded => true,
        };
        above_lower && below_upper
    }

    /// Whether `key` is past the end of the range in the cursor's direction.
    fn past_end(&self, key: &[u8]) -> bool {
        if self.reverse {
            match &self.lower {
                Bound::Included(l) => key < l.as_slice(),
                Bound::Excluded(l) => key <= l.as_slice(),
                Bound::Unbounded => false,
            }
        } else {
            match &self.upper {
                Bound::Included(u) => key > u.as_slice(),
                Bound::Excluded(u) => key >= u.as_slice(),
                Bound::Unbounded => false,
            }
        }
    }

    /// Loads the leaf holding `key` and positions at `key`: the first record `>= key`
    /// (forward) or one past the last `<= key` (reverse). Positioning by key, not at the leaf's
    /// first or last record, matters when moving on: after a merge the leaf holding the next
    /// key may also hold records already returned.
    fn load(&mut self, key: &[u8]) -> Result<()> {
        self.db.check_open()?;
        let r = self.db.tree().leaf_records(key, &mut self.leaf);
        let (lower, upper) = self.db.guard_read(r)?;
        let n = self.leaf.len();
        let first_ge = (0..n).find(|&i| self.leaf.key(i) >= key).unwrap_or(n);
        self.pos = if self.reverse && first_ge < n && self.leaf.key(first_ge) == key {
            first_ge + 1
        } else {
            first_ge
        };
        self.next = if self.reverse {
            (!lower.is_empty()).then_some(lower)
        } else {
            upper.map(|mut u| {
                u.push(0);
                u
            })
        };
        Ok(())
    }

    fn step(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if let Some(start) = self.start.take() {
            match self.db.buckets() {
                Some(b) => self.load(&b.position(&start))?,
                None => self.load(&start)?,
            }
            self.from = Some(start);
        }
        loop {
            if self.done {
                return Ok(None);
            }
            if let Some((key, value)) = self.bucket.pop_front() {
                if self.past_end(&key) {
                    self.done = true;
                    return Ok(None);
                }
                let before_seek = self.from.as_deref().is_some_and(|f| {
                    if self.reverse {
                        key.as_slice() > f
                    } else {
                        key.as_slice() < f
                    }
                });
                if self.in_range(&key) && !before_seek {
                    return Ok(Some((key, value)));
                }
                continue;
            }
            let i = if self.reverse {
                self.pos.checked_sub(1)
            } else {
                (self.pos < self.leaf.len()).then_some(self.pos)
            };
            match i {
                Some(i) => {
                    self.pos = if self.reverse { i } else { i + 1 };
                    let key = self.leaf.key(i);
                    if let Some(b) = self.db.buckets().filter(|b| b.is_bucket_key(key)) {
                        let mut buf = Vec::new();
                        let Some(bytes) = self.db.scan_value(key, self.leaf.value(i), &mut buf)?
                        else {
                            continue;
                        };
                        for (suffix, value) in b.decode(key, bytes)? {
                            let mut full = Vec::new();
                            b.full_key(key, suffix, &mut full);
                            if self.reverse {
                                self.bucket.push_front((full, value.to_vec()));
                            } else {
                                self.bucket.push_back((full, value.to_vec()));
                            }
                        }
                        continue;
                    }
                    if self.past_end(key) {
                        self.done = true;
                        return Ok(None);
                    }
                    if self.in_range(key) {
                        let mut buf = Vec::new();
                        match self.db.scan_value(key, self.leaf.value(i), &mut buf)? {
                            Some(v) => return Ok(Some((key.to_vec(), v.to_vec()))),
                            None => continue,
                        }
                    }
                }
                None => match self.next.take() {
                    Some(k) => {
                        if self.past_end(&k) && !self.reverse {
                            self.done = true;
                            return Ok(None);
                        }
                        self.from = None;
                        self.load(&k)?;
                    }
                    None => {
                        self.done = true;
                        return Ok(None);
                    }
                },
            }
        }
    }
}

impl Iterator for Cursor<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
