//! Writing fresh slotted nodes: the builder used by compaction, split and merge, and the
//! separator choice of section 2.
//!
//! Split and merge copy records into freshly built pages rather than shuffling them in place:
//! prefixes change (a split lengthens the common fence prefix, a merge shortens it), so keys
//! must be re-truncated anyway (section 3.1, "transferring keys between nodes"), and building
//! packs the heap as a side effect.

use super::fingerprint::fingerprint;
use super::slotted::{
    header_len, off, slot_len, wr16, wr32, Slotted, FLAG_HEADS, FLAG_HINTS, FLAG_UPPER_INF,
    HINT_COUNT,
};
use super::{common_prefix, corrupt, head, PageId, KIND_FP_LEAF, KIND_INNER};
use crate::error::Result;

/// What a new node looks like apart from its records.
#[derive(Clone, Copy, Debug)]
pub struct NodeSpec<'a> {
    /// Kind tag.
    pub kind: u8,
    /// Optimization flags (`FLAG_HEADS`, `FLAG_HINTS`).
    pub flags: u8,
    /// Whether keys are stored without the fences' common prefix.
    pub prefix_truncation: bool,
    /// Lower fence (exclusive; empty = no bound).
    pub lower: &'a [u8],
    /// Upper fence (inclusive; `None` = no bound).
    pub upper: Option<&'a [u8]>,
    /// Upper child (inner nodes).
    pub upper_child: PageId,
    /// Operation counter (section 5).
    pub op_counter: u8,
}

impl NodeSpec<'_> {
    /// Length of the prefix truncated from every key of this node.
    pub fn prefix_len(&self) -> usize {
        match (self.prefix_truncation, self.upper) {
            (true, Some(u)) => common_prefix(self.lower, u),
            _ => 0,
        }
    }
}

/// Appends sorted records to an empty page.
pub struct Builder<'b> {
    b: &'b mut [u8],
    count: usize,
    heap_start: usize,
    heap_used: usize,
    slot_base: usize,
    slot_len: usize,
    prefix_len: usize,
    flags: u8,
    fp: bool,
    fp_headroom: usize,
}

impl<'b> Builder<'b> {
    /// Starts a node on `b` (any previous contents are overwritten). `None` if the fences alone
    /// do not fit.
    pub fn new(b: &'b mut [u8], spec: &NodeSpec<'_>) -> Option<Self> {
        let fp = spec.kind == KIND_FP_LEAF;
        let opt_flags = if fp { 0 } else { FLAG_HEADS | FLAG_HINTS };
        let flags = spec.flags & opt_flags
            | if spec.upper.is_none() {
                FLAG_UPPER_INF
            } else {
                0
            };
        let slot_base = header_len(flags);
        let upper = spec.upper.unwrap_or(&[]);
        let fences = spec.lower.len() + upper.len();
        if slot_base + fences > b.len() {
            return None;
        }
        b[..slot_base].fill(0);
        b[off::KIND] = spec.kind;
        b[off::FLAGS] = flags;
        let mut at = b.len();
        at -= spec.lower.len();
        b[at..at + spec.lower.len()].copy_from_slice(spec.lower);
        wr16(b, off::LOWER_LEN, spec.lower.len());
        wr16(
            b,
            off::LOWER_OFF,
            if spec.lower.is_empty() { 0 } else { at },
        );
        at -= upper.len();
        b[at..at + upper.len()].copy_from_slice(upper);
        wr16(b, off::UPPER_LEN, upper.len());
        wr16(b, off::UPPER_OFF, if upper.is_empty() { 0 } else { at });
        let prefix_len = spec.prefix_len();
        wr16(b, off::PREFIX_LEN, prefix_len);
        b[off::OP_COUNTER] = spec.op_counter;
        b[off::UPPER_CHILD..off::UPPER_CHILD + 8].copy_from_slice(&spec.upper_child.to_le_bytes());
        Some(Builder {
            b,
            count: 0,
            heap_start: at,
            heap_used: fences,
            slot_base,
            slot_len: slot_len(flags),
            prefix_len,
            flags,
            fp,
            fp_headroom: 16,
        })
    }

