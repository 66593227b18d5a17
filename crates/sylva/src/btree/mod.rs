//! `btree`: the in-memory B+tree of fixed-size slotted pages with variable-size keys from
//! "B-Trees Are Back" (SIGMOD 2025), synchronized with optimistic lock coupling.
//!
//! Files and the paper sections they implement:
//! - [`options`]: the layouts of the paper's ablation (Figure 7) and the page size;
//! - `tree`: descent, get/put/delete, ordered walks, split and merge (section 2), optimistic
//!   lock coupling (section 7.1);
//! - `store`: the node-store interface (pages by id, each with a versioned latch) and its
//!   in-memory implementation;
//! - `check`: the structural check;
//! - `kv`: the [`crate::KvStore`] implementation.
//!
//! Node formats live in [`crate::page`].
//!
//! - `leaf`: leaf split, merge and layout conversion over every leaf kind (the dense split and
//!   the partition-aware separator of sections 3.5 and 4.6).
//!
//! Status against the issue: implemented are the baseline slotted page, prefix truncation, heads,
//! hints, fingerprinting leaves and fully-dense leaves (layouts `baseline`, `prefix`, `heads`,
//! `hints`, `fingerprint`, `dense`), optimistic lock coupling, split with the shortest
//! separator, merge at ≥ 3/4 empty, and `check()`. Not implemented: semi-dense leaves
//! (section 3.5), the adaptive policy (section 5) and contention split (section 7.3); the
//! default layout is therefore `hints`, not `adaptive`.
//!
//! A scan that meets a fingerprinting leaf with an unsorted tail takes that leaf's write latch to
//! sort it (the paper's lazy sort); this is the one place a read operation writes. Point reads
//! never write.
//!
//! Differences from the paper:
//! - Merge: after a delete leaves a node with ≥ 3/4 of its page free, it is merged with its right
//!   neighbour under the same parent (the left one for the last child) if the union fits one
//!   page. Merges cascade to inner nodes; the tree never shrinks in height (an inner root may
//!   end up with no keys and only its upper child).
//! - Limits: a record must fit in a quarter page, split as keys up to 1/16 of the page
//!   ([`max_key_len`]: 256 bytes at 4 KiB) and values up to the rest of the quarter after a
//!   10-byte slot ([`max_value_len`]: 758 bytes at 4 KiB). Fences are stored untruncated, so a
//!   node must hold two maximal fences plus records; the split keeps that true.

mod check;
mod kv;
mod leaf;
pub mod options;
mod store;
mod tree;

pub use check::CheckReport;
pub use options::{Layout, Options};
pub use store::{Latch, MemNodeStore, NodeStore};
pub use tree::{max_key_len, max_value_len, BTree};
