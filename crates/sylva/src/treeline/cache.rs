//! The record cache (§3.1, §4.2): records, not pages, with the clock algorithm.
//!
//! Entries live in fixed-layout slots (the clock's circle) whose key and value bytes sit in an
//! arena. A hash table finds each key's slot; a [`crate::btree::BTree`] orders the dirty entries
//! alone, as only they need an order: a page's flush and a reorganization take a range's dirty
//! entries, a checkpoint writes them in key order, and a scan merges them over pages it reads
//! under the same shared lock, where a clean entry only repeats its page. An entry holds the
//! key, the value or a delete marker, whether it is dirty (newer than its page), a dirty one's
//! LSN (in the ordered map), a priority 0–7 and what is known of the key's presence on its page
//! (so that the record count stays exact without a read per insert).
//!
//! **Layout, for density** (the thesis's point is caching records, not pages: an entry must cost
//! little more than its record). A slot is 9 bytes (arena chunk, lengths, flags; the size class
//! follows from the lengths) and a priority byte; the key and value are one chunk of the arena
//! ([`arena`]), whose size classes are multiples of 16 bytes carved out of 64 KiB blocks, with a
//! free list per class (no allocation per entry, no allocator headers or fragmentation from
//! entries that come and go). The hash table ([`table`]: 4-byte slot numbers, 1-byte tags and 1-byte distances from home,
//! linear probing with no tombstones, the key's hash `rapidhash` seeded per cache) holds no key: it
//! compares the arena's. A clean 64-byte record costs about 85 bytes in all; a dirty one also its
//! key, slot number and LSN in the ordered map, about 49 more (unit tests, 80,000 entries). (An
//! ordered map of every entry cost about 50 bytes each, the LSN in each slot 12 more: 145 a clean
//! record; the first layout, a `Vec` for each of key and value in a 64-byte `Option` slot, about
//! 410.)
//!
//! **What is charged** against `cache_bytes` ([`RecordCache::bytes`]) is what the cache holds:
//! the slot array's capacity (grown by an eighth at a time, not doubled), the hash table's
//! allocation (and, within an eighth of the entries at which it doubles, the doubled one too,
//! both held while it grows: so a cache whose budget cannot pay for the doubling stays just
//! under that point), the ordered map's pages (those it freed too, kept for reuse until
//! [`RecordCache::compact_if_loose`] gives their memory back), and the arena's blocks.
//!
//! Removing an entry frees its slot and its chunk, not the array's end or a block, so when
//! the cache must shrink (the index or the log's buffers grew, or a load's dirty entries, which
//! cost more, were written and the cache holds clean ones) both would stay behind, full of
//! holes. The arena is therefore charged its blocks or its live chunks plus a slack (a
//! sixty-fourth of the budget, 256 KiB to 4 MiB), whichever is more: while the blocks are
//! within the slack, each eviction lowers the charge by its chunk; past it,
//! [`RecordCache::compact_if_loose`] moves the live chunks of each class into its first blocks
//! (one pass over the slots) and unmaps the rest. Each block is a mapping of its own, so that a
//! block given back leaves the process (from the heap it would stay as the allocator's free
//! memory). Free slots past the slack are given back the same way, moving clean entries from
//! the array's end into the lowest free slots ([`RecordCache::compact_slots`]).
//!
//! Admission (§4.2.1): writes and read misses enter at priority 4 (`p_max / 2`), a read miss's
//! page-mates at 1 (prefetch); a hit raises the priority by one up to 7. Eviction (§4.2.2): the
//! hand sweeps the slots, lowering each priority it passes, until an entry at 0; if that one is
//! dirty, it sweeps up to 32 more entries for a clean one at 0 and takes that instead. What to
//! do with a dirty victim (write its page) is the store's.

use std::sync::atomic::{AtomicU8, Ordering};

use rapidhash::v3::{rapidhash_v3_seeded, RapidSecrets};

use crate::btree::{BTree, Layout, Options};
use crate::error::{Error, Result};

mod arena;
mod table;
use arena::Arena;
use table::SlotTable;

/// Priority of an entry admitted by a write or a read miss.
pub const PRIORITY_ADMIT: u8 = 4;
/// Priority of a page-mate admitted by prefetch.
pub const PRIORITY_PREFETCH: u8 = 1;
/// Highest priority.
pub const PRIORITY_MAX: u8 = 7;
/// How far past a dirty candidate the hand looks for a clean one.
const CLEAN_LOOKAHEAD: usize = 32;
/// The arena's chunk sizes are multiples of this.
const CHUNK_UNIT: usize = 16;
/// Bytes of one arena block.
const BLOCK: usize = 64 << 10;

