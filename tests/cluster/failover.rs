//! The failover runs: the chaos run's count, around what production HA
//! does when a primary dies. Three nodes with the product's defaults (only
//! the HA URL set) fire per-second cron timers while clients create
//! one-shots; then the primary is killed with SIGKILL and promoted
//! elsewhere:
//!
//! | setup | what is killed | what takes over | the nodes' URL |
//! |---|---|---|---|
//! | `patroni` | a PostgreSQL host (Patroni and PostgreSQL) | its synchronous standby, promoted by Patroni once the leader key (TTL 10 s) lapses in etcd | `postgres://h1,h2/postgres?target_session_attrs=read-write` |
//! | `patroni-haproxy` | the same | the same | HAProxy, on Patroni's `/primary` check |
//! | `galera` | one of three MariaDB Galera nodes (the first node's) | the other two | `mysql://h1,h2,h3/xtimer`, each node's own Galera node first |
//! | `sentinel` | the Redis master | its replica, promoted by Sentinel | `redis+sentinel://…/mymaster` |
//! | `cluster` | a Redis Cluster master | its replica | the masters, comma-separated |
//!
//! Counted, as the chaos run does: fires of the window lost (none may
//! be), sent twice (only fires in flight at the kill may be: due from 5 s
//! before it to 1 s after), acknowledged creates lost or fired twice (none
//! may be), `createTimer` answers by status (503 while no primary, never
//! 500); and measured: the recovery (from the kill until every fire due is
//! on time, within 1 s, for the rest of the window; 0 when none due after
//! the kill was late), the lateness of the fires due meanwhile and of
//! those due after it. The kill comes 0.4 s into a second.
//!
//! The short run is part of the test suite (each setup one after the
//! other, with the chaos runs: a 30 s window, the kill 8 s in); `scripts/chaos
//! --ha SETUP` runs the full one (a 60 s window, the kill 15 s in). A setup
//! whose servers are not installed (etcd and Patroni, HAProxy, galera-4 and
//! rsync) is skipped with a message, and fails under CI (`.ci/run`
//! installs them). Settings, from the environment:
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `XTIMER_FAILOVER_SECS` | 30 | length of the measured window, s |
//! | `XTIMER_FAILOVER_RATE` | 100 | fires per second: as many per-second cron timers |
//! | `XTIMER_FAILOVER_KILL_AT_S` | 8 | when the primary is killed, s into the window |
//! | `XTIMER_FAILOVER_CREATORS` | 4 | clients creating one-shots (each due 2.5 s after its create), one call at a time each |
//! | `XTIMER_CHAOS_LOGS` | none | folder for the nodes' logs (`failover-SETUP/node0.log`, …) |

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::{Hit, Receiver};

use crate::chaos::{create_timers, parse_key};
use crate::ha_servers::{Galera, Patroni};
use crate::nodes::ProcNode;
use crate::servers::{free_port, Postgres, Redis, RedisCluster, RedisSentinel};

/// A fire due this long before the kill may be in flight (claimed, or
/// sent with its result not yet on the standby), ms.
const IN_FLIGHT_BEFORE_MS: i64 = 5_000;
/// ... and this long after it, ms.
const IN_FLIGHT_AFTER_MS: i64 = 1_000;
/// On time: within this of its time, ms.
const LATE_MS: f64 = 1_000.0;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The HA setups a run kills the primary of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    Patroni,
    PatroniHaproxy,
    Galera,
    Sentinel,
    Cluster,
}

impl Setup {
    /// What the setup needs installed that the rest of the suite does
    /// not: (the file or command, the Debian package).
    fn needs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Setup::Patroni => &[("etcd", "etcd-server"), ("patroni", "patroni")],
            Setup::PatroniHaproxy => &[("etcd", "etcd-server"), ("patroni", "patroni"), ("haproxy", "haproxy")],
            Setup::Galera => &[("/usr/lib/galera/libgalera_smm.so", "galera-4"), ("rsync", "rsync")],
            Setup::Sentinel | Setup::Cluster => &[],
        }
    }

    /// Whether the setup's servers are installed; when not, says so, and
    /// fails under CI.
    fn installed(self) -> bool {
        let patroni = std::env::var("XTIMER_PATRONI").ok();
        let missing: Vec<&str> = self
            .needs()
            .iter()
            .filter(|(what, _)| !(found(what) || *what == "patroni" && patroni.is_some()))
            .map(|(_, package)| *package)
            .collect();
        if missing.is_empty() {
            return true;
        }
        let install = format!("apt-get install {}", missing.join(" "));
        assert!(
            std::env::var_os("CI").is_none(),
            "failover {}: missing under CI ({install}): .ci/run installs it",
            self.name()
        );
        eprintln!("SKIPPED: the {} failover run needs {install}", self.name());
        false
    }

    fn name(self) -> &'static str {
        match self {
            Setup::Patroni => "patroni",
            Setup::PatroniHaproxy => "patroni-haproxy",
            Setup::Galera => "galera",
            Setup::Sentinel => "sentinel",
            Setup::Cluster => "cluster",
        }
    }
}

