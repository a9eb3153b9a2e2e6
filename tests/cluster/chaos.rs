//! The chaos run ("nemesis"): a cluster of nodes on a database (PostgreSQL,
//! or MariaDB for MySQL) and Redis under a steady load of per-second cron
//! timers, while faults follow one another: a node killed with SIGKILL and
//! restarted, a node paused with SIGSTOP, a node cut from the database, a
//! node cut from Redis (silently: a fault proxy stops forwarding, sockets
//! stay open), Redis restarted (its data lost) and the database restarted;
//! and one node runs with its clock skewed (libfaketime). Every fire of
//! the measured window is counted from what the receiver got: expected,
//! delivered, lost, duplicated (in flight at a fault, or elsewhere), and
//! lateness. RELIABILITY.md has the figures.
//!
//! Each node reaches the database and Redis through a fault proxy of its
//! own (`proxy.rs`), so a fault can cut one node's link and nothing else.
//! The nodes run with the product's default settings (only the listen
//! address, the URLs and the log level are set; `XTIMER_SECTION__FIELD`
//! variables of the environment reach them, and the summary lists them).
//! The defaults below are the short run of CI, once per stack;
//! `scripts/chaos` runs the full one (5 minutes at 2,000 fires/s, release
//! build). CI also runs a short pause-only run on PostgreSQL + Redis
//! ([`Settings::pauses`]: five SIGSTOPs of 3 s, at 0.1, 0.3, 0.5, 0.7 and
//! 0.9 s into their second; `scripts/chaos --pauses`), which reads only
//! `XTIMER_CHAOS_SEED` and `XTIMER_CHAOS_LOGS` (its logs in `<stack>-pauses/`).
//!
//! A pause starts at a chosen offset into a wall-clock second (the window
//! starts on a whole second; successive pauses cycle through
//! `XTIMER_CHAOS_PAUSE_OFFSETS_MS`), so a run sees the node stopped while it
//! sends a second's fires, just after, and while it holds the next
//! second's claims. A duplicate counts as in flight at a pause only if its
//! first copy reached the receiver before the SIGSTOP took effect (see
//! [`Event::in_flight`]). Settings, from the environment:
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `XTIMER_CHAOS_SECS` | 110 | length of the measured window, s |
//! | `XTIMER_CHAOS_RATE` | 300 | fires per second: as many per-second cron timers |
//! | `XTIMER_CHAOS_NODES` | 3 | nodes |
//! | `XTIMER_CHAOS_FAULTS` | `pause,kill,db-cut,redis-cut,db-restart,redis-restart` | the faults, in order, repeated while the window lasts (also `db-reset`, `redis-reset`: cuts with resets) |
//! | `XTIMER_CHAOS_GAP_MS` | 8000 | time from a fault's end to the next one's start |
//! | `XTIMER_CHAOS_NODE_DOWN_MS` | 5000 | how long a killed node stays down |
//! | `XTIMER_CHAOS_PAUSE_MS` | 10000 | how long a node stays stopped (SIGSTOP .. SIGCONT) |
//! | `XTIMER_CHAOS_PAUSE_OFFSETS_MS` | `100,300,500,700,900` | where in a wall-clock second each pause starts, ms (0..999), comma-separated, cycled over the run's pauses |
//! | `XTIMER_CHAOS_CUT_MS` | 10000 | how long a node stays cut from the database or Redis |
//! | `XTIMER_CHAOS_OUTAGE_MS` | 3000 | how long Redis and the database stay down |
//! | `XTIMER_CHAOS_SKEW` | `-2s` (PostgreSQL), `+2s` (MariaDB) | clock offsets of nodes 1, 2, … (libfaketime), comma-separated; `none`: none |
//! | `XTIMER_CHAOS_APP_TIMERS` | 10 | timers per app |
//! | `XTIMER_CHAOS_CREATE_CONCURRENCY` | 16 | `createTimer` calls in flight |
//! | `XTIMER_CHAOS_SETTLE_SECS` | 180 | longest wait after the window for every fire to end |
//! | `XTIMER_CHAOS_SEED` | from the clock | seed of the choice of nodes to kill |
//! | `XTIMER_CHAOS_LOGS` | none | folder for the nodes' logs (`<stack>/node0.log`, …) |

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sqlx::Row;
use xtimer::receiver::{Hit, Receiver};

use crate::nodes::ProcNode;
use crate::proxy::Proxy;
use crate::servers::{free_port, Mariadb, Postgres, Redis};

/// A fire due from this long before a kill or a cut from the database up
/// to [`IN_FLIGHT_AFTER_MS`] after it counts as in flight at it (claimed,
/// or sent with its result not yet written), and may come twice. At a
/// pause, one due from this long before it counts only if its first copy
/// arrived before the pause began (see [`Event::in_flight`]).
const IN_FLIGHT_BEFORE_MS: i64 = 5_000;
/// See [`IN_FLIGHT_BEFORE_MS`]: fires are claimed up to
/// `trigger.claim_ahead_ms` and a tenth (550 ms) ahead of their time and
/// held in memory. (Not for a pause: a stopped node sends nothing, so a
/// fire it held unsent must not come twice once it continues.)
const IN_FLIGHT_AFTER_MS: i64 = 1_000;
/// Fires due from [`IN_FLIGHT_BEFORE_MS`] before a fault starts to this
/// long after it ends (a node back, a link healed, a server back) are the
/// fault's: its figures in the summary, and left out of the "calm"
/// lateness figures.
const CALM_AFTER_MS: i64 = 10_000;
/// How long before a pause's planned millisecond its victim is chosen
/// (the nodes endpoint asked), ms, so the SIGSTOP leaves on time.
const CHOOSE_AHEAD_MS: i64 = 500;
/// A fire this late (ms) is listed in the summary's runs of late seconds.
const LATE_MS: f64 = 1_000.0;
/// Time between the last timer created and the window's start.
const WARM_UP_MS: i64 = 5_000;
/// No fault ends in the window's last so many seconds.
const QUIET_END_SECS: i64 = 15;
/// The faults of one cycle, in order (`XTIMER_CHAOS_FAULTS`). The Redis
/// restart comes last: the fires it takes out of the index come late (the
/// reconciler's grace) for up to two minutes, which would blur the
/// lateness of the faults after it.
const DEFAULT_FAULTS: &str = "pause,kill,db-cut,redis-cut,db-restart,redis-restart";
/// Where in a wall-clock second successive pauses start, ms
/// (`XTIMER_CHAOS_PAUSE_OFFSETS_MS`), cycled: just after a second's fires
/// leave, while they are answered, and while the next second's are claimed
/// and held.
const DEFAULT_PAUSE_OFFSETS_MS: &str = "100,300,500,700,900";

/// One chaos or failover run at a time in this process (they would
/// otherwise share the machine).
pub(crate) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

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

/// A comma-separated list of offsets into a second, ms (0..999), not empty.
fn parse_offsets(name: &str, list: &str) -> Vec<i64> {
    let offsets: Vec<i64> = list
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|o| o.parse().unwrap_or_else(|_| panic!("{name}: cannot parse `{o}`")))
        .collect();
    assert!(
        !offsets.is_empty() && offsets.iter().all(|o| (0..1000).contains(o)),
        "{name}: offsets into a second, 0 to 999 ms, comma-separated, not `{list}`"
    );
    offsets
}

/// The database of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    /// PostgreSQL + Redis.
    Postgres,
    /// MariaDB (for MySQL) + Redis.
    Mysql,
}

