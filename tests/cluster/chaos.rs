//! The chaos run: a cluster of nodes on PostgreSQL + Redis under a steady
//! load of per-second cron timers, while a random node is killed with
//! SIGKILL every 20 s and restarted, Redis is restarted once (its data
//! lost) and PostgreSQL once. Every fire of the measured window is counted
//! from what the receiver got: expected, delivered, lost, duplicated (near
//! a kill, or elsewhere), and lateness. RELIABILITY.md has the figures.
//!
//! The nodes run with the product's default settings (only the listen
//! address, the URLs and the log level are set; `XTIMER_SECTION__FIELD`
//! variables of the environment reach them, and the summary lists them).
//! The defaults below are the short run of CI; `scripts/chaos` runs the
//! full one (5 minutes at 2,000 fires/s, release build). Settings, from
//! the environment:
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `XTIMER_CHAOS_SECS` | 75 | length of the measured window, s |
//! | `XTIMER_CHAOS_RATE` | 300 | fires per second: as many per-second cron timers |
//! | `XTIMER_CHAOS_NODES` | 3 | nodes |
//! | `XTIMER_CHAOS_KILL_EVERY_SECS` | 20 | a random node is killed every so often |
//! | `XTIMER_CHAOS_NODE_DOWN_MS` | 5000 | how long a killed node stays down |
//! | `XTIMER_CHAOS_OUTAGE_MS` | 3000 | how long Redis and PostgreSQL stay down |
//! | `XTIMER_CHAOS_APP_TIMERS` | 10 | timers per app |
//! | `XTIMER_CHAOS_CREATE_CONCURRENCY` | 16 | `createTimer` calls in flight |
//! | `XTIMER_CHAOS_SETTLE_SECS` | 180 | longest wait after the window for every fire to end |
//! | `XTIMER_CHAOS_SEED` | from the clock | seed of the choice of nodes to kill |
//! | `XTIMER_CHAOS_LOGS` | none | folder for the nodes' logs (`node0.log`, …) |

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sqlx::Row;
use xtimer::receiver::{Hit, Receiver};

use crate::nodes::ProcNode;
use crate::servers::{free_port, Postgres, Redis};

/// A duplicate whose run time lies this long before a kill, or
/// [`NEAR_KILL_AFTER_MS`] after it, counts as in flight at the kill: claimed
/// (fires are claimed 500 ms ahead) or sent, with its result not yet written.
const NEAR_KILL_BEFORE_MS: i64 = 5_000;
/// See [`NEAR_KILL_BEFORE_MS`].
const NEAR_KILL_AFTER_MS: i64 = 1_000;
/// Fires due from [`NEAR_KILL_BEFORE_MS`] before an event starts (in
/// flight at it) to this long after it ends (a node back, a server back)
/// are left out of the "calm" lateness figures.
const CALM_AFTER_MS: i64 = 10_000;
/// A fire this late (ms) is listed in the summary's runs of late seconds.
const LATE_MS: f64 = 1_000.0;
/// Time between the last timer created and the window's start.
const WARM_UP_MS: i64 = 5_000;

/// Now, Unix ms.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `ms` (Unix ms) as RFC 3339, UTC.
fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// `name` from the environment, parsed, else `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("{name}: cannot parse `{v}`")),
        Err(_) => default,
    }
}

/// The settings of one run (see the module's table).
#[derive(Debug, Clone)]
struct Settings {
    secs: i64,
    rate: usize,
    nodes: usize,
    kill_every_secs: i64,
    node_down_ms: u64,
    outage_ms: u64,
    app_timers: usize,
    create_concurrency: usize,
    settle_secs: i64,
    seed: u64,
    logs: Option<std::path::PathBuf>,
}

