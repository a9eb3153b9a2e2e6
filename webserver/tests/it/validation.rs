//! Every way input can be wrong: a 400 (413 for size) in the envelope, with
//! a message naming the field.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use xtimer_core::config::ServerConfig;

use crate::helpers::{cron_timer, patched, spawn_app, spawn_app_with, Fakes, NOW_MS};

/// A valid body using every field.
fn full() -> Value {
    json!({
        "app": "v",
        "name": "n",
        "cron": "0 0 * * * *",
        "timezone": "Europe/Berlin",
        "status": 1,
        "notifyHTTPParam": {"url": "http://h/p", "method": "POST", "header": {"X-A": "1"}, "body": "b"},
        "retry": {"maxAttempts": 3, "backoffMs": 1000},
        "misfire": "skip"
    })
}

fn headers(n: usize) -> Value {
    Value::Object((0..n).map(|i| (format!("X-H{i}"), json!("v"))).collect())
}

#[tokio::test]
async fn every_invalid_create_field_is_a_400_naming_it() {
    // A limit above the largest case, so the field check answers, not the body limit.
    let app =
        spawn_app_with(ServerConfig { max_body_bytes: 1 << 20, ..ServerConfig::default() }, Fakes::default()).await;
    app.create_ok(&patched(&full(), "/name", Some(json!("valid")))).await;
    let past = "2029-12-31T23:59:58Z";
    let cases: Vec<(&str, Option<Value>, &[&str])> = vec![
        ("/app", Some(json!("")), &["app: must not be empty"]),
        ("/app", Some(json!("x".repeat(129))), &["app: must be at most 128 characters, got 129"]),
        ("/app", Some(json!(5)), &["app: invalid type: integer `5`, expected a string (in double quotes)"]),
        ("/status", Some(json!("2")), &["status: must be 1 (disabled) or 2 (enabled), got \"2\""]),
        ("/status", Some(json!(true)), &["status: must be 1 (disabled) or 2 (enabled), got true"]),
        (
            "/retry/maxAttempts",
            Some(json!("3")),
            &["retry.maxAttempts: invalid type: string \"3\", expected a whole number"],
        ),
        ("/app", None, &["app: is required"]),
        ("/name", Some(json!("")), &["name: must not be empty"]),
        ("/name", Some(json!("é".repeat(257))), &["name: must be at most 256 characters, got 257"]),
        ("/name", Some(json!(null)), &["name: invalid type: null"]),
        ("/runAt", Some(json!("2030-06-01T00:00:00Z")), &["cron, runAt: give one of them, not both"]),
        ("/cron", None, &["cron, runAt, everyMs: one of them is required"]),
        ("/cron", Some(json!("  ")), &["cron: must not be empty"]),
        ("/cron", Some(json!("* ".repeat(200))), &["cron: must be at most 256 characters"]),
        ("/cron", Some(json!(["*"])), &["cron: invalid type: sequence"]),
        ("/timezone", Some(json!("Mars/Olympus")), &["timezone: unknown time zone `Mars/Olympus`"]),
        ("/status", Some(json!(3)), &["status: must be 1 (disabled) or 2 (enabled), got 3"]),
        ("/notifyHTTPParam", None, &["notifyHTTPParam, notifyAsyncflowParam: one of them is required"]),
        (
            "/notifyAsyncflowParam",
            Some(json!({"taskType": "jobs"})),
            &["notifyHTTPParam, notifyAsyncflowParam: give one of them, not both"],
        ),
        ("/notifyHTTPParam/url", None, &["notifyHTTPParam.url: is required"]),
        ("/notifyHTTPParam/url", Some(json!("")), &["notifyHTTPParam.url: must not be empty"]),
        ("/notifyHTTPParam/url", Some(json!("ftp://h/p")), &["notifyHTTPParam.url: must use http or https, got `ftp`"]),
        ("/notifyHTTPParam/url", Some(json!("/relative")), &["notifyHTTPParam.url: `/relative` is not an absolute"]),
        (
            "/notifyHTTPParam/url",
            Some(json!("http://a b/")),
            &["notifyHTTPParam.url: `http://a b/` is not a valid URL"],
        ),
        ("/notifyHTTPParam/url", Some(json!("http://")), &["notifyHTTPParam.url:"]),
        (
            "/notifyHTTPParam/url",
            Some(json!(format!("http://h/{}", "p".repeat(2040)))),
            &["notifyHTTPParam.url: must be at most 2048 characters, got 2049"],
        ),
        ("/notifyHTTPParam/method", Some(json!("TRACE")), &["notifyHTTPParam.method: must be one of GET, POST"]),
        (
            "/notifyHTTPParam/header",
            Some(json!({"bad name": "v"})),
            &["notifyHTTPParam.header.bad name: `bad name` is not a valid HTTP header name"],
        ),
        (
            "/notifyHTTPParam/header",
            Some(json!({"X-A": "a\nb"})),
            &["notifyHTTPParam.header.X-A: value is not a valid HTTP header value"],
        ),
        (
            "/notifyHTTPParam/header",
            Some(json!({"X-A": 1})),
            &["notifyHTTPParam.header.X-A: invalid type: integer `1`"],
        ),
        (
            "/notifyHTTPParam/header",
            Some(headers(33)),
            &["notifyHTTPParam.header: at most 32 headers (limits.callback_max_headers), got 33"],
        ),
        (
            "/notifyHTTPParam/header",
            Some(json!({"x".repeat(129): "v"})),
            &["notifyHTTPParam.header: header name `xxx", "longer than 128 bytes"],
        ),
        (
            "/notifyHTTPParam/header",
            Some(json!({"X-A": "v".repeat(4097)})),
            &["notifyHTTPParam.header.X-A: value must be at most 4096 bytes, got 4097"],
        ),
        (
            "/notifyHTTPParam/header",
            Some(json!({"Content-Length": "5"})),
            &["notifyHTTPParam.header.Content-Length: cannot be set"],
        ),
        (
            "/notifyHTTPParam/header",
            Some(json!({"X-A": "1", "x-a": "2"})),
            &["notifyHTTPParam.header.x-a: is given twice"],
        ),
        (
            "/notifyHTTPParam/body",
            Some(json!("b".repeat(65_537))),
            &["notifyHTTPParam.body: must be at most 65536 bytes (limits.callback_max_body_bytes), got 65537"],
        ),
        ("/notifyHTTPParam/headers", Some(json!({})), &["notifyHTTPParam", "unknown field `headers`"]),
        ("/retry/maxAttempts", Some(json!(0)), &["retry.maxAttempts: must be 1 to 20, got 0"]),
        ("/retry/maxAttempts", Some(json!(21)), &["retry.maxAttempts: must be 1 to 20, got 21"]),
        ("/retry/backoffMs", Some(json!(-1)), &["retry.backoffMs: must be 0 to 600000, got -1"]),
        ("/retry/backoffMs", Some(json!(600_001)), &["retry.backoffMs: must be 0 to 600000, got 600001"]),
        ("/retry/backoffMs", Some(json!(1.5)), &["retry.backoffMs: invalid type: floating point"]),
        ("/retry/jitter", Some(json!(true)), &["retry", "unknown field `jitter`"]),
        ("/misfire", Some(json!("sometimes")), &["misfire: must be one of skip, fire_once, fire_all, got `sometimes`"]),
        ("/colour", Some(json!("red")), &["unknown field `colour`"]),
    ];
    for (path, value, wanted) in &cases {
        let body = patched(&full(), path, value.clone());
        let reply = app.create(&body).await;
        let msg = reply.err(StatusCode::BAD_REQUEST);
        for w in *wanted {
            assert!(msg.contains(w), "{path} = {value:?}: `{msg}` lacks `{w}`");
        }
    }

    // One-shot times.
    let once = patched(&full(), "/cron", None);
    let run_at_cases: Vec<(Value, &[&str])> = vec![
        (json!("tomorrow"), &["runAt: `tomorrow` is not an RFC 3339 time with an offset"]),
        (json!("2030-01-01T00:00:10"), &["runAt: `2030-01-01T00:00:10` is not an RFC 3339 time"]),
        (
            json!(past),
            &["runAt: 2029-12-31T23:59:58.000Z is in the past: the server's time is 2030-01-01T00:00:00.000Z"],
        ),
        (json!(NOW_MS - 1_001), &["runAt:", "is in the past"]),
        (json!(1_893_456_010), &["runAt:", "is in the past", "Unix milliseconds, not seconds"]),
        (json!(1.5e12), &["runAt: 1500000000000.0 is not a whole number of Unix milliseconds"]),
        (json!(true), &["runAt: must be an RFC 3339 time string or Unix milliseconds, got a boolean"]),
        (json!(i64::MAX), &["runAt: must be before the year 10000"]),
    ];
    for (run_at, wanted) in &run_at_cases {
        let reply = app.create(&patched(&once, "/runAt", Some(run_at.clone()))).await;
        let msg = reply.err(StatusCode::BAD_REQUEST);
        for w in *wanted {
            assert!(msg.contains(w), "runAt = {run_at}: `{msg}` lacks `{w}`");
        }
    }

    // Every problem is reported at once.
    let mut body = patched(&full(), "/app", Some(json!("")));
    body["status"] = json!(9);
    body["notifyHTTPParam"]["url"] = json!("ftp://h");
    let reply = app.create(&body).await;
    let msg = reply.err(StatusCode::BAD_REQUEST);
    for w in ["app:", "status:", "notifyHTTPParam.url:"] {
        assert!(msg.contains(w), "`{msg}` lacks `{w}`");
    }

    // Nothing invalid was stored.
    let listed = app.get("/api/xtimer/getAppTimers?app=v").await;
    assert_eq!(listed.ok()["total"], 1, "{}", listed.body);
}

