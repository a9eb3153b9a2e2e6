//! Flow control per key (API 1g), end to end on one node of each stack: a
//! rate spreads a burst while another flow stays on time, parallelism
//! caps open callbacks, a paused flow holds its fires and lets them go in
//! order, fires freed together (a resume, limits removed) arrive in
//! run-time order, a fire that waited past its window is missed, and the
//! API's refusals. The three-node versions are in `tests/cluster/flows.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;

use crate::helpers::{now_ms, wait_for, Stack, TestNode};

/// Sets a flow's limits; the reply's flow.
async fn set_flow(app: &TestNode, body: Value) -> Value {
    let reply = app.post("setFlowLimit", body).await;
    assert_eq!(reply["code"], 0, "{reply}");
    // Every node reads the limits once a second.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    reply["result"].clone()
}

async fn flows(app: &TestNode) -> Vec<Value> {
    let reply = app.get("getFlows?app=it").await;
    assert_eq!(reply["code"], 0, "{reply}");
    reply["result"]["list"].as_array().unwrap().clone()
}

/// One-shot timers `it/{prefix}-{i}` at `run_ms(i)`, calling `url`, made
/// with `createTimers` in batches of 1,000.
async fn one_shots(app: &TestNode, prefix: &str, n: usize, url: &str, run_ms: impl Fn(usize) -> i64) -> Vec<i64> {
    let mut ids = Vec::with_capacity(n);
    for start in (0..n).step_by(1_000) {
        let timers: Vec<Value> = (start..n.min(start + 1_000))
            .map(|i| {
                json!({"app": "it", "name": format!("{prefix}-{i:04}"), "runAt": run_ms(i), "status": 2,
                       "notifyHTTPParam": {"url": url}})
            })
            .collect();
        let reply = app.post("createTimers", json!({ "timers": timers })).await;
        assert_eq!(reply["code"], 0, "{reply}");
        ids.extend(reply["result"]["ids"].as_array().unwrap().iter().map(|id| id.as_i64().unwrap()));
    }
    ids
}

/// Most arrivals (Unix µs) within any one second.
fn most_in_a_second(arrivals_us: &mut [i64]) -> usize {
    arrivals_us.sort_unstable();
    (0..arrivals_us.len())
        .map(|i| arrivals_us[i..].iter().take_while(|at| **at - arrivals_us[i] < 1_000_000).count())
        .max()
        .unwrap_or(0)
}

