//! The service's one error type: what a use case refuses, and what failed.

use std::time::Duration;

/// Every way a use case can fail. A caller (the HTTP API) maps each variant
/// to its reply; the messages are the ones the caller shows.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No timer with this id in this app: unknown, deleted, or another
    /// app's where the caller did not prove its app (ids do not leak
    /// across apps).
    #[error("timer {id} not found in app `{app}` (it may have been deleted)")]
    NotFound {
        /// The id asked for.
        id: i64,
        /// The app asked for.
        app: String,
    },
    /// No calendar of this name in this app.
    #[error("calendar `{name}` not found in app `{app}`")]
    CalendarNotFound {
        /// The app asked for.
        app: String,
        /// The name asked for.
        name: String,
    },
    /// Another app's timer, asked for by a caller that proved it acts for
    /// `app`: it is told why.
    #[error("timer {id} belongs to another app than `{app}`")]
    Forbidden {
        /// The id asked for.
        id: i64,
        /// The app the caller acts for.
        app: String,
    },
    /// A field the use case refuses: `"{field}: {problem}"`.
    #[error("{field}: {problem}")]
    Invalid {
        /// The field at fault, as the caller named it (`cron`, `timers[3].name`).
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A timer's spec refused: every problem, each `"{field}: {problem}"`.
    #[error("{0}")]
    Spec(#[from] xtimer_core::spec::Invalid),
    /// Another timer that is not deleted has this name in this app.
    #[error("a timer named `{name}` already exists in app `{app}`: pick another name or delete that timer first")]
    NameTaken {
        /// The app.
        app: String,
        /// The name.
        name: String,
    },
    /// Live timer `id` of `app` holds the create's `dedupeKey` (and the
    /// create said `onDuplicate: reject`, the default).
    #[error(
        "dedupeKey `{key}` is held by timer {id} of app `{app}`: give onDuplicate `keep` to be answered its id, \
         `replace` to give it this definition, or create again once it has fired or been deleted"
    )]
    KeyHeld {
        /// The app.
        app: String,
        /// The key.
        key: String,
        /// The timer holding it.
        id: i64,
    },
    /// Creates of one `dedupeKey` kept taking it from each other and this
    /// one did not settle: the same call may succeed in a moment.
    #[error("dedupeKey `{key}` of app `{app}` is being created by other calls at the same time: retry")]
    KeyBusy {
        /// The app.
        app: String,
        /// The key.
        key: String,
    },
    /// A quota or rate is reached; the message names it and its setting.
    #[error("{msg}")]
    LimitExceeded {
        /// What limit, and what to do.
        msg: String,
        /// When to try again, if it is a rate.
        retry_after: Option<Duration>,
    },
    /// The service stopped a create before it could answer (it may or may
    /// not be stored).
    #[error("the create was interrupted before its answer: retry it (a 409 then means it was stored)")]
    Interrupted,
    /// The database or Redis cannot be reached for now (a failover, a
    /// restart, no connection free): the same call may succeed in a moment.
    #[error("the database or Redis cannot be reached for now")]
    Unavailable(#[source] Cause),
    /// The timer or fire store failed.
    #[error("the timer store failed")]
    Store(#[source] Cause),
    /// Planning a timer's fires failed.
    #[error("expanding the timer into fires failed")]
    Expand(#[source] Cause),
    /// Looking up a task type's owner failed.
    #[error("the task engine failed")]
    TaskEngine(#[source] Cause),
    /// The system's randomness failed (issuing a token).
    #[error("no randomness")]
    Randomness(#[source] std::io::Error),
}

/// What failed below the service (the store, the planner, the task
/// engine), kept for the log: callers see its message, never its type.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

impl ServiceError {
    /// An [`ServiceError::Invalid`] naming `field`.
    pub fn invalid(field: impl Into<String>, problem: impl std::fmt::Display) -> Self {
        Self::Invalid { field: field.into(), problem: problem.to_string() }
    }
}

impl From<xtimer_store::Error> for ServiceError {
    /// A taken name is [`ServiceError::NameTaken`]; a database or Redis out
    /// of reach [`ServiceError::Unavailable`]; any other failure
    /// [`ServiceError::Store`].
    fn from(err: xtimer_store::Error) -> Self {
        match err {
            xtimer_store::Error::NameTaken { app, name } => Self::NameTaken { app, name },
            other if other.is_transient() => Self::Unavailable(Box::new(other)),
            other => Self::Store(Box::new(other)),
        }
    }
}

impl From<xtimer_migrator::Error> for ServiceError {
    /// A manual fire already taken this second is a rate
    /// ([`ServiceError::LimitExceeded`]); the store out of reach
    /// [`ServiceError::Unavailable`]; any other failure
    /// [`ServiceError::Expand`].
    fn from(err: xtimer_migrator::Error) -> Self {
        match err {
            xtimer_migrator::Error::ManualFireTaken { .. } => {
                Self::LimitExceeded { msg: err.to_string(), retry_after: Some(Duration::from_secs(1)) }
            }
            xtimer_migrator::Error::Store(store) if store.is_transient() => Self::Unavailable(Box::new(store)),
            other => Self::Expand(Box::new(other)),
        }
    }
}

/// Result with [`ServiceError`].
pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use xtimer_core::error::error_chain;

    #[test]
    fn a_failure_below_keeps_its_causes_for_the_log() {
        let err = ServiceError::from(xtimer_migrator::Error::Store(xtimer_store::Error::Corrupt("t_timer 7".into())));
        assert!(matches!(err, ServiceError::Expand(_)), "{err:?}");
        assert_eq!(error_chain(&err), "expanding the timer into fires failed: corrupt row: t_timer 7");
        let err = ServiceError::from(xtimer_store::Error::Corrupt("secret".into()));
        assert!(matches!(err, ServiceError::Store(_)), "a defect stays a failure: {err:?}");
        assert!(error_chain(&err).contains("secret"));
    }

    #[test]
    fn a_store_out_of_reach_is_unavailable_and_a_taken_name_a_conflict() {
        let cut = || xtimer_store::Error::Connect {
            setting: "database.url",
            url: "postgres://db:5432/xtimer".into(),
            source: Box::new(xtimer_store::Error::Corrupt("connection refused".into())),
        };
        let err = ServiceError::from(cut());
        assert!(matches!(err, ServiceError::Unavailable(_)), "{err:?}");
        assert!(error_chain(&err).contains("connection refused"), "{}", error_chain(&err));
        let planned = ServiceError::from(xtimer_migrator::Error::Store(cut()));
        assert!(matches!(planned, ServiceError::Unavailable(_)), "{planned:?}");
        let taken = ServiceError::from(xtimer_store::Error::NameTaken { app: "a".into(), name: "n".into() });
        assert!(matches!(taken, ServiceError::NameTaken { .. }), "{taken:?}");
    }
}
