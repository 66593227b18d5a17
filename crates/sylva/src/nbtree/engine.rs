//! The NB-tree as an engine of [`crate::durable`]: commits are its checkpoints (module docs of
//! [`super`], "Durability"), redo replays PUT and DELETE into the active root.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};

use super::cascade::{self, Counters, Job, Rec};
use super::dtree::{TAG_PUT, TAG_TOMBSTONE};
use super::log::{self, Record};
use super::manifest::{self, State, STATE_VERSION};
use super::stree::{RootTree, SNode, Version};
use crate::buffer::{BufferPool, PoolOptions};
use crate::durable::Engine;
use crate::error::{Error, Result};
use crate::io::page_header::PageKind;
use crate::io::{PageFile, FIRST_DATA_PAGE};
use crate::wal::Wal;

thread_local! {
    /// A writer's tagged value (`apply`), kept from one write to the next: an allocation and a
    /// free a write on the glibc arena the merger allocates its records from made the two
    /// threads wait for its lock (`docs/results/nbtree.md`).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Parameters fixed when the store was created.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub(crate) fanout: usize,
    pub(crate) sigma: u64,
    pub(crate) bloom_bits: u32,
    pub(crate) page_size: usize,
    /// Cascades run as paced jobs on the merger thread (module docs of [`super::cascade`]).
    pub(crate) deamortize: bool,
    /// The memory budget: the roots, the d-trees' inner pages and filters, and the leaf cache
    /// (what the others leave) live within it.
    pub(crate) cache_bytes: u64,
}

/// Where the log is replayed from, as checkpoints move it: a commit inside a cascade names
/// the position of the checkpoint in force, since the cascade's frozen records are in the log
/// after it.
#[derive(Debug, Clone, Copy, Default)]
struct Covered {
    /// The position the last checkpoint begun covers, and the one before it.
    begun: u64,
    before: u64,
    /// A checkpoint has begun and its flush has not ended: `before` is in force (the begun
    /// one's meta page is not written yet). Otherwise `begun` is (checkpoints run one at a
    /// time, and a failed one poisons the store).
    running: bool,
}

impl Covered {
    fn in_force(&self) -> u64 {
        if self.running {
            self.before
        } else {
            self.begun
        }
    }
}

/// The manifest in force: its head page and run, and the state version it was written with
/// (a commit that writes no new manifest names it with that version).
#[derive(Debug, Clone, Copy)]
struct InForce {
    head: u64,
    first: u64,
    pages: u64,
    version: u32,
}

pub(crate) struct NbEngine {
    pub(crate) file: Arc<PageFile>,
    /// The lookups' leaf cache: a buffer pool over the same file, holding d-tree leaves only
    /// (inner pages and filters are in the d-trees' handles), within what `cache_bytes` leaves
    /// beside the roots and those handles ([`NbEngine::rebudget`]).
    pub(crate) pool: BufferPool,
    pub(crate) wal: Arc<Wal>,
    pub(crate) params: Params,
    pub(crate) current: RwLock<Arc<Version>>,
    /// Writers log and apply under this (so the log's order is the roots' order).
    pub(crate) writers: Mutex<()>,
    pub(crate) counters: Counters,
    /// d-tree leaf reads by lookups, and lookups.
    pub(crate) leaf_reads: AtomicU64,
    pub(crate) lookups: AtomicU64,
    /// The next active root, made ahead so freezing cannot fail.
    spare: Mutex<Option<RootTree>>,
    /// A head page `begin_checkpoint` allocated for the manifest its `flush` writes.
    pending_head: Mutex<Option<u64>>,
    in_force: Mutex<Option<InForce>>,
    /// The s-tree changed since the manifest in force was written.
    dirty: Mutex<bool>,
    /// What went wrong in `begin_checkpoint` (which cannot return it): `flush` returns it.
    begin_error: Mutex<Option<Error>>,
    /// Bytes of log records appended since the last commit began.
    log_bytes: AtomicU64,
    /// The running cascade's progress, and the inserts' waits for it.
    pub(crate) job: Arc<Job>,
    pub(crate) inline_steps: AtomicU64,
    pub(crate) stalls: AtomicU64,
    pub(crate) max_backlog: AtomicU64,
    /// Inserts behind their pace that went on without waiting because the merger was in a
    /// commit point's fsyncs (`NbTree::pace`).
    pub(crate) sync_passes: AtomicU64,
    /// Commits begun (`begin_checkpoint` calls); the durability layer counts those ended.
    pub(crate) commits_begun: AtomicU64,
    /// The job the running commit's `flush` ends.
    job_owned: Mutex<Option<u64>>,
    /// The log positions checkpoints cover: the one in force, and the one begun last.
    covered: Mutex<Covered>,
    /// Bytes the current s-tree's d-trees keep in memory (inner pages and filters): out of
    /// the leaf cache's budget.
    pub(crate) dtree_memory: AtomicU64,
}

