//! The comparison-based slotted node (paper sections 2, 3.1–3.3), used for inner nodes and for
//! comparison leaves.
//!
//! ```text
//! | header (32 bytes) | hints (64 bytes, optional) | slots → ... free ... ← heap |
//! ```
//!
//! The header fields, the slot encoding and the heap are documented byte by byte in
//! `docs/format.md`. In short: slots are 6 bytes (offset, key length, value length as u16) or
//! 10 bytes with the 4-byte head; the heap holds the fences (stored untruncated) and the records
//! (`truncated key ++ value`); a removed record's bytes stay on the heap until the next
//! compaction, which happens lazily when an insert finds the contiguous free space too small.
//!
//! Differences from the paper:
//! - The header is 32 bytes with u32 heap bookkeeping (so 64 KiB pages work) and a separate
//!   flags byte recording whether this page carries heads and hints; the optimizations are
//!   switched per tree and every page says which it uses, so `check()` can verify them.
//! - Fence keys: the lower fence is exclusive and the upper fence inclusive (the separator of a
//!   split is the upper fence of the left node). An empty lower fence means "no lower bound";
//!   flag `UPPER_INF` means "no upper bound".
//!
//! Invariants (checked by `sylva::btree::check`): keys strictly ascending; every full key
//! (prefix ++ stored key) lies in `(lower, upper]`; `prefix_len` is 0 or the common prefix of the
//! fences; heads equal the first four stored bytes; hints equal the sampled heads; `heap_used`
//! equals the bytes of live records and fences.

use std::cmp::Ordering;

use super::{cmp_keys, corrupt, head, PageId, KIND_FP_LEAF, KIND_INNER, KIND_LEAF};
use crate::error::Result;

/// Byte offsets of the header fields.
pub(crate) mod off {
    pub const KIND: usize = 0;
    pub const FLAGS: usize = 1;
    pub const COUNT: usize = 2;
    pub const HEAP_START: usize = 4;
    pub const HEAP_USED: usize = 8;
    pub const PREFIX_LEN: usize = 12;
    pub const LOWER_LEN: usize = 14;
    pub const LOWER_OFF: usize = 16;
    pub const UPPER_LEN: usize = 18;
    pub const UPPER_OFF: usize = 20;
    pub const OP_COUNTER: usize = 22;
    pub const UPPER_CHILD: usize = 24;
    // Fingerprinting leaves reuse the upper-child bytes:
    pub const FP_SORTED: usize = 24;
    pub const FP_OFF: usize = 26;
    pub const FP_CAP: usize = 28;
    pub const HINTS: usize = 32;
}

/// Header length without the hint array.
pub const HEADER_LEN: usize = 32;
/// Number of hints (section 3.3): 16 heads, 64 bytes.
pub const HINT_COUNT: usize = 16;
/// Header length with the hint array.
pub const HEADER_LEN_HINTS: usize = HEADER_LEN + 4 * HINT_COUNT;
/// Slot length without a head: offset, key length, value length (u16 each).
pub const SLOT_LEN: usize = 6;
/// Slot length with the 4-byte head.
pub const SLOT_LEN_HEADS: usize = 10;

/// Flag: slots carry 4-byte heads.
pub const FLAG_HEADS: u8 = 0x01;
/// Flag: the header carries the hint array (requires heads).
pub const FLAG_HINTS: u8 = 0x02;
/// Flag: the upper fence is +infinity (its length and offset are 0).
pub const FLAG_UPPER_INF: u8 = 0x04;
const KNOWN_FLAGS: u8 = FLAG_HEADS | FLAG_HINTS | FLAG_UPPER_INF;

