//! How a handler's documentation (`#[utoipa::path(responses(...))]`)
//! names its reply, so the OpenAPI document says it as the wire does:
//!
//! - `(status = 200, description = ENVELOPED, body = T)`: the envelope
//!   `{"code", "msg", "result"}` with `T` as its `result` (the document
//!   wraps `T` in it);
//! - `(status = 200, description = OK, body = T)`: `T` itself (the `/v1`
//!   task API, whose replies are asyncflow's), or [`AnyObject`];
//! - `(status = 200, description = OK, content_type = "text/plain")`: text.
//!
//! Every route also answers errors in the envelope; the document adds
//! that reply (`default`) to each.

use std::borrow::Cow;

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// The description of a reply that is the envelope around its body.
pub const ENVELOPED: &str = "the envelope, result as below";

/// The description of any other successful reply.
pub const OK: &str = "ok";

/// The description of `GET /`'s redirect.
pub const REDIRECT: &str = "a redirect (Location: /ui) to the web console";

/// A JSON object of any shape (the schema `Object`).
pub struct AnyObject;

impl utoipa::PartialSchema for AnyObject {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new().schema_type(Type::Object).into()
    }
}

impl utoipa::ToSchema for AnyObject {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Object")
    }
}
