//! Fault injection under a [`Db`]: for each fault kind of [`FaultyIo`] (failed write, short
//! write, torn write, failed fsync, flipped bit) on each file (page file, log), the error surfaces
//! from the call that hit it or from the next `sync()`/`checkpoint()`, nothing acknowledged
//! before the fault is lost after reopening, and the database is afterwards usable or refuses
//! cleanly with an [`Error`] — never a panic, never a silently wrong value.
//!
//! **Sharing the bytes between opens.** `FaultyIo<I>` owns its inner `Io`, and `MemIo` cannot be
//! shared, so the files here are [`Disk`]s: a test-local `Io` over bytes behind an `Arc`, which
//! also keeps a crash model — `current` (what reads see: the OS page cache; what a `kill -9`
//! leaves) and `durable` (the bytes as of the last successful `sync`: what a power cut leaves).
//! Each file is wrapped as `Probe(FaultyIo(Disk))`; the probe arms the fault at the n-th call of
//! its kind and, the moment it fires, snapshots both files of the database (the *crash images*).
//!
//! **Three reopens per scenario.** After the fault the test keeps using the database (checking
//! every answer it gives), then closes it. It then opens, without faults, (1) the current bytes
//! at the moment of the fault, (2) the durable bytes at that moment, (3) the bytes after close.
//! (1) and (2) must hold exactly what was acknowledged before the fault, plus or minus the
//! operation in flight, all or nothing; (3) must hold everything acknowledged at all (or, after a
//! torn write, which reports success while leaving a damaged page or record behind, refuse
//! cleanly with a checksum or corruption error). Each must then pass `check()` and take writes.
//!
//! (3) is skipped for a torn page write cut inside the page header: that leaves the old page
//! whole, i.e. a *lost* write, which no engine detects while running. Since the database is
//! poisoned after a failed write or fsync, `close()` must then return an error (checked last, so
//! the other checks of a scenario run first).
//!
//! **Reads.** A bit flipped in a read while running must give a checksum error from that call
//! and nothing wrong. A bit flipped in a read *during recovery* (in the log's header or records,
//! or in one of the first page-file reads, which are the meta pages) must make `open` fail
//! cleanly or recover everything; either way the file is undamaged, so a second open without the
//! fault must find everything acknowledged (only the log's last record may be lost to a flip in
//! it: recovery cannot tell that from a torn tail).
//!
//! **Damage on disk.** Every tree page, flipped in turn, must give `ChecksumMismatch` for that
//! page from `check()` and from the reads that reach it; a flipped meta page must not bring back
//! the previous checkpoint's tree with a log that no longer matches it.
//!
//! **Out-of-line values** (issue 23): one put in 40 carries a value of 5–65 KB (a run of pages,
//! the value logged too) and one in 320 a value over 1 MiB (a run written and fsynced before its
//! record); `faults_in_an_overflow_run_write` arms each write fault at exactly the run's write
//! of such a put, and at the page-file fsync that makes an unlogged run durable.
//!
//! Each test runs all its cases and then fails naming every failed one, so one bug does not hide
//! another.

mod db_common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use db_common::{apply_members, batch_of, contents, differences, ordered_key, tagged_value, Rng};
use sylva::io::page_header::{PageKind, PAGE_HEADER_LEN, PAGE_MAGIC};
use sylva::io::{Fault, FaultHandle, FaultyIo, Io};
use sylva::{Db, DbOptions, Error, Result, SyncMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const PAGE_SIZE: usize = 4096;

// ---------------------------------------------------------------------------------------------
// A file in memory with a crash model.

enum Pending {
    Write(u64, Vec<u8>),
    Len(u64),
}

#[derive(Default)]
struct DiskState {
    current: Vec<u8>,
    durable: Vec<u8>,
    /// Changes since the last sync, in order; `sync` applies them to `durable`.
    pending: Vec<Pending>,
}

fn write_into(bytes: &mut Vec<u8>, offset: u64, buf: &[u8]) {
    let start = offset as usize;
    if bytes.len() < start + buf.len() {
        bytes.resize(start + buf.len(), 0);
    }
    bytes[start..start + buf.len()].copy_from_slice(buf);
}

/// A shared file in memory: clones are the same file.
#[derive(Clone)]
struct Disk {
    state: Arc<Mutex<DiskState>>,
    path: PathBuf,
}

impl Disk {
    fn new(name: &str, bytes: Vec<u8>) -> Self {
        Disk {
            state: Arc::new(Mutex::new(DiskState {
                current: bytes.clone(),
                durable: bytes,
                pending: Vec::new(),
            })),
            path: PathBuf::from(format!("<{name}>")),
        }
    }
    fn current(&self) -> Vec<u8> {
        self.state.lock().expect("disk").current.clone()
    }
    fn durable(&self) -> Vec<u8> {
        self.state.lock().expect("disk").durable.clone()
    }
}

fn past_end(offset: u64, len: usize) -> Error {
    Error::Io {
        path: None,
        source: std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{len} bytes at {offset} are past the end"),
        ),
    }
}

