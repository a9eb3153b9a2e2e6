//! `xtimer bench --scenario create-task | hold-tasks`: the `/v1` task API
//! under load, over real HTTP from `--clients` keep-alive connections in
//! this process (so client and server share the machine's cores; the
//! client is a lean [`RawClient`] so that it takes little of them).
//!
//! - create-task: every client posts create_task back to back (the body a
//!   Go worker sends) for `--seconds`; QPS counts code-0 replies.
//! - hold-tasks: `--count` tasks are written first (straight to the store,
//!   in batches), then every client posts hold_tasks with `limit=100` as Go
//!   workers do (query string, no body) for `--seconds` or until the queue
//!   is empty; QPS counts holds that returned tasks.
//!
//! With `--nodes N` (a database server and Redis), N nodes in this process
//! share the database and client c calls node c mod N.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use xtimer_asyncflow::task_id::TaskId;
use xtimer_asyncflow::wire::TaskScheduleCfg;
use xtimer_asyncflow::TaskData;

use super::args::{drop_fresh_database, fresh_config, BenchArgs, Scenario};
use super::measure::each_run;
use xtimer::node::Node;

const TASK_TYPE: &str = "bench";

/// Figures of one run.
#[derive(Debug, Clone, Default)]
struct Figures {
    calls: u64,
    qps: f64,
    tasks_per_sec: f64,
    errors: u64,
}

/// Runs the scenario `--runs` times and prints each run and the medians.
pub async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    println!(
        "scenario {:?}: {} clients for {} s{}",
        args.scenario,
        args.clients,
        args.seconds,
        if matches!(args.scenario, Scenario::HoldTasks) {
            format!(", {} tasks queued", args.count)
        } else {
            String::new()
        }
    );
    println!("{:>4} {:>9} {:>10} {:>10} {:>7}", "run", "calls", "QPS", "tasks/s", "errors");
    each_run(
        args.runs,
        || run_once(args),
        print_row,
        |med| Figures {
            calls: med(|f| f.calls as f64) as u64,
            qps: med(|f| f.qps),
            tasks_per_sec: med(|f| f.tasks_per_sec),
            errors: med(|f| f.errors as f64) as u64,
        },
    )
    .await?;
    Ok(())
}

fn print_row(label: &str, f: &Figures) {
    println!("{label:>4} {:>9} {:>10.0} {:>10.0} {:>7}", f.calls, f.qps, f.tasks_per_sec, f.errors);
}

async fn run_once(args: &BenchArgs) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let config = fresh_config(args, dir.path()).await?;
    anyhow::ensure!(
        args.nodes == 1 || (args.database_url.is_some() && args.redis_url.is_some()),
        "--nodes > 1 needs --database-url (PostgreSQL or MySQL) and --redis-url"
    );
    let node = Node::start(config.clone()).await?;
    node.tasks.register(TaskScheduleCfg { task_type: TASK_TYPE.into(), ..Default::default() }, None).await?;
    let mut others = Vec::new();
    for _ in 1..args.nodes {
        others.push(Node::start(config.clone()).await?);
    }
    // Client c calls node c mod --nodes.
    let addrs: Vec<SocketAddr> = std::iter::once(node.addr).chain(others.iter().map(|n| n.addr)).collect();
    if matches!(args.scenario, Scenario::HoldTasks) {
        prefill(&node, args.count).await?;
    }

    let calls = Arc::new(AtomicU64::new(0));
    let tasks = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let drained = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..args.clients {
        let (calls, tasks, errors, drained) = (calls.clone(), tasks.clone(), errors.clone(), drained.clone());
        let scenario = args.scenario;
        let addr = addrs[c % addrs.len()];
        clients.spawn(async move {
            let Ok(mut conn) = RawClient::connect(addr).await else {
                errors.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let mut i = 0u64;
            while Instant::now() < deadline && !drained.load(Ordering::Relaxed) {
                i += 1;
                let request = match scenario {
                    Scenario::HoldTasks => hold_request(addr),
                    _ => create_request(addr, &create_body(c, i)),
                };
                let reply = match conn.call(&request).await {
                    Ok(body) if body_is_ok(&body) => body,
                    Ok(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        match RawClient::connect(addr).await {
                            Ok(fresh) => conn = fresh,
                            Err(_) => return,
                        }
                        continue;
                    }
                };
                let n = match scenario {
                    Scenario::HoldTasks => count(&reply, b"\"task_id\""),
                    _ => 1,
                };
                if matches!(scenario, Scenario::HoldTasks) && n == 0 {
                    drained.store(true, Ordering::Relaxed);
                } else {
                    calls.fetch_add(1, Ordering::Relaxed);
                    tasks.fetch_add(n, Ordering::Relaxed);
                }
            }
        });
    }
    while clients.join_next().await.is_some() {}
    let secs = started.elapsed().as_secs_f64();
    node.shutdown().await;
    for other in others {
        other.shutdown().await;
    }
    drop_fresh_database(args, &config.database.url).await;
    let (calls, tasks) = (calls.load(Ordering::Relaxed), tasks.load(Ordering::Relaxed));
    Ok(Figures {
        calls,
        qps: calls as f64 / secs,
        tasks_per_sec: tasks as f64 / secs,
        errors: errors.load(Ordering::Relaxed),
    })
}

