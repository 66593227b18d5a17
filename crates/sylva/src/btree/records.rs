//! [`Records`]: records with full keys in one buffer, the form in which splits, merges,
//! conversions and walks carry a leaf's records between pages (not a paper structure).
//!
//! Scans copy every record they show out of the leaf (`super::walk`), so the copy is on the
//! scan's critical path: a record of a slotted page goes in with its truncated prefix put back
//! in front of its key, and byte strings up to 128 bytes (prefixes, keys, values, records) are
//! appended with two fixed-size moves instead of a `memcpy` call each ([`extend_short`]). A
//! walk reserves room for a leaf's records once ([`Records::reserve_stored`]), so appending
//! one does not grow the buffers. The copies write into the buffer's spare capacity
//! (`unsafe`, because measured: appending the fixed-size pieces with the safe
//! `extend_from_slice` and `truncate` took more instructions than the `memcpy` calls they
//! replaced; `docs/results/btree.md`).

use std::mem::MaybeUninit;

/// Records with full keys, in one buffer.
#[derive(Default)]
pub(crate) struct Records {
    data: Vec<u8>,
    /// (key start, key end = value start, value end) per record.
    at: Vec<(u32, u32, u32)>,
}

impl Records {
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }
    /// Room for the records of `pages` pages of `page_size` bytes, so collecting them does not
    /// grow the buffers again (twice the bytes: the truncated prefixes come back).
    pub(crate) fn reserve_pages(&mut self, pages: usize, page_size: usize) {
        self.data.reserve(2 * pages * page_size);
        self.at.reserve(pages * page_size / 16);
    }
    /// Room for `records` more records of one slotted page of `page_len` bytes whose keys
    /// share a truncated prefix of `prefix_len` bytes, so that [`Records::push_stored`] does
    /// not grow the buffers record by record. (A page read optimistically may be torn and
    /// claim more; then the buffers grow as usual.)
    #[inline]
    pub(crate) fn reserve_stored(&mut self, records: usize, prefix_len: usize, page_len: usize) {
        self.data.reserve(page_len + records * prefix_len);
        self.at.reserve(records);
    }
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.at.clear();
    }
    /// Appends a record whose key is `prefix ++ record[..key_len]` and whose value is the rest
    /// of `record` (a slotted page stores key and value back to back): one reservation, and the
    /// prefix and the record each copied without a call to `memcpy` when short. Always inlined:
    /// left to the compiler, it became a call per record in some builds, which cost more than
    /// the copies.
    #[inline(always)]
    pub(crate) fn push_stored(&mut self, prefix: &[u8], record: &[u8], key_len: usize) {
        let (pl, rl) = (prefix.len(), record.len());
        self.data.reserve(pl + rl);
        let start = self.data.len();
        let (to_prefix, to_record) = self.data.spare_capacity_mut()[..pl + rl].split_at_mut(pl);
        copy_short(prefix, to_prefix);
        copy_short(record, to_record);
        // SAFETY: the two copies initialized the `pl + rl` bytes of spare capacity after
        // `start` (`copy_short` writes `src.len()` bytes, here every byte of its destination).
        unsafe { self.data.set_len(start + pl + rl) };
        self.at.push((
            start as u32,
            (start + pl + key_len) as u32,
            (start + pl + rl) as u32,
        ));
    }
    /// Removes the last record.
    pub(crate) fn pop(&mut self) {
        if let Some((start, _, _)) = self.at.pop() {
            self.data.truncate(start as usize);
        }
    }
    /// Appends a record whose key was already appended to the buffer by `write_key`.
    #[inline]
    pub(crate) fn push_with(&mut self, write_key: impl FnOnce(&mut Vec<u8>), value: &[u8]) {
        let start = self.data.len() as u32;
        write_key(&mut self.data);
        let mid = self.data.len() as u32;
        extend_short(&mut self.data, value);
        self.at.push((start, mid, self.data.len() as u32));
    }
    #[inline]
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let (s, m, _) = self.at[i];
        &self.data[s as usize..m as usize]
    }
    #[inline]
    pub(crate) fn value(&self, i: usize) -> &[u8] {
        let (_, m, e) = self.at[i];
        &self.data[m as usize..e as usize]
    }
    /// The bytes of the keys and values held.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }
    /// Appends every record of `other`.
    pub(crate) fn extend_from(&mut self, other: &Records) {
        let base = self.data.len() as u32;
        self.data.extend_from_slice(&other.data);
        self.at.extend(
            other
                .at
                .iter()
                .map(|&(s, m, e)| (base + s, base + m, base + e)),
        );
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.at
            .iter()
            .map(|&(s, m, e)| self.data[s as usize..e as usize].split_at((m - s) as usize))
    }
}

