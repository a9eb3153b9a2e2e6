//! The migrator's error type.

/// Errors of a migrator step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database or shard store failed.
    #[error(transparent)]
    Store(#[from] xtimer_store::Error),
}

/// Result with the migrator error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
