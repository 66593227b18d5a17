//! Segment and page locks (§4.8, Table 4.1): who may read, write or replace a segment's pages
//! while the store's state lock ([`super::store::Store::inner`]) is not held.
//!
//! A segment lock is taken by the segment's first page id in one of four modes: IR (a reader
//! of its pages), IW (a flush writing one of its pages), O (a reorganization building its
//! replacement: readers may go on, flushes may not) and OX (the reorganization swapping it out:
//! no one else). A page lock is taken by a base page's id, S (reading) or X (writing); it
//! covers the base page and its overflow page. Compatibility, as Table 4.1:
//!
//! | held \ asked | IR | IW | O | OX |   | S | X |
//! |--------------|----|----|---|----|---|---|---|
//! | IR           | Y  | Y  | Y | N  | S | Y | N |
//! | IW           | Y  | Y  | N | N  | X | N | N |
//! | O            | Y  | N  | N | N  |   |   |   |
//! | OX           | N  | N  | N | N  |   |   |   |
//!
//! OX is only reached by upgrading O ([`SegmentLock::upgrade`]); while an upgrade waits for the
//! readers to leave, no new reader enters, so a stream of readers cannot starve it.
//!
//! **Order.** Locks are taken segment before page and, where several segments are, in key
//! order; no thread waits for one while it holds the state lock (it tries, and if that fails
//! lets the state lock go, waits, and checks again what it had looked up). So a thread waiting
//! here never holds what the holder needs to finish.
//!
//! Written here, not taken from a crate: the four modes and the upgrade are the thesis's
//! protocol; the table is a mutex and a condition variable a stripe (`parking_lot`'s) over a
//! map of the ids locked, each released lock waking the waiters of its stripe only.

use std::collections::HashMap;

use parking_lot::{Condvar, Mutex};

/// Stripes of the table (ids hash to one by their low bits).
const STRIPES: usize = 64;

/// The mode a segment lock is asked in (OX: by [`SegmentLock::upgrade`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegMode {
    /// Intention read: reading the segment's pages.
    Ir,
    /// Intention write: writing one of its pages.
    Iw,
    /// Reorganizing it: readers go on, writers wait.
    O,
}

/// Who holds a segment.
#[derive(Default)]
struct SegState {
    ir: u32,
    iw: u32,
    o: bool,
    ox: bool,
    /// An O holder waits to upgrade: no new reader enters.
    upgrading: bool,
}

impl SegState {
    fn grants(&self, mode: SegMode) -> bool {
        match mode {
            SegMode::Ir => !self.ox && !self.upgrading,
            SegMode::Iw => !self.o && !self.ox,
            SegMode::O => self.iw == 0 && !self.o && !self.ox,
        }
    }

    fn is_free(&self) -> bool {
        self.ir == 0 && self.iw == 0 && !self.o && !self.ox
    }
}

/// Who holds a page.
#[derive(Default)]
struct PageState {
    s: u32,
    x: bool,
}

#[derive(Default)]
struct Held {
    segments: HashMap<u64, SegState>,
    pages: HashMap<u64, PageState>,
}

#[derive(Default)]
struct Stripe {
    held: Mutex<Held>,
    freed: Condvar,
    /// Threads waiting on `freed` (a release wakes them only if there are any).
    waiting: std::sync::atomic::AtomicUsize,
}

/// The table of segment and page locks (module docs).
pub(crate) struct Locks {
    stripes: Box<[Stripe]>,
}

impl Default for Locks {
    fn default() -> Self {
        Locks {
            stripes: (0..STRIPES).map(|_| Stripe::default()).collect(),
        }
    }
}

/// A segment lock, released when dropped.
pub(crate) struct SegmentLock<'a> {
    locks: &'a Locks,
    id: u64,
    /// `None`: OX (upgraded).
    mode: Option<SegMode>,
}

/// A page lock, released when dropped.
pub(crate) struct PageLock<'a> {
    locks: &'a Locks,
    id: u64,
    exclusive: bool,
}

impl Locks {
    fn stripe(&self, id: u64) -> &Stripe {
        &self.stripes[(id as usize) % STRIPES]
    }

    /// Waits on `stripe` until `ready`, run under its mutex, grants (and takes) the lock.
    fn wait_for(stripe: &Stripe, mut ready: impl FnMut(&mut Held) -> bool) {
        let mut held = stripe.held.lock();
        if ready(&mut held) {
            return;
        }
        stripe
            .waiting
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        while !ready(&mut held) {
            stripe.freed.wait(&mut held);
        }
        stripe
            .waiting
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn release(stripe: &Stripe, change: impl FnOnce(&mut Held)) {
        let mut held = stripe.held.lock();
        change(&mut held);
        drop(held);
        if stripe.waiting.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            stripe.freed.notify_all();
        }
    }

