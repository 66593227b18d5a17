//! Operation adaption (paper section 5.1): a per-leaf saturating counter in 0..=3 (255 =
//! disabled because the leaf's keys have good heads) that scans raise with probability 0.15 and
//! point operations lower with probability 0.05. A fingerprinting leaf whose counter reaches 3
//! becomes a comparison leaf; a comparison leaf whose (enabled) counter reaches 0 becomes a
//! fingerprinting leaf. A conversion that does not fit the page is abandoned.
//!
//! Difference from the paper, forced by optimistic lock coupling: the counter lives in the leaf,
//! so changing it is a write. Point reads and scans therefore roll the dice first, and only when
//! the counter would actually change do they take the leaf's write latch (by upgrading the
//! version they read; on contention the update is skipped). A read that leaves the counter
//! unchanged, including every read of a leaf with good heads, writes nothing.
//!
//! The dice are a xorshift generator per thread that restarts from a fixed seed whenever the
//! thread rolls for another tree than last time ([`chance`]), so a single-threaded run converts
//! the same leaves every time (reproducible benchmark results) and readers share no generator.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::leaf::{collect, Records, COUNTER_DISABLED};
use super::store::{NodeLatch, NodeStore};
use super::tree::BTree;
use crate::error::Result;
use crate::page::build::{Builder, NodeSpec};
use crate::page::slotted::Slotted;
use crate::page::{PageId, KIND_FP_LEAF, KIND_LEAF};

/// Probability of a counter increment per scan, in thousandths.
const SCAN_PERMILLE: u64 = 150;
/// Probability of a counter decrement per point operation, in thousandths.
const POINT_PERMILLE: u64 = 50;
/// Where the counter lives in a slotted page.
const COUNTER: usize = 22;

/// Where every tree's dice start (any odd constant; fixed so runs are reproducible).
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Tags trees for their dice (see [`chance`]).
static NEXT_TREE: AtomicU64 = AtomicU64::new(1);

/// A fresh tag for a new tree's dice.
pub(crate) fn dice_tag() -> u64 {
    NEXT_TREE.fetch_add(1, Ordering::Relaxed)
}

thread_local! {
    /// (tag of the tree last rolled for, xorshift state).
    static DICE: Cell<(u64, u64)> = const { Cell::new((0, SEED)) };
}

/// True with probability `permille / 1000`, from a xorshift generator per thread and tree:
/// it restarts from [`SEED`] whenever the thread rolls for another tree than last time, so a
/// single-threaded run gives every tree the same sequence on every run (reproducible results)
/// and readers still write no shared memory for it.
fn chance(tree: u64, permille: u64) -> bool {
    DICE.with(|d| {
        let (tag, mut x) = d.get();
        if tag != tree {
            x = SEED;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        d.set((tree, x));
        x % 1000 < permille
    })
}

/// What a reader saw of a leaf, for a later counter update.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    pub id: PageId,
    pub version: u64,
    pub kind: u8,
    pub counter: u8,
}

impl Seen {
    /// Records the leaf `id` at `version` from its page bytes.
    pub(crate) fn of(id: PageId, version: u64, page: &[u8]) -> Seen {
        Seen {
            id,
            version,
            kind: page[0],
            counter: page.get(COUNTER).copied().unwrap_or(COUNTER_DISABLED),
        }
    }
}

impl<S: NodeStore> BTree<S> {
    /// After a point read of the leaf `seen`.
    pub(crate) fn adapt_after_point_read(&self, seen: Seen) -> Result<()> {
        if !self.adaptive
            || !(seen.kind == KIND_LEAF || seen.kind == KIND_FP_LEAF)
            || seen.counter == 0
            || seen.counter == COUNTER_DISABLED
            || !chance(self.dice, POINT_PERMILLE)
        {
            return Ok(());
        }
        self.adapt_locked(seen, -1)
    }

