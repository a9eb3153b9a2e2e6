//! A timer's life after it was made, as its receiver sees it: updateTimer,
//! triggerTimer, backfillTimer, deleteAfterRun, previewCron.

use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;

use crate::helpers::{every_second, now_ms, wait_for, Stack, Storage, TestNode, PATIENCE};

impl TestNode {
    /// POST `/api/xtimer/{route}` with a JSON body; returns the envelope.
    pub(crate) async fn post(&self, route: &str, body: Value) -> Value {
        let url = format!("{}/api/xtimer/{route}", self.base);
        self.http.post(url).json(&body).send().await.unwrap().json().await.unwrap()
    }

    /// GET `/api/xtimer/{path_and_query}`; returns the envelope.
    pub(crate) async fn get(&self, path_and_query: &str) -> Value {
        let url = format!("{}/api/xtimer/{path_and_query}", self.base);
        self.http.get(url).send().await.unwrap().json().await.unwrap()
    }
}

pub async fn update_moves_unclaimed_fires_to_the_new_schedule_and_keeps_history(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    let id = app
        .create_ok(json!({
            "app": "it", "name": "moving", "cron": "*/2 * * * * *", "status": 2,
            "notifyHTTPParam": {"url": rx.url("/hook"), "body": "old"},
            "retry": {"maxAttempts": 1}
        }))
        .await;
    assert!(rx.wait_until(PATIENCE, |h| !h.is_empty()).await, "the old schedule fires");

    let reply = app
        .post(
            "updateTimer",
            json!({"id": id, "app": "it", "cron": "1/2 * * * * *",
                   "notifyHTTPParam": {"url": rx.url("/hook"), "body": "new"}}),
        )
        .await;
    let updated_at = now_ms();
    assert_eq!(reply["code"], 0, "{reply}");
    assert_eq!(reply["result"]["cron"], "1/2 * * * * *");
    assert_eq!(reply["result"]["retry"]["maxAttempts"], 1, "absent fields keep their value: {reply}");
    assert_eq!(reply["result"]["status"], 2);
    assert_eq!(reply["result"]["notifyHTTPParam"]["body"], "new");

    assert!(rx.wait_until(PATIENCE, |h| h.iter().filter(|h| h.run_ms > updated_at).count() >= 3).await);
    // A fire claimed before the update returned (claim_ahead_ms and the
    // wheel's window of a tenth of it, 550 ms) may still go out; none later.
    for hit in rx.hits().iter().filter(|h| h.run_ms > updated_at + 550) {
        assert_eq!(hit.run_ms % 2_000, 1_000, "only odd seconds after the update: {}", hit.run_ms);
        assert_eq!(&hit.body[..], b"new", "the new callback at {}", hit.run_ms);
    }
    // The history of the old schedule is kept.
    let fires = app.fires(id, "it").await;
    assert!(
        fires.iter().any(|f| f["runTimer"].as_i64().unwrap() % 2_000 == 0 && f["status"] == 2),
        "an old fire is still listed: {fires:?}"
    );
    app.stop().await;
}

pub async fn update_validates_like_create_and_refuses_unknown_timers(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let id = app
        .create_ok(json!({"app": "it", "name": "a", "cron": "0 0 * * *", "notifyHTTPParam": {"url": rx.url("/a")}}))
        .await;
    app.create_ok(json!({"app": "it", "name": "b", "cron": "0 0 * * *", "notifyHTTPParam": {"url": rx.url("/b")}}))
        .await;
    let bad = app.post("updateTimer", json!({"id": id, "app": "it", "cron": "61 0 * * *", "misfire": "never"})).await;
    assert_ne!(bad["code"], 0);
    let msg = bad["msg"].as_str().unwrap();
    assert!(msg.contains("minute field") && msg.contains("misfire: must be one of"), "{msg}");
    let taken = app.post("updateTimer", json!({"id": id, "app": "it", "name": "b"})).await;
    assert!(taken["msg"].as_str().unwrap().contains("already exists"), "{taken}");
    let unknown = app.post("updateTimer", json!({"id": id + 100, "app": "it", "name": "c"})).await;
    assert!(unknown["msg"].as_str().unwrap().contains("not found"), "{unknown}");
    let other_app = app.post("updateTimer", json!({"id": id, "app": "other", "name": "c"})).await;
    assert!(other_app["msg"].as_str().unwrap().contains("not found"), "{other_app}");
    let once_only = app.post("updateTimer", json!({"id": id, "app": "it", "deleteAfterRun": true})).await;
    assert!(once_only["msg"].as_str().unwrap().contains("deleteAfterRun"), "{once_only}");
    // Nothing was changed by the refused updates.
    let got = app.get(&format!("getTimer?id={id}&app=it")).await;
    assert_eq!((got["result"]["name"].as_str(), got["result"]["cron"].as_str()), (Some("a"), Some("0 0 * * *")));
    app.stop().await;
}

