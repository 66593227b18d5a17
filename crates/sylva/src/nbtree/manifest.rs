//! The persisted s-tree (`docs/format.md`, "NB-tree"): the meta page's owner area (the
//! state), the manifest head page and the manifest's run.
//!
//! ```text
//! state (meta page owner area, 56 bytes)
//!   0..8   "sylvaNB\0"        8..12  version u32 (3; 2 and 1 are read)
//!   12..16 fanout f u32        16..24 σ in bytes u64
//!   24..28 Bloom bits per key  28..32 zero
//!   32..40 manifest head page u64 (0: an empty s-tree)
//!   40..48 covered LSN u64: the log from here on is replayed into the active root
//!   48..56 zero
//! head page (kind Manifest), engine bytes:
//!   0..4 "NBmh"  4..8 manifest pages u32  8..16 first manifest page u64
//!   16..24 manifest bytes u64  24..28 CRC32C of the manifest bytes
//! manifest run (kind Manifest): the bytes below, back to back in the pages' engine bytes
//!   0..4 "NBmf"  4..8 s-node count u32, then the s-nodes in pre-order:
//!   flags u8 (1: leaf, 2: has a d-tree) | keys u16 | keys × (len u16 | bytes)
//!   | start len u16 | start | live records u64 | live bytes u64
//!   | d-tree (if flag 2): first u64 | leaf pages u32 | inner pages u32 | Bloom pages u32
//!     | root u64 | records u64 | bytes u64 | max record u32 | max key u32 | Bloom bytes u32
//!     | pieces u32 | pieces × (first page u64 | pages u32)   (versions 2, 3; 1 has no
//!       pieces: one run of the d-tree's pages from its first page)
//!   followed by the children (keys + 1 of them, unless a leaf)
//! ```

use std::path::Path;
use std::sync::Arc;

use super::dtree::{DTree, Extent};
use super::stree::SNode;
use crate::error::{Error, Result};
use crate::io::page_header::{PageKind, PAGE_HEADER_LEN};
use crate::io::PageFile;

pub(crate) const STATE_MAGIC: &[u8; 8] = b"sylvaNB\0";
/// Version 3 is version 2's layout in a store whose Bloom filters may use probe scheme 1
/// (`super::bloom`), which builds reading version 2 at most would misread.
pub(crate) const STATE_VERSION: u32 = 3;
/// The oldest state version this build reads (version 1: d-trees in one run each).
pub(crate) const STATE_VERSION_MIN: u32 = 1;
pub(crate) const STATE_LEN: usize = 56;
const HEAD_MAGIC: &[u8; 4] = b"NBmh";
const MANIFEST_MAGIC: &[u8; 4] = b"NBmf";
/// Deepest s-tree a manifest may describe (a guard against damaged input).
const MAX_DEPTH: usize = 48;

/// The NB-tree's state in the meta page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) fanout: u32,
    pub(crate) sigma: u64,
    pub(crate) bloom_bits: u32,
    pub(crate) head: u64,
    pub(crate) covered_lsn: u64,
    /// The version it was written with (a new state is [`STATE_VERSION`]): how to read the
    /// manifest it names.
    pub(crate) version: u32,
}

impl State {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; STATE_LEN];
        b[0..8].copy_from_slice(STATE_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.fanout.to_le_bytes());
        b[16..24].copy_from_slice(&self.sigma.to_le_bytes());
        b[24..28].copy_from_slice(&self.bloom_bits.to_le_bytes());
        b[32..40].copy_from_slice(&self.head.to_le_bytes());
        b[40..48].copy_from_slice(&self.covered_lsn.to_le_bytes());
        b
    }

    /// `None` for a new store; `NotSylva` for another engine's (or no engine's) state.
    pub(crate) fn decode(path: &Path, user: &[u8]) -> Result<Option<State>> {
        if user.is_empty() {
            return Ok(None);
        }
        let not_nb = |detail: String| Error::NotSylva {
            path: path.to_path_buf(),
            expected: "NB-tree",
            detail,
        };
        if user.len() < 12 || &user[0..8] != STATE_MAGIC {
            let what = if user.starts_with(b"sylvaDB\0") {
                "it holds a Db database".to_string()
            } else {
                "the page file's meta area holds no NB-tree state".to_string()
            };
            return Err(not_nb(what));
        }
        let version = u32::from_le_bytes([user[8], user[9], user[10], user[11]]);
        if !(STATE_VERSION_MIN..=STATE_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: STATE_VERSION,
            });
        }
        if user.len() < STATE_LEN {
            return Err(not_nb(format!("state of {} bytes", user.len())));
        }
        let u32_at =
            |at: usize| u32::from_le_bytes([user[at], user[at + 1], user[at + 2], user[at + 3]]);
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&user[at..at + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Some(State {
            fanout: u32_at(12),
            sigma: u64_at(16),
            bloom_bits: u32_at(24),
            head: u64_at(32),
            covered_lsn: u64_at(40),
            version,
        }))
    }
}

