//! Multi-threaded behaviour of the native u64 tree, for both leaf kinds and for tiny shapes that
//! split constantly: monotonic inserts per thread (the paper's worst case for the BPA, section
//! 6.1), and iterations and maps running against inserts and deletes, each checked sorted and
//! complete with respect to keys no writer touches.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use sylva::mem::bptree::{BaselineOptions, BaselineTree, BpTree, BpTreeOptions, Leaf};

fn tiny_bpa() -> BpTree<u64, u64> {
    BpTree::with_options(&BpTreeOptions {
        log_size: 4,
        num_blocks: 3,
        block_size: 4,
        internal_size: 64,
    })
    .unwrap()
}

fn small_baseline() -> BaselineTree<u64, u64> {
    BaselineTree::baseline(&BaselineOptions {
        node_size: 256,
        internal_size: Some(64),
    })
    .unwrap()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn all<L: Leaf<u64, u64> + 'static>(tree: &BpTree<u64, u64, L>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    tree.iterate_range(Bound::Unbounded, usize::MAX, |k, v| {
        out.push((k, v));
        true
    });
    out
}

/// Each thread inserts its own increasing keys; `interleaved` makes the threads' keys alternate
/// (so they share leaves), otherwise each thread owns a contiguous range.
fn monotonic<L: Leaf<u64, u64> + 'static>(tree: BpTree<u64, u64, L>, interleaved: bool) {
    const THREADS: u64 = 4;
    const PER: u64 = 20_000;
    let key = |t: u64, i: u64| {
        if interleaved {
            i * THREADS + t
        } else {
            t * PER + i
        }
    };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let tree = &tree;
            s.spawn(move || {
                for i in 0..PER {
                    tree.insert(key(t, i), i);
                }
            });
        }
    });
    tree.check().unwrap();
    let stats = tree.stats();
    assert!(stats.leaf_splits + stats.three_way_splits > 0, "{stats:?}");
    let got = all(&tree);
    let mut want: Vec<_> = (0..THREADS)
        .flat_map(|t| (0..PER).map(move |i| (key(t, i), i)))
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(tree.stats().records, THREADS * PER);
}

#[test]
fn monotonic_inserts_per_thread() {
    for interleaved in [false, true] {
        monotonic(BpTree::new(), interleaved);
        monotonic(tiny_bpa(), interleaved);
        monotonic(
            BaselineTree::baseline(&BaselineOptions::default()).unwrap(),
            interleaved,
        );
        monotonic(small_baseline(), interleaved);
    }
}

