//! The semi-dense leaf (paper section 3.5, "Semi Dense Leaves"): a slotted page with one 2-byte
//! slot for *every* key its fences admit, indexed by the key's numeric part, each pointing to a
//! length-prefixed value on the heap (0 = no record).
//!
//! Preconditions, shared with the fully-dense leaf ([`super::dense`], whose numeric-part helpers
//! this file reuses): every key has the same length `L`, and the keys' non-numeric part (all but
//! the last `min(L, 4)` bytes) equals that of the *reference key*, the smallest `L`-byte key
//! greater than the lower fence. Unlike the fully-dense leaf, values may have any length, and
//! the slots cover the whole key range, never less: the upper fence must share the reference's
//! non-numeric part (any upper fence will do when `L <= 4`, where that part is empty; an infinite
//! upper fence then means "up to the largest `L`-byte key"), and slot `slots − 1` holds the
//! largest `L`-byte key not above the upper fence. So every `L`-byte key in `(lower, upper]` has
//! a slot, and a key has a slot exactly when it has length `L` and lies in the range.
//!
//! ```text
//! 0        32            32 + 2 × slots            heap_start                            page_size
//! | header | slot 0 | slot 1 | ... → free ←       | records ... | reference | upper | lower |
//! ```
//! Header (32 bytes): kind u8 (4), flags u8 (bit 2 `UPPER_INF`), count u16, heap_start u32,
//! heap_used u32, slots u16, key_len u16, lower_len u16, upper_len u16, base u32 (numeric part
//! of the reference), op_counter u8, 7 reserved bytes. A record is `value_len u16 | value`.
//! The fences and the reference key sit at fixed places at the end of the page (nothing points
//! to them). Byte-level detail in `docs/format.md`.
//!
//! Like the slotted node, removing or overwriting a record leaves its bytes on the heap as
//! garbage (`heap_used` counts only live bytes) until an insert finds the contiguous free space
//! too small and the page is repacked (lazy compaction).
//!
//! Differences from the paper and why:
//! - Values carry a 2-byte length prefix as in the paper; we add `heap_start`/`heap_used`
//!   bookkeeping like the slotted node (the paper does not say how its SDL manages the heap).
//! - The paper creates an SDL whenever its preconditions hold and the records fit. Because an
//!   SDL's size depends on its key range, a freshly split half of a sparse leaf could fit one
//!   and still waste space on empty slots, so the tree (`sylva::btree`) also requires that the
//!   SDL take no more bytes than the comparison leaf it replaces (the paper's "SDLs appear as
//!   soon as they are more space efficient"); see `btree/leaf.rs`.
//!
//! Invariants (checked by `sylva::btree::check`): the header decodes and every part lies inside
//! the page; the reference equals the smallest `L`-byte key above the lower fence and `base` its
//! numeric part; `slots` equals what [`Shape::new`] derives from the fences; every record lies
//! between `heap_start` and the reference key, inside the page, and records do not overlap;
//! `count` equals the non-zero slots; `heap_used` equals the live record bytes plus the fences
//! and the reference.

use super::dense::{self, max_numeric, numeric, slot_key_into, slot_lower_bound};
use super::slotted::{rd16, rd32, wr16, wr32, FLAG_UPPER_INF};
use super::{corrupt, PageId};
use crate::error::Result;

/// Kind tag of a semi-dense leaf.
pub const KIND_SEMI_DENSE_LEAF: u8 = 4;

mod off {
    pub const KIND: usize = 0;
    pub const FLAGS: usize = 1;
    pub const COUNT: usize = 2;
    pub const HEAP_START: usize = 4;
    pub const HEAP_USED: usize = 8;
    pub const SLOTS: usize = 12;
    pub const KEY_LEN: usize = 14;
    pub const LOWER_LEN: usize = 16;
    pub const UPPER_LEN: usize = 18;
    pub const BASE: usize = 20;
    pub const OP_COUNTER: usize = 24;
}
/// Header length.
pub const HEADER_LEN: usize = 32;
/// Slot length: a u16 heap offset (0 = no record).
pub const SLOT_LEN: usize = 2;

