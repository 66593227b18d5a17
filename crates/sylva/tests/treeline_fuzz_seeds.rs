//! The TreeLine fuzz targets' drivers (`sylva::fuzz::treeline_page`,
//! `sylva::fuzz::treeline_log_payload`, run by `fuzz/`) over seeds from a real store: every
//! page of its file, each with every TreeLine-header and slotted-header byte set to a few
//! values, and every log record cut at each length and with each byte bumped. A deterministic
//! sample of what the fuzzers explore, run on stable: a decoder change that panics on damaged
//! bytes fails here. (The drivers must return, whatever the bytes; a panic fails the test.)

#![allow(clippy::unwrap_used)]

use sylva::{SyncMode, TreeLine, TreeLineOptions};

const PAGE: usize = 4096;

#[test]
fn the_drivers_survive_damaged_pages_and_records_of_a_real_store() {
    let dir = tempfile::tempdir().unwrap();
    let o = TreeLineOptions {
        sync: SyncMode::Always,
        goal: 4,
        epsilon: 2,
        direct_io: false,
        background: false,
        forecast: false,
        cache_bytes: 1 << 20,
        ..TreeLineOptions::default()
    };
    let db = TreeLine::open(dir.path(), o).unwrap();
    for i in 0..3000u64 {
        let k = format!("user{:06}", i * 7919 % 10_007);
        db.put(k.as_bytes(), &[i as u8; 40]).unwrap();
        if i == 2500 {
            // The pages written; the log from here on holds the rest.
            db.checkpoint().unwrap();
        }
    }
    db.simulate_crash();
    let data = std::fs::read(dir.path().join("data.sylva")).unwrap();
    let mut pages = 0;
    for page in data.chunks(PAGE).skip(2) {
        if page[6] != 16 && page[6] != 17 {
            continue;
        }
        pages += 1;
        // The driver seals the page itself: hand it the bytes after the common header too.
        sylva::fuzz::treeline_page(page);
        for at in 32..32 + 64 + 32 {
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut bad = page.to_vec();
                bad[at] = v;
                sylva::fuzz::treeline_page(&bad);
            }
        }
    }
    assert!(pages > 10, "{pages} TreeLine pages");
    let log = std::fs::read(dir.path().join("wal.log")).unwrap();
    let mut records = 0;
    let mut at = 32;
    while at + 20 <= log.len() {
        let n = u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        let Some(payload) = log.get(at + 20..at + 20 + n) else {
            break;
        };
        if n == 0 {
            break;
        }
        records += 1;
        if records < 200 {
            for cut in 0..payload.len() {
                sylva::fuzz::treeline_log_payload(&payload[..cut]);
            }
            for i in 0..payload.len().min(64) {
                let mut bumped = payload.to_vec();
                bumped[i] = bumped[i].wrapping_add(1);
                sylva::fuzz::treeline_log_payload(&bumped);
            }
        }
        at += 20 + n;
    }
    assert!(records > 100, "{records} log records");
}
