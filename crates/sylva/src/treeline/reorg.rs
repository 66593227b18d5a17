//! Reorganization (§4.5.3) with insert forecasting (§4.6.1): range detection, model building
//! with GreedyPLR, segment write-out, index update, logged for recovery's Check II (§4.7).
//!
//! - **I. Range detection.** The full segment and its neighbours with reorganization potential
//!   (a base page with an overflow page), contiguous, up to `radius` on each side: the *pre*
//!   segments.
//! - **II. Model building** ([`plan`]). Over the pre segments' records in key order, from the
//!   first not yet placed: GreedyPLR over (model input, position) until a point breaks the
//!   error bound `epsilon`, or 16 pages' worth (`16 · goal`) fit; the largest of 1/2/4/8/16
//!   pages that the records processed fill at `goal` a page becomes a *post* segment, with the
//!   records the model puts on its pages (a prefix of those processed). When the rest fits a
//!   page (`goal` records), or grouping is off, or no model places the records within each
//!   page's room, a single page of up to `goal` records. Repeat. The thesis's fourth stop, a
//!   memory budget for the pages held, is not needed here: the pre segments' pages (at most
//!   2r + 1 segments of 32 pages) are read whole up front.
//! - **The range's dirty entries come along** (not in the thesis): the records planned are the
//!   pre segments' with the cache's dirty entries of the range applied over them (puts win,
//!   delete markers remove), up to [`DIRTY_BYTES`] of them in key order, and those entries are
//!   clean once the reorganization is done. A reorganization is what a flush does when its
//!   page cannot take the page's dirty entries; without this, the first flush of a load (all
//!   of the cache's entries dirty, in the one segment there is) placed two pages' worth a
//!   round and reorganized again, hundreds of times, two fsyncs each, within one writer's
//!   eviction (measured: `docs/results/treeline.md`, session 20). Their log records
//!   precede REORG_START, whose sync makes them durable before any post page is written (the
//!   WAL rule); if the reorganization is voided by a crash, they stay in the log.
//! - **Forecast.** The goal a reorganization builds with: with `n` records in the range and
//!   `f` forecast inserts (the frozen histogram over the range × `forecast_epochs`), the pages
//!   needed are `⌈(n + f) / goal⌉` and the goal `⌈n / pages⌉` spreads the records over them,
//!   but never below `fill_floor` percent of `goal` (default half): the thesis leaves room in
//!   proportion to the inserts forecast, and a forecast over 100 epochs of 100,000 inserts
//!   (its defaults) during a load forecasts the load's own size into every range, which
//!   without a floor built pages of one or two records and a file 13 times its data.
//!   (The thesis estimates `n` assuming full pages because it decides before reading them;
//!   this reads the records first and uses their count.)
//! - **Logging.** REORG_START (the new production ID, the pre segments' first pages and
//!   production IDs, the post segments' runs) is logged and made durable before any post page
//!   is written; the post segments are written (`write_run`, one I/O each) and synced; then,
//!   under the store's state lock, the index swaps the entries, the pre segments' first pages
//!   get production ID 0, their pages are freed deferred (not reused before the next
//!   checkpoint is durable), and REORG_END is logged.
//! - **Locks** (§4.8.4, [`super::locks`]). Phase I runs under the state lock and takes O on
//!   each pre segment: the full one waiting (the state lock let go) while a flush is in it, a
//!   neighbour only if none is (the first that is ends the range on its side). Phases II and
//!   III run with the state lock let go (but for a checkpoint's: [`super::checkpoint`]):
//!   readers go on reading the pre segments, writers go on writing to the cache (entries of
//!   the range written meanwhile stay dirty, for the post segments), and no flush writes a
//!   pre page. One reorganization builds at a time (the memory allowed is one's). Phase IV
//!   upgrades each O to OX, in key order, once the pre segments' readers have left, and
//!   installs under the state lock. The upgrades are tried under the state lock first; only
//!   if a reader is inside are the rest waited for with it let go (a scan holds IR until it
//!   merges under the state lock). The entries taken along are clean afterwards only if
//!   their LSN is the one taken.

use std::collections::HashMap;

use parking_lot::RwLockWriteGuard;

use super::cache::Dirty;
use super::flush::InnerGuard;
use super::index::Segment;
use super::locks::{SegMode, SegmentLock};
use super::log::{self, ReorgStart};
use super::model::{input, Model};
use super::page::{self, Header, Record};
use super::store::{size_class, Counters, Inner, Store};
use crate::error::Result;
use crate::io::page_header::PageKind;
use crate::page::common_prefix;
use crate::util::plr::GreedyPlr;

