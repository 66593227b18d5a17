//! d-trees (§3.1, §4.1): immutable B+trees written once, sequentially, into a run of pages, and
//! read back by point lookups and sequential cursors.
//!
//! ```text
//! run: | leaf 0 | leaf 1 | ... | leaf L−1 | inner level 1 ... | inner root | Bloom pages |
//! ```
//!
//! The run is the d-tree's logical page order; on disk it is in *pieces* ([`super::pieces`]) of
//! at least 1 MiB each (the last may be shorter), so a d-tree can reuse holes shorter than it
//! (a departure from the paper's one contiguous run; every read is at most 1 MiB anyway).
//!
//! Leaves (`DTreeLeaf`) and inner nodes (`DTreeInner`) are slotted nodes (`page::slotted`, the
//! engine bytes after the 32-byte page header) without fences or prefix truncation; leaves have
//! plain 6-byte slots (no heads, no hints: `LEAF_FLAGS`), inner nodes heads and hints. A leaf's
//! records are `key → tag ++ value` (tag 1 put, 0 tombstone); an inner node's separator `i` is
//! the last key of child `i`, whose page id is its 8-byte value, and its upper child holds the
//! keys above the last separator. Child ids point backwards in the run (every level is written
//! after the one below), which a reader checks, so a damaged id cannot make it loop. The Bloom
//! filter's bytes ([`super::bloom`]) fill the `Bloom` pages after the engine header.
//!
//! **Writing** ([`Writer`]): the run is allocated up front at an upper bound computed from the
//! inputs (records, bytes, the largest record and key: a leaf wastes less than one record), in
//! pieces ([`crate::io::PageFile::allocate_pieces`]), the pages are built in a buffer of at most
//! 1 MiB (a step of the job's) and written a buffer (or a piece's end) at a time, by a thread
//! of the writer's while it builds the next ([`super::writebehind`]), and the unused tail is
//! freed at the end.
//! Inner pages and the filter stay in memory in the [`DTree`] handle (§6.2: inner nodes and
//! filters are cached); lookups read leaves through the leaf cache.
//!
//! **Reading in order** ([`Cursor`]): a scan's cursor reads 4 leaves at a time; a merge's reads
//! 1 MiB at a time, and one with more than one read to make reads the next 1 MiB on a thread
//! of its own while the merge goes through the last ([`super::readahead`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::bloom::{self, Bloom};
use super::cascade::Job;
use super::pieces::Pieces;
use super::readahead::ReadAhead;
use super::writebehind::WriteBehind;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::io::page_header::{PageKind, PAGE_HEADER_LEN};
use crate::io::{AlignedBuf, PageFile};
use crate::page::build::{Builder, NodeSpec};
use crate::page::slotted::{
    Slotted, FLAG_HEADS, FLAG_HINTS, HEADER_LEN, HEADER_LEN_HINTS, SLOT_LEN, SLOT_LEN_HEADS,
};
use crate::page::{KIND_INNER, KIND_LEAF};

/// Tag byte of a put's value.
pub(crate) const TAG_PUT: u8 = 1;
/// Tag byte of a tombstone.
pub(crate) const TAG_TOMBSTONE: u8 = 0;

/// Pages per write (1 MiB at 4 KiB pages), and the shortest piece of a d-tree's run but its last.
const WRITE_BYTES: usize = 1 << 20;
/// Pages a scan's cursor reads at a time (a merge reads [`WRITE_BYTES`]).
const SCAN_PAGES: usize = 4;

/// Where a d-tree is and what it holds (the manifest's entry for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    /// First page of the run (of its first piece).
    pub(crate) first: u64,
    pub(crate) leaf_pages: u32,
    pub(crate) inner_pages: u32,
    pub(crate) bloom_pages: u32,
    /// The root page (the only leaf when there are no inner pages).
    pub(crate) root: u64,
    pub(crate) records: u64,
    /// Record bytes: keys, tags and values.
    pub(crate) bytes: u64,
    /// The largest record's bytes (key, tag and value) and the longest key.
    pub(crate) max_record: u32,
    pub(crate) max_key: u32,
    /// Bytes of the Bloom filter (0: none).
    pub(crate) bloom_len: u32,
}