impl NbEngine {
    /// The engine over `file` and `wal`: the s-tree of the manifest `state` names (a new store
    /// when `None`), its live runs marked in use and every other used page freed.
    pub(crate) fn build(
        file: PageFile,
        wal: Arc<Wal>,
        state: Option<State>,
        params: Params,
        step_bytes: u64,
    ) -> Result<NbEngine> {
        let file = Arc::new(file);
        let mut pool = BufferPool::new(
            file.clone(),
            None,
            PoolOptions {
                budget_bytes: params.cache_bytes,
                ..PoolOptions::default()
            },
        )?;
        pool.accept_only(&[PageKind::DTreeLeaf]);
        let covered = state.map_or(0, |s| s.covered_lsn);
        let (root, in_force) = match state.filter(|s| s.head != 0) {
            None => (SNode::default(), None),
            Some(s) => {
                let (bytes, first, pages) = manifest::read(&file, s.head)?;
                let raw = manifest::decode(s.head, &bytes, s.version)?;
                let root = manifest::load(&file, raw)?;
                (
                    root,
                    Some(InForce {
                        head: s.head,
                        first,
                        pages,
                        version: s.version,
                    }),
                )
            }
        };
        reconcile_free_space(&file, &root, in_force)?;
        let dtree_memory = root.dtree_memory();
        let version = Version {
            active: Arc::new(RootTree::new(params.page_size)?),
            frozen: Vec::new(),
            root: Arc::new(root),
        };
        let engine = NbEngine {
            file,
            pool,
            wal,
            params,
            current: RwLock::new(Arc::new(version)),
            writers: Mutex::new(()),
            counters: Counters::default(),
            leaf_reads: AtomicU64::new(0),
            lookups: AtomicU64::new(0),
            spare: Mutex::new(Some(RootTree::new(params.page_size)?)),
            pending_head: Mutex::new(None),
            in_force: Mutex::new(in_force),
            dirty: Mutex::new(false),
            begin_error: Mutex::new(None),
            log_bytes: AtomicU64::new(0),
            job: Arc::new(Job::new(step_bytes)),
            inline_steps: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            max_backlog: AtomicU64::new(0),
            sync_passes: AtomicU64::new(0),
            commits_begun: AtomicU64::new(0),
            job_owned: Mutex::new(None),
            dtree_memory: AtomicU64::new(dtree_memory),
            covered: Mutex::new(Covered {
                begun: covered,
                before: covered,
                running: false,
            }),
        };
        engine.rebudget()?;
        Ok(engine)
    }

    /// Moves the leaf cache's budget to what `cache_bytes` leaves beside the roots' pages and
    /// the d-trees' inner pages and filters (module docs of [`super`], "The leaf cache"),
    /// evicting leaves at once if that is less than the cache holds.
    pub(crate) fn rebudget(&self) -> Result<()> {
        let roots = self.version().roots_memory();
        let dtrees = self.dtree_memory.load(Ordering::Relaxed);
        self.pool
            .set_budget(self.params.cache_bytes.saturating_sub(roots + dtrees))
    }

    /// Root bytes between two moves of the leaf cache's budget while the active root grows.
    fn rebudget_step(&self) -> u64 {
        (self.params.sigma / 16).max(64 << 10)
    }

    pub(crate) fn version(&self) -> Arc<Version> {
        self.current.read().clone()
    }

