//! Seeing inside one timer (API 1h) through a real node: `explainFire`
//! answers why a scheduled time fired as it did or never fired, each "why
//! not" tested; `getTimer` carries the timer's figures of the last day.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use xtimer::receiver::Receiver;
use xtimer_core::config::{AppCredentials, Secret};

use crate::helpers::{every_second, now_ms, test_config, wait_for, Stack, TestNode, PATIENCE};

/// `explainFire` of timer `id` of app `it` at `run`: the result, asserting a success.
async fn explain(app: &TestNode, id: i64, run: i64) -> Value {
    let reply = app.get(&format!("explainFire?id={id}&app=it&runTimer={run}")).await;
    assert_eq!(reply["code"], 0, "{reply}");
    reply["result"].clone()
}

fn verdict(explained: &Value) -> String {
    explained["verdict"].as_str().unwrap_or_else(|| panic!("{explained}")).to_owned()
}

/// The first fire of `id` that `pick` accepts, once there is one.
async fn fire_where(app: &TestNode, id: i64, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, || async { app.fires(id, "it").await.into_iter().find(|f| pick(f)) }).await
}

/// Times with no fire, each reason: not a scheduled time (with the nearest
/// ones), before `startAt`, after `endAt`, `maxFires` used, excluded by a
/// calendar (named); and the bad inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_without_a_fire_says_why_not() {
    let app = TestNode::spawn(Stack::Embedded).await;
    let hour = (now_ms() / 3_600_000 + 2) * 3_600_000;
    let notify = json!({"url": "http://127.0.0.1:9/"});
    let hourly = app
        .create_ok(
            json!({"app": "it", "name": "hourly", "cron": "0 0 * * * *", "status": 2, "notifyHTTPParam": notify}),
        )
        .await;
    let why = verdict(&explain(&app, hourly, hour + 1_500).await);
    assert!(why.starts_with("not a scheduled time: cron `"), "{why}");
    assert!(
        why.contains(&format!("({hour}) before")) && why.contains(&format!("({}) after", hour + 3_600_000)),
        "{why}"
    );

    let bounded = app
        .create_ok(
            json!({"app": "it", "name": "bounded", "cron": "* * * * * *", "status": 2, "notifyHTTPParam": notify,
                          "startAt": hour, "endAt": hour + 60_000}),
        )
        .await;
    assert!(verdict(&explain(&app, bounded, hour - 5_000).await).starts_with("before startAt"));
    assert!(verdict(&explain(&app, bounded, hour + 61_000).await).starts_with("after endAt"));
    let limited = app
        .create_ok(
            json!({"app": "it", "name": "limited", "cron": "* * * * * *", "status": 2, "notifyHTTPParam": notify,
                          "startAt": hour, "maxFires": 3}),
        )
        .await;
    let why = verdict(&explain(&app, limited, hour + 5_000).await);
    assert!(why.starts_with("maxFires used: its 3 fires end with the one at"), "{why}");

    let put =
        app.post("putCalendar", json!({"app": "it", "name": "quiet", "ranges": [{"from": hour, "to": hour + 10_000}]}));
    assert_eq!(put.await["code"], 0);
    let quiet = app
        .create_ok(
            json!({"app": "it", "name": "quiet-ticks", "cron": "* * * * * *", "status": 2, "notifyHTTPParam": notify,
                          "excludeCalendars": ["quiet"]}),
        )
        .await;
    let explained = explain(&app, quiet, hour + 2_000).await;
    assert_eq!(explained["fire"], Value::Null);
    assert!(verdict(&explained).starts_with("excluded by calendar `quiet`"), "{explained}");
    let ahead = explain(&app, quiet, hour + 12_000).await;
    let planned = ahead["fire"]["runTimer"] == hour + 12_000;
    assert!(planned || verdict(&ahead).starts_with("not planned yet"), "outside the calendar: {ahead}");

    let bad = app.get(&format!("explainFire?id={hourly}&app=it&runTimer=yesterday")).await;
    assert_eq!(bad["code"], 400, "{bad}");
    assert!(bad["msg"].as_str().unwrap().starts_with("runTimer: must be"), "{bad}");
    let unknown = app.get(&format!("explainFire?id={}&app=it&runTimer={hour}", quiet + 100)).await;
    assert_eq!(unknown["code"], 404, "{unknown}");
    let elsewhere = app.get(&format!("explainFire?id={hourly}&app=other&runTimer={hour}")).await;
    assert_eq!(elsewhere["code"], 404, "without auth another app's timer is not found: {elsewhere}");
    app.stop().await;
}

