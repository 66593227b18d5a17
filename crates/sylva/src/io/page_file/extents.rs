//! `Extents`: a set of page ids kept as disjoint, non-adjacent runs `[start, start + len)`,
//! indexed twice: by start (to find a run's neighbours and to coalesce) and by `(len, start)`
//! (to find the smallest run at least `n` long). Taking or adding a run costs O(log runs).
//!
//! **Allocation policy: best fit, lowest address among equals.** [`Extents::take`] cuts `n` pages
//! from the front of the shortest run that holds them. Single pages so come from single-page
//! holes first (the B+tree's frees), long runs stay whole for the engines that need them, and
//! among runs of one length the lowest address wins (what the free set of single pages did).
//!
//! **Single pages apart.** A run one page long is kept only in a set of its own, not in the
//! two indexes: the B+tree frees and allocates single pages, and so allocates one with one
//! removal from that set (the set of single pages this replaces took a search and a removal),
//! and frees one with a search of that set for its neighbours and its own id, a search of the
//! runs for a neighbour, and an insertion.

use std::collections::{BTreeMap, BTreeSet};

/// Disjoint, coalesced runs of page ids (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Extents {
    /// Runs at least two pages long: start → length.
    by_start: BTreeMap<u64, u64>,
    /// (length, start) of the runs in `by_start`.
    by_len: BTreeSet<(u64, u64)>,
    /// Runs one page long.
    singles: BTreeSet<u64>,
    /// Pages in all runs.
    pages: u64,
}

impl Extents {
    /// Pages in all runs.
    pub(crate) fn pages(&self) -> u64 {
        self.pages
    }

