//! `GET /openapi.json`: the document parses as OpenAPI 3.1, every `$ref`
//! resolves, every documented route is served, and every route the router
//! serves is documented with the methods it takes.

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;
use xtimer_core::config::ServerConfig;

use crate::helpers::spawn_app;

/// (method, path) of every operation in the document.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().unwrap().keys() {
            out.insert((method.to_uppercase(), path.clone()));
        }
    }
    out
}

fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                out.push(r.clone());
            }
            map.values().for_each(|v| refs(v, out));
        }
        Value::Array(list) => list.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_is_openapi_3_1_and_every_documented_route_is_served() {
    let app = spawn_app().await;
    let doc = app.get("/openapi.json").await.body;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{}", doc["openapi"]);
    assert_eq!(doc["info"]["title"], "xtimer");
    // It deserializes into utoipa's model of an OpenAPI document.
    let parsed: utoipa::openapi::OpenApi = serde_json::from_value(doc.clone()).expect("a valid OpenAPI document");
    assert_eq!(parsed.paths.paths.len(), doc["paths"].as_object().unwrap().len());
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(!found.is_empty());
    for r in found {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{r}"));
        assert!(doc["components"]["schemas"][name].is_object(), "{r} resolves");
    }
    // The receiver's side (API 1e) is described.
    let schemas = &doc["components"]["schemas"];
    for (schema, field) in [
        ("Notify", "template"),
        ("Notify", "example"),
        ("Retry", "noRetryStatuses"),
        ("TimerView", "pauseReason"),
        ("TimerView", "onMissed"),
        ("Timer", "onLate"),
        ("LateAlert", "thresholdMs"),
        ("ExampleRequest", "headers"),
    ] {
        assert!(schemas[schema]["properties"][field].is_object(), "{schema}.{field} is documented");
    }
    let mut ids = BTreeSet::new();
    for (method, path) in operations(&doc) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        assert!(ids.insert(op["operationId"].as_str().unwrap().to_owned()), "unique operationId: {op}");
        let request = Request::builder().method(method.as_str()).uri(&path).body(Body::empty()).unwrap();
        let response = app.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}: {text}");
        assert!(!text.contains("no route for"), "{method} {path} is documented but not served: {text}");
    }
}

/// The paths an axum router routes, as its `Debug` shows them (`paths:
/// {RouteId(1): "/healthz", ...}`).
fn routed_paths<S>(router: &axum::Router<S>) -> BTreeSet<String> {
    let text = format!("{router:?}");
    let start = text.find("paths: {").expect("the router shows its paths") + "paths: {".len();
    let end = start + text[start..].find('}').expect("the paths end");
    text[start..end]
        .split(", ")
        .filter_map(|entry| Some(entry.split_once(": ")?.1.trim_matches('"').to_owned()))
        .collect()
}

/// Every route the router serves is in the document, with the methods it
/// takes: the router is made of the documented handlers (utoipa-axum),
/// and this compares the two as built, not their source.
#[tokio::test]
async fn every_route_the_router_serves_is_documented() {
    let app = spawn_app().await;
    let doc = app.get("/openapi.json").await.body;
    let documented: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().cloned().collect();
    let (routes, _) = xtimer_webserver::api::routes(&ServerConfig::default()).split_for_parts();
    let served = routed_paths(&routes);
    assert!(served.len() >= 70, "the router's paths are read: {served:?}");
    assert_eq!(served, documented, "served and documented paths differ");
    // A method no route takes answers 405 and names the methods the path takes.
    for (path, item) in doc["paths"].as_object().unwrap() {
        let request = Request::builder().method("PATCH").uri(path).body(Body::empty()).unwrap();
        let response = app.router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED, "PATCH {path}");
        let allow = response.headers()["allow"].to_str().unwrap().to_owned();
        let taken: BTreeSet<String> =
            allow.split(',').map(|m| m.trim().to_lowercase()).filter(|m| m != "head").collect();
        let listed: BTreeSet<String> = item.as_object().unwrap().keys().cloned().collect();
        assert_eq!(taken, listed, "{path}: served with {allow}, documented with {listed:?}");
    }
}

/// The schemas are derived from the types the handlers serve: every key of a
/// real `getTimer` reply and of a real create body is a property of its
/// schema, and a key no type has is not.
#[tokio::test]
async fn the_schemas_are_the_served_types() {
    let app = spawn_app().await;
    let doc = app.get("/openapi.json").await.body;
    let schemas = &doc["components"]["schemas"];
    let body = crate::helpers::cron_timer("billing", "derived");
    let id = app.create_ok(&body).await;
    let view = app.timer(id, "billing").await;
    for (schema, value) in [("TimerView", &view), ("Timer", &body)] {
        let props = schemas[schema]["properties"].as_object().unwrap_or_else(|| panic!("{schema} has properties"));
        for key in value.as_object().unwrap().keys() {
            assert!(props.contains_key(key), "{schema} documents `{key}`: {props:?}");
        }
        assert!(!props.contains_key("noSuchField"));
    }
    // Doc comments of the wire types are the schemas' descriptions.
    assert!(schemas["Timer"]["description"].as_str().unwrap().contains("createTimer"), "{}", schemas["Timer"]);
    // The input's `deny_unknown_fields` is stated.
    assert_eq!(schemas["Timer"]["additionalProperties"], false);
    // Query parameters come from the structs the handlers read them into,
    // under their wire names, required where the struct requires them.
    let params = |path: &str| -> Vec<(String, bool)> {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{path} has parameters"))
            .iter()
            .map(|p| (p["name"].as_str().unwrap().to_owned(), p["required"] == true))
            .collect()
    };
    let listing = params("/api/xtimer/getAppTimers");
    for (name, required) in [("app", true), ("pageIndex", false), ("pageSize", false), ("selector", false)] {
        assert!(listing.contains(&(name.to_owned(), required)), "getAppTimers {name}: {listing:?}");
    }
    assert!(params("/api/xtimer/explainFire").contains(&("runTimer".to_owned(), true)));
}
