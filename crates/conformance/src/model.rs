//! The model test: random operation sequences run against the engine and a `MemMap` model.

use std::cell::RefCell;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sylva::{KvStore, Limits, MemMap};

use crate::edge::{map_vec, scan_vec};
use crate::keys::{num_key, value_for, KeyShape};
use crate::Subject;

/// A key in a generated operation: one of a small pool of awkward keys, or a number.
#[derive(Debug, Clone, Copy)]
enum KeyRef {
    Pool(usize),
    Num(u64),
}

#[derive(Debug, Clone)]
enum Op {
    Put(KeyRef, u64, usize),
    Get(KeyRef),
    Delete(KeyRef),
    Scan(KeyRef, usize),
    Map(KeyRef, KeyRef),
    /// Inserts a run of consecutive numeric keys: enough to split nodes.
    PutRun(u64, u16, u64),
    /// Deletes a run of consecutive numeric keys: enough to merge nodes.
    DeleteRun(u64, u16),
    Sync,
    Reopen,
}

const NUM_KEYS: u64 = 6000;

fn pool(limits: &Limits) -> Vec<Vec<u8>> {
    match KeyShape::of(limits) {
        KeyShape::Fixed(_) => [
            0,
            1,
            255,
            256,
            1 << 32,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ]
        .iter()
        .map(|&n| num_key(limits, n))
        .collect(),
        KeyShape::Variable { min, max } => {
            let mut keys: Vec<Vec<u8>> = [
                &b"a"[..],
                b"ab",
                b"abc",
                b"abd",
                b"b",
                b"\x00",
                b"\x00\x00",
                b"\xff",
                b"\xff\xff",
                b"a\x00",
                b"https://www.example.com/",
                b"https://www.example.com/a",
                b"https://www.example.com/ab",
                b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
            ]
            .iter()
            .map(|k| k.to_vec())
            .collect();
            keys.push(vec![0x42; max.min(300)]);
            keys.retain(|k| k.len() >= min && k.len() <= max);
            keys
        }
    }
}

fn key_ref() -> impl Strategy<Value = KeyRef> {
    prop_oneof![
        1 => (0usize..64).prop_map(KeyRef::Pool),
        3 => (0..NUM_KEYS).prop_map(KeyRef::Num),
    ]
}

fn op(reopens: bool, sizes: Vec<usize>) -> impl Strategy<Value = Op> {
    let special = !sizes.is_empty();
    let sizes = if special { sizes } else { vec![0] };
    let value_len = prop_oneof![
        8 => 0usize..40,
        1 => 40usize..600,
        if special { 1 } else { 0 } => proptest::sample::select(sizes),
    ];
    prop_oneof![
        30 => (key_ref(), any::<u64>(), value_len).prop_map(|(k, s, l)| Op::Put(k, s, l)),
        20 => key_ref().prop_map(Op::Get),
        12 => key_ref().prop_map(Op::Delete),
        10 => (key_ref(), prop_oneof![0usize..5, 5usize..300]).prop_map(|(k, n)| Op::Scan(k, n)),
        6 => (key_ref(), key_ref()).prop_map(|(a, b)| Op::Map(a, b)),
        3 => (0..NUM_KEYS, 1u16..1500, any::<u64>()).prop_map(|(s, n, v)| Op::PutRun(s, n, v)),
        2 => (0..NUM_KEYS, 1u16..1500).prop_map(|(s, n)| Op::DeleteRun(s, n)),
        1 => Just(Op::Sync),
        if reopens { 1 } else { 0 } => Just(Op::Reopen),
    ]
}

