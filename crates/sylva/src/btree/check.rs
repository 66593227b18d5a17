//! The structural check: every node of the tree, validated against the invariants of
//! `page::slotted`, `page::fingerprint`, `page::semidense` and `page::dense` and of the tree (fences match the parent's separators, all leaves at one
//! depth, the record count matches).
//!
//! Meant for a quiescent tree (tests, `sylva check`); it reads pages without validating
//! latches, so running it concurrently with writers may report spurious errors.

use super::store::{NodeLatch, NodeStore};
use super::tree::{retry, BTree};
use crate::error::{Error, Result};
use crate::page::dense::{self, Dense, KIND_DENSE_LEAF};
use crate::page::fingerprint::fingerprint;
use crate::page::semidense::{self, SemiDense, KIND_SEMI_DENSE_LEAF};
use crate::page::slotted::{Slotted, FLAG_HINTS, HINT_COUNT};
use crate::page::{common_prefix, corrupt, head, PageId, KIND_FP_LEAF, KIND_INNER, KIND_LEAF};

/// What `check` counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Records in leaves.
    pub records: u64,
    /// Leaf pages.
    pub leaves: u64,
    /// Inner pages (excluding the metadata page).
    pub inner: u64,
    /// Levels from the root to the leaves (1 for a lone leaf).
    pub height: u32,
    /// Leaves in the fingerprinting layout.
    pub fingerprint_leaves: u64,
    /// Leaves in the fully-dense layout.
    pub dense_leaves: u64,
    /// Leaves in the semi-dense layout.
    pub semi_dense_leaves: u64,
}

impl<S: NodeStore> BTree<S> {
    /// Validates every node; `Err(Corruption)` names the first page that breaks an invariant.
    pub fn check(&self) -> Result<CheckReport> {
        let meta_page = self.page_plain(self.meta)?;
        let meta = Slotted::new(self.meta, &meta_page)?;
        if meta.kind() != KIND_INNER || meta.count() != 0 {
            return Err(corrupt(
                self.meta,
                "metadata page is not an empty inner node",
            ));
        }
        let mut report = CheckReport::default();
        let mut leaf_depth = None;
        self.check_node(
            meta.upper_child(),
            &[],
            None,
            1,
            &mut leaf_depth,
            &mut report,
        )?;
        report.height = leaf_depth.unwrap_or(0);
        let counted = self.records.load(std::sync::atomic::Ordering::Relaxed);
        if report.records != counted {
            return Err(corrupt(
                self.meta,
                format!(
                    "leaves hold {} records, the tree counts {counted}",
                    report.records
                ),
            ));
        }
        Ok(report)
    }

    /// A validated copy of page `id` (a paged store loads it first).
    fn page_plain(&self, id: PageId) -> Result<Vec<u8>> {
        retry(|| {
            let l = self.latch(id)?;
            let v = l.read_lock()?;
            let copy = self.page(id)?.to_vec();
            l.validate(v)?;
            Ok(copy)
        })
        .map_err(|e| match e {
            Error::InvalidArgument { .. } => corrupt(id, "page id out of range"),
            e => e,
        })
    }

    /// Levels from the root to the leaves (1 for a lone leaf), following upper children.
    pub fn height(&self) -> Result<u32> {
        let meta = self.page_plain(self.meta)?;
        let mut id = Slotted::new(self.meta, &meta)?.upper_child();
        let mut height = 1;
        loop {
            let page = &self.page_plain(id)?[..];
            if page[0] != KIND_INNER {
                return Ok(height);
            }
            id = Slotted::new(id, page)?.upper_child();
            height += 1;
            if height > 64 {
                return Err(corrupt(id, "the tree is deeper than 64 levels (a cycle?)"));
            }
        }
    }