    /// Fingerprinting leaves: how many appends the fingerprint array leaves room for (16 unless
    /// set), space permitting.
    pub fn set_fp_headroom(&mut self, n: usize) {
        self.fp_headroom = n;
    }

    /// Length of the prefix this node truncates.
    pub fn prefix_len(&self) -> usize {
        self.prefix_len
    }

    /// Appends a record whose full key is `a ++ b` (the builder strips its own prefix). Records
    /// must come in ascending key order. Returns `false` if it does not fit (the page is then
    /// unusable until rebuilt).
    pub fn push(&mut self, a: &[u8], b: &[u8], value: &[u8]) -> bool {
        let p = self.prefix_len;
        let (a, b) = if p <= a.len() {
            (&a[p..], b)
        } else {
            match b.get(p - a.len()..) {
                Some(rest) => (&[][..], rest),
                None => return false,
            }
        };
        let klen = a.len() + b.len();
        let rec = klen + value.len();
        let slots_end = self.slot_base + (self.count + 1) * self.slot_len;
        let fps = if self.fp { self.count + 1 } else { 0 };
        if slots_end + rec + fps > self.heap_start {
            return false;
        }
        let at = self.heap_start - rec;
        // Splits and merges push every record of two or three pages: skip the empty part of
        // the key and copy 8-byte values without a call to `memcpy`.
        self.b[at..at + a.len()].copy_from_slice(a);
        if !b.is_empty() {
            self.b[at + a.len()..at + klen].copy_from_slice(b);
        }
        let dst = &mut self.b[at + klen..at + rec];
        match (
            <&mut [u8; 8]>::try_from(&mut *dst),
            <&[u8; 8]>::try_from(value),
        ) {
            (Ok(d), Ok(v)) => *d = *v,
            _ => dst.copy_from_slice(value),
        }
        let s = self.slot_base + self.count * self.slot_len;
        wr16(self.b, s, at);
        wr16(self.b, s + 2, klen);
        wr16(self.b, s + 4, value.len());
        if self.flags & FLAG_HEADS != 0 {
            wr32(self.b, s + 6, head(&self.b[at..at + klen]));
        }
        self.count += 1;
        self.heap_start = at;
        self.heap_used += rec;
        true
    }

    /// Writes the counts and the hint array (or, in fingerprinting leaves, the fingerprints).
    pub fn finish(mut self) {
        if self.fp {
            let slots_end = self.slot_base + self.count * self.slot_len;
            let room = self.heap_start - slots_end;
            // Headroom for appends before the array has to move.
            let cap = (self.count + self.fp_headroom).min(room);
            let at = self.heap_start - cap;
            for i in 0..self.count {
                let s = self.slot_base + i * self.slot_len;
                let (o, kl) = (
                    u16::from_le_bytes([self.b[s], self.b[s + 1]]) as usize,
                    u16::from_le_bytes([self.b[s + 2], self.b[s + 3]]) as usize,
                );
                self.b[at + i] = fingerprint(&self.b[o..o + kl]);
            }
            self.heap_start = at;
            self.heap_used += cap;
            wr16(self.b, off::FP_SORTED, self.count);
            wr16(self.b, off::FP_OFF, at);
            wr16(self.b, off::FP_CAP, cap);
        }
        wr16(self.b, off::COUNT, self.count);
        wr32(self.b, off::HEAP_START, self.heap_start as u32);
        wr32(self.b, off::HEAP_USED, self.heap_used as u32);
        if self.flags & FLAG_HINTS != 0 {
            let dist = self.count / (HINT_COUNT + 1);
            for i in 0..HINT_COUNT {
                let h = if dist == 0 {
                    0
                } else {
                    let s = self.slot_base + dist * (i + 1) * self.slot_len;
                    u32::from_le_bytes([self.b[s + 6], self.b[s + 7], self.b[s + 8], self.b[s + 9]])
                };
                wr32(self.b, off::HINTS + 4 * i, h);
            }
        }
    }
}