/// Runs the model test with the number of cases in `SYLVA_PROPTEST_CASES` (default 48).
pub fn model_test<S: Subject>(subject: &mut S) {
    let cases = std::env::var("SYLVA_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48);
    model_test_with_cases(subject, cases);
}

/// Runs the model test with `cases` random sequences.
pub fn model_test_with_cases<S: Subject>(subject: &mut S, cases: u32) {
    let reopens = subject.reopens();
    let sizes = match subject.value_size_limit() {
        Some(inline) => crate::sizes_around(&subject.open().limits(), inline),
        None => Vec::new(),
    };
    let subject = RefCell::new(subject);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(op(reopens, sizes), 1..200);
    let result = runner.run(&strategy, |ops| {
        let mut subject = subject.borrow_mut();
        run_sequence(&mut **subject, &ops).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("model test failed: {e}");
    }
}

fn run_sequence<S: Subject>(subject: &mut S, ops: &[Op]) -> Result<(), String> {
    let mut store = subject.open();
    let limits = store.limits();
    let model = MemMap::with_limits(limits);
    let pool = pool(&limits);
    let key = |k: KeyRef| match k {
        KeyRef::Pool(i) => pool[i % pool.len()].clone(),
        KeyRef::Num(n) => num_key(&limits, n),
    };
    for (step, op) in ops.iter().enumerate() {
        let at = |what: &str| format!("step {step} ({op:?}): {what}");
        match *op {
            Op::Put(k, seed, len) => {
                let (k, v) = (key(k), value_for(&limits, seed, len));
                let (got, want) = (store.put(&k, &v), model.put(&k, &v));
                if got.is_ok() != want.is_ok() {
                    return Err(at(&format!("put returned {got:?}, model {want:?}")));
                }
            }
            Op::Get(k) => {
                let k = key(k);
                let (got, want) = (
                    store.get(&k).map_err(|e| at(&e.to_string()))?,
                    model.get(&k).map_err(|e| e.to_string())?,
                );
                if got != want {
                    return Err(at(&format!("get returned {got:?}, model {want:?}")));
                }
            }
            Op::Delete(k) => {
                let k = key(k);
                let got = store.delete(&k).map_err(|e| at(&e.to_string()))?;
                let want = model.delete(&k).map_err(|e| e.to_string())?;
                if got != want {
                    return Err(at(&format!("delete returned {got}, model {want}")));
                }
            }
            Op::Scan(k, limit) => {
                let k = key(k);
                let (got, want) = (scan_vec(&store, &k, limit), scan_vec(&model, &k, limit));
                if got != want {
                    return Err(at(&format!(
                        "scan gave {} records, model {}; first difference at {:?}",
                        got.len(),
                        want.len(),
                        got.iter().zip(&want).position(|(a, b)| a != b)
                    )));
                }
            }
            Op::Map(a, b) => {
                let (a, b) = (key(a), key(b));
                let (got, want) = (map_vec(&store, &a, &b), map_vec(&model, &a, &b));
                if got != want {
                    return Err(at(&format!(
                        "map_range gave {} records, model {}",
                        got.len(),
                        want.len()
                    )));
                }
            }
            Op::PutRun(start, n, seed) => {
                for i in start..(start + u64::from(n)).min(NUM_KEYS) {
                    let (k, v) = (num_key(&limits, i), value_for(&limits, seed ^ i, 8));
                    store.put(&k, &v).map_err(|e| at(&e.to_string()))?;
                    model.put(&k, &v).map_err(|e| e.to_string())?;
                }
            }
            Op::DeleteRun(start, n) => {
                for i in start..(start + u64::from(n)).min(NUM_KEYS) {
                    let k = num_key(&limits, i);
                    let got = store.delete(&k).map_err(|e| at(&e.to_string()))?;
                    let want = model.delete(&k).map_err(|e| e.to_string())?;
                    if got != want {
                        return Err(at(&format!("delete of {i} returned {got}, model {want}")));
                    }
                }
            }
            Op::Sync => store.sync().map_err(|e| at(&e.to_string()))?,
            Op::Reopen => store = subject.reopen(store),
        }
        let (got, want) = (store.stats().records, model.stats().records);
        if got != want {
            return Err(at(&format!("stats().records is {got}, model has {want}")));
        }
    }
    if scan_vec(&store, &[], usize::MAX) != model.to_vec() {
        return Err("final full scan differs from the model".into());
    }
    subject.check(&store)
}