impl Extent {
    /// Pages of the run.
    pub(crate) fn pages(&self) -> u64 {
        u64::from(self.leaf_pages) + u64::from(self.inner_pages) + u64::from(self.bloom_pages)
    }
}

/// An immutable d-tree on disk, with its inner pages and filter in memory.
pub(crate) struct DTree {
    file: Arc<PageFile>,
    pub(crate) extent: Extent,
    /// Where its pages are.
    pub(crate) pieces: Pieces,
    /// The inner pages' engine bytes, in run order.
    inner: Vec<u8>,
    bloom: Option<Bloom>,
    /// The meta sequence of the checkpoint during which it was written (0: loaded from a
    /// durable manifest).
    written_at: u64,
    /// Replaced in the s-tree during the checkpoint with this meta sequence (0: live): free the
    /// run when the last version holding it lets go, once that checkpoint is durable.
    retired_at: AtomicU64,
}

impl std::fmt::Debug for DTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DTree")
            .field("extent", &self.extent)
            .finish()
    }
}

impl Drop for DTree {
    fn drop(&mut self) {
        let retired = self.retired_at.load(Ordering::Acquire);
        if retired == 0 {
            return;
        }
        for &(first, n) in self.pieces.runs() {
            let n = n as usize;
            // An error here means the page file's free space disagrees with the s-tree;
            // `NbTree::check` reports that, and nothing can be returned from a drop.
            let _ = if retired == self.written_at {
                // Written and replaced before any checkpoint recorded it (between two meta
                // pages, or in a commit that failed and poisoned the store): no durable
                // manifest names it, and no version holds it any more.
                self.file.free_run(first, n)
            } else {
                // The durable manifest may name it until the checkpoint that replaced it is
                // durable (module docs of `super`).
                self.file.free_run_after_checkpoint(retired, first, n)
            };
        }
    }
}

fn corrupt(page: u64, detail: impl Into<String>) -> Error {
    Error::Corruption {
        page,
        detail: detail.into(),
    }
}

impl DTree {
    /// Marks the d-tree replaced: its run is freed when the last holder drops it and the
    /// checkpoint that records the replacement (the next to be written) is durable.
    pub(crate) fn retire(&self) {
        self.retired_at
            .store(self.file.next_sequence(), Ordering::Release);
    }

    /// Loads the d-tree the manifest describes, its pages in the pieces `runs` (in logical
    /// order): checks the extent, reads its inner pages and its filter.
    pub(crate) fn load(file: &Arc<PageFile>, e: Extent, runs: Vec<(u64, u64)>) -> Result<DTree> {
        let usable = file.page_size() - PAGE_HEADER_LEN;
        let impossible = |why: &str| {
            corrupt(
                e.first,
                format!(
                    "impossible d-tree extent {e:?} ({why}) in a file of {} pages",
                    file.page_count()
                ),
            )
        };
        let in_file = runs
            .iter()
            .all(|&(f, n)| f >= 2 && f.checked_add(n).is_some_and(|end| end <= file.page_count()));
        if !in_file {
            return Err(impossible("a piece outside the file's data pages"));
        }
        let pieces = Pieces::new(runs).ok_or_else(|| impossible("pieces overlap or are empty"))?;
        let leaves = u64::from(e.leaf_pages);
        let inners = u64::from(e.inner_pages);
        let bloom_fits = (e.bloom_len as usize).div_ceil(usable) == e.bloom_pages as usize;
        let root_ok = if e.inner_pages == 0 {
            e.leaf_pages == 1 && pieces.page(0) == Some(e.root)
        } else {
            pieces.page(leaves + inners - 1) == Some(e.root)
        };
        if pieces.pages() != e.pages()
            || pieces.page(0) != Some(e.first)
            || e.leaf_pages == 0
            || !bloom_fits
            || !root_ok
            || e.records == 0
        {
            return Err(impossible("counts"));
        }
        let inner = read_pages(
            file,
            &pieces,
            leaves,
            e.inner_pages as usize,
            PageKind::DTreeInner,
        )?;
        let bloom = if e.bloom_pages > 0 {
            let first = leaves + inners;
            let mut bytes = read_pages(
                file,
                &pieces,
                first,
                e.bloom_pages as usize,
                PageKind::Bloom,
            )?;
            bytes.truncate(e.bloom_len as usize);
            Some(Bloom::decode(pieces.page(first).unwrap_or(e.first), bytes)?)
        } else {
            None
        };
        Ok(DTree {
            file: file.clone(),
            extent: e,
            pieces,
            inner,
            bloom,
            written_at: 0,
            retired_at: AtomicU64::new(0),
        })
    }

