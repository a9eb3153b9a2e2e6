//! Fires of timers whose notify creates an asyncflow task instead of
//! calling a URL. The executor knows only this trait; the node implements
//! it over the task engine.

use async_trait::async_trait;
use xtimer_core::fire::FireKey;
use xtimer_core::timer::AsyncflowNotify;

/// Any error, boxed, as a [`CreateTaskError`]'s source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Creates the task of one fire.
#[async_trait]
pub trait TaskCreator: Send + Sync {
    /// Creates the task `notify` describes for fire `key` of a timer of
    /// `app`, and returns its task id. Called again for the same fire (a
    /// retry, a second node), it creates no second task.
    async fn create_task(&self, app: &str, notify: &AsyncflowNotify, key: FireKey) -> Result<String, CreateTaskError>;
}

/// Why a fire's task was not created. [`CreateTaskError::is_permanent`]
/// tells the executor whether to retry: a task the engine refuses as it is
/// ends the fire failed at once, a storage failure is retried per the
/// timer's retry policy.
#[derive(Debug, thiserror::Error)]
pub enum CreateTaskError {
    /// The task type is not registered. Permanent.
    #[error("task type `{0}` is not registered")]
    UnknownType(String),
    /// The task type belongs to another app than the timer's. Permanent.
    #[error("task type `{task_type}` belongs to another app than `{app}`")]
    NotOwner {
        /// The task type.
        task_type: String,
        /// The timer's app.
        app: String,
    },
    /// The engine refuses the task as the timer describes it (a field out
    /// of range, a malformed type). Permanent.
    #[error("the task is invalid")]
    Invalid(#[source] BoxError),
    /// Storing the task failed (the database, a batch write, the engine
    /// shutting down). Transient.
    #[error("storing the task failed")]
    Storage(#[source] BoxError),
    /// This node runs no task engine. Transient: retried like before, in
    /// case the node is being set up.
    #[error("this node has no task engine")]
    NoEngine,
}

impl CreateTaskError {
    /// Whether every later attempt would fail the same way.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::UnknownType(_) | Self::NotOwner { .. } | Self::Invalid(_) => true,
            Self::Storage(_) | Self::NoEngine => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_permanent_and_storage_failures_are_not() {
        let io = || Box::new(std::io::Error::other("disk")) as BoxError;
        assert!(CreateTaskError::UnknownType("t".into()).is_permanent());
        assert!(CreateTaskError::NotOwner { task_type: "t".into(), app: "a".into() }.is_permanent());
        assert!(CreateTaskError::Invalid(io()).is_permanent());
        assert!(!CreateTaskError::Storage(io()).is_permanent());
        assert!(!CreateTaskError::NoEngine.is_permanent());
    }

    #[test]
    fn a_wrapped_cause_stays_in_the_chain() {
        let err = CreateTaskError::Storage(Box::new(std::io::Error::other("disk full")));
        assert_eq!(xtimer_core::error::error_chain(&err), "storing the task failed: disk full");
    }
}
