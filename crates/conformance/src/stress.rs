//! The multi-threaded stress test.
//!
//! Even numbers are *stable* keys, loaded first and never touched again; odd numbers belong to
//! writers, each owning the ones congruent to its index. Readers check that every scan is strictly
//! ascending (sorted and duplicate-free), that it misses no stable key in the range it covered, and
//! that every stable value is intact; writers check that they read back their own latest writes.
//! At the end the store must equal the stable keys plus every writer's own model.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use sylva::KvStore;

use crate::edge::scan_vec;
use crate::keys::{num_key, value_for};
use crate::Subject;

/// Sizes of the stress test.
#[derive(Debug, Clone, Copy)]
pub struct StressConfig {
    /// Writer threads.
    pub writers: usize,
    /// Reader threads.
    pub readers: usize,
    /// Stable keys loaded before the threads start.
    pub stable_keys: u64,
    /// Operations per writer.
    pub ops_per_writer: usize,
}

impl Default for StressConfig {
    fn default() -> Self {
        StressConfig {
            writers: 2,
            readers: 2,
            stable_keys: 4000,
            ops_per_writer: 40_000,
        }
    }
}

struct WriterDone<'a>(&'a AtomicUsize);

impl Drop for WriterDone<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// xorshift64*: enough randomness for choosing operations, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Runs the stress test on a fresh store from `subject`.
pub fn stress<S: Subject>(subject: &mut S, config: StressConfig) {
    let store = subject.open();
    let l = store.limits();
    let span = config.stable_keys * 2;
    for i in 0..config.stable_keys {
        store
            .put(&num_key(&l, 2 * i), &value_for(&l, 2 * i, 8))
            .expect("loading stable keys");
    }
    let writers_running = AtomicUsize::new(config.writers);
    let models: Vec<BTreeMap<u64, Vec<u8>>> = std::thread::scope(|s| {
        for r in 0..config.readers {
            let (store, writers_running) = (&store, &writers_running);
            s.spawn(move || reader(store, r as u64, span, writers_running));
        }
        let handles: Vec<_> = (0..config.writers)
            .map(|w| {
                let (store, writers_running) = (&store, &writers_running);
                s.spawn(move || {
                    // Count the writer out even if it panics, or the readers would spin forever.
                    let _done = WriterDone(writers_running);
                    writer(store, w as u64, config, span)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer thread panicked"))
            .collect()
    });

    let mut want: Vec<(Vec<u8>, Vec<u8>)> = (0..config.stable_keys)
        .map(|i| (num_key(&l, 2 * i), value_for(&l, 2 * i, 8)))
        .chain(
            models
                .iter()
                .flatten()
                .map(|(&n, v)| (num_key(&l, n), v.clone())),
        )
        .collect();
    want.sort();
    let got = scan_vec(&store, &[], usize::MAX);
    assert_eq!(got.len(), want.len(), "record count after the stress test");
    assert!(
        got == want,
        "contents after the stress test differ from stable keys plus the writers' models"
    );
    assert_eq!(
        store.stats().records,
        want.len() as u64,
        "stats().records after the stress test"
    );
    if let Err(e) = subject.check(&store) {
        panic!("structural check after the stress test: {e}");
    }
}

fn writer<S: KvStore>(
    store: &S,
    w: u64,
    config: StressConfig,
    span: u64,
) -> BTreeMap<u64, Vec<u8>> {
    let l = store.limits();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (w + 1));
    let mut model = BTreeMap::new();
    let writers = config.writers as u64;
    for op in 0..config.ops_per_writer as u64 {
        // An odd number owned by this writer; monotonic runs and random picks alternate so both
        // appends at one leaf and scattered inserts happen.
        let j = if op % 1000 < 300 {
            op % (span / 2 / writers)
        } else {
            rng.below(span / 2 / writers)
        };
        let n = 2 * (j * writers + w) + 1;
        let k = num_key(&l, n);
        match rng.below(10) {
            0..=5 => {
                let v = value_for(&l, rng.next(), 8);
                store.put(&k, &v).expect("writer put");
                model.insert(n, v);
            }
            6..=7 => {
                let was = store.delete(&k).expect("writer delete");
                assert_eq!(
                    was,
                    model.remove(&n).is_some(),
                    "writer {w}: delete of its own key {n}"
                );
            }
            _ => {
                let got = store.get(&k).expect("writer get");
                assert_eq!(
                    got.as_ref(),
                    model.get(&n),
                    "writer {w}: read back its own key {n}"
                );
            }
        }
    }
    model
}

fn reader<S: KvStore>(store: &S, r: u64, span: u64, writers_running: &AtomicUsize) {
    let l = store.limits();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (r + 1));
    let decode = |k: &[u8]| -> u64 {
        let tail = &k[k.len().saturating_sub(8)..];
        let mut be = [0u8; 8];
        be[8 - tail.len()..].copy_from_slice(tail);
        u64::from_be_bytes(be)
    };
    let mut rounds = 0u64;
    while writers_running.load(Ordering::Acquire) > 0 || rounds < 50 {
        rounds += 1;
        let start = rng.below(span);
        match rng.below(3) {
            0 => {
                let s = 2 * (start / 2);
                let got = store.get(&num_key(&l, s)).expect("reader get");
                assert_eq!(
                    got,
                    Some(value_for(&l, s, 8)),
                    "reader: stable key {s} missing or changed"
                );
            }
            1 => {
                let limit = 1 + rng.below(300) as usize;
                let mut prev: Option<u64> = None;
                let mut expect_stable = start.div_ceil(2) * 2;
                store
                    .scan(&num_key(&l, start), limit, &mut |k, v| {
                        let n = decode(k);
                        assert!(n >= start, "reader: scan from {start} returned smaller key {n}");
                        if let Some(p) = prev {
                            assert!(n > p, "reader: scan not strictly ascending: {p} then {n}");
                        }
                        assert!(expect_stable >= n || expect_stable >= span, "reader: scan from {start} skipped stable key {expect_stable} (reached {n})");
                        if n % 2 == 0 {
                            assert_eq!(v, value_for(&l, n, 8).as_slice(), "reader: stable value {n} in scan");
                            expect_stable = n + 2;
                        }
                        prev = Some(n);
                        true
                    })
                    .expect("reader scan");
            }
            _ => {
                let end = start + 1 + rng.below(400);
                let mut seen = Vec::new();
                store
                    .map_range(&num_key(&l, start), &num_key(&l, end), &mut |k, _| {
                        seen.push(decode(k));
                        true
                    })
                    .expect("reader map_range");
                seen.sort_unstable();
                let before = seen.len();
                seen.dedup();
                assert_eq!(
                    before,
                    seen.len(),
                    "reader: map_range [{start}, {end}) visited a key twice"
                );
                assert!(
                    seen.iter().all(|&n| n >= start && n < end),
                    "reader: map_range visited a key outside [{start}, {end})"
                );
                let stable_seen = seen.iter().filter(|&&n| n % 2 == 0).count() as u64;
                let stable_want = (start.div_ceil(2)..end.min(span).div_ceil(2)).count() as u64;
                assert_eq!(
                    stable_seen, stable_want,
                    "reader: map_range [{start}, {end}) missed stable keys"
                );
            }
        }
    }
}
