//! HandleFullSNode, flush and SNodeSplit (§3.2.1, §4.1, §5.1): how a frozen root moves down.
//!
//! A cascade works on copies of the s-nodes it changes (the path from the root to what it
//! touches) and returns a new root; readers keep the old version until it is published.
//!
//! - [`commit`] takes a frozen root's records. When the root's d-tree (frozen records plus the
//!   on-disk part `R`) is at most σ bytes, it merges them into a new `R` (a commit that is not
//!   a full root: close, recovery, `checkpoint()`). Otherwise HandleFullSNode(root): a leaf root
//!   splits at the median d-key; an inner root flushes its first σ bytes (in key order) to its
//!   children and the rest becomes the new `R`.
//! - [`handle_full`] on an inner s-node flushes the first σ bytes of its d-tree's live part (lazy
//!   removal: only its start pointer moves), then recurses once, on the largest child over σ
//!   (§5.1's single recursive call); on a leaf it splits.
//! - A child's split inserts its median and new sibling; more than `f` children split the
//!   s-node at its median s-key, its d-tree's live part split at that key.
//!
//! Every d-tree a cascade touches is written as one sequential merge ([`write_merge`]): the
//! moved records (newer, in memory, at most 2σ bytes) with the child's live d-tree (older,
//! read sequentially from its start pointer). Tombstones are dropped when the output is a leaf
//! s-node's d-tree (§3.2.2: nothing older is below it).
//!
//! **Commit points** (not in the paper, which has no commits). Every run a cascade replaces
//! stays named by the durable manifest until a commit that no longer names it is durable, so
//! without more the file's high-water mark holds the live runs plus a whole cascade's output (up
//! to W; `docs/results/nbtree.md`). The s-tree is complete after each child a flush rewrites:
//! the flushed s-node's start pointer moves past the records that child took (`move_start`), so
//! each record moved down is in its new child or still live in its s-node, never in neither nor
//! (as a different version) in both. At the root, whose flush takes from the frozen roots and
//! the on-disk part `R`, the old `R` stays until the children are written (its start pointer
//! moving past what went down; the frozen roots' records are in the log, replayed after a
//! crash), and the new `R` is written last. A child about to be handled is merely over σ, which
//! reads and recovery allow. At each of these points (after each child's rewrite, before going
//! down into the largest child, and after it if the s-node has at most `f` children), once the
//! cascade has written σ/[`COMMIT_FRACTION`] since it last did, it commits inside itself
//! (`Ctx::commit_inside`, `NbEngine::commit_inside`): the log fsynced, the s-tree published to
//! readers (the frozen roots still above it), a manifest and a meta page written that name it and
//! the log position of the checkpoint in force (the frozen roots' records are still in the log
//! after it, and replaying them over an s-tree that holds some of them already changes nothing:
//! they are the newest versions). Runs replaced before it are freed once it is durable and no
//! reader holds them, and the next child's run reuses them (a run is in pieces, `dtree`, so it
//! fits holes shorter than itself). The path above the s-node being handled is kept in
//! `Ctx::path` (each s-node as it stood when the cascade went down into its child, that child
//! taken out of it so that the path holds no replaced run).
//!
//! **Deamortization** (§5.1). With `deamortize=on` a cascade is a [`Job`] that the durability
//! layer's checkpoint thread runs (the *merger*, at the writers' priority, not at the nice 10
//! other engines' checkpoints get: inserts wait for its steps) while writers fill the next
//! root. Its writes go out in steps of at most `step_bytes`, each counted when it completes, and
//! so does the work between them that writes nothing (gathering the frozen roots' records,
//! merging them, reading a d-tree's live part into memory: `Job::gathered`), so that no step is
//! long. An insert paces itself against the job (`NbTree::put`, [`pace`]): W = (h + 1)(2f + 3)σ
//! being the most a cascade can write, after `a` bytes of the new root the job must have
//! written `W · a / (¾σ)` bytes until its commit has begun, and `W · (a − σ/2) / (σ/4)` once
//! it has (nothing below σ/2); an insert that finds it behind waits for one step
//! (`inline_steps`), and one that finds the root full while the job runs waits for the whole
//! job (`stalls`). So a job whose output is at most W ends before the new root is ¾ full.
//! The second half of the rule is not the paper's 1/σ of the work per insert: a job usually
//! writes far less than W, so with W spread from the first byte the inserts would go in step
//! with the merger until the job ends, and the merger would then idle while the root fills
//! (measured in `docs/results/nbtree.md`). From σ/2 on each insert behind still waits for at
//! most one step, the bound below.
//! `max_backlog` is the largest root (in bytes) a job's end found.
//!
//! - *The job's span.* It begins when the root freezes at σ (`NbEngine::freeze_if_full`; the
//!   new root's bytes count from there, and again from the commit's beginning, which freezes
//!   the root once more), so inserts wait for a merger that has not begun: the records that
//!   reach the new root before the commit begins are frozen with the full one and moved down
//!   by the same cascade, whose flush of the root moves σ and leaves the rest in the root's
//!   on-disk d-tree. Letting inserts run on unpaced until σ/4 (tried in session 20) put that
//!   much more into each cascade, and at σ = 256 KiB siblings then held more than (f + 2)σ
//!   (`tests/nbtree_deamortized.rs`). It ends when its last d-tree is published
//!   (`NbEngine::commit_frozen`): no insert waits for what the commit does after the cascade
//!   (handing memory back, the manifest, the fsyncs, the meta page, dropping the old log
//!   segment).
//! - *Commit points' fsyncs are not steps.* While the merger is in one (`Job::set_syncing`: the
//!   manifest, the page file's two fsyncs and the meta page) an insert behind its pace goes on
//!   without waiting (`sync_passes`) as long as the root is below σ/2 (which matters only
//!   before the commit has begun: after, [`pace`] asks nothing below σ/2); the inserts after
//!   it make up the pace, one step each. From σ/2 on every insert behind waits for a step,
//!   fsyncs or not: the inserts between σ/2 and ¾σ wait for up to (σ/4) / record steps (61K at σ = 32 MiB
//!   and 137-byte records), while a job has at most about W / `step_bytes` steps that write
//!   (5,760 at h = 4 and 256 KiB) and fewer that gather, so the bound still holds. A commit
//!   point's log fsync is skipped: the log is durable past every record the s-tree holds
//!   (`NbEngine::commit_inside`).
//!
//! Departure: the step runs on the merger thread while the insert waits for it, not on the
//! insert's own thread: the cascade keeps its place on the merger's stack (the recursion of
//! HandleFullSNode) rather than in a resumable data structure, so only the thread that began it
//! can continue it. The insert's delay is the same; the CPU it is charged to is the merger's.
//! With `deamortize=off` the cascade runs inside the insert that fills the root (§3–4).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::dtree::{Bound, DTree, Writer};
use super::stree::{is_put, SNode};
use crate::buffer::BufferPool;
use crate::error::Result;
use crate::io::PageFile;