/// Largest segment, in pages.
pub const MAX_PAGES: usize = 16;

/// The most bytes of dirty cached records a reorganization takes along, counting each as its
/// key, its value and [`RECORD_OVERHEAD`] (module docs; within the store's fixed allowance,
/// `store::FIXED_BYTES`, which `tests/treeline_memory.rs` holds it to).
pub const DIRTY_BYTES: usize = 256 << 10;

/// What a record held as two vectors costs beyond its bytes (their headers and the
/// allocator's rounding), for [`DIRTY_BYTES`].
const RECORD_OVERHEAD: usize = 64;

/// A post segment planned by Phase II: `records[start..end]`, from `lower`, on `pages` pages
/// placed by `model`.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// First record.
    pub start: usize,
    /// One past the last record.
    pub end: usize,
    /// Pages (1, 2, 4, 8 or 16).
    pub pages: u16,
    /// Lower bound.
    pub lower: Vec<u8>,
    /// Model (single-page segments: [`Model::single`]).
    pub model: Model,
}

/// What Phase II works with.
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// Records a page is built with.
    pub goal: usize,
    /// The models' error bound.
    pub epsilon: usize,
    /// Multi-page segments, or single pages only.
    pub grouping: bool,
    /// Page size.
    pub page_size: usize,
}

/// Phase II (module docs) over `records` (sorted, distinct) in the range `[lower, upper)`.
pub fn plan(
    records: &[Record],
    lower: &[u8],
    upper: Option<&[u8]>,
    o: PlanOptions,
) -> Vec<Planned> {
    let n = records.len();
    let goal = o.goal.max(1);
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        if i >= n {
            if out.is_empty() {
                out.push(Planned {
                    start: 0,
                    end: 0,
                    pages: 1,
                    lower: lower.to_vec(),
                    model: Model::single(),
                });
            }
            return out;
        }
        let seg_lower: &[u8] = if i == 0 { lower } else { &records[i].0 };
        let upper_at = |end: usize| -> Option<&[u8]> {
            if end < n {
                Some(&records[end].0)
            } else {
                upper
            }
        };
        let grouped = if o.grouping && n - i > goal {
            plan_grouped(records, i, seg_lower, &upper_at, goal, o)
        } else {
            None
        };
        let p = grouped.unwrap_or_else(|| {
            // A single page: up to `goal` records that fit (at least one: a record is at most
            // a quarter page).
            let mut end = i + 1;
            while end < n && end - i < goal {
                let next = end + 1;
                let recs = records[i..next].iter().map(|(k, v)| (&k[..], &v[..]));
                if !page::fits(o.page_size, seg_lower, upper_at(next), recs) {
                    break;
                }
                end = next;
            }
            Planned {
                start: i,
                end,
                pages: 1,
                lower: seg_lower.to_vec(),
                model: Model::single(),
            }
        });
        i = p.end;
        out.push(p);
    }
}

/// A grouped segment from record `i`, if a model of at least two pages places records there.
fn plan_grouped<'r>(
    records: &'r [Record],
    i: usize,
    seg_lower: &[u8],
    upper_at: &dyn Fn(usize) -> Option<&'r [u8]>,
    goal: usize,
    o: PlanOptions,
) -> Option<Planned> {
    let n = records.len();
    let prefix = common_prefix(&records[i].0, &records[n - 1].0).min(u16::MAX as usize);
    let x0 = input(&records[i].0, prefix);
    // A little under epsilon: the bound is strict, and the model's rounding differs from the
    // fit's in the last bits.
    let delta = (o.epsilon as f64 - 1e-3).max(0.5);
    let mut plr = GreedyPlr::new(delta);
    let mut m = 0;
    while i + m < n && m < MAX_PAGES * goal {
        let x = input(&records[i + m].0, prefix);
        if !plr.push((x - x0) as f64, m as f64) {
            break;
        }
        m += 1;
    }
    let line = plr.line()?;
    if !(line.slope.is_finite() && line.intercept.is_finite()) || line.slope < 0.0 {
        return None;
    }
    let model = Model {
        prefix_len: prefix as u16,
        x0,
        slope: line.slope / goal as f64,
        intercept: line.intercept / goal as f64,
    };
    let mut pages = (m / goal).min(MAX_PAGES);
    pages = if pages == 0 { 0 } else { 1 << pages.ilog2() };
    while pages >= 2 {
        // The records the model puts on the segment's pages: a prefix of those processed (the
        // model rises with the key).
        let end = i + records[i..i + m]
            .iter()
            .take_while(|r| model.value(input(&r.0, prefix)) < pages as f64)
            .count();
        if end > i {
            let upper = upper_at(end);
            let mut by_page = vec![Vec::new(); pages];
            for r in &records[i..end] {
                by_page[model.page_of(&r.0, pages)].push((&r.0[..], &r.1[..]));
            }
            if by_page
                .iter()
                .all(|p| page::fits(o.page_size, seg_lower, upper, p.iter().copied()))
            {
                return Some(Planned {
                    start: i,
                    end,
                    pages: pages as u16,
                    lower: seg_lower.to_vec(),
                    model,
                });
            }
        }
        pages /= 2;
    }
    None
}

