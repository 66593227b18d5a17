//! What a worker did ([`super::worker::Worker::counters`]): counts, and the nanoseconds its
//! tasks, slots and reads spent in each state (`docs/benchmarking.md`, the `worker_*` counters).

/// What a worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerCounters {
    /// Tasks finished (done or failed).
    pub finished: u64,
    /// Attempts run.
    pub attempts: u64,
    /// Attempts that asked to be restarted, or found the write gate closed.
    pub restarts: u64,
    /// Attempts that stopped at a page not in memory, or held by another thread or by this
    /// worker's write-back of it.
    pub misses: u64,
    /// Misses on a page another thread held (loading it, writing it back, latched), and
    /// attempts that found the write gate closed: the task waited for the worker's next
    /// collection, or a bounded time, before its next attempt.
    pub held: u64,
    /// Page reads submitted (a page several tasks missed on is read once).
    pub reads: u64,
    /// Probes that collected completions without waiting.
    pub probes: u64,
    /// Waits with nothing ready (bounded by the yield interval or not).
    pub waits: u64,
    /// Sum over loop turns of the reads in flight, for their mean per turn (turns come in
    /// bursts after completions, so this is not the mean over time: see `read_ns`).
    pub outstanding_sum: u64,
    /// Nanoseconds page reads were in flight, summed over the reads (each from its submission
    /// to the collection of its completion): over an interval, divided by its length, the mean
    /// number of reads in flight (Little's law).
    pub read_ns: u64,
    /// Nanoseconds tasks waited ready (admitted, restarted or their page loaded) until their
    /// next attempt began, summed over the tasks: over an interval, divided by its length, the
    /// mean number of tasks queued behind the worker. (This and the next two take their times
    /// from the clock's reading at the last attempt's end, collection or admission, so each
    /// is exact to within an attempt.)
    pub ready_ns: u64,
    /// Nanoseconds task slots stood empty between a task's finish and the next admission into
    /// the slot, summed over the slots: the mean number of slots waiting for the caller to
    /// hand in the next operation.
    pub free_ns: u64,
    /// Nanoseconds the worker waited in the backend with nothing ready (the worker's idle
    /// time, from the system call's start to its return).
    pub wait_ns: u64,
    /// Loop turns.
    pub turns: u64,
    /// Enters into the kernel by the backend (submissions, probes and waits).
    pub enters: u64,
    /// Dirty pages evicted and written back through the backend.
    pub writebacks: u64,
    /// Of `writebacks`, those that a split's allocation handed out.
    pub alloc_writebacks: u64,
    /// Tasks' own writes (a task's `Step::Write`: the shared worker's log flushes).
    pub own_writes: u64,
}

impl WorkerCounters {
    /// Adds `other`'s counts to these (several workers' totals).
    pub fn add(&mut self, other: &WorkerCounters) {
        self.finished += other.finished;
        self.attempts += other.attempts;
        self.restarts += other.restarts;
        self.misses += other.misses;
        self.held += other.held;
        self.reads += other.reads;
        self.probes += other.probes;
        self.waits += other.waits;
        self.outstanding_sum += other.outstanding_sum;
        self.read_ns += other.read_ns;
        self.ready_ns += other.ready_ns;
        self.free_ns += other.free_ns;
        self.wait_ns += other.wait_ns;
        self.turns += other.turns;
        self.enters += other.enters;
        self.writebacks += other.writebacks;
        self.alloc_writebacks += other.alloc_writebacks;
        self.own_writes += other.own_writes;
    }
}