const LIVE: u8 = 1;
const DIRTY: u8 = 2;
const ON_DISK_KNOWN: u8 = 4;
const ON_DISK: u8 = 8;
const DELETED: u8 = 16;

/// Bytes of a slot and its priority.
const SLOT_BYTES: usize = std::mem::size_of::<Slot>() + 1;

/// A slot of the clock: one entry's fixed part (9 bytes, packed: their alignment would make
/// them 12; its priority is beside it, in [`RecordCache::priorities`], and a dirty one's LSN in
/// the ordered map). Its chunk's size class follows from the lengths ([`Slot::class`]).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed)]
struct Slot {
    /// Chunk number in its size class.
    chunk: u32,
    key_len: u16,
    value_len: u16,
    flags: u8,
}

impl Slot {
    /// The size class of the entry's chunk: the smallest that holds its key and value.
    fn class(&self) -> u16 {
        Arena::class_of(self.key_len as usize + self.value_len as usize)
    }

    fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    fn set(&mut self, f: u8, on: bool) {
        if on {
            self.flags |= f;
        } else {
            self.flags &= !f;
        }
    }
}

/// A cached record, borrowed from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value, or `None` for a delete marker.
    pub value: Option<&'a [u8]>,
    /// Newer than the key's page.
    pub dirty: bool,
    /// Clock priority, 0–7.
    pub priority: u8,
    /// Whether the key is on its page (`None`: not known; only a written entry can not know).
    pub on_disk: Option<bool>,
}

/// The cache (module docs).
pub struct RecordCache {
    /// Every entry's slot, found by the hash of its key (the key is read from the arena).
    table: SlotTable,
    /// The hash's seed, drawn for each cache (keys come from users).
    secrets: RapidSecrets,
    /// The dirty entries in key order: key → slot (4 bytes) and LSN (8), little-endian.
    ordered: BTree,
    slots: Vec<Slot>,
    /// The clock priority of each slot, atomic so that a hit can raise it under a shared lock
    /// (readers of cached records do not exclude each other).
    priorities: Vec<AtomicU8>,
    free: Vec<u32>,
    /// Entries removed since [`RecordCache::compact_if_loose`] last looked at the slots.
    removed_since: usize,
    arena: Arena,
    hand: usize,
    /// Entries inserted so far ([`RecordCache::inserts`]).
    inserts: u64,
    len: usize,
    dirty: usize,
}

/// A dirty entry as [`RecordCache::dirty_where`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dirty {
    /// Its slot.
    pub slot: u32,
    /// The LSN of the log record that made it dirty.
    pub lsn: u64,
}

fn hash_of(secrets: &RapidSecrets, key: &[u8]) -> u64 {
    rapidhash_v3_seeded(key, secrets)
}

impl RecordCache {
    /// An empty cache whose arena may hold up to `slack` bytes of blocks beyond its live
    /// chunks before it gives them back.
    pub fn new(slack: usize) -> Result<Self> {
        Ok(RecordCache {
            table: SlotTable::new(),
            secrets: RapidSecrets::random(),
            ordered: BTree::new(Options {
                layout: Layout::Hints,
                ..Options::default()
            })?,
            slots: Vec::new(),
            priorities: Vec::new(),
            free: Vec::new(),
            removed_since: 0,
            arena: Arena::new(slack),
            hand: 0,
            inserts: 0,
            len: 0,
            dirty: 0,
        })
    }

    /// Bytes the entries cost: the arena ([`Arena::charged`]), the slots, the hash table
    /// ([`RecordCache::table_bytes`]) and the ordered map's pages (freed ones included).
    pub fn bytes(&self) -> usize {
        self.arena.charged()
            + self.slots.capacity() * SLOT_BYTES
            + self.free.capacity() * 4
            + self.table_bytes()
            + self.ordered.resident_bytes()
    }

    /// The hash table's allocation and, within an eighth of the entries at which it doubles,
    /// the doubled one that replaces it: both are held while the entries move over, so the
    /// cache makes room for the new one before it is needed.
    fn table_bytes(&self) -> usize {
        let (now, cap) = (self.table.allocation_size(), self.table.capacity());
        if self.table.len() + cap / 8 >= cap {
            3 * now
        } else {
            now
        }
    }

