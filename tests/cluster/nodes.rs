//! `xtimer serve` processes of a test cluster.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::servers::free_port;

/// One `xtimer serve` process.
pub struct ProcNode {
    pub base: String,
    child: Child,
}

impl ProcNode {
    /// Starts a node on PostgreSQL `db` and Redis `redis` with the
    /// product's default settings, plus `extra` `XTIMER_…` variables; waits
    /// until it answers.
    pub async fn start(db: &str, redis: &str, extra: &[(&str, &str)]) -> Self {
        let port = free_port();
        let extra: Vec<(String, String)> = extra.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        // XTIMER_TEST_NODE_LOG: a file every such node's output is appended to.
        let log = std::env::var_os("XTIMER_TEST_NODE_LOG").map(std::path::PathBuf::from);
        Self::start_at(port, db, redis, &extra, log.as_deref())
            .await
            .unwrap_or_else(|| panic!("node on port {port} did not start"))
    }

    /// Starts a node listening on 127.0.0.1:`port` with the product's
    /// default settings: only the listen address, the PostgreSQL and Redis
    /// URLs and the log level (`XTIMER_LOG`, else `warn`) are set, plus
    /// `extra`. Its output goes to `log` (appended) if given, else nowhere.
    /// Waits until it answers; `None` if it does not within 20 s.
    pub async fn start_at(
        port: u16,
        db: &str,
        redis: &str,
        extra: &[(String, String)],
        log: Option<&std::path::Path>,
    ) -> Option<Self> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtimer"));
        cmd.arg("serve")
            .env("XTIMER_LISTEN", format!("127.0.0.1:{port}"))
            .env("XTIMER_DATABASE_URL", db)
            .env("XTIMER_REDIS__URL", redis)
            .env("XTIMER_LOG", std::env::var("XTIMER_LOG").unwrap_or_else(|_| "warn".into()))
            .envs(extra.iter().map(|(k, v)| (k, v)));
        match log {
            Some(path) => {
                let file = std::fs::OpenOptions::new().create(true).append(true).open(path).ok()?;
                cmd.stdout(file.try_clone().ok()?).stderr(file).env("NO_COLOR", "1");
            }
            None => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        let child = cmd.spawn().expect("xtimer binary");
        let node = Self { base: format!("http://127.0.0.1:{port}"), child };
        let http = reqwest::Client::new();
        for _ in 0..400 {
            if http.get(format!("{}/healthz", node.base)).send().await.is_ok() {
                return Some(node);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// The process id (part of the node's id: `{host}-{pid}-{suffix}`).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`STOP`, `CONT`, …) to the process with `kill(1)`.
    #[allow(dead_code)]
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{signal} {}", self.child.id());
    }

    /// SIGTERM, then how long the process took to exit; `None` if it had
    /// not within `bound`.
    #[allow(dead_code)]
    pub async fn terminate_within(&mut self, bound: Duration) -> Option<Duration> {
        let asked = std::time::Instant::now();
        self.signal("TERM");
        while asked.elapsed() < bound {
            if self.child.try_wait().ok().flatten().is_some() {
                return Some(asked.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// SIGKILL: no shutdown, no release, no flush.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Creates a per-second cron timer calling `url`; returns its id.
    pub async fn create_every_second(&self, name: &str, url: &str) -> i64 {
        let body = json!({
            "app": "cluster", "name": name, "cron": "* * * * * *", "status": 2,
            "notifyHTTPParam": {"url": url}, "retry": {"maxAttempts": 1, "backoffMs": 0}
        });
        let reply: Value = reqwest::Client::new()
            .post(format!("{}/api/xtimer/createTimer", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
        reply["result"]["id"].as_i64().unwrap()
    }

    /// How many shards this node reports holding.
    pub async fn shards_held(&self) -> u64 {
        let Ok(resp) = reqwest::get(format!("{}/api/xtimer/nodes", self.base)).await else { return 0 };
        let reply: Value = resp.json().await.unwrap_or_default();
        let me = self.base.trim_start_matches("http://");
        reply["result"]["list"]
            .as_array()
            .and_then(|list| list.iter().find(|n| n["listen"] == me))
            .and_then(|n| n["shardsHeld"].as_u64())
            .unwrap_or(0)
    }

    /// Disables a timer.
    pub async fn disable(&self, id: i64) {
        let url = format!("{}/api/xtimer/unableTimer?id={id}&app=cluster", self.base);
        let reply: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        assert_eq!(reply["code"], 0, "{reply}");
    }
}

impl Drop for ProcNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
