//! The fingerprinting leaf (paper section 3.4, after FPTree).
//!
//! It is the slotted format of [`super::slotted`] with kind [`KIND_FP_LEAF`], no heads and no
//! hints, plus:
//! - an array of one-byte fingerprints (a hash of each stored key, the truncated prefix
//!   excluded) on the heap, parallel to the slot array, with spare capacity for appends;
//! - an unsorted tail: slots `0..sorted` are in key order, slots `sorted..count` in insertion
//!   order. Inserts append; a point lookup scans the fingerprints with SIMD (SSE2 on x86_64, a
//!   scalar loop elsewhere) and compares the full key only where the fingerprint matches.
//!
//! Before a scan, split or merge the tail is sorted into place ([`sort`]). The paper sorts the
//! slot array and recomputes the fingerprints; we move each fingerprint with its slot, which
//! gives the same array without hashing every key again, and compares keys by their first
//! eight bytes as an integer before falling back to the bytes after them. The sort writes the
//! page, so the tree performs it under the leaf's write latch (a scan upgrades for it).
//!
//! Header fields specific to this kind (they reuse the bytes of `upper_child`, which leaves do
//! not need): `sorted` (u16 at 24), `fp_off` (u16 at 26), `fp_cap` (u16 at 28).

use super::slotted::{off, rd16, wr16, SlottedMut, SLOT_LEN};
use super::{eq_keys, KIND_FP_LEAF};
use crate::error::Result;
use crate::page::slotted::Slotted;

/// The one-byte fingerprint of a stored key.
#[inline]
pub fn fingerprint(key: &[u8]) -> u8 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (key.len() as u64).wrapping_mul(K);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    ((h ^ (h >> 32)).wrapping_mul(K) >> 56) as u8
}

/// Bit `j` set where `fps[j] == h`, for the 16 bytes of `fps` at `at`.
#[cfg(target_arch = "x86_64")]
#[inline]
fn match_mask16(fps: &[u8], at: usize, h: u8) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    let chunk = &fps[at..at + 16];
    // SAFETY: SSE2 is part of the x86_64 baseline; `chunk` is exactly 16 readable bytes and the
    // load is unaligned.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(h as i8))) as u32
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn match_mask16(fps: &[u8], at: usize, h: u8) -> u32 {
    fps[at..at + 16]
        .iter()
        .enumerate()
        .fold(0, |m, (j, &f)| m | (u32::from(f == h) << j))
}