    /// Applies a put (`Some(value)`) or a delete to the active root (under the writers' lock,
    /// after logging it).
    pub(crate) fn apply(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let v = self.version();
        let n = SCRATCH.with_borrow_mut(|tagged| {
            tagged.clear();
            match value {
                Some(val) => {
                    tagged.push(TAG_PUT);
                    tagged.extend_from_slice(val);
                }
                None => tagged.push(TAG_TOMBSTONE),
            }
            v.active.tree.put(key, tagged)?;
            Ok::<_, Error>((key.len() + tagged.len()) as u64)
        })?;
        let before = v.active.bytes.fetch_add(n, Ordering::Relaxed);
        drop(v);
        let step = self.rebudget_step();
        if before / step != (before + n) / step {
            // The root grew by a step: the leaf cache gives the memory back.
            self.rebudget()?;
        }
        Ok(())
    }

    /// Notes `bytes` of log appended.
    pub(crate) fn logged(&self, bytes: usize) {
        self.log_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Moves every frozen root down in one cascade (their records merged, the newest version
    /// of each key winning), then publishes the new version.
    fn commit_frozen(&self) -> Result<()> {
        let cur = self.version();
        if cur.frozen.is_empty() {
            return Ok(());
        }
        // Only the roots and the frozen list are kept: holding the version would hold every
        // d-tree the cascade replaces, which a commit inside it frees.
        let (old_root, cur_frozen) = (cur.root.clone(), cur.frozen.clone());
        drop(cur);
        let mut recs: Vec<Rec> = Vec::new();
        // Oldest first; a newer root's record replaces an older one's.
        // Steps of the job as they are gathered (`Job::gathered`): inserts pace themselves
        // against the job from the freeze on.
        let job = self.params.deamortize.then_some(&*self.job);
        let mut pending = 0;
        for f in cur_frozen.iter().rev() {
            let mut newer = Vec::new();
            f.tree.walk(&[], None, usize::MAX, &mut |k, v| {
                if let Some(j) = job {
                    j.gathered(&mut pending, (k.len() + v.len()) as u64);
                }
                newer.push((k.to_vec(), v.to_vec()));
                true
            })?;
            recs = if recs.is_empty() {
                newer
            } else {
                merge_newest(recs, newer, job, &mut pending)
            };
        }
        let commit_point = |root: &SNode| self.commit_inside(root);
        let mut ctx = cascade::Ctx::new(
            &self.file,
            self.params.sigma,
            self.params.fanout,
            self.params.bloom_bits,
            &self.counters,
        );
        if self.params.deamortize {
            ctx.job = Some(self.job.clone());
        }
        ctx.pool = Some(&self.pool);
        ctx.commit_point = Some(&commit_point);
        let root = cascade::commit(&mut ctx, old_root, recs)?;
        let mut w = self.current.write();
        let frozen = w
            .frozen
            .iter()
            .filter(|f| !cur_frozen.iter().any(|c| Arc::ptr_eq(c, f)))
            .cloned()
            .collect();
        *w = Arc::new(Version {
            active: w.active.clone(),
            frozen,
            root,
        });
        drop(w);
        // Every record is moved down and published: the job ends here, so no insert waits
        // for what the commit does after it (handing memory back, moving the leaf cache's
        // budget, the manifest, the fsyncs and the meta page).
        self.end_job();
        *self.dirty.lock() = true;
        self.dtree_memory
            .store(self.version().root.dtree_memory(), Ordering::Relaxed);
        Ok(())
    }

    /// A commit inside a cascade (module docs of [`super::cascade`], "Commit points"): the
    /// s-tree `root` as it stands between two HandleFullSNode levels becomes the one readers
    /// see (the frozen roots still above it) and the one a durable manifest names, with the log
    /// replayed from where the commit in force covers it (the frozen roots' records are still
    /// there). Once its meta page is durable, the runs the cascade replaced so far are free.
    fn commit_inside(&self, root: &SNode) -> Result<()> {
        // The frozen roots' records durable first: recovery from this commit replays them, and
        // the s-tree below holds some of them (and no other records), so what a crash leaves is
        // the state after a prefix of the writes. They were all logged before the running
        // checkpoint's position (`Covered::begun`: it froze them with writers held back), and the
        // checkpoint made the log durable up to there before it began (the rotation syncs the
        // old segment whole; a quiet checkpoint syncs the log first), so this fsync is only a
        // safeguard: an insert behind its pace would wait for it (`docs/results/nbtree.md`,
        // session 20). The d-trees and the manifest are made durable by the checkpoint, before
        // its meta page.
        if self.wal.durable_below() < self.covered.lock().begun {
            self.wal.sync()?;
        }
        // Inserts behind their pace go on while this commits: no step comes before its fsyncs
        // end.
        let _syncing = self.params.deamortize.then(|| Syncing::enter(&self.job));
        let root = Arc::new(root.clone());
        {
            let mut w = self.current.write();
            *w = Arc::new(Version {
                active: w.active.clone(),
                frozen: w.frozen.clone(),
                root: root.clone(),
            });
        }
        self.dtree_memory
            .store(root.dtree_memory(), Ordering::Relaxed);
        let head = self.file.allocate();
        let bytes = manifest::encode(&root);
        drop(root);
        let (first, pages) = manifest::write(&self.file, head, &bytes)?;
        let state = State {
            fanout: self.params.fanout as u32,
            sigma: self.params.sigma,
            bloom_bits: self.params.bloom_bits,
            head,
            covered_lsn: self.covered.lock().in_force(),
            version: STATE_VERSION,
        };
        let seq = self.file.next_sequence();
        self.file.checkpoint(&state.encode())?;
        let old = self.in_force.lock().replace(InForce {
            head,
            first,
            pages,
            version: STATE_VERSION,
        });
        if let Some(old) = old {
            // The meta page just written (`seq`, durable) no longer names it.
            self.file.free_run_after_checkpoint(seq, old.head, 1)?;
            self.file
                .free_run_after_checkpoint(seq, old.first, old.pages as usize)?;
        }
        Ok(())
    }

    /// With the merger thread: freezes the active root once it holds σ bytes and no frozen root
    /// waits (the caller holds the writers' lock), so the root is frozen at σ whenever the
    /// merger begins its commit. `false` if the root is full and a frozen root still waits.
    pub(crate) fn freeze_if_full(&self) -> Result<bool> {
        // The common case under a read lock: writers hold the writers' lock, so the root cannot
        // fill between this and the write lock below.
        if self.current.read().active.bytes() < self.params.sigma {
            return Ok(true);
        }
        let mut w = self.current.write();
        if w.active.bytes() < self.params.sigma {
            return Ok(true);
        }
        if !w.frozen.is_empty() {
            return Ok(false);
        }
        let next = match self.spare.lock().take() {
            Some(t) => t,
            None => RootTree::new(self.params.page_size)?,
        };
        *w = Arc::new(Version {
            active: Arc::new(next),
            frozen: vec![w.active.clone()],
            root: w.root.clone(),
        });
        // The job begins now: inserts pace themselves against it from here, before the merger
        // has even woken up to begin the commit, so what reaches the new root before the commit
        // freezes it too stays small (module docs of `cascade`, "The job's span").
        self.job.start(self.w_bound(&w.root));
        Ok(true)
    }

    /// Ends the job the running commit owns, if it has not ended yet, noting the backlog.
    fn end_job(&self) {
        let owned = self.job_owned.lock().take();
        if owned.is_some_and(|g| self.job.finish(g)) {
            let backlog = self.current.read().active.bytes();
            self.max_backlog.fetch_max(backlog, Ordering::Relaxed);
        }
    }

    /// W = (h + 1)(2f + 3)σ for an s-tree under `root`: the most a cascade writes.
    fn w_bound(&self, root: &SNode) -> u64 {
        let (h, f) = (root.height() as u64, self.params.fanout as u64);
        (h + 1) * (2 * f + 3) * self.params.sigma
    }
}

/// Hands the heap memory a cascade freed (its records, the frozen root's pages) back to the
/// system: glibc keeps it otherwise, and the leaf cache's budget assumes the roots' and the
/// cascade's memory is returned once they are done.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory held by glibc's allocator; it may be
    // called at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// While it lives the merger is in a commit point's durable part ([`Job::set_syncing`]).
struct Syncing<'a>(&'a Job);

impl<'a> Syncing<'a> {
    fn enter(job: &'a Job) -> Self {
        job.set_syncing(true);
        Syncing(job)
    }
}

impl Drop for Syncing<'_> {
    fn drop(&mut self) {
        self.0.set_syncing(false);
    }
}

