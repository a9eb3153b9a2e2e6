//! Schemas of time fields, named by hand (`#[schema(schema_with = ...)]`):
//! a time on the wire is RFC 3339 with an offset, or Unix milliseconds.

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

/// [`time`] with what the field means (a `schema_with` schema drops the
/// field's doc comment).
fn time_that(what: &str) -> Schema {
    match time() {
        Schema::OneOf(mut one_of) => {
            one_of.description = Some(format!("{what} RFC 3339 with an offset, or Unix milliseconds."));
            Schema::OneOf(one_of)
        }
        other => other,
    }
}

/// A timer's `runAt`.
pub fn run_at() -> Schema {
    time_that("One-shot time; exactly one of `cron`, `runAt` and `everyMs`.")
}

/// A timer's `anchorAt`.
pub fn anchor_at() -> Schema {
    time_that("Where the interval (`everyMs`) counts from; defaults to `startAt`, else the time of creation.")
}

/// A timer's `startAt`.
pub fn start_at() -> Schema {
    time_that("No scheduled fire before this time; none when absent.")
}

/// A timer's `endAt`.
pub fn end_at() -> Schema {
    time_that("No scheduled fire at or after this time; none when absent.")
}
