//! What a tool is: a [`ToolSpec`] (name, title, annotations, schemas, group, and how a call's
//! arguments become a CLI command), how `tools/list` describes it (its input schema made strict,
//! its output schema derived from its verb's typed result), and which tools a server offers.
//! The tools themselves are `catalog.rs`.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};
use somna::Error;

use super::args::Call;

/// Which `--tools` group a tool belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Group {
    /// Memory: wake, note, recall, search, zoom, show, why, pending, nap, forget, decide.
    Core,
    /// Conversation sessions: session_load, session_save, session_append, session_list,
    /// session_history.
    Sessions,
    /// Administration (listed only for the admin): redact, grant, revoke, grants, stats,
    /// verify, policy.
    Admin,
    /// Every group.
    All,
}

/// One tool.
pub struct ToolSpec {
    /// Its name: the CLI verb (`session_load` for `session load`).
    pub name: &'static str,
    /// A plain-words title.
    pub title: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// Its `--tools` group.
    pub group: Group,
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
    /// `idempotentHint`.
    pub idempotent: bool,
    /// The JSON Schema of its arguments: that of the CLI verb's argument struct ([`super::args`]).
    pub input: fn() -> Arc<JsonObject>,
    /// The JSON Schema of its `structuredContent` (the CLI's `--json`; an array is under
    /// `result`): that of its verb's typed result (`typed_output::<Out>`), the same type the
    /// verb returns and the CLI prints with `--json`, so the two cannot drift.
    pub output: fn() -> JsonObject,
    /// Whether it takes a byte budget for its lines (wake, recall, search): a result over the
    /// server's budget is asked for again with fewer lines, instead of refused.
    pub shrinks: bool,
    /// How to ask it for less, in the refusal of a result over the budget.
    pub narrow: &'static str,
    /// Its arguments as the CLI command it runs (given the server's result budget in bytes).
    /// Each parses the JSON into the verb's struct; nothing goes through clap.
    pub build: fn(Value, usize) -> Result<Call, Error>,
}

impl ToolSpec {
    /// The tool as `tools/list` describes it.
    pub fn tool(&self) -> Tool {
        let annotations = ToolAnnotations::with_title(self.title)
            .read_only(self.read_only)
            .destructive(self.destructive)
            .idempotent(self.idempotent)
            .open_world(false);
        let mut input = Value::Object((*(self.input)()).clone());
        strict(&mut input);
        let input = match input {
            Value::Object(m) => Arc::new(m),
            _ => (self.input)(),
        };
        let mut t = Tool::new(self.name, self.description, input)
            .with_title(self.title)
            .with_annotations(annotations);
        let mut schema = typed_schema((self.output)());
        if !self.read_only {
            cuttable(&mut schema);
        }
        t.output_schema = Some(Arc::new(schema));
        t
    }
}

/// A write's output schema as its result over the budget may be: its long fields left out and
/// named in `cut`, so that only the fields that cannot be long (numbers and booleans) stay
/// required; in each branch of a union.
fn cuttable(schema: &mut JsonObject) {
    if let Some(Value::Array(branches)) = schema.get_mut("anyOf") {
        for b in branches {
            if let Value::Object(b) = b {
                cuttable(b);
            }
        }
        return;
    }
    let short = |t: &Value| matches!(t.as_str(), Some("integer" | "number" | "boolean"));
    let props = schema.get("properties").cloned().unwrap_or_default();
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|f| {
            let ty = f
                .as_str()
                .and_then(|f| props.get(f))
                .and_then(|p| p.get("type"));
            ty.is_some_and(short)
        });
    }
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(
            "cut".into(),
            json!({"type": "array", "items": {"type": "string"}}),
        );
    }
}

/// An argument schema as strict validators (the Inspector's `--strict`) want it: an optional
/// argument's `type: [T, "null"]` is `type: T` and `anyOf: [X, {type: null}]` is X (leaving the
/// argument out is how to say none; an explicit null is still accepted), and a bare `true` as
/// array items (any JSON value) is `{"type": "object"}`, since the only such items somna takes
/// are session messages, which are objects.
fn strict(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(types)) = m.get_mut("type") {
                types.retain(|t| t != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    m.insert("type".into(), only);
                }
            }
            let null = json!({"type": "null"});
            if let Some(Value::Array(any)) = m.get("anyOf") {
                let rest: Vec<Value> = any.iter().filter(|x| **x != null).cloned().collect();
                if let [Value::Object(keep)] = rest.as_slice() {
                    let keep = keep.clone();
                    m.remove("anyOf");
                    for (k, x) in keep {
                        m.entry(k).or_insert(x);
                    }
                }
            }
            if m.get("items") == Some(&Value::Bool(true)) {
                m.insert("items".into(), json!({"type": "object"}));
            }
            m.values_mut().for_each(strict);
        }
        Value::Array(a) => a.iter_mut().for_each(strict),
        _ => {}
    }
}

/// The JSON Schema of a typed result `T`, every subschema inlined (no `$ref`) and every
/// nullable type (`[T, "null"]`) spelled `anyOf` of the two, as the declared fields are.
pub fn typed_output<T: schemars::JsonSchema>() -> JsonObject {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let root = settings.into_generator().into_root_schema_for::<T>();
    let mut v = root.to_value();
    nullable_as_any_of(&mut v);
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// `type: [T, "null"]` as `anyOf: [{type: T}, {type: null}]`, throughout `v`.
fn nullable_as_any_of(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(types)) = m.get("type").cloned() {
                m.remove("type");
                let any: Vec<Value> = types.into_iter().map(|t| json!({ "type": t })).collect();
                m.insert("anyOf".into(), Value::Array(any));
            }
            m.values_mut().for_each(nullable_as_any_of);
        }
        Value::Array(a) => a.iter_mut().for_each(nullable_as_any_of),
        _ => {}
    }
}

/// A typed result's schema as an output schema: an object as it is, anything else (an array)
/// under `result`, as the call returns it; a union (`anyOf`, a result whose shape depends on
/// the arguments) an object schema whose branches are each treated so.
fn typed_schema(mut inner: JsonObject) -> JsonObject {
    inner.remove("$schema");
    if let Some(Value::Array(branches)) = inner.remove("anyOf") {
        let branches: Vec<Value> = branches
            .into_iter()
            .map(|b| match b {
                Value::Object(m) => Value::Object(typed_schema(m)),
                other => other,
            })
            .collect();
        inner.insert("type".into(), json!("object"));
        inner.insert("anyOf".into(), Value::Array(branches));
        return inner;
    }
    if inner.get("type") == Some(&Value::String("object".into())) {
        return inner;
    }
    let mut outer = JsonObject::new();
    outer.insert("type".into(), json!("object"));
    outer.insert("properties".into(), json!({ "result": inner }));
    outer.insert("required".into(), json!(["result"]));
    outer
}

/// Whether `spec` is offered under `--tools groups`, `--read-only` and the caller's rights.
pub fn offered(spec: &ToolSpec, groups: &[Group], read_only: bool, admin: bool) -> bool {
    let in_group = groups.contains(&Group::All) || groups.contains(&spec.group);
    in_group && (spec.read_only || !read_only) && (spec.group != Group::Admin || admin)
}