/// Merges two sorted record lists, `newer` winning on equal keys; counts the merged records as
/// gathered by `job` (`Job::gathered`).
fn merge_newest(
    older: Vec<Rec>,
    newer: Vec<Rec>,
    job: Option<&Job>,
    pending: &mut u64,
) -> Vec<Rec> {
    let mut out = Vec::with_capacity(older.len() + newer.len());
    let mut newer = newer.into_iter().peekable();
    for o in older {
        if let Some(j) = job {
            j.gathered(pending, (o.0.len() + o.1.len()) as u64);
        }
        while let Some(n) = newer.next_if(|n| n.0 < o.0) {
            out.push(n);
        }
        if newer.peek().is_some_and(|n| n.0 == o.0) {
            continue;
        }
        out.push(o);
    }
    out.extend(newer);
    out
}

/// Marks every page of a live run in use (the fuzzy checkpoint that wrote them recorded the
/// free space of its beginning, when they were free) and frees, deferred, every other page in
/// use: free space is the complement of the live runs.
fn reconcile_free_space(file: &PageFile, root: &SNode, m: Option<InForce>) -> Result<()> {
    let mut runs = Vec::new();
    if let Some(m) = m {
        runs.push((m.head, 1));
        runs.push((m.first, m.pages));
    }
    collect_runs(root, &mut runs);
    runs.sort_unstable();
    for w in runs.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            return Err(Error::Corruption {
                page: w[1].0,
                detail: format!("runs {:?} and {:?} share pages", w[0], w[1]),
            });
        }
    }
    for &(first, n) in &runs {
        for id in first..first + n {
            file.ensure_allocated(id)?;
        }
    }
    let mut next = runs.iter().peekable();
    let mut id = FIRST_DATA_PAGE;
    let count = file.page_count();
    let mut leaked: Option<(u64, u64)> = None;
    let flush = |l: &mut Option<(u64, u64)>| -> Result<()> {
        if let Some((first, n)) = l.take() {
            file.free_run_deferred(first, n as usize)?;
        }
        Ok(())
    };
    while id < count {
        if let Some(&&(first, n)) = next.peek() {
            if id >= first {
                flush(&mut leaked)?;
                id = first + n;
                next.next();
                continue;
            }
        }
        if file.is_free(id) {
            flush(&mut leaked)?;
        } else {
            leaked = match leaked {
                Some((f, n)) => Some((f, n + 1)),
                None => Some((id, 1)),
            };
        }
        id += 1;
    }
    flush(&mut leaked)
}

