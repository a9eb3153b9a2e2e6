//! The Rust worker SDK against a whole node over real HTTP: the example's
//! three-stage task runs to completion, a flaky stage is retried with a
//! growing back-off, a hopeless one ends failed, and a panicking handler
//! counts as a retryable failure without stopping the worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_worker::demo::{self, DemoContext, ThreeStage};
use xtimer_worker::report::ScheduleLog;
use xtimer_worker::{
    Client, Event, Handler, Outcome, Task, TaskData, TaskScheduleCfg, TaskStatus, Worker, WorkerConfig,
};

use crate::helpers::{now_ms, Stack, TestNode, PATIENCE};

/// Same demo handler, fixed 1 s retry interval, 2 retries.
const FIXED_TYPE: &str = "three_stage_fixed";
/// A handler that panics on its first attempt.
const PANIC_TYPE: &str = "worker_sdk_panic";

/// One handler call: task id, stage, crt_retry_num, Unix ms.
type Call = (String, String, i64, i64);

/// Wraps a handler and records every call.
#[derive(Clone)]
struct Recorded<H> {
    inner: H,
    calls: Arc<Mutex<Vec<Call>>>,
}

#[xtimer_worker::async_trait]
impl<H: Handler + Clone> Handler for Recorded<H> {
    async fn handle(&self, task: Task) -> Outcome {
        let call = (task.id().to_string(), task.stage().to_string(), task.crt_retry_num(), now_ms());
        self.calls.lock().unwrap().push(call);
        self.inner.handle(task).await
    }
}

#[derive(Clone)]
struct PanicsOnce;

#[xtimer_worker::async_trait]
impl Handler for PanicsOnce {
    async fn handle(&self, task: Task) -> Outcome {
        if task.crt_retry_num() == 0 {
            panic!("first attempt always panics");
        }
        Outcome::done()
    }
}

fn fast() -> WorkerConfig {
    WorkerConfig {
        poll_interval: Some(Duration::from_millis(100)),
        jitter: Duration::from_millis(20),
        min_poll_interval: Duration::from_millis(10),
        shutdown_grace: Duration::from_secs(5),
        ..WorkerConfig::default()
    }
}

