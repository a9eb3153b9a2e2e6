//! `xtimer bench --scenario registered`: what registered timers that are
//! not due cost a node.
//!
//! Each run starts a node (the embedded default, or `--database-url` /
//! `--redis-url`), registers `--timers` daily timers that fire more than an
//! hour from now through `POST createTimers` (1,000 per call, `--clients`
//! calls at a time), and reports:
//! - the create rate through `createTimers`, timers/s: overall, and over
//!   the first and the last tenth (how the rate holds as the table grows);
//! - a migrator step's time (median of three), with those timers registered;
//! - one `/metrics` scrape, which counts the timers by status;
//! - idle CPU: the process's CPU over `--idle-seconds` with nothing due, as
//!   a percentage of one core;
//! - the database's size;
//! - the create rate through `createTimer`, one timer a call from 64
//!   keep-alive clients for 5 s, with those timers registered, and this
//!   process's CPU (node and clients) per call;
//! - the same calls for 5 s with a `runAt` an hour past, each refused by
//!   validation before the store: what the HTTP stack alone allows on this
//!   host, and its CPU per call;
//! - then `--due` per-second timers are added and fire for `--seconds`:
//!   their lateness, duplicates and misses, and the peak RSS.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::args::{drop_fresh_database, fresh_config, BenchArgs};
use super::measure::{each_run, median, peak_rss_mb, percentile, Received};
use xtimer::bench_receiver::BenchReceiver;
use xtimer::node::Node;

/// Timers per `createTimers` call.
const BATCH: usize = 1_000;
/// Apps the registered timers are spread over: at ten million, 10,000
/// each, within the default `limits.fires_per_minute_per_app` (a daily cron
/// counts its peak, one fire a minute, against it) and `timers_per_app`.
const APPS: u64 = 1_000;
/// Clients calling `createTimer` at once, and for how long.
const SINGLE_CLIENTS: usize = 64;
const SINGLE_SECONDS: u64 = 5;

/// Figures of one run.
#[derive(Debug, Clone, Default)]
struct Figures {
    creates_per_sec: f64,
    /// `createTimers` rate over the first and the last tenth of the timers.
    first_tenth_per_sec: f64,
    last_tenth_per_sec: f64,
    single_per_sec: f64,
    /// This process's CPU per `createTimer` call, µs.
    single_us: f64,
    /// `createTimer` calls refused before the store, per second.
    refused_per_sec: f64,
    /// This process's CPU per refused call, µs.
    refused_us: f64,
    step_ms: f64,
    /// One `/metrics` scrape that counts the timers afresh, ms.
    scrape_ms: f64,
    idle_cpu_pct: f64,
    db_mb: f64,
    p50_ms: f64,
    p99_ms: f64,
    duplicates: u64,
    misses: u64,
    rss_mb: f64,
}

/// Runs the scenario `args.runs` times and prints each run and the medians.
pub async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    println!(
        "scenario Registered: {} daily timers not due, then {} per-second timers for {} s",
        args.timers, args.due, args.seconds
    );
    println!(
        "{:>4} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>5} {:>6} {:>8}",
        "run",
        "creates/s",
        "1st 10%/s",
        "last 10%/s",
        "single/s",
        "single us",
        "refused/s",
        "refused us",
        "step ms",
        "scrape ms",
        "idle cpu",
        "db MB",
        "p50 ms",
        "p99 ms",
        "dups",
        "misses",
        "rss MB"
    );
    each_run(
        args.runs,
        || run_once(args),
        print_row,
        |med| Figures {
            creates_per_sec: med(|f| f.creates_per_sec),
            first_tenth_per_sec: med(|f| f.first_tenth_per_sec),
            last_tenth_per_sec: med(|f| f.last_tenth_per_sec),
            single_per_sec: med(|f| f.single_per_sec),
            single_us: med(|f| f.single_us),
            refused_per_sec: med(|f| f.refused_per_sec),
            refused_us: med(|f| f.refused_us),
            step_ms: med(|f| f.step_ms),
            scrape_ms: med(|f| f.scrape_ms),
            idle_cpu_pct: med(|f| f.idle_cpu_pct),
            db_mb: med(|f| f.db_mb),
            p50_ms: med(|f| f.p50_ms),
            p99_ms: med(|f| f.p99_ms),
            duplicates: med(|f| f.duplicates as f64) as u64,
            misses: med(|f| f.misses as f64) as u64,
            rss_mb: med(|f| f.rss_mb),
        },
    )
    .await?;
    Ok(())
}

