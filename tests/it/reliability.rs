//! Nothing stuck, nothing lost, with the default settings: a receiver that
//! hangs does not delay anyone else's timers, and a full disk delays fires
//! without losing or repeating one.

use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;
use xtimer_core::config::{ExecutorConfig, ReconcilerConfig, SchedulerConfig, TriggerConfig};

use crate::helpers::{now_ms, wait_for, Stack, Storage, TestNode, PATIENCE, POLL};

/// A listener on 127.0.0.1 that accepts connections and never answers.
struct HungHost {
    url: String,
    _task: tokio::task::JoinHandle<()>,
}

impl HungHost {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hang", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        Self { url, _task: task }
    }
}

/// Storage of `stack` with every timing at its default (the test config
/// shortens them; the guarantees here are the defaults').
async fn default_storage(stack: Stack) -> Storage {
    let mut storage = Storage::new(stack).await;
    let c = &mut storage.config;
    (c.executor, c.reconciler, c.scheduler, c.trigger) =
        (ExecutorConfig::default(), ReconcilerConfig::default(), SchedulerConfig::default(), TriggerConfig::default());
    storage
}

fn per_second(app: &str, name: &str, url: &str) -> Value {
    json!({
        "app": app, "name": name, "cron": "* * * * * *", "status": 2,
        "notifyHTTPParam": {"url": url},
    })
}

fn p99(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() * 99 / 100).min(values.len() - 1)]
}

pub async fn a_hung_receiver_does_not_delay_other_timers(stack: Stack) {
    let storage = default_storage(stack).await;
    let node = TestNode::spawn_with(storage.config.clone()).await;
    let hung = HungHost::start().await;
    let rx = Receiver::start(false).await.unwrap();
    // The hung timers first, so their fires are ahead in every queue.
    let mut hung_ids = Vec::new();
    for i in 0..100 {
        hung_ids.push(node.create_ok(per_second("hung", &format!("h{i}"), &hung.url)).await);
    }
    for i in 0..20 {
        node.create_ok(per_second("healthy", &format!("ok{i}"), &rx.url("/hook"))).await;
    }
    // Past the callback timeout (10 s): the hung host's slots are full and
    // its circuit has opened.
    let from = now_ms() + 1_000;
    let to = from + 20_000;
    let expected = 20 * 20;
    let window_keys = |hits: &[xtimer::receiver::Hit]| {
        hits.iter().filter(|h| h.run_ms >= from && h.run_ms < to).map(|h| h.key.clone()).collect::<HashSet<_>>().len()
    };
    let patience = Duration::from_millis((to - now_ms()) as u64) + PATIENCE;
    assert!(rx.wait_until(patience, |hits| window_keys(hits) >= expected).await, "the window's fires arrive");

    let in_window: Vec<_> = rx.hits().into_iter().filter(|h| h.run_ms >= from && h.run_ms < to).collect();
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for h in &in_window {
        *per_key.entry(h.key.as_str()).or_default() += 1;
    }
    assert_eq!(per_key.len(), expected, "every healthy fire of the window arrived");
    assert!(per_key.values().all(|&n| n == 1), "and once");
    let late = p99(in_window.iter().map(|h| h.lateness_ms()).collect());
    eprintln!("{stack:?}: healthy p99 lateness {late:.1} ms beside 100 hung timers");
    assert!(late < 1_000.0, "healthy timers' p99 lateness {late} ms");

    // The hung host's fires fail as busy or with its circuit open, not by
    // waiting their turn forever.
    let cut = |f: &Value| {
        let out = f["output"].as_str().unwrap_or_default();
        out.contains("circuit open") || out.contains("callbacks in flight")
    };
    let fires = wait_for("a hung host's fire is cut off", || async {
        let fires = node.fires(hung_ids[99], "hung").await;
        fires.iter().any(cut).then_some(fires)
    })
    .await;
    let cut_off = fires.iter().filter(|f| cut(f));
    assert!(cut_off.count() > 0, "the hung host was cut off: {:?}", &fires[..fires.len().min(5)]);
    node.stop().await;
}

crate::on_both_stacks!(a_hung_receiver_does_not_delay_other_timers);

/// A small filesystem of its own, filled up and emptied on request.
struct SmallDisk {
    path: std::path::PathBuf,
    filler: std::path::PathBuf,
}

impl SmallDisk {
    fn mount(dir: &std::path::Path) -> Self {
        let path = dir.join("disk");
        std::fs::create_dir_all(&path).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"]).arg(&path).output().unwrap();
        assert!(out.status.success(), "mounting a small tmpfs (needs root): {}", String::from_utf8_lossy(&out.stderr));
        let filler = path.join("filler");
        Self { path, filler }
    }

