//! A TreeLine page (§4.4.1; `docs/format.md`, "TreeLine pages"): the common page header, a
//! 64-byte TreeLine header, and a slotted leaf body of [`crate::page::slotted`] whose fences are
//! the segment's key range, so its keys are stored without the range's shared prefix.
//!
//! ```text
//! 0..32   common page header (kind 16 SegmentPage or 17 SegmentOverflow)
//! 32..40  production ID, u64 LE (0: invalidated)
//! 40..42  the page's offset in its segment, u16 LE (an overflow page: its base page's)
//! 42..44  pages in the segment, u16 LE (1, 2, 4, 8 or 16)
//! 44..46  model: bytes of key prefix skipped before the 8-byte model input, u16 LE
//! 46..48  zero
//! 48..56  base page: its overflow page's id (0: none); overflow page: its base page's id
//! 56..64  model: reference input x0, u64 LE
//! 64..72  model: slope a, f64 LE (pages per unit of input)
//! 72..80  model: intercept b, f64 LE
//! 80..96  zero
//! 96..    slotted leaf (lower fence = segment's lower bound, inclusive; upper fence = the next
//!         segment's lower bound, exclusive, or none)
//! ```
//!
//! The model fields are the same on every base page of a segment (page 0's are the ones read).
//! Reading follows [`SegmentPage`] (an accessor over `&[u8]`); writing builds a fresh page from
//! sorted records ([`build`]).

use super::model::Model;
use crate::error::{Error, Result};
use crate::io::page_header::PAGE_HEADER_LEN;
use crate::page::build::{Builder, NodeSpec};
use crate::page::slotted::{Slotted, FLAG_HEADS, FLAG_HINTS, HEADER_LEN_HINTS, SLOT_LEN_HEADS};
use crate::page::{common_prefix, KIND_LEAF};

/// Bytes of the TreeLine header after the common one.
pub const TL_HEADER_LEN: usize = 64;
/// Where the slotted body starts.
pub const BODY_AT: usize = PAGE_HEADER_LEN + TL_HEADER_LEN;

const PROD_AT: usize = 32;
const OFFSET_AT: usize = 40;
const PAGES_AT: usize = 42;
const PLEN_AT: usize = 44;
const LINK_AT: usize = 48;
const X0_AT: usize = 56;
const SLOPE_AT: usize = 64;
const INTERCEPT_AT: usize = 72;

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}
fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// The header fields of a page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    /// Production ID of the segment (0: invalidated).
    pub production: u64,
    /// Offset of the (base) page in its segment.
    pub offset: u16,
    /// Pages in the segment.
    pub pages: u16,
    /// Base page: its overflow page (0: none). Overflow page: its base page.
    pub link: u64,
    /// The segment's model.
    pub model: Model,
}

impl Header {
    /// Decodes the header of page `id` (a verified page of `page_size` bytes).
    pub fn decode(id: u64, page: &[u8]) -> Result<Header> {
        if page.len() < BODY_AT + HEADER_LEN_HINTS {
            return Err(Error::Corruption {
                page: id,
                detail: format!("a TreeLine page of {} bytes is too short", page.len()),
            });
        }
        let pages = le_u16(page, PAGES_AT);
        let offset = le_u16(page, OFFSET_AT);
        if !matches!(pages, 1 | 2 | 4 | 8 | 16) || offset >= pages {
            return Err(Error::Corruption {
                page: id,
                detail: format!("TreeLine page {offset} of a segment of {pages} pages"),
            });
        }
        let model = Model {
            prefix_len: le_u16(page, PLEN_AT),
            x0: le_u64(page, X0_AT),
            slope: f64::from_bits(le_u64(page, SLOPE_AT)),
            intercept: f64::from_bits(le_u64(page, INTERCEPT_AT)),
        };
        Ok(Header {
            production: le_u64(page, PROD_AT),
            offset,
            pages,
            link: le_u64(page, LINK_AT),
            model,
        })
    }