/// A cascade commits inside itself once it has written σ / `COMMIT_FRACTION` since it last did
/// (module docs, "Commit points"): what it wrote since is what the file's high-water mark holds
/// beyond the live runs (the runs it replaced wait for the commit), so a smaller fraction means a
/// smaller file and more commits (three fsyncs each).
pub(crate) const COMMIT_FRACTION: u64 = 4;

/// The bytes a job with bound `w_bound` must have written once the new root holds `a` of σ
/// bytes (module docs, "Deamortization"). Until the commit has begun (`begun`), W spread
/// evenly up to ¾σ, so that little reaches the root the commit freezes once more; from then on
/// nothing below σ/2 and W spread evenly from σ/2 to ¾σ, so that the inserts run beside the
/// merger instead of in step with it.
pub(crate) fn pace(w_bound: u64, a: u64, sigma: u64, begun: bool) -> u64 {
    let (from, to) = if begun {
        (sigma / 2, sigma * 3 / 4)
    } else {
        (0, sigma * 3 / 4)
    };
    let span = (to - from).max(1);
    (u128::from(w_bound) * u128::from(a.saturating_sub(from).min(span)) / u128::from(span)) as u64
}

/// A record: key and tagged value.
pub(crate) type Rec = (Vec<u8>, Vec<u8>);