impl Stack {
    fn name(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
        }
    }

    fn database(self) -> &'static str {
        match self {
            Self::Postgres => "PostgreSQL",
            Self::Mysql => "MariaDB",
        }
    }

    /// The skew of the short run: behind on one stack, ahead on the other.
    fn default_skew(self) -> &'static str {
        match self {
            Self::Postgres => "-2s",
            Self::Mysql => "+2s",
        }
    }
}

/// The settings of one run (see the module's table).
#[derive(Debug, Clone)]
struct Settings {
    /// What the run is, for the summary: "chaos", "pauses".
    title: &'static str,
    secs: i64,
    rate: usize,
    nodes: usize,
    faults: Vec<Kind>,
    gap_ms: i64,
    node_down_ms: u64,
    pause_ms: u64,
    /// Where in a wall-clock second successive pauses start, ms, cycled.
    pause_offsets_ms: Vec<i64>,
    cut_ms: u64,
    outage_ms: u64,
    /// Clock offsets (libfaketime's `FAKETIME`) of nodes 1, 2, ….
    skew: Vec<String>,
    app_timers: usize,
    create_concurrency: usize,
    settle_secs: i64,
    seed: u64,
    logs: Option<std::path::PathBuf>,
}

impl Settings {
    /// Reads the `XTIMER_CHAOS_*` variables; panics on one it cannot parse.
    fn from_env(stack: Stack) -> Self {
        let clock_seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        let faults = std::env::var("XTIMER_CHAOS_FAULTS").unwrap_or_else(|_| DEFAULT_FAULTS.into());
        let faults = faults
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| Kind::parse(f).unwrap_or_else(|| panic!("XTIMER_CHAOS_FAULTS: no fault `{f}`")))
            .collect();
        let skew = std::env::var("XTIMER_CHAOS_SKEW").unwrap_or_else(|_| stack.default_skew().into());
        let skew = match skew.trim() {
            "" | "none" => Vec::new(),
            list => list.split(',').map(|o| o.trim().to_string()).collect(),
        };
        let offsets =
            std::env::var("XTIMER_CHAOS_PAUSE_OFFSETS_MS").unwrap_or_else(|_| DEFAULT_PAUSE_OFFSETS_MS.into());
        let s = Self {
            title: "chaos",
            secs: env_or("XTIMER_CHAOS_SECS", 110),
            rate: env_or("XTIMER_CHAOS_RATE", 300),
            nodes: env_or("XTIMER_CHAOS_NODES", 3),
            faults,
            gap_ms: env_or("XTIMER_CHAOS_GAP_MS", 8_000),
            node_down_ms: env_or("XTIMER_CHAOS_NODE_DOWN_MS", 5_000),
            pause_ms: env_or("XTIMER_CHAOS_PAUSE_MS", 10_000),
            pause_offsets_ms: parse_offsets("XTIMER_CHAOS_PAUSE_OFFSETS_MS", &offsets),
            cut_ms: env_or("XTIMER_CHAOS_CUT_MS", 10_000),
            outage_ms: env_or("XTIMER_CHAOS_OUTAGE_MS", 3_000),
            skew,
            app_timers: env_or("XTIMER_CHAOS_APP_TIMERS", 10),
            create_concurrency: env_or("XTIMER_CHAOS_CREATE_CONCURRENCY", 16),
            settle_secs: env_or("XTIMER_CHAOS_SETTLE_SECS", 180),
            seed: env_or("XTIMER_CHAOS_SEED", clock_seed % 1_000_000),
            logs: std::env::var_os("XTIMER_CHAOS_LOGS").map(|d| std::path::PathBuf::from(d).join(stack.name())),
        };
        s.check();
        s
    }

    /// The pause-only run of CI: five SIGSTOPs of 3 s (the heartbeat's
    /// `reconciler.node_timeout_ms`: the peers may take the stopped node's
    /// claims over just before it continues) of the node holding the most
    /// shards, at 0.1, 0.3, 0.5, 0.7 and 0.9 s into their second, 6 s apart,
    /// under 300 fires/s on three nodes with the product's defaults and true
    /// clocks: about 100 s in all. Reads only `XTIMER_CHAOS_SEED` and
    /// `XTIMER_CHAOS_LOGS` (its logs in `<stack>-pauses/`).
    fn pauses(stack: Stack) -> Self {
        let clock_seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        let s = Self {
            title: "pauses",
            secs: 62,
            rate: 300,
            nodes: 3,
            faults: vec![Kind::Pause],
            gap_ms: 6_000,
            node_down_ms: 5_000,
            pause_ms: 3_000,
            pause_offsets_ms: parse_offsets("pause offsets", DEFAULT_PAUSE_OFFSETS_MS),
            cut_ms: 10_000,
            outage_ms: 3_000,
            skew: Vec::new(),
            app_timers: 10,
            create_concurrency: 16,
            settle_secs: 60,
            seed: env_or("XTIMER_CHAOS_SEED", clock_seed % 1_000_000),
            logs: std::env::var_os("XTIMER_CHAOS_LOGS")
                .map(|d| std::path::PathBuf::from(d).join(format!("{}-pauses", stack.name()))),
        };
        s.check();
        s
    }

    /// Panics on settings that cannot make a run.
    fn check(&self) {
        let s = self;
        assert!(s.secs >= 30 && s.rate >= 1 && s.nodes >= 2 && s.gap_ms >= 0, "settings: {s:?}");
        assert!(s.app_timers >= 1 && s.create_concurrency >= 1);
        assert!(
            s.skew.len() < s.nodes,
            "XTIMER_CHAOS_SKEW: node 0 keeps the true clock: at most {} offsets",
            s.nodes - 1
        );
        for offset in &s.skew {
            assert!(
                offset.starts_with(['+', '-']) && offset.len() > 1,
                "XTIMER_CHAOS_SKEW: `{offset}` is not a relative offset such as -2s or +2s"
            );
        }
    }

    /// How long a fault is planned to last, ms (a killed node's restart
    /// and a server's start included).
    fn duration_ms(&self, kind: Kind) -> i64 {
        (match kind {
            Kind::Kill => self.node_down_ms + 2_000,
            Kind::Pause => self.pause_ms,
            Kind::DbCut | Kind::RedisCut | Kind::DbReset | Kind::RedisReset => self.cut_ms,
            Kind::RedisRestart | Kind::DbRestart => self.outage_ms + 1_000,
        }) as i64
    }
}

/// What a planned fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    /// `kill -9` of a random node, then its restart on the same port.
    Kill,
    /// SIGSTOP of the node holding the most shards, SIGCONT after `pause_ms`.
    Pause,
    /// The node holding the most shards cut from the database (silently) for `cut_ms`.
    DbCut,
    /// The node holding the most shards cut from Redis (silently) for `cut_ms`.
    RedisCut,
    /// The node holding the most shards cut from the database with resets
    /// (every connection reset, new ones refused) for `cut_ms`. Not in the
    /// default cycle.
    DbReset,
    /// The same, from Redis. Not in the default cycle.
    RedisReset,
    /// Redis killed (no persistence: every key lost) and started again.
    RedisRestart,
    /// The database stopped (connections cut) and started again.
    DbRestart,
}

impl Kind {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "kill" => Self::Kill,
            "pause" => Self::Pause,
            "db-cut" => Self::DbCut,
            "redis-cut" => Self::RedisCut,
            "db-reset" => Self::DbReset,
            "redis-reset" => Self::RedisReset,
            "redis-restart" => Self::RedisRestart,
            "db-restart" => Self::DbRestart,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Kill => "kill -9",
            Self::Pause => "SIGSTOP",
            Self::DbCut => "cut from the database",
            Self::RedisCut => "cut from Redis",
            Self::DbReset => "cut from the database with resets",
            Self::RedisReset => "cut from Redis with resets",
            Self::RedisRestart => "Redis restart",
            Self::DbRestart => "database restart",
        }
    }

    /// Whether fires in flight when it starts may come twice: a node that
    /// died, stopped, or cannot write their results, had them claimed or
    /// sent (a stopped one: only those it had sent; see [`Event::in_flight`]).
    fn allows_in_flight_duplicates(self) -> bool {
        matches!(self, Self::Kill | Self::Pause | Self::DbCut | Self::DbReset)
    }
}

