//! YCSB workloads: their operation mixes, and the generation of the operations both phases run.
//!
//! Operations are generated before anything is timed, into one [`OpStream`] per phase over a
//! shared [`KeyArena`], so every engine in a run replays exactly the same operations and the
//! generator's cost never lands in a measurement.
//!
//! The load phase inserts records `0..N` in a seeded random order (YCSB likewise scatters its
//! load by hashing the insert sequence). The run phase draws each operation's kind from the
//! workload's proportions and its record from the request distribution over the records that
//! exist so far; inserts during the run create records `N, N+1, …`.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dist::{Chooser, Distribution};
use crate::keys::KeyGen;
use crate::WorkloadError;

/// Every key of a run, stored once, addressed by a dense id (for generated workloads the id is
/// the record number).
///
/// When every key has the same length (generated workloads), a key's place is computed from its
/// id without reading `ends`, and [`KeyArena::prefetch`] can start loading it ahead of use: ids
/// are drawn at random, so each key read would otherwise be a cache miss that the runner, not
/// the engine, pays for.
#[derive(Debug, Default, Clone)]
pub struct KeyArena {
    bytes: Vec<u8>,
    ends: Vec<u64>,
    /// The length shared by every key so far (`None`: empty, or lengths differ).
    uniform: Option<usize>,
}

impl KeyArena {
    /// The key with id `id`.
    #[inline]
    pub fn get(&self, id: u64) -> &[u8] {
        let id = id as usize;
        if let Some(n) = self.uniform {
            return &self.bytes[id * n..(id + 1) * n];
        }
        let start = if id == 0 {
            0
        } else {
            self.ends[id - 1] as usize
        };
        &self.bytes[start..self.ends[id] as usize]
    }

    /// Starts loading the key with id `id` into the cache (a hint; no effect on results).
    #[inline]
    pub fn prefetch(&self, id: u64) {
        let Some(n) = self.uniform else { return };
        let Some(byte) = self.bytes.get(id as usize * n) else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: prefetching is a hint that never faults; the address is inside `bytes`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast::<i8>()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = byte;
    }

    /// Number of keys.
    pub fn len(&self) -> u64 {
        self.ends.len() as u64
    }

    /// Whether the arena holds no key.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Adds a key and returns its id.
    pub fn push(&mut self, key: &[u8]) -> u64 {
        self.bytes.extend_from_slice(key);
        self.push_written()
    }

    /// Adds the key `write` appends to the arena's bytes, and returns its id.
    fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> u64 {
        write(&mut self.bytes);
        self.push_written()
    }

    fn push_written(&mut self) -> u64 {
        let start = self.ends.last().copied().unwrap_or(0) as usize;
        let len = self.bytes.len() - start;
        self.uniform = match self.uniform {
            _ if self.ends.is_empty() => Some(len),
            Some(n) if n == len => Some(n),
            _ => None,
        };
        self.ends.push(self.bytes.len() as u64);
        self.ends.len() as u64 - 1
    }
}

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Point lookup.
    Read,
    /// Overwrite of an existing record.
    Update,
    /// Insert of a new record.
    Insert,
    /// Ordered scan of `arg` records from the key.
    Scan,
    /// Ordered scan from the key up to (excluding) the key with id `arg`.
    ScanTo,
    /// Unordered range map over `[key, key with id arg)`.
    Map,
    /// Read, then write back a new value.
    ReadModifyWrite,
    /// Delete.
    Delete,
}

/// One operation: a kind, a key id and an argument (scan length or end key id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// What to do.
    pub kind: OpKind,
    /// The key's id in the arena.
    pub key: u64,
    /// Scan length (`Scan`), end key id (`ScanTo`, `Map`), unused otherwise.
    pub arg: u64,
}

/// A phase's operations.
pub type OpStream = Vec<Op>;

/// A workload's operation mix.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// Its letter (`a`…`f`, `x`, `y`).
    pub name: char,
    /// Proportion of reads.
    pub read: f64,
    /// Proportion of updates.
    pub update: f64,
    /// Proportion of inserts.
    pub insert: f64,
    /// Proportion of ordered scans.
    pub scan: f64,
    /// Proportion of unordered range maps.
    pub map: f64,
    /// Proportion of read-modify-writes.
    pub rmw: f64,
    /// Longest scan or map, in records; lengths are uniform in `1..=max_scan`.
    pub max_scan: u64,
    /// The request distribution the workload is defined with.
    pub default_dist: Distribution,
}