impl Io for Disk {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let s = self.state.lock().expect("disk");
        let start = offset as usize;
        let src = s
            .current
            .get(start..start + buf.len())
            .ok_or_else(|| past_end(offset, buf.len()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut s = self.state.lock().expect("disk");
        write_into(&mut s.current, offset, buf);
        s.pending.push(Pending::Write(offset, buf.to_vec()));
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        let mut s = self.state.lock().expect("disk");
        let pending = std::mem::take(&mut s.pending);
        for p in pending {
            match p {
                Pending::Write(offset, buf) => write_into(&mut s.durable, offset, &buf),
                Pending::Len(len) => s.durable.resize(len as usize, 0),
            }
        }
        Ok(())
    }
    fn file_len(&self) -> Result<u64> {
        Ok(self.state.lock().expect("disk").current.len() as u64)
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        let mut s = self.state.lock().expect("disk");
        s.current.resize(len as usize, 0);
        s.pending.push(Pending::Len(len));
        Ok(())
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

// ---------------------------------------------------------------------------------------------
// Arming faults at the n-th call, and the crash images taken when one fires.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    PageFile,
    Log,
}

/// Both files' bytes at one moment.
#[derive(Clone)]
struct Images {
    page: Vec<u8>,
    /// The log's two segments.
    wal: [Vec<u8>; 2],
}

/// The moment a fault fired: the current and the durable bytes of both files.
#[derive(Clone)]
struct Fired {
    current: Images,
    durable: Images,
    /// Whether the fault did something: a flipped bit inside the buffer read, a short or torn
    /// write shorter than the buffer. (An armed fault fires on the next call of its kind
    /// whatever the buffer's size.)
    effective: bool,
    /// The call it fired in, for messages.
    call: String,
}

struct CrashPoint {
    page: Disk,
    wal: [Disk; 2],
    fired: Mutex<Option<Fired>>,
}

impl CrashPoint {
    fn fired(&self) -> bool {
        self.fired.lock().expect("crash point").is_some()
    }
    fn get(&self) -> Option<Fired> {
        self.fired.lock().expect("crash point").clone()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Read,
    Write,
    Sync,
}

fn call_of(fault: Fault) -> Call {
    match fault {
        Fault::FlipBit(_) => Call::Read,
        Fault::FailSync => Call::Sync,
        _ => Call::Write,
    }
}

struct Plan {
    fault: Fault,
    /// Calls of the fault's kind to let through before arming it.
    skip: usize,
    armed: bool,
}

/// `FaultyIo` with a plan: arms the fault just before the `skip + 1`-th call of its kind and
/// records the crash images right after the call in which it fired.
struct Probe {
    inner: FaultyIo<Disk>,
    handle: FaultHandle,
    plan: Arc<Mutex<Option<Plan>>>,
    crash: Arc<CrashPoint>,
}

type PlanSlot = Arc<Mutex<Option<Plan>>>;

impl Probe {
    fn new(disk: Disk, plan: PlanSlot, crash: Arc<CrashPoint>) -> Self {
        let (inner, handle) = FaultyIo::new(disk);
        Probe {
            inner,
            handle,
            plan,
            crash,
        }
    }

    fn around<T>(&self, call: Call, offset: u64, len: usize, f: impl FnOnce() -> T) -> T {
        {
            let mut plan = self.plan.lock().expect("plan");
            if let Some(p) = plan.as_mut() {
                if !p.armed && call_of(p.fault) == call {
                    if p.skip == 0 {
                        self.handle.arm(p.fault);
                        p.armed = true;
                    } else {
                        p.skip -= 1;
                    }
                }
            }
        }
        let out = f();
        let fired = self
            .plan
            .lock()
            .expect("plan")
            .as_ref()
            .filter(|p| p.armed && self.handle.pending() == 0)
            .map(|p| p.fault);
        if let Some(fault) = fired {
            let mut slot = self.crash.fired.lock().expect("crash point");
            if slot.is_none() {
                *slot = Some(Fired {
                    current: Images {
                        page: self.crash.page.current(),
                        wal: self.crash.wal.clone().map(|d| d.current()),
                    },
                    durable: Images {
                        page: self.crash.page.durable(),
                        wal: self.crash.wal.clone().map(|d| d.durable()),
                    },
                    effective: match fault {
                        Fault::FlipBit(bit) => bit / 8 < len,
                        Fault::ShortWrite(n) | Fault::TornWrite(n) => n < len,
                        _ => true,
                    },
                    call: format!(
                        "{call:?} of {len} bytes at offset {offset} of the {}",
                        self.inner.path().display()
                    ),
                });
            }
        }
        out
    }
}

impl Io for Probe {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len();
        self.around(Call::Read, offset, len, || self.inner.read_at(buf, offset))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.around(Call::Write, offset, buf.len(), || {
            self.inner.write_at(buf, offset)
        })
    }
    fn sync(&self) -> Result<()> {
        self.around(Call::Sync, 0, 0, || self.inner.sync())
    }
    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        self.inner.set_file_len(len)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

/// A database over probed disks, with the plans of both files and the shared crash point.
struct Rig {
    page: Disk,
    wal: [Disk; 2],
    page_plan: PlanSlot,
    wal_plan: PlanSlot,
    crash: Arc<CrashPoint>,
}

impl Rig {
    fn new(images: Option<&Images>) -> Self {
        let page = Disk::new(
            "page file",
            images.map_or_else(Vec::new, |i| i.page.clone()),
        );
        let wal = [0, 1].map(|i| {
            Disk::new(
                ["log", "log segment 2"][i],
                images.map_or_else(Vec::new, |im| im.wal[i].clone()),
            )
        });
        let crash = Arc::new(CrashPoint {
            page: page.clone(),
            wal: wal.clone(),
            fired: Mutex::new(None),
        });
        Rig {
            page,
            wal,
            page_plan: PlanSlot::default(),
            wal_plan: PlanSlot::default(),
            crash,
        }
    }

    /// Opens a database over the rig's files; `plan` arms one fault on one file.
    fn open(&self, plan: Option<(Target, Fault, usize)>) -> Result<Db> {
        if let Some((target, fault, skip)) = plan {
            self.arm(target, fault, skip);
        }
        let page = Probe::new(
            self.page.clone(),
            self.page_plan.clone(),
            self.crash.clone(),
        );
        let wal = self.wal.clone().map(|disk| {
            Box::new(Probe::new(disk, self.wal_plan.clone(), self.crash.clone())) as Box<dyn Io>
        });
        Db::open_io(Box::new(page), wal, db_options())
    }

    fn arm(&self, target: Target, fault: Fault, skip: usize) {
        let plan = match target {
            Target::PageFile => &self.page_plan,
            Target::Log => &self.wal_plan,
        };
        *plan.lock().expect("plan") = Some(Plan {
            fault,
            skip,
            armed: false,
        });
    }

    fn images(&self) -> Images {
        Images {
            page: self.page.current(),
            wal: self.wal.clone().map(|d| d.current()),
        }
    }
}

/// Durable before every write returns; a pool of 32 pages (the data is several times that, so
/// pages are evicted, written back and read again); no automatic checkpoint (the test calls
/// `checkpoint()` itself).
fn db_options() -> DbOptions {
    DbOptions {
        sync: SyncMode::Always,
        cache_bytes: CACHE_PAGES.with(std::cell::Cell::get) * PAGE_SIZE as u64,
        run_cache: RUN_CACHE.with(std::cell::Cell::get),
        logged_value_max: LOGGED_VALUE_MAX.with(std::cell::Cell::get),
        page_size: PAGE_SIZE,
        checkpoint_bytes: 1 << 40,
        direct_io: false,
        ..DbOptions::default()
    }
}

thread_local! {
    /// Whether this thread's databases keep out-of-line values in the run cache (the default):
    /// off where a case needs a logged run written by its put.
    static RUN_CACHE: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    /// This thread's databases' `cache_bytes`, in pages.
    static CACHE_PAGES: std::cell::Cell<u64> = const { std::cell::Cell::new(32) };
    /// This thread's databases' `logged_value_max`.
    static LOGGED_VALUE_MAX: std::cell::Cell<usize> = const { std::cell::Cell::new(64 << 10) };
}

/// How a put's out-of-line value reaches the page file (`db/overflow.rs`, "Writing").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunWrite {
    /// Logged whole, and (without the run cache) written by its put, not fsynced.
    Logged,
    /// Not logged: written and fsynced by its put, before its record.
    AtPut,
    /// Not logged: in the run cache until the commit's log sync writes it and fsyncs the page
    /// file, before the log's fsync.
    BeforeSync,
    /// As `BeforeSync`, a value long enough to be kept as its run's image and written from it
    /// (`db/runcache.rs`, "Memory").
    BeforeSyncImage,
}

// ---------------------------------------------------------------------------------------------
// The workload and what the test expects of the database.

const KEYS: u64 = 2500;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>),
    Scan(Vec<u8>, usize),
    Sync,
    Checkpoint,
}

