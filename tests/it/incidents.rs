//! Incident stories: the features a user strings together on a bad day,
//! run on the node's default loops and asserted at a real receiver.
//!
//! - The receiver is down, `pauseAfterFailures` disables the timer, the
//!   receiver is fixed, the failed fires are replayed: they arrive (the
//!   timer stays disabled), paced, numbered, and the history says who
//!   disabled the timer.
//! - A one-shot whose only fire failed (the timer completed) is replayed.
//! - An app paused during a deploy with a retry in flight: the retry is
//!   held as first attempts are; the history shows the pause and resume.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use xtimer::receiver::{Hit, Receiver};
use xtimer_core::config::{ExecutorConfig, ReconcilerConfig};

use crate::helpers::{now_ms, wait_for, Stack, Storage, TestNode, PATIENCE};

fn header(hit: &Hit, name: &str) -> String {
    let headers = hit.headers.as_ref().expect("a detailed receiver");
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// A node on fresh storage of `stack` with the default executor and
/// reconciler (not the quick loops of the other tests).
async fn default_node(stack: Stack) -> (TestNode, Storage) {
    let mut storage = Storage::new(stack).await;
    storage.config.executor = ExecutorConfig::default();
    storage.config.reconciler = ReconcilerConfig::default();
    let node = TestNode::spawn_with(storage.config.clone()).await;
    (node, storage)
}

/// A receiver that answers 500 while `down` holds.
async fn flaky_receiver() -> (Receiver, Arc<AtomicBool>) {
    let rx = Receiver::start(true).await.unwrap();
    let down = Arc::new(AtomicBool::new(true));
    let flag = down.clone();
    rx.script(move |_, _| flag.load(Ordering::SeqCst).then(|| (StatusCode::INTERNAL_SERVER_ERROR, vec![])));
    (rx, down)
}

async fn post(node: &TestNode, route: &str, body: Value) -> Value {
    let url = format!("{}/api/xtimer/{route}", node.base);
    node.http.post(url).json(&body).send().await.unwrap().json().await.unwrap()
}

async fn get(node: &TestNode, path_and_query: &str) -> Value {
    let url = format!("{}/api/xtimer/{path_and_query}", node.base);
    node.http.get(url).send().await.unwrap().json().await.unwrap()
}

async fn history(node: &TestNode, id: i64) -> Vec<Value> {
    let reply = get(node, &format!("getTimerHistory?id={id}&app=it")).await;
    assert_eq!(reply["code"], 0, "{reply}");
    reply["result"]["list"].as_array().unwrap().clone()
}

async fn status(node: &TestNode, id: i64) -> i64 {
    let reply = node.act("getTimer", id, "it").await;
    reply["result"]["status"].as_i64().unwrap_or_else(|| panic!("{reply}"))
}

fn replays(hits: &[Hit]) -> Vec<Hit> {
    hits.iter().filter(|h| header(h, "x-xtimer-replay") == "1").cloned().collect()
}

pub async fn receiver_down_auto_pause_fix_replay_history(stack: Stack) {
    let (node, _storage) = default_node(stack).await;
    let (rx, down) = flaky_receiver().await;
    let from = now_ms();
    let id = node
        .create_ok(json!({"app": "it", "name": "outage", "cron": "* * * * * *", "status": 2,
                          "pauseAfterFailures": 3, "retry": {"maxAttempts": 1},
                          "notifyHTTPParam": {"url": rx.url("/hook")}}))
        .await;
    wait_for("pauseAfterFailures disables the timer", || async { (status(&node, id).await == 1).then_some(()) }).await;
    let first: Vec<Hit> = rx.hits();
    assert!(first.iter().all(|h| header(h, "x-xtimer-attempt") == "1"), "first attempts say so");

    // The disable is in the history, by xtimer itself, with its reason.
    let list = history(&node, id).await;
    let disable = list.iter().find(|e| e["action"] == "disable").unwrap_or_else(|| panic!("{list:?}"));
    assert_eq!(disable["by"], "system", "{disable}");
    assert_eq!(disable["changes"]["status"], json!([2, 1]), "{disable}");
    assert!(disable["changes"]["pauseReason"][1].as_str().unwrap().contains("pauseAfterFailures"), "{disable}");

    // The receiver is fixed; the failed fires are replayed at 2 a second.
    down.store(false, Ordering::SeqCst);
    let to = now_ms();
    let failed = wait_for("the failures are recorded", || async {
        let fires = node.fires(id, "it").await;
        let due: Vec<&Value> = fires.iter().filter(|f| f["runTimer"].as_i64().unwrap() < to).collect();
        let ended = due.iter().all(|f| f["status"].as_i64().unwrap() >= 2);
        let failed: Vec<String> =
            due.iter().filter(|f| f["status"] == 3).map(|f| format!("{id}_{}", f["runTimer"])).collect();
        (ended && failed.len() >= 3).then_some(failed)
    })
    .await;
    let reply =
        post(&node, "replayFires", json!({"app": "it", "id": id, "from": from, "to": to, "ratePerSec": 2})).await;
    assert_eq!(reply["result"]["count"], failed.len(), "{reply}");
    let n = failed.len();
    assert!(rx.wait_until(PATIENCE, |h| replays(h).len() >= n).await, "every replayed fire arrives: {:?}", rx.hits());
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let sent = replays(&rx.hits());
    let mut keys: Vec<String> = sent.iter().map(|h| h.key.clone()).collect();
    keys.sort();
    let mut want = failed.clone();
    want.sort();
    assert_eq!(keys, want, "each failed fire once, with its key");
    assert!(sent.iter().all(|h| header(h, "x-xtimer-attempt") == "2"), "a replay continues the count");
    let arrivals: Vec<i64> = sent.iter().map(|h| h.arrival_us / 1_000).collect();
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!((350..=800).contains(&gap), "evenly spaced at 2 a second (500 ms): {arrivals:?}");
    }

    // The timer stays as the failures left it; the records take the outcome.
    assert_eq!(status(&node, id).await, 1, "a replay does not enable the timer");
    wait_for("the replayed records succeeded", || async {
        let fires = node.fires(id, "it").await;
        let replayed: Vec<&Value> = fires.iter().filter(|f| f["replayed"] == true).collect();
        (replayed.len() == n && replayed.iter().all(|f| f["status"] == 2 && f["attempt"] == 2)).then_some(())
    })
    .await;
    let list = history(&node, id).await;
    assert_eq!(list[0]["action"], "replay", "{list:?}");

    // Why: both attempts of a replayed fire, by whom, with their answers.
    let run: i64 = failed[0].split('_').nth(1).unwrap().parse().unwrap();
    let at = chrono::DateTime::from_timestamp_millis(run).unwrap().to_rfc3339();
    let reply = get(&node, &format!("explainFire?id={id}&app=it&runTimer={}", at.replace('+', "%2B"))).await;
    assert_eq!(reply["code"], 0, "RFC 3339 is taken: {reply}");
    let explained = &reply["result"];
    let attempts = explained["attempts"].as_array().unwrap_or_else(|| panic!("{explained}"));
    assert_eq!(attempts.len(), 2, "the failed attempt is kept: {explained}");
    let node_id = node.node.node_id.as_str();
    assert_eq!(
        (&attempts[0]["attempt"], &attempts[0]["outcome"], &attempts[0]["httpStatus"], &attempts[0]["node"]),
        (&json!(1), &json!("failed"), &json!(500), &json!(node_id)),
        "{explained}"
    );
    assert_eq!((&attempts[1]["attempt"], &attempts[1]["outcome"]), (&json!(2), &json!("succeeded")), "{explained}");
    assert!(attempts.iter().all(|a| a["sentAt"].is_string() && a["answeredAt"].is_string()), "{explained}");
    let sent = explained["timeline"].as_array().unwrap().iter().filter(|m| m["event"] == "sent").count();
    assert_eq!(sent, 2, "a sent event per attempt: {explained}");
    let verdict = explained["verdict"].as_str().unwrap();
    assert!(verdict.starts_with("succeeded on attempt 2"), "{verdict}");
    assert!(verdict.contains("by a replay") && verdict.contains("1 attempt failed before"), "{verdict}");
    assert!(!explained["claims"].as_array().unwrap().is_empty(), "{explained}");
    node.stop().await;
}

