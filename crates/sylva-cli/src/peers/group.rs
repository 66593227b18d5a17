//! Group commit for the peers whose every write needs a write transaction (redb and LMDB).
//!
//! Both allow one write transaction at a time, and a transaction per write is their honest cost
//! for a single writer thread. With several writer threads, committing each write alone would
//! serialise them on the transaction lock and make every one pay a full commit, where a real
//! application (and sylva's own write-ahead log) would batch. So writers queue, and whichever
//! finds no commit in progress becomes the *leader*: it takes its own write and every queued one,
//! applies them in queue order in one transaction, commits, hands each writer its answer and
//! wakes them. A write returns only after the commit that holds it, so it is visible to every
//! later read from any thread, which is what `KvStore` promises.
//!
//! The leader borrows its own key and value; queued writers copy theirs, since they cannot lend a
//! borrow to another thread without `unsafe`. One writer thread therefore never copies.
//!
//! If the transaction fails, every write in it fails with the same error and none is applied; a
//! panic inside the peer during a commit is caught and fails the group the same way.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use sylva::Error;

/// One write, borrowed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WriteOp<'a> {
    /// Insert or overwrite.
    Put(&'a [u8], &'a [u8]),
    /// Remove; its answer says whether the key was present.
    Delete(&'a [u8]),
}

enum OwnedOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl OwnedOp {
    fn of(op: WriteOp<'_>) -> Self {
        match op {
            WriteOp::Put(k, v) => OwnedOp::Put(k.to_vec(), v.to_vec()),
            WriteOp::Delete(k) => OwnedOp::Delete(k.to_vec()),
        }
    }

    fn as_op(&self) -> WriteOp<'_> {
        match self {
            OwnedOp::Put(k, v) => WriteOp::Put(k, v),
            OwnedOp::Delete(k) => WriteOp::Delete(k),
        }
    }
}

#[derive(Default)]
struct State {
    /// A leader is applying a group now.
    leading: bool,
    /// Writes waiting for the next group, with their tickets.
    queue: Vec<(u64, OwnedOp)>,
    /// Answers for queued writes whose group has committed, by ticket.
    answers: HashMap<u64, sylva::Result<bool>>,
    next_ticket: u64,
}

/// Combines concurrent writes into shared transactions.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    committed: Condvar,
    /// Groups applied (transactions the commit closure ran).
    groups: AtomicU64,
    /// Writes applied in them.
    writes: AtomicU64,
}

impl GroupCommit {
    /// `(groups, writes)` applied so far: writes per group is how much concurrent writers shared.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.groups.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A leader that panicked (a bug inside a peer) leaves `leading` set; carrying on with the
        // inner state would hang every writer, so poisoning stays visible as a panic here.
        #[allow(clippy::unwrap_used)]
        self.state.lock().unwrap()
    }

    /// Applies `op` in a group. `commit` applies a group's writes in order in one transaction and
    /// returns one answer per write (a delete's presence; `false` for a put), or the error that
    /// made the whole transaction fail.
    pub(crate) fn write(
        &self,
        op: WriteOp<'_>,
        commit: impl Fn(&[WriteOp<'_>]) -> sylva::Result<Vec<bool>>,
    ) -> sylva::Result<bool> {
        let mut state = self.lock();
        if state.leading {
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.queue.push((ticket, OwnedOp::of(op)));
            loop {
                if let Some(answer) = state.answers.remove(&ticket) {
                    return answer;
                }
                if !state.leading {
                    // The last leader finished without our write: lead the queue, ours included.
                    state = self.lead(state, None, &commit).1;
                    continue;
                }
                #[allow(clippy::unwrap_used)] // see `lock`
                {
                    state = self.committed.wait(state).unwrap();
                }
            }
        }
        let (own, _state) = self.lead(state, Some(op), &commit);
        own.unwrap_or_else(|| Err(io::Error::other("group commit lost its own answer").into()))
    }

    /// Leads one group: `own` (the leader's borrowed write, if it is not queued) and the queue.
    /// Returns the answer for `own` and the lock, re-taken.
    fn lead<'s>(
        &'s self,
        mut state: MutexGuard<'s, State>,
        own: Option<WriteOp<'_>>,
        commit: &impl Fn(&[WriteOp<'_>]) -> sylva::Result<Vec<bool>>,
    ) -> (Option<sylva::Result<bool>>, MutexGuard<'s, State>) {
        state.leading = true;
        let queued = std::mem::take(&mut state.queue);
        drop(state);

        let ops: Vec<WriteOp<'_>> = own
            .into_iter()
            .chain(queued.iter().map(|(_, op)| op.as_op()))
            .collect();
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(ops.len() as u64, Ordering::Relaxed);
        // A panic inside the peer must not leave `leading` set, or every queued writer would wait
        // forever: it fails this group like any other error.
        let committed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commit(&ops)))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(io::Error::other(format!("the peer panicked during a commit: {what}")).into())
            });
        let result = committed.and_then(|answers| {
            if answers.len() == ops.len() {
                Ok(answers)
            } else {
                Err(Error::from(io::Error::other(format!(
                    "group commit got {} answers for {} writes",
                    answers.len(),
                    ops.len()
                ))))
            }
        });

        let mut state = self.lock();
        let own_answer = match result {
            Ok(answers) => {
                let mut answers = answers.into_iter();
                let own_answer = own.and_then(|_| answers.next()).map(Ok);
                for ((ticket, _), answer) in queued.iter().zip(answers) {
                    state.answers.insert(*ticket, Ok(answer));
                }
                own_answer
            }
            Err(e) => {
                for (ticket, _) in &queued {
                    state.answers.insert(*ticket, Err(duplicate(&e)));
                }
                own.map(|_| Err(e))
            }
        };
        state.leading = false;
        self.committed.notify_all();
        (own_answer, state)
    }
}