/// A flow limited to 20/s with a burst due in one second delivers all of
/// it over about n/20 s, never more than 21 in any second, none twice and
/// none failed, while another flow's per-second timers stay on time.
/// 1,000 fires embedded; 200 on the servers' stacks (the cluster test
/// sends 1,000 across three nodes).
pub async fn a_rate_spreads_a_burst_and_other_flows_stay_on_time(stack: Stack) {
    let n = if matches!(stack, Stack::Embedded) { 1_000 } else { 200 };
    let app = TestNode::spawn(stack).await;
    let limited = Receiver::start(false).await.unwrap();
    let other = Receiver::start(false).await.unwrap();
    let key = format!("127.0.0.1:{}", limited.addr.port());
    let flow = set_flow(&app, json!({"app": "it", "key": key, "ratePerSec": 20})).await;
    assert_eq!(
        flow,
        json!({"key": key, "ratePerSec": 20.0, "parallelism": null, "paused": false, "waiting": 0, "inFlight": 0})
    );
    for i in 0..3 {
        app.create_ok(json!({"app": "it", "name": format!("steady-{i}"), "cron": "* * * * * *", "status": 2,
                             "notifyHTTPParam": {"url": other.url("/steady")}}))
            .await;
    }
    let due = (now_ms() / 1_000 + 4) * 1_000;
    let ids = one_shots(&app, "burst", n, &limited.url("/burst"), |i| due + (i as i64 * 997) % 1_000).await;
    let steady_from = other.count();
    // Midway, the flow shows its waiting fires.
    tokio::time::sleep(Duration::from_millis((due - now_ms() + 2_000).max(0) as u64)).await;
    let shown = flows(&app).await;
    assert!(shown[0]["waiting"].as_u64().unwrap() > 0, "{shown:?}");
    let expected_s = n as u64 / 20;
    assert!(
        limited.wait_until(Duration::from_secs(expected_s + 40), |hits| hits.len() >= n).await,
        "all {n} arrive, {} did",
        limited.count()
    );
    let took_ms = now_ms() - due;
    assert!(took_ms >= (n as i64 / 20 - 2) * 1_000, "spread over about {expected_s} s, took {took_ms} ms");
    let hits = limited.hits();
    let mut keys: Vec<&str> = hits.iter().map(|h| h.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), n, "none twice");
    let mut arrivals: Vec<i64> = hits.iter().map(|h| h.arrival_us).collect();
    let most = most_in_a_second(&mut arrivals);
    assert!(most <= 21, "{most} arrived within one second");
    // The steady flow's fires meanwhile stayed on time.
    let steady = other.hits();
    let mut late: Vec<f64> = steady[steady_from..].iter().map(|h| h.lateness_ms()).collect();
    late.sort_by(f64::total_cmp);
    assert!(late.len() >= 3 * expected_s as usize, "the steady timers fired meanwhile: {}", late.len());
    let p99 = late[late.len() * 99 / 100];
    // Held behind the burst they would be seconds late; the bound is a
    // real-clock one for a loaded 2-core machine running other tests
    // beside this one (226 ms seen there once; under 100 ms alone).
    assert!(p99 < 400.0, "p99 lateness of the other flow {p99} ms");
    // None failed, and each is recorded late, not missed.
    for id in ids.iter().step_by(97) {
        let fire = wait_for("recorded succeeded", || async {
            let fires = app.fires(*id, "it").await;
            assert_eq!(fires.len(), 1);
            fires.into_iter().find(|f| f["status"] == 2)
        })
        .await;
        assert_eq!(fire["attempt"], 1, "not retried: {fire}");
    }
    // The last sends' slots are given back with the flow's next turn, or within a second.
    wait_for("the flow idle again", || async {
        let shown = flows(&app).await;
        (shown[0]["waiting"] == 0 && shown[0]["inFlight"] == 0).then_some(())
    })
    .await;
    let metrics = app.http.get(format!("{}/metrics", app.base)).send().await.unwrap().text().await.unwrap();
    let sent = metrics
        .lines()
        .find(|l| l.starts_with("xtimer_flow_sent_total{") && l.contains(&key))
        .unwrap_or_else(|| panic!("xtimer_flow_sent_total for {key} in {metrics}"));
    assert!(sent.ends_with(&format!(" {n}")), "{sent}");
    assert!(metrics.lines().any(|l| l.starts_with("xtimer_flow_waiting{") && l.contains(&key)), "{metrics}");
    app.stop().await;
}

/// A receiver that answers after `delay`, counting requests open at once.
struct SlowReceiver {
    url: String,
    open: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    done: Arc<AtomicUsize>,
}