fn print_row(label: &str, f: &Figures) {
    println!(
        "{label:>4} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>9.1} {:>10.0} {:>10.1} {:>8.1} {:>9.1} {:>8.2}% {:>8.1} {:>8.1} {:>8.1} {:>5} {:>6} {:>8.1}",
        f.creates_per_sec,
        f.first_tenth_per_sec,
        f.last_tenth_per_sec,
        f.single_per_sec,
        f.single_us,
        f.refused_per_sec,
        f.refused_us,
        f.step_ms,
        f.scrape_ms,
        f.idle_cpu_pct,
        f.db_mb,
        f.p50_ms,
        f.p99_ms,
        f.duplicates,
        f.misses,
        f.rss_mb
    );
}

async fn run_once(args: &BenchArgs) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let config = fresh_config(args, dir.path()).await?;
    let db_url = config.database.url.clone();
    let db_path = dir.path().join("bench.db");
    let node = Node::start(config).await?;
    let base = format!("http://{}/api/xtimer/createTimers", node.addr);
    let client = reqwest::Client::new();
    let receiver = BenchReceiver::start(args.receiver, args.receiver_threads).await?;
    let url = receiver.url("/bench");

    // Daily timers at an hour more than an hour away, spread over its minutes.
    let hour = (chrono::Utc::now().timestamp() / 3_600 + 12) % 24;
    let daily_url = url.clone();
    let daily = move |i: u64| {
        let url = &daily_url;
        serde_json::json!({
            "app": format!("reg{}", (i / BATCH as u64) % APPS), "name": format!("d{i}"), "status": 2,
            "cron": format!("{} {} {} * * *", i % 60, (i / 60) % 60, hour),
            "notifyHTTPParam": {"url": url},
        })
    };
    let creates = create_all(&client, &base, args.timers, args.clients, Arc::new(daily)).await?;

    let mut steps = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        node.migrator.catch_up().await?;
        steps.push(t.elapsed().as_secs_f64() * 1_000.0);
    }
    let step_ms = median(steps);

    let cpu_before = cpu_seconds();
    let idle = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let idle_cpu_pct = (cpu_seconds() - cpu_before) / idle.elapsed().as_secs_f64() * 100.0;
    let db_mb = db_bytes(&db_path, &db_url).await as f64 / 1e6;
    // The node's first scrape: it counts the timers.
    let scraped = Instant::now();
    client.get(format!("http://{}/metrics", node.addr)).send().await?.error_for_status()?.text().await?;
    let scrape_ms = scraped.elapsed().as_secs_f64() * 1_000.0;
    // After the idle time, so that the bulk import's WAL is checkpointed.
    let single = format!("http://{}/api/xtimer/createTimer", node.addr);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let stored = create_singly(&client, &single, &url, now_ms + 86_400_000).await?;
    let refused = create_singly(&client, &single, &url, now_ms - 3_600_000).await?;

    // The due timers: per-second crons, measured from a whole second after set-up.
    let due_url = url.clone();
    let due = move |i: u64| {
        let url = &due_url;
        serde_json::json!({
            "app": "due", "name": format!("s{i}"), "status": 2, "cron": "* * * * * *",
            "notifyHTTPParam": {"url": url},
        })
    };
    create_all(&client, &base, args.due, args.clients, Arc::new(due)).await?;
    let start_ms = (chrono::Utc::now().timestamp_millis() / 1_000 + args.lead as i64) * 1_000;
    let end_ms = start_ms + args.seconds as i64 * 1_000;
    let expected = (args.due * args.seconds) as usize;
    let wait = Duration::from_millis((end_ms - chrono::Utc::now().timestamp_millis()).max(0) as u64 + 30_000);
    receiver.wait_for(start_ms, end_ms, expected as u64, wait, |_| {}).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let Received { duplicates, fires: got, late, .. } = Received::between(&receiver, start_ms, end_ms).await?;
    let figures = Figures {
        creates_per_sec: creates.overall,
        first_tenth_per_sec: creates.first_tenth,
        last_tenth_per_sec: creates.last_tenth,
        single_per_sec: stored.per_sec,
        single_us: stored.cpu_us,
        refused_per_sec: refused.per_sec,
        refused_us: refused.cpu_us,
        step_ms,
        scrape_ms,
        idle_cpu_pct,
        db_mb,
        p50_ms: percentile(&late, 0.50),
        p99_ms: percentile(&late, 0.99),
        duplicates,
        misses: expected.saturating_sub(got.len()) as u64,
        rss_mb: peak_rss_mb(),
    };
    node.shutdown().await;
    drop_fresh_database(args, &db_url).await;
    Ok(figures)
}

