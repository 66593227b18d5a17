//! The fully-dense leaf (paper section 3.5): values in a plain array indexed by the key's
//! numeric part minus that of a reference key, with a presence bitmap.
//!
//! Preconditions for a set of records under fences `(lower, upper]`: every key has the same
//! length `L`, every value the same length `V`; the keys' non-numeric part (all but the last
//! four bytes; empty when `L <= 4`) equals that of the *reference key*, the smallest `L`-byte
//! key greater than the lower fence; and each key's offset `numeric(key) - numeric(reference)`
//! is below the capacity. The numeric part is the last `min(L, 4)` bytes read as a big-endian
//! integer (shorter keys are zero-extended at the front, as in the paper).
//!
//! Capacity is what fits the page (bitmap plus `V`-byte values), capped so that
//! `numeric(reference) + capacity - 1` never overflows `L` bytes. It does not depend on the
//! fences: a dense leaf may cover less than its key range (the paper's "dense leaf split" then
//! hands the keys past the last slot to a new leaf by lowering the upper fence, for which room
//! of `L` bytes is reserved at creation).
//!
//! ```text
//! 0       24                 24+bitmap               ...      page end
//! | header | bitmap (u64 words) | values[capacity × V] | ... | reference | upper (reserved) | lower |
//! ```
//! Header: kind u8 (5), flags u8 (bit 2 `UPPER_INF`), count u16, capacity u16, key_len u16,
//! value_len u16, lower_len u16, upper_len u16, upper_cap u16, base u32 (numeric part of the
//! reference), op_counter u8, 3 reserved bytes. Byte-level detail in `docs/format.md`.

use std::cmp::Ordering;

use super::slotted::{rd16, wr16, wr32, FLAG_UPPER_INF};
use super::{corrupt, PageId};
use crate::error::Result;

/// Kind tag of a fully-dense leaf.
pub const KIND_DENSE_LEAF: u8 = 5;

mod off {
    pub const KIND: usize = 0;
    pub const FLAGS: usize = 1;
    pub const COUNT: usize = 2;
    pub const CAPACITY: usize = 4;
    pub const KEY_LEN: usize = 6;
    pub const VALUE_LEN: usize = 8;
    pub const LOWER_LEN: usize = 10;
    pub const UPPER_LEN: usize = 12;
    pub const UPPER_CAP: usize = 14;
    pub const BASE: usize = 16;
    pub const OP_COUNTER: usize = 20;
}
/// Header length.
pub const HEADER_LEN: usize = 24;

/// The numeric part of a key: its last `min(len, 4)` bytes, big-endian.
#[inline]
pub fn numeric(key: &[u8]) -> u32 {
    // Byte by byte: a variable-length `copy_from_slice` compiles to a call to `memcpy`, once
    // per record of a dense leaf a scan shows.
    key[key.len() - key.len().min(4)..]
        .iter()
        .fold(0, |x, &b| x << 8 | u32::from(b))
}

/// The largest numeric part a `key_len`-byte key can have.
pub(crate) fn max_numeric(key_len: usize) -> u64 {
    (1u64 << (8 * key_len.min(4))) - 1
}

/// The smallest `len`-byte key greater than `lower`, or `None` if there is none.
pub fn reference(lower: &[u8], len: usize) -> Option<Vec<u8>> {
    if lower.len() < len {
        let mut r = lower.to_vec();
        r.resize(len, 0);
        return Some(r);
    }
    let mut r = lower[..len].to_vec();
    for i in (0..len).rev() {
        if r[i] == 0xFF {
            r[i] = 0;
        } else {
            r[i] += 1;
            return Some(r);
        }
    }
    None
}

fn bitmap_len(capacity: usize) -> usize {
    capacity.div_ceil(64) * 8
}

/// The shape of a dense leaf: key and value length, reference key, capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Length of every key.
    pub key_len: usize,
    /// Length of every value.
    pub value_len: usize,
    /// The smallest `key_len`-byte key above the lower fence.
    pub reference: Vec<u8>,
    /// Number of slots.
    pub capacity: usize,
    /// Bytes reserved for the upper fence.
    pub upper_cap: usize,
}

