//! Unit tests of the record cache.

use super::*;

fn add(c: &mut RecordCache, k: u32, dirty: bool, priority: u8) -> u32 {
    c.insert(
        &k.to_be_bytes(),
        Some(&[1; 8]),
        dirty,
        u64::from(dirty),
        priority,
        Some(true),
    )
    .unwrap()
}

#[test]
fn the_clock_takes_the_first_entry_it_lowers_to_zero() {
    let mut c = RecordCache::new(0).unwrap();
    for (k, p) in [(0, 3), (1, 1), (2, 5)] {
        add(&mut c, k, false, p);
    }
    // Sweep 1 lowers 3,1,5 to 2,0,4; sweep 2 finds key 1 at 0.
    let v = c.victim().unwrap();
    assert_eq!(c.entry(v).unwrap().key, 1u32.to_be_bytes());
    assert_eq!(c.entry(0).unwrap().priority, 1, "lowered twice");
    assert_eq!(
        c.entry(2).unwrap().priority,
        4,
        "lowered once, the hand stopped after key 1"
    );
}

#[test]
fn a_dirty_candidate_is_passed_for_a_clean_one_within_32_entries() {
    let mut c = RecordCache::new(0).unwrap();
    add(&mut c, 0, true, 0);
    for k in 1..20 {
        add(&mut c, k, false, 1);
    }
    add(&mut c, 20, false, 0);
    let v = c.victim().unwrap();
    assert_eq!(
        c.entry(v).unwrap().key,
        20u32.to_be_bytes(),
        "the clean entry at 0"
    );
    // Beyond 32 entries the dirty candidate is taken.
    let mut c = RecordCache::new(0).unwrap();
    add(&mut c, 0, true, 0);
    for k in 1..40 {
        add(&mut c, k, false, 3);
    }
    add(&mut c, 40, false, 0);
    let v = c.victim().unwrap();
    assert_eq!(
        c.entry(v).unwrap().key,
        0u32.to_be_bytes(),
        "the dirty candidate"
    );
}

fn keys(c: &RecordCache, dirty: &[Dirty]) -> Vec<u32> {
    let key = |d: &Dirty| c.entry(d.slot).unwrap().key.try_into().unwrap();
    dirty.iter().map(|d| u32::from_be_bytes(key(d))).collect()
}

#[test]
fn only_dirty_entries_are_ordered_with_their_lsns_and_counts_follow() {
    let mut c = RecordCache::new(0).unwrap();
    for k in 0..100u32 {
        add(&mut c, k, k % 2 == 0, 4);
    }
    assert_eq!((c.len(), c.dirty()), (100, 50));
    let r = c
        .dirty_where(&10u32.to_be_bytes(), Some(&20u32.to_be_bytes()), |_| true)
        .unwrap();
    assert_eq!(keys(&c, &r), [10, 12, 14, 16, 18]);
    assert!(
        r.iter().all(|d| d.lsn == 1),
        "the LSN each was written with"
    );
    let dirty_thirds = c
        .dirty_where(&10u32.to_be_bytes(), None, |k| k[3] % 3 == 0)
        .unwrap();
    let want: Vec<u32> = (10..100u32).filter(|k| k % 2 == 0 && k % 3 == 0).collect();
    assert_eq!(
        keys(&c, &dirty_thirds),
        want,
        "dirty, accepted, in range, in key order"
    );
    // A clean entry written becomes dirty and ordered, with its new LSN; one cleaned leaves.
    let s = c.slot_of(&5u32.to_be_bytes()).unwrap();
    c.write(s, Some(b"new"), 77, None).unwrap();
    let s4 = c.slot_of(&4u32.to_be_bytes()).unwrap();
    c.set_clean(s4).unwrap();
    let r = c
        .dirty_where(b"", Some(&8u32.to_be_bytes()), |_| true)
        .unwrap();
    assert_eq!(keys(&c, &r), [0, 2, 5, 6]);
    assert_eq!(r[2].lsn, 77);
    assert_eq!(c.dirty(), 50);
    let (bytes, used) = (c.bytes(), c.arena.used);
    c.remove(s4).unwrap();
    // Its chunk is released, its block kept; only the free lists (of chunks and of slots)
    // may have grown.
    assert_eq!(c.arena.used, used - 16);
    assert!(c.bytes() <= bytes + 32, "{} against {bytes}", c.bytes());
    assert_eq!(c.get(&4u32.to_be_bytes()), None);
    c.remove(s).unwrap();
    assert_eq!(
        c.dirty_slots().unwrap().len(),
        49,
        "a removed dirty entry leaves the order"
    );
    assert_eq!(c.dirty(), 49);
    while let Some(v) = c.victim() {
        c.remove(v).unwrap();
    }
    assert_eq!((c.len(), c.dirty()), (0, 0));
    assert_eq!(c.arena.used, 0);
    assert!(c.dirty_slots().unwrap().is_empty());
}

