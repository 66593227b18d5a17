//! Ordered walks (scan and range map) over the leaves, with optimistic reads.
//!
//! Each leaf is read optimistically into a private snapshot (the header and slots, then the
//! heap; one copy of the whole page for fully-dense leaves), validated, and only then decoded
//! and shown to the visitor, so the visitor never sees torn bytes and may take its time. The
//! next leaf is found by descending again with the smallest key above the current leaf's upper
//! fence (`upper ++ [0]`): leaves have no sibling pointers, as in the paper.

use super::adapt::Seen;
use super::leaf::{collect, fences, Records};
use super::store::{Abort, NodeLatch, NodeStore, Olc};
use super::tree::{checked, retry, BTree, WriteGuard};
use crate::error::Result;
use crate::page::dense::{Dense, KIND_DENSE_LEAF};
use crate::page::semidense::{SemiDense, KIND_SEMI_DENSE_LEAF};
use crate::page::slotted::Slotted;
use crate::page::{free_gap, PageId, KIND_FP_LEAF};

impl<S: NodeStore> BTree<S> {
    /// Walks records in key order from the first key `>= start`, stopping before `end` (when
    /// given), after `limit` records, or when `visitor` returns `false`.
    ///
    /// Each leaf is read optimistically into a private snapshot (one page copy), validated, and
    /// only then decoded and shown to the visitor, so the visitor never sees torn bytes and may
    /// take its time. Copying the whole page is cheaper than copying record by record for all
    /// but the shortest scans.
    pub fn walk(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        thread_local! {
            // Reused between walks so a short scan does not allocate.
            static BUFFERS: std::cell::RefCell<WalkBuffers> = Default::default();
        }
        BUFFERS.with(|b| match b.try_borrow_mut() {
            Ok(mut b) => self.walk_with(start, end, limit, visitor, &mut b),
            // A visitor that walks the tree itself: use fresh buffers.
            Err(_) => self.walk_with(start, end, limit, visitor, &mut WalkBuffers::default()),
        })
    }

    fn walk_with(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visitor: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        b: &mut WalkBuffers,
    ) -> Result<usize> {
        b.from.clear();
        b.from.extend_from_slice(start);
        b.snapshot.resize(self.options.page_size, 0);
        let mut n = 0;
        let mut first = true;
        while n < limit {
            let seen = retry(|| self.snapshot_leaf(&b.from, &mut b.snapshot))?;
            if first {
                first = false;
                self.adapt_after_scan(seen)?;
            }
            let (more, done) = visit_snapshot(
                seen.id,
                &b.snapshot,
                &b.from,
                end,
                limit,
                &mut n,
                &mut b.key,
                visitor,
            )?;
            if done || !more {
                break;
            }
            let upper = leaf_upper(seen.id, &b.snapshot)?;
            b.from.clear();
            b.from.extend_from_slice(upper.unwrap_or(&[]));
            b.from.push(0);
        }
        Ok(n)
    }

    /// Copies the leaf holding `from` into `out` (validated); sorts a fingerprinting leaf's
    /// unsorted tail first (section 3.4, "sorted lazily before each scan").
    fn snapshot_leaf(&self, from: &[u8], out: &mut [u8]) -> Olc<Seen> {
        let (id, v) = self.find_leaf(from)?;
        let l = self.latch(id)?;
        let page = self.page(id)?;
        let seen = Seen::of(id, v, page);
        if page[0] == KIND_FP_LEAF {
            let node = checked(l, v, Slotted::new(id, page))?;
            if node.sorted() < node.count() {
                let _gate = self.store.write_gate();
                l.upgrade(v)?;
                let _g = WriteGuard(l);
                if self.sort_fp_leaf(id, self.page_mut(id)?)? {
                    self.store.log_pages(&[id], &[])?;
                }
                return Err(Abort::Restart);
            }
        }
        // Header and slots, then the heap: the free gap between them is never read. Pages
        // without a gap (dense leaves, or a torn read that does not decode) are copied whole.
        match free_gap(id, page) {
            Some((slots_end, heap_start)) => {
                out[..slots_end].copy_from_slice(&page[..slots_end]);
                out[heap_start..].copy_from_slice(&page[heap_start..]);
            }
            None => out.copy_from_slice(page),
        }
        l.validate(v)?;
        Ok(seen)
    }
}

impl<S: NodeStore> BTree<S> {
    /// Copies every record of the leaf whose range holds `key` into `out` (cleared first), in
    /// key order, and returns the leaf's fences `(lower, upper)` (`lower` empty for the first
    /// leaf, `upper` `None` for the last). Leaf ranges are `(lower, upper]`, so the leaf before
    /// this one is the one holding `lower`, and the one after holds `upper ++ [0]`.
    pub(crate) fn leaf_records(
        &self,
        key: &[u8],
        out: &mut Records,
    ) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
        let mut snapshot = vec![0u8; self.options.page_size];
        let seen = retry(|| self.snapshot_leaf(key, &mut snapshot))?;
        out.clear();
        collect(seen.id, &snapshot, out)?;
        fences(seen.id, &snapshot)
    }
}

