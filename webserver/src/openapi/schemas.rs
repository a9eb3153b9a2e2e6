//! Schemas the wire types name by hand (`#[schema(schema_with = ...)]`):
//! the spec's, for the route files' time fields.

pub use xtimer_core::spec::schemas::*;
