//! The worker's scheduling (`pa-tree.txt`, IV): which ready operation runs next, when to probe
//! for completed I/Os, and when to stop spinning and wait.
//!
//! Time is passed in as nanoseconds from any fixed origin (the worker's clock), so the policies
//! run the same on a fake clock in tests.
//!
//! - **Priority** (IV.B): a 64-bit key, smaller first. The top bit is clear for an operation
//!   holding a latch or a pinned frame, so it finishes and lets go before others start; the
//!   rest is the admission sequence, so older operations go first. [`PriorityPolicy::Fifo`]
//!   ignores holding (admission order only), the paper's baseline.
//! - **Probing** (IV.A): [`ProbePolicy`]: every loop (Algorithm 1), at a fixed interval, when
//!   the oldest outstanding I/O has been out for the mean latency of the last second, or by the
//!   paper's model: the outstanding reads and writes of the last [`WINDOW_NS`], counted in
//!   [`SLICES`] slices by when they were submitted, form `T = w‖r`, and `(w0, r0) = Tβ`
//!   estimates how many have completed; probe when either is at least 1.
//! - **Yielding** (IV.C) is the worker's (`super::worker`): with no ready operation it waits in
//!   the kernel, bounded by `t`, instead of spinning; a completion or a new operation ends the
//!   wait. The paper asks its model whether anything completes within `t` and spins if so; a
//!   wait on the ring is woken by the completion, so no estimate is needed to yield.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};

/// The span of recent submissions the model looks at (the paper's t = 1000 µs).
pub const WINDOW_NS: u64 = 1_000_000;
/// Slices the window is cut into (the paper's n = 20).
pub const SLICES: usize = 20;
/// One slice (50 µs).
pub const SLICE_NS: u64 = WINDOW_NS / SLICES as u64;
/// The model's input length: `w‖r`.
pub const FEATURES: usize = 2 * SLICES;

/// The top bit of a priority key: set for an operation holding nothing.
const HOLDS_NOTHING: u64 = 1 << 63;

/// How ready operations are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PriorityPolicy {
    /// Holders of latches or pinned frames first, then by admission (the paper's).
    #[default]
    Holders,
    /// By admission only.
    Fifo,
}

impl PriorityPolicy {
    /// Parses `holders` or `fifo`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "holders" => Ok(PriorityPolicy::Holders),
            "fifo" => Ok(PriorityPolicy::Fifo),
            _ => Err(Error::InvalidArgument {
                what: format!("priority {s:?} (valid: holders, fifo)"),
                limit: 0,
            }),
        }
    }

    /// The key of an operation admitted `seq`-th (sequences below 2^63) that `holds` a latch or
    /// a pinned frame, or not.
    pub fn key(self, holds: bool, seq: u64) -> u64 {
        let seq = seq & !HOLDS_NOTHING;
        match self {
            PriorityPolicy::Holders if holds => seq,
            PriorityPolicy::Holders => seq | HOLDS_NOTHING,
            PriorityPolicy::Fifo => seq,
        }
    }
}

/// Ready operations by priority key (smallest first), each named by the caller's slot number.
#[derive(Debug, Default)]
pub struct ReadyQueue {
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl ReadyQueue {
    /// Adds `slot` with priority `key`.
    pub fn push(&mut self, key: u64, slot: u32) {
        self.heap.push(Reverse((key, slot)));
    }

    /// The slot of smallest key.
    pub fn pop(&mut self) -> Option<u32> {
        self.heap.pop().map(|Reverse((_, slot))| slot)
    }

    /// How many are ready.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// A read or a write, as the model counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// A page read.
    Read,
    /// A page or log write (a sync counts as one).
    Write,
}

/// Outstanding I/Os counted by the slice they were submitted in.
#[derive(Debug, Clone, Default)]
struct Outstanding {
    /// Per absolute slice number (`submitted_ns / SLICE_NS`) in the window, `[writes, reads]`;
    /// index `s % SLICES`.
    counts: [[u32; 2]; SLICES],
    /// The absolute slice number of the newest slice `counts` holds.
    newest: u64,
    /// Outstanding I/Os submitted before the window, `[writes, reads]`.
    older: [u32; 2],
    total: u32,
}

fn kind_index(kind: IoKind) -> usize {
    match kind {
        IoKind::Write => 0,
        IoKind::Read => 1,
    }
}

impl Outstanding {
    /// Moves the window so its newest slice is `slice`, folding what leaves it into `older`.
    fn advance(&mut self, slice: u64) {
        if slice <= self.newest {
            return;
        }
        let steps = (slice - self.newest).min(SLICES as u64);
        for s in 1..=steps {
            // The slice that `newest + s` replaces left the window.
            let i = ((self.newest + s) % SLICES as u64) as usize;
            for k in 0..2 {
                self.older[k] += self.counts[i][k];
                self.counts[i][k] = 0;
            }
        }
        self.newest = slice;
    }