#[tokio::test]
async fn invalid_cron_is_a_400_naming_cron() {
    let app = spawn_app().await;
    for cron in ["not a cron", "61 * * * *", "0 0 30 2 *"] {
        let body = patched(&cron_timer("a", "c"), "/cron", Some(json!(cron)));
        let reply = app.create(&body).await;
        let msg = reply.err(StatusCode::BAD_REQUEST);
        assert!(msg.contains("cron") && msg.contains(cron), "{cron}: {msg}");
    }
}

#[tokio::test]
async fn bad_query_strings_are_400s_naming_the_parameter() {
    let app = spawn_app().await;
    let id = app.create_ok(&cron_timer("a", "t")).await;
    let cases = [
        ("/api/xtimer/getAppTimers?app=a&pageSize=0".to_owned(), "pageSize: must be 1 to 500, got 0"),
        ("/api/xtimer/getAppTimers?app=a&pageSize=501".to_owned(), "pageSize: must be 1 to 500, got 501"),
        ("/api/xtimer/getAppTimers?app=a&pageIndex=0".to_owned(), "pageIndex: must be at least 1, got 0"),
        (
            "/api/xtimer/getAppTimers?app=a&pageIndex=abc".to_owned(),
            "query string: pageIndex: must be a whole number, got `abc`",
        ),
        ("/api/xtimer/getAppTimers?app=a&pageIndex=4611686018427387904&pageSize=500".to_owned(), "pageIndex:"),
        ("/api/xtimer/getAppTimers".to_owned(), "query string: app: is required"),
        ("/api/xtimer/getAppTimers?app=".to_owned(), "app: must not be empty"),
        ("/api/xtimer/getAppTimers?app=a&colour=red".to_owned(), "unknown field `colour`"),
        ("/api/xtimer/getTimer?id=abc&app=a".to_owned(), "query string: id: must be a whole number, got `abc`"),
        ("/api/xtimer/getTimer?app=a".to_owned(), "query string: id: is required"),
        ("/api/xtimer/enableTimer?id=1".to_owned(), "query string: app: is required"),
        ("/api/xtimer/unableTimer?id=1&app=".to_owned(), "app: must not be empty"),
        (format!("/api/xtimer/getTimerTasks?id={id}&app=a&status=6"), "status: must be 0 (pending)"),
        (format!("/api/xtimer/getTimerTasks?id={id}&app=a&status=-1"), "status: must be 0 (pending)"),
        (format!("/api/xtimer/getTimerTasks?id={id}&app=a&pageSize=1000"), "pageSize: must be 1 to 500"),
    ];
    for (uri, wanted) in &cases {
        let reply = app.get(uri).await;
        let msg = reply.err(StatusCode::BAD_REQUEST);
        assert!(msg.contains(wanted), "{uri}: `{msg}` lacks `{wanted}`");
    }
    // delTimer: no query and no body; a body of the wrong type.
    let reply = app.raw(Method::DELETE, "/api/xtimer/delTimer", None, "").await;
    assert!(reply.err(StatusCode::BAD_REQUEST).contains("id: is required"), "{}", reply.body);
    let reply = app.raw(Method::DELETE, "/api/xtimer/delTimer", None, r#"{"id": "x", "app": "a"}"#).await;
    assert!(reply.err(StatusCode::BAD_REQUEST).contains("id: invalid type"), "{}", reply.body);
    let reply = app.raw(Method::DELETE, "/api/xtimer/delTimer", None, r#"{"id": 1"#).await;
    assert!(reply.err(StatusCode::BAD_REQUEST).contains("not valid JSON"), "{}", reply.body);
    // An array is not read field by field.
    let reply = app.raw(Method::DELETE, "/api/xtimer/delTimer", None, format!(r#"[{id}, "a"]"#)).await;
    assert!(reply.err(StatusCode::BAD_REQUEST).contains("must be a JSON object"), "{}", reply.body);
    // The timer was never touched.
    assert_eq!(app.timer(id, "a").await["status"], 1);
}

#[tokio::test]
async fn malformed_json_and_wrong_content_types_are_400s() {
    let app = spawn_app().await;
    let valid = cron_timer("a", "t").to_string();
    let cases: [(Option<&str>, String, &str); 6] = [
        (Some("application/json"), r#"{"app": "a", "#.to_owned(), "request body is not valid JSON: EOF"),
        (Some("application/json"), " ".to_owned(), "request body is empty: expected a JSON object"),
        (Some("application/json"), format!("{valid} trailing"), "request body is not valid JSON: trailing characters"),
        (Some("application/json"), r#"["a", "n"]"#.to_owned(), "request body must be a JSON object"),
        (Some("text/plain"), valid.clone(), "Content-Type: the request body must be JSON"),
        (None, valid.clone(), "Content-Type: the request body must be JSON"),
    ];
    for (content_type, body, wanted) in &cases {
        let reply = app.raw(Method::POST, "/xtimer/createTimer", *content_type, body.clone()).await;
        let msg = reply.err(StatusCode::BAD_REQUEST);
        assert!(msg.contains(wanted), "{content_type:?} {body}: `{msg}` lacks `{wanted}`");
    }
    // The same body with the right type is fine.
    app.raw(Method::POST, "/xtimer/createTimer", Some("application/json; charset=utf-8"), valid).await.ok();
}

#[tokio::test]
async fn body_over_the_limit_is_a_413_naming_the_limit() {
    let app = spawn_app_with(ServerConfig { max_body_bytes: 1024, ..ServerConfig::default() }, Fakes::default()).await;
    let mut body = cron_timer("a", "big");
    body["notifyHTTPParam"]["body"] = json!("x".repeat(2_000));
    let reply = app.create(&body).await;
    let msg = reply.err(StatusCode::PAYLOAD_TOO_LARGE);
    assert!(msg.contains("1024 bytes (server.max_body_bytes)"), "{msg}");
    let big = format!(r#"{{"id": 1, "app": "{}"}}"#, "a".repeat(2_000));
    let reply = app.raw(Method::DELETE, "/xtimer/delTimer", Some("application/json"), big).await;
    reply.err(StatusCode::PAYLOAD_TOO_LARGE);
    // Under the limit it works.
    body["notifyHTTPParam"]["body"] = json!("x".repeat(500));
    app.create_ok(&body).await;
}

#[tokio::test]
async fn a_callback_url_without_a_scheme_is_told_to_add_http() {
    let app = crate::helpers::spawn_app().await;
    for url in ["127.0.0.1:9000/hook", "localhost:9000/hook", "example.com/hook"] {
        let mut body = crate::helpers::cron_timer("a", "no-scheme");
        body["notifyHTTPParam"]["url"] = serde_json::json!(url);
        let msg =
            app.post_json("/api/xtimer/createTimer", &body).await.err(axum::http::StatusCode::BAD_REQUEST).to_owned();
        assert!(msg.contains(&format!("add `http://`: `http://{url}`")), "{url}: {msg}");
    }
}
