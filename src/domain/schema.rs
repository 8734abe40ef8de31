//! JSON Schemas for the fields of the library's results that hold values deriving none (a
//! memory, a wake item, a merge prompt), with the feature `schemars`: the MCP server's output
//! schemas are derived from the results themselves ([`crate::SearchResult`],
//! [`crate::WakeView`], [`crate::Recall`]), and these say "an object" where the value inside is
//! the library's own serialization.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

/// Any JSON object: a library value serialized as it is (a memory, a wake item, a merge
/// prompt).
pub struct AnyObject;

/// A list of [`AnyObject`].
pub type Objects = Vec<AnyObject>;

impl JsonSchema for AnyObject {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Object".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object"})
    }
}