    fn usable(&self) -> usize {
        self.file.page_size() - PAGE_HEADER_LEN
    }

    /// Bytes it keeps in memory: its inner pages and its filter.
    pub(crate) fn memory(&self) -> u64 {
        (self.inner.len() + self.bloom.as_ref().map_or(0, Bloom::byte_len)) as u64
    }

    /// The leaf that may hold `key`: its page and its logical number.
    fn leaf_for(&self, key: &[u8]) -> Result<(u64, u64)> {
        let e = &self.extent;
        let leaves = u64::from(e.leaf_pages);
        let usable = self.usable();
        let mut id = e.root;
        let mut at_l = self
            .pieces
            .logical(id)
            .ok_or_else(|| corrupt(id, "root outside its d-tree"))?;
        while at_l >= leaves {
            let at = (at_l - leaves) as usize * usable;
            let page = self
                .inner
                .get(at..at + usable)
                .ok_or_else(|| corrupt(id, "inner page outside its d-tree"))?;
            let node = Slotted::new(id, page)?;
            let (i, _) = node.lower_bound(key)?;
            let child = node.child(i)?;
            // Children are written before their parent: a pointer forwards is damage (and
            // would let a loop run forever).
            at_l = self
                .pieces
                .logical(child)
                .filter(|&c| c < at_l)
                .ok_or_else(|| corrupt(id, format!("child {child} outside its d-tree level")))?;
            id = child;
        }
        Ok((id, at_l))
    }

    /// The file page of the d-tree's logical page `l` (leaves, inner pages, filter in order).
    pub(crate) fn page_id(&self, l: u64) -> Option<u64> {
        self.pieces.page(l)
    }

    /// Whether the filter admits `key` (hash `h`): always without a filter.
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        self.bloom.as_ref().is_none_or(|b| b.may_contain(h))
    }

    /// Looks `key` up: its tagged value, if the d-tree holds it. The leaf is read through the
    /// buffer pool `pool` (the lookups' leaf cache, over the same page file): an optimistic
    /// read, validated. Leaves are immutable
    /// while a version holds their d-tree, so a failed validation (the pool forgot the page
    /// for a reused run, which cannot happen while this d-tree is held) only retries.
    pub(crate) fn get(&self, key: &[u8], pool: &BufferPool, out: &mut Vec<u8>) -> Result<bool> {
        let (id, _) = self.leaf_for(key)?;
        let usable = pool.usable_size();
        loop {
            let Some(version) = pool.read_lock(id)? else {
                return Err(corrupt(
                    id,
                    "a d-tree leaf was freed while a version held it",
                ));
            };
            // SAFETY: `data` is the page's engine bytes, `usable` long, at a fixed address
            // inside the pool's reservation; they are trusted only after `validate` succeeds.
            let page = unsafe { std::slice::from_raw_parts(pool.data(id).as_ptr(), usable) };
            let r = (|| {
                let leaf = Slotted::new(id, page)?;
                let (i, found) = leaf.lower_bound(key)?;
                if found {
                    out.clear();
                    out.extend_from_slice(leaf.value(i)?);
                }
                Ok(found)
            })();
            if pool.validate(id, version) {
                return r;
            }
        }
    }

    /// Where the next read of leaves from logical leaf `next` goes: the page it starts at and
    /// how many leaves, at most `per_read` and within one piece.
    pub(crate) fn next_run(&self, next: u64, per_read: usize) -> Result<(u64, usize)> {
        let end = u64::from(self.extent.leaf_pages);
        let n = per_read
            .min(end.saturating_sub(next) as usize)
            .min(self.pieces.contiguous_from(next) as usize);
        let first = self
            .pieces
            .page(next)
            .filter(|_| n > 0)
            .ok_or_else(|| corrupt(next, "a d-tree leaf outside its pieces"))?;
        Ok((first, n))
    }

    /// A cursor over the records with keys `>= from` (all of them for an empty `from`),
    /// reading `pages` leaves at a time.
    pub(crate) fn cursor(self: &Arc<Self>, from: &[u8], sequential: bool) -> Result<Cursor> {
        let leaf = if from.is_empty() {
            0
        } else {
            self.leaf_for(from)?.1
        };
        let per_read = if sequential {
            (WRITE_BYTES / self.file.page_size()).max(1)
        } else {
            SCAN_PAGES
        };
        // No larger than the leaves left: a buffer is zeroed when made, and a small d-tree's
        // merge spent most of its time zeroing a 1 MiB one.
        let left = u64::from(self.extent.leaf_pages)
            .saturating_sub(leaf)
            .max(1);
        let per_read = per_read.min(usize::try_from(left).unwrap_or(usize::MAX));
        // A merge's cursor with more than one read to make reads ahead (`super::readahead`).
        let ahead = if sequential && left > per_read as u64 {
            Some(ReadAhead::start(self.clone(), leaf, per_read)?)
        } else {
            None
        };
        let mut c = Cursor {
            tree: self.clone(),
            buf: self.file.buffer(per_read),
            ahead,
            per_read,
            next_leaf: leaf,
            loaded_first: 0,
            loaded: 0,
            page: 0,
            slot: 0,
            count: 0,
            key: Vec::new(),
            value: Vec::new(),
        };
        c.load_next_page()?;
        // Skip to the first key >= from within the first leaf.
        if !from.is_empty() && c.count > 0 {
            let ps = self.file.page_size();
            let at = c.page * ps;
            let leaf = Slotted::new(
                c.loaded_first + c.page as u64,
                &c.buf[at + PAGE_HEADER_LEN..at + ps],
            )?;
            c.slot = leaf.lower_bound(from)?.0;
        }
        Ok(c)
    }
}