/// Counters of the cascade's work.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) cascades: AtomicU64,
    pub(crate) handle_full_calls: AtomicU64,
    pub(crate) max_handle_full_per_cascade: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) splits: AtomicU64,
    pub(crate) dtrees_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) max_cascade_bytes: AtomicU64,
    /// Commits inside cascades (commit points), and the most bytes a cascade wrote between two
    /// of its commits (a commit point, or its beginning or end): with `max_cascade_bytes`, what
    /// the file's high-water mark holds beyond the live runs, without commit points and with.
    pub(crate) inner_commits: AtomicU64,
    pub(crate) max_uncommitted_bytes: AtomicU64,
}

/// What a cascade needs.
pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a Arc<PageFile>,
    pub(crate) sigma: u64,
    pub(crate) fanout: usize,
    pub(crate) bloom_bits: u32,
    pub(crate) counters: &'a Counters,
    /// The root's bytes from which a commit moves it down (σ, or less: `Params::full_at`).
    pub(crate) full_at: u64,
    /// The deamortized job this cascade is (its progress, counted a step at a time).
    pub(crate) job: Option<Arc<Job>>,
    /// The lookups' leaf cache: a run reused for a new d-tree is forgotten there first.
    pub(crate) pool: Option<&'a BufferPool>,
    /// A commit inside the cascade ("Commit points" in the module docs): called with the
    /// whole s-tree as it stands between two HandleFullSNode levels.
    pub(crate) commit_point: Option<&'a CommitPoint<'a>>,
    /// The s-nodes above the one being handled, each as it stood when the cascade went down
    /// into its child at the index beside it (the root first).
    path: Vec<(SNode, usize)>,
    /// This cascade's HandleFullSNode calls and bytes written, and the bytes written when it
    /// last committed inside itself.
    calls: u64,
    written: u64,
    committed_at: u64,
}

/// What a cascade calls at a commit point: the s-tree's root as it stands.
pub(crate) type CommitPoint<'a> = dyn Fn(&SNode) -> Result<()> + 'a;

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        file: &'a Arc<PageFile>,
        sigma: u64,
        fanout: usize,
        bloom_bits: u32,
        counters: &'a Counters,
    ) -> Self {
        Ctx {
            file,
            sigma,
            fanout,
            bloom_bits,
            counters,
            full_at: sigma,
            job: None,
            pool: None,
            commit_point: None,
            path: Vec::new(),
            calls: 0,
            written: 0,
            committed_at: 0,
        }
    }
}

impl Ctx<'_> {
    /// A commit point: `node`, the s-node being flushed, is complete (every record it moved so
    /// far is in the child it went to and behind its start pointer; module docs, "Commit
    /// points"). Commits the whole s-tree as it stands (`node` under the path above it) if
    /// the cascade wrote at least [`COMMIT_FRACTION`] of σ since it last committed.
    fn commit_inside(&mut self, node: &SNode) -> Result<()> {
        let Some(commit) = self.commit_point else {
            return Ok(());
        };
        if self.written - self.committed_at < (self.sigma / COMMIT_FRACTION).max(1) {
            return Ok(());
        }
        let mut tree = node.clone();
        for (above, i) in self.path.iter().rev() {
            let mut a = above.clone();
            a.children[*i] = Arc::new(tree);
            tree = a;
        }
        commit(&tree)?;
        self.counters
            .max_uncommitted_bytes
            .fetch_max(self.written - self.committed_at, Ordering::Relaxed);
        self.committed_at = self.written;
        self.counters.inner_commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A d-tree writer for at most `bound`, reporting its writes to the job. Its run may
    /// reuse pages of a freed d-tree: the leaf cache forgets them before they are written.
    fn writer(&self, bound: Bound) -> Result<Writer> {
        let w = Writer::new(
            self.file,
            bound,
            self.bloom_bits,
            self.job.clone(),
            self.sigma,
        );
        if let Some(pool) = self.pool {
            for &(first, pages) in w.run() {
                pool.forget_run(first, pages)?;
            }
        }
        Ok(w)
    }
}

