//! Helpers shared by the `db_*` integration tests: a seeded generator, keys and values that name
//! themselves, and reading a whole database back.
//!
//! Each test binary includes this module with `mod db_common;` and uses only part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ops::Bound;

use sylva::{Db, DbOptions, Result, SyncMode, WriteBatch};

/// A temporary directory, in /dev/shm where there is one (the tests' I/O then costs no disk).
pub fn tmp() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("a temporary directory in /dev/shm")
    } else {
        tempfile::tempdir().expect("a temporary directory")
    }
}

/// xorshift64*: enough randomness for choosing operations, reproducible from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        Rng(splitmix(seed) | 1)
    }
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A bijective mix of 64 bits (SplitMix64's finaliser).
pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Key number `n` as 16 hexadecimal digits of a mix of `n`: keys are spread over the key space
/// in an order unrelated to `n`, so sequential numbers are random inserts.
pub fn scattered_key(n: u64) -> Vec<u8> {
    format!("{:016x}", splitmix(n)).into_bytes()
}

/// Key number `n` as 12 decimal digits: key order is numeric order.
pub fn ordered_key(n: u64) -> Vec<u8> {
    format!("{n:012}").into_bytes()
}

/// The number in an [`ordered_key`].
pub fn ordered_number(key: &[u8]) -> Option<u64> {
    std::str::from_utf8(key).ok()?.parse().ok()
}

/// A value that names its key and the write that produced it (`tag`), `len` bytes long (at
/// least the label's length): two different writes never produce the same value.
pub fn tagged_value(key: &[u8], tag: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{}#{tag}|", String::from_utf8_lossy(key)).into_bytes();
    let fill = (splitmix(tag) % 251) as u8;
    let len = len.max(v.len());
    v.resize(len, fill);
    v
}

/// Options for small test databases: the given sync mode, `cache_pages` pages of 4 KiB in the
/// pool, and buffered I/O (the tests run on whatever filesystem `/tmp` is).
pub fn options(sync: SyncMode, cache_pages: u64) -> DbOptions {
    DbOptions {
        sync,
        cache_bytes: cache_pages * 4096,
        direct_io: false,
        ..DbOptions::default()
    }
}

/// Every record of `db`, in key order, read with one forward cursor.
pub fn contents(db: &Db) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut prev: Option<Vec<u8>> = None;
    for item in db.range(Bound::Unbounded, Bound::Unbounded) {
        let (k, v) = item?;
        if let Some(p) = &prev {
            assert!(
                p < &k,
                "a full forward scan is not strictly ascending: {:?} then {:?}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(&k)
            );
        }
        prev = Some(k.clone());
        out.insert(k, v);
    }
    Ok(out)
}

/// Up to `max` keys where `got` and `want` differ, as readable lines, for assertion messages.
pub fn differences(
    got: &BTreeMap<Vec<u8>, Vec<u8>>,
    want: &BTreeMap<Vec<u8>, Vec<u8>>,
    max: usize,
) -> String {
    let show = |v: Option<&Vec<u8>>| match v {
        None => "absent".to_string(),
        Some(v) => {
            let s = String::from_utf8_lossy(v);
            let end = s.find('|').map_or(s.len().min(40), |i| i + 1);
            format!("{:?}", &s[..end])
        }
    };
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| {
            format!(
                "  {}: expected {}, got {}",
                String::from_utf8_lossy(k),
                show(want.get(k)),
                show(got.get(k))
            )
        })
        .collect();
    let n = diffs.len();
    let mut s: Vec<String> = diffs.into_iter().take(max).collect();
    if n > max {
        s.push(format!("  ... and {} more", n - max));
    }
    format!("{n} keys differ:\n{}", s.join("\n"))
}

/// A borrowed view of an owned bound, as [`Db::range`] takes it.
pub fn bound_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// The writes of a batch: distinct keys, each with a new value or `None` for a delete.
pub type Members = [(Vec<u8>, Option<Vec<u8>>)];

/// `members` as a [`WriteBatch`].
pub fn batch_of(members: &Members) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for (k, v) in members {
        match v {
            Some(v) => batch.put(k, v),
            None => batch.delete(k),
        };
    }
    batch
}