struct Workload {
    rng: Rng,
    n: u64,
}

impl Workload {
    fn value(&mut self, key: &[u8]) -> Vec<u8> {
        self.n += 1;
        let len = match self.rng.below(40) {
            0 if self.rng.below(8) == 0 => (1 << 20) + self.rng.below(200_000) as usize,
            0 => 5000 + self.rng.below(60_000) as usize,
            _ => 20 + self.rng.below(300) as usize,
        };
        tagged_value(key, self.n, len)
    }

    /// A put whose value goes out of line, of a length that takes `how` (with the options
    /// `faults_in_an_overflow_run_write` sets for it).
    fn big_put(&mut self, how: RunWrite) -> Op {
        let k = self.key();
        self.n += 1;
        let len = match how {
            RunWrite::Logged => 60_000,
            RunWrite::AtPut => (1 << 20) + 5000,
            RunWrite::BeforeSync => 5000,
            RunWrite::BeforeSyncImage => 70_000,
        };
        Op::Put(k.clone(), tagged_value(&k, self.n, len))
    }

    fn key(&mut self) -> Vec<u8> {
        ordered_key(self.rng.below(KEYS))
    }

    /// Only puts, for loading.
    fn put(&mut self) -> Op {
        let k = self.key();
        let v = self.value(&k);
        Op::Put(k, v)
    }

    fn next(&mut self) -> Op {
        self.n += 1;
        if self.n.is_multiple_of(151) {
            return Op::Checkpoint;
        }
        if self.n.is_multiple_of(53) {
            return Op::Sync;
        }
        let k = self.key();
        match self.rng.below(100) {
            0..50 => {
                let v = self.value(&k);
                Op::Put(k, v)
            }
            50..65 => Op::Delete(k),
            65..72 => {
                let mut members: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
                for _ in 0..2 + self.rng.below(6) {
                    let k = self.key();
                    if members.iter().any(|(m, _)| *m == k) {
                        continue;
                    }
                    let v = (self.rng.below(4) != 0).then(|| self.value(&k));
                    members.push((k, v));
                }
                Op::Batch(members)
            }
            72..95 => Op::Get(k),
            _ => Op::Scan(k, 1 + self.rng.below(40) as usize),
        }
    }
}