/// Encodes the s-tree under `root`.
pub(crate) fn encode(root: &SNode) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MANIFEST_MAGIC);
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut count = 0u32;
    encode_node(root, &mut out, &mut count);
    out[4..8].copy_from_slice(&count.to_le_bytes());
    out
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
    out.extend_from_slice(b);
}

fn encode_node(n: &SNode, out: &mut Vec<u8>, count: &mut u32) {
    *count += 1;
    let flags = u8::from(n.is_leaf()) | if n.dtree.is_some() { 2 } else { 0 };
    out.push(flags);
    out.extend_from_slice(&(n.keys.len() as u16).to_le_bytes());
    for k in &n.keys {
        put_bytes(out, k);
    }
    put_bytes(out, &n.start);
    out.extend_from_slice(&n.live_records.to_le_bytes());
    out.extend_from_slice(&n.live_bytes.to_le_bytes());
    if let Some(d) = &n.dtree {
        let e = &d.extent;
        out.extend_from_slice(&e.first.to_le_bytes());
        out.extend_from_slice(&e.leaf_pages.to_le_bytes());
        out.extend_from_slice(&e.inner_pages.to_le_bytes());
        out.extend_from_slice(&e.bloom_pages.to_le_bytes());
        out.extend_from_slice(&e.root.to_le_bytes());
        out.extend_from_slice(&e.records.to_le_bytes());
        out.extend_from_slice(&e.bytes.to_le_bytes());
        out.extend_from_slice(&e.max_record.to_le_bytes());
        out.extend_from_slice(&e.max_key.to_le_bytes());
        out.extend_from_slice(&e.bloom_len.to_le_bytes());
        let runs = d.pieces.runs();
        out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
        for &(first, pages) in runs {
            out.extend_from_slice(&first.to_le_bytes());
            out.extend_from_slice(&(pages as u32).to_le_bytes());
        }
    }
    for c in &n.children {
        encode_node(c, out, count);
    }
}

/// A decoded s-node before its d-trees are loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawNode {
    pub(crate) keys: Vec<Vec<u8>>,
    pub(crate) start: Vec<u8>,
    pub(crate) live_records: u64,
    pub(crate) live_bytes: u64,
    pub(crate) dtree: Option<Extent>,
    /// The d-tree's pieces, (first page, pages) each in logical order (empty without one).
    pub(crate) pieces: Vec<(u64, u64)>,
    pub(crate) children: Vec<RawNode>,
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    page: u64,
    version: u32,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let s = self
            .b
            .get(self.at..self.at.saturating_add(n))
            .ok_or_else(|| Error::Corruption {
                page: self.page,
                detail: format!("manifest ends at byte {} (needs {n} more)", self.at),
            })?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(w))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u16()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

/// Decodes manifest bytes of state version `version` (`page`: where they were read, for
/// errors). Checks the encoding's own consistency (lengths, counts, depth, key order); the
/// extents are checked when loaded.
pub(crate) fn decode(page: u64, bytes: &[u8], version: u32) -> Result<RawNode> {
    let mut r = Reader {
        b: bytes,
        at: 0,
        page,
        version,
    };
    if r.take(4)? != MANIFEST_MAGIC {
        return Err(Error::Corruption {
            page,
            detail: "manifest without its magic".into(),
        });
    }
    let count = r.u32()?;
    let mut seen = 0u32;
    let root = decode_node(&mut r, 0, &mut seen)?;
    if seen != count || r.at != bytes.len() {
        return Err(Error::Corruption {
            page,
            detail: format!(
                "manifest claims {count} s-nodes and holds {seen}, ending at {} of {} bytes",
                r.at,
                bytes.len()
            ),
        });
    }
    Ok(root)
}

fn decode_node(r: &mut Reader<'_>, depth: usize, seen: &mut u32) -> Result<RawNode> {
    let page = r.page;
    let bad = |detail: String| Error::Corruption { page, detail };
    if depth > MAX_DEPTH {
        return Err(bad(format!("manifest s-tree deeper than {MAX_DEPTH}")));
    }
    *seen += 1;
    let flags = r.u8()?;
    if flags & !3 != 0 {
        return Err(bad(format!("s-node flags {flags:#x}")));
    }
    let nkeys = r.u16()? as usize;
    let leaf = flags & 1 != 0;
    if leaf && nkeys != 0 {
        return Err(bad("a leaf s-node with s-keys".into()));
    }
    let mut keys = Vec::with_capacity(nkeys.min(1024));
    for _ in 0..nkeys {
        let k = r.bytes()?;
        if k.is_empty() || keys.last().is_some_and(|p: &Vec<u8>| *p >= k) {
            return Err(bad("s-keys empty or out of order".into()));
        }
        keys.push(k);
    }
    let start = r.bytes()?;
    let live_records = r.u64()?;
    let live_bytes = r.u64()?;
    let dtree = if flags & 2 != 0 {
        Some(Extent {
            first: r.u64()?,
            leaf_pages: r.u32()?,
            inner_pages: r.u32()?,
            bloom_pages: r.u32()?,
            root: r.u64()?,
            records: r.u64()?,
            bytes: r.u64()?,
            max_record: r.u32()?,
            max_key: r.u32()?,
            bloom_len: r.u32()?,
        })
    } else {
        None
    };
    let mut pieces = Vec::new();
    if let Some(e) = &dtree {
        if r.version < 2 {
            pieces.push((e.first, e.pages()));
        } else {
            let n = r.u32()? as usize;
            // Each piece takes 12 bytes: a count beyond what is left is damage.
            if n == 0 || n > (r.b.len() - r.at) / 12 {
                return Err(bad(format!("a d-tree of {n} pieces")));
            }
            for _ in 0..n {
                pieces.push((r.u64()?, u64::from(r.u32()?)));
            }
        }
    }
    if dtree.is_none() && (live_records != 0 || !start.is_empty()) {
        return Err(bad("live records without a d-tree".into()));
    }
    if let Some(e) = &dtree {
        if live_records > e.records || live_bytes > e.bytes {
            return Err(bad("more live records than the d-tree holds".into()));
        }
    }
    if !leaf && nkeys == 0 {
        return Err(bad("an inner s-node without s-keys".into()));
    }
    let mut children = Vec::new();
    if !leaf {
        for _ in 0..=nkeys {
            children.push(decode_node(r, depth + 1, seen)?);
        }
    }
    Ok(RawNode {
        keys,
        start,
        live_records,
        live_bytes,
        dtree,
        pieces,
        children,
    })
}

