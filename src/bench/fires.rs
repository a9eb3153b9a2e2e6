//! `xtimer bench`: fires per second and lateness against a local receiver.
//!
//! Each run starts a fresh node on the embedded default (a SQLite file in a
//! temporary folder), starts a receiver on 127.0.0.1 (by default a process
//! of its own, `xtimer bench-receiver`; `--receiver inproc` puts it in this
//! process), registers timers through the repository, lets the migrator
//! expand them the way it always does, and waits for every fire. It
//! reports what the receiver saw: fires/s, lateness (arrival minus
//! scheduled time) percentiles, duplicates, misses; and what the node
//! paid: its CPU per fire (this process's user + system time, from the end
//! of set-up until every fire arrived and its result was written, divided
//! by the callbacks that arrived meanwhile), the receiver's CPU per fire
//! when it runs apart, and this process's peak RSS. With `--runs N` it
//! prints each run and the median of each figure.
//!
//! `--scenario herd` is the thundering herd of aligned crons: `--timers`
//! timers of one per-minute cron, each spreading its fires over
//! `--spread-ms` (0: all in the same second), run for one minute. It
//! reports the most fires that arrived in any one second, lateness against
//! the time each fire was sent, what planning the timers cost per fire,
//! and fails unless every fire arrived once, inside its window.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use xtimer_core::fire::FireKey;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, Timing};

use xtimer::bench_receiver::{process_cpu, BenchReceiver, ReceiverMode};
use xtimer::node::Node;

use super::args::{drop_fresh_database, fresh_config, BenchArgs, Scenario};
use super::measure::{each_run, peak_rss_mb, percentile, Received};

/// A benchmark fire is sent once: a failure is a figure, not a retry.
const NO_RETRY: RetryPolicy = RetryPolicy { max_attempts: 1, backoff_ms: 0, no_retry_statuses: None };

/// Fires read back for the `sent p99` column (the newest of the window):
/// enough for a p99, few enough to leave the memory figures alone.
const SENT_SAMPLE: u32 = 20_000;

/// Figures of one run.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub expected: u64,
    pub received: u64,
    pub fires_per_sec: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub duplicates: u64,
    pub misses: u64,
    /// p99 of when callbacks left the node (as recorded with each fire:
    /// sent minus scheduled), ms, over the window's last
    /// [`SENT_SAMPLE`] fires; beside the arrival percentiles it tells the
    /// node's delay from the receiver's.
    pub sent_p99_ms: f64,
    /// This process's CPU (the node's, and the receiver's with `inproc`) per fire, µs.
    pub cpu_us_per_fire: f64,
    /// The receiver process's CPU per fire, µs (0 with `inproc`).
    pub receiver_us_per_fire: f64,
    pub peak_rss_mb: f64,
}

/// Runs a fire scenario (steady, burst, cron, http) and prints its figures.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    println!("scenario {:?}: {}", args.scenario, describe(&args));
    println!(
        "{:>4} {:>9} {:>9} {:>10} {:>8} {:>8} {:>8} {:>9} {:>8} {:>5} {:>6} {:>8} {:>8} {:>8}",
        "run",
        "expected",
        "received",
        "fires/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "sent p99",
        "dups",
        "misses",
        "cpu us",
        "rx us",
        "rss MB"
    );
    let args = &args;
    let once = || async move {
        match args.scenario {
            Scenario::Http => http_ceiling(args).await,
            Scenario::HttpSteady => http_steady(args).await,
            _ => run_once(args).await,
        }
    };
    each_run(args.runs, once, print_row, |med| Figures {
        expected: med(|f| f.expected as f64) as u64,
        received: med(|f| f.received as f64) as u64,
        fires_per_sec: med(|f| f.fires_per_sec),
        p50_ms: med(|f| f.p50_ms),
        p90_ms: med(|f| f.p90_ms),
        p99_ms: med(|f| f.p99_ms),
        max_ms: med(|f| f.max_ms),
        sent_p99_ms: med(|f| f.sent_p99_ms),
        duplicates: med(|f| f.duplicates as f64) as u64,
        misses: med(|f| f.misses as f64) as u64,
        cpu_us_per_fire: med(|f| f.cpu_us_per_fire),
        receiver_us_per_fire: med(|f| f.receiver_us_per_fire),
        peak_rss_mb: med(|f| f.peak_rss_mb),
    })
    .await?;
    Ok(())
}