/// A keep-alive HTTP/1.1 connection that sends prepared requests and reads
/// each reply's status line, headers and `Content-Length` body, no more: a
/// full client's per-request work would take the cores the server is
/// measured on (as wrk and the like do, the load generator stays lean).
struct RawClient {
    stream: BufReader<TcpStream>,
    line: String,
}

impl RawClient {
    async fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self { stream: BufReader::new(stream), line: String::new() })
    }

    /// Sends `request` and returns the reply's body; an error for any status but 200.
    async fn call(&mut self, request: &[u8]) -> std::io::Result<Vec<u8>> {
        let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
        self.stream.get_mut().write_all(request).await?;
        self.line.clear();
        self.stream.read_line(&mut self.line).await?;
        if !self.line.starts_with("HTTP/1.1 200") {
            return Err(bad(&format!("status line {:?}", self.line.trim_end())));
        }
        let mut length = None;
        loop {
            self.line.clear();
            if self.stream.read_line(&mut self.line).await? == 0 {
                return Err(bad("connection closed in the headers"));
            }
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse::<usize>().ok();
                }
            }
        }
        let mut body = vec![0; length.ok_or_else(|| bad("no Content-Length"))?];
        self.stream.read_exact(&mut body).await?;
        Ok(body)
    }
}

/// hold_tasks as a Go worker posts it: query string, no body, no Content-Type.
fn hold_request(addr: SocketAddr) -> Vec<u8> {
    format!("POST /v1/hold_tasks?task_type={TASK_TYPE}&limit=100 HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n")
        .into_bytes()
}

fn create_request(addr: SocketAddr, body: &str) -> Vec<u8> {
    format!(
        "POST /v1/create_task HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether a `/v1` reply says code 0.
fn body_is_ok(body: &[u8]) -> bool {
    count(body, b"\"code\":0,") == 1
}

fn count(haystack: &[u8], needle: &[u8]) -> u64 {
    haystack.windows(needle.len()).filter(|w| *w == needle).count() as u64
}

/// The create_task body of a Go worker.
fn create_body(client: usize, i: u64) -> String {
    format!(
        r#"{{"task_data":{{"user_id":"bench","task_id":"","task_type":"{TASK_TYPE}","task_stage":"","status":0,"priority":null,"crt_retry_num":0,"max_retry_num":0,"max_retry_interval":0,"schedule_log":"","context":"{{\"client\":{client},\"n\":{i}}}","order_time":0,"create_time":"0001-01-01T00:00:00Z","modify_time":"0001-01-01T00:00:00Z"}}}}"#
    )
}

/// Writes `count` due tasks straight to the store, in batches.
async fn prefill(node: &Node, count: u64) -> anyhow::Result<()> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let store = node.tasks.store();
    let mut left = count;
    while left > 0 {
        let n = left.min(5_000);
        let batch: Vec<TaskData> = (0..n)
            .map(|i| TaskData {
                task_id: TaskId::generate(TASK_TYPE, 1).to_string(),
                task_type: TASK_TYPE.into(),
                status: 1,
                max_retry_num: 3,
                max_retry_interval: 10,
                context: format!("{{\"n\":{i}}}"),
                order_time: now_ms / 1_000 - 1,
                ..Default::default()
            })
            .collect();
        store.insert(TASK_TYPE, 1, &batch, now_ms).await?;
        left -= n;
    }
    Ok(())
}
