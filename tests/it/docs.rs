//! The reference pages generated from the code: `docs/timer-fields.md` and
//! `docs/api.md` from the OpenAPI document the server serves (its routes,
//! and its schemas with their doc comments and limits), `docs/settings.md`
//! from `xtimer_core::config` (every key, its `XTIMER_SECTION__FIELD`
//! variable, its default from `Config::default()` and its doc comment).
//!
//! A page that differs from what the code generates now fails the test;
//! `scripts/docs` (or `XTIMER_BLESS=1 cargo test --test it docs::`)
//! writes them again.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

const REGENERATE: &str = "run scripts/docs (XTIMER_BLESS=1 cargo test --test it docs::) and commit the pages";

/// Checks (or, with `XTIMER_BLESS=1`, writes) each generated page.
#[test]
fn the_generated_reference_pages_match_the_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var("XTIMER_BLESS").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, text) in [("timer-fields.md", timer_fields()), ("api.md", api()), ("settings.md", settings())] {
        let path = root.join("docs").join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk == text {
            continue;
        }
        if bless {
            std::fs::write(&path, &text).unwrap();
        } else {
            stale.push(format!("docs/{name}"));
        }
    }
    assert!(stale.is_empty(), "{} differ from what the code generates: {REGENERATE}", stale.join(", "));
}

const HEADER: &str = "<!-- Generated from the code by tests/it/docs.rs: do not edit; run scripts/docs. -->\n\n";

fn document() -> Value {
    serde_json::to_value(xtimer_webserver::api::document()).unwrap()
}

/// A description on one line, fit for a table cell.
fn cell(text: &str) -> String {
    let joined = text.split('\n').map(str::trim).collect::<Vec<_>>().join(" ");
    joined.replace('|', "\\|")
}

fn schema_name(reference: &str) -> &str {
    reference.rsplit('/').next().unwrap_or(reference)
}

/// What a property's schema takes, in words; `link` renders a schema name.
fn type_of(schema: &Value, link: &dyn Fn(&str) -> String) -> String {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return link(schema_name(r));
    }
    if let Some(items) = schema.get("oneOf").and_then(Value::as_array) {
        let kinds: Vec<String> =
            items.iter().filter(|i| i.get("type") != Some(&Value::from("null"))).map(|i| type_of(i, link)).collect();
        return kinds.join(" or ");
    }
    let kinds: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
        _ => vec![],
    };
    let mut words: Vec<String> = Vec::new();
    for kind in kinds {
        words.push(match kind {
            "array" => {
                format!("array of {}", schema.get("items").map_or("any".into(), |i| type_of(i, link)))
            }
            "object" => match schema.get("additionalProperties") {
                Some(v @ Value::Object(_)) => format!("object of {}", type_of(v, link)),
                _ => "object".into(),
            },
            "string" if schema.get("format").and_then(Value::as_str) == Some("date-time") => "string (RFC 3339)".into(),
            other => other.into(),
        });
    }
    if words.is_empty() {
        "any".into()
    } else {
        words.join(" or ")
    }
}

/// A property's description: its own, or its `$ref`'s inside a `oneOf`.
fn description_of(schema: &Value) -> String {
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        return d.to_owned();
    }
    schema
        .get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|i| i.get("description").and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned()
}

/// Whether a property may be null or left out.
fn required(schema: &Value, name: &str) -> bool {
    schema.get("required").and_then(Value::as_array).is_some_and(|r| r.iter().any(|n| n == name))
}

/// One schema as a Markdown section: its description and a table of its
/// fields.
fn schema_section(name: &str, schema: &Value, level: &str, link: &dyn Fn(&str) -> String) -> String {
    let mut out = format!("{level} {name}\n\n");
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        out += &format!("{}\n\n", d.trim());
    }
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    if properties.is_empty() {
        if let Some(items) = schema.get("oneOf").and_then(Value::as_array) {
            out += &format!("One of: {}.\n\n", items.iter().map(|i| type_of(i, link)).collect::<Vec<_>>().join(", "));
        } else {
            out += &format!("Type: {}.\n\n", type_of(schema, link));
        }
        return out;
    }
    out += "| field | type | required | meaning, limits, default |\n|---|---|---|---|\n";
    for (field, property) in properties {
        let needed = if required(schema, field) { "yes" } else { "no" };
        out += &format!(
            "| `{field}` | {} | {needed} | {} |\n",
            cell(&type_of(property, link)),
            cell(&description_of(property))
        );
    }
    out + "\n"
}