/// Heap bytes of a record with a `value_len`-byte value (its length prefix and the value).
#[inline]
pub fn record_len(value_len: usize) -> usize {
    2 + value_len
}

/// The shape of a semi-dense leaf for given fences and key length: the reference key and the
/// number of slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Length of every key.
    pub key_len: usize,
    /// The smallest `key_len`-byte key above the lower fence (the key of slot 0).
    pub reference: Vec<u8>,
    /// Number of slots: the `key_len`-byte keys in `(lower, upper]`.
    pub slots: usize,
}

/// Writes `n` as the numeric part of `key`.
fn set_numeric(key: &mut [u8], n: u32) {
    let w = key.len().min(4);
    let at = key.len() - w;
    key[at..].copy_from_slice(&n.to_be_bytes()[4 - w..]);
}

impl Shape {
    /// The shape of a semi-dense leaf with these fences and `key_len`-byte keys, if the
    /// preconditions hold and the header, slots, fences and reference fit a `page_size` page
    /// with room for at least one record.
    pub fn new(
        page_size: usize,
        lower: &[u8],
        upper: Option<&[u8]>,
        key_len: usize,
    ) -> Option<Shape> {
        if key_len == 0 {
            return None;
        }
        let reference = dense::reference(lower, key_len)?;
        let nn = key_len.saturating_sub(4);
        let base = u64::from(numeric(&reference));
        let max = max_numeric(key_len);
        let last = match upper {
            None if nn == 0 => max,
            None => return None,
            Some(u) => {
                if u.get(..nn) != Some(&reference[..nn]) || reference.as_slice() > u {
                    return None;
                }
                // The largest numeric part whose key is not above `u`: keys with the
                // reference's non-numeric part grow with it, so bisect (`key(lo) <= u` holds).
                let mut key = reference.clone();
                let (mut lo, mut hi) = (base, max);
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    set_numeric(&mut key, mid as u32);
                    if key.as_slice() <= u {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                lo
            }
        };
        let slots = usize::try_from(last - base + 1).ok()?;
        let shape = Shape {
            key_len,
            reference,
            slots,
        };
        let fixed = shape.fixed_len(lower.len(), upper.map_or(0, <[u8]>::len));
        (slots <= u16::MAX as usize && fixed + record_len(0) <= page_size).then_some(shape)
    }

    /// Bytes of the header, slots, fences and reference.
    pub fn fixed_len(&self, lower_len: usize, upper_len: usize) -> usize {
        HEADER_LEN + SLOT_LEN * self.slots + lower_len + upper_len + self.key_len
    }

    /// The slot of `key` in a leaf of this shape, if it has one.
    #[inline]
    pub fn slot_of(&self, key: &[u8]) -> Option<usize> {
        dense::slot_of(key, &self.reference, self.slots)
    }
}

/// Places records on the heap of a page whose header, slots and fixed tail are written.
struct Placer<'b> {
    b: &'b mut [u8],
    slots_end: usize,
    heap_start: usize,
    heap_used: usize,
    count: usize,
}

impl Placer<'_> {
    /// Puts `value` in slot `i` (empty); `false` if it does not fit.
    fn place(&mut self, i: usize, value: &[u8]) -> bool {
        let need = record_len(value.len());
        if value.len() > u16::MAX as usize || self.heap_start < self.slots_end + need {
            return false;
        }
        let at = self.heap_start - need;
        wr16(self.b, at, value.len());
        self.b[at + 2..at + need].copy_from_slice(value);
        wr16(self.b, HEADER_LEN + SLOT_LEN * i, at);
        self.heap_start = at;
        self.heap_used += need;
        self.count += 1;
        true
    }

    fn finish(self) {
        wr16(self.b, off::COUNT, self.count);
        wr32(self.b, off::HEAP_START, self.heap_start as u32);
        wr32(self.b, off::HEAP_USED, self.heap_used as u32);
    }
}