/// A deamortized cascade's progress (§5.1), shared by the merger thread that runs it and the
/// inserts that pace themselves against it (`NbTree::put`).
#[derive(Debug, Default)]
pub(crate) struct Job {
    state: Mutex<JobState>,
    cv: Condvar,
    /// Largest write of one step.
    pub(crate) step_bytes: u64,
}

/// Where a job is.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct JobState {
    pub(crate) running: bool,
    /// W = (h + 1)(2f + 3)σ: the most a cascade writes (one HandleFullSNode per level, each
    /// O(fσ)); the pace inserts keep it to.
    pub(crate) w_bound: u64,
    /// Bytes written so far, and steps (writes of at most `step_bytes`).
    pub(crate) done: u64,
    pub(crate) steps: u64,
    /// Which job (each start takes the next number).
    pub(crate) generation: u64,
    /// The commit that moves the job's roots down has begun (and frozen the root once more):
    /// the pace leaves the new root's first half free ([`pace`]).
    pub(crate) begun: bool,
    /// The merger is inside a commit point's durable part (the manifest, the page file's
    /// fsyncs and the meta page): an insert behind its pace goes on instead of waiting, since
    /// no step comes before the fsyncs end (module docs, "Deamortization").
    pub(crate) syncing: bool,
}

impl Job {
    pub(crate) fn new(step_bytes: u64) -> Job {
        Job {
            step_bytes,
            ..Job::default()
        }
    }

    /// A job begins with the bound `w_bound`; returns its generation.
    pub(crate) fn start(&self, w_bound: u64) -> u64 {
        let mut st = self.state.lock();
        let generation = st.generation + 1;
        *st = JobState {
            running: true,
            w_bound,
            done: 0,
            steps: 0,
            generation,
            begun: false,
            syncing: false,
        };
        generation
    }

    /// The commit that runs job `generation` has begun.
    pub(crate) fn begin(&self, generation: u64) {
        let mut st = self.state.lock();
        if st.generation == generation {
            st.begun = true;
        }
    }

    /// The merger enters (`true`) or leaves a commit point's durable part; inserts waiting for
    /// a step go on when it enters.
    pub(crate) fn set_syncing(&self, syncing: bool) {
        let mut st = self.state.lock();
        st.syncing = syncing;
        self.cv.notify_all();
    }

    /// A step wrote `bytes`.
    pub(crate) fn advance(&self, bytes: u64) {
        let mut st = self.state.lock();
        st.done += bytes;
        st.steps += 1;
        self.cv.notify_all();
    }

    /// Counts `bytes` of records the job read or gathered without writing (the frozen roots'
    /// records, a d-tree's live part read into memory) in `pending`, and after each
    /// `step_bytes` of them takes a step that writes nothing: an insert that waits for one step
    /// then waits for that much of this work, not for all of it (its pace still counts only
    /// the bytes written).
    pub(crate) fn gathered(&self, pending: &mut u64, bytes: u64) {
        *pending += bytes;
        if *pending >= self.step_bytes {
            *pending = 0;
            self.advance(0);
        }
    }

    /// Job `generation` ended (done or failed); whether it was the one running.
    pub(crate) fn finish(&self, generation: u64) -> bool {
        let mut st = self.state.lock();
        if !st.running || st.generation != generation {
            return false;
        }
        st.running = false;
        self.cv.notify_all();
        true
    }

    pub(crate) fn state(&self) -> JobState {
        *self.state.lock()
    }