/// With auth on, another app's timer is a 403, as getTimer answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_apps_timer_is_forbidden() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir.path().join("x.db"));
    config.auth.enabled = true;
    for app in ["a", "b"] {
        let creds = AppCredentials { token: Secret::new(format!("{app}-token")), secret: Secret::new("s") };
        config.auth.apps.insert(app.into(), creds);
    }
    let node = TestNode::spawn_with(config).await;
    let created: Value = node
        .http
        .post(format!("{}/api/xtimer/createTimer", node.base))
        .bearer_auth("b-token")
        .json(&json!({"app": "b", "name": "theirs", "cron": "0 0 * * * *", "notifyHTTPParam": {"url": "http://127.0.0.1:9/"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["result"]["id"].as_i64().unwrap_or_else(|| panic!("{created}"));
    let ask = |app: &str, token: &str| {
        node.http
            .get(format!("{}/api/xtimer/explainFire?id={id}&app={app}&runTimer=0", node.base))
            .bearer_auth(token.to_owned())
            .send()
    };
    let theirs: Value = ask("a", "a-token").await.unwrap().json().await.unwrap();
    assert_eq!(theirs["code"], 403, "{theirs}");
    let own: Value = ask("b", "b-token").await.unwrap().json().await.unwrap();
    assert_eq!(own["code"], 0, "{own}");
    node.stop().await;
}

/// A time while the timer was disabled: per its history (created disabled
/// and enabled later; disabled after it ran), with who did it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_while_the_timer_was_disabled_names_the_change() {
    let app = TestNode::spawn(Stack::Embedded).await;
    let rx = Receiver::start(false).await.unwrap();
    let created = now_ms();
    let late = app.create_ok(every_second("late-start", &rx, json!({"status": 1}))).await;
    let stopped = app.create_ok(every_second("stopped", &rx, json!({}))).await;
    fire_where(&app, stopped, "a fire succeeded", |f| f["status"] == 2).await;
    assert_eq!(app.act("unableTimer", stopped, "it").await["code"], 0);
    let disabled_at = now_ms();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(app.act("enableTimer", late, "it").await["code"], 0);

    let before_enable = (created / 1000 + 1) * 1000;
    let why = verdict(&explain(&app, late, before_enable).await);
    assert!(why.starts_with("timer disabled then: disabled from its creation, enabled again at"), "{why}");
    let while_off = (disabled_at / 1000 + 2) * 1000;
    let explained = explain(&app, stopped, while_off).await;
    let why = verdict(&explained);
    assert!(why.contains("timer disabled then: disabled at") && why.contains("by anonymous (disable)"), "{explained}");
    assert!(why.contains("not enabled again before it"), "{why}");
    app.stop().await;
}

/// Fires recorded skipped and missed say why: the app paused (its reason),
/// `overlap: skip`, the misfire policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_and_missed_fires_say_by_what() {
    let app = TestNode::spawn(Stack::Embedded).await;
    // A receiver that never answers: each callback runs to its timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/slow", silent.local_addr().unwrap());
    let overlapping = app
        .create_ok(json!({"app": "ov", "name": "slow", "cron": "* * * * * *", "status": 2, "overlap": "skip",
                          "callbackTimeoutMs": 1_800, "notifyHTTPParam": {"url": url}, "retry": {"maxAttempts": 1}}))
        .await;
    app.post("setFlowLimit", json!({"app": "fl", "key": "held", "paused": true})).await;
    let held = app
        .create_ok(json!({"app": "fl", "name": "held", "cron": "* * * * * *", "status": 2, "misfire": "skip",
                          "misfireThresholdMs": 1000, "notifyHTTPParam": {"url": "http://127.0.0.1:9/", "flowKey": "held"}}))
        .await;
    let rx = Receiver::start(false).await.unwrap();
    let paused = app.create_ok(every_second("paused", &rx, json!({}))).await;
    let until = now_ms() + 4_000;
    let reply = app.post("pauseApp", json!({"app": "it", "until": until, "reason": "maintenance"})).await;
    assert_eq!(reply["code"], 0, "{reply}");

    let get = |id: i64, of: &'static str| {
        let app = &app;
        async move {
            let url = format!("{}/api/xtimer/getTimerTasks?id={id}&app={of}&pageSize=100", app.base);
            let reply: Value = app.http.get(url).send().await.unwrap().json().await.unwrap();
            reply["result"]["list"].as_array().cloned().unwrap_or_default()
        }
    };
    let explain_in = |id: i64, of: &'static str, run: i64| {
        let app = &app;
        async move { app.get(&format!("explainFire?id={id}&app={of}&runTimer={run}")).await["result"].clone() }
    };
    let skipped = wait_for("a fire skipped while the app is paused", || async {
        get(paused, "it").await.into_iter().find(|f| f["status"] == 4)
    })
    .await;
    let explained = explain_in(paused, "it", skipped["scheduledTimer"].as_i64().unwrap()).await;
    assert_eq!(verdict(&explained), "skipped: app `it` was paused (maintenance)", "{explained}");
    assert_eq!(explained["fire"]["status"], 4);

    let skipped = wait_for("a fire skipped by overlap", || async {
        get(overlapping, "ov").await.into_iter().find(|f| f["status"] == 4)
    })
    .await;
    let explained = explain_in(overlapping, "ov", skipped["scheduledTimer"].as_i64().unwrap()).await;
    assert!(verdict(&explained).starts_with("skipped by overlap `skip`: skipped: the fire before"), "{explained}");

    let missed =
        wait_for("a fire missed while held", || async { get(held, "fl").await.into_iter().find(|f| f["status"] == 5) })
            .await;
    let explained = explain_in(held, "fl", missed["scheduledTimer"].as_i64().unwrap()).await;
    assert!(verdict(&explained).starts_with("missed by the misfire policy (`skip`"), "{explained}");
    let events: Vec<&str> =
        explained["timeline"].as_array().unwrap().iter().map(|m| m["event"].as_str().unwrap()).collect();
    assert_eq!(events.first(), Some(&"planned"), "{explained}");
    assert_eq!(events.last(), Some(&"missed"), "{explained}");
    drop(silent);
    app.stop().await;
}