/// The servers of a setup, and how each node reaches them.
enum Servers {
    Patroni(Patroni, Redis),
    Galera(Galera, Redis),
    Sentinel(Postgres, RedisSentinel),
    Cluster(Postgres, RedisCluster),
}

impl Servers {
    async fn start(setup: Setup) -> Self {
        match setup {
            Setup::Patroni => Servers::Patroni(Patroni::start(false).await, Redis::start().await),
            Setup::PatroniHaproxy => Servers::Patroni(Patroni::start(true).await, Redis::start().await),
            Setup::Galera => Servers::Galera(Galera::start().await, Redis::start().await),
            Setup::Sentinel => Servers::Sentinel(Postgres::start(), RedisSentinel::start().await),
            Setup::Cluster => Servers::Cluster(Postgres::start(), RedisCluster::start_with_replicas(1).await),
        }
    }

    /// Node `i`'s database and Redis URLs.
    fn urls(&self, i: usize) -> (String, String) {
        match self {
            Servers::Patroni(pg, redis) => (pg.url.clone(), redis.url.clone()),
            Servers::Galera(galera, redis) => (galera.url_from(i), redis.url.clone()),
            Servers::Sentinel(pg, redis) => (pg.url.clone(), redis.url.clone()),
            Servers::Cluster(pg, redis) => (pg.url.clone(), redis.url.clone()),
        }
    }

    /// Kills the primary (SIGKILL); what was killed.
    async fn kill_primary(&mut self) -> String {
        match self {
            Servers::Patroni(pg, _) => {
                let leader = pg.leader().await.expect("a Patroni leader");
                pg.kill(leader);
                format!("PostgreSQL host pg{} (Patroni and PostgreSQL)", leader + 1)
            }
            Servers::Galera(galera, _) => {
                galera.kill(0);
                "Galera node 1 of 3".into()
            }
            Servers::Sentinel(_, redis) => {
                redis.kill_master();
                "the Redis master".into()
            }
            Servers::Cluster(_, redis) => {
                redis.kill_master(0);
                "Redis Cluster master 1 of 3".into()
            }
        }
    }
}

/// What the one-shot clients saw.
#[derive(Default)]
struct Creates {
    /// Acknowledged (200, code 0): id, due time, when acknowledged.
    acked: Vec<(i64, i64, i64)>,
    /// Answers by HTTP status (0: none within 15 s).
    answers: BTreeMap<u16, usize>,
    /// Answers other than 200 and 503, for the report.
    odd: Vec<String>,
}