/// Loads the d-trees of a decoded s-tree.
pub(crate) fn load(file: &Arc<PageFile>, raw: RawNode) -> Result<SNode> {
    let dtree = match raw.dtree {
        Some(e) => Some(Arc::new(DTree::load(file, e, raw.pieces)?)),
        None => None,
    };
    let children = raw
        .children
        .into_iter()
        .map(|c| load(file, c).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    Ok(SNode {
        keys: raw.keys,
        children,
        dtree,
        start: raw.start,
        live_records: raw.live_records,
        live_bytes: raw.live_bytes,
    })
}

/// Writes `bytes` as a manifest run and its head into page `head` (allocated by the caller).
/// Returns the run (first page, pages).
pub(crate) fn write(file: &PageFile, head: u64, bytes: &[u8]) -> Result<(u64, u64)> {
    let ps = file.page_size();
    let usable = ps - PAGE_HEADER_LEN;
    let pages = bytes.len().div_ceil(usable).max(1);
    let first = file.allocate_run(pages);
    let mut buf = file.buffer(pages);
    for (i, chunk) in bytes.chunks(usable).enumerate() {
        let at = i * ps + PAGE_HEADER_LEN;
        buf[at..at + chunk.len()].copy_from_slice(chunk);
    }
    file.write_run(first, &mut buf, &vec![(PageKind::Manifest, 0); pages])?;
    let mut h = file.buffer(1);
    let e = &mut h[PAGE_HEADER_LEN..ps];
    e[0..4].copy_from_slice(HEAD_MAGIC);
    e[4..8].copy_from_slice(&(pages as u32).to_le_bytes());
    e[8..16].copy_from_slice(&first.to_le_bytes());
    e[16..24].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    e[24..28].copy_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
    file.write_page(head, &mut h, PageKind::Manifest, 0)?;
    Ok((first, pages as u64))
}

/// Reads the manifest whose head is `head`: its bytes and its run (first page, pages).
pub(crate) fn read(file: &PageFile, head: u64) -> Result<(Vec<u8>, u64, u64)> {
    let ps = file.page_size();
    let mut h = file.buffer(1);
    file.read_page(head, &mut h, PageKind::Manifest)?;
    let e = &h[PAGE_HEADER_LEN..ps];
    let bad = |detail: String| Error::Corruption { page: head, detail };
    if &e[0..4] != HEAD_MAGIC {
        return Err(bad("manifest head without its magic".into()));
    }
    let pages = u32::from_le_bytes([e[4], e[5], e[6], e[7]]) as u64;
    let mut w = [0u8; 8];
    w.copy_from_slice(&e[8..16]);
    let first = u64::from_le_bytes(w);
    w.copy_from_slice(&e[16..24]);
    let len = u64::from_le_bytes(w);
    let crc = u32::from_le_bytes([e[24], e[25], e[26], e[27]]);
    let usable = (ps - PAGE_HEADER_LEN) as u64;
    if pages == 0
        || len > pages * usable
        || first < 2
        || first.saturating_add(pages) > file.page_count()
    {
        return Err(bad(format!(
            "manifest run of {pages} pages at {first} holding {len} bytes, in a file of {} pages",
            file.page_count()
        )));
    }
    let mut buf = file.buffer(pages as usize);
    file.read_run(first, &mut buf, &vec![PageKind::Manifest; pages as usize])?;
    let mut bytes = Vec::with_capacity(len as usize);
    for p in 0..pages as usize {
        bytes.extend_from_slice(&buf[p * ps + PAGE_HEADER_LEN..(p + 1) * ps]);
    }
    bytes.truncate(len as usize);
    let got = crc32c::crc32c(&bytes);
    if got != crc {
        return Err(Error::ChecksumMismatch {
            page: head,
            expected: crc,
            got,
        });
    }
    Ok((bytes, first, pages))
}
