//! The calendars timers exclude (`excludeCalendars`), read from the store
//! and compiled, for every reader of a timer's times.
//!
//! A calendar is read again once it is [`FRESH`] old, so a calendar
//! changed on another node is followed within that; `putCalendar` re-plans
//! the timers that use it at once, reading it anew ([`CalendarBook::forget`]).

use std::sync::Arc;
use std::time::Duration;

use xtimer_core::calendar::CompiledCalendar;
use xtimer_core::cron::parse_timezone;
use xtimer_core::timer::{Schedule, Timer};
use xtimer_core::when::Exclusions;
use xtimer_core::{SharedClock, TtlCache};
use xtimer_store::CalendarRepo;

use crate::Result;

/// How long a calendar read is used before it is read again.
const FRESH: Duration = Duration::from_secs(5);
/// Calendars kept compiled at most.
const CAPACITY: usize = 10_000;

/// Compiled calendars by (app, name); `None`: no such calendar. Clones
/// share the cache.
#[derive(Clone)]
pub struct CalendarBook {
    repo: Arc<dyn CalendarRepo>,
    compiled: Arc<Compiled>,
}

/// Compiled calendars by (app, name); `None`: no such calendar.
type Compiled = TtlCache<(String, String), Option<Arc<CompiledCalendar>>>;

impl CalendarBook {
    /// A book over `repo`, its reads aged by `clock`.
    pub fn new(repo: Arc<dyn CalendarRepo>, clock: SharedClock) -> Self {
        Self { repo, compiled: Arc::new(TtlCache::new(CAPACITY, FRESH, clock)) }
    }

    /// The calendar `name` of `app`, compiled; `None` when there is none.
    pub async fn calendar(&self, app: &str, name: &str) -> Result<Option<Arc<CompiledCalendar>>> {
        let key = (app.to_owned(), name.to_owned());
        if let Some(found) = self.compiled.get(&key) {
            return Ok(found);
        }
        let compiled = match self.repo.get_calendar(app, name).await? {
            Some(calendar) => match calendar.spec.compile() {
                Ok(compiled) => Some(Arc::new(compiled)),
                Err(err) => {
                    tracing::warn!(app, calendar = name, error = %err, "A stored calendar does not compile; it excludes nothing.");
                    None
                }
            },
            None => None,
        };
        self.compiled.insert(key, compiled.clone());
        Ok(compiled)
    }

    /// What `timer`'s calendars exclude, read in its zone. A one-shot names
    /// its own time: nothing is excluded.
    pub async fn exclusions(&self, timer: &Timer) -> Result<Exclusions> {
        self.exclusions_of(&timer.app, &timer.schedule, &timer.timing.exclude_calendars).await
    }

    /// What `app`'s calendars `names` exclude of `schedule`'s times.
    pub async fn exclusions_of(&self, app: &str, schedule: &Schedule, names: &[String]) -> Result<Exclusions> {
        if names.is_empty() || !schedule.repeats() {
            return Ok(Exclusions::none());
        }
        let Ok(tz) = parse_timezone(schedule.timezone()) else { return Ok(Exclusions::none()) };
        let mut calendars = Vec::with_capacity(names.len());
        for name in names {
            if let Some(compiled) = self.calendar(app, name).await? {
                calendars.push((name.clone(), compiled));
            }
        }
        Ok(Exclusions::new(tz, calendars))
    }

    /// Drops what is known of `app`'s calendar `name` (it was just changed).
    pub fn forget(&self, app: &str, name: &str) {
        self.compiled.invalidate(&(app.to_owned(), name.to_owned()));
    }
}