/// What the database must answer: `certain` holds every acknowledged write; a key in `maybe`
/// was the target of writes that failed since its last acknowledged one, and may instead hold
/// one of their outcomes.
///
/// After a *lost write* (`lost`: a torn write of fewer than 24 bytes, which leaves a page's
/// header as it was, the old LSN included, and reports success), a page the pool evicts and
/// reads back may be the page's older version, whose checksum is intact: no page checksum
/// tells the two apart. A read may then also return a value the key held earlier, or nothing
/// (`history`, hashes of every value written to a key), never a value the key never held.
#[derive(Clone, Default)]
struct Expect {
    certain: Model,
    maybe: BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>>,
    lost: bool,
    history: std::collections::HashSet<(Vec<u8>, u64)>,
}

/// A value's hash for [`Expect::history`].
fn value_hash(v: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

impl Expect {
    fn allows(&self, key: &[u8], got: Option<&Vec<u8>>) -> bool {
        self.certain.get(key) == got
            || self
                .maybe
                .get(key)
                .is_some_and(|m| m.iter().any(|v| v.as_ref() == got))
            || (self.lost
                && got.is_none_or(|v| self.history.contains(&(key.to_vec(), value_hash(v)))))
    }

    fn writes(op: &Op) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        match op {
            Op::Put(k, v) => vec![(k.clone(), Some(v.clone()))],
            Op::Delete(k) => vec![(k.clone(), None)],
            Op::Batch(m) => m.clone(),
            _ => Vec::new(),
        }
    }

    fn acknowledged(&mut self, op: &Op) {
        for (k, v) in Self::writes(op) {
            self.maybe.remove(&k);
            if let Some(v) = &v {
                self.history.insert((k.clone(), value_hash(v)));
            }
            match v {
                Some(v) => self.certain.insert(k, v),
                None => self.certain.remove(&k),
            };
        }
    }

    fn failed(&mut self, op: &Op) {
        for (k, v) in Self::writes(op) {
            if let Some(v) = &v {
                self.history.insert((k.clone(), value_hash(v)));
            }
            self.maybe.entry(k).or_default().push(v);
        }
    }

    fn apply_to(model: &Model, op: &Op) -> Model {
        let mut m = model.clone();
        apply_members(&mut m, &Self::writes(op));
        m
    }
}

/// Runs `op`; checks what reads return against `expect` (a read may fail, never lie).
fn execute(db: &Db, op: &Op, expect: &Expect) -> Result<()> {
    match op {
        Op::Put(k, v) => db.put(k, v),
        Op::Delete(k) => db.delete(k).map(|_| ()),
        Op::Batch(members) => db.write(&batch_of(members)),
        Op::Get(k) => {
            let got = db.get(k)?;
            assert!(
                expect.allows(k, got.as_ref()),
                "get({}) returned a wrong value",
                String::from_utf8_lossy(k)
            );
            Ok(())
        }
        Op::Scan(from, limit) => {
            let mut prev: Option<Vec<u8>> = None;
            for item in db
                .range(Bound::Included(from), Bound::Unbounded)
                .take(*limit)
            {
                let (k, v) = item?;
                assert!(
                    prev.as_ref().is_none_or(|p| p < &k) && k >= *from,
                    "a cursor from {} is out of order",
                    String::from_utf8_lossy(from)
                );
                assert!(
                    expect.allows(&k, Some(&v)),
                    "a cursor returned a wrong value for {}",
                    String::from_utf8_lossy(&k)
                );
                prev = Some(k);
            }
            Ok(())
        }
        Op::Sync => db.sync(),
        Op::Checkpoint => db.checkpoint(),
    }
}

/// A clean refusal: the database says its bytes cannot be trusted or that it will not write.
fn is_clean_refusal(e: &Error) -> bool {
    matches!(
        e,
        Error::ChecksumMismatch { .. }
            | Error::Corruption { .. }
            | Error::LogCorruption { .. }
            | Error::Poisoned
            | Error::Io { .. }
    )
}