impl Settings {
    /// Reads the `XTIMER_CHAOS_*` variables; panics on one it cannot parse.
    fn from_env() -> Self {
        let clock_seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        let s = Self {
            secs: env_or("XTIMER_CHAOS_SECS", 75),
            rate: env_or("XTIMER_CHAOS_RATE", 300),
            nodes: env_or("XTIMER_CHAOS_NODES", 3),
            kill_every_secs: env_or("XTIMER_CHAOS_KILL_EVERY_SECS", 20),
            node_down_ms: env_or("XTIMER_CHAOS_NODE_DOWN_MS", 5_000),
            outage_ms: env_or("XTIMER_CHAOS_OUTAGE_MS", 3_000),
            app_timers: env_or("XTIMER_CHAOS_APP_TIMERS", 10),
            create_concurrency: env_or("XTIMER_CHAOS_CREATE_CONCURRENCY", 16),
            settle_secs: env_or("XTIMER_CHAOS_SETTLE_SECS", 180),
            seed: env_or("XTIMER_CHAOS_SEED", clock_seed % 1_000_000),
            logs: std::env::var_os("XTIMER_CHAOS_LOGS").map(Into::into),
        };
        assert!(s.secs >= 30 && s.rate >= 1 && s.nodes >= 2 && s.kill_every_secs >= 5, "settings: {s:?}");
        assert!(s.app_timers >= 1 && s.create_concurrency >= 1);
        s
    }
}

/// What a planned event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// `kill -9` of a random node, then its restart on the same port.
    Kill,
    /// Redis killed (no persistence: every key lost) and started again.
    Redis,
    /// PostgreSQL stopped (fast: connections cut) and started again.
    Postgres,
}

/// The plan, as (seconds into the window, kind), in order: kills every
/// `kill_every` s, and the two server restarts halfway between two kills,
/// about a third and two thirds into the window; none in its last 15 s.
fn plan(secs: i64, kill_every: i64) -> Vec<(i64, Kind)> {
    let last = secs - 15;
    let mut events: Vec<(i64, Kind)> =
        (1..).map(|k| k * kill_every).take_while(|&t| t <= last).map(|t| (t, Kind::Kill)).collect();
    let between: Vec<i64> =
        (0..).map(|k| k * kill_every + kill_every / 2).take_while(|&t| t <= last).filter(|&t| t >= 5).collect();
    let nearest = |target: i64, not: Option<i64>| {
        between.iter().copied().filter(|&t| Some(t) != not).min_by_key(|&t| (t - target).abs()).unwrap_or(target)
    };
    let redis = nearest(secs * 35 / 100, None);
    let postgres = nearest(secs * 65 / 100, Some(redis));
    events.push((redis, Kind::Redis));
    events.push((postgres, Kind::Postgres));
    events.sort();
    events
}

/// An event as it happened.
#[derive(Debug, Clone)]
struct Event {
    kind: Kind,
    /// When the node was killed or the server stopped, ms.
    start_ms: i64,
    /// When it answered again, ms.
    end_ms: i64,
    label: String,
}

/// A node slot: its port survives restarts.
struct Slot {
    port: u16,
    node: Option<ProcNode>,
    restarts: usize,
}

/// Starts a node on `port`, trying three times.
async fn start_node(s: &Settings, i: usize, port: u16, db: &str, redis: &str) -> ProcNode {
    let log = s.logs.as_ref().map(|dir| dir.join(format!("node{i}.log")));
    for _ in 0..3 {
        if let Some(node) = ProcNode::start_at(port, db, redis, &[], log.as_deref()).await {
            return node;
        }
    }
    panic!("node {i} did not start on port {port}");
}

/// Creates `n` per-second cron timers calling `url`, `app_timers` per app
/// (`chaos-0`, `chaos-1`, …), `concurrency` calls at once spread over
/// `bases`; returns their ids. Consecutive timers go to different apps, so
/// concurrent calls do not queue on one app's lock.
async fn create_timers(bases: &[String], url: &str, n: usize, app_timers: usize, concurrency: usize) -> Vec<i64> {
    let apps = n.div_ceil(app_timers);
    let t0 = Instant::now();
    let http = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(0));
    let ids = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..concurrency {
        let (http, next, ids, bases, url) = (http.clone(), next.clone(), ids.clone(), bases.to_vec(), url.to_string());
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let body = json!({
                    "app": format!("chaos-{}", i % apps), "name": format!("t{i}"),
                    "cron": "* * * * * *", "status": 2, "notifyHTTPParam": {"url": url}
                });
                let mut last = String::new();
                let mut created = None;
                for attempt in 0..5 {
                    let base = &bases[(i + w + attempt) % bases.len()];
                    let reply = http.post(format!("{base}/api/xtimer/createTimer")).json(&body).send().await;
                    match reply {
                        Ok(r) => match r.json::<Value>().await {
                            Ok(v) if v["code"] == 0 => {
                                created = v["result"]["id"].as_i64();
                                break;
                            }
                            // A retry after an answer lost on the way may find the name taken.
                            Ok(v) if v["code"] == 409 && attempt > 0 => {
                                last = v.to_string();
                                break;
                            }
                            Ok(v) => last = v.to_string(),
                            Err(e) => last = e.to_string(),
                        },
                        Err(e) => last = e.to_string(),
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                let id = created.unwrap_or_else(|| panic!("createTimer t{i}: {last}"));
                let mut ids = ids.lock().unwrap();
                ids.push(id);
                if ids.len() % 500 == 0 {
                    eprintln!("created {} timers after {:.1} s", ids.len(), t0.elapsed().as_secs_f64());
                }
            }
        });
    }
    while let Some(done) = workers.join_next().await {
        done.expect("a create worker");
    }
    let mut ids = std::mem::take(&mut *ids.lock().unwrap());
    ids.sort_unstable();
    ids
}

