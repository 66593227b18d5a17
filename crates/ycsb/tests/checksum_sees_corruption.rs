//! Regression test for issue 24, part 1: the record checksum read only the key's first and last
//! 8 bytes and the value's first 8, so an engine that returned values corrupted in their middle
//! (or with the right prefix and a wrong tail) printed the same checksum as a correct one.

use sylva::{KvStore, MemMap, Stats, Visitor};
use ycsb::keys::KeySet;
use ycsb::runner::{run_phase, Session, Shared, Target};
use ycsb::workload::{generate, GenerateParams, WorkloadSpec};

/// `MemMap` behind sessions that flip one byte at `position` of every value they hand out (when
/// the value is long enough), as a buggy engine or a torn read might.
struct Corrupting {
    store: MemMap,
    position: fn(usize) -> usize,
}

struct CorruptingSession<'a> {
    store: &'a MemMap,
    position: fn(usize) -> usize,
}

fn flip(value: &mut [u8], position: fn(usize) -> usize) {
    let at = position(value.len());
    if let Some(b) = value.get_mut(at) {
        *b ^= 0x01;
    }
}

impl Session for CorruptingSession<'_> {
    fn get_into(&mut self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        let found = self.store.get_into(key, out)?;
        flip(out, self.position);
        Ok(found)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        self.store.put(key, value)
    }
    fn delete(&mut self, key: &[u8]) -> sylva::Result<bool> {
        self.store.delete(key)
    }
    fn scan(
        &mut self,
        start: &[u8],
        limit: usize,
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        let mut copy = Vec::new();
        let mut corrupting = corrupting(visitor, self.position, &mut copy);
        self.store.scan(start, limit, &mut corrupting)
    }
    fn map_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visitor: &mut Visitor<'_>,
    ) -> sylva::Result<usize> {
        let mut copy = Vec::new();
        let mut corrupting = corrupting(visitor, self.position, &mut copy);
        self.store.map_range(start, end, &mut corrupting)
    }
}

/// `visitor` behind a visitor that hands it a corrupted copy of every value.
fn corrupting<'a, 'v: 'a>(
    visitor: &'a mut Visitor<'v>,
    position: fn(usize) -> usize,
    copy: &'a mut Vec<u8>,
) -> impl FnMut(&[u8], &[u8]) -> bool + use<'a, 'v> {
    move |k, v| {
        copy.clear();
        copy.extend_from_slice(v);
        flip(copy, position);
        visitor(k, copy)
    }
}

impl Target for Corrupting {
    fn sessions(&mut self, n: usize) -> Result<Vec<Box<dyn Session + '_>>, String> {
        Ok((0..n)
            .map(|_| {
                Box::new(CorruptingSession {
                    store: &self.store,
                    position: self.position,
                }) as Box<dyn Session + '_>
            })
            .collect())
    }
    fn sync(&self) -> sylva::Result<()> {
        Ok(())
    }
    fn stats(&self) -> Stats {
        self.store.stats()
    }
}

/// The run phase's checksum and found/scanned counts of `workload` with `value_size`-byte values
/// (and the `sparse` set's 8-byte keys).
fn run(workload: &str, value_size: usize, target: &mut dyn Target) -> (u64, u64, u64) {
    let spec = WorkloadSpec::named(workload).expect("workload");
    let p = GenerateParams {
        dist: spec.default_dist,
        spec,
        records: 2000,
        ops: 3000,
        seed: 24,
    };
    let w = generate(&p, &KeySet::Sparse.generator(24).expect("keys")).expect("generate");
    run_phase(target, &w.arena, &w.load, 1, value_size, 0, &|_| {}).expect("load");
    let r = run_phase(target, &w.arena, &w.run, 1, value_size, 1 << 40, &|_| {}).expect("run");
    (r.checksum, r.found, r.scanned)
}

#[test]
fn a_byte_corrupted_in_the_middle_or_tail_of_values_changes_the_checksum() {
    // c: point reads; e: ordered scans; y: range maps. 8-byte values take the record hash's
    // 8-byte key and value path, 56-byte ones its general path.
    for (workload, value_size) in [("c", 56), ("e", 56), ("y", 56), ("c", 8), ("e", 8)] {
        let honest = run(workload, value_size, &mut Shared(Box::new(MemMap::new())));
        assert!(honest.1 + honest.2 > 0, "{workload} reads something");
        for (what, position) in [
            ("middle", (|len| len / 2) as fn(usize) -> usize),
            ("last", |len: usize| len.saturating_sub(1)),
        ] {
            let corrupt = run(
                workload,
                value_size,
                &mut Corrupting {
                    store: MemMap::new(),
                    position,
                },
            );
            assert_eq!(
                (corrupt.1, corrupt.2),
                (honest.1, honest.2),
                "{workload}: same records found"
            );
            assert_ne!(
                corrupt.0, honest.0,
                "{workload}: a value corrupted in its {what} byte must change the checksum"
            );
        }
    }
}