/// Whether `a ++ b < end`.
#[inline]
fn less_than(a: &[u8], b: &[u8], end: &[u8]) -> bool {
    let n = a.len().min(end.len());
    match a[..n].cmp(&end[..n]) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal if a.len() > end.len() => false,
        std::cmp::Ordering::Equal => b < &end[n..],
    }
}

/// Buffers a walk reuses.
#[derive(Default)]
struct WalkBuffers {
    from: Vec<u8>,
    snapshot: Vec<u8>,
    key: Vec<u8>,
}

/// The upper fence of a leaf snapshot.
fn leaf_upper(id: PageId, page: &[u8]) -> Result<Option<&[u8]>> {
    match page[0] {
        KIND_DENSE_LEAF => Dense::new(id, page)?.upper_fence(),
        KIND_SEMI_DENSE_LEAF => Ok(SemiDense::new(id, page)?.upper_fence()),
        _ => Slotted::new(id, page)?.upper_fence(),
    }
}

/// Visits the records `>= from` (and `< end`) of a validated leaf snapshot, counting in `n` up
/// to `limit`. Returns (whether a next leaf exists, whether the walk is over).
#[allow(clippy::too_many_arguments)]
fn visit_snapshot(
    id: PageId,
    page: &[u8],
    from: &[u8],
    end: Option<&[u8]>,
    limit: usize,
    n: &mut usize,
    key: &mut Vec<u8>,
    visitor: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<(bool, bool)> {
    let more = leaf_upper(id, page)?.is_some();
    if page[0] == KIND_SEMI_DENSE_LEAF {
        let s = SemiDense::new(id, page)?;
        let slot = |i, key: &mut Vec<u8>| {
            let value = s.value(i)?;
            if value.is_some() {
                s.key_into(i, key);
            }
            Ok(value)
        };
        let done = visit_slots(
            s.lower_bound(from)..s.slots(),
            slot,
            end,
            limit,
            n,
            key,
            visitor,
        )?;
        return Ok((more, done));
    }
    if page[0] == KIND_DENSE_LEAF {
        let d = Dense::new(id, page)?;
        let slot = |i, key: &mut Vec<u8>| {
            let present = d.present(i);
            if present {
                d.key_into(i, key);
            }
            Ok(present.then(|| d.value(i)))
        };
        let done = visit_slots(
            d.lower_bound(from)..d.capacity(),
            slot,
            end,
            limit,
            n,
            key,
            visitor,
        )?;
        return Ok((more, done));
    }
    let node = Slotted::new(id, page)?;
    let (first, _) = node.lower_bound(from)?;
    let prefix = node.prefix()?;
    key.clear();
    key.extend_from_slice(prefix);
    for i in first..node.count() {
        let (k, val) = (node.key(i)?, node.value(i)?);
        if end.is_some_and(|end| !less_than(prefix, k, end)) {
            return Ok((more, true));
        }
        *n += 1;
        let go_on = if prefix.is_empty() {
            visitor(k, val)
        } else {
            key.truncate(prefix.len());
            key.extend_from_slice(k);
            visitor(key, val)
        };
        if !go_on || *n >= limit {
            return Ok((more, true));
        }
    }
    Ok((more, false))
}

/// Visits slots `range` of a fully- or semi-dense leaf snapshot: `slot(i, key)` returns slot
/// `i`'s value (`None` when empty) after appending its key to the cleared `key`. Returns whether
/// the walk is over.
#[allow(clippy::too_many_arguments)]
fn visit_slots<'p>(
    range: std::ops::Range<usize>,
    slot: impl Fn(usize, &mut Vec<u8>) -> Result<Option<&'p [u8]>>,
    end: Option<&[u8]>,
    limit: usize,
    n: &mut usize,
    key: &mut Vec<u8>,
    visitor: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<bool> {
    for i in range {
        key.clear();
        let Some(value) = slot(i, key)? else {
            continue;
        };
        if end.is_some_and(|end| key.as_slice() >= end) {
            return Ok(true);
        }
        *n += 1;
        if !visitor(key, value) || *n >= limit {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::less_than;

    #[test]
    fn less_than_concatenation() {
        assert!(less_than(b"ab", b"c", b"abd"));
        assert!(!less_than(b"ab", b"d", b"abd"));
        assert!(less_than(b"ab", b"", b"ab\0"));
        assert!(!less_than(b"abc", b"", b"ab"));
        assert!(less_than(b"a", b"", b"b"));
        assert!(!less_than(b"b", b"", b"a"));
    }
}
