//! Leaf splits, merges and layout conversions, over every leaf kind (paper sections 2, 3.5 and
//! 4.6).
//!
//! A leaf that overflows is first offered a cheaper way out than a median split:
//! - a comparison or fingerprinting leaf whose records (and the pending record) meet the
//!   fully-dense preconditions is converted in place (section 3.5: "the creation of a dense node
//!   is attempted whenever a comparison-based leaf would otherwise be split");
//! - a fully-dense leaf asked to take a key past its last slot does the *dense split*: it keeps
//!   every record, lowers its upper fence to the key of its last slot, and a new empty leaf takes
//!   the rest of the range (dense if the pending key fits a dense leaf there, else a comparison
//!   leaf). With fewer than a quarter of its slots used it converts back to the default leaf
//!   kind instead, if that fits;
//! - otherwise ([`LeafPlan::Median`]) the tree first tries a deferred split with a neighbour
//!   (`super::redistribute`, when enabled), and else the records are split. With dense leaves
//!   enabled the *partition-aware* split point comes first: the longest run of records from the
//!   left that could form a dense leaf, used when it reaches the median; else the shortest
//!   separator near the median.
//!
//! Each half is built as a fully-dense leaf when dense leaves are enabled and its records (and
//! the pending record, if it lands there) fit one, else as the tree's default leaf kind.
//!
//! Semi-dense leaves (section 3.5, the `semidense` layout) follow the same pattern:
//! - a comparison leaf that overflows becomes a semi-dense leaf in place when its records and
//!   the pending record fit one (the paper's conversion rule), and each half of a split is built
//!   semi-dense under the same condition;
//! - because a semi-dense leaf's size grows with its key range rather than its records, it is
//!   built only where it takes no more bytes than the comparison leaf would
//!   ([`semi_dense_pays`]). For a full leaf this is implied by "fits"; for split halves and
//!   merges it keeps sparse ranges in comparison leaves (the paper: SDLs appear "as soon as they
//!   are more space efficient than the comparison-based leaves", about 20% density at 8-byte
//!   values);
//! - a semi-dense leaf that cannot take a record (a key of another length, or no room) is
//!   rewritten as a comparison leaf in place when that holds its records and the pending one,
//!   else split at the median like a comparison leaf (no dense split: its slots already cover
//!   its whole range, and the paper applies the dense split and the partition-aware separator
//!   to fully-dense leaves only);
//! - it counts as underfull (a merge candidate) when 3/4 of its page is free, like a slotted
//!   node, or when fewer than one slot in eight holds a record ([`semi_dense_underfull`]).

pub(crate) use super::records::Records;
use super::store::NodeStore;
use super::tree::BTree;
use crate::error::Result;
use crate::page::build::{leaf_separator, Builder, NodeSpec};
use crate::page::dense::{self, Dense, Shape, KIND_DENSE_LEAF};
use crate::page::semidense::{self, SemiDense, KIND_SEMI_DENSE_LEAF};
use crate::page::slotted::{self, Slotted};
use crate::page::{corrupt, head, PageId, KIND_FP_LEAF, KIND_LEAF};

/// Appends every record of a leaf (slotted kinds must be sorted) to `out`, in key order.
pub(crate) fn collect(id: PageId, page: &[u8], out: &mut Records) -> Result<()> {
    if page.first() == Some(&KIND_SEMI_DENSE_LEAF) {
        let s = SemiDense::new(id, page)?;
        for i in 0..s.slots() {
            if let Some(value) = s.value(i)? {
                out.push_with(|b| s.key_into(i, b), value);
            }
        }
        return Ok(());
    }
    if page.first() == Some(&KIND_DENSE_LEAF) {
        let d = Dense::new(id, page)?;
        for i in (0..d.capacity()).filter(|&i| d.present(i)) {
            out.push_with(|b| d.key_into(i, b), d.value(i));
        }
        return Ok(());
    }
    let v = Slotted::new(id, page)?;
    if v.sorted() != v.count() {
        return Err(corrupt(id, "collecting an unsorted leaf"));
    }
    let prefix = v.prefix()?;
    out.reserve_stored(v.count(), prefix.len(), page.len());
    for i in 0..v.count() {
        let (kl, vl) = v.lens(i);
        let at = v.record_offset(i);
        let record = page
            .get(at..at + kl + vl)
            .ok_or_else(|| corrupt(id, format!("record {i} outside the page")))?;
        out.push_stored(prefix, record, kl);
    }
    Ok(())
}