impl WorkloadSpec {
    /// The workload named `name`: YCSB's core workloads `a`–`f` and the BP-tree paper's `x`
    /// (100% ordered range iteration) and `y` (100% range map).
    pub fn named(name: &str) -> Result<Self, WorkloadError> {
        let z = Distribution::Zipfian;
        let base =
            |name, read, update, insert, scan, map, rmw, max_scan, default_dist| WorkloadSpec {
                name,
                read,
                update,
                insert,
                scan,
                map,
                rmw,
                max_scan,
                default_dist,
            };
        Ok(match name {
            "a" => base('a', 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 100, z),
            "b" => base('b', 0.95, 0.05, 0.0, 0.0, 0.0, 0.0, 100, z),
            "c" => base('c', 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 100, z),
            "d" => base(
                'd',
                0.95,
                0.0,
                0.05,
                0.0,
                0.0,
                0.0,
                100,
                Distribution::Latest,
            ),
            "e" => base('e', 0.0, 0.0, 0.05, 0.95, 0.0, 0.0, 100, z),
            "f" => base('f', 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 100, z),
            "x" => base('x', 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 10_000, z),
            "y" => base('y', 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 10_000, z),
            _ => {
                return Err(WorkloadError::Invalid(format!(
                    "unknown workload `{name}`; valid: a, b, c, d, e, f, x, y"
                )))
            }
        })
    }

    fn pick(&self, u: f64) -> OpKind {
        let mut acc = 0.0;
        for (p, kind) in [
            (self.read, OpKind::Read),
            (self.update, OpKind::Update),
            (self.insert, OpKind::Insert),
            (self.scan, OpKind::Scan),
            (self.map, OpKind::Map),
            (self.rmw, OpKind::ReadModifyWrite),
        ] {
            acc += p;
            if u < acc {
                return kind;
            }
        }
        OpKind::Read
    }
}

/// Everything a benchmark replays: the keys and both phases' operations.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Every key.
    pub arena: KeyArena,
    /// The load phase.
    pub load: OpStream,
    /// The run phase.
    pub run: OpStream,
}