    /// Waits at most `timeout` for the job to take one more step than `seen` or end (or, with
    /// `until_syncing`, enter a commit point's fsyncs); whether it did.
    pub(crate) fn wait_step_for(
        &self,
        seen: u64,
        until_syncing: bool,
        timeout: std::time::Duration,
    ) -> bool {
        let mut st = self.state.lock();
        let waited_for =
            |st: &JobState| !st.running || st.steps > seen || (until_syncing && st.syncing);
        if !waited_for(&st) {
            self.cv.wait_for(&mut st, timeout);
        }
        waited_for(&st)
    }
}

/// What HandleFullSNode leaves: the s-node, or its two halves and their median.
pub(crate) enum Outcome {
    One(SNode),
    Split(SNode, Vec<u8>, SNode),
}

fn bound_of(recs: &[Rec]) -> Bound {
    let mut b = Bound::default();
    for (k, v) in recs {
        b.record(k, v);
    }
    b
}

/// Bytes of records.
fn bytes_of(recs: &[Rec]) -> u64 {
    recs.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
}

/// Merges `newer` (sorted) with the live part of `older` (from `start`) into a new d-tree.
pub(crate) fn write_merge(
    ctx: &mut Ctx<'_>,
    newer: &[Rec],
    older: Option<(&Arc<DTree>, &[u8])>,
    drop_tombstones: bool,
) -> Result<Option<DTree>> {
    let mut bound = bound_of(newer);
    if let Some((d, _)) = older {
        bound.add(Bound::of_extent(&d.extent));
    }
    let mut w = ctx.writer(bound)?;
    let mut cursor = match older {
        Some((d, start)) => Some(d.cursor(start, true)?),
        None => None,
    };
    let mut i = 0;
    let keep = |v: &[u8]| !drop_tombstones || is_put(v);
    if let Some(c) = cursor.as_mut() {
        while let Some((k, v)) = c.next_record()? {
            while i < newer.len() && newer[i].0.as_slice() < k {
                if keep(&newer[i].1) {
                    w.push(&newer[i].0, &newer[i].1)?;
                }
                i += 1;
            }
            if i < newer.len() && newer[i].0.as_slice() == k {
                continue; // the newer record replaces it; pushed below or in the loop above
            }
            if keep(v) {
                w.push(k, v)?;
            }
        }
    }
    for (k, v) in &newer[i..] {
        if keep(v) {
            w.push(k, v)?;
        }
    }
    finish(ctx, w)
}

fn finish(ctx: &mut Ctx<'_>, w: Writer) -> Result<Option<DTree>> {
    let d = w.finish()?;
    if let Some(d) = &d {
        let bytes = d.extent.pages() * ctx.file.page_size() as u64;
        ctx.written += bytes;
        ctx.counters.dtrees_written.fetch_add(1, Ordering::Relaxed);
        ctx.counters
            .bytes_written
            .fetch_add(bytes, Ordering::Relaxed);
    }
    Ok(d)
}

/// Reads the live records of `node`'s d-tree, merged under `newer` (newer wins), into memory;
/// with each record, the bytes of the d-tree's record of its key (0: none), which
/// [`distribute`] takes off the node's live part as the record moves down.
fn merged_in_memory(
    node: &SNode,
    newer: Vec<Rec>,
    job: Option<&Job>,
) -> Result<(Vec<Rec>, Vec<u64>)> {
    let Some(d) = &node.dtree else {
        let consumed = vec![0; newer.len()];
        return Ok((newer, consumed));
    };
    let mut out = Vec::with_capacity(newer.len() + node.live_records as usize);
    let mut consumed = Vec::with_capacity(out.capacity());
    let mut c = d.cursor(&node.start, true)?;
    let mut newer = newer.into_iter().peekable();
    let mut pending = 0;
    while let Some((k, v)) = c.next_record()? {
        if let Some(j) = job {
            j.gathered(&mut pending, (k.len() + v.len()) as u64);
        }
        while let Some(n) = newer.next_if(|n| n.0.as_slice() < k) {
            out.push(n);
            consumed.push(0);
        }
        let own = (k.len() + v.len()) as u64;
        if let Some(n) = newer.next_if(|n| n.0.as_slice() == k) {
            out.push(n);
        } else {
            out.push((k.to_vec(), v.to_vec()));
        }
        consumed.push(own);
    }
    for n in newer {
        out.push(n);
        consumed.push(0);
    }
    Ok((out, consumed))
}