/// What to do with an overflowing leaf.
pub(crate) enum LeafPlan {
    /// Replace the leaf's bytes; no split.
    InPlace(Vec<u8>),
    /// Split: `left` goes to a new page, `right` replaces the leaf, `separator` goes up.
    Split {
        left: Vec<u8>,
        right: Vec<u8>,
        separator: Vec<u8>,
    },
    /// No cheaper way out: an ordinary split of the records
    /// ([`BTree::plan_median_split`]), or a redistribution with a neighbour first.
    Median,
}

/// Fences of a leaf of any kind.
pub(crate) fn fences(id: PageId, page: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    if page.first() == Some(&KIND_SEMI_DENSE_LEAF) {
        let s = SemiDense::new(id, page)?;
        return Ok((
            s.lower_fence().to_vec(),
            s.upper_fence().map(<[u8]>::to_vec),
        ));
    }
    if page.first() == Some(&KIND_DENSE_LEAF) {
        let d = Dense::new(id, page)?;
        return Ok((
            d.lower_fence().to_vec(),
            d.upper_fence()?.map(<[u8]>::to_vec),
        ));
    }
    let v = Slotted::new(id, page)?;
    Ok((
        v.lower_fence()?.to_vec(),
        v.upper_fence()?.map(<[u8]>::to_vec),
    ))
}

impl<S: NodeStore> BTree<S> {
    /// Builds a leaf from `recs[range]` into `dst`: fully dense (or semi-dense) when enabled
    /// and possible (and the pending record, if it belongs here, fits too), else the default
    /// leaf kind. `false` if the records do not fit a page.
    pub(crate) fn build_leaf(
        &self,
        dst: &mut [u8],
        (lower, upper): (&[u8], Option<&[u8]>),
        recs: &Records,
        range: std::ops::Range<usize>,
        pending: Option<(&[u8], usize)>,
        counter: u8,
    ) -> bool {
        if self.semidense {
            return self.build_semi_dense_or_default(dst, (lower, upper), recs, range, pending);
        }
        // Every key of a dense leaf has the same length: records whose first and last keys
        // differ in length cannot form one, so skip building the shape (it allocates).
        let same_len = |r: &std::ops::Range<usize>| {
            recs.key(r.start).len() == recs.key(r.end - 1).len()
                && recs.value(r.start).len() == recs.value(r.end - 1).len()
        };
        let shape = match (self.dense, range.is_empty()) {
            (true, false) if same_len(&range) => Shape::new(
                dst.len(),
                lower,
                upper,
                recs.key(range.start).len(),
                recs.value(range.start).len(),
            ),
            _ => None,
        };
        let records = || range.clone().map(|i| (recs.key(i), recs.value(i)));
        if let Some(shape) = &shape {
            let pending_fits =
                pending.is_none_or(|(k, vl)| vl == shape.value_len && shape.slot_of(k).is_some());
            if pending_fits && dense::build(dst, shape, lower, upper, 0, records()) {
                return true;
            }
        }
        if self.build_default_leaf(dst, lower, upper, recs, range.clone(), counter) {
            return true;
        }
        // Too many records for the default kind: stay dense even though the pending record does
        // not fit; the insert will split this leaf again (halving until the default kind fits).
        shape.is_some_and(|shape| dense::build(dst, &shape, lower, upper, 0, records()))
    }