/// The plan, as (ms into the window, kind), in order: `faults` over and
/// over, each starting `gap_ms` after the previous one's planned end, the
/// first `gap_ms` into the window; none ends in the last [`QUIET_END_SECS`].
/// A pause starts on the next of `pause_offsets_ms` into a second (the
/// window starts on a whole second, so that is also its offset into a
/// wall-clock second), successive pauses taking the offsets in turn: up to
/// a second later than `gap_ms` after the previous fault.
fn plan(s: &Settings) -> Vec<(i64, Kind)> {
    let last = (s.secs - QUIET_END_SECS) * 1000;
    let mut events = Vec::new();
    let mut t = s.gap_ms.max(IN_FLIGHT_BEFORE_MS);
    if s.faults.is_empty() {
        return events;
    }
    let mut pauses = 0;
    for &kind in s.faults.iter().cycle() {
        let at = if kind == Kind::Pause {
            let offset = s.pause_offsets_ms[pauses % s.pause_offsets_ms.len()];
            let at = t - t.rem_euclid(1000) + offset;
            if at < t {
                at + 1000
            } else {
                at
            }
        } else {
            t
        };
        let end = at + s.duration_ms(kind);
        if end > last {
            break;
        }
        events.push((at, kind));
        pauses += usize::from(kind == Kind::Pause);
        t = end + s.gap_ms;
    }
    events
}

/// A fault as it happened.
#[derive(Debug, Clone)]
struct Event {
    kind: Kind,
    /// When the node was killed, stopped or cut, or the server stopped, ms
    /// (for a pause: just before the SIGSTOP was sent).
    start_ms: i64,
    /// A pause: when the SIGSTOP had been delivered (`kill -STOP` returned),
    /// Unix µs; a copy that reached the receiver before then had been sent
    /// before the node stood still. Other faults: `start_ms` in µs.
    stopped_us: i64,
    /// When it was back (answering, continued, healed), ms.
    end_ms: i64,
    label: String,
}

impl Event {
    /// Whether a fire due at `run` whose first copy reached the receiver at
    /// `first_us` (Unix µs) was in flight when the fault started and may
    /// come twice. A kill or a cut from the database: a fire due from
    /// [`IN_FLIGHT_BEFORE_MS`] before the start to [`IN_FLIGHT_AFTER_MS`]
    /// after it (claimed, or sent with its result not yet written: a dead
    /// node's claims are taken over, a cut node cannot write its results).
    /// A pause: only a fire due from [`IN_FLIGHT_BEFORE_MS`] before it
    /// whose first copy arrived before the node stood still: it was sent,
    /// and the node may resend a request its own stall cut short, or a peer
    /// may take over a fire whose result the stopped node had not written.
    /// A fire the stopped node held but had not sent must not come twice:
    /// it sends nothing while stopped, so one copy is a peer's takeover and
    /// the other the node sending, after SIGCONT, a claim it no longer holds.
    fn in_flight(&self, run: i64, first_us: i64) -> bool {
        match self.kind {
            Kind::Pause => run >= self.start_ms - IN_FLIGHT_BEFORE_MS && first_us < self.stopped_us,
            kind => {
                kind.allows_in_flight_duplicates()
                    && (-IN_FLIGHT_BEFORE_MS..=IN_FLIGHT_AFTER_MS).contains(&(run - self.start_ms))
            }
        }
    }

    /// Whether a fire due at `run` is the fault's (see [`CALM_AFTER_MS`]).
    fn spans(&self, run: i64) -> bool {
        run >= self.start_ms - IN_FLIGHT_BEFORE_MS && run <= self.end_ms + CALM_AFTER_MS
    }
}

/// A node slot: its port, proxies and clock survive restarts.
struct Slot {
    port: u16,
    node: Option<ProcNode>,
    restarts: usize,
    /// Between the node and the database.
    db_proxy: Proxy,
    /// Between the node and Redis.
    redis_proxy: Proxy,
    /// libfaketime's variables, for a skewed node.
    env: Vec<(String, String)>,
    /// Its clock offset, if skewed (`-2s`).
    skew: Option<String>,
}

