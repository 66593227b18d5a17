//! Each engine owns a range of log record types (`sylva::wal::record::RecordOwner`,
//! docs/format.md "Record types"): a `Db` whose log holds an intact record of a type it does not
//! write (another engine's, an unassigned one, or one of its own range it does not know)
//! refuses to open with `Error::LogCorruption` saying which, and never applies it.

use std::path::Path;

use sylva::btree::Layout;
use sylva::{Db, DbOptions, Error, SyncMode};

const FIXTURE: &str = "db-v2-pages-edit";

/// A copy of the fixture with the type of its first logged record set to `t` (the frame's
/// checksum recomputed, so the record stays intact).
fn with_first_record_type(t: u8) -> tempfile::TempDir {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(FIXTURE);
    let dir = tempfile::tempdir().expect("tempdir");
    for f in ["data.sylva", "wal.log", "wal.2.log"] {
        std::fs::copy(from.join(f), dir.path().join(f)).expect("copy");
    }
    let wal = dir.path().join("wal.log");
    let mut log = std::fs::read(&wal).expect("read");
    // Version 2: a 32-byte header, then `len u32 | crc u32 | lsn u64 | gap u32 | payload`.
    assert_eq!(log[8], 2);
    let len = u32::from_le_bytes(log[32..36].try_into().expect("4 bytes")) as usize;
    log[52] = t;
    let crc = crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(&log[32..36]), &log[40..52]),
        &log[52..52 + len],
    );
    log[36..40].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&wal, log).expect("write");
    dir
}

#[test]
fn a_record_type_db_does_not_write_is_log_corruption_naming_its_owner() {
    let options = DbOptions {
        sync: SyncMode::Always,
        cache_bytes: 1 << 20,
        layout: Layout::Adaptive,
        direct_io: false,
        background: false,
        ..DbOptions::default()
    };
    for (t, says) in [
        (0u8, "record type 0 is unassigned"),
        (
            9,
            "record type 9 is in Db's range (1–31) but not one this build writes",
        ),
        (40, "record type 40 is TreeLine's (32–63), not Db's (1–31)"),
        (
            64,
            "record type 64 is the NB-tree's (64–95), not Db's (1–31)",
        ),
        (250, "record type 250 is unassigned"),
    ] {
        let dir = with_first_record_type(t);
        match Db::open(dir.path(), options) {
            Err(Error::LogCorruption { detail, .. }) => {
                assert!(detail.contains(says), "type {t}: {detail}");
            }
            Err(e) => panic!("type {t}: {e:?}"),
            Ok(_) => panic!("type {t}: opened"),
        }
    }
}