pub async fn trigger_fires_once_now_with_a_manual_key(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    let id = app
        .create_ok(json!({
            "app": "it", "name": "yearly", "cron": "0 0 0 1 1 ?", "status": 2,
            "notifyHTTPParam": {"url": rx.url("/hook"), "body": "{}"}
        }))
        .await;
    let asked = now_ms();
    let reply = app.post("triggerTimer", json!({"id": id, "app": "it"})).await;
    assert_eq!(reply["code"], 0, "{reply}");
    let run = reply["result"]["runTimer"].as_i64().unwrap();
    assert!(run >= asked && run % 1_000 != 0, "now, never on a whole second: {run}");

    assert!(rx.wait_until(PATIENCE, |h| !h.is_empty()).await);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let hits = rx.hits();
    assert_eq!(hits.len(), 1, "one extra fire");
    assert_eq!(hits[0].run_ms, run);
    assert!(hits[0].lateness_ms() < 1_000.0, "at once: {} ms", hits[0].lateness_ms());
    assert_eq!(hits[0].key, format!("{id}_{run}_manual"));
    let fire = wait_for("the manual fire is recorded", || async {
        let fires = app.fires(id, "it").await;
        fires.into_iter().find(|f| f["runTimer"] == run && f["status"] == 2)
    })
    .await;
    assert_eq!(fire["manual"], true, "{fire}");

    // A disabled timer is not triggered.
    app.act("unableTimer", id, "it").await;
    let refused = app.post("triggerTimer", json!({"id": id, "app": "it"})).await;
    assert!(refused["msg"].as_str().unwrap().contains("not enabled"), "{refused}");
    app.stop().await;
}

pub async fn one_shot_with_delete_after_run_is_deleted_once_fired(stack: Stack) {
    let mut storage = Storage::new(stack).await;
    storage.config.migrator.step_ms = 1_000;
    let app = TestNode::spawn_with(storage.config.clone()).await;
    let rx = Receiver::start(false).await.unwrap();
    let run_at = now_ms() + 1_500;
    let gone = app
        .create_ok(json!({
            "app": "it", "name": "gone", "runAt": run_at, "status": 2, "deleteAfterRun": true,
            "notifyHTTPParam": {"url": rx.url("/gone")}
        }))
        .await;
    let kept = app
        .create_ok(json!({
            "app": "it", "name": "kept", "runAt": run_at, "status": 2,
            "notifyHTTPParam": {"url": rx.url("/kept")}
        }))
        .await;
    assert_eq!(app.get(&format!("getTimer?id={gone}&app=it")).await["result"]["deleteAfterRun"], true);
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 2).await, "both fire");
    wait_for("the deleteAfterRun timer is deleted", || async {
        let got = app.get(&format!("getTimer?id={gone}&app=it")).await;
        (got["code"] != 0).then_some(())
    })
    .await;
    let kept_now = wait_for("the other one-shot timer is completed", || async {
        let got = app.get(&format!("getTimer?id={kept}&app=it")).await;
        (got["result"]["status"] == 4).then_some(got)
    })
    .await;
    assert!(kept_now["result"].get("deleteAfterRun").is_none(), "shown only when set: {kept_now}");
    // The name of the deleted one is free again.
    app.create_ok(json!({
        "app": "it", "name": "gone", "runAt": now_ms() + 60_000, "notifyHTTPParam": {"url": rx.url("/x")}
    }))
    .await;
    app.stop().await;
    drop(storage);
}

