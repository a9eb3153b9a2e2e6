//! What the executor and the reconciler record for `GET /metrics`: fires
//! by outcome and the lateness of each fire's first attempt. Each call is
//! a lookup and an atomic add in the installed recorder (none installed:
//! nothing), cheap enough for every fire.

use xtimer_core::fire::FireStatus;
use xtimer_core::metrics::{outcome, FIRES_TOTAL, FIRE_LATENESS_SECONDS};

/// Counts `n` fires that ended with `status`; statuses that are not an
/// end (pending, running) are not counted.
pub fn fires_ended(status: FireStatus, n: u64) {
    let label = match status {
        FireStatus::Succeeded => outcome::SUCCEEDED,
        FireStatus::Failed => outcome::FAILED,
        FireStatus::Missed => outcome::MISSED,
        FireStatus::Skipped => outcome::SKIPPED,
        FireStatus::Pending | FireStatus::Running => return,
    };
    if n > 0 {
        metrics::counter!(FIRES_TOTAL, "outcome" => label).increment(n);
    }
}

/// Records a first attempt that left `late_ms` after its scheduled time.
pub fn lateness(late_ms: i64) {
    metrics::histogram!(FIRE_LATENESS_SECONDS).record(late_ms.max(0) as f64 / 1000.0);
}