/// Reads `n` pages of `kind` from logical page `first` and returns their engine bytes back to
/// back.
fn read_pages(
    file: &PageFile,
    pieces: &Pieces,
    first: u64,
    n: usize,
    kind: PageKind,
) -> Result<Vec<u8>> {
    let ps = file.page_size();
    let per = (WRITE_BYTES / ps).max(1);
    let mut out = Vec::with_capacity(n * (ps - PAGE_HEADER_LEN));
    let mut buf = file.buffer(per.min(n.max(1)));
    let mut done = 0;
    while done < n {
        let l = first + done as u64;
        let m = per.min(n - done).min(pieces.contiguous_from(l) as usize);
        let id = pieces
            .page(l)
            .filter(|_| m > 0)
            .ok_or_else(|| corrupt(l, "a d-tree page outside its pieces"))?;
        file.read_run(id, &mut buf, &vec![kind; m])?;
        for p in 0..m {
            out.extend_from_slice(&buf[p * ps + PAGE_HEADER_LEN..(p + 1) * ps]);
        }
        done += m;
    }
    Ok(out)
}

/// A sequential reader of a d-tree's records in key order.
pub(crate) struct Cursor {
    tree: Arc<DTree>,
    buf: AlignedBuf,
    /// A merge's read-ahead, which fills `buf`'s successor.
    ahead: Option<ReadAhead>,
    per_read: usize,
    /// The next leaf to read (logical).
    next_leaf: u64,
    /// The first leaf in `buf` (its page), and how many are there.
    loaded_first: u64,
    loaded: usize,
    /// The leaf (index in `buf`) and slot the cursor is at, and that leaf's record count.
    page: usize,
    slot: usize,
    count: usize,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Cursor {
    fn leaves_end(&self) -> u64 {
        u64::from(self.tree.extent.leaf_pages)
    }

    /// Moves to the next leaf with records; `count` is 0 at the end.
    fn load_next_page(&mut self) -> Result<()> {
        loop {
            if self.page + 1 < self.loaded {
                self.page += 1;
            } else {
                let end = self.leaves_end();
                if self.next_leaf >= end {
                    self.count = 0;
                    self.loaded = 0;
                    return Ok(());
                }
                let (first, n) = match &self.ahead {
                    Some(ahead) => ahead.next(&mut self.buf).unwrap_or_else(|| {
                        Err(corrupt(self.next_leaf, "the read-ahead ended early"))
                    })?,
                    None => {
                        let (first, n) = self.tree.next_run(self.next_leaf, self.per_read)?;
                        let kinds = vec![PageKind::DTreeLeaf; n];
                        self.tree.file.read_run(first, &mut self.buf, &kinds)?;
                        (first, n)
                    }
                };
                self.loaded_first = first;
                self.loaded = n;
                self.next_leaf += n as u64;
                self.page = 0;
            }
            let ps = self.tree.file.page_size();
            let at = self.page * ps;
            let id = self.loaded_first + self.page as u64;
            let leaf = Slotted::new(id, &self.buf[at + PAGE_HEADER_LEN..at + ps])?;
            self.slot = 0;
            self.count = leaf.count();
            if self.count > 0 {
                return Ok(());
            }
        }
    }

    /// The next record (key, tagged value), valid until the next call; `None` at the end.
    pub(crate) fn next_record(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        while self.count > 0 && self.slot >= self.count {
            self.load_next_page()?;
        }
        if self.count == 0 {
            return Ok(None);
        }
        let ps = self.tree.file.page_size();
        let at = self.page * ps;
        let id = self.loaded_first + self.page as u64;
        let leaf = Slotted::new(id, &self.buf[at + PAGE_HEADER_LEN..at + ps])?;
        self.key.clear();
        leaf.full_key_into(self.slot, &mut self.key)?;
        self.value.clear();
        self.value.extend_from_slice(leaf.value(self.slot)?);
        self.slot += 1;
        Ok(Some((&self.key, &self.value)))
    }
}

/// Upper bounds of what a d-tree will be built from (its run is allocated from them).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bound {
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) max_record: u32,
    pub(crate) max_key: u32,
}

