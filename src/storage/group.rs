//! Group commit: concurrent writers of one process share one write transaction and one fsync.
//!
//! A caller of [`crate::Store::write_grouped`] queues its operation. If no other thread is committing,
//! it becomes the leader: it takes every queued operation, runs them one after another in a
//! single write transaction (so the result is the same as running them serially), commits once,
//! and hands each caller its own result. Callers that arrive while a leader is committing wait
//! and are taken by the next batch. An operation that fails is reported to its caller alone: the
//! leader rolls the batch back and runs it again without the failed operation, which is why
//! operations are `Fn` (re-runnable) and own their inputs.
//!
//! Durability is unchanged: a call returns only after the transaction holding its write has
//! committed durably.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};
use crate::storage::txn::WriteTxn;

pub(crate) type Op = Arc<dyn Fn(&mut WriteTxn<'_>) -> Result<Box<dyn Any + Send>> + Send + Sync>;

/// One queued operation.
pub(crate) struct Job {
    pub(crate) id: u64,
    pub(crate) principal: Option<String>,
    pub(crate) op: Op,
}

#[derive(Default)]
struct State {
    queue: Vec<Job>,
    leader: bool,
    next_id: u64,
    done: HashMap<u64, Result<Box<dyn Any + Send>>>,
    /// How many operations the last batch held: its writers are likely to queue again at once.
    last_batch: usize,
    /// Whether a new leader is waiting for them (see [`GATHER`]).
    gathering: bool,
}

/// How long a new leader waits, at most, for the writers of the last batch to queue their next
/// operation before it commits without them. When a commit ends, its leader returns first and
/// would otherwise start the next commit alone while the other writers are still waking up;
/// waiting a fraction of one commit (about 300-500 us with fsync) lets them share it. A writer
/// alone never waits: its last batch held only itself.
const GATHER: std::time::Duration = std::time::Duration::from_micros(100);

/// The commit queue shared by every handle on one open database.
#[derive(Default)]
pub(crate) struct Group {
    state: Mutex<State>,
    cv: Condvar,
    /// Wakes a gathering leader when an operation is queued.
    gather: Condvar,
}

fn lock(g: &Group) -> std::sync::MutexGuard<'_, State> {
    // A poisoned lock only means another thread panicked while holding it; the state itself is
    // a queue and a result map that stay consistent.
    g.state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The same error for another caller of a failed batch, keeping its kind.
pub(crate) fn copy_error(e: &Error) -> Error {
    match e {
        Error::Busy { waited } => Error::Busy { waited: *waited },
        Error::Io(io) => Error::Io(std::io::Error::new(io.kind(), io.to_string())),
        Error::Corrupt { table, key, reason } => Error::Corrupt {
            table,
            key: key.clone(),
            reason: reason.clone(),
        },
        Error::Conflict(m) => Error::Conflict(m.clone()),
        Error::Unsupported(m) => Error::Unsupported(m.clone()),
        Error::Denied(m) => Error::Denied(m.clone()),
        other => Error::Storage(other.to_string()),
    }
}

impl Group {
    /// Queues `op` (acting as `principal`) and returns its result once the batch that holds it
    /// has committed. A caller that finds no leader becomes one: it gathers the queue and runs
    /// it through `commit`, which runs a batch in one transaction and returns each job's result.
    pub(crate) fn submit(
        &self,
        principal: Option<String>,
        op: Op,
        commit: impl Fn(Vec<Job>) -> Vec<(u64, Result<Box<dyn Any + Send>>)>,
    ) -> Result<Box<dyn Any + Send>> {
        let mut st = lock(self);
        let id = st.next_id;
        st.next_id += 1;
        st.queue.push(Job { id, principal, op });
        if st.gathering {
            self.gather.notify_one();
        }
        loop {
            if let Some(r) = st.done.remove(&id) {
                return r;
            }
            if !st.leader {
                st.leader = true;
                st = self.gather_batch(st);
                let batch = std::mem::take(&mut st.queue);
                st.last_batch = batch.len();
                drop(st);
                let results = commit(batch);
                st = lock(self);
                st.done.extend(results);
                st.leader = false;
                self.cv.notify_all();
                continue;
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A new leader waits up to [`GATHER`] for the writers of the last batch to queue again.
    fn gather_batch<'a>(
        &'a self,
        mut st: std::sync::MutexGuard<'a, State>,
    ) -> std::sync::MutexGuard<'a, State> {
        let want = st.last_batch;
        if st.queue.len() < want {
            st.gathering = true;
            let deadline = std::time::Instant::now() + GATHER;
            while st.queue.len() < want {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                st = self
                    .gather
                    .wait_timeout(st, left)
                    .map(|(s, _)| s)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            st.gathering = false;
        }
        st
    }
}