fn spec_of<'a>(v: &Slotted<'a>) -> Result<NodeSpec<'a>> {
    Ok(NodeSpec {
        kind: v.kind(),
        flags: v.flags(),
        prefix_truncation: v.prefix_len() > 0,
        lower: v.lower_fence()?,
        upper: v.upper_fence()?,
        upper_child: if v.is_leaf() { 0 } else { v.upper_child() },
        op_counter: v.op_counter(),
    })
}

fn no_fit(v: &Slotted<'_>) -> crate::error::Error {
    corrupt(v.id(), "records do not fit a page of the same size")
}

/// Writes `v`'s live records, packed, into `out` (same size as `v`'s page).
pub fn rebuild_into(v: &Slotted<'_>, out: &mut [u8]) -> Result<()> {
    rebuild_with_headroom(v, out, 16)
}

/// [`rebuild_into`] with `fp_headroom` spare fingerprint entries (fingerprinting leaves).
pub fn rebuild_with_headroom(v: &Slotted<'_>, out: &mut [u8], fp_headroom: usize) -> Result<()> {
    let spec = spec_of(v)?;
    let prefix = v.prefix()?;
    let mut b = Builder::new(out, &spec).ok_or_else(|| no_fit(v))?;
    b.set_fp_headroom(fp_headroom);
    if b.prefix_len() != v.prefix_len() {
        return Err(corrupt(
            v.id(),
            "prefix length differs from the fences' prefix",
        ));
    }
    for i in 0..v.count() {
        if !b.push(prefix, v.key(i)?, v.value(i)?) {
            return Err(no_fit(v));
        }
    }
    b.finish();
    Ok(())
}

/// Where a node splits: `left` slots go to the left node; `separator` is the full key that
/// becomes the left node's upper fence and the right node's lower fence. In inner nodes slot
/// `left` itself moves up to the parent (its child becomes the left node's upper child).
#[derive(Debug)]
pub struct SplitPoint {
    /// Slots kept by the left node.
    pub left: usize,
    /// The full separator key.
    pub separator: Vec<u8>,
}

/// Chooses the split point of a node with at least two slots (section 2, "Separator
/// Selection"): within a window of count/16 slots around the median, leaves take the shortest
/// separator (the first byte after the window's common prefix that distinguishes two
/// neighbours), inner nodes the shortest key.
pub fn find_separator(v: &Slotted<'_>) -> Result<SplitPoint> {
    let count = v.count();
    if count < 2 || (v.kind() == KIND_INNER && count < 3) {
        return Err(corrupt(v.id(), "split of a node with too few slots"));
    }
    let prefix = v.prefix()?;
    let median = count / 2;
    let half = (count / 16) / 2;
    if v.kind() == KIND_INNER {
        // Keep at least one separator on each side.
        let lo = median.saturating_sub(half).max(1);
        let hi = (median + half).min(count - 2).max(lo);
        let mut best = lo;
        for i in lo..=hi {
            if v.key(i)?.len() < v.key(best)?.len() {
                best = i;
            }
        }
        let mut separator = prefix.to_vec();
        separator.extend_from_slice(v.key(best)?);
        return Ok(SplitPoint {
            left: best,
            separator,
        });
    }
    let (left, sep) = leaf_separator(count, |i| v.key(i))?;
    let mut separator = prefix.to_vec();
    separator.extend_from_slice(&sep);
    Ok(SplitPoint { left, separator })
}

/// The leaf split of section 2 over `count >= 2` sorted keys given by `key`: how many keys go
/// left, and the separator (relative to the same prefix as the keys).
pub fn leaf_separator<'k>(
    count: usize,
    key: impl Fn(usize) -> Result<&'k [u8]>,
) -> Result<(usize, Vec<u8>)> {
    leaf_separator_near(count, count / 2, key)
}

