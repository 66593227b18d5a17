//! Out-of-line values on a page file opened with `O_DIRECT` (the default where the file system
//! allows it): a run is read through an aligned buffer, whole pages at a time, and its value
//! copied out (issue 23, `db/overflow.rs`, "Reading"). The database lives in a directory beside
//! the crate, on the disk, since tmpfs refuses `O_DIRECT`; where the disk refuses it too, the
//! test says so and checks the buffered path only.

use std::os::unix::fs::OpenOptionsExt;

use sylva::{Db, DbOptions, SyncMode};

fn direct_io_works(dir: &std::path::Path) -> bool {
    let path = dir.join("probe");
    let ok = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .is_ok();
    let _ = std::fs::remove_file(&path);
    ok
}

#[test]
fn runs_read_back_whole_through_direct_io() {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target-direct-io-test");
    std::fs::create_dir_all(&base).expect("a directory on the disk");
    let tmp = tempfile::tempdir_in(&base).expect("tempdir");
    if !direct_io_works(tmp.path()) {
        eprintln!("O_DIRECT refused here: only the buffered path is tested");
    }
    let options = DbOptions {
        sync: SyncMode::Never,
        direct_io: true,
        cache_bytes: 64 * 4096,
        ..DbOptions::default()
    };
    let sizes = [759usize, 4048, 4049, 5000, 70_001, (1 << 20) + 4097];
    let value =
        |i: usize, len: usize| -> Vec<u8> { (0..len).map(|j| (j * 31 + i * 7) as u8).collect() };
    {
        let db = Db::open(tmp.path().join("db"), options).expect("open");
        for (i, &len) in sizes.iter().enumerate() {
            db.put(format!("k{i}").as_bytes(), &value(i, len))
                .expect("put");
        }
        for (i, &len) in sizes.iter().enumerate() {
            let got = db.get(format!("k{i}").as_bytes()).expect("get");
            assert!(got == Some(value(i, len)), "value {i} of {len} bytes");
        }
        db.close().expect("close");
    }
    let db = Db::open(tmp.path().join("db"), options).expect("reopen");
    for (i, &len) in sizes.iter().enumerate() {
        let got = db.get(format!("k{i}").as_bytes()).expect("get");
        assert!(
            got == Some(value(i, len)),
            "value {i} of {len} bytes after reopen"
        );
    }
    db.check().expect("check");
    drop(db);
    drop(tmp);
    let _ = std::fs::remove_dir(&base);
}
