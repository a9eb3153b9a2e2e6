//! `GET /metrics` on a running node: the values move when real fires
//! happen (succeeded and failed callbacks to a real receiver), and the
//! gauges read the stores.

use serde_json::{json, Value};
use xtimer::receiver::Receiver;

use crate::helpers::{every_second, now_ms, wait_for, Stack, Storage, TestNode, PATIENCE};

/// The value of the sample `name{labels}` (`labels` exactly as rendered,
/// e.g. `outcome="succeeded"`; empty for none), or 0 when it is absent.
pub fn sample(text: &str, name: &str, labels: &str) -> f64 {
    let head = if labels.is_empty() { name.to_string() } else { format!("{name}{{{labels}}}") };
    text.lines()
        .find_map(|line| line.strip_prefix(&head).and_then(|rest| rest.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().expect("a number"))
}

async fn scrape(node: &TestNode) -> String {
    let resp = node.http.get(format!("{}/metrics", node.base)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let kind = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("text/plain"), "{kind}");
    resp.text().await.unwrap()
}

async fn metrics_move_with_fires(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let before = scrape(&node).await;
    let ok_before = sample(&before, "xtimer_fires_total", r#"outcome="succeeded""#);
    let failed_before = sample(&before, "xtimer_fires_total", r#"outcome="failed""#);
    let late_before = sample(&before, "xtimer_fire_lateness_seconds_count", "");

    let ok = node.create_ok(every_second("metrics-ok", &rx, json!({}))).await;
    // A callback answered 404 by the receiver: every attempt fails.
    let failing = every_second("metrics-failing", &rx, json!({}));
    let mut failing: Value = failing;
    failing["notifyHTTPParam"]["url"] = json!(format!("http://{}/nothing-here", node.node.addr));
    node.create_ok(failing).await;

    // The timer count is reused for 50 times as long as the last count
    // took (on a loaded server, seconds), so it too is waited for.
    let after = wait_for("a succeeded and a failed fire and the new timers counted", || async {
        let text = scrape(&node).await;
        let moved = sample(&text, "xtimer_fires_total", r#"outcome="succeeded""#) > ok_before
            && sample(&text, "xtimer_fires_total", r#"outcome="failed""#) > failed_before
            && sample(&text, "xtimer_timers", r#"status="enabled""#) >= 2.0;
        moved.then_some(text)
    })
    .await;
    assert!(rx.count() >= 1, "the receiver got the fire the counter counted");
    assert!(sample(&after, "xtimer_fire_lateness_seconds_count", "") > late_before, "{after}");
    // Buckets fine enough for milliseconds.
    assert!(after.contains(r#"xtimer_fire_lateness_seconds_bucket{le="0.001"}"#), "{after}");
    assert!(after.contains(r#"xtimer_fire_lateness_seconds_bucket{le="0.005"}"#), "{after}");
    assert!(after.contains(r#"xtimer_timers{status="disabled"}"#), "{after}");
    assert!(after.contains("xtimer_shards_held "), "{after}");
    let created = sample(&after, "xtimer_http_requests_total", r#"route="/api/xtimer/createTimer",code="200""#);
    assert!(created >= 2.0, "{after}");
    assert!(sample(&after, "xtimer_http_requests_total", r#"route="unmatched",code="404""#) >= 1.0, "{after}");

    // Disabling: the next fires are skipped, and counted so.
    node.act("unableTimer", ok, "it").await;
    let skipped_before = sample(&after, "xtimer_fires_total", r#"outcome="skipped""#);
    wait_for("a skipped fire counted", || async {
        let text = scrape(&node).await;
        (sample(&text, "xtimer_fires_total", r#"outcome="skipped""#) > skipped_before).then_some(())
    })
    .await;
    node.stop().await;
}

async fn asyncflow_tasks_are_counted_by_type_and_status(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let v1 = |path: &str| format!("{}/v1/{path}", node.base);
    let reply: Value = node
        .http
        .post(v1("register_task"))
        .json(&json!({"task_type": "metrics_demo", "schedule_limit": 10}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["code"], 0, "{reply}");
    for _ in 0..3 {
        let task =
            json!({"task_data": {"task_type": "metrics_demo", "user_id": "u", "task_stage": "s", "context": "{}"}});
        let reply: Value = node.http.post(v1("create_task")).json(&task).send().await.unwrap().json().await.unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
    }
    let held: Value =
        node.http.post(v1("hold_tasks?task_type=metrics_demo&limit=1")).send().await.unwrap().json().await.unwrap();
    assert_eq!(held["task_list"].as_array().map(Vec::len), Some(1), "{held}");
    let text = wait_for("three tasks counted", || async {
        let text = scrape(&node).await;
        (sample(&text, "asyncflow_tasks", r#"task_type="metrics_demo",status="pending""#)
            + sample(&text, "asyncflow_tasks", r#"task_type="metrics_demo",status="processing""#)
            == 3.0)
            .then_some(text)
    })
    .await;
    assert_eq!(sample(&text, "asyncflow_tasks", r#"task_type="metrics_demo",status="processing""#), 1.0, "{text}");
    assert_eq!(sample(&text, "asyncflow_tasks", r#"task_type="metrics_demo",status="success""#), 0.0, "{text}");
    node.stop().await;
}

/// Backfilled fires are late by design (100 s here): counted in
/// `xtimer_paced_fires_total`, left out of the lateness, in the metrics
/// and in the timer's figures.
async fn backfilled_fires_are_counted_apart_from_the_lateness(stack: Stack) {
    // The reconciler as shipped: it sends backfilled fires.
    let mut storage = Storage::new(stack).await;
    storage.config.reconciler = xtimer_core::config::ReconcilerConfig::default();
    let node = TestNode::spawn_with(storage.config.clone()).await;
    let rx = Receiver::start(false).await.unwrap();
    let paced_before = sample(&scrape(&node).await, "xtimer_paced_fires_total", "");
    let id = node.create_ok(every_second("metrics-backfilled", &rx, json!({}))).await;
    let start = (now_ms() / 1_000 - 100) * 1_000;
    let reply = node.post("backfillTimer", json!({"id": id, "app": "it", "from": start, "to": start + 10_000})).await;
    assert_eq!(reply["result"]["count"], 10, "{reply}");
    wait_for("the ten backfilled fires counted apart", || async {
        let text = scrape(&node).await;
        (sample(&text, "xtimer_paced_fires_total", "") >= paced_before + 10.0).then_some(())
    })
    .await;
    let ended = |h: &[xtimer::receiver::Hit]| h.iter().filter(|h| h.run_ms > start + 20_000).count();
    assert!(rx.wait_until(PATIENCE, |h| ended(h) >= 3).await, "fires on the schedule too");
    let got = node.get(&format!("getTimer?id={id}&app=it")).await;
    let stats = &got["result"]["stats"];
    assert!(stats["fires"].as_u64().unwrap() >= 13, "the backfilled fires count as fires: {got}");
    let p99 = stats["lateP99Ms"].as_i64().unwrap_or_else(|| panic!("{got}"));
    assert!(p99 < 50_000, "the backfilled fires' 100 s are not the lateness: {stats}");
    node.stop().await;
}

crate::on_both_stacks!(
    metrics_move_with_fires,
    asyncflow_tasks_are_counted_by_type_and_status,
    backfilled_fires_are_counted_apart_from_the_lateness
);
