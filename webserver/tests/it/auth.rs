//! Per-app bearer tokens: with auth on, every timer endpoint refuses a
//! call without a valid token (401) and with another app's token (403);
//! the admin endpoint issues tokens that work at once.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use xtimer_core::config::{AppCredentials, AuthConfig, CallbackConfig, LimitsConfig, Secret};
use xtimer_core::signature::token_hash;
use xtimer_core::Clock;
use xtimer_store::AuthRepo;
use xtimer_webserver::auth::{TOKEN_TTL, UNKNOWN_TOKEN_TTL};

use crate::helpers::{cron_timer, spawn_app, spawn_secure, TestApp};

const BILLING: &str = "tb-token";
const OPS: &str = "to-token";
const ADMIN: &str = "admin-token";

fn auth_on() -> AuthConfig {
    let mut auth = AuthConfig { enabled: true, admin_token: Secret::new(ADMIN), ..AuthConfig::default() };
    for (app, token) in [("billing", BILLING), ("ops", OPS)] {
        auth.apps.insert(app.into(), AppCredentials { token: Secret::new(token), secret: Secret::default() });
    }
    auth
}

async fn secure_app() -> TestApp {
    spawn_secure(auth_on(), CallbackConfig::default(), LimitsConfig::default()).await
}

/// Every timer endpoint as (method, uri, body) acting on `app`'s timer `id`.
fn endpoints(base: &str, id: i64, app: &str) -> Vec<(Method, String, Option<Value>)> {
    let q = format!("id={id}&app={app}");
    vec![
        (Method::POST, format!("{base}/createTimer"), Some(cron_timer(app, "new-one"))),
        (Method::GET, format!("{base}/enableTimer?{q}"), None),
        (Method::GET, format!("{base}/unableTimer?{q}"), None),
        (Method::GET, format!("{base}/getTimer?{q}"), None),
        (Method::GET, format!("{base}/getAppTimers?app={app}"), None),
        (Method::GET, format!("{base}/getTimerTasks?{q}"), None),
        (Method::DELETE, format!("{base}/delTimer?{q}"), None),
        (Method::DELETE, format!("{base}/delTimer"), Some(json!({"id": id, "app": app}))),
    ]
}

#[tokio::test]
async fn every_endpoint_refuses_a_call_without_a_valid_token() {
    let app = secure_app().await;
    let id = app.call(Method::POST, "/api/xtimer/createTimer", Some(BILLING), Some(&cron_timer("billing", "t"))).await;
    let id = id.ok()["id"].as_i64().unwrap();
    for base in ["/api/xtimer", "/xtimer"] {
        for (method, uri, body) in endpoints(base, id, "billing") {
            for token in [None, Some("made-up"), Some("")] {
                let reply = app.call(method.clone(), &uri, token, body.as_ref()).await;
                let msg = reply.err(StatusCode::UNAUTHORIZED);
                assert!(msg.contains("Bearer") || msg.contains("not valid"), "{method} {uri} {token:?}: {msg}");
            }
        }
        let msg =
            app.call(Method::GET, &format!("{base}/nodes"), None, None).await.err(StatusCode::UNAUTHORIZED).to_owned();
        assert!(msg.contains("Authorization: Bearer"), "{msg}");
    }
    // Nothing changed: the timer is still there, disabled, and alone.
    let got = app.call(Method::GET, &format!("/api/xtimer/getTimer?id={id}&app=billing"), Some(BILLING), None).await;
    assert_eq!(got.ok()["status"], 1);
    let list = app.call(Method::GET, "/api/xtimer/getAppTimers?app=billing", Some(BILLING), None).await;
    assert_eq!(list.ok()["total"], 1);
}