impl Bound {
    pub(crate) fn add(&mut self, o: Bound) {
        self.records += o.records;
        self.bytes += o.bytes;
        self.max_record = self.max_record.max(o.max_record);
        self.max_key = self.max_key.max(o.max_key);
    }

    pub(crate) fn of_extent(e: &Extent) -> Bound {
        Bound {
            records: e.records,
            bytes: e.bytes,
            max_record: e.max_record,
            max_key: e.max_key,
        }
    }

    pub(crate) fn record(&mut self, key: &[u8], tagged: &[u8]) {
        self.records += 1;
        self.bytes += (key.len() + tagged.len()) as u64;
        self.max_record = self.max_record.max((key.len() + tagged.len()) as u32);
        self.max_key = self.max_key.max(key.len() as u32);
    }
}

/// The engine bytes of an inner node with no records (a slotted header with hints).
const NODE_HEADER: usize = HEADER_LEN_HINTS;
/// An inner entry beyond its key: slot and child id.
const INNER_ENTRY: usize = SLOT_LEN_HEADS + 8;
/// A leaf's layout: plain 6-byte slots, neither heads nor hints. A leaf is searched once per
/// lookup, by a binary search over a few dozen slots, where heads and hints save little; their
/// bytes (4 a slot, 64 a page) cost whole records a page: 28 records of 8 + 129 bytes fit in
/// a 4 KiB page without them, 26 with. Fewer leaf pages mean more of them in the leaf cache
/// and a smaller file.
const LEAF_FLAGS: u8 = 0;
/// The engine bytes of a leaf with no records.
const LEAF_HEADER: usize = HEADER_LEN;
/// A leaf record's slot.
const LEAF_SLOT: usize = SLOT_LEN;

/// Pages a d-tree built from at most `b` needs at most.
fn pages_bound(b: &Bound, usable: usize, bloom_bits: u32) -> u64 {
    if b.records == 0 {
        return 0;
    }
    let leaf_cap = (usable - LEAF_HEADER) as u64;
    let worst = (LEAF_SLOT as u64) + u64::from(b.max_record);
    let leaves = (b.bytes + b.records * LEAF_SLOT as u64)
        .div_ceil(leaf_cap.saturating_sub(worst).max(1))
        + 1;
    let cap = (usable - NODE_HEADER) as u64;
    let entry = (INNER_ENTRY as u64) + u64::from(b.max_key);
    // Children per inner page: its entries plus the upper child; at least 2 (keys ≤ 1/16 page).
    let fan = (cap / entry).max(1) + 1;
    let (mut level, mut inner) = (leaves, 0);
    while level > 1 {
        level = level.div_ceil(fan);
        inner += level;
    }
    let bloom = bloom::encoded_len(b.records, bloom_bits).div_ceil(usable) as u64;
    leaves + inner + bloom
}