/// Writes a semi-dense leaf of `shape` with these fences and records (each must have a slot in
/// `shape`; keys distinct), leaving at least `reserve` bytes free for a later record. Returns
/// `false` (the page is then unusable until rebuilt) if a record has no slot or they do not fit.
pub fn build<'r>(
    b: &mut [u8],
    shape: &Shape,
    (lower, upper): (&[u8], Option<&[u8]>),
    op_counter: u8,
    records: impl Iterator<Item = (&'r [u8], &'r [u8])>,
    reserve: usize,
) -> bool {
    let len = b.len();
    let u = upper.unwrap_or(&[]);
    let fixed = shape.fixed_len(lower.len(), u.len());
    if fixed > len {
        return false;
    }
    b[..HEADER_LEN].fill(0);
    b[off::KIND] = KIND_SEMI_DENSE_LEAF;
    b[off::FLAGS] = if upper.is_none() { FLAG_UPPER_INF } else { 0 };
    wr16(b, off::SLOTS, shape.slots);
    wr16(b, off::KEY_LEN, shape.key_len);
    wr16(b, off::LOWER_LEN, lower.len());
    wr16(b, off::UPPER_LEN, u.len());
    wr32(b, off::BASE, numeric(&shape.reference));
    b[off::OP_COUNTER] = op_counter;
    let lo = len - lower.len();
    b[lo..].copy_from_slice(lower);
    let up = lo - u.len();
    b[up..lo].copy_from_slice(u);
    let rf = up - shape.key_len;
    b[rf..up].copy_from_slice(&shape.reference);
    let slots_end = HEADER_LEN + SLOT_LEN * shape.slots;
    b[HEADER_LEN..slots_end].fill(0);
    let mut p = Placer {
        b,
        slots_end,
        heap_start: rf,
        heap_used: len - rf,
        count: 0,
    };
    for (k, v) in records {
        let Some(i) = shape.slot_of(k) else {
            return false;
        };
        if rd16(p.b, HEADER_LEN + SLOT_LEN * i) != 0 || !p.place(i, v) {
            return false;
        }
    }
    let room = p.heap_start - p.slots_end;
    p.finish();
    room >= reserve
}

/// Read access to a semi-dense leaf. Construction validates the header; every record access is
/// bounds-checked.
#[derive(Clone, Copy)]
pub struct SemiDense<'a> {
    id: PageId,
    b: &'a [u8],
    count: usize,
    slots: usize,
    lower_len: usize,
    upper_len: usize,
    heap_start: usize,
    reference: &'a [u8],
}

impl<'a> SemiDense<'a> {
    /// Decodes and bounds-checks the header of page `id`.
    pub fn new(id: PageId, b: &'a [u8]) -> Result<Self> {
        if b.len() < HEADER_LEN || b[off::KIND] != KIND_SEMI_DENSE_LEAF {
            return Err(corrupt(id, "not a semi-dense leaf"));
        }
        if b[off::FLAGS] & !FLAG_UPPER_INF != 0 {
            return Err(corrupt(id, format!("invalid flags {:#04x}", b[off::FLAGS])));
        }
        let (count, slots, key_len) = (
            rd16(b, off::COUNT),
            rd16(b, off::SLOTS),
            rd16(b, off::KEY_LEN),
        );
        let (lower_len, upper_len) = (rd16(b, off::LOWER_LEN), rd16(b, off::UPPER_LEN));
        let heap_start = rd32(b, off::HEAP_START) as usize;
        let slots_end = HEADER_LEN + SLOT_LEN * slots;
        let fixed_start = b.len().saturating_sub(lower_len + upper_len + key_len);
        if key_len == 0
            || count > slots
            || slots_end > heap_start
            || heap_start > fixed_start
            || rd32(b, off::HEAP_USED) as usize > b.len()
        {
            return Err(corrupt(id, "semi-dense leaf header out of bounds"));
        }
        Ok(SemiDense {
            id,
            b,
            count,
            slots,
            lower_len,
            upper_len,
            heap_start,
            reference: &b[fixed_start..fixed_start + key_len],
        })
    }

