//! The use cases called directly, over SQLite in a temp dir, in-process
//! shards and locks and a real migrator's expander: the typed results and
//! errors a caller maps.

use std::sync::Arc;

use async_trait::async_trait;
use tempfile::TempDir;
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, LimitsConfig, MigratorConfig, ShardConfig};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{HttpNotify, NewTimer, Notify, Schedule, TimerStatus};
use xtimer_core::SharedClock;
use xtimer_migrator::Migrator;
use xtimer_service::{
    Actor, Backfill, Page, Parts, ServiceConfig, ServiceError, Targets, TaskTypeError, TimerKey, TimerService,
};
use xtimer_store::{Database, MemoryLocks, MemoryShards, Stores};

/// 2030-01-01T00:00:00Z.
const NOW_MS: i64 = 1_893_456_000_000;

/// Refuses callbacks to `refused.example`; knows the task type `mine`,
/// owned by app `a`.
struct FakeTargets;

#[async_trait]
impl Targets for FakeTargets {
    async fn check_callback(&self, url: &str) -> Result<(), String> {
        if url.contains("refused.example") {
            Err("refused.example is refused".into())
        } else {
            Ok(())
        }
    }

    async fn task_type_owner(&self, task_type: &str) -> Result<Option<String>, TaskTypeError> {
        match task_type {
            "mine" => Ok(Some("a".into())),
            other => Err(TaskTypeError::Refused(format!("unknown task type `{other}`"))),
        }
    }
}

struct Fixture {
    service: TimerService,
    clock: Arc<ManualClock>,
    _dir: TempDir,
}

async fn service_with(limits: LimitsConfig) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let db = Database::connect(&DatabaseConfig { url, max_connections: 4 }).await.expect("sqlite");
    let clock = Arc::new(ManualClock::new(NOW_MS));
    let shared: SharedClock = clock.clone();
    let stores = Stores::over(
        db,
        Arc::new(MemoryShards::new(ShardConfig::default(), shared.clone())),
        Arc::new(MemoryLocks::new(shared.clone())),
        "SQLite".into(),
    );
    let ctx = NodeContext::new(shared, "node-test", "xtimer-test");
    let expander = Migrator::new(MigratorConfig::default(), &stores, &ctx, None).expander();
    let parts = Parts {
        timers: stores.timers.clone(),
        fires: stores.fires.clone(),
        calendars: stores.calendars.clone(),
        apps: stores.apps.clone(),
        flows: stores.flows.clone(),
        flow_tokens: stores.flow_tokens.clone(),
        expander,
        targets: Arc::new(FakeTargets),
    };
    let service = TimerService::new(&ctx, parts, ServiceConfig { limits, ..ServiceConfig::default() });
    Fixture { service, clock, _dir: dir }
}

async fn service() -> Fixture {
    service_with(LimitsConfig::default()).await
}

fn once(app: &str, name: &str, status: TimerStatus) -> NewTimer {
    NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: app.into(),
        name: name.into(),
        status,
        schedule: Schedule::Once { run_at_ms: NOW_MS + 60_000 },
        notify: Notify::Http(HttpNotify {
            url: "http://127.0.0.1:9/hook".into(),
            method: "POST".into(),
            headers: Default::default(),
            body: None,
            timeout_ms: None,
            template: false,
            flow_key: None,
        }),
        retry: Default::default(),
        misfire: Default::default(),
        delete_after_run: false,
        on_failure: None,
        on_missed: None,
        on_late: None,
        pause_after_failures: None,
        overlap: Default::default(),
    }
}

fn key(id: i64, app: &str, proven: bool) -> TimerKey {
    TimerKey { id, app: app.into(), proven, by: Actor::Anonymous }
}

const PAGE: Page = Page { offset: 0, limit: 20 };

#[tokio::test]
async fn a_created_timer_is_read_back_and_an_enabled_one_has_its_fire() {
    let f = service().await;
    let timer = f.service.create(once("a", "t", TimerStatus::Enabled), &Actor::Anonymous).await.expect("created");
    assert_eq!(f.service.get(&key(timer.id, "a", false)).await.expect("got"), timer);
    let (fires, _) = f.service.fires(&key(timer.id, "a", false), None, true, PAGE).await.expect("fires");
    assert_eq!(fires.iter().map(|f| f.run_ms).collect::<Vec<_>>(), [NOW_MS + 60_000]);
    let (listed, total) = f.service.list("a", PAGE).await.expect("listed");
    assert_eq!((listed.len(), total), (1, 1));
}