pub async fn a_deleted_timers_fires_are_left_out_of_a_replay_and_counted(stack: Stack) {
    let (node, _storage) = default_node(stack).await;
    let (rx, _down) = flaky_receiver().await;
    let from = now_ms();
    let id = node
        .create_ok(json!({"app": "it", "name": "gone", "cron": "* * * * * *", "status": 2,
                          "retry": {"maxAttempts": 1}, "notifyHTTPParam": {"url": rx.url("/gone")}}))
        .await;
    wait_for("two failed fires", || async {
        let fires = node.fires(id, "it").await;
        (fires.iter().filter(|f| f["status"] == 3).count() >= 2).then_some(())
    })
    .await;
    assert_eq!(node.act("delTimer", id, "it").await["code"], 0);
    let to = now_ms();
    let reply = post(&node, "replayFires", json!({"app": "it", "id": id, "from": from, "to": to})).await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert_eq!(reply["result"]["count"], 0, "{reply}");
    assert!(reply["result"]["leftOutDeleted"].as_u64().unwrap() >= 2, "the answer says how many: {reply}");
    let whole_app = post(&node, "replayFires", json!({"app": "it", "from": from, "to": to})).await;
    assert_eq!(whole_app["result"]["leftOutDeleted"], reply["result"]["leftOutDeleted"], "{whole_app}");
    let before = rx.count();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(rx.count(), before, "nothing is sent for a deleted timer");
    node.stop().await;
}