async fn worker_runs_the_three_stage_demo_with_retries(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let client = Client::new(&node.base).unwrap();
    client.ping().await.unwrap();
    assert!(client.register_task_if_missing(&demo::cfg()).await.unwrap());
    assert!(!client.register_task_if_missing(&demo::cfg()).await.unwrap(), "already registered");
    let fixed = TaskScheduleCfg { task_type: FIXED_TYPE.into(), max_retry_num: 2, retry_interval: -1, ..demo::cfg() };
    client.register_task(&fixed).await.unwrap();
    let panicky = TaskScheduleCfg { task_type: PANIC_TYPE.into(), retry_interval: -1, ..demo::cfg() };
    client.register_task(&panicky).await.unwrap();
    // Registering again is refused and changes nothing; the cfg changes through set_task_schedule_cfg.
    let err = client.register_task(&TaskScheduleCfg { max_retry_num: 9, ..fixed.clone() }).await.unwrap_err();
    assert_eq!(err.code(), Some(8048), "{err}");
    let tweak = TaskScheduleCfg { task_type: FIXED_TYPE.into(), schedule_interval: 2, ..TaskScheduleCfg::default() };
    let changed = client.set_task_schedule_cfg(&tweak).await.unwrap();
    assert_eq!((changed.schedule_interval, changed.max_retry_num, changed.retry_interval), (2, 2, -1), "{changed:?}");
    // fair_by_user goes through the SDK, and a change without it keeps it.
    let fair = TaskScheduleCfg { fair_by_user: Some(true), ..tweak.clone() };
    assert_eq!(client.set_task_schedule_cfg(&fair).await.unwrap().fair_by_user, Some(true));
    assert_eq!(client.set_task_schedule_cfg(&tweak).await.unwrap().fair_by_user, Some(true), "kept");
    let off = TaskScheduleCfg { fair_by_user: Some(false), ..tweak.clone() };
    assert_eq!(client.set_task_schedule_cfg(&off).await.unwrap().fair_by_user, Some(false));

    let ok_id = client.create_task(&demo::new_task("it://ok", 0)).await.unwrap();
    let flaky_id = client.create_task(&demo::new_task("it://flaky", 2)).await.unwrap();
    let doomed = TaskData { task_type: FIXED_TYPE.into(), ..demo::new_task("it://doomed", 99) };
    let doomed_id = client.create_task(&doomed).await.unwrap();
    let panic_id = client.create_task(&TaskData { task_type: PANIC_TYPE.into(), ..Default::default() }).await.unwrap();
    let all = [&ok_id, &flaky_id, &doomed_id, &panic_id];
    let created = client.get_task(&flaky_id).await.unwrap();
    assert_eq!((created.status, created.task_stage.as_str(), created.max_retry_interval), (1, "fetch", 1));

    let calls = Arc::new(Mutex::new(Vec::new()));
    let demo = Recorded { inner: ThreeStage::default(), calls: calls.clone() };
    let worker = Worker::new(client.clone(), fast())
        .with_handler(demo::TASK_TYPE, demo.clone())
        .with_handler(FIXED_TYPE, demo)
        .with_handler(PANIC_TYPE, PanicsOnce);
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));

    // Every report, per task, until all four are final.
    let mut reports: HashMap<String, Vec<(TaskData, Outcome)>> = HashMap::new();
    let wait = async {
        while !all.iter().all(|id| reports.get(*id).and_then(|r| r.last()).is_some_and(|(t, _)| is_final(t))) {
            match events.recv().await.expect("worker events") {
                Event::Reported { task, outcome } => {
                    reports.entry(task.task_id.clone()).or_default().push((*task, outcome))
                }
                Event::ReportFailed { task_id, error } => panic!("report of {task_id} failed: {error}"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(PATIENCE * 2, wait).await.unwrap_or_else(|_| panic!("tasks not final in time: {reports:#?}"));
    shutdown.cancel();
    running.await.unwrap().unwrap();

    // The plain task: fetch -> transform -> store -> done, with its context.
    let stages = |id: &str| reports[id].iter().map(|(t, o)| (last_stage(t), kind(o))).collect::<Vec<_>>();
    assert_eq!(stages(&ok_id), [("fetch".into(), "next"), ("transform".into(), "next"), ("store".into(), "done")]);
    let ok = client.get_task(&ok_id).await.unwrap();
    assert_eq!((ok.status, ok.task_stage.as_str(), ok.crt_retry_num), (TaskStatus::Success.code(), "store", 0));
    let ctx: DemoContext = serde_json::from_str(&ok.context).unwrap();
    assert_eq!((ctx.source.as_str(), ctx.words), ("it://ok", Some(11)));
    assert!(ctx.stored_at.unwrap().ends_with(&ok_id));

    // The flaky task: transform failed twice, waited 2 s then 4 s (the
    // interval doubles from the cfg's 1 s, capped at 4 s), then finished.
    assert_eq!(
        stages(&flaky_id),
        [
            ("fetch".into(), "next"),
            ("transform".into(), "retry"),
            ("transform".into(), "retry"),
            ("transform".into(), "next"),
            ("store".into(), "done")
        ]
    );
    let retries: Vec<_> = reports[&flaky_id]
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Retry(_)))
        .map(|(t, _)| (t.status, t.crt_retry_num, t.max_retry_interval))
        .collect();
    assert_eq!(retries, [(1, 1, 2), (1, 2, 4)]);
    let flaky_calls: Vec<Call> = calls.lock().unwrap().iter().filter(|c| c.0 == flaky_id).cloned().collect();
    let transform: Vec<i64> = flaky_calls.iter().filter(|c| c.1 == "transform").map(|c| c.3).collect();
    assert_eq!(transform.len(), 3, "{flaky_calls:?}");
    // Never held before the order_time its failure report set.
    for (i, (task, _)) in reports[&flaky_id].iter().filter(|(_, o)| matches!(o, Outcome::Retry(_))).enumerate() {
        assert!(transform[i + 1] >= task.order_time * 1000, "retry {i} held early: {flaky_calls:?}");
    }
    assert!(transform[1] - transform[0] >= 1_000, "first back-off (2 s) too short: {transform:?}");
    assert!(transform[2] - transform[1] >= 3_000, "second back-off (4 s) too short: {transform:?}");
    let flaky = client.get_task(&flaky_id).await.unwrap();
    assert_eq!((flaky.status, flaky.crt_retry_num, flaky.max_retry_interval), (3, 2, 4));
    let log = ScheduleLog::parse(&flaky.schedule_log);
    assert_eq!((log.last_data.stage.as_str(), log.last_data.err_msg.as_str()), ("store", ""));
    let errors: Vec<&str> = log.history_datas.iter().map(|d| d.err_msg.as_str()).filter(|e| !e.is_empty()).collect();
    assert_eq!(errors.len(), 2, "{log:?}");
    assert!(errors[0].contains("simulated failure 2 of 2"), "{errors:?}");

    // The hopeless task on a fixed 1 s interval: 1 + max_retry_num tries, then failed.
    let doomed = client.get_task(&doomed_id).await.unwrap();
    assert_eq!((doomed.status, doomed.crt_retry_num, doomed.max_retry_interval), (4, 2, -1));
    assert_eq!(stages(&doomed_id).iter().filter(|s| s.1 == "retry").count(), 3);
    assert_eq!(doomed.task_stage, "transform");

    // The panic was a retryable failure; the worker lived on and finished it.
    let panicked = client.get_task(&panic_id).await.unwrap();
    assert_eq!((panicked.status, panicked.crt_retry_num), (3, 1));
    let log = ScheduleLog::parse(&panicked.schedule_log);
    assert!(log.history_datas[0].err_msg.contains("handler panicked: first attempt always panics"), "{log:?}");

    assert_eq!(client.get_task_counts_by_type(demo::TASK_TYPE).await.unwrap(), 2);
    let done = client.get_task_list(demo::TASK_TYPE, Some(TaskStatus::Success), 10).await.unwrap();
    assert_eq!(done.len(), 2);
    node.stop().await;
}

fn is_final(task: &TaskData) -> bool {
    TaskStatus::from_code(task.status).is_some_and(TaskStatus::is_final)
}

/// The stage that ran for this report.
fn last_stage(task: &TaskData) -> String {
    ScheduleLog::parse(&task.schedule_log).last_data.stage
}

fn kind(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Next { .. } => "next",
        Outcome::Done { .. } => "done",
        Outcome::Retry(_) => "retry",
        Outcome::Fatal(_) => "fatal",
    }
}

