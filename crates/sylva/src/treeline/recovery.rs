//! Opening a store: a new one's first segment, or recovery (§4.7.2, built here; the thesis
//! leaves it a sketch): the log's page images and reorganizations, then a scan of the pages
//! that rebuilds the index, then (in [`crate::durable`]'s redo) the log's puts and deletes back
//! into the record cache.
//!
//! 1. **The log** (from the checkpoint's LSN): a PAGE_IMAGE whose page does not verify (a torn
//!    write) is written back, as is every later image of a page written back; REORG_START and
//!    REORG_END are collected.
//! 2. **Check II**, per REORG_START in log order: with its REORG_END, or if a pre segment's
//!    first page no longer carries the logged production ID (or does not verify: only the
//!    invalidation of Phase IV writes it without a logged image) and no later REORG_START
//!    names the same pre segment (which would mean it was still live: this one was voided by
//!    an earlier recovery and tried again), the reorganization reached Phase IV: its surviving
//!    pre segments are invalidated again and its post segments are valid. Otherwise it is
//!    void: its post segments (written, maybe in part, before any pre segment changed) are
//!    invalidated, and the pre segments stay.
//! 3. **The scan** reads every page of the file: a first page with a production ID that is
//!    not 0 and not void starts a segment; its other pages must be there. Pages that do not
//!    verify are tolerated only where a crash explains them: free pages (at the checkpoint)
//!    and pre segments' first pages; elsewhere they are damage (`ChecksumMismatch`).
//! 4. **Overflow pages (Check I).** A base page's link to an overflow page that is not its
//!    (lost write) is dropped; an overflow page whose base page of the same production does not
//!    link it (the base page's write lost) is linked again, in memory until the base page is
//!    next written. Either way the records concerned were dirty entries, whose log records the
//!    redo brings back.
//! 5. **Space.** Pages of valid segments and linked overflow pages are in use; every other page
//!    in use at the checkpoint is freed (deferred), and the record count is counted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;

use parking_lot::RwLock;

use super::cache::RecordCache;
use super::engine::State;
use super::group::Groups;
use super::index::{Segment, SegmentIndex};
use super::log::{self, ReorgStart};
use super::model::Model;
use super::options::TreeLineOptions;
use super::page::{self, Header, SegmentPage};
use super::store::{size_class, Counters, Inner, Store};
use crate::error::{Error, Result};
use crate::io::page_header::{PageKind, PAGE_HEADER_LEN};
use crate::io::{AlignedBuf, PageFile, FIRST_DATA_PAGE};
use crate::util::histogram::InsertTracker;
use crate::wal::Wal;

/// A segment's first page found by the scan: its id, header, lower and upper bound.
type Candidate = (u64, Header, Vec<u8>, Option<Vec<u8>>);

/// Builds the store over its files: a new store's first segment, or recovery (module docs).
pub(crate) fn open_store(
    file: PageFile,
    wal: Arc<Wal>,
    state: Option<State>,
    checkpoint_lsn: u64,
    options: TreeLineOptions,
) -> Result<Store> {
    let store = Store {
        file,
        wal,
        gate: RwLock::new(()),
        inner: RwLock::new(Inner {
            cache: RecordCache::new(RecordCache::slack_for(options.cache_bytes))?,
            index: SegmentIndex::new()?,
            imaged: HashSet::new(),
            relinked: HashMap::new(),
            next_production: 1,
            disk_records: 0,
            tracker: InsertTracker::new(options.bins, options.epoch_inserts),
            redoing: false,
            log_buf: Vec::new(),
            held_flush_error: None,
            segment_sizes: [0; 5],
            preread: None,
        }),
        log_bytes: AtomicU64::new(0),
        flush_list_bytes: AtomicUsize::new(0),
        options,
        counters: Counters::default(),
        groups: Groups::default(),
        writes: Default::default(),
        spare_pages: Default::default(),
        locks: Default::default(),
        building: Default::default(),
    };
    match state {
        None => create(&store)?,
        Some(s) => recover(&store, s, checkpoint_lsn)?,
    }
    Ok(store)
}

