//! The database's background threads: the checkpoint thread and `SyncMode::Batch`'s log sync
//! thread, each woken by a [`Trigger`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::Core;

/// Wakes a background thread (the checkpoint thread, the log sync thread) when there is work
/// for it, and stops it.
#[derive(Default)]
pub(super) struct Trigger {
    state: Mutex<TriggerState>,
    cv: parking_lot::Condvar,
}

#[derive(Default)]
struct TriggerState {
    requested: bool,
    running: bool,
    shutdown: bool,
}

impl Trigger {
    /// Asks the thread for a run; `false` if one is already asked for or running.
    pub(super) fn request(&self) -> bool {
        let mut st = self.state.lock();
        if st.requested || st.running {
            return false;
        }
        st.requested = true;
        self.cv.notify_one();
        true
    }

    /// Stops the thread after the run it may be in.
    pub(super) fn stop(&self) {
        self.state.lock().shutdown = true;
        self.cv.notify_one();
    }

    /// For the thread: waits for a request and marks it running; `false` once stopped.
    pub(super) fn wait(&self) -> bool {
        let mut st = self.state.lock();
        while !st.requested && !st.shutdown {
            self.cv.wait(&mut st);
        }
        if st.shutdown {
            return false;
        }
        st.requested = false;
        st.running = true;
        true
    }

    /// For the thread: the run it was asked for has ended.
    pub(super) fn done(&self) {
        self.state.lock().running = false;
    }
}

/// `SyncMode::Batch`'s log sync thread: a writer that reaches a batch boundary hands the fsync
/// to this thread ([`Trigger::request`]) and goes on, instead of waiting for it. The batch is
/// durable once that fsync completes, a few milliseconds after the boundary, as when the writer
/// synced itself; what changes is who waits. A writer that reaches the next boundary while that
/// sync is still running syncs itself (sharing the running fsync, group commit), so at most the
/// batch being synced and the current one are ever not durable, and a slow disk holds writers
/// back instead of letting unsynced writes pile up. A failure poisons the database (the log
/// poisons itself too, so the next write fails).
pub(super) fn log_sync_loop(core: Arc<Core>, syncer: Arc<Trigger>) {
    while syncer.wait() {
        if core.tree.store.wal.sync().is_err() {
            core.poisoned.store(true, Ordering::Release);
        }
        syncer.done();
    }
}

/// The checkpoint thread: checkpoints when a writer asks (the log passed `checkpoint_bytes`),
/// so no writer spends its own time writing the dirty pages. A failure poisons the database.
pub(super) fn checkpoint_loop(core: Arc<Core>, checkpointer: Arc<Trigger>) {
    lower_thread_priority();
    while checkpointer.wait() {
        if !core.poisoned.load(Ordering::Acquire) && core.checkpoint_now().is_err() {
            core.poisoned.store(true, Ordering::Release);
        }
        // Done first: a writer that then sees `checkpointing` false must find the trigger idle,
        // or its request would be refused and lost.
        checkpointer.done();
        core.checkpointing.store(false, Ordering::Release);
    }
}

/// Gives the calling thread nice 10 unless it already runs nicer (Linux applies nice per
/// thread). A hint: failure changes nothing but the scheduling.
fn lower_thread_priority() {
    // SAFETY: plain syscalls on the calling thread's own id; no memory is involved.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        if libc::getpriority(libc::PRIO_PROCESS, tid) < 10 {
            libc::setpriority(libc::PRIO_PROCESS, tid, 10);
        }
    }
}
