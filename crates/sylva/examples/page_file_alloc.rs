//! What the page file's allocation and free paths cost, over a file in memory (no disk I/O):
//! the B+tree's hot path is `allocate()` and `free()` of single pages.
//!
//! ```text
//! cargo run --release -p sylva --example page_file_alloc [PAGES]
//! ```
//!
//! Phases, each timed on its own (ns per call): `grow` allocates `PAGES` pages with nothing free
//! (a load); `free` frees every other one; `reuse` allocates them again; `churn` frees a
//! pseudo-random page and allocates one, `PAGES` times. Then every fourth page is freed and two
//! checkpoints are timed: the first writes that free space, the second follows one more free.
//! Uses only the API every version has, so the same file compares builds.
#![allow(clippy::unwrap_used, missing_docs)]
use std::time::Instant;
use sylva::io::{MemIo, PageFile};

fn per_call(start: Instant, calls: u64) -> f64 {
    start.elapsed().as_nanos() as f64 / calls.max(1) as f64
}

fn main() {
    let pages: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().unwrap());
    let file = PageFile::create_io(Box::new(MemIo::new(Vec::new())), 4096, false).unwrap();

    let t = Instant::now();
    let ids: Vec<u64> = (0..pages).map(|_| file.allocate()).collect();
    let grow = per_call(t, pages);

    let t = Instant::now();
    for &id in ids.iter().step_by(2) {
        file.free(id).unwrap();
    }
    let free = per_call(t, pages / 2);

    let t = Instant::now();
    let mut held: Vec<u64> = (0..pages / 2).map(|_| file.allocate()).collect();
    let reuse = per_call(t, pages / 2);
    held.extend(ids.iter().skip(1).step_by(2));

    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let t = Instant::now();
    for _ in 0..pages {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % held.len() as u64) as usize;
        file.free(held[i]).unwrap();
        held[i] = file.allocate();
    }
    let churn = per_call(t, pages);

    for &id in held.iter().step_by(4) {
        file.free(id).unwrap();
    }
    let checkpoint_ms = || {
        let t = Instant::now();
        file.checkpoint(b"bench").unwrap();
        t.elapsed().as_secs_f64() * 1e3
    };
    let first = checkpoint_ms();
    file.free(held[1]).unwrap();
    let second = checkpoint_ms();
    println!(
        "pages {pages}: grow {grow:.1} ns, free {free:.1} ns, reuse {reuse:.1} ns, churn {churn:.1} ns \
         (free + allocate); checkpoints {first:.2} ms, then {second:.2} ms after one free; \
         file {} pages, {} free",
        file.page_count(),
        file.free_pages()
    );
}
