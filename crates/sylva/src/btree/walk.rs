//! Ordered walks (scan and range map) over the leaves, with optimistic reads.
//!
//! From each leaf, the records a walk still wants (up to its limit, before its end key) are
//! copied optimistically into a private buffer, and shown to the visitor only after the leaf's
//! version validated, so the visitor never sees torn bytes and may take its time. A scan of a
//! few records therefore copies a few records, not the page (snapshotting every leaf whole
//! spent about 20% of scan time in `memmove`; `docs/results/btree.md`). `leaf_records` (the database
//! cursor's whole-leaf read) still takes a page snapshot and decodes it.
//!
//! Leaves have no sibling pointers, as in the paper. The next leaf is the one holding the
//! smallest key above the current leaf's upper fence (`upper ++ [0]`): while the current leaf's
//! parent still validates at the version the walk read it at, that is the parent's next child
//! ([`BTree::next_child`]: one inner page read instead of a descent); otherwise (the parent
//! changed, or the leaf was its last child) the walk descends from the root with that key.
//!
//! Where a walk stands between leaves is a [`WalkCursor`], and each leaf is one optimistic
//! attempt ([`BTree::walk_leaf`]), so a walk can also go on leaf by leaf in separate attempts:
//! the PA-Tree worker's scans stop at a leaf not in memory and go on from the cursor once it
//! is in (`crate::db`'s `pa` module).

use super::adapt::Seen;
use super::descent::ChildPos;
use super::leaf::{collect, fences, Records};
use super::store::{NodeLatch, NodeStore};
use super::tree::{checked, retry, BTree, WriteGuard};
use crate::error::Result;
use crate::page::dense::{Dense, SlotKeys, KIND_DENSE_LEAF};
use crate::page::semidense::{SemiDense, KIND_SEMI_DENSE_LEAF};
use crate::page::slotted::Slotted;
use crate::page::{cmp_keys, corrupt, fingerprint, free_gap, PageId, KIND_FP_LEAF};
use crate::sync::{Abort, Olc};

