//! The benchmark shape of "B-Trees Are Back" (section 4) for every implemented layout of
//! `sylva::btree` and for a bare std `BTreeMap<Vec<u8>, Vec<u8>>`, scaled to minutes.
//!
//! ```text
//! cargo run --release --example btree_layouts -- [--keys dense,sparse,urls,wiki]
//!     [--records-int N] [--records-str N] [--ops N] [--page-size N] [--engines LIST]
//! ```
//!
//! Per key set: shuffle the keys, insert 90% (untimed), time inserting the remaining 10%, then
//! `--ops` lookups and `--ops` scans of 1..=50 records with start keys drawn from a zipfian
//! (0.99) distribution over the key set (ranks scattered over the keys). Values are 8 bytes.
//! Every value seen feeds a checksum that is printed, so nothing is optimised away, and engines
//! must agree on it. The keys of each timed phase are laid out one after another in op order
//! before the clock starts (the same sequence for every engine), so the timed loops read them
//! sequentially instead of chasing one heap allocation per key: fetching the workload is not
//! the engine's work. Bytes per record are the live heap bytes the engine holds after the load
//! divided by the records (a counting global allocator, so the same rule applies to every
//! engine; it excludes malloc's own overhead).
//!
//! `--engines` takes layout names and `btreemap`; a layout may carry other tree options after
//! `+` (`adaptive+redistribute=true` for deferred splits, off by default), as in `sylva bench`'s
//! `btree:` spec.
//!
//! Key sets (deterministic, seed fixed):
//! - `dense`: 32-bit big-endian integers `0..N`;
//! - `sparse`: N distinct random 32-bit big-endian integers;
//! - `urls`: synthetic URLs, about 60 bytes: scheme, one of 3000 hosts drawn with skew, two
//!   to five path segments from a 2000-word vocabulary, sometimes a numeric id or query;
//! - `wiki`: synthetic titles, about 20 bytes: one to four capitalised vocabulary words
//!   joined by `_`, sometimes with a disambiguation suffix like `_(film)` or a year.
//!
//! - `density=D` (0 < D <= 1): N distinct 32-bit integers drawn uniformly from `[0, N/D)`, the
//!   key sets of the paper's density sweep (Figure 9); `--records-int` sets N.
//!
//! The paper uses real URLs and Wikipedia titles; these generators only imitate their length
//! and prefix sharing.

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use sylva::btree::{BTree, Layout, Options};
use sylva::KvStore;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: AllocLayout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: AllocLayout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: AllocLayout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: AllocLayout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// YCSB's zipfian generator (Gray et al.), theta 0.99, over `0..n`.
struct Zipf {
    n: f64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}
impl Zipf {
    fn new(n: u64, theta: f64) -> Self {
        let zeta = |k: u64| (1..=k).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let (zetan, zeta2) = (zeta(n), zeta(2));
        Zipf {
            n: n as f64,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }
    fn sample(&self, rng: &mut Rng) -> u64 {
        let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        ((self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n as u64 - 1)
    }
}

const SYLLABLES: [&str; 40] = [
    "an", "bel", "cor", "dra", "el", "fin", "gar", "hol", "in", "jor", "ka", "lin", "mar", "nor",
    "os", "per", "qua", "ros", "sta", "tur", "ul", "ver", "wen", "xan", "yor", "zel", "ber", "cal",
    "den", "fal", "gor", "hal", "ist", "lan", "mon", "nes", "ort", "pan", "ri", "son",
];

fn vocabulary(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let parts = 1 + rng.below(3) as usize;
            (0..parts)
                .map(|_| SYLLABLES[rng.below(40) as usize])
                .collect()
        })
        .collect()
}

fn dedup_shuffle(mut keys: Vec<Vec<u8>>, rng: &mut Rng) -> Vec<Vec<u8>> {
    keys.sort_unstable();
    keys.dedup();
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.below(i as u64 + 1) as usize);
    }
    keys
}

