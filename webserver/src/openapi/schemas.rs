//! Schemas the wire types name by hand (`#[schema(schema_with = ...)]`),
//! kept apart from the document so the route files can name them without
//! importing it.

use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type};

/// A time on the wire: RFC 3339 with an offset, or Unix milliseconds.
pub fn time() -> Schema {
    let text =
        ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)));
    let millis =
        ObjectBuilder::new().schema_type(Type::Integer).format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)));
    Schema::OneOf(
        OneOfBuilder::new()
            .item(text)
            .item(millis)
            .description(Some("RFC 3339 with an offset, or Unix milliseconds"))
            .build(),
    )
}
