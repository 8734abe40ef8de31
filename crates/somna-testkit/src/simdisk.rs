//! A simulated disk for crash testing: a [`somna::store::StorageBackend`] that remembers both what every
//! read sees and what a power loss could leave behind, and that injects faults on a plan.
//!
//! The disk keeps a **live image** (every write applied, which is what reads return) and a log of
//! the writes and length changes since the last completed `sync_data`; the **durable image** is
//! the live image with that log undone. Everything is deterministic from a seed, so a failing
//! case is reproduced by its seed and crash point alone.
//!
//! The fault model (see docs/reliability.md):
//!
//! - **I/O errors**: [`FaultPlan::fail_op`] fails the N-th I/O operation (`len`, `read`,
//!   `write`, `set_len`, `sync_data`, counted from 1 since the plan was installed), either once
//!   ([`Fault::Transient`]) or from then on until the plan changes ([`Fault::Persistent`]). A
//!   failed write or length change does nothing; a failed sync makes nothing durable.
//! - **Power loss**: [`FaultPlan::power_loss_at_sync`] cuts the power at the k-th `sync_data`,
//!   which then never completes. What survives is the durable image plus an arbitrary subset of
//!   the writes issued since the last completed sync, each write torn at 512-byte sector
//!   boundaries (every sector of every write survives or not on its own, chosen by a
//!   [`Survival`] policy drawn from the seed), and the file length of the last sync or of any
//!   later length change. From then on every operation fails, as it would in a dead machine;
//!   the image is read with [`SimDisk::crash_image`]. [`SimDisk::cut_power`] does the same at
//!   any moment.
//! - **Full disk**: with [`FaultPlan::capacity`], growing the file past that many bytes fails
//!   with [`std::io::ErrorKind::StorageFull`] and changes nothing.
//!
//! Locks: the disk grants every byte-range lock redb asks for (redb's multi-writer mode needs
//! them), so one [`somna::Store`] at a time may use a disk; two stores on clones of one disk
//! would not exclude each other.
//!
//! ```
//! use somna_testkit::simdisk::{FaultPlan, SimDisk};
//! use somna::{NewMemory, Options, Store};
//!
//! let disk = SimDisk::new(7);
//! let store = Store::with_backend(disk.clone(), "sim", Options::default())?;
//! store.note("default", NewMemory::new("acknowledged"))?;
//! // The power fails during the next commit: the note is in flight.
//! disk.set_plan(FaultPlan { power_loss_at_sync: Some(1), ..FaultPlan::default() });
//! assert!(store.note("default", NewMemory::new("in flight")).is_err());
//! drop(store);
//! let image = disk.crash_image().expect("the power was cut");
//! // Reboot: a new disk holding what survived. Opening it repairs the store.
//! let store = Store::with_backend(SimDisk::from_image(image, 8), "sim", Options::default())?;
//! let n = store.count("default")?;
//! assert!(n == 1 || n == 2);
//! assert_eq!(store.memory("default", 0)?.text, "acknowledged");
//! # Ok::<(), somna::Error>(())
//! ```

use std::fmt;
use std::io;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

/// The sector size: the unit a write is torn at by a power loss.
pub const SECTOR: u64 = 512;

/// A small, fast, deterministic pseudo-random generator (SplitMix64), so that every simulated
/// crash is reproducible from its seed.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// How an injected I/O error behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The one operation fails; the ones after it succeed.
    Transient,
    /// The operation and every later one fail, until a new plan is installed.
    Persistent,
}

/// The kinds of I/O operation the disk counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `len`
    Len,
    /// `read`
    Read,
    /// `write`
    Write,
    /// `set_len`
    SetLen,
    /// `sync_data`
    Sync,
}