/// Moves a frozen root's records (sorted, one per key) into the s-tree under `root`; returns
/// the new root.
pub(crate) fn commit(ctx: &mut Ctx<'_>, root: Arc<SNode>, recs: Vec<Rec>) -> Result<Arc<SNode>> {
    // A copy unless this was the last holder: the version readers see keeps the old root.
    let mut root = Arc::unwrap_or_clone(root);
    ctx.counters.cascades.fetch_add(1, Ordering::Relaxed);
    let full = bytes_of(&recs) + root.live_bytes >= ctx.full_at;
    let new_root = if !full {
        let older = root.dtree.clone();
        let start = root.start.clone();
        let d = write_merge(
            ctx,
            &recs,
            older.as_ref().map(|d| (d, start.as_slice())),
            root.is_leaf(),
        )?;
        root.set_dtree(d);
        root
    } else {
        ctx.calls += 1;
        let (moved, consumed) = merged_in_memory(&root, recs, ctx.job.as_deref())?;
        if root.is_leaf() {
            root.set_dtree(None);
            let moved: Vec<Rec> = moved.into_iter().filter(|r| is_put(&r.1)).collect();
            if moved.len() < 2 {
                let d = write_merge(ctx, &moved, None, true)?;
                root.set_dtree(d);
                root
            } else {
                let m = moved.len() / 2;
                let small = leaf_of(ctx, &moved[..m])?;
                let large = leaf_of(ctx, &moved[m..])?;
                ctx.counters.splits.fetch_add(1, Ordering::Relaxed);
                grow(moved[m].0.clone(), small, large)
            }
        } else {
            // flush(root) moves at most σ bytes, as every flush does (§4.1): the rest stays
            // in the root's on-disk d-tree `R`, rewritten once the children are. Until then the
            // old `R` stays, its start pointer moving past what went down child by child: its
            // live part and the frozen roots (replayed from the log) hold the rest, so the
            // s-tree is complete at each commit point on the way.
            let (mut moved, mut consumed) = (moved, consumed);
            let mut bytes = 0u64;
            let cut = moved
                .iter()
                .position(|(k, v)| {
                    bytes += (k.len() + v.len()) as u64;
                    bytes > ctx.sigma
                })
                .unwrap_or(moved.len());
            let rest = moved.split_off(cut);
            consumed.truncate(cut);
            let rest_start = rest.first().map(|r| r.0.clone());
            distribute(ctx, &mut root, moved, &consumed, rest_start)?;
            drop(consumed);
            let d = write_merge(ctx, &rest, None, false)?;
            drop(rest);
            root.set_dtree(d);
            if root.children.len() > ctx.fanout {
                match split_inner(ctx, root)? {
                    Outcome::Split(a, k, b) => grow(k, a, b),
                    Outcome::One(n) => n,
                }
            } else {
                root
            }
        }
    };
    ctx.counters
        .handle_full_calls
        .fetch_add(ctx.calls, Ordering::Relaxed);
    ctx.counters
        .max_handle_full_per_cascade
        .fetch_max(ctx.calls, Ordering::Relaxed);
    ctx.counters
        .max_cascade_bytes
        .fetch_max(ctx.written, Ordering::Relaxed);
    ctx.counters
        .max_uncommitted_bytes
        .fetch_max(ctx.written - ctx.committed_at, Ordering::Relaxed);
    Ok(Arc::new(new_root))
}

/// A new root over two halves.
fn grow(key: Vec<u8>, small: SNode, large: SNode) -> SNode {
    SNode {
        keys: vec![key],
        children: vec![Arc::new(small), Arc::new(large)],
        ..SNode::default()
    }
}

