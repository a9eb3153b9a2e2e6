//! One-shots by key (API 1i, `dedupeKey`): a held key refused, kept or
//! replaced (a debounce, clamped by `maxDelayMs`), freed once its timer
//! fired or was deleted, and held by exactly one timer under a burst of
//! concurrent creates, as a client and a receiver see it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;

use crate::helpers::{now_ms, wait_for, Stack, TestNode, PATIENCE};

fn msg(reply: &Value) -> String {
    reply["msg"].as_str().unwrap_or_default().to_owned()
}

/// A one-shot of app `app` at `run_ms` holding `key`, calling `url`, one attempt.
fn keyed(app: &str, name: &str, key: &str, run_ms: i64, url: String) -> Value {
    json!({"app": app, "name": name, "runAt": run_ms, "status": 2, "dedupeKey": key,
           "notifyHTTPParam": {"url": url}, "retry": {"maxAttempts": 1}})
}

/// `body` with `onDuplicate` (and more) set.
fn with(mut body: Value, extra: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
        b.extend(e);
    }
    body
}

/// POST createTimer: the HTTP status and the envelope.
async fn create(app: &TestNode, body: &Value) -> (u16, Value) {
    let url = format!("{}/api/xtimer/createTimer", app.base);
    let resp = app.http.post(url).json(body).send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

/// The timer `id` of app `app` as `getTimer` shows it.
async fn timer(app: &TestNode, name: &str, id: i64) -> Value {
    let reply = app.get(&format!("getTimer?id={id}&app={name}")).await;
    assert_eq!(reply["code"], 0, "{reply}");
    reply["result"].clone()
}

/// The paths the receiver was called on, in order.
fn paths(rx: &Receiver) -> Vec<String> {
    rx.hits().iter().map(|h| h.uri.path().to_owned()).collect()
}

/// Refusals, `reject` (409 naming the holder), `keep` (its id, nothing
/// changed), `replace` (moved, fired once at the new time, at most
/// `maxDelayMs` past the first create's time), and the key free again
/// after the fire and after a delete.
pub async fn a_held_key_is_refused_kept_or_replaced_and_free_once_its_timer_ended(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let far = now_ms() + 3_600_000;

    // What is refused, each a 400 naming its field.
    let cron = json!({"app": "it", "name": "c", "cron": "0 0 * * * ?", "dedupeKey": "k",
                      "notifyHTTPParam": {"url": rx.url("/c")}});
    let once = keyed("it", "v", "k", far, rx.url("/v"));
    let plain = json!({"app": "it", "name": "p", "runAt": far, "notifyHTTPParam": {"url": rx.url("/p")}});
    for (body, expected) in [
        (cron, "dedupeKey: applies only to a one-shot timer (runAt), not to cron or everyMs"),
        (with(plain.clone(), json!({"onDuplicate": "keep"})), "onDuplicate: applies only with dedupeKey"),
        (with(plain, json!({"maxDelayMs": 5})), "maxDelayMs: applies only with dedupeKey"),
        (
            with(once.clone(), json!({"onDuplicate": "keep", "maxDelayMs": 5})),
            "maxDelayMs: applies only with onDuplicate `replace`",
        ),
        (with(once.clone(), json!({"dedupeKey": ""})), "dedupeKey: must not be empty"),
        (
            with(once.clone(), json!({"dedupeKey": "x".repeat(129)})),
            "dedupeKey: must be at most 128 characters, got 129",
        ),
        (
            with(once.clone(), json!({"onDuplicate": "merge"})),
            "onDuplicate: must be one of reject, keep, replace, got `merge`",
        ),
        (with(once.clone(), json!({"onDuplicate": "replace", "maxDelayMs": -1})), "maxDelayMs: must be 0 to"),
    ] {
        let (status, reply) = create(&app, &body).await;
        assert_eq!((status, reply["code"].as_i64()), (400, Some(400)), "{body}: {reply}");
        assert!(msg(&reply).starts_with(expected), "{body}: {}", msg(&reply));
    }
    let batch = app.post("createTimers", json!({"timers": [once.clone()]})).await;
    assert_eq!(batch["code"], 400, "{batch}");
    assert!(msg(&batch).starts_with("timers[0].dedupeKey: is taken by createTimer only"), "{}", msg(&batch));

    // reject (the default): 409 naming the holder; keep: its id, nothing changed.
    let held = app.create_ok(once.clone()).await;
    let shown = timer(&app, "it", held).await;
    assert_eq!(shown["dedupeKey"], "k", "{shown}");
    assert!(shown.get("onDuplicate").is_none() && shown.get("maxDelayMs").is_none(), "{shown}");
    let (status, refused) = create(&app, &with(once.clone(), json!({"name": "v2"}))).await;
    assert_eq!((status, refused["code"].as_i64()), (409, Some(409)), "{refused}");
    assert_eq!(refused["result"], json!({"id": held}));
    assert!(msg(&refused).starts_with(&format!("dedupeKey `k` is held by timer {held}")), "{}", msg(&refused));
    let again = keyed("it", "v3", "k", far + 60_000, rx.url("/v3"));
    let (status, kept) = create(&app, &with(again, json!({"onDuplicate": "keep"}))).await;
    assert_eq!((status, &kept["result"]), (200, &json!({"id": held, "existing": true})), "{kept}");
    let unchanged = timer(&app, "it", held).await;
    assert_eq!((unchanged["name"].as_str(), unchanged["runAtMs"].as_i64()), (Some("v"), Some(far)), "{unchanged}");
    let update = json!({"id": held, "app": "it", "onDuplicate": "replace"});
    let refused = app.post("updateTimer", update).await;
    assert_eq!(refused["code"], 400, "{refused}");
    assert!(msg(&refused).starts_with("onDuplicate: is taken by createTimer only"), "{}", msg(&refused));

    // replace: the pending one-shot moves (debounce); a second replace past
    // maxDelayMs is clamped to the first create's time plus it.
    let first = now_ms() + 2_000;
    let id = app.create_ok(keyed("it", "d", "debounce", first, rx.url("/first"))).await;
    let replace = json!({"onDuplicate": "replace"});
    let moved = keyed("it", "d", "debounce", first + 400, rx.url("/second"));
    let (status, reply) = create(&app, &with(moved, replace.clone())).await;
    assert_eq!((status, &reply["result"]), (200, &json!({"id": id, "replaced": true})), "{reply}");
    assert_eq!(timer(&app, "it", id).await["runAtMs"], first + 400);
    let late = with(keyed("it", "d", "debounce", first + 60_000, rx.url("/third")), json!({"maxDelayMs": 800}));
    let (status, reply) = create(&app, &with(late, replace)).await;
    assert_eq!((status, &reply["result"]), (200, &json!({"id": id, "replaced": true})), "{reply}");
    let shown = timer(&app, "it", id).await;
    assert_eq!(shown["runAtMs"], first + 800, "clamped to the first create's time + maxDelayMs: {shown}");
    assert_eq!(shown["notifyHTTPParam"]["url"], rx.url("/third"), "the new definition: {shown}");
    assert!(rx.wait_until(PATIENCE, |hits| !hits.is_empty()).await, "the replaced one-shot fires");
    let hits = rx.hits();
    assert_eq!(hits[0].run_ms, first + 800, "at its clamped time");

    // Free again once it fired (completed) and once deleted: a new timer each time.
    wait_for("the fired one-shot completes", || async { (timer(&app, "it", id).await["status"] == 4).then_some(()) })
        .await;
    assert_eq!(paths(&rx), ["/third"], "one fire, at the last definition");
    let next = app.create_ok(keyed("it", "d2", "debounce", far, rx.url("/next"))).await;
    assert_ne!(next, id, "the key was free: a new timer");
    assert_eq!(app.act("delTimer", next, "it").await["code"], 0);
    let (status, reply) = create(&app, &keyed("it", "d3", "debounce", far, rx.url("/next"))).await;
    assert_eq!(status, 200, "{reply}");
    assert!(reply["result"]["existing"].is_null() && reply["result"]["id"] != next, "{reply}");
    app.stop().await;
}

/// 1,000 `replace` creates of one key, 64 at a time, on no timer: one
/// timer holds the key, every reply names it, and it fires once. Bursts
/// of `keep` and `reject` make one timer too.
pub async fn concurrent_creates_of_one_key_make_one_timer_that_fires_once(stack: Stack) {
    let app = Arc::new(TestNode::spawn(stack).await);
    let rx = Arc::new(Receiver::start(false).await.unwrap());
    let burst = |key: &'static str, on_duplicate: &'static str, n: usize, ahead_ms: i64| {
        let limit = Arc::new(tokio::sync::Semaphore::new(64));
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let (app, rx, limit) = (app.clone(), rx.clone(), limit.clone());
                tokio::spawn(async move {
                    let _permit = limit.acquire().await.unwrap();
                    let body = keyed("burst", key, key, now_ms() + ahead_ms, rx.url(&format!("/{key}/{i}")));
                    create(&app, &with(body, json!({"onDuplicate": on_duplicate}))).await
                })
            })
            .collect();
        async move {
            let mut replies = Vec::with_capacity(tasks.len());
            for task in tasks {
                replies.push(task.await.unwrap());
            }
            replies
        }
    };

    let replies = burst("debounced", "replace", 1_000, 3_000).await;
    let ids: Vec<i64> =
        replies.iter().map(|(_, r)| r["result"]["id"].as_i64().unwrap_or_else(|| panic!("{r}"))).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "every create names one timer");
    let made = replies.iter().filter(|(_, r)| r["result"]["replaced"].is_null()).count();
    assert_eq!(made, 1, "one create made it, the others replaced it");
    let listed = app.get("getAppTimers?app=burst&pageSize=10").await;
    assert_eq!(listed["result"]["total"], 1, "{listed}");
    assert!(rx.wait_until(PATIENCE, |hits| !hits.is_empty()).await, "the one-shot fires");
    wait_for("the fired one-shot completes", || async {
        (timer(&app, "burst", ids[0]).await["status"] == 4).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.count(), 1, "it fired once: {:?}", paths(&rx));

    for on_duplicate in ["keep", "reject"] {
        let replies = burst(on_duplicate, on_duplicate, 200, 3_600_000).await;
        let made: Vec<_> =
            replies.iter().filter(|(status, r)| *status == 200 && r["result"]["existing"].is_null()).collect();
        assert_eq!(made.len(), 1, "{on_duplicate}: one create made the timer");
        let id = &made[0].1["result"]["id"];
        for (_, reply) in &replies {
            assert_eq!(&reply["result"]["id"], id, "{on_duplicate}: every reply names it: {reply}");
        }
        let refused = replies.iter().filter(|(status, _)| *status == 409).count();
        let expected = if on_duplicate == "keep" { 0 } else { replies.len() - 1 };
        assert_eq!(refused, expected, "{on_duplicate}: the others kept it or were refused");
    }
    let listed = app.get("getAppTimers?app=burst&pageSize=10").await;
    assert_eq!(listed["result"]["total"], 3, "the debounced one (completed) and one of each burst: {listed}");
    Arc::try_unwrap(app).ok().expect("no request left").stop().await;
}

crate::on_both_stacks!(
    a_held_key_is_refused_kept_or_replaced_and_free_once_its_timer_ended,
    concurrent_creates_of_one_key_make_one_timer_that_fires_once,
);