/// Opens `images` without faults and checks that the contents are one of `allowed` (or, when
/// `expect` is given, allowed by it); then that `check()` passes and the database takes writes.
/// With `may_refuse`, a checksum or corruption error on the way is accepted instead.
fn reopen_and_verify(
    label: &str,
    images: &Images,
    allowed: &[&Model],
    expect: Option<&Expect>,
    may_refuse: bool,
) {
    let refused = |what: &str, e: Error| {
        assert!(
            may_refuse
                && matches!(
                    e,
                    Error::ChecksumMismatch { .. }
                        | Error::Corruption { .. }
                        | Error::LogCorruption { .. }
                ),
            "{label}: {what} failed: {e:?}"
        );
    };
    let rig = Rig::new(Some(images));
    let db = match rig.open(None) {
        Ok(db) => db,
        Err(e) => return refused("open", e),
    };
    let got = match contents(&db) {
        Ok(got) => got,
        Err(e) => return refused("a full scan", e),
    };
    let fits = allowed.iter().any(|m| **m == got)
        || expect.is_some_and(|x| {
            got.iter().all(|(k, v)| x.allows(k, Some(v)))
                && x.certain.keys().all(|k| x.allows(k, got.get(k)))
                && x.maybe.keys().all(|k| x.allows(k, got.get(k)))
        });
    assert!(
        fits,
        "{label}: the reopened database holds something other than what was acknowledged \
         (and possibly the operation in flight, all or nothing); against the acknowledged state, {}",
        differences(
            &got,
            expect.map_or_else(|| allowed[0], |x| &x.certain),
            10
        )
    );
    match db.check() {
        Ok(report) => assert_eq!(report.records, got.len() as u64, "{label}: check() records"),
        Err(e) => return refused("check()", e),
    }
    db.put(b"after-reopen", b"usable")
        .unwrap_or_else(|e| panic!("{label}: a put after reopening: {e:?}"));
    assert_eq!(
        db.get(b"after-reopen").expect("get after reopen"),
        Some(b"usable".to_vec()),
        "{label}: reading back a put after reopening"
    );
    db.checkpoint()
        .unwrap_or_else(|e| panic!("{label}: a checkpoint after reopening: {e:?}"));
    db.close()
        .unwrap_or_else(|e| panic!("{label}: close after reopening: {e:?}"));
}

/// Loads a database: records enough for the pool to evict, a checkpoint, then more writes so
/// the log holds records and pages are dirty.
fn load(db: &Db, w: &mut Workload, expect: &mut Expect) {
    for _ in 0..1500 {
        let op = w.put();
        execute(db, &op, expect).expect("loading");
        expect.acknowledged(&op);
    }
    db.checkpoint().expect("the first checkpoint");
    for _ in 0..400 {
        let op = w.next();
        execute(db, &op, expect).expect("writes after the first checkpoint");
        expect.acknowledged(&op);
    }
}

/// One scenario: `fault` on `target`, armed at the `skip + 1`-th call of its kind after loading.
fn scenario(target: Target, fault: Fault, skip: usize) {
    scenario_from(target, fault, skip, None);
}

/// [`scenario`], with `first` the first operation after the fault is armed.
fn scenario_from(target: Target, fault: Fault, skip: usize, first: Option<Op>) {
    let label = format!(
        "{fault:?} on the {target:?} (after {skip} calls{})",
        first
            .as_ref()
            .map_or("", |_| ", then a put of a large value")
    );
    let first_op = first.clone();
    let mut first = first;
    let rig = Rig::new(None);
    let db = rig.open(None).expect("open a new database");
    let mut w = Workload {
        rng: Rng::new(skip as u64 ^ 0xFA17),
        n: 0,
    };
    let mut expect = Expect::default();
    load(&db, &mut w, &mut expect);
    rig.arm(target, fault, skip);

    // Run until the fault fires.
    let mut fired_in = None;
    for _ in 0..20_000 {
        let op = first.take().unwrap_or_else(|| w.next());
        let before = expect.certain.clone();
        let result = execute(&db, &op, &expect);
        if rig.crash.fired() {
            expect.lost = matches!(fault, Fault::TornWrite(n) if n < 24);
            fired_in = Some((op.clone(), before, result.is_err()));
            match &result {
                Ok(()) => expect.acknowledged(&op),
                Err(_) => expect.failed(&op),
            }
            break;
        }
        if let Err(e) = result {
            panic!("{label}: {op:?} failed before the fault fired: {e:?}");
        }
        expect.acknowledged(&op);
    }
    let Some((in_flight, acknowledged_before, op_failed)) = fired_in else {
        panic!("{label}: the fault never fired: the scenario tests nothing");
    };
    let fired = rig.crash.get().expect("fired");
    if let (Some(Op::Put(_, v)), Call::Write) = (&first_op, call_of(fault)) {
        // The run of a put of a large value: its pages, written with one call.
        let run = (48 + v.len()).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        assert!(
            fired.call.starts_with(&format!("Write of {run} bytes")),
            "{label}: the fault fired in a {}, not in the write of the value's run",
            fired.call
        );
    }
    assert!(
        fired.effective,
        "{label}: the fault fired in a {} and did nothing there: the scenario tests nothing",
        fired.call
    );
    let label = format!(
        "{label}, fired in a {} during {}",
        fired.call,
        op_name(&in_flight)
    );

    // The error surfaces from the call that hit it or from the next sync or checkpoint.
    let mut first_error = None;
    if !op_failed {
        for op in [Op::Sync, Op::Checkpoint] {
            if let Err(e) = execute(&db, &op, &expect) {
                first_error = Some(e);
                break;
            }
        }
    }
    let surfaced = op_failed || first_error.is_some();
    match fault {
        Fault::TornWrite(_) => {} // reports success, as a crash mid-write would
        _ => assert!(
            surfaced,
            "{label}: the fault fired during {in_flight:?}, but neither that call nor the next \
             sync() and checkpoint() returned an error"
        ),
    }

    // Afterwards the database answers correctly or refuses; it never panics or lies.
    for _ in 0..60 {
        let op = w.next();
        match execute(&db, &op, &expect) {
            Ok(()) => expect.acknowledged(&op),
            Err(e) => {
                assert!(
                    is_clean_refusal(&e),
                    "{label}: after the fault, {op:?} gave {e:?}"
                );
                expect.failed(&op);
            }
        }
    }
    let closed = db.close();

    let Fired {
        current, durable, ..
    } = fired;
    let with_in_flight = Expect::apply_to(&acknowledged_before, &in_flight);
    let crash_states = [&acknowledged_before, &with_in_flight];
    reopen_and_verify(
        &format!("{label}, reopened from the bytes at the fault (kill -9)"),
        &current,
        &crash_states,
        None,
        false,
    );
    reopen_and_verify(
        &format!("{label}, reopened from the durable bytes at the fault (power cut)"),
        &durable,
        &crash_states,
        None,
        false,
    );
    // A torn page write that stops inside the header leaves the old page's checksum and body:
    // to the database that is a *lost* write of a valid older page, which no engine detects
    // while running without remembering every page's last written LSN. Only crash recovery
    // (the images above, where the log's full-page images cover it) is tested for it.
    let lost_write =
        target == Target::PageFile && matches!(fault, Fault::TornWrite(n) if n < PAGE_HEADER_LEN);
    if !lost_write {
        reopen_and_verify(
            &format!("{label}, reopened after close"),
            &rig.images(),
            &[],
            Some(&expect),
            matches!(fault, Fault::TornWrite(_)),
        );
    }

    // A write or fsync failed, so the database is poisoned ("every later call returns
    // Error::Poisoned until it is reopened"): close cannot checkpoint, and must not claim it did.
    if surfaced
        && matches!(
            fault,
            Fault::FailWrite | Fault::ShortWrite(_) | Fault::FailSync
        )
    {
        assert!(
            closed.is_err(),
            "{label}: close() returned Ok on a database whose write or fsync had failed"
        );
    }
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Put(..) => "a put",
        Op::Delete(_) => "a delete",
        Op::Batch(_) => "a write batch",
        Op::Get(_) => "a get",
        Op::Scan(..) => "a scan",
        Op::Sync => "a sync",
        Op::Checkpoint => "a checkpoint",
    }
}

