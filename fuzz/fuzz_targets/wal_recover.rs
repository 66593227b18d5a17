//! Arbitrary bytes as a write-ahead log: recovery must return an error or a contiguous run of
//! records, never panic, and a second recovery of what the first left must find the same records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sylva::io::MemIo;
use sylva::wal::Wal;

fuzz_target!(|data: &[u8]| {
    let io = MemIo::new(data.to_vec());
    let Ok((wal, rec)) = Wal::open(Box::new(io), 1) else {
        return;
    };
    let records = wal
        .recovered_records()
        .expect("replay reads what open found");
    assert_eq!(
        records.len() as u64,
        rec.records,
        "replay returns what the scan counted"
    );
    for pair in records.windows(2) {
        assert_eq!(
            pair[1].0,
            pair[0].0 + 1,
            "recovered LSNs must be contiguous"
        );
    }
    drop(wal);
});