#[tokio::test]
async fn every_endpoint_refuses_another_apps_token() {
    let app = secure_app().await;
    let id = app.call(Method::POST, "/api/xtimer/createTimer", Some(BILLING), Some(&cron_timer("billing", "t"))).await;
    let id = id.ok()["id"].as_i64().unwrap();
    for base in ["/api/xtimer", "/xtimer"] {
        // The ops token naming billing.
        for (method, uri, body) in endpoints(base, id, "billing") {
            let reply = app.call(method.clone(), &uri, Some(OPS), body.as_ref()).await;
            let msg = reply.err(StatusCode::FORBIDDEN);
            assert!(msg.contains("token is for app `ops`, not for `billing`"), "{method} {uri}: {msg}");
        }
        // The ops token naming ops, on billing's timer id.
        for (method, uri, body) in endpoints(base, id, "ops") {
            if uri.contains("createTimer") || uri.contains("getAppTimers") {
                continue; // these name no timer; ops may act on ops
            }
            let reply = app.call(method.clone(), &uri, Some(OPS), body.as_ref()).await;
            let msg = reply.err(StatusCode::FORBIDDEN);
            assert!(msg.contains(&format!("timer {id} belongs to another app")), "{method} {uri}: {msg}");
        }
        // The admin token issues tokens; it does not act as an app.
        let reply = app.call(Method::GET, &format!("{base}/getTimer?id={id}&app=billing"), Some(ADMIN), None).await;
        assert!(reply.err(StatusCode::FORBIDDEN).contains("admin token"));
    }
    let got = app.call(Method::GET, &format!("/api/xtimer/getTimer?id={id}&app=billing"), Some(BILLING), None).await;
    assert_eq!(got.ok()["status"], 1, "still there and disabled");
}

#[tokio::test]
async fn a_deleted_timer_is_a_404_with_auth_on_whichever_app_asks() {
    let app = secure_app().await;
    let id = app.call(Method::POST, "/api/xtimer/createTimer", Some(BILLING), Some(&cron_timer("billing", "t"))).await;
    let id = id.ok()["id"].as_i64().unwrap();
    let del = format!("/api/xtimer/delTimer?id={id}&app=billing");
    app.call(Method::DELETE, &del, Some(BILLING), None).await.ok();
    // Its own app, and another app naming itself: gone for both (no 403
    // about a timer that no longer exists).
    for (token, name) in [(BILLING, "billing"), (OPS, "ops")] {
        for (method, uri, body) in endpoints("/api/xtimer", id, name) {
            if uri.contains("createTimer") || uri.contains("getAppTimers") {
                continue;
            }
            let reply = app.call(method.clone(), &uri, Some(token), body.as_ref()).await;
            let msg = reply.err(StatusCode::NOT_FOUND);
            assert_eq!(
                msg,
                format!("timer {id} not found in app `{name}` (it may have been deleted)"),
                "{method} {uri}"
            );
        }
    }
}

#[tokio::test]
async fn the_right_token_works_on_every_endpoint() {
    let app = secure_app().await;
    let id = app.call(Method::POST, "/api/xtimer/createTimer", Some(BILLING), Some(&cron_timer("billing", "t"))).await;
    let id = id.ok()["id"].as_i64().unwrap();
    for (method, uri, body) in endpoints("/api/xtimer", id, "billing").into_iter().take(7) {
        app.call(method.clone(), &uri, Some(BILLING), body.as_ref()).await.ok();
    }
    app.call(Method::GET, "/api/xtimer/nodes", Some(OPS), None).await.ok();
}

#[tokio::test]
async fn a_missing_token_is_refused_before_the_body_is_read() {
    let app = secure_app().await;
    let reply = app.raw(Method::POST, "/api/xtimer/createTimer", Some("application/json"), "{not json").await;
    reply.err(StatusCode::UNAUTHORIZED);
    app.get("/api/xtimer/getTimer?id=notanumber").await.err(StatusCode::UNAUTHORIZED);
    app.get("/healthz").await.ok();
}