/// A leaf s-node whose d-tree holds `recs`.
fn leaf_of(ctx: &mut Ctx<'_>, recs: &[Rec]) -> Result<SNode> {
    let mut n = SNode::default();
    let d = write_merge(ctx, recs, None, true)?;
    n.set_dtree(d);
    Ok(n)
}

/// Takes records moved down off `node`'s live part: the first `n` of its d-tree's live records
/// with `bytes` bytes; its start pointer becomes `next` (`None`: nothing of it stays live).
fn move_start(node: &mut SNode, n: u64, bytes: u64, next: Option<&[u8]>) {
    if node.dtree.is_none() {
        return;
    }
    match next {
        None => node.set_dtree(None),
        Some(k) => {
            // At the root a frozen root's key may lie below a start pointer a commit point
            // left (recovered from it): the pointer never moves back over dead records.
            if k > node.start.as_slice() {
                node.start = k.to_vec();
            }
            node.live_records -= n;
            node.live_bytes -= bytes;
        }
    }
}

/// flush's second half: routes `moved` (sorted) to `node`'s children, each touched child's
/// d-tree rewritten as a merge, then HandleFullSNode on the largest child over σ.
///
/// `consumed[j]` is the bytes of `node`'s own live record that `moved[j]` stands for (0: none;
/// a frozen root's record at the root); `rest_start` is the first key that stays (`None`: the
/// node's d-tree moves down whole). After each child is written the node's start pointer moves
/// past the records it took, so the s-tree is complete there and the cascade may commit
/// (module docs, "Commit points"): the run the child replaced is freed once that commit is
/// durable, before the next child's run is allocated.
fn distribute(
    ctx: &mut Ctx<'_>,
    node: &mut SNode,
    moved: Vec<Rec>,
    consumed: &[u64],
    rest_start: Option<Vec<u8>>,
) -> Result<()> {
    ctx.counters.flushes.fetch_add(1, Ordering::Relaxed);
    let mut lo = 0;
    for i in 0..node.children.len() {
        let hi = if i < node.keys.len() {
            let k = &node.keys[i];
            lo + moved[lo..].partition_point(|r| r.0 < *k)
        } else {
            moved.len()
        };
        if hi > lo {
            let mut c = (*node.children[i]).clone();
            let older = c.dtree.clone();
            let start = c.start.clone();
            let d = write_merge(
                ctx,
                &moved[lo..hi],
                older.as_ref().map(|d| (d, start.as_slice())),
                c.is_leaf(),
            )?;
            c.set_dtree(d);
            node.children[i] = Arc::new(c);
            let taken = &consumed[lo..hi];
            let n = taken.iter().filter(|&&b| b > 0).count() as u64;
            let next = moved
                .get(hi)
                .map(|r| r.0.as_slice())
                .or(rest_start.as_deref());
            move_start(node, n, taken.iter().sum(), next);
            ctx.commit_inside(node)?;
        }
        lo = hi;
    }
    if moved.is_empty() && rest_start.is_none() {
        move_start(node, 0, 0, None);
    }
    drop(moved);
    let big = (0..node.children.len())
        .filter(|&i| node.children[i].live_bytes > ctx.sigma)
        .max_by_key(|&i| node.children[i].live_bytes);
    if let Some(i) = big {
        ctx.commit_inside(node)?;
        // The child leaves `node` (and the path, which commit points fill in): held nowhere
        // else but by the version readers see, the runs its flush replaces are freed at the
        // next commit point, not when the cascade comes back up.
        let child = std::mem::take(&mut node.children[i]);
        ctx.path.push((node.clone(), i));
        let handled = handle_full(ctx, Arc::unwrap_or_clone(child));
        ctx.path.pop();
        match handled? {
            Outcome::One(c) => node.children[i] = Arc::new(c),
            Outcome::Split(a, k, b) => {
                node.children[i] = Arc::new(a);
                node.children.insert(i + 1, Arc::new(b));
                node.keys.insert(i, k);
            }
        }
        if node.children.len() <= ctx.fanout {
            ctx.commit_inside(node)?;
        }
    }
    Ok(())
}

