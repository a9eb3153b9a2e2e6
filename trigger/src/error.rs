//! The trigger's error type.

/// Errors of the trigger.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The shard or lock store failed.
    #[error(transparent)]
    Store(#[from] xtimer_store::Error),
}

/// Result with the trigger error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