/// Parameters of a generated workload.
#[derive(Debug, Clone)]
pub struct GenerateParams {
    /// The mix.
    pub spec: WorkloadSpec,
    /// The request distribution.
    pub dist: Distribution,
    /// Records loaded before the run.
    pub records: u64,
    /// Operations in the run phase.
    pub ops: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

/// Generates the load and run phases.
pub fn generate(params: &GenerateParams, keys: &KeyGen) -> Result<Workload, WorkloadError> {
    let GenerateParams {
        spec,
        dist,
        records,
        ops,
        seed,
    } = params;
    let (records, ops) = (*records, *ops);
    if records == 0 {
        return Err(WorkloadError::Invalid(
            "--records must be at least 1".into(),
        ));
    }
    if let Some(cap) = keys.capacity() {
        let expected_inserts = (ops as f64 * spec.insert * 1.2) as u64 + 16;
        if records + expected_inserts > cap {
            return Err(WorkloadError::Invalid(format!(
                "the key file has {cap} keys; {records} records plus about {expected_inserts} run-phase inserts need more"
            )));
        }
    }
    let mut rng = SmallRng::seed_from_u64(*seed);
    let mut arena = KeyArena::default();
    for i in 0..records {
        arena.push_with(|out| keys.write_key(i, out));
    }

    let mut order: Vec<u64> = (0..records).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let load = order
        .into_iter()
        .map(|key| Op {
            kind: OpKind::Insert,
            key,
            arg: 0,
        })
        .collect();

    // Range maps need the key that lies `len` records after the start in key order.
    let sorted: Vec<u64> = if spec.map > 0.0 {
        let mut s: Vec<u64> = (0..records).collect();
        s.sort_unstable_by(|&a, &b| arena.get(a).cmp(arena.get(b)));
        s
    } else {
        Vec::new()
    };
    let rank: Vec<u64> = if sorted.is_empty() {
        Vec::new()
    } else {
        let mut r = vec![0u64; sorted.len()];
        for (pos, &id) in sorted.iter().enumerate() {
            r[id as usize] = pos as u64;
        }
        r
    };

    let mut chooser = Chooser::new(*dist, records, (ops as f64 * spec.insert) as u64);
    let mut existing = records;
    let mut run = Vec::with_capacity(ops as usize);
    for _ in 0..ops {
        let kind = spec.pick(rng.random());
        let op = match kind {
            OpKind::Insert => {
                if keys.capacity().is_some_and(|cap| existing >= cap) {
                    return Err(WorkloadError::Invalid(
                        "the key file ran out of keys for run-phase inserts".into(),
                    ));
                }
                let id = arena.push_with(|out| keys.write_key(existing, out));
                existing += 1;
                Op {
                    kind,
                    key: id,
                    arg: 0,
                }
            }
            OpKind::Scan => {
                let len = rng.random_range(1..=spec.max_scan);
                Op {
                    kind,
                    key: chooser.choose(&mut rng, existing),
                    arg: len,
                }
            }
            OpKind::Map => {
                let len = rng.random_range(1..=spec.max_scan);
                let start = chooser.choose(&mut rng, records);
                let end_pos = (rank[start as usize] + len).min(records - 1);
                Op {
                    kind,
                    key: start,
                    arg: sorted[end_pos as usize],
                }
            }
            _ => Op {
                kind,
                key: chooser.choose(&mut rng, existing),
                arg: 0,
            },
        };
        run.push(op);
    }
    Ok(Workload { arena, load, run })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeySet;

    fn params(name: &str, records: u64, ops: u64, seed: u64) -> GenerateParams {
        let spec = WorkloadSpec::named(name).expect("workload");
        GenerateParams {
            dist: spec.default_dist,
            spec,
            records,
            ops,
            seed,
        }
    }

    #[test]
    fn arena_returns_each_key_whether_lengths_are_uniform_or_not() {
        let mut a = KeyArena::default();
        let uniform: Vec<[u8; 3]> = (0..50u8).map(|i| [i, i ^ 0x5a, 7]).collect();
        for k in &uniform {
            a.push(k);
        }
        for (id, k) in uniform.iter().enumerate() {
            assert_eq!(a.get(id as u64), k);
            a.prefetch(id as u64);
        }
        // A longer key ends the uniform layout; every key stays reachable.
        a.push(b"longer key");
        a.push(b"");
        a.push(b"xyz");
        for (id, k) in uniform.iter().enumerate() {
            assert_eq!(a.get(id as u64), k);
        }
        assert_eq!(a.get(50), b"longer key");
        assert_eq!(a.get(51), b"");
        assert_eq!(a.get(52), b"xyz");
        a.prefetch(52);
        a.prefetch(1_000);
    }

    #[test]
    fn operation_mix_is_within_one_percent() {
        let g = KeySet::Dense.generator(0).expect("keys");
        for name in ["a", "b", "c", "d", "e", "f", "x", "y"] {
            let p = params(name, 10_000, 1_000_000, 11);
            let w = generate(&p, &g).expect("generate");
            let n = w.run.len() as f64;
            let share = |k: OpKind| w.run.iter().filter(|o| o.kind == k).count() as f64 / n;
            for (want, kind) in [
                (p.spec.read, OpKind::Read),
                (p.spec.update, OpKind::Update),
                (p.spec.insert, OpKind::Insert),
                (p.spec.scan, OpKind::Scan),
                (p.spec.map, OpKind::Map),
                (p.spec.rmw, OpKind::ReadModifyWrite),
            ] {
                let got = share(kind);
                assert!(
                    (got - want).abs() <= 0.01,
                    "workload {name}: {kind:?} share {got:.4}, want {want}"
                );
            }
        }
    }

    #[test]
    fn scan_lengths_stay_in_range() {
        let g = KeySet::Dense.generator(0).expect("keys");
        for (name, max) in [("e", 100), ("x", 10_000)] {
            let w = generate(&params(name, 1000, 100_000, 5), &g).expect("generate");
            let lens: Vec<u64> = w
                .run
                .iter()
                .filter(|o| o.kind == OpKind::Scan)
                .map(|o| o.arg)
                .collect();
            assert!(
                lens.iter().all(|&l| (1..=max).contains(&l)),
                "workload {name}: scan length out of 1..={max}"
            );
            assert!(
                lens.contains(&1) && lens.contains(&max),
                "workload {name}: both ends of the range should occur"
            );
        }
    }

    #[test]
    fn map_ranges_end_after_their_start() {
        let g = KeySet::Sparse.generator(3).expect("keys");
        let w = generate(&params("y", 5000, 20_000, 9), &g).expect("generate");
        for op in &w.run {
            assert!(
                w.arena.get(op.key) <= w.arena.get(op.arg),
                "map range ends before it starts"
            );
        }
    }

    #[test]
    fn same_seed_same_operations_other_seed_other_operations() {
        let g = KeySet::Urls.generator(1).expect("keys");
        let a = generate(&params("e", 2000, 10_000, 42), &g).expect("generate");
        let b = generate(&params("e", 2000, 10_000, 42), &g).expect("generate");
        let c = generate(&params("e", 2000, 10_000, 43), &g).expect("generate");
        assert_eq!(a.load, b.load);
        assert_eq!(a.run, b.run);
        assert_eq!(a.arena.bytes, b.arena.bytes);
        assert_ne!(a.run, c.run);
    }

    #[test]
    fn inserts_create_new_records_and_reads_only_existing_ones() {
        let g = KeySet::Dense.generator(0).expect("keys");
        let w = generate(&params("d", 1000, 50_000, 8), &g).expect("generate");
        let mut existing = 1000;
        for op in &w.run {
            match op.kind {
                OpKind::Insert => {
                    assert_eq!(op.key, existing, "inserts take the next record number");
                    existing += 1;
                }
                _ => assert!(op.key < existing, "operation on a record not yet inserted"),
            }
        }
        let mut load: Vec<u64> = w.load.iter().map(|o| o.key).collect();
        load.sort_unstable();
        assert_eq!(
            load,
            (0..1000).collect::<Vec<_>>(),
            "the load phase inserts every record once"
        );
    }

    #[test]
    fn zero_records_is_an_error() {
        let g = KeySet::Dense.generator(0).expect("keys");
        assert!(generate(&params("c", 0, 10, 1), &g).is_err());
    }
}