    fn grant_segment(held: &mut Held, id: u64, mode: SegMode) -> bool {
        let s = held.segments.entry(id).or_default();
        if !s.grants(mode) {
            return false;
        }
        match mode {
            SegMode::Ir => s.ir += 1,
            SegMode::Iw => s.iw += 1,
            SegMode::O => s.o = true,
        }
        true
    }

    /// Locks segment `id` (its first page) in `mode`, waiting while it conflicts.
    pub(crate) fn segment(&self, id: u64, mode: SegMode) -> SegmentLock<'_> {
        Self::wait_for(self.stripe(id), |h| Self::grant_segment(h, id, mode));
        SegmentLock {
            locks: self,
            id,
            mode: Some(mode),
        }
    }

    /// Locks segment `id` in `mode` if no one holds it in a conflicting one.
    pub(crate) fn try_segment(&self, id: u64, mode: SegMode) -> Option<SegmentLock<'_>> {
        if !Self::grant_segment(&mut self.stripe(id).held.lock(), id, mode) {
            return None;
        }
        Some(SegmentLock {
            locks: self,
            id,
            mode: Some(mode),
        })
    }

    fn grant_page(held: &mut Held, id: u64, exclusive: bool) -> bool {
        let p = held.pages.entry(id).or_default();
        let free = !p.x && (!exclusive || p.s == 0);
        if free {
            if exclusive {
                p.x = true;
            } else {
                p.s += 1;
            }
        }
        free
    }

    /// Locks page `id` (a base page, with its overflow page) shared or `exclusive`, waiting
    /// while it conflicts.
    pub(crate) fn page(&self, id: u64, exclusive: bool) -> PageLock<'_> {
        Self::wait_for(self.stripe(id), |h| Self::grant_page(h, id, exclusive));
        PageLock {
            locks: self,
            id,
            exclusive,
        }
    }

    /// Locks page `id` if no one holds it in a conflicting mode.
    pub(crate) fn try_page(&self, id: u64, exclusive: bool) -> Option<PageLock<'_>> {
        let mut held = self.stripe(id).held.lock();
        if !Self::grant_page(&mut held, id, exclusive) {
            return None;
        }
        Some(PageLock {
            locks: self,
            id,
            exclusive,
        })
    }
}

impl SegmentLock<'_> {
    /// Upgrades O to OX if no reader is inside; `false` (O still held) if one is.
    pub(crate) fn try_upgrade(&mut self) -> bool {
        assert_eq!(self.mode, Some(SegMode::O), "only O is upgraded");
        let mut held = self.locks.stripe(self.id).held.lock();
        if !Self::ox_unless_read(held.segments.entry(self.id).or_default()) {
            return false;
        }
        self.mode = None;
        true
    }

    /// Turns the O held on `s` into OX if no reader is inside.
    fn ox_unless_read(s: &mut SegState) -> bool {
        if s.ir != 0 {
            return false;
        }
        s.upgrading = false;
        s.o = false;
        s.ox = true;
        true
    }

    /// Upgrades O to OX, waiting for the segment's readers to leave (none enters meanwhile).
    pub(crate) fn upgrade(&mut self) {
        assert_eq!(self.mode, Some(SegMode::O), "only O is upgraded");
        let id = self.id;
        let stripe = self.locks.stripe(id);
        stripe.held.lock().segments.entry(id).or_default().upgrading = true;
        Locks::wait_for(stripe, |h| {
            Self::ox_unless_read(h.segments.entry(id).or_default())
        });
        self.mode = None;
    }
}

impl Drop for SegmentLock<'_> {
    fn drop(&mut self) {
        let (id, mode) = (self.id, self.mode);
        Locks::release(self.locks.stripe(id), |h| {
            let s = h.segments.entry(id).or_default();
            match mode {
                Some(SegMode::Ir) => s.ir -= 1,
                Some(SegMode::Iw) => s.iw -= 1,
                Some(SegMode::O) => {
                    s.o = false;
                    s.upgrading = false;
                }
                None => s.ox = false,
            }
            if s.is_free() {
                h.segments.remove(&id);
            }
        });
    }
}

