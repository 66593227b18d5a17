//! Insert forecasting's statistics (TreeLine thesis §4.6.2–4.6.3): an equi-depth histogram of
//! inserts per epoch over a key space of `u64`s, with partition boundaries taken from a
//! reservoir sample of every insert so far.
//!
//! [`InsertTracker`] keeps two histograms: the *current* one, counting this epoch's inserts in
//! `bins` partitions whose boundaries were set when it was created, and the *frozen* one from
//! the last complete epoch, which [`InsertTracker::forecast`] reads. When an epoch's
//! `epoch_inserts` inserts have been counted, the current histogram is frozen (the older frozen
//! one is dropped) and a new one starts, its boundaries the quantiles of the sorted reservoir
//! sample (Vitter's Algorithm R, `10 × bins` keys, so at every moment a uniform sample of all
//! inserts seen). The first epoch has no sample yet and counts in one partition.
//!
//! Counting is a binary search over the boundaries: `O(log bins)`. A forecast sums the frozen
//! counts of the partitions a key range meets, a partition it meets in part contributing in
//! proportion to the overlap (linear interpolation over the partition's keys).

/// One histogram: `bounds[i]` is the first key of partition `i + 1` (partition 0 starts at 0,
/// the last ends at `u64::MAX` inclusive), `counts[i]` its inserts.
#[derive(Debug, Clone, Default)]
struct Histogram {
    bounds: Vec<u64>,
    counts: Vec<u64>,
}

impl Histogram {
    fn with_bounds(bounds: Vec<u64>) -> Self {
        let n = bounds.len() + 1;
        Histogram {
            bounds,
            counts: vec![0; n],
        }
    }

    fn partition(&self, key: u64) -> usize {
        self.bounds.partition_point(|b| *b <= key)
    }

    /// Start and end (exclusive, as u128 so the last one can end past `u64::MAX`) of partition
    /// `i`.
    fn span(&self, i: usize) -> (u128, u128) {
        let start = if i == 0 {
            0
        } else {
            self.bounds[i - 1] as u128
        };
        let end = self
            .bounds
            .get(i)
            .map_or(u64::MAX as u128 + 1, |b| *b as u128);
        (start, end)
    }

    /// Inserts counted in `[lo, hi)` (partitions met in part interpolated).
    fn estimate(&self, lo: u128, hi: u128) -> f64 {
        if hi <= lo {
            return 0.0;
        }
        let first = self.partition(lo.min(u64::MAX as u128) as u64);
        let mut sum = 0.0;
        for i in first..self.counts.len() {
            let (s, e) = self.span(i);
            if s >= hi {
                break;
            }
            let overlap = e.min(hi).saturating_sub(s.max(lo));
            if e > s && overlap > 0 {
                sum += self.counts[i] as f64 * (overlap as f64 / (e - s) as f64);
            }
        }
        sum
    }
}

/// The two histograms and the reservoir sample (module docs).
#[derive(Debug, Clone)]
pub struct InsertTracker {
    bins: usize,
    epoch_inserts: u64,
    current: Histogram,
    frozen: Option<Histogram>,
    in_epoch: u64,
    epochs: u64,
    sample: Vec<u64>,
    seen: u64,
    rng: u64,
}