/// The shortest piece of a d-tree's run but its last, in pages: 1 MiB (a reader's sequential
/// read), or σ/8 when that is less (a store of small σ, whose d-trees are a few σ: they still
/// reuse holes, in at most about 16 pieces each).
pub(crate) fn min_piece(page_size: usize, sigma: u64) -> usize {
    (WRITE_BYTES.min(usize::try_from(sigma / 8).unwrap_or(usize::MAX)) / page_size).max(1)
}

/// Builds a d-tree from records in ascending key order into a fresh run.
pub(crate) struct Writer {
    file: Arc<PageFile>,
    ps: usize,
    usable: usize,
    bloom_bits: u32,
    /// The run allocated (`capacity` pages), and the first page (for errors).
    pieces: Pieces,
    first: u64,
    capacity: u64,
    /// Pages built so far (the next page's logical number).
    built: u64,
    /// Pages not yet written: `buf[..pending × ps]`, to pages from `pending_first` on (one
    /// piece).
    buf: AlignedBuf,
    pending: usize,
    pending_first: u64,
    kinds: Vec<(PageKind, u64)>,
    /// The current leaf's records: key and tagged value lengths, bytes back to back.
    leaf_lens: Vec<(u16, u16)>,
    leaf_bytes: Vec<u8>,
    leaf_space: usize,
    /// Every leaf's last key and page id.
    leaves: Vec<(Vec<u8>, u64)>,
    hashes: Vec<u64>,
    stats: Bound,
    last_key: Vec<u8>,
    job: Option<Arc<Job>>,
    /// The thread writing full buffers while the next is built (`super::writebehind`), once a
    /// run longer than the buffer has had its first write.
    behind: Option<WriteBehind>,
}

impl Writer {
    /// A writer whose output holds at most what `bound` says; its writes are steps of `job`
    /// (at most the job's `step_bytes` each) when there is one. Its pieces are at least
    /// [`min_piece`] pages long for a store of σ `sigma`.
    pub(crate) fn new(
        file: &Arc<PageFile>,
        bound: Bound,
        bloom_bits: u32,
        job: Option<Arc<Job>>,
        sigma: u64,
    ) -> Writer {
        let ps = file.page_size();
        let usable = ps - PAGE_HEADER_LEN;
        let capacity = pages_bound(&bound, usable, bloom_bits);
        let runs = if capacity > 0 {
            file.allocate_pieces(capacity as usize, min_piece(ps, sigma))
        } else {
            Vec::new()
        };
        let first = runs.first().map_or(0, |r| r.0);
        // Allocated from disjoint free runs, they cannot overlap.
        let pieces = Pieces::new(runs).unwrap_or_default();
        let write_bytes = job
            .as_ref()
            .map_or(WRITE_BYTES, |j| (j.step_bytes as usize).min(WRITE_BYTES));
        let per = (write_bytes / ps).max(1);
        Writer {
            file: file.clone(),
            ps,
            usable,
            bloom_bits,
            pieces,
            first,
            capacity,
            built: 0,
            buf: file.buffer(per.min(capacity.max(1) as usize)),
            pending: 0,
            pending_first: 0,
            kinds: Vec::new(),
            leaf_lens: Vec::new(),
            leaf_bytes: Vec::new(),
            leaf_space: LEAF_HEADER,
            leaves: Vec::new(),
            hashes: Vec::new(),
            stats: Bound::default(),
            last_key: Vec::new(),
            job,
            behind: None,
        }
    }

    /// The run allocated for the d-tree: its pieces, (first page, pages) each.
    pub(crate) fn run(&self) -> &[(u64, u64)] {
        self.pieces.runs()
    }

    /// Records pushed so far.
    pub(crate) fn records(&self) -> u64 {
        self.stats.records
    }

