//! A segment's linear model (§3.2, §4.4.2): which of the segment's pages a key belongs to,
//! computed, not searched. The same function places records at a reorganization and finds
//! them afterwards, so a record is always on the page its key's model value names.
//!
//! Input (§6.2: the thesis models 8-byte integer keys): the 8 bytes of the key after its first
//! `prefix_len` bytes, big-endian, zero-padded; for u64 keys in 8-byte big-endian form with no
//! shared prefix that is the key itself. A reorganization takes `prefix_len` as the prefix the
//! records it groups share (module docs of [`super`] say why not the range's).
//! Output: `page = clamp(⌊slope · (x − x0) + intercept⌋, 0, pages − 1)`, where the slope and
//! intercept already include the division by the page's goal.

/// A segment's model; a single-page segment's is [`Model::single`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Key bytes skipped before the 8-byte input.
    pub prefix_len: u16,
    /// The reference input (the segment's first record's at the reorganization).
    pub x0: u64,
    /// Pages per unit of input.
    pub slope: f64,
    /// Page at `x0`.
    pub intercept: f64,
}

impl Model {
    /// The model of a single-page segment: every key on page 0.
    pub const fn single() -> Model {
        Model {
            prefix_len: 0,
            x0: 0,
            slope: 0.0,
            intercept: 0.0,
        }
    }

    /// The model's input for `key`.
    #[inline]
    pub fn input(&self, key: &[u8]) -> u64 {
        input(key, self.prefix_len as usize)
    }

    /// The page of a segment of `pages` pages that `key` belongs to.
    #[inline]
    pub fn page_of(&self, key: &[u8], pages: usize) -> usize {
        if pages <= 1 {
            return 0;
        }
        let v = self.value(self.input(key));
        if v.is_nan() || v < 0.0 {
            0
        } else {
            (v.floor() as usize).min(pages - 1)
        }
    }

    /// `slope · (x − x0) + intercept`, with the difference taken exactly before rounding.
    #[inline]
    pub fn value(&self, x: u64) -> f64 {
        let dx = if x >= self.x0 {
            (x - self.x0) as f64
        } else {
            -((self.x0 - x) as f64)
        };
        self.slope * dx + self.intercept
    }
}

/// The 8 bytes of `key` after `prefix_len`, big-endian, zero-padded.
#[inline]
pub fn input(key: &[u8], prefix_len: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(rest) = key.get(prefix_len..) {
        let n = rest.len().min(8);
        w[..n].copy_from_slice(&rest[..n]);
    }
    u64::from_be_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_big_endian_after_the_prefix_and_pages_are_clamped() {
        assert_eq!(input(&42u64.to_be_bytes(), 0), 42);
        assert_eq!(input(b"ab\x01", 2), 1 << 56);
        assert_eq!(input(b"a", 5), 0);
        let m = Model {
            prefix_len: 0,
            x0: 100,
            slope: 0.1,
            intercept: 0.0,
        };
        assert_eq!(m.page_of(&50u64.to_be_bytes(), 4), 0);
        assert_eq!(m.page_of(&100u64.to_be_bytes(), 4), 0);
        assert_eq!(m.page_of(&125u64.to_be_bytes(), 4), 2);
        assert_eq!(m.page_of(&u64::MAX.to_be_bytes(), 4), 3);
        assert_eq!(Model::single().page_of(b"anything", 1), 0);
    }
}
