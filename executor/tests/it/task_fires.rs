//! Fires of timers whose notify creates an asyncflow task, on an executor
//! that has no task engine: a failure a later attempt may not have, so the
//! timer's retry policy applies.

use xtimer_core::fire::FireStatus;
use xtimer_core::timer::{AsyncflowNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_store::TimerRepo;

use crate::helpers::{reconciler_config, Harness};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_fire_without_a_task_engine_is_retried_per_its_policy_then_fails() {
    let h = Harness::start(reconciler_config()).await;
    let new = NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "it".into(),
        name: "tasks".into(),
        status: TimerStatus::Enabled,
        schedule: Schedule::Cron { expr: "*/10 * * * * *".into(), timezone: "UTC".into() },
        notify: Notify::Asyncflow(AsyncflowNotify {
            task_type: "tick".into(),
            task_stage: String::new(),
            context: String::new(),
        }),
        retry: RetryPolicy { max_attempts: 3, backoff_ms: 10, no_retry_statuses: None },
        misfire: MisfirePolicy::FireAll,
        delete_after_run: false,
        on_failure: None,
        on_missed: None,
        on_late: None,
        pause_after_failures: None,
        overlap: Default::default(),
    };
    let timer = h.repo.create_timer(&new, h.now()).await.expect("create timer");
    let keys = h.fires(&timer, &[-10_000]).await;
    h.reconciler.run_once().await.unwrap();
    h.wait_for_status(&keys, FireStatus::Failed).await;
    let f = h.fire(keys[0]).await;
    assert_eq!(f.attempt, 3, "transient: every attempt of the policy is made: {f:?}");
    assert_eq!(f.output, "creating the task failed: this node has no task engine");
}
