//! The plain SQL baseline on the same server, in the peers' row shapes (through the same
//! synchronous `postgres` client somna's server backend uses):
//!
//! - memories as LangGraph's `PostgresStore` keeps items: `store(prefix text, key text, value
//!   jsonb, created_at, updated_at, PRIMARY KEY (prefix, key))`, one autocommitted upsert per
//!   put (its `put`); a memory is key `m` + the zero-padded id, value `{"text", "observed_us"}`,
//!   a summary is key `s` + level + first id, value `{"text"}`. Wake reads the newest key, then
//!   the cover's rows in one `key = ANY($2)` query; recall runs the regex on the server (`~*`).
//! - sessions as the Agents SDK's `SQLAlchemySession`: `agent_sessions(session_id PK, created_at,
//!   updated_at)` and `agent_messages(id serial, session_id, message_data text, created_at)`;
//!   `add_items` appends only the new messages, in one transaction (select the session, insert
//!   it if missing, insert the messages, touch `updated_at`), and `get_items` reads them by
//!   `(created_at, id)`.

use std::collections::HashMap;
use std::fmt::Write as _;

use postgres::{Client, NoTls, Statement};
use somna::text::date_of;

use crate::data::{self, RECALL_BYTES, WAKE_LINES};

/// The schema the baseline's tables live in.
pub const SCHEMA: &str = "bench_sql";

pub fn mem_key(i: u64) -> String {
    format!("m{i:012}")
}

fn sum_key(b: somna::Block) -> String {
    format!("s{:02}.{:012}", b.level(), b.lo())
}

pub fn mem_value(i: u64) -> String {
    serde_json::json!({"text": data::mem_text(i), "observed_us": data::observed(i)}).to_string()
}

/// Connects to `url` (no somna `schema=` parameter) with the baseline's search path.
pub fn connect(url: &str) -> Client {
    let mut c = Client::connect(url, NoTls).expect("connect to the server");
    c.batch_execute(&format!("SET search_path TO {SCHEMA}"))
        .expect("search path");
    c
}

/// Drops and creates the baseline's tables (the DDL LangGraph and the Agents SDK create).
pub fn reset(url: &str) {
    let mut c = Client::connect(url, NoTls).expect("connect to the server");
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA}; SET search_path TO {SCHEMA};
         CREATE TABLE store (
             prefix text NOT NULL, key text NOT NULL, value jsonb NOT NULL,
             created_at timestamptz DEFAULT CURRENT_TIMESTAMP,
             updated_at timestamptz DEFAULT CURRENT_TIMESTAMP,
             PRIMARY KEY (prefix, key));
         CREATE INDEX store_prefix_idx ON store USING btree (prefix text_pattern_ops);
         CREATE TABLE agent_sessions (
             session_id varchar NOT NULL PRIMARY KEY,
             created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
             updated_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP);
         CREATE TABLE agent_messages (
             id serial PRIMARY KEY,
             session_id varchar NOT NULL REFERENCES agent_sessions(session_id) ON DELETE CASCADE,
             message_data text NOT NULL,
             created_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP);
         CREATE INDEX idx_agent_messages_session_time ON agent_messages (session_id, created_at);"
    ))
    .expect("create the baseline's tables");
}

/// One connection of the baseline, its statements prepared once (as psycopg and SQLAlchemy
/// cache theirs).
pub struct Sql {
    pub c: Client,
    put: Statement,
    newest: Statement,
    rows: Statement,
    recall: Statement,
    sel_session: Statement,
    ins_session: Statement,
    ins_message: Statement,
    touch: Statement,
    items: Statement,
}

