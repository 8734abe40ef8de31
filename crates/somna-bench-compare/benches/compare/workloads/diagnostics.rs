//! Where somna's time goes on the write paths: somna's commits against redb's floor (one
//! value, one table, one durable commit) in both concurrency modes, with the fsyncs and bytes of
//! each commit counted by a wrapping storage backend; the three run in alternating rounds. Then
//! group commit with 8 threads, and the durable-append floor of the disk.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ::somna::{Options, Store};

use super::{concurrently, timed, Plan, ROUNDS, WARM};
use crate::data::{message, SCOPE};
use crate::engines::flatfile::FlatLog;
use crate::engines::redb_floor::{self, Counting, IoCount};
use crate::engines::somna::new_memory;
use crate::report::Report;

/// Time and counter deltas, summed over rounds.
type Acc = (Duration, [u64; 7]);

pub fn diagnostics(plan: &Plan, dir: &Path, rep: &mut Report) {
    println!("diagnostics: somna's commits against redb's floor");
    for exclusive in [false, true] {
        commits(plan, dir, exclusive, rep);
    }
    // The durable-append floor of this disk.
    let mut f = FlatLog::create(&dir.join("dg.optmem"));
    let n = plan.durable_notes.min(1000);
    let t = timed(|| {
        for _ in 0..n {
            f.append_durable(1);
        }
    });
    rep.diag(format!(
        "floor: flat-file append + fdatasync: {:.1} us/commit",
        t.as_secs_f64() * 1e6 / n as f64
    ));
    rep.fact("append floor", t.as_secs_f64() * 1e9 / n as f64);
}

/// A somna store at `dir` behind a counting backend.
fn counted_store(dir: &Path, name: &str, exclusive: bool) -> (Store, Arc<IoCount>) {
    let (backend, count) = Counting::open(&dir.join(format!("dg-{name}-{exclusive}.redb")));
    let store = Store::with_backend(backend, "diag", Options::default().exclusive(exclusive))
        .expect("store");
    (store, count)
}

/// Single notes, the floor's single inserts and session saves in alternating rounds, then group
/// commit, in one concurrency mode.
fn commits(plan: &Plan, dir: &Path, exclusive: bool, rep: &mut Report) {
    let mode = if exclusive {
        "ExclusiveWriter, without the commit journal"
    } else {
        "MultiWriter (default)"
    };
    let n = (plan.durable_notes.min(1000) / ROUNDS) as u64;
    let (notes, ncount) = counted_store(dir, "note", exclusive);
    let (db, fcount) =
        redb_floor::open_counted(&dir.join(format!("dg-floor-{exclusive}.redb")), exclusive);
    let (sess, scount) = counted_store(dir, "session", exclusive);
    let msgs: Vec<String> = (0..200).map(|i| message(0, i)).collect();
    let save = |k: usize| {
        let refs: Vec<&str> = msgs[..k].iter().map(String::as_str).collect();
        sess.session_save("s", &refs, None).expect("save");
    };
    for i in 0..WARM {
        notes.note(SCOPE, new_memory(i)).expect("note");
        redb_floor::insert(&db, i);
    }
    for k in 1..=100 {
        save(k);
    }
    let mut acc: [Acc; 3] = [(Duration::ZERO, [0u64; 7]); 3];
    let add = |slot: &mut Acc, t: Duration, a: [u64; 7], b: [u64; 7]| {
        slot.0 += t;
        for i in 0..7 {
            slot.1[i] += b[i] - a[i];
        }
    };
    let per_save = 100 / ROUNDS;
    for r in 0..ROUNDS as u64 {
        let ids = WARM + r * n..WARM + (r + 1) * n;
        let a = ncount.snapshot();
        let t = timed(|| {
            for i in ids.clone() {
                notes.note(SCOPE, new_memory(i)).expect("note");
            }
        });
        add(&mut acc[0], t, a, ncount.snapshot());
        let a = fcount.snapshot();
        let t = timed(|| {
            for i in ids.clone() {
                redb_floor::insert(&db, i);
            }
        });
        add(&mut acc[1], t, a, fcount.snapshot());
        let a = scount.snapshot();
        let first = 101 + r as usize * per_save;
        let t = timed(|| {
            for k in first..first + per_save {
                save(k);
            }
        });
        add(&mut acc[2], t, a, scount.snapshot());
    }
    let total = n * ROUNDS as u64;
    if !exclusive {
        // The default mode's floor under every durable write: one value, one durable commit.
        rep.fact("commit floor", acc[1].0.as_secs_f64() * 1e9 / total as f64);
    }
    commit_line(rep, &format!("somna note, {mode}"), total, acc[0]);
    commit_line(
        rep,
        &format!("redb floor (1 insert), {mode}"),
        total,
        acc[1],
    );
    let cpu = commit_line(
        rep,
        &format!("somna session_save (101st-200th message), {mode}"),
        (per_save * ROUNDS) as u64,
        acc[2],
    );
    rep.fact(&format!("save cpu {exclusive}"), cpu);
    // Commits are counted by their syncs: as many per commit as the single notes above made.
    let syncs_per_commit = acc[0].1[0] as f64 / total as f64;
    group_commit(
        plan,
        mode,
        (notes, ncount),
        (db, fcount),
        syncs_per_commit,
        rep,
    );
}