/// Create rates of one [`create_all`], timers/s: overall, and over the
/// first and the last tenth of the timers created.
#[derive(Debug, Clone, Copy, Default)]
struct CreateRates {
    overall: f64,
    first_tenth: f64,
    last_tenth: f64,
}

impl CreateRates {
    /// The rates from when each call ended and the timers it created.
    fn from_calls(started: Instant, mut calls: Vec<(Instant, u64)>) -> Self {
        calls.sort_by_key(|(at, _)| *at);
        let total: u64 = calls.iter().map(|(_, n)| n).sum();
        let Some(&(end, _)) = calls.last() else { return Self::default() };
        // When the first `n` timers were made, and how many were by then.
        let made_by = |n: u64| {
            let mut made = 0;
            for &(at, count) in &calls {
                made += count;
                if made >= n {
                    return (at, made);
                }
            }
            (end, total)
        };
        let secs = |from: Instant, to: Instant| (to - from).as_secs_f64().max(1e-9);
        let (tenth, first) = made_by(total.div_ceil(10));
        let (nine_tenths, before_last) = made_by(total * 9 / 10);
        Self {
            overall: total as f64 / secs(started, end),
            first_tenth: first as f64 / secs(started, tenth),
            last_tenth: (total - before_last) as f64 / secs(nine_tenths, end),
        }
    }
}

/// Creates `count` timers built by `timer(i)` through `createTimers`,
/// [`BATCH`] per call, `clients` calls at a time; returns the rates.
async fn create_all(
    client: &reqwest::Client,
    url: &str,
    count: u64,
    clients: usize,
    timer: Arc<dyn Fn(u64) -> serde_json::Value + Send + Sync>,
) -> anyhow::Result<CreateRates> {
    // Each client builds its next batch when it sends it: the bodies of a
    // million timers held at once would be counted in the node's memory.
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients.max(1) {
        let (client, url, next, timer) = (client.clone(), url.to_string(), next.clone(), timer.clone());
        tasks.spawn(async move {
            let mut calls = Vec::new();
            loop {
                let from = next.fetch_add(BATCH as u64, std::sync::atomic::Ordering::Relaxed);
                if from >= count {
                    return anyhow::Ok(calls);
                }
                let timers: Vec<_> = (from..(from + BATCH as u64).min(count)).map(&*timer).collect();
                let body = serde_json::to_vec(&serde_json::json!({ "timers": timers }))?;
                let reply = client.post(&url).header("content-type", "application/json").body(body).send().await?;
                let status = reply.status();
                let text = reply.text().await?;
                anyhow::ensure!(status.is_success(), "createTimers answered {status}: {text}");
                calls.push((Instant::now(), (count - from).min(BATCH as u64)));
            }
        });
    }
    let mut calls = Vec::new();
    while let Some(done) = tasks.join_next().await {
        calls.extend(done??);
    }
    Ok(CreateRates::from_calls(started, calls))
}

/// What [`create_singly`] measured.
struct SingleCalls {
    /// Answered calls per second.
    per_sec: f64,
    /// This process's CPU per answered call, µs.
    cpu_us: f64,
}