fn describe(a: &BenchArgs) -> String {
    let receiver = match a.receiver {
        ReceiverMode::Process => "; receiver in its own process",
        ReceiverMode::Inproc => "; receiver in this process",
    };
    let load = match a.scenario {
        Scenario::Steady => format!("{} fires/s for {} s ({} fires)", a.rate, a.seconds, a.rate * a.seconds),
        Scenario::Burst => format!("{} fires due in one second", a.count),
        Scenario::Cron if a.hung > 0 => {
            format!("{} per-second cron timers for {} s beside {} hung ones", a.timers, a.seconds, a.hung)
        }
        Scenario::Cron => format!("{} per-second cron timers for {} s", a.timers, a.seconds),
        Scenario::Http => format!("{} callbacks, no timers, 256 in flight", a.count),
        Scenario::HttpSteady => {
            format!("{} callbacks/s for {} s, no timers, each on its millisecond", a.rate, a.seconds)
        }
        Scenario::Herd => {
            format!("{} timers of `{HERD_CRON}` spread over {} ms, for one minute", a.timers, a.spread_ms)
        }
        Scenario::CreateTask | Scenario::HoldTasks | Scenario::Registered | Scenario::History => String::new(),
    };
    let flows = match a.flows {
        0 => String::new(),
        n => format!("; dealt over {n} flows limited to {}/s each", a.flow_rate),
    };
    let traces = if a.otlp { "; traces exported over OTLP/HTTP to a local collector" } else { "" };
    load + &flows + traces + receiver
}

fn print_row(label: &str, f: &Figures) {
    println!(
        "{label:>4} {:>9} {:>9} {:>10.0} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>8.0} {:>5} {:>6} {:>8.1} {:>8.1} {:>8.1}",
        f.expected,
        f.received,
        f.fires_per_sec,
        f.p50_ms,
        f.p90_ms,
        f.p99_ms,
        f.max_ms,
        f.sent_p99_ms,
        f.duplicates,
        f.misses,
        f.cpu_us_per_fire,
        f.receiver_us_per_fire,
        f.peak_rss_mb
    );
}