// One range check and one load (indexing byte by byte checked and loaded each byte: the
// hottest line of a descent). The `unwrap_or_default` never applies: the range has the length.
#[inline]
pub(crate) fn rd16(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap_or_default()) as usize
}
#[inline]
pub(crate) fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}
#[inline]
pub(crate) fn wr16(b: &mut [u8], at: usize, v: usize) {
    b[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
}
#[inline]
pub(crate) fn wr32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Bytes a slotted page of this shape needs for its fixed parts.
pub fn header_len(flags: u8) -> usize {
    if flags & FLAG_HINTS != 0 {
        HEADER_LEN_HINTS
    } else {
        HEADER_LEN
    }
}

/// Slot length for pages with these flags.
pub fn slot_len(flags: u8) -> usize {
    if flags & FLAG_HEADS != 0 {
        SLOT_LEN_HEADS
    } else {
        SLOT_LEN
    }
}

/// Read access to a slotted node. Construction validates the header; every record access is
/// bounds-checked.
#[derive(Clone, Copy)]
pub struct Slotted<'a> {
    id: PageId,
    b: &'a [u8],
    kind: u8,
    flags: u8,
    count: usize,
    slot_base: usize,
    slot_len: usize,
    prefix_len: usize,
}

impl<'a> Slotted<'a> {
    /// Decodes the header of page `id`.
    pub fn new(id: PageId, b: &'a [u8]) -> Result<Self> {
        if b.len() < HEADER_LEN_HINTS {
            return Err(corrupt(id, "page shorter than a slotted header"));
        }
        let kind = b[off::KIND];
        if kind != KIND_INNER && kind != KIND_LEAF && kind != KIND_FP_LEAF {
            return Err(corrupt(id, format!("kind {kind} is not a slotted node")));
        }
        let flags = b[off::FLAGS];
        if flags & !KNOWN_FLAGS != 0 || (flags & FLAG_HINTS != 0 && flags & FLAG_HEADS == 0) {
            return Err(corrupt(id, format!("invalid flags {flags:#04x}")));
        }
        let count = rd16(b, off::COUNT);
        let slot_base = header_len(flags);
        let slot_len = slot_len(flags);
        let heap_start = rd32(b, off::HEAP_START) as usize;
        if slot_base + count * slot_len > heap_start || heap_start > b.len() {
            return Err(corrupt(id, "slot array overlaps the heap"));
        }
        if kind == KIND_FP_LEAF {
            let (sorted, fp_off, fp_cap) = (
                rd16(b, off::FP_SORTED),
                rd16(b, off::FP_OFF),
                rd16(b, off::FP_CAP),
            );
            if flags & FLAG_HEADS != 0
                || sorted > count
                || fp_cap < count
                || fp_off + fp_cap > b.len()
            {
                return Err(corrupt(id, "fingerprint array out of bounds"));
            }
        }
        let prefix_len = rd16(b, off::PREFIX_LEN);
        if prefix_len > rd16(b, off::LOWER_LEN) {
            return Err(corrupt(id, "prefix longer than the lower fence"));
        }
        Ok(Slotted {
            id,
            b,
            kind,
            flags,
            count,
            slot_base,
            slot_len,
            prefix_len,
        })
    }