impl<S: NodeStore> BTree<S> {
    /// Walks records in key order from the first key `>= start`, stopping before `end` (when
    /// given), after `limit` records, or when `visitor` returns `false`.
    ///
    /// From each leaf, only the records the walk still wants are copied, optimistically, into
    /// a private buffer, which is shown to the visitor only after the leaf's version validated:
    /// the visitor never sees torn bytes and may take its time.
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
        b.cursor.reset(start);
        let mut n = 0;
        while n < limit && !b.cursor.done() {
            retry(|| self.walk_leaf(&mut b.cursor, end, limit - n, &mut b.records))?;
            for (k, v) in b.records.iter() {
                n += 1;
                if !visitor(k, v) {
                    return Ok(n);
                }
            }
        }
        Ok(n)
    }

    /// One leaf of a walk, as one optimistic attempt: copies the records of the cursor's next
    /// leaf that the walk wants (at most `max`, keys below `end`) into `out`, and once they
    /// validated moves the cursor past that leaf. A restart or a miss leaves the cursor where
    /// it was, so a walk can go on leaf by leaf in separate attempts (the PA-Tree worker's
    /// scans wait for a page not in memory between two of them).
    pub(crate) fn walk_leaf(
        &self,
        c: &mut WalkCursor,
        end: Option<&[u8]>,
        max: usize,
        out: &mut Records,
    ) -> Olc<()> {
        let want = Want {
            from: &c.from,
            after: c.started,
            end,
            max,
        };
        let leaf = self.copy_leaf(want, c.prev, out, &mut c.next)?;
        if !c.started {
            c.started = true;
            self.adapt_after_scan(leaf.seen)?;
        }
        c.prev = Some(leaf.at);
        if leaf.ended || !leaf.more {
            c.done = true;
            return Ok(());
        }
        // The next leaf is looked up with `upper ++ [0]`; a leaf whose upper fence lies
        // below the key that led to it (damaged fences) would lead back to itself forever.
        if c.next < c.from {
            return Err(Abort::Fail(corrupt(
                leaf.seen.id,
                "the leaf's upper fence is below the key that led to it",
            )));
        }
        std::mem::swap(&mut c.from, &mut c.next);
        c.from.push(0);
        Ok(())
    }

    /// The leaf holding `from` for an optimistic read: its latch, bytes, what was seen and
    /// where it hangs (validate before trusting). With `after`, the position of the leaf just
    /// before it, the leaf is that one's right neighbour when their parent is unchanged
    /// ([`BTree::next_child`]); else it is found by a descent. A fingerprinting leaf's unsorted
    /// tail is sorted first (section 3.4, "sorted lazily before each scan"), and the read
    /// restarted.
    #[inline]
    fn sorted_leaf(
        &self,
        from: &[u8],
        after: Option<ChildPos>,
    ) -> Olc<(S::Latch<'_>, &[u8], Seen, ChildPos)> {
        let d = match after {
            Some(at) => match self.next_child(at)? {
                Some(d) => d,
                None => self.find_leaf_at(from)?,
            },
            None => self.find_leaf_at(from)?,
        };
        let (id, v) = (d.id, d.version);
        let (l, page) = self.node(id)?;
        let seen = Seen::of(id, v, page);
        if page[0] == KIND_FP_LEAF {
            let node = checked(l, v, Slotted::new(id, page))?;
            if node.sorted() < node.count() {
                // A thread that must not block (the PA-Tree worker) tries again later while a
                // checkpoint holds the gate.
                let _gate = if crate::sync::nonblocking() {
                    self.store.try_write_gate().ok_or(Abort::Restart)?
                } else {
                    self.store.write_gate()
                };
                l.upgrade(v)?;
                let _g = WriteGuard(l);
                if self.sort_fp_leaf(id, self.page_mut(id)?)? {
                    self.store.log_pages(&[id], &[])?;
                }
                return Err(Abort::Restart);
            }
        }
        Ok((l, page, seen, d.parent))
    }

    /// Copies the records `want` asks for from the leaf holding `want.from` (the right
    /// neighbour of the leaf at `after`, when given) into `out`, and its upper fence into
    /// `next`, validated.
    fn copy_leaf(
        &self,
        want: Want<'_>,
        after: Option<ChildPos>,
        out: &mut Records,
        next: &mut Vec<u8>,
    ) -> Olc<LeafCopy> {
        let (l, page, seen, at) = self.sorted_leaf(want.from, after)?;
        let (id, v) = (seen.id, seen.version);
        out.clear();
        next.clear();
        let (ended, more) = checked(l, v, copy_records(id, page, want, out, next))?;
        l.validate(v)?;
        Ok(LeafCopy {
            seen,
            at,
            ended,
            more,
        })
    }

    /// Copies the leaf holding `from` into `out` (validated).
    fn snapshot_leaf(&self, from: &[u8], out: &mut [u8]) -> Olc<Seen> {
        let (l, page, seen, _) = self.sorted_leaf(from, None)?;
        let (id, v) = (seen.id, seen.version);
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
        fences_holding(seen.id, &snapshot, key)
    }
}

/// The fences of a leaf snapshot, which must hold `key`: a cursor moves on from them, so a
/// leaf whose fences do not hold the key that led to it would not move (damaged fences: the
/// descent's separators and the leaf disagree).
fn fences_holding(id: PageId, leaf: &[u8], key: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    let (lower, upper) = fences(id, leaf)?;
    let above_lower = lower.is_empty() || key > lower.as_slice();
    if !above_lower || upper.as_deref().is_some_and(|u| key > u) {
        return Err(corrupt(
            id,
            "the leaf's fences do not hold the key that led to it",
        ));
    }
    Ok((lower, upper))
}

