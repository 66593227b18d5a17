//! The s-tree (§3.1): s-nodes in memory, immutable and shared through `Arc`, and the
//! [`Version`] readers hold (the active and frozen roots with the s-tree).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::dtree::{DTree, TAG_PUT};
use crate::btree::BTree;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};

/// An s-node: s-keys, children (none in a leaf) and a d-tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct SNode {
    /// s-keys, ascending; child `i` holds keys in `[keys[i−1], keys[i])`.
    pub(crate) keys: Vec<Vec<u8>>,
    /// `keys.len() + 1` children, or none (a leaf).
    pub(crate) children: Vec<Arc<SNode>>,
    /// The d-tree (`None`: empty).
    pub(crate) dtree: Option<Arc<DTree>>,
    /// Lazy removal (§5.1): the d-tree's records below this key were flushed to the children
    /// and are dead (empty: none are).
    pub(crate) start: Vec<u8>,
    /// Records and record bytes of the d-tree from `start` on.
    pub(crate) live_records: u64,
    pub(crate) live_bytes: u64,
}

impl SNode {
    pub(crate) fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// The child whose range holds `key`.
    pub(crate) fn child_index(&self, key: &[u8]) -> usize {
        self.keys.partition_point(|k| k.as_slice() <= key)
    }

    /// Sets the d-tree to `d` (all of it live), retiring the one it replaces.
    pub(crate) fn set_dtree(&mut self, d: Option<DTree>) {
        if let Some(old) = self.dtree.take() {
            old.retire();
        }
        let (records, bytes) = d
            .as_ref()
            .map_or((0, 0), |d| (d.extent.records, d.extent.bytes));
        self.dtree = d.map(Arc::new);
        self.start.clear();
        self.live_records = records;
        self.live_bytes = bytes;
    }

    /// Memory the d-trees under it keep in their handles: inner pages and Bloom filters.
    pub(crate) fn dtree_memory(&self) -> u64 {
        let own = self.dtree.as_ref().map_or(0, |d| d.memory());
        own + self.children.iter().map(|c| c.dtree_memory()).sum::<u64>()
    }

    /// Height of the subtree (a leaf is 1).
    pub(crate) fn height(&self) -> usize {
        1 + self.children.first().map_or(0, |c| c.height())
    }
}

/// An in-memory root d-tree: the tree, and the record bytes put into it.
pub(crate) struct RootTree {
    pub(crate) tree: BTree,
    pub(crate) bytes: AtomicU64,
}

impl RootTree {
    pub(crate) fn new(page_size: usize) -> Result<RootTree> {
        Ok(RootTree {
            tree: BTree::new(crate::btree::Options {
                page_size,
                ..crate::btree::Options::default()
            })?,
            bytes: AtomicU64::new(0),
        })
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Memory its pages take (pages in use × page size; the store's chunks are 1 MiB).
    pub(crate) fn memory(&self) -> u64 {
        use crate::btree::NodeStore;
        let store = &self.tree.store;
        store.pages_in_use() * store.page_size() as u64
    }
}

/// What readers see: the roots and the s-tree, swapped whole when any changes.
pub(crate) struct Version {
    pub(crate) active: Arc<RootTree>,
    /// Frozen roots being moved down, newest first.
    pub(crate) frozen: Vec<Arc<RootTree>>,
    /// The s-tree's root s-node (its d-tree is the root's on-disk part `R`).
    pub(crate) root: Arc<SNode>,
}

impl Version {
    /// Memory the roots take: the active one and the frozen ones.
    pub(crate) fn roots_memory(&self) -> u64 {
        self.active.memory() + self.frozen.iter().map(|f| f.memory()).sum::<u64>()
    }
}

/// Where a lookup found the key.
pub(crate) enum Found {
    /// Tagged value in `out`.
    Yes,
    No,
}

impl Version {
    /// Looks `key` up, newest first: the tagged value goes into `out`. Leaves are read
    /// through `pool` (the leaf cache); d-tree leaf reads are counted in `reads`.
    pub(crate) fn get_tagged(
        &self,
        key: &[u8],
        out: &mut Vec<u8>,
        pool: &BufferPool,
        reads: &AtomicU64,
    ) -> Result<Found> {
        if self.active.tree.get_into(key, out)? {
            return Ok(Found::Yes);
        }
        for f in &self.frozen {
            if f.tree.get_into(key, out)? {
                return Ok(Found::Yes);
            }
        }
        let h = super::bloom::hash(key);
        let mut node = &self.root;
        let mut depth = 0;
        loop {
            if let Some(d) = &node.dtree {
                if key >= node.start.as_slice() && d.may_contain(h) {
                    reads.fetch_add(1, Ordering::Relaxed);
                    if d.get(key, pool, out)? {
                        return Ok(Found::Yes);
                    }
                }
            }
            if node.is_leaf() {
                return Ok(Found::No);
            }
            depth += 1;
            if depth > 64 {
                return Err(Error::Corruption {
                    page: 0,
                    detail: "s-tree deeper than 64 levels".into(),
                });
            }
            node = &node.children[node.child_index(key)];
        }
    }
}

/// Whether a tagged value is a put (and not a tombstone).
#[inline]
pub(crate) fn is_put(tagged: &[u8]) -> bool {
    tagged.first() == Some(&TAG_PUT)
}