    /// The page id this view was made for.
    pub fn id(&self) -> PageId {
        self.id
    }
    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.b
    }
    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.kind != KIND_INNER
    }
    /// Fingerprinting leaves: slots `0..sorted()` are in key order, the rest is the unsorted tail.
    /// Other kinds: `count()`.
    #[inline]
    pub fn sorted(&self) -> usize {
        if self.kind == KIND_FP_LEAF {
            rd16(self.b, off::FP_SORTED)
        } else {
            self.count
        }
    }
    /// Fingerprinting leaves: the fingerprint array (`count()` entries, validated in `new`).
    #[inline]
    pub fn fingerprints(&self) -> &'a [u8] {
        if self.kind != KIND_FP_LEAF {
            return &[];
        }
        let at = rd16(self.b, off::FP_OFF);
        // Re-read offset: bounds-check again (a torn read yields no fingerprints, so lookups miss
        // and the caller's validation fails).
        self.b.get(at..at + self.count).unwrap_or(&[])
    }
    /// Fingerprinting leaves: capacity of the fingerprint array.
    #[inline]
    pub fn fp_capacity(&self) -> usize {
        if self.kind == KIND_FP_LEAF {
            rd16(self.b, off::FP_CAP)
        } else {
            0
        }
    }
    /// The kind tag.
    pub fn kind(&self) -> u8 {
        self.kind
    }
    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.flags
    }
    /// Whether slots carry heads.
    pub fn has_heads(&self) -> bool {
        self.flags & FLAG_HEADS != 0
    }
    /// Whether the header carries hints.
    pub fn has_hints(&self) -> bool {
        self.flags & FLAG_HINTS != 0
    }
    /// Number of records (leaf) or separators (inner).
    pub fn count(&self) -> usize {
        self.count
    }
    /// Length of the truncated prefix.
    pub fn prefix_len(&self) -> usize {
        self.prefix_len
    }
    /// Start of the heap (lowest used heap byte).
    pub fn heap_start(&self) -> usize {
        rd32(self.b, off::HEAP_START) as usize
    }
    /// Live bytes on the heap (records and fences).
    pub fn heap_used(&self) -> usize {
        rd32(self.b, off::HEAP_USED) as usize
    }
    /// Offset of the first slot.
    pub fn slot_base(&self) -> usize {
        self.slot_base
    }
    /// Length of one slot.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }
    /// The adaptive policy's operation counter (section 5).
    pub fn op_counter(&self) -> u8 {
        self.b[off::OP_COUNTER]
    }
    /// Contiguous free bytes between the slot array and the heap.
    pub fn free_space(&self) -> usize {
        self.heap_start()
            .saturating_sub(self.slot_base + self.count * self.slot_len)
    }
    /// Free bytes after a compaction.
    pub fn free_space_after_compaction(&self) -> usize {
        self.b
            .len()
            .saturating_sub(self.slot_base + self.count * self.slot_len + self.heap_used())
    }

    #[inline]
    fn heap_slice(&self, at: usize, len: usize, what: &str) -> Result<&'a [u8]> {
        self.b
            .get(at..at + len)
            .ok_or_else(|| corrupt(self.id, format!("{what} at {at}+{len} outside the page")))
    }

    /// The lower fence (exclusive); empty means no lower bound.
    #[inline]
    pub fn lower_fence(&self) -> Result<&'a [u8]> {
        self.heap_slice(
            rd16(self.b, off::LOWER_OFF),
            rd16(self.b, off::LOWER_LEN),
            "lower fence",
        )
    }
    /// The upper fence (inclusive); `None` means no upper bound.
    #[inline]
    pub fn upper_fence(&self) -> Result<Option<&'a [u8]>> {
        if self.flags & FLAG_UPPER_INF != 0 {
            return Ok(None);
        }
        self.heap_slice(
            rd16(self.b, off::UPPER_OFF),
            rd16(self.b, off::UPPER_LEN),
            "upper fence",
        )
        .map(Some)
    }
    /// The prefix every key in the node shares and that is not stored with the keys.
    #[inline]
    pub fn prefix(&self) -> Result<&'a [u8]> {
        // `new` checked the length against the fence, but an optimistic reader may see the
        // fence change since: an error (then a failed validation and a restart), not a panic.
        self.lower_fence()?
            .get(..self.prefix_len)
            .ok_or_else(|| corrupt(self.id, "prefix longer than the lower fence"))
    }

    #[inline]
    fn slot(&self, i: usize) -> usize {
        self.slot_base + i * self.slot_len
    }
    /// Stored (truncated) key of slot `i`.
    #[inline]
    pub fn key(&self, i: usize) -> Result<&'a [u8]> {
        let s = self.slot(i);
        let (o, kl) = (rd16(self.b, s), rd16(self.b, s + 2));
        self.heap_slice(o, kl, "key")
    }
    /// Value of slot `i`.
    #[inline]
    pub fn value(&self, i: usize) -> Result<&'a [u8]> {
        let s = self.slot(i);
        let (o, kl, vl) = (rd16(self.b, s), rd16(self.b, s + 2), rd16(self.b, s + 4));
        self.heap_slice(o + kl, vl, "value")
    }
    /// Key and value lengths of slot `i` as stored.
    #[inline]
    pub fn lens(&self, i: usize) -> (usize, usize) {
        let s = self.slot(i);
        (rd16(self.b, s + 2), rd16(self.b, s + 4))
    }
    /// Heap offset of slot `i`'s record.
    #[inline]
    pub fn record_offset(&self, i: usize) -> usize {
        rd16(self.b, self.slot(i))
    }
    /// Heap offset, key length and value length of the records of slots `range`, read from
    /// one bounds-checked slice of the slot array (a walk reads many slots in a row).
    #[inline]
    pub fn record_fields(
        &self,
        range: std::ops::Range<usize>,
    ) -> Result<impl Iterator<Item = (usize, usize, usize)> + 'a> {
        let slots = self
            .b
            .get(self.slot(range.start)..self.slot(range.end))
            .ok_or_else(|| corrupt(self.id, format!("slots {range:?} outside the page")))?;
        Ok(slots
            .chunks_exact(self.slot_len)
            .map(|s| (rd16(s, 0), rd16(s, 2), rd16(s, 4))))
    }
    /// Stored head of slot `i` (pages with heads only).
    #[inline]
    pub fn stored_head(&self, i: usize) -> u32 {
        rd32(self.b, self.slot(i) + 6)
    }
    /// Hint `i` (pages with hints only).
    #[inline]
    pub fn hint(&self, i: usize) -> u32 {
        rd32(self.b, off::HINTS + 4 * i)
    }
    /// The child to the right of the last separator (inner nodes).
    #[inline]
    pub fn upper_child(&self) -> PageId {
        let mut x = [0u8; 8];
        x.copy_from_slice(&self.b[off::UPPER_CHILD..off::UPPER_CHILD + 8]);
        u64::from_le_bytes(x)
    }
    /// Child `i` of an inner node; `i == count` is the upper child.
    #[inline]
    pub fn child(&self, i: usize) -> Result<PageId> {
        if i >= self.count {
            return Ok(self.upper_child());
        }
        // Every descent reads one child per inner node: the slot as one 6-byte read and the
        // 8 bytes after the key as one, instead of the general `value` path.
        let s = self.slot(i);
        let slot = self.b.get(s..).and_then(|b| b.first_chunk::<6>());
        let child = slot.and_then(|&[o0, o1, k0, k1, v0, v1]| {
            let at = usize::from(u16::from_le_bytes([o0, o1]))
                + usize::from(u16::from_le_bytes([k0, k1]));
            let value_len = u16::from_le_bytes([v0, v1]);
            self.b
                .get(at..)
                .and_then(|v| v.first_chunk::<8>())
                .filter(|_| value_len == 8)
        });
        child
            .map(|&bytes| u64::from_le_bytes(bytes))
            .ok_or_else(|| corrupt(self.id, "child pointer is not 8 bytes"))
    }

    /// Full key of slot `i` (prefix ++ stored key) appended to `out`.
    pub fn full_key_into(&self, i: usize, out: &mut Vec<u8>) -> Result<()> {
        out.extend_from_slice(self.prefix()?);
        out.extend_from_slice(self.key(i)?);
        Ok(())
    }

    /// Hint search (section 3.3): narrows `[lo, hi)` for a binary search on heads.
    #[inline]
    fn search_hints(&self, key_head: u32) -> (usize, usize) {
        let count = self.count;
        if !self.has_hints() || count <= 2 * HINT_COUNT {
            return (0, count);
        }
        let dist = count / (HINT_COUNT + 1);
        let mut pos = 0;
        while pos < HINT_COUNT && self.hint(pos) < key_head {
            pos += 1;
        }
        let mut pos2 = pos;
        while pos2 < HINT_COUNT && self.hint(pos2) == key_head {
            pos2 += 1;
        }
        let lo = pos * dist;
        let hi = if pos2 < HINT_COUNT {
            (pos2 + 1) * dist
        } else {
            count
        };
        (lo, hi)
    }

    /// First slot whose key is `>= key` (`key` is a full key) and whether it is equal.
    #[inline]
    pub fn lower_bound(&self, key: &[u8]) -> Result<(usize, bool)> {
        let k = key.get(self.prefix_len..).unwrap_or(&[]);
        if key.len() < self.prefix_len {
            // Only possible for a key outside this node's range (a page read optimistically
            // while it changed, or a caller bug): every stored key is larger.
            return Ok((0, false));
        }
        let (mut lo, mut hi) = (0, self.count);
        if self.has_heads() {
            let kh = head(k);
            (lo, hi) = self.search_hints(kh);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let sh = self.stored_head(mid);
                let ord = match sh.cmp(&kh) {
                    Ordering::Equal => cmp_keys(self.key(mid)?, k),
                    o => o,
                };
                match ord {
                    Ordering::Less => lo = mid + 1,
                    Ordering::Greater => hi = mid,
                    Ordering::Equal => return Ok((mid, true)),
                }
            }
        } else {
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match cmp_keys(self.key(mid)?, k) {
                    Ordering::Less => lo = mid + 1,
                    Ordering::Greater => hi = mid,
                    Ordering::Equal => return Ok((mid, true)),
                }
            }
        }
        Ok((lo, false))
    }

    /// Bytes one record with this stored key and value length occupies (slot included).
    pub fn record_space(&self, key_len: usize, value_len: usize) -> usize {
        self.slot_len + key_len + value_len
    }
}

