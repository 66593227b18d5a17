//! The page file's free space (`sylva::io::PageFile`, module docs "Free space"): extents,
//! deferred frees, and checkpoints that write only the regions that changed.
//!
//! - a model test: random allocations (single pages and runs, some crossing regions), frees
//!   (immediate and deferred, single and runs), fuzzy and quiet checkpoints and crashes; no page
//!   is handed out twice, deferred pages are not reused before their checkpoint is durable,
//!   every page is exactly one of meta, free, in use or free-space page, and a reopened file
//!   holds the free space of its last checkpoint;
//! - deferred frees survive a power loss before, and at every point during, the checkpoint
//!   that releases them: the pages the older checkpoint points at keep their contents;
//! - a checkpoint writes the regions that changed, and nothing else but the meta page.

use std::collections::BTreeSet;
use std::path::Path;

use proptest::prelude::*;
use sylva::io::page_header::{PageKind, PAGE_HEADER_LEN};
use sylva::io::{OpenFile, PageFile, SimFs, SimOptions, Vfs, FIRST_DATA_PAGE};

const PAGE: usize = 4096;
/// Pages one region bitmap covers with 4 KiB pages (docs/format.md).
const REGION: u64 = 8 * (PAGE as u64 - 48);
const PATH: &str = "/pages";

fn how(create: bool) -> OpenFile {
    OpenFile {
        create,
        direct: false,
    }
}

/// A file system where a file's fsync makes its name durable too (the page file's creation
/// is not what these tests are about).
fn sim() -> SimFs {
    SimFs::new(SimOptions {
        names_with_file_sync: true,
    })
}

fn create(fs: &SimFs) -> PageFile {
    let io = fs.open(Path::new(PATH), how(true)).expect("create").io;
    PageFile::create_io(io, PAGE, false).expect("page file")
}

fn reopen(fs: &SimFs) -> sylva::Result<PageFile> {
    let io = fs.open(Path::new(PATH), how(false))?.io;
    PageFile::open_io(io, false).map(|(file, _)| file)
}

#[derive(Debug, Clone)]
enum Op {
    Allocate,
    AllocateRun(usize),
    Free {
        pick: usize,
        run: u64,
        deferred: bool,
    },
    BeginFuzzy,
    Checkpoint,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => Just(Op::Allocate),
        3 => (2usize..9).prop_map(Op::AllocateRun),
        1 => (REGION as usize / 2..REGION as usize + 50).prop_map(Op::AllocateRun),
        8 => (any::<usize>(), 1u64..5, any::<bool>())
            .prop_map(|(pick, run, deferred)| Op::Free { pick, run, deferred }),
        2 => Just(Op::BeginFuzzy),
        3 => Just(Op::Checkpoint),
        1 => Just(Op::Crash),
    ]
}

/// What the test knows of the file.
#[derive(Default)]
struct Model {
    /// Pages in use.
    used: BTreeSet<u64>,
    /// Freed with a deferred free, since the last checkpoint began.
    pending: BTreeSet<u64>,
    /// Deferred frees the begun checkpoint records free.
    recorded: BTreeSet<u64>,
    /// Pages in use as the begun checkpoint began.
    begun: Option<BTreeSet<u64>>,
    /// Pages in use in the last durable checkpoint.
    durable: BTreeSet<u64>,
}

impl Model {
    fn begin(&mut self) {
        self.recorded.extend(std::mem::take(&mut self.pending));
        self.begun = Some(self.used.clone());
    }
}

/// Every page is exactly one of meta, free (any kind), in use, or free-space page.
fn partition(file: &PageFile, model: &Model) -> Result<(), TestCaseError> {
    let count = file.page_count();
    prop_assert!(model.used.iter().all(|&p| p < count));
    // Every page of a small file; of a large one (runs longer than a region), the first
    // pages, those around each region boundary, and a sample of the rest.
    let near_boundary = |id: u64| id % REGION < 40 || id % REGION > REGION - 40;
    for id in FIRST_DATA_PAGE..count {
        if id < 2000 || near_boundary(id) || id % 97 == 0 {
            prop_assert_eq!(file.is_free(id), !model.used.contains(&id), "page {}", id);
        }
    }
    prop_assert_eq!(
        FIRST_DATA_PAGE + model.used.len() as u64 + file.free_pages() + file.free_list_pages(),
        count
    );
    Ok(())
}