async fn run_once(args: &BenchArgs) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let mut config = fresh_config(args, dir.path()).await?;
    anyhow::ensure!(
        args.nodes == 1 || (args.database_url.is_some() && args.redis_url.is_some()),
        "--nodes > 1 needs --database-url (PostgreSQL or MySQL) and --redis-url"
    );
    // The window must fit in the migrator's horizon (two steps).
    config.migrator.step_ms = config.migrator.step_ms.max((args.lead + args.seconds + 10) * 1000);
    // A receiver process answers the exporter's posts as a collector would.
    let _collector = match args.otlp {
        true => {
            let collector = BenchReceiver::start(ReceiverMode::Process, 1).await?;
            config.telemetry.otlp_endpoint = collector.url("");
            Some(collector)
        }
        false => None,
    };
    let node = Node::start(config.clone()).await?;
    let mut others = Vec::new();
    for _ in 1..args.nodes {
        others.push(Node::start(config.clone()).await?);
    }
    let receiver = BenchReceiver::start(args.receiver, args.receiver_threads).await?;
    let notify = Notify::Http(HttpNotify { body: Some("{}".into()), ..HttpNotify::post(receiver.url("/bench")) });

    for flow in 0..args.flows {
        let limit = xtimer_store::FlowLimit {
            app: "bench".into(),
            key: format!("f{flow}"),
            rate_per_sec: Some(args.flow_rate),
            parallelism: None,
            paused: false,
            modify_time: 0,
        };
        node.stores.flows.set_flow_limit(&limit).await?;
    }

    // Set-up: register timers, then let the migrator expand them.
    let setup = Instant::now();
    let setup_cpu = process_cpu("self").unwrap_or_default();
    let now = chrono::Utc::now().timestamp_millis();
    let plan = plan(args, now);
    let start_ms = plan.start_ms;
    let mut expected: HashSet<(i64, i64)> = HashSet::new();
    let new_timers: Vec<NewTimer> = plan
        .schedules
        .iter()
        .enumerate()
        .map(|(n, schedule)| {
            let notify = match (&notify, args.flows) {
                (Notify::Http(http), flows) if flows > 0 => {
                    Notify::Http(HttpNotify { flow_key: Some(format!("f{}", n as u64 % flows)), ..http.clone() })
                }
                _ => notify.clone(),
            };
            NewTimer {
                retry: NO_RETRY,
                misfire: MisfirePolicy::FireAll,
                ..NewTimer::enabled("bench", format!("t{n}"), schedule.clone(), notify)
            }
        })
        .collect();
    let ids = node.stores.timers.create_timers(&new_timers, now).await?;
    let hung = match args.hung {
        0 => None,
        n => Some(register_hung(&node, n, now).await?),
    };
    for (id, schedule) in ids.into_iter().zip(&plan.schedules) {
        match schedule {
            Schedule::Once { run_at_ms } => {
                expected.insert((id, *run_at_ms));
            }
            Schedule::Cron { .. } | Schedule::Every { .. } => {
                for s in 0..args.seconds as i64 {
                    expected.insert((id, start_ms + s * 1000));
                }
            }
        }
    }
    node.migrator.catch_up().await?;
    let ready = chrono::Utc::now().timestamp_millis();
    // Storing the timers and planning their fires (fire rows, index entries).
    let plan_cpu = process_cpu("self").unwrap_or_default().saturating_sub(setup_cpu);
    eprintln!(
        "set-up took {:.1} s ({:.1} us of CPU per timer stored and planned); first fire in {} ms",
        setup.elapsed().as_secs_f64(),
        plan_cpu.as_secs_f64() * 1e6 / plan.schedules.len().max(1) as f64,
        start_ms - ready
    );
    if ready > start_ms {
        eprintln!("warning: set-up overran the lead time; raise --lead");
    }

    // Wait for every fire, or give up 30 s after the window.
    let cpu = CpuMeter::start(&receiver);
    let end_ms = plan.end_ms;
    let total = expected.len();
    let wait = Duration::from_millis((end_ms - chrono::Utc::now().timestamp_millis()).max(0) as u64 + 30_000);
    let progress = xtimer::progress::bar("fires", total as u64);
    receiver.wait_for(start_ms, end_ms, total as u64, wait, |got| progress.set_position(got)).await?;
    progress.finish_and_clear();
    // Results are written up to `executor.record_linger_ms` after the callback.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (cpu_us_per_fire, receiver_us_per_fire) = cpu.per_fire(&receiver).await?;

    let Received { hits, duplicates, fires: got, late } = Received::between(&receiver, start_ms, end_ms).await?;
    let misses = expected.difference(&got).count() as u64;
    // Before the fires are read back below, which is the benchmark's own work.
    let peak_rss_mb = peak_rss_mb();
    let mut sent: Vec<f64> = node
        .stores
        .fires
        .ended_since(start_ms, SENT_SAMPLE)
        .await?
        .iter()
        .filter(|f| f.run_ms < end_ms)
        .map(|f| f.cost_time as f64)
        .collect();
    sent.sort_by(|a, b| a.total_cmp(b));
    let last_arrival_ms = hits.iter().map(|h| h.arrival_us / 1000).max().unwrap_or(start_ms);
    let span_ms = (last_arrival_ms.max(end_ms) - start_ms).max(1) as f64;
    let figures = Figures {
        expected: total as u64,
        received: hits.len() as u64,
        fires_per_sec: hits.len() as f64 / (span_ms / 1000.0),
        p50_ms: percentile(&late, 0.50),
        p90_ms: percentile(&late, 0.90),
        p99_ms: percentile(&late, 0.99),
        max_ms: late.last().copied().unwrap_or_default(),
        sent_p99_ms: percentile(&sent, 0.99),
        duplicates,
        misses,
        cpu_us_per_fire,
        receiver_us_per_fire,
        peak_rss_mb,
    };
    if let Some(hung) = hung {
        hung.abort();
    }
    node.shutdown().await;
    for other in others {
        other.shutdown().await;
    }
    drop_fresh_database(args, &config.database.url).await;
    Ok(figures)
}

/// Registers `n` per-second cron timers calling a listener that accepts
/// connections and never answers; the listener lives as long as the handle.
async fn register_hung(node: &Node, n: u64, now: i64) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hang", listener.local_addr()?);
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let timers: Vec<NewTimer> = (0..n)
        .map(|i| {
            let every_second = Schedule::Cron { expr: "* * * * * *".into(), timezone: "UTC".into() };
            NewTimer::enabled("hung", format!("h{i}"), every_second, Notify::Http(HttpNotify::post(url.clone())))
        })
        .collect();
    node.stores.timers.create_timers(&timers, now).await?;
    Ok(task)
}

