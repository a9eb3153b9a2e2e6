//! The domain error type.

/// Errors in the domain: bad schedules, bad time zones, bad configuration.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A cron expression that cannot be parsed.
    #[error("cron `{expr}` is invalid: {reason}")]
    InvalidCron { expr: String, reason: String },
    /// A cron expression that parses but has no fire time in the future.
    #[error("cron `{0}` never fires")]
    CronNeverFires(String),
    /// A time zone name that is not in the IANA database.
    #[error("unknown time zone `{0}`: use an IANA name such as `Europe/Berlin` or `UTC`")]
    UnknownTimezone(String),
    /// One or more invalid configuration values; every problem is listed.
    #[error("invalid configuration: {}", .0.join("; "))]
    Config(Vec<String>),
}

/// Result with the domain error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and each of its causes, joined by `": "`: the one line logs and
/// fire outputs show.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        // Many errors print their source in their own text already.
        let said = cause.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}
