//! What a receiver's answer may ask of its timer (the reply headers of
//! API 1e): a one-shot's next run (`X-Xtimer-Next-Run-At`, a
//! self-rescheduling poll) and a pause (`X-Xtimer-Pause`).

use crate::timer::Timer;

/// The reply header that moves a one-shot timer to a new `runAt`.
pub const NEXT_RUN_AT: &str = "x-xtimer-next-run-at";
/// The reply header that disables the timer, its value the reason.
pub const PAUSE: &str = "x-xtimer-pause";
/// Most characters of a pause reason kept.
pub const MAX_REASON_CHARS: usize = 256;

/// What a receiver asked for in its answer's headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// `X-Xtimer-Next-Run-At` as sent.
    pub next_run_at: Option<String>,
    /// `X-Xtimer-Pause` as sent.
    pub pause: Option<String>,
}

impl Asked {
    /// Whether it asks for anything.
    pub fn is_empty(&self) -> bool {
        self.next_run_at.is_none() && self.pause.is_none()
    }
}

/// A request of the receiver that was not carried out, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotDone(pub String);

/// Carries out what receivers ask of their timers; the service layer
/// implements it, the executor calls it.
#[async_trait::async_trait]
pub trait Steering: Send + Sync {
    /// Moves one-shot `timer` to run again at `run_at_ms`: it stays
    /// enabled and its fire is planned.
    async fn run_again_at(&self, timer: &Timer, run_at_ms: i64) -> Result<(), NotDone>;
    /// Disables `timer`, recording `reason` as its pause reason.
    async fn pause(&self, timer: &Timer, reason: &str) -> Result<(), NotDone>;
}

/// A `X-Xtimer-Next-Run-At` value: RFC 3339 or Unix milliseconds.
pub fn parse_next_run_at(value: &str) -> Option<i64> {
    let value = value.trim();
    match value.parse::<i64>() {
        Ok(ms) => Some(ms),
        Err(_) => chrono::DateTime::parse_from_rfc3339(value).ok().map(|t| t.timestamp_millis()),
    }
}

/// A pause reason as kept: trimmed, control characters out, at most
/// [`MAX_REASON_CHARS`]; "paused by its receiver" when empty.
pub fn pause_reason(value: &str) -> String {
    let reason: String = value.trim().chars().filter(|c| !c.is_control()).take(MAX_REASON_CHARS).collect();
    if reason.is_empty() {
        "paused by its receiver (X-Xtimer-Pause)".to_owned()
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_run_at_reads_rfc3339_and_milliseconds() {
        assert_eq!(parse_next_run_at("1767225600000"), Some(1_767_225_600_000));
        assert_eq!(parse_next_run_at(" 2026-01-01T08:00:00+08:00 "), Some(1_767_225_600_000));
        assert_eq!(parse_next_run_at("tomorrow"), None);
    }

    #[test]
    fn a_pause_reason_is_kept_short_and_plain() {
        assert_eq!(pause_reason(" quota "), "quota");
        assert_eq!(pause_reason(""), "paused by its receiver (X-Xtimer-Pause)");
        assert_eq!(pause_reason(&"x".repeat(1000)).len(), MAX_REASON_CHARS);
    }
}