/// [`leaf_separator`] with the window of count/16 slots centred on slot `at` instead of the
/// median (the redistribution of `sylva::btree` balances bytes, not slots).
pub fn leaf_separator_near<'k>(
    count: usize,
    at: usize,
    key: impl Fn(usize) -> Result<&'k [u8]>,
) -> Result<(usize, Vec<u8>)> {
    let median = at.clamp(1, count.saturating_sub(1).max(1));
    let half = (count / 16) / 2;
    let hi = (median + half).min(count - 1).max(1);
    let lo = median.saturating_sub(half).min(hi - 1);
    let (klo, khi) = (key(lo)?, key(hi)?);
    let p = common_prefix(klo, khi);
    let byte_at = |k: &[u8]| k.get(p).copied();
    let lo_byte = byte_at(klo);
    let mut j = lo + 1;
    while j < hi && byte_at(key(j)?) == lo_byte {
        j += 1;
    }
    let kj = key(j)?;
    let Some(short) = kj.get(..p + 1) else {
        return Err(corrupt(0, "keys out of order in a split"));
    };
    Ok(if short.len() < kj.len() {
        (j, short.to_vec())
    } else if j + 1 < count {
        // The separator is `kj` itself, which then belongs to the left node.
        (j + 1, short.to_vec())
    } else {
        (j, key(j - 1)?.to_vec())
    })
}

/// Splits `v` at `at` into `left` and `right` (both page-sized buffers) using `flags` and
/// `prefix_truncation` for the new nodes.
pub fn split(
    v: &Slotted<'_>,
    at: &SplitPoint,
    flags: u8,
    prefix_truncation: bool,
    left: &mut [u8],
    right: &mut [u8],
) -> Result<()> {
    let base = spec_of(v)?;
    let prefix = v.prefix()?;
    let inner = v.kind() == KIND_INNER;
    let left_spec = NodeSpec {
        flags,
        prefix_truncation,
        upper: Some(&at.separator),
        upper_child: if inner { v.child(at.left)? } else { 0 },
        ..base
    };
    let right_spec = NodeSpec {
        flags,
        prefix_truncation,
        lower: &at.separator,
        ..base
    };
    let mut l = Builder::new(left, &left_spec).ok_or_else(|| no_fit(v))?;
    for i in 0..at.left {
        if !l.push(prefix, v.key(i)?, v.value(i)?) {
            return Err(no_fit(v));
        }
    }
    l.finish();
    let mut r = Builder::new(right, &right_spec).ok_or_else(|| no_fit(v))?;
    let first_right = if inner { at.left + 1 } else { at.left };
    for i in first_right..v.count() {
        if !r.push(prefix, v.key(i)?, v.value(i)?) {
            return Err(no_fit(v));
        }
    }
    r.finish();
    Ok(())
}

/// Merges neighbours `left` and `right` into `out`; `Ok(false)` if the result does not fit.
/// For inner nodes the separator between them (the left node's upper fence) comes down with the
/// left node's upper child.
pub fn merge(
    left: &Slotted<'_>,
    right: &Slotted<'_>,
    flags: u8,
    prefix_truncation: bool,
    out: &mut [u8],
) -> Result<bool> {
    let rspec = spec_of(right)?;
    let spec = NodeSpec {
        flags,
        prefix_truncation,
        lower: left.lower_fence()?,
        ..rspec
    };
    let Some(mut b) = Builder::new(out, &spec) else {
        return Ok(false);
    };
    let lp = left.prefix()?;
    for i in 0..left.count() {
        if !b.push(lp, left.key(i)?, left.value(i)?) {
            return Ok(false);
        }
    }
    if left.kind() == KIND_INNER {
        let sep = left
            .upper_fence()?
            .ok_or_else(|| corrupt(left.id(), "left neighbour without an upper fence"))?;
        if !b.push(sep, &[], &left.upper_child().to_le_bytes()) {
            return Ok(false);
        }
    }
    let rp = right.prefix()?;
    for i in 0..right.count() {
        if !b.push(rp, right.key(i)?, right.value(i)?) {
            return Ok(false);
        }
    }
    b.finish();
    Ok(true)
}
