//! The migrator's error type.

/// Errors of a migrator step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database or shard store failed.
    #[error(transparent)]
    Store(#[from] xtimer_store::Error),
    /// Every run time tried for a manual fire was taken (manual fires of
    /// one timer made faster than one per millisecond).
    #[error("timer {timer_id} was triggered too often in the same moment; try again")]
    ManualFireTaken { timer_id: i64 },
}

/// Result with the migrator error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