/// Parses an `Idempotency-Key` (`{timer_id}_{run_ms}`).
fn parse_key(key: &str) -> Option<(i64, i64)> {
    let (timer, run) = key.split_once('_')?;
    Some((timer.parse().ok()?, run.parse().ok()?))
}

/// Counts the distinct fires of the window received so far, reading only
/// the hits that arrived since the last call.
struct Distinct {
    state: Mutex<(usize, HashSet<(i64, i64)>)>,
    start: i64,
    end: i64,
}

impl Distinct {
    /// Reads the hits not seen yet; returns how many distinct fires of the window came so far.
    fn update(&self, hits: &[Hit]) -> usize {
        let mut state = self.state.lock().unwrap();
        let (seen, keys) = &mut *state;
        for h in &hits[(*seen).min(hits.len())..] {
            if (self.start..self.end).contains(&h.run_ms) {
                if let Some(k) = parse_key(&h.key) {
                    keys.insert(k);
                }
            }
        }
        *seen = hits.len();
        keys.len()
    }
}

/// p50 / p99 / max of a set of lateness values, ms.
#[derive(Debug, Default, Clone, Copy)]
struct Lateness {
    n: usize,
    p50: f64,
    p99: f64,
    max: f64,
}

impl Lateness {
    /// The figures of `v` (nearest-rank percentiles).
    fn of(mut v: Vec<f64>) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Self { n: v.len(), p50: rank(0.50), p99: rank(0.99), max: v[v.len() - 1] }
    }
}

impl std::fmt::Display for Lateness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p50 {:.1}  p99 {:.1}  max {:.1}  ({} fires)", self.p50, self.p99, self.max, self.n)
    }
}

/// The figures of a run.
#[derive(Debug, Default)]
struct Report {
    expected: usize,
    delivered: usize,
    /// Fires never received, (timer, run).
    lost: Vec<(i64, i64)>,
    /// Fires received more than once: (timer, run, times, lateness of the
    /// first and of the second arrival in ms).
    duplicates: Vec<(i64, i64, u32, f64, f64)>,
    duplicates_near_kill: usize,
    /// Requests whose `Idempotency-Key` does not match their
    /// `X-Xtimer-Run-Time`, or that name no fire of the run.
    inconsistent: usize,
    lateness_all: Lateness,
    lateness_calm: Lateness,
    /// Runs of consecutive seconds of the window in which some fire came
    /// more than [`LATE_MS`] late: (first run, last run, fires late, worst ms).
    late_runs: Vec<(i64, i64, usize, f64)>,
}

