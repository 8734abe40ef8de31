//! The summary tree: summaries of aligned power-of-two blocks, keyed by (scope id, level,
//! aligned start), and the `pending` table of complete blocks that have none yet. Summaries are
//! disposable: the log is the source of truth. This file reads and renders stored summaries;
//! `prompt.rs` builds merge prompts, `nap.rs` stores and drops summaries (`nap`, `forget`),
//! `view.rs` opens blocks (`zoom`, `why`).

mod nap;
mod prompt;
mod view;

pub use nap::{NapOutcome, Napped};
pub(crate) use prompt::prompts_of;
pub use prompt::{MergePrompt, PromptInput};
pub use view::{Why, ZoomEntry};

use crate::domain::block::Block;
use crate::domain::record::ScopeMeta;
use crate::error::{Error, Result};
use crate::memory::summary::get_summary;
use crate::storage::kv::KvRead;

pub(super) fn check_block(b: Block) -> Result<()> {
    if b.size() < 2 {
        return Err(Error::invalid(
            "block",
            format!("{b} is a single memory, not a block"),
        ));
    }
    Ok(())
}

pub(super) fn scope_or_empty(meta: Option<ScopeMeta>, b: Block) -> Result<ScopeMeta> {
    match meta {
        Some(m) if b.hi() <= m.count => Ok(m),
        m => Err(Error::OutOfRange {
            asked: b.to_string(),
            count: m.map(|m| m.count).unwrap_or(0),
        }),
    }
}

/// The text of the summary at `key`, to take out of the search index; `None` when there is none
/// or it cannot be read (then `verify` reports what the index still holds).
pub(super) fn summary_text(kv: &(impl KvRead + ?Sized), sid: u32, b: Block) -> Option<String> {
    get_summary(kv, sid, b).ok().flatten().map(|s| s.text)
}