/// The first slot of `v` whose stored key is `key` (already truncated), using the SIMD scan.
#[inline]
pub fn find(v: &Slotted<'_>, key: &[u8]) -> Result<Option<usize>> {
    let fps = v.fingerprints();
    let h = fingerprint(key);
    let mut at = 0;
    while at + 16 <= fps.len() {
        let mut mask = match_mask16(fps, at, h);
        while mask != 0 {
            let i = at + mask.trailing_zeros() as usize;
            if eq_keys(v.key(i)?, key) {
                return Ok(Some(i));
            }
            mask &= mask - 1;
        }
        at += 16;
    }
    for (i, &f) in fps.iter().enumerate().skip(at) {
        if f == h && eq_keys(v.key(i)?, key) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// [`find`] without SIMD (the fallback, and the reference in tests).
pub fn find_scalar(v: &Slotted<'_>, key: &[u8]) -> Result<Option<usize>> {
    let h = fingerprint(key);
    for (i, &f) in v.fingerprints().iter().enumerate() {
        if f == h && eq_keys(v.key(i)?, key) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// Appends a record with stored key `key` to the unsorted tail (the caller checked the key is
/// absent). Sorts and compacts when space is short; `false` if it does not fit even then.
pub fn insert(m: &mut SlottedMut<'_>, key: &[u8], value: &[u8]) -> Result<bool> {
    let v = m.view();
    let (count, cap, free) = (v.count(), v.fp_capacity(), v.free_space());
    let base = SLOT_LEN + key.len() + value.len();
    if count < cap && free >= base {
        append(m, key, value);
        return Ok(true);
    }
    if count == cap && free > base + count {
        grow(m, (count + 16).min(free - base));
        append(m, key, value);
        return Ok(true);
    }
    // Free bytes if the heap were packed and the fingerprint array had no spare entries.
    let room = v.free_space_after_compaction() + (cap - count);
    if room < base + 1 {
        return Ok(false);
    }
    let page_len = v.bytes().len();
    sort(m)?;
    let mut scratch = vec![0u8; page_len];
    let headroom = (room - base).min(16);
    super::build::rebuild_with_headroom(&m.view(), &mut scratch, headroom)?;
    m.bytes_mut().copy_from_slice(&scratch);
    let v = m.view();
    if v.count() < v.fp_capacity() && v.free_space() >= base {
        append(m, key, value);
        return Ok(true);
    }
    Err(crate::page::corrupt(
        v.id(),
        "fingerprint leaf space accounting is inconsistent",
    ))
}

/// Moves the fingerprint array to a new place on the heap with capacity `new_cap`.
fn grow(m: &mut SlottedMut<'_>, new_cap: usize) {
    let v = m.view();
    let (count, cap, heap_start, heap_used) =
        (v.count(), v.fp_capacity(), v.heap_start(), v.heap_used());
    let old = rd16(v.bytes(), off::FP_OFF);
    let at = heap_start - new_cap;
    let b = m.bytes_mut();
    b.copy_within(old..old + count, at);
    wr16(b, off::FP_OFF, at);
    wr16(b, off::FP_CAP, new_cap);
    b[off::HEAP_START..off::HEAP_START + 4].copy_from_slice(&(at as u32).to_le_bytes());
    b[off::HEAP_USED..off::HEAP_USED + 4]
        .copy_from_slice(&((heap_used + new_cap - cap) as u32).to_le_bytes());
}

fn append(m: &mut SlottedMut<'_>, key: &[u8], value: &[u8]) {
    let v = m.view();
    let (count, heap_start, heap_used, base) =
        (v.count(), v.heap_start(), v.heap_used(), v.slot_base());
    let fp_off = rd16(v.bytes(), off::FP_OFF);
    let rec = key.len() + value.len();
    let at = heap_start - rec;
    let b = m.bytes_mut();
    b[at..at + key.len()].copy_from_slice(key);
    b[at + key.len()..at + rec].copy_from_slice(value);
    let s = base + count * SLOT_LEN;
    wr16(b, s, at);
    wr16(b, s + 2, key.len());
    wr16(b, s + 4, value.len());
    b[fp_off + count] = fingerprint(key);
    wr16(b, off::COUNT, count + 1);
    b[off::HEAP_START..off::HEAP_START + 4].copy_from_slice(&(at as u32).to_le_bytes());
    b[off::HEAP_USED..off::HEAP_USED + 4]
        .copy_from_slice(&((heap_used + rec) as u32).to_le_bytes());
}

/// Removes slot `idx` and its fingerprint.
pub fn remove(m: &mut SlottedMut<'_>, idx: usize) {
    let v = m.view();
    let (count, sorted) = (v.count(), v.sorted());
    let fp_off = rd16(v.bytes(), off::FP_OFF);
    m.remove(idx);
    let b = m.bytes_mut();
    b.copy_within(fp_off + idx + 1..fp_off + count, fp_off + idx);
    if idx < sorted {
        wr16(b, off::FP_SORTED, sorted - 1);
    }
}

/// Sorts the unsorted tail into place; each fingerprint moves with its slot.
pub fn sort(m: &mut SlottedMut<'_>) -> Result<()> {
    let v = m.view();
    if v.kind() != KIND_FP_LEAF || v.sorted() == v.count() {
        return Ok(());
    }
    let (count, base) = (v.count(), v.slot_base());
    // Sort slot numbers by (first eight key bytes as an integer, then the rest of the key):
    // most comparisons are one integer comparison instead of a `memcmp` call. The integer
    // orders keys whenever it differs, like a head (section 3.2); when it ties, both keys agree
    // on their first eight bytes (or are equal up to zero padding, which the whole-key
    // comparison settles).
    let mut order: Vec<(u64, &[u8], u16)> = Vec::with_capacity(count);
    for i in 0..count {
        let k = v.key(i)?;
        order.push((order_key(k), k, i as u16));
    }
    // The sorted prefix and the tail are runs; the stable sort merges them cheaply.
    order.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| match (a.1.get(8..), b.1.get(8..)) {
                (Some(x), Some(y)) => x.cmp(y),
                _ => a.1.cmp(b.1),
            })
    });
    let fps = v.fingerprints();
    let mut moved: Vec<([u8; SLOT_LEN], u8)> = Vec::with_capacity(count);
    for &(_, _, i) in &order {
        let (i, s) = (usize::from(i), base + usize::from(i) * SLOT_LEN);
        let mut raw = [0u8; SLOT_LEN];
        raw.copy_from_slice(&v.bytes()[s..s + SLOT_LEN]);
        let fp = match fps.get(i) {
            Some(&f) => f,
            None => fingerprint(v.key(i)?),
        };
        moved.push((raw, fp));
    }
    let fp_off = rd16(v.bytes(), off::FP_OFF);
    let b = m.bytes_mut();
    for (i, (raw, fp)) in moved.iter().enumerate() {
        let s = base + i * SLOT_LEN;
        b[s..s + SLOT_LEN].copy_from_slice(raw);
        b[fp_off + i] = *fp;
    }
    wr16(b, off::FP_SORTED, count);
    Ok(())
}

/// A key's first eight bytes as a big-endian integer, zero-padded: `order_key(a) <
/// order_key(b)` implies `a < b`, and equal values leave the order to the whole keys.
#[inline]
pub(crate) fn order_key(key: &[u8]) -> u64 {
    if let Some(b) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*b);
    }
    key.iter()
        .enumerate()
        .fold(0, |h, (i, &b)| h | u64::from(b) << (56 - 8 * i))
}
