//! The LoCoMo conversations (read where they lie, never copied: the data is licensed
//! non-commercial) and the retrieval measures the field reports at turn level.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One conversation: its turns in order (`speaker: text`) and its questions.
pub struct Conversation {
    /// The file's stem (`26`, `30`, ...).
    pub name: String,
    pub turns: Vec<String>,
    pub questions: Vec<Question>,
}

/// A question of categories 1-4 with evidence: the indexes of its evidence turns.
pub struct Question {
    pub text: String,
    pub evidence: HashSet<usize>,
}

/// The data folder: `$SOMNA_LOCOMO_DIR`, else `../shared/data/locomo-dev` beside the repo.
pub fn data_dir() -> PathBuf {
    std::env::var_os("SOMNA_LOCOMO_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/locomo-dev")
        })
}

/// Every conversation of the folder, by file name; `None` when it holds none.
pub fn load(dir: &Path) -> Option<Vec<Conversation>> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let convs: Vec<Conversation> = files.iter().filter_map(|f| parse(f)).collect();
    (!convs.is_empty()).then_some(convs)
}

/// A turn as one memory: `speaker: text`, control characters (tabs, newlines) as spaces.
fn turn_text(t: &Value) -> String {
    let s = format!(
        "{}: {}",
        t["speaker"].as_str().unwrap_or(""),
        t["text"].as_str().unwrap_or("")
    );
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_string()
}

fn parse(path: &Path) -> Option<Conversation> {
    let v: Value = serde_json::from_str(&fs::read_to_string(path).ok()?).ok()?;
    let obj = v.as_object()?;
    let mut sessions: Vec<(u32, &Vec<Value>)> = obj
        .iter()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix("session_")?.parse().ok()?;
            Some((n, v.as_array()?))
        })
        .collect();
    sessions.sort_by_key(|s| s.0);
    let (mut turns, mut dia_ids) = (Vec::new(), Vec::new());
    for t in sessions.iter().flat_map(|s| s.1.iter()) {
        turns.push(turn_text(t));
        dia_ids.push(t["dia_id"].as_str().unwrap_or("").to_string());
    }
    let questions = obj.get("qa")?.as_array()?.iter().filter_map(|q| {
        let cat = q["category"].as_u64()?;
        let ev = q["evidence"].as_array()?;
        if !(1..=4).contains(&cat) || ev.is_empty() {
            return None;
        }
        // A few evidence entries hold two ids ("D8:6; D9:17").
        let evidence = ev
            .iter()
            .filter_map(Value::as_str)
            .flat_map(|e| e.split([';', ',', ' ']))
            .filter_map(|id| dia_ids.iter().position(|d| d == id.trim()))
            .collect();
        Some(Question {
            text: q["question"].as_str()?.to_string(),
            evidence,
        })
    });
    Some(Conversation {
        name: path.file_stem()?.to_string_lossy().into_owned(),
        questions: questions.collect(),
        turns,
    })
}

/// The measures of one ranking (or their sums over questions).
#[derive(Debug, Clone, Copy, Default)]
pub struct Scores {
    pub questions: usize,
    pub any5: f64,
    pub any10: f64,
    pub any20: f64,
    pub all10: f64,
    pub ndcg10: f64,
}

impl Scores {
    /// The measures of `ranked` (turn indexes, best first) for a question.
    pub fn of(ranked: &[usize], evidence: &HashSet<usize>) -> Scores {
        let any = |k: usize| {
            f64::from(u8::from(
                ranked.iter().take(k).any(|t| evidence.contains(t)),
            ))
        };
        let found10 = ranked
            .iter()
            .take(10)
            .filter(|t| evidence.contains(t))
            .count();
        let dcg: f64 = ranked
            .iter()
            .take(10)
            .enumerate()
            .filter(|(_, t)| evidence.contains(t))
            .map(|(i, _)| 1.0 / (i as f64 + 2.0).log2())
            .sum();
        let ideal: f64 = (0..evidence.len().min(10))
            .map(|i| 1.0 / (i as f64 + 2.0).log2())
            .sum();
        Scores {
            questions: 1,
            any5: any(5),
            any10: any(10),
            any20: any(20),
            all10: f64::from(u8::from(!evidence.is_empty() && found10 == evidence.len())),
            ndcg10: if ideal > 0.0 { dcg / ideal } else { 0.0 },
        }
    }

    pub fn add(&mut self, o: &Scores) {
        self.questions += o.questions;
        self.any5 += o.any5;
        self.any10 += o.any10;
        self.any20 += o.any20;
        self.all10 += o.all10;
        self.ndcg10 += o.ndcg10;
    }

    /// Sums as means over the questions.
    pub fn mean(&self) -> Scores {
        let n = self.questions.max(1) as f64;
        Scores {
            questions: self.questions,
            any5: self.any5 / n,
            any10: self.any10 / n,
            any20: self.any20 / n,
            all10: self.all10 / n,
            ndcg10: self.ndcg10 / n,
        }
    }

    /// A Markdown table row after `name`.
    pub fn row(&self, name: &str) -> String {
        let m = self.mean();
        format!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            m.questions, m.any5, m.any10, m.any20, m.all10, m.ndcg10
        )
    }
}

/// The header of the tables [`Scores::row`] writes.
pub const HEADER: &str = "| retrieval | questions | recall_any@5 | recall_any@10 | recall_any@20 | recall_all@10 | NDCG@10 |\n|---|---|---|---|---|---|---|";