/// Stable keys (multiples of 4) are loaded first and never touched; writers insert and delete
/// other keys while readers iterate and map, checking every result.
fn iterate_under_writes<L: Leaf<u64, u64> + 'static>(tree: BpTree<u64, u64, L>) {
    const SPAN: u64 = 40_000;
    let stable: BTreeSet<u64> = (0..SPAN).step_by(4).collect();
    for &k in &stable {
        tree.insert(k, k ^ 0xABCD);
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for r in 0..2u64 {
            let (tree, stable, stop) = (&tree, &stable, &stop);
            s.spawn(move || {
                let mut rng = Rng(0x9E37_79B9 + r);
                let mut rounds = 0;
                while !stop.load(Ordering::Relaxed) || rounds < 50 {
                    rounds += 1;
                    let lo = rng.next() % SPAN;
                    let len = (rng.next() % 3000) as usize;
                    // Ordered iteration: strictly ascending, stable keys intact and none missed.
                    let mut seen = Vec::new();
                    let n = tree.iterate_range(Bound::Included(lo), len, |k, v| {
                        seen.push((k, v));
                        true
                    });
                    assert_eq!(n, seen.len());
                    assert!(n <= len);
                    assert!(
                        seen.windows(2).all(|w| w[0].0 < w[1].0),
                        "iteration not ascending"
                    );
                    if let (Some(first), Some(last)) = (seen.first(), seen.last()) {
                        assert!(first.0 >= lo);
                        let keys: BTreeSet<u64> = seen.iter().map(|e| e.0).collect();
                        for k in stable.range(lo..=last.0) {
                            assert!(
                                keys.contains(k),
                                "iteration from {lo} missed stable key {k}"
                            );
                        }
                    }
                    for &(k, v) in &seen {
                        if k % 4 == 0 {
                            assert_eq!(v, k ^ 0xABCD, "stable value changed");
                        }
                    }
                    // Map: every stable key in [lo, hi) exactly once, nothing outside.
                    let hi = lo + (rng.next() % 5000);
                    let mut mapped = Vec::new();
                    tree.map_range(lo, Some(hi), |k, _| {
                        mapped.push(k);
                        true
                    });
                    assert!(
                        mapped.iter().all(|k| (lo..hi).contains(k)),
                        "map outside range"
                    );
                    let set: BTreeSet<u64> = mapped.iter().copied().collect();
                    assert_eq!(set.len(), mapped.len(), "map visited a key twice");
                    for k in stable.range(lo..hi) {
                        assert!(set.contains(k), "map [{lo}, {hi}) missed stable key {k}");
                    }
                }
            });
        }
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let tree = &tree;
                s.spawn(move || {
                    let mut rng = Rng(0xDEAD_BEEF + w);
                    for _ in 0..60_000 {
                        let k = (rng.next() % SPAN) | 1;
                        if rng.next().is_multiple_of(4) {
                            tree.remove(&k);
                        } else {
                            tree.insert(k, k);
                        }
                    }
                })
            })
            .collect();
        for h in writers {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    tree.check().unwrap();
    let stats = tree.stats();
    if L::SHARES_WITH_SIBLING {
        assert!(
            stats.sibling_shares > 0 && stats.three_way_splits > 0,
            "{stats:?}"
        );
    } else {
        assert!(
            stats.sibling_shares == 0 && stats.three_way_splits == 0,
            "{stats:?}"
        );
    }
    let got = all(&tree);
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(got.iter().filter(|e| e.0 % 4 == 0).count(), stable.len());
    assert_eq!(tree.stats().records as usize, got.len());
}

#[test]
fn iterations_and_maps_under_concurrent_writes() {
    iterate_under_writes(BpTree::new());
    iterate_under_writes(tiny_bpa());
    iterate_under_writes(BaselineTree::baseline(&BaselineOptions::default()).unwrap());
    iterate_under_writes(small_baseline());
}

#[test]
fn every_key_is_valid_including_the_extremes() {
    let tree = tiny_bpa();
    for k in [u64::MAX, 0, 1, u64::MAX - 1] {
        tree.insert(k, !k);
    }
    assert_eq!(tree.find(&0), Some(u64::MAX));
    assert_eq!(tree.find(&u64::MAX), Some(0));
    assert_eq!(
        all(&tree).iter().map(|e| e.0).collect::<Vec<_>>(),
        [0, 1, u64::MAX - 1, u64::MAX]
    );
    let mut n = 0;
    tree.map_range(u64::MAX - 1, None, |_, _| {
        n += 1;
        true
    });
    assert_eq!(n, 2);
    assert_eq!(tree.remove(&0), Some(u64::MAX));
    assert_eq!(tree.remove(&0), None);
    assert_eq!(tree.find(&0), None);
    tree.check().unwrap();
}

