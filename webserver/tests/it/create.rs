//! createTimer, and getTimer showing what was stored.

use axum::http::StatusCode;
use serde_json::json;

use crate::helpers::{cron_timer, once_timer, spawn_app, NOW_MS, NOW_RFC3339};

#[tokio::test]
async fn cron_timer_round_trips_every_field() {
    let app = spawn_app().await;
    let id = app
        .create_ok(&json!({
            "app": "billing",
            "name": "nightly-invoice",
            "cron": "0 30 2 * * ?",
            "timezone": "Asia/Shanghai",
            "status": 1,
            "notifyHTTPParam": {
                "url": "https://example.com/hook?x=1",
                "method": "put",
                "header": {"X-Token": "t", "X-Other": "a b"},
                "body": "{\"a\":1}"
            },
            "retry": {"maxAttempts": 5, "backoffMs": 250},
            "misfire": "fire_all"
        }))
        .await;
    assert!(id > 0);
    assert_eq!(
        app.timer(id, "billing").await,
        json!({
            "id": id,
            "app": "billing",
            "name": "nightly-invoice",
            "status": 1,
            "cron": "0 30 2 * * ?",
            "runAt": null,
            "runAtMs": null,
            "timezone": "Asia/Shanghai",
            "notifyHTTPParam": {
                "url": "https://example.com/hook?x=1",
                "method": "PUT",
                "header": {"X-Other": "a b", "X-Token": "t"},
                "body": "{\"a\":1}",
                "flowKey": "example.com:443"
            },
            "retry": {"maxAttempts": 5, "backoffMs": 250},
            "misfire": "fire_all",
            "nextRunTimer": null,
            "nextRunTime": null,
            "stats": {"fires": 0, "succeeded": 0, "failed": 0, "missed": 0, "lateP50Ms": null, "lateP99Ms": null},
            "createTime": NOW_RFC3339,
            "modifyTime": NOW_RFC3339
        })
    );
}

#[tokio::test]
async fn one_shot_timer_round_trips_with_defaults() {
    let app = spawn_app().await;
    // 08:00:10 at +08:00 is 00:00:10 UTC, ten seconds after the test clock.
    let id = app
        .create_ok(&json!({
            "app": "billing",
            "name": "once",
            "runAt": "2030-01-01T08:00:10+08:00",
            "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"}
        }))
        .await;
    assert_eq!(
        app.timer(id, "billing").await,
        json!({
            "id": id,
            "app": "billing",
            "name": "once",
            "status": 1,
            "cron": null,
            "runAt": "2030-01-01T00:00:10.000Z",
            "runAtMs": NOW_MS + 10_000,
            "timezone": "UTC",
            "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook", "method": "POST", "header": {}, "body": null,
                                "flowKey": "127.0.0.1:9"},
            "retry": {"maxAttempts": 3, "backoffMs": 1000},
            "misfire": "fire_once",
            "nextRunTimer": null,
            "nextRunTime": null,
            "stats": {"fires": 0, "succeeded": 0, "failed": 0, "missed": 0, "lateP50Ms": null, "lateP99Ms": null},
            "createTime": NOW_RFC3339,
            "modifyTime": NOW_RFC3339
        })
    );
}

#[tokio::test]
async fn run_at_is_accepted_as_unix_milliseconds_and_a_moment_late() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "ms", NOW_MS + 5_000)).await;
    assert_eq!(app.timer(id, "a").await["runAtMs"], NOW_MS + 5_000);
    // Up to a second in the past passes: clock skew and request latency.
    let id = app.create_ok(&once_timer("a", "late", NOW_MS - 900)).await;
    assert_eq!(app.timer(id, "a").await["runAt"], "2029-12-31T23:59:59.100Z");
}

#[tokio::test]
async fn enabled_one_shot_has_its_fire_before_the_reply() {
    let app = spawn_app().await;
    let mut body = once_timer("a", "soon", NOW_MS + 2_000);
    body["status"] = json!(2);
    let id = app.create_ok(&body).await;
    assert_eq!(app.timer(id, "a").await["status"], 2);
    assert_eq!(app.tasks(id, "a", "").await["total"], 0, "not due yet");
    let tasks = app.tasks(id, "a", "&upcoming=true").await;
    assert_eq!(tasks["total"], 1, "{tasks}");
    let fire = &tasks["list"][0];
    assert!(fire["taskId"].as_i64().unwrap() > 0, "{fire}");
    assert_eq!(fire["timerId"], id);
    assert_eq!(fire["runTimer"], NOW_MS + 2_000);
    assert_eq!(fire["runTime"], "2030-01-01T00:00:02.000Z");
    assert_eq!(fire["status"], 0);
    assert_eq!(fire["attempt"], 0);
    assert_eq!(fire["output"], "");
    assert_eq!(fire["costTime"], 0);
    assert_eq!(fire["createTime"], NOW_RFC3339);
    assert_eq!(fire["modifyTime"], NOW_RFC3339);
}

#[tokio::test]
async fn enabled_per_second_cron_has_pending_fires_for_the_migrator_window() {
    let app = spawn_app().await;
    let mut body = cron_timer("a", "every-second");
    body["cron"] = json!("* * * * * *");
    body["status"] = json!(2);
    let id = app.create_ok(&body).await;
    // Once they are all due (nothing fires them here), they list as due.
    app.clock.advance(120_000);
    let tasks = app.tasks(id, "a", "&status=0&pageSize=500").await;
    // The migrator expands two 60 s steps ahead: one fire per second.
    assert_eq!(tasks["total"], 120, "{tasks}");
    let mut runs: Vec<i64> =
        tasks["list"].as_array().unwrap().iter().map(|f| f["runTimer"].as_i64().unwrap()).collect();
    runs.sort_unstable();
    let expected: Vec<i64> = (0..120).map(|s| NOW_MS + s * 1_000).collect();
    assert_eq!(runs, expected);
}

#[tokio::test]
async fn disabled_timer_has_no_fires() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "off", NOW_MS + 2_000)).await;
    assert_eq!(app.tasks(id, "a", "").await["total"], 0);
}

#[tokio::test]
async fn taken_name_is_a_409_until_its_timer_is_deleted() {
    let app = spawn_app().await;
    let first = app.create_ok(&cron_timer("a", "dup")).await;
    let msg = app.create(&cron_timer("a", "dup")).await.err(StatusCode::CONFLICT).to_owned();
    assert!(msg.contains("`dup`") && msg.contains("already exists"), "{msg}");
    // Names are unique per app only.
    app.create_ok(&cron_timer("b", "dup")).await;
    app.delete(first, "a").await.ok();
    let second = app.create_ok(&cron_timer("a", "dup")).await;
    assert_ne!(first, second);
    app.by_id("getTimer", first, "a").await.err(StatusCode::NOT_FOUND);
    assert_eq!(app.timer(second, "a").await["status"], 1);
}
