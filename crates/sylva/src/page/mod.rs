//! In-memory node pages: the slotted-page node formats of "B-Trees Are Back" (SIGMOD 2025).
//!
//! A node is a fixed-size byte buffer (2–64 KiB, default 4 KiB) with typed views: an accessor
//! over `&[u8]` that decodes and bounds-checks, and a mutator over `&mut [u8]` that edits in
//! place. Nothing here is a `#[repr(C)]` struct: every field is read and written as explicit
//! little-endian bytes at a documented offset (`docs/format.md`, section "In-memory node pages").
//!
//! Files:
//! - [`slotted`]: the comparison-based node of section 2 (header, slot array growing up, heap
//!   growing down, lazy compaction) with the switchable optimizations of sections 3.1–3.3:
//!   prefix truncation, 4-byte heads in the slots, and the 16-entry hint array. Inner nodes and
//!   comparison leaves share this format; the kind byte tells them apart.
//! - [`fingerprint`]: the fingerprinting leaf of section 3.4 (a slotted variant with an unsorted
//!   tail and a one-byte hash per key, scanned with SIMD).
//! - [`semidense`]: the semi-dense leaf of section 3.5 (one 2-byte slot per key the fences
//!   admit, indexed by the key's numeric part, pointing to a length-prefixed value on the heap).
//! - [`dense`]: the fully-dense leaf of section 3.5 (values in an array indexed by the key's
//!   numeric part, a presence bitmap).
//! - [`build`]: writing a fresh node from a sorted record stream (used by split, merge and
//!   compaction) and the separator choice of section 2.
//!
//! The adaptive policy (section 5) lives in `sylva::btree`.
//!
//! Why the decoders check every offset even for pages that never leave memory: the tree reads
//! pages optimistically (optimistic lock coupling) while a writer may be changing them, so an
//! accessor can see torn bytes. Every length and offset is bounds-checked before use and a
//! failed check is an [`Error::Corruption`]; the tree then validates the page version and
//! restarts instead of reporting it when the page changed underneath.

pub mod build;
pub mod dense;
pub mod fingerprint;
pub mod semidense;
pub mod slotted;

use crate::error::Error;

/// Identifies a node page in a node store.
pub type PageId = u64;

/// Smallest supported page size in bytes.
pub const MIN_PAGE_SIZE: usize = 2 * 1024;
/// Largest supported page size in bytes.
pub const MAX_PAGE_SIZE: usize = 64 * 1024;
/// Default page size in bytes.
pub const DEFAULT_PAGE_SIZE: usize = 4 * 1024;

/// Kind tag (byte 0) of an inner node in the slotted format.
pub const KIND_INNER: u8 = 1;
/// Kind tag (byte 0) of a comparison-based leaf in the slotted format.
pub const KIND_LEAF: u8 = 2;
/// Kind tag (byte 0) of a fingerprinting leaf (section 3.4): the slotted format without heads,
/// an unsorted tail of slots, and a fingerprint array on the heap.
pub const KIND_FP_LEAF: u8 = 3;

/// The bytes of node page `page` that are never read: the free gap between the slot array and
/// the heap of a slotted node or a semi-dense leaf, as `(start, end)`; `None` for other kinds
/// (and for a page that does not decode). The durable store leaves the gap out of logged page
/// images and scans leave it out of their snapshots.
pub fn free_gap(id: PageId, page: &[u8]) -> Option<(usize, usize)> {
    let (slots_end, heap_start) = match page.first() {
        Some(&semidense::KIND_SEMI_DENSE_LEAF) => {
            let s = semidense::SemiDense::new(id, page).ok()?;
            (s.slots_end(), s.heap_start())
        }
        Some(&(KIND_INNER | KIND_LEAF | KIND_FP_LEAF)) => {
            let node = slotted::Slotted::new(id, page).ok()?;
            (
                node.slot_base() + node.count() * node.slot_len(),
                node.heap_start(),
            )
        }
        _ => return None,
    };
    (slots_end <= heap_start && heap_start <= page.len()).then_some((slots_end, heap_start))
}

/// A corruption error for page `page`.
pub(crate) fn corrupt(page: PageId, detail: impl Into<String>) -> Error {
    Error::Corruption {
        page,
        detail: detail.into(),
    }
}