/// A copy of `e` for every writer of a failed group (`sylva::Error` is not `Clone`: it holds an
/// `io::Error`).
fn duplicate(e: &Error) -> Error {
    match e {
        Error::InvalidArgument { what, limit } => Error::InvalidArgument {
            what: what.clone(),
            limit: *limit,
        },
        Error::Io { path, source } => Error::Io {
            path: path.clone(),
            source: io::Error::new(source.kind(), source.to_string()),
        },
        other => Error::from(io::Error::other(other.to_string())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn concurrent_writers_share_groups_and_get_their_own_answers() {
        let group = GroupCommit::default();
        let map = Mutex::new(BTreeMap::<Vec<u8>, Vec<u8>>::new());
        let commits = AtomicUsize::new(0);
        let commit = |ops: &[WriteOp<'_>]| -> sylva::Result<Vec<bool>> {
            commits.fetch_add(1, Ordering::Relaxed);
            let mut map = map.lock().unwrap();
            Ok(ops
                .iter()
                .map(|op| match *op {
                    WriteOp::Put(k, v) => {
                        map.insert(k.to_vec(), v.to_vec());
                        false
                    }
                    WriteOp::Delete(k) => map.remove(k).is_some(),
                })
                .collect())
        };
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let (group, commit) = (&group, &commit);
                s.spawn(move || {
                    for i in 0..2000u32 {
                        let k = [&[t][..], &i.to_be_bytes()].concat();
                        assert!(!group.write(WriteOp::Put(&k, b"v"), commit).unwrap());
                        assert!(group.write(WriteOp::Delete(&k), commit).unwrap());
                        assert!(!group.write(WriteOp::Delete(&k), commit).unwrap());
                        group.write(WriteOp::Put(&k, b"w"), commit).unwrap();
                    }
                });
            }
        });
        let map = map.into_inner().unwrap();
        assert_eq!(map.len(), 8000);
        assert!(map.values().all(|v| v == b"w"));
        assert!(commits.load(Ordering::Relaxed) <= 32_000);
        assert_eq!(
            group.counts(),
            (commits.load(Ordering::Relaxed) as u64, 32_000),
            "every group and write counted"
        );
    }

    #[test]
    fn a_failed_group_fails_every_writer() {
        let group = GroupCommit::default();
        let err = group
            .write(WriteOp::Delete(b"k"), |_| {
                Err(Error::io_at("/db", io::Error::other("disk full")))
            })
            .unwrap_err();
        assert!(err.to_string().contains("disk full"));
    }
}
