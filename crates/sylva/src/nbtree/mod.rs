//! `NbTree`: the Nested B-tree of `../shared/seeds/nb-tree.txt`, final version (§5): a B-tree
//! (the *s-tree*) whose nodes each own a B+tree (a *d-tree*) written once, sequentially, into a
//! contiguous run of pages. Inserts go into the root's in-memory d-tree and move down by merges;
//! lookups visit one s-node per level, a Bloom filter first.
//!
//! # The structure (§3.1, §5.1)
//!
//! - **s-tree** (`stree`): in memory, immutable nodes shared through `Arc` (a change copies
//!   the path it touches and publishes a new `stree::Version`). An s-node holds its s-keys,
//!   its children (at most `f`, at least ⌈f/2⌉ below the root; none in a leaf) and a d-tree.
//!   Child `i`'s keys lie in `[K_{i−1}, K_i)`. It is persisted as the *manifest* (`manifest`).
//! - **d-trees** (`dtree`): slotted B+trees (`page::slotted`, the format `Db` uses) built
//!   bottom-up with `page::build::Builder` into one contiguous run: the leaves in key order,
//!   then each inner level, then the d-tree's Bloom filter; written in I/Os of at most 1 MiB.
//!   Page kinds `DTreeLeaf` (32), `DTreeInner` (33), `Bloom` (34). A leaf record's value is a
//!   tag byte (1 put, 0 tombstone) and the value. A d-tree's inner pages and its filter are
//!   read into memory when the d-tree is written or loaded; lookups read its leaves through
//!   the *leaf cache*, a [`crate::buffer::BufferPool`] over the same page file whose budget
//!   is what `cache_bytes` leaves beside the roots' pages and the d-trees' inner pages and
//!   filters, moved as they change (at each commit, and each σ/16 of root growth, when it
//!   evicts at once: `NbEngine::rebudget`); merges and scans read runs past it. The file is opened with `O_DIRECT` where the file system allows, as `Db`'s
//!   is: a buffered miss costs the reading thread the kernel's page-cache reclaim when memory
//!   is bounded, and the page cache would hold a second copy of the leaves. A run reused for a new d-tree is forgotten by the pool
//!   before it is written.
//! - **The root s-node's d-tree** is three parts, newest first: the *active* root, an in-memory
//!   [`crate::btree::BTree`] taking writes (every write logged first), the *frozen* root (an
//!   active root that filled and is being moved down), and an on-disk d-tree `R` (see the
//!   departures below).
//!
//! # The algorithms (§3.2, §4.1, §5.1; `cascade`)
//!
//! When the root's d-tree holds more than σ bytes the active root is frozen, a fresh one takes
//! writes, and the frozen one is moved down by **HandleFullSNode**:
//! - on a leaf s-node: **SNodeSplit** at the median d-key, two new d-trees, the median and the
//!   two halves go to the parent (a new root when the leaf was the root);
//! - on an inner s-node: **flush** moves at most σ bytes of its d-tree (from the d-tree's start
//!   pointer, in key order) into the children whose ranges they fall in, each child touched
//!   rewritten as one sequential merge of the moved records (newer) with its own d-tree
//!   (older); the parent's d-tree is not rewritten: its start pointer moves past the moved
//!   records (**lazy removal**, §5.1), and the dead prefix disappears when the parent itself is
//!   rewritten as a child. Then **one recursive call**, on the largest child over σ (§5.1).
//!   A child's split adds a key and a child; more than `f` children split the s-node at its
//!   median s-key (its d-tree split at that key), up to a new root.
//!
//! Deletes and overwrites are delta records (§3.2.2): a put is blind; a delete reads first (to
//! report presence) and inserts a tombstone; a tombstone that reaches a leaf s-node's d-tree is
//! dropped, since nothing older is below it. No s-node merging.
//!
//! # Queries (§3.2.3, §5.2)
//!
//! A lookup takes the current version (an `Arc`) and reads the active root, the frozen root,
//! then one s-node per level: the Bloom filter first, then (if the key is past the s-node's
//! start pointer) the d-tree's inner pages in memory and one leaf read. `scan` and `map_range`
//! merge one iterator per source (active, frozen, then one per s-tree level, each chaining that
//! level's s-nodes in key order), newest first, hiding tombstones; the paper has no range
//! queries. A run is freed once no version holds its d-tree and the checkpoint that dropped it
//! is durable ([`crate::io::PageFile::free_run_after_checkpoint`] from the d-tree's `Drop`,
//! with the meta sequence of the checkpoint during whose flush it was replaced); a run written
//! and replaced between two meta pages (an intermediate d-tree of a cascade) is named by no
//! durable manifest and is freed as soon as no version holds it. So a commit's cascade can reuse every
//! run the commit before it replaced.
//!
//! # Durability: commits are the durability layer's checkpoints (`engine`)
//!
//! The NB-tree plugs into `crate::durable` like `Db`. Every write is logged (PUT 64, DELETE
//! 65) before it is applied and acknowledged per [`crate::SyncMode`]. A *commit* is a
//! checkpoint of that layer, triggered when the root's d-tree passes σ
//! (`durable::Engine::logged_bytes` is the root's byte count and the checkpoint
//! threshold is σ):
//! 1. with writers held back, the log rotates to its other segment at LSN `l`, the active root
//!    is frozen, and a *manifest head* page is allocated; the meta page to come will name it
//!    and `l` (`begin_checkpoint`);
//! 2. writers go on while the frozen root is moved down (`flush`): new d-trees are written,
//!    then the manifest (the whole s-tree, pages of kind `Manifest`, 35), then the head page;
//! 3. the layer fsyncs the page file and the log, writes the meta page (its owner area holds
//!    `sylvaNB\0`, the version, f, σ, the Bloom bits, the head page and `l`) and drops the old
//!    log segment.
//!
//! A cascade also commits inside itself after the children it rewrites (`cascade`, "Commit
//! points"): a manifest and meta page naming the s-tree as it stands and the log position of
//! the checkpoint in force, so the runs it has replaced so far are freed and reused (a d-tree's
//! run is in pieces, `pieces`, and fits holes shorter than itself) before it ends.
//!
//! **Recovery**: meta page → head → manifest → d-trees' inner pages and filters; every page of
//! a live run is marked in use and every other page not free is freed (free space is the
//! complement of the live runs, since the fuzzy checkpoint's recorded free space predates the
//! runs it wrote); then the log from `l` is replayed into the active root, and the layer's quiet
//! checkpoint commits it. A torn meta page falls back to the previous checkpoint, whose
//! manifest and runs are intact because a run that manifest names is freed only once a later
//! checkpoint is durable (the torn one is not; a failed checkpoint poisons the store). The
//! free space a checkpoint records still counts the runs its own commit replaced as in use;
//! recovery's complement of the live runs frees them.
//!
//! # Departures from the paper, and why
//!
//! - **The root's on-disk d-tree `R`.** The paper never persists the root's d-tree (it has no
//!   log or restarts). Here a commit must make the root's records durable even when the root is
//!   not full (at close, after recovery, at `checkpoint()`): such a commit merges the frozen
//!   root with `R` into a new `R` (at most σ bytes) instead of moving it down. When the root is
//!   full (frozen plus `R` at least σ), HandleFullSNode(root) moves its first σ bytes down and
//!   writes the rest as the new `R`: every flush moves at most σ, as in §4.1, so what a level
//!   receives and what it passes on stay balanced (moving all of it let siblings' sizes grow
//!   without bound when roots ran over σ).
//! - **Sizes are bytes**: σ counts a d-tree's record bytes (key, tag, value), as the paper's
//!   experiments do; the analysis' counts become bytes.
//! - **Commit cadence.** The paper has no commit; here each σ of inserts ends with one fsync of
//!   the page file and one of the log, and the old log segment is dropped.
//! - **The leaf cache** is the buffer pool with optimistic reads (a version, then a validation)
//!   and no writes: d-tree leaves are immutable while a version holds them. §6.2 caches inner
//!   nodes and filters in memory; here they, both roots and the leaf cache share
//!   `cache_bytes`: the leaf cache gets what the others leave, so a read-only phase after a
//!   commit (empty roots) gives nearly all of it to leaves. Outside the budget, as `Db`'s
//!   memory beyond its pool is outside its: a cascade's records in memory while it runs, and
//!   the inner pages and filters of d-trees a cascade has written but not yet published.
//! - **Deamortization** (§5.1): the cascade runs on the durability layer's checkpoint thread
//!   with `deamortize=on`, and inside the filling insert with `deamortize=off` (no background
//!   threads). With it on, inserts pace themselves against the cascade's written bytes, and one
//!   that finds it behind waits for one step of `step_bytes` *run by the merger thread*, not by
//!   itself: the cascade's place is the merger's stack, not a resumable data structure
//!   (`cascade`, with the `inline_steps` / `stalls` / `max_backlog` counters). Records the
//!   merger reads or gathers without writing count as steps too, so no wait lasts a whole
//!   gather; a commit point's fsyncs are not steps (an insert behind its pace goes on while the
//!   merger is in them, below half the root), and the job ends when its last d-tree is
//!   published, so no insert waits for the commit's tail (`cascade`, "Deamortization"). The merger runs at the writers' priority, not at the nice 10 the issue asked: an
//!   insert waiting for its step waited as long as the scheduler kept a nice-10 thread off the
//!   CPU (measured in `docs/results/nbtree.md`, session 19).
//! - **The merger's I/O overlaps its merging**: the page file is `O_DIRECT` (no kernel
//!   read-ahead or write-back), so a merge's cursor reads the next 1 MiB on a thread of its own
//!   (`readahead`) and a d-tree's writer hands each full buffer to one (`writebehind`), since
//!   the merger bounds a load (`docs/results/nbtree.md`). Writers keep their log record and
//!   tagged value in thread-local buffers: with `MALLOC_ARENA_MAX=1` (the bench under a memory
//!   limit) an allocation a write made the merger wait for glibc's arena lock.
//!
//! # Status against issue 22
//!
//! Built and tested: the structure, the root d-tree with the log, d-trees in runs with Bloom
//! filters, HandleFullSNode / flush / SNodeSplit with the single recursive call and lazy
//! removal, commits and recovery on the durability layer (with atomic write batches), commits
//! inside a cascade, queries and merged scans over `Arc` versions, the leaf cache within
//! `cache_bytes`, freeing of replaced runs once the commit that replaced them is durable, the
//! deamortized cascade's pacing and counters, and the bad-input errors. Partial: steps are taken by the merger thread while a behind insert
//! waits (above); inner pages and filters stay in memory in full (they grow with the data,
//! about 1% and 10 bits a record, and shrink the leaf cache; past `cache_bytes` the leaf cache
//! keeps 16 frames and memory goes over the budget); the file's high-water mark holds the live
//! runs and what a cascade writes between two of its commit points (after each child it
//! rewrites, once σ/4 is written: about one child's rewrite, and a split right after its
//! merge); holes are reused since d-trees are in pieces. Session 3 measured 2.02× the raw bytes
//! after a 3M-record load (holes too short for contiguous runs: 87% of the file's growth);
//! pieces and per-child commits give 1.45× at 3M and 1.32× in `tests/nbtree_load_space.rs`
//! (`docs/results/nbtree.md`, session 4); the bulk builder (`dtree::Writer`) lives here, not yet shared
//! with `Db` or TreeLine. Data 8× the budget matches its model within a bounded resident set
//! (`tests/nbtree_memory.rs`).

pub(crate) mod bloom;
pub(crate) mod cascade;
mod check;
pub(crate) mod dtree;
mod engine;
pub(crate) mod log;
pub(crate) mod manifest;
mod options;
mod pieces;
mod readahead;
mod scan;
mod store;
pub(crate) mod stree;
mod writebehind;

pub use check::NbCheckReport;
pub use options::{NbTreeOptions, OPTION_KEYS};
pub use store::NbTree;