/// A cache entry a reorganization took along (module docs), copied with its slot and LSN.
struct Taken {
    slot: u32,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    lsn: u64,
}

/// What Phase I found, for Phases II and III.
struct PreRange {
    pre: Vec<Segment>,
    lower: Vec<u8>,
    upper: Option<Vec<u8>>,
    /// The pre segments' overflow links as recovery corrected them.
    relinked: HashMap<u64, u64>,
    taken: Vec<Taken>,
    /// Inserts forecast over the range (`None`: forecasting is off).
    forecast: Option<f64>,
    production: u64,
}

/// What Phases II and III built.
struct Built {
    post: Vec<Segment>,
    overflows: Vec<u64>,
    /// Records on the pre segments' pages and on the post segments'.
    on_pages: u64,
    records: u64,
    start_lsn: u64,
    /// For each entry taken: whether it is a put of a key not on the pages (an insert).
    inserted: Vec<bool>,
}

/// Reorganizes `full` and its neighbours with reorganization potential (module docs), with
/// the locks of §4.8.4: O on the pre segments from Phase I, the state lock let go while Phases
/// II and III read, plan and write (with `unlock_io`; a checkpoint's keep it), then OX for
/// Phase IV. Nothing is done if another thread replaced `full` first.
pub(crate) fn reorganize(
    store: &Store,
    guard: &mut InnerGuard<'_>,
    full: &Segment,
    unlock_io: bool,
) -> Result<()> {
    // O on the segment, waiting (the state lock let go) while a flush writes in it.
    let (full, full_lock) = loop {
        let seg = guard.index.segment_of(&full.lower)?;
        if (seg.first, seg.production) != (full.first, full.production) {
            return Ok(());
        }
        if let Some(l) = store.locks.try_segment(seg.first, SegMode::O) {
            break (seg, l);
        }
        RwLockWriteGuard::unlocked(guard, || drop(store.locks.segment(seg.first, SegMode::O)));
    };
    let (range, mut held) = detect(store, guard, full, full_lock)?;
    let built = if unlock_io {
        RwLockWriteGuard::unlocked(guard, || {
            let _one_at_a_time = store.building.lock();
            build(store, &range)
        })
    } else {
        // Safe under the state lock: a build holding `building` never waits for it.
        let _one_at_a_time = store.building.lock();
        build(store, &range)
    }?;
    // Phase IV: OX, once the readers of the pre segments have left (in key order): at once,
    // under the state lock, while none reads; else with it let go from the first read on.
    let mut at = 0;
    while at < held.len() && held[at].try_upgrade() {
        at += 1;
    }
    if at < held.len() {
        RwLockWriteGuard::unlocked(guard, || {
            held[at..].iter_mut().for_each(SegmentLock::upgrade)
        });
    }
    install(store, guard, range, built)?;
    drop(held);
    Ok(())
}