fn run(ops: Vec<Op>, user: Vec<u8>) -> Result<(), TestCaseError> {
    let fs = sim();
    let mut file = create(&fs);
    let mut m = Model::default();
    let takes = |m: &mut Model, first: u64, n: u64| -> Result<(), TestCaseError> {
        for p in first..first + n {
            prop_assert!(p >= FIRST_DATA_PAGE);
            prop_assert!(
                !m.used.contains(&p) && !m.pending.contains(&p) && !m.recorded.contains(&p),
                "page {} handed out twice (or before its deferred free is durable)",
                p
            );
            m.used.insert(p);
        }
        Ok(())
    };
    for op in ops {
        match op {
            Op::Allocate => {
                let p = file.allocate();
                takes(&mut m, p, 1)?;
            }
            Op::AllocateRun(n) => {
                let p = file.allocate_run(n);
                takes(&mut m, p, n as u64)?;
            }
            Op::Free {
                pick,
                run,
                deferred,
            } => {
                if m.used.is_empty() {
                    continue;
                }
                let first = *m.used.iter().nth(pick % m.used.len()).expect("a used page");
                let n = (0..run)
                    .take_while(|i| m.used.contains(&(first + i)))
                    .count() as u64;
                let r = if deferred {
                    file.free_run_deferred(first, n as usize)
                } else {
                    file.free_run(first, n as usize)
                };
                prop_assert!(r.is_ok(), "{:?}", r);
                for p in first..first + n {
                    m.used.remove(&p);
                    if deferred {
                        m.pending.insert(p);
                    }
                }
                prop_assert!(file.free(first).is_err(), "a page freed twice is an error");
            }
            Op::BeginFuzzy => {
                file.begin_fuzzy();
                m.begin();
            }
            Op::Checkpoint => {
                if m.begun.is_none() {
                    m.begin();
                }
                file.checkpoint(&user).expect("checkpoint");
                m.durable = m.begun.take().expect("begun");
                m.recorded.clear();
            }
            Op::Crash => {
                drop(file);
                fs.reboot_losing_unsynced();
                file = reopen(&fs).expect("reopen");
                m = Model {
                    used: m.durable.clone(),
                    durable: m.durable,
                    ..Model::default()
                };
            }
        }
        partition(&file, &m)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The model test of the module docs (a meta page with room for the directory, and one
    /// without, whose directory lives in overflow pages).
    #[test]
    fn free_space_follows_the_model_through_checkpoints_and_crashes(
        ops in proptest::collection::vec(op(), 1..80),
        full_meta in any::<bool>(),
    ) {
        let user = if full_meta { vec![9u8; PAGE - 80] } else { b"owner".to_vec() };
        run(ops, user)?;
    }
}

#[test]
fn neighbours_coalesce_into_a_run_the_next_allocation_gets_whole() {
    let fs = sim();
    let file = create(&fs);
    let first = file.allocate_run(12);
    // Freed in three pieces, out of order: one run of 9 pages afterwards.
    file.free_run(first + 6, 3).expect("free");
    file.free_run(first + 1, 2).expect("free");
    file.free_run(first + 3, 3).expect("free");
    file.free(first + 9).expect("free");
    assert_eq!(
        file.allocate_run(9),
        first + 1,
        "the coalesced run, not new pages"
    );
    // Best fit: a single-page hole serves a single page before a long run is cut.
    file.free_run(first + 1, 4).expect("free");
    file.free(first + 7).expect("free");
    assert_eq!(file.allocate(), first + 7);
    assert_eq!(file.allocate_run(4), first + 1);
}

fn fill(file: &PageFile, id: u64, byte: u8) {
    let mut buf = file.buffer(1);
    buf[PAGE_HEADER_LEN..].fill(byte);
    file.write_page(id, &mut buf, PageKind::BTreeLeaf, u64::from(byte))
        .expect("write");
}

fn body(file: &PageFile, id: u64) -> Option<u8> {
    let mut buf = file.buffer(1);
    file.read_page(id, &mut buf, PageKind::BTreeLeaf)
        .ok()
        .map(|_| buf[PAGE_HEADER_LEN])
}

/// The pages an older, still-needed checkpoint points at are not reused by a deferred free:
/// a power loss before the checkpoint that releases them, or at any change during it, finds
/// either them in use with their contents, or that checkpoint durable and them free.
#[test]
fn deferred_frees_survive_a_power_loss_before_and_during_their_checkpoint() {
    let mut crash_at = 0u64;
    let mut saw_old = false;
    let mut saw_new = false;
    loop {
        let fs = sim();
        let file = create(&fs);
        let kept: Vec<u64> = (0..6).map(|_| file.allocate()).collect();
        let run = file.allocate_run(5);
        let old: Vec<u64> = kept.iter().copied().chain(run..run + 5).collect();
        for (i, &id) in old.iter().enumerate() {
            fill(&file, id, i as u8 + 1);
        }
        file.checkpoint(b"old").expect("checkpoint");
        // The owner replaces its pages (copy-on-write): the old ones are freed, deferred.
        for &id in &kept[..3] {
            file.free_deferred(id).expect("free");
        }
        file.free_run_deferred(run, 5).expect("free run");
        // New pages, written and synced: none may be an old one.
        for i in 0..20u8 {
            let id = file.allocate();
            assert!(!old.contains(&id), "page {id} reused before its checkpoint");
            fill(&file, id, 100 + i);
        }
        let id = file.allocate_run(5);
        assert!((id..id + 5).all(|p| !old.contains(&p)));
        file.sync().expect("sync");
        let before = fs.changes();
        fs.crash_after(crash_at);
        let done = file.checkpoint(b"new").is_ok();
        let changes = fs.changes() - before;
        drop(file);
        fs.reboot(crash_at);
        let file = reopen(&fs).expect("reopen after the power loss");
        for (i, &id) in old.iter().enumerate() {
            if file.is_free(id) {
                saw_new = true;
            } else {
                saw_old = true;
                assert_eq!(
                    body(&file, id),
                    Some(i as u8 + 1),
                    "crash at change {crash_at}: page {id} in use but overwritten"
                );
            }
        }
        // The pages never freed are in use whatever the checkpoint.
        for &id in &kept[3..] {
            assert!(!file.is_free(id));
        }
        if done && changes < crash_at {
            break;
        }
        crash_at += 1;
    }
    assert!(
        saw_old && saw_new,
        "crashes landed both before and after the checkpoint"
    );
}

/// The deferred frees made while a fuzzy checkpoint runs wait for the next one.
#[test]
fn a_deferred_free_during_a_fuzzy_checkpoint_waits_for_the_next() {
    let fs = sim();
    let file = create(&fs);
    let a = file.allocate();
    let b = file.allocate();
    file.checkpoint(&[]).expect("checkpoint");
    file.free_deferred(a).expect("free");
    file.begin_fuzzy();
    file.free_deferred(b).expect("free");
    file.checkpoint(&[]).expect("fuzzy checkpoint");
    let next = file.allocate();
    assert_eq!(next, a, "a's checkpoint is durable: a is reused");
    assert_ne!(file.allocate(), b, "b waits for the next checkpoint");
    file.checkpoint(&[]).expect("checkpoint");
    assert_eq!(file.allocate(), b);
}

#[test]
fn a_checkpoint_writes_only_the_regions_that_changed() {
    let fs = sim();
    let file = create(&fs);
    // Four regions, each with free pages.
    let first = file.allocate_run(4 * REGION as usize);
    for r in 0..4 {
        file.free_run(first + r * REGION + 100, 10).expect("free");
    }
    // The file system's changes during a checkpoint: its page writes and its two fsyncs.
    let checkpoint = || {
        let before = fs.changes();
        file.checkpoint(b"owner").expect("checkpoint");
        fs.changes() - before - 2
    };
    assert_eq!(checkpoint(), 4 + 1, "four region pages and the meta page");
    assert_eq!(checkpoint(), 1, "nothing changed: the meta page alone");
    file.free(first + 2 * REGION + 7).expect("free");
    assert_eq!(checkpoint(), 1 + 1, "one region page and the meta page");
    // An allocation changes the marks of the one region it comes from.
    file.allocate();
    assert_eq!(checkpoint(), 1 + 1);
    let free_before = file.free_pages() + file.free_list_pages();
    drop(file);
    let file = reopen(&fs).expect("reopen");
    assert_eq!(file.free_pages() + file.free_list_pages(), free_before);
    assert!(file.is_free(first + 3 * REGION + 105));
    assert!(!file.is_free(first + 3 * REGION + 110));
}