impl Drop for PageLock<'_> {
    fn drop(&mut self) {
        let (id, exclusive) = (self.id, self.exclusive);
        Locks::release(self.locks.stripe(id), |h| {
            let p = h.pages.entry(id).or_default();
            if exclusive {
                p.x = false;
            } else {
                p.s -= 1;
            }
            if !p.x && p.s == 0 {
                h.pages.remove(&id);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// Whether every segment lock was let go.
    fn no_segment_held(locks: &Locks) -> bool {
        locks
            .stripes
            .iter()
            .all(|s| s.held.lock().segments.is_empty())
    }

    /// Table 4.1's segment matrix: whether `asked` is granted while `held` is.
    #[test]
    fn segment_modes_follow_table_4_1() {
        use SegMode::*;
        let expect = [
            (Ir, [true, true, true]),
            (Iw, [true, true, false]),
            (O, [true, false, false]),
        ];
        for (held, row) in expect {
            for (asked, want) in [Ir, Iw, O].into_iter().zip(row) {
                let locks = Locks::default();
                let _h = locks.segment(7, held);
                assert_eq!(
                    locks.try_segment(7, asked).is_some(),
                    want,
                    "{held:?} held, {asked:?} asked"
                );
                // Another segment is not concerned, even on the same stripe.
                assert!(locks.try_segment(7 + STRIPES as u64, asked).is_some());
            }
        }
        // OX excludes every mode.
        let locks = Locks::default();
        let mut o = locks.segment(3, O);
        o.upgrade();
        for asked in [Ir, Iw, O] {
            assert!(
                locks.try_segment(3, asked).is_none(),
                "{asked:?} granted under OX"
            );
        }
        drop(o);
        assert!(locks.try_segment(3, O).is_some(), "released");
    }

    #[test]
    fn page_modes_follow_table_4_1() {
        let locks = Locks::default();
        let s = locks.page(9, false);
        assert!(locks.try_page(9, false).is_some());
        assert!(locks.try_page(9, true).is_none());
        drop(s);
        let x = locks.page(9, true);
        assert!(locks.try_page(9, false).is_none());
        assert!(locks.try_page(9, true).is_none());
        drop(x);
        assert!(locks.try_page(9, true).is_some());
    }

    /// An upgrade waits for the readers inside, and no new reader enters meanwhile.
    #[test]
    fn an_upgrade_waits_for_readers_and_holds_new_ones_back() {
        let locks = Locks::default();
        let reader = locks.segment(5, SegMode::Ir);
        let upgraded = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut o = locks.segment(5, SegMode::O);
                o.upgrade();
                upgraded.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                drop(o);
            });
            while !locks
                .stripe(5)
                .held
                .lock()
                .segments
                .get(&5)
                .is_some_and(|s| s.upgrading)
            {
                std::thread::yield_now();
            }
            assert!(
                locks.try_segment(5, SegMode::Ir).is_none(),
                "a new reader entered"
            );
            std::thread::sleep(Duration::from_millis(20));
            assert!(
                !upgraded.load(Ordering::SeqCst),
                "upgraded with a reader inside"
            );
            drop(reader);
            // Granted after the OX holder leaves.
            let _again = locks.segment(5, SegMode::Ir);
            assert!(upgraded.load(Ordering::SeqCst));
        });
        assert!(no_segment_held(&locks));
    }

    /// A try to upgrade fails while a reader is inside and leaves O held (no new writer or
    /// owner enters); it succeeds once the reader has left.
    #[test]
    fn a_try_to_upgrade_fails_while_a_reader_is_inside() {
        let locks = Locks::default();
        let reader = locks.segment(5, SegMode::Ir);
        let mut o = locks.segment(5, SegMode::O);
        assert!(!o.try_upgrade(), "upgraded with a reader inside");
        assert!(locks.try_segment(5, SegMode::Iw).is_none(), "O let go");
        assert!(
            locks.try_segment(5, SegMode::Ir).is_some(),
            "O holds readers back"
        );
        drop(reader);
        assert!(o.try_upgrade());
        assert!(
            locks.try_segment(5, SegMode::Ir).is_none(),
            "a reader entered under OX"
        );
        drop(o);
        assert!(no_segment_held(&locks));
    }

    /// Writers of one page exclude each other; the count they guard is never torn.
    #[test]
    fn exclusive_page_holders_take_turns() {
        let locks = Locks::default();
        let inside = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..2000 {
                        let _seg = locks.segment(1, SegMode::Iw);
                        let _x = locks.page(2, true);
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert!(locks.stripes.iter().all(|s| s.held.lock().pages.is_empty()));
    }
}