fn make_keys(set: &str, n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x5EED ^ n as u64);
    let keys: Vec<Vec<u8>> = match set {
        "dense" => (0..n as u32).map(|i| i.to_be_bytes().to_vec()).collect(),
        "sparse" => (0..n + n / 8)
            .map(|_| (rng.next() as u32).to_be_bytes().to_vec())
            .collect(),
        "urls" => {
            let words = vocabulary(&mut rng, 2000);
            let tlds = [".com", ".org", ".net", ".de", ".co.uk", ".io"];
            let hosts: Vec<String> = (0..3000)
                .map(|i| {
                    let w = &words[rng.below(2000) as usize];
                    let sub = if i % 3 == 0 { "www." } else { "" };
                    format!("{sub}{w}{}", tlds[rng.below(6) as usize])
                })
                .collect();
            let host_zipf = Zipf::new(3000, 0.8);
            (0..n + n / 8)
                .map(|_| {
                    let scheme = if rng.below(4) == 0 {
                        "http://"
                    } else {
                        "https://"
                    };
                    let mut u = format!("{scheme}{}", hosts[host_zipf.sample(&mut rng) as usize]);
                    for _ in 0..2 + rng.below(4) {
                        u.push('/');
                        u.push_str(&words[rng.below(2000) as usize]);
                    }
                    match rng.below(4) {
                        0 => u.push_str(&format!("/{}", rng.below(1_000_000))),
                        1 => u.push_str(&format!(".html?id={}", rng.below(100_000))),
                        _ => {}
                    }
                    u.into_bytes()
                })
                .collect()
        }
        "wiki" => {
            let words = vocabulary(&mut rng, 2000);
            let cap = |w: &str| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            };
            (0..n + n / 4)
                .map(|_| {
                    let k = 1 + rng.below(4);
                    let mut t: Vec<String> = (0..k)
                        .map(|_| cap(&words[rng.below(2000) as usize]))
                        .collect();
                    match rng.below(8) {
                        0 => t.push("(film)".into()),
                        1 => t.push(format!("{}", 1800 + rng.below(225))),
                        _ => {}
                    }
                    t.join("_").into_bytes()
                })
                .collect()
        }
        other => match other
            .strip_prefix("density=")
            .and_then(|d| d.parse::<f64>().ok())
        {
            // Figure 9's key sets: N distinct 32-bit integers drawn uniformly from [0, N/density)
            // (selection sampling, so exactly N).
            Some(d) if d > 0.0 && d <= 1.0 => {
                let m = (n as f64 / d).round() as u64;
                let mut need = n as u64;
                let mut keys = Vec::with_capacity(n);
                for i in 0..m {
                    if rng.below(m - i) < need {
                        keys.push((i as u32).to_be_bytes().to_vec());
                        need -= 1;
                    }
                }
                keys
            }
            _ => panic!(
                "unknown key set {other} (dense, sparse, urls, wiki, density=D with 0 < D <= 1)"
            ),
        },
    };
    let mut keys = dedup_shuffle(keys, &mut rng);
    keys.truncate(n);
    keys
}

/// What the benchmark drives.
trait Engine {
    fn put(&mut self, k: &[u8], v: &[u8]);
    fn get(&mut self, k: &[u8], out: &mut Vec<u8>) -> bool;
    fn scan(&mut self, k: &[u8], n: usize, sum: &mut u64) -> usize;
}

impl Engine for BTree {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        BTree::put(self, k, v).expect("put");
    }
    fn get(&mut self, k: &[u8], out: &mut Vec<u8>) -> bool {
        self.get_into(k, out).expect("get")
    }
    fn scan(&mut self, k: &[u8], n: usize, sum: &mut u64) -> usize {
        KvStore::scan(self, k, n, &mut |_, v| {
            *sum = sum.wrapping_add(v[0] as u64);
            true
        })
        .expect("scan")
    }
}

impl Engine for BTreeMap<Vec<u8>, Vec<u8>> {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.insert(k.to_vec(), v.to_vec());
    }
    fn get(&mut self, k: &[u8], out: &mut Vec<u8>) -> bool {
        match BTreeMap::get(self, k) {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                true
            }
            None => false,
        }
    }
    fn scan(&mut self, k: &[u8], n: usize, sum: &mut u64) -> usize {
        let mut c = 0;
        for (_, v) in self
            .range::<[u8], _>((std::ops::Bound::Included(k), std::ops::Bound::Unbounded))
            .take(n)
        {
            *sum = sum.wrapping_add(v[0] as u64);
            c += 1;
        }
        c
    }
}

/// Keys laid out back to back in op order, so a timed loop reads its workload sequentially.
struct OpKeys {
    bytes: Vec<u8>,
    /// `ends[i]` is where key `i` ends (and key `i + 1` starts).
    ends: Vec<usize>,
}

impl OpKeys {
    fn new<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Self {
        let (mut bytes, mut ends) = (Vec::new(), Vec::new());
        for k in keys {
            bytes.extend_from_slice(k);
            ends.push(bytes.len());
        }
        OpKeys { bytes, ends }
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.bytes[s..e])
    }
}

struct Row {
    engine: String,
    insert: f64,
    lookup: f64,
    scan: f64,
    bytes_per_record: f64,
    checksum: u64,
}