    fn submitted(&mut self, now: u64, kind: IoKind) {
        self.advance(now / SLICE_NS);
        self.counts[(self.newest % SLICES as u64) as usize][kind_index(kind)] += 1;
        self.total += 1;
    }

    fn completed(&mut self, submitted: u64, kind: IoKind) {
        let k = kind_index(kind);
        let slice = submitted / SLICE_NS;
        let in_window = slice + (SLICES as u64) > self.newest && slice <= self.newest;
        let i = (slice % SLICES as u64) as usize;
        let cell = if in_window && self.counts[i][k] > 0 {
            &mut self.counts[i][k]
        } else {
            &mut self.older[k]
        };
        *cell = cell.saturating_sub(1);
        self.total = self.total.saturating_sub(1);
    }

    /// `T = w‖r` as it will be at `at` (at or after the newest slice): `w[0]` the writes of the
    /// newest slice, `w[SLICES - 1]` the oldest (with those older than the window).
    fn features(&self, at: u64) -> [f64; FEATURES] {
        let shift = (at / SLICE_NS).saturating_sub(self.newest);
        let mut t = [0.0; FEATURES];
        for age in 0..SLICES as u64 {
            // The slice `age` slices before the newest now is `age + shift` before at `at`.
            let pos = age + shift;
            if pos >= SLICES as u64 {
                continue;
            }
            let i = ((self.newest + SLICES as u64 - age) % SLICES as u64) as usize;
            t[pos as usize] += f64::from(self.counts[i][0]);
            t[SLICES + pos as usize] += f64::from(self.counts[i][1]);
        }
        // What left the window (now or by `at`) counts in the oldest slice.
        let in_window: [u32; 2] = [0, 1].map(|k| t_sum(&t, k));
        for k in 0..2 {
            let all = self.total_of(k);
            t[k * SLICES + SLICES - 1] += f64::from(all.saturating_sub(in_window[k]));
        }
        t
    }

    fn total_of(&self, k: usize) -> u32 {
        self.older[k] + self.counts.iter().map(|c| c[k]).sum::<u32>()
    }

    /// The end of the oldest slice holding an outstanding I/O: none has been out longer than
    /// `now` minus it (`None`: none outstanding).
    fn oldest_submitted(&self) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        if self.older != [0, 0] {
            return Some((self.newest + 1).saturating_sub(SLICES as u64) * SLICE_NS);
        }
        (0..SLICES as u64).rev().find_map(|age| {
            let i = ((self.newest + SLICES as u64 - age) % SLICES as u64) as usize;
            (self.counts[i] != [0, 0]).then(|| (self.newest - age.min(self.newest)) * SLICE_NS)
        })
    }
}

/// The counts of kind `k` in a feature vector (rounded: they are whole numbers).
fn t_sum(t: &[f64; FEATURES], k: usize) -> u32 {
    t[k * SLICES..(k + 1) * SLICES].iter().sum::<f64>() as u32
}

/// The paper's linear model: `(w0, r0) = Tβ`, β a `FEATURES × 2` matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyModel {
    /// Row `j`: the weights of feature `j` for `[w0, r0]`.
    pub beta: Vec<[f64; 2]>,
}

impl LatencyModel {
    /// `(w0, r0)` for the features `t`.
    pub fn estimate(&self, t: &[f64; FEATURES]) -> (f64, f64) {
        t.iter()
            .zip(&self.beta)
            .fold((0.0, 0.0), |(w, r), (x, b)| (w + x * b[0], r + x * b[1]))
    }

