//! `NbTree::check`: the structure's invariants, verified against the pages on disk.
//!
//! - s-tree: s-keys ascending and inside the node's range; inner nodes have keys + 1 children,
//!   at most `f` (at least ⌈f/2⌉ below the root); every leaf at the same depth.
//! - d-trees: every page of the run read and its checksum and kind verified; leaf records in
//!   strictly ascending order; counts and bytes equal the extent's; the live part (from the
//!   start pointer) equals the s-node's live counts and lies in the s-node's range
//!   (cross-s-node linkage); no tombstone in a leaf s-node's d-tree; no Bloom false negative.
//! - siblings' live bytes together at most (f + 2)·σ plus f of the largest records (§5.1's
//!   f(σ + 1), with the root's flush moving up to 2σ after a commit that was not full: the
//!   module docs' departures).
//! - pages: no two runs share a page; every page of the file is in a live run, the manifest or
//!   free (live ∪ free = file).

use std::sync::atomic::Ordering;

use super::engine::collect_runs;
use super::stree::{is_put, SNode};
use super::NbTree;
use crate::error::{Error, Result};
use crate::io::page_header::PageKind;
use crate::io::FIRST_DATA_PAGE;

/// What [`NbTree::check`] found (it returns an error for anything wrong).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NbCheckReport {
    /// s-nodes.
    pub s_nodes: u64,
    /// d-trees (non-empty s-nodes).
    pub d_trees: u64,
    /// Levels of the s-tree.
    pub height: u64,
    /// Records stored in d-trees (live parts, tombstones and shadowed versions included).
    pub d_records: u64,
    /// Pages of live runs.
    pub run_pages: u64,
    /// The most live bytes a group of siblings holds together, and the most one d-tree holds.
    pub max_sibling_bytes: u64,
    /// The most live bytes one s-node's d-tree holds.
    pub max_dtree_bytes: u64,
}

fn bad(detail: String) -> Error {
    Error::Corruption { page: 0, detail }
}

struct Checker {
    fanout: usize,
    sigma: u64,
    report: NbCheckReport,
    leaf_depth: Option<u64>,
}

impl Checker {
    fn node(&mut self, n: &SNode, lo: &[u8], hi: &[u8], depth: u64, root: bool) -> Result<()> {
        self.report.s_nodes += 1;
        self.report.height = self.report.height.max(depth + 1);
        let in_range = |k: &[u8]| k >= lo && (hi.is_empty() || k < hi);
        for (i, k) in n.keys.iter().enumerate() {
            if !in_range(k) || (i > 0 && n.keys[i - 1] >= *k) {
                return Err(bad(format!(
                    "s-key {k:?} out of order or outside its range"
                )));
            }
        }
        if n.is_leaf() {
            if !n.keys.is_empty() {
                return Err(bad("a leaf s-node with s-keys".into()));
            }
            match self.leaf_depth {
                None => self.leaf_depth = Some(depth),
                Some(d) if d != depth => {
                    return Err(bad(format!("leaves at depths {d} and {depth}")))
                }
                _ => {}
            }
        } else {
            let c = n.children.len();
            let min = if root { 2 } else { self.fanout.div_ceil(2) };
            if c != n.keys.len() + 1 || c > self.fanout || c < min {
                return Err(bad(format!(
                    "an s-node with {} s-keys and {c} children (f = {})",
                    n.keys.len(),
                    self.fanout
                )));
            }
            let siblings: u64 = n.children.iter().map(|c| c.live_bytes).sum();
            self.report.max_sibling_bytes = self.report.max_sibling_bytes.max(siblings);
            let max_rec = n
                .children
                .iter()
                .filter_map(|c| c.dtree.as_ref().map(|d| u64::from(d.extent.max_record)))
                .max()
                .unwrap_or(0);
            let limit = (self.fanout as u64 + 2) * self.sigma + self.fanout as u64 * max_rec;
            if siblings > limit {
                return Err(bad(format!(
                    "siblings at depth {} hold {siblings} live bytes, over {limit}: {:?} (leaves: {})",
                    depth + 1,
                    n.children.iter().map(|c| c.live_bytes).collect::<Vec<_>>(),
                    n.children[0].is_leaf()
                )));
            }
        }
        self.dtree(n, lo, hi)?;
        for (i, c) in n.children.iter().enumerate() {
            let clo = if i == 0 { lo } else { n.keys[i - 1].as_slice() };
            let chi = n.keys.get(i).map_or(hi, |k| k.as_slice());
            self.node(c, clo, chi, depth + 1, false)?;
        }
        Ok(())
    }