/// Counts the run from the receiver's hits: every (timer, second) of
/// [`start`, `end`) is expected once.
fn count(hits: &[Hit], ids: &[i64], start: i64, end: i64, events: &[Event]) -> Report {
    let timers: HashSet<i64> = ids.iter().copied().collect();
    // (timer, run) -> (times received, first and second arrival in µs)
    let mut seen: HashMap<(i64, i64), (u32, i64, i64)> = HashMap::new();
    let mut inconsistent = 0;
    for h in hits.iter().filter(|h| (start..end).contains(&h.run_ms)) {
        match parse_key(&h.key) {
            Some((timer, run)) if run == h.run_ms && timers.contains(&timer) && (run - start) % 1000 == 0 => {
                let e = seen.entry((timer, run)).or_insert((0, i64::MAX, i64::MAX));
                e.0 += 1;
                if h.arrival_us < e.1 {
                    (e.1, e.2) = (h.arrival_us, e.1);
                } else if h.arrival_us < e.2 {
                    e.2 = h.arrival_us;
                }
            }
            _ => inconsistent += 1,
        }
    }
    let calm =
        |run: i64| !events.iter().any(|e| run >= e.start_ms - NEAR_KILL_BEFORE_MS && run <= e.end_ms + CALM_AFTER_MS);
    let mut report =
        Report { expected: ids.len() * ((end - start) / 1000) as usize, inconsistent, ..Default::default() };
    let (mut all, mut quiet) = (Vec::with_capacity(seen.len()), Vec::new());
    // second -> (fires late, worst lateness)
    let mut late: BTreeMap<i64, (usize, f64)> = BTreeMap::new();
    for &timer in ids {
        for run in (start..end).step_by(1000) {
            let Some(&(times, first_us, second_us)) = seen.get(&(timer, run)) else {
                report.lost.push((timer, run));
                continue;
            };
            report.delivered += 1;
            let late_ms = |us: i64| (us - run * 1000) as f64 / 1000.0;
            if times > 1 {
                report.duplicates.push((timer, run, times, late_ms(first_us), late_ms(second_us)));
                if near_kill(events, run) {
                    report.duplicates_near_kill += 1;
                }
            }
            let ms = late_ms(first_us);
            all.push(ms);
            if calm(run) {
                quiet.push(ms);
            }
            if ms > LATE_MS {
                let e = late.entry(run).or_default();
                e.0 += 1;
                e.1 = e.1.max(ms);
            }
        }
    }
    for (&run, &(n, worst)) in &late {
        match report.late_runs.last_mut() {
            Some(last) if last.1 + 1000 == run => {
                last.1 = run;
                last.2 += n;
                last.3 = last.3.max(worst);
            }
            _ => report.late_runs.push((run, run, n, worst)),
        }
    }
    report.lateness_all = Lateness::of(all);
    report.lateness_calm = Lateness::of(quiet);
    report
}

/// Whether a fire due at `run` was in flight at a kill (see [`NEAR_KILL_BEFORE_MS`]).
fn near_kill(events: &[Event], run: i64) -> bool {
    events
        .iter()
        .any(|e| e.kind == Kind::Kill && (-NEAR_KILL_BEFORE_MS..=NEAR_KILL_AFTER_MS).contains(&(run - e.start_ms)))
}

/// The event nearest to `run` (by its span), as "label (+/-N ms)".
fn nearest_event(events: &[Event], run: i64) -> String {
    events
        .iter()
        .map(|e| {
            let off = if run < e.start_ms {
                run - e.start_ms
            } else if run > e.end_ms {
                run - e.end_ms
            } else {
                0
            };
            (off.abs(), off, e)
        })
        .min_by_key(|(abs, _, _)| *abs)
        .map(|(_, off, e)| format!("{} ({off:+} ms)", e.label))
        .unwrap_or_else(|| "no event".into())
}

/// Fires of the window in the database, by status name.
async fn db_statuses(pool: &sqlx::PgPool, start: i64, end: i64) -> sqlx::Result<BTreeMap<&'static str, i64>> {
    let rows = sqlx::query(
        "SELECT status::BIGINT AS status, count(*)::BIGINT AS n FROM t_timer_task \
         WHERE run_timer >= $1 AND run_timer < $2 GROUP BY status",
    )
    .bind(start)
    .bind(end)
    .fetch_all(pool)
    .await?;
    let name = |s: i64| match s {
        0 => "pending",
        1 => "running",
        2 => "succeeded",
        3 => "failed",
        4 => "skipped",
        5 => "missed",
        _ => "other",
    };
    let mut out = BTreeMap::new();
    for row in rows {
        *out.entry(name(row.get("status"))).or_default() += row.get::<i64, _>("n");
    }
    Ok(out)
}

