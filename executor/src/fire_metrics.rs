//! What the executor and the reconciler record for `GET /metrics`: fires
//! by outcome and the lateness of each fire's first attempt. Each call is
//! an atomic add in the installed recorder (none installed: nothing).

use std::sync::OnceLock;

use metrics::{Counter, Histogram};
use xtimer_core::fire::FireStatus;
use xtimer_core::metrics::{outcome, FIRES_TOTAL, FIRE_LATENESS_SECONDS};

/// Counts `n` fires that ended with `status`; statuses that are not an
/// end (pending, running) are not counted.
pub fn fires_ended(status: FireStatus, n: u64) {
    let Some(label) = outcome_label(status) else { return };
    if n > 0 {
        metrics::counter!(FIRES_TOTAL, "outcome" => label).increment(n);
    }
}

/// Records a first attempt that left `late_ms` after its scheduled time.
pub fn lateness(late_ms: i64) {
    metrics::histogram!(FIRE_LATENESS_SECONDS).record(seconds(late_ms));
}

fn outcome_label(status: FireStatus) -> Option<&'static str> {
    match status {
        FireStatus::Succeeded => Some(outcome::SUCCEEDED),
        FireStatus::Failed => Some(outcome::FAILED),
        FireStatus::Missed => Some(outcome::MISSED),
        FireStatus::Skipped => Some(outcome::SKIPPED),
        FireStatus::Pending | FireStatus::Running => None,
    }
}

fn seconds(late_ms: i64) -> f64 {
    late_ms.max(0) as f64 / 1000.0
}

/// The same metrics for the executor's hot path, through handles looked up
/// in the recorder once (at the first fire, when the node's HTTP server
/// has installed it) instead of at every fire.
#[derive(Default)]
pub struct FireMetrics {
    handles: OnceLock<Handles>,
}

struct Handles {
    succeeded: Counter,
    failed: Counter,
    missed: Counter,
    skipped: Counter,
    lateness: Histogram,
}

impl FireMetrics {
    fn handles(&self) -> &Handles {
        self.handles.get_or_init(|| {
            let counter = |label: &'static str| metrics::counter!(FIRES_TOTAL, "outcome" => label);
            Handles {
                succeeded: counter(outcome::SUCCEEDED),
                failed: counter(outcome::FAILED),
                missed: counter(outcome::MISSED),
                skipped: counter(outcome::SKIPPED),
                lateness: metrics::histogram!(FIRE_LATENESS_SECONDS),
            }
        })
    }

    /// [`fires_ended`].
    pub fn fires_ended(&self, status: FireStatus, n: u64) {
        if n == 0 {
            return;
        }
        let h = self.handles();
        let counter = match status {
            FireStatus::Succeeded => &h.succeeded,
            FireStatus::Failed => &h.failed,
            FireStatus::Missed => &h.missed,
            FireStatus::Skipped => &h.skipped,
            FireStatus::Pending | FireStatus::Running => return,
        };
        counter.increment(n);
    }

    /// [`lateness`].
    pub fn lateness(&self, late_ms: i64) {
        self.handles().lateness.record(seconds(late_ms));
    }
}