/// Phase I, under the state lock: the pre segments (each neighbour locked O if no flush is in
/// it; the first that is ends the range on its side), their dirty entries copied.
fn detect<'s>(
    store: &'s Store,
    inner: &mut Inner,
    full: Segment,
    full_lock: SegmentLock<'s>,
) -> Result<(PreRange, Vec<SegmentLock<'s>>)> {
    let o = &store.options;
    // Pages waiting in the group are newer than the file's (`super::group`): out first; and
    // Phase IV rewrites pages a checkpoint's pre-read may hold.
    store.write_group()?;
    inner.preread = None;
    let mut pre = vec![full];
    let mut held = vec![full_lock];
    for _ in 0..o.radius {
        let Some(s) = inner
            .index
            .before(&pre[0].lower)?
            .filter(|s| s.overflows > 0)
        else {
            break;
        };
        let Some(l) = store.locks.try_segment(s.first, SegMode::O) else {
            break;
        };
        pre.insert(0, s);
        held.insert(0, l);
    }
    for _ in 0..o.radius {
        let last = &pre[pre.len() - 1].lower;
        let Some(s) = inner.index.after(last)?.filter(|s| s.overflows > 0) else {
            break;
        };
        let Some(l) = store.locks.try_segment(s.first, SegMode::O) else {
            break;
        };
        pre.push(s);
        held.push(l);
    }
    let lower = pre[0].lower.clone();
    let upper = inner
        .index
        .after(&pre[pre.len() - 1].lower)?
        .map(|s| s.lower);
    let mut relinked = HashMap::new();
    for s in &pre {
        for id in s.first..s.first + u64::from(s.pages) {
            if let Some(&link) = inner.relinked.get(&id) {
                relinked.insert(id, link);
            }
        }
    }
    let taken = take_dirty(inner, &lower, upper.as_deref())?;
    let forecast = (o.forecast).then(|| {
        let hi = upper.as_deref().map(|u| input(u, 0));
        inner
            .tracker
            .forecast(input(&lower, 0), hi, o.forecast_epochs)
    });
    let production = inner.next_production;
    inner.next_production += 1;
    let range = PreRange {
        pre,
        lower,
        upper,
        relinked,
        taken,
        forecast,
        production,
    };
    Ok((range, held))
}

/// Phases II and III, with no state lock (the O locks keep the pre segments as they are): the
/// records read and merged with the entries taken, planned, logged and written, synced.
fn build(store: &Store, r: &PreRange) -> Result<Built> {
    let o = &store.options;
    let mut records = Vec::new();
    let mut overflows = Vec::new();
    for s in &r.pre {
        let read = store.read_pages(&r.relinked, s, 0..s.pages as usize)?;
        records.extend(read.records);
        overflows.extend(read.overflows);
    }
    let on_pages = records.len() as u64;
    let (records, inserted) = apply_taken(records, &r.taken);
    // Forecast: the goal that leaves room for the inserts expected in the range.
    let mut goal = o.goal;
    if let (Some(f), false) = (r.forecast, records.is_empty()) {
        let n = records.len() as f64;
        let pages = ((n + f) / o.goal as f64).ceil().max(1.0);
        let floor = (o.goal * usize::from(o.fill_floor)).div_ceil(100).max(1);
        goal = ((n / pages).ceil() as usize).clamp(floor, o.goal);
    }
    // Phase II.
    let (lower, upper) = (&r.lower, r.upper.as_deref());
    let planned = plan(
        &records,
        lower,
        upper,
        PlanOptions {
            goal,
            epsilon: o.epsilon,
            grouping: o.grouping,
            page_size: store.page_size(),
        },
    );
    let firsts: Vec<u64> = planned
        .iter()
        .map(|p| store.file.allocate_run(p.pages as usize))
        .collect();
    let start = ReorgStart {
        production: r.production,
        pre: r.pre.iter().map(|s| (s.first, s.production)).collect(),
        post: planned
            .iter()
            .zip(&firsts)
            .map(|(p, f)| (*f, p.pages))
            .collect(),
    };
    let mut log_buf = Vec::new();
    log::reorg_start(&mut log_buf, &start);
    let start_lsn = store.wal.append(&log_buf)?;
    store.add_log_bytes(log_buf.len());
    store.wal.sync_to(start_lsn)?;
    // Phase III: write-out.
    let ps = store.page_size();
    let mut post = Vec::with_capacity(planned.len());
    for (j, (p, first)) in planned.iter().zip(&firsts).enumerate() {
        let seg_upper: Option<&[u8]> = match planned.get(j + 1) {
            Some(next) => Some(&next.lower),
            None => upper,
        };
        let n = p.pages as usize;
        let mut by_page: Vec<Vec<(&[u8], &[u8])>> = vec![Vec::new(); n];
        for rec in &records[p.start..p.end] {
            by_page[p.model.page_of(&rec.0, n)].push((&rec.0[..], &rec.1[..]));
        }
        let mut buf = store.file.buffer(n);
        for (k, recs) in by_page.into_iter().enumerate() {
            let header = Header {
                production: r.production,
                offset: k as u16,
                pages: p.pages,
                link: 0,
                model: p.model,
            };
            page::build(
                &mut buf[k * ps..(k + 1) * ps],
                first + k as u64,
                &header,
                &p.lower,
                seg_upper,
                recs,
            )?;
        }
        store.file.write_run(
            *first,
            &mut buf,
            &vec![(PageKind::SegmentPage, start_lsn); n],
        )?;
        Counters::add(&store.counters.page_writes, n as u64);
        post.push(Segment {
            lower: p.lower.clone(),
            first: *first,
            pages: p.pages,
            overflows: 0,
            model: p.model,
            production: r.production,
        });
    }
    store.file.sync()?;
    Ok(Built {
        post,
        overflows,
        on_pages,
        records: records.len() as u64,
        start_lsn,
        inserted,
    })
}