    /// Decides how leaf `id` (write-latched, fingerprint tail already sorted) makes room for
    /// `key` with a value of `value_len` bytes: a layout conversion in place, a dense split, or
    /// [`LeafPlan::Median`].
    pub(crate) fn plan_leaf_split(
        &self,
        id: PageId,
        page: &[u8],
        key: &[u8],
        value_len: usize,
    ) -> Result<LeafPlan> {
        let (ps, pending) = (page.len(), Some((key, value_len)));
        let (lower, upper) = fences(id, page)?;
        let counter = op_counter(page);
        let mut recs = Records::default();
        if page[0] == KIND_DENSE_LEAF {
            collect(id, page, &mut recs)?;
            let d = Dense::new(id, page)?;
            let shape = d.shape();
            let mut last = Vec::new();
            d.key_into(d.capacity() - 1, &mut last);
            let nn = shape.key_len.saturating_sub(4);
            let beyond = key.len() == shape.key_len
                && value_len == shape.value_len
                && key[..nn] == shape.reference[..nn]
                && key > last.as_slice();
            if beyond && d.count() * 4 >= d.capacity() {
                // Dense split: keep every record, hand the range past the last slot to a new
                // empty leaf.
                let separator = last;
                let mut left = vec![0u8; ps];
                if !dense::build(
                    &mut left,
                    &shape,
                    &lower,
                    Some(&separator),
                    d.op_counter(),
                    recs.iter(),
                ) {
                    return Err(corrupt(id, "dense leaf does not fit its own shape"));
                }
                let mut right = vec![0u8; ps];
                if !self.build_leaf(
                    &mut right,
                    (&separator, upper.as_deref()),
                    &recs,
                    0..0,
                    None,
                    counter,
                ) {
                    return Err(corrupt(id, "empty leaf does not fit"));
                }
                if self.dense {
                    if let Some(s) =
                        Shape::new(ps, &separator, upper.as_deref(), key.len(), value_len)
                    {
                        if s.slot_of(key).is_some() {
                            dense::build(
                                &mut right,
                                &s,
                                &separator,
                                upper.as_deref(),
                                0,
                                std::iter::empty(),
                            );
                        }
                    }
                }
                return Ok(LeafPlan::Split {
                    left,
                    right,
                    separator,
                });
            }
        }
        if page[0] == KIND_DENSE_LEAF || page[0] == KIND_SEMI_DENSE_LEAF {
            // Not a dense split: back to the default kind in place if it fits (a semi-dense leaf
            // only if the pending record fits too; else a split, whose halves may stay
            // semi-dense).
            if page[0] == KIND_SEMI_DENSE_LEAF {
                collect(id, page, &mut recs)?;
            }
            let mut page2 = vec![0u8; ps];
            let n = recs.len();
            if self.build_default_leaf(&mut page2, &lower, upper.as_deref(), &recs, 0..n, counter)
                && (page[0] == KIND_DENSE_LEAF || has_room(id, &page2, key, value_len))
            {
                return Ok(LeafPlan::InPlace(page2));
            }
        } else if (self.dense
            && may_become_dense(id, page, (&lower, upper.as_deref()), key, value_len)?)
            || self.semidense
        {
            // Conversion to a dense or semi-dense leaf in place, when everything (the pending
            // record too) fits one.
            collect(id, page, &mut recs)?;
            let mut out = vec![0u8; ps];
            if recs.len() > 0
                && self.build_leaf(
                    &mut out,
                    (&lower, upper.as_deref()),
                    &recs,
                    0..recs.len(),
                    pending,
                    counter,
                )
                && (out[0] == KIND_DENSE_LEAF || out[0] == KIND_SEMI_DENSE_LEAF)
            {
                return Ok(LeafPlan::InPlace(out));
            }
        }
        Ok(LeafPlan::Median)
    }

    /// The ordinary split of leaf `id` (write-latched, fingerprint tail already sorted) for a
    /// pending `key` with a value of `value_len` bytes: at the partition-aware split point when
    /// dense leaves are enabled and it applies, else at the shortest separator near the median.
    pub(crate) fn plan_median_split(
        &self,
        id: PageId,
        page: &[u8],
        key: &[u8],
        value_len: usize,
    ) -> Result<LeafPlan> {
        let (ps, pending) = (page.len(), Some((key, value_len)));
        let mut recs = Records::default();
        collect(id, page, &mut recs)?;
        let (lower, upper) = fences(id, page)?;
        let counter = op_counter(page);
        let n = recs.len();
        if n < 2 {
            return Err(corrupt(id, "leaf with fewer than two records cannot split"));
        }
        let (split, separator) = match self
            .dense
            .then(|| partition_point(ps, &lower, &recs))
            .flatten()
        {
            Some(p) => p,
            None => leaf_separator(n, |i| Ok(recs.key(i)))?,
        };
        let (pl, pr) = if key <= separator.as_slice() {
            (pending, None)
        } else {
            (None, pending)
        };
        let (mut left, mut right) = (vec![0u8; ps], vec![0u8; ps]);
        if !self.build_leaf(
            &mut left,
            (&lower, Some(&separator)),
            &recs,
            0..split,
            pl,
            counter,
        ) || !self.build_leaf(
            &mut right,
            (&separator, upper.as_deref()),
            &recs,
            split..n,
            pr,
            counter,
        ) {
            return Err(corrupt(id, "split halves do not fit a page"));
        }
        Ok(LeafPlan::Split {
            left,
            right,
            separator,
        })
    }