/// Every d-tree run under `n`, as (first page, pages).
pub(crate) fn collect_runs(n: &SNode, out: &mut Vec<(u64, u64)>) {
    if let Some(d) = &n.dtree {
        out.extend_from_slice(d.pieces.runs());
    }
    for c in &n.children {
        collect_runs(c, out);
    }
}

impl Engine for NbEngine {
    type State = State;
    type Writers<'a> = MutexGuard<'a, ()>;

    fn decode_state(path: &Path, user: &[u8]) -> Result<Option<(State, u64)>> {
        Ok(State::decode(path, user)?.map(|s| (s, s.covered_lsn)))
    }

    fn redo(&mut self, lsn: u64, payload: &[u8]) -> Result<()> {
        match log::decode(lsn, payload)? {
            Record::Put { key, value } => self.apply(key, Some(value)),
            Record::Delete { key } => self.apply(key, None),
            Record::Batch(ops) => ops.iter().try_for_each(|(k, v)| self.apply(k, *v)),
        }
    }

    fn redo_end(&mut self) -> Result<bool> {
        Ok(false)
    }

    fn hold_writers(&self) -> MutexGuard<'_, ()> {
        self.writers.lock()
    }

    fn begin_checkpoint(&self, lsn: u64) -> Vec<u8> {
        {
            let mut c = self.covered.lock();
            c.before = c.begun;
            c.begun = lsn;
            c.running = true;
        }
        self.log_bytes.store(0, Ordering::Relaxed);
        self.commits_begun.fetch_add(1, Ordering::AcqRel);
        let mut w = self.current.write();
        let active_empty = w.active.bytes() == 0;
        if !active_empty {
            let next = match self.spare.lock().take() {
                Some(t) => Ok(t),
                None => RootTree::new(self.params.page_size),
            };
            match next {
                Ok(next) => {
                    let mut frozen = vec![w.active.clone()];
                    frozen.extend(w.frozen.iter().cloned());
                    *w = Arc::new(Version {
                        active: Arc::new(next),
                        frozen,
                        root: w.root.clone(),
                    });
                }
                // The state below must not claim records it does not hold: `flush` fails.
                Err(e) => *self.begin_error.lock() = Some(e),
            }
        }
        let changes = !w.frozen.is_empty() || *self.dirty.lock();
        if !w.frozen.is_empty() && self.params.deamortize {
            // The job began when the root froze at σ (`freeze_if_full`), unless this commit
            // froze it.
            let st = self.job.state();
            let generation = if st.running {
                st.generation
            } else {
                self.job.start(self.w_bound(&w.root))
            };
            self.job.begin(generation);
            *self.job_owned.lock() = Some(generation);
        }
        drop(w);
        let (head, version) = if changes {
            let head = self.file.allocate();
            *self.pending_head.lock() = Some(head);
            (head, STATE_VERSION)
        } else {
            self.in_force
                .lock()
                .map_or((0, STATE_VERSION), |m| (m.head, m.version))
        };
        State {
            fanout: self.params.fanout as u32,
            sigma: self.params.sigma,
            bloom_bits: self.params.bloom_bits,
            head,
            covered_lsn: lsn,
            version,
        }
        .encode()
    }

    fn flush(&self, lsn: u64) -> Result<()> {
        let r = self.flush_inner(lsn);
        self.covered.lock().running = false;
        // Ended, done or failed: inserts waiting for it go on (a failure poisons the store).
        self.end_job();
        r
    }

    fn checkpoint_at_low_priority(&self) -> bool {
        // Deamortized, inserts wait for the merger's steps (`NbTree::pace`).
        !self.params.deamortize
    }

    fn page_file(&self) -> &PageFile {
        &self.file
    }

    /// The root's bytes (active, frozen and on-disk parts): a commit begins when they pass σ.
    fn logged_bytes(&self) -> u64 {
        let v = self.current.read();
        let frozen: u64 = v.frozen.iter().map(|f| f.bytes()).sum();
        v.active.bytes() + frozen + v.root.live_bytes
    }
}