/// Phase IV, under the state lock and OX: the index swaps the entries, the pre segments are
/// invalidated and freed, REORG_END is logged, and the entries taken along are clean unless
/// written again meanwhile (then the pages' presence of their key is noted).
fn install(store: &Store, inner: &mut Inner, r: PreRange, b: Built) -> Result<()> {
    let ps = store.page_size();
    // A checkpoint's flush may have pre-read pre pages while the state lock was let go.
    inner.preread = None;
    for s in &r.pre {
        inner.index.remove(&s.lower)?;
        inner.segment_sizes[size_class(s.pages)] -= 1;
    }
    for s in &b.post {
        inner.index.insert(s)?;
        inner.segment_sizes[size_class(s.pages)] += 1;
        for id in s.first..s.first + u64::from(s.pages) {
            inner.imaged.remove(&id);
        }
    }
    let mut buf = store.file.buffer(1);
    for s in &r.pre {
        store
            .file
            .read_page(s.first, &mut buf, PageKind::SegmentPage)?;
        page::set_production(&mut buf[..ps], 0);
        store
            .file
            .write_frame(s.first, &mut buf[..ps], PageKind::SegmentPage, b.start_lsn)?;
        Counters::add(&store.counters.page_writes, 1);
        store.file.free_run_deferred(s.first, s.pages as usize)?;
        for id in s.first..s.first + u64::from(s.pages) {
            inner.relinked.remove(&id);
        }
    }
    for id in b.overflows {
        store.file.free_deferred(id)?;
    }
    log::reorg_end(&mut inner.log_buf, r.production);
    store.wal.append(&inner.log_buf)?;
    store.add_log_bytes(inner.log_buf.len());
    Counters::add(&store.counters.reorganizations, 1);
    inner.disk_records = inner.disk_records + b.records - b.on_pages;
    for (t, inserted) in r.taken.into_iter().zip(b.inserted) {
        let is_put = t.value.is_some();
        if inserted && store.options.forecast {
            inner.tracker.record(input(&t.key, 0));
        }
        Store::written(inner, t.slot, &t.key, t.lsn, is_put)?;
    }
    Ok(())
}

/// The dirty entries of `[lower, upper)`, up to [`DIRTY_BYTES`] of them in key order, copied.
fn take_dirty(inner: &Inner, lower: &[u8], upper: Option<&[u8]>) -> Result<Vec<Taken>> {
    let mut budget = DIRTY_BYTES;
    let mut taken = Vec::new();
    for Dirty { slot, lsn } in inner.cache.dirty_where(lower, upper, |_| true)? {
        let Some(e) = inner.cache.entry(slot) else {
            continue;
        };
        let bytes = e.key.len() + e.value.map_or(0, <[u8]>::len) + RECORD_OVERHEAD;
        if bytes > budget {
            break;
        }
        budget -= bytes;
        taken.push(Taken {
            slot,
            key: e.key.to_vec(),
            value: e.value.map(<[u8]>::to_vec),
            lsn,
        });
    }
    Ok(taken)
}