    /// [`Self::build_leaf`] in the `semidense` layout: a semi-dense leaf when the records have
    /// equal-length keys that fit one and it pays ([`semi_dense_pays`]), with room for the
    /// pending record if it lands here; else a comparison leaf; else (too many records for a
    /// comparison leaf) a semi-dense leaf without that room, which the insert will split again.
    fn build_semi_dense_or_default(
        &self,
        dst: &mut [u8],
        (lower, upper): (&[u8], Option<&[u8]>),
        recs: &Records,
        range: std::ops::Range<usize>,
        pending: Option<(&[u8], usize)>,
    ) -> bool {
        let records = || range.clone().map(|i| (recs.key(i), recs.value(i)));
        let prefix_len = match (self.truncate, upper) {
            (true, Some(u)) => crate::page::common_prefix(lower, u),
            _ => 0,
        };
        let shape = (!range.is_empty())
            .then(|| semidense::Shape::new(dst.len(), lower, upper, recs.key(range.start).len()))
            .flatten()
            .filter(|s| semi_dense_pays(range.len(), s.slots, s.key_len, self.flags, prefix_len));
        if let Some(shape) = &shape {
            let reserve = match pending {
                None => Some(0),
                Some((k, vl)) => shape.slot_of(k).map(|_| semidense::record_len(vl)),
            };
            if let Some(reserve) = reserve {
                if semidense::build(dst, shape, (lower, upper), 0, records(), reserve) {
                    return true;
                }
            }
        }
        if self.build_default_leaf(dst, lower, upper, recs, range.clone(), 0) {
            return true;
        }
        shape.is_some_and(|shape| semidense::build(dst, &shape, (lower, upper), 0, records(), 0))
    }

    /// Builds a comparison or fingerprinting leaf from `recs[range]`. Outside the adaptive
    /// layout the kind is the layout's. In the adaptive layout this is the key-adaption of
    /// section 5.1: keys whose heads are good (adjacent equal heads at most one per 16 records)
    /// get a comparison leaf with the operation counter disabled (255); other keys get a
    /// fingerprinting leaf unless the inherited counter says scans are common (≥ 2).
    pub(crate) fn build_default_leaf(
        &self,
        dst: &mut [u8],
        lower: &[u8],
        upper: Option<&[u8]>,
        recs: &Records,
        range: std::ops::Range<usize>,
        counter: u8,
    ) -> bool {
        let mut spec = NodeSpec {
            kind: self.leaf_kind,
            flags: self.flags,
            prefix_truncation: self.truncate,
            lower,
            upper,
            upper_child: 0,
            op_counter: 0,
        };
        if self.adaptive {
            let p = spec.prefix_len();
            // One head per record, compared with the previous one.
            let mut heads = range
                .clone()
                .map(|i| head(recs.key(i).get(p..).unwrap_or(&[])));
            let mut collisions = 0;
            if let Some(mut prev) = heads.next() {
                for h in heads {
                    collisions += usize::from(h == prev);
                    prev = h;
                }
            }
            if collisions * 16 <= range.len() {
                spec.kind = KIND_LEAF;
                spec.op_counter = COUNTER_DISABLED;
            } else {
                let c = if counter == COUNTER_DISABLED {
                    0
                } else {
                    counter.min(3)
                };
                spec.kind = if c < 2 { KIND_FP_LEAF } else { KIND_LEAF };
                spec.op_counter = c;
            }
        }
        let Some(mut b) = Builder::new(dst, &spec) else {
            return false;
        };
        for i in range {
            if !b.push(recs.key(i), &[], recs.value(i)) {
                return false;
            }
        }
        b.finish();
        true
    }

    /// Merges neighbouring leaves into one page image, if the union fits.
    pub(crate) fn plan_leaf_merge(
        &self,
        left: (PageId, &[u8]),
        right: (PageId, &[u8]),
    ) -> Result<Option<Vec<u8>>> {
        let (lower, _) = fences(left.0, left.1)?;
        let (_, upper) = fences(right.0, right.1)?;
        let mut recs = Records::default();
        recs.reserve_pages(2, left.1.len());
        collect(left.0, left.1, &mut recs)?;
        collect(right.0, right.1, &mut recs)?;
        let mut out = vec![0u8; left.1.len()];
        Ok(self
            .build_leaf(
                &mut out,
                (&lower, upper.as_deref()),
                &recs,
                0..recs.len(),
                None,
                op_counter(right.1),
            )
            .then_some(out))
    }
}

