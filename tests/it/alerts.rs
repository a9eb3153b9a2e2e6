//! Alerts (API 1h), end to end with the default settings: `onLate` told
//! once for a fire held 3 s and not for one on time, `onMissed` told for a
//! fire recorded missed and for one skipped, each with the `onFailure`
//! body and `Idempotency-Key: {fire's key}_late` / `_missed`; and
//! `onMissed` after a 70 s outage under `fire_once` (a long test). That
//! the notifications survive a crash between the fire's result and their
//! sending is shown where a crash can be placed there: the executor's
//! tests (`executor/tests/it/owed.rs`) and the store's
//! (`store/tests/it/notify.rs`).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::{Hit, Receiver};

use crate::helpers::{now_ms, wait_for, Stack, Storage, TestNode};

/// Sets a flow's limits, then waits for every node to read them.
async fn set_flow(app: &TestNode, body: Value) {
    let reply = app.post("setFlowLimit", body).await;
    assert_eq!(reply["code"], 0, "{reply}");
    // Every node reads the limits once a second.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
}

/// The alerts `rx` got whose key ends in `_{suffix}`, by key.
fn alerts(rx: &Receiver, suffix: &str) -> HashMap<String, Vec<Hit>> {
    let mut by_key: HashMap<String, Vec<Hit>> = HashMap::new();
    for hit in rx.hits().into_iter().filter(|h| h.key.ends_with(&format!("_{suffix}"))) {
        by_key.entry(hit.key.clone()).or_default().push(hit);
    }
    by_key
}

fn body(hit: &Hit) -> Value {
    serde_json::from_slice(&hit.body).unwrap_or_else(|e| panic!("a JSON body: {e}: {:?}", hit.body))
}

/// The fire of timer `id` at `run_ms`, once it has status `status`.
async fn fire_with(app: &TestNode, id: i64, run_ms: i64, status: i64) -> Value {
    wait_for(&format!("timer {id}'s fire at {run_ms} with status {status}"), || async {
        app.fires(id, "it").await.into_iter().find(|f| f["runTimer"] == run_ms && f["status"] == status)
    })
    .await
}

