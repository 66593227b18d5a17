//! The page file's own pages as bytes: the meta page (versions 1 and 2), the version 1 free-list
//! page, and the version 2 free-space pages (region bitmaps and directory overflow pages). The
//! layouts are `docs/format.md`'s, section "Page file".
//!
//! Every decoder here takes a whole page whose header was already verified (checksum, magic,
//! id) by the caller, trusts nothing in its body, and returns `Err(Corruption)` for anything
//! out of bounds. [`decode_free_space_page`] and [`decode_meta_page`] also accept any byte slice
//! at all (their page size is the slice's length, and no checksum is asked for), so that a fuzz
//! target can reach every branch: they never panic.

use super::super::page_header::{self, PageKind, PAGE_HEADER_LEN};
use crate::error::{Error, Result};

/// Where the meta page's body starts.
pub(super) const META_BODY: usize = PAGE_HEADER_LEN;
/// Where the owner's area starts in the meta page.
pub(super) const META_USER: usize = META_BODY + 48;
/// Where a free-space page's payload starts (region bitmap, directory entries, v1 ids).
const FS_BODY: usize = PAGE_HEADER_LEN + 16;
/// Bytes of one directory entry: region index u64, page id u64.
const ENTRY: usize = 16;
/// Role byte of a version 2 free-space page (offset 44).
const ROLE_AT: usize = PAGE_HEADER_LEN + 12;
const ROLE_DIRECTORY: u8 = 1;
const ROLE_REGION: u8 = 2;
/// The first page format version with the region and directory pages (earlier: a free list).
pub(super) const EXTENTS_VERSION: u16 = 2;

pub(super) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

pub(super) fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn corrupt(page: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        page,
        detail: detail.into(),
    }
}

/// Pages one region bitmap covers with pages of `page_size` bytes.
pub(super) fn region_pages(page_size: usize) -> u64 {
    8 * (page_size - FS_BODY) as u64
}

/// Directory entries a meta page holds after an owner's area of `user_len` bytes.
pub(super) fn inline_entries(page_size: usize, user_len: usize) -> usize {
    page_size.saturating_sub(META_USER + user_len) / ENTRY
}

/// Directory entries an overflow directory page holds.
pub(super) fn entries_per_page(page_size: usize) -> usize {
    (page_size - FS_BODY) / ENTRY
}

/// Free page ids a version 1 free-list page holds.
pub(super) fn ids_per_free_list_page(page_size: usize) -> usize {
    (page_size - FS_BODY) / 8
}

/// A decoded meta page (either version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaPage {
    /// The page format version of its header (1 or 2).
    pub version: u16,
    /// The page size it records.
    pub page_size: usize,
    /// Checkpoint sequence number.
    pub sequence: u64,
    /// Pages in the file, meta pages included.
    pub page_count: u64,
    /// Version 1: the first free-list page; version 2: the first directory overflow page
    /// (0: none).
    pub chain_head: u64,
    /// Version 1: free page ids listed; version 2: pages the region bitmaps mark.
    pub free_count: u64,
    /// The owner's area.
    pub user: Vec<u8>,
    /// Version 2: directory entries in all (in the meta page and in overflow pages).
    pub entries: u64,
    /// Version 2: the directory entries held in the meta page itself, `(region, page)`.
    pub inline: Vec<(u64, u64)>,
}

/// Decodes a meta page's body (`page` is the whole page; its length is the page size). The
/// header's version selects the layout; the checksum is the caller's to verify.
pub fn decode_meta_page(page: &[u8]) -> Result<MetaPage> {
    if page.len() < META_USER {
        return Err(corrupt(0, format!("meta page of {} bytes", page.len())));
    }
    let version = page_header::version(page);
    if !(page_header::OLDEST_PAGE_VERSION..=page_header::PAGE_VERSION).contains(&version) {
        return Err(corrupt(0, format!("meta page of format version {version}")));
    }
    let page_size = le_u32(page, META_BODY) as usize;
    let page_count = le_u64(page, META_BODY + 16);
    let user_len = le_u32(page, META_BODY + 40) as usize;
    if page_count < super::FIRST_DATA_PAGE || user_len > page.len() - META_USER {
        return Err(corrupt(
            0,
            format!("meta page counts {page_count} pages, {user_len} owner bytes"),
        ));
    }
    let mut meta = MetaPage {
        version,
        page_size,
        sequence: le_u64(page, META_BODY + 8),
        page_count,
        chain_head: le_u64(page, META_BODY + 24),
        free_count: le_u64(page, META_BODY + 32),
        user: page[META_USER..META_USER + user_len].to_vec(),
        entries: 0,
        inline: Vec::new(),
    };
    if version >= EXTENTS_VERSION {
        meta.entries = u64::from(le_u32(page, META_BODY + 44));
        let here = (meta.entries as usize).min(inline_entries(page.len(), user_len));
        let at = META_USER + user_len;
        meta.inline = (0..here)
            .map(|i| {
                let e = at + i * ENTRY;
                (le_u64(page, e), le_u64(page, e + 8))
            })
            .collect();
        if meta.entries as usize > here && meta.chain_head == 0 {
            return Err(corrupt(
                0,
                format!(
                    "meta page lists {} directory entries, {here} in itself, and no overflow page",
                    meta.entries
                ),
            ));
        }
    }
    Ok(meta)
}

