//! The Bloom filter of a d-tree (§5.2): a *blocked* filter, every key's probes inside one
//! 512-bit block (one cache line), with a 64-bit hash pinned by test vectors.
//!
//! Written by hand rather than taken from a crate: the filter is stored in the page file
//! (`Bloom` pages, kind 34) and read back by later builds, so its hash and bit layout are part
//! of `docs/format.md`; `fastbloom` and `bloomfilter` document no stable byte layout or hash
//! across releases, and a filter read with another hash than it was built with gives false
//! negatives, which is a wrong answer.
//!
//! ```text
//! 0..4   blocks u32 LE (≥ 1)
//! 4      probes k (1..=16)
//! 5      probe scheme (1; 0 in filters written before state version 3)
//! 6..8   zero
//! 8..    blocks × 64 bytes; bit b of a block is byte b / 8, bit b % 8
//! ```
//!
//! Hash: FNV-1a 64 over the key, then MurmurHash3's `fmix64`. Block: `((h >> 32) × blocks) >>
//! 32`. Probe `i` (0..k): bit `(h1 + i × h2) mod 512`. `k = round(bits_per_key × ln 2)`,
//! clamped to 1..=16.
//!
//! - Scheme 1 takes both from the hash's low half, which the block does not depend on:
//!   `h1 = h as u32`, `h2 = (h as u32 >> 16) | 1` (bits 0–8 start the probes, bits 16–24 space
//!   them).
//! - Scheme 0, which every filter had before, took `h2 = ((h >> 32) as u32).rotate_left(16) |
//!   1`: bits 48–56 of the hash, which are the block's own bits once a filter has more than
//!   256 blocks. The keys of one block then share one spacing, and a key whose start matches
//!   another key's in its block always passes, so large filters pass many times the keys their
//!   bits allow (`large_filters_keep_their_false_positive_rate`; measured in
//!   `docs/results/nbtree.md`, session 31). Filters of scheme 0 are still read as they were
//!   built; new ones are scheme 1. A store that may hold a scheme 1 filter is state version 3,
//!   which builds that ignore this byte refuse.

use crate::error::{Error, Result};

const BLOCK_BYTES: usize = 64;
const BLOCK_BITS: u32 = 512;
/// Bytes before the blocks.
pub(crate) const HEADER: usize = 8;
/// The probe scheme new filters are built with (module docs).
const SCHEME: u8 = 1;

/// The pinned 64-bit key hash (module docs).
pub(crate) fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Bytes of a filter for `keys` keys at `bits_per_key` (0: no filter).
pub(crate) fn encoded_len(keys: u64, bits_per_key: u32) -> usize {
    if bits_per_key == 0 || keys == 0 {
        return 0;
    }
    let bits = keys.saturating_mul(u64::from(bits_per_key));
    let blocks = bits.div_ceil(u64::from(BLOCK_BITS)).max(1);
    HEADER + blocks as usize * BLOCK_BYTES
}

/// Builds the filter of `hashes` at `bits_per_key`; empty when either is zero.
pub(crate) fn build(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    build_with(hashes, bits_per_key, SCHEME)
}

fn build_with(hashes: &[u64], bits_per_key: u32, scheme: u8) -> Vec<u8> {
    let len = encoded_len(hashes.len() as u64, bits_per_key);
    if len == 0 {
        return Vec::new();
    }
    let blocks = ((len - HEADER) / BLOCK_BYTES) as u32;
    let k = ((f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32).clamp(1, 16);
    let mut b = vec![0u8; len];
    b[0..4].copy_from_slice(&blocks.to_le_bytes());
    b[4] = k as u8;
    b[5] = scheme;
    for &h in hashes {
        let base = HEADER + block_of(h, blocks) * BLOCK_BYTES;
        for bit in probes(h, k, scheme) {
            b[base + (bit / 8) as usize] |= 1 << (bit % 8);
        }
    }
    b
}

fn block_of(h: u64, blocks: u32) -> usize {
    (((h >> 32) * u64::from(blocks)) >> 32) as usize
}

fn probes(h: u64, k: u32, scheme: u8) -> impl Iterator<Item = u32> {
    let h1 = h as u32;
    let h2 = if scheme == 0 {
        ((h >> 32) as u32).rotate_left(16) | 1
    } else {
        (h1 >> 16) | 1
    };
    (0..k).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % BLOCK_BITS)
}

/// A decoded filter (its bytes checked once, so queries need no checks).
#[derive(Debug, Clone)]
pub(crate) struct Bloom {
    bytes: Vec<u8>,
    blocks: u32,
    k: u32,
    scheme: u8,
}

