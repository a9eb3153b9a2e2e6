//! `xtimer bench --scenario create-task | hold-tasks`: the `/v1` task API
//! under load, over real HTTP from `--clients` keep-alive connections in
//! this process (so client and server share the machine's cores).
//!
//! - create-task: every client posts create_task back to back (the body a
//!   Go worker sends) for `--seconds`; QPS counts code-0 replies.
//! - hold-tasks: `--count` tasks are written first (straight to the store,
//!   in batches), then every client posts hold_tasks with `limit=100` as Go
//!   workers do (query string, no body) for `--seconds` or until the queue
//!   is empty; QPS counts holds that returned tasks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xtimer_asyncflow::task_id::TaskId;
use xtimer_asyncflow::wire::TaskScheduleCfg;
use xtimer_asyncflow::TaskData;

use crate::bench::{fresh_config, median, BenchArgs, Scenario};
use crate::node::Node;

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
    let mut all = Vec::new();
    for run in 1..=args.runs {
        let f = run_once(args).await?;
        println!("{:>4} {:>9} {:>10.0} {:>10.0} {:>7}", run, f.calls, f.qps, f.tasks_per_sec, f.errors);
        all.push(f);
    }
    if all.len() > 1 {
        println!(
            "{:>4} {:>9} {:>10.0} {:>10.0} {:>7}",
            "med",
            median(all.iter().map(|f| f.calls as f64).collect()),
            median(all.iter().map(|f| f.qps).collect()),
            median(all.iter().map(|f| f.tasks_per_sec).collect()),
            median(all.iter().map(|f| f.errors as f64).collect()),
        );
    }
    Ok(())
}

async fn run_once(args: &BenchArgs) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let config = fresh_config(args, dir.path()).await?;
    let node = Node::start(config).await?;
    node.tasks.register(TaskScheduleCfg { task_type: TASK_TYPE.into(), ..Default::default() }, None).await?;
    let base = format!("http://{}", node.addr);
    let http = reqwest::Client::builder().pool_max_idle_per_host(args.clients).tcp_nodelay(true).build()?;
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
        let (http, base, calls, tasks, errors, drained) =
            (http.clone(), base.clone(), calls.clone(), tasks.clone(), errors.clone(), drained.clone());
        let scenario = args.scenario;
        clients.spawn(async move {
            let mut i = 0u64;
            while Instant::now() < deadline && !drained.load(Ordering::Relaxed) {
                i += 1;
                let request = match scenario {
                    Scenario::HoldTasks => http.post(format!("{base}/v1/hold_tasks?task_type={TASK_TYPE}&limit=100")),
                    _ => http
                        .post(format!("{base}/v1/create_task"))
                        .header("Content-Type", "application/json")
                        .body(create_body(c, i)),
                };
                let reply = match request.send().await {
                    Ok(resp) => {
                        resp.bytes().await.ok().and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    }
                    Err(_) => None,
                };
                match reply {
                    Some(r) if r["code"] == 0 => {
                        let n = r["task_list"].as_array().map_or(1, Vec::len) as u64;
                        if matches!(scenario, Scenario::HoldTasks) && n == 0 {
                            drained.store(true, Ordering::Relaxed);
                        } else {
                            calls.fetch_add(1, Ordering::Relaxed);
                            tasks.fetch_add(n, Ordering::Relaxed);
                        }
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    while clients.join_next().await.is_some() {}
    let secs = started.elapsed().as_secs_f64();
    node.shutdown().await;
    let (calls, tasks) = (calls.load(Ordering::Relaxed), tasks.load(Ordering::Relaxed));
    Ok(Figures {
        calls,
        qps: calls as f64 / secs,
        tasks_per_sec: tasks as f64 / secs,
        errors: errors.load(Ordering::Relaxed),
    })
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
