//! What a worker's user writes: a [`Handler`] per task type, which runs one
//! stage of a [`Task`] and returns an [`Outcome`].
//!
//! A handler runs exactly one stage and returns; the worker reports the
//! outcome and the server hands the next stage to whichever worker holds
//! it next. That keeps one long task from occupying a worker (seed 001:
//! "each time a worker runs one stage and throws it back to flowSvr").

use std::future::Future;

use serde::de::DeserializeOwned;
use serde::Serialize;
use xtimer_asyncflow::wire::TaskData;

/// One held task, as a handler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// The task as the server returned it from hold_tasks.
    pub data: TaskData,
}

impl Task {
    /// Wraps a held task.
    pub fn new(data: TaskData) -> Self {
        Self { data }
    }
    /// The task id.
    pub fn id(&self) -> &str {
        &self.data.task_id
    }
    /// The task type.
    pub fn task_type(&self) -> &str {
        &self.data.task_type
    }
    /// The stage to run now (empty for a task created without one).
    pub fn stage(&self) -> &str {
        &self.data.task_stage
    }
    /// The context text the previous stage (or create_task) left.
    pub fn context(&self) -> &str {
        &self.data.context
    }
    /// The context decoded from JSON; an empty context decodes as `null`,
    /// so `Option<T>` or a `#[serde(default)]` type accepts it.
    pub fn context_json<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        let text = if self.data.context.trim().is_empty() { "null" } else { &self.data.context };
        serde_json::from_str(text)
    }
    /// Failed attempts so far (0 on the first try).
    pub fn crt_retry_num(&self) -> i64 {
        self.data.crt_retry_num
    }
    /// Failed attempts allowed before the task fails for good.
    pub fn max_retry_num(&self) -> i64 {
        self.data.max_retry_num
    }
    /// Whether a [`Outcome::Retry`] now would fail the task for good.
    pub fn is_last_attempt(&self) -> bool {
        self.data.crt_retry_num >= self.data.max_retry_num
    }
}

/// How a stage ended. Outcomes are not errors: `Retry` and `Fatal` are the
/// handler telling the worker what to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The stage succeeded; run `stage` next with `context`. The task goes
    /// back to pending at once (order_time = now - priority).
    Next {
        /// The next stage's name.
        stage: String,
        /// The context the next stage gets.
        context: String,
    },
    /// Every stage is done: status 3. `Some(context)` replaces the stored
    /// context (e.g. with the final result); `None` leaves it.
    Done {
        /// The final context, if it changes.
        context: Option<String>,
    },
    /// The stage failed and may succeed later: the retry rule of API.md
    /// (the interval doubles up to the type's max_retry_interval; status 4
    /// once max_retry_num retries are spent). The same stage runs again.
    Retry(String),
    /// The stage failed and retrying cannot help: status 4 now.
    Fatal(String),
}

impl Outcome {
    /// `Next` with `context` encoded as JSON.
    pub fn next(stage: impl Into<String>, context: &impl Serialize) -> Self {
        Outcome::Next { stage: stage.into(), context: to_json(context) }
    }
    /// `Done` keeping the stored context.
    pub fn done() -> Self {
        Outcome::Done { context: None }
    }
    /// `Done` with a final context encoded as JSON.
    pub fn done_with(context: &impl Serialize) -> Self {
        Outcome::Done { context: Some(to_json(context)) }
    }
    /// `Retry` with an error's text.
    pub fn retry(err: impl std::fmt::Display) -> Self {
        Outcome::Retry(err.to_string())
    }
    /// `Fatal` with an error's text.
    pub fn fatal(err: impl std::fmt::Display) -> Self {
        Outcome::Fatal(err.to_string())
    }
    /// The error text of `Retry` and `Fatal`.
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::Retry(e) | Outcome::Fatal(e) => Some(e),
            _ => None,
        }
    }
}

fn to_json(value: &impl Serialize) -> String {
    // Serializing plain data to a String cannot fail; a type whose
    // Serialize impl errors gets `null` rather than a panic in the worker.
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

/// Runs one stage of a task of the type it is registered for.
///
/// Implement it on a struct, or pass an async closure
/// `|task: Task| async move { ... Outcome::done() }`. A panic inside
/// `handle` is caught and counts as [`Outcome::Retry`].
#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs `task.stage()` and says how it ended.
    async fn handle(&self, task: Task) -> Outcome;
}

#[async_trait::async_trait]
impl<F, Fut> Handler for F
where
    F: Fn(Task) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    async fn handle(&self, task: Task) -> Outcome {
        (self)(task).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_context_decodes_as_null() {
        let task = Task::new(TaskData::default());
        assert_eq!(task.context_json::<Option<u32>>().unwrap(), None);
    }

    #[test]
    fn outcome_helpers_encode_json() {
        assert_eq!(
            Outcome::next("b", &serde_json::json!({"k": 1})),
            Outcome::Next { stage: "b".into(), context: r#"{"k":1}"#.into() }
        );
        assert_eq!(Outcome::retry("boom").error(), Some("boom"));
    }
}
