//! Spawning nodes and talking to them over real HTTP.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::node::Node;
use xtimer::receiver::Receiver;
use xtimer_core::config::Config;

/// Which storage a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// A fresh SQLite file and the in-process shard index and locks.
    Embedded,
    /// A fresh database on `XTIMER_TEST_DATABASE_URL`'s PostgreSQL and a
    /// fresh key prefix on `XTIMER_TEST_REDIS_URL`'s Redis.
    PostgresRedis,
    /// A fresh database on `XTIMER_TEST_MYSQL_URL`'s MySQL (or MariaDB) and
    /// a fresh key prefix on `XTIMER_TEST_REDIS_URL`'s Redis.
    MysqlRedis,
}

/// Storage for one test: the configuration that points at it, and what
/// keeps it alive.
pub struct Storage {
    pub config: Config,
    _dir: tempfile::TempDir,
}

impl Storage {
    /// Fresh storage on `stack`, with [`test_config`]'s quick loops.
    pub async fn new(stack: Stack) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = test_config(&dir.path().join("xtimer.db"));
        let server = match stack {
            Stack::Embedded => None,
            Stack::PostgresRedis => Some(("XTIMER_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:15432/postgres")),
            Stack::MysqlRedis => Some(("XTIMER_TEST_MYSQL_URL", "mysql://root@127.0.0.1:13306/mysql")),
        };
        if let Some((var, default)) = server {
            let suffix = format!("{:016x}", rand_u64());
            let admin = std::env::var(var).unwrap_or_else(|_| default.into());
            config.database.url = xtimer_store::db::create_database(&admin, &format!("it_{suffix}"))
                .await
                .unwrap_or_else(|e| panic!("the server at {var} (scripts/test starts one): {e}"));
            config.redis.url =
                std::env::var("XTIMER_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:16379".into());
            config.shard.key_prefix = format!("it{suffix}");
        }
        Self { config, _dir: dir }
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    h.finish()
}

/// Configuration for a test node on SQLite file `db`: a free port and quick loops.
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

/// A node and an HTTP client.
pub struct TestNode {
    pub node: Node,
    pub base: String,
    pub http: reqwest::Client,
    _storage: Option<Storage>,
}

impl TestNode {
    /// A node on fresh storage of `stack`.
    pub async fn spawn(stack: Stack) -> Self {
        let storage = Storage::new(stack).await;
        let mut node = Self::spawn_with(storage.config.clone()).await;
        node._storage = Some(storage);
        node
    }

    /// A node with `config` (storage kept alive by the caller).
    pub async fn spawn_with(config: Config) -> Self {
        let node = Node::start(config).await.expect("node starts");
        let base = format!("http://{}", node.addr);
        Self { node, base, http: test_client(), _storage: None }
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

    /// Every fire record of a timer (those due and those planned), oldest first.
    pub async fn fires(&self, id: i64, app: &str) -> Vec<Value> {
        let mut list = Vec::new();
        for window in ["", "&upcoming=true"] {
            let url = format!("{}/api/xtimer/getTimerTasks?id={id}&app={app}&pageSize=500{window}", self.base);
            let reply: Value = self.http.get(url).send().await.unwrap().json().await.unwrap();
            assert_eq!(reply["code"], 0, "{reply}");
            list.extend(reply["result"]["list"].as_array().unwrap().iter().cloned());
        }
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

/// How often [`wait_for`] looks again.
pub const POLL: Duration = Duration::from_millis(100);

/// Calls `probe` every [`POLL`] until it returns `Some`, for at most
/// [`PATIENCE`]; panics naming `what` when it never does. Tests wait for
/// an outcome with it instead of sleeping a fixed time and hoping.
pub async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// Runs each listed `async fn(Stack)` body as a test per stack, `embedded`,
/// `postgres_redis` and `mysql_redis`, under a module named after the body.
#[macro_export]
macro_rules! on_both_stacks {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                super::$name($crate::helpers::Stack::Embedded).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_redis() {
                super::$name($crate::helpers::Stack::PostgresRedis).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql_redis() {
                super::$name($crate::helpers::Stack::MysqlRedis).await
            }
        }
    )*};
}

/// The lines `child` prints on its (piped) stdout, read on a thread of their own.
pub fn stdout_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout piped");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// The tests' HTTP client: it lets a pooled connection go after 5 s, before
/// the node's `server.idle_timeout_ms` (10 s) closes it, so a request never
/// goes out on a connection the node is closing at that moment (an
/// `IncompleteMessage` on a loaded machine).
pub fn test_client() -> reqwest::Client {
    reqwest::Client::builder().pool_idle_timeout(Duration::from_secs(5)).build().unwrap()
}