/// Write access to a slotted node whose latch the caller holds.
pub struct SlottedMut<'a> {
    id: PageId,
    b: &'a mut [u8],
}

impl<'a> SlottedMut<'a> {
    /// Validates the header of page `id` and wraps it for writing.
    pub fn new(id: PageId, b: &'a mut [u8]) -> Result<Self> {
        Slotted::new(id, b)?;
        Ok(SlottedMut { id, b })
    }

    /// A read view.
    pub fn view(&self) -> Slotted<'_> {
        // The header was validated in `new` and every mutation keeps it valid.
        Slotted {
            id: self.id,
            b: self.b,
            kind: self.b[off::KIND],
            flags: self.b[off::FLAGS],
            count: rd16(self.b, off::COUNT),
            slot_base: header_len(self.b[off::FLAGS]),
            slot_len: slot_len(self.b[off::FLAGS]),
            prefix_len: rd16(self.b, off::PREFIX_LEN),
        }
    }

    /// The raw bytes, for the leaf kinds that extend this format.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        self.b
    }

    /// Sets the operation counter.
    pub fn set_op_counter(&mut self, v: u8) {
        self.b[off::OP_COUNTER] = v;
    }

    /// Inserts a record with stored (truncated) key `key` at slot `idx`. Compacts the heap when
    /// the contiguous free space is too small; returns `false` (and changes nothing) when the
    /// record does not fit even then.
    pub fn insert(&mut self, idx: usize, key: &[u8], value: &[u8]) -> Result<bool> {
        let v = self.view();
        let need = v.record_space(key.len(), value.len());
        if v.free_space() < need {
            if v.free_space_after_compaction() < need {
                return Ok(false);
            }
            self.compact()?;
        }
        let v = self.view();
        let (count, slot_len, slot_base) = (v.count(), v.slot_len(), v.slot_base());
        let has_heads = v.has_heads();
        let rec_len = key.len() + value.len();
        let at = v.heap_start() - rec_len;
        let heap_used = v.heap_used();
        self.b[at..at + key.len()].copy_from_slice(key);
        self.b[at + key.len()..at + rec_len].copy_from_slice(value);
        let s = slot_base + idx * slot_len;
        let end = slot_base + count * slot_len;
        self.b.copy_within(s..end, s + slot_len);
        wr16(self.b, s, at);
        wr16(self.b, s + 2, key.len());
        wr16(self.b, s + 4, value.len());
        if has_heads {
            wr32(self.b, s + 6, head(key));
        }
        wr16(self.b, off::COUNT, count + 1);
        wr32(self.b, off::HEAP_START, at as u32);
        wr32(self.b, off::HEAP_USED, (heap_used + rec_len) as u32);
        self.update_hints(idx);
        Ok(true)
    }

    /// Removes slot `idx`; its heap bytes become garbage until the next compaction.
    pub fn remove(&mut self, idx: usize) {
        let v = self.view();
        let (count, slot_len, slot_base) = (v.count(), v.slot_len(), v.slot_base());
        let (kl, vl) = v.lens(idx);
        let heap_used = v.heap_used();
        let s = slot_base + idx * slot_len;
        let end = slot_base + count * slot_len;
        self.b.copy_within(s + slot_len..end, s);
        wr16(self.b, off::COUNT, count - 1);
        wr32(self.b, off::HEAP_USED, (heap_used - kl - vl) as u32);
        self.update_hints(idx);
    }

    /// Overwrites the value of slot `idx` with one of the same length.
    pub fn overwrite_value(&mut self, idx: usize, value: &[u8]) -> Result<()> {
        let v = self.view();
        let (kl, vl) = v.lens(idx);
        if vl != value.len() {
            return Err(corrupt(self.id, "overwrite_value with a different length"));
        }
        let at = v.record_offset(idx) + kl;
        self.b
            .get_mut(at..at + vl)
            .ok_or_else(|| corrupt(self.id, "value outside the page"))?
            .copy_from_slice(value);
        Ok(())
    }

    /// Points inner-node slot `idx` (or the upper child when `idx == count`) at `child`.
    pub fn set_child(&mut self, idx: usize, child: PageId) -> Result<()> {
        if idx >= self.view().count() {
            self.set_upper_child(child);
            return Ok(());
        }
        self.overwrite_value(idx, &child.to_le_bytes())
    }

    /// Sets the upper child.
    pub fn set_upper_child(&mut self, child: PageId) {
        self.b[off::UPPER_CHILD..off::UPPER_CHILD + 8].copy_from_slice(&child.to_le_bytes());
    }

    /// Rewrites the page with all live records packed at the end of the heap.
    pub fn compact(&mut self) -> Result<()> {
        let mut scratch = vec![0u8; self.b.len()];
        let v = self.view();
        super::build::rebuild_into(&v, &mut scratch)?;
        self.b.copy_from_slice(&scratch);
        Ok(())
    }

    /// Updates the hint array after a change at slot `idx`: only hints sampling slots at or
    /// after `idx` change unless the sampling distance changed (section 3.3).
    fn update_hints(&mut self, idx: usize) {
        let v = self.view();
        if !v.has_hints() {
            return;
        }
        let count = v.count();
        let dist = count / (HINT_COUNT + 1);
        let begin = if dist > 0 && count > 2 * HINT_COUNT + 1 {
            // The spacing before the change: if it was the same, hints sampling slots before
            // `idx` are unchanged.
            let old_dist_ins = (count - 1) / (HINT_COUNT + 1);
            let old_dist_rem = (count + 1) / (HINT_COUNT + 1);
            if old_dist_ins == dist && old_dist_rem == dist {
                (idx / dist).saturating_sub(1)
            } else {
                0
            }
        } else {
            0
        };
        let (slot_base, slot_len) = (v.slot_base(), v.slot_len());
        for i in begin..HINT_COUNT {
            let h = if dist == 0 {
                0
            } else {
                rd32(self.b, slot_base + dist * (i + 1) * slot_len + 6)
            };
            wr32(self.b, off::HINTS + 4 * i, h);
        }
    }
}