impl NbEngine {
    fn flush_inner(&self, _lsn: u64) -> Result<()> {
        if let Some(e) = self.begin_error.lock().take() {
            return Err(e);
        }
        self.commit_frozen()?;
        release_free_memory();
        // The frozen roots are gone (once readers let go of them): the leaf cache may grow.
        self.rebudget()?;
        if self.spare.lock().is_none() {
            *self.spare.lock() = Some(RootTree::new(self.params.page_size)?);
        }
        let Some(head) = self.pending_head.lock().take() else {
            return Ok(());
        };
        let bytes = manifest::encode(&self.version().root);
        let (first, pages) = manifest::write(&self.file, head, &bytes)?;
        *self.dirty.lock() = false;
        let old = self.in_force.lock().replace(InForce {
            head,
            first,
            pages,
            version: STATE_VERSION,
        });
        if let Some(old) = old {
            // The checkpoint in force names them until this one is durable.
            let seq = self.file.next_sequence();
            self.file.free_run_after_checkpoint(seq, old.head, 1)?;
            self.file
                .free_run_after_checkpoint(seq, old.first, old.pages as usize)?;
        }
        Ok(())
    }

    /// The manifest in force's head and run, as (first page, pages).
    pub(crate) fn manifest_runs(&self) -> Vec<(u64, u64)> {
        self.in_force
            .lock()
            .map_or_else(Vec::new, |m| vec![(m.head, 1), (m.first, m.pages)])
    }
}
