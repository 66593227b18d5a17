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
//!   under the store's lock, the index swaps the entries, the pre segments' first pages get
//!   production ID 0, their pages are freed deferred (not reused before the next checkpoint is
//!   durable), and REORG_END is logged.

use super::cache::Dirty;
use super::index::Segment;
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
pub fn plan(records: &[Record], lower: &[u8], upper: Option<&[u8]>, o: PlanOptions) -> Vec<Planned> {
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

/// Reorganizes `full` and its neighbours with reorganization potential (module docs).
pub(crate) fn reorganize(store: &Store, inner: &mut Inner, full: &Segment) -> Result<()> {
    let o = &store.options;
    // Pages waiting in the group are newer than the file's (`super::group`): out first; and
    // Phase IV rewrites pages a checkpoint's pre-read may hold.
    store.write_group()?;
    inner.preread = None;
    // Phase I: range detection.
    let mut pre = vec![full.clone()];
    for _ in 0..o.radius {
        match inner.index.before(&pre[0].lower)? {
            Some(s) if s.overflows > 0 => pre.insert(0, s),
            _ => break,
        }
    }
    for _ in 0..o.radius {
        let last = &pre[pre.len() - 1].lower;
        match inner.index.after(last)? {
            Some(s) if s.overflows > 0 => pre.push(s),
            _ => break,
        }
    }
    let lower = pre[0].lower.clone();
    let upper = inner.index.after(&pre[pre.len() - 1].lower)?.map(|s| s.lower);
    let mut records = Vec::new();
    let mut overflows = Vec::new();
    for s in &pre {
        let r = store.read_segment(inner, s)?;
        records.extend(r.records);
        overflows.extend(r.overflows);
    }
    let on_pages = records.len() as u64;
    let (records, taken) = take_dirty(inner, records, &lower, upper.as_deref())?;
    // Forecast: the goal that leaves room for the inserts expected in the range.
    let mut goal = o.goal;
    if o.forecast && !records.is_empty() {
        let lo = input(&lower, 0);
        let hi = upper.as_deref().map(|u| input(u, 0));
        let f = inner.tracker.forecast(lo, hi, o.forecast_epochs);
        let n = records.len() as f64;
        let pages = ((n + f) / o.goal as f64).ceil().max(1.0);
        let floor = (o.goal * usize::from(o.fill_floor)).div_ceil(100).max(1);
        goal = ((n / pages).ceil() as usize).clamp(floor, o.goal);
    }
    // Phase II.
    let planned = plan(
        &records,
        &lower,
        upper.as_deref(),
        PlanOptions {
            goal,
            epsilon: o.epsilon,
            grouping: o.grouping,
            page_size: store.page_size(),
        },
    );
    let production = inner.next_production;
    inner.next_production += 1;
    let firsts: Vec<u64> = planned
        .iter()
        .map(|p| store.file.allocate_run(p.pages as usize))
        .collect();
    for (p, first) in planned.iter().zip(&firsts) {
        for id in *first..*first + u64::from(p.pages) {
            inner.imaged.remove(&id);
        }
    }
    let start = ReorgStart {
        production,
        pre: pre.iter().map(|s| (s.first, s.production)).collect(),
        post: planned.iter().zip(&firsts).map(|(p, f)| (*f, p.pages)).collect(),
    };
    log::reorg_start(&mut inner.log_buf, &start);
    let start_lsn = store.wal.append(&inner.log_buf)?;
    store.add_log_bytes(inner.log_buf.len());
    store.wal.sync_to(start_lsn)?;
    // Phase III: write-out.
    let ps = store.page_size();
    let mut post = Vec::with_capacity(planned.len());
    for (j, (p, first)) in planned.iter().zip(&firsts).enumerate() {
        let seg_upper: Option<&[u8]> = match planned.get(j + 1) {
            Some(next) => Some(&next.lower),
            None => upper.as_deref(),
        };
        let n = p.pages as usize;
        let mut by_page: Vec<Vec<(&[u8], &[u8])>> = vec![Vec::new(); n];
        for r in &records[p.start..p.end] {
            by_page[p.model.page_of(&r.0, n)].push((&r.0[..], &r.1[..]));
        }
        let mut buf = store.file.buffer(n);
        for (k, recs) in by_page.into_iter().enumerate() {
            let header = Header {
                production,
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
        store
            .file
            .write_run(*first, &mut buf, &vec![(PageKind::SegmentPage, start_lsn); n])?;
        Counters::add(&store.counters.page_writes, n as u64);
        post.push(Segment {
            lower: p.lower.clone(),
            first: *first,
            pages: p.pages,
            overflows: 0,
            model: p.model,
            production,
        });
    }
    store.file.sync()?;
    // Phase IV: the index, the pre segments invalidated and freed, REORG_END.
    for s in &pre {
        inner.index.remove(&s.lower)?;
        inner.segment_sizes[size_class(s.pages)] -= 1;
    }
    for s in &post {
        inner.index.insert(s)?;
        inner.segment_sizes[size_class(s.pages)] += 1;
    }
    let mut buf = store.file.buffer(1);
    for s in &pre {
        store.file.read_page(s.first, &mut buf, PageKind::SegmentPage)?;
        page::set_production(&mut buf[..ps], 0);
        store
            .file
            .write_frame(s.first, &mut buf[..ps], PageKind::SegmentPage, start_lsn)?;
        Counters::add(&store.counters.page_writes, 1);
        store.file.free_run_deferred(s.first, s.pages as usize)?;
        for id in s.first..s.first + u64::from(s.pages) {
            inner.relinked.remove(&id);
        }
    }
    for id in overflows {
        store.file.free_deferred(id)?;
    }
    log::reorg_end(&mut inner.log_buf, production);
    store.wal.append(&inner.log_buf)?;
    store.add_log_bytes(inner.log_buf.len());
    Counters::add(&store.counters.reorganizations, 1);
    // The entries taken along are on the new pages.
    inner.disk_records = inner.disk_records + records.len() as u64 - on_pages;
    for (slot, inserted) in taken {
        let Some(e) = inner.cache.entry(slot) else {
            continue;
        };
        if e.value.is_some() {
            if inserted && o.forecast {
                let x = input(e.key, 0);
                inner.tracker.record(x);
            }
            inner.cache.set_clean(slot)?;
        } else {
            inner.cache.remove(slot)?;
        }
    }
    Ok(())
}

/// A cache entry a reorganization took along: its slot, and whether it is a put of a key that
/// was not on the pages (an insert, for the forecast).
type Taken = (u32, bool);

/// Applies the dirty entries of `[lower, upper)`, up to [`DIRTY_BYTES`] of them in key order,
/// over `records` (the pre segments', sorted and distinct): the records to plan, and the
/// entries taken with whether each was a put of a key not on the pages (an insert, for the
/// forecast).
fn take_dirty(
    inner: &Inner,
    records: Vec<Record>,
    lower: &[u8],
    upper: Option<&[u8]>,
) -> Result<(Vec<Record>, Vec<Taken>)> {
    let mut budget = DIRTY_BYTES;
    let mut taken = Vec::new();
    let mut puts: Vec<Record> = Vec::new();
    let mut deletes: Vec<Vec<u8>> = Vec::new();
    for Dirty { slot, .. } in inner.cache.dirty_where(lower, upper, |_| true)? {
        let Some(e) = inner.cache.entry(slot) else {
            continue;
        };
        let bytes = e.key.len() + e.value.map_or(0, <[u8]>::len) + RECORD_OVERHEAD;
        if bytes > budget {
            break;
        }
        budget -= bytes;
        let on_pages = records.binary_search_by(|r| r.0.as_slice().cmp(e.key)).is_ok();
        match e.value {
            Some(v) => puts.push((e.key.to_vec(), v.to_vec())),
            None => deletes.push(e.key.to_vec()),
        }
        taken.push((slot, e.value.is_some() && !on_pages));
    }
    if taken.is_empty() {
        return Ok((records, taken));
    }
    let mut merged = super::store::merge_records(puts, records);
    if !deletes.is_empty() {
        let mut d = deletes.iter().peekable();
        merged.retain(|(k, _)| {
            while d.next_if(|x| x.as_slice() < k.as_slice()).is_some() {}
            d.peek().is_none_or(|x| x.as_slice() != k.as_slice())
        });
    }
    Ok((merged, taken))
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
                assert!(page::fits(o.page_size, &p.lower, upper, recs.iter().copied()));
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
        let planned = check_plan(&recs, PlanOptions { grouping: false, ..O });
        assert!(planned.iter().all(|p| p.pages == 1 && p.end - p.start <= 45));
        assert_eq!(planned.len(), 1000_usize.div_ceil(45));
    }

    #[test]
    fn an_empty_range_is_one_empty_page() {
        let planned = plan(&[], b"k", None, O);
        assert_eq!(planned, vec![Planned { start: 0, end: 0, pages: 1, lower: b"k".to_vec(), model: Model::single() }]);
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
