//! `replayFires` (API 1f) as a receiver sees it: the fires that failed
//! while it was down, sent again oldest first at the asked rate with their
//! original keys and `X-Xtimer-Replay: 1`; the records take the new
//! outcome; a node killed mid-replay loses none of it.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use xtimer::receiver::{Hit, Receiver};

use crate::helpers::{now_ms, wait_for, Stack, TestNode, PATIENCE};

fn header(hit: &Hit, name: &str) -> String {
    let headers = hit.headers.as_ref().expect("a detailed receiver");
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// A receiver that answers 500 while `down` holds.
async fn flaky_receiver() -> (Receiver, Arc<AtomicBool>) {
    let rx = Receiver::start(true).await.unwrap();
    let down = Arc::new(AtomicBool::new(true));
    let flag = down.clone();
    rx.script(move |_, _| flag.load(Ordering::SeqCst).then(|| (StatusCode::INTERNAL_SERVER_ERROR, vec![])));
    (rx, down)
}

fn replays(rx: &Receiver) -> Vec<Hit> {
    replays_in(&rx.hits())
}

/// The replayed requests among `hits` (for `wait_until`, which holds the
/// receiver's hits while it asks).
fn replays_in(hits: &[Hit]) -> Vec<Hit> {
    hits.iter().filter(|h| header(h, "x-xtimer-replay") == "1").cloned().collect()
}

pub async fn a_replay_sends_failed_fires_again_with_their_keys_at_the_rate(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let (rx, down) = flaky_receiver().await;
    let from = now_ms();
    let id = app
        .create_ok(json!({"app": "it", "name": "flaky", "cron": "* * * * * *", "status": 2,
                          "notifyHTTPParam": {"url": rx.url("/flaky")}, "retry": {"maxAttempts": 1}}))
        .await;
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 4).await, "fires while the receiver is down");
    down.store(false, Ordering::SeqCst);
    let to = now_ms();
    let failed: BTreeSet<String> = wait_for("the failed fires are recorded", || async {
        let fires = app.fires(id, "it").await;
        let due: Vec<&Value> = fires.iter().filter(|f| (from..to).contains(&f["runTimer"].as_i64().unwrap())).collect();
        let ended = due.iter().all(|f| f["status"] == 3 || f["status"] == 2);
        (ended && !due.is_empty()).then(|| {
            due.iter().filter(|f| f["status"] == 3).map(|f| format!("{id}_{}", f["runTimer"])).collect::<BTreeSet<_>>()
        })
    })
    .await;
    assert!(failed.len() >= 3, "{failed:?}");

    let ask = json!({"app": "it", "id": id, "from": from, "to": to, "ratePerSec": 2});
    let mut dry = ask.clone();
    dry["dryRun"] = json!(true);
    let reply = app.post("replayFires", dry).await;
    assert_eq!(reply["result"]["count"], failed.len(), "{reply}");
    assert!(replays(&rx).is_empty(), "a dry run sends nothing");
    let reply = app.post("replayFires", ask.clone()).await;
    assert_eq!(reply["result"]["count"], failed.len(), "{reply}");

    let n = failed.len();
    assert!(rx.wait_until(PATIENCE, |h| replays_in(h).len() >= n).await, "every failed fire is sent again");
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let sent = replays(&rx);
    let keys: BTreeSet<String> = sent.iter().map(|h| h.key.clone()).collect();
    assert_eq!(keys, failed, "each failed fire once more, with its original Idempotency-Key");
    assert_eq!(sent.len(), n, "once each");
    let arrivals: Vec<i64> = sent.iter().map(|h| h.arrival_us / 1_000).collect();
    for pair in arrivals.windows(2) {
        assert!(pair[1] - pair[0] >= 350, "at the asked rate, 2 a second: {arrivals:?}");
    }
    let runs: Vec<i64> = sent.iter().map(|h| h.run_ms).collect();
    assert!(runs.windows(2).all(|w| w[0] < w[1]), "oldest first: {runs:?}");

    let records = wait_for("the records take the new outcome", || async {
        let fires = app.fires(id, "it").await;
        let replayed: Vec<Value> = fires.into_iter().filter(|f| f["replayed"] == true).collect();
        (replayed.len() == n && replayed.iter().all(|f| f["status"] == 2)).then_some(replayed)
    })
    .await;
    assert!(records.iter().all(|f| f["attempt"] == 2), "attempt + 1");
    let again = app.post("replayFires", ask).await;
    assert_eq!(again["result"]["count"], 0, "nothing failed is left: {again}");
    let history = app.get(&format!("getTimerHistory?id={id}&app=it")).await;
    assert_eq!(history["result"]["list"][0]["action"], "replay", "{history}");
    assert_eq!(history["result"]["list"][0]["changes"]["count"], json!([null, n]));

    for (body, wanted) in [
        (json!({"app": "it", "id": id, "to": to}), "from: is required"),
        (json!({"app": "it", "id": id, "from": 0, "to": 8 * 86_400_000}), "to: the range may be at most 7 days"),
        (json!({"app": "it", "id": id, "from": from, "to": to, "ratePerSec": 0}), "ratePerSec: must be 1 to 10000"),
        (json!({"app": "it", "id": id, "from": from, "to": to, "status": [0]}), "status: must list ended fire"),
    ] {
        let bad = app.post("replayFires", body).await;
        assert_eq!(bad["code"], 400, "{bad}");
        assert!(bad["msg"].as_str().unwrap().starts_with(wanted), "{bad}");
    }
    app.stop().await;
}

