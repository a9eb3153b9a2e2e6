//! Spawning nodes and talking to them over real HTTP.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::node::Node;
use xtimer::receiver::Receiver;
use xtimer_core::config::Config;

/// Configuration for a test node on `db`: a free port and quick loops.
pub fn test_config(db: &Path) -> Config {
    let mut config = Config::load(None, &BTreeMap::new()).expect("defaults");
    config.server.listen = "127.0.0.1:0".into();
    config.server.shutdown_grace_ms = 5_000;
    config.database.url = format!("sqlite://{}", db.display());
    config.executor.timeout_ms = 2_000;
    config.executor.lease_ms = 5_000;
    config.reconciler.period_ms = 500;
    config.reconciler.grace_ms = 1_500;
    config
}

/// A node, its database folder and an HTTP client.
pub struct TestNode {
    pub node: Node,
    pub base: String,
    pub http: reqwest::Client,
    #[allow(dead_code)]
    pub db: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl TestNode {
    /// A node on a fresh SQLite file.
    pub async fn spawn() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("xtimer.db");
        let mut node = Self::spawn_on(&db, test_config(&db)).await;
        node._dir = Some(dir);
        node
    }

    /// A node on an existing database file.
    pub async fn spawn_on(db: &Path, config: Config) -> Self {
        let node = Node::start(config).await.expect("node starts");
        let base = format!("http://{}", node.addr);
        Self { node, base, http: reqwest::Client::new(), db: db.to_path_buf(), _dir: None }
    }

    /// POST createTimer; returns the envelope.
    pub async fn create(&self, body: Value) -> Value {
        let resp = self.http.post(format!("{}/api/xtimer/createTimer", self.base)).json(&body).send().await.unwrap();
        resp.json().await.unwrap()
    }

    /// Creates a timer and returns its id, panicking on an error envelope.
    pub async fn create_ok(&self, body: Value) -> i64 {
        let reply = self.create(body).await;
        assert_eq!(reply["code"], 0, "{reply}");
        reply["result"]["id"].as_i64().unwrap()
    }

    /// GET `/api/xtimer/{action}?id=..&app=..`.
    pub async fn act(&self, action: &str, id: i64, app: &str) -> Value {
        let url = format!("{}/api/xtimer/{action}?id={id}&app={app}", self.base);
        let req = if action == "delTimer" { self.http.delete(url) } else { self.http.get(url) };
        req.send().await.unwrap().json().await.unwrap()
    }

    /// Every fire record of a timer, oldest first.
    pub async fn fires(&self, id: i64, app: &str) -> Vec<Value> {
        let url = format!("{}/api/xtimer/getTimerTasks?id={id}&app={app}&pageSize=500", self.base);
        let reply: Value = self.http.get(url).send().await.unwrap().json().await.unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
        let mut list = reply["result"]["list"].as_array().unwrap().clone();
        list.sort_by_key(|f| f["runTimer"].as_i64());
        list
    }

    /// Stops the node the way SIGTERM does.
    pub async fn stop(self) {
        self.node.shutdown().await;
    }
}

/// A per-second cron timer calling `receiver`.
pub fn every_second(name: &str, receiver: &Receiver, extra: Value) -> Value {
    let mut body = json!({
        "app": "it",
        "name": name,
        "cron": "* * * * * *",
        "status": 2,
        "notifyHTTPParam": {"url": receiver.url("/hook"), "method": "POST", "body": "{\"n\":1}"},
        "retry": {"maxAttempts": 1, "backoffMs": 0}
    });
    merge(&mut body, extra);
    body
}

fn merge(base: &mut Value, extra: Value) {
    if let (Value::Object(b), Value::Object(e)) = (base, extra) {
        for (k, v) in e {
            b.insert(k, v);
        }
    }
}

/// Now, Unix milliseconds.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Generous wait for real-clock tests.
pub const PATIENCE: Duration = Duration::from_secs(20);
