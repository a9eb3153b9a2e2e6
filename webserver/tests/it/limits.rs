//! Explicit limits (429 for rates and quotas, 400 for callback sizes and
//! fire rates) and the callback target policy at create time; each message
//! names the limit's configuration key.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::json;
use tower::ServiceExt;
use xtimer_core::config::{AuthConfig, CallbackConfig, LimitsConfig};

use crate::helpers::{cron_timer, spawn_app, spawn_secure, TestApp};

async fn limited(limits: LimitsConfig) -> TestApp {
    spawn_secure(AuthConfig::default(), CallbackConfig::default(), limits).await
}

#[tokio::test]
async fn an_app_over_its_request_rate_gets_a_429_naming_the_limit() {
    let app = limited(LimitsConfig { requests_per_second: 1, request_burst: 3, ..LimitsConfig::default() }).await;
    for _ in 0..3 {
        app.get("/api/xtimer/getAppTimers?app=busy").await.ok();
    }
    let response = app
        .router
        .clone()
        .oneshot(Request::get("/api/xtimer/getAppTimers?app=busy").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    let reply = app.get("/api/xtimer/getAppTimers?app=busy").await;
    let msg = reply.err(StatusCode::TOO_MANY_REQUESTS);
    assert!(msg.contains("app `busy` may send at most 1 requests per second (limits.requests_per_second)"), "{msg}");
    app.get("/api/xtimer/getAppTimers?app=calm").await.ok();
    app.get("/healthz").await.ok();
}

#[tokio::test]
async fn an_app_at_its_timer_quota_gets_a_429_until_it_deletes_one() {
    let app = limited(LimitsConfig { timers_per_app: 2, ..LimitsConfig::default() }).await;
    let first = app.create_ok(&cron_timer("a", "t1")).await;
    app.create_ok(&cron_timer("a", "t2")).await;
    let msg = app.create(&cron_timer("a", "t3")).await.err(StatusCode::TOO_MANY_REQUESTS).to_owned();
    assert!(msg.contains("app `a` has 2 timers") && msg.contains("limits.timers_per_app = 2"), "{msg}");
    app.create_ok(&cron_timer("b", "t1")).await;
    app.delete(first, "a").await.ok();
    app.create_ok(&cron_timer("a", "t3")).await;
}

fn every_second(app: &str, name: &str, status: i64) -> serde_json::Value {
    let mut body = cron_timer(app, name);
    body["cron"] = json!("* * * * * *");
    body["status"] = json!(status);
    body
}

#[tokio::test]
async fn a_cron_that_would_exceed_the_fires_per_minute_is_refused() {
    let app = limited(LimitsConfig { fires_per_minute_per_app: 100, ..LimitsConfig::default() }).await;
    let first = app.create_ok(&every_second("a", "s1", 2)).await;
    // 60 + 60 > 100: refused enabled; created disabled, it is refused when enabled.
    let msg = app.create(&every_second("a", "s2", 2)).await.err(StatusCode::BAD_REQUEST).to_owned();
    assert!(msg.starts_with("cron: this timer with the app's enabled timers would fire up to 120 times"), "{msg}");
    assert!(msg.contains("limits.fires_per_minute_per_app = 100"), "{msg}");
    let second = app.create_ok(&every_second("a", "s2", 1)).await;
    let msg = app.by_id("enableTimer", second, "a").await.err(StatusCode::BAD_REQUEST).to_owned();
    assert!(msg.contains("would fire up to 120 times"), "{msg}");
    // Another app has its own budget; a disabled first timer frees the budget.
    app.create_ok(&every_second("b", "s1", 2)).await;
    app.by_id("unableTimer", first, "a").await.ok();
    app.by_id("enableTimer", second, "a").await.ok();
    app.by_id("enableTimer", second, "a").await.ok(); // already enabled: no-op

    let tight = limited(LimitsConfig { fires_per_minute_per_app: 30, ..LimitsConfig::default() }).await;
    let msg = tight.create(&every_second("a", "s", 1)).await.err(StatusCode::BAD_REQUEST).to_owned();
    assert!(msg.contains("this timer alone would fire 60 times"), "{msg}");
}

#[tokio::test]
async fn callback_header_count_size_and_body_limits_name_their_keys() {
    let app = limited(LimitsConfig {
        callback_max_headers: 2,
        callback_max_header_bytes: 100,
        callback_max_body_bytes: 10,
        ..LimitsConfig::default()
    })
    .await;
    let mut body = cron_timer("a", "t");
    body["notifyHTTPParam"]["header"] = json!({"X-A": "x".repeat(60), "X-B": "y".repeat(60), "X-C": "z"});
    body["notifyHTTPParam"]["body"] = json!("12345678901");
    let msg = app.create(&body).await.err(StatusCode::BAD_REQUEST).to_owned();
    for expected in [
        "at most 2 headers (limits.callback_max_headers), got 3",
        "at most 100 bytes (limits.callback_max_header_bytes), got 130",
        "notifyHTTPParam.body: must be at most 10 bytes (limits.callback_max_body_bytes), got 11",
    ] {
        assert!(msg.contains(expected), "{msg} lacks {expected}");
    }
}

fn to(url: &str) -> serde_json::Value {
    let mut body = cron_timer("a", "t");
    body["notifyHTTPParam"]["url"] = json!(url);
    body
}

#[tokio::test]
async fn metadata_and_link_local_targets_are_refused_at_create() {
    let app = spawn_app().await;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://[fe80::1]:8080/",
        "http://100.100.100.200/",
        "http://[::ffff:169.254.169.254]/",
        "http://2852039166/", // 169.254.169.254 as one number, read by the resolver
    ] {
        let msg = app.create(&to(url)).await.err(StatusCode::BAD_REQUEST).to_owned();
        assert!(msg.starts_with("notifyHTTPParam.url: callback target"), "{url}: {msg}");
        assert!(msg.contains("denied range"), "{url}: {msg}");
    }
    app.create_ok(&to("http://127.0.0.1:9/hook")).await;
    let mut other = to("http://localhost:9/hook");
    other["name"] = json!("t2");
    app.create_ok(&other).await;
}

#[tokio::test]
async fn allow_and_deny_lists_change_what_create_accepts() {
    let callback = CallbackConfig {
        allow_cidrs: vec!["169.254.169.254/32".into()],
        deny_cidrs: vec!["127.0.0.0/8".into(), "::1".into()],
        ..CallbackConfig::default()
    };
    let app = spawn_secure(AuthConfig::default(), callback, LimitsConfig::default()).await;
    app.create_ok(&to("http://169.254.169.254/")).await;
    let msg = app.create(&to("http://localhost:9/")).await.err(StatusCode::BAD_REQUEST).to_owned();
    assert!(msg.contains("in the denied range 127.0.0.0/8") || msg.contains("::1"), "{msg}");
    app.create(&to("http://127.0.0.1:9/")).await.err(StatusCode::BAD_REQUEST);
    app.create(&to("http://169.254.169.253/")).await.err(StatusCode::BAD_REQUEST);
}