#[tokio::test]
async fn a_taken_name_is_typed() {
    let f = service().await;
    f.service.create(once("a", "t", TimerStatus::Disabled), &Actor::Anonymous).await.expect("created");
    let err = f.service.create(once("a", "t", TimerStatus::Disabled), &Actor::Anonymous).await.unwrap_err();
    assert!(matches!(&err, ServiceError::NameTaken { app, name } if app == "a" && name == "t"), "{err:?}");
}

#[tokio::test]
async fn another_apps_timer_is_not_found_unless_the_caller_proved_its_app() {
    let f = service().await;
    let timer = f.service.create(once("a", "t", TimerStatus::Disabled), &Actor::Anonymous).await.expect("created");
    let err = f.service.get(&key(timer.id, "b", false)).await.unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { id, .. } if id == timer.id), "{err:?}");
    let err = f.service.disable(&key(timer.id, "b", true)).await.unwrap_err();
    assert!(matches!(err, ServiceError::Forbidden { id, .. } if id == timer.id), "{err:?}");
    assert_eq!(err.to_string(), format!("timer {} belongs to another app than `b`", timer.id));
}

#[tokio::test]
async fn a_deleted_timer_is_gone_from_every_use_case() {
    let f = service().await;
    let timer = f.service.create(once("a", "t", TimerStatus::Enabled), &Actor::Anonymous).await.expect("created");
    let k = key(timer.id, "a", true);
    f.service.delete(&k).await.expect("deleted");
    assert!(matches!(f.service.get(&k).await, Err(ServiceError::NotFound { .. })));
    assert!(matches!(f.service.enable(&k).await, Err(ServiceError::NotFound { .. })));
    assert!(matches!(f.service.delete(&k).await, Err(ServiceError::NotFound { .. })));
    assert!(matches!(f.service.fires(&k, None, false, PAGE).await, Err(ServiceError::NotFound { .. })));
    assert_eq!(f.service.list("a", PAGE).await.expect("listed").1, 0);
    // Its name is free again.
    f.service.create(once("a", "t", TimerStatus::Disabled), &Actor::Anonymous).await.expect("name reused");
}

#[tokio::test]
async fn enable_stores_the_status_and_plans_the_fires() {
    let f = service().await;
    let timer = f.service.create(once("a", "t", TimerStatus::Disabled), &Actor::Anonymous).await.expect("created");
    f.clock.advance(1_000);
    let enabled = f.service.enable(&key(timer.id, "a", false)).await.expect("enabled");
    assert_eq!((enabled.status, enabled.modify_time), (TimerStatus::Enabled, NOW_MS + 1_000));
    let (fires, _) = f.service.fires(&key(timer.id, "a", false), None, true, PAGE).await.expect("fires");
    assert_eq!(fires.len(), 1);
    f.service.disable(&key(timer.id, "a", false)).await.expect("disabled");
    assert_eq!(f.service.get(&key(timer.id, "a", false)).await.expect("got").status, TimerStatus::Disabled);
}

#[tokio::test]
async fn the_timers_per_app_limit_is_a_limit_exceeded() {
    let f = service_with(LimitsConfig { timers_per_app: 1, ..LimitsConfig::default() }).await;
    f.service.create(once("a", "t1", TimerStatus::Disabled), &Actor::Anonymous).await.expect("created");
    let err = f.service.create(once("a", "t2", TimerStatus::Disabled), &Actor::Anonymous).await.unwrap_err();
    assert!(
        matches!(&err, ServiceError::LimitExceeded { msg, .. } if msg.contains("limits.timers_per_app = 1")),
        "{err:?}"
    );
}

#[tokio::test]
async fn refused_targets_name_their_field() {
    let f = service().await;
    let mut timer = once("a", "t", TimerStatus::Disabled);
    timer.on_failure = Some(HttpNotify {
        url: "http://refused.example/x".into(),
        method: "POST".into(),
        headers: Default::default(),
        body: None,
        timeout_ms: None,
        template: false,
        flow_key: None,
    });
    let err = f.service.create(timer.clone(), &Actor::Anonymous).await.unwrap_err();
    assert_eq!(err.to_string(), "onFailure.url: refused.example is refused");
    // The other alerts are checked alike, in a batch too.
    let refused = timer.on_failure.take();
    timer.on_missed = refused.clone();
    let err = f.service.create(timer.clone(), &Actor::Anonymous).await.unwrap_err();
    assert_eq!(err.to_string(), "onMissed.url: refused.example is refused");
    timer.on_missed = None;
    timer.on_late = refused.map(|notify| xtimer_core::timer::LateAlert { threshold_ms: 1_000, notify });
    let batch = [once("a", "ok", TimerStatus::Disabled), timer.clone()];
    let err = f.service.create_timers(&batch, &Actor::Anonymous).await.unwrap_err();
    assert_eq!(err.to_string(), "timers[1].onLate.notify.url: refused.example is refused");

    let mut task = once("b", "t", TimerStatus::Disabled);
    task.notify = Notify::Asyncflow(xtimer_core::timer::AsyncflowNotify {
        task_type: "mine".into(),
        task_stage: String::new(),
        context: String::new(),
    });
    let err = f.service.create(task.clone(), &Actor::Anonymous).await.unwrap_err();
    assert_eq!(err.to_string(), "notifyAsyncflowParam.taskType: task type `mine` belongs to another app than `b`");

    let mut refused = once("a", "u", TimerStatus::Disabled);
    if let Notify::Http(n) = &mut refused.notify {
        n.url = "http://refused.example/y".into();
    }
    let err = f
        .service
        .create_timers(&[once("a", "ok", TimerStatus::Disabled), refused], &Actor::Anonymous)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "timers[1].notifyHTTPParam.url: refused.example is refused");
    assert_eq!(f.service.list("a", PAGE).await.expect("listed").1, 0, "all or none");
}