/// HandleFullSNode on a non-root s-node whose d-tree is over σ.
pub(crate) fn handle_full(ctx: &mut Ctx<'_>, mut node: SNode) -> Result<Outcome> {
    ctx.calls += 1;
    if node.is_leaf() {
        return split_leaf(ctx, node);
    }
    // flush: the first σ bytes of the live part move down; the start pointer moves past them.
    let mut moved = Vec::new();
    let mut moved_bytes = 0u64;
    let mut next_start = None;
    if let Some(d) = node.dtree.clone() {
        let mut c = d.cursor(&node.start, true)?;
        let mut pending = 0;
        while let Some((k, v)) = c.next_record()? {
            if let Some(j) = &ctx.job {
                j.gathered(&mut pending, (k.len() + v.len()) as u64);
            }
            if moved_bytes >= ctx.sigma {
                next_start = Some(k.to_vec());
                break;
            }
            moved_bytes += (k.len() + v.len()) as u64;
            moved.push((k.to_vec(), v.to_vec()));
        }
    }
    let consumed: Vec<u64> = moved
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .collect();
    distribute(ctx, &mut node, moved, &consumed, next_start)?;
    if node.children.len() > ctx.fanout {
        split_inner(ctx, node)
    } else {
        Ok(Outcome::One(node))
    }
}

/// SNodeSplit of a leaf at the median d-key.
fn split_leaf(ctx: &mut Ctx<'_>, mut node: SNode) -> Result<Outcome> {
    let Some(d) = node.dtree.clone() else {
        return Ok(Outcome::One(node));
    };
    if node.live_records < 2 {
        return Ok(Outcome::One(node));
    }
    let half = node.live_records / 2;
    let bound = Bound::of_extent(&d.extent);
    let mut a = ctx.writer(bound)?;
    let mut b = ctx.writer(bound)?;
    let mut median = Vec::new();
    let mut c = d.cursor(&node.start, true)?;
    while let Some((k, v)) = c.next_record()? {
        if a.records() < half {
            a.push(k, v)?;
        } else {
            if b.records() == 0 {
                median = k.to_vec();
            }
            b.push(k, v)?;
        }
    }
    let (da, db) = (finish(ctx, a)?, finish(ctx, b)?);
    node.set_dtree(None);
    let (mut small, mut large) = (SNode::default(), SNode::default());
    small.set_dtree(da);
    large.set_dtree(db);
    ctx.counters.splits.fetch_add(1, Ordering::Relaxed);
    Ok(Outcome::Split(small, median, large))
}

/// SNodeSplit of an inner s-node at its median s-key.
fn split_inner(ctx: &mut Ctx<'_>, mut node: SNode) -> Result<Outcome> {
    let m = node.keys.len() / 2;
    let median = node.keys[m].clone();
    let right_keys = node.keys.split_off(m + 1);
    node.keys.truncate(m);
    let right_children = node.children.split_off(m + 1);
    let (mut da, mut db) = (None, None);
    if let Some(d) = node.dtree.clone() {
        let bound = Bound::of_extent(&d.extent);
        let mut a = ctx.writer(bound)?;
        let mut b = ctx.writer(bound)?;
        let mut c = d.cursor(&node.start, true)?;
        while let Some((k, v)) = c.next_record()? {
            if k < median.as_slice() {
                a.push(k, v)?;
            } else {
                b.push(k, v)?;
            }
        }
        da = finish(ctx, a)?;
        db = finish(ctx, b)?;
    }
    node.set_dtree(None);
    let mut left = SNode {
        keys: node.keys,
        children: node.children,
        ..SNode::default()
    };
    left.set_dtree(da);
    let mut right = SNode {
        keys: right_keys,
        children: right_children,
        ..SNode::default()
    };
    right.set_dtree(db);
    ctx.counters.splits.fetch_add(1, Ordering::Relaxed);
    Ok(Outcome::Split(left, median, right))
}