#[tokio::test]
async fn issued_tokens_act_for_their_app_only() {
    let app = secure_app().await;
    let uri = "/api/xtimer/admin/issueToken";
    let body = json!({"app": "reports"});
    app.call(Method::POST, uri, None, Some(&body)).await.err(StatusCode::UNAUTHORIZED);
    app.call(Method::POST, uri, Some(BILLING), Some(&body)).await.err(StatusCode::FORBIDDEN);
    let bad = app.call(Method::POST, uri, Some(ADMIN), Some(&json!({"app": ""}))).await;
    assert!(bad.err(StatusCode::BAD_REQUEST).starts_with("app:"));

    let issued = app.call(Method::POST, uri, Some(ADMIN), Some(&body)).await.ok().clone();
    let token = issued["token"].as_str().unwrap().to_string();
    let secret = issued["secret"].as_str().unwrap().to_string();
    assert!(token.starts_with("xt_") && token.len() == 67, "{token}");
    assert_eq!(secret.len(), 64);
    let again = app.call(Method::POST, uri, Some(ADMIN), Some(&body)).await.ok().clone();
    assert_ne!(again["token"], issued["token"], "a new token each time");
    assert_eq!(again["secret"], issued["secret"], "one signing secret per app");

    app.call(Method::POST, "/api/xtimer/createTimer", Some(&token), Some(&cron_timer("reports", "r"))).await.ok();
    let other =
        app.call(Method::POST, "/api/xtimer/createTimer", Some(&token), Some(&cron_timer("billing", "r"))).await;
    other.err(StatusCode::FORBIDDEN);
    // Only the hash is stored.
    let db = app.repo.clone();
    assert_eq!(db.token_app(&token_hash(&token)).await.unwrap().as_deref(), Some("reports"));
    assert_eq!(db.token_app(&token).await.unwrap(), None);
}

#[tokio::test]
async fn a_token_issued_on_another_node_works_once_its_unknown_lookup_expires() {
    let app = secure_app().await;
    let uri = "/api/xtimer/getAppTimers?app=reports";
    let token = "xt_issued-elsewhere";
    app.call(Method::GET, uri, Some(token), None).await.err(StatusCode::UNAUTHORIZED);

    // Another node issues it: this one remembers "unknown" for its ttl.
    let db = app.repo.clone();
    db.issue_token("reports", &token_hash(token), "reports-secret", app.clock.now_ms()).await.unwrap();
    app.clock.advance(UNKNOWN_TOKEN_TTL.as_millis() as i64 - 1);
    app.call(Method::GET, uri, Some(token), None).await.err(StatusCode::UNAUTHORIZED);
    app.clock.advance(1);
    app.call(Method::GET, uri, Some(token), None).await.ok();
    // Known now, and kept for the longer ttl of a known token.
    app.clock.advance(TOKEN_TTL.as_millis() as i64 - 1);
    app.call(Method::GET, uri, Some(token), None).await.ok();
}

#[tokio::test]
async fn admin_endpoint_is_off_without_an_admin_token() {
    let app = spawn_app().await;
    let reply = app.call(Method::POST, "/api/xtimer/admin/issueToken", Some("x"), Some(&json!({"app": "a"}))).await;
    assert!(reply.err(StatusCode::FORBIDDEN).contains("auth.admin_token"));
}

#[tokio::test]
async fn with_auth_off_tokens_are_ignored() {
    let app = spawn_app().await;
    let id = app.call(Method::POST, "/api/xtimer/createTimer", Some("garbage"), Some(&cron_timer("a", "t"))).await;
    let id = id.ok()["id"].as_i64().unwrap();
    app.call(Method::GET, &format!("/api/xtimer/getTimer?id={id}&app=a"), None, None).await.ok();
    // Another app's id stays a 404: ids do not leak across apps.
    app.call(Method::GET, &format!("/api/xtimer/getTimer?id={id}&app=b"), None, None).await.err(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn basic_credentials_name_the_app_and_carry_its_token() {
    use axum::body::Body;
    use axum::http::{header, Request};
    use base64::Engine;
    let app = secure_app().await;
    let basic = |pair: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
    let create = |auth: String| {
        Request::post("/api/xtimer/createTimer")
            .header(header::AUTHORIZATION, auth)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(cron_timer("billing", "by-basic").to_string()))
            .unwrap()
    };
    let refused = app.send(create(basic(&format!("ops:{BILLING}")))).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "the user must be the token's app: {}", refused.body);
    let refused = app.send(create(basic("billing:wrong"))).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    let created = app.send(create(basic(&format!("billing:{BILLING}")))).await;
    assert!(created.ok()["id"].as_i64().unwrap() > 0);
}
