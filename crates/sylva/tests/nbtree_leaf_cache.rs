//! The leaf cache's budget (issue 22: inner nodes, Bloom filters and both roots within
//! `cache_bytes`): the leaf cache gets what the roots' pages and the d-trees' inner pages and
//! filters leave of `cache_bytes`. After a commit, with both roots empty, it holds more than
//! the fixed `cache_bytes − 2σ` it had before; as the active root fills again it gives the
//! memory back at once, never holding more leaves than its budget.

#![allow(clippy::unwrap_used)]

use sylva::{NbTree, NbTreeOptions, SyncMode};

const CACHE: u64 = 4 << 20;
const SIGMA: u64 = 256 << 10;
const PAGE: u64 = 4096;
/// The pool's copy buffer, out of its budget: a sixteenth of `CACHE` in pages.
const COPY_PAGES: u64 = CACHE / PAGE / 16;

fn counter(nb: &NbTree, name: &str) -> u64 {
    nb.counters().iter().find(|c| c.0 == name).unwrap().1
}

fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

#[test]
fn the_leaf_cache_takes_what_the_roots_leave_and_gives_it_back() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let nb = NbTree::open(
        dir.path().join("nb"),
        NbTreeOptions {
            sync: SyncMode::Never,
            cache_bytes: CACHE,
            sigma: Some(SIGMA),
            deamortize: false,
            ..NbTreeOptions::default()
        },
    )
    .unwrap();
    // About 4.6 MB of leaves: more than the cache. Then on to the next commit the root's
    // filling triggers: it moves σ bytes down and leaves both roots and the root's on-disk
    // part nearly empty, so the σ/2 written below commits nothing.
    let mut n = 40_000u64;
    for i in 0..n {
        nb.put(&key(i), &[i as u8; 100]).unwrap();
    }
    let commits = counter(&nb, "checkpoints");
    while counter(&nb, "checkpoints") == commits {
        nb.put(&key(n), &[n as u8; 100]).unwrap();
        n += 1;
    }
    assert!(counter(&nb, "height") >= 2, "{:?}", nb.counters());
    for i in 0..n {
        assert_eq!(nb.get(&key(i)).unwrap(), Some(vec![i as u8; 100]));
    }
    let budget = counter(&nb, "leaf_cache_budget_pages");
    let roots = counter(&nb, "roots_memory");
    let dtrees = counter(&nb, "dtree_memory");
    let resident = counter(&nb, "leaf_cache_pages");
    assert!(dtrees > 0, "{:?}", nb.counters());
    assert_eq!(
        budget,
        (CACHE - roots - dtrees) / PAGE - COPY_PAGES,
        "the budget is what the roots ({roots} B) and d-trees ({dtrees} B) leave"
    );
    let old_budget = (CACHE - 2 * SIGMA) / PAGE - COPY_PAGES;
    assert!(
        resident > old_budget && resident <= budget,
        "{resident} leaves resident, budget {budget}, the old fixed budget {old_budget}"
    );

    // The active root fills to half of σ: the leaf cache shrinks as it grows.
    let mut i = n;
    let mut bytes = 0;
    while bytes < SIGMA / 2 {
        nb.put(&key(i), &[7; 100]).unwrap();
        bytes += 8 + 1 + 100;
        i += 1;
    }
    let roots_now = counter(&nb, "roots_memory");
    let budget_now = counter(&nb, "leaf_cache_budget_pages");
    let resident_now = counter(&nb, "leaf_cache_pages");
    assert!(roots_now >= SIGMA / 2, "{roots_now} bytes of root pages");
    assert_eq!(
        counter(&nb, "checkpoints"),
        commits + 1,
        "a commit emptied the roots"
    );
    // The budget moves each σ/16 (here 64 KiB) of root records: the root's last such step
    // may not be counted yet (at most 32 pages of it).
    assert!(
        budget_now + (roots_now - roots) / PAGE <= budget + 32,
        "budget {budget} → {budget_now} while the roots grew {roots} → {roots_now} bytes"
    );
    assert!(
        resident_now <= budget_now,
        "{resident_now} resident over {budget_now}"
    );
    for j in (0..i).step_by(7) {
        let want = if j < n {
            vec![j as u8; 100]
        } else {
            vec![7; 100]
        };
        assert_eq!(nb.get(&key(j)).unwrap(), Some(want), "key {j}");
    }
    nb.close().unwrap();
}