    /// Appends a record; keys must ascend.
    pub(crate) fn push(&mut self, key: &[u8], tagged: &[u8]) -> Result<()> {
        if self.stats.records > 0 && key <= self.last_key.as_slice() {
            return Err(corrupt(self.first, "d-tree records out of order"));
        }
        let space = LEAF_SLOT + key.len() + tagged.len();
        if self.leaf_space + space > self.usable && !self.leaf_lens.is_empty() {
            self.finish_leaf()?;
        }
        if LEAF_HEADER + space > self.usable {
            return Err(Error::InvalidArgument {
                what: format!(
                    "record of {} bytes for a d-tree leaf",
                    key.len() + tagged.len()
                ),
                limit: self.usable - LEAF_HEADER - LEAF_SLOT,
            });
        }
        self.leaf_lens.push((key.len() as u16, tagged.len() as u16));
        self.leaf_bytes.extend_from_slice(key);
        self.leaf_bytes.extend_from_slice(tagged);
        self.leaf_space += space;
        self.hashes.push(bloom::hash(key));
        self.stats.record(key, tagged);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        Ok(())
    }

    /// The next page's buffer slot (engine bytes zeroed), flushing the buffer when full.
    fn next_page(&mut self, kind: PageKind) -> Result<(u64, usize)> {
        if self.built >= self.capacity {
            return Err(corrupt(
                self.first,
                format!("a d-tree outgrew its run of {} pages", self.capacity),
            ));
        }
        let id = self
            .pieces
            .page(self.built)
            .ok_or_else(|| corrupt(self.first, "a d-tree page outside its pieces"))?;
        let contiguous = self.pending_first + self.pending as u64 == id;
        if (self.pending + 1) * self.ps > self.buf.len() || (self.pending > 0 && !contiguous) {
            self.write_pending()?;
        }
        if self.pending == 0 {
            self.pending_first = id;
        }
        let at = self.pending * self.ps;
        self.buf[at..at + self.ps].fill(0);
        self.pending += 1;
        self.built += 1;
        self.kinds.push((kind, 0));
        Ok((id, at))
    }

