//! The settings of a store (its `config` table): what each setting means, its bounds, and the
//! reading of the table into a [`Config`].

use serde::Serialize;

use crate::domain::text::{DEFAULT_ENTRY_BYTES, MAX_ENTRY_BYTES};
use crate::error::{Error, Result};
use crate::storage::codec::decode;
use crate::storage::kv::KvRead;
use crate::storage::tables::CONFIG;

/// The settings of a store, read from its `config` table (defaults where unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Config {
    /// Largest memory or summary, in bytes (`ENTRY_BYTES`, default 280, at most 4096).
    pub entry_bytes: usize,
    /// Largest block summarized from raw memories; larger blocks are summarized from their two
    /// children (`RAW_MAX`, default 16, a power of two).
    pub raw_max: u64,
    /// Default wake budget in lines (`WAKE_LINES`, default 96).
    pub wake_lines: usize,
    /// Default wake budget in bytes, 0 for none (`WAKE_BYTES`, default 0).
    pub wake_bytes: usize,
    /// Most archived messages kept per session; the oldest beyond it are dropped
    /// (`SESSION_ARCHIVE_MAX`, default 0: keep all).
    pub session_archive_max: u64,
    /// Record every read in the audit table (`AUDIT`, default 0: off).
    pub audit: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            entry_bytes: DEFAULT_ENTRY_BYTES,
            raw_max: 16,
            wake_lines: 96,
            wake_bytes: 0,
            session_archive_max: 0,
            audit: false,
        }
    }
}

/// The names `config NAME=V` accepts.
pub const CONFIG_NAMES: &[&str] = &[
    "ENTRY_BYTES",
    "RAW_MAX",
    "WAKE_LINES",
    "WAKE_BYTES",
    "SESSION_ARCHIVE_MAX",
    "AUDIT",
];

/// Checks a setting and returns its value.
pub fn validate_config(name: &str, value: &str) -> Result<u64> {
    let v: u64 = value
        .trim()
        .parse()
        .map_err(|_| Error::invalid("config", format!("{name}={value:?}: not a whole number")))?;
    let ok = match name {
        "ENTRY_BYTES" => (16..=MAX_ENTRY_BYTES as u64).contains(&v),
        "RAW_MAX" => v.is_power_of_two() && (2..=1 << 20).contains(&v),
        "WAKE_LINES" => (1..=1_000_000).contains(&v),
        "WAKE_BYTES" => v == 0 || (256..=1 << 30).contains(&v),
        "SESSION_ARCHIVE_MAX" => true,
        "AUDIT" => v <= 1,
        _ => {
            return Err(Error::invalid(
                "config",
                format!(
                    "unknown setting {name:?}; known: {}",
                    CONFIG_NAMES.join(", ")
                ),
            ))
        }
    };
    if !ok {
        let rule = match name {
            "ENTRY_BYTES" => "16 to 4096",
            "RAW_MAX" => "a power of two from 2 to 1048576",
            "WAKE_LINES" => "1 to 1000000",
            "AUDIT" => "0 (off) or 1 (on)",
            _ => "0 (no limit) or 256 to 1073741824",
        };
        return Err(Error::invalid(
            "config",
            format!("{name}={v}: must be {rule}"),
        ));
    }
    Ok(v)
}

/// Whether the read audit is on (`AUDIT`), as [`read_config`] would say, by one point read
/// instead of the whole table: every audited read asks.
pub(crate) fn read_audit(kv: &(impl KvRead + ?Sized)) -> Result<bool> {
    let n = CONFIG.read(kv, "AUDIT", |v| decode::<u64>("config", &"AUDIT", v))?;
    Ok(n == Some(1))
}

/// Reads the `config` table; defaults where a setting is unset.
pub(crate) fn read_config(kv: &(impl KvRead + ?Sized)) -> Result<Config> {
    let mut c = Config::default();
    CONFIG.each(kv, .., |name, v| {
        let n: u64 = decode("config", &name, v)?;
        match name {
            "ENTRY_BYTES" => c.entry_bytes = n.min(MAX_ENTRY_BYTES as u64) as usize,
            "RAW_MAX" if n.is_power_of_two() && n >= 2 => c.raw_max = n,
            "WAKE_LINES" => c.wake_lines = (n as usize).max(1),
            "WAKE_BYTES" => c.wake_bytes = n as usize,
            "SESSION_ARCHIVE_MAX" => c.session_archive_max = n,
            "AUDIT" => c.audit = n == 1,
            _ => {}
        }
        Ok(())
    })?;
    Ok(c)
}