/// CPU time of this process and of the receiver's, from a start to now.
struct CpuMeter {
    this: Duration,
    receiver: Option<Duration>,
}

impl CpuMeter {
    fn start(receiver: &BenchReceiver) -> Self {
        Self { this: process_cpu("self").unwrap_or_default(), receiver: receiver.cpu() }
    }

    /// CPU µs per callback received since the start (every callback, in
    /// the measured window or not): this process's and the receiver's.
    async fn per_fire(&self, receiver: &BenchReceiver) -> anyhow::Result<(f64, f64)> {
        let this = process_cpu("self").unwrap_or_default().saturating_sub(self.this);
        let theirs = match (self.receiver, receiver.cpu()) {
            (Some(before), Some(now)) => now.saturating_sub(before),
            _ => Duration::ZERO,
        };
        let fires = receiver.count(i64::MIN, i64::MAX).await?.max(1) as f64;
        Ok((this.as_secs_f64() * 1e6 / fires, theirs.as_secs_f64() * 1e6 / fires))
    }
}

async fn http_ceiling(args: &BenchArgs) -> anyhow::Result<Figures> {
    let receiver = BenchReceiver::start(args.receiver, args.receiver_threads).await?;
    let client = xtimer_executor::callback::client(10_000, 256)?;
    let notify = HttpNotify { body: Some("{}".into()), ..HttpNotify::post(receiver.url("/ceiling")) };
    let cpu = CpuMeter::start(&receiver);
    let started = Instant::now();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..256 {
        let (client, notify, next, count) = (client.clone(), notify.clone(), next.clone(), args.count);
        tasks.spawn(async move {
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= count {
                    break;
                }
                let key = FireKey { timer_id: n as i64, run_ms: chrono::Utc::now().timestamp_millis() };
                xtimer_executor::callback::call(&client, &notify, key, 512).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    callback_figures(&receiver, &cpu, args.count, started.elapsed().as_secs_f64()).await
}

/// The callbacks' own cost at a rate: `--rate` a second for `--seconds`,
/// spread as [`Scenario::Steady`] spreads its fires, and sent as the
/// executor sends them: each millisecond's group is handed over
/// [`HANDOVER_AHEAD_MS`] early to a task that waits for it, sends all but
/// the last in tasks of their own and the last itself.
async fn http_steady(args: &BenchArgs) -> anyhow::Result<Figures> {
    let receiver = BenchReceiver::start(args.receiver, args.receiver_threads).await?;
    let client = xtimer_executor::callback::client(10_000, 256)?;
    let notify = HttpNotify { body: Some("{}".into()), ..HttpNotify::post(receiver.url("/paced")) };
    let total = args.rate * args.seconds;
    // Two seconds ahead, on a whole second, as a fire scenario starts.
    let start_ms = (chrono::Utc::now().timestamp_millis() / 1000 + 2) * 1000;
    let run_ms = |i: u64| start_ms + (i * 1000 / args.rate.max(1)) as i64;
    let tasks = tokio_util::task::TaskTracker::new();
    let now_ms = || chrono::Utc::now().timestamp_millis();
    tokio::time::sleep(Duration::from_millis((start_ms - HANDOVER_AHEAD_MS - now_ms()).max(0) as u64)).await;
    let cpu = CpuMeter::start(&receiver);
    let mut i = 0;
    while i < total {
        let due_ms = run_ms(i);
        let early = due_ms - HANDOVER_AHEAD_MS - now_ms();
        if early > 0 {
            tokio::time::sleep(Duration::from_millis(early as u64)).await;
        }
        let mut group = Vec::new();
        while i < total && run_ms(i) == due_ms {
            group.push(FireKey { timer_id: i as i64, run_ms: due_ms });
            i += 1;
        }
        let (client, notify, spawner) = (client.clone(), notify.clone(), tasks.clone());
        tasks.spawn(async move {
            let wait = due_ms - chrono::Utc::now().timestamp_millis();
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
            }
            let last = group.pop();
            for key in group {
                let (client, notify) = (client.clone(), notify.clone());
                spawner.spawn(async move { xtimer_executor::callback::call(&client, &notify, key, 512).await });
            }
            if let Some(key) = last {
                xtimer_executor::callback::call(&client, &notify, key, 512).await;
            }
        });
    }
    tasks.close();
    tasks.wait().await;
    let secs = (now_ms() - start_ms).max(1) as f64 / 1000.0;
    callback_figures(&receiver, &cpu, total, secs).await
}

/// How long before its millisecond [`http_steady`] hands a group over (the
/// executor claims fires 450-500 ms ahead at the default).
const HANDOVER_AHEAD_MS: i64 = 500;

/// Figures of the callbacks [`http_ceiling`] and [`http_steady`] sent.
async fn callback_figures(
    receiver: &BenchReceiver,
    cpu: &CpuMeter,
    expected: u64,
    secs: f64,
) -> anyhow::Result<Figures> {
    let (cpu_us_per_fire, receiver_us_per_fire) = cpu.per_fire(receiver).await?;
    let arrivals = receiver.arrivals().await?;
    let received = arrivals.len() as u64;
    let mut late: Vec<f64> = arrivals.iter().map(|h| h.lateness_ms()).collect();
    late.sort_by(|a, b| a.total_cmp(b));
    Ok(Figures {
        expected,
        received,
        fires_per_sec: received as f64 / secs,
        p50_ms: percentile(&late, 0.5),
        p90_ms: percentile(&late, 0.9),
        p99_ms: percentile(&late, 0.99),
        max_ms: late.last().copied().unwrap_or_default(),
        sent_p99_ms: 0.0,
        duplicates: 0,
        misses: expected.saturating_sub(received),
        cpu_us_per_fire,
        receiver_us_per_fire,
        peak_rss_mb: peak_rss_mb(),
    })
}

/// The herd's cron: every timer fires at second 0 of every minute.
const HERD_CRON: &str = "0 * * * * ?";

/// Figures of one herd run.
#[derive(Debug, Clone, Default)]
pub struct HerdFigures {
    pub expected: u64,
    pub received: u64,
    /// Expected fires that never arrived.
    pub lost: u64,
    /// Arrivals beyond the first of a fire.
    pub duplicates: u64,
    /// Arrivals sent outside their window `[scheduled, scheduled +
    /// spread)` (other than at the scheduled ms without a spread), or
    /// of a fire not expected.
    pub outside: u64,
    /// The most fires that arrived within one second.
    pub peak_per_sec: u64,
    /// Arrival minus send time (`X-Xtimer-Run-Time`), ms.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Storing the timers, ms (wall).
    pub create_ms: f64,
    /// Expanding them into fires (spread fires placed) and indexing, ms (wall).
    pub expand_ms: f64,
    /// Create + expand, wall µs per fire.
    pub plan_us_per_fire: f64,
    /// This process's CPU over create + expand, µs per fire.
    pub cpu_us_per_fire: f64,
}

pub async fn herd(args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.nodes == 1 && args.hung == 0, "--scenario herd runs one node and no hung timers");
    println!("scenario Herd: {}", describe(args));
    println!(
        "  peak/s: most fires arriving in one second; p50/p99/max: arrival minus send time \
         (X-Xtimer-Run-Time); create, expand: storing the timers and planning their fires (wall); \
         plan us, cpu us: the two together per fire, wall and this process's CPU; outside: sent \
         outside [scheduled, scheduled + spread)"
    );
    println!(
        "{:>4} {:>9} {:>9} {:>5} {:>5} {:>7} {:>7} {:>8} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8}",
        "run",
        "expected",
        "received",
        "lost",
        "dups",
        "outside",
        "peak/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "create ms",
        "expand ms",
        "plan us",
        "cpu us"
    );
    let all = each_run(
        args.runs,
        || herd_once(args),
        print_herd_row,
        |med| HerdFigures {
            expected: med(|f| f.expected as f64) as u64,
            received: med(|f| f.received as f64) as u64,
            lost: med(|f| f.lost as f64) as u64,
            duplicates: med(|f| f.duplicates as f64) as u64,
            outside: med(|f| f.outside as f64) as u64,
            peak_per_sec: med(|f| f.peak_per_sec as f64) as u64,
            p50_ms: med(|f| f.p50_ms),
            p99_ms: med(|f| f.p99_ms),
            max_ms: med(|f| f.max_ms),
            create_ms: med(|f| f.create_ms),
            expand_ms: med(|f| f.expand_ms),
            plan_us_per_fire: med(|f| f.plan_us_per_fire),
            cpu_us_per_fire: med(|f| f.cpu_us_per_fire),
        },
    )
    .await?;
    let (lost, dups, outside) =
        all.iter().fold((0, 0, 0), |(l, d, o), f| (l + f.lost, d + f.duplicates, o + f.outside));
    anyhow::ensure!(
        lost == 0 && dups == 0 && outside == 0,
        "not every fire arrived once inside its window: {lost} lost, {dups} duplicated, {outside} outside"
    );
    Ok(())
}

fn print_herd_row(label: &str, f: &HerdFigures) {
    println!(
        "{label:>4} {:>9} {:>9} {:>5} {:>5} {:>7} {:>7} {:>8.1} {:>8.1} {:>8.1} {:>10.1} {:>10.1} {:>8.1} {:>8.1}",
        f.expected,
        f.received,
        f.lost,
        f.duplicates,
        f.outside,
        f.peak_per_sec,
        f.p50_ms,
        f.p99_ms,
        f.max_ms,
        f.create_ms,
        f.expand_ms,
        f.plan_us_per_fire,
        f.cpu_us_per_fire
    );
}

/// One herd run: a fresh node, the timers created and expanded before the
/// next whole minute (at least `--lead` s ahead), every fire of that minute
/// awaited and checked.
async fn herd_once(args: &BenchArgs) -> anyhow::Result<HerdFigures> {
    const MINUTE_MS: i64 = 60_000;
    let dir = tempfile::tempdir()?;
    let mut config = fresh_config(args, dir.path()).await?;
    // The migrator's horizon (two steps) must reach the minute from set-up:
    // at most `lead` + 60 s ahead.
    config.migrator.step_ms = config.migrator.step_ms.max((args.lead + 70) * 1000);
    let node_started_ms = chrono::Utc::now().timestamp_millis();
    let db_url = config.database.url.clone();
    let node = Node::start(config).await?;
    let receiver = BenchReceiver::start(args.receiver, args.receiver_threads).await?;
    let now = chrono::Utc::now().timestamp_millis();
    let start_ms = ((now + args.lead as i64 * 1000) / MINUTE_MS + 1) * MINUTE_MS;
    let end_ms = start_ms + MINUTE_MS;
    let notify = Notify::Http(HttpNotify { body: Some("{}".into()), ..HttpNotify::post(receiver.url("/bench")) });
    // Each timer starts and ends with the minute, so that its one fire is
    // all that is planned however far the horizon reaches.
    let timing =
        Timing { spread_ms: args.spread_ms, start_at: Some(start_ms), end_at: Some(end_ms), ..Timing::default() };
    let timers: Vec<NewTimer> = (0..args.timers)
        .map(|n| {
            let herd = Schedule::Cron { expr: HERD_CRON.into(), timezone: "UTC".into() };
            NewTimer {
                timing: timing.clone(),
                retry: NO_RETRY,
                misfire: MisfirePolicy::FireAll,
                ..NewTimer::enabled("bench", format!("h{n}"), herd, notify.clone())
            }
        })
        .collect();

    // Planning: store the timers, then expand them as a migrator step does
    // (spread fires placed), timed and with this process's CPU.
    let cpu_before = process_cpu("self").unwrap_or_default();
    let started = Instant::now();
    let ids = node.stores.timers.create_timers(&timers, now).await?;
    let created = started.elapsed();
    node.migrator.catch_up().await?;
    let planned = started.elapsed();
    let cpu = process_cpu("self").unwrap_or_default().saturating_sub(cpu_before);
    let ready = chrono::Utc::now().timestamp_millis();
    eprintln!("set-up took {:.1} s; the minute starts in {} ms", planned.as_secs_f64(), start_ms - ready);
    if ready > start_ms {
        eprintln!("warning: set-up overran the minute's start; raise --lead");
    }
    let expected: HashSet<(i64, i64)> = ids.iter().map(|id| (*id, start_ms)).collect();
    let fires = expected.len().max(1) as f64;

    let total = expected.len() as u64;
    let wait = Duration::from_millis((end_ms - chrono::Utc::now().timestamp_millis()).max(0) as u64 + 30_000);
    let progress = xtimer::progress::bar("fires", total);
    receiver.wait_for(start_ms, end_ms, total, wait, |got| progress.set_position(got)).await?;
    progress.finish_and_clear();
    let hits = receiver.arrivals().await?;
    node.shutdown().await;
    drop_fresh_database(args, &db_url).await;

    let window = args.spread_ms.max(1) as i64;
    let mut seen: HashMap<&str, u64> = HashMap::new();
    let mut got: HashSet<(i64, i64)> = HashSet::new();
    let mut outside = 0;
    let mut per_second: HashMap<i64, u64> = HashMap::new();
    for h in &hits {
        *seen.entry(h.key.as_str()).or_default() += 1;
        *per_second.entry(h.arrival_us.div_euclid(1_000_000)).or_default() += 1;
        match FireKey::parse_member(&h.key) {
            Some(k) if expected.contains(&(k.timer_id, k.run_ms)) => {
                got.insert((k.timer_id, k.run_ms));
                if h.run_ms < k.run_ms || h.run_ms >= k.run_ms + window {
                    outside += 1;
                }
            }
            _ => outside += 1,
        }
    }
    // Where the lateness comes from: the second whose fires arrived latest.
    let mut worst: HashMap<i64, (u64, f64)> = HashMap::new();
    for h in &hits {
        let second = worst.entry((h.run_ms - start_ms).div_euclid(1000)).or_default();
        *second = (second.0 + 1, second.1.max(h.lateness_ms()));
    }
    if let Some((second, (n, max))) = worst.into_iter().max_by(|a, b| a.1 .1.total_cmp(&b.1 .1)) {
        eprintln!(
            "latest fires: those sent at +{second} s of the minute ({n} fires, up to {max:.1} ms late); \
             the node started {:.1} s before the minute",
            (start_ms - node_started_ms) as f64 / 1000.0
        );
    }
    let mut late: Vec<f64> = hits.iter().map(|h| h.lateness_ms()).collect();
    late.sort_by(|a, b| a.total_cmp(b));
    Ok(HerdFigures {
        expected: total,
        received: hits.len() as u64,
        lost: expected.difference(&got).count() as u64,
        duplicates: seen.values().map(|n| n - 1).sum(),
        outside,
        peak_per_sec: per_second.values().copied().max().unwrap_or_default(),
        p50_ms: percentile(&late, 0.50),
        p99_ms: percentile(&late, 0.99),
        max_ms: late.last().copied().unwrap_or_default(),
        create_ms: created.as_secs_f64() * 1000.0,
        expand_ms: (planned - created).as_secs_f64() * 1000.0,
        plan_us_per_fire: planned.as_secs_f64() * 1e6 / fires,
        cpu_us_per_fire: cpu.as_secs_f64() * 1e6 / fires,
    })
}

struct Plan {
    schedules: Vec<Schedule>,
    start_ms: i64,
    end_ms: i64,
}

fn plan(args: &BenchArgs, now_ms: i64) -> Plan {
    // Set-up time grows with the timer count; start on a whole second after it.
    let start_ms = (now_ms / 1000 + args.lead as i64 + 1) * 1000;
    match args.scenario {
        Scenario::Steady => {
            let n = args.rate * args.seconds;
            let schedules =
                (0..n).map(|i| Schedule::Once { run_at_ms: start_ms + (i * 1000 / args.rate) as i64 }).collect();
            Plan { schedules, start_ms, end_ms: start_ms + args.seconds as i64 * 1000 }
        }
        Scenario::Burst => {
            let schedules = (0..args.count)
                .map(|i| Schedule::Once { run_at_ms: start_ms + (i * 1000 / args.count) as i64 })
                .collect();
            Plan { schedules, start_ms, end_ms: start_ms + 1000 }
        }
        Scenario::Http
        | Scenario::HttpSteady
        | Scenario::CreateTask
        | Scenario::HoldTasks
        | Scenario::Registered
        | Scenario::History
        | Scenario::Herd => Plan { schedules: Vec::new(), start_ms, end_ms: start_ms },
        Scenario::Cron => {
            let schedules = (0..args.timers)
                .map(|_| Schedule::Cron { expr: "* * * * * *".into(), timezone: "UTC".into() })
                .collect();
            Plan { schedules, start_ms, end_ms: start_ms + args.seconds as i64 * 1000 }
        }
    }
}