/// The environment that runs a node under libfaketime with its clock
/// `offset` (`-2s`, `+2s`) from the true one, still running: what Debian's
/// `faketime --exclude-monotonic -f -2s xtimer serve` sets, without the
/// `faketime` process in between (so the node's pid is the process the run
/// kills and stops). The monotonic clock stays true, as on a host whose
/// wall clock is off.
fn faketime_env(offset: &str) -> Vec<(String, String)> {
    let lib = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("faketime/libfaketime.so.1"))
        .chain([std::path::PathBuf::from("/usr/lib/faketime/libfaketime.so.1")])
        .chain([std::path::PathBuf::from("/usr/local/lib/faketime/libfaketime.so.1")])
        .find(|p| p.exists())
        .expect("libfaketime (apt-get install faketime), or XTIMER_CHAOS_SKEW=none");
    vec![
        ("LD_PRELOAD".into(), lib.display().to_string()),
        ("FAKETIME".into(), offset.into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

/// Starts a node on `port`, trying three times.
async fn start_node(
    s: &Settings,
    i: usize,
    slot: (u16, &Proxy, &Proxy, &[(String, String)]),
    db: &str,
    redis: &str,
) -> ProcNode {
    let (port, db_proxy, redis_proxy, env) = slot;
    let log = s.logs.as_ref().map(|dir| dir.join(format!("node{i}.log")));
    let (db, redis) = (db_proxy.url_for(db), redis_proxy.url_for(redis));
    for _ in 0..3 {
        if let Some(node) = ProcNode::start_at(port, &db, &redis, env, log.as_deref()).await {
            return node;
        }
    }
    panic!("node {i} did not start on port {port} (a node under libfaketime that crashes at start?)");
}

/// `host:port` of a server's URL.
fn url_addr(url: &str) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port.parse().unwrap_or_else(|_| panic!("{url}: not host:port"))
}

/// The throwaway database server of a run.
enum Db {
    Postgres(Postgres),
    Mysql(Mariadb),
}

impl Db {
    fn start(stack: Stack) -> Self {
        match stack {
            Stack::Postgres => Self::Postgres(Postgres::start()),
            Stack::Mysql => Self::Mysql(Mariadb::start()),
        }
    }

    fn url(&self) -> &str {
        match self {
            Self::Postgres(db) => &db.url,
            Self::Mysql(db) => &db.url,
        }
    }

    /// Stops the server, waits `down`, starts it again. Blocks.
    fn restart(&self, down: Duration) {
        match self {
            Self::Postgres(db) => db.restart(down),
            Self::Mysql(db) => db.restart(down),
        }
    }

    async fn pool(&self) -> Pool {
        match self {
            Self::Postgres(db) => Pool::Postgres(sqlx::PgPool::connect(&db.url).await.expect("PostgreSQL")),
            Self::Mysql(db) => Pool::Mysql(sqlx::MySqlPool::connect(&db.url).await.expect("MariaDB")),
        }
    }
}

/// The test's own connections to the database (direct, not through a proxy).
enum Pool {
    Postgres(sqlx::PgPool),
    Mysql(sqlx::MySqlPool),
}

impl Pool {
    /// Rows of two columns (a text, a number) of `sql`, in either dialect,
    /// with `$1`/`$2` (PostgreSQL) or `?` (MySQL) bound to `a`, `b` (and `c`).
    async fn rows(&self, pg: &str, my: &str, binds: &[i64]) -> sqlx::Result<Vec<(String, i64)>> {
        match self {
            Self::Postgres(pool) => {
                let mut q = sqlx::query(pg);
                for b in binds {
                    q = q.bind(*b);
                }
                let rows = q.fetch_all(pool).await?;
                Ok(rows
                    .iter()
                    .map(|r| (r.try_get::<Option<String>, _>(0).ok().flatten().unwrap_or_default(), r.get::<i64, _>(1)))
                    .collect())
            }
            Self::Mysql(pool) => {
                let mut q = sqlx::query(my);
                for b in binds {
                    q = q.bind(*b);
                }
                let rows = q.fetch_all(pool).await?;
                // Unchecked: MySQL reports byte-compared (`_bin`) text as binary.
                Ok(rows
                    .iter()
                    .map(|r| {
                        (
                            r.try_get_unchecked::<Option<String>, _>(0).ok().flatten().unwrap_or_default(),
                            r.get::<i64, _>(1),
                        )
                    })
                    .collect())
            }
        }
    }

    /// Fires of the window in the database, by status name.
    async fn statuses(&self, start: i64, end: i64) -> sqlx::Result<BTreeMap<&'static str, i64>> {
        let rows = self
            .rows(
                "SELECT status::TEXT, count(*)::BIGINT FROM t_timer_task \
                 WHERE run_timer >= $1 AND run_timer < $2 GROUP BY status",
                "SELECT CAST(status AS CHAR), CAST(count(*) AS SIGNED) FROM t_timer_task \
                 WHERE run_timer >= ? AND run_timer < ? GROUP BY status",
                &[start, end],
            )
            .await?;
        let name = |s: &str| match s {
            "0" => "pending",
            "1" => "running",
            "2" => "succeeded",
            "3" => "failed",
            "4" => "skipped",
            "5" => "missed",
            _ => "other",
        };
        let mut out = BTreeMap::new();
        for (status, n) in rows {
            *out.entry(name(&status)).or_default() += n;
        }
        Ok(out)
    }

    /// Which nodes wrote the final result of the fires due in [`from`,
    /// `to`], as "node xN" pairs.
    async fn owners(&self, from: i64, to: i64, names: &HashMap<u32, String>) -> String {
        let rows = self
            .rows(
                "SELECT COALESCE(owner, ''), count(*)::BIGINT FROM t_timer_task \
                 WHERE run_timer >= $1 AND run_timer <= $2 GROUP BY 1",
                "SELECT CAST(COALESCE(owner, '') AS CHAR), CAST(count(*) AS SIGNED) FROM t_timer_task \
                 WHERE run_timer >= ? AND run_timer <= ? GROUP BY 1",
                &[from, to],
            )
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => return format!("query failed: {e}"),
        };
        let mut by_node: BTreeMap<String, i64> = BTreeMap::new();
        for (owner, n) in rows {
            // `{host}-{pid}-{suffix}:{n}`
            let node = owner.rsplit_once(':').map_or(owner.as_str(), |(n, _)| n);
            *by_node.entry(node_name(node, names)).or_default() += n;
        }
        let mut by_node: Vec<_> = by_node.into_iter().collect();
        by_node.sort_by_key(|(_, n)| -n);
        by_node.iter().map(|(name, n)| format!("{name} x{n}")).collect::<Vec<_>>().join(", ")
    }

    /// A fire's row: "status N, attempt N, owner, output".
    async fn fire(&self, timer: i64, run: i64) -> String {
        let rows = self
            .rows(
                "SELECT 'status ' || status || ', attempt ' || attempt || ', owner `' || COALESCE(owner, '') \
                 || '`, output `' || output || '`', 0::BIGINT FROM t_timer_task WHERE timer_id = $1 AND run_timer = $2",
                "SELECT CONCAT('status ', status, ', attempt ', attempt, ', owner `', COALESCE(owner, ''), \
                 '`, output `', output, '`'), CAST(0 AS SIGNED) FROM t_timer_task WHERE timer_id = ? AND run_timer = ?",
                &[timer, run],
            )
            .await;
        match rows {
            Ok(rows) => rows.into_iter().next().map(|(r, _)| r).unwrap_or_else(|| "no row".into()),
            Err(e) => format!("query failed: {e}"),
        }
    }
}

/// A node's id (`{host}-{pid}-{suffix}`) as the run names it ("node 1",
/// "node 0 (restart 1)"), else as it is.
fn node_name(node: &str, names: &HashMap<u32, String>) -> String {
    let pid = node.rsplit('-').nth(1).and_then(|p| p.parse::<u32>().ok());
    pid.and_then(|p| names.get(&p)).cloned().unwrap_or_else(|| node.to_string())
}

/// A fire's claims and attempts as `explainFire` (asked of the first node
/// of `bases` that answers) reports them, the nodes named as the run names
/// them: "claims: node 0 at …, node 2 at … (taken over from node 0);
/// attempts: 1 by node 2 sent … answered … succeeded".
async fn explain(bases: &[String], timer: i64, app: &str, run: i64, names: &HashMap<u32, String>) -> String {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut last = String::from("no node");
    for base in bases {
        let url = format!("{base}/api/xtimer/explainFire?id={timer}&app={app}&runTimer={run}");
        let reply = match http.get(url).send().await {
            Ok(r) => r.json::<Value>().await,
            Err(e) => Err(e),
        };
        let v = match reply {
            Ok(v) if v["code"] == 0 => v,
            Ok(v) => {
                last = v.to_string();
                continue;
            }
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        let r = &v["result"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let name = |v: &Value| node_name(v.as_str().unwrap_or("?"), names);
        let claims: Vec<String> = r["claims"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let from = if c["takenOverFrom"].is_string() {
                    format!(" (taken over from {})", name(&c["takenOverFrom"]))
                } else {
                    String::new()
                };
                format!("{} at {}{from}", name(&c["node"]), text(&c["at"]))
            })
            .collect();
        let attempts: Vec<String> = r["attempts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                format!(
                    "{} by {} sent {} answered {} {} {}",
                    a["attempt"],
                    name(&a["node"]),
                    text(&a["sentAt"]),
                    text(&a["answeredAt"]),
                    a["httpStatus"],
                    text(&a["outcome"])
                )
            })
            .collect();
        return format!(
            "explainFire: claims: {}; attempts: {}; verdict: {}",
            claims.join(", "),
            attempts.join(", "),
            text(&r["verdict"])
        );
    }
    format!("explainFire: {last}")
}

