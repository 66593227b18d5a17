//! The BP-tree: an in-memory concurrent B+tree whose leaves are buffered partitioned arrays
//! (Wheatman, Burns, Buluç, Xu: "BP-tree: Overcoming the Point-Range Operation Tradeoff for
//! In-Memory B-trees", PVLDB 2023; `shared/seeds/bp-tree.txt`).
//!
//! Big leaves make long range scans fast but make sorted-array inserts slow (Figure 1). The BPA
//! leaf (section 3) keeps big leaves cheap to update: a small unsorted log buffers inserts, a
//! sorted header partitions the rest into unsorted blocks, and sorting happens only when an
//! ordered iteration needs it.
//!
//! Files, one concept each:
//! - [`leaf`]: the [`Leaf`] trait, the only part that varies between the BP-tree and
//!   the baseline;
//! - [`bpa`]: the BPA leaf (section 3, `num_elts` of section 5), with its flush
//!   (cases 2a and 2b, redistribute) in `bpa_flush.rs` and property tests in `bpa_tests.rs`;
//! - [`sorted_leaf`]: the baseline's sorted-array leaf (section 2);
//! - `inline`: leaf arrays stored inline in the leaf's node allocation, at offsets fixed by
//!   the leaf shape, and [`Standalone`] for a leaf outside a tree;
//! - `inner`: internal nodes, sorted arrays of pivots (section 5) read optimistically;
//! - [`tree`]: the concurrent tree shared by both leaf kinds (sections 2.1 and 5),
//!   with the concurrency scheme and why it was chosen;
//! - [`options`]: option structs for CLI engine specs;
//! - [`kv`]: [`BpTreeStore`], the `KvStore` adapter over u64 keys and values.
//!
//! Native use:
//!
//! ```
//! use std::ops::Bound;
//! use sylva::mem::bptree::BpTree;
//!
//! let tree: BpTree<u64, u64> = BpTree::new();
//! for k in [0, 7, u64::MAX] {
//!     tree.insert(k, k / 2);
//! }
//! assert_eq!(tree.find(&7), Some(3));
//! let mut seen = Vec::new();
//! tree.iterate_range(Bound::Included(1), 10, |k, _| { seen.push(k); true });
//! assert_eq!(seen, [7, u64::MAX]);
//! let mut sum = 0;
//! tree.map_range(0, Some(8), |_, v| { sum += v; true });
//! assert_eq!(sum, 3);
//! ```
//!
//! What differs from the paper is documented in each file; in short: every key is valid (the
//! artifact reserves 0); deletes exist (tombstones in the BPA log); concurrency is the paper's
//! reader-writer latch scheme on leaves, with the pessimistic second descent always taken on a
//! split, and optimistic lock coupling on internal nodes (so keys must be [`InnerKey`]s); a full
//! BPA leaf shares with its right sibling or splits two-into-three before it would split alone,
//! which keeps memory at about 22 bytes per u64 pair instead of swinging between 21 and 29; nodes
//! prefetch the cache lines a lookup needs (measured with `perf`: finds are bound by misses).
//! For that, a leaf is one allocation (latch, leaf fields, then its arrays at an offset fixed by
//! the shape), so a descent prefetches a leaf's latch line, log and header, and a child internal
//! node whole, as soon as it has read their address.
//!
//! Measurements: `examples/bptree_tables.rs` and `docs/results/bptree.md`.

pub mod bpa;
mod inline;
mod inner;
pub mod kv;
pub mod leaf;
pub mod options;
pub mod sorted_leaf;
pub mod tree;

pub use bpa::{Bpa, BpaShape};
pub use inline::Standalone;
pub use inner::InnerKey;
pub use kv::{BpTreeStore, BPTREE_LIMITS};
pub use leaf::Leaf;
pub use options::{BaselineOptions, BpTreeOptions};
pub use sorted_leaf::{SortedLeaf, SortedShape};
pub use tree::{BpTree, TreeStats};

use crate::error::Result;

/// The paper's baseline B+tree: the same tree with sorted-array leaves.
pub type BaselineTree<K, V> = BpTree<K, V, SortedLeaf<K, V>>;

/// Pivots that fit in an internal node of `bytes` bytes: a pivot (stored as a 64-bit word, see
/// [`InnerKey`]) plus a child pointer each; the node's 40-byte header comes on top.
fn inner_capacity(bytes: usize) -> usize {
    bytes / (std::mem::size_of::<u64>() + std::mem::size_of::<usize>())
}

impl<K, V> BpTree<K, V, Bpa<K, V>>
where
    K: InnerKey,
    V: Copy + Send + Sync + 'static,
{
    /// An empty BP-tree with the paper's default sizes.
    pub fn new() -> Self {
        let o = BpTreeOptions::default();
        Self::with_shape(BpaShape::default(), inner_capacity(o.internal_size))
    }

    /// An empty BP-tree with `options`' sizes; out-of-range options are `InvalidArgument`.
    pub fn with_options(options: &BpTreeOptions) -> Result<Self> {
        let shape = options.shape()?;
        Ok(Self::with_shape(
            shape,
            inner_capacity(options.internal_size),
        ))
    }
}

impl<K, V> Default for BpTree<K, V, Bpa<K, V>>
where
    K: InnerKey,
    V: Copy + Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V> BpTree<K, V, SortedLeaf<K, V>>
where
    K: InnerKey,
    V: Copy + Send + Sync + 'static,
{
    /// An empty baseline B+tree; out-of-range options are `InvalidArgument`.
    pub fn baseline(options: &BaselineOptions) -> Result<Self> {
        options.validate()?;
        let pair = (std::mem::size_of::<K>() + std::mem::size_of::<V>()).max(1);
        let shape = SortedShape {
            slots: (options.node_size / pair).max(2),
        };
        Ok(Self::with_shape(
            shape,
            inner_capacity(options.internal_bytes()),
        ))
    }
}