pub async fn preview_lists_fire_times_with_daylight_saving_notes(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let q = "previewCron?cron=0%2030%202%20*%20*%20%3F&timezone=America/New_York&from=2024-03-08T00:00:00Z&count=3";
    let reply = app.get(q).await;
    assert_eq!(reply["code"], 0, "{reply}");
    let list = reply["result"]["list"].as_array().unwrap();
    let times: Vec<&str> = list.iter().map(|f| f["runTime"].as_str().unwrap()).collect();
    assert_eq!(times, ["2024-03-08T02:30:00-05:00", "2024-03-09T02:30:00-05:00", "2024-03-10T03:00:00-04:00"]);
    let notes: Vec<&Value> = list.iter().map(|f| &f["note"]).collect();
    assert_eq!(notes, [&Value::Null, &Value::Null, &json!("gap")]);
    assert_eq!(list[2]["runTimer"], 1_710_054_000_000_i64);

    let q = "previewCron?cron=0%2030%201%20*%20*%20%3F&timezone=America/New_York&from=1730505600000&count=2";
    let list = app.get(q).await["result"]["list"].clone();
    assert_eq!(list[0]["runTime"], "2024-11-02T01:30:00-04:00");
    assert_eq!(list[1]["note"], "overlap", "{list}");

    let default = app.get("previewCron?cron=*%20*%20*%20*%20*").await;
    assert_eq!(default["result"]["list"].as_array().unwrap().len(), 10);
    assert!(default["result"]["list"][0]["runTimer"].as_i64().unwrap() > now_ms() - 1_000);

    // Errors are createTimer's, word for word.
    let create = app
        .create(
            json!({"app": "it", "name": "x", "cron": "0 12 * * MON-FRI,8", "notifyHTTPParam": {"url": "http://h/"}}),
        )
        .await;
    let preview = app.get("previewCron?cron=0%2012%20*%20*%20MON-FRI,8").await;
    assert_ne!(preview["code"], 0);
    assert_eq!(preview["msg"], create["msg"]);
    let zone = app.get("previewCron?cron=*%20*%20*%20*%20*&timezone=Mars/Olympus").await;
    assert!(zone["msg"].as_str().unwrap().starts_with("timezone: unknown time zone"), "{zone}");
    // Past the zone data's last year (2099) daylight saving goes on by its rules.
    let far = app.get("previewCron?cron=0%200%200%201%20*%20%3F%202120&timezone=America/New_York&count=1").await;
    assert_eq!(far["result"]["list"][0]["runTimer"], 4_733_528_400_000i64, "{far}");
    let many = app.get("previewCron?cron=*%20*%20*%20*%20*&count=1001").await;
    assert!(many["msg"].as_str().unwrap().starts_with("count: must be 1 to 1000"), "{many}");
    app.stop().await;
}

pub async fn on_failure_is_called_once_when_a_fire_ends_failed(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    rx.fail_first(100);
    let alerts = Receiver::start(true).await.unwrap();
    let bad = app
        .create(json!({
            "app": "it", "name": "bad", "cron": "0 0 * * *",
            "notifyHTTPParam": {"url": rx.url("/hook")}, "onFailure": {"url": "ftp://host/x", "body": "mine"}
        }))
        .await;
    let msg = bad["msg"].as_str().unwrap();
    assert!(msg.contains("onFailure.url: must use http or https") && msg.contains("onFailure.body"), "{msg}");

    let run_at = now_ms() + 1_500;
    let id = app
        .create_ok(json!({
            "app": "it", "name": "failing", "runAt": run_at, "status": 2,
            "notifyHTTPParam": {"url": rx.url("/hook")},
            "retry": {"maxAttempts": 2, "backoffMs": 100},
            "onFailure": {"url": alerts.url("/failed"), "header": {"X-Alert": "1"}}
        }))
        .await;
    assert_eq!(app.get(&format!("getTimer?id={id}&app=it")).await["result"]["onFailure"]["url"], alerts.url("/failed"));
    assert!(alerts.wait_until(PATIENCE, |h| !h.is_empty()).await, "the failure is told");
    // Time for a second call to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let hits = alerts.hits();
    assert_eq!(hits.len(), 1, "once per failed fire");
    assert_eq!(rx.count(), 2, "after both attempts");
    let told: Value = serde_json::from_slice(&hits[0].body).unwrap();
    assert_eq!((told["timerId"].as_i64(), told["runTimer"].as_i64()), (Some(id), Some(run_at)), "{told}");
    assert_eq!((told["attempts"].as_i64(), told["name"].as_str()), (Some(2), Some("failing")), "{told}");
    assert!(told["output"].as_str().unwrap().starts_with("HTTP 500"), "{told}");
    assert!(told["taskId"].as_i64().unwrap() > 0, "{told}");
    let headers = hits[0].headers.as_ref().unwrap();
    assert_eq!(headers["x-alert"], "1");
    assert_eq!(hits[0].key, format!("{id}_{run_at}_failure"));
    let fires = app.fires(id, "it").await;
    assert_eq!(fires[0]["status"], 3, "the fire itself ended failed: {fires:?}");
    app.stop().await;
}