    /// Writes a file until the disk has no space left.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(&self.filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
        // The last partial blocks too.
        while f.write_all(&[0u8; 512]).is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(&self.filler).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_delays_fires_but_loses_and_repeats_none() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(dir.path());
    let mut storage = default_storage(Stack::Embedded).await;
    storage.config.database.url = format!("sqlite://{}", disk.path.join("xtimer.db").display());
    let node = TestNode::spawn_with(storage.config.clone()).await;
    let rx = Receiver::start(false).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(node.create_ok(per_second("disk", &format!("t{i}"), &rx.url("/hook"))).await);
    }
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 10).await, "fires flow before the disk fills");

    disk.fill();
    let full_from = now_ms();
    // Six seconds of fires due while the disk is full.
    tokio::time::sleep(Duration::from_secs(6)).await;
    // Reads keep answering while writes fail.
    let reply = node.act("getTimer", ids[0], "disk").await;
    assert_eq!(reply["code"], 0, "{reply}");
    // SQLite reuses its WAL's pages, so small writes may still fit: write
    // large disabled timers until one finds the disk full.
    let big = "x".repeat(30_000);
    let mut refused = None;
    for i in 0..500 {
        let mut body = per_second("disk", &format!("big{i}"), &rx.url("/hook"));
        body["status"] = json!(1);
        body["notifyHTTPParam"]["body"] = json!(big);
        let reply = node.create(body).await;
        if reply["code"] != 0 {
            refused = Some(reply);
            break;
        }
    }
    let refused = refused.expect("a write on a full disk fails");
    assert!(refused["code"].as_i64().unwrap() >= 500, "a full disk is the server's error: {refused}");
    // Full a while longer, with the failed write behind it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    disk.free();
    let freed_at = now_ms();

    // Every fire from a little before the disk filled until well after it
    // was freed arrives, once.
    let from = full_from - 2_000;
    let to = freed_at + 5_000;
    let expected = ids.len() * ((to - from) / 1_000) as usize;
    let arrived = rx
        .wait_until(Duration::from_secs(60), |hits| {
            hits.iter()
                .filter(|h| h.run_ms >= from && h.run_ms < to)
                .map(|h| &h.key)
                .collect::<std::collections::HashSet<_>>()
                .len()
                >= expected
        })
        .await;
    // Time for a repeated fire to show up, if there were one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for h in rx.hits().into_iter().filter(|h| h.run_ms >= from && h.run_ms < to) {
        *per_key.entry(h.key).or_default() += 1;
    }
    assert!(arrived, "lost fires: {} of {expected} arrived", per_key.len());
    let repeated: Vec<_> = per_key.iter().filter(|(_, &n)| n > 1).collect();
    assert!(repeated.is_empty(), "repeated: {repeated:?}");
    // And they are recorded: the node wrote what it held once space came back.
    for &id in &ids {
        let all_done = |fires: &[Value]| {
            fires
                .iter()
                .filter(|f| (from..to - 2_000).contains(&f["runTimer"].as_i64().unwrap()))
                .all(|f| f["status"] == 2)
        };
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut fires = node.fires(id, "disk").await;
        while !all_done(&fires) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
            fires = node.fires(id, "disk").await;
        }
        let done = all_done(&fires);
        assert!(done, "timer {id}: {:?}", fires.iter().map(|f| (&f["runTimer"], &f["status"])).collect::<Vec<_>>());
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timers_own_callback_timeout_cuts_a_hung_callback_short() {
    let storage = default_storage(Stack::Embedded).await;
    let node = TestNode::spawn_with(storage.config.clone()).await;
    let hung = HungHost::start().await;
    let run_ms = (now_ms() / 1_000 + 2) * 1_000;
    let id = node
        .create_ok(json!({
            "app": "own", "name": "short", "runAt": run_ms, "status": 2, "callbackTimeoutMs": 300,
            "notifyHTTPParam": {"url": hung.url}, "retry": {"maxAttempts": 1},
        }))
        .await;
    let timer = node.act("getTimer", id, "own").await;
    assert_eq!(timer["result"]["callbackTimeoutMs"], 300, "{timer}");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let fire = loop {
        let fires = node.fires(id, "own").await;
        if let Some(f) = fires.iter().find(|f| f["status"] == 3) {
            break f.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "the fire did not fail: {fires:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Failed on its own 300 ms timeout, long before the node's 10 s.
    let took = now_ms() - run_ms;
    assert!((300..3_000).contains(&took), "failed {took} ms after its time: {fire}");
    assert!(fire["output"].as_str().unwrap().contains("timed out"), "{fire}");

    let reply = node
        .create(json!({
            "app": "own", "name": "too-long", "cron": "* * * * * *", "callbackTimeoutMs": 60_000,
            "notifyHTTPParam": {"url": hung.url},
        }))
        .await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert!(reply["msg"].as_str().unwrap().contains("callbackTimeoutMs: must be 100 to 30000 ms"), "{reply}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_retry_after_is_retried_no_sooner_than_it_asks() {
    use std::sync::{Arc, Mutex};
    // Answers 429 (Retry-After: 2) the first time, 200 after; records when.
    let arrivals: Arc<Mutex<Vec<i64>>> = Arc::default();
    let app = axum::Router::new().fallback({
        let arrivals = arrivals.clone();
        move || {
            let arrivals = arrivals.clone();
            async move {
                let mut a = arrivals.lock().unwrap();
                a.push(now_ms());
                if a.len() == 1 {
                    (axum::http::StatusCode::TOO_MANY_REQUESTS, [("retry-after", "2")], "slow down")
                } else {
                    (axum::http::StatusCode::OK, [("retry-after", "0")], "ok")
                }
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let storage = default_storage(Stack::Embedded).await;
    let node = TestNode::spawn_with(storage.config.clone()).await;
    let run_ms = (now_ms() / 1_000 + 2) * 1_000;
    let id = node
        .create_ok(json!({
            "app": "polite", "name": "t", "runAt": run_ms, "status": 2,
            "notifyHTTPParam": {"url": url}, "retry": {"maxAttempts": 3, "backoffMs": 100},
        }))
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while node.fires(id, "polite").await.iter().all(|f| f["status"] != 2) {
        assert!(tokio::time::Instant::now() < deadline, "the fire did not succeed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let a = arrivals.lock().unwrap().clone();
    assert_eq!(a.len(), 2, "one 429, one success: {a:?}");
    assert!(a[1] - a[0] >= 2_000, "retried {} ms after a 429 asking for 2 s", a[1] - a[0]);
    assert!(a[1] - a[0] < 5_000, "but not much later: {} ms", a[1] - a[0]);
    node.stop().await;
}