/// Length of the longest common prefix of `a` and `b`.
#[inline]
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Orders byte strings exactly as `<[u8] as Ord>::cmp`, inline: eight bytes at a time as
/// big-endian words, then the tail byte by byte. Keys in a node share their first bytes (the
/// heads already matched when a search gets here), so the comparisons that reach this are short
/// runs of equal words, which a call to libc's `memcmp` made cost more than the comparison.
/// When both keys are longer than [`INLINE_CMP_BYTES`], `memcmp` it is after all: its vector
/// loop is faster over long equal runs.
#[inline]
pub fn cmp_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    if n > INLINE_CMP_BYTES {
        return a.cmp(b);
    }
    let (mut x, mut y) = (&a[..n], &b[..n]);
    while let (Some((wa, ra)), Some((wb, rb))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        if wa != wb {
            return u64::from_be_bytes(*wa).cmp(&u64::from_be_bytes(*wb));
        }
        (x, y) = (ra, rb);
    }
    for (ca, cb) in x.iter().zip(y) {
        if ca != cb {
            return ca.cmp(cb);
        }
    }
    a.len().cmp(&b.len())
}

/// Key length up to which [`cmp_keys`] compares inline rather than through `memcmp`.
pub const INLINE_CMP_BYTES: usize = 256;

/// Whether two byte strings are equal, inline (see [`cmp_keys`]).
#[inline]
pub fn eq_keys(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && cmp_keys(a, b) == std::cmp::Ordering::Equal
}

/// A key's head (section 3.2): its first four bytes as a big-endian integer, zero-padded, so
/// that comparing heads as integers orders keys whenever the heads differ.
#[inline]
pub fn head(key: &[u8]) -> u32 {
    if let Some(b) = key.first_chunk::<4>() {
        return u32::from_be_bytes(*b);
    }
    // Shorter keys, byte by byte: a variable-length `copy_from_slice` here compiled to a call
    // to libc's memcpy on every node of every descent (10% of a YCSB C profile).
    key.iter()
        .enumerate()
        .fold(0, |h, (i, &b)| h | u32::from(b) << (24 - 8 * i))
}

#[cfg(test)]
mod head_tests {
    use super::{cmp_keys, eq_keys, head};
    use proptest::prelude::*;

    proptest! {
        /// Keys longer than `INLINE_CMP_BYTES` take the `memcmp` path; long shared prefixes test
        /// both paths' equal runs.
        #[test]
        fn key_comparison_orders_like_slices_past_long_shared_prefixes(
            shared in proptest::collection::vec(any::<u8>(), 0..300),
            sa in proptest::collection::vec(0u8..2, 0..12),
            sb in proptest::collection::vec(0u8..2, 0..12),
        ) {
            let (a, b) = ([&shared[..], &sa].concat(), [&shared[..], &sb].concat());
            prop_assert_eq!(cmp_keys(&a, &b), a.cmp(&b));
            prop_assert_eq!(cmp_keys(&b, &a), b.cmp(&a));
            prop_assert_eq!(eq_keys(&a, &b), a == b);
        }

        /// Keys drawn from a two-letter alphabet share prefixes, so the word loop, the tail
        /// loop and the length tie-break are all exercised.
        #[test]
        fn key_comparison_orders_like_slices(
            a in proptest::collection::vec(0u8..2, 0..40),
            b in proptest::collection::vec(0u8..2, 0..40),
        ) {
            prop_assert_eq!(cmp_keys(&a, &b), a.cmp(&b));
            prop_assert_eq!(cmp_keys(&b, &a), b.cmp(&a));
            prop_assert_eq!(eq_keys(&a, &b), a == b);
            prop_assert_eq!(cmp_keys(&a, &a), std::cmp::Ordering::Equal);
        }
    }

    #[test]
    fn key_comparison_reads_bytes_as_unsigned_big_endian() {
        // The first difference decides, in byte order, whatever the bytes after it.
        assert!(cmp_keys(
            &[0x01, 0xff, 0, 0, 0, 0, 0, 0, 0],
            &[0x02, 0, 0, 0, 0, 0, 0, 0]
        )
        .is_lt());
        assert!(cmp_keys(&[0x80; 9], &[0x7f; 12]).is_gt());
        assert!(cmp_keys(b"abcdefgh", b"abcdefghi").is_lt());
    }

    #[test]
    fn heads_are_the_first_four_bytes_zero_padded_and_order_like_keys() {
        assert_eq!(head(b""), 0);
        assert_eq!(head(&[0x01]), 0x0100_0000);
        assert_eq!(head(&[0x01, 0x02, 0x03]), 0x0102_0300);
        assert_eq!(head(&[0x01, 0x02, 0x03, 0x04]), 0x0102_0304);
        assert_eq!(head(&[0xff, 0x02, 0x03, 0x04, 0x05]), 0xff02_0304);
        let keys: [&[u8]; 6] = [b"", b"\x00", b"a", b"ab", b"abcd", b"b"];
        for w in keys.windows(2) {
            assert!(head(w[0]) <= head(w[1]), "{w:?}");
        }
    }
}