/// A worker that stops while it holds tasks hands back the ones it has not
/// started: they are pending again, with no retry counted.
async fn unstarted_tasks_are_handed_back_at_shutdown(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let client = Client::new(&node.base).unwrap();
    client.register_task(&demo::cfg()).await.unwrap();
    for i in 0..3 {
        client.create_task(&demo::new_task(&format!("it://{i}"), 0)).await.unwrap();
    }
    // One permit and a slow stage: one task runs, two wait.
    let config = WorkerConfig { concurrency: 1, ..fast() };
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let slow = ThreeStage { work: Duration::from_millis(1_500) };
    let worker = Worker::new(client.clone(), config).with_handler(demo::TASK_TYPE, move |task: Task| {
        let (slow, started_tx) = (slow.clone(), started_tx.clone());
        async move {
            let _ = started_tx.send(());
            slow.handle(task).await
        }
    });
    let mut events = worker.subscribe();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(worker.run(shutdown.clone()));
    // Creates may land in a batch a moment after their reply, so the three
    // tasks may come in more than one hold.
    let held = async {
        let mut held = 0;
        while held < 3 {
            if let Ok(Event::Held { count, .. }) = events.recv().await {
                held += count;
            }
        }
        started.recv().await;
        held
    };
    assert_eq!(tokio::time::timeout(PATIENCE, held).await.unwrap(), 3);
    shutdown.cancel();
    running.await.unwrap().unwrap();

    let mut handed_back = 0;
    let mut reported = 0;
    while let Ok(event) = events.try_recv() {
        match event {
            Event::HandedBack { .. } => handed_back += 1,
            Event::Reported { .. } => reported += 1,
            _ => {}
        }
    }
    assert_eq!((handed_back, reported), (2, 1), "the running stage finishes, the others go back");
    let pending = client.get_task_list(demo::TASK_TYPE, Some(TaskStatus::Pending), 10).await.unwrap();
    assert_eq!(pending.len(), 3, "two handed back at fetch, one at transform");
    assert_eq!(pending.iter().filter(|t| t.task_stage == "fetch" && t.crt_retry_num == 0).count(), 2);
    node.stop().await;
}

crate::on_both_stacks!(worker_runs_the_three_stage_demo_with_retries, unstarted_tasks_are_handed_back_at_shutdown);