    /// What caching a dirty record of `key_len` and `value_len` bytes adds to
    /// [`RecordCache::bytes`], estimated: its chunk, slot and priority, its bucket of the hash
    /// table (6 bytes, a bucket at least 7/16 used) and its share of the ordered map (key, slot
    /// number, LSN and about 4 bytes of node overhead, at five eighths fill: 49 bytes an
    /// 8-byte key measured, at 80,000 dirty entries). A clean one costs the last part less.
    pub const fn entry_cost(key_len: usize, value_len: usize) -> usize {
        Arena::chunk_size(Arena::class_of(key_len + value_len))
            + SLOT_BYTES
            + 14
            + (key_len + 12 + 8 + 4) * 8 / 5
    }

    /// Gives back the arena's spare blocks if they exceed its slack (each entry removed
    /// frees a chunk, not a block), the memory of the ordered map's freed pages if they
    /// exceed 1 MiB (a map keeps the pages it frees for reuse: a load's dirty entries, once
    /// written, would leave it holding pages for them all), and the slots' free ones if they
    /// exceed the slack ([`RecordCache::compact_slots`]); returns whether it gave back any.
    pub fn compact_if_loose(&mut self) -> bool {
        let mut did = false;
        if self.arena.loose() {
            self.arena.compact(&mut self.slots);
            did = true;
        }
        if self.ordered.freed_bytes() > 1 << 20 {
            self.ordered.release_freed();
            did = true;
        }
        // The slots are looked at once per sixteenth of the entries removed (a look may read
        // many slots, and an eviction calls this until the budget is met).
        if self.free.len() * SLOT_BYTES > self.arena.slack
            && self.removed_since >= (self.len / 16).max(1024)
        {
            self.removed_since = 0;
            did |= self.compact_slots();
        }
        did
    }

    /// Moves clean entries from the end of the slot array into its free slots, lowest first,
    /// and gives back the slots left free at its end; returns whether the array shrank. A
    /// dirty entry stays where it is, ending the move at the first one from the end: a
    /// checkpoint's flush lists the dirty entries by slot and lets the lock go between batches
    /// of them (an entry moved meanwhile would be passed over). So the array shrinks where the
    /// entries at its end are clean, as after a checkpoint.
    fn compact_slots(&mut self) -> bool {
        // What it would give back, from the end down to the first dirty entry: not worth a
        // pass under the slack.
        let top_dirty = self.slots.iter().rposition(|s| s.has(LIVE) && s.has(DIRTY));
        let above = self.slots.len() - top_dirty.map_or(0, |d| d + 1);
        if above.min(self.free.len()) * SLOT_BYTES <= self.arena.slack {
            return false;
        }
        let mut holes = std::mem::take(&mut self.free);
        holes.sort_unstable();
        let before = self.slots.capacity();
        let mut end = self.slots.len();
        let mut next = 0;
        loop {
            while end > 0 && !self.slots[end - 1].has(LIVE) {
                end -= 1;
            }
            let Some(&to) = holes.get(next) else {
                break;
            };
            let from = end.saturating_sub(1);
            if to as usize >= from || self.slots[from].has(DIRTY) {
                break;
            }
            next += 1;
            let key = slot_key(&self.slots, &self.arena, from as u32);
            let moved = self
                .table
                .replace(hash_of(&self.secrets, key), from as u32, to);
            debug_assert!(moved, "slot {from} not in the table");
            self.slots[to as usize] = self.slots[from];
            self.slots[from] = Slot::default();
            let priority = *self.priorities[from].get_mut();
            self.set_priority(to, priority);
            end -= 1;
        }
        holes.drain(..next);
        holes.retain(|&h| (h as usize) < end);
        holes.shrink_to_fit();
        self.free = holes;
        self.slots.truncate(end);
        self.slots.shrink_to_fit();
        self.priorities.truncate(end);
        self.priorities.shrink_to_fit();
        if self.hand >= end {
            self.hand = 0;
        }
        self.slots.capacity() < before
    }

    /// The arena's slack for a store of `budget` bytes: a sixty-fourth, within 256 KiB to
    /// 4 MiB (a compaction, which reads every slot, comes only once the blocks exceed the live
    /// chunks by that much).
    pub fn slack_for(budget: u64) -> usize {
        ((budget / 64) as usize).clamp(256 << 10, 4 << 20)
    }