    fn check_node(
        &self,
        id: PageId,
        lower: &[u8],
        upper: Option<&[u8]>,
        depth: u32,
        leaf_depth: &mut Option<u32>,
        report: &mut CheckReport,
    ) -> Result<()> {
        if depth > 64 {
            return Err(corrupt(id, "tree deeper than 64 levels (a cycle?)"));
        }
        let bad = |what: String| Err(corrupt(id, what));
        let page = &self.page_plain(id)?[..];
        if page.first() == Some(&KIND_DENSE_LEAF) {
            self.check_leaf_depth(id, depth, leaf_depth)?;
            return self.check_dense(id, page, lower, upper, report);
        }
        if page.first() == Some(&KIND_SEMI_DENSE_LEAF) {
            self.check_leaf_depth(id, depth, leaf_depth)?;
            return self.check_semi_dense(id, page, lower, upper, report);
        }
        let node = Slotted::new(id, page)?;
        if node.lower_fence()? != lower || node.upper_fence()? != upper {
            return bad("fences differ from the parent's separators".into());
        }
        let want_flags = if node.kind() == KIND_FP_LEAF {
            0
        } else {
            self.flags
        };
        if node.flags() & !crate::page::slotted::FLAG_UPPER_INF != want_flags {
            return bad(format!(
                "flags {:#04x} differ from the tree's",
                node.flags()
            ));
        }
        let want_prefix = match upper {
            Some(u) if self.truncate => common_prefix(lower, u),
            _ => 0,
        };
        if node.prefix_len() != want_prefix {
            return bad(format!(
                "prefix length {} but the fences share {want_prefix}",
                node.prefix_len()
            ));
        }
        // Heap accounting and record placement.
        let mut extents = Vec::with_capacity(node.count() + 2);
        let mut used = lower.len() + upper.map_or(0, <[u8]>::len) + node.fp_capacity();
        if node.fp_capacity() > 0 {
            let at = crate::page::slotted::rd16(node.bytes(), crate::page::slotted::off::FP_OFF);
            if at < node.heap_start() {
                return bad("fingerprint array lies below the heap start".into());
            }
            extents.push((at, at + node.fp_capacity()));
        }
        for i in 0..node.count() {
            let (kl, vl) = node.lens(i);
            node.key(i)?;
            node.value(i)?;
            used += kl + vl;
            if kl + vl > 0 {
                let at = node.record_offset(i);
                if at < node.heap_start() {
                    return bad(format!("record {i} lies below the heap start"));
                }
                extents.push((at, at + kl + vl));
            }
        }
        if used != node.heap_used() {
            return bad(format!(
                "heap_used {} but live records and fences take {used}",
                node.heap_used()
            ));
        }
        extents.sort_unstable();
        if extents.windows(2).any(|w| w[0].1 > w[1].0) {
            return bad("records overlap on the heap".into());
        }
        // Order, range, heads, hints.
        let prefix = node.prefix()?;
        let mut prev: Option<Vec<u8>> = None;
        for i in 0..node.count() {
            let k = node.key(i)?;
            let mut full = prefix.to_vec();
            full.extend_from_slice(k);
            if full.as_slice() <= lower || upper.is_some_and(|u| full.as_slice() > u) {
                return bad(format!("key {i} outside the node's fences"));
            }
            if i < node.sorted() && prev.as_ref().is_some_and(|p| p >= &full) {
                return bad(format!("key {i} not greater than its predecessor"));
            }
            if node.kind() == KIND_FP_LEAF && node.fingerprints().get(i) != Some(&fingerprint(k)) {
                return bad(format!("fingerprint of slot {i} differs from its key"));
            }
            if node.has_heads() && node.stored_head(i) != head(k) {
                return bad(format!("head of slot {i} differs from its key"));
            }
            prev = Some(full);
        }
        if node.flags() & FLAG_HINTS != 0 {
            let dist = node.count() / (HINT_COUNT + 1);
            for i in 0..HINT_COUNT {
                let want = if dist == 0 {
                    0
                } else {
                    node.stored_head(dist * (i + 1))
                };
                if node.hint(i) != want {
                    return bad(format!("hint {i} is stale"));
                }
            }
        }
        match node.kind() {
            KIND_LEAF | KIND_FP_LEAF => {
                if node.kind() != self.leaf_kind && !self.adaptive {
                    return bad(format!(
                        "leaf kind {} in a tree of kind {}",
                        node.kind(),
                        self.leaf_kind
                    ));
                }
                if node.sorted() < node.count() {
                    let mut keys: Vec<&[u8]> = (0..node.count())
                        .map(|i| node.key(i))
                        .collect::<Result<_>>()?;
                    keys.sort_unstable();
                    if keys.windows(2).any(|w| w[0] == w[1]) {
                        return bad("duplicate key in the unsorted tail".into());
                    }
                }
                self.check_leaf_depth(id, depth, leaf_depth)?;
                report.leaves += 1;
                report.fingerprint_leaves += u64::from(node.kind() == KIND_FP_LEAF);
                report.records += node.count() as u64;
            }
            KIND_INNER => {
                report.inner += 1;
                let mut lo = lower.to_vec();
                for i in 0..=node.count() {
                    let child = node.child(i)?;
                    if i < node.count() {
                        let mut sep = prefix.to_vec();
                        sep.extend_from_slice(node.key(i)?);
                        self.check_node(child, &lo, Some(&sep), depth + 1, leaf_depth, report)?;
                        lo = sep;
                    } else {
                        self.check_node(child, &lo, upper, depth + 1, leaf_depth, report)?;
                    }
                }
            }
            k => return bad(format!("unexpected kind {k}")),
        }
        Ok(())
    }