/// Creates `n` per-second cron timers calling `url`, `app_timers` per app
/// (`chaos-0`, `chaos-1`, …), `concurrency` calls at once spread over
/// `bases`; returns their ids, in order, and each one's app. Consecutive
/// timers go to different apps, so concurrent calls do not queue on one
/// app's lock.
pub(crate) async fn create_timers(
    bases: &[String],
    url: &str,
    n: usize,
    app_timers: usize,
    concurrency: usize,
) -> (Vec<i64>, HashMap<i64, String>) {
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
                let app = format!("chaos-{}", i % apps);
                let body = json!({
                    "app": app, "name": format!("t{i}"),
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
                ids.push((id, app));
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
    (ids.iter().map(|(id, _)| *id).collect(), ids.into_iter().collect())
}

/// The node holding the most shards, as (slot, shards held), from the
/// nodes endpoint of any node that answers; `None` if none does.
async fn most_shards(slots: &[Slot]) -> Option<(usize, u64)> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
    for slot in slots.iter().filter(|s| s.node.is_some()) {
        let Ok(reply) = http.get(format!("http://127.0.0.1:{}/api/xtimer/nodes", slot.port)).send().await else {
            continue;
        };
        let Ok(reply) = reply.json::<Value>().await else { continue };
        let Some(list) = reply["result"]["list"].as_array() else { continue };
        let held = |i: usize| {
            let me = format!("127.0.0.1:{}", slots[i].port);
            list.iter()
                .filter(|n| n["listen"] == me.as_str())
                .filter_map(|n| n["shardsHeld"].as_u64())
                .max()
                .unwrap_or(0)
        };
        return (0..slots.len())
            .filter(|&i| slots[i].node.is_some())
            .map(|i| (i, held(i)))
            .max_by_key(|&(i, h)| (h, std::cmp::Reverse(i)));
    }
    None
}

/// The shards each node holds, as the nodes endpoint of the first node
/// (of `ports`) that answers within 2 s reports them: "node 0: 5 (heartbeat
/// 0.4 s old), …".
async fn shards_by_node(ports: &[u16]) -> String {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
    for port in ports {
        let Ok(reply) = http.get(format!("http://127.0.0.1:{port}/api/xtimer/nodes")).send().await else { continue };
        let Ok(reply) = reply.json::<Value>().await else { continue };
        let Some(list) = reply["result"]["list"].as_array() else { continue };
        let mut out = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let me = format!("127.0.0.1:{p}");
            for n in list.iter().filter(|n| n["listen"] == me.as_str()) {
                out.push(format!(
                    "node {i}: {} (heartbeat {:.1} s old)",
                    n["shardsHeld"].as_u64().unwrap_or(0),
                    n["heartbeatAgeMs"].as_i64().unwrap_or(0) as f64 / 1000.0
                ));
            }
        }
        return format!("{} (as node on port {port} sees it)", out.join(", "));
    }
    "no node answered".into()
}