/// A fire that failed once and then succeeded: its timeline (planned,
/// claimed by this node, sent, answered, succeeded) and verdict; and the
/// timer's figures of the last day in `getTimer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_shows_its_attempts_and_the_timer_its_figures() {
    let app = TestNode::spawn(Stack::Embedded).await;
    let rx = Receiver::start(false).await.unwrap();
    // Every third request fails: with one attempt, a third of the fires fail.
    rx.script(|_, n| (n % 3 == 0).then(|| (StatusCode::INTERNAL_SERVER_ERROR, vec![])));
    let ticks = app.create_ok(every_second("ticks", &rx, json!({}))).await;
    let retried = app
        .create_ok(every_second(
            "retried",
            &rx,
            json!({"notifyHTTPParam": {"url": rx.url("/retried")},
                                                       "retry": {"maxAttempts": 3, "backoffMs": 100}}),
        ))
        .await;
    let fire =
        fire_where(&app, retried, "a fire succeeded on a retry", |f| f["status"] == 2 && f["attempt"] == 2).await;
    let explained = explain(&app, retried, fire["scheduledTimer"].as_i64().unwrap()).await;
    let node = &app.node.node_id;
    let why = verdict(&explained);
    assert!(why.starts_with(&format!("succeeded on attempt 2: claimed by {node}, sent ")), "{explained}");
    let timeline = explained["timeline"].as_array().unwrap();
    let events: Vec<&str> = timeline.iter().map(|m| m["event"].as_str().unwrap()).collect();
    for wanted in ["planned", "claimed", "sent", "retried", "answered", "succeeded"] {
        assert!(events.contains(&wanted), "{wanted} in {events:?}");
    }
    assert_eq!(events.first(), Some(&"planned"));
    let claimed = timeline.iter().find(|m| m["event"] == "claimed").unwrap();
    assert_eq!(claimed["node"], node.as_str(), "{claimed}");
    assert_eq!(explained["fire"]["attempt"], 2);

    assert!(rx.wait_until(PATIENCE, |h| h.iter().filter(|h| h.uri.path() == "/hook").count() >= 7).await);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let got = app.get(&format!("getTimer?id={ticks}&app=it")).await;
    let stats = &got["result"]["stats"];
    let n = |k: &str| stats[k].as_u64().unwrap_or_else(|| panic!("{k} in {got}"));
    assert!(n("fires") >= 7, "{stats}");
    assert!(n("failed") >= 1 && n("succeeded") >= 3, "a third fail: {stats}");
    assert!(n("succeeded") + n("failed") + n("missed") <= n("fires"), "{stats}");
    assert_eq!(n("missed"), 0, "{stats}");
    let (p50, p99) = (n("lateP50Ms"), n("lateP99Ms"));
    assert!(p50 <= p99 && p99 < 2_000, "on time, ordered: {stats}");
    let listed = app.get("getAppTimers?app=it").await;
    assert!(listed["result"]["list"][0].get("stats").is_none(), "getTimer only: {listed}");
    app.stop().await;
}