    /// The parts of [`RecordCache::bytes`] besides the arena: the slots (with their priorities
    /// and free list), the hash table, the ordered map.
    pub fn part_bytes(&self) -> [usize; 3] {
        [
            self.slots.capacity() * SLOT_BYTES + self.free.capacity() * 4,
            self.table_bytes(),
            self.ordered.resident_bytes(),
        ]
    }

    /// Bytes of the arena's blocks.
    pub fn arena_bytes(&self) -> usize {
        self.arena.held
    }

    /// Entries inserted so far: a key found absent is absent as long as this is the same
    /// (only [`RecordCache::insert`] adds a key).
    pub fn inserts(&self) -> u64 {
        self.inserts
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
    pub fn slot_of(&self, key: &[u8]) -> Option<u32> {
        let hash = hash_of(&self.secrets, key);
        self.table.find(hash, |s| self.key(s) == key)
    }

    /// The key of the live entry in `slot` (empty if none).
    fn key(&self, slot: u32) -> &[u8] {
        slot_key(&self.slots, &self.arena, slot)
    }

    fn live(&self, slot: u32) -> Option<&Slot> {
        self.slots.get(slot as usize).filter(|s| s.has(LIVE))
    }

    /// The entry in `slot`.
    pub fn entry(&self, slot: u32) -> Option<Entry<'_>> {
        let s = self.live(slot)?;
        let (k, v) = (s.key_len as usize, s.value_len as usize);
        let bytes = self.arena.bytes(s.class(), s.chunk, k + v);
        Some(Entry {
            key: &bytes[..k],
            value: (!s.has(DELETED)).then(|| &bytes[k..]),
            dirty: s.has(DIRTY),
            priority: self.priority(slot),
            on_disk: s.has(ON_DISK_KNOWN).then(|| s.has(ON_DISK)),
        })
    }

