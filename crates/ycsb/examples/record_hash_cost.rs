//! What consuming one record costs the runner: [`ycsb::runner::record_hash`] against the hashes
//! it replaced, each called from a `dyn FnMut` visitor over records laid out one after another as
//! in a leaf, the way an engine's scan hands them to the runner.
//!
//! ```text
//! cargo run --release -p ycsb --example record_hash_cost -- [--records N] [--passes N] [--rounds N]
//! ```
//!
//! Rows: `visit only` (the visitor call and loop, no hash: subtract it to get a hash's own cost),
//! `three words` (the hash before issue 24: the key's first and last 8 bytes and the value's first
//! 8), `xxh3` (issue 24's first whole-record hash: XXH3-64 of the value seeded with XXH3-64 of the
//! key) and `record_hash` (the one the runner uses). Each cell is the best pass over all rounds;
//! the hashes alternate within a round, so a busy machine slows them alike.

use std::hint::black_box;
use std::time::Instant;

use ycsb::runner::record_hash;

fn three_words(key: &[u8], value: &[u8]) -> u64 {
    fn head(b: &[u8]) -> u64 {
        b.first_chunk::<8>()
            .map_or_else(|| short(b), |w| u64::from_le_bytes(*w))
    }
    fn tail(b: &[u8]) -> u64 {
        b.last_chunk::<8>()
            .map_or_else(|| short(b), |w| u64::from_le_bytes(*w))
    }
    fn short(b: &[u8]) -> u64 {
        b.iter()
            .rev()
            .fold(0, |w, &byte| (w << 8) | u64::from(byte))
    }
    let h = head(key)
        ^ tail(key).rotate_left(29)
        ^ head(value).rotate_left(47)
        ^ ((key.len() as u64) << 56);
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (value.len() as u64)
}

fn xxh3(key: &[u8], value: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(value, xxhash_rust::xxh3::xxh3_64(key))
}

fn visit_only(key: &[u8], value: &[u8]) -> u64 {
    (key.len() ^ value.len()) as u64
}

const NAMES: [&str; 4] = ["visit only", "three words", "xxh3", "record_hash"];

/// Hands every record of `leaf` (records of `klen + vlen` bytes) to `visitor`, as a scan does.
#[inline(never)]
fn scan(leaf: &[u8], klen: usize, vlen: usize, visitor: &mut dyn FnMut(&[u8], &[u8]) -> bool) {
    for record in leaf.chunks_exact(klen + vlen) {
        let (k, v) = record.split_at(klen);
        if !visitor(k, v) {
            break;
        }
    }
}

/// The best of `passes` scans of `leaf` consuming each record into a sum of `hash`es, in ns per
/// record. Generic so that each hash is inlined into the visitor, as in the runner.
fn measure(
    leaf: &[u8],
    klen: usize,
    vlen: usize,
    passes: usize,
    hash: impl Fn(&[u8], &[u8]) -> u64,
) -> f64 {
    let records = leaf.len() / (klen + vlen);
    let mut best = f64::MAX;
    let mut sum = 0u64;
    for _ in 0..passes {
        let started = Instant::now();
        scan(black_box(leaf), klen, vlen, &mut |k, v| {
            sum = sum.wrapping_add(hash(k, v));
            true
        });
        best = best.min(started.elapsed().as_secs_f64() * 1e9 / records as f64);
    }
    black_box(sum);
    best
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, not {v}"))
        })
}

fn main() {
    let records = arg("--records", 16_384);
    let passes = arg("--passes", 20);
    let rounds = arg("--rounds", 5);
    println!("ns per record (best of {rounds} rounds x {passes} passes over {records} records)");
    print!("key  value");
    for name in NAMES {
        print!("  {name:>11}");
    }
    println!();
    for (klen, vlen) in [(8, 8), (8, 56), (40, 56)] {
        let leaf: Vec<u8> = (0..records * (klen + vlen))
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
            .collect();
        let mut best = [f64::MAX; NAMES.len()];
        for _ in 0..rounds {
            let round = [
                measure(&leaf, klen, vlen, passes, visit_only),
                measure(&leaf, klen, vlen, passes, three_words),
                measure(&leaf, klen, vlen, passes, xxh3),
                measure(&leaf, klen, vlen, passes, record_hash),
            ];
            for (b, ns) in best.iter_mut().zip(round) {
                *b = b.min(ns);
            }
        }
        print!("{klen:>3}  {vlen:>5}");
        for ns in best {
            print!("  {ns:>11.2}");
        }
        println!();
    }
}