/// What the disk should do wrong. The default plan does nothing wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Fail the N-th I/O operation (from 1, counted since the plan was installed).
    pub fail_op: Option<(u64, Fault)>,
    /// Cut the power at the k-th `sync_data` (from 1, counted since the plan was installed).
    pub power_loss_at_sync: Option<u64>,
    /// Refuse to grow the file past this many bytes (a full disk).
    pub capacity: Option<u64>,
}

/// Which of the writes issued since the last sync survive a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Survival {
    /// None of them: the durable image alone.
    Nothing,
    /// All of them (the length may still be the old one).
    Everything,
    /// Each sector of each write survives with probability `percent`/100.
    Sectors {
        /// The chance of each sector, in percent.
        percent: u8,
    },
    /// Each write survives whole, or not at all, with probability `percent`/100.
    WholeWrites {
        /// The chance of each write, in percent.
        percent: u8,
    },
    /// The writes reach the platter in the order they were issued, and the power fails at a
    /// random sector: everything before it survives, nothing after it.
    InOrder,
}

impl Survival {
    /// A policy drawn at random: each kind about equally often.
    pub fn random(rng: &mut SimRng) -> Survival {
        match rng.below(6) {
            0 => Survival::Nothing,
            1 => Survival::Everything,
            2 => Survival::WholeWrites {
                percent: (rng.below(99) + 1) as u8,
            },
            3 => Survival::InOrder,
            _ => Survival::Sectors {
                percent: (rng.below(99) + 1) as u8,
            },
        }
    }
}

/// What the disk has seen since its plan was installed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// I/O operations of every kind.
    pub ops: u64,
    /// `read` calls.
    pub reads: u64,
    /// `write` calls.
    pub writes: u64,
    /// `sync_data` calls.
    pub syncs: u64,
    /// `set_len` calls.
    pub set_lens: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Writes or length changes refused because the disk was full.
    pub full: u64,
}

/// The injected fault that fired: which operation, of what kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// Its number (from 1, since the plan was installed).
    pub op: u64,
    /// Its kind.
    pub kind: OpKind,
    /// How it failed.
    pub fault: Fault,
}

/// One change since the last completed sync, with what it replaced, so it can be undone.
enum Entry {
    Write {
        offset: u64,
        len_before: u64,
        old: Vec<u8>,
        new: Vec<u8>,
    },
    SetLen {
        from: u64,
        to: u64,
        cut: Vec<u8>,
    },
}

/// The power line several disks share ([`SimDisk::share_power`]): one count of syncs across
/// them, and one cut that takes every disk on it down at the same moment.
#[derive(Debug, Default)]
struct Power {
    syncs: u64,
    at: Option<u64>,
    cut: bool,
}

struct State {
    power: Option<Arc<Mutex<Power>>>,
    live: Vec<u8>,
    log: Vec<Entry>,
    plan: FaultPlan,
    stats: DiskStats,
    rng: SimRng,
    failing: bool,
    fired: Option<Fired>,
    crashed: Option<Vec<u8>>,
    syncs_total: u64,
    boot_id: Option<[u8; 16]>,
}

/// A simulated disk: a cheap handle (clones share the same disk) implementing
/// [`somna::store::StorageBackend`]. See the module documentation for the fault model.
#[derive(Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("SimDisk")
            .field("len", &s.live.len())
            .field("unsynced", &s.log.len())
            .field("crashed", &s.crashed.is_some())
            .field("stats", &s.stats)
            .finish()
    }
}

fn to_usize(v: u64) -> io::Result<usize> {
    usize::try_from(v).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))
}

/// Copies `data` into `img` at `offset`, growing `img` with zeros if needed.
fn put(img: &mut Vec<u8>, offset: usize, data: &[u8]) {
    let end = offset.saturating_add(data.len());
    if img.len() < end {
        img.resize(end, 0);
    }
    if let Some(dst) = img.get_mut(offset..end) {
        dst.copy_from_slice(data);
    }
}

