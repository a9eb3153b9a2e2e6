//! Signed callbacks, the callback target policy at fire time, and loops
//! that survive hostile but valid timers, through a real node, real HTTP
//! and a real receiver.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;
use xtimer_core::config::{AppCredentials, Secret};
use xtimer_core::signature::{self, VerifyError};
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};

use crate::helpers::{every_second, now_ms, Stack, Storage, TestNode, PATIENCE};
use crate::on_both_stacks;

const ADMIN: &str = "it-admin";
const TOLERANCE: Duration = Duration::from_secs(300);

on_both_stacks!(callbacks_carry_a_signature_the_receiver_verifies_with_the_apps_secret);

async fn post(node: &TestNode, path: &str, token: &str, body: &Value) -> Value {
    let url = format!("{}/api/xtimer/{path}", node.base);
    node.http.post(url).bearer_auth(token).json(body).send().await.unwrap().json().await.unwrap()
}

pub async fn callbacks_carry_a_signature_the_receiver_verifies_with_the_apps_secret(stack: Stack) {
    let storage = Storage::new(stack).await;
    let mut config = storage.config.clone();
    config.auth.enabled = true;
    config.auth.admin_token = Secret::new(ADMIN);
    config.auth.apps.insert(
        "static".into(),
        AppCredentials { token: Secret::new("static-token"), secret: Secret::new("static-secret") },
    );
    let node = TestNode::spawn_with(config).await;
    let rx = Receiver::start(true).await.unwrap();

    let issued = post(&node, "admin/issueToken", ADMIN, &json!({"app": "it"})).await;
    assert_eq!(issued["code"], 0, "{issued}");
    let (token, secret) = (issued["result"]["token"].as_str().unwrap(), issued["result"]["secret"].as_str().unwrap());
    let it = post(&node, "createTimer", token, &every_second("signed", &rx, json!({}))).await;
    assert_eq!(it["code"], 0, "{it}");
    let timer = every_second("signed", &rx, json!({"app": "static", "notifyHTTPParam": {"url": rx.url("/static")}}));
    let st = post(&node, "createTimer", "static-token", &timer).await;
    assert_eq!(st["code"], 0, "{st}");

    let it_id = it["result"]["id"].as_i64().unwrap();
    let st_id = st["result"]["id"].as_i64().unwrap();
    let count =
        |hits: &[xtimer::receiver::Hit], id: i64| hits.iter().filter(|h| h.key.starts_with(&format!("{id}_"))).count();
    assert!(rx.wait_until(PATIENCE, |h| count(h, it_id) >= 2 && count(h, st_id) >= 2).await, "callbacks arrive");
    let mut verified = BTreeMap::new();
    for hit in rx.hits() {
        let headers = hit.headers.as_ref().unwrap();
        let header = headers["x-xtimer-signature"].to_str().unwrap();
        let now = now_ms() / 1000;
        let key = if hit.key.starts_with(&format!("{it_id}_")) { "it" } else { "static" };
        let right: &[u8] = if key == "it" { secret.as_bytes() } else { b"static-secret" };
        let wrong: &[u8] = if key == "it" { b"static-secret" } else { secret.as_bytes() };
        assert_eq!(signature::verify(right, header, &hit.body, TOLERANCE, now), Ok(()), "{key}: {header}");
        assert_eq!(signature::verify(wrong, header, &hit.body, TOLERANCE, now), Err(VerifyError::Mismatch));
        let t: i64 = header.strip_prefix("t=").unwrap().split(',').next().unwrap().parse().unwrap();
        assert!((t - hit.run_ms / 1000).abs() <= 1, "signed at fire time: t={t}, run {}", hit.run_ms);
        *verified.entry(key).or_insert(0) += 1;
    }
    assert!(
        verified.get("it").is_some_and(|n| *n >= 1) && verified.get("static").is_some_and(|n| *n >= 1),
        "{verified:?}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_pointing_at_a_denied_address_is_refused_at_fire_time() {
    let storage = Storage::new(Stack::Embedded).await;
    let mut config = storage.config.clone();
    config.callback.deny_cidrs = vec!["127.0.0.0/8".into(), "::1".into()];
    let node = TestNode::spawn_with(config).await;
    let rx = Receiver::start(false).await.unwrap();

    // The API refuses it now...
    let url = format!("http://localhost:{}/hook", rx.addr.port());
    let reply = node.create(every_second("by-name", &rx, json!({"notifyHTTPParam": {"url": url}}))).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert!(reply["msg"].as_str().unwrap().contains("denied range"), "{reply}");

    // ...so store it as if `localhost` had pointed elsewhere when it was created.
    let timer = NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "it".into(),
        name: "re-pointed".into(),
        status: TimerStatus::Enabled,
        schedule: Schedule::Cron { expr: "* * * * * *".into(), timezone: "UTC".into() },
        notify: Notify::Http(HttpNotify::post(url)),
        retry: RetryPolicy { max_attempts: 3, backoff_ms: 100, no_retry_statuses: None },
        misfire: MisfirePolicy::FireOnce,
        delete_after_run: false,
        on_failure: None,
        on_missed: None,
        on_late: None,
        pause_after_failures: None,
        overlap: Default::default(),
    };
    let timer = node.node.stores.timers.create_timer(&timer, now_ms()).await.unwrap();
    node.node.expander.expand_timer(&timer).await.unwrap();

    let deadline = tokio::time::Instant::now() + PATIENCE;
    let failed = loop {
        let fires = node.fires(timer.id, "it").await;
        if let Some(f) = fires.iter().find(|f| f["status"] == 3) {
            break f.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no fire failed: {fires:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let output = failed["output"].as_str().unwrap();
    assert!(output.contains("host `localhost` resolves only to denied addresses"), "{output}");
    assert_eq!(failed["attempt"], 1, "a refusal is not retried");
    assert_eq!(rx.count(), 0, "nothing reached the receiver");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_but_valid_timers_stop_no_loop() {
    let mut node = TestNode::spawn(Stack::Embedded).await;
    let rx = Receiver::start(false).await.unwrap();
    let far = "9999-12-31T23:59:59.999Z";
    let hostile = [
        json!({"cron": "0 0 0 29 2 ? 2196"}),
        json!({"cron": "59 59 23 L * ? 2199"}),
        json!({"cron": "0 30 2 * * ?", "timezone": "America/New_York"}),
        json!({"cron": "* * * ? * 6L", "timezone": "Pacific/Kiritimati"}),
        json!({"cron": "*/1 * * 31W * ?", "timezone": "Australia/Lord_Howe"}),
        json!({"cron": "0 0 12 ? * 5#5", "timezone": "Asia/Kathmandu"}),
        json!({"cron": "@yearly"}),
        json!({"runAt": far}),
        json!({"cron": "* * * * * *", "notifyHTTPParam": {"url": "http://127.0.0.1:1/closed", "header": {"X-Big": "v".repeat(4096)}, "body": "x".repeat(60_000)}}),
        json!({"cron": "* * * * * *", "notifyHTTPParam": {"url": "http://169.254.169.254.invalid/"}}),
    ];
    for (i, extra) in hostile.into_iter().enumerate() {
        let mut body = every_second(&format!("hostile-{i}"), &rx, json!({}));
        if extra.get("runAt").is_some() {
            body.as_object_mut().unwrap().remove("cron");
        }
        let reply = node.create(merged(body, extra)).await;
        assert_eq!(reply["code"], 0, "hostile-{i}: {reply}");
    }
    let id = node.create_ok(every_second("normal", &rx, json!({"notifyHTTPParam": {"url": rx.url("/normal")}}))).await;
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 3).await, "a normal timer keeps firing");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), node.node.exited()).await.is_err(),
        "every loop is still running"
    );
    assert_eq!(node.act("getTimer", id, "it").await["code"], 0);
    node.stop().await;
}

fn merged(mut base: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        match (base.get_mut(k), v) {
            (Some(Value::Object(b)), Value::Object(e)) => b.extend(e.clone()),
            _ => {
                base[k] = v.clone();
            }
        }
    }
    base
}

on_both_stacks!(concurrent_creates_cannot_overshoot_the_timer_quota);

/// Many creates of one app at once, over real HTTP: exactly the quota is created.
pub async fn concurrent_creates_cannot_overshoot_the_timer_quota(stack: Stack) {
    let storage = Storage::new(stack).await;
    let mut config = storage.config.clone();
    config.limits.timers_per_app = 5;
    let node = std::sync::Arc::new(TestNode::spawn_with(config).await);
    let rx = Receiver::start(false).await.unwrap();
    let creates: Vec<_> = (0..60)
        .map(|i| {
            let (node, body) = (node.clone(), every_second(&format!("q{i}"), &rx, json!({"status": 1})));
            tokio::spawn(async move { node.create(body).await["code"].as_i64().unwrap() })
        })
        .collect();
    let mut created = 0;
    for create in creates {
        match create.await.unwrap() {
            0 => created += 1,
            429 => {}
            other => panic!("unexpected code {other}"),
        }
    }
    assert_eq!(created, 5);
}