/// Which nodes (by process id) wrote the final result of the fires due in
/// [`from`, `to`], as "pid xN" pairs.
async fn db_owners(pool: &sqlx::PgPool, from: i64, to: i64, names: &HashMap<u32, String>) -> String {
    let rows = sqlx::query(
        "SELECT regexp_replace(COALESCE(owner, ''), ':[0-9]+$', '') AS node, count(*)::BIGINT AS n \
         FROM t_timer_task WHERE run_timer >= $1 AND run_timer <= $2 GROUP BY 1 ORDER BY 2 DESC",
    )
    .bind(from)
    .bind(to)
    .fetch_all(pool)
    .await;
    match rows {
        Ok(rows) => rows
            .iter()
            .map(|r| {
                let node: String = r.get("node");
                // `{host}-{pid}-{suffix}`
                let pid = node.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok());
                let name = pid.and_then(|p| names.get(&p)).cloned().unwrap_or(node);
                format!("{name} x{}", r.get::<i64, _>("n"))
            })
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("query failed: {e}"),
    }
}

/// A fire's row: "status N, attempt N, owner, output".
async fn db_fire(pool: &sqlx::PgPool, timer: i64, run: i64) -> String {
    let row = sqlx::query(
        "SELECT status::BIGINT AS status, attempt::BIGINT AS attempt, COALESCE(owner, '') AS owner, output \
         FROM t_timer_task WHERE timer_id = $1 AND run_timer = $2",
    )
    .bind(timer)
    .bind(run)
    .fetch_optional(pool)
    .await;
    match row {
        Ok(Some(r)) => format!(
            "status {}, attempt {}, owner `{}`, output `{}`",
            r.get::<i64, _>("status"),
            r.get::<i64, _>("attempt"),
            r.get::<String, _>("owner"),
            r.get::<String, _>("output")
        ),
        Ok(None) => "no row".into(),
        Err(e) => format!("query failed: {e}"),
    }
}