/// Copies the part of `data` that falls inside `img` (never growing it).
fn put_clipped(img: &mut [u8], offset: usize, data: &[u8]) {
    if offset >= img.len() {
        return;
    }
    let n = data.len().min(img.len() - offset);
    if let (Some(dst), Some(src)) = (img.get_mut(offset..offset + n), data.get(..n)) {
        dst.copy_from_slice(src);
    }
}

/// The sector-aligned pieces of the range `[offset, offset + len)`, as (start, end) offsets
/// relative to `offset`.
fn pieces(offset: u64, len: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < len {
        let abs = offset + at as u64;
        let to_boundary = (SECTOR - abs % SECTOR) as usize;
        let end = (at + to_boundary).min(len);
        out.push((at, end));
        at = end;
    }
    out
}

impl State {
    fn durable(&self) -> Vec<u8> {
        let mut img = self.live.clone();
        for e in self.log.iter().rev() {
            match e {
                Entry::Write {
                    offset,
                    len_before,
                    old,
                    ..
                } => {
                    put(&mut img, *offset as usize, old);
                    img.resize(*len_before as usize, 0);
                }
                Entry::SetLen { from, to, cut } => {
                    img.resize(*from as usize, 0);
                    if to < from {
                        put(&mut img, *to as usize, cut);
                    }
                }
            }
        }
        img
    }

    fn power_loss(&self, survival: Survival, rng: &mut SimRng) -> Vec<u8> {
        let mut img = self.durable();
        let mut lengths = vec![img.len() as u64];
        for e in &self.log {
            match e {
                Entry::SetLen { to, .. } => lengths.push(*to),
                Entry::Write {
                    offset,
                    len_before,
                    new,
                    ..
                } => {
                    let end = offset + new.len() as u64;
                    if end > *len_before {
                        lengths.push(end);
                    }
                }
            }
        }
        let pick = rng.below(lengths.len() as u64) as usize;
        let len = lengths.get(pick).copied().unwrap_or(img.len() as u64);
        img.resize(len as usize, 0);
        let total: usize = self
            .log
            .iter()
            .map(|e| match e {
                Entry::Write { offset, new, .. } => pieces(*offset, new.len()).len(),
                Entry::SetLen { .. } => 0,
            })
            .sum();
        let cut = rng.below(total as u64 + 1) as usize;
        let mut index = 0usize;
        for e in &self.log {
            let Entry::Write { offset, new, .. } = e else {
                continue;
            };
            let whole = match survival {
                Survival::WholeWrites { percent } => Some(rng.chance(u64::from(percent), 100)),
                _ => None,
            };
            for (a, b) in pieces(*offset, new.len()) {
                let keep = match survival {
                    Survival::Nothing => false,
                    Survival::Everything => true,
                    Survival::Sectors { percent } => rng.chance(u64::from(percent), 100),
                    Survival::WholeWrites { .. } => whole.unwrap_or(false),
                    Survival::InOrder => index < cut,
                };
                index += 1;
                if keep {
                    if let Some(data) = new.get(a..b) {
                        put_clipped(&mut img, *offset as usize + a, data);
                    }
                }
            }
        }
        img
    }

    fn crash(&mut self) {
        let mut rng = SimRng::new(self.rng.next_u64());
        let survival = Survival::random(&mut rng);
        let img = self.power_loss(survival, &mut rng);
        self.crashed = Some(img);
    }
}

fn lock_power(p: &Mutex<Power>) -> MutexGuard<'_, Power> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

fn power_lost() -> io::Error {
    io::Error::other("simulated power loss: the disk is gone")
}

impl SimDisk {
    /// An empty disk. `seed` decides every random choice the disk makes (what survives a power
    /// loss).
    pub fn new(seed: u64) -> SimDisk {
        Self::from_image(Vec::new(), seed)
    }