/// Applies the entries taken over `records` (the pre segments', sorted and distinct): puts
/// win, delete markers remove. Returns them and, for each entry, whether it is a put of a key
/// not on the pages (an insert, for the forecast).
fn apply_taken(records: Vec<Record>, taken: &[Taken]) -> (Vec<Record>, Vec<bool>) {
    let inserted = taken
        .iter()
        .map(|t| {
            t.value.is_some()
                && records
                    .binary_search_by(|r| r.0.as_slice().cmp(&t.key))
                    .is_err()
        })
        .collect();
    if taken.is_empty() {
        return (records, inserted);
    }
    let mut puts: Vec<Record> = Vec::new();
    let mut deletes: Vec<&[u8]> = Vec::new();
    for t in taken {
        match &t.value {
            Some(v) => puts.push((t.key.clone(), v.clone())),
            None => deletes.push(&t.key),
        }
    }
    let mut merged = super::store::merge_records(puts, records);
    if !deletes.is_empty() {
        let mut d = deletes.iter().peekable();
        merged.retain(|(k, _)| {
            while d.next_if(|x| **x < k.as_slice()).is_some() {}
            d.peek().is_none_or(|x| **x != k.as_slice())
        });
    }
    (merged, inserted)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check_plan(records: &[Record], o: PlanOptions) -> Vec<Planned> {
        let planned = plan(records, b"", None, o);
        // Contiguous, covering, each record on its model's page, within the bound and the room.
        let mut next = 0;
        for (j, p) in planned.iter().enumerate() {
            assert_eq!(p.start, next);
            next = p.end;
            assert!(matches!(p.pages, 1 | 2 | 4 | 8 | 16));
            let upper = planned.get(j + 1).map(|q| &q.lower[..]);
            let n = p.pages as usize;
            let mut per_page = vec![Vec::new(); n];
            for r in &records[p.start..p.end] {
                assert!(r.0 >= p.lower && upper.is_none_or(|u| r.0.as_slice() < u));
                per_page[p.model.page_of(&r.0, n)].push((&r.0[..], &r.1[..]));
            }
            for recs in &per_page {
                if n > 1 {
                    assert!(
                        recs.len() < o.goal + 2 * o.epsilon,
                        "{} records on a page: goal {} epsilon {}",
                        recs.len(),
                        o.goal,
                        o.epsilon
                    );
                } else {
                    assert!(recs.len() <= o.goal.max(1));
                }
                assert!(page::fits(
                    o.page_size,
                    &p.lower,
                    upper,
                    recs.iter().copied()
                ));
            }
        }
        assert_eq!(next, records.len());
        planned
    }

    fn u64_records(keys: impl IntoIterator<Item = u64>) -> Vec<Record> {
        let mut r: Vec<Record> = keys
            .into_iter()
            .map(|k| (k.to_be_bytes().to_vec(), vec![7u8; 56]))
            .collect();
        r.sort();
        r.dedup_by(|b, a| a.0 == b.0);
        r
    }

    const O: PlanOptions = PlanOptions {
        goal: 45,
        epsilon: 5,
        grouping: true,
        page_size: 4096,
    };

    #[test]
    fn dense_keys_make_16_page_segments_at_45_a_page() {
        let recs = u64_records(0..10_000);
        let planned = check_plan(&recs, O);
        let big = planned.iter().filter(|p| p.pages == 16).count();
        assert!(big >= 13, "{} segments of 16 pages: {planned:?}", big);
        assert_eq!(planned[0].end - planned[0].start, 16 * 45);
    }

    #[test]
    fn without_grouping_every_segment_is_one_page_of_goal_records() {
        let recs = u64_records(0..1000);
        let planned = check_plan(
            &recs,
            PlanOptions {
                grouping: false,
                ..O
            },
        );
        assert!(planned
            .iter()
            .all(|p| p.pages == 1 && p.end - p.start <= 45));
        assert_eq!(planned.len(), 1000_usize.div_ceil(45));
    }

    #[test]
    fn an_empty_range_is_one_empty_page() {
        let planned = plan(&[], b"k", None, O);
        assert_eq!(
            planned,
            vec![Planned {
                start: 0,
                end: 0,
                pages: 1,
                lower: b"k".to_vec(),
                model: Model::single()
            }]
        );
    }

    proptest! {
        #[test]
        fn every_record_lands_on_its_models_page_within_the_bound(
            keys in prop::collection::vec(any::<u64>(), 0..3000),
            goal in 1usize..50,
            epsilon in 1usize..6,
        ) {
            check_plan(&u64_records(keys), PlanOptions { goal, epsilon, ..O });
        }

        #[test]
        fn string_and_shared_prefix_keys_are_placed_too(
            keys in prop::collection::vec("[a-c]{0,3}[a-z0-9]{1,20}", 1..1500),
            prefix in "[a-z]{0,12}",
        ) {
            let mut recs: Vec<Record> = keys
                .into_iter()
                .map(|k| (format!("{prefix}{k}").into_bytes(), vec![1u8; 20]))
                .collect();
            recs.sort();
            recs.dedup_by(|b, a| a.0 == b.0);
            check_plan(&recs, PlanOptions { goal: 20, epsilon: 3, ..O });
        }
    }
}