/// Whether a sorted comparison or fingerprinting leaf could become a fully-dense leaf holding
/// its records and the pending one: a cheap necessary condition (the smallest and the largest
/// key and the pending one have slots in the dense shape the fences allow), checked before the
/// records are collected and a dense page is attempted.
fn may_become_dense(
    id: PageId,
    page: &[u8],
    (lower, upper): (&[u8], Option<&[u8]>),
    key: &[u8],
    value_len: usize,
) -> Result<bool> {
    let v = Slotted::new(id, page)?;
    let Some(last) = v.count().checked_sub(1) else {
        return Ok(false);
    };
    // Dense keys all have one length: compare lengths before copying keys.
    let key_len = v.lens(0).0 + v.prefix_len();
    if v.lens(last).0 + v.prefix_len() != key_len || key.len() != key_len {
        return Ok(false);
    }
    let (mut first_key, mut last_key) = (Vec::new(), Vec::new());
    v.full_key_into(0, &mut first_key)?;
    v.full_key_into(last, &mut last_key)?;
    let Some(shape) = Shape::new(page.len(), lower, upper, first_key.len(), v.value(0)?.len())
    else {
        return Ok(false);
    };
    Ok(value_len == shape.value_len
        && [&first_key[..], &last_key, key]
            .iter()
            .all(|k| shape.slot_of(k).is_some()))
}

/// The adaptive policy's operation counter of a leaf of any kind.
pub(crate) fn op_counter(page: &[u8]) -> u8 {
    let at = match page.first() {
        Some(&KIND_DENSE_LEAF) => 20,
        Some(&KIND_SEMI_DENSE_LEAF) => 24,
        _ => 22,
    };
    page.get(at).copied().unwrap_or(0)
}

/// Whether a slotted leaf `page` has room for a record with this full key and value length.
fn has_room(id: PageId, page: &[u8], key: &[u8], value_len: usize) -> bool {
    Slotted::new(id, page).is_ok_and(|v| {
        let fingerprint = usize::from(v.kind() == KIND_FP_LEAF);
        let stored = key.len().saturating_sub(v.prefix_len());
        v.free_space_after_compaction() >= v.record_space(stored, value_len) + fingerprint
    })
}

/// Whether semi-dense leaf `page` is empty enough to merge: 3/4 of its page free (as for a
/// slotted node), or fewer than one slot in eight in use (below the density where a semi-dense
/// leaf stops paying for its empty slots; the merge rebuilds whatever layout is smaller).
pub(crate) fn semi_dense_underfull(id: PageId, page: &[u8]) -> Result<bool> {
    let s = SemiDense::new(id, page)?;
    Ok(s.free_space_after_compaction() >= page.len() * 3 / 4 || s.count() * 8 < s.slots())
}

/// Whether a semi-dense leaf with `slots` slots for `count` records of `key_len`-byte keys takes
/// no more bytes than a comparison leaf with page flags `flags` and keys stored without
/// `prefix_len` bytes (values and fences cost the same in both, apart from the 2-byte length
/// prefix of a semi-dense record).
pub(crate) fn semi_dense_pays(
    count: usize,
    slots: usize,
    key_len: usize,
    flags: u8,
    prefix_len: usize,
) -> bool {
    let semi = semidense::HEADER_LEN
        + semidense::SLOT_LEN * slots
        + key_len
        + count * semidense::record_len(0);
    let comparison = slotted::header_len(flags)
        + count * (slotted::slot_len(flags) + key_len.saturating_sub(prefix_len));
    semi <= comparison
}

/// The counter value that disables operation adaption (good heads).
pub(crate) const COUNTER_DISABLED: u8 = 255;

/// The partition-aware split point (section 4.6): the longest run of records from the left that
/// fits one dense leaf, with the shortest separator after it, if the run reaches the median.
fn partition_point(page_size: usize, lower: &[u8], recs: &Records) -> Option<(usize, Vec<u8>)> {
    let n = recs.len();
    let (k0, v0) = (recs.key(0), recs.value(0));
    let shape = Shape::new(page_size, lower, None, k0.len(), v0.len())?;
    let run = (0..n)
        .take_while(|&i| {
            recs.value(i).len() == shape.value_len && shape.slot_of(recs.key(i)).is_some()
        })
        .count();
    if run < n / 2 || run >= n {
        return None;
    }
    let (a, b) = (recs.key(run - 1), recs.key(run));
    let p = crate::page::common_prefix(a, b);
    let sep = b.get(..p + 1)?;
    // The separator must leave `b` on the right.
    (sep.len() < b.len()).then(|| (run, sep.to_vec()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