    /// A disk holding `image`, all of it durable: the disk after a reboot.
    pub fn from_image(image: Vec<u8>, seed: u64) -> SimDisk {
        SimDisk {
            state: Arc::new(Mutex::new(State {
                power: None,
                live: image,
                log: Vec::new(),
                plan: FaultPlan::default(),
                stats: DiskStats::default(),
                rng: SimRng::new(seed),
                failing: false,
                fired: None,
                crashed: None,
                syncs_total: 0,
                boot_id: None,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Installs a fault plan: the operation and sync counters start again from zero and a
    /// persistent fault stops. (A power loss is final: a crashed disk stays crashed.)
    pub fn set_plan(&self, plan: FaultPlan) {
        let mut s = self.lock();
        s.plan = plan;
        s.stats = DiskStats::default();
        s.failing = false;
        s.fired = None;
    }

    /// Says which boot of the machine the disk's unsynced writes belong to
    /// ([`somna::store::StorageBackend::boot_id`]). A disk made from a process's live image with the boot
    /// id its writer saw is the same machine after that process died, its page cache intact; a
    /// disk made from a crash image is the machine after a restart. `None`, the default, is a
    /// disk that cannot tell: every open verifies a dead writer's unflushed commit.
    pub fn set_boot_id(&self, boot: Option<[u8; 16]>) {
        self.lock().boot_id = boot;
    }

    /// The plan in force.
    pub fn plan(&self) -> FaultPlan {
        self.lock().plan.clone()
    }

    /// Changes only the capacity of the plan (`None`: unlimited), keeping the counters.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        self.lock().plan.capacity = capacity;
    }

    /// What the disk has seen since the plan was installed.
    pub fn stats(&self) -> DiskStats {
        self.lock().stats
    }

    /// Completed and attempted syncs since the disk was made, whatever the plan.
    pub fn syncs_total(&self) -> u64 {
        self.lock().syncs_total
    }

    /// The injected I/O error that fired, if one did.
    pub fn fired(&self) -> Option<Fired> {
        self.lock().fired
    }

    /// Whether the power has been cut.
    pub fn is_crashed(&self) -> bool {
        self.lock().crashed.is_some()
    }

    /// What survived the power loss, if the power was cut (on this disk, or on the power line
    /// it shares: then this disk goes down now, which is the same moment, since nothing reached
    /// it after the cut).
    pub fn crash_image(&self) -> Option<Vec<u8>> {
        let mut s = self.lock();
        if s.crashed.is_none() && s.power.as_ref().is_some_and(|p| lock_power(p).cut) {
            s.crash();
        }
        s.crashed.clone()
    }

    /// Puts `disks` on one power line: their syncs are counted together, and the power fails
    /// for all of them at the `power_loss_at_sync`-th sync of any (the files of one machine: a
    /// store and its commit journal). Each disk's own plan still applies too.
    pub fn share_power(disks: &[&SimDisk], power_loss_at_sync: Option<u64>) {
        let p = Arc::new(Mutex::new(Power {
            at: power_loss_at_sync,
            ..Power::default()
        }));
        for d in disks {
            d.lock().power = Some(p.clone());
        }
    }

    /// Cuts the power now (if it is not cut already) and returns what survived. Every later
    /// operation fails.
    pub fn cut_power(&self) -> Vec<u8> {
        let mut s = self.lock();
        if s.crashed.is_none() {
            s.crash();
        }
        s.crashed.clone().unwrap_or_default()
    }

    /// What a power loss now would leave under `survival`, with the random choices drawn from
    /// `seed`, without cutting the power.
    pub fn power_loss_image(&self, survival: Survival, seed: u64) -> Vec<u8> {
        self.lock().power_loss(survival, &mut SimRng::new(seed))
    }

    /// Every byte as reads see it now.
    pub fn live_image(&self) -> Vec<u8> {
        self.lock().live.clone()
    }

    /// The bytes as of the last completed sync.
    pub fn durable_image(&self) -> Vec<u8> {
        self.lock().durable()
    }

    /// Writes and length changes issued since the last completed sync.
    pub fn unsynced(&self) -> usize {
        self.lock().log.len()
    }

    /// Counts an operation and applies the plan: the guard to go on with, or the injected error.
    fn begin(&self, kind: OpKind) -> io::Result<MutexGuard<'_, State>> {
        let mut s = self.lock();
        if s.crashed.is_some() {
            return Err(power_lost());
        }
        if let Some(p) = s.power.clone() {
            let mut p = lock_power(&p);
            if kind == OpKind::Sync && !p.cut {
                p.syncs += 1;
                p.cut = p.at == Some(p.syncs);
            }
            if p.cut {
                drop(p);
                s.crash();
                return Err(power_lost());
            }
        }
        s.stats.ops += 1;
        match kind {
            OpKind::Read => s.stats.reads += 1,
            OpKind::Write => s.stats.writes += 1,
            OpKind::SetLen => s.stats.set_lens += 1,
            OpKind::Sync => {
                s.stats.syncs += 1;
                s.syncs_total += 1;
            }
            OpKind::Len => {}
        }
        let op = s.stats.ops;
        if s.failing {
            return Err(io::Error::other(format!(
                "simulated I/O error (operation {op}, after a persistent fault)"
            )));
        }
        if let Some((n, fault)) = s.plan.fail_op {
            if n == op {
                s.fired = Some(Fired { op, kind, fault });
                s.failing = fault == Fault::Persistent;
                return Err(io::Error::other(format!(
                    "simulated I/O error (operation {op}, {kind:?}, {fault:?})"
                )));
            }
        }
        if kind == OpKind::Sync && s.plan.power_loss_at_sync == Some(s.stats.syncs) {
            s.crash();
            return Err(power_lost());
        }
        Ok(s)
    }

    fn full(s: &mut State, want: u64) -> io::Result<()> {
        match s.plan.capacity {
            Some(cap) if want > cap && want > s.live.len() as u64 => {
                s.stats.full += 1;
                Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    format!("simulated disk full: {want} bytes wanted, capacity {cap}"),
                ))
            }
            _ => Ok(()),
        }
    }
}

impl somna::store::StorageBackend for SimDisk {
    fn len(&self) -> Result<u64, io::Error> {
        let s = self.begin(OpKind::Len)?;
        Ok(s.live.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let s = self.begin(OpKind::Read)?;
        let start = to_usize(offset)?;
        let src = start
            .checked_add(out.len())
            .and_then(|end| s.live.get(start..end))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {} bytes at {offset} past the end ({})",
                        out.len(),
                        s.live.len()
                    ),
                )
            })?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut s = self.begin(OpKind::SetLen)?;
        Self::full(&mut s, len)?;
        let to = to_usize(len)?;
        let from = s.live.len() as u64;
        let cut = s.live.get(to..).map(<[u8]>::to_vec).unwrap_or_default();
        s.live.resize(to, 0);
        s.log.push(Entry::SetLen { from, to: len, cut });
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        let mut s = self.begin(OpKind::Sync)?;
        s.log.clear();
        Ok(())
    }

    fn boot_id(&self) -> Option<[u8; 16]> {
        self.lock().boot_id
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut s = self.begin(OpKind::Write)?;
        let start = to_usize(offset)?;
        let end = offset.saturating_add(data.len() as u64);
        Self::full(&mut s, end)?;
        let len_before = s.live.len() as u64;
        let old = s
            .live
            .get(start.min(s.live.len())..(start + data.len()).min(s.live.len()))
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        put(&mut s.live, start, data);
        s.stats.bytes_written += data.len() as u64;
        s.log.push(Entry::Write {
            offset,
            len_before,
            old,
            new: data.to_vec(),
        });
        Ok(())
    }

    fn try_lock_range(
        &self,
        _start: Bound<u64>,
        _end: Bound<u64>,
    ) -> Result<bool, somna::store::BackendError> {
        Ok(true)
    }

    fn try_lock_shared_range(
        &self,
        _start: Bound<u64>,
        _end: Bound<u64>,
    ) -> Result<bool, somna::store::BackendError> {
        Ok(true)
    }

    fn lock_range(
        &self,
        _start: Bound<u64>,
        _end: Bound<u64>,
    ) -> Result<(), somna::store::BackendError> {
        Ok(())
    }

    fn lock_shared_range(
        &self,
        _start: Bound<u64>,
        _end: Bound<u64>,
    ) -> Result<(), somna::store::BackendError> {
        Ok(())
    }

    fn unlock_range(
        &self,
        _start: Bound<u64>,
        _end: Bound<u64>,
    ) -> Result<(), somna::store::BackendError> {
        Ok(())
    }

    fn query_lock_range(
        &self,
        _start: Bound<u64>,
        _end: Bound<u64>,
    ) -> Result<bool, somna::store::BackendError> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use somna::store::StorageBackend;

    #[test]
    fn durable_is_live_minus_the_unsynced_log() {
        let d = SimDisk::new(1);
        d.set_len(2048).unwrap();
        d.write(0, &[1; 600]).unwrap();
        d.sync_data().unwrap();
        d.write(100, &[2; 1000]).unwrap();
        d.set_len(4096).unwrap();
        d.write(3000, &[3; 10]).unwrap();
        d.set_len(1500).unwrap();
        let durable = d.durable_image();
        let mut want = vec![0u8; 2048];
        want[..600].fill(1);
        assert_eq!(durable, want);
        assert_eq!(d.live_image().len(), 1500);
        for seed in 0..50 {
            let img = d.power_loss_image(Survival::Nothing, seed);
            assert!([2048, 4096, 1500].contains(&img.len()), "{}", img.len());
            let n = img.len().min(2048);
            assert_eq!(img[..n], want[..n]);
        }
        let all = d.power_loss_image(Survival::Everything, 5);
        let n = all.len().min(1100);
        assert!(all[100..n].iter().all(|b| *b == 2));
    }

    #[test]
    fn power_loss_keeps_old_or_new_bytes_per_sector() {
        for seed in 0..200 {
            let d = SimDisk::new(seed);
            d.set_len(4096).unwrap();
            d.sync_data().unwrap();
            d.write(0, &[9; 4096]).unwrap();
            let mut rng = SimRng::new(seed);
            let s = Survival::random(&mut rng);
            let img = d.power_loss_image(s, seed);
            assert_eq!(img.len(), 4096);
            for sector in img.chunks(512) {
                assert!(sector.iter().all(|b| *b == 9) || sector.iter().all(|b| *b == 0));
            }
        }
    }

    #[test]
    fn faults_fire_on_the_planned_operation() {
        let d = SimDisk::new(3);
        d.set_plan(FaultPlan {
            fail_op: Some((2, Fault::Transient)),
            ..FaultPlan::default()
        });
        d.set_len(10).unwrap();
        assert!(d.write(0, b"x").is_err());
        d.write(0, b"y").unwrap();
        assert_eq!(d.fired().map(|f| f.kind), Some(OpKind::Write));
        d.set_plan(FaultPlan {
            fail_op: Some((1, Fault::Persistent)),
            ..FaultPlan::default()
        });
        assert!(d.sync_data().is_err());
        assert!(d.len().is_err());
        d.set_plan(FaultPlan {
            capacity: Some(100),
            ..FaultPlan::default()
        });
        let e = d.set_len(200).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        d.set_plan(FaultPlan {
            power_loss_at_sync: Some(1),
            ..FaultPlan::default()
        });
        d.write(0, b"z").unwrap();
        assert!(d.sync_data().is_err());
        assert!(d.is_crashed());
        assert!(d.read(0, &mut [0u8; 1]).is_err());
    }
}