impl Shape {
    /// The shape a dense leaf with these fences, key length and value length would have, if
    /// one is possible on a page of `page_size` bytes.
    pub fn new(
        page_size: usize,
        lower: &[u8],
        upper: Option<&[u8]>,
        key_len: usize,
        value_len: usize,
    ) -> Option<Shape> {
        if key_len == 0 {
            return None;
        }
        let reference = reference(lower, key_len)?;
        let upper_cap = key_len.max(upper.map_or(0, <[u8]>::len));
        let fixed = HEADER_LEN + lower.len() + upper_cap + key_len;
        let space = page_size.checked_sub(fixed)?;
        let mut cap = (space * 8 / (8 * value_len + 1)).min(u16::MAX as usize);
        while cap > 0 && bitmap_len(cap) + cap * value_len > space {
            cap -= 1;
        }
        let base = numeric(&reference) as u64;
        cap = cap.min((max_numeric(key_len) - base + 1) as usize);
        (cap > 0).then_some(Shape {
            key_len,
            value_len,
            reference,
            capacity: cap,
            upper_cap,
        })
    }

    /// The slot of `key` in a leaf of this shape, if it has one.
    #[inline]
    pub fn slot_of(&self, key: &[u8]) -> Option<usize> {
        slot_of(key, &self.reference, self.capacity)
    }
}

/// The slot of `key` among `capacity` slots starting at `reference` (slot `i` holds the key
/// with the reference's non-numeric part and numeric part `numeric(reference) + i`): `None` if
/// the length, the non-numeric part or the offset does not match. Shared with the semi-dense
/// leaf.
#[inline]
pub(crate) fn slot_of(key: &[u8], reference: &[u8], capacity: usize) -> Option<usize> {
    let l = reference.len();
    if key.len() != l {
        return None;
    }
    let nn = l.saturating_sub(4);
    if key[..nn] != reference[..nn] {
        return None;
    }
    let (n, base) = (numeric(key), numeric(reference));
    let off = n.checked_sub(base)? as usize;
    (off < capacity).then_some(off)
}

/// Writes a dense leaf of `shape` with these fences and sorted records (each must have a slot
/// in `shape`). Returns `false` if a record has none.
pub fn build<'r>(
    b: &mut [u8],
    shape: &Shape,
    lower: &[u8],
    upper: Option<&[u8]>,
    op_counter: u8,
    records: impl Iterator<Item = (&'r [u8], &'r [u8])>,
) -> bool {
    let len = b.len();
    b[..HEADER_LEN].fill(0);
    b[off::KIND] = KIND_DENSE_LEAF;
    b[off::FLAGS] = if upper.is_none() { FLAG_UPPER_INF } else { 0 };
    wr16(b, off::CAPACITY, shape.capacity);
    wr16(b, off::KEY_LEN, shape.key_len);
    wr16(b, off::VALUE_LEN, shape.value_len);
    wr16(b, off::LOWER_LEN, lower.len());
    let u = upper.unwrap_or(&[]);
    wr16(b, off::UPPER_LEN, u.len());
    wr16(b, off::UPPER_CAP, shape.upper_cap);
    wr32(b, off::BASE, numeric(&shape.reference));
    b[off::OP_COUNTER] = op_counter;
    let lo = len - lower.len();
    b[lo..].copy_from_slice(lower);
    let up = lo - shape.upper_cap;
    b[up..up + u.len()].copy_from_slice(u);
    let rf = up - shape.key_len;
    b[rf..rf + shape.key_len].copy_from_slice(&shape.reference);
    let values = HEADER_LEN + bitmap_len(shape.capacity);
    b[HEADER_LEN..values].fill(0);
    let mut count = 0;
    for (k, v) in records {
        let Some(i) = shape.slot_of(k) else {
            return false;
        };
        if v.len() != shape.value_len {
            return false;
        }
        b[HEADER_LEN + i / 8] |= 1 << (i % 8);
        b[values + i * shape.value_len..values + (i + 1) * shape.value_len].copy_from_slice(v);
        count += 1;
    }
    wr16(b, off::COUNT, count);
    true
}