#[test]
fn every_cached_key_is_found_through_growth_removal_and_slot_reuse() {
    let mut c = RecordCache::new(0).unwrap();
    let key = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
    for k in 0..50_000 {
        c.insert(&key(k), Some(&k.to_le_bytes()), k % 7 == 0, k, 4, None)
            .unwrap();
    }
    for k in (0..50_000).filter(|k| k % 3 == 0) {
        assert!(c.remove(c.slot_of(&key(k)).unwrap()).unwrap());
    }
    // The freed slots are reused by new keys.
    for k in 50_000..60_000 {
        c.insert(&key(k), Some(&k.to_le_bytes()), false, 0, 4, None)
            .unwrap();
    }
    assert_eq!(c.slots.len(), 50_000, "no slot beyond the first 50,000");
    for k in 0..60_000 {
        let e = c.get(&key(k));
        if k < 50_000 && k % 3 == 0 {
            assert!(e.is_none(), "key {k} removed");
        } else {
            assert_eq!(e.unwrap().value, Some(&k.to_le_bytes()[..]), "key {k}");
        }
    }
    let dirty = (0..50_000u64).filter(|k| k % 7 == 0 && k % 3 != 0).count();
    assert_eq!((c.len(), c.dirty()), (60_000 - 16_667, dirty));
    assert_eq!(c.dirty_slots().unwrap().len(), dirty);
}

#[test]
fn a_churning_table_three_quarters_full_is_charged_once_and_never_grows() {
    // hashbrown's tombstones brought such a table to its rehash point, where with more than
    // half of it live the rehash doubled it (and so it was charged thrice).
    let mut c = RecordCache::new(0).unwrap();
    let key = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
    let mut n = 0;
    while c.table.len() < c.table.capacity() * 3 / 4 || c.table.capacity() < 20_000 {
        c.insert(&key(n), Some(&[0; 8]), false, 0, 4, None).unwrap();
        n += 1;
    }
    let alloc = c.table.allocation_size();
    assert_eq!(c.table_bytes(), alloc);
    for k in n..n + 1_000_000 {
        c.insert(&key(k), Some(&[0; 8]), false, 0, 4, None).unwrap();
        let v = c.slot_of(&key(k - n)).unwrap();
        c.remove(v).unwrap();
        assert_eq!(c.table_bytes(), alloc, "after key {k}");
    }
    assert_eq!(c.table.allocation_size(), alloc, "never grown");
    assert_eq!(c.len(), n as usize);
    for k in 1_000_000..n + 1_000_000 {
        assert!(c.get(&key(k)).is_some(), "key {k}");
    }
}

#[test]
fn the_doubled_table_is_charged_before_the_table_doubles() {
    let mut c = RecordCache::new(0).unwrap();
    let mut k = 0u64;
    while c.table.capacity() < 10_000 {
        c.insert(&k.to_be_bytes(), Some(&[0; 8]), false, 0, 4, None)
            .unwrap();
        k += 1;
    }
    let (cap, alloc) = (c.table.capacity(), c.table.allocation_size());
    let mut charged_twice = false;
    while c.table.capacity() == cap {
        charged_twice |= c.table_bytes() == 3 * alloc;
        c.insert(&k.to_be_bytes(), Some(&[0; 8]), false, 0, 4, None)
            .unwrap();
        k += 1;
    }
    // The old table is gone; the new one, charged beside it, remains.
    assert!(
        c.table.allocation_size() <= 2 * alloc,
        "{}",
        c.table.allocation_size()
    );
    assert_eq!(c.table_bytes(), c.table.allocation_size());
    assert!(charged_twice);
    assert!(c.table.len() > cap, "the table doubled only when full");
}

