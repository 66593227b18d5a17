//! Keys and values shaped to fit an engine's limits.

use sylva::Limits;

/// What kind of keys an engine takes, derived from its [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyShape {
    /// Keys of exactly this many bytes.
    Fixed(usize),
    /// Keys from `min` to `max` bytes.
    Variable {
        /// Shortest key.
        min: usize,
        /// Longest key.
        max: usize,
    },
}

impl KeyShape {
    /// The shape of `limits`' keys.
    pub fn of(limits: &Limits) -> Self {
        if limits.min_key == limits.max_key {
            KeyShape::Fixed(limits.max_key)
        } else {
            KeyShape::Variable {
                min: limits.min_key.max(1),
                max: limits.max_key,
            }
        }
    }
}

/// The key for number `n`: big-endian, so key order is numeric order, left-padded with zero bytes
/// to the engine's minimum (8 bytes where allowed, the low-order bytes where keys are shorter).
pub fn num_key(limits: &Limits, n: u64) -> Vec<u8> {
    let len = 8usize.clamp(limits.min_key.max(1), limits.max_key.max(1));
    let be = n.to_be_bytes();
    if len >= 8 {
        let mut k = vec![0u8; len - 8];
        k.extend_from_slice(&be);
        k
    } else {
        be[8 - len..].to_vec()
    }
}

/// A value for `seed`, as long as the limits allow up to `want` bytes: the seed's bytes repeated.
pub fn value_for(limits: &Limits, seed: u64, want: usize) -> Vec<u8> {
    let len = want.clamp(limits.min_value, limits.max_value);
    seed.to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}