/// The schemas `name` names, itself first, each once.
fn reachable(schemas: &Map<String, Value>, name: &str, seen: &mut Vec<String>) {
    if seen.iter().any(|s| s == name) {
        return;
    }
    seen.push(name.to_owned());
    let Some(schema) = schemas.get(name) else { return };
    let mut refs = Vec::new();
    collect_refs(schema, &mut refs);
    for r in refs {
        reachable(schemas, &r, seen);
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(schema_name(r).to_owned()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

fn anchor(name: &str) -> String {
    name.to_lowercase().replace(|c: char| !c.is_alphanumeric() && c != '-' && c != '_', "")
}

/// `docs/timer-fields.md`: every field of a timer (`createTimer`'s body,
/// `Timer` in the OpenAPI document) and of the objects it holds.
fn timer_fields() -> String {
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let mut names = Vec::new();
    reachable(schemas, "Timer", &mut names);
    let link = |n: &str| format!("[`{n}`](#{})", anchor(n));
    let mut out = String::from(HEADER);
    out += "# Timer fields\n\n\
            Every field of a timer, as `createTimer` takes it (and `createTimers`, `applyTimers` and \
            `xtimer apply` files, each item), with its limits and default; `updateTimer` takes the same \
            fields, each optional, with `id` and `app`. Field names are exact (camelCase; \
            `notifyHTTPParam` with capitals). A timer has exactly one schedule: `cron`, `runAt` or \
            `everyMs`. What the fields do, with examples: [timers.md](timers.md); every route: \
            [api.md](api.md).\n\n";
    for name in names {
        out += &schema_section(&name, &schemas[&name], "##", &link);
    }
    out.trim_end().to_owned() + "\n"
}

/// `docs/api.md`: every route the server serves, with its query
/// parameters, body and reply, then every schema they name.
fn api() -> String {
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let link = |n: &str| format!("[`{n}`](#{})", anchor(n));
    let mut out = String::from(HEADER);
    out += "# API reference\n\n\
            Every route, from the OpenAPI 3.1 document the server serves at `GET /openapi.json`. \
            The timer API answers under both `/api/xtimer/...` and `/xtimer/...` (listed once, under \
            `/api/xtimer`); its replies are the envelope `{\"code\": 0, \"msg\": \"ok\", \"result\": ...}`, \
            and on an error `code` is the HTTP status and `msg` names the field and the problem. The \
            `/v1` task API is wire-compatible with asyncflow workers. What the timer routes do, with \
            examples: [timers.md](timers.md); a timer's fields: [timer-fields.md](timer-fields.md).\n\n";
    let mut sections: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (path, item) in paths {
        if path.starts_with("/xtimer/") {
            continue;
        }
        let group = if path.starts_with("/api/xtimer/") {
            "1. The timer API"
        } else if path.starts_with("/v1/") {
            "2. The task API (/v1)"
        } else {
            "3. Operating routes and the console"
        };
        for (method, op) in item.as_object().unwrap() {
            sections.entry(group).or_default().push(route(method, path, op, &link));
        }
    }
    for (group, routes) in sections {
        out += &format!("## {}\n\n", group.split_once(". ").unwrap().1);
        for r in routes {
            out += &r;
        }
    }
    out += "## Schemas\n\nThe bodies and results named above.\n\n";
    for (name, schema) in schemas {
        out += &schema_section(name, schema, "###", &link);
    }
    out.trim_end().to_owned() + "\n"
}

fn route(method: &str, path: &str, op: &Value, link: &dyn Fn(&str) -> String) -> String {
    let mut out = format!("### {} `{path}`\n\n", method.to_uppercase());
    if let Some(s) = op.get("summary").and_then(Value::as_str) {
        out += &format!("{}\n\n", cell(s));
    }
    if let Some(params) = op.get("parameters").and_then(Value::as_array).filter(|p| !p.is_empty()) {
        out += "| query | type | required | meaning |\n|---|---|---|---|\n";
        for p in params {
            out += &format!(
                "| `{}` | {} | {} | {} |\n",
                p["name"].as_str().unwrap_or_default(),
                cell(&type_of(&p["schema"], link)),
                if p["required"] == Value::Bool(true) { "yes" } else { "no" },
                cell(p.get("description").and_then(Value::as_str).unwrap_or_default())
            );
        }
        out += "\n";
    }
    if let Some(body) = op.pointer("/requestBody/content/application~1json/schema") {
        out += &format!("Body: {} (JSON).\n\n", type_of(body, link));
    }
    if let Some(ok) = op.pointer("/responses/200") {
        let content = ok.get("content").and_then(Value::as_object);
        let reply = match content.and_then(|c| c.iter().next()) {
            Some((kind, c)) if kind == "application/json" => match c.pointer("/schema/properties/result") {
                Some(result) => format!("the envelope, `result`: {}", type_of(result, link)),
                None => c.get("schema").map_or("JSON".into(), |s| type_of(s, link)),
            },
            Some((kind, _)) => format!("`{kind}`"),
            None => "200".into(),
        };
        out += &format!("Reply: {reply}.\n\n");
    } else if let Some((code, r)) = op["responses"].as_object().and_then(|r| r.iter().next()) {
        out += &format!("Reply: {code}, {}.\n\n", r["description"].as_str().unwrap_or_default());
    }
    out
}

/// One struct of `config.rs`: its doc comment and its fields, each with
/// its type and doc comment.
#[derive(Default)]
struct Struct {
    doc: String,
    fields: Vec<(String, String, String)>,
}

/// The structs of `config.rs`'s source, read for their doc comments.
fn config_structs() -> BTreeMap<String, Struct> {
    let source = include_str!("../../core/src/config.rs");
    let mut out = BTreeMap::new();
    let mut doc: Vec<&str> = Vec::new();
    let mut current: Option<(String, Struct)> = None;
    for line in source.lines() {
        let trimmed = line.trim();
        if let Some(text) = trimmed.strip_prefix("///") {
            doc.push(text.strip_prefix(' ').unwrap_or(text));
            continue;
        }
        if trimmed.starts_with("#[") {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("pub struct ") {
            if let Some(name) = rest.strip_suffix(" {") {
                current = Some((name.to_owned(), Struct { doc: doc.join("\n"), fields: Vec::new() }));
            }
        } else if trimmed == "}" {
            if let Some((name, s)) = current.take() {
                out.insert(name, s);
            }
        } else if let (Some((_, s)), Some(rest)) = (current.as_mut(), trimmed.strip_prefix("pub ")) {
            if let Some((field, ty)) = rest.split_once(": ") {
                s.fields.push((field.to_owned(), ty.trim_end_matches(',').to_owned(), doc.join("\n")));
            }
        }
        doc.clear();
    }
    out
}

fn default_text(value: &Value) -> String {
    match value {
        Value::String(s) if s.is_empty() => "empty".into(),
        Value::String(s) => format!("`{s}`"),
        Value::Array(a) if a.is_empty() => "none".into(),
        Value::Object(o) if o.is_empty() => "none".into(),
        other => format!("`{other}`"),
    }
}

/// `docs/settings.md`: every setting.
fn settings() -> String {
    let structs = config_structs();
    let defaults = serde_json::to_value(xtimer_core::config::Config::default()).unwrap();
    let mut out = String::from(HEADER);
    out += "# Settings\n\n\
            Every setting of `xtimer serve`, from `xtimer_core::config`: the key in the TOML file \
            (`--config FILE`, `[section]` then `field = value`), the environment variable that sets \
            it (`XTIMER_SECTION__FIELD`, two underscores; it wins over the file), its default (every \
            setting has one, so `xtimer serve` runs with no file) and what it does. Durations are \
            milliseconds and their names end in `_ms`. How the file, the variables and the flags \
            combine, with examples: [configuration.md](configuration.md).\n\n";
    let top = &structs["Config"];
    for (section, ty, _) in &top.fields {
        let Some(s) = structs.get(ty) else { continue };
        out += &format!("## `[{section}]`\n\n{}\n\n", s.doc.trim());
        out += "| key | environment variable | default | meaning |\n|---|---|---|---|\n";
        for (field, fty, doc) in &s.fields {
            let default = &defaults[section][field];
            let env = format!("XTIMER_{}__{}", section.to_uppercase(), field.to_uppercase());
            out += &format!("| `{section}.{field}` | `{env}` | {} | {} |\n", default_text(default), cell(doc));
            // A map of structs (`[auth.apps.NAME]`): their fields, in the file only.
            if let Some(inner) = fty.strip_prefix("BTreeMap<String, ").and_then(|t| t.strip_suffix('>')) {
                for (sub, _, sub_doc) in structs.get(inner).map(|s| s.fields.as_slice()).unwrap_or_default() {
                    out +=
                        &format!("| `{section}.{field}.NAME.{sub}` | (the file only) | empty | {} |\n", cell(sub_doc));
                }
            }
        }
        out += "\n";
    }
    out.trim_end().to_owned() + "\n"
}