#[test]
fn compaction_gives_back_the_blocks_of_removed_entries_and_keeps_the_rest() {
    let mut c = RecordCache::new(0).unwrap();
    let n = 20_000u32;
    // Two size classes: 8-byte values and 40-byte ones.
    let value = |k: u32| vec![k as u8; if k.is_multiple_of(3) { 40 } else { 8 }];
    for k in 0..n {
        c.insert(
            &k.to_be_bytes(),
            Some(&value(k)),
            k.is_multiple_of(2),
            0,
            4,
            Some(true),
        )
        .unwrap();
    }
    let full = c.arena_bytes();
    assert!(!c.compact_if_loose(), "nothing to give back");
    // Keep every tenth entry, scattered over all the blocks.
    for k in (0..n).filter(|k| !k.is_multiple_of(10)) {
        let s = c.slot_of(&k.to_be_bytes()).unwrap();
        c.remove(s).unwrap();
    }
    assert_eq!(c.arena_bytes(), full, "removing frees chunks, not blocks");
    let before = c.bytes();
    assert!(c.compact_if_loose());
    assert!(
        c.arena_bytes() <= full / 10 + 2 * BLOCK,
        "{} of {full}",
        c.arena_bytes()
    );
    assert!(c.bytes() < before);
    for k in (0..n).step_by(10) {
        let e = c.get(&k.to_be_bytes()).unwrap();
        assert_eq!(e.value, Some(&value(k)[..]), "key {k}");
        assert_eq!(e.dirty, k.is_multiple_of(2));
    }
    // The freed chunks and fresh ones are handed out again.
    for k in n..2 * n {
        c.insert(&k.to_be_bytes(), Some(&value(k)), false, 0, 4, None)
            .unwrap();
    }
    for k in (0..n).step_by(10).chain(n..2 * n) {
        assert_eq!(c.get(&k.to_be_bytes()).unwrap().value, Some(&value(k)[..]));
    }
}

#[test]
fn the_ordered_maps_freed_pages_are_given_back_and_the_dirty_entries_kept() {
    let mut c = RecordCache::new(0).unwrap();
    let n = 50_000u32;
    for k in 0..n {
        c.insert(&k.to_be_bytes(), Some(&[1; 8]), true, u64::from(k), 4, None)
            .unwrap();
    }
    let full = c.ordered.resident_bytes();
    assert!(full > 1 << 20, "{full}");
    // Written back: all but every hundredth leave the map, which keeps their pages.
    for k in (0..n).filter(|k| k % 100 != 0) {
        c.set_clean(c.slot_of(&k.to_be_bytes()).unwrap()).unwrap();
    }
    assert_eq!(c.ordered.resident_bytes(), full);
    let before = c.bytes();
    assert!(c.compact_if_loose());
    assert!(
        c.ordered.resident_bytes() < full / 10,
        "{}",
        c.ordered.resident_bytes()
    );
    assert!(c.bytes() < before);
    let d = c.dirty_where(b"", None, |_| true).unwrap();
    let want: Vec<u32> = (0..n).step_by(100).collect();
    assert_eq!(keys(&c, &d), want);
    assert!(
        d.iter().zip(&want).all(|(d, &k)| d.lsn == u64::from(k)),
        "the LSNs kept"
    );
    assert!(!c.compact_if_loose(), "nothing more to give back");
}