    /// After a scan that started in the leaf `seen`.
    pub(crate) fn adapt_after_scan(&self, seen: Seen) -> Result<()> {
        if !self.adaptive
            || !(seen.kind == KIND_LEAF || seen.kind == KIND_FP_LEAF)
            || seen.counter >= 3
            || !chance(self.dice, SCAN_PERMILLE)
        {
            return Ok(());
        }
        self.adapt_locked(seen, 1)
    }

    /// A point write on leaf `id`, whose write latch the caller holds. Returns whether the leaf
    /// was converted to another layout (which the caller logs).
    pub(crate) fn adapt_after_point_write(&self, id: PageId, page: &mut [u8]) -> Result<bool> {
        if !self.adaptive || !(page[0] == KIND_LEAF || page[0] == KIND_FP_LEAF) {
            return Ok(false);
        }
        let c = page[COUNTER];
        if c == 0 || c == COUNTER_DISABLED || !chance(self.dice, POINT_PERMILLE) {
            return Ok(false);
        }
        self.step_counter(id, page, -1)
    }

    fn adapt_locked(&self, seen: Seen, step: i8) -> Result<()> {
        let Ok(l) = self.latch(seen.id) else {
            return Ok(());
        };
        // A thread that must not block (the PA-Tree worker) skips the update while a
        // checkpoint holds the gate: the counter is a hint.
        let _gate = if crate::sync::nonblocking() {
            match self.store.try_write_gate() {
                Some(g) => g,
                None => return Ok(()),
            }
        } else {
            self.store.write_gate()
        };
        if l.upgrade(seen.version).is_err() {
            return Ok(()); // contended or changed: skip this update
        }
        let r = match self.page_mut(seen.id) {
            Ok(page) => self.step_counter(seen.id, page, step),
            Err(_) => Ok(false),
        };
        match r {
            Ok(true) => {
                let logged = self.store.log_pages(&[seen.id], &[]);
                l.unlock();
                logged.map(drop)
            }
            Ok(false) => {
                l.unlock_hint();
                Ok(())
            }
            Err(e) => {
                l.unlock();
                Err(e)
            }
        }
    }

    /// Moves the counter one step and converts the leaf when it saturates; returns whether it
    /// converted.
    fn step_counter(&self, id: PageId, page: &mut [u8], step: i8) -> Result<bool> {
        let c = page[COUNTER];
        let next = if step < 0 {
            c.saturating_sub(1)
        } else {
            (c + 1).min(3)
        };
        page[COUNTER] = next;
        match (page[0], next) {
            (KIND_LEAF, 0) => self.convert(id, page, KIND_FP_LEAF),
            (KIND_FP_LEAF, 3) => self.convert(id, page, KIND_LEAF),
            _ => Ok(false),
        }
    }

    /// Rewrites a write-latched slotted leaf as `kind`, keeping its counter; abandoned if the
    /// records do not fit. Returns whether the page changed (a fingerprinting leaf's tail may
    /// have been sorted even when the conversion was abandoned).
    fn convert(&self, id: PageId, page: &mut [u8], kind: u8) -> Result<bool> {
        let sorted = page[0] == KIND_FP_LEAF && self.sort_fp_leaf(id, page)?;
        let v = Slotted::new(id, page)?;
        let mut recs = Records::default();
        collect(id, page, &mut recs)?;
        let spec = NodeSpec {
            kind,
            flags: self.flags,
            prefix_truncation: self.truncate,
            lower: v.lower_fence()?,
            upper: v.upper_fence()?,
            upper_child: 0,
            op_counter: v.op_counter(),
        };
        let mut out = vec![0u8; page.len()];
        let Some(mut b) = Builder::new(&mut out, &spec) else {
            return Ok(sorted);
        };
        for (k, val) in recs.iter() {
            if !b.push(k, &[], val) {
                return Ok(sorted);
            }
        }
        b.finish();
        page.copy_from_slice(&out);
        self.conversions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(true)
    }
}
