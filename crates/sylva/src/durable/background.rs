//! The background threads of a durable store: the checkpoint thread, and the [`Trigger`] that
//! wakes it and `SyncMode::Batch`'s log sync thread (the boundary sync thread of
//! [`super::SyncCadence`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Core, Engine};

/// Wakes a background thread (the checkpoint thread, the log sync thread) when there is work
/// for it, and stops it.
#[derive(Default)]
pub(crate) struct Trigger {
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
    pub(crate) fn request(&self) -> bool {
        let mut st = self.state.lock();
        if st.requested || st.running {
            return false;
        }
        st.requested = true;
        self.cv.notify_one();
        true
    }

    /// Stops the thread after the run it may be in.
    pub(crate) fn stop(&self) {
        self.state.lock().shutdown = true;
        self.cv.notify_one();
    }

    /// For the thread: waits for a request and marks it running; `false` once stopped.
    pub(crate) fn wait(&self) -> bool {
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
    pub(crate) fn done(&self) {
        self.state.lock().running = false;
    }
}

/// The checkpoint thread: checkpoints when a writer asks (the log passed `checkpoint_bytes`),
/// so no writer spends its own time writing the dirty pages. A failure poisons the database.
pub(super) fn checkpoint_loop<E: Engine>(core: Arc<Core<E>>, checkpointer: Arc<Trigger>) {
    if core.engine.checkpoint_at_low_priority() {
        lower_thread_priority();
    }
    while checkpointer.wait() {
        if core.poison.check().is_ok() && core.checkpoint_now().is_err() {
            core.poison.set();
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