/// The fields of a version 2 meta page to write.
pub(super) struct MetaFields<'a> {
    pub page_size: usize,
    pub sequence: u64,
    pub page_count: u64,
    pub overflow_head: u64,
    pub marked: u64,
    pub user: &'a [u8],
    pub entries: u64,
    pub inline: &'a [(u64, u64)],
}

/// Writes a version 2 meta page's body into `page` (zeroed first; the caller seals it).
pub(super) fn encode_meta(page: &mut [u8], m: &MetaFields<'_>) -> Result<()> {
    let entries = u32::try_from(m.entries).map_err(|_| Error::InvalidArgument {
        what: format!("{} free-space directory entries", m.entries),
        limit: u32::MAX as usize,
    })?;
    page.fill(0);
    page[META_BODY..META_BODY + 4].copy_from_slice(&(m.page_size as u32).to_le_bytes());
    page[META_BODY + 8..META_BODY + 16].copy_from_slice(&m.sequence.to_le_bytes());
    page[META_BODY + 16..META_BODY + 24].copy_from_slice(&m.page_count.to_le_bytes());
    page[META_BODY + 24..META_BODY + 32].copy_from_slice(&m.overflow_head.to_le_bytes());
    page[META_BODY + 32..META_BODY + 40].copy_from_slice(&m.marked.to_le_bytes());
    page[META_BODY + 40..META_BODY + 44].copy_from_slice(&(m.user.len() as u32).to_le_bytes());
    page[META_BODY + 44..META_BODY + 48].copy_from_slice(&entries.to_le_bytes());
    page[META_USER..META_USER + m.user.len()].copy_from_slice(m.user);
    let at = META_USER + m.user.len();
    for (i, &(region, id)) in m.inline.iter().enumerate() {
        let e = at + i * ENTRY;
        page[e..e + 8].copy_from_slice(&region.to_le_bytes());
        page[e + 8..e + 16].copy_from_slice(&id.to_le_bytes());
    }
    Ok(())
}

/// A decoded version 2 free-space page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FreeSpacePage {
    /// A region bitmap: the region's index and its marked pages as runs `(first id, pages)`.
    Region {
        /// Which region (pages `index × R .. (index + 1) × R`).
        index: u64,
        /// The marked pages, as runs in id order.
        runs: Vec<(u64, u64)>,
    },
    /// A directory overflow page: the next one (0: last) and its `(region, page)` entries.
    Directory {
        /// The next overflow page, 0 for the last.
        next: u64,
        /// Region index and free-space page id, in region order.
        entries: Vec<(u64, u64)>,
    },
}

/// Decodes a version 2 free-space page (`page` whole; its length is the page size). The
/// checksum is the caller's to verify.
pub fn decode_free_space_page(page: &[u8]) -> Result<FreeSpacePage> {
    if page.len() <= FS_BODY {
        return Err(corrupt(
            0,
            format!("free-space page of {} bytes", page.len()),
        ));
    }
    let id = le_u64(page, 8);
    let version = page_header::version(page);
    if version < EXTENTS_VERSION {
        return Err(corrupt(
            id,
            format!("a free-space page of format version {version}"),
        ));
    }
    let count = le_u32(page, PAGE_HEADER_LEN + 8) as usize;
    match page[ROLE_AT] {
        ROLE_REGION => {
            let index = le_u64(page, PAGE_HEADER_LEN);
            let per = region_pages(page.len());
            let base = index
                .checked_mul(per)
                .filter(|b| b.checked_add(per).is_some())
                .ok_or_else(|| corrupt(id, format!("region {index} lies beyond any page id")))?;
            let mut runs: Vec<(u64, u64)> = Vec::new();
            let mut marked = 0u64;
            for (i, &byte) in page[FS_BODY..].iter().enumerate() {
                if byte == 0 {
                    continue;
                }
                for bit in 0..8 {
                    if byte & (1 << bit) == 0 {
                        continue;
                    }
                    marked += 1;
                    let p = base + (8 * i + bit) as u64;
                    match runs.last_mut() {
                        Some((s, l)) if *s + *l == p => *l += 1,
                        _ => runs.push((p, 1)),
                    }
                }
            }
            if marked != count as u64 {
                return Err(corrupt(
                    id,
                    format!("region page says it marks {count} pages, its bitmap marks {marked}"),
                ));
            }
            Ok(FreeSpacePage::Region { index, runs })
        }
        ROLE_DIRECTORY => {
            if count > entries_per_page(page.len()) {
                return Err(corrupt(id, format!("directory page lists {count} entries")));
            }
            let entries = (0..count)
                .map(|i| {
                    let e = FS_BODY + i * ENTRY;
                    (le_u64(page, e), le_u64(page, e + 8))
                })
                .collect();
            Ok(FreeSpacePage::Directory {
                next: le_u64(page, PAGE_HEADER_LEN),
                entries,
            })
        }
        role => Err(corrupt(
            id,
            format!("free-space page of unknown role {role}"),
        )),
    }
}