/// `out.extend_from_slice(bytes)`, without a call to `memcpy` for short slices.
#[inline]
pub(crate) fn extend_short(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    out.reserve(n);
    let start = out.len();
    copy_short(bytes, &mut out.spare_capacity_mut()[..n]);
    // SAFETY: `copy_short` initialized the `n` bytes of spare capacity after `start`.
    unsafe { out.set_len(start + n) };
}

/// Copies `src` into the first `src.len()` bytes of `dst` (callers pass a `dst` exactly as
/// long): up to 128 bytes as two moves of a size known at compile time (the first and the last
/// `K` bytes, overlapping in the middle), which is what `memcpy` does for short lengths,
/// without the call.
#[inline(always)]
fn copy_short(src: &[u8], dst: &mut [MaybeUninit<u8>]) {
    let n = src.len();
    let dst = &mut dst[..n];
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr().cast::<u8>());
    // SAFETY: `s` is valid for `n` reads and `d` for `n` writes (both slices are `n` long),
    // and they do not overlap (`dst` is borrowed mutably while `src` is borrowed). Each
    // `two_moves::<K>` is called with `K <= n` and moves `K` bytes at offsets 0 and `n - K`,
    // both ranges within `0..n`.
    unsafe {
        // Tested from the most common lengths (8-byte values, short keys) up.
        if n < 16 {
            if n >= 8 {
                two_moves::<8>(s, d, n);
            } else if n >= 4 {
                two_moves::<4>(s, d, n);
            } else {
                for i in 0..n {
                    *d.add(i) = *s.add(i);
                }
            }
        } else if n <= 32 {
            two_moves::<16>(s, d, n);
        } else if n <= 64 {
            two_moves::<32>(s, d, n);
        } else if n <= 128 {
            two_moves::<64>(s, d, n);
        } else {
            std::ptr::copy_nonoverlapping(s, d, n);
        }
    }
}

/// Moves bytes `0..K` and `n - K..n` from `s` to `d`.
///
/// # Safety
/// `K <= n`; `s` is valid for `n` reads, `d` for `n` writes, and they do not overlap.
#[inline(always)]
unsafe fn two_moves<const K: usize>(s: *const u8, d: *mut u8, n: usize) {
    // SAFETY: the caller's contract; both moves stay within `0..n`.
    unsafe {
        std::ptr::copy_nonoverlapping(s, d, K);
        std::ptr::copy_nonoverlapping(s.add(n - K), d.add(n - K), K);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extend_short_appends_every_length() {
        let src: Vec<u8> = (0..200u8).collect();
        for n in 0..=150 {
            for shift in [0, 1, 7] {
                let mut out = vec![9u8; shift];
                extend_short(&mut out, &src[3..3 + n]);
                assert_eq!(out.len(), shift + n);
                assert!(out[..shift].iter().all(|&b| b == 9));
                assert_eq!(&out[shift..], &src[3..3 + n], "length {n}");
            }
        }
    }

    #[test]
    fn push_stored_puts_the_prefix_back() {
        let mut r = Records::default();
        r.reserve_stored(3, 5, 4096);
        r.push_stored(b"http:", b"//a.example/x12345678", 13);
        r.push_stored(b"", b"kv", 1);
        r.push_stored(&[7u8; 40], &[1u8; 70], 30);
        assert_eq!(r.len(), 3);
        assert_eq!(r.key(0), b"http://a.example/x");
        assert_eq!(r.value(0), b"12345678");
        assert_eq!((r.key(1), r.value(1)), (&b"k"[..], &b"v"[..]));
        assert_eq!(r.key(2), [[7u8; 40].as_slice(), &[1u8; 30]].concat());
        assert_eq!(r.value(2), [1u8; 40]);
        r.pop();
        assert_eq!(r.len(), 2);
        r.push_with(|b| b.extend_from_slice(b"key"), b"value");
        assert_eq!((r.key(2), r.value(2)), (&b"key"[..], &b"value"[..]));
    }
}
