//! JSON Lines export and import of a whole store ([`ExportLine`]): the export streams every
//! setting, scope, memory (with its vector) and summary; the import reads and checks every line
//! before it writes anything, then restores each scope in one transaction
//! ([`crate::WriteTxn::restore_scope`]).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::domain::block::Block;
use crate::domain::record::{Memory, Summary};
use crate::domain::text::validate_scope;
use crate::domain::text::{validate_line, MAX_ENTRY_BYTES};
use crate::error::{Error, Result};
use crate::memory::log::each_memory;
use crate::memory::search::vector::{self, MAX_DIMENSION};
use crate::memory::summary::each_node;
use crate::storage::codec::encode;
use crate::storage::config::{validate_config, CONFIG_NAMES};
use crate::storage::store::Store;
use crate::storage::tables::CONFIG;

/// One line of a JSON Lines export.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ExportLine {
    /// The header: store format.
    Store {
        /// The store format.
        format: u32,
    },
    /// A setting.
    Config {
        /// Its name.
        name: String,
        /// Its value.
        value: u64,
    },
    /// A scope's declared vector dimension, before its memories; only for a scope that has
    /// one (it stored a vector).
    Vectors {
        /// The scope.
        scope: String,
        /// The dimension of its vectors.
        dimension: u32,
    },
    /// A memory with its whole envelope.
    Memory {
        /// The scope it belongs to.
        scope: String,
        /// The memory.
        #[serde(flatten)]
        memory: Memory,
        /// Its embedding, when it has one (absent in exports before vectors: they still import).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        vector: Option<Vec<f32>>,
    },
    /// A summary node.
    Summary {
        /// The scope it belongs to.
        scope: String,
        /// First position.
        lo: u64,
        /// One past the last position.
        hi: u64,
        /// The summary.
        #[serde(flatten)]
        summary: Summary,
    },
}

/// One scope of a JSON Lines import, as read.
#[derive(Default)]
struct ScopeContent {
    memories: Vec<Memory>,
    summaries: Vec<(Block, Summary)>,
    dimension: Option<u32>,
    vectors: Vec<(u64, Vec<f32>)>,
}

/// A JSON Lines import, read and checked line by line before anything is written.
#[derive(Default)]
struct JsonlImport {
    configs: Vec<(String, u64)>,
    scopes: BTreeMap<String, ScopeContent>,
}

impl JsonlImport {
    /// Checks one parsed line and keeps it; the error says why (the caller adds the line).
    fn take(&mut self, parsed: ExportLine) -> std::result::Result<(), String> {
        let text = |t: &str| validate_line(t, MAX_ENTRY_BYTES).map_err(|e| e.to_string());
        let scope_ok = |s: &str| validate_scope(s).map_err(|e| e.to_string());
        match parsed {
            ExportLine::Store { format } => {
                if format > crate::storage::schema::STORE_FORMAT {
                    return Err(format!("export format {format} is newer than this somna"));
                }
            }
            ExportLine::Config { name, value } => {
                validate_config(&name, &value.to_string()).map_err(|e| e.to_string())?;
                self.configs.push((name, value));
            }
            ExportLine::Vectors { scope, dimension } => {
                scope_ok(&scope)?;
                if dimension == 0 || dimension as usize > MAX_DIMENSION {
                    return Err(format!(
                        "dimension {dimension} is outside 1 to {MAX_DIMENSION}"
                    ));
                }
                self.scopes.entry(scope).or_default().dimension = Some(dimension);
            }
            ExportLine::Memory {
                scope,
                memory,
                vector,
            } => {
                scope_ok(&scope)?;
                text(&memory.text)?;
                let e = self.scopes.entry(scope).or_default();
                if memory.id != e.memories.len() as u64 {
                    return Err(format!(
                        "memory #{} is out of order (expected #{})",
                        memory.id,
                        e.memories.len()
                    ));
                }
                if let Some(v) = vector {
                    vector::validate(&v).map_err(|e| e.to_string())?;
                    e.vectors.push((memory.id, v));
                }
                e.memories.push(memory);
            }
            ExportLine::Summary {
                scope,
                lo,
                hi,
                summary,
            } => {
                scope_ok(&scope)?;
                text(&summary.text)?;
                let size = hi.saturating_sub(lo);
                if size < 2 || !size.is_power_of_two() {
                    return Err(format!("{lo}..{hi} is not a block"));
                }
                let b = Block::new(size.trailing_zeros() as u8, lo).map_err(|e| e.to_string())?;
                self.scopes
                    .entry(scope)
                    .or_default()
                    .summaries
                    .push((b, summary));
            }
        }
        Ok(())
    }
}

/// What a JSON Lines import brought in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportSummary {
    /// Scopes created.
    pub scopes: usize,
    /// Memories imported.
    pub memories: u64,
    /// Summaries imported.
    pub summaries: u64,
}

