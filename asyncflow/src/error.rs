//! The engine's error type. Each case knows its wire code; storage failures
//! take the code of the call that hit them.

use std::sync::Arc;

use crate::task_id::TaskIdError;
use crate::wire::code;

/// What can go wrong in the task engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Input a caller can fix: a missing field, a value out of range.
    #[error("{0}")]
    Invalid(String),
    /// A task id or task type that cannot name a table.
    #[error(transparent)]
    BadId(#[from] TaskIdError),
    /// The task type has no configuration (register it first).
    #[error("task type {0:?} is not registered")]
    UnknownType(String),
    /// No task has this id.
    #[error("task {0} not found")]
    TaskNotFound(String),
    /// A new type differs from a registered one only in letter case (table
    /// names are case-insensitive on SQLite).
    #[error("task type {0:?} clashes with registered type {1:?}: types may not differ only in case")]
    TypeClash(String, String),
    /// register_task of a type that exists: nothing was changed.
    #[error("task type {0:?} is already registered; change its cfg with /v1/set_task_schedule_cfg")]
    TypeExists(String),
    /// The type belongs to another app.
    #[error("task type {0:?} belongs to another app")]
    NotOwner(String),
    /// The task tables failed.
    #[error("task store")]
    Store(#[from] xtimer_store::Error),
    /// A batched write or combined hold failed: the batch's one cause,
    /// shared by every call in it (and logged once for the batch).
    #[error("the batch this call was in failed")]
    WriteFailed(#[source] Arc<Error>),
    /// The combined hold this call waited on was dropped before it dealt.
    #[error("the combined hold this call waited on was interrupted")]
    Interrupted,
    /// The engine is shutting down.
    #[error("the task engine is shutting down")]
    ShuttingDown,
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The wire code of this error when raised by a call whose own failure code is `call_code`.
    pub fn code(&self, call_code: i32) -> i32 {
        match self {
            Self::Invalid(_) | Self::BadId(_) | Self::NotOwner(_) => code::INPUT_INVALID,
            Self::UnknownType(_) => code::GET_TASK_SET_POS,
            Self::TypeExists(_) => code::REGISTER_INSERT,
            _ => call_code,
        }
    }

    /// Whether the caller is at fault (the reply names the cause) rather
    /// than the server (the reply is generic and the cause is logged).
    pub fn is_caller_fault(&self) -> bool {
        matches!(
            self,
            Self::Invalid(_)
                | Self::BadId(_)
                | Self::UnknownType(_)
                | Self::TaskNotFound(_)
                | Self::TypeClash(..)
                | Self::TypeExists(_)
                | Self::NotOwner(_)
        )
    }
}