/// Read access to a dense leaf.
#[derive(Clone, Copy)]
pub struct Dense<'a> {
    id: PageId,
    b: &'a [u8],
    count: usize,
    capacity: usize,
    key_len: usize,
    value_len: usize,
    values: usize,
    reference: &'a [u8],
}

impl<'a> Dense<'a> {
    /// Decodes and bounds-checks the header of page `id`.
    pub fn new(id: PageId, b: &'a [u8]) -> Result<Self> {
        if b.len() < HEADER_LEN || b[off::KIND] != KIND_DENSE_LEAF {
            return Err(corrupt(id, "not a dense leaf"));
        }
        let (count, capacity, key_len, value_len) = (
            rd16(b, off::COUNT),
            rd16(b, off::CAPACITY),
            rd16(b, off::KEY_LEN),
            rd16(b, off::VALUE_LEN),
        );
        let (lower_len, upper_len, upper_cap) = (
            rd16(b, off::LOWER_LEN),
            rd16(b, off::UPPER_LEN),
            rd16(b, off::UPPER_CAP),
        );
        let values = HEADER_LEN + bitmap_len(capacity);
        let fixed = values + capacity * value_len + key_len + upper_cap + lower_len;
        if fixed > b.len() || upper_len > upper_cap || count > capacity || key_len == 0 {
            return Err(corrupt(id, "dense leaf header out of bounds"));
        }
        let rf = b.len() - lower_len - upper_cap - key_len;
        Ok(Dense {
            id,
            b,
            count,
            capacity,
            key_len,
            value_len,
            values,
            reference: &b[rf..rf + key_len],
        })
    }

    /// Present records.
    pub fn count(&self) -> usize {
        self.count
    }
    /// Slots.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Key length of every record.
    pub fn key_len(&self) -> usize {
        self.key_len
    }
    /// Value length of every record.
    pub fn value_len(&self) -> usize {
        self.value_len
    }
    /// The reference key (the key of slot 0).
    pub fn reference(&self) -> &'a [u8] {
        self.reference
    }
    /// The operation counter (section 5).
    pub fn op_counter(&self) -> u8 {
        self.b[off::OP_COUNTER]
    }
    /// The shape this leaf has.
    pub fn shape(&self) -> Shape {
        Shape {
            key_len: self.key_len,
            value_len: self.value_len,
            reference: self.reference.to_vec(),
            capacity: self.capacity,
            upper_cap: rd16(self.b, off::UPPER_CAP),
        }
    }
    /// Lower fence (exclusive; empty = none).
    pub fn lower_fence(&self) -> &'a [u8] {
        &self.b[self.b.len() - rd16(self.b, off::LOWER_LEN)..]
    }
    /// Upper fence (inclusive; `None` = none).
    pub fn upper_fence(&self) -> Result<Option<&'a [u8]>> {
        if self.b[off::FLAGS] & FLAG_UPPER_INF != 0 {
            return Ok(None);
        }
        let at = self.b.len() - rd16(self.b, off::LOWER_LEN) - rd16(self.b, off::UPPER_CAP);
        self.b
            .get(at..at + rd16(self.b, off::UPPER_LEN))
            .map(Some)
            .ok_or_else(|| corrupt(self.id, "upper fence outside the page"))
    }
    /// The slot of `key`, if this leaf has one for it.
    #[inline]
    pub fn slot_of(&self, key: &[u8]) -> Option<usize> {
        slot_of(key, self.reference, self.capacity)
    }
    /// Whether slot `i` holds a record.
    #[inline]
    pub fn present(&self, i: usize) -> bool {
        i < self.capacity && self.b[HEADER_LEN + i / 8] & (1 << (i % 8)) != 0
    }
    /// The value in slot `i`.
    #[inline]
    pub fn value(&self, i: usize) -> &'a [u8] {
        let at = self.values + i * self.value_len;
        &self.b[at..at + self.value_len]
    }
    /// Appends the key of slot `i` to `out`.
    pub fn key_into(&self, i: usize, out: &mut Vec<u8>) {
        slot_key_into(self.reference, i, out);
    }
    /// The first slot whose key is `>= key` (`capacity` if none).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        slot_lower_bound(self.reference, self.capacity, key)
    }
}