impl<S: NodeStore> BTree<S> {
    /// The last record at or below `key` in the leaf whose range holds `probe` (`key` itself,
    /// or a key below it whose leaf's every key is below `key`), as copies, and that leaf's
    /// lower fence (as [`BTree::leaf_records`]). A sorted slotted leaf is searched in place,
    /// copying one record; other leaves are collected whole.
    pub(crate) fn leaf_floor(
        &self,
        probe: &[u8],
        key: &[u8],
    ) -> Result<(Vec<u8>, Option<KeyValue>)> {
        let mut snapshot = vec![0u8; self.options.page_size];
        let seen = retry(|| self.snapshot_leaf(probe, &mut snapshot))?;
        let (lower, _) = fences_holding(seen.id, &snapshot, probe)?;
        let kind = snapshot.first().copied();
        if kind != Some(KIND_SEMI_DENSE_LEAF) && kind != Some(KIND_DENSE_LEAF) {
            let v = Slotted::new(seen.id, &snapshot)?;
            if v.sorted() == v.count() {
                // The slots hold keys within the leaf's fences, with their shared prefix cut:
                // search for `probe`, which the fences hold (after the first leaf, `probe` is
                // the upper fence, above every key here, and `key` beyond it).
                let (pos, equal) = v.lower_bound(probe)?;
                let found = match if equal { Some(pos) } else { pos.checked_sub(1) } {
                    Some(i) => {
                        let mut k = v.prefix()?.to_vec();
                        k.extend_from_slice(v.key(i)?);
                        Some((k, v.value(i)?.to_vec()))
                    }
                    None => None,
                };
                return Ok((lower, found));
            }
        }
        let mut records = Records::default();
        collect(seen.id, &snapshot, &mut records)?;
        let found = (0..records.len())
            .rev()
            .find(|&i| records.key(i) <= key)
            .map(|i| (records.key(i).to_vec(), records.value(i).to_vec()));
        Ok((lower, found))
    }
}

/// A record's key and value, copied.
type KeyValue = (Vec<u8>, Vec<u8>);

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
    cursor: WalkCursor,
    /// The records copied from the current leaf.
    records: Records,
}

/// Where a walk stands between two leaves ([`BTree::walk_leaf`]).
///
/// Leaves have no sibling pointers: the next leaf is the one holding the smallest key above
/// the last one's upper fence, reached from the last leaf's parent while that is unchanged.
#[derive(Default)]
pub(crate) struct WalkCursor {
    /// The smallest key the next leaf is to show.
    from: Vec<u8>,
    /// The upper fence of the leaf just copied.
    next: Vec<u8>,
    /// A leaf was copied (`from` is its upper fence `++ [0]`).
    started: bool,
    /// Where the last leaf copied hangs.
    prev: Option<ChildPos>,
    /// The walk reached its end key or the last leaf.
    done: bool,
}

impl WalkCursor {
    /// A walk from the first key `>= start`.
    pub(crate) fn new(start: &[u8]) -> WalkCursor {
        let mut c = WalkCursor::default();
        c.reset(start);
        c
    }

    /// Starts over from `start`, keeping the buffers.
    pub(crate) fn reset(&mut self, start: &[u8]) {
        self.from.clear();
        self.from.extend_from_slice(start);
        self.next.clear();
        self.started = false;
        self.prev = None;
        self.done = false;
    }

    /// Whether no leaf is left to copy.
    pub(crate) fn done(&self) -> bool {
        self.done
    }
}

/// Which records a walk wants from its next leaf.
#[derive(Clone, Copy)]
struct Want<'a> {
    /// The smallest key to copy.
    from: &'a [u8],
    /// `from` is the previous leaf's upper fence `++ [0]`, so the walk most likely starts at
    /// this leaf's first record.
    after: bool,
    /// Copy only keys below this.
    end: Option<&'a [u8]>,
    /// Copy at most this many records.
    max: usize,
}

/// What [`BTree::copy_leaf`] found.
struct LeafCopy {
    seen: Seen,
    /// Where the leaf hangs in its parent.
    at: ChildPos,
    /// A record `>= end` was reached: the walk is over.
    ended: bool,
    /// The leaf has an upper fence (a next leaf exists).
    more: bool,
}