/// Applies `members` to a model.
pub fn apply_members(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, members: &Members) {
    for (k, v) in members {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// Joins `threads`, failing instead of hanging when `progress` stops advancing for `stall`
/// (a livelock or deadlock inside the database). A thread's panic is re-raised as soon as that
/// thread ends. On failure the other threads are left running, detached; the test process ends
/// them when it exits.
pub fn join_watching<T>(
    threads: Vec<std::thread::JoinHandle<T>>,
    progress: &std::sync::atomic::AtomicU64,
    stall: std::time::Duration,
    what: &str,
) -> Vec<T> {
    use std::sync::atomic::Ordering;
    let mut pending: Vec<Option<std::thread::JoinHandle<T>>> =
        threads.into_iter().map(Some).collect();
    let mut results: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    let mut last = progress.load(Ordering::Relaxed);
    let mut since = std::time::Instant::now();
    while pending.iter().any(Option::is_some) {
        for (slot, result) in pending.iter_mut().zip(results.iter_mut()) {
            if slot.as_ref().is_some_and(|t| t.is_finished()) {
                let t = slot.take().expect("a finished thread");
                *result = Some(t.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = progress.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        } else if since.elapsed() > stall && pending.iter().any(Option::is_some) {
            panic!(
                "{what}: no progress for {} s after {now} operations: the threads are stuck \
                 (livelock or deadlock)",
                stall.as_secs()
            );
        }
    }
    results.into_iter().map(|r| r.expect("joined")).collect()
}

/// Contents equal `want`, every key reads back, and `check` passes and counts `want`'s records.
pub fn assert_same_contents(db: &Db, want: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    let got = contents(db).expect("scan");
    assert!(got == *want, "{what}: {}", differences(&got, want, 5));
    for (k, v) in want {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{what}: get");
    }
    let report = db.check().expect("check");
    assert_eq!(report.records, want.len() as u64, "{what}: records");
}

/// The database state version in the owner area of the page file at `path`'s newer meta page
/// (`docs/format.md`: meta pages 0 and 1 of 4 KiB, the checkpoint sequence at bytes 40..48, the
/// owner area from byte 80, the state's version at its bytes 8..12).
pub fn state_version(path: &std::path::Path) -> u32 {
    const META_SEQ: usize = 40;
    const OWNER_AREA: usize = 80;
    let b = std::fs::read(path).expect("read the page file");
    let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let u64_at = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let newer = if u64_at(META_SEQ) >= u64_at(4096 + META_SEQ) {
        0
    } else {
        4096
    };
    u32_at(newer + OWNER_AREA + 8)
}

/// The options the stored databases under `tests/fixtures/` were written and are reopened with:
/// 4 KiB pages, a pool of 64 pages, every write synced, no background threads, buffered I/O.
pub fn fixture_options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 64 * 4096,
        page_size: 4096,
        direct_io: false,
        background: false,
        ..DbOptions::default()
    }
}

/// Key `n` of a stored database's workload: `prefix` bytes shared by its group of ten
/// (`'a' + n / 10`), then `|n|` in four digits, filled with `'0' + n % 10` to the length of
/// `lens` that `n` picks.
pub fn fixture_key(n: u64, prefix: usize, lens: &[usize]) -> Vec<u8> {
    let mut k = vec![b'a' + (n / 10) as u8; prefix];
    k.extend_from_slice(format!("|{n:04}|").as_bytes());
    k.resize(
        lens[(n % lens.len() as u64) as usize],
        b'0' + (n % 10) as u8,
    );
    k
}

/// The value of key `n` written in round `tag` of a stored database's workload: `n#tag|`,
/// filled with `'a' + n % 26` and cut to the length of `lens` that `n + tag` picks.
pub fn fixture_value(n: u64, tag: u64, lens: &[usize]) -> Vec<u8> {
    let len = lens[((n + tag) % lens.len() as u64) as usize];
    let mut v = format!("{n}#{tag}|").into_bytes();
    v.resize(len.max(v.len()), b'a' + (n % 26) as u8);
    v.truncate(len);
    v
}

/// What a stored database holds after its workload's two rounds: keys `0..keys` at round 1,
/// then every seventh deleted and every third other one rewritten at round 2.
pub fn fixture_model(
    keys: u64,
    key: impl Fn(u64) -> Vec<u8>,
    value: impl Fn(u64, u64) -> Vec<u8>,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m: BTreeMap<Vec<u8>, Vec<u8>> = (0..keys).map(|n| (key(n), value(n, 1))).collect();
    for n in 0..keys {
        if n.is_multiple_of(7) {
            m.remove(&key(n));
        } else if n.is_multiple_of(3) {
            m.insert(key(n), value(n, 2));
        }
    }
    m
}

/// Opens a copy of the stored database in `fixture` (its page file and both log segments)
/// with [`fixture_options`], after checking that its state version is `version`; asserts that
/// recovery redid records and that the contents are `want`. Returns the copy's directory (kept
/// while the database is used) and the database.
pub fn open_fixture_copy(
    fixture: &std::path::Path,
    version: u32,
    want: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> (tempfile::TempDir, Db) {
    let scratch = tempfile::tempdir().expect("tempdir");
    for f in ["data.sylva", "wal.log", "wal.2.log"] {
        std::fs::copy(fixture.join(f), scratch.path().join(f)).expect("copy the fixture");
    }
    let data = scratch.path().join("data.sylva");
    assert_eq!(state_version(&data), version, "the fixture's state version");
    let db = Db::open(scratch.path(), fixture_options()).expect("open the fixture");
    assert!(db.recovery().records_redone > 0, "{:?}", db.recovery());
    let got = contents(&db).expect("a full scan");
    assert!(&got == want, "{}", differences(&got, want, 10));
    (scratch, db)
}

/// Writes a stored database's workload into `dir` (emptied first) with [`fixture_options`]:
/// keys `0..keys` at round 1, closed; reopened, every seventh deleted and every third other one
/// rewritten at round 2 (the even ones in a one-put batch when `batches`), then abandoned as a
/// `kill -9` would leave it ([`fixture_model`] is what it then holds).
pub fn write_fixture(
    dir: &std::path::Path,
    keys: u64,
    key: impl Fn(u64) -> Vec<u8>,
    value: impl Fn(u64, u64) -> Vec<u8>,
    batches: bool,
) {
    let _ = std::fs::remove_dir_all(dir);
    let db = Db::open(dir, fixture_options()).expect("create");
    for n in 0..keys {
        db.put(&key(n), &value(n, 1)).expect("put");
    }
    db.close().expect("close");
    let db = Db::open(dir, fixture_options()).expect("reopen");
    for n in 0..keys {
        if n.is_multiple_of(7) {
            db.delete(&key(n)).expect("delete");
        } else if n.is_multiple_of(3) {
            if batches && n.is_multiple_of(2) {
                db.write(WriteBatch::new().put(&key(n), &value(n, 2)))
                    .expect("batch");
            } else {
                db.put(&key(n), &value(n, 2)).expect("overwrite");
            }
        }
    }
    db.simulate_crash();
    let _ = std::fs::remove_file(dir.join("LOCK"));
}