/// A fire late because its node was killed (`kill -9`) while sending it:
/// another node takes it over; explainFire names that node and the lateness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_late_after_its_node_was_killed_names_the_node_that_took_over() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("xtimer.db").display());
    // Holds every request while `hold` is set; then answers 200.
    let hold = Arc::new(AtomicBool::new(true));
    let held = hold.clone();
    let receiver = axum::Router::new().fallback(move || {
        let held = held.clone();
        async move {
            while held.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await });
    let start = |port: u16| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtimer"))
            .arg("serve")
            .env("XTIMER_LISTEN", format!("127.0.0.1:{port}"))
            .env("XTIMER_DATABASE_URL", &db)
            .env("XTIMER_RECONCILER__PERIOD_MS", "500")
            .env("XTIMER_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
        assert!(lines.by_ref().take(50).any(|l| l.contains("xtimer is listening")), "the node starts");
        std::thread::spawn(move || lines.for_each(drop));
        child
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}/api/xtimer");
    let http = reqwest::Client::new();
    let mut first = start(port);
    let run = (now_ms() / 1000 + 2) * 1000;
    let created: Value = http
        .post(format!("{base}/createTimer"))
        .json(&json!({"app": "it", "name": "once", "runAt": run, "status": 2,
                      "callbackTimeoutMs": 30_000, "notifyHTTPParam": {"url": url}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["result"]["id"].as_i64().unwrap_or_else(|| panic!("{created}"));
    let ask = |base: String| {
        let http = http.clone();
        async move {
            let url = format!("{base}/explainFire?id={id}&app=it&runTimer={run}");
            http.get(url).send().await.ok()?.json::<Value>().await.ok()
        }
    };
    // Sent and held: the first node is mid-callback when it is killed.
    wait_for("the first node sends the fire", || async {
        let explained = ask(base.clone()).await?;
        (explained["result"]["fire"]["status"] == 1 && now_ms() > run + 300).then_some(())
    })
    .await;
    first.kill().unwrap();
    first.wait().unwrap();
    hold.store(false, Ordering::SeqCst);
    let mut second = start(port);
    let explained = wait_for("another node fired it", || async {
        let explained = ask(base.clone()).await?;
        (explained["result"]["fire"]["status"] == 2).then_some(explained["result"].clone())
    })
    .await;
    let pid = |child: &std::process::Child| format!("-{}-", child.id());
    let why = verdict(&explained);
    let claimed = explained["timeline"].as_array().unwrap().iter().find(|m| m["event"] == "claimed").cloned().unwrap();
    let node = claimed["node"].as_str().unwrap().to_owned();
    assert!(node.contains(&pid(&second)), "the node that took over: {node} (pid {})", second.id());
    assert!(why.contains(&format!("claimed by {node}")), "{why}");
    let late = explained["fire"]["costTime"].as_i64().unwrap();
    assert!(late >= 1_000, "late by the takeover: {explained}");
    assert!(why.contains(&format!("sent {late} ms late")), "{why}");
    second.kill().unwrap();
    second.wait().unwrap();
}