/// Writes a region page's body: region `index`, `marked` pages set in `bitmap` (whose length
/// is page size − 48). The caller seals it as a free-space page.
pub(super) fn encode_region(page: &mut [u8], index: u64, marked: u32, bitmap: &[u8]) {
    page.fill(0);
    page[PAGE_HEADER_LEN..PAGE_HEADER_LEN + 8].copy_from_slice(&index.to_le_bytes());
    page[PAGE_HEADER_LEN + 8..PAGE_HEADER_LEN + 12].copy_from_slice(&marked.to_le_bytes());
    page[ROLE_AT] = ROLE_REGION;
    page[FS_BODY..].copy_from_slice(bitmap);
}

/// Writes a directory overflow page's body (the caller seals it).
pub(super) fn encode_directory(page: &mut [u8], next: u64, entries: &[(u64, u64)]) {
    page.fill(0);
    page[PAGE_HEADER_LEN..PAGE_HEADER_LEN + 8].copy_from_slice(&next.to_le_bytes());
    page[PAGE_HEADER_LEN + 8..PAGE_HEADER_LEN + 12]
        .copy_from_slice(&(entries.len() as u32).to_le_bytes());
    page[ROLE_AT] = ROLE_DIRECTORY;
    for (i, &(region, id)) in entries.iter().enumerate() {
        let e = FS_BODY + i * ENTRY;
        page[e..e + 8].copy_from_slice(&region.to_le_bytes());
        page[e + 8..e + 16].copy_from_slice(&id.to_le_bytes());
    }
}

/// Decodes a version 1 free-list page: the next page of the list (0: last) and its ids.
pub(super) fn decode_free_list_page(page: &[u8], id: u64) -> Result<(u64, Vec<u64>)> {
    let count = le_u32(page, PAGE_HEADER_LEN + 8) as usize;
    if count > ids_per_free_list_page(page.len()) {
        return Err(corrupt(id, format!("free-list page lists {count} ids")));
    }
    let ids = (0..count).map(|i| le_u64(page, FS_BODY + 8 * i)).collect();
    Ok((le_u64(page, PAGE_HEADER_LEN), ids))
}

/// The kind every page of the free space has (version 1 free list and version 2 pages alike).
pub(super) const FREE_SPACE_KIND: PageKind = PageKind::FreeList;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::page_header::seal;
    use proptest::prelude::*;

    #[test]
    fn a_region_page_round_trips_its_runs() {
        let size = 4096;
        let mut bitmap = vec![0u8; size - FS_BODY];
        // Pages 3..5 and 9 of region 2, and the region's last page.
        for bit in [3usize, 4, 9, 8 * (size - FS_BODY) - 1] {
            bitmap[bit / 8] |= 1 << (bit % 8);
        }
        let mut page = vec![0u8; size];
        encode_region(&mut page, 2, 4, &bitmap);
        seal(&mut page, FREE_SPACE_KIND, 77, 0);
        let base = 2 * region_pages(size);
        assert_eq!(
            decode_free_space_page(&page).expect("decode"),
            FreeSpacePage::Region {
                index: 2,
                runs: vec![
                    (base + 3, 2),
                    (base + 9, 1),
                    (base + region_pages(size) - 1, 1)
                ]
            }
        );
        encode_region(&mut page, 2, 5, &bitmap);
        assert!(
            decode_free_space_page(&page).is_err(),
            "a count that disagrees with the bitmap"
        );
    }

    proptest! {
        /// Any bytes at all: an answer or an error, never a panic.
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), role in 0u8..4, version in 0u16..4) {
            let mut bytes = bytes;
            if bytes.len() > ROLE_AT {
                bytes[ROLE_AT] = role;
                bytes[4..6].copy_from_slice(&version.to_le_bytes());
            }
            let _ = decode_free_space_page(&bytes);
            let _ = decode_meta_page(&bytes);
        }
    }
}
