//! The executor's error type.

/// Errors of the executor and the reconciler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database or lock store failed.
    #[error(transparent)]
    Store(#[from] xtimer_store::Error),
    /// The HTTP client could not be built (bad TLS set-up).
    #[error("building the HTTP client failed")]
    Client(#[source] reqwest::Error),
    /// The callback policy or signing secrets could not be set up (a bad
    /// CIDR range, an unreadable tokens file, no randomness).
    #[error("setting up callbacks failed: {0}")]
    CallbackSetup(String),
}

/// Result with the executor error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
