//! Claim-level provenance: a summary is a list of claims, each citing the memories it rests on,
//! written `text [#3, #7]`. Citations are validated when the summary is stored: every cited id
//! lies inside the block, and a summary built from two halves may cite only what the halves
//! cite (their citations carry up). Claims are stored per summary in the `claims` table and
//! shown with the cited records by `why`.

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::domain::block::Block;
use crate::error::{Error, Result};

/// One claim of a summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The claim's words.
    pub text: String,
    /// The memory ids it cites (empty: uncited).
    pub cites: Vec<u64>,
}

fn citation() -> Option<&'static Regex> {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    CELL.get_or_init(|| Regex::new(r"\[\s*#\d+(?:\s*,\s*#\d+)*\s*\]").ok())
        .as_ref()
}

/// Splits a summary into claims: each run of text ending in a citation `[#a, #b]` is a claim
/// citing those ids; text after the last citation is a claim citing nothing.
///
/// ```
/// use somna::text::parse_claims;
/// let c = parse_claims("prefers tabs [#3]; deploys via staging [#5, #7]. Likes tea");
/// assert_eq!(c.len(), 3);
/// assert_eq!((c[0].text.as_str(), c[0].cites.clone()), ("prefers tabs", vec![3]));
/// assert_eq!(c[1].cites, vec![5, 7]);
/// assert!(c[2].cites.is_empty());
/// ```
pub fn parse_claims(text: &str) -> Vec<Claim> {
    let trim = |s: &str| {
        s.trim_matches(|c: char| c.is_whitespace() || ";,.".contains(c))
            .to_string()
    };
    let mut out = Vec::new();
    let mut last = 0;
    if let Some(re) = citation() {
        for m in re.find_iter(text) {
            let words = trim(text.get(last..m.start()).unwrap_or_default());
            let cites = m
                .as_str()
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|d| d.parse::<u64>().ok())
                .collect();
            out.push(Claim { text: words, cites });
            last = m.end();
        }
    }
    let rest = trim(text.get(last..).unwrap_or_default());
    if !rest.is_empty() || out.is_empty() {
        out.push(Claim {
            text: rest,
            cites: Vec::new(),
        });
    }
    out
}

/// Checks the claims of a summary of `block`. `halves` gives, for a summary built from two
/// halves, each half's block and its citations (`None` when that half has no citation data).
pub fn validate_claims(
    block: Block,
    claims: &[Claim],
    halves: &[(Block, Option<Vec<u64>>)],
) -> Result<()> {
    for c in claims {
        for &id in &c.cites {
            if id < block.lo() || id >= block.hi() {
                return Err(Error::invalid(
                    "citation",
                    format!("#{id} is outside the block {block}; cite only memories of the block"),
                ));
            }
            for (h, cites) in halves {
                if let Some(cites) = cites {
                    if h.contains(&Block::single(id)) && !cites.contains(&id) {
                        return Err(Error::invalid(
                            "citation",
                            format!("#{id} is not cited by the half {h}; a summary of two halves may cite only what they cite"),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether any claim cites nothing.
pub fn uncited(claims: &[Claim]) -> bool {
    claims.iter().any(|c| c.cites.is_empty())
}
