//! A three-stage task type, `fetch` -> `transform` -> `store` -> done,
//! shared by `examples/three_stage.rs` and the end-to-end test.
//!
//! Each stage reads the context the previous one left and writes the next
//! one's, which is how asyncflow carries state between stages: the server
//! stores the context and never reads it. The stages only pretend to work
//! (no network), so the demo runs anywhere.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use xtimer_asyncflow::wire::{TaskData, TaskScheduleCfg};

use crate::handler::{Handler, Outcome, Task};

/// The demo's task type.
pub const TASK_TYPE: &str = "three_stage_demo";

/// The first stage.
pub const FIRST_STAGE: &str = "fetch";

/// The demo type's configuration: polled every second, a failed stage
/// waits 2 s, then 4 s (the interval doubles from 1 s, capped at 4 s), and
/// a task fails for good after 3 retries.
pub fn cfg() -> TaskScheduleCfg {
    TaskScheduleCfg {
        task_type: TASK_TYPE.into(),
        schedule_limit: 10,
        schedule_interval: 1,
        max_processing_time: 30,
        max_retry_num: 3,
        retry_interval: 1,
        max_retry_interval: 4,
        ..Default::default()
    }
}

/// What travels between the stages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DemoContext {
    /// Where `fetch` pretends to read from.
    pub source: String,
    /// What `fetch` read.
    pub fetched: Option<String>,
    /// What `transform` made of it.
    pub transformed: Option<String>,
    /// Words `transform` counted.
    pub words: Option<usize>,
    /// Where `store` pretends to have written it.
    pub stored_at: Option<String>,
    /// `transform` fails with a retryable error while the task has failed
    /// fewer times than this, to show the retry back-off. Use a big number
    /// to see a task fail for good after max_retry_num retries.
    pub fail_transform: i64,
}

/// A new demo task for `source` whose transform stage fails
/// `fail_transform` times first.
pub fn new_task(source: &str, fail_transform: i64) -> TaskData {
    let context = DemoContext { source: source.into(), fail_transform, ..Default::default() };
    TaskData {
        task_type: TASK_TYPE.into(),
        task_stage: FIRST_STAGE.into(),
        context: serde_json::to_string(&context).unwrap_or_default(),
        ..Default::default()
    }
}

/// The demo's handler.
#[derive(Debug, Clone, Default)]
pub struct ThreeStage {
    /// How long each stage pretends to work. Defaults to 0.
    pub work: Duration,
}

#[async_trait::async_trait]
impl Handler for ThreeStage {
    async fn handle(&self, task: Task) -> Outcome {
        let mut ctx: DemoContext = match task.context_json::<Option<DemoContext>>() {
            Ok(ctx) => ctx.unwrap_or_default(),
            // A context no stage can read never gets better: fail for good.
            Err(err) => return Outcome::fatal(format!("context is not a DemoContext: {err}")),
        };
        tokio::time::sleep(self.work).await;
        match task.stage() {
            "" | FIRST_STAGE => {
                ctx.fetched = Some(format!("the quick brown fox jumps over the lazy dog (from {})", ctx.source));
                Outcome::next("transform", &ctx)
            }
            "transform" => {
                if task.crt_retry_num() < ctx.fail_transform {
                    return Outcome::retry(format!(
                        "transform: upstream busy (simulated failure {} of {})",
                        task.crt_retry_num() + 1,
                        ctx.fail_transform
                    ));
                }
                let text = ctx.fetched.clone().unwrap_or_default();
                ctx.words = Some(text.split_whitespace().count());
                ctx.transformed = Some(text.to_uppercase());
                Outcome::next("store", &ctx)
            }
            "store" => {
                ctx.stored_at = Some(format!("memory://{}/{}", TASK_TYPE, task.id()));
                Outcome::done_with(&ctx)
            }
            other => Outcome::fatal(format!("unknown stage {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn step(task: &mut TaskData) -> Outcome {
        let outcome = ThreeStage::default().handle(Task::new(task.clone())).await;
        match &outcome {
            Outcome::Next { stage, context } => {
                task.task_stage = stage.clone();
                task.context = context.clone();
            }
            Outcome::Done { context: Some(context) } => task.context = context.clone(),
            _ => {}
        }
        outcome
    }

    #[tokio::test]
    async fn stages_run_fetch_transform_store_then_done() {
        let mut task = new_task("s3://bucket/in.txt", 0);
        assert!(matches!(step(&mut task).await, Outcome::Next { ref stage, .. } if stage == "transform"));
        assert!(matches!(step(&mut task).await, Outcome::Next { ref stage, .. } if stage == "store"));
        assert!(matches!(step(&mut task).await, Outcome::Done { context: Some(_) }));
        let ctx: DemoContext = serde_json::from_str(&task.context).unwrap();
        assert_eq!(ctx.words, Some(11));
        assert!(ctx.stored_at.is_some() && ctx.transformed.unwrap().starts_with("THE QUICK"));
    }

    #[tokio::test]
    async fn transform_fails_as_often_as_asked() {
        let mut task = new_task("x", 2);
        step(&mut task).await;
        assert!(matches!(step(&mut task).await, Outcome::Retry(_)));
        task.crt_retry_num = 2;
        assert!(matches!(step(&mut task).await, Outcome::Next { .. }));
    }

    #[tokio::test]
    async fn unreadable_context_is_fatal() {
        let task = TaskData { context: "[1,2]".into(), ..new_task("x", 0) };
        assert!(matches!(ThreeStage::default().handle(Task::new(task)).await, Outcome::Fatal(_)));
    }
}
