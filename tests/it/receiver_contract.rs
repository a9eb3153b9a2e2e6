//! The receiver's side (API 1e), as a receiver sees it: templated
//! callbacks carrying their fire, answers that mean something (409 done,
//! 4xx refusals not retried), and reply headers that steer the timer.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use xtimer::receiver::{Hit, Receiver};

use crate::helpers::{now_ms, wait_for, Stack, TestNode, PATIENCE};

fn header(hit: &Hit, name: &str) -> String {
    let headers = hit.headers.as_ref().expect("a detailed receiver");
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

fn query(hit: &Hit) -> std::collections::HashMap<String, String> {
    let query = hit.uri.query().unwrap_or_default();
    query.split('&').filter_map(|pair| pair.split_once('=')).map(|(k, v)| (k.to_owned(), percent_decode(v))).collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).expect("hex"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("utf-8")
}

async fn fire_of(app: &TestNode, id: i64, done: impl Fn(&Value) -> bool) -> Value {
    wait_for("the fire's record", || async { app.fires(id, "it").await.into_iter().find(|f| done(f)) }).await
}

/// A per-second timer's templated URL, header and body carry its
/// scheduled time, attempt, key and previous run; the body stays JSON and
/// the query percent-encoded whatever the values; `getTimer` shows the
/// next request rendered; an unknown placeholder is a 400 naming it.
pub async fn a_templated_callback_carries_its_fire(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    rx.fail_first(1);
    let name = "say \"hi\" & go\\";
    let body = r#"{"at":"{{scheduledTime}}","ms":{{scheduledTimer}},"attempt":{{attempt}},"key":"{{fireKey}}","last":"{{lastRunTimer}}","lastAt":"{{lastRunTime}}","name":"{{timerName}}","id":{{timerId}}}"#;
    let id = app
        .create_ok(json!({
            "app": "it", "name": name, "cron": "* * * * * *", "timezone": "Asia/Shanghai", "status": 2,
            "notifyHTTPParam": {
                "url": rx.url("/t?at={{runTime}}&name={{timerName}}&n={{attempt}}&key={{fireKey}}"),
                "header": {"X-Attempt": "{{attempt}}", "X-App": "{{app}}"},
                "body": body, "template": true
            },
            "retry": {"maxAttempts": 2, "backoffMs": 200}
        }))
        .await;
    assert!(rx.wait_until(PATIENCE, |hits| hits.len() >= 8).await, "fires and their retries arrive");
    let hits = rx.hits();
    let mut second_attempts = 0;
    for hit in &hits {
        let sent: Value = serde_json::from_slice(&hit.body).expect("the body stays JSON");
        let scheduled: i64 = header(hit, "x-xtimer-scheduled-time").parse().unwrap();
        assert_eq!(sent["ms"], scheduled, "{sent}");
        assert_eq!(sent["key"], header(hit, "idempotency-key"));
        assert_eq!(sent["name"], name);
        assert_eq!(sent["id"], id);
        let at = chrono::DateTime::parse_from_rfc3339(sent["at"].as_str().unwrap()).unwrap();
        assert_eq!(at.timestamp_millis(), scheduled);
        assert_eq!(at.offset().local_minus_utc(), 8 * 3600, "in the timer's zone: {sent}");
        let attempt = sent["attempt"].as_i64().unwrap();
        assert_eq!(header(hit, "x-attempt"), attempt.to_string());
        assert_eq!(header(hit, "x-app"), "it");
        second_attempts += i32::from(attempt == 2);
        // The first fire after the create has no previous run; later ones the second before.
        match sent["last"].as_str().unwrap() {
            "" => assert_eq!(sent["lastAt"], ""),
            last => assert_eq!(last.parse::<i64>().unwrap(), scheduled - 1_000, "{sent}"),
        }
        let q = query(hit);
        assert_eq!(q["name"], name, "{}", hit.uri);
        assert_eq!(q["n"], attempt.to_string());
        assert_eq!(q["key"], header(hit, "idempotency-key"));
        assert_eq!(chrono::DateTime::parse_from_rfc3339(&q["at"]).unwrap().timestamp_millis(), scheduled);
    }
    assert!(second_attempts >= 3, "the retry after a 500 says attempt 2");
    assert!(hits.iter().any(|h| !query(h)["at"].is_empty()));

    let timer = app.get(&format!("getTimer?id={id}&app=it")).await;
    let notify = &timer["result"]["notifyHTTPParam"];
    assert_eq!(notify["template"], true, "{timer}");
    let example = &notify["example"];
    let next = timer["result"]["nextRunTimer"].as_i64().unwrap();
    assert_eq!(example["headers"]["Idempotency-Key"], format!("{id}_{next}"), "{example}");
    assert_eq!(example["headers"]["X-Attempt"], "1");
    let body: Value = serde_json::from_str(example["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["ms"], next);
    assert!(example["url"].as_str().unwrap().contains("&n=1&key="), "{example}");

    let bad = app
        .create(json!({
            "app": "it", "name": "bad", "cron": "* * * * * *",
            "notifyHTTPParam": {"url": rx.url("/t"), "body": "{{runTimer}} {{when}}", "template": true}
        }))
        .await;
    assert_eq!(bad["code"], 400, "{bad}");
    assert!(bad["msg"].as_str().unwrap().contains("notifyHTTPParam.body: unknown placeholder `{{when}}`"), "{bad}");
    app.stop().await;
}

/// 409 is done, a 401 fails at once (onFailure called once), a timer's
/// own empty `noRetryStatuses` retries a 401; the records say which rule.
pub async fn answers_mean_something(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    rx.script(|path, _| match path {
        "/done" => Some((StatusCode::CONFLICT, vec![])),
        "/revoked" | "/retried" => Some((StatusCode::UNAUTHORIZED, vec![])),
        _ => None,
    });
    let at = now_ms() + 1_000;
    let one_shot = |name: &str, extra: Value| {
        let mut body = json!({"app": "it", "name": name, "runAt": at, "status": 2,
                              "notifyHTTPParam": {"url": rx.url(&format!("/{name}"))},
                              "retry": {"maxAttempts": 3, "backoffMs": 100}});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let done = app.create_ok(one_shot("done", json!({}))).await;
    let revoked = app.create_ok(one_shot("revoked", json!({"onFailure": {"url": rx.url("/on-failure")}}))).await;
    let retried = app
        .create_ok(one_shot("retried", json!({"retry": {"maxAttempts": 3, "backoffMs": 100, "noRetryStatuses": []}})))
        .await;

    let fire = fire_of(&app, done, |f| f["status"] != 0 && f["status"] != 1).await;
    assert_eq!(fire["status"], 2, "409 counts as succeeded: {fire}");
    assert_eq!(fire["attempt"], 1);
    assert!(fire["output"].as_str().unwrap().starts_with("HTTP 409 (already done"), "{fire}");

    let fire = fire_of(&app, revoked, |f| f["status"] != 0 && f["status"] != 1).await;
    assert_eq!(fire["status"], 3, "{fire}");
    assert_eq!(fire["attempt"], 1, "a 401 is not retried: {fire}");
    assert!(fire["output"].as_str().unwrap().contains("not retried: 401 fails at once"), "{fire}");

    let fire = fire_of(&app, retried, |f| f["status"] == 3).await;
    assert_eq!(fire["attempt"], 3, "noRetryStatuses [] retries a 401: {fire}");
    let timer = app.get(&format!("getTimer?id={retried}&app=it")).await;
    assert_eq!(timer["result"]["retry"]["noRetryStatuses"], json!([]), "{timer}");

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let count = |path: &str| rx.hits().iter().filter(|h| h.uri.path() == path).count();
    assert_eq!((count("/done"), count("/revoked"), count("/retried")), (1, 1, 3));
    assert_eq!(count("/on-failure"), 1, "onFailure once for the refused fire");

    let bad = app.create(one_shot("bad", json!({"retry": {"noRetryStatuses": [409]}}))).await;
    assert_eq!(bad["code"], 400, "{bad}");
    assert!(bad["msg"].as_str().unwrap().contains("retry.noRetryStatuses"), "{bad}");
    app.stop().await;
}

/// A one-shot answering `X-Xtimer-Next-Run-At` 2 s ahead fires again 2 s
/// later, five times, then completes when it stops answering it; a
/// per-second timer answering `X-Xtimer-Pause: quota` is disabled with
/// that reason and fires no more.
pub async fn a_receiver_steers_its_timer(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    rx.script(|path, nth| match path {
        "/poll" if nth <= 5 => {
            let next = chrono::Utc::now() + chrono::Duration::milliseconds(2_000);
            Some((StatusCode::OK, vec![("x-xtimer-next-run-at", next.to_rfc3339())]))
        }
        "/quota" => Some((StatusCode::OK, vec![("x-xtimer-pause", "quota".to_owned())])),
        _ => None,
    });
    let poll = app
        .create_ok(json!({"app": "it", "name": "poll", "runAt": now_ms() + 1_000, "status": 2,
                          "notifyHTTPParam": {"url": rx.url("/poll")}}))
        .await;
    let paused = app
        .create_ok(json!({"app": "it", "name": "quota", "cron": "* * * * * *", "status": 2,
                          "notifyHTTPParam": {"url": rx.url("/quota")}}))
        .await;

    let timer = wait_for("the quota timer is paused", || async {
        let timer = app.get(&format!("getTimer?id={paused}&app=it")).await;
        (timer["result"]["status"] == 1).then_some(timer)
    })
    .await;
    assert_eq!(timer["result"]["pauseReason"], "quota", "{timer}");
    let history = app.get(&format!("getTimerHistory?id={paused}&app=it")).await;
    let pause = &history["result"]["list"][0];
    assert_eq!((&pause["action"], &pause["by"]), (&json!("pause"), &json!("receiver")), "{history}");
    assert_eq!(pause["changes"]["pauseReason"], json!([null, "quota"]));
    let actions: Vec<&Value> = history["result"]["list"].as_array().unwrap().iter().map(|e| &e["action"]).collect();
    assert_eq!(actions, [&json!("pause"), &json!("create")], "the pause is noted once: {history}");
    let fire = fire_of(&app, paused, |f| f["status"] == 2).await;
    assert!(fire["output"].as_str().unwrap().contains("; paused: quota (X-Xtimer-Pause)"), "{fire}");

    let polls = |hits: &[Hit]| hits.iter().filter(|h| h.uri.path() == "/poll").count();
    assert!(rx.wait_until(Duration::from_secs(30), |h| polls(h) >= 6).await, "six polls: {}", polls(&rx.hits()));
    let done = wait_for("the poll completes", || async {
        let timer = app.get(&format!("getTimer?id={poll}&app=it")).await;
        (timer["result"]["status"] == 4).then_some(timer)
    })
    .await;
    let arrivals: Vec<i64> =
        rx.hits().iter().filter(|h| h.uri.path() == "/poll").map(|h| h.arrival_us / 1_000).collect();
    assert_eq!(arrivals.len(), 6, "{done}");
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!((1_900..3_000).contains(&gap), "2 s apart, as asked: {arrivals:?}");
    }
    let outputs: Vec<String> =
        app.fires(poll, "it").await.iter().map(|f| f["output"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(outputs.len(), 6, "one fire record per run: {outputs:?}");
    assert!(outputs[..5].iter().all(|o| o.starts_with("HTTP 200; next run at ")), "{outputs:?}");
    assert_eq!(outputs[5], "HTTP 200", "the last one asks nothing");
    let quota_hits = rx.hits().iter().filter(|h| h.uri.path() == "/quota").count();
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let later = rx.hits().iter().filter(|h| h.uri.path() == "/quota").count();
    assert!(quota_hits <= 3 && later == quota_hits, "paused: no more fires ({quota_hits}, then {later})");
    app.stop().await;
}

crate::on_both_stacks!(a_templated_callback_carries_its_fire, answers_mean_something, a_receiver_steers_its_timer);
