//! Library values inside the verbs' typed results whose types derive no JSON Schema (the
//! library derives one, under its `schemars` feature, for the results the verbs return as they
//! are: `Report`, `SessionInfo`, `SearchResult`, ...). A typed result holds each other value in a
//! wrapper whose schema says an object: as it is ([`Object`]), or with its keys sorted at every
//! level ([`Sorted`]), as the results the verbs built as a `serde_json::Value` have always
//! printed them.

#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Serialize, Serializer};

/// A library value (an object) in a typed result, serialized as the library serializes it.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<T: Serialize> Serialize for Object<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// A library value (an object) in a typed result, serialized with its keys sorted at every
/// level.
#[derive(Debug)]
pub struct Sorted<T>(pub T);

impl<T: Serialize> Serialize for Sorted<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = serde_json::to_value(&self.0).map_err(serde::ser::Error::custom)?;
        v.serialize(s)
    }
}

/// The schema of both wrappers: an object.
#[cfg(feature = "mcp")]
fn object_schema() -> schemars::Schema {
    schemars::json_schema!({"type": "object"})
}

/// Both wrappers' schema: an object, inlined.
macro_rules! object_schema_for {
    ($($w:ident),*) => {$(
        #[cfg(feature = "mcp")]
        impl<T> JsonSchema for $w<T> {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                "Object".into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                object_schema()
            }
        }
    )*};
}

object_schema_for!(Object, Sorted);

/// A verb's result for one scope, or one per scope (`--all`, `--scope a,b`): an object, or an
/// array of them (which an MCP tool call returns under `result`).
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(untagged)]
pub enum OneOrMany<T, U = T> {
    /// One scope's.
    One(T),
    /// One per scope, in the order the scopes were named (`--all`: by name).
    Many(Vec<U>),
}
