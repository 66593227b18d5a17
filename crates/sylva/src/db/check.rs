//! `Db::check` and the walks it relies on: the tree's structure, every bucket of long keys
//! ([`super::buckets`]), every out-of-line value's run ([`super::overflow`]), and every page of
//! the file accounted for exactly once.

use super::{overflow, Db};
use crate::btree::CheckReport;
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::io::FIRST_DATA_PAGE;

impl Db {
    /// Verifies every bucket ([`super::buckets`]: its tree key and bytes decode, its keys are in
    /// order and within the limit) and returns the keys they hold beyond one each.
    fn check_buckets(&self) -> Result<u64> {
        let Some(b) = self.buckets else {
            return Ok(0);
        };
        let (mut extra, mut bad, mut buf) = (0u64, None, Vec::new());
        self.tree().walk(&[], None, usize::MAX, &mut |k, v| {
            if !b.is_bucket_key(k) {
                return true;
            }
            let keys = self
                .scan_value(k, v, &mut buf)
                .and_then(|bucket| match bucket {
                    Some(bucket) => b.decode(k, bucket).map(|e| e.len() as u64),
                    None => Ok(1),
                });
            match keys {
                Ok(n) => {
                    extra += n - 1;
                    true
                }
                Err(e) => {
                    bad = Some(e);
                    false
                }
            }
        })?;
        match bad {
            Some(e) => Err(e),
            None => Ok(extra),
        }
    }

    /// The out-of-line values' references, from a walk of every leaf.
    fn value_refs(&self) -> Result<Vec<overflow::ValueRef>> {
        let mut refs = Vec::new();
        let mut bad = None;
        let tags = self.tags();
        if self.tagged() {
            self.tree().walk(&[], None, usize::MAX, &mut |_, v| {
                if !overflow::is_ref(v, tags) {
                    return true;
                }
                match overflow::classify(v, 0, tags) {
                    Ok(overflow::Stored::Ref(r)) => refs.push(r),
                    Ok(overflow::Stored::Inline(_)) => {}
                    Err(e) => {
                        bad = Some(e);
                        return false;
                    }
                }
                true
            })?;
        }
        match bad {
            Some(e) => Err(e),
            None => Ok(refs),
        }
    }

    /// Checkpoints, then verifies the tree's structure, every bucket of long keys, every
    /// out-of-line value's run (intact,
    /// agreeing with its reference, referenced exactly once, none of its pages free), and that
    /// every page of the file is accounted for exactly once: a meta page, free (or holding the
    /// free space), a run's, or a tree page the tree reaches, each tree page's checksum
    /// verified. Run it on a quiet database: concurrent writers may cause spurious reports.
    pub fn check(&self) -> Result<CheckReport> {
        self.checkpoint()?;
        let file = self.tree().store.pool.file();
        let ps = file.page_size();
        let mut report = self.tree().check()?;
        // A bucket is one record of the tree; the report counts its keys.
        report.records += self.check_buckets()?;
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut scratch = Vec::new();
        for r in self.value_refs()? {
            overflow::check_run(file, r, &mut scratch)?;
            runs.push((r.first, r.pages(ps)));
        }
        runs.sort_unstable();
        for pair in runs.windows(2) {
            if pair[0].0 + pair[0].1 > pair[1].0 {
                return Err(crate::Error::Corruption {
                    page: pair[1].0,
                    detail: format!(
                        "the run at page {} is referenced twice or overlaps the run at page {}",
                        pair[1].0, pair[0].0
                    ),
                });
            }
        }
        let mut frame = file.buffer(1);
        let mut runs_left = runs.iter().peekable();
        let mut tree_pages = 0u64;
        let mut id = FIRST_DATA_PAGE;
        while id < file.page_count() {
            if let Some(&&(first, pages)) = runs_left.peek() {
                if first == id {
                    if let Some(p) = (first..first + pages).find(|&p| file.is_free(p)) {
                        return Err(crate::Error::Corruption {
                            page: p,
                            detail: format!("page of the run at page {first} is free"),
                        });
                    }
                    runs_left.next();
                    id += pages;
                    continue;
                }
            }
            if !file.is_free(id) {
                let h = file.read_frame(id, &mut frame)?;
                if !matches!(h.kind, PageKind::BTreeLeaf | PageKind::BTreeInner) {
                    return Err(crate::Error::Corruption {
                        page: id,
                        detail: format!(
                            "a page in use of kind {:?} that no leaf refers to (a leaked run?)",
                            h.kind
                        ),
                    });
                }
                tree_pages += 1;
            }
            id += 1;
        }
        if runs_left.peek().is_some() {
            return Err(crate::Error::Corruption {
                page: id,
                detail: "a run lies beyond the file's pages".into(),
            });
        }
        // The tree's pages: its leaves and inner nodes, and the metadata node.
        let reached = report.leaves + report.inner + 1;
        if tree_pages != reached {
            return Err(crate::Error::Corruption {
                page: 0,
                detail: format!(
                    "{tree_pages} pages in use are tree pages, but the tree reaches {reached} \
                     (leaked pages)"
                ),
            });
        }
        Ok(report)
    }
}
