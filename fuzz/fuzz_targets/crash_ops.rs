//! Random operation sequences with a crash point, over the simulated disk, against the oracle
//! of `somna_testkit::crash`. The first 6 bytes choose the crash (a power loss at
//! a sync, a transient or persistent I/O error at an operation, or a full disk) and the commit
//! protocol; the rest drive the workload generator's choices. After the crash the store is
//! recovered and must hold every acknowledged operation and the one in flight wholly or not at
//! all, pass verify and keep working; then a second crash hits the repair.
#![no_main]

use libfuzzer_sys::fuzz_target;
use somna_testkit::crash::*;
use somna_testkit::simdisk::{Fault, FaultPlan, SimDisk};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (head, ops) = data.split_at(6);
    let exclusive = head[0] & 1 == 1;
    let kind = (head[0] >> 1) % 4;
    let point = u64::from(u16::from_le_bytes([head[1], head[2]]));
    let repair_point = u64::from(head[3]);
    let seed = u64::from(u32::from_le_bytes([head[2], head[3], head[4], head[5]]));
    let script = Script::generate(seed, exclusive, 48, Choices::Bytes(ops, 0));
    let plan = match kind {
        0 => FaultPlan {
            power_loss_at_sync: Some(1 + point % (script.syncs + 1)),
            ..FaultPlan::default()
        },
        1 => FaultPlan {
            fail_op: Some((1 + point % (script.io_ops + 1), Fault::Transient)),
            ..FaultPlan::default()
        },
        2 => FaultPlan {
            fail_op: Some((1 + point % (script.io_ops + 1), Fault::Persistent)),
            ..FaultPlan::default()
        },
        _ => FaultPlan {
            capacity: Some(script.len_after_init + (point % 64) * 4096),
            ..FaultPlan::default()
        },
    };
    let disk = SimDisk::new(seed);
    disk.set_plan(plan.clone());
    let mut at_failure = None;
    let p = replay(&script, &disk, |d| {
        at_failure = Some(power_loss_now(d, seed))
    })
    .unwrap_or_else(|e| panic!("{}, {plan:?}: {e}", script.describe()));
    let mut tally = Tally::default();
    let image = match disk.crash_image() {
        Some(img) => img,
        None if kind == 0 => disk.cut_power(),
        None => {
            disk.set_plan(FaultPlan::default());
            disk.live_image()
        }
    };
    let mut images = vec![image];
    images.extend(at_failure);
    for image in images {
        if let Err(e) = check_recovery(&script, image.clone(), &p, seed, &mut tally) {
            panic!("{}, {plan:?}: {e}", script.describe());
        }
        let (syncs, ios) = repair_cost(&script, &image);
        let again = if repair_point % 2 == 0 {
            FaultPlan {
                power_loss_at_sync: Some(1 + repair_point % syncs.max(1)),
                ..FaultPlan::default()
            }
        } else {
            FaultPlan {
                fail_op: Some((1 + repair_point % ios.max(1), Fault::Persistent)),
                ..FaultPlan::default()
            }
        };
        if let Err(e) = check_crash_in_repair(&script, &image, &p, again.clone(), seed, &mut tally)
        {
            panic!("{}, {plan:?}, then {again:?}: {e}", script.describe());
        }
    }
});