/// `createTimer` calls from [`SINGLE_CLIENTS`] keep-alive clients for
/// [`SINGLE_SECONDS`], each an enabled one-shot at `run_at_ms`: a day
/// ahead each is stored (and must succeed); an hour past each is refused
/// by validation (and must be a 400).
async fn create_singly(
    client: &reqwest::Client,
    url: &str,
    callback: &str,
    run_at_ms: i64,
) -> anyhow::Result<SingleCalls> {
    let refused = run_at_ms < chrono::Utc::now().timestamp_millis();
    let run_at = xtimer_core::clock::rfc3339(run_at_ms);
    let until = Instant::now() + Duration::from_secs(SINGLE_SECONDS);
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..SINGLE_CLIENTS {
        let (client, url, callback, run_at) = (client.clone(), url.to_string(), callback.to_string(), run_at.clone());
        tasks.spawn(async move {
            let mut made = 0u64;
            while Instant::now() < until {
                let body = serde_json::json!({
                    "app": format!("single{}", c % 10), "name": format!("o{c}-{made}"), "status": 2,
                    "runAt": run_at, "notifyHTTPParam": {"url": callback},
                });
                let body = serde_json::to_vec(&body)?;
                let reply = client.post(&url).header("content-type", "application/json").body(body).send().await?;
                let status = reply.status();
                let text = reply.text().await?;
                if refused {
                    anyhow::ensure!(
                        status == reqwest::StatusCode::BAD_REQUEST,
                        "a past runAt answered {status}: {text}"
                    );
                } else {
                    anyhow::ensure!(status.is_success(), "createTimer answered {status}: {text}");
                }
                made += 1;
            }
            anyhow::Ok(made)
        });
    }
    let mut made = 0;
    while let Some(done) = tasks.join_next().await {
        made += done??;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let made = made.max(1) as f64;
    Ok(SingleCalls { per_sec: made / secs, cpu_us: (cpu_seconds() - cpu_before) * 1e6 / made })
}

/// CPU time of this process so far (user + system), seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after ')'.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// Bytes of the database: the SQLite file and its WAL, or what the server
/// reports when `url` names PostgreSQL or MySQL.
async fn db_bytes(path: &std::path::Path, url: &str) -> u64 {
    match xtimer_store::db::server_database_bytes(url).await {
        Ok(Some(bytes)) => return bytes,
        Ok(None) => {}
        Err(_) => return 0,
    }
    let size = |p: std::path::PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    size(path.to_path_buf()) + size(path.with_extension("db-wal"))
}

/// `--scenario history`: `--timers` per-second timers fire for `--seconds`
/// while retention runs (set `XTIMER_RETENTION__KEEP_FIRES_MS` to see it
/// act within the run); prints the database's size every minute.
pub async fn history(args: &BenchArgs) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = fresh_config(args, dir.path()).await?;
    let db_url = config.database.url.clone();
    println!(
        "scenario History: {} per-second timers for {} s, fire records kept {} ms",
        args.timers, args.seconds, config.retention.keep_fires_ms
    );
    println!("{:>6} {:>10} {:>8}", "minute", "fires", "db MB");
    let db_path = dir.path().join("bench.db");
    let node = Node::start(config).await?;
    let base = format!("http://{}/api/xtimer/createTimers", node.addr);
    let receiver = BenchReceiver::start(args.receiver, args.receiver_threads).await?;
    let url = receiver.url("/bench");
    let timer = move |i: u64| {
        serde_json::json!({
            "app": "history", "name": format!("s{i}"), "status": 2, "cron": "* * * * * *",
            "notifyHTTPParam": {"url": url},
        })
    };
    create_all(&reqwest::Client::new(), &base, args.timers, args.clients, Arc::new(timer)).await?;
    let started = Instant::now();
    for minute in 1..=args.seconds.div_ceil(60) {
        let due = started + Duration::from_secs(minute * 60);
        tokio::time::sleep_until(due.into()).await;
        let fires = receiver.count(i64::MIN, i64::MAX).await?;
        println!("{minute:>6} {fires:>10} {:>8.1}", db_bytes(&db_path, &db_url).await as f64 / 1e6);
    }
    node.shutdown().await;
    drop_fresh_database(args, &db_url).await;
    Ok(())
}