    /// Number of runs.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        self.by_start.len() + self.singles.len()
    }

    /// The run holding `id`, if any.
    pub(crate) fn run_of(&self, id: u64) -> Option<(u64, u64)> {
        if self.singles.contains(&id) {
            return Some((id, 1));
        }
        let (&start, &len) = self.by_start.range(..=id).next_back()?;
        (id - start < len).then_some((start, len))
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.run_of(id).is_some()
    }

    /// Whether any page of `[start, start + len)` is in the set.
    pub(crate) fn overlaps(&self, start: u64, len: u64) -> bool {
        let end = start.saturating_add(len);
        self.singles.range(start..end).next().is_some()
            || self
                .by_start
                .range(..end)
                .next_back()
                .is_some_and(|(&s, &l)| s + l > start)
    }

    fn put(&mut self, start: u64, len: u64) {
        if len == 1 {
            self.singles.insert(start);
        } else {
            self.by_start.insert(start, len);
            self.by_len.insert((len, start));
        }
        self.pages += len;
    }

    fn cut(&mut self, start: u64, len: u64) {
        if len == 1 {
            self.singles.remove(&start);
        } else {
            self.by_start.remove(&start);
            self.by_len.remove(&(len, start));
        }
        self.pages -= len;
    }

    /// Adds `[start, start + len)`, merging it with the runs it touches. Returns `false`, and
    /// changes nothing, if any of its pages is already in the set.
    pub(crate) fn insert(&mut self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let end = start.saturating_add(len);
        // Single pages from `start - 1` to `end`: one inside is an overlap, the two at the
        // ends are neighbours.
        let (mut left, mut right) = (None, None);
        for &p in self.singles.range(start.saturating_sub(1)..=end) {
            if p == end {
                right = Some((p, 1));
            } else if p + 1 == start {
                left = Some((p, 1));
            } else {
                return false;
            }
        }
        // Longer runs: the one starting at `end`, and the last one starting before `end`,
        // which overlaps the new pages if any run does, or else may end at `start`.
        let mut before_end = self.by_start.range(..=end);
        let last = match before_end.next_back() {
            Some((&s, &l)) if s == end => {
                right = Some((s, l));
                before_end.next_back()
            }
            other => other,
        };
        if let Some((&s, &l)) = last {
            if s + l > start {
                return false;
            }
            if s + l == start {
                left = Some((s, l));
            }
        }
        let (mut s, mut l) = (start, len);
        if let Some((ls, ll)) = left {
            self.cut(ls, ll);
            s = ls;
            l += ll;
        }
        if let Some((rs, rl)) = right {
            self.cut(rs, rl);
            l += rl;
        }
        self.put(s, l);
        true
    }

    /// Takes `n` (≥ 1) contiguous pages by the policy of the module docs; `None` if no run
    /// holds `n`.
    #[inline]
    pub(crate) fn take(&mut self, n: u64) -> Option<u64> {
        if n == 1 {
            if let Some(s) = self.singles.pop_first() {
                self.pages -= 1;
                return Some(s);
            }
        }
        let &(len, start) = self.by_len.range((n, 0)..).next()?;
        self.cut(start, len);
        if len > n {
            self.put(start + n, len - n);
        }
        Some(start)
    }

    /// Takes the lowest page in the set (compaction places the free space's own pages as low
    /// as it can, [`super::shrink`]); `None` if the set is empty.
    pub(crate) fn take_lowest(&mut self) -> Option<u64> {
        let single = self.singles.first().copied();
        let run = self.by_start.first_key_value().map(|(&s, _)| s);
        let lowest = match (single, run) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        self.remove(lowest, 1).then_some(lowest)
    }

    /// Takes the longest run if it is at least `min` (≥ 2) pages long (the lowest address
    /// among equals): its (start, length).
    pub(crate) fn take_longest(&mut self, min: u64) -> Option<(u64, u64)> {
        let &(len, _) = self.by_len.iter().next_back()?;
        if len < min.max(2) {
            return None;
        }
        let &(len, start) = self.by_len.range((len, 0)..).next()?;
        self.cut(start, len);
        Some((start, len))
    }

    /// Removes `[start, start + len)`, which must lie inside one run; returns whether it did.
    pub(crate) fn remove(&mut self, start: u64, len: u64) -> bool {
        let Some((rs, rl)) = self.run_of(start) else {
            return false;
        };
        if len == 0 || start + len > rs + rl {
            return false;
        }
        self.cut(rs, rl);
        if start > rs {
            self.put(rs, start - rs);
        }
        if rs + rl > start + len {
            self.put(start + len, rs + rl - start - len);
        }
        true
    }

    /// The runs, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let singles = self.singles.iter().map(|&s| (s, 1));
        singles.chain(self.by_start.iter().map(|(&s, &l)| (s, l)))
    }

    /// The parts of runs that fall in `[from, to)`, in no particular order.
    pub(crate) fn clipped(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let first = self
            .by_start
            .range(..=from)
            .next_back()
            .map_or(from, |(&s, _)| s);
        let runs = self
            .by_start
            .range(first..to.max(first))
            .map(move |(&s, &l)| (s.max(from), (s + l).min(to)))
            .filter(|(s, e)| s < e)
            .map(|(s, e)| (s, e - s));
        let singles = self.singles.range(from..to.max(from)).map(|&s| (s, 1));
        singles.chain(runs)
    }

    /// Empties the set, returning its runs.
    pub(crate) fn drain(&mut self) -> Vec<(u64, u64)> {
        let runs = self.iter().collect();
        *self = Extents::default();
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet as Set;

    fn pages_of(e: &Extents) -> Set<u64> {
        e.iter().flat_map(|(s, l)| s..s + l).collect()
    }

    /// Runs are disjoint, non-adjacent, single pages apart, and both indexes agree.
    fn well_formed(e: &Extents) {
        let mut runs: Vec<(u64, u64)> = e.iter().collect();
        runs.sort_unstable();
        let mut prev_end = None;
        let mut pages = 0;
        for (s, l) in runs {
            assert!(l > 0);
            if let Some(p) = prev_end {
                assert!(s > p, "runs touching or overlapping at {s}");
            }
            prev_end = Some(s + l);
            if l == 1 {
                assert!(e.singles.contains(&s) && !e.by_start.contains_key(&s));
            } else {
                assert!(e.by_len.contains(&(l, s)) && !e.singles.contains(&s));
            }
            pages += l;
        }
        assert_eq!(e.by_len.len(), e.by_start.len());
        assert_eq!(pages, e.pages);
    }

    #[test]
    fn neighbours_coalesce_and_best_fit_prefers_the_shortest_run() {
        let mut e = Extents::default();
        assert!(e.insert(10, 2));
        assert!(e.insert(14, 2));
        assert_eq!(e.runs(), 2);
        assert!(e.insert(12, 2), "the hole between them");
        assert_eq!(e.iter().collect::<Vec<_>>(), [(10, 6)]);
        assert!(!e.insert(15, 3), "overlapping pages are refused");
        assert!(e.insert(40, 1));
        assert!(e.insert(30, 3));
        // One page: the single-page hole, not the front of the long run.
        assert_eq!(e.take(1), Some(40));
        assert_eq!(e.take(3), Some(30));
        assert_eq!(e.take(7), None);
        assert_eq!(e.take(4), Some(10));
        assert_eq!(e.iter().collect::<Vec<_>>(), [(14, 2)]);
        assert!(e.remove(15, 1));
        assert!(!e.remove(15, 1));
        assert_eq!(e.iter().collect::<Vec<_>>(), [(14, 1)]);
        well_formed(&e);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u64),
        Take(u64),
        Remove(u64, u64),
        TakeLowest,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..200, 1u64..12).prop_map(|(s, l)| Op::Insert(s, l)),
            (1u64..10).prop_map(Op::Take),
            (0u64..200, 1u64..6).prop_map(|(s, l)| Op::Remove(s, l)),
            Just(Op::TakeLowest),
        ]
    }

    proptest! {
        /// Against a set of single pages: the same pages, runs coalesced, `take` returns a
        /// run of free pages that is the shortest one holding `n`.
        #[test]
        fn behaves_as_a_set_of_pages(ops in proptest::collection::vec(op(), 1..120)) {
            let mut e = Extents::default();
            let mut model = Set::new();
            for op in ops {
                match op {
                    Op::Insert(s, l) => {
                        let clash = (s..s + l).any(|p| model.contains(&p));
                        prop_assert_eq!(e.insert(s, l), !clash);
                        if !clash {
                            model.extend(s..s + l);
                        }
                    }
                    Op::Take(n) => {
                        let shortest = e.iter().filter(|&(_, l)| l >= n).map(|(_, l)| l).min();
                        match e.take(n) {
                            Some(s) => {
                                prop_assert!((s..s + n).all(|p| model.remove(&p)));
                                // The run it came from was the shortest that held n.
                                let mut len = n;
                                while model.contains(&(s + len)) { len += 1; }
                                prop_assert_eq!(Some(len), shortest);
                            }
                            None => prop_assert_eq!(shortest, None),
                        }
                    }
                    Op::TakeLowest => {
                        let lowest = model.iter().next().copied();
                        prop_assert_eq!(e.take_lowest(), lowest);
                        if let Some(p) = lowest {
                            model.remove(&p);
                        }
                    }
                    Op::Remove(s, l) => {
                        let inside = e.run_of(s).is_some_and(|(rs, rl)| s + l <= rs + rl);
                        prop_assert_eq!(e.remove(s, l), inside);
                        if inside {
                            for p in s..s + l { model.remove(&p); }
                        }
                    }
                }
                well_formed(&e);
                prop_assert_eq!(&pages_of(&e), &model);
                for p in [0u64, 17, 63, 150] {
                    prop_assert_eq!(e.contains(p), model.contains(&p));
                    prop_assert_eq!(e.overlaps(p, 5), (p..p + 5).any(|x| model.contains(&x)));
                    let clipped: Set<u64> = e.clipped(p, p + 40).flat_map(|(s, l)| s..s + l).collect();
                    let want: Set<u64> = model.range(p..p + 40).copied().collect();
                    prop_assert_eq!(clipped, want);
                }
            }
        }
    }
}
