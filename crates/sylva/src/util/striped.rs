//! A counter spread over cache lines, for counts every thread bumps on a hot path (the buffer
//! pool's hits, the run cache's): one shared `fetch_add` per access moves the counter's line
//! between the cores on each, which measurably slows reads on two threads. Each thread adds to
//! its own stripe (assigned round-robin when it first counts); a read sums them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Stripes per counter: threads beyond this many share stripes.
const STRIPES: usize = 8;

/// A count, added to from many threads (module docs).
#[derive(Default)]
pub(crate) struct Striped([Padded; STRIPES]);

#[derive(Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe.
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
}

impl Striped {
    /// Adds one.
    #[inline]
    pub(crate) fn add_one(&self) {
        let i = STRIPE.with(|s| *s);
        self.0[i].0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count: exact once the threads adding to it have stopped, otherwise at least what it
    /// was when the call began.
    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().map(|p| p.0.load(Ordering::Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_every_thread() {
        let c = Striped::default();
        std::thread::scope(|s| {
            for _ in 0..STRIPES + 3 {
                s.spawn(|| (0..1000).for_each(|_| c.add_one()));
            }
        });
        assert_eq!(c.sum(), (STRIPES as u64 + 3) * 1000);
    }
}