crate::on_both_stacks!(a_replay_sends_failed_fires_again_with_their_keys_at_the_rate);

/// The replay is stored: a node `kill -9`ed mid-replay (embedded SQLite),
/// and another started on its database, sends the rest; none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_replay_loses_none_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("xtimer.db").display());
    let (rx, down) = flaky_receiver().await;
    let start = |port: u16| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtimer"))
            .arg("serve")
            .env("XTIMER_LISTEN", format!("127.0.0.1:{port}"))
            .env("XTIMER_DATABASE_URL", &db)
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
    let mut node = start(port);
    let from = now_ms();
    let created: Value = http
        .post(format!("{base}/createTimer"))
        .json(&json!({"app": "it", "name": "flaky", "cron": "* * * * * *", "status": 2,
                      "notifyHTTPParam": {"url": rx.url("/flaky")}, "retry": {"maxAttempts": 1}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["result"]["id"].as_i64().unwrap_or_else(|| panic!("{created}"));
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 6).await, "fires while the receiver is down");
    let to = now_ms();
    down.store(false, Ordering::SeqCst);
    // The fires of the range are recorded failed before they are replayed.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let failed: BTreeSet<String> =
        rx.hits().iter().filter(|h| (from..to).contains(&h.run_ms)).map(|h| h.key.clone()).collect();
    let since = now_ms();
    let replay: Value = http
        .post(format!("{base}/replayFires"))
        .json(&json!({"app": "it", "id": id, "from": from, "to": to, "ratePerSec": 1}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let count = replay["result"]["count"].as_u64().unwrap_or_else(|| panic!("{replay}")) as usize;
    assert!(count >= 5, "{replay}");
    assert!(rx.wait_until(PATIENCE, |h| replays_in(h).len() >= 2).await, "the replay is under way");
    node.kill().unwrap();
    node.wait().unwrap();
    let mut node = start(port);
    assert!(
        rx.wait_until(Duration::from_secs(60), |h| {
            replays_in(h).iter().map(|h| h.key.clone()).collect::<BTreeSet<_>>().len() >= count
        })
        .await,
        "the rest of the replay is sent by the next node"
    );
    let sent = replays(&rx);
    let keys: BTreeSet<String> = sent.iter().map(|h| h.key.clone()).collect();
    assert!(failed.iter().all(|k| keys.contains(k)), "none lost: {failed:?} vs {keys:?}");
    assert!(sent.len() <= count + 1, "at most the one in flight at the kill twice: {} of {count}", sent.len());
    assert!(sent.iter().all(|h| h.arrival_us / 1_000 >= since), "replays only after the ask");
    node.kill().unwrap();
    node.wait().unwrap();
}
