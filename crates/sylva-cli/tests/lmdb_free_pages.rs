//! Issue 24, part 3: what made LMDB's two-thread YCSB A collapse at 5M records under
//! `sync=batch` (`docs/benchmarking.md`, "LMDB with two threads"). A read transaction that stays
//! open while write transactions commit keeps the pages those commits free from being reused
//! (LMDB's documented caveat), so LMDB takes new pages at the end of its file instead. Once the
//! reader ends, those free pages are not given back: LMDB reuses its free pages oldest first and
//! frees as many as it takes per commit, so from then on a page is reused only after as many
//! commits as the free pages last. When that is longer than the writes between two syncs,
//! every page a commit writes is one the last sync cleaned, and each update costs several
//! pages at the next sync instead of about one.
//!
//! This pins the mechanism through the adapter's `free_pages` counter (which the benchmark's
//! JSON records) and, where the file system counts dirtied pages in `/proc/self/io`, the bytes
//! per update. It fails if the counter stops counting LMDB's free pages, or if LMDB came to
//! reuse or release them sooner (then the explanation in `docs/benchmarking.md` would be
//! wrong).
//!
//! `cargo test -p sylva-cli --features peers-no-rocksdb --release --test lmdb_free_pages`
#![cfg(feature = "peers-no-rocksdb")]
#![allow(clippy::unwrap_used)]

#[allow(dead_code)]
#[path = "../src/peers/mod.rs"]
mod peers;

use std::sync::mpsc;

use peers::{open_peer, PeerSettings, PeerSync};
use sylva::KvStore;
use ycsb::process::IoCounters;

const RECORDS: u64 = 20_000;

fn key(i: u64) -> [u8; 8] {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()
}

fn counter(store: &dyn KvStore, name: &str) -> u64 {
    store
        .stats()
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("lmdb reports no counter {name}"))
}

/// `n` single updates (each its own transaction) of pseudo-random records, with a sync every
/// `sync_every`; the bytes `/proc/self/io` says they dirtied, per update (`None` where it counts
/// nothing, as on tmpfs).
fn updates(store: &dyn KvStore, seed: u64, n: u64, sync_every: u64) -> Option<f64> {
    let before = IoCounters::now();
    let mut x = seed | 1;
    for i in 1..=n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        store.put(&key(x % RECORDS), &[i as u8; 56]).unwrap();
        if i.is_multiple_of(sync_every) {
            store.sync().unwrap();
        }
    }
    let written = IoCounters::now()?.since(&before?).write_bytes;
    (written > 0).then(|| written as f64 / n as f64)
}

#[test]
fn a_reader_open_through_commits_leaves_free_pages_that_later_commits_go_on_cycling() {
    let dir = tempfile::tempdir().unwrap();
    let settings = PeerSettings {
        sync: PeerSync::Never,
        ..PeerSettings::default()
    };
    let store = open_peer("lmdb", dir.path(), &settings).unwrap();
    let store = &*store;
    for i in 0..RECORDS {
        store.put(&key(i), &[7u8; 56]).unwrap();
    }
    store.sync().unwrap();

    // One thread: each commit reuses pages freed two commits earlier, so few pages are free.
    let per_update_before = updates(store, 1, 3000, 100);
    let free_before = counter(store, "free_pages");
    assert!(
        free_before < 100,
        "a single writer should keep LMDB's free list short, found {free_before} free pages"
    );

    // A reader holds its snapshot (inside a scan's visitor) while 500 updates commit.
    let pinned = 500;
    let last_page = counter(store, "last_page");
    let (inside_tx, inside) = mpsc::channel();
    let (release, held) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut visitor = |_: &[u8], _: &[u8]| {
                inside_tx.send(()).unwrap();
                held.recv().unwrap();
                false
            };
            store.scan(b"", 1, &mut visitor).unwrap();
        });
        inside.recv().unwrap();
        let _ = updates(store, 2, pinned, u64::MAX);
        release.send(()).unwrap();
    });
    let free_after_pin = counter(store, "free_pages");
    let grew = counter(store, "last_page") - last_page;
    // Every commit frees at least its leaf and the root it copied.
    assert!(
        grew >= 2 * pinned && free_after_pin >= 2 * pinned,
        "{pinned} commits under an open reader: the file grew {grew} pages, \
         {free_after_pin} are free; expected at least {} each",
        2 * pinned
    );

    // The reader is gone, and one thread writes again: the free pages stay, cycling.
    let per_update_after = updates(store, 3, 3000, 100);
    let free_later = counter(store, "free_pages");
    assert!(
        free_later >= free_after_pin * 9 / 10,
        "LMDB gave back its free pages: {free_after_pin} after the reader, {free_later} after \
         3,000 more commits"
    );

    eprintln!(
        "free pages: {free_before} before the reader, {free_after_pin} after it (the file grew \
         {grew}), {free_later} 3,000 commits later; bytes dirtied per update: \
         {per_update_before:?} before, {per_update_after:?} after"
    );

    // With far more free pages than commits between two syncs, every page a commit writes was
    // cleaned by the last sync: an update dirties more pages than before the reader.
    match (per_update_before, per_update_after) {
        (Some(before), Some(after)) => assert!(
            after > 1.5 * before,
            "bytes dirtied per update: {before:.0} before the reader, {after:.0} after"
        ),
        _ => eprintln!(
            "this file system counts no dirtied bytes in /proc/self/io (tmpfs?): bytes per \
             update not checked, free pages were"
        ),
    }
}
