//! Guards the vendored redb's journaled commit (vendor/README.md, "a commit published without a
//! sync"; docs/design.md 14.9), the base of the default mode's shared commit journal: in the
//! multi-writer mode `WriteTransaction::commit_journaled` publishes a commit to every handle on
//! the file without a sync; the header keeps the last commit a sync made durable (its checkpoint
//! slot), and no commit reuses a page of that commit until the next commit with a sync. So a
//! power loss at any moment, whatever subset of the unsynced writes it keeps, leaves a file whose
//! open in the next boot rolls back to exactly that checkpoint, whole; an open in the same boot
//! (a process killed, the machine up) keeps every published commit. Two handles on one simulated
//! disk take turns, each continuing the other's commits.

use redb::{ConcurrencyMode, Database, ReadableDatabase, ReadableTableMetadata, TableDefinition};
use somna_testkit::simdisk::{SimDisk, SimRng, Survival};
use std::collections::BTreeMap;

const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("t");
const BOOT: [u8; 16] = [0x11; 16];
const NEXT_BOOT: [u8; 16] = [0x22; 16];

type Model = BTreeMap<u64, Vec<u8>>;

fn open(disk: &SimDisk) -> Database {
    Database::builder()
        .set_concurrency_mode(ConcurrencyMode::MultiWriter)
        .set_cache_size(1 << 20)
        .create_with_backend(disk.clone())
        .expect("open")
}

fn contents(db: &Database) -> Model {
    let read = db.begin_read().expect("read");
    let Ok(table) = read.open_table(TABLE) else {
        return Model::new();
    };
    let mut out = Model::new();
    for entry in table.range::<u64>(..).expect("range") {
        let (k, v) = entry.expect("entry");
        out.insert(k.value(), v.value().to_vec());
    }
    assert_eq!(out.len() as u64, table.len().expect("len"));
    out
}

/// One transaction's changes, drawn from `rng`: values of 100 bytes to 6 KiB (so pages split,
/// overflow and are freed), overwrites and deletes of existing keys, applied to `model` too.
fn change(db: &Database, rng: &mut SimRng, model: &mut Model, journaled: bool) {
    let txn = db.begin_write().expect("begin");
    {
        let mut table = txn.open_table(TABLE).expect("table");
        for _ in 0..1 + rng.below(6) {
            let key = rng.below(200);
            if rng.chance(1, 4) {
                table.remove(&key).expect("remove");
                model.remove(&key);
            } else {
                let len = 100 + rng.below(6000) as usize;
                let byte = rng.below(251) as u8;
                let value = vec![byte; len];
                table.insert(&key, value.as_slice()).expect("insert");
                model.insert(key, value);
            }
        }
    }
    if journaled {
        txn.commit_journaled().expect("journaled commit");
    } else {
        txn.commit().expect("commit");
    }
}

fn reopen(image: Vec<u8>, seed: u64, boot: [u8; 16]) -> Database {
    let disk = SimDisk::from_image(image, seed);
    disk.set_boot_id(Some(boot));
    open(&disk)
}

#[test]
fn a_journaled_commit_is_published_to_the_other_handle_without_a_sync() {
    let disk = SimDisk::new(1);
    disk.set_boot_id(Some(BOOT));
    let mut rng = SimRng::new(1);
    let mut model = Model::new();
    let a = open(&disk);
    // Room first: a commit that grows the file syncs the growth (as every mode does), so the
    // file is grown and emptied by commits with a sync before the count starts.
    for keep in [false, true] {
        let txn = a.begin_write().expect("begin");
        {
            let mut table = txn.open_table(TABLE).expect("table");
            for key in 1000..1400u64 {
                if keep {
                    table.remove(&key).expect("remove");
                } else {
                    table.insert(&key, [7u8; 6000].as_slice()).expect("insert");
                }
            }
        }
        txn.commit().expect("commit");
    }
    change(&a, &mut rng, &mut model, false);
    let b = open(&disk);
    let syncs = disk.syncs_total();
    for round in 0..20 {
        let (writer, reader) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        change(writer, &mut rng, &mut model, true);
        assert_eq!(
            contents(reader),
            model,
            "round {round}: the other handle reads it"
        );
    }
    assert_eq!(
        disk.syncs_total(),
        syncs,
        "20 journaled commits made no sync"
    );
    // A commit with a sync ends the run: a power loss after it keeps all of it.
    change(&a, &mut rng, &mut model, false);
    let image = disk.power_loss_image(Survival::Nothing, 3);
    assert_eq!(contents(&reopen(image, 4, NEXT_BOOT)), model);
}

/// The sweep: per seed, two handles take turns making runs of journaled commits between
/// commits with a sync; at random moments the power is cut (without stopping the handles) under
/// a random survival of the unsynced writes, and the image is opened in the next boot, which
/// must hold exactly the last checkpoint and pass redb's integrity check, and in the same boot,
/// which must hold the last commit.
#[test]
fn a_power_loss_after_journaled_commits_rolls_back_to_the_whole_checkpoint() {
    let seeds = if std::env::var_os("SOMNA_CRASH_LONG").is_some() {
        0..64
    } else {
        0..8
    };
    let mut checked = 0;
    for seed in seeds {
        let disk = SimDisk::new(seed);
        disk.set_boot_id(Some(BOOT));
        let mut rng = SimRng::new(seed ^ 0x5eed);
        let mut model = Model::new();
        let handles = [open(&disk), open(&disk)];
        change(&handles[0], &mut rng, &mut model, false);
        let mut checkpoint = model.clone();
        for step in 0..120u64 {
            let db = &handles[rng.below(2) as usize];
            let journaled = !rng.chance(1, 10);
            change(db, &mut rng, &mut model, journaled);
            if !journaled {
                checkpoint = model.clone();
            }
            if rng.chance(1, 8) {
                let survival = Survival::random(&mut rng);
                let image = disk.power_loss_image(survival, seed * 1000 + step);
                let mut after = reopen(image, seed, NEXT_BOOT);
                assert_eq!(
                    contents(&after),
                    checkpoint,
                    "seed {seed} step {step} {survival:?}: the next boot holds the checkpoint"
                );
                assert!(
                    after.check_integrity().expect("integrity"),
                    "seed {seed} step {step}: integrity"
                );
                // It goes on writing, and a later open finds it so.
                let mut again = checkpoint.clone();
                change(&after, &mut rng, &mut again, true);
                change(&after, &mut rng, &mut again, false);
                drop(after);
                checked += 1;
                let live = disk.live_image();
                let same_boot = reopen(live, seed, BOOT);
                assert_eq!(
                    contents(&same_boot),
                    model,
                    "seed {seed} step {step}: the same boot keeps every published commit"
                );
            }
        }
    }
    assert!(checked > 20, "only {checked} power losses checked");
}
