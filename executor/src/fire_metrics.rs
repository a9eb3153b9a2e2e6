//! What the executor and the reconciler record for `GET /metrics`: fires
//! by outcome and the lateness of each fire's first attempt. A paced fire
//! (backfilled or replayed) is late by design: it is counted on its own
//! ([`PACED_FIRES_TOTAL`]), not in the lateness. Each call is an atomic
//! add in the installed recorder (none installed: nothing).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, Histogram};
use xtimer_core::fire::FireStatus;
use xtimer_core::metrics::{outcome, FIRES_TOTAL, FIRE_LATENESS_SECONDS};
use xtimer_core::{SharedClock, TtlCache};

/// Counter of paced fires sent (backfilled or replayed), each once: left
/// out of the lateness histogram, which they would drown (a backfill's
/// fires are hours late by design).
pub const PACED_FIRES_TOTAL: &str = "xtimer_paced_fires_total";

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
    paced: Counter,
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
                paced: metrics::counter!(PACED_FIRES_TOTAL),
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

    /// A fire's first send, `late_ms` after its scheduled time: its
    /// lateness recorded, or, when it is `paced` (backfilled or replayed),
    /// counted in [`PACED_FIRES_TOTAL`] instead.
    pub fn first_send(&self, paced: bool, late_ms: i64) {
        if paced {
            self.handles().paced.increment(1);
        } else {
            self.lateness(late_ms);
        }
    }
}

/// How long a paced fire's note waits for its first send.
const PACED_NOTE_MS: u64 = 60 * 60_000;
/// Most paced fires noted at once (the oldest notes go first).
const PACED_NOTES: usize = 100_000;

/// The paced fires (backfilled or replayed) this node claimed and has not
/// sent yet, by task id, so their first send is counted apart
/// ([`FireMetrics::first_send`]). A claimed fire does not say it was
/// backfilled; the reconciler, which claims every paced fire, knows and
/// notes it. Bounded: a note waits [`PACED_NOTE_MS`] at most, and the
/// check costs nothing while no paced fire was noted lately.
pub struct PacedFires {
    notes: TtlCache<i64, ()>,
    clock: SharedClock,
    /// Until when a note may be held, Unix ms.
    noted_until: AtomicI64,
}

impl PacedFires {
    /// None noted, on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        let notes = TtlCache::new(PACED_NOTES, Duration::from_millis(PACED_NOTE_MS), clock.clone());
        Self { notes, clock, noted_until: AtomicI64::new(i64::MIN) }
    }

    /// Notes fires `task_ids` as paced.
    pub fn note(&self, task_ids: impl IntoIterator<Item = i64>) {
        let mut any = false;
        for id in task_ids {
            self.notes.insert(id, ());
            any = true;
        }
        if any {
            self.noted_until.fetch_max(self.clock.now_ms() + PACED_NOTE_MS as i64, Ordering::Relaxed);
        }
    }

    /// Whether fire `task_id` was noted paced (and not taken since): true
    /// once.
    pub fn take(&self, task_id: i64) -> bool {
        if self.clock.now_ms() > self.noted_until.load(Ordering::Relaxed) {
            return false;
        }
        self.notes.take(&task_id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::AtomicU64;
    use std::sync::{Arc, Mutex};

    use metrics::{CounterFn, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};

    use super::*;

    /// Counts what is recorded, by metric name.
    #[derive(Default)]
    struct Tally(Mutex<HashMap<String, Arc<Cell>>>);

    #[derive(Default)]
    struct Cell(AtomicU64);

    impl CounterFn for Cell {
        fn increment(&self, n: u64) {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
        fn absolute(&self, n: u64) {
            self.0.store(n, Ordering::Relaxed);
        }
    }

    impl HistogramFn for Cell {
        fn record(&self, _: f64) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Tally {
        fn cell(&self, key: &Key) -> Arc<Cell> {
            self.0.lock().unwrap().entry(key.name().to_owned()).or_default().clone()
        }
        fn get(&self, name: &str) -> u64 {
            self.0.lock().unwrap().get(name).map_or(0, |c| c.0.load(Ordering::Relaxed))
        }
    }

    impl Recorder for Tally {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> metrics::Counter {
            metrics::Counter::from_arc(self.cell(key))
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> metrics::Gauge {
            metrics::Gauge::noop()
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> metrics::Histogram {
            metrics::Histogram::from_arc(self.cell(key))
        }
    }

    #[test]
    fn a_paced_fire_is_counted_apart_and_left_out_of_the_lateness() {
        let tally = Tally::default();
        metrics::with_local_recorder(&tally, || {
            let m = FireMetrics::default();
            m.first_send(false, 12);
            m.first_send(true, 3_600_000);
            m.first_send(true, 7_200_000);
        });
        assert_eq!(tally.get(FIRE_LATENESS_SECONDS), 1, "only the fire on its schedule");
        assert_eq!(tally.get(PACED_FIRES_TOTAL), 2);
    }

    #[test]
    fn a_paced_note_is_taken_once_and_lapses() {
        let clock = Arc::new(xtimer_core::clock::ManualClock::new(1_000_000));
        let paced = PacedFires::new(clock.clone());
        assert!(!paced.take(7), "none noted");
        paced.note([7, 8]);
        assert!(paced.take(7));
        assert!(!paced.take(7), "once");
        clock.advance(PACED_NOTE_MS as i64 + 1);
        assert!(!paced.take(8), "lapsed");
    }
}