impl Store {
    /// Writes every setting, scope, memory and summary as JSON Lines.
    ///
    /// From a file the lines are streamed as they are read. On a server the read may run again
    /// (after a lost connection or a serialization failure), and written output cannot be taken
    /// back: the lines are held in memory until the read has succeeded, then written (the
    /// export's size in memory, once).
    pub fn export(&self, out: &mut dyn Write) -> Result<u64> {
        let scopes = self.read(|r| r.scopes())?;
        let server = self.is_server();
        let mut held: Vec<u8> = Vec::new();
        let n = self.audited(
            "export",
            &scopes.join(","),
            |r| {
                if server {
                    held.clear();
                    export_lines(r, &mut held)
                } else {
                    export_lines(r, out)
                }
            },
            |n| vec![format!("{n} lines")],
        )?;
        out.write_all(&held)?;
        Ok(n)
    }

    /// Imports a JSON Lines export. Every line is parsed and checked first; the scopes it names
    /// must be empty here; then everything is written in one transaction. An input with no line
    /// (or only blank ones) is refused, as [`Store::import_lines`] refuses one.
    pub fn import_jsonl(&self, input: &mut dyn BufRead) -> Result<ImportSummary> {
        let mut read = JsonlImport::default();
        let mut line = String::new();
        let (mut n, mut lines) = (0usize, 0usize);
        loop {
            line.clear();
            let got = input
                .read_line(&mut line)
                .map_err(|e| Error::invalid("import", format!("line {}: {e}", n + 1)))?;
            if got == 0 {
                break;
            }
            n += 1;
            if line.trim().is_empty() {
                continue;
            }
            lines += 1;
            let bad = |why: String| Error::invalid("import", format!("line {n}: {why}"));
            let parsed: ExportLine = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
            read.take(parsed).map_err(bad)?;
        }
        let mut report = ImportSummary::default();
        self.write(|tx| {
            // As the dated lines' import: an empty input is a mistake (the wrong file, a
            // truncated pipe), never a success that imported nothing. Checked here so that a
            // closed or read-only store says so first.
            if lines == 0 {
                return Err(Error::invalid(
                    "import",
                    "the input is empty (an export holds at least its store line)",
                ));
            }
            if !read.configs.is_empty() {
                tx.require_admin("change settings")?;
                for (name, value) in &read.configs {
                    CONFIG.put(&mut *tx.tx, name.as_str(), &encode(value)?)?;
                }
            }
            report = ImportSummary::default();
            for (scope, c) in &read.scopes {
                report.scopes += 1;
                report.memories += c.memories.len() as u64;
                report.summaries += c.summaries.len() as u64;
                tx.restore_scope_from(scope, &c.memories, &c.summaries)?;
                vector::restore(tx, scope, c.dimension, &c.vectors)?;
            }
            Ok(())
        })?;
        Ok(report)
    }
}

/// The lines of an export of the snapshot `r`, written to `out`; how many.
fn export_lines(r: &crate::storage::txn::ReadTxn, out: &mut dyn Write) -> Result<u64> {
    let mut n = 0u64;
    let mut put = |line: &ExportLine, out: &mut dyn Write| -> Result<()> {
        let s = serde_json::to_string(line).map_err(|e| Error::Io(e.into()))?;
        out.write_all(crate::domain::text::json_safe(&s).as_bytes())?;
        out.write_all(b"\n")?;
        n += 1;
        Ok(())
    };
    put(
        &ExportLine::Store {
            format: crate::storage::schema::STORE_FORMAT,
        },
        out,
    )?;
    for name in CONFIG_NAMES {
        if let Some(v) = CONFIG.get(r.tx, name)? {
            let value: u64 = crate::storage::codec::decode("config", name, &v)?;
            put(
                &ExportLine::Config {
                    name: name.to_string(),
                    value,
                },
                out,
            )?;
        }
    }
    // Streamed straight from the tables: nothing is collected.
    for scope in r.scopes()? {
        let Some(meta) = r.scope_meta(&scope)? else {
            continue;
        };
        let dimension = vector::dimension(r.tx, meta.id)?;
        if let Some(dimension) = dimension {
            let scope = scope.clone();
            put(&ExportLine::Vectors { scope, dimension }, out)?;
        }
        each_memory(r.tx, meta.id, 0, meta.count, |m| {
            let vector = match dimension {
                Some(_) => vector::get(&*r.tx, meta.id, m.id)?,
                None => None,
            };
            put(
                &ExportLine::Memory {
                    scope: scope.clone(),
                    memory: m,
                    vector,
                },
                out,
            )
        })?;
        each_node(r.tx, meta.id, |node| {
            put(
                &ExportLine::Summary {
                    scope: scope.clone(),
                    lo: node.block.lo(),
                    hi: node.block.hi(),
                    summary: node.summary,
                },
                out,
            )
        })?;
    }
    Ok(n)
}
