//! Where a d-tree's pages are: its *pieces*, runs of contiguous pages in the d-tree's page order
//! (state versions 2 and 3; `docs/format.md`, "NB-tree directory"). A d-tree is a sequence of
//! pages — leaves, inner levels, Bloom filter — numbered from 0 (its *logical* page numbers);
//! piece `i` holds the next `pages` of them from page `first` of the file. Version 1 wrote one
//! piece.
//!
//! Why pieces: a merged d-tree is its old run plus the records moved into it, so it is larger
//! than the hole its predecessor leaves, and a d-tree in one contiguous run cannot reuse the
//! holes that merges leave: the file grew at its end while they stayed free (issue 22's
//! sessions 3–4, `docs/results/nbtree.md`). Every reader of a d-tree reads at most 1 MiB at a
//! time anyway, so pieces of at least 1 MiB (the last one may be shorter; σ/8 for a small σ:
//! [`super::dtree::min_piece`]) cost no I/O.

/// A d-tree's pieces (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pieces {
    /// (first page, pages), in logical order.
    runs: Vec<(u64, u64)>,
    /// The logical number of each piece's first page.
    starts: Vec<u64>,
    /// Indices into `runs`, sorted by first page.
    by_first: Vec<usize>,
}

impl Pieces {
    /// Pieces from runs in logical order; `None` if a run is empty or two overlap.
    pub(crate) fn new(runs: Vec<(u64, u64)>) -> Option<Pieces> {
        let mut starts = Vec::with_capacity(runs.len());
        let mut at = 0u64;
        for &(first, n) in &runs {
            if n == 0 || first.checked_add(n).is_none() {
                return None;
            }
            starts.push(at);
            at = at.checked_add(n)?;
        }
        let mut by_first: Vec<usize> = (0..runs.len()).collect();
        by_first.sort_unstable_by_key(|&i| runs[i].0);
        for w in by_first.windows(2) {
            let (a, b) = (runs[w[0]], runs[w[1]]);
            if a.0 + a.1 > b.0 {
                return None;
            }
        }
        Some(Pieces {
            runs,
            starts,
            by_first,
        })
    }

    /// The runs, in logical order.
    pub(crate) fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    /// Pages in all.
    pub(crate) fn pages(&self) -> u64 {
        self.starts
            .last()
            .map_or(0, |s| s + self.runs[self.runs.len() - 1].1)
    }

    /// The piece holding logical page `l`.
    fn piece_of(&self, l: u64) -> Option<usize> {
        let i = self.starts.partition_point(|&s| s <= l).checked_sub(1)?;
        (l - self.starts[i] < self.runs[i].1).then_some(i)
    }

    /// The file page of logical page `l`.
    pub(crate) fn page(&self, l: u64) -> Option<u64> {
        let i = self.piece_of(l)?;
        Some(self.runs[i].0 + (l - self.starts[i]))
    }

    /// Pages from logical page `l` to the end of its piece (0: past the end).
    pub(crate) fn contiguous_from(&self, l: u64) -> u64 {
        self.piece_of(l)
            .map_or(0, |i| self.starts[i] + self.runs[i].1 - l)
    }

    /// The logical number of file page `id`, if a piece holds it.
    pub(crate) fn logical(&self, id: u64) -> Option<u64> {
        let j = self
            .by_first
            .partition_point(|&i| self.runs[i].0 <= id)
            .checked_sub(1)?;
        let i = self.by_first[j];
        let (first, n) = self.runs[i];
        (id - first < n).then(|| self.starts[i] + (id - first))
    }

    /// The runs of logical pages `from..` (to the end), as (first page, pages).
    pub(crate) fn runs_from(&self, from: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for (i, &(first, n)) in self.runs.iter().enumerate() {
            let s = self.starts[i];
            if s + n <= from {
                continue;
            }
            let skip = from.saturating_sub(s);
            out.push((first + skip, n - skip));
        }
        out
    }

    /// Keeps logical pages `..n`; returns the runs of the rest.
    pub(crate) fn truncate(&mut self, n: u64) -> Vec<(u64, u64)> {
        let rest = self.runs_from(n);
        let mut kept = Vec::new();
        for (i, &(first, len)) in self.runs.iter().enumerate() {
            let s = self.starts[i];
            if s >= n {
                break;
            }
            kept.push((first, len.min(n - s)));
        }
        *self = Pieces::new(kept).unwrap_or_default();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::Pieces;

    #[test]
    fn maps_logical_pages_both_ways() {
        let p = Pieces::new(vec![(100, 3), (10, 2), (50, 4)]).expect("disjoint");
        assert_eq!(p.pages(), 9);
        let pages: Vec<u64> = (0..9).map(|l| p.page(l).expect("inside")).collect();
        assert_eq!(pages, [100, 101, 102, 10, 11, 50, 51, 52, 53]);
        for (l, &id) in pages.iter().enumerate() {
            assert_eq!(p.logical(id), Some(l as u64));
        }
        assert_eq!(p.page(9), None);
        assert_eq!(p.logical(12), None);
        assert_eq!(p.logical(9), None);
        assert_eq!(p.contiguous_from(1), 2);
        assert_eq!(p.contiguous_from(4), 1);
        assert_eq!(p.contiguous_from(9), 0);
        assert_eq!(p.runs_from(4), vec![(11, 1), (50, 4)]);
        let mut q = p.clone();
        assert_eq!(q.truncate(4), vec![(11, 1), (50, 4)]);
        assert_eq!(q.runs(), &[(100, 3), (10, 1)]);
        assert!(Pieces::new(vec![(10, 3), (12, 2)]).is_none());
        assert!(Pieces::new(vec![(10, 0)]).is_none());
    }
}