    /// Writes the header into `page`.
    pub fn encode(&self, page: &mut [u8]) {
        page[PROD_AT..PROD_AT + 8].copy_from_slice(&self.production.to_le_bytes());
        page[OFFSET_AT..OFFSET_AT + 2].copy_from_slice(&self.offset.to_le_bytes());
        page[PAGES_AT..PAGES_AT + 2].copy_from_slice(&self.pages.to_le_bytes());
        page[PLEN_AT..PLEN_AT + 2].copy_from_slice(&self.model.prefix_len.to_le_bytes());
        page[46..48].fill(0);
        page[LINK_AT..LINK_AT + 8].copy_from_slice(&self.link.to_le_bytes());
        page[X0_AT..X0_AT + 8].copy_from_slice(&self.model.x0.to_le_bytes());
        page[SLOPE_AT..SLOPE_AT + 8].copy_from_slice(&self.model.slope.to_bits().to_le_bytes());
        page[INTERCEPT_AT..INTERCEPT_AT + 8]
            .copy_from_slice(&self.model.intercept.to_bits().to_le_bytes());
        page[80..96].fill(0);
    }
}

/// Overwrites the production ID of a page in place (invalidation, §4.5.3 Phase IV).
pub fn set_production(page: &mut [u8], production: u64) {
    page[PROD_AT..PROD_AT + 8].copy_from_slice(&production.to_le_bytes());
}

/// A record: key and value.
pub type Record = (Vec<u8>, Vec<u8>);

/// Read access to a verified TreeLine page.
pub struct SegmentPage<'a> {
    /// The decoded header.
    pub header: Header,
    body: Slotted<'a>,
}

impl<'a> SegmentPage<'a> {
    /// Decodes page `id` (bytes already verified by the page file: checksum, kind, id).
    pub fn new(id: u64, page: &'a [u8]) -> Result<Self> {
        let header = Header::decode(id, page)?;
        let body = Slotted::new(id, &page[BODY_AT..])?;
        if !body.is_leaf() {
            return Err(Error::Corruption {
                page: id,
                detail: "a TreeLine page whose body is not a slotted leaf".into(),
            });
        }
        Ok(SegmentPage { header, body })
    }

    /// Records on the page.
    pub fn count(&self) -> usize {
        self.body.count()
    }

    /// The segment's range: lower bound (inclusive; empty for the first) and upper bound
    /// (exclusive; `None` for the last).
    pub fn range(&self) -> Result<(&'a [u8], Option<&'a [u8]>)> {
        Ok((self.body.lower_fence()?, self.body.upper_fence()?))
    }

    /// The value of `key`, if the page holds it.
    pub fn get(&self, key: &[u8]) -> Result<Option<&'a [u8]>> {
        let prefix = self.body.prefix()?;
        if !key.starts_with(prefix) {
            return Ok(None);
        }
        let (i, found) = self.body.lower_bound(key)?;
        Ok(if found {
            Some(self.body.value(i)?)
        } else {
            None
        })
    }

    /// Appends every record, in key order, to `out`.
    pub fn records_into(&self, out: &mut Vec<Record>) -> Result<()> {
        let prefix = self.body.prefix()?;
        for i in 0..self.body.count() {
            let mut key = Vec::with_capacity(prefix.len() + 8);
            key.extend_from_slice(prefix);
            key.extend_from_slice(self.body.key(i)?);
            out.push((key, self.body.value(i)?.to_vec()));
        }
        Ok(())
    }
}

/// Bytes a page body needs for `records` within the range `(lower, upper)`: the slotted
/// header with hints, the fences, and per record a slot and the key without the prefix.
pub fn body_bytes<'r>(
    lower: &[u8],
    upper: Option<&[u8]>,
    records: impl IntoIterator<Item = (&'r [u8], &'r [u8])>,
) -> usize {
    let prefix = upper.map_or(0, |u| common_prefix(lower, u));
    let fences = lower.len() + upper.map_or(0, <[u8]>::len);
    HEADER_LEN_HINTS
        + fences
        + records
            .into_iter()
            .map(|(k, v)| SLOT_LEN_HEADS + k.len().saturating_sub(prefix) + v.len())
            .sum::<usize>()
}

