//! What `verify` checks of checkpoints and store items: every value decodes; every channel
//! version a checkpoint names is stored; every list value's items are stored and as many as it
//! says; every item and pending write belongs to a thread that has checkpoints.

use std::collections::HashSet;

use crate::checkpoint::items::StoreItem;
use crate::checkpoint::read::list_items;
use crate::checkpoint::{CKey, CheckpointRecord, StoredChannel, Typed, VKey, WriteRecord};
use crate::error::Result;
use crate::storage::codec::decode;
use crate::storage::kv::KvRead;
use crate::storage::tables::{
    CHECKPOINTS, CHECKPOINT_CHANNELS, CHECKPOINT_ITEMS, CHECKPOINT_WRITES, STORE_ITEMS,
};

/// Checks the checkpoint tables and the store items, reporting each problem to `problem`;
/// how many checkpoints there are.
pub(crate) fn check_checkpoints(
    kv: &(impl KvRead + ?Sized),
    problem: &mut dyn FnMut(String),
) -> Result<u64> {
    let mut named: Vec<(String, String, String, String, String)> = Vec::new();
    let mut threads: HashSet<String> = HashSet::new();
    let mut count = 0;
    CHECKPOINTS.each(kv, .., |(t, ns, id), v| {
        count += 1;
        threads.insert(t.to_string());
        match decode::<CheckpointRecord>("checkpoints", &CKey(&t, &ns, id), v) {
            Ok(rec) => named.extend(
                rec.versions
                    .into_iter()
                    .map(|(c, ver)| (t.to_string(), ns.to_string(), id.to_string(), c, ver)),
            ),
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })?;
    for (t, ns, id, c, ver) in &named {
        if !CHECKPOINT_CHANNELS.contains(kv, (t, ns, c, ver))? {
            problem(format!(
                "checkpoint {} names channel {c} at version {ver}, which is not stored",
                CKey(t, ns, id)
            ));
        }
    }
    check_channels(kv, problem)?;
    check_rows(kv, &threads, problem)?;
    Ok(count)
}

fn check_channels(kv: &(impl KvRead + ?Sized), problem: &mut dyn FnMut(String)) -> Result<()> {
    let mut lists = Vec::new();
    CHECKPOINT_CHANNELS.each(kv, .., |(t, ns, c, ver), v| {
        match decode::<StoredChannel>("checkpoint_channels", &VKey(&t, &ns, &c, &ver), v) {
            Ok(StoredChannel::List { runs, count, .. }) => {
                lists.push((t.to_string(), ns.to_string(), c.to_string(), runs, count))
            }
            Ok(_) => {}
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })?;
    for (t, ns, c, runs, count) in &lists {
        if let Err(e) = list_items(kv, (t, ns, c), runs, *count) {
            problem(e.to_string());
        }
    }
    Ok(())
}

fn check_rows(
    kv: &(impl KvRead + ?Sized),
    threads: &HashSet<String>,
    problem: &mut dyn FnMut(String),
) -> Result<()> {
    CHECKPOINT_ITEMS.each(kv, .., |(t, ns, c, i), v| {
        if let Err(e) = decode::<Typed>("checkpoint_items", &VKey(&t, &ns, &c, &i), v) {
            problem(e.to_string());
        }
        if !threads.contains(t.as_ref()) {
            problem(format!(
                "checkpoint item {} belongs to no checkpoint",
                VKey(&t, &ns, &c, &i)
            ));
        }
        Ok(())
    })?;
    CHECKPOINT_WRITES.each(kv, .., |(t, ns, id, _, _), v| {
        if let Err(e) = decode::<WriteRecord>("checkpoint_writes", &CKey(&t, &ns, &id), v) {
            problem(e.to_string());
        }
        Ok(())
    })?;
    STORE_ITEMS.each(kv, .., |(ns, key), v| {
        if let Err(e) = decode::<StoreItem>("store_items", &format_args!("{ns}/{key}"), v) {
            problem(e.to_string());
        }
        Ok(())
    })
}