#[test]
fn the_arena_is_charged_its_blocks_or_its_live_chunks_and_the_slack() {
    let slack = 256 << 10;
    let mut c = RecordCache::new(slack).unwrap();
    c.insert(b"k", Some(b"v"), false, 0, 4, None).unwrap();
    assert_eq!(
        c.arena.charged(),
        16 + slack,
        "one live chunk and the slack"
    );
    for k in 0..50_000u32 {
        c.insert(&k.to_be_bytes(), Some(&[1; 8]), false, 0, 4, None)
            .unwrap();
    }
    assert!(c.arena.charged() >= c.arena_bytes() && c.arena_bytes() > slack);
    while c.len() > 100 {
        let v = c.victim().unwrap();
        c.remove(v).unwrap();
        // (It may give back free slots instead.)
        let held = c.arena_bytes();
        if c.compact_if_loose() && c.arena_bytes() != held {
            assert!(
                c.arena_bytes() <= c.arena.used + BLOCK,
                "one partial block left"
            );
        }
    }
    assert!(
        c.arena_bytes() <= slack + BLOCK,
        "the blocks kept within the slack"
    );
}

#[test]
fn a_clean_64_byte_record_costs_under_100_bytes_and_a_dirty_one_under_150() {
    for (dirty, bound) in [(false, 100), (true, 150)] {
        let mut c = RecordCache::new(0).unwrap();
        // The hash table at 0.61 of its 131,072 buckets, mid-way between doublings (from
        // 0.77 on it is charged its doubled successor too).
        let n = 80_000u64;
        for i in 0..n {
            let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
            c.insert(&k, Some(&[3; 56]), dirty, i, 4, Some(true))
                .unwrap();
        }
        let per = c.bytes() as u64 / n;
        assert!(
            per < bound,
            "{per} bytes a {} entry",
            if dirty { "dirty" } else { "clean" }
        );
        assert!(
            per <= RecordCache::entry_cost(8, 56) as u64,
            "{per}: the estimate is above"
        );
    }
}

#[test]
fn free_slots_are_given_back_by_moving_clean_entries_down_while_dirty_ones_stay() {
    let mut c = RecordCache::new(0).unwrap();
    let key = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes();
    let n = 50_000u64;
    // Slot k holds key k; every tenth of the first half is dirty.
    for k in 0..n {
        let dirty = k % 10 == 0 && k < n / 2;
        let slot = c.insert(
            &key(k),
            Some(&k.to_le_bytes()),
            dirty,
            k,
            (k % 8) as u8,
            None,
        );
        assert_eq!(slot.unwrap(), k as u32);
    }
    let dirty_slots = c.dirty_slots().unwrap();
    for k in (0..n).filter(|k| k % 5 != 0) {
        c.remove(c.slot_of(&key(k)).unwrap()).unwrap();
    }
    let check = |c: &RecordCache, written: bool| {
        for k in 0..n {
            let e = c.get(&key(k));
            if k % 5 != 0 {
                assert!(e.is_none(), "key {k} removed");
                continue;
            }
            let e = e.unwrap();
            assert_eq!(e.value, Some(&k.to_le_bytes()[..]), "key {k}");
            let dirty = k % 10 == 0 && k < n / 2 && !written;
            assert_eq!((e.dirty, e.priority), (dirty, (k % 8) as u8), "key {k}");
        }
        assert_eq!(c.len(), 10_000);
    };
    let before = c.bytes();
    assert!(c.compact_if_loose());
    check(&c, false);
    // The clean entries above the last dirty one (slot 24,990) moved below it; the dirty ones
    // kept their slots.
    assert_eq!(c.slots.len(), 24_991);
    assert!(c.slots.capacity() < 25_000 && c.bytes() < before);
    assert_eq!(c.dirty_slots().unwrap(), dirty_slots);
    // Once written, the dirty entries no longer hold the end: all 10,000 fit the first slots.
    for s in dirty_slots {
        c.set_clean(s).unwrap();
    }
    for k in n..n + 2_000 {
        c.insert(&key(k), Some(&k.to_le_bytes()), false, 0, 0, None)
            .unwrap();
        c.remove(c.slot_of(&key(k)).unwrap()).unwrap();
    }
    assert!(c.compact_if_loose());
    assert_eq!(c.slots.len(), 10_000);
    check(&c, true);
}
