//! The worker loop: backlog cap, panics, shutdown.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{broadcast, Semaphore};
use tokio_util::sync::CancellationToken;
use xtimer_worker::{Event, Outcome, SkipReason, Task, TaskData, Worker, WorkerConfig};

use crate::helpers::{cfg, fast, task, FakeServer, PATIENCE};

/// Waits for the first event `pick` accepts.
async fn wait_for<T>(events: &mut broadcast::Receiver<Event>, mut pick: impl FnMut(&Event) -> Option<T>) -> T {
    let found = async {
        loop {
            let event = events.recv().await.expect("worker events");
            if let Some(found) = pick(&event) {
                return found;
            }
        }
    };
    tokio::time::timeout(PATIENCE, found).await.expect("event in time")
}

fn reported(event: &Event) -> Option<TaskData> {
    match event {
        Event::Reported { task, .. } => Some((**task).clone()),
        _ => None,
    }
}

#[tokio::test]
async fn a_full_backlog_skips_polls_until_tasks_are_reported() {
    let server = FakeServer::start(vec![cfg("t")]).await;
    server.push((0..5).map(|i| task("t", &i.to_string())));
    // Handlers wait at a gate the test opens.
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let config = WorkerConfig { backlog_cap: 2, concurrency: 4, ..fast() };
    let worker = Worker::new(server.client.clone(), config).with_handler("t", move |_task: Task| {
        let g = g.clone();
        async move {
            g.acquire().await.unwrap().forget();
            Outcome::done()
        }
    });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));

    let first = wait_for(&mut events, |e| match e {
        Event::Held { count, .. } if *count > 0 => Some(*count),
        _ => None,
    })
    .await;
    assert_eq!(first, 2, "a hold asks for no more than the room left");
    for _ in 0..3 {
        wait_for(&mut events, |e| {
            matches!(e, Event::PollSkipped { reason: SkipReason::BacklogFull, .. }).then_some(())
        })
        .await;
    }
    assert_eq!(server.state.seen("hold_tasks").len(), 1, "skipped polls do not call the server");

    gate.add_permits(5);
    let mut done = 0;
    while done < 5 {
        wait_for(&mut events, reported).await;
        done += 1;
    }
    shutdown.cancel();
    running.await.unwrap().unwrap();
    for hold in server.state.seen("hold_tasks") {
        let limit: usize = hold.query.rsplit_once("limit=").unwrap().1.parse().unwrap();
        assert!(limit <= 2, "{}", hold.query);
    }
}

#[tokio::test]
async fn a_panicking_handler_is_retried_and_the_loop_lives_on() {
    let server = FakeServer::start(vec![cfg("t")]).await;
    server.push([task("t", "boom"), task("t", "fine")]);
    let worker = Worker::new(server.client.clone(), fast()).with_handler("t", |task: Task| async move {
        if task.id() == "boom" {
            panic!("kaboom");
        }
        Outcome::next("b", &serde_json::json!({"ok": true}))
    });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));
    let mut reports = [wait_for(&mut events, reported).await, wait_for(&mut events, reported).await];
    reports.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    shutdown.cancel();
    running.await.unwrap().unwrap();

    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let boom = &reports[0];
    assert_eq!((boom.task_id.as_str(), boom.status, boom.crt_retry_num, boom.max_retry_interval), ("boom", 1, 1, 20));
    assert!((now + 18..=now + 20).contains(&boom.order_time), "waits the doubled interval: {}", boom.order_time - now);
    assert!(boom.schedule_log.contains("handler panicked: kaboom"), "{}", boom.schedule_log);
    let fine = &reports[1];
    assert_eq!((fine.status, fine.task_stage.as_str(), fine.context.as_str()), (1, "b", r#"{"ok":true}"#));
    assert_eq!(server.state.seen("set_task").len(), 2);
}

#[tokio::test]
async fn shutdown_lets_a_running_handler_finish_and_report() {
    let server = FakeServer::start(vec![cfg("t")]).await;
    server.push([task("t", "slow")]);
    let worker = Worker::new(server.client.clone(), fast()).with_handler("t", |_task: Task| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Outcome::done()
    });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));
    wait_for(&mut events, |e| matches!(e, Event::Held { count: 1, .. }).then_some(())).await;
    shutdown.cancel();
    tokio::time::timeout(PATIENCE, running).await.unwrap().unwrap().unwrap();
    let sets = server.state.seen("set_task");
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].json()["task_data"]["status"], 3);
}

#[tokio::test]
async fn shutdown_abandons_a_handler_past_the_grace() {
    let server = FakeServer::start(vec![cfg("t")]).await;
    server.push([task("t", "stuck")]);
    let config = WorkerConfig { shutdown_grace: Duration::from_millis(100), ..fast() };
    let worker = Worker::new(server.client.clone(), config).with_handler("t", |_task: Task| async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Outcome::done()
    });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));
    wait_for(&mut events, |e| matches!(e, Event::Held { count: 1, .. }).then_some(())).await;
    shutdown.cancel();
    tokio::time::timeout(PATIENCE, running).await.unwrap().unwrap().unwrap();
    wait_for(&mut events, |e| matches!(e, Event::Abandoned { .. }).then_some(())).await;
    assert!(server.state.seen("set_task").is_empty(), "left processing for the server's governance");
}

#[tokio::test]
async fn a_type_without_cfg_is_not_polled() {
    let server = FakeServer::start(vec![cfg("other")]).await;
    let worker = Worker::new(server.client.clone(), fast()).with_handler("t", |_task: Task| async { Outcome::done() });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));
    wait_for(&mut events, |e| matches!(e, Event::PollSkipped { reason: SkipReason::NoCfg, .. }).then_some(())).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert!(server.state.seen("hold_tasks").is_empty());
}

#[tokio::test]
async fn a_failed_first_cfg_load_is_retried_within_a_second_or_so() {
    let server = FakeServer::start(vec![cfg("t")]).await;
    server.state.cfg_failures.store(1, std::sync::atomic::Ordering::SeqCst);
    server.push([task("t", "1")]);
    // The default 20 s reload: only the quick retry after a failure can load it in time.
    let config = WorkerConfig { cfg_reload: Duration::from_secs(20), ..fast() };
    let worker = Worker::new(server.client.clone(), config).with_handler("t", |_task: Task| async { Outcome::done() });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));
    let started = std::time::Instant::now();
    let report = wait_for(&mut events, reported).await;
    assert_eq!(report.status, 3);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert_eq!(server.state.seen("get_task_schedule_cfg_list").len(), 2);
}
