//! The header every page on disk starts with, and its checksum.
//!
//! ```text
//! 0..4    magic b"SYpg"
//! 4..6    format version, u16 LE (2; 1 is still read)
//! 6       page kind, u8 (see PageKind)
//! 7       zero (reserved)
//! 8..16   page id, u64 LE: where the page belongs (catches misdirected writes)
//! 16..24  LSN, u64 LE: the log record that last changed the page
//! 24..28  CRC32C of the whole page with these four bytes taken as zero, u32 LE
//! 28..32  zero (reserved)
//! ```

use crate::error::{Error, Result};

/// Bytes of the common page header.
pub const PAGE_HEADER_LEN: usize = 32;
/// Magic at the start of every page.
pub const PAGE_MAGIC: &[u8; 4] = b"SYpg";
/// The page format version this build writes (`docs/format.md`: 2 since the page file's free
/// space became region bitmaps).
pub const PAGE_VERSION: u16 = 2;
/// The oldest page format version this build reads.
pub const OLDEST_PAGE_VERSION: u16 = 1;

/// Where the page kind is in the header.
const KIND_AT: usize = 6;
/// Where the LSN is in the header.
const LSN_AT: std::ops::Range<usize> = 16..24;

/// What a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// One of the two alternating meta pages (ids 0 and 1).
    Meta = 1,
    /// A page of the persisted free-page list.
    FreeList = 2,
    /// A B+tree leaf.
    BTreeLeaf = 3,
    /// A B+tree inner node.
    BTreeInner = 4,
}

impl PageKind {
    /// The kind with tag `b`, if it is one.
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => PageKind::Meta,
            2 => PageKind::FreeList,
            3 => PageKind::BTreeLeaf,
            4 => PageKind::BTreeInner,
            _ => return None,
        })
    }
}

/// The decoded header of a verified page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// What the page holds.
    pub kind: PageKind,
    /// Its id.
    pub id: u64,
    /// The LSN of its last change.
    pub lsn: u64,
}

/// The kind byte of a page's header (`header`: the page, or at least its first
/// [`PAGE_HEADER_LEN`] bytes); [`PageKind::from_u8`] tells whether it is a kind.
#[inline]
pub fn kind_byte(header: &[u8]) -> u8 {
    header[KIND_AT]
}

/// The page format version in a page's header.
#[inline]
pub fn version(header: &[u8]) -> u16 {
    u16::from_le_bytes([header[4], header[5]])
}

/// Sets the kind in a page's header.
#[inline]
pub fn set_kind(header: &mut [u8], kind: PageKind) {
    header[KIND_AT] = kind as u8;
}

/// The LSN in a page's header.
#[inline]
pub fn lsn(header: &[u8]) -> u64 {
    le_u64(&header[LSN_AT])
}

/// Sets the LSN in a page's header.
#[inline]
pub fn set_lsn(header: &mut [u8], lsn: u64) {
    header[LSN_AT].copy_from_slice(&lsn.to_le_bytes());
}

fn crc_of(page: &[u8]) -> u32 {
    let c = crc32c::crc32c(&page[..24]);
    let c = crc32c::crc32c_append(c, &[0u8; 4]);
    crc32c::crc32c_append(c, &page[28..])
}

/// Writes the header fields and the checksum of `page` (whose body must be final).
pub fn seal(page: &mut [u8], kind: PageKind, id: u64, lsn: u64) {
    page[0..4].copy_from_slice(PAGE_MAGIC);
    page[4..6].copy_from_slice(&PAGE_VERSION.to_le_bytes());
    set_kind(page, kind);
    page[7] = 0;
    page[8..16].copy_from_slice(&id.to_le_bytes());
    set_lsn(page, lsn);
    page[28..32].fill(0);
    let crc = crc_of(page);
    page[24..28].copy_from_slice(&crc.to_le_bytes());
}

fn le_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// Verifies a page read from disk as page `id`: checksum, magic, version, kind and id.
pub fn verify(page: &[u8], id: u64) -> Result<PageHeader> {
    if page.len() < PAGE_HEADER_LEN {
        return Err(Error::Corruption {
            page: id,
            detail: format!("page of {} bytes has no header", page.len()),
        });
    }
    let stored = u32::from_le_bytes([page[24], page[25], page[26], page[27]]);
    let computed = crc_of(page);
    if stored != computed {
        return Err(Error::ChecksumMismatch {
            page: id,
            expected: stored,
            got: computed,
        });
    }
    if &page[0..4] != PAGE_MAGIC {
        return Err(Error::Corruption {
            page: id,
            detail: "wrong page magic".into(),
        });
    }
    let version = version(page);
    if !(OLDEST_PAGE_VERSION..=PAGE_VERSION).contains(&version) {
        return Err(Error::Corruption {
            page: id,
            detail: format!(
                "page format version {version}; this build reads {OLDEST_PAGE_VERSION} to {PAGE_VERSION}"
            ),
        });
    }
    let kind = PageKind::from_u8(kind_byte(page)).ok_or_else(|| Error::Corruption {
        page: id,
        detail: format!("unknown page kind {}", kind_byte(page)),
    })?;
    let stored_id = le_u64(&page[8..16]);
    if stored_id != id {
        return Err(Error::Corruption {
            page: id,
            detail: format!("page claims to be page {stored_id} (misdirected write)"),
        });
    }
    Ok(PageHeader {
        kind,
        id,
        lsn: lsn(page),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_pages_verify_and_every_flipped_bit_is_caught() {
        let mut page = vec![0u8; 4096];
        page[100..110].copy_from_slice(b"some bytes");
        seal(&mut page, PageKind::BTreeLeaf, 9, 1234);
        assert_eq!(
            verify(&page, 9).expect("verify"),
            PageHeader {
                kind: PageKind::BTreeLeaf,
                id: 9,
                lsn: 1234
            }
        );
        for bit in (0..page.len() * 8).step_by(7) {
            let mut bad = page.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(verify(&bad, 9).is_err(), "flipped bit {bit} went unnoticed");
        }
        assert!(
            matches!(verify(&page, 10), Err(Error::Corruption { page: 10, .. })),
            "a page at the wrong id"
        );
        assert!(
            matches!(
                verify(&vec![0u8; 4096], 3),
                Err(Error::ChecksumMismatch { .. })
            ),
            "a zeroed page"
        );
    }
}