/// Appends the records `want` asks for (up to `max`, keys `>= from` and `< end`) of leaf `page`
/// to `out` and its upper fence to `next`. Returns (whether a record `>= end` stopped the copy,
/// whether the leaf has an upper fence). `page` may be read optimistically: everything is
/// bounds-checked and the caller validates before using the result.
fn copy_records(
    id: PageId,
    page: &[u8],
    want: Want<'_>,
    out: &mut Records,
    next: &mut Vec<u8>,
) -> Result<(bool, bool)> {
    let Want {
        from,
        after,
        end,
        max,
    } = want;
    if page[0] == KIND_SEMI_DENSE_LEAF {
        let s = SemiDense::new(id, page)?;
        let keys = SlotKeys::new(s.reference());
        let ended = copy_slots(s.lower_bound(from)..s.slots(), end, max, out, |i, out| {
            Ok(s.value(i)?
                .map(|value| out.push_with(|b| keys.write(i, b), value)))
        })?;
        let upper = s.upper_fence();
        next.extend_from_slice(upper.unwrap_or(&[]));
        return Ok((ended, upper.is_some()));
    }
    if page[0] == KIND_DENSE_LEAF {
        let d = Dense::new(id, page)?;
        let keys = SlotKeys::new(d.reference());
        let ended = copy_slots(
            d.lower_bound(from)..d.capacity(),
            end,
            max,
            out,
            |i, out| {
                Ok(d.present(i)
                    .then(|| out.push_with(|b| keys.write(i, b), d.value(i))))
            },
        )?;
        let upper = d.upper_fence()?;
        next.extend_from_slice(upper.unwrap_or(&[]));
        return Ok((ended, upper.is_some()));
    }
    let node = Slotted::new(id, page)?;
    let first = first_at_least(&node, from, after)?;
    let prefix = node.prefix()?;
    let stop = node.count().min(first.saturating_add(max));
    // One reservation and one read of the slot array for the leaf, not per record.
    out.reserve_stored(stop.saturating_sub(first), prefix.len(), page.len());
    let mut ended = false;
    for (at, kl, vl) in node.record_fields(first..stop)? {
        let record = page
            .get(at..at + kl + vl)
            .ok_or_else(|| corrupt(id, format!("record at {at} outside the page")))?;
        if end.is_some_and(|end| !less_than(prefix, &record[..kl], end)) {
            ended = true;
            break;
        }
        out.push_stored(prefix, record, kl);
    }
    let upper = node.upper_fence()?;
    next.extend_from_slice(upper.unwrap_or(&[]));
    Ok((ended, upper.is_some()))
}

/// The first slot of the sorted slotted leaf `node` whose key is `>= from`.
///
/// Two shortcuts before the binary search, which in a leaf without heads costs a `memcmp`
/// (and usually a cache miss) per step: when the walk comes from the previous leaf (`after`),
/// the answer is almost always slot 0, which one comparison with the first key (read next
/// anyway) confirms; and a scan usually starts at a stored key, which a fingerprinting leaf
/// finds with its SIMD fingerprint scan and one key comparison. Both fall back to
/// [`Slotted::lower_bound`], so the answer is the same.
#[inline]
fn first_at_least(node: &Slotted<'_>, from: &[u8], after: bool) -> Result<usize> {
    // Keys outside the node's prefix only come from torn reads: leave them to `lower_bound`.
    if let Some(k) = from.get(node.prefix_len()..) {
        if after {
            if node.count() == 0 || cmp_keys(node.key(0)?, k).is_ge() {
                return Ok(0);
            }
        } else if node.kind() == KIND_FP_LEAF {
            if let Some(i) = fingerprint::find(node, k)? {
                return Ok(i);
            }
        }
    }
    Ok(node.lower_bound(from)?.0)
}

