//! The NB-tree's fuzz drivers (`sylva::fuzz::nbtree_*`, run by `fuzz/fuzz_targets/nbtree_*`)
//! over seeds from a real store and every one-byte change and truncation of them: none panics.
//! The manifest seed decodes (so the mutations start from a valid manifest), and a damaged one
//! is refused, not read as another s-tree.

#![allow(clippy::unwrap_used)]

use sylva::{NbTree, NbTreeOptions, SyncMode};

const PS: usize = 4096;

fn store_bytes() -> Vec<u8> {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let nb = NbTree::open(
        dir.path().join("nb"),
        NbTreeOptions {
            sync: SyncMode::Never,
            sigma: Some(64 << 10),
            deamortize: false,
            ..NbTreeOptions::default()
        },
    )
    .unwrap();
    for i in 0..4000u32 {
        nb.put(&i.wrapping_mul(2_654_435_761).to_be_bytes(), &[7; 60])
            .unwrap();
    }
    nb.close().unwrap();
    std::fs::read(dir.path().join("nb/data.sylva")).unwrap()
}

fn engine_bytes(file: &[u8], page: usize) -> &[u8] {
    &file[page * PS + 32..(page + 1) * PS]
}

fn kind(file: &[u8], page: usize) -> u8 {
    file[page * PS + 6]
}

/// The manifest a head page names (the last head in the file: every head, current or replaced,
/// names a manifest that was valid when written).
fn manifest(file: &[u8]) -> Vec<u8> {
    let pages = file.len() / PS;
    let head = (2..pages)
        .rev()
        .find(|&p| kind(file, p) == 35 && &engine_bytes(file, p)[0..4] == b"NBmh")
        .expect("a manifest head");
    let e = engine_bytes(file, head);
    let n = u32::from_le_bytes(e[4..8].try_into().unwrap()) as usize;
    let first = u64::from_le_bytes(e[8..16].try_into().unwrap()) as usize;
    let len = u64::from_le_bytes(e[16..24].try_into().unwrap()) as usize;
    let mut bytes: Vec<u8> = (first..first + n)
        .flat_map(|p| engine_bytes(file, p).to_vec())
        .collect();
    bytes.truncate(len);
    bytes
}

fn mutations(seed: &[u8], each: impl Fn(&[u8])) {
    each(seed);
    for cut in 0..seed.len() {
        each(&seed[..cut]);
    }
    let mut m = seed.to_vec();
    for at in 0..m.len() {
        for delta in [1u8, 0x80, 0xff] {
            m[at] = m[at].wrapping_add(delta);
            each(&m);
            m[at] = m[at].wrapping_sub(delta);
        }
    }
}

#[test]
fn the_nbtree_decoders_survive_every_small_change_of_real_bytes() {
    let file = store_bytes();
    let m = manifest(&file);
    assert!(
        m.len() > 100,
        "a manifest with several s-nodes: {} bytes",
        m.len()
    );
    assert!(
        sylva::fuzz::nbtree_manifest(&m),
        "the real manifest decodes"
    );
    assert!(
        !sylva::fuzz::nbtree_manifest(&m[..m.len() - 1]),
        "a cut one is refused"
    );
    mutations(&m, |b| {
        sylva::fuzz::nbtree_manifest(b);
    });

    let pages = file.len() / PS;
    let bloom: Vec<u8> = (2..pages)
        .filter(|&p| kind(&file, p) == 34)
        .take(2)
        .flat_map(|p| engine_bytes(&file, p).to_vec())
        .collect();
    assert!(!bloom.is_empty(), "the store has Bloom pages");
    let blocks = u32::from_le_bytes(bloom[0..4].try_into().unwrap()) as usize;
    let filter = &bloom[..(8 + 64 * blocks).min(bloom.len())];
    mutations(&filter[..filter.len().min(1200)], sylva::fuzz::nbtree_bloom);

    let mut payloads: Vec<Vec<u8>> = vec![
        [&[64u8, 3, 0][..], b"keyvalue"].concat(),
        [&[65u8][..], b"key"].concat(),
        [
            &[66u8, 2, 0, 0, 0, 1, 1, 0, 2, 0, 0, 0][..],
            b"ab",
            &[2, 1, 0, 0, 0, 0, 0],
            b"c",
        ]
        .concat(),
    ];
    payloads.push(vec![1, 2, 3]);
    for p in &payloads {
        mutations(p, sylva::fuzz::nbtree_log_payload);
    }
}