/// YCSB A's shape with two threads on shared hot keys: half reads, half overwrites, keys drawn
/// from a skewed distribution so both threads hammer the same leaves and their logs flush
/// constantly. Every value names its writer and a per-writer sequence number, so afterwards each
/// key must hold one of the last values its writers put there (an older copy resurfacing after
/// a flush or split is a lost update), and a reader must never see a key's value from one writer
/// go backwards.
fn no_lost_updates<L: Leaf<u64, u64> + 'static>(tree: BpTree<u64, u64, L>) {
    const KEYS: u64 = 2_000;
    const OPS: u64 = 200_000;
    for k in 0..KEYS {
        tree.insert(k, 0);
    }
    let encode = |t: u64, seq: u64| (t << 48) | seq;
    let last: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=2u64)
            .map(|t| {
                let tree = &tree;
                s.spawn(move || {
                    let mut rng = Rng(0x9E37_79B9 * t + 1);
                    let mut mine = vec![0u64; KEYS as usize];
                    let mut seen = vec![[0u64; 3]; KEYS as usize];
                    for seq in 1..=OPS {
                        // Skewed: a quarter of the operations go to the 16 hottest keys.
                        let r = rng.next();
                        let k = if r.is_multiple_of(4) {
                            r % 16
                        } else {
                            r % KEYS
                        };
                        if rng.next().is_multiple_of(2) {
                            let v = tree.find(&k).expect("preloaded key");
                            let (w, s) = ((v >> 48) as usize, v & ((1 << 48) - 1));
                            assert!(w <= 2, "key {k}: value {v:#x} names no writer");
                            assert!(
                                s >= seen[k as usize][w],
                                "key {k}: writer {w}'s value went back from {} to {s}",
                                seen[k as usize][w]
                            );
                            seen[k as usize][w] = s;
                        } else {
                            tree.insert(k, encode(t, seq));
                            mine[k as usize] = encode(t, seq);
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for k in 0..KEYS {
        let got = tree.find(&k).unwrap();
        let candidates = [last[0][k as usize], last[1][k as usize]];
        let expected_any = candidates.iter().any(|&c| c != 0);
        if expected_any {
            assert!(
                candidates.contains(&got),
                "key {k}: holds {got:#x}, not either writer's last put {:#x} / {:#x}",
                candidates[0],
                candidates[1]
            );
        } else {
            assert_eq!(got, 0, "key {k}: never written, yet changed");
        }
    }
    tree.check().unwrap();
}

#[test]
fn no_lost_updates_under_two_thread_ycsb_a_bpa() {
    no_lost_updates(tiny_bpa());
}

#[test]
fn no_lost_updates_under_two_thread_ycsb_a_default_bpa() {
    no_lost_updates(BpTree::<u64, u64>::with_options(&BpTreeOptions::default()).unwrap());
}

#[test]
fn no_lost_updates_under_two_thread_ycsb_a_baseline() {
    no_lost_updates(small_baseline());
}

/// Finds descend optimistically through internal nodes that writers are splitting (tiny nodes:
/// internal splits and new roots all the time). A key present before the writers start must be
/// found, with its value, by every find while they run.
fn finds_during_splits<L: Leaf<u64, u64> + 'static>(tree: BpTree<u64, u64, L>) {
    const PRESENT: u64 = 5_000;
    const WRITERS: u64 = 2;
    const PER_WRITER: u64 = 20_000;
    for i in 0..PRESENT {
        tree.insert(i * 64, i);
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let tree = &tree;
                s.spawn(move || {
                    let mut rng = Rng(0x9e37_79b9 + t);
                    for _ in 0..PER_WRITER {
                        // Never a multiple of 64: the present keys stay untouched.
                        let k = (rng.next() % (PRESENT * 64)) | 1;
                        tree.insert(k, k);
                    }
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut rng = Rng(7);
            let mut finds = 0u64;
            while !done.load(Ordering::Relaxed) || finds < 10_000 {
                let i = rng.next() % PRESENT;
                assert_eq!(tree.find(&(i * 64)), Some(i), "key {} lost", i * 64);
                finds += 1;
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        reader.join().unwrap();
    });
    tree.check().unwrap();
    for i in 0..PRESENT {
        assert_eq!(tree.find(&(i * 64)), Some(i));
    }
}

#[test]
fn finds_during_internal_splits() {
    finds_during_splits(tiny_bpa());
    finds_during_splits(small_baseline());
}
