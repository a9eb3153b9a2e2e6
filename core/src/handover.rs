//! [`Handover`]: one-shot timers' definitions passed from the part of a
//! node that expanded them to the executor that fires them.
//!
//! A one-shot timer has one fire. Without a handover its definition is in
//! hand twice: where it is expanded (a create has it from the request, a
//! migrator step reads it) and again at its fire, where the executor reads
//! it back from the database (a statement, its row decoded). The expander
//! leaves the definition here; the fire takes it. It is only a shortcut:
//! a definition not here (another node expanded it, this node restarted,
//! it aged out, the handover was full) is read as before, and one older
//! than the timer's last change is not used.

use std::time::Duration;

use crate::timer::{Schedule, Timer};
use crate::{SharedClock, TtlCache};

/// Most definitions waiting for their fires; past it the oldest is
/// dropped (its fire reads it). About half a kilobyte each.
pub const HANDOVER_CAPACITY: usize = 100_000;

/// How long a definition waits for its fire. Longer than the default
/// migrator horizon (two steps of a minute), the furthest ahead a fire is
/// made; what is left longer was fired elsewhere and is dropped.
pub const HANDOVER_TTL: Duration = Duration::from_secs(300);

/// Definitions of expanded one-shot timers waiting for their fire.
///
/// Each definition is boxed: the map then holds a pointer per timer, not
/// the definition itself, so growing it moves a few bytes per entry. Held
/// inline, 50,000 definitions planned at once cost ~10% of their planning
/// in the map's rehashes and their first touches of fresh memory.
#[derive(Debug)]
pub struct Handover {
    timers: TtlCache<i64, Box<Timer>>,
}

impl Handover {
    /// An empty handover on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        Self { timers: TtlCache::new(HANDOVER_CAPACITY, HANDOVER_TTL, clock) }
    }

    /// Leaves `timer`'s definition for its fire, if it is a one-shot (a
    /// cron timer's definition is kept by the executor across its fires).
    pub fn give(&self, timer: &Timer) {
        if matches!(timer.schedule, Schedule::Once { .. }) {
            self.timers.insert(timer.id, Box::new(timer.clone()));
        }
    }

    /// Takes the definition left for `timer_id`'s fire, if there is one.
    pub fn take(&self, timer_id: i64) -> Option<Timer> {
        self.timers.take(&timer_id).map(|timer| *timer)
    }

    /// Drops definitions whose fire did not come here in time.
    pub fn purge_expired(&self) -> usize {
        self.timers.purge_expired()
    }

    /// Definitions waiting.
    pub fn len(&self) -> usize {
        self.timers.len()
    }

    /// Whether none is waiting.
    pub fn is_empty(&self) -> bool {
        self.timers.is_empty()
    }
}