    /// The page id this view was made for.
    pub fn id(&self) -> PageId {
        self.id
    }
    /// Present records.
    pub fn count(&self) -> usize {
        self.count
    }
    /// Slots (the keys the leaf's range admits).
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// Key length of every record.
    pub fn key_len(&self) -> usize {
        self.reference.len()
    }
    /// The reference key (the key of slot 0).
    pub fn reference(&self) -> &'a [u8] {
        self.reference
    }
    /// The numeric part of the reference as stored in the header.
    pub fn base(&self) -> u32 {
        rd32(self.b, off::BASE)
    }
    /// The operation counter (section 5; semi-dense leaves do not adapt, it stays 0).
    pub fn op_counter(&self) -> u8 {
        self.b[off::OP_COUNTER]
    }
    /// Lowest heap byte in use.
    pub fn heap_start(&self) -> usize {
        self.heap_start
    }
    /// Live heap bytes: records, fences and the reference.
    pub fn heap_used(&self) -> usize {
        rd32(self.b, off::HEAP_USED) as usize
    }
    /// End of the slot array.
    pub fn slots_end(&self) -> usize {
        HEADER_LEN + SLOT_LEN * self.slots
    }
    /// Start of the reference key (the heap's records lie below it).
    pub fn fixed_start(&self) -> usize {
        self.b.len() - self.lower_len - self.upper_len - self.reference.len()
    }
    /// Contiguous free bytes between the slots and the heap.
    pub fn free_space(&self) -> usize {
        self.heap_start - self.slots_end()
    }
    /// Free bytes after a compaction.
    pub fn free_space_after_compaction(&self) -> usize {
        self.b
            .len()
            .saturating_sub(self.slots_end() + self.heap_used())
    }
    /// The shape this leaf has.
    pub fn shape(&self) -> Shape {
        Shape {
            key_len: self.reference.len(),
            reference: self.reference.to_vec(),
            slots: self.slots,
        }
    }
    /// Lower fence (exclusive; empty = none).
    pub fn lower_fence(&self) -> &'a [u8] {
        &self.b[self.b.len() - self.lower_len..]
    }
    /// Upper fence (inclusive; `None` = none).
    pub fn upper_fence(&self) -> Option<&'a [u8]> {
        if self.b[off::FLAGS] & FLAG_UPPER_INF != 0 {
            return None;
        }
        let end = self.b.len() - self.lower_len;
        Some(&self.b[end - self.upper_len..end])
    }
    /// The slot of `key`, if this leaf has one for it.
    #[inline]
    pub fn slot_of(&self, key: &[u8]) -> Option<usize> {
        dense::slot_of(key, self.reference, self.slots)
    }
    /// The first slot whose key is `>= key` (`slots()` if none).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        slot_lower_bound(self.reference, self.slots, key)
    }
    /// Appends the key of slot `i` to `out`.
    pub fn key_into(&self, i: usize, out: &mut Vec<u8>) {
        slot_key_into(self.reference, i, out);
    }
    /// Heap offset of slot `i`'s record; 0 when the slot is empty (`i < slots()`).
    #[inline]
    pub fn record_offset(&self, i: usize) -> usize {
        rd16(self.b, HEADER_LEN + SLOT_LEN * i)
    }
    /// The value in slot `i < slots()`, `None` when the slot is empty.
    #[inline]
    pub fn value(&self, i: usize) -> Result<Option<&'a [u8]>> {
        let at = self.record_offset(i);
        if at == 0 {
            return Ok(None);
        }
        let vl = self
            .b
            .get(at..at + 2)
            .map(|l| u16::from_le_bytes([l[0], l[1]]) as usize);
        vl.and_then(|vl| self.b.get(at + 2..at + 2 + vl))
            .map(Some)
            .ok_or_else(|| corrupt(self.id, format!("record of slot {i} outside the page")))
    }
}

