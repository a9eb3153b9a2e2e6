//! The scheduler's error type.

/// Errors of a scheduler tick.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lock store failed.
    #[error(transparent)]
    Store(#[from] xtimer_store::Error),
    /// The trigger stopped taking shards (the node is shutting down).
    #[error("the trigger is gone")]
    TriggerGone,
}

/// Result with the scheduler error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