/// Write faults cut a write at `cut` bytes: within a log record's frame, or half a page.
fn faults(cut: usize) -> Vec<Fault> {
    vec![
        Fault::FailWrite,
        Fault::ShortWrite(cut),
        Fault::TornWrite(cut),
        Fault::FailSync,
    ]
}

/// Runs every case even when some fail (each failure's message is printed as it happens), then
/// fails naming them all: one bug should not hide the others.
fn all_cases(cases: Vec<(String, Box<dyn FnOnce()>)>) {
    let mut failed = Vec::new();
    for (name, case) in cases {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(case)).is_err() {
            failed.push(name);
        }
    }
    assert!(
        failed.is_empty(),
        "{} cases failed (messages above):\n  {}",
        failed.len(),
        failed.join("\n  ")
    );
}

fn scenarios(target: Target, faults: Vec<Fault>, skips: &[usize]) {
    let mut cases: Vec<(String, Box<dyn FnOnce()>)> = Vec::new();
    for fault in faults {
        for &skip in skips {
            cases.push((
                format!("{fault:?} on the {target:?} after {skip} calls"),
                Box::new(move || scenario(target, fault, skip)),
            ));
        }
    }
    all_cases(cases);
}

#[test]
fn faults_in_the_page_file_while_running() {
    let mut faults = faults(PAGE_SIZE / 2);
    faults.push(Fault::TornWrite(10));
    scenarios(Target::PageFile, faults, &[0, 5, 40]);
}

/// Each write fault at the write of an out-of-line value's run (the first page-file write of a
/// put of a large value, with no dirty page written before it, as the pool writes back only at
/// checkpoints and evictions here), and a failed fsync at the one that makes an unlogged run
/// durable before its record (by its put, or by the commit's log sync for a value the run cache
/// holds): the put fails or (a torn write) the run's damage is caught by its checksum; nothing
/// acknowledged is lost. A logged run is written by its put only without the
/// run cache (`run_cache=false`); with it, the run cache's write-backs are among the page-file
/// writes `faults_in_the_page_file_while_running` breaks (its values of 5,000 bytes and more go
/// out of line).
#[test]
fn faults_in_an_overflow_run_write() {
    let mut cases: Vec<(String, Box<dyn FnOnce()>)> = Vec::new();
    for how in [
        RunWrite::Logged,
        RunWrite::AtPut,
        RunWrite::BeforeSync,
        RunWrite::BeforeSyncImage,
    ] {
        for fault in [
            Fault::FailWrite,
            Fault::ShortWrite(PAGE_SIZE + 100),
            Fault::TornWrite(PAGE_SIZE / 2),
            Fault::TornWrite(PAGE_SIZE + 100),
            Fault::FailSync,
        ] {
            if matches!(fault, Fault::FailSync) && how == RunWrite::Logged {
                continue; // a logged run is not fsynced by its put
            }
            cases.push((
                format!("{fault:?} on a run's write ({how:?})"),
                Box::new(move || {
                    // Logged: written by its put only without the run cache. Before the sync:
                    // a value over `logged_value_max`, short enough for the cache, which is
                    // large enough that the value entering it does not move the pool's budget
                    // (an eviction's write would come before the run's).
                    RUN_CACHE.with(|c| c.set(how != RunWrite::Logged));
                    let before_sync =
                        matches!(how, RunWrite::BeforeSync | RunWrite::BeforeSyncImage);
                    CACHE_PAGES.with(|c| c.set(if before_sync { 1024 } else { 32 }));
                    LOGGED_VALUE_MAX.with(|c| c.set(if before_sync { 1024 } else { 64 << 10 }));
                    let op = Workload {
                        rng: Rng::new(99),
                        n: 1 << 40,
                    }
                    .big_put(how);
                    scenario_from(Target::PageFile, fault, 0, Some(op));
                }),
            ));
        }
    }
    all_cases(cases);
}