/// Parses an `Idempotency-Key` (`{timer_id}_{run_ms}`).
pub(crate) fn parse_key(key: &str) -> Option<(i64, i64)> {
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

/// The figures of the fires due in one fault's span (see [`Event::spans`]).
#[derive(Debug, Default, Clone)]
struct EventFigures {
    expected: usize,
    lost: usize,
    /// Duplicates in flight at the fault's start (allowed).
    in_flight: usize,
    /// Other duplicates (defects).
    defects: usize,
    lateness: Lateness,
}

/// The figures of a run.
#[derive(Debug, Default)]
struct Report {
    expected: usize,
    delivered: usize,
    /// Fires never received, (timer, run).
    lost: Vec<(i64, i64)>,
    /// Fires received more than once: (timer, run, times, first and
    /// second arrival, Unix µs).
    duplicates: Vec<(i64, i64, u32, i64, i64)>,
    /// Duplicates in flight at a fault's start, by kind of fault.
    in_flight: BTreeMap<Kind, usize>,
    /// Requests whose `Idempotency-Key` does not match their
    /// `X-Xtimer-Run-Time`, or that name no fire of the run.
    inconsistent: usize,
    lateness_all: Lateness,
    lateness_calm: Lateness,
    /// Fires whose first arrival came before their time, and the earliest (ms, negative).
    early: usize,
    earliest: f64,
    /// Runs of consecutive seconds of the window in which some fire came
    /// more than [`LATE_MS`] late: (first run, last run, fires late, worst ms).
    late_runs: Vec<(i64, i64, usize, f64)>,
    /// Per fault, in the order of `events`.
    per_event: Vec<EventFigures>,
}

impl Report {
    /// Duplicates that no fault excuses.
    fn defects(&self, events: &[Event]) -> Vec<(i64, i64, u32, i64, i64)> {
        self.duplicates.iter().filter(|d| in_flight_at(events, d.1, d.3).is_none()).copied().collect()
    }
}

/// The fault a fire due at `run`, first received at `first_us`, was in
/// flight at, if any (see [`Event::in_flight`]).
fn in_flight_at(events: &[Event], run: i64, first_us: i64) -> Option<&Event> {
    events.iter().find(|e| e.in_flight(run, first_us))
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
    let calm = |run: i64| !events.iter().any(|e| e.spans(run));
    let mut report = Report {
        expected: ids.len() * ((end - start) / 1000) as usize,
        inconsistent,
        per_event: vec![EventFigures::default(); events.len()],
        ..Default::default()
    };
    let mut per_event_lateness: Vec<Vec<f64>> = vec![Vec::new(); events.len()];
    let (mut all, mut quiet) = (Vec::with_capacity(seen.len()), Vec::new());
    // second -> (fires late, worst lateness)
    let mut late: BTreeMap<i64, (usize, f64)> = BTreeMap::new();
    for &timer in ids {
        for run in (start..end).step_by(1000) {
            let spans: Vec<usize> = (0..events.len()).filter(|&i| events[i].spans(run)).collect();
            for &i in &spans {
                report.per_event[i].expected += 1;
            }
            let Some(&(times, first_us, second_us)) = seen.get(&(timer, run)) else {
                report.lost.push((timer, run));
                for &i in &spans {
                    report.per_event[i].lost += 1;
                }
                continue;
            };
            report.delivered += 1;
            let late_ms = |us: i64| (us - run * 1000) as f64 / 1000.0;
            if times > 1 {
                report.duplicates.push((timer, run, times, first_us, second_us));
                let excused = in_flight_at(events, run, first_us);
                if let Some(e) = excused {
                    *report.in_flight.entry(e.kind).or_default() += 1;
                }
                for &i in &spans {
                    if events[i].in_flight(run, first_us) {
                        report.per_event[i].in_flight += 1;
                    } else if excused.is_none() {
                        report.per_event[i].defects += 1;
                    }
                }
            }
            let ms = late_ms(first_us);
            all.push(ms);
            if ms < 0.0 {
                report.early += 1;
                report.earliest = report.earliest.min(ms);
            }
            if calm(run) {
                quiet.push(ms);
            }
            for &i in &spans {
                per_event_lateness[i].push(ms);
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
    for (figures, lateness) in report.per_event.iter_mut().zip(per_event_lateness) {
        figures.lateness = Lateness::of(lateness);
    }
    report.lateness_all = Lateness::of(all);
    report.lateness_calm = Lateness::of(quiet);
    report
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

/// The chaos run on PostgreSQL + Redis (see the module documentation).
// The lock only keeps the two runs (each on its own runtime) apart.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_postgres_and_redis_loses_no_fire() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    chaos(Stack::Postgres, Settings::from_env(Stack::Postgres)).await;
}

/// The chaos run on MariaDB (for MySQL) + Redis.
// The lock only keeps the two runs (each on its own runtime) apart.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_mysql_and_redis_loses_no_fire() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    chaos(Stack::Mysql, Settings::from_env(Stack::Mysql)).await;
}

/// The pause-only run on PostgreSQL + Redis ([`Settings::pauses`]): a node
/// stopped five times, 3 s each, at 0.1, 0.3, 0.5, 0.7 and 0.9 s into a
/// second, loses no fire and repeats none it had not sent before it stood
/// still.
// The lock only keeps the runs (each on its own runtime) apart.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_at_five_offsets_into_a_second_lose_and_repeat_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    chaos(Stack::Postgres, Settings::pauses(Stack::Postgres)).await;
}

/// One chaos run on `stack` with `s`. Prints a summary, then fails if a
/// fire was lost, a fire was repeated other than in flight at a kill, a
/// pause or a cut from the database, or a fire is still pending or running
/// after the settle time.
async fn chaos(stack: Stack, s: Settings) {
    if let Some(dir) = &s.logs {
        std::fs::create_dir_all(dir).expect("the log folder");
    }
    let db = Arc::new(Db::start(stack));
    let mut redis = Redis::start().await;
    let rx = Arc::new(Receiver::start(false).await.unwrap());
    let mut slots = Vec::new();
    // Process id -> "node i (start n)", to name the nodes in the database's owners.
    let mut names: HashMap<u32, String> = HashMap::new();
    for i in 0..s.nodes {
        let port = free_port();
        let db_proxy = Proxy::start(url_addr(db.url())).await;
        let redis_proxy = Proxy::start(url_addr(&redis.url)).await;
        let skew = i.checked_sub(1).and_then(|k| s.skew.get(k)).cloned();
        let env = skew.as_deref().map(faketime_env).unwrap_or_default();
        let node = start_node(&s, i, (port, &db_proxy, &redis_proxy, &env), db.url(), &redis.url).await;
        names.insert(node.pid(), format!("node {i}"));
        let clock = skew.as_ref().map(|o| format!(", clock {o} (libfaketime)")).unwrap_or_default();
        eprintln!(
            "node {i}: port {port}, pid {}, database via {}, Redis via {}{clock}",
            node.pid(),
            db_proxy.addr,
            redis_proxy.addr
        );
        slots.push(Slot { port, node: Some(node), restarts: 0, db_proxy, redis_proxy, env, skew });
    }
    let bases: Vec<String> = slots.iter().map(|n| format!("http://127.0.0.1:{}", n.port)).collect();
    let overrides: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("XTIMER_") && k.contains("__") && k != "XTIMER_REDIS__URL")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let planned = plan(&s);
    let skewed: Vec<String> =
        slots.iter().enumerate().filter_map(|(i, sl)| sl.skew.as_ref().map(|o| format!("node {i} {o}"))).collect();
    let skewed = if skewed.is_empty() { "no node".to_string() } else { skewed.join(", ") };
    eprintln!(
        "{} on {} + Redis: seed {}, {} nodes, {} per-second timers ({} per app), window {} s, faults {:?}, \
         {} ms apart (kill: down {} ms; pause {} ms, at {:?} ms into a second; cuts {} ms; \
         Redis and {} restarts: down {} ms); clocks skewed: {skewed}; node settings from the environment: {}",
        s.title,
        stack.database(),
        s.seed,
        s.nodes,
        s.rate,
        s.app_timers,
        s.secs,
        planned.iter().map(|(t, k)| format!("{} at +{:.1} s", k.name(), *t as f64 / 1000.0)).collect::<Vec<_>>(),
        s.gap_ms,
        s.node_down_ms,
        s.pause_ms,
        s.pause_offsets_ms,
        s.cut_ms,
        stack.database(),
        s.outage_ms,
        if overrides.is_empty() { "none (product defaults)".to_string() } else { overrides.join(" ") }
    );

    let t0 = Instant::now();
    let (ids, apps) = create_timers(&bases, &rx.url("/chaos"), s.rate, s.app_timers, s.create_concurrency).await;
    let create_s = t0.elapsed().as_secs_f64();
    eprintln!("created {} timers in {create_s:.1} s ({:.0}/s)", ids.len(), ids.len() as f64 / create_s);

    let start = (now_ms() + WARM_UP_MS) / 1000 * 1000 + 1000;
    let end = start + s.secs * 1000;
    let at = move |ms: i64| format!("+{:.1} s", (ms - start) as f64 / 1000.0);
    eprintln!("window {} .. {} ({} fires expected)", rfc3339(start), rfc3339(end), ids.len() as i64 * s.secs);

    // Progress, every 10 s of the window, with the shards each node
    // reports holding (from the nodes endpoint of the first that answers).
    let progress = {
        let (rx, ports) = (rx.clone(), slots.iter().map(|sl| sl.port).collect::<Vec<_>>());
        tokio::spawn(async move {
            let mut last = rx.count();
            let mut t = start;
            while t < end {
                t += 10_000;
                tokio::time::sleep(Duration::from_millis((t - now_ms()).max(0) as u64)).await;
                let n = rx.count();
                eprintln!(
                    "[+{} s] {} callbacks received, {}/s over the last 10 s; shards held: {}",
                    (t - start) / 1000,
                    n,
                    (n - last) / 10,
                    shards_by_node(&ports).await
                );
                last = n;
            }
        })
    };

    let mut rng = rand::rngs::StdRng::seed_from_u64(s.seed);
    let mut events = Vec::new();
    for &(offset, kind) in &planned {
        let due = start + offset;
        if now_ms() > due + 1_000 {
            eprintln!("[{}] {} starts {} ms behind its plan", at(now_ms()), kind.name(), now_ms() - due);
        }
        // A pause is aimed at its millisecond: its victim is chosen first.
        let choose = if kind == Kind::Pause { due - CHOOSE_AHEAD_MS } else { due };
        tokio::time::sleep(Duration::from_millis((choose - now_ms()).max(0) as u64)).await;
        // The victim: a random node for a kill; the node holding the most
        // shards (its heartbeat reports them) for a pause or a cut.
        let (i, held) = match kind {
            Kind::Kill => {
                let i = rng.random_range(0..slots.len());
                let node = slots[i].node.as_ref().expect("every node is up between events");
                (i, tokio::time::timeout(Duration::from_secs(2), node.shards_held()).await.unwrap_or(0))
            }
            Kind::Pause | Kind::DbCut | Kind::RedisCut | Kind::DbReset | Kind::RedisReset => {
                match most_shards(&slots).await {
                    Some(most) => most,
                    None => (rng.random_range(0..slots.len()), 0),
                }
            }
            Kind::RedisRestart | Kind::DbRestart => (0, 0),
        };
        let clock = slots[i].skew.as_ref().map(|o| format!(", clock {o}")).unwrap_or_default();
        tokio::time::sleep(Duration::from_millis((due - now_ms()).max(0) as u64)).await;
        let began = now_ms();
        let mut stopped_us = began * 1000;
        let label = match kind {
            Kind::Kill => {
                let slot = &mut slots[i];
                let mut node = slot.node.take().expect("every node is up between events");
                node.kill9();
                let pid = node.pid();
                drop(node);
                tokio::time::sleep(Duration::from_millis(s.node_down_ms)).await;
                let restarted =
                    start_node(&s, i, (slot.port, &slot.db_proxy, &slot.redis_proxy, &slot.env), db.url(), &redis.url)
                        .await;
                slot.restarts += 1;
                names.insert(restarted.pid(), format!("node {i} (restart {})", slot.restarts));
                slot.node = Some(restarted);
                format!("kill -9 of node {i} (pid {pid}, held {held} shards{clock}) at {}", at(began))
            }
            Kind::Pause => {
                let node = slots[i].node.as_ref().expect("every node is up between events");
                node.signal("STOP");
                stopped_us = chrono::Utc::now().timestamp_micros();
                tokio::time::sleep(Duration::from_millis(s.pause_ms)).await;
                node.signal("CONT");
                format!(
                    "SIGSTOP of node {i} (pid {}, held {held} shards{clock}) at {}, offset {} ms into its second \
                     (planned {} ms; stopped by {:.1} ms)",
                    node.pid(),
                    at(began),
                    began.rem_euclid(1000),
                    due.rem_euclid(1000),
                    (stopped_us - began / 1000 * 1_000_000) as f64 / 1000.0
                )
            }
            Kind::DbCut | Kind::RedisCut | Kind::DbReset | Kind::RedisReset => {
                let slot = &slots[i];
                let (proxy, what) = if matches!(kind, Kind::DbCut | Kind::DbReset) {
                    (&slot.db_proxy, stack.database())
                } else {
                    (&slot.redis_proxy, "Redis")
                };
                let (connections, how) = if matches!(kind, Kind::DbCut | Kind::RedisCut) {
                    (proxy.cut_silent(), "held silent")
                } else {
                    (proxy.cut_reset(), "reset")
                };
                tokio::time::sleep(Duration::from_millis(s.cut_ms)).await;
                proxy.heal().await;
                format!(
                    "node {i} cut from {what} (held {held} shards{clock}; {connections} connections {how}) at {}",
                    at(began)
                )
            }
            Kind::RedisRestart => {
                redis.restart(Duration::from_millis(s.outage_ms)).await;
                format!("Redis restart at {}", at(began))
            }
            Kind::DbRestart => {
                let (db, down) = (db.clone(), Duration::from_millis(s.outage_ms));
                tokio::task::spawn_blocking(move || db.restart(down)).await.expect("database restart");
                format!("{} restart at {}", stack.database(), at(began))
            }
        };
        let ended = now_ms();
        eprintln!("[{}] {label}, back after {} ms", at(ended), ended - began);
        events.push(Event { kind, start_ms: began, stopped_us, end_ms: ended, label });
    }

    // Wait for every fire of the window to end (delivered, or given up by
    // the service: missed, failed), or for the settle time to run out.
    let expected = ids.len() * s.secs as usize;
    let distinct = Distinct { state: Mutex::default(), start, end };
    let pool = db.pool().await;
    let deadline = end + s.settle_secs * 1000;
    let mut unsettled = i64::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        let all = rx.wait_until(Duration::ZERO, |hits| distinct.update(hits) >= expected).await;
        if now_ms() < end + 2_000 {
            continue;
        }
        match pool.statuses(start, end).await {
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
    let statuses = pool.statuses(start, end).await.unwrap_or_default();
    let defects = report.defects(&events);
    // Runs of consecutive seconds with duplicates no fault excuses: (first, last, fires).
    let mut dup_runs: Vec<(i64, i64, usize)> = Vec::new();
    let by_second: BTreeMap<i64, usize> = defects.iter().fold(BTreeMap::new(), |mut m, d| {
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

    eprintln!("\n== {} summary: {} + Redis ==", s.title, stack.database());
    eprintln!(
        "seed {}: {} nodes, {} fires/s ({} per-second timers over {} apps, created in {create_s:.1} s), {} s window; \
         {} faults; clocks skewed: {skewed}; settled {:.1} s after the window",
        s.seed,
        s.nodes,
        s.rate,
        ids.len(),
        ids.len().div_ceil(s.app_timers),
        s.secs,
        events.len(),
        settled_after as f64 / 1000.0
    );
    for (e, f) in events.iter().zip(&report.per_event) {
        eprintln!(
            "  fault: {}, back after {} ms; fires due -{} s .. +{} s: {} expected, {} lost, duplicated {} in flight \
             / {} defects, lateness p99 {:.0} max {:.0} ms",
            e.label,
            e.end_ms - e.start_ms,
            IN_FLIGHT_BEFORE_MS / 1000,
            CALM_AFTER_MS / 1000,
            f.expected,
            f.lost,
            f.in_flight,
            f.defects,
            f.lateness.p99,
            f.lateness.max
        );
    }
    eprintln!("fires expected:   {}", report.expected);
    eprintln!("fires delivered:  {}", report.delivered);
    eprintln!("fires lost:       {}", report.lost.len());
    let in_flight: Vec<String> = report.in_flight.iter().map(|(k, n)| format!("{} {n}", k.name())).collect();
    eprintln!(
        "fires duplicated: {} (in flight at a fault {}: [{}]; elsewhere {}); keys inconsistent with their run time: {}",
        report.duplicates.len(),
        report.in_flight.values().sum::<usize>(),
        in_flight.join(", "),
        defects.len(),
        report.inconsistent
    );
    eprintln!("lateness ms, every fire:                     {}", report.lateness_all);
    eprintln!("lateness ms, > 10 s from a fault:            {}", report.lateness_calm);
    eprintln!("fires first received before their time: {} (earliest {:.1} ms)", report.early, report.earliest);
    eprintln!("database, fires of the window by status: {statuses:?}");
    for &(first, last, n, worst) in report.late_runs.iter().take(20) {
        eprintln!(
            "  late > {LATE_MS} ms: {n} fires due {} .. {} (worst {worst:.0} ms; {}); those seconds recorded by {}",
            at(first),
            at(last),
            nearest_event(&events, first),
            pool.owners(first, last, &names).await
        );
    }
    for (event, n) in &lost_by_event {
        eprintln!("  lost {n} nearest to {event}");
    }
    for &(timer, run) in report.lost.iter().take(10) {
        eprintln!("  lost {timer}_{run} ({}): {}", nearest_event(&events, run), pool.fire(timer, run).await);
    }
    for &(first, last, n) in dup_runs.iter().take(20) {
        eprintln!(
            "  duplicates not in flight at a fault: {n} fires due {} .. {} ({}); recorded by {}",
            at(first),
            at(last),
            nearest_event(&events, first),
            pool.owners(first, last, &names).await
        );
    }
    for &(timer, run, times, a, b) in defects.iter().step_by((defects.len() / 20).max(1)).take(20) {
        let late = |us: i64| (us - run * 1000) as f64 / 1000.0;
        // The fault whose start is nearest the first copy's arrival.
        let fault = events
            .iter()
            .min_by_key(|e| (a - e.stopped_us).abs())
            .map(|e| format!("; first copy {:+.1} ms from {}", (a - e.stopped_us) as f64 / 1000.0, e.label))
            .unwrap_or_default();
        eprintln!(
            "  duplicate {timer}_{run} (due {}, {}) x{times}: arrived {} ({:.1} ms after its time) and {} ({:.1} ms){fault}",
            rfc3339(run),
            at(run),
            rfc3339(a / 1000),
            late(a),
            rfc3339(b / 1000),
            late(b),
        );
        eprintln!("    row: {}", pool.fire(timer, run).await);
        let app = apps.get(&timer).map(String::as_str).unwrap_or_default();
        eprintln!("    {}", explain(&bases, timer, app, run, &names).await);
    }
    eprintln!("== end of {} summary ==\n", s.title);

    let stack = stack.database();
    assert_eq!(report.expected, expected);
    assert_eq!(events.len(), planned.len(), "{stack}: every planned fault happened");
    assert_eq!(report.inconsistent, 0, "{stack}: requests whose key is not a fire of the run");
    assert!(report.lost.is_empty(), "{stack}: {} fires lost", report.lost.len());
    assert!(
        defects.is_empty(),
        "{stack}: {} fires repeated not in flight at a kill, a pause or a cut from the database",
        defects.len()
    );
    assert_eq!(unsettled, 0, "{stack}: fires still pending or running {} s after the window", s.settle_secs);
}

/// Settings as the short run has them (no environment read).
#[cfg(test)]
fn short_settings() -> Settings {
    Settings {
        title: "chaos",
        secs: 110,
        rate: 300,
        nodes: 3,
        faults: DEFAULT_FAULTS.split(',').map(|f| Kind::parse(f).unwrap()).collect(),
        gap_ms: 8_000,
        node_down_ms: 5_000,
        pause_ms: 10_000,
        pause_offsets_ms: vec![100, 300, 500, 700, 900],
        cut_ms: 10_000,
        outage_ms: 3_000,
        skew: vec!["-2s".into()],
        app_timers: 10,
        create_concurrency: 16,
        settle_secs: 180,
        seed: 1,
        logs: None,
    }
}

#[test]
fn the_plan_runs_every_fault_once_in_the_short_run_and_spaces_them() {
    let short = plan(&short_settings());
    let kinds: Vec<Kind> = short.iter().map(|(_, k)| *k).collect();
    assert_eq!(kinds, vec![Kind::Pause, Kind::Kill, Kind::DbCut, Kind::RedisCut, Kind::DbRestart, Kind::RedisRestart]);
    let s = short_settings();
    for pair in short.windows(2) {
        let ((t0, k0), (t1, k1)) = (pair[0], pair[1]);
        // `gap_ms` apart; a pause up to a second more, to start on its offset.
        let gap = t1 - (t0 + s.duration_ms(k0));
        let most = if k1 == Kind::Pause { s.gap_ms + 999 } else { s.gap_ms };
        assert!((s.gap_ms..=most).contains(&gap), "{short:?}");
        // The next fault's in-flight window starts after this one ended.
        assert!(t1 - IN_FLIGHT_BEFORE_MS > t0 + s.duration_ms(k0), "{short:?}");
    }
    let (t, k) = *short.last().unwrap();
    assert!(t + s.duration_ms(k) <= (s.secs - QUIET_END_SECS) * 1000);
    assert_eq!(short[0], (8_100, Kind::Pause), "the pause 100 ms into its second");

    let full = plan(&Settings { secs: 300, ..short_settings() });
    for kind in kinds {
        assert!(full.iter().filter(|(_, k)| *k == kind).count() >= 3, "{full:?}");
    }
    // The window starts on a whole second: successive pauses start 0.1,
    // 0.3, 0.5 s into a wall-clock second.
    let offsets: Vec<i64> = full.iter().filter(|(_, k)| *k == Kind::Pause).map(|(t, _)| t % 1000).collect();
    assert_eq!(offsets, vec![100, 300, 500], "{full:?}");
}

#[test]
fn the_pause_run_stops_a_node_five_times_once_at_each_offset_within_a_short_window() {
    let s = Settings::pauses(Stack::Postgres);
    let pauses = plan(&s);
    assert!(pauses.iter().all(|(_, k)| *k == Kind::Pause), "{pauses:?}");
    let offsets: Vec<i64> = pauses.iter().map(|(t, _)| t % 1000).collect();
    assert_eq!(offsets, vec![100, 300, 500, 700, 900], "{pauses:?}");
    assert!(s.skew.is_empty() && s.pause_ms == 3_000 && s.nodes == 3);
    for pair in pauses.windows(2) {
        // Each pause's in-flight window starts after the previous one ended.
        assert!(pair[1].0 - IN_FLIGHT_BEFORE_MS > pair[0].0 + s.pause_ms as i64, "{pauses:?}");
    }
    // Short enough for CI: the window, and about 40 s to start, create and settle.
    assert!(s.secs <= 65, "{s:?}");
    assert_eq!(s.faults, vec![Kind::Pause]);
}

#[test]
fn pause_offsets_parse_and_are_checked() {
    assert_eq!(parse_offsets("x", " 0, 999 ,250"), vec![0, 999, 250]);
    for bad in ["", "1000", "-1", "a"] {
        assert!(std::panic::catch_unwind(|| parse_offsets("x", bad)).is_err(), "{bad}");
    }
}

#[test]
fn a_duplicate_is_excused_only_in_flight_at_a_kill_a_pause_or_a_cut_from_the_database() {
    // The fault began at 100.000 s; a pause's SIGSTOP had taken effect by 100.003 s.
    let event =
        |kind| Event { kind, start_ms: 100_000, stopped_us: 100_003_000, end_ms: 110_000, label: String::new() };
    // First copies (µs) long before the fault, and after it began.
    let (before, after) = (95_000_000, 100_600_000);
    // A kill or a cut from the database: a fire due from 5 s before its
    // start to 1 s after it, whenever its first copy came.
    for kind in [Kind::Kill, Kind::DbCut, Kind::DbReset] {
        let e = event(kind);
        for first in [before, after] {
            assert!(e.in_flight(95_000, first) && e.in_flight(101_000, first), "{kind:?}");
            assert!(!e.in_flight(94_999, first) && !e.in_flight(101_001, first), "{kind:?}");
            assert!(!e.in_flight(105_000, first), "{kind:?}");
        }
    }
    // A pause: a fire due from 5 s before it whose first copy arrived
    // before the node stood still (sent: it may be resent, or taken over).
    let pause = event(Kind::Pause);
    assert!(pause.in_flight(95_000, 95_010_000) && pause.in_flight(99_000, 99_040_000));
    assert!(pause.in_flight(100_000, 100_002_999), "sent in the last moment before the stop");
    // Sent early, before the pause, by a node whose clock is ahead.
    assert!(pause.in_flight(101_000, 99_100_000));
    assert!(!pause.in_flight(94_999, 95_000_000), "due too long before the pause");
    // Not a fire whose first copy came after the node stood still: it was
    // not sent before; one copy is a peer's takeover, the other the node
    // sending, after SIGCONT, a fire it no longer held. The old rule
    // excused any fire due up to 1 s after the start.
    assert!(!pause.in_flight(100_000, 100_003_000));
    assert!(!pause.in_flight(100_500, 100_600_000), "due 0.5 s after the SIGSTOP, first copy after it");
    assert!(!pause.in_flight(101_000, 104_000_000), "due 1 s after the SIGSTOP, first copy after the SIGCONT");
    assert!(!pause.in_flight(99_900, 100_010_000), "due before the SIGSTOP, first copy after it");
    for kind in [Kind::RedisCut, Kind::RedisReset, Kind::RedisRestart, Kind::DbRestart] {
        for first in [before, after] {
            assert!(!event(kind).in_flight(100_000, first), "{kind:?}");
        }
    }
}

#[test]
fn the_count_takes_a_pause_duplicate_first_received_after_the_sigstop_for_a_defect() {
    let hit = |timer: i64, run: i64, arrival_us: i64| Hit {
        key: format!("{timer}_{run}"),
        run_ms: run,
        arrival_us,
        method: axum::http::Method::POST,
        uri: axum::http::Uri::from_static("/chaos"),
        headers: None,
        body: Default::default(),
    };
    let pause =
        Event { kind: Kind::Pause, start_ms: 100_000, stopped_us: 100_003_000, end_ms: 103_000, label: String::new() };
    let (start, end) = (98_000, 102_000);
    let mut hits = Vec::new();
    for run in (start..end).step_by(1000) {
        for timer in [1, 2] {
            hits.push(hit(timer, run, run * 1000 + 5_000));
        }
    }
    // Timer 1's fire of 99 s: sent before the stop, and again after (resent, or taken over).
    hits.push(hit(1, 99_000, 103_100_000));
    // Timer 2's fire of 100 s: held by the stopped node; its first copy
    // (at 100.005 s) came after the stop, then the node sent it after SIGCONT.
    hits.push(hit(2, 100_000, 103_050_000));
    let report = count(&hits, &[1, 2], start, end, std::slice::from_ref(&pause));
    assert_eq!((report.expected, report.delivered, report.lost.len()), (8, 8, 0));
    assert_eq!(report.duplicates.len(), 2);
    assert_eq!(report.in_flight.get(&Kind::Pause), Some(&1));
    let defects = report.defects(std::slice::from_ref(&pause));
    assert_eq!(defects, vec![(2, 100_000, 2, 100_005_000, 103_050_000)]);
    assert_eq!((report.per_event[0].in_flight, report.per_event[0].defects), (1, 1));
}