impl SlowReceiver {
    async fn start(delay: Duration) -> Self {
        let open = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let (o, m, d) = (open.clone(), most.clone(), done.clone());
        let route = axum::routing::any(move || {
            let (o, m, d) = (o.clone(), m.clone(), d.clone());
            async move {
                let now = o.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                o.fetch_sub(1, Ordering::SeqCst);
                d.fetch_add(1, Ordering::SeqCst);
                "ok"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/slow", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(route)).await });
        Self { url, open, most, done }
    }
}

/// A flow with parallelism 2 and a receiver that takes 1 s per call never
/// has more than 2 calls open; all arrive; `inFlight` shows them.
pub async fn parallelism_caps_open_callbacks(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = SlowReceiver::start(Duration::from_secs(1)).await;
    set_flow(&app, json!({"app": "it", "key": "slow", "parallelism": 2})).await;
    let due = now_ms() + 2_000;
    for i in 0..8 {
        app.create_ok(json!({"app": "it", "name": format!("slow-{i}"), "runAt": due, "status": 2,
                             "notifyHTTPParam": {"url": rx.url, "flowKey": "slow"}}))
            .await;
    }
    tokio::time::sleep(Duration::from_millis((due - now_ms() + 1_500).max(0) as u64)).await;
    let shown = flows(&app).await;
    assert_eq!(shown[0]["inFlight"], 2, "{shown:?}");
    assert!(shown[0]["waiting"].as_u64().unwrap() >= 4, "{shown:?}");
    wait_for("all 8 calls answered", || async { (rx.done.load(Ordering::SeqCst) >= 8).then_some(()) }).await;
    assert_eq!(rx.most.load(Ordering::SeqCst), 2, "never more than 2 open");
    assert_eq!(rx.open.load(Ordering::SeqCst), 0);
    app.stop().await;
}

/// A paused flow holds its fires (none received, none ended), then sends
/// them one at a time in run-time order on resume (parallelism 1); with
/// `skip`, a fire that waited past its window is missed instead.
pub async fn a_paused_flow_holds_its_fires_and_sends_them_in_order(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    set_flow(&app, json!({"app": "it", "key": "held", "paused": true, "parallelism": 1})).await;
    let due = now_ms() + 2_000;
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(
            app.create_ok(json!({"app": "it", "name": format!("held-{i}"), "runAt": due + i * 100, "status": 2,
                                 "notifyHTTPParam": {"url": rx.url(&format!("/held/{i}")), "flowKey": "held"}}))
                .await,
        );
    }
    let skipped = app
        .create_ok(json!({"app": "it", "name": "held-skip", "cron": "*/2 * * * * *", "status": 2,
                          "misfire": "skip", "misfireThresholdMs": 1000,
                          "notifyHTTPParam": {"url": rx.url("/skip"), "flowKey": "held"}}))
        .await;
    tokio::time::sleep(Duration::from_millis((due - now_ms() + 3_000).max(0) as u64)).await;
    assert_eq!(rx.count(), 0, "a paused flow sends nothing");
    for id in &ids {
        let fire = &app.fires(*id, "it").await[0];
        assert!(fire["status"] == 0 || fire["status"] == 1, "held, not ended: {fire}");
    }
    let shown = flows(&app).await;
    assert_eq!(shown[0]["paused"], true);
    assert!(shown[0]["waiting"].as_u64().unwrap() >= 10, "{shown:?}");
    let missed = wait_for("a skip-policy fire missed while held", || async {
        app.fires(skipped, "it").await.into_iter().find(|f| f["status"] == 5)
    })
    .await;
    assert!(missed["output"].as_str().unwrap().contains("waited for its flow"), "{missed}");

    app.act("unableTimer", skipped, "it").await;
    let resumed = app.post("setFlowLimit", json!({"app": "it", "key": "held", "paused": false})).await;
    assert_eq!(resumed["result"]["parallelism"], 1, "a field left out keeps its value: {resumed}");
    assert!(rx.wait_until(Duration::from_secs(20), |hits| hits.len() >= 10).await, "sent on resume");
    let order: Vec<String> =
        rx.hits().iter().map(|h| h.uri.path().to_owned()).filter(|p| p.starts_with("/held")).collect();
    let expected: Vec<String> = (0..10).map(|i| format!("/held/{i}")).collect();
    assert_eq!(order, expected, "in run-time order");
    for id in &ids {
        wait_for("recorded succeeded", || async { app.fires(*id, "it").await.into_iter().find(|f| f["status"] == 2) })
            .await;
    }
    app.stop().await;
}

/// Bad input: a 400 naming the field; another app's flow: 403 (auth on
/// is in tests/it/security.rs's style: here, the refusals that need no
/// token); removing limits lets waiting fires go.
pub async fn bad_flow_input_is_refused_and_removing_limits_frees_the_flow(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    for (body, field) in [
        (json!({"app": "it", "key": "k", "ratePerSec": 0}), "ratePerSec"),
        (json!({"app": "it", "key": "k", "ratePerSec": 100001}), "ratePerSec"),
        (json!({"app": "it", "key": "k", "ratePerSec": -1}), "ratePerSec"),
        (json!({"app": "it", "key": "k", "parallelism": 0}), "parallelism"),
        (json!({"app": "it", "key": "k".repeat(129)}), "key"),
        (json!({"app": "it", "key": ""}), "key"),
    ] {
        let reply = app.post("setFlowLimit", body.clone()).await;
        assert_eq!(reply["code"], 400, "{body}: {reply}");
        assert!(reply["msg"].as_str().unwrap().starts_with(&format!("{field}:")), "{body}: {reply}");
    }
    let long = app
        .create(json!({"app": "it", "name": "long", "cron": "* * * * * *",
                       "notifyHTTPParam": {"url": "http://127.0.0.1:9/x", "flowKey": "é".repeat(129)}}))
        .await;
    assert_eq!(long["code"], 400, "{long}");
    assert!(long["msg"].as_str().unwrap().contains("notifyHTTPParam.flowKey"), "{long}");

    // getTimer shows the flow a timer is in: its key, else host:port.
    let id = app
        .create_ok(json!({"app": "it", "name": "shown", "cron": "0 0 0 1 1 ?",
                          "notifyHTTPParam": {"url": "https://API.Example.com/hook"}}))
        .await;
    let timer = app.get(&format!("getTimer?id={id}&app=it")).await;
    assert_eq!(timer["result"]["notifyHTTPParam"]["flowKey"], "api.example.com:443", "{timer}");

    let rx = Receiver::start(false).await.unwrap();
    set_flow(&app, json!({"app": "it", "key": "gone", "paused": true})).await;
    app.create_ok(json!({"app": "it", "name": "gone", "runAt": now_ms() + 1_000, "status": 2,
                         "notifyHTTPParam": {"url": rx.url("/gone"), "flowKey": "gone"}}))
        .await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(rx.count(), 0);
    let deleted = app
        .http
        .delete(format!("{}/api/xtimer/delFlowLimit?app=it&key=gone", app.base))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(deleted["result"], json!({"key": "gone", "deleted": true}), "{deleted}");
    assert!(rx.wait_until(Duration::from_secs(10), |hits| hits.len() == 1).await, "its fire goes");
    assert!(flows(&app).await.is_empty());
    app.stop().await;
}

/// How a flow holding its fires lets them go.
enum Freed {
    /// `setFlowLimit` with `paused: false`.
    Resumed,
    /// `delFlowLimit`.
    Deleted,
}

/// Twenty one-shots due 5 ms apart wait on a paused flow with no
/// parallelism (nothing sent, `getFlows` counts them); once the flow is
/// freed they all arrive, once each, oldest first, and are recorded
/// succeeded (before: all were let go at once and raced each other to the
/// receiver).
async fn waiting_fires_leave_in_run_time_order(stack: Stack, freed: Freed) {
    const N: usize = 20;
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let key = format!("127.0.0.1:{}", rx.addr.port());
    set_flow(&app, json!({"app": "it", "key": key, "paused": true})).await;
    let due = now_ms() + 2_000;
    let ids = one_shots(&app, "ordered", N, &rx.url("/ordered"), |i| due + i as i64 * 5).await;
    tokio::time::sleep(Duration::from_millis((due - now_ms() + 1_500).max(0) as u64)).await;
    wait_for("every fire waiting on the flow", || async {
        let shown = flows(&app).await;
        (shown[0]["waiting"].as_u64() == Some(N as u64)).then_some(())
    })
    .await;
    assert_eq!(rx.count(), 0, "a paused flow sends nothing");
    match freed {
        Freed::Resumed => {
            let resumed = app.post("setFlowLimit", json!({"app": "it", "key": key, "paused": false})).await;
            assert_eq!(resumed["result"]["parallelism"], Value::Null, "{resumed}");
        }
        Freed::Deleted => {
            let deleted = app
                .http
                .delete(format!("{}/api/xtimer/delFlowLimit?app=it&key={key}", app.base))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap();
            assert_eq!(deleted["result"]["deleted"], true, "{deleted}");
        }
    }
    assert!(rx.wait_until(Duration::from_secs(20), |hits| hits.len() >= N).await, "all {N} sent, {}", rx.count());
    let arrived: Vec<i64> = rx.hits().iter().map(|h| h.run_ms).collect();
    let expected: Vec<i64> = (0..N).map(|i| due + i as i64 * 5).collect();
    assert_eq!(arrived, expected, "once each, in run-time order");
    for id in &ids {
        wait_for("recorded succeeded", || async { app.fires(*id, "it").await.into_iter().find(|f| f["status"] == 2) })
            .await;
    }
    app.stop().await;
}

/// [`waiting_fires_leave_in_run_time_order`] when the paused flow resumes.
pub async fn a_resumed_flow_sends_its_waiting_fires_in_run_time_order(stack: Stack) {
    waiting_fires_leave_in_run_time_order(stack, Freed::Resumed).await;
}

/// [`waiting_fires_leave_in_run_time_order`] when the flow's limits are removed.
pub async fn removing_a_flows_limits_sends_its_waiting_fires_in_run_time_order(stack: Stack) {
    waiting_fires_leave_in_run_time_order(stack, Freed::Deleted).await;
}

crate::on_both_stacks!(
    a_rate_spreads_a_burst_and_other_flows_stay_on_time,
    parallelism_caps_open_callbacks,
    a_paused_flow_holds_its_fires_and_sends_them_in_order,
    bad_flow_input_is_refused_and_removing_limits_frees_the_flow,
    a_resumed_flow_sends_its_waiting_fires_in_run_time_order,
    removing_a_flows_limits_sends_its_waiting_fires_in_run_time_order,
);
