//! `btree`: the in-memory B+tree of fixed-size slotted pages with variable-size keys from
//! "B-Trees Are Back" (SIGMOD 2025), synchronized with optimistic lock coupling.
//!
//! Files and the paper sections they implement:
//! - [`options`]: the layouts of the paper's ablation (Figure 7) plus `adaptive`, and the page
//!   size;
//! - `tree`: descent, get/put/delete, split (section 2), optimistic lock coupling (section 7.1);
//! - `merge`: merge at ≥ 3/4 empty (section 2);
//! - `walk`: scans and range maps over records copied from each leaf and validated;
//! - `leaf`: leaf split, merge and layout conversion over every leaf kind (comparison,
//!   fingerprinting, semi-dense, fully-dense), with the dense split and the partition-aware
//!   separator (sections 3.5, 4.6) and key-adaption (section 5.1);
//! - `redistribute`: deferred splits, B*-tree style (not in the paper; see below);
//! - `adapt`: operation-adaption (section 5.1);
//! - `records`: records with full keys in one buffer, as splits, merges and walks carry them;
//! - `store`: the node-store interface (pages by id, each with a versioned latch handle, a
//!   write gate and logging hooks the tree calls with the changed pages still latched) and its
//!   in-memory implementation; the durable one is `crate::db`'s, over the buffer pool;
//! - `check`: the structural check;
//! - `floor`: [`BTree::floor`], the last key at or below a key;
//! - `kv`: the [`crate::KvStore`] implementation.
//!
//! Node formats live in [`crate::page`].
//!
//! Status against the issue: implemented are the baseline slotted page, prefix truncation, heads,
//! hints, fingerprinting leaves, semi-dense leaves, fully-dense leaves and the adaptive policy
//! (layouts `baseline`, `prefix`, `heads`, `hints`, `fingerprint`, `semidense`, `dense`,
//! `adaptive`; default `adaptive`), optimistic lock coupling, split with the shortest separator,
//! deferred splits (off by default in memory, on by default in the durable `Db`;
//! [`Options::redistribute`]), merge at ≥ 3/4 empty, and
//! `check()`. Not implemented: contention split (section 7.3).
//!
//! Reads and writes to shared memory: point reads never write unless the adaptive layout's
//! operation counter is to change (probability 0.05, and only for leaves whose keys have poor
//! heads); a scan writes when it sorts a fingerprinting leaf's unsorted tail (the paper's lazy
//! sort) or, in the adaptive layout, bumps the counter (probability 0.15). Each such write takes
//! the leaf's write latch like any writer.
//!
//! Differences from the paper:
//! - Deferred splits (B*-tree style; `redistribute`, off by default here and on by default in
//!   `crate::db`, whose space target relies on it): a leaf that would get an
//!   ordinary median split first moves records into its neighbour under the same parent when
//!   that has at least 1/8 of a page free, and otherwise splits together with the neighbour
//!   two-into-three; only a leaf without a comparison-leaf neighbour under its parent, or whose
//!   parent lacks room for the new separators, still splits 1-to-2. The paper splits 50/50,
//!   which leaves leaves about ln 2 ≈ 69% full after random inserts (about 110 bytes of 4 KiB
//!   page per record of an 8-byte key and a 56-byte value); deferred splits reach about 84%
//!   (about 91 bytes), at the price of 2.7 times as many structure changes during random
//!   inserts (1M-record loads ran at 0.69× in memory and 0.57× in the database;
//!   `docs/results/db.md`; on string keys in memory about half an insert's time,
//!   `docs/results/btree.md`, which is why the in-memory default is the paper's policy).
//!   Conversions to dense leaves, dense splits and the partition-aware split point keep their
//!   precedence; dense leaves and inner nodes never redistribute (inner nodes are about 1% of
//!   the pages). With deferred splits, ascending inserts into comparison leaves fill about 65%
//!   of each leaf instead of 50%.
//! - Dense leaves: a fully-dense leaf that is asked to take a record it cannot hold (another key
//!   length or value length, or a key past its last slot while under a quarter full) is
//!   rewritten as the default leaf kind when that fits, else split.
//! - Semi-dense leaves (the `semidense` layout: hints plus semi-dense leaves, the paper's SDL
//!   configuration of section 4.6) are built where they fit *and* take no more bytes than a
//!   comparison leaf, so split halves and merges of sparse ranges stay comparison leaves; one
//!   that cannot take a record becomes a comparison leaf in place when that holds everything,
//!   else splits at the median. They get neither the dense split nor the partition-aware
//!   separator (the paper applies both to fully-dense leaves only), and the adaptive layout does
//!   not use them (its policy, section 5.1, chooses among comparison, fingerprinting and
//!   fully-dense leaves).
//! - Key-adaption's "good heads" test is `16 × (adjacent equal heads) ≤ records`, with heads of
//!   the prefix-truncated keys.
//! - Merge: after a delete leaves a node with ≥ 3/4 of its page free, it is merged with its right
//!   neighbour under the same parent (the left one for the last child) if the union fits one
//!   page. Merges cascade to inner nodes; the tree never shrinks in height (an inner root may
//!   end up with no keys and only its upper child).
//! - Limits ([`limits`] states the condition a split relies on): by default a
//!   record must fit in a quarter page, split as keys up to 1/16 of the page
//!   ([`max_key_len`]: 256 bytes at 4 KiB) and values up to the rest of the quarter after a
//!   10-byte slot ([`max_value_len`]: 758 bytes at 4 KiB). Fences are stored untruncated, so a
//!   node must hold two maximal fences plus records; the split keeps that true. `crate::db`'s
//!   trees of state versions 5 and 6 use the long-key limits ([`long_max_key_len`]: 777 bytes
//!   with a 4 KiB page's node), which bound a record's key and value together; version 6 keeps
//!   longer keys out of the tree (`crate::db::buckets`).

mod adapt;
mod check;
mod descent;
mod floor;
mod kv;
mod leaf;
pub mod limits;
mod merge;
pub mod options;
mod records;
pub(crate) use descent::{take_missed_at, ChildPos};
pub(crate) use records::Records;
pub(crate) use walk::WalkCursor;
mod redistribute;
mod split;
pub(crate) mod store;
mod tree;
mod walk;

pub use crate::sync::{Abort, Latch, Olc};
pub use check::CheckReport;
pub use limits::{long_max_key_len, long_max_record_len, max_key_len, max_value_len};
pub use options::{Layout, Options};
pub use store::{MemNodeStore, NodeLatch, NodeStore, ParentEdit};
pub use tree::BTree;
pub(crate) use tree::Deleted;
