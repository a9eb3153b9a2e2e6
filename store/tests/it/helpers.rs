//! Backends under test and fixtures shared by the conformance bodies.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, ShardConfig};
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, Timer, TimerStatus};
use xtimer_core::Clock;
use xtimer_store::{
    Database, FireRepo, FireResult, LockStore, NewFire, NodeRepo, NotifyRepo, ShardStore, Stores, TimerRepo,
};

/// 2026-03-01 12:34:00 UTC: a minute boundary every test starts at.
pub const T0: i64 = 1_772_368_440_000;

/// The app most fixtures live in.
pub const APP: &str = "conformance";

/// A change made by the admin, as the history names it.
pub const ADMIN: xtimer_store::Change<'static> = xtimer_store::Change { action: "test", by: "admin" };

/// One backend's stores, seen only through their traits, and the clock that
/// drives every expiry in them.
pub struct Backend {
    pub timers: Arc<dyn TimerRepo>,
    pub fires: Arc<dyn FireRepo>,
    pub shards: Arc<dyn ShardStore>,
    pub locks: Arc<dyn LockStore>,
    pub nodes: Arc<dyn NodeRepo>,
    pub notifications: Arc<dyn NotifyRepo>,
    /// The database under the repositories, for fixtures written in SQL
    /// (more rows than a test should make through claims and results).
    pub db: Database,
    pub clock: Arc<ManualClock>,
    /// Keeps the backend's storage (temp dir, schema, key prefix) alive.
    _keep: Box<dyn Any + Send + Sync>,
}

impl Backend {
    /// The clock's reading.
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }
}

/// The embedded default: SQLite on a fresh temp file, the in-process shard
/// index and locks, all on a `ManualClock` at [`T0`].
pub async fn embedded() -> Backend {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = Arc::new(ManualClock::new(T0));
    let db = DatabaseConfig { url: format!("sqlite://{}", dir.path().join("xtimer.db").display()), max_connections: 4 };
    let stores = Stores::connect(&db, &Default::default(), &ShardConfig::default(), clock.clone())
        .await
        .expect("embedded stores open");
    Backend {
        db: stores.database().clone(),
        timers: stores.timers,
        fires: stores.fires,
        shards: stores.shards,
        locks: stores.locks,
        nodes: stores.nodes,
        notifications: stores.notifications,
        clock,
        _keep: Box::new(dir),
    }
}

/// A valid timer to create in `app`.
pub fn new_timer(app: &str, name: &str, status: TimerStatus) -> NewTimer {
    NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: app.into(),
        name: name.into(),
        status,
        schedule: Schedule::Cron { expr: "*/5 * * * * *".into(), timezone: "Europe/Berlin".into() },
        notify: Notify::Http(HttpNotify {
            url: "http://127.0.0.1:9/hook".into(),
            method: "POST".into(),
            headers: BTreeMap::from([("x-test".to_string(), "1".to_string())]),
            body: Some("{\"n\":1}".into()),
            timeout_ms: None,
            template: false,
            flow_key: None,
        }),
        retry: RetryPolicy { max_attempts: 3, backoff_ms: 250, no_retry_statuses: None },
        misfire: MisfirePolicy::FireAll,
        delete_after_run: false,
        on_failure: None,
        on_missed: None,
        on_late: None,
        pause_after_failures: None,
        overlap: Default::default(),
    }
}

/// Creates a timer in [`APP`] at the clock's time.
pub async fn timer(b: &Backend, name: &str, status: TimerStatus) -> Timer {
    b.timers.create_timer(&new_timer(APP, name, status), b.now()).await.expect("create timer")
}

/// The key of `timer`'s fire at `run_ms`.
pub fn key(timer: &Timer, run_ms: i64) -> FireKey {
    FireKey { timer_id: timer.id, run_ms }
}

/// Inserts `timer`'s fires at `runs` and returns their keys.
pub async fn insert(b: &Backend, timer: &Timer, runs: &[i64]) -> Vec<FireKey> {
    let keys: Vec<FireKey> = runs.iter().map(|&run| key(timer, run)).collect();
    let new: Vec<NewFire> = keys.iter().map(|&key| NewFire { key, app: timer.app.clone() }).collect();
    b.fires.insert_fires(&new, b.now()).await.expect("insert fires");
    keys
}

/// Claims exactly `keys` for `owner`, panicking unless all were won.
pub async fn claim_all(b: &Backend, keys: &[FireKey], owner: &str, lease_ms: i64) -> Vec<ClaimedFire> {
    let outcome = b.fires.claim(keys, owner, lease_ms, b.now()).await.expect("claim");
    assert_eq!(outcome.claimed.len(), keys.len(), "every key should be claimed: {outcome:?}");
    outcome.claimed
}

/// The stored fire with `key`.
pub async fn fire(b: &Backend, key: FireKey) -> Fire {
    let (list, _) = b.fires.list_fires(key.timer_id, None, 0, 10_000).await.expect("list fires");
    list.into_iter().find(|f| f.run_ms == key.run_ms).unwrap_or_else(|| panic!("fire {key} is stored"))
}

/// The result of one attempt of `claim`.
pub fn result(
    claim: &ClaimedFire,
    status: FireStatus,
    attempt: u32,
    output: &str,
    cost_time: i64,
    lease_until: Option<i64>,
) -> FireResult {
    FireResult {
        task_id: claim.task_id,
        run_ms: claim.key.run_ms,
        owner: claim.owner.clone(),
        status,
        attempt,
        output: output.into(),
        cost_time,
        lease_until,
    }
}

/// A successful first attempt of `claim`, `cost_time` ms late.
pub fn succeeded(claim: &ClaimedFire, cost_time: i64) -> FireResult {
    result(claim, FireStatus::Succeeded, claim.attempt + 1, "HTTP 200: ok", cost_time, None)
}
