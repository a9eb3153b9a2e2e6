//! A timer's fires as its receiver sees them.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use xtimer::receiver::Receiver;

use crate::helpers::{every_second, now_ms, wait_for, Stack, TestNode, PATIENCE};

pub async fn per_second_cron_fires_on_consecutive_seconds_without_gaps_or_duplicates(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    let id = app.create_ok(every_second("tick", &rx, json!({}))).await;

    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 6).await, "six fires arrive");
    let hits = rx.hits();
    let keys: HashSet<_> = hits.iter().map(|h| h.key.clone()).collect();
    assert_eq!(keys.len(), hits.len(), "no duplicates");
    let mut runs: Vec<i64> = hits.iter().map(|h| h.run_ms).collect();
    runs.sort();
    for pair in runs.windows(2) {
        assert_eq!(pair[1] - pair[0], 1_000, "consecutive seconds: {runs:?}");
    }
    for hit in &hits {
        assert_eq!(hit.run_ms % 1_000, 0);
        assert!(hit.lateness_ms() >= 0.0 && hit.lateness_ms() < 500.0, "on time: {} ms", hit.lateness_ms());
        let h = hit.headers.as_ref().unwrap();
        assert_eq!(h["idempotency-key"].to_str().unwrap(), format!("{id}_{}", hit.run_ms));
        assert_eq!(h["x-xtimer-timer-id"].to_str().unwrap(), id.to_string());
        assert_eq!(h["content-type"].to_str().unwrap(), "application/json");
        assert_eq!(hit.method, "POST");
        assert_eq!(&hit.body[..], b"{\"n\":1}");
    }
    // Every fire the receiver saw is recorded succeeded.
    let fires = wait_for("every fire the receiver saw is recorded", || async {
        let fires = app.fires(id, "it").await;
        let recorded = |run_ms: i64| fires.iter().any(|f| f["runTimer"] == run_ms && f["status"].as_i64() > Some(1));
        hits.iter().all(|hit| recorded(hit.run_ms)).then_some(fires)
    })
    .await;
    for hit in &hits {
        let fire = fires.iter().find(|f| f["runTimer"] == hit.run_ms).expect("recorded");
        assert_eq!(fire["status"], 2, "{fire}");
        assert_eq!(fire["attempt"], 1);
        assert!(fire["output"].as_str().unwrap().starts_with("HTTP 200"), "{fire}");
    }
    app.stop().await;
}

pub async fn one_shot_timer_fires_once_on_time(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let run_at = (now_ms() / 1000 + 3) * 1000 + 250;
    let run_at_text = chrono::DateTime::from_timestamp_millis(run_at).unwrap().to_rfc3339();
    let id = app
        .create_ok(json!({
            "app": "it", "name": "once", "runAt": run_at_text, "status": 2,
            "notifyHTTPParam": {"url": rx.url("/once"), "method": "PUT"}
        }))
        .await;
    assert!(rx.wait_until(PATIENCE, |h| !h.is_empty()).await);
    // Time for a second delivery to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let hits = rx.hits();
    assert_eq!(hits.len(), 1, "exactly once");
    assert_eq!(hits[0].run_ms, run_at);
    assert_eq!(hits[0].method, "PUT");
    assert!(hits[0].lateness_ms() < 500.0, "late by {} ms", hits[0].lateness_ms());
    let fires = wait_for("the fire is recorded", || async {
        let fires = app.fires(id, "it").await;
        fires.iter().all(|f| f["status"].as_i64() > Some(1)).then_some(fires)
    })
    .await;
    assert_eq!(fires.len(), 1);
    assert_eq!(fires[0]["status"], 2);
    app.stop().await;
}

pub async fn disable_stops_fires_and_enable_resumes_them(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let id = app.create_ok(every_second("toggle", &rx, json!({}))).await;
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 2).await);

    assert_eq!(app.act("unableTimer", id, "it").await["code"], 0);
    let disabled_at = now_ms();
    // Time for fires that should not come: three seconds of a disabled timer.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let late: Vec<i64> = rx.hits().iter().map(|h| h.run_ms).filter(|&r| r > disabled_at + 1_000).collect();
    assert!(late.is_empty(), "fires more than 1 s after disabling: {late:?}");
    let skipped = wait_for("a fire during the pause is recorded", || async {
        let fires = app.fires(id, "it").await;
        fires.iter().any(|f| f["status"] == 4).then_some(true)
    })
    .await;
    assert!(skipped, "fires during the pause are recorded skipped");

    assert_eq!(app.act("enableTimer", id, "it").await["code"], 0);
    let enabled_at = now_ms();
    assert!(rx.wait_until(PATIENCE, |h| h.iter().filter(|h| h.run_ms > enabled_at).count() >= 2).await, "resumed");
    app.stop().await;
}

pub async fn delete_stops_fires(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let id = app.create_ok(every_second("doomed", &rx, json!({}))).await;
    assert!(rx.wait_until(PATIENCE, |h| !h.is_empty()).await);
    assert_eq!(app.act("delTimer", id, "it").await["code"], 0);
    let deleted_at = now_ms();
    // Time for fires that should not come after the delete.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(rx.hits().iter().all(|h| h.run_ms <= deleted_at + 1_000), "no fire after delete");
    let timer = app.act("getTimer", id, "it").await;
    assert_eq!(timer["code"], 404, "a deleted timer is gone: {timer}");
    assert_eq!(app.act("enableTimer", id, "it").await["code"], 404, "a deleted timer cannot be enabled");
    app.stop().await;
}

pub async fn a_receiver_failing_twice_sees_three_attempts_and_the_fire_ends_succeeded(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    rx.fail_first(2);
    let run_at = now_ms() + 1_500;
    let id = app
        .create_ok(json!({
            "app": "it", "name": "flaky", "runAt": chrono::DateTime::from_timestamp_millis(run_at).unwrap().to_rfc3339(),
            "status": 2, "notifyHTTPParam": {"url": rx.url("/flaky")},
            "retry": {"maxAttempts": 3, "backoffMs": 200}
        }))
        .await;
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 3).await);
    // Time for a fourth attempt to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let hits = rx.hits();
    assert_eq!(hits.len(), 3, "three attempts, no more");
    assert!(hits.iter().all(|h| h.key == hits[0].key), "one fire, one idempotency key");
    let gap_ms = (hits[2].arrival_us - hits[1].arrival_us) / 1000;
    assert!(gap_ms >= 380, "backoff doubles: second gap {gap_ms} ms");
    let fires = wait_for("the fire's result is recorded", || async {
        let fires = app.fires(id, "it").await;
        fires.iter().all(|f| f["status"].as_i64() > Some(1)).then_some(fires)
    })
    .await;
    assert_eq!(fires.len(), 1);
    assert_eq!(fires[0]["status"], 2, "{}", fires[0]);
    assert_eq!(fires[0]["attempt"], 3);
    app.stop().await;
}

crate::on_both_stacks!(
    per_second_cron_fires_on_consecutive_seconds_without_gaps_or_duplicates,
    one_shot_timer_fires_once_on_time,
    disable_stops_fires_and_enable_resumes_them,
    delete_stops_fires,
    a_receiver_failing_twice_sees_three_attempts_and_the_fire_ends_succeeded,
);
