//! createTimers: up to 1,000 timers in one call, all or none.

use axum::http::StatusCode;
use serde_json::{json, Value};
use xtimer_store::FireRepo;

use crate::helpers::{cron_timer, once_timer, spawn_app, NOW_MS};

const URI: &str = "/api/xtimer/createTimers";

fn batch(timers: Vec<Value>) -> Value {
    json!({ "timers": timers })
}

#[tokio::test]
async fn a_batch_is_stored_in_input_order_and_its_enabled_timers_get_their_fires() {
    let app = spawn_app().await;
    let mut enabled = cron_timer("bulk", "every-second");
    enabled["cron"] = json!("* * * * * *");
    enabled["status"] = json!(2);
    let mut soon = once_timer("bulk", "soon", NOW_MS + 10_000);
    soon["status"] = json!(2);
    let reply = app.post_json(URI, &batch(vec![enabled, cron_timer("bulk", "off"), soon])).await;
    let ids: Vec<i64> = reply.ok()["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in input order: {ids:?}");
    let names: Vec<Value> = names_of(&app, &ids).await;
    assert_eq!(names, vec![json!("every-second"), json!("off"), json!("soon")]);

    let repo = &app.repo;
    let fires = |id: i64| async move { repo.list_fires(id, None, 0, 1_000).await.unwrap().1 };
    assert_eq!(fires(ids[0]).await, 120, "two minutes of a per-second timer, expanded before the reply");
    assert_eq!(fires(ids[1]).await, 0, "a disabled timer has none");
    assert_eq!(fires(ids[2]).await, 1, "the one-shot's fire");
}

async fn names_of(app: &crate::helpers::TestApp, ids: &[i64]) -> Vec<Value> {
    let mut names = Vec::new();
    for id in ids {
        names.push(app.timer(*id, "bulk").await["name"].clone());
    }
    names
}

#[tokio::test]
async fn every_bad_item_is_named_by_its_index_and_nothing_is_stored() {
    let app = spawn_app().await;
    let mut bad_cron = cron_timer("bulk", "b1");
    bad_cron["cron"] = json!("61 * * * * *");
    let mut bad_status = cron_timer("bulk", "b3");
    bad_status["status"] = json!("2");
    let items = vec![cron_timer("bulk", "ok0"), bad_cron, cron_timer("bulk", "ok2"), bad_status, json!(7)];
    let reply = app.post_json(URI, &batch(items)).await;
    let msg = reply.err(StatusCode::BAD_REQUEST);
    assert!(msg.contains("timers[1].cron `61 * * * * *` is invalid"), "{msg}");
    assert!(msg.contains("timers[3].status: must be 1 (disabled) or 2 (enabled), got \"2\""), "{msg}");
    assert!(msg.contains("timers[4]: must be a JSON object"), "{msg}");
    assert!(!msg.contains("timers[0]") && !msg.contains("timers[2]"), "{msg}");
    let listed = app.get("/api/xtimer/getAppTimers?app=bulk").await;
    assert_eq!(listed.ok()["total"], 0, "all or none");
}

#[tokio::test]
async fn a_name_twice_in_a_batch_or_taken_already_stores_nothing() {
    let app = spawn_app().await;
    let twice = batch(vec![cron_timer("bulk", "a"), cron_timer("bulk", "b"), cron_timer("bulk", "a")]);
    let msg = app.post_json(URI, &twice).await.err(StatusCode::BAD_REQUEST).to_string();
    assert!(msg.contains("timers[2].name: `a` is also the name of timers[0] in app `bulk`"), "{msg}");

    app.create_ok(&cron_timer("bulk", "taken")).await;
    let clash = batch(vec![cron_timer("bulk", "fresh"), cron_timer("bulk", "taken")]);
    app.post_json(URI, &clash).await.err(StatusCode::CONFLICT);
    let listed = app.get("/api/xtimer/getAppTimers?app=bulk").await;
    assert_eq!(listed.ok()["total"], 1, "only the timer created before");
}

#[tokio::test]
async fn a_batch_holds_1_to_1000_timers_and_has_a_body_limit_of_its_own() {
    let app = spawn_app().await;
    let empty = app.post_json(URI, &batch(vec![])).await;
    assert_eq!(empty.err(StatusCode::BAD_REQUEST), "timers: must hold 1 to 1000 timers, got 0");
    let too_many: Vec<Value> = (0..1001).map(|i| cron_timer("bulk", &format!("t{i}"))).collect();
    let reply = app.post_json(URI, &batch(too_many)).await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "timers: must hold 1 to 1000 timers, got 1001");

    // 1,000 timers are well over createTimer's 64 KiB, and fit a batch.
    let full: Vec<Value> = (0..1000).map(|i| cron_timer("bulk", &format!("t{i}"))).collect();
    assert!(batch(full.clone()).to_string().len() > 64 * 1024);
    let reply = app.post_json(URI, &batch(full)).await;
    assert_eq!(reply.ok()["ids"].as_array().unwrap().len(), 1000);

    let mut huge = cron_timer("bulk", "huge");
    huge["notifyHTTPParam"]["body"] = json!("x".repeat(3 * 1024 * 1024));
    let msg = app.post_json(URI, &batch(vec![huge])).await.err(StatusCode::PAYLOAD_TOO_LARGE).to_string();
    assert!(msg.contains("server.max_batch_body_bytes"), "{msg}");
    let mut big = cron_timer("bulk", "big");
    big["notifyHTTPParam"]["body"] = json!("x".repeat(100 * 1024));
    let msg = app.create(&big).await.err(StatusCode::PAYLOAD_TOO_LARGE).to_string();
    assert!(msg.contains("server.max_body_bytes"), "{msg}");
}
