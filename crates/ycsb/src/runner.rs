//! The runner: replays one phase's operations on a target from N threads and measures it.
//!
//! Each operation is timed on its own with the CPU's time-stamp counter (`quanta`: two `rdtsc`
//! reads cost about 10–20 ns, where two `Instant::now()` calls cost 60–130 ns on this machine's
//! virtualised clock, enough to distort operations that take 200 ns) and recorded in a per-thread HDR histogram; throughput is operations over the
//! phase's wall time. Every result an engine returns is consumed into a checksum (found values
//! and every scanned record), so no lookup can be optimised away, and engines given the same
//! operations can be seen to give the same answers. The checksum is a wrapping sum of per-record
//! hashes, so it does not depend on the order a range map visits records in or on how the
//! operations were split over threads.
//!
//! With N threads the operation stream is cut into N contiguous pieces, one per thread.

use std::hash::Hasher;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sylva::{KvStore, Stats};

use crate::process::CpuTime;
use crate::workload::{KeyArena, Op, OpKind};

/// One thread's handle on a target.
pub trait Session: Send {
    /// See [`KvStore::get_into`].
    fn get_into(&mut self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool>;
    /// See [`KvStore::put`].
    fn put(&mut self, key: &[u8], value: &[u8]) -> sylva::Result<()>;
    /// See [`KvStore::delete`].
    fn delete(&mut self, key: &[u8]) -> sylva::Result<bool>;
    /// See [`KvStore::scan`].
    fn scan(
        &mut self,
        start: &[u8],
        limit: usize,
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize>;
    /// See [`KvStore::map_range`].
    fn map_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize>;
    /// The session's pipeline, for an engine that keeps many operations of one thread in
    /// flight (the PA-Tree mode); `None` (the default) for the rest, which the runner drives
    /// one operation at a time whatever `--inflight` says.
    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        None
    }
}

/// An operation handed to a [`Pipeline`].
#[derive(Debug, Clone, Copy)]
pub enum PipeOp<'a> {
    /// Look a key up.
    Get(&'a [u8]),
    /// Put a key with a value.
    Put(&'a [u8], &'a [u8]),
    /// Delete a key.
    Delete(&'a [u8]),
    /// Scan up to this many records from the first key at or after this one.
    Scan(&'a [u8], usize),
    /// Every record with a key in `[start, end)`.
    Map(&'a [u8], &'a [u8]),
}

/// How a [`PipeOp`] ended: for a `Get` whether the key was found (its value in the buffer
/// given to [`Pipeline::complete`]), for a `Delete` whether it was there; `true` for a `Put`,
/// a `Scan` and a `Map` (whose records went to [`Pipeline::complete`]'s visitor).
pub type PipeDone = bool;

impl<T: KvStore + ?Sized> Session for &T {
    #[inline]
    fn get_into(&mut self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        (**self).get_into(key, out)
    }
    #[inline]
    fn put(&mut self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        (**self).put(key, value)
    }
    #[inline]
    fn delete(&mut self, key: &[u8]) -> sylva::Result<bool> {
        (**self).delete(key)
    }
    #[inline]
    fn scan(
        &mut self,
        start: &[u8],
        limit: usize,
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize> {
        (**self).scan(start, limit, visitor)
    }
    #[inline]
    fn map_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize> {
        (**self).map_range(start, end, visitor)
    }
}

/// Operations submitted without waiting, under tags, completed in any order.
pub trait Pipeline {
    /// Submits `op` under `tag` (its bytes are copied: the caller may reuse them at once).
    fn submit(&mut self, tag: u64, op: PipeOp<'_>);
    /// Waits for any outstanding operation to finish: its tag, and how it ended (a found
    /// value in `out`; a scan's or range map's records shown to `records`, in key order). A
    /// failed operation's error comes with its tag.
    fn complete(
        &mut self,
        out: &mut Vec<u8>,
        records: &mut dyn FnMut(&[u8], &[u8]),
    ) -> (u64, sylva::Result<PipeDone>);
}

/// Something the runner can drive: an engine instance.
pub trait Target {
    /// `n` sessions for `n` threads; an error if the target cannot run that many.
    fn sessions(&mut self, n: usize) -> Result<Vec<Box<dyn Session + '_>>, String>;
    /// Makes acknowledged writes durable.
    fn sync(&self) -> sylva::Result<()>;
    /// Finishes the engine's deferred work (see [`KvStore::finish_deferred`]); timed after each
    /// phase. The default is [`Target::sync`].
    fn finish_deferred(&self) -> sylva::Result<()> {
        self.sync()
    }
    /// The engine's counters.
    fn stats(&self) -> Stats;
    /// Whether its sessions have a [`Pipeline`] (so `--inflight` applies to it).
    fn pipelined(&self) -> bool {
        false
    }
}

/// Any `KvStore`, shared by all threads.
pub struct Shared(pub Box<dyn KvStore>);

impl Target for Shared {
    fn sessions(&mut self, n: usize) -> Result<Vec<Box<dyn Session + '_>>, String> {
        let store: &dyn KvStore = &*self.0;
        Ok((0..n)
            .map(|_| Box::new(store) as Box<dyn Session + '_>)
            .collect())
    }
    fn sync(&self) -> sylva::Result<()> {
        self.0.sync()
    }
    fn finish_deferred(&self) -> sylva::Result<()> {
        self.0.finish_deferred()
    }
    fn stats(&self) -> Stats {
        self.0.stats()
    }
}

/// What one phase measured.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    /// Operations run.
    pub ops: u64,
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Per-operation latency, nanoseconds.
    pub latency: Histogram<u64>,
    /// Wrapping sum of the hashes of every value found and record scanned.
    pub checksum: u64,
    /// Point reads that found their key.
    pub found: u64,
    /// Point reads that did not.
    pub missing: u64,
    /// Records visited by scans and maps.
    pub scanned: u64,
    /// CPU time (user and system) of the runner's worker threads, measured by each on itself
    /// (zero where `/proc` is missing): what the rest of the process spent is the engine's
    /// background threads'.
    pub worker_cpu: Duration,
}

impl PhaseResult {
    fn new() -> Self {
        PhaseResult {
            ops: 0,
            elapsed: Duration::ZERO,
            latency: new_histogram(),
            checksum: 0,
            found: 0,
            missing: 0,
            scanned: 0,
            worker_cpu: Duration::ZERO,
        }
    }

    fn merge(&mut self, other: &PhaseResult) {
        self.ops += other.ops;
        // Both histograms share bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        self.checksum = self.checksum.wrapping_add(other.checksum);
        self.found += other.found;
        self.missing += other.missing;
        self.scanned += other.scanned;
        self.worker_cpu += other.worker_cpu;
    }

    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns to one hour at 3 significant digits; the bounds are valid constants.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap_or_else(|_| unreachable_histogram())
}

#[cold]
fn unreachable_histogram() -> Histogram<u64> {
    panic!("histogram bounds are constants and valid")
}

/// The hash of a record, over every byte of its key and value.
///
/// A record of an 8-byte key and an 8-byte value (the default: the `dense` and `sparse` key sets
/// with `--value-size 8`) is one folded multiply of its two words, each first XORed with a
/// constant: the low and high halves of the 128-bit product XORed together. Every other record
/// is rapidhash (the `rapidhash` crate's `fast` hasher, which skips the final avalanche) over the
/// whole key, then over the whole value seeded with the key's hash; each input's length is added
/// to the seed before it is mixed, so a byte moved across the key/value boundary changes the
/// hash. On both paths the value's hash depends on its key, so values exchanged between keys
/// change the checksum's sum (a sum of separate key and value hashes would not).
///
/// Before issue 24 it read only the key's first and last 8 bytes and the value's first 8, so a
/// value corrupted in its middle, or one returned with the right prefix and a wrong tail, passed.
/// The first whole-record hash, XXH3 of the value seeded with XXH3 of the key, took 56% of
/// `bptree`'s time on workload X; this one takes 15%, less than the three words did (21%). The
/// 8/8 case is hand-written because there the crate's two dependent calls cost about three times
/// one multiply; for longer records a hand-written fold of 8-byte words measured within 7% of
/// rapidhash, so they take the crate's hash (`docs/benchmarking.md` has the numbers,
/// `examples/record_hash_cost.rs` measures them). Hashing a scan's records in one call would not
/// remove the per-record cost that remains (the engine's call of the visitor) and would make the
/// checksum depend on the order of a range map. The fast hasher's output may change between the
/// crate's minor versions and reads words in native byte order: checksums compare between
/// engines of one build, as they are used, not across builds with a different `Cargo.lock` or
/// machines of different endianness.
// The 8/8 path is inlined into the visitor and the other one is a call: left to the compiler,
// record_hash became a call of its own, and inlined whole it made the visitor save and restore
// the registers the general path needs on every record; either cost the 8/8 path most of its
// gain (callgrind, workload x on `bptree`).
#[inline(always)]
pub fn record_hash(key: &[u8], value: &[u8]) -> u64 {
    if let (Ok(k), Ok(v)) = (<&[u8; 8]>::try_from(key), <&[u8; 8]>::try_from(value)) {
        return folded_multiply(
            u64::from_le_bytes(*k) ^ KEY_CONSTANT,
            u64::from_le_bytes(*v) ^ VALUE_CONSTANT,
        );
    }
    rapidhash_record(key, value)
}

/// [`record_hash`] of every record but the 8-byte key and value.
#[inline(never)]
fn rapidhash_record(key: &[u8], value: &[u8]) -> u64 {
    let mut h = RECORD_HASHER;
    h.write(key);
    h.write(value);
    h.finish()
}

/// The 8/8 path's constants: the fractional parts of the golden ratio and of the square root of
/// 2, so that neither word is multiplied as given (a zero word would zero the product).
const KEY_CONSTANT: u64 = 0x9E37_79B9_7F4A_7C15;
const VALUE_CONSTANT: u64 = 0x6A09_E667_F3BC_C908;

/// The 128-bit product of `a` and `b`, its high half XORed into its low half: every bit of both
/// inputs reaches the result.
#[inline(always)]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// The fixed-seed hasher every other [`record_hash`] starts from (a copy: it is a few words).
const RECORD_HASHER: rapidhash::fast::RapidHasher<'static> =
    rapidhash::fast::RapidHasher::default_const();

/// Fills `buf` with the value written by operation (or record) number `seq`.
#[inline]
pub fn fill_value(buf: &mut [u8], seq: u64) {
    let bytes = seq.to_le_bytes();
    let n = buf.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
}

/// An engine error during a phase.
#[derive(Debug)]
pub struct RunError {
    /// Index of the failing operation in its phase.
    pub op_index: usize,
    /// The error.
    pub error: sylva::Error,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "operation {} failed: {}", self.op_index, self.error)
    }
}

/// Runs `ops` on `target` from `threads` threads. `progress` is called with counts of completed
/// operations as they accumulate. Values are `value_size` bytes; `seq_base` offsets the value
/// sequence so load and run phases write different values.
pub fn run_phase(
    target: &mut dyn Target,
    arena: &KeyArena,
    ops: &[Op],
    threads: usize,
    value_size: usize,
    seq_base: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<PhaseResult, String> {
    run_phase_with(
        target,
        arena,
        ops,
        threads,
        Client::default(),
        value_size,
        seq_base,
        progress,
    )
}

/// How each benchmark thread issues its operations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Client {
    /// Operations in flight at once, on engines whose sessions have a [`Pipeline`] (1: one
    /// at a time).
    pub inflight: usize,
    /// Operations per second each thread offers (an open-loop client: the i-th operation is
    /// issued no earlier than i / rate seconds after the thread starts); `None`: each as soon
    /// as there is room for it (a closed loop).
    pub rate: Option<f64>,
}

impl Default for Client {
    fn default() -> Self {
        Client {
            inflight: 1,
            rate: None,
        }
    }
}

/// When a paced thread issues its operations ([`Client::rate`]).
struct Pace {
    start: Instant,
    /// Nanoseconds between operations.
    every: Option<f64>,
}

impl Pace {
    fn new(rate: Option<f64>) -> Self {
        Pace {
            start: Instant::now(),
            every: rate.filter(|r| *r > 0.0).map(|r| 1e9 / r),
        }
    }

    /// How long until operation `i` is due (`None`: it is due now).
    fn wait_for(&self, i: usize) -> Option<Duration> {
        let every = self.every?;
        let due = self.start + Duration::from_nanos((i as f64 * every) as u64);
        due.checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }
}

/// [`run_phase`] with each thread issuing its operations as `client` says: up to
/// `client.inflight` of them in flight at once, on an engine whose sessions have a
/// [`Pipeline`] (others run one at a time), and, with `client.rate`, no faster than that many
/// a second. A pipelined thread keeps a window of gets, puts, deletes, scans and range maps
/// submitted, taking whichever finishes first before it submits the next; any other operation
/// (a scan to a key, a read-modify-write) waits until the window is empty and runs on its own. A paced thread
/// waits for an operation's time by completing what it has in flight, or sleeping when it has
/// nothing. An operation's latency runs from its submission to the moment the thread saw it
/// complete.
#[allow(clippy::too_many_arguments)]
pub fn run_phase_with(
    target: &mut dyn Target,
    arena: &KeyArena,
    ops: &[Op],
    threads: usize,
    client: Client,
    value_size: usize,
    seq_base: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<PhaseResult, String> {
    let threads = threads.max(1);
    let inflight = client.inflight.max(1);
    let rate = client.rate;
    let sessions = target.sessions(threads)?;
    let barrier = Barrier::new(threads + 1);
    let chunk = ops.len().div_ceil(threads).max(1);
    // The phase's wall time runs from the first worker's start to the last one's end, each read by
    // the worker itself: a clock read by the main thread after the barrier (as before issue 24)
    // missed whatever the workers did while the main thread waited to be scheduled, and on a
    // busy machine a 2,500-operation phase was once timed at 1.7 µs.
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = sessions
            .into_iter()
            .enumerate()
            .map(|(t, mut session)| {
                let start = (t * chunk).min(ops.len());
                let piece = &ops[start..((t + 1) * chunk).min(ops.len())];
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let started = Instant::now();
                    let cpu0 = CpuTime::this_thread();
                    let mut r = if inflight > 1 && session.pipeline().is_some() {
                        run_piece_pipelined(
                            &mut *session,
                            arena,
                            piece,
                            start,
                            inflight,
                            &Pace::new(rate),
                            value_size,
                            seq_base,
                            progress,
                        )?
                    } else {
                        run_piece(
                            &mut *session,
                            arena,
                            piece,
                            start,
                            &Pace::new(rate),
                            value_size,
                            seq_base,
                            progress,
                        )?
                    };
                    if let (Some(a), Some(b)) = (cpu0, CpuTime::this_thread()) {
                        r.worker_cpu = b.since(&a).total();
                    }
                    Ok::<_, RunError>((r, started, Instant::now()))
                })
            })
            .collect();
        barrier.wait();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    let mut total = PhaseResult::new();
    let mut span: Option<(Instant, Instant)> = None;
    for r in results {
        match r {
            Ok(Ok((part, started, ended))) => {
                total.merge(&part);
                span = Some(span.map_or((started, ended), |(a, b)| (a.min(started), b.max(ended))));
            }
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("a benchmark thread panicked".into()),
        }
    }
    total.elapsed = span.map_or(Duration::ZERO, |(a, b)| b.duration_since(a));
    Ok(total)
}

#[allow(clippy::too_many_arguments)]
fn run_piece(
    session: &mut dyn Session,
    arena: &KeyArena,
    ops: &[Op],
    first_index: usize,
    pace: &Pace,
    value_size: usize,
    seq_base: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<PhaseResult, RunError> {
    const PROGRESS_EVERY: usize = 4096;
    let mut r = PhaseResult::new();
    let mut value = vec![0u8; value_size];
    let mut out = Vec::with_capacity(value_size.max(64));
    let clock = quanta::Clock::new();
    // How many operations ahead the next keys are prefetched: enough to hide a memory miss
    // behind the engine's work on the operations in between.
    const PREFETCH_AHEAD: usize = 8;
    for (i, op) in ops.iter().enumerate() {
        if let Some(ahead) = ops.get(i + PREFETCH_AHEAD) {
            arena.prefetch(ahead.key);
        }
        if let Some(wait) = pace.wait_for(i) {
            std::thread::sleep(wait);
        }
        let index = first_index + i;
        let fail = |error| RunError {
            op_index: index,
            error,
        };
        let key = arena.get(op.key);
        let t0 = clock.raw();
        match op.kind {
            OpKind::Read => {
                if session.get_into(key, &mut out).map_err(fail)? {
                    r.found += 1;
                    r.checksum = r.checksum.wrapping_add(record_hash(key, &out));
                } else {
                    r.missing += 1;
                }
            }
            OpKind::Insert | OpKind::Update => {
                fill_value(&mut value, seq_base + index as u64);
                session.put(key, &value).map_err(fail)?;
            }
            OpKind::ReadModifyWrite => {
                if session.get_into(key, &mut out).map_err(fail)? {
                    r.found += 1;
                    r.checksum = r.checksum.wrapping_add(record_hash(key, &out));
                } else {
                    r.missing += 1;
                }
                fill_value(&mut value, seq_base + index as u64);
                session.put(key, &value).map_err(fail)?;
            }
            OpKind::Delete => {
                if session.delete(key).map_err(fail)? {
                    r.found += 1;
                } else {
                    r.missing += 1;
                }
            }
            OpKind::Scan => {
                let mut sum = 0u64;
                let n = session
                    .scan(key, op.arg as usize, &mut |k, v| {
                        sum = sum.wrapping_add(record_hash(k, v));
                        true
                    })
                    .map_err(fail)?;
                r.checksum = r.checksum.wrapping_add(sum);
                r.scanned += n as u64;
            }
            OpKind::ScanTo => {
                let end = arena.get(op.arg);
                let (mut sum, mut n) = (0u64, 0u64);
                session
                    .scan(key, usize::MAX, &mut |k, v| {
                        if k >= end {
                            return false;
                        }
                        sum = sum.wrapping_add(record_hash(k, v));
                        n += 1;
                        true
                    })
                    .map_err(fail)?;
                r.checksum = r.checksum.wrapping_add(sum);
                r.scanned += n;
            }
            OpKind::Map => {
                let mut sum = 0u64;
                let n = session
                    .map_range(key, arena.get(op.arg), &mut |k, v| {
                        sum = sum.wrapping_add(record_hash(k, v));
                        true
                    })
                    .map_err(fail)?;
                r.checksum = r.checksum.wrapping_add(sum);
                r.scanned += n as u64;
            }
        }
        let nanos = clock.delta_as_nanos(t0, clock.raw());
        r.latency.saturating_record(nanos.max(1));
        if (i + 1) % PROGRESS_EVERY == 0 {
            progress(PROGRESS_EVERY as u64);
        }
    }
    progress((ops.len() % PROGRESS_EVERY) as u64);
    r.ops = ops.len() as u64;
    Ok(r)
}

/// [`run_piece`] with a window of up to `inflight` operations in flight ([`run_phase_with`]).
#[allow(clippy::too_many_arguments)]
fn run_piece_pipelined(
    session: &mut dyn Session,
    arena: &KeyArena,
    ops: &[Op],
    first_index: usize,
    inflight: usize,
    pace: &Pace,
    value_size: usize,
    seq_base: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<PhaseResult, RunError> {
    const PROGRESS_EVERY: u64 = 4096;
    let mut r = PhaseResult::new();
    let mut value = vec![0u8; value_size];
    let mut out = Vec::with_capacity(value_size.max(64));
    let clock = quanta::Clock::new();
    // The window: per slot (the tag), the operation's index in `ops`, and its submission time.
    let mut slots: Vec<Option<(usize, u64)>> = vec![None; inflight];
    let mut free: Vec<usize> = (0..inflight).rev().collect();
    let mut done = 0u64;
    let tick = |done: &mut u64| {
        *done += 1;
        if done.is_multiple_of(PROGRESS_EVERY) {
            progress(PROGRESS_EVERY);
        }
    };
    // Completes one operation of the window, whichever finishes first.
    let complete_one = |session: &mut dyn Session,
                        slots: &mut Vec<Option<(usize, u64)>>,
                        free: &mut Vec<usize>,
                        r: &mut PhaseResult,
                        out: &mut Vec<u8>|
     -> Result<(), RunError> {
        let pipe = session.pipeline().ok_or_else(|| no_pipeline(first_index))?;
        let (mut sum, mut scanned) = (0u64, 0u64);
        let (tag, result) = pipe.complete(out, &mut |k, v| {
            sum = sum.wrapping_add(record_hash(k, v));
            scanned += 1;
        });
        let Some((i, t0)) = slots.get_mut(tag as usize).and_then(Option::take) else {
            return Err(no_pipeline(first_index));
        };
        free.push(tag as usize);
        let found = result.map_err(|error| RunError {
            op_index: first_index + i,
            error,
        })?;
        let op = &ops[i];
        match op.kind {
            OpKind::Read => {
                if found {
                    r.found += 1;
                    r.checksum = r.checksum.wrapping_add(record_hash(arena.get(op.key), out));
                } else {
                    r.missing += 1;
                }
            }
            OpKind::Delete => {
                if found {
                    r.found += 1;
                } else {
                    r.missing += 1;
                }
            }
            OpKind::Scan | OpKind::Map => {
                r.checksum = r.checksum.wrapping_add(sum);
                r.scanned += scanned;
            }
            _ => {}
        }
        r.latency
            .saturating_record(clock.delta_as_nanos(t0, clock.raw()).max(1));
        Ok(())
    };
    for (i, op) in ops.iter().enumerate() {
        // Not due yet: complete what is in flight meanwhile, or sleep with nothing to do.
        while let Some(wait) = pace.wait_for(i) {
            if free.len() < inflight {
                complete_one(session, &mut slots, &mut free, &mut r, &mut out)?;
                tick(&mut done);
            } else {
                std::thread::sleep(wait);
            }
        }
        let index = first_index + i;
        let key = arena.get(op.key);
        let pipelined = matches!(
            op.kind,
            OpKind::Read
                | OpKind::Insert
                | OpKind::Update
                | OpKind::Delete
                | OpKind::Scan
                | OpKind::Map
        );
        if !pipelined {
            // Empty the window, then run this one on its own.
            while free.len() < inflight {
                complete_one(session, &mut slots, &mut free, &mut r, &mut out)?;
                tick(&mut done);
            }
            let single = run_piece(
                session,
                arena,
                std::slice::from_ref(op),
                index,
                &Pace::new(None),
                value_size,
                seq_base,
                &|_| {},
            )?;
            r.merge(&single);
            tick(&mut done);
            continue;
        }
        if free.is_empty() {
            complete_one(session, &mut slots, &mut free, &mut r, &mut out)?;
            tick(&mut done);
        }
        let Some(slot) = free.pop() else {
            return Err(no_pipeline(index));
        };
        let pipe = session.pipeline().ok_or_else(|| no_pipeline(index))?;
        let t0 = clock.raw();
        slots[slot] = Some((i, t0));
        match op.kind {
            OpKind::Read => pipe.submit(slot as u64, PipeOp::Get(key)),
            OpKind::Delete => pipe.submit(slot as u64, PipeOp::Delete(key)),
            OpKind::Scan => pipe.submit(slot as u64, PipeOp::Scan(key, op.arg as usize)),
            OpKind::Map => pipe.submit(slot as u64, PipeOp::Map(key, arena.get(op.arg))),
            _ => {
                fill_value(&mut value, seq_base + index as u64);
                pipe.submit(slot as u64, PipeOp::Put(key, &value));
            }
        }
    }
    while free.len() < inflight {
        complete_one(session, &mut slots, &mut free, &mut r, &mut out)?;
        tick(&mut done);
    }
    progress(done % PROGRESS_EVERY);
    r.ops = ops.len() as u64;
    Ok(r)
}

#[cold]
fn no_pipeline(index: usize) -> RunError {
    RunError {
        op_index: index,
        error: sylva::Error::InvalidArgument {
            what: "a session that lost its pipeline, or a completion under a tag not in flight"
                .into(),
            limit: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeySet;
    use crate::workload::{generate, GenerateParams, WorkloadSpec};

    #[test]
    fn record_hash_sees_every_byte_of_key_and_value() {
        // Lengths on every path of the hash: empty, 1–3, 4–7 and 8–16 bytes, 17–48, the 48-byte
        // loop up to 400 and the long path past it.
        let bytes: Vec<u8> = (0..500u32).map(|i| (i * 7 + 1) as u8).collect();
        let n = bytes.len();
        for (klen, vlen) in [
            (1, 0),
            (3, 2),
            (4, 8),
            (8, 8),
            (16, 17),
            (24, 56),
            (40, 100),
            (80, 80),
            (8, 500),
        ] {
            let (key, value) = (&bytes[..klen], &bytes[n - vlen..]);
            let h = record_hash(key, value);
            for flip in [0x01u8, 0x80] {
                for i in 0..klen {
                    let mut k = key.to_vec();
                    k[i] ^= flip;
                    assert_ne!(record_hash(&k, value), h, "key byte {i} of {klen}");
                }
                for i in 0..vlen {
                    let mut v = value.to_vec();
                    v[i] ^= flip;
                    assert_ne!(record_hash(key, &v), h, "value byte {i} of {vlen}");
                }
            }
        }
        // The boundary between key and value is part of the record: every split of one byte
        // string hashes differently.
        for total in [3, 16, 24, 64, 130] {
            let mut seen = std::collections::HashSet::new();
            for split in 0..=total {
                let (k, v) = bytes[..total].split_at(split);
                assert!(seen.insert(record_hash(k, v)), "split {split} of {total}");
            }
        }
        assert_ne!(record_hash(b"k", b""), record_hash(b"k", b"\0"));
    }

    #[test]
    fn record_hash_ties_each_value_to_its_key() {
        // An engine that hands back two keys' values exchanged must change the checksum (a sum of
        // per-record hashes), which a hash of the key added to a hash of the value would not.
        // 8-byte keys and values take the one-multiply path, the others rapidhash.
        let keys: [&[u8]; 3] = [&1u64.to_be_bytes(), &2u64.to_be_bytes(), b"user0000000042"];
        let values: [&[u8]; 4] = [&[7; 8], &[9; 8], &[9; 56], b"v"];
        for (k1, k2) in [(0, 1), (0, 2), (1, 2)] {
            for (v1, v2) in [(0, 1), (0, 2), (1, 2), (2, 3)] {
                let (k1, k2, v1, v2) = (keys[k1], keys[k2], values[v1], values[v2]);
                assert_ne!(
                    record_hash(k1, v1).wrapping_add(record_hash(k2, v2)),
                    record_hash(k1, v2).wrapping_add(record_hash(k2, v1)),
                );
            }
        }
    }

    fn checksum_of(workload: &str, threads: usize) -> (u64, u64) {
        let spec = WorkloadSpec::named(workload).expect("workload");
        let p = GenerateParams {
            dist: spec.default_dist,
            spec,
            records: 5000,
            ops: 20_000,
            seed: 1,
        };
        let w = generate(&p, &KeySet::Sparse.generator(1).expect("keys")).expect("generate");
        let mut t = Shared(Box::new(sylva::MemMap::new()));
        let load = run_phase(&mut t, &w.arena, &w.load, threads, 8, 0, &|_| {}).expect("load");
        assert_eq!(t.stats().records, 5000);
        assert_eq!(load.ops, 5000);
        let run = run_phase(&mut t, &w.arena, &w.run, threads, 8, 1 << 40, &|_| {}).expect("run");
        assert_eq!(run.ops, 20_000);
        assert_eq!(
            run.latency.len(),
            20_000,
            "every operation's latency is recorded"
        );
        (run.checksum, run.scanned)
    }

    /// An open-loop client issues no operation before its time: 2,000 operations offered at
    /// 20,000 a second over two threads take at least a tenth of a second (as fast as they
    /// complete, they take about a millisecond), and the results are the closed loop's.
    #[test]
    fn a_paced_client_waits_for_each_operations_time() {
        let spec = WorkloadSpec::named("c").expect("workload");
        let p = GenerateParams {
            dist: spec.default_dist,
            spec,
            records: 1000,
            ops: 2000,
            seed: 3,
        };
        let w = generate(&p, &KeySet::Sparse.generator(1).expect("keys")).expect("generate");
        let mut t = Shared(Box::new(sylva::MemMap::new()));
        run_phase(&mut t, &w.arena, &w.load, 1, 8, 0, &|_| {}).expect("load");
        let closed = run_phase(&mut t, &w.arena, &w.run, 2, 8, 1 << 40, &|_| {}).expect("run");
        let paced = Client {
            inflight: 1,
            rate: Some(10_000.0),
        };
        let open = run_phase_with(&mut t, &w.arena, &w.run, 2, paced, 8, 1 << 40, &|_| {})
            .expect("paced run");
        assert_eq!(open.ops, 2000);
        assert_eq!(open.checksum, closed.checksum);
        // The last operation of each thread is due 999 / 10,000 s after the thread started.
        assert!(
            open.elapsed >= Duration::from_millis(99),
            "2,000 operations at 20,000/s took {:?}",
            open.elapsed
        );
    }

    #[test]
    fn read_only_results_do_not_depend_on_thread_count() {
        assert_eq!(checksum_of("c", 1), checksum_of("c", 3));
        assert!(checksum_of("e", 1).1 > 0);
    }

    #[test]
    fn ordered_scans_and_range_maps_over_the_same_ranges_agree() {
        // Workload y's ranges replayed as ordered scans to the same end key must visit the same
        // records, so the two checksums match.
        let spec = WorkloadSpec::named("y").expect("workload");
        let p = GenerateParams {
            dist: spec.default_dist,
            spec,
            records: 3000,
            ops: 500,
            seed: 2,
        };
        let w = generate(&p, &KeySet::Urls.generator(1).expect("keys")).expect("generate");
        let mut t = Shared(Box::new(sylva::MemMap::new()));
        run_phase(&mut t, &w.arena, &w.load, 1, 8, 0, &|_| {}).expect("load");
        let maps = run_phase(&mut t, &w.arena, &w.run, 1, 8, 0, &|_| {}).expect("maps");
        let ordered: Vec<Op> = w
            .run
            .iter()
            .map(|o| Op {
                kind: OpKind::ScanTo,
                ..*o
            })
            .collect();
        let scans = run_phase(&mut t, &w.arena, &ordered, 1, 8, 0, &|_| {}).expect("scans");
        assert!(maps.scanned > 0);
        assert_eq!(
            (maps.checksum, maps.scanned),
            (scans.checksum, scans.scanned)
        );
    }

    #[test]
    fn shared_targets_hand_the_finishing_call_to_the_engine() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        /// `MemMap` counting its `sync` and `finish_deferred` calls.
        struct Counting {
            inner: sylva::MemMap,
            syncs: Arc<AtomicUsize>,
            finishes: Arc<AtomicUsize>,
        }
        impl KvStore for Counting {
            fn limits(&self) -> sylva::Limits {
                self.inner.limits()
            }
            fn get_into(&self, k: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
                self.inner.get_into(k, out)
            }
            fn put(&self, k: &[u8], v: &[u8]) -> sylva::Result<()> {
                self.inner.put(k, v)
            }
            fn delete(&self, k: &[u8]) -> sylva::Result<bool> {
                self.inner.delete(k)
            }
            fn scan(&self, s: &[u8], n: usize, v: &mut sylva::Visitor<'_>) -> sylva::Result<usize> {
                self.inner.scan(s, n, v)
            }
            fn map_range(
                &self,
                s: &[u8],
                e: &[u8],
                v: &mut sylva::Visitor<'_>,
            ) -> sylva::Result<usize> {
                self.inner.map_range(s, e, v)
            }
            fn sync(&self) -> sylva::Result<()> {
                self.syncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            fn finish_deferred(&self) -> sylva::Result<()> {
                self.finishes.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            fn stats(&self) -> Stats {
                self.inner.stats()
            }
        }
        let (syncs, finishes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let t = Shared(Box::new(Counting {
            inner: sylva::MemMap::new(),
            syncs: syncs.clone(),
            finishes: finishes.clone(),
        }));
        t.finish_deferred().expect("finish");
        // The engine's own call, not a plain sync.
        assert_eq!(
            (
                syncs.load(Ordering::Relaxed),
                finishes.load(Ordering::Relaxed)
            ),
            (0, 1)
        );
    }

    #[test]
    fn a_phase_lasts_at_least_as_long_as_its_operations() {
        // Whatever the main thread's scheduling, the wall time covers every operation a worker
        // timed (each read takes 1 ms here, so 30 of them take 30 ms on one thread).
        struct Slow(sylva::MemMap);
        impl Target for Slow {
            fn sessions(&mut self, n: usize) -> Result<Vec<Box<dyn Session + '_>>, String> {
                Ok((0..n)
                    .map(|_| Box::new(SlowSession(&self.0)) as _)
                    .collect())
            }
            fn sync(&self) -> sylva::Result<()> {
                Ok(())
            }
            fn stats(&self) -> Stats {
                self.0.stats()
            }
        }
        struct SlowSession<'a>(&'a sylva::MemMap);
        impl Session for SlowSession<'_> {
            fn get_into(&mut self, k: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
                std::thread::sleep(Duration::from_millis(1));
                self.0.get_into(k, out)
            }
            fn put(&mut self, k: &[u8], v: &[u8]) -> sylva::Result<()> {
                self.0.put(k, v)
            }
            fn delete(&mut self, k: &[u8]) -> sylva::Result<bool> {
                self.0.delete(k)
            }
            fn scan(
                &mut self,
                s: &[u8],
                n: usize,
                v: &mut sylva::Visitor<'_>,
            ) -> sylva::Result<usize> {
                self.0.scan(s, n, v)
            }
            fn map_range(
                &mut self,
                s: &[u8],
                e: &[u8],
                v: &mut sylva::Visitor<'_>,
            ) -> sylva::Result<usize> {
                self.0.map_range(s, e, v)
            }
        }
        let spec = WorkloadSpec::named("c").expect("workload");
        let p = GenerateParams {
            dist: spec.default_dist,
            spec,
            records: 100,
            ops: 30,
            seed: 3,
        };
        let w = generate(&p, &KeySet::Dense.generator(0).expect("keys")).expect("generate");
        let mut t = Slow(sylva::MemMap::new());
        run_phase(&mut t, &w.arena, &w.load, 1, 8, 0, &|_| {}).expect("load");
        let r = run_phase(&mut t, &w.arena, &w.run, 1, 8, 0, &|_| {}).expect("run");
        let timed: u64 = r
            .latency
            .iter_recorded()
            .map(|v| v.value_iterated_to() * v.count_at_value())
            .sum();
        assert!(r.elapsed >= Duration::from_millis(30), "{:?}", r.elapsed);
        assert!(
            r.elapsed.as_nanos() as u64 >= timed * 99 / 100,
            "{:?} for {timed} ns of timed operations",
            r.elapsed
        );
    }

    #[test]
    fn progress_reports_every_operation() {
        let spec = WorkloadSpec::named("c").expect("workload");
        let p = GenerateParams {
            dist: spec.default_dist,
            spec,
            records: 10_000,
            ops: 10_000,
            seed: 1,
        };
        let w = generate(&p, &KeySet::Dense.generator(0).expect("keys")).expect("generate");
        let mut t = Shared(Box::new(sylva::MemMap::new()));
        let seen = std::sync::atomic::AtomicU64::new(0);
        run_phase(&mut t, &w.arena, &w.load, 2, 8, 0, &|n| {
            seen.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        })
        .expect("load");
        assert_eq!(seen.into_inner(), 10_000);
    }
}