impl Sql {
    pub fn open(url: &str) -> Sql {
        let mut c = connect(url);
        let mut p = |sql: &str| c.prepare(sql).expect("prepare a statement");
        let put = p(
            "INSERT INTO store (prefix, key, value, created_at, updated_at)
                 VALUES ($1, $2, ($3::text)::jsonb, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
                 ON CONFLICT (prefix, key) DO UPDATE
                 SET value = EXCLUDED.value, updated_at = CURRENT_TIMESTAMP",
        );
        let newest = p(
            "SELECT key FROM store WHERE prefix = $1 AND key >= 'm' AND key < 'n'
                 ORDER BY key DESC LIMIT 1",
        );
        let rows = p(
            "SELECT key, value->>'text', (value->>'observed_us')::int8 FROM store
                 WHERE prefix = $1 AND key = ANY($2)",
        );
        let recall = p(
            "SELECT key, value->>'text', (value->>'observed_us')::int8 FROM store
                 WHERE prefix = $1 AND key >= 'm' AND key < 'n' AND value->>'text' ~* $2
                 ORDER BY key DESC",
        );
        let sel_session = p("SELECT session_id FROM agent_sessions WHERE session_id = $1");
        let ins_session = p("INSERT INTO agent_sessions (session_id) VALUES ($1)");
        let ins_message =
            p("INSERT INTO agent_messages (session_id, message_data) VALUES ($1, $2)");
        let touch =
            p("UPDATE agent_sessions SET updated_at = CURRENT_TIMESTAMP WHERE session_id = $1");
        let items = p(
            "SELECT message_data FROM agent_messages WHERE session_id = $1
                 ORDER BY created_at ASC, id ASC",
        );
        Sql {
            c,
            put,
            newest,
            rows,
            recall,
            sel_session,
            ins_session,
            ins_message,
            touch,
            items,
        }
    }

    /// LangGraph's `put`: one autocommitted upsert.
    pub fn put(&mut self, prefix: &str, key: &str, value: &str) {
        self.c
            .execute(&self.put, &[&prefix, &key, &value])
            .expect("put");
    }

    /// Items under `prefix` (the equal-answer check).
    pub fn count(&mut self, prefix: &str) -> u64 {
        let n: i64 = self
            .c
            .query_one("SELECT count(*) FROM store WHERE prefix = $1", &[&prefix])
            .expect("count")
            .get(0);
        n as u64
    }

    /// Setup: a fully summarized history of `t` memories under `prefix`, 10,000 rows a statement.
    pub fn load_history(&mut self, prefix: &str, t: u64) {
        let mut rows: Vec<(String, String)> = (0..t).map(|i| (mem_key(i), mem_value(i))).collect();
        for b in data::all_blocks(t) {
            rows.push((
                sum_key(b),
                serde_json::json!({"text": data::sum_text(b)}).to_string(),
            ));
        }
        for chunk in rows.chunks(10_000) {
            let keys: Vec<&str> = chunk.iter().map(|r| r.0.as_str()).collect();
            let values: Vec<&str> = chunk.iter().map(|r| r.1.as_str()).collect();
            self.c
                .execute(
                    "INSERT INTO store (prefix, key, value)
                     SELECT $1, k, v::jsonb FROM unnest($2::text[], $3::text[]) AS u(k, v)",
                    &[&prefix, &keys, &values],
                )
                .expect("load the history");
        }
        self.c.batch_execute("ANALYZE store").expect("analyze");
    }

    /// The same text as somna's `wake_text`: the newest key gives the count, then the
    /// reference cover's rows in one query.
    pub fn wake(&mut self, prefix: &str) -> String {
        let last = self
            .c
            .query_opt(&self.newest, &[&prefix])
            .expect("newest key");
        let t = last.map_or(0, |r| {
            r.get::<_, &str>(0)[1..]
                .parse::<u64>()
                .expect("a memory key")
                + 1
        });
        let cover = somna::cover::cover_all(t, WAKE_LINES)
            .map(|c| c.blocks)
            .unwrap_or_default();
        let keys: Vec<String> = cover
            .iter()
            .map(|&b| {
                if b.size() == 1 {
                    mem_key(b.lo())
                } else {
                    sum_key(b)
                }
            })
            .collect();
        let rows = self
            .c
            .query(&self.rows, &[&prefix, &keys])
            .expect("the cover's rows");
        let mut by_key: HashMap<&str, (&str, Option<i64>)> = HashMap::with_capacity(rows.len());
        for r in &rows {
            by_key.insert(r.get(0), (r.get(1), r.get(2)));
        }
        let mut out = data::wake_begin(t, cover.len());
        for (b, k) in cover.iter().zip(&keys) {
            let (text, us) = by_key.get(k.as_str()).expect("a row of the cover");
            if b.size() == 1 {
                let us = us.expect("observed_us");
                let _ = writeln!(out, "#{} {} {text}", b.lo(), date_of(us));
            } else {
                let _ = writeln!(out, "#{b} {text}");
            }
        }
        out.push_str(data::WAKE_END);
        out
    }

    /// Recall: the regex on the server over the memories' text, newest first; the newest
    /// matches that fit the byte budget, oldest first, and the number of matches.
    pub fn recall(&mut self, prefix: &str, pattern: &str) -> (u64, Vec<String>) {
        let rows = self
            .c
            .query(&self.recall, &[&prefix, &pattern])
            .expect("recall");
        let total = rows.len() as u64;
        let mut kept = Vec::new();
        let mut bytes = 0usize;
        for r in &rows {
            let key: &str = r.get(0);
            let id: u64 = key[1..].parse().expect("a memory key");
            let text: &str = r.get(1);
            let line = format!("#{id} {} {text}", date_of(r.get(2)));
            if bytes + line.len() >= RECALL_BYTES {
                break;
            }
            bytes += line.len() + 1;
            kept.push(line);
        }
        kept.reverse();
        (total, kept)
    }

    /// `SQLAlchemySession.add_items(new)`: one transaction.
    pub fn add_items(&mut self, session: &str, new: &[String]) {
        let mut tx = self.c.transaction().expect("begin");
        let exists = tx
            .query_opt(&self.sel_session, &[&session])
            .expect("select the session")
            .is_some();
        if !exists {
            tx.execute(&self.ins_session, &[&session])
                .expect("insert the session");
        }
        for m in new {
            tx.execute(&self.ins_message, &[&session, m])
                .expect("insert a message");
        }
        tx.execute(&self.touch, &[&session])
            .expect("touch the session");
        tx.commit().expect("commit");
    }

    /// `SQLAlchemySession.get_items()`.
    pub fn get_items(&mut self, session: &str) -> Vec<String> {
        self.c
            .query(&self.items, &[&session])
            .expect("get items")
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect()
    }
}