/// Appends the key of slot `i` of a leaf whose slot 0 holds `reference` to `out`.
#[inline]
pub(crate) fn slot_key_into(reference: &[u8], i: usize, out: &mut Vec<u8>) {
    SlotKeys::new(reference).write(i, out);
}

/// The keys of a dense or semi-dense leaf's slots, decoded once per leaf: slot `i` holds
/// `fixed ++ last tail bytes of (base + i)` (big-endian).
#[derive(Clone, Copy)]
pub(crate) struct SlotKeys<'a> {
    fixed: &'a [u8],
    base: u32,
    tail: usize,
}

impl<'a> SlotKeys<'a> {
    /// The slot keys of a leaf whose slot 0 holds `reference`.
    #[inline]
    pub(crate) fn new(reference: &'a [u8]) -> Self {
        let l = reference.len();
        SlotKeys {
            fixed: &reference[..l.saturating_sub(4)],
            base: numeric(reference),
            tail: l.min(4),
        }
    }

    /// Appends the key of slot `i` to `out`.
    #[inline]
    pub(crate) fn write(&self, i: usize, out: &mut Vec<u8>) {
        if !self.fixed.is_empty() {
            out.extend_from_slice(self.fixed);
        }
        if self.tail > 0 {
            // All four bytes with the tail first, then cut: a fixed-size copy, where a
            // variable-length one would call `memcpy`.
            let n = self.base.wrapping_add(i as u32) << (8 * (4 - self.tail));
            out.extend_from_slice(&n.to_be_bytes());
            out.truncate(out.len() - (4 - self.tail));
        }
    }
}

/// Compares the key of slot `i` (slot 0 holding `reference`) with `key`.
#[cfg(test)]
fn cmp_slot(reference: &[u8], i: usize, key: &[u8]) -> Ordering {
    let l = reference.len();
    let nn = l.saturating_sub(4);
    let n = numeric(reference).wrapping_add(i as u32).to_be_bytes();
    let tail = &n[4 - l.min(4)..];
    let (k1, k2) = key.split_at(key.len().min(nn));
    match reference[..nn].cmp(k1) {
        Ordering::Equal if k1.len() < nn => Ordering::Greater,
        Ordering::Equal => tail.cmp(k2),
        o => o,
    }
}

/// The first of `capacity` slots (slot 0 holding `reference`) whose key is `>= key`
/// (`capacity` if none), computed from the key's numeric part rather than searched: slot `i`
/// holds the key with the reference's non-numeric part and numeric part
/// `numeric(reference) + i`.
#[inline]
pub(crate) fn slot_lower_bound(reference: &[u8], capacity: usize, key: &[u8]) -> usize {
    let l = reference.len();
    let nn = l.saturating_sub(4);
    let t = l - nn;
    let (k1, k2) = key.split_at(key.len().min(nn));
    match reference[..nn].cmp(k1) {
        // Every slot's key is above `key` (also when `k1` is a proper prefix of the
        // non-numeric part).
        Ordering::Greater => return 0,
        Ordering::Less => return capacity,
        Ordering::Equal => {}
    }
    // The numeric tails are `t`-byte strings. The first tail `>= k2`: `k2` zero-padded to `t`
    // bytes when it is not longer than `t`; when it is longer, a tail equal to its first `t`
    // bytes is a proper prefix of `k2`, hence smaller, so one past that.
    let mut x = 0u64;
    for j in 0..t {
        x = x << 8 | u64::from(k2.get(j).copied().unwrap_or(0));
    }
    let y = x + u64::from(k2.len() > t);
    let base = u64::from(numeric(reference));
    (y.saturating_sub(base)).min(capacity as u64) as usize
}

/// Write access to a dense leaf.
pub struct DenseMut<'a> {
    id: PageId,
    b: &'a mut [u8],
}

