//! `GET /openapi.json`: an OpenAPI 3.1 document of both APIs (the timer API
//! under `/api/xtimer` and `/xtimer`, the asyncflow task API under `/v1`,
//! and the operating routes). Its paths come from the handlers, each
//! documented where it is written (`#[utoipa::path]`) and routed with its
//! documentation ([`crate::api::routes`]); its schemas are derived
//! (`utoipa::ToSchema`) from the types those handlers read and write.
//! [`finish`] adds what no handler says: the title, the envelope around a
//! timer route's reply ([`crate::replies::ENVELOPED`]), the error reply
//! every route may give, and the numbers behind the doc comments' links.

pub mod links;
pub mod schemas;

use std::collections::BTreeSet;

use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{
    Components, ContentBuilder, InfoBuilder, OpenApi, OpenApiVersion, Ref, RefOr, ResponseBuilder, Schema,
};

use crate::prefixes::operations;
use crate::replies::ENVELOPED;

/// The document of the handlers' `paths`, as served: its title and
/// version; each enveloped reply wrapped in the envelope; the error reply
/// (`default`) on every operation; the `Error` and `Object` schemas; the
/// doc comments' rustdoc links read as the numbers and names they stand
/// for (`constants`: the handlers' own, beside the core's).
pub fn finish(mut doc: OpenApi, constants: &[(&'static str, String)]) -> OpenApi {
    doc.openapi = OpenApiVersion::Version31;
    doc.info = InfoBuilder::new()
        .title("xtimer")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "A distributed cron/timer service. Timer API replies are the envelope {code, msg, result}; \
             the /v1 task API is wire-compatible with asyncflow workers.",
        ))
        .build();
    for item in doc.paths.paths.values_mut() {
        for op in operations(item) {
            envelope_reply(op);
            let error = ResponseBuilder::new()
                .description("an error: code is the HTTP status, msg names the field and the problem, result null")
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))).build(),
                );
            op.responses.responses.insert("default".into(), error.build().into());
        }
    }
    let components = doc.components.get_or_insert_with(Components::new);
    components.schemas.insert("Error".into(), error_schema());
    components.schemas.insert("Object".into(), ObjectBuilder::new().schema_type(Type::Object).into());
    let mut value = serde_json::to_value(&doc).expect("the document serializes");
    links::resolve(&mut value, constants);
    named_only(&mut value);
    serde_json::from_value(value).expect("the document reads back")
}

/// Leaves out the schemas no route names, directly or through another
/// schema (a generic reply's argument, collected with it, that the reply
/// holds inline).
fn named_only(doc: &mut serde_json::Value) {
    let mut named: BTreeSet<String> = BTreeSet::new();
    let mut next = Vec::new();
    refs(&doc["paths"], &mut next);
    while let Some(name) = next.pop() {
        if named.insert(name.clone()) {
            refs(&doc["components"]["schemas"][&name], &mut next);
        }
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        schemas.retain(|name, _| named.contains(name));
    }
}

/// The schema names `value`'s `$ref`s name.
fn refs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(r)) = map.get("$ref") {
                out.extend(r.strip_prefix("#/components/schemas/").map(str::to_owned));
            }
            map.values().for_each(|v| refs(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// A 200 described [`ENVELOPED`]: its JSON schema becomes the envelope's
/// `result`.
fn envelope_reply(op: &mut Operation) {
    let Some(RefOr::T(ok)) = op.responses.responses.get_mut("200") else { return };
    if ok.description != ENVELOPED {
        return;
    }
    let Some(json) = ok.content.get_mut("application/json") else { return };
    let Some(result) = json.schema.take() else { return };
    json.schema = Some(
        ObjectBuilder::new()
            .property("code", ObjectBuilder::new().schema_type(Type::Integer))
            .property("msg", ObjectBuilder::new().schema_type(Type::String))
            .property("result", result)
            .required("code")
            .required("msg")
            .into(),
    );
}

/// The error envelope: `code` is the HTTP status, `result` null.
fn error_schema() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("code", ObjectBuilder::new().schema_type(Type::Integer))
        .property("msg", ObjectBuilder::new().schema_type(Type::String))
        .property("result", ObjectBuilder::new().schema_type(Type::Null))
        .required("code")
        .required("msg")
        .into()
}