pub async fn pause_after_failures_disables_a_failing_timer_and_says_why(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    rx.fail_first(1_000);
    let id = app.create_ok(every_second("failing", &rx, json!({"pauseAfterFailures": 3}))).await;
    let got = wait_for("the timer is disabled", || async {
        let got = app.get(&format!("getTimer?id={id}&app=it")).await;
        (got["result"]["status"] == 1).then_some(got)
    })
    .await;
    let reason = got["result"]["pauseReason"].as_str().unwrap();
    assert!(reason.contains("3 consecutive failed fires"), "{reason}");
    assert_eq!(got["result"]["pauseAfterFailures"], 3);
    let sent = rx.count();
    // One fire claimed just before the pause (claim_ahead_ms) may still go.
    assert!((3..=4).contains(&sent), "{sent} fires sent");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(rx.count(), sent, "no fire goes out once disabled");
    let bad = app.create(every_second("bad", &rx, json!({"pauseAfterFailures": 0}))).await;
    assert!(bad["msg"].as_str().unwrap().contains("pauseAfterFailures: must be 1 to 1000"), "{bad}");
    // Enabling it again clears the reason.
    assert_eq!(app.act("enableTimer", id, "it").await["code"], 0);
    let got = app.get(&format!("getTimer?id={id}&app=it")).await;
    assert_eq!(got["result"]["status"], 2);
    assert!(got["result"].get("pauseReason").is_none(), "{got}");
    app.stop().await;
}