/// A one-shot held 3 s by its paused flow is sent 3 s late: its `onLate`
/// (`thresholdMs: 1000`) is told once, with the fire's key and `_late` and
/// the `onFailure` body; a one-shot sent on time tells nothing.
pub async fn on_late_is_told_once_for_a_fire_held_3_s_and_not_for_one_on_time(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let told = Receiver::start(false).await.unwrap();
    set_flow(&app, json!({"app": "it", "key": "held", "paused": true})).await;
    let due = now_ms() + 2_000;
    let late = |name: &str, flow: Option<&str>| {
        let mut notify = json!({"url": rx.url(&format!("/{name}"))});
        if let Some(flow) = flow {
            notify["flowKey"] = json!(flow);
        }
        json!({"app": "it", "name": name, "runAt": due, "status": 2, "notifyHTTPParam": notify,
               "onLate": {"thresholdMs": 1000, "notify": {"url": told.url("/late"), "header": {"X-Alert": "late"}}},
               "onMissed": {"url": told.url("/missed")}})
    };
    let held = app.create_ok(late("held", Some("held"))).await;
    let on_time = app.create_ok(late("on-time", None)).await;
    let shown = app.act("getTimer", held, "it").await;
    assert_eq!(shown["result"]["onLate"]["thresholdMs"], 1000, "{shown}");
    assert_eq!(shown["result"]["onLate"]["notify"]["url"], told.url("/late"), "{shown}");
    assert_eq!(shown["result"]["onMissed"]["url"], told.url("/missed"), "{shown}");

    // Held 3 s past its time, then let go.
    tokio::time::sleep(Duration::from_millis((due + 3_000 - now_ms()).max(0) as u64)).await;
    assert!(rx.hits().iter().all(|h| h.uri.path() == "/on-time"), "the held fire waits");
    set_flow(&app, json!({"app": "it", "key": "held", "paused": false})).await;
    assert!(rx.wait_until(Duration::from_secs(10), |h| h.len() >= 2).await, "both sent");
    let fire = fire_with(&app, held, due, 2).await;
    let want = format!("{held}_{due}_late");
    assert!(told.wait_until(Duration::from_secs(10), |h| h.iter().any(|h| h.key == want)).await, "onLate told");
    // No second notice, and none for the fire on time (or a missed one).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let keys: Vec<String> = told.hits().iter().map(|h| h.key.clone()).collect();
    assert_eq!(keys, std::slice::from_ref(&want), "once, and only for the late fire (on time: timer {on_time})");

    let hit = &told.hits()[0];
    assert_eq!(hit.uri.path(), "/late");
    let b = body(hit);
    assert_eq!((b["timerId"].as_i64(), b["app"].as_str(), b["name"].as_str()), (Some(held), Some("it"), Some("held")));
    assert_eq!((b["runTimer"].as_i64(), b["taskId"].as_i64()), (Some(due), fire["taskId"].as_i64()), "{b}");
    assert_eq!(
        (b["attempts"].as_i64(), b["manual"].as_bool(), b["alert"].as_str()),
        (Some(1), Some(false), Some("late"))
    );
    let output = b["output"].as_str().unwrap();
    assert!(output.starts_with("sent ") && output.contains("(onLate.thresholdMs 1000); HTTP 200"), "{output}");
    let late_ms: i64 = output["sent ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(late_ms >= 3_000, "held 3 s: {output}");
    app.stop().await;
}

/// `onMissed` is told for a fire recorded missed (`skip` past its
/// `misfireThresholdMs` while its flow is paused) and for fires recorded
/// skipped (`overlap: skip` behind a fire still waiting), each once, with
/// the `onFailure` body and `Idempotency-Key: {fire's key}_missed`.
pub async fn on_missed_is_told_for_a_fire_missed_and_one_skipped(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let told = Receiver::start(false).await.unwrap();
    set_flow(&app, json!({"app": "it", "key": "held", "paused": true})).await;
    let due = now_ms() + 2_000;
    let missed = app
        .create_ok(json!({"app": "it", "name": "missed", "runAt": due, "status": 2,
                          "misfire": "skip", "misfireThresholdMs": 1000,
                          "notifyHTTPParam": {"url": rx.url("/missed"), "flowKey": "held"},
                          "onMissed": {"url": told.url("/missed")}}))
        .await;
    let skipping = app
        .create_ok(json!({"app": "it", "name": "skipping", "cron": "* * * * * *", "status": 2, "overlap": "skip",
                          "notifyHTTPParam": {"url": rx.url("/skipping"), "flowKey": "held"},
                          "onMissed": {"url": told.url("/skipped")}}))
        .await;

    let fire = fire_with(&app, missed, due, 5).await;
    let want = format!("{missed}_{due}_missed");
    assert!(told.wait_until(Duration::from_secs(10), |h| h.iter().any(|h| h.key == want)).await, "missed told");
    let skipped_told = told
        .wait_until(Duration::from_secs(10), |h| h.iter().any(|h| h.key.starts_with(&format!("{skipping}_"))))
        .await;
    assert!(skipped_told, "skipped told");
    app.act("unableTimer", skipping, "it").await;
    set_flow(&app, json!({"app": "it", "key": "held", "paused": false})).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let by_key = alerts(&told, "missed");
    assert_eq!(by_key.len(), told.count(), "every alert ends in _missed: {:?}", told.hits());
    assert!(by_key.values().all(|hits| hits.len() == 1), "each told once: {by_key:?}");
    let hit = &by_key[&want][0];
    assert_eq!(hit.uri.path(), "/missed");
    let b = body(hit);
    assert_eq!(
        (b["timerId"].as_i64(), b["name"].as_str(), b["alert"].as_str()),
        (Some(missed), Some("missed"), Some("missed"))
    );
    assert_eq!((b["runTimer"].as_i64(), b["taskId"].as_i64()), (Some(due), fire["taskId"].as_i64()), "{b}");
    assert_eq!(b["attempts"], 0, "{b}");
    assert!(b["output"].as_str().unwrap().contains("waited for its flow"), "{b}");

    // The skipped fires: each recorded skipped, with its own notice.
    let skips: Vec<&Hit> = by_key.values().flatten().filter(|h| h.uri.path() == "/skipped").collect();
    assert!(!skips.is_empty());
    let fires = app.fires(skipping, "it").await;
    for hit in skips {
        let b = body(hit);
        let run = b["runTimer"].as_i64().unwrap();
        assert_eq!(hit.key, format!("{skipping}_{run}_missed"));
        let fire = fires.iter().find(|f| f["runTimer"] == run).unwrap_or_else(|| panic!("fire at {run}"));
        assert_eq!((fire["status"].as_i64(), fire["taskId"].as_i64()), (Some(4), b["taskId"].as_i64()), "{fire}");
        assert_eq!(b["output"], "skipped: the fire before is still running (overlap: skip)", "{b}");
    }
    app.stop().await;
}

/// LONG (about 80 s): a node is down 70 s with a timer due every second
/// under the default `fire_once` and the default 60 s catch-up window.
/// Once a node is started again on the same database, the fires of the
/// outage's first 10 s (past the window, their next time come) are
/// recorded missed, each telling `onMissed` once; the later ones fire late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_missed_is_told_after_a_70_s_outage_under_fire_once() {
    let storage = Storage::new(Stack::Embedded).await;
    let rx = Receiver::start(false).await.unwrap();
    let told = Receiver::start(false).await.unwrap();
    let first = TestNode::spawn_with(storage.config.clone()).await;
    let id = first
        .create_ok(json!({"app": "it", "name": "steady", "cron": "* * * * * *", "status": 2,
                          "notifyHTTPParam": {"url": rx.url("/steady")},
                          "onMissed": {"url": told.url("/missed")}}))
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    first.stop().await;
    let stopped_at = now_ms();
    tokio::time::sleep(Duration::from_secs(70)).await;

    let second = TestNode::spawn_with(storage.config.clone()).await;
    let restarted_at = now_ms();
    let outage = wait_for("the outage's fires ended", || async {
        let fires: Vec<Value> = second
            .fires(id, "it")
            .await
            .into_iter()
            .filter(|f| f["runTimer"].as_i64().is_some_and(|r| r > stopped_at && r < restarted_at))
            .collect();
        fires.iter().all(|f| f["status"].as_i64().is_some_and(|s| s >= 2)).then_some(fires)
    })
    .await;
    let missed: Vec<i64> =
        outage.iter().filter(|f| f["status"] == 5).map(|f| f["runTimer"].as_i64().unwrap()).collect();
    assert!(missed.len() >= 5, "the first seconds of the outage missed: {outage:?}");
    for f in &outage {
        let run = f["runTimer"].as_i64().unwrap();
        if run < restarted_at - 61_000 {
            assert_eq!(f["status"], 5, "past the window: missed: {f}");
        }
    }
    let want: Vec<String> = missed.iter().map(|run| format!("{id}_{run}_missed")).collect();
    let all_told =
        told.wait_until(Duration::from_secs(15), |h| want.iter().all(|k| h.iter().any(|h| &h.key == k))).await;
    let keys: Vec<String> = told.hits().iter().map(|h| h.key.clone()).collect();
    assert!(all_told, "each missed fire told: want {want:?}, got {keys:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let by_key = alerts(&told, "missed");
    assert_eq!(by_key.len(), want.len(), "told only for the missed fires: {keys:?}");
    assert!(by_key.values().all(|hits| hits.len() == 1), "each once: {keys:?}");
    for hit in by_key.values().flatten() {
        let b = body(hit);
        assert_eq!((b["timerId"].as_i64(), b["alert"].as_str()), (Some(id), Some("missed")), "{b}");
        assert!(missed.contains(&b["runTimer"].as_i64().unwrap()), "told only for a missed fire: {b}");
    }
    second.stop().await;
}

/// Bad alerts are refused naming each field; `getTimer` shows the alerts,
/// `updateTimer` sets them and `null` removes one, keeping the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_are_checked_shown_changed_and_removed() {
    let app = TestNode::spawn(Stack::Embedded).await;
    let hook = "http://127.0.0.1:9/alerts";
    let bad = app
        .create(json!({"app": "it", "name": "bad", "cron": "0 0 * * * *", "notifyHTTPParam": {"url": hook},
                       "onMissed": {"url": hook, "body": "mine"},
                       "onLate": {"thresholdMs": 0, "notify": {"url": "ftp://host/x", "flowKey": "k"}}}))
        .await;
    assert_eq!(bad["code"], 400, "{bad}");
    let msg = bad["msg"].as_str().unwrap();
    for field in [
        "onMissed.body: is set by xtimer",
        "onLate.thresholdMs: must be 1 to 86400000 ms, got 0",
        "onLate.notify.url: must use http or https",
        "onLate.notify.flowKey: applies only to notifyHTTPParam",
    ] {
        assert!(msg.contains(field), "{field} in {msg}");
    }
    let no_notify = app
        .create(json!({"app": "it", "name": "bad", "cron": "0 0 * * * *", "notifyHTTPParam": {"url": hook},
                       "onLate": {"thresholdMs": 1000}}))
        .await;
    assert_eq!(no_notify["code"], 400, "{no_notify}");
    assert!(no_notify["msg"].as_str().unwrap().contains("notify"), "{no_notify}");

    let id = app
        .create_ok(json!({"app": "it", "name": "alerting", "cron": "0 0 * * * *", "notifyHTTPParam": {"url": hook},
                          "onMissed": {"url": hook, "header": {"X-Team": "a"}}}))
        .await;
    let shown = app.act("getTimer", id, "it").await["result"].clone();
    assert_eq!(shown["onMissed"], json!({"url": hook, "method": "POST", "header": {"X-Team": "a"}, "body": null}));
    assert!(shown.get("onLate").is_none(), "{shown}");
    let updated = app
        .post(
            "updateTimer",
            json!({"id": id, "app": "it",
                                    "onLate": {"thresholdMs": 5000, "notify": {"url": hook, "method": "put"}}}),
        )
        .await;
    assert_eq!(updated["code"], 0, "{updated}");
    let shown = &updated["result"];
    assert_eq!(
        shown["onLate"],
        json!({"thresholdMs": 5000, "notify": {"url": hook, "method": "PUT", "header": {}, "body": null}})
    );
    assert_eq!(shown["onMissed"]["header"]["X-Team"], "a", "kept: {shown}");
    let removed = app.post("updateTimer", json!({"id": id, "app": "it", "onMissed": null})).await;
    assert_eq!(removed["code"], 0, "{removed}");
    assert!(removed["result"].get("onMissed").is_none(), "{removed}");
    assert_eq!(removed["result"]["onLate"]["thresholdMs"], 5000, "{removed}");
    app.stop().await;
}

crate::on_both_stacks!(
    on_late_is_told_once_for_a_fire_held_3_s_and_not_for_one_on_time,
    on_missed_is_told_for_a_fire_missed_and_one_skipped,
);