#[tokio::test]
async fn a_batch_answers_its_ids_in_order() {
    let f = service().await;
    let ids = f
        .service
        .create_timers(
            &[once("a", "x", TimerStatus::Enabled), once("b", "y", TimerStatus::Disabled)],
            &Actor::Anonymous,
        )
        .await
        .expect("created");
    assert_eq!(ids.len(), 2);
    assert_eq!(f.service.get(&key(ids[1], "b", false)).await.expect("got").name, "y");
}

#[tokio::test]
async fn update_applies_the_edit_of_the_stored_timer_and_passes_its_error_through() {
    let f = service().await;
    let timer = f.service.create(once("a", "t", TimerStatus::Enabled), &Actor::Anonymous).await.expect("created");
    let k = key(timer.id, "a", false);
    let updated = f
        .service
        .update(&k, |stored, _now| {
            let mut new = once(&stored.app, "renamed", stored.status);
            new.schedule = Schedule::Once { run_at_ms: NOW_MS + 30_000 };
            Ok::<_, ServiceError>(new)
        })
        .await
        .expect("updated");
    assert_eq!((updated.name.as_str(), updated.create_time), ("renamed", timer.create_time));
    let (fires, _) = f.service.fires(&k, None, true, PAGE).await.expect("fires");
    assert_eq!(fires.iter().map(|f| f.run_ms).collect::<Vec<_>>(), [NOW_MS + 30_000], "replanned");

    let refused = f.service.update(&k, |_, _| Err::<NewTimer, _>(ServiceError::invalid("cron", "bad"))).await;
    assert_eq!(refused.unwrap_err().to_string(), "cron: bad");
    assert_eq!(f.service.get(&k).await.expect("got").name, "renamed", "left as it was");
}

#[tokio::test]
async fn trigger_and_backfill_need_an_enabled_timer_and_a_kept_window() {
    let f = service().await;
    let timer = f.service.create(once("a", "t", TimerStatus::Disabled), &Actor::Anonymous).await.expect("created");
    let k = key(timer.id, "a", false);
    let err = f.service.trigger(&k).await.unwrap_err();
    assert!(matches!(&err, ServiceError::Invalid { field, .. } if field == "id"), "{err:?}");

    let window = Backfill { from_ms: NOW_MS - 1_000, to_ms: NOW_MS - 2_000, max_fires: None };
    let err = f.service.backfill(&k, window).await.unwrap_err();
    assert!(matches!(&err, ServiceError::Invalid { field, .. } if field == "to"), "{err:?}");
    let window = Backfill { from_ms: 0, to_ms: NOW_MS, max_fires: None };
    let err = f.service.backfill(&k, window).await.unwrap_err();
    assert!(matches!(&err, ServiceError::Invalid { field, .. } if field == "from"), "{err:?}");
    let window = Backfill { from_ms: NOW_MS - 1_000, to_ms: NOW_MS, max_fires: Some(0) };
    let err = f.service.backfill(&k, window).await.unwrap_err();
    assert!(matches!(&err, ServiceError::Invalid { field, .. } if field == "maxFires"), "{err:?}");

    f.service.enable(&k).await.expect("enabled");
    let run_ms = f.service.trigger(&k).await.expect("triggered");
    let (fires, _) = f.service.fires(&k, None, true, PAGE).await.expect("fires");
    assert!(fires.iter().any(|f| f.run_ms == run_ms && f.manual), "{fires:?}");
}

#[tokio::test]
async fn an_invalid_app_is_an_invalid_field() {
    let f = service().await;
    let err = f.service.get(&key(1, "", false)).await.unwrap_err();
    assert_eq!(err.to_string(), "app: must not be empty");
}