/// Copies the records of slots `range` of a fully- or semi-dense leaf into `out`, up to `max`
/// of them and stopping at the first key `>= end`: `slot(i, out)` appends slot `i`'s record
/// when it has one. Returns whether a key `>= end` stopped the copy.
fn copy_slots(
    range: std::ops::Range<usize>,
    end: Option<&[u8]>,
    max: usize,
    out: &mut Records,
    slot: impl Fn(usize, &mut Records) -> Result<Option<()>>,
) -> Result<bool> {
    for i in range {
        if out.len() >= max {
            break;
        }
        if slot(i, out)?.is_none() {
            continue;
        }
        if end.is_some_and(|end| out.key(out.len() - 1) >= end) {
            out.pop();
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::{first_at_least, less_than};
    use crate::btree::leaf::fences;
    use crate::btree::{BTree, Options};
    use crate::page::build::{Builder, NodeSpec};
    use crate::page::slotted::{Slotted, FLAG_HEADS, FLAG_HINTS};
    use crate::page::{KIND_FP_LEAF, KIND_LEAF};

    /// `first_at_least` agrees with `lower_bound` for stored keys, keys between them, keys
    /// past either end and the previous leaf's upper fence `++ [0]`, on fingerprinting and
    /// comparison leaves, with and without a truncated prefix.
    #[test]
    fn first_at_least_matches_lower_bound() {
        let stored: Vec<Vec<u8>> = (0..60u32)
            .map(|i| {
                format!("https://site/{:04}/{}", i * 3, "x".repeat(i as usize % 7)).into_bytes()
            })
            .collect();
        for (kind, flags) in [(KIND_FP_LEAF, 0), (KIND_LEAF, FLAG_HEADS | FLAG_HINTS)] {
            for truncate in [false, true] {
                let (lower, upper) = (b"https://site/".as_slice(), b"https://site/9".as_slice());
                let spec = NodeSpec {
                    kind,
                    flags,
                    prefix_truncation: truncate,
                    lower,
                    upper: Some(upper),
                    upper_child: 0,
                    op_counter: 0,
                };
                let mut page = vec![0u8; 8192];
                let mut b = Builder::new(&mut page, &spec).unwrap();
                for (i, k) in stored.iter().enumerate() {
                    assert!(b.push(k, &[], &(i as u64).to_le_bytes()));
                }
                b.finish();
                let node = Slotted::new(7, &page).unwrap();
                assert_eq!(node.count(), stored.len());
                let mut probes: Vec<Vec<u8>> = vec![[lower, &[0][..]].concat(), upper.to_vec()];
                for k in &stored {
                    probes.push(k.clone());
                    probes.push([k.as_slice(), &[0][..]].concat());
                    probes.push(k[..k.len() - 1].to_vec());
                }
                for from in &probes {
                    let want = node.lower_bound(from).unwrap().0;
                    assert_eq!(
                        first_at_least(&node, from, false).unwrap(),
                        want,
                        "{from:?}"
                    );
                    assert_eq!(first_at_least(&node, from, true).unwrap(), want, "{from:?}");
                }
            }
        }
    }

    /// `next_child` reaches, from each leaf, the leaf a descent with the leaf's upper fence
    /// `++ [0]` finds, as long as the parent is unchanged; it declines (`None`) for the last
    /// child of a parent and once the parent changed.
    #[test]
    fn next_child_is_the_leaf_after_the_upper_fence() {
        for layout in ["baseline", "fingerprint", "adaptive"] {
            let mut o = Options::default();
            o.set("layout", layout).unwrap();
            let t = BTree::new(o).unwrap();
            for i in 0..20_000u32 {
                let k = format!("https://host{}.example/{i:08}", i % 7);
                t.put(k.as_bytes(), &i.to_le_bytes()).unwrap();
            }
            let (mut stepped, mut declined) = (0, 0);
            let mut from = Vec::new();
            let mut d = ok(t.find_leaf_at(&from));
            loop {
                let page = ok(t.page(d.id));
                let (_, upper) = fences(d.id, page).unwrap();
                let Some(upper) = upper else { break };
                from.clear();
                from.extend_from_slice(&upper);
                from.push(0);
                let by_descent = ok(t.find_leaf_at(&from));
                match ok(t.next_child(d.parent)) {
                    Some(n) => {
                        assert_eq!(n.id, by_descent.id, "{layout}");
                        assert_eq!(n.version, by_descent.version, "{layout}");
                        assert_eq!(n.parent.id, by_descent.parent.id, "{layout}");
                        assert_eq!(n.parent.slot, by_descent.parent.slot, "{layout}");
                        stepped += 1;
                    }
                    None => {
                        // Only where the leaf was its parent's last child.
                        assert_ne!(d.parent.id, by_descent.parent.id, "{layout}");
                        declined += 1;
                    }
                }
                d = by_descent;
            }
            assert!(
                stepped > 100 && declined > 0,
                "{layout}: {stepped} {declined}"
            );
            // After the parent changes (a split under it), the old position is not trusted.
            let d = ok(t.find_leaf_at(b"https://host3.example/"));
            for i in 0..2_000u32 {
                let k = format!("https://host3.example/{i:08}x");
                t.put(k.as_bytes(), &i.to_le_bytes()).unwrap();
            }
            assert!(ok(t.next_child(d.parent)).is_none(), "{layout}");
            t.check().unwrap();
        }
    }

    fn ok<T>(r: crate::sync::Olc<T>) -> T {
        match r {
            Ok(t) => t,
            Err(_) => panic!("restart or error in a single-threaded test"),
        }
    }

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