    fn dtree(&mut self, n: &SNode, lo: &[u8], hi: &[u8]) -> Result<()> {
        let Some(d) = &n.dtree else {
            if n.live_records != 0 || n.live_bytes != 0 {
                return Err(bad("live records without a d-tree".into()));
            }
            return Ok(());
        };
        self.report.d_trees += 1;
        self.report.max_dtree_bytes = self.report.max_dtree_bytes.max(n.live_bytes);
        let e = d.extent;
        let (mut records, mut bytes, mut live, mut live_bytes) = (0u64, 0u64, 0u64, 0u64);
        let mut prev: Option<Vec<u8>> = None;
        let mut c = d.cursor(&[], true)?;
        while let Some((k, v)) = c.next_record()? {
            if prev.as_deref().is_some_and(|p| p >= k) {
                return Err(bad(format!("d-tree at {} out of order at {k:?}", e.first)));
            }
            if !d.may_contain(super::bloom::hash(k)) {
                return Err(bad(format!(
                    "Bloom false negative in d-tree at {}",
                    e.first
                )));
            }
            records += 1;
            bytes += (k.len() + v.len()) as u64;
            if k >= n.start.as_slice() {
                live += 1;
                live_bytes += (k.len() + v.len()) as u64;
                if !(k >= lo && (hi.is_empty() || k < hi)) {
                    return Err(bad(format!(
                        "d-key {k:?} outside its s-node's range (linkage)"
                    )));
                }
                if n.is_leaf() && !is_put(v) {
                    return Err(bad("a tombstone in a leaf s-node's d-tree".into()));
                }
            }
            prev = Some(k.to_vec());
        }
        if records != e.records
            || bytes != e.bytes
            || live != n.live_records
            || live_bytes != n.live_bytes
        {
            return Err(bad(format!(
                "d-tree at {}: {records} records of {bytes} bytes ({live} live, {live_bytes} bytes) \
                 against {e:?} and live {} / {}",
                e.first, n.live_records, n.live_bytes
            )));
        }
        self.report.d_records += records;
        let file = d.file();
        let (leaves, inners) = (u64::from(e.leaf_pages), u64::from(e.inner_pages));
        let mut buf = file.buffer(1);
        for l in leaves..e.pages() {
            let kind = if l < leaves + inners {
                PageKind::DTreeInner
            } else {
                PageKind::Bloom
            };
            let id = d.page_id(l).ok_or_else(|| {
                bad(format!(
                    "d-tree at {}: page {l} outside its pieces",
                    e.first
                ))
            })?;
            file.read_page(id, &mut buf, kind)?;
        }
        Ok(())
    }
}

impl NbTree {
    /// Commits, then verifies the structure and every live page (the invariants listed in `nbtree/check.rs`).
    /// Run it on a quiet store.
    pub fn check(&self) -> Result<NbCheckReport> {
        self.checkpoint()?;
        let e = self.durable.engine();
        let v = e.version();
        let mut ck = Checker {
            fanout: e.params.fanout,
            sigma: e.params.sigma,
            report: NbCheckReport::default(),
            leaf_depth: None,
        };
        ck.node(&v.root, &[], &[], 0, true)?;
        let mut runs = Vec::new();
        collect_runs(&v.root, &mut runs);
        runs.extend(e.manifest_runs());
        runs.sort_unstable();
        for w in runs.windows(2) {
            if w[0].0 + w[0].1 > w[1].0 {
                return Err(bad(format!("runs {:?} and {:?} share pages", w[0], w[1])));
            }
        }
        let file = &e.file;
        let mut next = runs.iter().peekable();
        let mut id = FIRST_DATA_PAGE;
        while id < file.page_count() {
            if let Some(&&(first, n)) = next.peek() {
                if id >= first {
                    for p in first..first + n {
                        if file.is_free(p) {
                            return Err(bad(format!("page {p} of a live run is free")));
                        }
                    }
                    ck.report.run_pages += n;
                    id = first + n;
                    next.next();
                    continue;
                }
            }
            if !file.is_free(id) {
                return Err(bad(format!("page {id} is neither in a live run nor free")));
            }
            id += 1;
        }
        let _ = e.lookups.load(Ordering::Relaxed);
        Ok(ck.report)
    }
}