#[test]
fn faults_in_the_log_while_running() {
    scenarios(Target::Log, faults(10), &[0, 5, 40]);
}

#[test]
fn flipped_bits_in_page_reads_while_running() {
    // A byte in the middle of the first page the read returns.
    scenarios(
        Target::PageFile,
        vec![Fault::FlipBit(8 * 2000 + 5)],
        &[0, 3, 17],
    );
}

/// A database whose log holds acknowledged records not yet in the page file: the images of a
/// `kill -9` right after the last write, which is a put of [`LAST_KEY`]; and the contents with
/// and without that put.
fn crashed_with_a_log() -> (Images, Model, Model) {
    let rig = Rig::new(None);
    let db = rig.open(None).expect("open");
    let mut w = Workload {
        rng: Rng::new(7),
        n: 0,
    };
    let mut expect = Expect::default();
    load(&db, &mut w, &mut expect);
    let before_last = expect.certain.clone();
    let last = Op::Put(LAST_KEY.to_vec(), b"the last record in the log".to_vec());
    execute(&db, &last, &expect).expect("the last put");
    expect.acknowledged(&last);
    let images = rig.images();
    db.simulate_crash();
    (images, expect.certain, before_last)
}

const LAST_KEY: &[u8] = b"zz-last";

/// A bit flipped in a read during recovery (the n-th read of the file from open on): open fails
/// cleanly, or succeeds and every answer is right or a clean checksum or corruption error (the
/// flip may land in a later read); the file itself is undamaged, so a second open without the
/// fault must find everything.
///
/// With `in_last_record` the flip lands in the log's last record, which recovery cannot tell
/// from a torn tail (a crash in the middle of its write): losing that one put is allowed.
fn flip_during_recovery(target: Target, skip: usize, bit: usize, in_last_record: bool) {
    let label = format!("a flipped bit in read {skip} of the {target:?} from open on");
    let (images, model, before_last) = crashed_with_a_log();
    let allowed: Vec<&Model> = if in_last_record {
        vec![&model, &before_last]
    } else {
        vec![&model]
    };
    let rig = Rig::new(Some(&images));
    let clean = |e: &Error| {
        matches!(
            e,
            Error::ChecksumMismatch { .. }
                | Error::Corruption { .. }
                | Error::LogCorruption { .. }
                | Error::NotSylva { .. }
        )
    };
    let mut outcome = String::from("opened; ");
    match rig.open(Some((target, Fault::FlipBit(bit), skip))) {
        Err(e) => {
            assert!(clean(&e), "{label}: open failed with {e:?}");
            outcome = format!("open failed with {e:?}");
        }
        Ok(db) => {
            outcome += &format!("recovery report {:?}; ", db.recovery());
            match contents(&db) {
                Ok(got) => assert!(
                    allowed.contains(&&got),
                    "{label}: the database opened with different contents (fault fired: {:?}, \
                     recovery report {:?}); {}",
                    rig.crash.get().map(|f| f.call),
                    db.recovery(),
                    differences(&got, &model, 10)
                ),
                Err(e) => {
                    assert!(clean(&e), "{label}: a full scan failed with {e:?}");
                    outcome += &format!("a full scan failed with {e:?}; ");
                }
            }
            match db.check() {
                Err(e) => {
                    assert!(
                        clean(&e) || matches!(e, Error::Poisoned),
                        "{label}: check() failed with {e:?}"
                    );
                    outcome += &format!("check() failed with {e:?}");
                }
                Ok(_) => outcome += "check() passed",
            }
            drop(db);
        }
    }
    let fired = rig
        .crash
        .get()
        .unwrap_or_else(|| panic!("{label}: the fault never fired"));
    assert!(
        fired.effective,
        "{label}: the flip fell outside the {}",
        fired.call
    );
    reopen_and_verify(
        &format!(
            "{label} (fired in a {}; then: {outcome}), opened again without the fault",
            fired.call
        ),
        &rig.images(),
        &allowed,
        None,
        false,
    );
}

#[test]
fn flipped_bits_in_log_reads_during_recovery() {
    let (images, _, _) = crashed_with_a_log();
    // The records are in one of the log's two segments (the other holds only its header);
    // recovery reads each segment's header, then its records (an empty read if it has none),
    // segment 0 first.
    let seg = usize::from(images.wal[0].len() <= 32);
    let header_read = 2 * seg;
    let body_bits = (images.wal[seg].len() - 32) * 8;
    assert!(body_bits > 1000, "the crashed log holds records");
    // The header, then (if the log is read in one piece after it) the start, middle and end of
    // the records.
    let mut cases: Vec<(String, Box<dyn FnOnce()>)> = vec![(
        "the log's header".into(),
        Box::new(move || flip_during_recovery(Target::Log, header_read, 8 * 20 + 1, false)),
    )];
    for bit in [100, body_bits / 2, body_bits - 50] {
        cases.push((
            format!("bit {bit} of the log's records"),
            Box::new(move || {
                flip_during_recovery(Target::Log, header_read + 1, bit, bit == body_bits - 50)
            }),
        ));
    }
    all_cases(cases);
}

