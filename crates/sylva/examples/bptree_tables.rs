//! Reproduces the shape of the BP-tree paper's Tables 1–2 (section 6.1) on the native u64 API:
//! preload N random keys, then measure random inserts, finds of loaded keys, ordered iterations
//! with lengths uniform in [0, max_len] for max_len 100, 10,000 and 100,000, and range maps over
//! the same ranges; for the baseline B+tree at node sizes 256 B … 64 KiB, the BP-tree at the
//! paper's leaf configurations, and std `BTreeMap<u64, u64>` (one thread). Every result feeds a
//! printed checksum so no work can be optimised away.
//!
//! ```text
//! cargo run --release --example bptree_tables -- [--keys N] [--ops N] [--scan-elements N]
//!     [--scans N] [--lengths 100,10000,100000] [--threads 1,2] [--set all|default] [--repeat R]
//!     [--clock cpu|wall] [--seed N]
//! cargo run --release --example bptree_tables -- --memory N
//! ```
//!
//! Phases are timed by the CPU time of the busiest worker thread unless `--clock wall`: on a
//! shared, oversubscribed machine wall time mostly measures how often other processes ran.
//! With `--repeat R` every structure is measured R times, rounds alternating, and each cell is the
//! median. `--set default` runs only `bptree` (32×32), `bptree-baseline` at 1 KiB and `BTreeMap`.
//! Throughput is Mops/s for inserts and finds, and millions of elements visited per second for
//! iterations and maps (the paper's "expected elements per second").
//!
//! How many range operations run per maximum length: `--scan-elements N` (default) sizes each
//! set to about N elements visited, so the longer the ranges the fewer of them; `--scans N`
//! runs N of every length instead, as the paper does (1M per length after 200M elements, so
//! `--scans 55000` at 10M preloaded keys and 1M inserts). The two measure different things for
//! the BP-tree, which sorts a leaf's log and blocks on the first range that needs them: with
//! few elements visited per key most ranges pay that sort; at the paper's volume (25 times the
//! data for max length 10,000) almost none do. `--lengths` picks the maximum lengths (default
//! 100, 10,000 and 100,000), for instance only the short ones when profiling them.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Instant;

use sylva::mem::bptree::{BaselineOptions, BpTree, BpTreeOptions, Leaf};

/// splitmix64: fast, good enough for keys, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// What each measured structure does; a tree is shared by `&`, the std map is used alone.
trait Ops: Send {
    fn insert(&mut self, k: u64, v: u64);
    fn find(&mut self, k: u64) -> Option<u64>;
    /// Visits up to `len` elements from `start` in order; returns (count, sum of values, last key).
    fn iterate(&mut self, start: u64, len: usize) -> (u64, u64, Option<u64>);
    /// Visits `[start, end)` in any order; returns (count, sum of values).
    fn map(&mut self, start: u64, end: Option<u64>) -> (u64, u64);
}

impl<L: Leaf<u64, u64> + 'static> Ops for &BpTree<u64, u64, L> {
    fn insert(&mut self, k: u64, v: u64) {
        BpTree::insert(self, k, v);
    }
    fn find(&mut self, k: u64) -> Option<u64> {
        BpTree::find(self, &k)
    }
    fn iterate(&mut self, start: u64, len: usize) -> (u64, u64, Option<u64>) {
        let (mut sum, mut last) = (0u64, None);
        let n = self.iterate_range(Bound::Included(start), len, |k, v| {
            sum = sum.wrapping_add(v);
            last = Some(k);
            true
        });
        (n as u64, sum, last)
    }
    fn map(&mut self, start: u64, end: Option<u64>) -> (u64, u64) {
        let mut sum = 0u64;
        let n = self.map_range(start, end, |_, v| {
            sum = sum.wrapping_add(v);
            true
        });
        (n as u64, sum)
    }
}