/// The chaos run (see the module documentation). Prints a summary, then
/// fails if a fire was lost, a fire was repeated away from a kill, or a
/// fire is still pending or running after the settle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_kill_9_and_server_restarts_lose_no_fire() {
    let s = Settings::from_env();
    if let Some(dir) = &s.logs {
        std::fs::create_dir_all(dir).expect("the log folder");
    }
    let pg = Arc::new(Postgres::start());
    let mut redis = Redis::start().await;
    let rx = Arc::new(Receiver::start(false).await.unwrap());
    let mut slots = Vec::new();
    // Process id -> "node i (start n)", to name the nodes in the database's owners.
    let mut names: HashMap<u32, String> = HashMap::new();
    for i in 0..s.nodes {
        let port = free_port();
        let node = start_node(&s, i, port, &pg.url, &redis.url).await;
        names.insert(node.pid(), format!("node {i}"));
        eprintln!("node {i}: port {port}, pid {}", node.pid());
        slots.push(Slot { port, node: Some(node), restarts: 0 });
    }
    let bases: Vec<String> = slots.iter().map(|n| format!("http://127.0.0.1:{}", n.port)).collect();
    let overrides: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("XTIMER_") && k.contains("__") && k != "XTIMER_REDIS__URL")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    eprintln!(
        "chaos: seed {}, {} nodes, {} per-second timers ({} per app), window {} s, kill -9 every {} s (down {} ms), \
         Redis and PostgreSQL down {} ms each; node settings from the environment: {}",
        s.seed,
        s.nodes,
        s.rate,
        s.app_timers,
        s.secs,
        s.kill_every_secs,
        s.node_down_ms,
        s.outage_ms,
        if overrides.is_empty() { "none (product defaults)".to_string() } else { overrides.join(" ") }
    );

    let t0 = Instant::now();
    let ids = create_timers(&bases, &rx.url("/chaos"), s.rate, s.app_timers, s.create_concurrency).await;
    let create_s = t0.elapsed().as_secs_f64();
    eprintln!("created {} timers in {create_s:.1} s ({:.0}/s)", ids.len(), ids.len() as f64 / create_s);

    let start = (now_ms() + WARM_UP_MS) / 1000 * 1000 + 1000;
    let end = start + s.secs * 1000;
    let at = move |ms: i64| format!("+{:.1} s", (ms - start) as f64 / 1000.0);
    eprintln!("window {} .. {} ({} fires expected)", rfc3339(start), rfc3339(end), ids.len() as i64 * s.secs);

    // Progress, every 10 s of the window.
    let progress = {
        let rx = rx.clone();
        tokio::spawn(async move {
            let mut last = rx.count();
            let mut t = start;
            while t < end {
                t += 10_000;
                tokio::time::sleep(Duration::from_millis((t - now_ms()).max(0) as u64)).await;
                let n = rx.count();
                eprintln!(
                    "[+{} s] {} callbacks received, {}/s over the last 10 s",
                    (t - start) / 1000,
                    n,
                    (n - last) / 10
                );
                last = n;
            }
        })
    };

    let mut rng = rand::rngs::StdRng::seed_from_u64(s.seed);
    let mut events = Vec::new();
    for (offset, kind) in plan(s.secs, s.kill_every_secs) {
        tokio::time::sleep(Duration::from_millis((start + offset * 1000 - now_ms()).max(0) as u64)).await;
        let i = if kind == Kind::Kill { rng.random_range(0..slots.len()) } else { 0 };
        // The victim's shards, asked just before the kill (its heartbeat reports them).
        let held = match kind {
            Kind::Kill => {
                let node = slots[i].node.as_ref().expect("every node is up between events");
                tokio::time::timeout(Duration::from_secs(2), node.shards_held()).await.unwrap_or(0)
            }
            _ => 0,
        };
        let began = now_ms();
        let label = match kind {
            Kind::Kill => {
                let slot = &mut slots[i];
                let mut node = slot.node.take().expect("every node is up between events");
                node.kill9();
                let pid = node.pid();
                drop(node);
                tokio::time::sleep(Duration::from_millis(s.node_down_ms)).await;
                let restarted = start_node(&s, i, slot.port, &pg.url, &redis.url).await;
                slot.restarts += 1;
                names.insert(restarted.pid(), format!("node {i} (restart {})", slot.restarts));
                slot.node = Some(restarted);
                format!("kill -9 of node {i} (pid {pid}, held {held} shards) at {}", at(began))
            }
            Kind::Redis => {
                redis.restart(Duration::from_millis(s.outage_ms)).await;
                format!("Redis restart at {}", at(began))
            }
            Kind::Postgres => {
                let (pg, down) = (pg.clone(), Duration::from_millis(s.outage_ms));
                tokio::task::spawn_blocking(move || pg.restart(down)).await.expect("PostgreSQL restart");
                format!("PostgreSQL restart at {}", at(began))
            }
        };
        let ended = now_ms();
        eprintln!("[{}] {label}, back after {} ms", at(ended), ended - began);
        events.push(Event { kind, start_ms: began, end_ms: ended, label });
    }

    // Wait for every fire of the window to end (delivered, or given up by
    // the service: missed, failed), or for the settle time to run out.
    let expected = ids.len() * s.secs as usize;
    let distinct = Distinct { state: Mutex::default(), start, end };
    let pool = sqlx::PgPool::connect(&pg.url).await.expect("PostgreSQL");
    let deadline = end + s.settle_secs * 1000;
    let mut unsettled = i64::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        let all = rx.wait_until(Duration::ZERO, |hits| distinct.update(hits) >= expected).await;
        if now_ms() < end + 2_000 {
            continue;
        }
        match db_statuses(&pool, start, end).await {
            Ok(st) => unsettled = st.get("pending").copied().unwrap_or(0) + st.get("running").copied().unwrap_or(0),
            Err(e) => eprintln!("fire statuses: {e}"),
        }
        if (unsettled == 0 && all) || now_ms() > deadline {
            break;
        }
        if unsettled == 0 {
            // Given up by the service: nothing more will come; let the
            // requests on their way arrive.
            tokio::time::sleep(Duration::from_millis(3_000)).await;
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let settled_after = now_ms() - end;
    progress.abort();

    let report = count(&rx.hits(), &ids, start, end, &events);
    let statuses = db_statuses(&pool, start, end).await.unwrap_or_default();
    let kills = events.iter().filter(|e| e.kind == Kind::Kill).count();
    let elsewhere: Vec<&(i64, i64, u32, f64, f64)> =
        report.duplicates.iter().filter(|d| !near_kill(&events, d.1)).collect();
    // Runs of consecutive seconds with duplicates away from kills: (first, last, fires).
    let mut dup_runs: Vec<(i64, i64, usize)> = Vec::new();
    let by_second: BTreeMap<i64, usize> = elsewhere.iter().fold(BTreeMap::new(), |mut m, d| {
        *m.entry(d.1).or_default() += 1;
        m
    });
    for (&run, &n) in &by_second {
        match dup_runs.last_mut() {
            Some(last) if last.1 + 1000 == run => (last.1, last.2) = (run, last.2 + n),
            _ => dup_runs.push((run, run, n)),
        }
    }
    let mut lost_by_event: BTreeMap<String, usize> = BTreeMap::new();
    for (_, run) in &report.lost {
        let e = events.iter().min_by_key(|e| (run - e.start_ms).abs()).map(|e| e.label.clone()).unwrap_or_default();
        *lost_by_event.entry(e).or_default() += 1;
    }

    eprintln!("\n== chaos summary ==");
    eprintln!(
        "seed {}: {} nodes, {} fires/s ({} per-second timers over {} apps, created in {create_s:.1} s), {} s window; \
         {kills} kills, 1 Redis restart, 1 PostgreSQL restart; settled {:.1} s after the window",
        s.seed,
        s.nodes,
        s.rate,
        ids.len(),
        ids.len().div_ceil(s.app_timers),
        s.secs,
        settled_after as f64 / 1000.0
    );
    for e in &events {
        eprintln!("  event: {}, back after {} ms", e.label, e.end_ms - e.start_ms);
    }
    eprintln!("fires expected:   {}", report.expected);
    eprintln!("fires delivered:  {}", report.delivered);
    eprintln!("fires lost:       {}", report.lost.len());
    eprintln!(
        "fires duplicated: {} (near a kill {}, elsewhere {}); keys inconsistent with their run time: {}",
        report.duplicates.len(),
        report.duplicates_near_kill,
        elsewhere.len(),
        report.inconsistent
    );
    eprintln!("lateness ms, every fire:                     {}", report.lateness_all);
    eprintln!("lateness ms, > 10 s from a kill or restart:  {}", report.lateness_calm);
    eprintln!("database, fires of the window by status: {statuses:?}");
    for &(first, last, n, worst) in report.late_runs.iter().take(20) {
        eprintln!(
            "  late > {LATE_MS} ms: {n} fires due {} .. {} (worst {worst:.0} ms; {}); those seconds recorded by {}",
            at(first),
            at(last),
            nearest_event(&events, first),
            db_owners(&pool, first, last, &names).await
        );
    }
    for (event, n) in &lost_by_event {
        eprintln!("  lost {n} nearest to {event}");
    }
    for &(timer, run) in report.lost.iter().take(10) {
        eprintln!("  lost {timer}_{run} ({}): {}", nearest_event(&events, run), db_fire(&pool, timer, run).await);
    }
    for &(first, last, n) in dup_runs.iter().take(20) {
        eprintln!(
            "  duplicates away from kills: {n} fires due {} .. {} ({})",
            at(first),
            at(last),
            nearest_event(&events, first)
        );
    }
    for &&(timer, run, times, a, b) in elsewhere.iter().step_by((elsewhere.len() / 10).max(1)).take(10) {
        eprintln!(
            "  duplicate away from kills {timer}_{run} x{times}, arrived {a:.0} and {b:.0} ms after its time ({})",
            nearest_event(&events, run)
        );
    }
    eprintln!("== end of chaos summary ==\n");

    assert_eq!(report.expected, expected);
    assert!(kills >= 1, "no kill happened");
    assert_eq!(report.inconsistent, 0, "requests whose key is not a fire of the run");
    assert!(report.lost.is_empty(), "{} fires lost", report.lost.len());
    assert!(elsewhere.is_empty(), "{} fires repeated away from kills", elsewhere.len());
    assert_eq!(unsettled, 0, "fires still pending or running {} s after the window", s.settle_secs);
}

#[test]
fn the_plan_spaces_kills_and_puts_the_restarts_between_them() {
    let full = plan(300, 20);
    let kills: Vec<i64> = full.iter().filter(|(_, k)| *k == Kind::Kill).map(|(t, _)| *t).collect();
    assert_eq!(kills, (1..=14).map(|k| k * 20).collect::<Vec<_>>());
    assert!(full.contains(&(110, Kind::Redis)) && full.contains(&(190, Kind::Postgres)), "{full:?}");
    let short = plan(75, 20);
    assert_eq!(
        short,
        vec![(20, Kind::Kill), (30, Kind::Redis), (40, Kind::Kill), (50, Kind::Postgres), (60, Kind::Kill)]
    );
}