/// A new store: one empty single-page segment covering every key.
fn create(store: &Store) -> Result<()> {
    let mut inner = store.inner.write();
    let file = &store.file;
    let id = file.allocate();
    let mut buf = file.buffer(1);
    let header = Header {
        production: 1,
        offset: 0,
        pages: 1,
        link: 0,
        model: Model::single(),
    };
    page::build(&mut buf, id, &header, b"", None, std::iter::empty())?;
    file.write_frame(id, &mut buf[..file.page_size()], PageKind::SegmentPage, 0)?;
    inner.index.insert(&Segment {
        lower: Vec::new(),
        first: id,
        pages: 1,
        overflows: 0,
        model: Model::single(),
        production: 1,
    })?;
    inner.next_production = 2;
    inner.segment_sizes[0] = 1;
    Ok(())
}

/// Whether `e` is what reading a torn or never-written page gives.
fn unreadable(e: &Error) -> bool {
    matches!(e, Error::ChecksumMismatch { .. } | Error::Corruption { .. })
}

/// Reads page `id` (growing the file's page count to it first if needed); `None` if it does
/// not verify.
fn read_any(file: &PageFile, id: u64, buf: &mut AlignedBuf) -> Result<Option<PageKind>> {
    let ps = file.page_size();
    if id >= file.page_count() {
        return Ok(None);
    }
    match file.read_frame(id, &mut buf[..ps]) {
        Ok(h) => Ok(Some(h.kind)),
        Err(e) if unreadable(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

fn recover(store: &Store, state: State, checkpoint_lsn: u64) -> Result<()> {
    let file = &store.file;
    let ps = file.page_size();
    let mut inner = store.inner.write();
    let mut buf = file.buffer(1);
    // 1. The log.
    let mut starts: Vec<ReorgStart> = Vec::new();
    let mut ended: HashSet<u64> = HashSet::new();
    let mut installed: HashSet<u64> = HashSet::new();
    store.wal.replay(|lsn, payload| {
        if lsn < checkpoint_lsn {
            return Ok(());
        }
        match log::decode(lsn, payload)? {
            log::Record::PageImage { page, kind, bytes } => {
                if bytes.len() != ps - PAGE_HEADER_LEN || page < FIRST_DATA_PAGE {
                    return Err(Error::LogCorruption {
                        path: None,
                        detail: format!(
                            "record {lsn}: a page image of page {page} of {} bytes",
                            bytes.len()
                        ),
                    });
                }
                let torn = installed.contains(&page) || read_any(file, page, &mut buf)?.is_none();
                if torn {
                    if page >= file.page_count() {
                        file.ensure_allocated(page)?;
                    }
                    buf[PAGE_HEADER_LEN..ps].copy_from_slice(bytes);
                    file.write_frame(page, &mut buf[..ps], kind, lsn)?;
                    installed.insert(page);
                }
            }
            log::Record::ReorgStart(s) => starts.push(s),
            log::Record::ReorgEnd { production } => {
                ended.insert(production);
            }
            log::Record::Put { .. } | log::Record::Delete { .. } | log::Record::Batch(_) => {}
        }
        Ok(())
    })?;
    // 2. Check II.
    let mut void: HashSet<u64> = HashSet::new();
    // Pages recovery took past the checkpoint's end of file that may never have been written.
    let mut grown: HashSet<u64> = HashSet::new();
    let mut pre_firsts: HashSet<u64> = HashSet::new();
    let mut max_production = state.next_production.saturating_sub(1);
    // A pre segment that a later reorganization starts from again was live then: the earlier
    // one did not reach Phase IV (a crash, then recovery voided it and it was tried again).
    let mut last_start: HashMap<(u64, u64), usize> = HashMap::new();
    for (i, s) in starts.iter().enumerate() {
        for p in &s.pre {
            last_start.insert(*p, i);
        }
    }
    for (i, s) in starts.iter().enumerate() {
        max_production = max_production.max(s.production);
        pre_firsts.extend(s.pre.iter().map(|p| p.0));
        let retried = s
            .pre
            .iter()
            .any(|p| last_start.get(p).is_some_and(|&j| j > i));
        let mut changed = false;
        for &(first, production) in &s.pre {
            changed |= match read_any(file, first, &mut buf)? {
                Some(PageKind::SegmentPage) => {
                    Header::decode(first, &buf)?.production != production
                }
                _ => true,
            };
        }
        let done = ended.contains(&s.production) || (changed && !retried);
        if done {
            let c = if ended.contains(&s.production) {
                &store.counters.check2_reinvalidated
            } else {
                &store.counters.check2_done
            };
            Counters::add(c, 1);
            for &(first, production) in &s.pre {
                invalidate(file, first, Some(production), &mut buf)?;
            }
            for &(first, pages) in &s.post {
                let last = first + u64::from(pages) - 1;
                if last >= file.page_count() {
                    file.ensure_allocated(last)?;
                }
            }
        } else {
            Counters::add(&store.counters.check2_voided, 1);
            void.insert(s.production);
            for &(first, _) in &s.post {
                // A void segment's first page past the checkpoint's end of file is invalidated
                // too: the file may grow over it later, and it must never read as live.
                if first >= file.page_count() {
                    file.ensure_allocated(first)?;
                    grown.insert(first);
                }
                invalidate(file, first, Some(s.production), &mut buf)?;
            }
        }
    }
    // 3. The scan.
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut orphans: Vec<(u64, Header)> = Vec::new();
    let count = file.page_count();
    for id in FIRST_DATA_PAGE..count {
        let kind = match file.read_frame(id, &mut buf[..ps]) {
            Ok(h) => h.kind,
            Err(e)
                if unreadable(&e)
                    && (file.is_free(id) || pre_firsts.contains(&id) || grown.contains(&id)) =>
            {
                continue
            }
            Err(e) => {
                return Err(e);
            }
        };
        match kind {
            PageKind::SegmentPage | PageKind::SegmentOverflow => {}
            _ if file.is_free(id) => continue,
            k => {
                return Err(Error::Corruption {
                    page: id,
                    detail: format!("a {k:?} page in a TreeLine store"),
                })
            }
        }
        let p = match SegmentPage::new(id, &buf[..ps]) {
            Ok(p) => p,
            Err(_) if file.is_free(id) => continue,
            Err(e) => return Err(e),
        };
        max_production = max_production.max(p.header.production);
        if kind == PageKind::SegmentOverflow {
            orphans.push((id, p.header));
        } else if p.header.offset == 0
            && p.header.production != 0
            && !void.contains(&p.header.production)
        {
            let (lower, upper) = p.range()?;
            candidates.push((id, p.header, lower.to_vec(), upper.map(<[u8]>::to_vec)));
        }
    }
    inner.next_production = (max_production + 1).max(state.next_production);
    // The segments: every page there, ranges without gaps or overlaps.
    candidates.sort_by(|a, b| a.2.cmp(&b.2));
    let mut used: HashSet<u64> = HashSet::new();
    let mut links: Vec<(u64, u64, u64)> = Vec::new(); // (base, link, production)
    let mut segments = Vec::with_capacity(candidates.len());
    for (j, (first, h, lower, upper)) in candidates.iter().enumerate() {
        let next_lower = candidates.get(j + 1).map(|c| &c.2);
        let gap = (j == 0 && !lower.is_empty()) || upper.as_ref() != next_lower;
        if gap {
            return Err(Error::Corruption {
                page: *first,
                detail: "the segments found do not cover the key space without gaps or overlaps"
                    .into(),
            });
        }
        for k in 0..u64::from(h.pages) {
            let id = first + k;
            if k > 0 {
                let kind = read_any(file, id, &mut buf)?;
                let hk = match kind {
                    Some(PageKind::SegmentPage) => Some(Header::decode(id, &buf)?),
                    _ => None,
                };
                if !hk.is_some_and(|hk| hk.production == h.production && u64::from(hk.offset) == k)
                {
                    return Err(Error::Corruption {
                        page: id,
                        detail: format!("page {k} of the segment at page {first} is missing"),
                    });
                }
                links.push((id, hk.map_or(0, |hk| hk.link), h.production));
            } else {
                links.push((id, h.link, h.production));
            }
            used.insert(id);
        }
        segments.push(Segment {
            lower: lower.clone(),
            first: *first,
            pages: h.pages,
            overflows: 0,
            model: h.model,
            production: h.production,
        });
    }
    if segments.is_empty() {
        return Err(Error::Corruption {
            page: 0,
            detail: "no segment found in the TreeLine store".into(),
        });
    }
    // 4. Overflow pages (Check I).
    let base_of: HashMap<u64, usize> = segments
        .iter()
        .enumerate()
        .flat_map(|(j, s)| (s.first..s.first + u64::from(s.pages)).map(move |id| (id, j)))
        .collect();
    let mut linked: HashMap<u64, u64> = HashMap::new();
    for &(base, link, production) in &links {
        if link == 0 {
            continue;
        }
        if link >= file.page_count() {
            // Allocated after the checkpoint: taken back if it holds the overflow page, else
            // freed again below.
            file.ensure_allocated(link)?;
        }
        let ok = match read_any(file, link, &mut buf)? {
            Some(PageKind::SegmentOverflow) => {
                let h = Header::decode(link, &buf)?;
                h.link == base && h.production == production
            }
            _ => false,
        };
        if ok {
            linked.insert(base, link);
        } else {
            inner.relinked.insert(base, 0);
        }
    }
    for (id, h) in orphans {
        let Some(&j) = base_of.get(&h.link) else {
            continue;
        };
        if segments[j].production != h.production || linked.contains_key(&h.link) {
            continue;
        }
        linked.insert(h.link, id);
        inner.relinked.insert(h.link, id);
        Counters::add(&store.counters.check1_relinked, 1);
    }
    for (base, link) in &linked {
        used.insert(*link);
        if let Some(&j) = base_of.get(base) {
            segments[j].overflows += 1;
        }
    }
    for s in &segments {
        inner.index.insert(s)?;
        inner.segment_sizes[size_class(s.pages)] += 1;
    }
    Counters::add(&store.counters.overflow_pages, linked.len() as u64);
    // 5. Space and the record count.
    for id in FIRST_DATA_PAGE..file.page_count() {
        match (used.contains(&id), file.is_free(id)) {
            (true, true) => file.ensure_allocated(id)?,
            (false, false) => file.free_deferred(id)?,
            _ => {}
        }
    }
    let mut records = 0;
    for s in &segments {
        for k in 0..s.pages as usize {
            let pair = store.read_pair(&inner, s, k)?;
            records += store.pair_distinct(&pair)?;
        }
    }
    inner.disk_records = records;
    Ok(())
}

/// Writes production ID 0 into page `first` if it is a segment's first page with `production`.
fn invalidate(
    file: &PageFile,
    first: u64,
    production: Option<u64>,
    buf: &mut AlignedBuf,
) -> Result<()> {
    let ps = file.page_size();
    if first >= file.page_count() {
        return Ok(());
    }
    let h = match file.read_frame(first, &mut buf[..ps]) {
        Ok(h) => h,
        Err(e) if unreadable(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    if h.kind != PageKind::SegmentPage {
        return Ok(());
    }
    let t = Header::decode(first, buf)?;
    if t.offset != 0 || production.is_some_and(|p| p != t.production) || t.production == 0 {
        return Ok(());
    }
    page::set_production(&mut buf[..ps], 0);
    file.write_frame(first, &mut buf[..ps], PageKind::SegmentPage, h.lsn)
}