impl InsertTracker {
    /// A tracker with `bins` (≥ 1) partitions per histogram and epochs of `epoch_inserts` (≥ 1)
    /// inserts.
    pub fn new(bins: usize, epoch_inserts: u64) -> Self {
        InsertTracker {
            bins: bins.max(1),
            epoch_inserts: epoch_inserts.max(1),
            current: Histogram::with_bounds(Vec::new()),
            frozen: None,
            in_epoch: 0,
            epochs: 0,
            sample: Vec::new(),
            seen: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// Bytes of memory the tracker holds (for the cache's budget).
    pub fn memory_bytes(&self) -> usize {
        // Two histograms of `bins` bounds and counts, the sample at its full size and the
        // sorted copy an epoch's end makes of it.
        std::mem::size_of::<Self>() + 2 * self.bins * 16 + 2 * 10 * self.bins * 8
    }

    /// Completed epochs.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// Counts one insert of `key`.
    pub fn record(&mut self, key: u64) {
        let i = self.current.partition(key);
        self.current.counts[i] += 1;
        self.seen += 1;
        let cap = 10 * self.bins;
        if self.sample.len() < cap {
            if self.sample.capacity() < cap {
                // Its full size at once: growing by doubling would leave up to twice that.
                self.sample.reserve_exact(cap - self.sample.len());
            }
            self.sample.push(key);
        } else {
            let j = self.next_random() % self.seen;
            if (j as usize) < cap {
                self.sample[j as usize] = key;
            }
        }
        self.in_epoch += 1;
        if self.in_epoch >= self.epoch_inserts {
            self.end_epoch();
        }
    }

    /// Freezes the current histogram and starts the next with boundaries from the sample.
    fn end_epoch(&mut self) {
        let mut sorted = self.sample.clone();
        sorted.sort_unstable();
        let mut bounds = Vec::with_capacity(self.bins);
        if !sorted.is_empty() {
            for i in 1..self.bins {
                let b = sorted[i * sorted.len() / self.bins];
                // Equal quantiles (many equal keys) merge into one partition.
                if bounds.last() != Some(&b) && b > 0 {
                    bounds.push(b);
                }
            }
        }
        let next = Histogram::with_bounds(bounds);
        self.frozen = Some(std::mem::replace(&mut self.current, next));
        self.in_epoch = 0;
        self.epochs += 1;
    }

    /// Inserts the frozen histogram counted in `[lo, hi)` (`hi = None`: to the end of the key
    /// space), times `epochs`: the forecast for the next `epochs` epochs. 0 before the first
    /// epoch ends.
    pub fn forecast(&self, lo: u64, hi: Option<u64>, epochs: u64) -> f64 {
        let Some(frozen) = &self.frozen else {
            return 0.0;
        };
        let hi = hi.map_or(u64::MAX as u128 + 1, u128::from);
        frozen.estimate(u128::from(lo), hi) * epochs as f64
    }

    /// SplitMix64: the reservoir's dice (no need for a cryptographic generator).
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Partition depths of the frozen histogram (tests).
    #[cfg(test)]
    fn frozen_counts(&self) -> Option<&[u64]> {
        self.frozen.as_ref().map(|h| h.counts.as_slice())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_forecast_before_the_first_epoch_ends() {
        let mut t = InsertTracker::new(10, 100);
        for k in 0..99 {
            t.record(k);
        }
        assert_eq!(t.forecast(0, None, 1), 0.0);
        t.record(99);
        assert_eq!(t.epochs(), 1);
        // The first epoch counts in one partition: all 100 over the whole key space.
        assert_eq!(t.forecast(0, None, 1), 100.0);
    }

    #[test]
    fn partitions_are_equi_depth_for_the_distribution_sampled() {
        let bins = 20;
        let mut t = InsertTracker::new(bins, 10_000);
        // Epoch 1 fills the sample; epoch 2 counts in partitions from it.
        let mut x = 1u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Skewed: keys cluster in the low quarter of the space.
            t.record((x >> 2) / 4 * 3 / 3);
        }
        let counts = t.frozen_counts().unwrap();
        assert_eq!(counts.len(), bins);
        let depth = 10_000 / bins as u64;
        for c in counts {
            // A 200-key sample gives each partition about 1/20 of the inserts.
            assert!(
                *c > depth / 3 && *c < depth * 3,
                "partition depth {c}, ideal {depth}: {counts:?}"
            );
        }
    }

    #[test]
    fn a_forecast_interpolates_partitions_met_in_part() {
        let mut t = InsertTracker::new(4, 1000);
        // First epoch: one partition of 1000 inserts over the whole space.
        for k in 0..1000u64 {
            t.record(k << 50);
        }
        let half = t.forecast(0, Some(1 << 63), 1);
        assert!((half - 500.0).abs() < 1.0, "{half}");
        assert!((t.forecast(0, Some(1 << 63), 3) - 1500.0).abs() < 3.0);
        assert_eq!(t.forecast(5, Some(5), 1), 0.0);
    }
}