#[test]
fn flipped_bits_in_page_reads_during_recovery() {
    all_cases(
        (0..4)
            .map(|skip| {
                let case: Box<dyn FnOnce()> = Box::new(move || {
                    flip_during_recovery(Target::PageFile, skip, 8 * 1000 + 2, false)
                });
                (format!("page-file read {skip} from open on"), case)
            })
            .collect(),
    );
}

// ---------------------------------------------------------------------------------------------
// A bit flipped in the bytes on disk.

#[test]
fn a_flipped_bit_in_a_tree_page_on_disk_is_a_checksum_mismatch() {
    // Inserts only, then close: every leaf and inner page in the file is part of the tree.
    let rig = Rig::new(None);
    let db = rig.open(None).expect("open");
    let mut w = Workload {
        rng: Rng::new(11),
        n: 0,
    };
    let mut expect = Expect::default();
    for _ in 0..1500 {
        let op = w.put();
        execute(&db, &op, &expect).expect("put");
        expect.acknowledged(&op);
    }
    db.close().expect("close");
    let images = rig.images();
    let model = expect.certain;

    let mut tree_pages = Vec::new();
    for (id, page) in images.page.chunks(PAGE_SIZE).enumerate() {
        let kind = PageKind::from_u8(page[6]);
        if &page[0..4] == PAGE_MAGIC
            && matches!(kind, Some(PageKind::BTreeLeaf | PageKind::BTreeInner))
        {
            tree_pages.push(id as u64);
        }
    }
    assert!(
        tree_pages.len() > 10,
        "only {} tree pages in the file",
        tree_pages.len()
    );
    for &id in &tree_pages {
        let mut damaged = images.clone();
        damaged.page[id as usize * PAGE_SIZE + PAGE_SIZE / 2] ^= 0x08;
        let is_this_page =
            |e: &Error| matches!(e, Error::ChecksumMismatch { page, .. } if *page == id);

        // check() names the page.
        let rig = Rig::new(Some(&damaged));
        match rig.open(None) {
            Err(e) => {
                assert!(
                    is_this_page(&e),
                    "page {id} flipped: open failed with {e:?}"
                );
                continue;
            }
            Ok(db) => match db.check() {
                Err(e) => assert!(is_this_page(&e), "page {id} flipped: check() gave {e:?}"),
                Ok(r) => panic!("page {id} flipped: check() passed ({r:?})"),
            },
        }

        // Reads that reach the page fail with the same error; the others are right.
        let rig = Rig::new(Some(&damaged));
        let db = rig.open(None).expect("opened once already");
        let mut failed = 0;
        for (k, v) in &model {
            match db.get(k) {
                Ok(got) => assert_eq!(
                    got.as_ref(),
                    Some(v),
                    "page {id} flipped: get({}) returned a wrong value",
                    String::from_utf8_lossy(k)
                ),
                Err(e) => {
                    assert!(
                        is_this_page(&e) || matches!(e, Error::Poisoned),
                        "page {id} flipped: get gave {e:?}"
                    );
                    failed += 1;
                }
            }
        }
        assert!(
            failed > 0,
            "page {id} flipped: every get succeeded, though the page is part of the tree"
        );
    }
}

#[test]
fn a_flipped_bit_in_a_meta_page_on_disk_is_refused_or_harmless() {
    // The two meta pages alternate: one holds the last checkpoint, the other the one before,
    // whose log has since been emptied. Damage to either must not silently bring back the older
    // checkpoint's tree with the newer log (or none) replayed on top of it.
    let rig = Rig::new(None);
    let db = rig.open(None).expect("open");
    let mut w = Workload {
        rng: Rng::new(13),
        n: 0,
    };
    let mut expect = Expect::default();
    load(&db, &mut w, &mut expect);
    db.close().expect("close");
    let images = rig.images();
    let model = expect.certain;
    let mut cases: Vec<(String, Box<dyn FnOnce()>)> = Vec::new();
    for id in 0..2usize {
        let mut damaged = images.clone();
        damaged.page[id * PAGE_SIZE + 100] ^= 0x40;
        let model = model.clone();
        cases.push((
            format!("meta page {id}"),
            Box::new(move || {
                let rig = Rig::new(Some(&damaged));
                match rig.open(None) {
                    Err(e) => assert!(
                        matches!(
                            e,
                            Error::ChecksumMismatch { .. }
                                | Error::Corruption { .. }
                                | Error::LogCorruption { .. }
                        ),
                        "meta page {id} flipped: open failed with {e:?}"
                    ),
                    Ok(db) => {
                        let got = contents(&db);
                        assert!(
                            got.as_ref().is_ok_and(|g| *g == model),
                            "meta page {id} flipped: the database opened (recovery {:?}) and \
                             holds something else: {}",
                            db.recovery(),
                            match &got {
                                Ok(g) => differences(g, &model, 10),
                                Err(e) => format!("a full scan failed with {e:?}"),
                            }
                        );
                        db.check().unwrap_or_else(|e| {
                            panic!("meta page {id} flipped: check() failed with {e:?}")
                        });
                    }
                }
            }),
        ));
    }
    all_cases(cases);
}