/// Write access to a semi-dense leaf whose latch the caller holds.
pub struct SemiDenseMut<'a> {
    id: PageId,
    b: &'a mut [u8],
}

impl<'a> SemiDenseMut<'a> {
    /// Validates and wraps page `id`.
    pub fn new(id: PageId, b: &'a mut [u8]) -> Result<Self> {
        SemiDense::new(id, b)?;
        Ok(SemiDenseMut { id, b })
    }

    /// A read view.
    pub fn view(&self) -> Result<SemiDense<'_>> {
        SemiDense::new(self.id, self.b)
    }

    /// Stores `value` in slot `i < slots`, compacting the heap if needed. `Ok(Some(inserted))`
    /// says whether the slot was empty; `Ok(None)` means the record does not fit even after
    /// compaction, and nothing changed.
    pub fn put(&mut self, i: usize, value: &[u8]) -> Result<Option<bool>> {
        let v = self.view()?;
        if i >= v.slots() {
            return Err(corrupt(self.id, "semi-dense slot out of range"));
        }
        let old = v.value(i)?.map(<[u8]>::len);
        if old == Some(value.len()) {
            let at = v.record_offset(i) + 2;
            self.b[at..at + value.len()].copy_from_slice(value);
            return Ok(Some(false));
        }
        let need = record_len(value.len());
        let reclaim = old.map_or(0, record_len);
        if v.free_space_after_compaction() + reclaim < need || value.len() > u16::MAX as usize {
            return Ok(None);
        }
        if old.is_some() {
            self.clear(i)?;
        }
        if self.view()?.free_space() < need {
            self.compact()?;
        }
        let v = self.view()?;
        let mut p = Placer {
            slots_end: v.slots_end(),
            heap_start: v.heap_start(),
            heap_used: v.heap_used(),
            count: v.count(),
            b: self.b,
        };
        if !p.place(i, value) {
            return Err(corrupt(self.id, "record did not fit after the space check"));
        }
        p.finish();
        Ok(Some(old.is_none()))
    }

    /// Empties slot `i`; returns whether it held a record. Its heap bytes become garbage until
    /// the next compaction.
    pub fn clear(&mut self, i: usize) -> Result<bool> {
        let v = self.view()?;
        if i >= v.slots() {
            return Ok(false);
        }
        let Some(old) = v.value(i)? else {
            return Ok(false);
        };
        // Saturating: a damaged page must not make this panic (the check reports it).
        let (count, used) = (
            v.count().saturating_sub(1),
            v.heap_used().saturating_sub(record_len(old.len())),
        );
        wr16(self.b, HEADER_LEN + SLOT_LEN * i, 0);
        wr16(self.b, off::COUNT, count);
        wr32(self.b, off::HEAP_USED, used as u32);
        Ok(true)
    }

    /// Rewrites the heap with the live records packed against the reference key.
    pub fn compact(&mut self) -> Result<()> {
        let v = self.view()?;
        let (slots_end, fixed) = (v.slots_end(), v.fixed_start());
        let mut scratch = vec![0u8; self.b.len()];
        scratch[..slots_end].copy_from_slice(&self.b[..slots_end]);
        scratch[fixed..].copy_from_slice(&self.b[fixed..]);
        let mut p = Placer {
            b: &mut scratch,
            slots_end,
            heap_start: fixed,
            heap_used: self.b.len() - fixed,
            count: 0,
        };
        for i in 0..v.slots() {
            if let Some(value) = v.value(i)? {
                if !p.place(i, value) {
                    return Err(corrupt(self.id, "records do not fit their own page"));
                }
            }
        }
        p.finish();
        self.b.copy_from_slice(&scratch);
        Ok(())
    }

    /// Sets the operation counter.
    pub fn set_op_counter(&mut self, c: u8) {
        self.b[off::OP_COUNTER] = c;
    }
}