/// A receiver that answers 200 after `delay`; returns its URL, and the
/// most requests it ever held at once and how many it got.
async fn slow_receiver(
    delay: Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (now, most, total) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let app = axum::Router::new().fallback({
        let (now, most, total) = (now.clone(), most.clone(), total.clone());
        move || {
            let (now, most, total) = (now.clone(), most.clone(), total.clone());
            async move {
                total.fetch_add(1, Ordering::SeqCst);
                most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                now.fetch_sub(1, Ordering::SeqCst);
                "ok"
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, most, total)
}

pub async fn overlap_skip_and_buffer_one_never_run_two_fires_of_a_timer_at_once(stack: Stack) {
    use std::sync::atomic::Ordering;
    let app = TestNode::spawn(stack).await;
    let (skip_url, skip_most, skip_total) = slow_receiver(Duration::from_millis(1_500)).await;
    let (buffer_url, buffer_most, buffer_total) = slow_receiver(Duration::from_millis(1_500)).await;
    let bad = app
        .create(json!({"app": "it", "name": "x", "cron": "* * * * * *", "overlap": "queue",
                       "notifyHTTPParam": {"url": skip_url}}))
        .await;
    assert!(bad["msg"].as_str().unwrap().contains("overlap: must be one of allow, skip, buffer_one"), "{bad}");
    let body = |name: &str, url: &str, overlap: &str| {
        json!({"app": "it", "name": name, "cron": "* * * * * *", "status": 2, "overlap": overlap,
               "notifyHTTPParam": {"url": url}, "retry": {"maxAttempts": 1}})
    };
    let skip = app.create_ok(body("skip", &skip_url, "skip")).await;
    let buffer = app.create_ok(body("buffer", &buffer_url, "buffer_one")).await;
    assert_eq!(app.get(&format!("getTimer?id={skip}&app=it")).await["result"]["overlap"], "skip");
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    app.act("unableTimer", skip, "it").await;
    app.act("unableTimer", buffer, "it").await;
    assert_eq!(skip_most.load(Ordering::SeqCst), 1, "skip: never two at once");
    assert_eq!(buffer_most.load(Ordering::SeqCst), 1, "buffer_one: never two at once");
    let skipped = |fires: &[Value]| {
        fires.iter().filter(|f| f["status"] == 4 && f["output"].as_str().unwrap_or("").contains("overlap")).count()
    };
    let skip_fires = app.fires(skip, "it").await;
    assert!(skipped(&skip_fires) >= 2, "every other fire is skipped: {skip_fires:?}");
    assert!(skip_total.load(Ordering::SeqCst) >= 2, "the others go out");
    // buffer_one: one waits and then goes out, so at least as many go out as with skip.
    let buffer_fires = app.fires(buffer, "it").await;
    assert!(skipped(&buffer_fires) >= 1, "a third one is skipped: {buffer_fires:?}");
    assert!(
        buffer_total.load(Ordering::SeqCst) >= skip_total.load(Ordering::SeqCst),
        "buffered fires go out back to back: {} vs {}",
        buffer_total.load(Ordering::SeqCst),
        skip_total.load(Ordering::SeqCst)
    );
    app.stop().await;
}

pub async fn backfill_fires_each_missing_time_once_oldest_first_at_a_bounded_pace(stack: Stack) {
    // The reconciler as shipped: it sends backfilled fires.
    let mut storage = Storage::new(stack).await;
    storage.config.reconciler = xtimer_core::config::ReconcilerConfig::default();
    let app = TestNode::spawn_with(storage.config.clone()).await;
    let rx = Receiver::start(false).await.unwrap();
    // `skip` would drop a fire 80 s late (past the 60 s misfire
    // threshold); a backfill was asked for, so it fires anyway.
    let id = app
        .create_ok(json!({
            "app": "it", "name": "replayed", "cron": "* * * * * *", "status": 2, "misfire": "skip",
            "notifyHTTPParam": {"url": rx.url("/hook")}, "retry": {"maxAttempts": 1}
        }))
        .await;
    let start = (now_ms() / 1_000 - 100) * 1_000;
    let end = start + 20_000;
    let window = start..end;
    let reply = app.post("backfillTimer", json!({"id": id, "app": "it", "from": start, "to": end})).await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert_eq!(reply["result"]["count"], 20, "one per missing second: {reply}");

    let backfilled = |hits: &[xtimer::receiver::Hit]| -> Vec<(i64, i64, String)> {
        hits.iter().filter(|h| window.contains(&h.run_ms)).map(|h| (h.run_ms, h.arrival_us, h.key.clone())).collect()
    };
    assert!(rx.wait_until(PATIENCE, |h| backfilled(h).len() >= 20).await, "all 20 arrive");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let hits = backfilled(&rx.hits());
    assert_eq!(hits.len(), 20, "each once: {hits:?}");
    let runs: Vec<i64> = hits.iter().map(|h| h.0).collect();
    assert_eq!(runs, (0..20).map(|i| start + i * 1_000).collect::<Vec<_>>(), "oldest first, none twice");
    for (run, _, key) in &hits {
        assert_eq!(key, &format!("{id}_{run}"), "the key it would have had on time");
    }
    // 10 a second by default: the 20 are sent over about two seconds, by
    // the reconciler's passes (one a second), not in one burst.
    let span_ms = (hits[19].1 - hits[0].1) / 1_000;
    assert!(span_ms >= 800, "paced, not all at once: {span_ms} ms");
    let fires = app.fires(id, "it").await;
    let recorded: Vec<&Value> = fires.iter().filter(|f| window.contains(&f["runTimer"].as_i64().unwrap())).collect();
    assert_eq!(recorded.len(), 20);
    assert!(recorded.iter().all(|f| f["status"] == 2), "each recorded succeeded: {recorded:?}");

    // What has a record is not backfilled again; maxFires takes the oldest missing.
    let again = app.post("backfillTimer", json!({"id": id, "app": "it", "from": start, "to": end})).await;
    assert_eq!(again["result"]["count"], 0, "{again}");
    let capped = app
        .post("backfillTimer", json!({"id": id, "app": "it", "from": end - 5_000, "to": end + 10_000, "maxFires": 3}))
        .await;
    assert_eq!(capped["result"]["count"], 3, "{capped}");
    assert!(rx.wait_until(PATIENCE, |h| h.iter().any(|h| h.run_ms == end + 2_000)).await);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let late: Vec<i64> = rx.hits().iter().map(|h| h.run_ms).filter(|r| (end..end + 10_000).contains(r)).collect();
    assert_eq!(late, vec![end, end + 1_000, end + 2_000], "the three oldest missing times, once each");
    app.stop().await;
}

pub async fn backfill_refuses_what_it_cannot_do_with_a_clear_error(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let id = app
        .create_ok(json!({"app": "it", "name": "b", "cron": "0 * * * *", "status": 2,
                          "notifyHTTPParam": {"url": rx.url("/b")}}))
        .await;
    let now = now_ms();
    let msg = |reply: Value| reply["msg"].as_str().unwrap_or_default().to_owned();
    let week_ago = now - 8 * 24 * 3_600_000;
    let old = app.post("backfillTimer", json!({"id": id, "app": "it", "from": week_ago, "to": now})).await;
    assert!(msg(old).contains("from: must be within the kept fire history (604800000 ms, retention.keep_fires_ms)"));
    let empty = app.post("backfillTimer", json!({"id": id, "app": "it", "from": now - 1_000, "to": now - 1_000})).await;
    assert!(msg(empty).starts_with("to: must be after `from`"));
    let future =
        app.post("backfillTimer", json!({"id": id, "app": "it", "from": now + 60_000, "to": now + 120_000})).await;
    assert!(msg(future).starts_with("to: must be after `from`"), "the future is left to the schedule");
    let many = app
        .post("backfillTimer", json!({"id": id, "app": "it", "from": now - 60_000, "to": now, "maxFires": 10_001}))
        .await;
    assert_eq!(msg(many), "maxFires: must be 1 to 10000 (limits.backfill_max_fires), got 10001");
    let bad_time = app.post("backfillTimer", json!({"id": id, "app": "it", "from": "yesterday", "to": now})).await;
    assert!(msg(bad_time).starts_with("from: `yesterday` is neither Unix milliseconds nor an RFC 3339 time"));
    let unknown =
        app.post("backfillTimer", json!({"id": id + 100, "app": "it", "from": now - 60_000, "to": now})).await;
    assert!(msg(unknown).contains("not found"));
    app.act("unableTimer", id, "it").await;
    let disabled = app.post("backfillTimer", json!({"id": id, "app": "it", "from": now - 60_000, "to": now})).await;
    assert!(msg(disabled).contains("not enabled"));
    // RFC 3339 works as well as ms; a window with no scheduled time makes nothing.
    app.act("enableTimer", id, "it").await;
    let hour = (now / 3_600_000) * 3_600_000;
    let (from, to) = (xtimer_core::clock::rfc3339(hour - 3_540_000), xtimer_core::clock::rfc3339(hour - 3_480_000));
    let none = app.post("backfillTimer", json!({"id": id, "app": "it", "from": from, "to": to})).await;
    assert_eq!(none["result"]["count"], 0, "{none}");
    assert_eq!(app.fires(id, "it").await.iter().filter(|f| f["runTimer"].as_i64() < Some(now)).count(), 0);
    app.stop().await;
}

crate::on_both_stacks!(
    backfill_fires_each_missing_time_once_oldest_first_at_a_bounded_pace,
    backfill_refuses_what_it_cannot_do_with_a_clear_error,
    overlap_skip_and_buffer_one_never_run_two_fires_of_a_timer_at_once,
    pause_after_failures_disables_a_failing_timer_and_says_why,
    on_failure_is_called_once_when_a_fire_ends_failed,
    update_moves_unclaimed_fires_to_the_new_schedule_and_keeps_history,
    update_validates_like_create_and_refuses_unknown_timers,
    trigger_fires_once_now_with_a_manual_key,
    one_shot_with_delete_after_run_is_deleted_once_fired,
    preview_lists_fire_times_with_daylight_saving_notes,
);