fn run(
    name: &str,
    mut engine: Box<dyn Engine>,
    keys: &[Vec<u8>],
    ops: usize,
    before: isize,
) -> Row {
    let n = keys.len();
    let load = n * 9 / 10;
    for (i, k) in keys[..load].iter().enumerate() {
        engine.put(k, &(i as u64).to_le_bytes());
    }
    let inserts = OpKeys::new(keys[load..].iter().map(Vec::as_slice));
    let t = Instant::now();
    for (i, k) in inserts.iter().enumerate() {
        engine.put(k, &((load + i) as u64).to_le_bytes());
    }
    let insert = (n - load) as f64 / t.elapsed().as_secs_f64() / 1e6;
    drop(inserts);
    let bytes = (LIVE.load(Ordering::Relaxed) - before) as f64 / n as f64;

    let zipf = Zipf::new(n as u64, 0.99);
    // Scatter ranks over the key set so hot keys are not neighbours.
    let scatter = |r: u64| ((r.wrapping_mul(0x9E37_79B9_7F4A_7C15)) % n as u64) as usize;
    let mut rng = Rng(42);
    let picks: Vec<usize> = (0..ops).map(|_| scatter(zipf.sample(&mut rng))).collect();
    let picked = OpKeys::new(picks.iter().map(|&p| keys[p].as_slice()));
    let mut out = Vec::new();
    let mut sum = 0u64;
    let t = Instant::now();
    for k in picked.iter() {
        if engine.get(k, &mut out) {
            sum = sum.wrapping_add(u64::from_le_bytes(
                out[..8].try_into().expect("8-byte value"),
            ));
        } else {
            panic!("{name}: key {k:?} missing");
        }
    }
    let lookup = ops as f64 / t.elapsed().as_secs_f64() / 1e6;
    let lens: Vec<usize> = (0..ops).map(|_| 1 + rng.below(50) as usize).collect();
    let t = Instant::now();
    let mut visited = 0;
    for (k, &len) in picked.iter().zip(&lens) {
        visited += engine.scan(k, len, &mut sum);
    }
    let scan = ops as f64 / t.elapsed().as_secs_f64() / 1e6;
    sum = sum.wrapping_add(visited as u64);
    Row {
        engine: name.to_string(),
        insert,
        lookup,
        scan,
        bytes_per_record: bytes,
        checksum: sum,
    }
}

fn main() {
    let mut sets = vec!["dense", "sparse", "urls", "wiki"];
    let (mut n_int, mut n_str, mut ops, mut page_size) =
        (4_000_000usize, 1_000_000usize, 2_000_000usize, 4096usize);
    let mut engines: Vec<String> = Layout::ALL
        .iter()
        .map(|l| l.name().to_string())
        .chain(["btreemap".to_string()])
        .collect();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--keys" => {
                sets = v
                    .split(',')
                    .map(|s| &*Box::leak(s.to_string().into_boxed_str()))
                    .collect()
            }
            "--records-int" => n_int = v.parse().expect("--records-int N"),
            "--records-str" => n_str = v.parse().expect("--records-str N"),
            "--ops" => ops = v.parse().expect("--ops N"),
            "--page-size" => page_size = v.parse().expect("--page-size N"),
            "--engines" => engines = v.split(',').map(str::to_string).collect(),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    for set in sets {
        let n = if set == "dense" || set == "sparse" {
            n_int
        } else {
            n_str
        };
        let keys = make_keys(set, n);
        let avg = keys.iter().map(Vec::len).sum::<usize>() as f64 / keys.len() as f64;
        println!(
            "\n## {set}: {} keys, average key {avg:.1} bytes, 8-byte values, {ops} lookups and {ops} scans (1..=50)\n",
            keys.len()
        );
        println!(
            "| engine | insert Mops/s | lookup Mops/s | scan Mops/s | bytes/record | checksum |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for e in &engines {
            let before = LIVE.load(Ordering::Relaxed);
            let engine: Box<dyn Engine> = if e == "btreemap" {
                Box::new(BTreeMap::<Vec<u8>, Vec<u8>>::new())
            } else {
                let mut o = Options {
                    page_size,
                    ..Options::default()
                };
                // `layout+key=value+...`: a layout with other tree options (`Options::set`).
                let mut parts = e.split('+');
                o.set("layout", parts.next().unwrap_or_default())
                    .expect("layout");
                for kv in parts {
                    let (k, v) = kv.split_once('=').expect("engine option key=value");
                    o.set(k, v).expect("engine option");
                }
                Box::new(BTree::new(o).expect("tree"))
            };
            let r = run(e, engine, &keys, ops, before);
            println!(
                "| {} | {:.2} | {:.2} | {:.2} | {:.1} | {:016x} |",
                r.engine, r.insert, r.lookup, r.scan, r.bytes_per_record, r.checksum
            );
        }
    }
}