    /// The cached entry of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<Entry<'_>> {
        self.slot_of(key).and_then(|s| self.entry(s))
    }

    fn priority(&self, slot: u32) -> u8 {
        self.priorities
            .get(slot as usize)
            .map_or(0, |p| p.load(Ordering::Relaxed))
    }

    fn set_priority(&mut self, slot: u32, priority: u8) {
        if let Some(p) = self.priorities.get_mut(slot as usize) {
            *p.get_mut() = priority;
        }
    }

    /// Raises the priority of the entry in `slot` by one (a hit), up to the highest. Takes
    /// `&self`: concurrent hits may lose an increment to each other, which only makes the
    /// clock a little less exact.
    pub fn touch(&self, slot: u32) {
        if let Some(p) = self.priorities.get(slot as usize) {
            let v = p.load(Ordering::Relaxed);
            if v < PRIORITY_MAX {
                p.store(v + 1, Ordering::Relaxed);
            }
        }
    }

    /// Marks the entry in `slot` clean (written to its page, which now holds its key).
    pub fn set_clean(&mut self, slot: u32) -> Result<()> {
        let Some(s) = self.live(slot).copied() else {
            return Ok(());
        };
        if s.has(DIRTY) {
            self.ordered
                .delete(slot_key(&self.slots, &self.arena, slot))?;
            self.dirty -= 1;
        }
        let s = &mut self.slots[slot as usize];
        s.set(DIRTY, false);
        s.set(ON_DISK_KNOWN, true);
        s.set(ON_DISK, true);
        Ok(())
    }

    /// The LSN of the dirty entry in `slot` (`None`: clean or not live): a flush that wrote
    /// the entry as it was at that LSN leaves it dirty if it was written again meanwhile.
    pub fn dirty_lsn(&self, slot: u32) -> Result<Option<u64>> {
        if !self.live(slot).is_some_and(|s| s.has(DIRTY)) {
            return Ok(None);
        }
        let mut v = Vec::with_capacity(12);
        if !self
            .ordered
            .get_into(slot_key(&self.slots, &self.arena, slot), &mut v)?
        {
            return Ok(None);
        }
        Ok(decode_ordered(&v).map(|d| d.lsn))
    }

    /// Records whether the key of the entry in `slot` is on its page.
    pub fn set_on_disk(&mut self, slot: u32, on_disk: bool) {
        if let Some(s) = self.slots.get_mut(slot as usize).filter(|s| s.has(LIVE)) {
            s.set(ON_DISK_KNOWN, true);
            s.set(ON_DISK, on_disk);
        }
    }

    /// A write logged at `lsn` to the cached entry in `slot`: the new value (`None`: a delete
    /// marker), dirty, its priority at least the admission one; `on_disk` is taken if the entry
    /// did not know.
    pub fn write(
        &mut self,
        slot: u32,
        value: Option<&[u8]>,
        lsn: u64,
        on_disk: Option<bool>,
    ) -> Result<()> {
        let Some(s) = self.live(slot).copied() else {
            return Ok(());
        };
        let k = s.key_len as usize;
        let v = value.map_or(0, <[u8]>::len);
        let class = Arena::class_of(k + v);
        // First what can fail, undone if the other does: a new chunk, the ordered map's entry.
        let moved = if class == s.class() {
            None
        } else {
            Some(self.arena.alloc(class)?)
        };
        let key = slot_key(&self.slots, &self.arena, slot);
        if let Err(e) = self.ordered.put(key, &ordered_value(slot, lsn)) {
            if let Some(chunk) = moved {
                self.arena.release(class, chunk);
            }
            return Err(e);
        }
        let mut n = s;
        if let Some(chunk) = moved {
            // Rare (a value changing size class): the key moves with it.
            let key = self.arena.bytes(s.class(), s.chunk, k).to_vec();
            self.arena.bytes_mut(class, chunk, k).copy_from_slice(&key);
            self.arena.release(s.class(), s.chunk);
            n.chunk = chunk;
        }
        if let Some(value) = value {
            self.arena.bytes_mut(class, n.chunk, k + v)[k..].copy_from_slice(value);
        }
        // The lengths give the chunk's class: `class` from here on.
        n.value_len = v as u16;
        n.set(DELETED, value.is_none());
        if !s.has(DIRTY) {
            self.dirty += 1;
        }
        n.set(DIRTY, true);
        let priority = (self.priority(slot) + 1).clamp(PRIORITY_ADMIT, PRIORITY_MAX);
        self.set_priority(slot, priority);
        if !s.has(ON_DISK_KNOWN) {
            if let Some(b) = on_disk {
                n.set(ON_DISK_KNOWN, true);
                n.set(ON_DISK, b);
            }
        }
        self.slots[slot as usize] = n;
        Ok(())
    }

    /// Caches a record whose key must not be cached yet (`value: None`: a delete marker);
    /// `lsn` is that of a dirty one's log record.
    pub fn insert(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        dirty: bool,
        lsn: u64,
        priority: u8,
        on_disk: Option<bool>,
    ) -> Result<u32> {
        let k = key.len();
        let v = value.map_or(0, <[u8]>::len);
        if k > u16::MAX as usize || v > u16::MAX as usize {
            return Err(Error::InvalidArgument {
                what: format!("a cached record of a {k}-byte key and a {v}-byte value"),
                limit: u16::MAX as usize,
            });
        }
        let slot = match self.free.last() {
            Some(&s) => s,
            None => self.slots.len() as u32,
        };
        if dirty {
            self.ordered.put(key, &ordered_value(slot, lsn))?;
        }
        let class = Arena::class_of(k + v);
        let chunk = match self.arena.alloc(class) {
            Ok(c) => c,
            Err(e) => {
                if dirty {
                    self.ordered.delete(key)?;
                }
                return Err(e);
            }
        };
        self.inserts += 1;
        let bytes = self.arena.bytes_mut(class, chunk, k + v);
        bytes[..k].copy_from_slice(key);
        if let Some(value) = value {
            bytes[k..].copy_from_slice(value);
        }
        if self.free.pop().is_none() {
            if self.slots.len() == self.slots.capacity() {
                // Grown by an eighth, not doubled: the capacity is charged, and a doubling
                // would charge (and the cache give up) up to as much again.
                let more = (self.slots.len() / 8).max(1024);
                self.slots.reserve_exact(more);
                self.priorities.reserve_exact(more);
            }
            self.slots.push(Slot::default());
            self.priorities.push(AtomicU8::new(0));
        }
        let mut s = Slot {
            chunk,
            key_len: k as u16,
            value_len: v as u16,
            flags: LIVE,
        };
        self.set_priority(slot, priority);
        s.set(DIRTY, dirty);
        s.set(DELETED, value.is_none());
        if let Some(b) = on_disk {
            s.set(ON_DISK_KNOWN, true);
            s.set(ON_DISK, b);
        }
        self.slots[slot as usize] = s;
        let (slots, arena, secrets) = (&self.slots, &self.arena, &self.secrets);
        self.table.insert(hash_of(secrets, key), slot, |s| {
            hash_of(secrets, slot_key(slots, arena, s))
        });
        self.len += 1;
        self.dirty += usize::from(dirty);
        Ok(slot)
    }

    /// Removes the entry in `slot`; returns whether there was one.
    pub fn remove(&mut self, slot: u32) -> Result<bool> {
        let Some(s) = self.live(slot).copied() else {
            return Ok(false);
        };
        let key = self.arena.bytes(s.class(), s.chunk, s.key_len as usize);
        if s.has(DIRTY) {
            self.ordered.delete(key)?;
        }
        let (slots, arena, secrets) = (&self.slots, &self.arena, &self.secrets);
        self.table.remove(hash_of(secrets, key), slot, |s| {
            hash_of(secrets, slot_key(slots, arena, s))
        });
        self.arena.release(s.class(), s.chunk);
        self.slots[slot as usize] = Slot::default();
        self.len -= 1;
        self.dirty -= usize::from(s.has(DIRTY));
        self.free.push(slot);
        self.removed_since += 1;
        Ok(true)
    }

    /// The dirty entries in `[lower, upper)` (`upper = None`: to the end) whose key `keep`
    /// accepts, in key order. `keep` sees the key as the ordered map holds it, so an entry it
    /// refuses costs no visit to its record in the arena (a page's flush keeps one page's keys
    /// of a segment's, and each visit is a cache miss).
    pub fn dirty_where(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        mut keep: impl FnMut(&[u8]) -> bool,
    ) -> Result<Vec<Dirty>> {
        let mut out = Vec::new();
        self.walk_dirty(lower, upper, &mut |k, d| {
            if keep(k) {
                out.push(d);
            }
        })?;
        Ok(out)
    }

    /// Slots of every dirty entry, in key order.
    pub fn dirty_slots(&self) -> Result<Vec<u32>> {
        // Sized at once: growing by doubling would leave up to twice the dirty entries' count.
        let mut out = Vec::with_capacity(self.dirty);
        self.walk_dirty(b"", None, &mut |_, d| out.push(d.slot))?;
        Ok(out)
    }

    fn walk_dirty(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], Dirty),
    ) -> Result<()> {
        let mut bad = false;
        // The map rejects an empty key: the first range starts at the smallest key there is.
        let start: &[u8] = if lower.is_empty() { &[0] } else { lower };
        self.ordered.walk(start, upper, usize::MAX, &mut |k, v| {
            match decode_ordered(v) {
                Some(d) => f(k, d),
                None => bad = true,
            }
            true
        })?;
        if bad {
            return Err(Error::Corruption {
                page: 0,
                detail: "a record cache's ordered entry is not 12 bytes".into(),
            });
        }
        Ok(())
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
            let e = &self.slots[at];
            if !e.has(LIVE) {
                continue;
            }
            let dirty = e.has(DIRTY);
            let priority = self.priorities[at].get_mut();
            if candidate.is_some() {
                after_candidate += 1;
                if *priority == 0 && !dirty {
                    return Some(at as u32);
                }
                *priority = priority.saturating_sub(1);
                if after_candidate >= CLEAN_LOOKAHEAD {
                    break;
                }
                continue;
            }
            if *priority == 0 {
                if !dirty {
                    return Some(at as u32);
                }
                candidate = Some(at as u32);
                continue;
            }
            *priority -= 1;
        }
        candidate
    }
}

/// The key of the live entry in `slot` (empty if there is none).
fn slot_key<'a>(slots: &[Slot], arena: &'a Arena, slot: u32) -> &'a [u8] {
    match slots.get(slot as usize).filter(|s| s.has(LIVE)) {
        Some(s) => arena.bytes(s.class(), s.chunk, s.key_len as usize),
        None => &[],
    }
}

/// The ordered map's value for a dirty entry: its slot and LSN.
fn ordered_value(slot: u32, lsn: u64) -> [u8; 12] {
    let mut v = [0; 12];
    v[..4].copy_from_slice(&slot.to_le_bytes());
    v[4..].copy_from_slice(&lsn.to_le_bytes());
    v
}

fn decode_ordered(v: &[u8]) -> Option<Dirty> {
    let slot = u32::from_le_bytes(v.get(..4)?.try_into().ok()?);
    let lsn = u64::from_le_bytes(v.get(4..)?.try_into().ok()?);
    Some(Dirty { slot, lsn })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