pub async fn a_completed_one_shot_whose_fire_failed_is_replayed(stack: Stack) {
    let (node, _storage) = default_node(stack).await;
    let (rx, down) = flaky_receiver().await;
    let run_at = now_ms() + 1_500;
    let id = node
        .create_ok(json!({"app": "it", "name": "once", "runAt": run_at, "status": 2, "retry": {"maxAttempts": 1},
                          "notifyHTTPParam": {"url": rx.url("/once")}}))
        .await;
    wait_for("the one-shot completes", || async { (status(&node, id).await == 4).then_some(()) }).await;
    let list = history(&node, id).await;
    let complete = list.iter().find(|e| e["action"] == "complete").unwrap_or_else(|| panic!("{list:?}"));
    assert_eq!(complete["by"], "system", "{complete}");
    assert_eq!(complete["changes"]["status"], json!([2, 4]), "{complete}");

    down.store(false, Ordering::SeqCst);
    let reply = post(&node, "replayFires", json!({"app": "it", "id": id, "from": run_at - 1, "to": run_at + 1})).await;
    assert_eq!(reply["result"]["count"], 1, "{reply}");
    assert!(rx.wait_until(PATIENCE, |h| replays(h).len() == 1).await, "the replay arrives: {:?}", rx.hits());
    let fires = wait_for("recorded succeeded", || async {
        let fires = node.fires(id, "it").await;
        (fires.len() == 1 && fires[0]["status"] == 2).then_some(fires)
    })
    .await;
    assert_eq!(fires[0]["replayed"], true);
    assert_eq!(status(&node, id).await, 4, "still completed");
    node.stop().await;
}

pub async fn an_app_paused_during_a_deploy_holds_its_retries(stack: Stack) {
    let (node, _storage) = default_node(stack).await;
    let (rx, down) = flaky_receiver().await;
    let run_at = now_ms() + 1_500;
    let id = node
        .create_ok(json!({"app": "it", "name": "deploy", "runAt": run_at, "status": 2,
                          "retry": {"maxAttempts": 3, "backoffMs": 3000},
                          "notifyHTTPParam": {"url": rx.url("/deploy")}}))
        .await;
    assert!(rx.wait_until(PATIENCE, |h| !h.is_empty()).await, "the first attempt arrives (and fails)");
    let paused = post(&node, "pauseApp", json!({"app": "it", "reason": "deploy"})).await;
    assert_eq!(paused["code"], 0, "{paused}");
    // The deploy ends well after the retry was due; nothing went out meanwhile.
    let fire = wait_for("the retry is held, recorded skipped", || async {
        let fires = node.fires(id, "it").await;
        fires.into_iter().find(|f| f["status"] == 4)
    })
    .await;
    assert!(fire["output"].as_str().unwrap().contains("app paused: deploy"), "{fire}");
    assert_eq!(rx.hits().len(), 1, "no retry reached the receiver while the app was paused");
    down.store(false, Ordering::SeqCst);
    let resumed = post(&node, "resumeApp", json!({"app": "it"})).await;
    assert_eq!(resumed["code"], 0, "{resumed}");

    let list = history(&node, id).await;
    let actions: Vec<&str> = list.iter().map(|e| e["action"].as_str().unwrap()).collect();
    let (resume, pause) =
        (actions.iter().position(|a| *a == "app-resume"), actions.iter().position(|a| *a == "app-pause"));
    assert!(matches!((resume, pause), (Some(r), Some(p)) if r < p), "newest first: {list:?}");
    let pause = &list[pause.unwrap()];
    assert_eq!(pause["changes"]["reason"], json!([null, "deploy"]), "{list:?}");
    assert_eq!(pause["by"], "anonymous", "who paused the app: {list:?}");

    // Replayed after the deploy: it goes out, as its next attempt.
    let reply =
        post(&node, "replayFires", json!({"app": "it", "id": id, "from": run_at - 1, "to": run_at + 1, "status": [4]}))
            .await;
    assert_eq!(reply["result"]["count"], 1, "{reply}");
    assert!(rx.wait_until(PATIENCE, |h| replays(h).len() == 1).await, "{:?}", rx.hits());
    let replayed = replays(&rx.hits());
    assert_eq!(header(&replayed[0], "x-xtimer-attempt"), "2", "the held retry was attempt 2");
    node.stop().await;
}

