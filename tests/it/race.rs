//! Two executors racing for the same fire.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use xtimer::receiver::Receiver;
use xtimer_core::config::{DatabaseConfig, ExecutorConfig};
use xtimer_core::fire::FireKey;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_core::{SharedClock, SystemClock};
use xtimer_executor::Executor;
use xtimer_store::sqlite::SqliteRepo;
use xtimer_store::{FireRepo, NewFire, TimerRepo};

use crate::helpers::now_ms;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_executors_racing_the_same_fire_call_the_receiver_once() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        DatabaseConfig { url: format!("sqlite://{}", dir.path().join("race.db").display()), max_connections: 4 };
    let repo = Arc::new(SqliteRepo::connect(&config).await.unwrap());
    let clock: SharedClock = Arc::new(SystemClock);
    let rx = Receiver::start(false).await.unwrap();

    let mut keys = Vec::new();
    for n in 0..50 {
        let timer = NewTimer {
            app: "race".into(),
            name: format!("t{n}"),
            status: TimerStatus::Enabled,
            schedule: Schedule::Once { run_at_ms: now_ms() },
            notify: Notify::Http(HttpNotify {
                url: rx.url("/race"),
                method: "POST".into(),
                headers: Default::default(),
                body: None,
            }),
            retry: RetryPolicy::default(),
            misfire: MisfirePolicy::FireOnce,
        };
        let timer = repo.create_timer(&timer, now_ms()).await.unwrap();
        keys.push(FireKey { timer_id: timer.id, run_ms: now_ms() + 200 });
    }
    let fires: Vec<NewFire> = keys.iter().map(|k| NewFire { key: *k, app: "race".into() }).collect();
    repo.insert_fires(&fires, now_ms()).await.unwrap();

    let mut handles = Vec::new();
    let mut recorders = Vec::new();
    for node in ["a", "b"] {
        let (_tx, due) = mpsc::channel(1);
        let stop = CancellationToken::new();
        let (executor, recorder) = Executor::new(
            ExecutorConfig::default(),
            node,
            repo.clone(),
            repo.clone(),
            clock.clone(),
            due,
            stop.child_token(),
            stop,
        )
        .unwrap();
        handles.push(executor.handle());
        recorders.push(tokio::spawn(recorder.run()));
    }
    let (a, b) = tokio::join!(handles[0].claim_and_dispatch(&keys), handles[1].claim_and_dispatch(&keys));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a + b, keys.len(), "every fire claimed exactly once between the two: {a} + {b}");

    assert!(rx.wait_until(Duration::from_secs(10), |h| h.len() >= keys.len()).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.count(), keys.len(), "each fire called once");
    for h in &handles {
        h.idle().await;
    }
    drop(handles);
    for r in recorders {
        r.await.unwrap();
    }
    let (list, _) = repo.list_fires(keys[0].timer_id, None, 0, 10).await.unwrap();
    assert_eq!(list[0].status, xtimer_core::fire::FireStatus::Succeeded);
}