    fn check_leaf_depth(&self, id: PageId, depth: u32, leaf_depth: &mut Option<u32>) -> Result<()> {
        match *leaf_depth {
            None => *leaf_depth = Some(depth),
            Some(d) if d != depth => {
                return Err(corrupt(id, format!("leaf at depth {depth}, others at {d}")))
            }
            Some(_) => {}
        }
        Ok(())
    }

    fn check_dense(
        &self,
        id: PageId,
        page: &[u8],
        lower: &[u8],
        upper: Option<&[u8]>,
        report: &mut CheckReport,
    ) -> Result<()> {
        let bad = |what: String| Err(corrupt(id, what));
        if !self.dense {
            return bad("dense leaf in a tree without dense leaves".into());
        }
        let d = Dense::new(id, page)?;
        if d.lower_fence() != lower || d.upper_fence()? != upper {
            return bad("fences differ from the parent's separators".into());
        }
        if dense::reference(lower, d.key_len()).as_deref() != Some(d.reference()) {
            return bad("reference key is not the smallest key above the lower fence".into());
        }
        let mut present = 0;
        let mut last = Vec::new();
        for i in (0..d.capacity()).filter(|&i| d.present(i)) {
            present += 1;
            last.clear();
            d.key_into(i, &mut last);
            if i == 0 && last.as_slice() <= lower {
                return bad("first slot's key not above the lower fence".into());
            }
        }
        if upper.is_some_and(|u| present > 0 && last.as_slice() > u) {
            return bad("a record lies above the upper fence".into());
        }
        if present != d.count() {
            return bad(format!(
                "count {} but {present} slots are present",
                d.count()
            ));
        }
        report.leaves += 1;
        report.dense_leaves += 1;
        report.records += present as u64;
        Ok(())
    }

    fn check_semi_dense(
        &self,
        id: PageId,
        page: &[u8],
        lower: &[u8],
        upper: Option<&[u8]>,
        report: &mut CheckReport,
    ) -> Result<()> {
        let bad = |what: String| Err(corrupt(id, what));
        if !self.semidense {
            return bad("semi-dense leaf in a tree without semi-dense leaves".into());
        }
        let s = SemiDense::new(id, page)?;
        if s.lower_fence() != lower || s.upper_fence() != upper {
            return bad("fences differ from the parent's separators".into());
        }
        // The reference, the base and the slot count all follow from the fences.
        let Some(shape) = semidense::Shape::new(page.len(), lower, upper, s.key_len()) else {
            return bad("the fences admit no semi-dense leaf of this key length".into());
        };
        if shape.reference != s.reference() || dense::numeric(s.reference()) != s.base() {
            return bad("reference key is not the smallest key above the lower fence".into());
        }
        if shape.slots != s.slots() {
            return bad(format!(
                "{} slots but the fences admit {} keys",
                s.slots(),
                shape.slots
            ));
        }
        // Heap accounting and record placement.
        let mut extents = Vec::with_capacity(s.count());
        let mut used = page.len() - s.fixed_start();
        for i in 0..s.slots() {
            let Some(value) = s.value(i)? else {
                continue;
            };
            let at = s.record_offset(i);
            let end = at + semidense::record_len(value.len());
            if at < s.heap_start() || end > s.fixed_start() {
                return bad(format!("record of slot {i} lies outside the heap"));
            }
            extents.push((at, end));
            used += end - at;
        }
        if extents.len() != s.count() {
            return bad(format!(
                "count {} but {} slots hold records",
                s.count(),
                extents.len()
            ));
        }
        if used != s.heap_used() {
            return bad(format!(
                "heap_used {} but live records, fences and reference take {used}",
                s.heap_used()
            ));
        }
        extents.sort_unstable();
        if extents.windows(2).any(|w| w[0].1 > w[1].0) {
            return bad("records overlap on the heap".into());
        }
        report.leaves += 1;
        report.semi_dense_leaves += 1;
        report.records += s.count() as u64;
        Ok(())
    }
}