/// A spread timer edited while two nodes plan its minute: fillers created
/// through both nodes at once stay flat (one a second), the edited timer
/// is placed again inside its new window, and every fire arrives once, on
/// its placed time. (On the embedded default one node plans.)
pub async fn a_spread_timer_edited_while_two_nodes_plan(stack: Stack) {
    let (a, storage) = default_node(stack).await;
    let b = match stack {
        Stack::Embedded => None,
        _ => Some(TestNode::spawn_with(storage.config.clone()).await),
    };
    let other = b.as_ref().unwrap_or(&a);
    let rx = Receiver::start(false).await.unwrap();
    let at = (now_ms() / 1000 + 25) * 1000;
    let body = |name: String, spread: i64| {
        json!({"app": "it", "name": name, "everyMs": 3_600_000, "anchorAt": at, "spreadMs": spread, "status": 2,
               "notifyHTTPParam": {"url": rx.url("/hook")}, "retry": {"maxAttempts": 1, "backoffMs": 0}})
    };
    let half = |from: usize| -> Vec<Value> { (from..from + 15).map(|i| body(format!("filler-{i}"), 30_000)).collect() };
    let (one, two) = tokio::join!(
        post(&a, "createTimers", json!({ "timers": half(0) })),
        post(other, "createTimers", json!({ "timers": half(15) }))
    );
    assert_eq!((one["code"].as_i64(), two["code"].as_i64()), (Some(0), Some(0)), "{one} {two}");
    let id = a.create_ok(body("edited".into(), 50_000)).await;
    let reply = post(other, "updateTimer", json!({"id": id, "app": "it", "spreadMs": 5_000})).await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert!(now_ms() < at - 1_000, "edited before the window opens");

    let n = 31;
    let until = Duration::from_millis((at + 31_000 - now_ms()).max(0) as u64) + PATIENCE;
    assert!(rx.wait_until(until, |hits| hits.len() >= n).await, "every fire arrives: {}", rx.hits().len());
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let hits = rx.hits();
    assert_eq!(hits.len(), n, "each fire once");
    let edited = hits.iter().find(|h| h.key == format!("{id}_{at}")).expect("the edited timer's fire");
    assert!((at..at + 5_000).contains(&edited.run_ms), "placed in its new window: +{} ms", edited.run_ms - at);
    let mut per_second = std::collections::BTreeMap::new();
    for h in hits.iter().filter(|h| h.key != edited.key) {
        *per_second.entry((h.run_ms - at) / 1_000).or_insert(0) += 1;
    }
    assert!(per_second.values().all(|&c| c == 1), "two planners placed the fillers flat: {per_second:?}");
    assert!(per_second.keys().all(|s| (0..30).contains(s)), "inside their window: {per_second:?}");
    for h in &hits {
        assert!(h.lateness_ms() < 1_000.0, "sent on its placed time: {} ms late", h.lateness_ms());
    }
    if let Some(b) = b {
        b.stop().await;
    }
    a.stop().await;
}

crate::on_both_stacks!(
    a_spread_timer_edited_while_two_nodes_plan,
    receiver_down_auto_pause_fix_replay_history,
    a_deleted_timers_fires_are_left_out_of_a_replay_and_counted,
    a_completed_one_shot_whose_fire_failed_is_replayed,
    an_app_paused_during_a_deploy_holds_its_retries,
);
