//! The tree grows by splits and shrinks by merges, staying structurally valid throughout, in
//! every layout.

#![allow(clippy::unwrap_used)]

use sylva::btree::{BTree, Layout, Options};
use sylva::KvStore;

fn counter(t: &BTree, name: &str) -> u64 {
    t.stats()
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap()
}

#[test]
fn grow_and_shrink_every_layout() {
    for layout in Layout::ALL {
        let t = BTree::new(Options {
            layout,
            page_size: 2048,
            ..Options::default()
        })
        .unwrap();
        // URL-like keys with long shared prefixes, inserted in a scrambled order.
        let key = |i: u64| {
            format!("https://example.org/wiki/page/{:08}", (i * 7919) % 20_000).into_bytes()
        };
        for i in 0..20_000 {
            t.put(&key(i), &i.to_le_bytes()).unwrap();
        }
        let r = t.check().unwrap();
        assert_eq!(r.records, 20_000, "{layout:?}");
        assert!(
            r.height >= 3,
            "{layout:?}: height {} after 20k inserts",
            r.height
        );
        assert!(counter(&t, "splits") > 100, "{layout:?}");
        let mut n = 0;
        t.scan(b"", usize::MAX, &mut |_, _| {
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 20_000);
        for i in 0..20_000 {
            assert!(t.delete(&key(i)).unwrap(), "{layout:?} delete {i}");
            if i % 5000 == 0 {
                t.check().unwrap();
            }
        }
        let r = t.check().unwrap();
        assert_eq!(r.records, 0);
        assert!(counter(&t, "merges") > 50, "{layout:?}");
        assert!(
            r.leaves <= 2,
            "{layout:?}: {} leaves left after deleting all",
            r.leaves
        );
    }
}

#[test]
fn prefix_truncation_saves_space_on_shared_prefixes() {
    let bytes = |layout| {
        let t = BTree::new(Options {
            layout,
            page_size: 4096,
            ..Options::default()
        })
        .unwrap();
        // Scrambled order: with ascending inserts only the rightmost leaf (upper fence +inf,
        // so no prefix) ever fills, and both layouts would split identically.
        for i in 0..5000u64 {
            let i = (i * 7919) % 5000;
            t.put(
                format!("https://example.org/a/very/long/shared/path/{i:06}").as_bytes(),
                b"12345678",
            )
            .unwrap();
        }
        t.stats().bytes_used.unwrap()
    };
    let (base, prefix) = (bytes(Layout::Baseline), bytes(Layout::Prefix));
    assert!(
        prefix * 2 < base,
        "prefix truncation used {prefix} bytes, baseline {base}"
    );
}
