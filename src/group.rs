//! Group commit: concurrent writers of one process share one write transaction and one fsync.
//!
//! A caller of [`Store::write_grouped`] queues its operation. If no other thread is committing,
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

use crate::db::{Store, WriteTxn};
use crate::error::{Error, Result};

type Op = Arc<dyn Fn(&mut WriteTxn<'_>) -> Result<Box<dyn Any + Send>> + Send + Sync>;

struct Job {
    id: u64,
    principal: Option<String>,
    op: Op,
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
fn copy_error(e: &Error) -> Error {
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

impl Store {
    /// Runs `op` in a write transaction shared with other threads writing at the same moment
    /// (group commit). The result is as if each operation ran in its own transaction, one after
    /// the other; each returns once its write is durable. `op` may run more than once (when
    /// another operation of its batch fails), so it must own its inputs and have no side effects
    /// outside the transaction.
    pub fn write_grouped<R: Send + 'static>(
        &self,
        op: impl Fn(&mut WriteTxn<'_>) -> Result<R> + Send + Sync + 'static,
    ) -> Result<R> {
        let g = Arc::clone(self.group());
        let op: Op = Arc::new(move |tx| op(tx).map(|r| Box::new(r) as Box<dyn Any + Send>));
        let mut st = lock(&g);
        let id = st.next_id;
        st.next_id += 1;
        st.queue.push(Job {
            id,
            principal: self.options().principal.clone(),
            op,
        });
        if st.gathering {
            g.gather.notify_one();
        }
        loop {
            if let Some(r) = st.done.remove(&id) {
                drop(st);
                return r.and_then(|b| {
                    b.downcast::<R>()
                        .map(|b| *b)
                        .map_err(|_| Error::Storage("group commit returned the wrong type".into()))
                });
            }
            if !st.leader {
                st.leader = true;
                let want = st.last_batch;
                if st.queue.len() < want {
                    st.gathering = true;
                    let deadline = std::time::Instant::now() + GATHER;
                    while st.queue.len() < want {
                        let left = deadline.saturating_duration_since(std::time::Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        st = g
                            .gather
                            .wait_timeout(st, left)
                            .map(|(s, _)| s)
                            .unwrap_or_else(|p| p.into_inner().0);
                    }
                    st.gathering = false;
                }
                let batch = std::mem::take(&mut st.queue);
                st.last_batch = batch.len();
                drop(st);
                let results = self.commit_batch(batch);
                st = lock(&g);
                st.done.extend(results);
                st.leader = false;
                g.cv.notify_all();
                continue;
            }
            st = g.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Runs a batch in one transaction; on an operation's failure, rolls back and retries
    /// without it.
    fn commit_batch(&self, mut batch: Vec<Job>) -> Vec<(u64, Result<Box<dyn Any + Send>>)> {
        let mut out = Vec::with_capacity(batch.len());
        while !batch.is_empty() {
            let mut failed: Option<(usize, Error)> = None;
            let mut oks: Vec<Box<dyn Any + Send>> = Vec::with_capacity(batch.len());
            let r = self.write(|tx| {
                for (i, job) in batch.iter().enumerate() {
                    tx.principal = job.principal.clone();
                    match (job.op)(tx) {
                        Ok(v) => oks.push(v),
                        Err(e) => {
                            failed = Some((i, e));
                            return Err(Error::Conflict("batch rolled back".into()));
                        }
                    }
                }
                Ok(())
            });
            match (r, failed) {
                (Ok(()), _) => {
                    out.extend(batch.drain(..).map(|j| j.id).zip(oks.into_iter().map(Ok)));
                }
                (Err(_), Some((i, e))) => {
                    // Report the failing operation, then run the rest again without it.
                    if i < batch.len() {
                        let job = batch.remove(i);
                        out.push((job.id, Err(e)));
                    }
                }
                (Err(e), None) => {
                    // The transaction itself failed (busy, I/O): every operation gets the error,
                    // the last one the original.
                    let mut jobs: Vec<u64> = batch.drain(..).map(|j| j.id).collect();
                    let last = jobs.pop();
                    out.extend(jobs.into_iter().map(|id| (id, Err(copy_error(&e)))));
                    if let Some(id) = last {
                        out.push((id, Err(e)));
                    }
                }
            }
        }
        out
    }
}
