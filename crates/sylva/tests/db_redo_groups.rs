//! Redo applies a leaf's puts and deletes grouped by page, each page's in log order, in groups of
//! at most 32 MiB of keys and values (`db/recovery.rs`). A log of several groups' worth of
//! overwrites and deletes of the same few thousand keys (each key written several times within
//! a group, often on the same page), with splits and merges between them, must recover to
//! exactly the acknowledged records: a group applied out of order within a page, or records
//! lost or repeated at a group's boundary, leave a wrong value behind.

mod db_common;

use std::collections::BTreeMap;

use db_common::{contents, Rng};
use sylva::{Db, DbOptions, SyncMode};

/// Writes about `log_mib` MiB of puts and deletes with no checkpoint, crashes, recovers and
/// compares; `cache_bytes` small makes redo evict (and prefetch pages that are not resident).
fn recover_groups(cache_bytes: u64, log_mib: u64, seed: u64) {
    let dir = db_common::tmp();
    let options = DbOptions {
        sync: SyncMode::Never,
        cache_bytes,
        checkpoint_bytes: 1 << 40,
        background: false,
        ..DbOptions::default()
    };
    let db = Db::open(dir.path(), options).expect("open");
    let mut model = BTreeMap::new();
    let mut rng = Rng::new(seed);
    let (mut written, mut tag) = (0u64, 0u64);
    while written < log_mib << 20 {
        let k = format!("key{:05}", rng.below(12_000)).into_bytes();
        if rng.below(8) == 0 {
            db.delete(&k).expect("delete");
            model.remove(&k);
            written += k.len() as u64;
        } else {
            tag += 1;
            // Values of varied length: overwrites move records within the page, and some
            // pages split or merge between groups.
            let len = 200 + rng.below(400) as usize;
            let v = db_common::tagged_value(&k, tag, len);
            db.put(&k, &v).expect("put");
            written += (k.len() + v.len()) as u64;
            model.insert(k, v);
        }
    }
    db.sync().expect("sync");
    db.simulate_crash();

    let db = Db::open(dir.path(), options).expect("recover");
    let redone = db.recovery().records_redone;
    assert!(
        redone >= tag,
        "recovery redid {redone} records, fewer than the {tag} puts logged since the checkpoint"
    );
    let got = contents(&db).expect("read back");
    if got != model {
        panic!(
            "after redoing {redone} records: {}",
            db_common::differences(&got, &model, 5)
        );
    }
    let report = db.check().expect("check");
    assert_eq!(report.records, model.len() as u64);
    db.close().expect("close");
}

#[test]
fn a_log_of_several_groups_recovers_exactly() {
    recover_groups(64 << 20, 100, 1);
}

#[test]
fn a_log_of_several_groups_recovers_exactly_through_a_small_pool() {
    recover_groups(128 * 4096, 70, 2);
}
