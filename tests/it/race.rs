//! Two executors racing for the same fire.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use xtimer::receiver::Receiver;
use xtimer_core::config::ExecutorConfig;
use xtimer_core::fire::FireKey;
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_core::{SharedClock, SystemClock};
use xtimer_executor::{Callbacks, Executor, Wiring};
use xtimer_store::{NewFire, Stores};

use crate::helpers::{now_ms, Stack, Storage};

pub async fn two_executors_racing_the_same_fire_call_the_receiver_once(stack: Stack) {
    let storage = Storage::new(stack).await;
    let clock: SharedClock = Arc::new(SystemClock);
    let c = &storage.config;
    let stores = Stores::connect(&c.database, &c.redis, &c.shard, clock.clone()).await.unwrap();
    let (timers, fires) = (stores.timers.clone(), stores.fires.clone());
    let rx = Receiver::start(false).await.unwrap();

    let mut keys = Vec::new();
    for n in 0..50 {
        let timer = NewTimer {
            timing: Default::default(),
            labels: Default::default(),
            dedupe: None,
            app: "race".into(),
            name: format!("t{n}"),
            status: TimerStatus::Enabled,
            schedule: Schedule::Once { run_at_ms: now_ms() },
            notify: Notify::Http(HttpNotify {
                url: rx.url("/race"),
                method: "POST".into(),
                headers: Default::default(),
                body: None,
                timeout_ms: None,
                template: false,
                flow_key: None,
            }),
            retry: RetryPolicy::default(),
            misfire: MisfirePolicy::FireOnce,
            delete_after_run: false,
            on_failure: None,
            on_missed: None,
            on_late: None,
            pause_after_failures: None,
            overlap: Default::default(),
        };
        let timer = timers.create_timer(&timer, now_ms()).await.unwrap();
        keys.push(FireKey { timer_id: timer.id, run_ms: now_ms() + 200 });
    }
    let new_fires: Vec<NewFire> = keys.iter().map(|k| NewFire { key: *k, app: "race".into() }).collect();
    stores.fires.insert_fires(&new_fires, now_ms()).await.unwrap();

    let mut handles = Vec::new();
    let mut recorders = Vec::new();
    for node in ["a", "b"] {
        let (_tx, due) = mpsc::channel(1);
        let stop = CancellationToken::new();
        let wiring = Wiring {
            due,
            callbacks: Callbacks::default(),
            tasks: None,
            steering: None,
            stop_claiming: stop.child_token(),
            hard_stop: stop,
            traces: None,
        };
        let ctx = NodeContext::new(clock.clone(), node, "race");
        let (executor, recorder) = Executor::new(ExecutorConfig::default(), &stores, &ctx, wiring).unwrap();
        handles.push(executor.handle());
        recorders.push(tokio::spawn(recorder.run()));
    }
    let (a, b) = tokio::join!(handles[0].claim_and_dispatch(&keys), handles[1].claim_and_dispatch(&keys));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a + b, keys.len(), "every fire claimed exactly once between the two: {a} + {b}");

    assert!(rx.wait_until(Duration::from_secs(10), |h| h.len() >= keys.len()).await);
    // Time for a second call of a fire to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.count(), keys.len(), "each fire called once");
    for h in &handles {
        h.idle().await;
    }
    drop(handles);
    for r in recorders {
        r.await.unwrap();
    }
    let (list, _) = fires.list_fires(keys[0].timer_id, None, 0, 10).await.unwrap();
    assert_eq!(list[0].status, xtimer_core::fire::FireStatus::Succeeded);
}

crate::on_both_stacks!(two_executors_racing_the_same_fire_call_the_receiver_once);