impl Bloom {
    /// Checks and takes the encoded filter `bytes` (`page`: where it was read, for errors).
    pub(crate) fn decode(page: u64, bytes: Vec<u8>) -> Result<Bloom> {
        let bad = |detail: String| Error::Corruption { page, detail };
        if bytes.len() < HEADER + BLOCK_BYTES {
            return Err(bad(format!("Bloom filter of {} bytes", bytes.len())));
        }
        let blocks = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let k = u32::from(bytes[4]);
        if blocks == 0 || HEADER + blocks as usize * BLOCK_BYTES != bytes.len() {
            return Err(bad(format!(
                "Bloom filter of {} bytes claims {blocks} blocks",
                bytes.len()
            )));
        }
        if !(1..=16).contains(&k) {
            return Err(bad(format!("Bloom filter with {k} probes")));
        }
        let scheme = bytes[5];
        if scheme > SCHEME {
            return Err(bad(format!("Bloom filter of probe scheme {scheme}")));
        }
        Ok(Bloom {
            bytes,
            blocks,
            k,
            scheme,
        })
    }

    /// Bytes of the filter.
    pub(crate) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the key with hash `h` may be in the set (never `false` for a key that is).
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        let base = HEADER + block_of(h, self.blocks) * BLOCK_BYTES;
        let block = &self.bytes[base..base + BLOCK_BYTES];
        probes(h, self.k, self.scheme).all(|bit| block[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The hash is part of the on-disk format: these values (computed by an independent
    /// implementation of the module docs' definition) must never change.
    #[test]
    fn hash_is_pinned_by_test_vectors() {
        assert_eq!(hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(hash(b"a"), 0x82a2_a958_a9be_ce5b);
        assert_eq!(hash(&7u64.to_be_bytes()), 0x0c2e_5519_bedb_9721);
        assert_eq!(hash(b"sylva"), 0xa891_e84a_2615_4cd8);
    }

    /// The bit layout is part of the format too: a one-key filter's bits, pinned, in the
    /// current probe scheme and in scheme 0, which filters of older stores still use.
    #[test]
    fn layout_is_pinned() {
        let f = build(&[hash(b"a")], 10);
        assert_eq!(f.len(), HEADER + 64);
        assert_eq!(&f[..8], &[1, 0, 0, 0, 7, 1, 0, 0]);
        assert_eq!(set_bits(&f), [26, 91, 213, 278, 343, 408, 473]);
        let old = build_with(&[hash(b"a")], 10, 0);
        assert_eq!(&old[..8], &[1, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(set_bits(&old), [45, 68, 91, 231, 254, 394, 417]);
        for f in [f, old] {
            let f = Bloom::decode(0, f).unwrap();
            assert!(f.may_contain(hash(b"a")));
        }
    }

    fn set_bits(f: &[u8]) -> Vec<usize> {
        (0..512)
            .filter(|b| f[HEADER + b / 8] & (1 << (b % 8)) != 0)
            .collect()
    }

    use proptest::collection::vec;

    proptest! {
        #[test]
        fn no_false_negatives(
            keys in vec(vec(any::<u8>(), 1..20), 1..300),
            bits in 1u32..=32,
            scheme in 0u8..=1,
        ) {
            let hashes: Vec<u64> = keys.iter().map(|k| hash(k)).collect();
            let f = Bloom::decode(0, build_with(&hashes, bits, scheme)).unwrap();
            for h in hashes {
                prop_assert!(f.may_contain(h));
            }
        }
    }

    /// False positives in 100,000 keys not in a filter of `n` keys at 10 bits a key.
    fn false_positives(n: u64, scheme: u8) -> usize {
        let hashes: Vec<u64> = (0..n).map(|i| hash(&i.to_be_bytes())).collect();
        let f = Bloom::decode(0, build_with(&hashes, 10, scheme)).unwrap();
        (n..n + 100_000)
            .filter(|i| f.may_contain(hash(&i.to_be_bytes())))
            .count()
    }

    #[test]
    fn false_positive_rate_at_ten_bits_is_about_one_percent() {
        // Blocked filters lose a little against the textbook 0.82%.
        let fp = false_positives(10_000, SCHEME);
        assert!(fp < 1_500, "{fp} false positives in 100,000");
    }

    /// A d-tree's filter holds up to millions of keys: its rate must not grow with its blocks
    /// (scheme 0's did: its probes' spacing came from the block's own hash bits).
    #[test]
    fn large_filters_keep_their_false_positive_rate() {
        let fp = false_positives(2_000_000, SCHEME);
        assert!(fp < 1_500, "{fp} false positives in 100,000");
        let old = false_positives(2_000_000, 0);
        assert!(old > 5_000, "scheme 0 was expected to show its flaw: {old}");
    }

    #[test]
    fn damaged_filters_are_errors() {
        let good = build(&[1, 2, 3], 10);
        assert!(Bloom::decode(0, good[..good.len() - 1].to_vec()).is_err());
        let mut bad = good.clone();
        bad[4] = 0;
        assert!(Bloom::decode(0, bad).is_err());
        let mut bad = good.clone();
        bad[0] = 9;
        assert!(Bloom::decode(0, bad).is_err());
        let mut bad = good;
        bad[5] = 2;
        assert!(Bloom::decode(0, bad).is_err());
        assert!(Bloom::decode(0, vec![]).is_err());
    }
}