impl<'a> DenseMut<'a> {
    /// Validates and wraps page `id`.
    pub fn new(id: PageId, b: &'a mut [u8]) -> Result<Self> {
        Dense::new(id, b)?;
        Ok(DenseMut { id, b })
    }
    /// Stores `value` (of the leaf's value length) in slot `i < capacity`; returns whether the
    /// slot was empty.
    pub fn set(&mut self, i: usize, value: &[u8]) -> Result<bool> {
        let (cap, vl, count) = (
            rd16(self.b, off::CAPACITY),
            rd16(self.b, off::VALUE_LEN),
            rd16(self.b, off::COUNT),
        );
        if i >= cap || value.len() != vl {
            return Err(corrupt(self.id, "dense slot or value length out of range"));
        }
        let at = HEADER_LEN + bitmap_len(cap) + i * vl;
        self.b[at..at + vl].copy_from_slice(value);
        let was = self.b[HEADER_LEN + i / 8] & (1 << (i % 8)) != 0;
        if !was {
            self.b[HEADER_LEN + i / 8] |= 1 << (i % 8);
            wr16(self.b, off::COUNT, count + 1);
        }
        Ok(!was)
    }
    /// Empties slot `i`; returns whether it held a record.
    pub fn clear(&mut self, i: usize) -> bool {
        let (cap, count) = (rd16(self.b, off::CAPACITY), rd16(self.b, off::COUNT));
        if i >= cap || self.b[HEADER_LEN + i / 8] & (1 << (i % 8)) == 0 {
            return false;
        }
        self.b[HEADER_LEN + i / 8] &= !(1 << (i % 8));
        wr16(self.b, off::COUNT, count - 1);
        true
    }
    /// Sets the operation counter.
    pub fn set_op_counter(&mut self, c: u8) {
        self.b[off::OP_COUNTER] = c;
    }
}

#[cfg(test)]
mod tests {
    use super::{cmp_slot, slot_lower_bound};
    use std::cmp::Ordering;

    /// The first slot `>= key` by binary search over `cmp_slot`.
    fn searched(reference: &[u8], capacity: usize, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, capacity);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cmp_slot(reference, mid, key) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    #[test]
    fn computed_lower_bound_matches_binary_search() {
        let references: [&[u8]; 8] = [
            &[0x10],
            &[0x00, 0xf0],
            &[0x01, 0x02, 0xfe],
            &[0, 0, 0, 0],
            &[0x12, 0x34, 0x56, 0x00],
            &[0xff, 0xff, 0xff, 0x00],
            &[b'a', b'b', 0x00, 0x00, 0x01, 0x00],
            &[b'a', b'b', 0xff, 0xff, 0xff, 0xf0],
        ];
        let mut rng = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for r in references {
            let base = super::numeric(r) as u64;
            let max_cap = (super::max_numeric(r.len()) - base + 1).min(600) as usize;
            for capacity in [1, 2, 7, max_cap] {
                // Keys near the slots: the slot keys themselves, with a byte appended, cut
                // short, and with bytes around them changed; plus random keys.
                let mut keys: Vec<Vec<u8>> = vec![vec![], r[..r.len() - 1].to_vec()];
                for i in [0, 1, capacity / 2, capacity.saturating_sub(1), capacity] {
                    let mut k = Vec::new();
                    super::slot_key_into(r, i, &mut k);
                    keys.push(k.clone());
                    let mut longer = k.clone();
                    longer.push(0);
                    keys.push(longer);
                    keys.push(k[..k.len() - 1].to_vec());
                    for j in 0..k.len() {
                        for d in [1u8, 0xff] {
                            let mut c = k.clone();
                            c[j] = c[j].wrapping_add(d);
                            keys.push(c);
                        }
                    }
                }
                for _ in 0..200 {
                    let len = (next() % (r.len() as u64 + 2)) as usize;
                    let mut k: Vec<u8> = r.iter().copied().take(len).collect();
                    k.resize(len, 0);
                    if len > 0 {
                        let j = (next() % len as u64) as usize;
                        k[j] = next() as u8;
                    }
                    keys.push(k);
                }
                for k in &keys {
                    assert_eq!(
                        slot_lower_bound(r, capacity, k),
                        searched(r, capacity, k),
                        "reference {r:?} capacity {capacity} key {k:?}"
                    );
                }
            }
        }
    }
}
