//! The record cache (§3.1, §4.2): records, not pages, with the clock algorithm.
//!
//! Entries live in slots (the clock's circle); a [`crate::btree::BTree`] maps each key to its
//! slot, so the cache is also ordered: a scan and a page flush find the cached keys of a range.
//! An entry holds the key, the value or a delete marker, whether it is dirty (newer than its
//! page), the LSN of its log record, a priority 0–7 and what is known of the key's presence on
//! its page (so that the record count stays exact without a read per insert).
//!
//! Admission (§4.2.1): writes and read misses enter at priority 4 (`p_max / 2`), a read miss's
//! page-mates at 1 (prefetch); a hit raises the priority by one up to 7. Eviction (§4.2.2): the
//! hand sweeps the slots, lowering each priority it passes, until an entry at 0; if that one is
//! dirty, it sweeps up to 32 more entries for a clean one at 0 and takes that instead. What to
//! do with a dirty victim (write its page) is the store's.

use crate::btree::{BTree, Layout, Options};
use crate::error::{Error, Result};

/// Priority of an entry admitted by a write or a read miss.
pub const PRIORITY_ADMIT: u8 = 4;
/// Priority of a page-mate admitted by prefetch.
pub const PRIORITY_PREFETCH: u8 = 1;
/// Highest priority.
pub const PRIORITY_MAX: u8 = 7;
/// How far past a dirty candidate the hand looks for a clean one.
const CLEAN_LOOKAHEAD: usize = 32;
/// Bytes an entry costs beyond its key and value: the slot (64 bytes), the key's copy in the
/// map and its share of the map's pages, the allocations' headers and rounding, and what the
/// allocator keeps of a cache whose entries come and go. Calibrated, not derived: 112 bytes
/// (the sum of the parts) let the process grow by twice `cache_bytes`
/// (`tests/treeline_memory.rs`: 64 MiB for 32 MiB, 16 MiB for 8 MiB over 300K inserts).
pub const ENTRY_OVERHEAD: usize = 340;

/// A cached record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key.
    pub key: Vec<u8>,
    /// The value, or `None` for a delete marker.
    pub value: Option<Vec<u8>>,
    /// Newer than the key's page.
    pub dirty: bool,
    /// LSN of the log record that made it dirty (0 when clean).
    pub lsn: u64,
    /// Clock priority, 0–7.
    pub priority: u8,
    /// Whether the key is on its page (`None`: not known; only a written entry can not know).
    pub on_disk: Option<bool>,
}

impl Entry {
    /// Bytes the entry costs.
    pub fn bytes(&self) -> usize {
        ENTRY_OVERHEAD + 2 * self.key.len() + self.value.as_ref().map_or(0, Vec::len)
    }
}

/// The cache (module docs).
pub struct RecordCache {
    map: BTree,
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    hand: usize,
    bytes: usize,
    len: usize,
    dirty: usize,
}

impl RecordCache {
    /// An empty cache.
    pub fn new() -> Result<Self> {
        Ok(RecordCache {
            map: BTree::new(Options {
                layout: Layout::Hints,
                ..Options::default()
            })?,
            slots: Vec::new(),
            free: Vec::new(),
            hand: 0,
            bytes: 0,
            len: 0,
            dirty: 0,
        })
    }

    /// Bytes the entries cost.
    pub fn bytes(&self) -> usize {
        self.bytes + self.slots.len() * std::mem::size_of::<Option<Entry>>()
    }

    /// Entries cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Dirty entries.
    pub fn dirty(&self) -> usize {
        self.dirty
    }

    /// The slot of `key`, if cached.
    pub fn slot_of(&self, key: &[u8]) -> Result<Option<u32>> {
        let mut v = Vec::with_capacity(4);
        if !self.map.get_into(key, &mut v)? {
            return Ok(None);
        }
        let b: [u8; 4] = v.as_slice().try_into().map_err(|_| Error::Corruption {
            page: 0,
            detail: "a record cache slot number is not 4 bytes".into(),
        })?;
        Ok(Some(u32::from_le_bytes(b)))
    }

    /// The entry in `slot`.
    pub fn entry(&self, slot: u32) -> Option<&Entry> {
        self.slots.get(slot as usize).and_then(Option::as_ref)
    }

