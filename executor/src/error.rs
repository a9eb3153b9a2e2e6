//! The executor's error type.

/// Errors of the executor and the reconciler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database or lock store failed.
    #[error(transparent)]
    Store(#[from] xtimer_store::Error),
    /// The HTTP client could not be built (bad TLS set-up).
    #[error("building the HTTP client failed")]
    Client(#[source] crate::callback::ClientError),
    /// The callback configuration is invalid (a bad CIDR range, an
    /// unreadable tokens file).
    #[error("setting up callbacks failed: the configuration is invalid")]
    CallbackConfig(#[source] xtimer_core::Error),
    /// The server-wide signing secret could not be generated (no randomness).
    #[error("setting up callbacks failed: generating the signing secret failed")]
    SecretGeneration(#[source] std::io::Error),
}

/// Result with the executor error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