impl Ops for &mut BTreeMap<u64, u64> {
    fn insert(&mut self, k: u64, v: u64) {
        BTreeMap::insert(self, k, v);
    }
    fn find(&mut self, k: u64) -> Option<u64> {
        self.get(&k).copied()
    }
    fn iterate(&mut self, start: u64, len: usize) -> (u64, u64, Option<u64>) {
        let (mut n, mut sum, mut last) = (0u64, 0u64, None);
        for (k, v) in self.range(start..).take(len) {
            n += 1;
            sum = sum.wrapping_add(*v);
            last = Some(*k);
        }
        (n, sum, last)
    }
    fn map(&mut self, start: u64, end: Option<u64>) -> (u64, u64) {
        let hi = end.map_or(Bound::Unbounded, Bound::Excluded);
        let (mut n, mut sum) = (0u64, 0u64);
        for (_, v) in self.range((Bound::Included(start), hi)) {
            n += 1;
            sum = sum.wrapping_add(*v);
        }
        (n, sum)
    }
}

/// Nanoseconds this thread has spent on a CPU (Linux `/proc/thread-self/schedstat`), or `None`
/// where that is not available.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Whether phases are timed by CPU time (default) or wall-clock time.
static WALL_CLOCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `work` over `items` split across the handles' threads; returns (seconds, Σ units, Σ
/// checksum) where `work` returns (units done, checksum) per item. Seconds are the largest CPU
/// time of any worker thread (what the wall time would be with a core per thread, so that other
/// processes on a shared machine do not dilute the result), or wall time with `--clock wall`.
fn phase<O: Ops, T: Sync>(
    handles: &mut [O],
    items: &[T],
    work: impl Fn(&mut O, &T) -> (u64, u64) + Sync,
) -> (f64, u64, u64) {
    let chunk = items.len().div_ceil(handles.len().max(1)).max(1);
    let t0 = Instant::now();
    let results: Vec<(u64, u64, Option<u64>)> = std::thread::scope(|s| {
        let work = &work;
        let hs: Vec<_> = handles
            .iter_mut()
            .zip(items.chunks(chunk))
            .map(|(h, part)| {
                s.spawn(move || {
                    let cpu0 = thread_cpu_ns();
                    let (mut units, mut sum) = (0u64, 0u64);
                    for it in part {
                        let (u, c) = work(h, it);
                        units += u;
                        sum = sum.wrapping_add(c);
                    }
                    let cpu = cpu0.and_then(|c0| Some(thread_cpu_ns()? - c0));
                    (units, sum, cpu)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    let cpu = results.iter().map(|r| r.2).collect::<Option<Vec<u64>>>();
    let secs = match cpu {
        Some(c) if !WALL_CLOCK.load(std::sync::atomic::Ordering::Relaxed) => {
            c.into_iter().max().unwrap_or(0) as f64 / 1e9
        }
        _ => wall,
    };
    let units = results.iter().map(|r| r.0).sum();
    let sum = results.iter().fold(0u64, |a, r| a.wrapping_add(r.1));
    (secs, units, sum)
}

struct Workload {
    preload: Vec<u64>,
    inserts: Vec<u64>,
    finds: Vec<u64>,
    /// Per max_len: (max_len, [(start, length)]).
    scans: Vec<(usize, Vec<(u64, usize)>)>,
}

struct Row {
    name: String,
    leaf_bytes: usize,
    threads: usize,
    insert: f64,
    find: f64,
    iterate: Vec<f64>,
    map: Vec<f64>,
    bytes_per_record: Option<f64>,
    checksum: u64,
}

/// Measures one structure through `handles`, one per thread.
fn measure<O: Ops>(name: &str, leaf_bytes: usize, w: &Workload, handles: &mut [O]) -> Row {
    let threads = handles.len();
    let mut checksum = 0u64;
    let (ti, n, _) = phase(handles, &w.inserts, |h, &k| {
        h.insert(k, k >> 3);
        (1, 0)
    });
    let insert = n as f64 / ti / 1e6;
    let (tf, n, c) = phase(handles, &w.finds, |h, &k| (1, h.find(k).unwrap_or(1)));
    checksum = checksum.wrapping_add(c);
    let find = n as f64 / tf / 1e6;
    let (mut iterate, mut map) = (Vec::new(), Vec::new());
    for (_, queries) in &w.scans {
        // Ordered iterations; their last keys give the map ranges (paper section 6.1).
        let ends: Vec<std::sync::Mutex<Option<u64>>> = queries
            .iter()
            .map(|_| std::sync::Mutex::new(None))
            .collect();
        let indexed: Vec<usize> = (0..queries.len()).collect();
        let (t, n, c) = phase(handles, &indexed, |h, &i| {
            let (start, len) = queries[i];
            let (n, sum, last) = h.iterate(start, len);
            if let Ok(mut e) = ends[i].lock() {
                *e = last;
            }
            (n, sum)
        });
        checksum = checksum.wrapping_add(c);
        iterate.push(n as f64 / t / 1e6);
        let ranges: Vec<(u64, Option<u64>, bool)> = queries
            .iter()
            .zip(&ends)
            .map(|(&(start, _), e)| {
                let last = e.lock().ok().and_then(|g| *g);
                match last {
                    Some(l) => (start, l.checked_add(1), true),
                    None => (start, Some(start), false),
                }
            })
            .collect();
        let (t, n, c) = phase(handles, &ranges, |h, &(s, e, nonempty)| {
            if nonempty {
                h.map(s, e)
            } else {
                (0, 0)
            }
        });
        checksum = checksum.wrapping_add(c);
        map.push(n as f64 / t / 1e6);
    }
    Row {
        name: name.to_string(),
        leaf_bytes,
        threads,
        insert,
        find,
        iterate,
        map,
        bytes_per_record: None,
        checksum,
    }
}

fn measure_tree<L: Leaf<u64, u64> + 'static>(
    name: &str,
    leaf_bytes: usize,
    threads: usize,
    w: &Workload,
    tree: BpTree<u64, u64, L>,
) -> Row {
    for &k in &w.preload {
        tree.insert(k, k >> 3);
    }
    let mut row = measure(name, leaf_bytes, w, &mut vec![&tree; threads]);
    let s = tree.stats();
    row.bytes_per_record = Some(s.bytes as f64 / s.records.max(1) as f64);
    row
}

fn measure_btreemap(w: &Workload) -> Row {
    let mut map = BTreeMap::new();
    for &k in &w.preload {
        map.insert(k, k >> 3);
    }
    // One handle, one thread: the std map is not concurrent.
    measure("BTreeMap", 0, w, &mut [&mut map])
}

/// One row per (structure, threads): the median of each measure over the repeated rounds.
fn medians(runs: Vec<Row>) -> Vec<Row> {
    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    }
    let mut out: Vec<Row> = Vec::new();
    for r in &runs {
        if out
            .iter()
            .any(|o| o.name == r.name && o.threads == r.threads)
        {
            continue;
        }
        let same: Vec<&Row> = runs
            .iter()
            .filter(|o| o.name == r.name && o.threads == r.threads)
            .collect();
        let col = |f: &dyn Fn(&Row) -> f64| median(same.iter().map(|o| f(o)).collect());
        out.push(Row {
            name: r.name.clone(),
            leaf_bytes: r.leaf_bytes,
            threads: r.threads,
            insert: col(&|o| o.insert),
            find: col(&|o| o.find),
            iterate: (0..r.iterate.len())
                .map(|i| col(&|o| o.iterate[i]))
                .collect(),
            map: (0..r.map.len()).map(|i| col(&|o| o.map[i])).collect(),
            bytes_per_record: r.bytes_per_record,
            checksum: r.checksum,
        });
    }
    out
}

/// `a`'s throughput over `b`'s, per measure.
/// A maximum range length as the tables print it: ≤100, ≤10k, ≤100k.
fn length_label(max_len: usize) -> String {
    match max_len {
        n if n >= 1000 && n % 1000 == 0 => format!("≤{}k", n / 1000),
        n => format!("≤{n}"),
    }
}

fn ratios(a: &Row, b: &Row, lengths: &[usize]) -> String {
    let mut out = format!(
        "insert {:.2}x, find {:.2}x",
        a.insert / b.insert,
        a.find / b.find
    );
    for (i, &len) in lengths.iter().enumerate() {
        let len = length_label(len);
        out += &format!(", iterate {len} {:.2}x", a.iterate[i] / b.iterate[i]);
    }
    for (i, &len) in lengths.iter().enumerate() {
        let len = length_label(len);
        out += &format!(", map {len} {:.2}x", a.map[i] / b.map[i]);
    }
    out
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `--memory N`: bytes allocated per live record while N random keys are inserted, at tenths of
/// N, for the default BP-tree and the 1 KiB baseline.
fn memory_curve(n: usize, seed: u64) {
    let bp: BpTree<u64, u64> = BpTree::new();
    let base = BpTree::baseline(&BaselineOptions::default()).expect("valid baseline options");
    let mut rng = Rng(seed);
    println!("| records | bptree bytes/record | bptree-baseline 1 KiB bytes/record |");
    println!("|---|---|---|");
    for step in 1..=10 {
        for _ in 0..n / 10 {
            let k = rng.next();
            bp.insert(k, k);
            base.insert(k, k);
        }
        let (a, b) = (bp.stats(), base.stats());
        println!(
            "| {} | {:.1} | {:.1} |",
            a.records,
            a.bytes as f64 / a.records as f64,
            b.bytes as f64 / b.records as f64
        );
        let _ = step;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(n) = args
        .iter()
        .position(|a| a == "--memory")
        .and_then(|i| args.get(i + 1))
    {
        memory_curve(
            n.parse().expect("--memory takes a record count"),
            arg(&args, "--seed", 42),
        );
        return;
    }
    let keys: usize = arg(&args, "--keys", 2_000_000);
    let ops: usize = arg(&args, "--ops", 1_000_000);
    let scan_elements: usize = arg(&args, "--scan-elements", 20_000_000);
    let scan_count = Some(arg(&args, "--scans", 0usize)).filter(|&n| n > 0);
    let seed: u64 = arg(&args, "--seed", 42);
    let set: String = arg(&args, "--set", "all".to_string());
    let threads: Vec<usize> = arg(&args, "--threads", "1,2".to_string())
        .split(',')
        .filter_map(|t| t.parse().ok())
        .collect();

    let mut rng = Rng(seed);
    let preload: Vec<u64> = (0..keys).map(|_| rng.next()).collect();
    let inserts: Vec<u64> = (0..ops).map(|_| rng.next()).collect();
    let finds: Vec<u64> = (0..ops)
        .map(|_| preload[(rng.next() % keys as u64) as usize])
        .collect();
    let lengths: Vec<usize> = arg(&args, "--lengths", "100,10000,100000".to_string())
        .split(',')
        .filter_map(|t| t.parse().ok())
        .collect();
    let scans = lengths
        .iter()
        .map(|&max_len| {
            let count = scan_count.unwrap_or((scan_elements / (max_len / 2).max(1)).max(16));
            let qs = (0..count)
                .map(|_| (rng.next(), (rng.next() % (max_len as u64 + 1)) as usize))
                .collect();
            (max_len, qs)
        })
        .collect();
    let w = Workload {
        preload,
        inserts,
        finds,
        scans,
    };

    let pair = 16;
    let baseline_sizes: Vec<usize> = if set == "default" {
        vec![1024]
    } else {
        (8..=16).map(|p| 1usize << p).collect()
    };
    let bpa_shapes: Vec<(usize, usize)> = if set == "default" {
        vec![(32, 32)]
    } else {
        vec![
            (4, 4),
            (4, 8),
            (8, 8),
            (8, 16),
            (16, 16),
            (16, 32),
            (32, 32),
            (32, 64),
            (64, 64),
        ]
    };

    println!(
        "# bptree_tables: {keys} preloaded random u64 keys, {ops} inserts and finds, \
         {}, seed {seed}",
        match scan_count {
            Some(n) => format!("{n} range operations per maximum length"),
            None => format!("~{scan_elements} elements per scan size"),
        }
    );
    let repeat: usize = arg(&args, "--repeat", 1).max(1);
    let clock: String = arg(&args, "--clock", "cpu".to_string());
    WALL_CLOCK.store(clock == "wall", std::sync::atomic::Ordering::Relaxed);
    println!(
        "# timing: {}",
        if clock == "wall" {
            "wall-clock time"
        } else {
            "CPU time of the busiest worker thread (/proc/thread-self/schedstat)"
        }
    );
    let mut runs: Vec<Row> = Vec::new();
    for round in 0..repeat {
        let mut rows = Vec::new();
        for &t in &threads {
            for &size in &baseline_sizes {
                let tree = BpTree::baseline(&BaselineOptions {
                    node_size: size,
                    internal_size: None,
                })
                .expect("valid baseline options");
                let name = format!("bptree-baseline:node_size={size}");
                rows.push(measure_tree(&name, size, t, &w, tree));
                eprintln!("done {name} t={t}");
            }
            for &(header, block) in &bpa_shapes {
                let opts = BpTreeOptions {
                    log_size: header,
                    num_blocks: header,
                    block_size: block,
                    internal_size: 1024,
                };
                let tree = BpTree::with_options(&opts).expect("valid bptree options");
                let leaf = (header + header + header * block) * pair;
                let name =
                    format!("bptree:log_size={header},num_blocks={header},block_size={block}");
                rows.push(measure_tree(&name, leaf, t, &w, tree));
                eprintln!("done {name} t={t}");
            }
            if t == 1 {
                rows.push(measure_btreemap(&w));
                eprintln!("done BTreeMap");
            }
        }
        eprintln!("round {} of {repeat} done", round + 1);
        runs.extend(rows);
    }
    let rows = medians(runs);

    let columns = |what: &str| {
        lengths
            .iter()
            .map(|&l| format!(" {what} {} |", length_label(l)))
            .collect::<String>()
    };
    println!(
        "\n| structure | leaf bytes | threads | insert Mops/s | find Mops/s |{}{} bytes/record | checksum |",
        columns("iterate"),
        columns("map")
    );
    println!(
        "|---|---|---|---|---|{}---|---|",
        "---|".repeat(2 * lengths.len())
    );
    for r in &rows {
        let f = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {:016x} |",
            r.name,
            if r.leaf_bytes == 0 {
                "-".to_string()
            } else {
                r.leaf_bytes.to_string()
            },
            r.threads,
            r.insert,
            r.find,
            f(&r.iterate),
            f(&r.map),
            r.bytes_per_record
                .map_or("-".to_string(), |b| format!("{b:.1}")),
            r.checksum
        );
    }

    // Ratios the issue's targets are stated in, per thread count.
    let find_row =
        |prefix: &str, t: usize| rows.iter().find(|r| r.name == prefix && r.threads == t);
    for &t in &threads {
        let (Some(bp), Some(base)) = (
            find_row("bptree:log_size=32,num_blocks=32,block_size=32", t),
            find_row("bptree-baseline:node_size=1024", t),
        ) else {
            continue;
        };
        println!(
            "\nbptree / baseline 1 KiB, {t} thread(s): {}",
            ratios(bp, base, &lengths)
        );
        if let Some(std) = find_row("BTreeMap", 1).filter(|_| t == 1) {
            println!("bptree / BTreeMap, 1 thread: {}", ratios(bp, std, &lengths));
        }
    }
}