    /// The text form: a comment line, then one line per feature (`w1..w20`, then `r1..r20`,
    /// newest slice first) with its two weights, for `w0` and `r0`.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "# sylva PA-Tree probe model: (w0, r0) = T beta; {SLICES} slices of {} us\n",
            SLICE_NS / 1000
        );
        for (j, b) in self.beta.iter().enumerate() {
            let name = if j < SLICES { 'w' } else { 'r' };
            s.push_str(&format!("{name}{} {} {}\n", j % SLICES + 1, b[0], b[1]));
        }
        s
    }

    /// Parses [`LatencyModel::to_text`]'s form (`path` names the file in errors): blank lines
    /// and `#` comments skipped, then exactly `FEATURES` lines `NAME W R`.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let bad = |line: usize, what: &str| Error::InvalidArgument {
            what: format!("{}, line {line}: {what}", path.display()),
            limit: 0,
        };
        let mut beta = Vec::with_capacity(FEATURES);
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, w, r] = fields[..] else {
                return Err(bad(line_no, "expected three fields: NAME W R"));
            };
            let j = beta.len();
            if j >= FEATURES {
                return Err(bad(line_no, &format!("more than {FEATURES} weight lines")));
            }
            let want = format!("{}{}", if j < SLICES { 'w' } else { 'r' }, j % SLICES + 1);
            if name != want {
                return Err(bad(line_no, &format!("expected {want}, found {name:?}")));
            }
            let num = |s: &str| {
                s.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(line_no, &format!("{s:?} is not a finite number")))
            };
            beta.push([num(w)?, num(r)?]);
        }
        if beta.len() != FEATURES {
            return Err(bad(
                text.lines().count(),
                &format!("{} weight lines, expected {FEATURES}", beta.len()),
            ));
        }
        Ok(LatencyModel { beta })
    }
}

/// When the worker probes for completions.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbePolicy {
    /// Every loop (the paper's Algorithm 1).
    Every,
    /// At most once per interval.
    Fixed(Duration),
    /// When the oldest outstanding I/O has been out for the mean latency of the last second.
    Avg,
    /// When the model estimates a completion (the paper's Algorithm 2).
    Model(LatencyModel),
}

/// The probe policy's state: outstanding I/Os by submission slice, recent latencies, the last
/// probe.
#[derive(Debug, Clone)]
pub struct Prober {
    policy: ProbePolicy,
    outstanding: Outstanding,
    last_probe: u64,
    /// Latency sums and counts of the current and the previous second.
    latency: [(u64, u64); 2],
    /// The second `latency[0]` is for.
    second: u64,
}

impl Prober {
    /// A prober with `policy`, nothing outstanding.
    pub fn new(policy: ProbePolicy) -> Self {
        Prober {
            policy,
            outstanding: Outstanding::default(),
            last_probe: 0,
            latency: [(0, 0); 2],
            second: 0,
        }
    }

    /// An I/O of `kind` was submitted at `now`.
    pub fn submitted(&mut self, now: u64, kind: IoKind) {
        self.outstanding.submitted(now, kind);
    }

    /// An I/O of `kind` submitted at `submitted` was seen complete at `now`.
    pub fn completed(&mut self, submitted: u64, now: u64, kind: IoKind) {
        self.outstanding.advance(now / SLICE_NS);
        self.outstanding.completed(submitted, kind);
        let second = now / 1_000_000_000;
        if second != self.second {
            self.latency = if second == self.second + 1 {
                [(0, 0), self.latency[0]]
            } else {
                [(0, 0); 2]
            };
            self.second = second;
        }
        self.latency[0].0 += now.saturating_sub(submitted);
        self.latency[0].1 += 1;
    }

    /// The worker probed at `now`.
    pub fn probed(&mut self, now: u64) {
        self.last_probe = now;
    }

    /// I/Os outstanding.
    pub fn outstanding(&self) -> u32 {
        self.outstanding.total
    }

    /// The mean latency of the completions seen in this second and the last (ns), if any.
    pub fn mean_latency(&self) -> Option<u64> {
        let (sum, n) = (
            self.latency[0].0 + self.latency[1].0,
            self.latency[0].1 + self.latency[1].1,
        );
        (n > 0).then(|| sum / n)
    }

    /// The model's `(w0, r0)` at `at` (a model policy only).
    fn estimate_at(&self, model: &LatencyModel, at: u64) -> (f64, f64) {
        model.estimate(&self.outstanding.features(at))
    }

    /// Whether to probe now.
    pub fn should_probe(&self, now: u64) -> bool {
        if self.outstanding.total == 0 {
            return false;
        }
        match &self.policy {
            ProbePolicy::Every => true,
            ProbePolicy::Fixed(d) => now.saturating_sub(self.last_probe) >= d.as_nanos() as u64,
            ProbePolicy::Avg => match (self.mean_latency(), self.outstanding.oldest_submitted()) {
                (Some(mean), Some(oldest)) => now.saturating_sub(oldest) >= mean,
                // No latency seen yet: probe.
                _ => true,
            },
            ProbePolicy::Model(m) => {
                let (w0, r0) = self.estimate_at(m, now);
                w0 >= 1.0 || r0 >= 1.0
            }
        }
    }

    /// `T = w‖r` now, for calibration samples.
    pub fn features(&mut self, now: u64) -> [f64; FEATURES] {
        self.outstanding.advance(now / SLICE_NS);
        self.outstanding.features(now)
    }
}