    /// The cached entry of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<&Entry>> {
        Ok(self.slot_of(key)?.and_then(|s| self.entry(s)))
    }

    /// Changes the entry in `slot` through `f`, keeping the byte and dirty counts.
    pub fn update<T>(&mut self, slot: u32, f: impl FnOnce(&mut Entry) -> T) -> Option<T> {
        let e = self.slots.get_mut(slot as usize)?.as_mut()?;
        let (before, was_dirty) = (e.bytes(), e.dirty);
        let t = f(e);
        let (after, is_dirty) = (e.bytes(), e.dirty);
        self.bytes = self.bytes + after - before;
        self.dirty = self.dirty + usize::from(is_dirty) - usize::from(was_dirty);
        Some(t)
    }

    /// Caches `entry`, whose key must not be cached yet.
    pub fn insert(&mut self, entry: Entry) -> Result<u32> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.map.put(&entry.key, &slot.to_le_bytes())?;
        self.bytes += entry.bytes();
        self.len += 1;
        self.dirty += usize::from(entry.dirty);
        self.slots[slot as usize] = Some(entry);
        Ok(slot)
    }

    /// Removes the entry in `slot`.
    pub fn remove(&mut self, slot: u32) -> Result<Option<Entry>> {
        let Some(e) = self.slots.get_mut(slot as usize).and_then(Option::take) else {
            return Ok(None);
        };
        self.map.delete(&e.key)?;
        self.bytes -= e.bytes();
        self.len -= 1;
        self.dirty -= usize::from(e.dirty);
        self.free.push(slot);
        Ok(Some(e))
    }

    /// Slots of the cached keys in `[lower, upper)` (`upper = None`: to the end), in key order.
    pub fn range(&self, lower: &[u8], upper: Option<&[u8]>) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        let mut bad = false;
        // The map rejects an empty key: the first range starts at the smallest key there is.
        let start: &[u8] = if lower.is_empty() { &[0] } else { lower };
        self.map.walk(start, upper, usize::MAX, &mut |_, v| {
            match <[u8; 4]>::try_from(v) {
                Ok(b) => out.push(u32::from_le_bytes(b)),
                Err(_) => bad = true,
            }
            true
        })?;
        if bad {
            return Err(Error::Corruption {
                page: 0,
                detail: "a record cache slot number is not 4 bytes".into(),
            });
        }
        Ok(out)
    }

    /// Slots of every dirty entry.
    pub fn dirty_slots(&self) -> Vec<u32> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, e)| e.as_ref().is_some_and(|e| e.dirty))
            .map(|(i, _)| i as u32)
            .collect()
    }

    /// The clock's next victim (module docs), `None` if the cache is empty.
    pub fn victim(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let n = self.slots.len();
        // Every entry reaches 0 within 8 sweeps.
        let mut candidate = None;
        let mut after_candidate = 0;
        for _ in 0..(usize::from(PRIORITY_MAX) + 2) * n + CLEAN_LOOKAHEAD {
            let at = self.hand;
            self.hand = (self.hand + 1) % n;
            let Some(e) = self.slots[at].as_mut() else {
                continue;
            };
            if candidate.is_some() {
                after_candidate += 1;
                if e.priority == 0 && !e.dirty {
                    return Some(at as u32);
                }
                e.priority = e.priority.saturating_sub(1);
                if after_candidate >= CLEAN_LOOKAHEAD {
                    break;
                }
                continue;
            }
            if e.priority == 0 {
                if !e.dirty {
                    return Some(at as u32);
                }
                candidate = Some(at as u32);
                continue;
            }
            e.priority -= 1;
        }
        candidate
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(k: u32, dirty: bool, priority: u8) -> Entry {
        Entry {
            key: k.to_be_bytes().to_vec(),
            value: Some(vec![1; 8]),
            dirty,
            lsn: if dirty { 1 } else { 0 },
            priority,
            on_disk: Some(true),
        }
    }

    #[test]
    fn the_clock_takes_the_first_entry_it_lowers_to_zero() {
        let mut c = RecordCache::new().unwrap();
        for (k, p) in [(0, 3), (1, 1), (2, 5)] {
            c.insert(entry(k, false, p)).unwrap();
        }
        // Sweep 1 lowers 3,1,5 to 2,0,4; sweep 2 finds key 1 at 0.
        let v = c.victim().unwrap();
        assert_eq!(c.entry(v).unwrap().key, 1u32.to_be_bytes());
        assert_eq!(c.entry(0).unwrap().priority, 1, "lowered twice");
        assert_eq!(c.entry(2).unwrap().priority, 4, "lowered once, the hand stopped after key 1");
    }

    #[test]
    fn a_dirty_candidate_is_passed_for_a_clean_one_within_32_entries() {
        let mut c = RecordCache::new().unwrap();
        c.insert(entry(0, true, 0)).unwrap();
        for k in 1..20 {
            c.insert(entry(k, false, 1)).unwrap();
        }
        c.insert(entry(20, false, 0)).unwrap();
        let v = c.victim().unwrap();
        assert_eq!(c.entry(v).unwrap().key, 20u32.to_be_bytes(), "the clean entry at 0");
        // Beyond 32 entries the dirty candidate is taken.
        let mut c = RecordCache::new().unwrap();
        c.insert(entry(0, true, 0)).unwrap();
        for k in 1..40 {
            c.insert(entry(k, false, 3)).unwrap();
        }
        c.insert(entry(40, false, 0)).unwrap();
        let v = c.victim().unwrap();
        assert_eq!(c.entry(v).unwrap().key, 0u32.to_be_bytes(), "the dirty candidate");
    }

    #[test]
    fn ranges_counts_and_removal() {
        let mut c = RecordCache::new().unwrap();
        for k in 0..100u32 {
            c.insert(entry(k, k % 2 == 0, 4)).unwrap();
        }
        assert_eq!((c.len(), c.dirty()), (100, 50));
        let r = c.range(&10u32.to_be_bytes(), Some(&20u32.to_be_bytes())).unwrap();
        assert_eq!(r.len(), 10);
        assert_eq!(c.range(b"", None).unwrap().len(), 100);
        let s = c.slot_of(&4u32.to_be_bytes()).unwrap().unwrap();
        c.update(s, |e| e.dirty = false);
        assert_eq!(c.dirty(), 49);
        let bytes = c.bytes();
        c.remove(s).unwrap();
        assert!(c.bytes() < bytes);
        assert_eq!(c.get(&4u32.to_be_bytes()).unwrap(), None);
        assert_eq!(c.dirty_slots().len(), 49);
        while let Some(v) = c.victim() {
            c.remove(v).unwrap();
        }
        assert_eq!((c.len(), c.bytes() > 0), (0, true));
    }
}