    fn write_pending(&mut self) -> Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let first = self.pending_first;
        let len = self.pending * self.ps;
        self.pending = 0;
        let per = self.buf.len() / self.ps;
        if self.behind.is_none() && self.capacity > per as u64 {
            self.behind = Some(WriteBehind::start(self.file.clone(), self.job.clone())?);
        }
        match &mut self.behind {
            Some(behind) => {
                let kinds = std::mem::take(&mut self.kinds);
                let file = &self.file;
                behind.submit(first, &mut self.buf, len, kinds, || file.buffer(per))?;
            }
            None => {
                self.file
                    .write_frames(first, &mut self.buf[..len], &self.kinds)?;
                self.kinds.clear();
                if let Some(j) = &self.job {
                    j.advance(len as u64);
                }
            }
        }
        Ok(())
    }

    fn finish_leaf(&mut self) -> Result<()> {
        let (id, at) = self.next_page(PageKind::DTreeLeaf)?;
        let ps = self.ps;
        let spec = NodeSpec {
            kind: KIND_LEAF,
            flags: LEAF_FLAGS,
            prefix_truncation: false,
            lower: &[],
            upper: None,
            upper_child: 0,
            op_counter: 0,
        };
        let page = &mut self.buf[at + PAGE_HEADER_LEN..at + ps];
        let mut b =
            Builder::new(page, &spec).ok_or_else(|| corrupt(id, "empty leaf does not fit"))?;
        let mut off = 0;
        let mut last = (0, 0);
        for &(kl, vl) in &self.leaf_lens {
            let (kl, vl) = (kl as usize, vl as usize);
            let key = &self.leaf_bytes[off..off + kl];
            let value = &self.leaf_bytes[off + kl..off + kl + vl];
            if !b.push(key, &[], value) {
                return Err(corrupt(id, "d-tree leaf overflowed while built"));
            }
            last = (off, kl);
            off += kl + vl;
        }
        b.finish();
        self.leaves
            .push((self.leaf_bytes[last.0..last.0 + last.1].to_vec(), id));
        self.leaf_lens.clear();
        self.leaf_bytes.clear();
        self.leaf_space = LEAF_HEADER;
        Ok(())
    }

    /// Writes the inner levels and the filter, frees the unused tail of the run, and returns
    /// the d-tree (`None` when no record was pushed).
    pub(crate) fn finish(mut self) -> Result<Option<DTree>> {
        if self.stats.records == 0 {
            for &(first, n) in self.pieces.runs() {
                self.file.free_run(first, n as usize)?;
            }
            return Ok(None);
        }
        if !self.leaf_lens.is_empty() {
            self.finish_leaf()?;
        }
        let leaf_pages = self.leaves.len() as u64;
        let mut inner = Vec::new();
        let mut level = std::mem::take(&mut self.leaves);
        while level.len() > 1 {
            level = self.build_level(&level, &mut inner)?;
        }
        let root = level.first().map_or(self.first, |l| l.1);
        let first = self.first;
        let inner_pages = self.built - leaf_pages;
        let filter = bloom::build(&self.hashes, self.bloom_bits);
        let bloom_pages = filter.len().div_ceil(self.usable);
        for chunk in filter.chunks(self.usable) {
            let (_, at) = self.next_page(PageKind::Bloom)?;
            let start = at + PAGE_HEADER_LEN;
            self.buf[start..start + chunk.len()].copy_from_slice(chunk);
        }
        self.write_pending()?;
        if let Some(behind) = &mut self.behind {
            behind.finish()?;
        }
        for (f, n) in self.pieces.truncate(self.built) {
            self.file.free_run(f, n as usize)?;
        }
        let extent = Extent {
            first,
            leaf_pages: leaf_pages as u32,
            inner_pages: inner_pages as u32,
            bloom_pages: bloom_pages as u32,
            root,
            records: self.stats.records,
            bytes: self.stats.bytes,
            max_record: self.stats.max_record,
            max_key: self.stats.max_key,
            bloom_len: filter.len() as u32,
        };
        let bloom = if filter.is_empty() {
            None
        } else {
            Some(Bloom::decode(self.first, filter)?)
        };
        Ok(Some(DTree {
            file: self.file.clone(),
            extent,
            pieces: std::mem::take(&mut self.pieces),
            inner,
            bloom,
            written_at: self.file.next_sequence(),
            retired_at: AtomicU64::new(0),
        }))
    }

    /// Builds the inner level over `children` (last key, page id), appending each page's
    /// engine bytes to `inner`; returns the new level.
    fn build_level(
        &mut self,
        children: &[(Vec<u8>, u64)],
        inner: &mut Vec<u8>,
    ) -> Result<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        let mut i = 0;
        let cap = self.usable;
        while i < children.len() {
            // Take children while their separators fit; the last one taken is the upper child.
            let mut space = NODE_HEADER;
            let mut j = i;
            while j + 1 < children.len() && space + INNER_ENTRY + children[j].0.len() <= cap {
                space += INNER_ENTRY + children[j].0.len();
                j += 1;
            }
            // children[i..j] are separators, children[j] the upper child. A level's last page
            // may be left with a single child (no separators); that is a valid node.
            let (id, at) = self.next_page(PageKind::DTreeInner)?;
            let ps = self.ps;
            let spec = NodeSpec {
                kind: KIND_INNER,
                flags: FLAG_HEADS | FLAG_HINTS,
                prefix_truncation: false,
                lower: &[],
                upper: None,
                upper_child: children[j].1,
                op_counter: 0,
            };
            let page = &mut self.buf[at + PAGE_HEADER_LEN..at + ps];
            let mut b = Builder::new(page, &spec)
                .ok_or_else(|| corrupt(id, "empty inner node does not fit"))?;
            for (key, child) in &children[i..j] {
                if !b.push(key, &[], &child.to_le_bytes()) {
                    return Err(corrupt(id, "d-tree inner node overflowed while built"));
                }
            }
            b.finish();
            inner.extend_from_slice(&self.buf[at + PAGE_HEADER_LEN..at + ps]);
            out.push((children[j].0.clone(), id));
            i = j + 1;
        }
        Ok(out)
    }
}

impl DTree {
    /// The page file the d-tree is in.
    pub(crate) fn file(&self) -> &PageFile {
        &self.file
    }
}
