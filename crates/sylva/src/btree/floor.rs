//! [`BTree::floor`]: the last key at or below a key (TreeLine's segment index, `crate::treeline`,
//! finds a key's segment as the floor of its lower bounds).
//!
//! Leaves have no sibling pointers and their ranges are `(lower, upper]`: the floor is in the
//! leaf holding the key, or, when every key there is larger (or it is empty), in the leaf holding
//! that leaf's lower fence, and so on leftwards until a leaf has a record at or below the key or
//! the first leaf (empty lower fence) is passed.

use super::store::NodeStore;
use super::tree::BTree;
use crate::error::Result;
use crate::page::corrupt;

impl<S: NodeStore> BTree<S> {
    /// The last record whose key is `<= key`, as `(key, value)` copies; `None` if every key is
    /// larger (or the tree is empty).
    pub fn floor(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.limits().check_key(key)?;
        let mut probe = key.to_vec();
        loop {
            let (lower, found) = self.leaf_floor(&probe, key)?;
            if found.is_some() {
                return Ok(found);
            }
            if lower.is_empty() {
                return Ok(None);
            }
            // Each step moves to a leaf whose keys are at most `lower`, strictly below the
            // probe; damaged fences that do not would loop forever.
            if lower.as_slice() >= probe.as_slice() {
                return Err(corrupt(
                    0,
                    "a leaf's lower fence is not below the key that led to it",
                ));
            }
            probe = lower;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::btree::{BTree, Layout, Options};

    #[test]
    fn floor_finds_the_last_key_at_or_below_across_leaves() {
        for layout in Layout::ALL {
            let t = BTree::new(Options {
                layout,
                ..Options::default()
            })
            .unwrap();
            assert_eq!(t.floor(b"x").unwrap(), None);
            // Even keys 2..20000 over many leaves.
            for i in 1..10_000u64 {
                t.put(&(2 * i).to_be_bytes(), &i.to_le_bytes()).unwrap();
            }
            assert_eq!(t.floor(&1u64.to_be_bytes()).unwrap(), None);
            for q in [2u64, 3, 4, 999, 1000, 7777, 19_998, 19_999, u64::MAX] {
                let want = (q / 2 * 2).min(19_998);
                let (k, v) = t.floor(&q.to_be_bytes()).unwrap().unwrap();
                assert_eq!(k, want.to_be_bytes(), "floor of {q}");
                assert_eq!(v, (want / 2).to_le_bytes());
            }
            // Deleting a whole run of leaves leaves them empty: the floor walks past them.
            for i in 2_000..9_000u64 {
                t.delete(&(2 * i).to_be_bytes()).unwrap();
            }
            let (k, _) = t.floor(&17_000u64.to_be_bytes()).unwrap().unwrap();
            assert_eq!(k, 3_998u64.to_be_bytes());
        }
    }
}