/// Whether the records fit a page body of a `page_size`-byte page.
pub fn fits<'r>(
    page_size: usize,
    lower: &[u8],
    upper: Option<&[u8]>,
    records: impl IntoIterator<Item = (&'r [u8], &'r [u8])>,
) -> bool {
    body_bytes(lower, upper, records) <= page_size - BODY_AT
}

/// Builds a page in `page` (the common header is left for the page file to seal): `header`,
/// then the sorted `records` in a slotted leaf whose fences are the segment's range. An error
/// if they do not fit (callers check [`fits`] first).
pub fn build<'r>(
    page: &mut [u8],
    id: u64,
    header: &Header,
    lower: &[u8],
    upper: Option<&[u8]>,
    records: impl IntoIterator<Item = (&'r [u8], &'r [u8])>,
) -> Result<()> {
    page[..BODY_AT].fill(0);
    header.encode(page);
    let spec = NodeSpec {
        kind: KIND_LEAF,
        flags: FLAG_HEADS | FLAG_HINTS,
        prefix_truncation: true,
        lower,
        upper,
        upper_child: 0,
        op_counter: 0,
    };
    let no_fit = || Error::Corruption {
        page: id,
        detail: "records do not fit the TreeLine page they were placed on".into(),
    };
    let mut b = Builder::new(&mut page[BODY_AT..], &spec).ok_or_else(no_fit)?;
    for (k, v) in records {
        if !b.push(k, &[], v) {
            return Err(no_fit());
        }
    }
    b.finish();
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_built_page_reads_back_and_fits_is_exact() {
        let mut page = vec![0u8; 4096];
        let h = Header {
            production: 7,
            offset: 1,
            pages: 4,
            link: 99,
            model: Model {
                prefix_len: 2,
                x0: 12345,
                slope: 0.25,
                intercept: -1.5,
            },
        };
        let lower = b"key-0100".to_vec();
        let upper = b"key-0900".to_vec();
        let mut recs: Vec<Record> = Vec::new();
        let mut i = 100;
        loop {
            let r = (format!("key-{i:04}").into_bytes(), vec![i as u8; 40]);
            let mut with = recs.clone();
            with.push(r.clone());
            if !fits(
                4096,
                &lower,
                Some(&upper),
                with.iter().map(|(k, v)| (&k[..], &v[..])),
            ) {
                break;
            }
            recs = with;
            i += 1;
        }
        build(
            &mut page,
            3,
            &h,
            &lower,
            Some(&upper),
            recs.iter().map(|(k, v)| (&k[..], &v[..])),
        )
        .unwrap();
        let p = SegmentPage::new(3, &page).unwrap();
        assert_eq!(p.header, h);
        assert_eq!(p.count(), recs.len());
        assert_eq!(p.range().unwrap(), (&lower[..], Some(&upper[..])));
        let mut back = Vec::new();
        p.records_into(&mut back).unwrap();
        assert_eq!(back, recs);
        assert_eq!(p.get(b"key-0105").unwrap(), Some(&[105u8; 40][..]));
        assert_eq!(p.get(b"key-0099").unwrap(), None);
        assert_eq!(p.get(b"other").unwrap(), None);
        // One more record does not fit, and building it is an error, not a panic.
        recs.push((format!("key-{i:04}").into_bytes(), vec![0; 40]));
        assert!(build(
            &mut page,
            3,
            &h,
            &lower,
            Some(&upper),
            recs.iter().map(|(k, v)| (&k[..], &v[..]))
        )
        .is_err());
    }

    #[test]
    fn damaged_headers_are_corruption() {
        let mut page = vec![0u8; 4096];
        let h = Header {
            production: 1,
            offset: 0,
            pages: 1,
            link: 0,
            model: Model::single(),
        };
        build(&mut page, 3, &h, b"", None, std::iter::empty()).unwrap();
        assert!(SegmentPage::new(3, &page).is_ok());
        page[PAGES_AT] = 3;
        assert!(matches!(
            SegmentPage::new(3, &page),
            Err(Error::Corruption { .. })
        ));
        page[PAGES_AT] = 2;
        page[OFFSET_AT] = 2;
        assert!(matches!(
            SegmentPage::new(3, &page),
            Err(Error::Corruption { .. })
        ));
        assert!(SegmentPage::new(3, &page[..100]).is_err());
    }
}