/// `threads` threads of single notes: how many notes each somna group commit carries, against
/// redb's floor with a blocking `begin_write`.
fn group_commit(
    plan: &Plan,
    mode: &str,
    (notes, ncount): (Store, Arc<IoCount>),
    (db, fcount): (redb::Database, Arc<IoCount>),
    syncs_per_commit: f64,
    rep: &mut Report,
) {
    let notes = Arc::new(notes);
    let per = plan.per_thread;
    let a = ncount.snapshot();
    let t = concurrently(
        plan.threads,
        per,
        |_| Arc::clone(&notes),
        move |s, t, k| {
            s.note(SCOPE, new_memory((2_000_000 + t * per + k) as u64))
                .expect("note");
        },
    );
    let b = ncount.snapshot();
    let m = (plan.threads * per) as f64;
    let commits = (b[0] - a[0]) as f64 / syncs_per_commit;
    rep.diag(format!(
        "somna note, {} threads, {mode}: {:.0} notes/s, {:.0} commits/s, {:.2} notes per commit (group commit), {:.1} us/commit of which {:.1} us in fsyncs",
        plan.threads,
        m / t.as_secs_f64(),
        commits / t.as_secs_f64(),
        m / commits,
        t.as_secs_f64() * 1e6 / commits,
        (b[1] - a[1]) as f64 / 1e3 / commits
    ));
    // redb floor, 8 threads, blocking begin_write
    let db = Arc::new(db);
    let a = fcount.snapshot();
    let t = concurrently(
        plan.threads,
        per,
        |_| Arc::clone(&db),
        move |db, t, k| redb_floor::insert(db, (1_000_000 + t * per + k) as u64),
    );
    let b = fcount.snapshot();
    rep.diag(format!(
        "redb floor, {} threads, blocking begin_write, {mode}: {:.0} commits/s, {:.1} us/commit wall, {:.2} fsyncs per commit",
        plan.threads,
        m / t.as_secs_f64(),
        t.as_secs_f64() * 1e6 / m,
        (b[0] - a[0]) as f64 / m
    ));
}

/// One line of the commit breakdown: time per commit split into fsyncs, writes, other I/O and
/// CPU; returns the CPU part (µs per commit).
fn commit_line(rep: &mut Report, what: &str, n: u64, acc: Acc) -> f64 {
    let (t, d) = acc;
    let per = |i: usize| d[i] as f64 / n as f64;
    let us = t.as_secs_f64() * 1e6 / n as f64;
    let (sync_us, write_us, other_us) = (per(1) / 1e3, per(5) / 1e3, per(6) / 1e3);
    rep.diag(format!(
        "{what}: {us:.1} us/commit = {sync_us:.1} us in {:.2} fsyncs + {write_us:.1} us in {:.1} writes ({:.0} bytes) + {other_us:.1} us in reads/locks/set_len ({:.1} reads) + {:.1} us CPU",
        per(0),
        per(2),
        per(3),
        per(4),
        us - sync_us - write_us - other_us
    ));
    us - sync_us - write_us - other_us
}