/// Creates one-shots through `bases` from `clients` clients, one call at
/// a time each, due 2.5 s after each call, until `stop`.
async fn create_one_shots(bases: Vec<String>, url: String, clients: usize, stop: Arc<AtomicBool>) -> Creates {
    let out = Arc::new(Mutex::new(Creates::default()));
    let mut workers = tokio::task::JoinSet::new();
    for c in 0..clients {
        let (bases, url, stop, out) = (bases.clone(), url.clone(), stop.clone(), out.clone());
        workers.spawn(async move {
            let http = reqwest::Client::builder().timeout(Duration::from_secs(15)).build().unwrap();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let run_at = now_ms() + 2_500;
                let body = json!({
                    "app": "failover-once", "name": format!("c{c}-{i}"), "runAt": run_at, "status": 2,
                    "notifyHTTPParam": {"url": url}
                });
                let base = &bases[(c + i) % bases.len()];
                let reply = http.post(format!("{base}/api/xtimer/createTimer")).json(&body).send().await;
                let (status, envelope) = match reply {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        (status, r.json::<Value>().await.unwrap_or_default())
                    }
                    Err(_) => (0, Value::Null),
                };
                {
                    let mut out = out.lock().unwrap();
                    *out.answers.entry(status).or_default() += 1;
                    match envelope["result"]["id"].as_i64() {
                        Some(id) if status == 200 && envelope["code"] == 0 => out.acked.push((id, run_at, now_ms())),
                        _ if ![0, 200, 503].contains(&status) && out.odd.len() < 10 => {
                            out.odd.push(format!("{status} {envelope}"))
                        }
                        _ => {}
                    }
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
    while let Some(done) = workers.join_next().await {
        done.expect("a create client");
    }
    let mut out = out.lock().unwrap();
    std::mem::take(&mut *out)
}

/// The figures of one run.
#[derive(Debug)]
struct Figures {
    expected: usize,
    lost: usize,
    in_flight_repeats: usize,
    other_repeats: Vec<String>,
    recovery_ms: i64,
    outage_worst_ms: f64,
    after_p99_ms: f64,
    after_worst_ms: f64,
    acked: usize,
    acked_lost: Vec<i64>,
    acked_repeats: Vec<i64>,
}

/// Counts the run from what the receiver got: the cron fires of `ids` due
/// in `[start, end)`, the acknowledged one-shots, around a kill at `killed`.
fn count(hits: &[Hit], ids: &[i64], start: i64, end: i64, killed: i64, acked: &[(i64, i64, i64)]) -> Figures {
    let mut by_key: HashMap<(i64, i64), Vec<f64>> = HashMap::new();
    let mut by_timer: HashMap<i64, usize> = HashMap::new();
    for h in hits {
        if let Some((timer, run)) = parse_key(&h.key) {
            by_key.entry((timer, run)).or_default().push(h.lateness_ms());
            *by_timer.entry(timer).or_default() += 1;
        }
    }
    let in_flight = |run: i64| (-IN_FLIGHT_BEFORE_MS..=IN_FLIGHT_AFTER_MS).contains(&(run - killed));
    let (mut expected, mut lost, mut in_flight_repeats, mut other_repeats) = (0, 0, 0, Vec::new());
    // Each second's worst lateness (a lost fire: infinitely late).
    let mut worst: BTreeMap<i64, f64> = BTreeMap::new();
    let mut after: Vec<(i64, f64)> = Vec::new();
    for run in (start..end).step_by(1000) {
        for id in ids {
            expected += 1;
            let late = match by_key.get(&(*id, run)) {
                None => {
                    lost += 1;
                    f64::INFINITY
                }
                Some(copies) => {
                    if copies.len() > 1 {
                        if in_flight(run) {
                            in_flight_repeats += 1;
                        } else {
                            other_repeats.push(format!("{id}_{run}"));
                        }
                    }
                    copies.iter().copied().fold(f64::INFINITY, f64::min)
                }
            };
            let w = worst.entry(run).or_insert(0.0);
            *w = w.max(late);
            after.push((run, late));
        }
    }
    // Recovered: from the first second after the kill from which every
    // second's fires were on time to the window's end.
    let mut recovered = end;
    for (run, w) in worst.range(killed.div_euclid(1000) * 1000..).rev() {
        if *w > LATE_MS || *run < killed {
            break;
        }
        recovered = *run;
    }
    // No fire due after the kill was late: no outage to speak of.
    let first_after = (killed + 999).div_euclid(1000) * 1000;
    let recovery_ms = if recovered == first_after { 0 } else { recovered - killed };
    let outage_worst_ms =
        after.iter().filter(|(run, _)| *run >= killed && *run < recovered).map(|(_, l)| *l).fold(0.0, f64::max);
    let mut settled: Vec<f64> = after.iter().filter(|(run, _)| *run >= recovered).map(|(_, l)| *l).collect();
    settled.sort_by(f64::total_cmp);
    let p99 = settled.get(settled.len().saturating_sub(1) * 99 / 100).copied().unwrap_or(0.0);
    let acked_lost = acked.iter().filter(|(id, _, _)| !by_timer.contains_key(id)).map(|(id, _, _)| *id).collect();
    let acked_repeats = acked
        .iter()
        .filter(|(id, run_at, _)| by_timer.get(id).is_some_and(|n| *n > 1) && !in_flight(*run_at))
        .map(|(id, _, _)| *id)
        .collect();
    Figures {
        expected,
        lost,
        in_flight_repeats,
        other_repeats,
        recovery_ms,
        outage_worst_ms,
        after_p99_ms: p99,
        after_worst_ms: settled.last().copied().unwrap_or(0.0),
        acked: acked.len(),
        acked_lost,
        acked_repeats,
    }
}

/// A file at `what`, or a command of that name on `PATH`.
fn found(what: &str) -> bool {
    if what.starts_with('/') {
        return std::path::Path::new(what).exists();
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(what).is_file()))
        || ["/usr/sbin", "/sbin"].iter().any(|dir| std::path::Path::new(dir).join(what).is_file())
}

/// One failover run on `setup` (see the module doc), after any other
/// chaos or failover run of this process; skipped when its servers are
/// not installed.
// The lock only keeps the runs (each on its own runtime) apart.
#[allow(clippy::await_holding_lock)]
async fn failover(setup: Setup) {
    let _one = crate::chaos::ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !setup.installed() {
        return;
    }
    let secs: i64 = env_or("XTIMER_FAILOVER_SECS", 30);
    let rate: usize = env_or("XTIMER_FAILOVER_RATE", 100);
    let kill_at_s: i64 = env_or("XTIMER_FAILOVER_KILL_AT_S", 8);
    let clients: usize = env_or("XTIMER_FAILOVER_CREATORS", 4);
    assert!(kill_at_s >= 6 && kill_at_s + 20 <= secs, "the kill 6 s or more into the window and 20 s before its end");
    let logs = std::env::var_os("XTIMER_CHAOS_LOGS")
        .map(|d| std::path::PathBuf::from(d).join(format!("failover-{}", setup.name())));
    if let Some(dir) = &logs {
        std::fs::create_dir_all(dir).unwrap();
    }

    let mut servers = Servers::start(setup).await;
    let rx = Receiver::start(false).await.unwrap();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let (db, redis) = servers.urls(i);
        let log = logs.as_ref().map(|d| d.join(format!("node{i}.log")));
        let port = free_port();
        let node = ProcNode::start_at(port, &db, &redis, &[], log.as_deref())
            .await
            .unwrap_or_else(|| panic!("{}: node {i} did not start on {db}", setup.name()));
        nodes.push(node);
    }
    let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let (ids, _) = create_timers(&bases, &rx.url("/hook"), rate, 10, 8).await;
    assert!(rx.wait_until(Duration::from_secs(30), |hits| hits.len() >= rate).await, "fires flow");

    let start = (now_ms() / 1000 + 2) * 1000;
    let end = start + secs * 1000;
    tokio::time::sleep(Duration::from_millis((start - now_ms()).max(0) as u64)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let creating = tokio::spawn(create_one_shots(bases.clone(), rx.url("/once"), clients, stop.clone()));
    tokio::time::sleep(Duration::from_millis((start + kill_at_s * 1000 - now_ms()).max(0) as u64)).await;
    // 0.4 s into its second: the next second's fires are claimed, this
    // one's sent or being sent.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let killed = now_ms();
    let what = servers.kill_primary().await;
    eprintln!("{}: killed {what} at {:.1} s into the window", setup.name(), (killed - start) as f64 / 1000.0);
    // Creates stop 5 s before the window's end (their fires fall in it).
    tokio::time::sleep(Duration::from_millis((end - 5_000 - now_ms()).max(0) as u64)).await;
    stop.store(true, Ordering::Relaxed);
    let creates = creating.await.unwrap();

    // Every fire of the window and every acknowledged one-shot, or a minute.
    let acked: Vec<i64> = creates.acked.iter().map(|(id, _, _)| *id).collect();
    let crons: HashSet<i64> = ids.iter().copied().collect();
    rx.wait_until(Duration::from_millis((end - now_ms()).max(0) as u64 + 60_000), |hits| {
        let got: HashSet<(i64, i64)> = hits.iter().filter_map(|h| parse_key(&h.key)).collect();
        let timers: HashSet<i64> = got.iter().map(|(t, _)| *t).collect();
        let fires = got.iter().filter(|(t, run)| crons.contains(t) && (start..end).contains(run)).count();
        fires >= ids.len() * secs as usize && acked.iter().all(|id| timers.contains(id))
    })
    .await;
    // Time for a repeated fire to show up, if there were one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let f = count(&rx.hits(), &ids, start, end, killed, &creates.acked);
    let acked_in_outage =
        creates.acked.iter().filter(|(_, _, at)| (killed..killed + f.recovery_ms).contains(at)).count();
    eprintln!(
        "FAILOVER {setup}: {rate} fires/s for {secs} s, {what} killed at {kill_at_s} s; fires: {expected} expected, \
         {lost} lost, {in_flight} repeated in flight at the kill, {other} repeated otherwise; recovery (kill until \
         every fire on time) {recovery:.1} s, worst lateness meanwhile {outage:.0} ms, after it p99 {p99:.0} ms, \
         worst {after:.0} ms; one-shots: {acked} creates acknowledged ({acked_in_outage} during the recovery), {acked_lost} \
         lost, {acked_repeats} fired twice; createTimer answers by status {answers:?}{odd}",
        setup = setup.name(),
        expected = f.expected,
        lost = f.lost,
        in_flight = f.in_flight_repeats,
        other = f.other_repeats.len(),
        recovery = f.recovery_ms as f64 / 1000.0,
        outage = f.outage_worst_ms,
        p99 = f.after_p99_ms,
        after = f.after_worst_ms,
        acked = f.acked,
        acked_lost = f.acked_lost.len(),
        acked_repeats = f.acked_repeats.len(),
        answers = creates.answers,
        odd = if creates.odd.is_empty() { String::new() } else { format!("; odd answers: {:?}", creates.odd) },
    );
    assert_eq!(f.lost, 0, "no fire lost");
    assert!(f.other_repeats.is_empty(), "repeats only in flight at the kill: {:?}", f.other_repeats);
    assert!(f.acked_lost.is_empty(), "acknowledged creates lost: {:?}", f.acked_lost);
    assert!(f.acked_repeats.is_empty(), "acknowledged creates fired twice: {:?}", f.acked_repeats);
    assert!(
        creates.answers.keys().all(|s| [0, 200, 503].contains(s)),
        "createTimer answers 200, or 503 while no primary: {:?} {:?}",
        creates.answers,
        creates.odd
    );
    assert!(f.recovery_ms < (secs - kill_at_s) * 1000, "fires on time again before the window's end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_patroni_multi_host_url() {
    failover(Setup::Patroni).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_patroni_haproxy() {
    failover(Setup::PatroniHaproxy).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_galera() {
    failover(Setup::Galera).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_redis_sentinel() {
    failover(Setup::Sentinel).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_redis_cluster() {
    failover(Setup::Cluster).await
}

#[test]
fn the_count_excuses_repeats_in_flight_at_the_kill_only_and_measures_the_recovery() {
    let hit = |key: String, run_ms: i64, late_ms: i64| Hit {
        key,
        run_ms,
        arrival_us: (run_ms + late_ms) * 1000,
        method: axum::http::Method::POST,
        uri: "/hook".parse().unwrap(),
        headers: None,
        body: Default::default(),
    };
    let (start, killed, end) = (100_000, 110_500, 130_000);
    let mut hits = Vec::new();
    for run in (start..end).step_by(1000) {
        // Late from the kill until 118 s, on time after.
        let late = if (killed..118_000).contains(&run) { 4_000 } else { 20 };
        if run != 125_000 {
            hits.push(hit(format!("7_{run}"), run, late));
        }
    }
    hits.push(hit("7_109000".into(), 109_000, 900)); // in flight at the kill
    hits.push(hit("7_120000".into(), 120_000, 30)); // not in flight
    hits.push(hit("9_112000".into(), 112_000, 10)); // an acknowledged one-shot
    let f = count(&hits, &[7], start, end, killed, &[(9, 112_000, 109_600), (11, 113_000, 110_000)]);
    assert_eq!((f.expected, f.lost, f.in_flight_repeats), (30, 1, 1));
    assert_eq!(f.other_repeats, ["7_120000"]);
    // The lost fire at 125 s is infinitely late: on time only from 126 s.
    assert_eq!(f.recovery_ms, 126_000 - killed);
    let on_time: Vec<Hit> = (start..end).step_by(1000).map(|run| hit(format!("7_{run}"), run, 20)).collect();
    assert_eq!(count(&on_time, &[7], start, end, killed, &[]).recovery_ms, 0, "none late: no outage");
    assert_eq!((f.acked, f.acked_lost.as_slice(), f.acked_repeats.len()), (2, &[11][..], 0));
}
