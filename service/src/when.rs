//! Saying when: a timer's timing settled before it is stored (its
//! calendars exist, its run limit worked out), the app's calendars, the
//! preview of a schedule and the forecast of planned fires.

use std::collections::BTreeMap;

use xtimer_core::calendar::{Calendar, CalendarSpec};
use xtimer_core::timer::{NewTimer, Schedule, Timer, TimerStatus, Timing};
use xtimer_core::when::{self, Exclusions, NotedTime};

use crate::checks;
use crate::error::{Result, ServiceError};
use crate::key::Actor;
use crate::key::TimerKey;
use crate::timer_service::TimerService;

/// Longest calendar name, characters.
pub const MAX_CALENDAR_NAME_CHARS: usize = 256;
/// Most seconds one forecast covers.
pub const MAX_FORECAST_SECONDS: u32 = 3_600;
/// Most timers a forecast reads beyond what is planned.
const MAX_FORECAST_TIMERS: usize = 100_000;

/// A forecast: fires to be sent in each second of a window, as planned now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forecast {
    /// Start of the window (a whole second), Unix ms.
    pub from_ms: i64,
    /// Fires per second, one entry per second of the window.
    pub per_second: Vec<u64>,
}

impl TimerService {
    /// Checks that the calendars `timer` excludes exist in its app and
    /// works out the last time its run limit leaves (counted from
    /// `create_time`). `index` names a batch item in the error.
    pub(crate) async fn settle_timing(
        &self,
        timer: &mut NewTimer,
        create_time: i64,
        index: Option<usize>,
    ) -> Result<()> {
        for (i, name) in timer.timing.exclude_calendars.iter().enumerate() {
            if self.0.calendars.get_calendar(&timer.app, name).await?.is_none() {
                let field = match index {
                    Some(n) => format!("timers[{n}].excludeCalendars[{i}]"),
                    None => format!("excludeCalendars[{i}]"),
                };
                return Err(ServiceError::invalid(
                    field,
                    format!("no calendar `{name}` in app `{}`: make it with putCalendar first", timer.app),
                ));
            }
        }
        timer.timing.last_run = None;
        if timer.timing.max_fires.is_some() && timer.schedule.repeats() {
            let exclusions = self.exclusions(&timer.app, &timer.schedule, &timer.timing).await?;
            timer.timing.last_run = when::last_run(&timer.schedule, &timer.timing, &exclusions, create_time);
        }
        Ok(())
    }

    pub(crate) async fn exclusions(&self, app: &str, schedule: &Schedule, timing: &Timing) -> Result<Exclusions> {
        Ok(self.0.expander.calendars().exclusions_of(app, schedule, &timing.exclude_calendars).await?)
    }

    /// How many scheduled times `timer`'s run limit leaves from now; `None`
    /// without a limit.
    pub async fn fires_left(&self, timer: &Timer) -> Result<Option<u64>> {
        if timer.timing.max_fires.is_none() {
            return Ok(None);
        }
        if !timer.schedule.repeats() {
            return Ok(Some(u64::from(timer.status == TimerStatus::Enabled)));
        }
        let exclusions = self.exclusions(&timer.app, &timer.schedule, &timer.timing).await?;
        let now = self.0.clock.now_ms();
        Ok(when::fires_left(&timer.schedule, &timer.timing, &exclusions, timer.create_time, now))
    }

    /// `timer`'s next scheduled time after `now_ms` that fires (bounds, run
    /// limit and calendars applied); `None` when it is not enabled or has
    /// nothing left.
    pub async fn next_fire(&self, timer: &Timer, now_ms: i64) -> Result<Option<i64>> {
        if timer.status != TimerStatus::Enabled {
            return Ok(None);
        }
        if !timer.schedule.repeats() || timer.timing.exclude_calendars.is_empty() {
            return Ok(timer.timing.next_at_or_after(&timer.schedule, now_ms + 1));
        }
        let exclusions = self.exclusions(&timer.app, &timer.schedule, &timer.timing).await?;
        Ok(when::fire_times(&timer.schedule, &timer.timing, &exclusions, now_ms + 1, i64::MAX, 1).first().copied())
    }

    /// The next `count` scheduled times of `schedule` from `from_ms` that
    /// `timing` leaves, with those `app`'s calendars exclude listed too
    /// (each noted with its calendar). The calendars must exist.
    pub async fn preview(
        &self,
        app: Option<&str>,
        schedule: &Schedule,
        timing: &Timing,
        from_ms: i64,
        count: usize,
    ) -> Result<Vec<NotedTime>> {
        let exclusions = match app {
            Some(app) if !timing.exclude_calendars.is_empty() => {
                checks::check_app(app)?;
                for (i, name) in timing.exclude_calendars.iter().enumerate() {
                    if self.0.calendars.get_calendar(app, name).await?.is_none() {
                        return Err(ServiceError::invalid(
                            format!("excludeCalendars[{i}]"),
                            format!("no calendar `{name}` in app `{app}`"),
                        ));
                    }
                }
                self.exclusions(app, schedule, timing).await?
            }
            None if !timing.exclude_calendars.is_empty() => {
                return Err(ServiceError::invalid(
                    "app",
                    "is required with excludeCalendars: calendars belong to an app",
                ))
            }
            _ => Exclusions::none(),
        };
        let mut timing = timing.clone();
        timing.last_run = when::last_run(schedule, &timing, &exclusions, from_ms);
        let times = match schedule {
            Schedule::Once { run_at_ms } => schedule
                .times_between(from_ms, i64::MAX, 1)
                .into_iter()
                .filter(|_| timing.window(*run_at_ms, run_at_ms + 1).is_some())
                .map(|run_ms| NotedTime { run_ms, excluded_by: None })
                .collect(),
            _ => when::noted_times(schedule, &timing, &exclusions, from_ms, i64::MAX, count, true),
        };
        Ok(times)
    }

    /// The fires to be sent in each second of `[from_ms, from_ms + seconds
    /// s)` as planned now, of `app` or every app: the pending fires stored,
    /// and beyond them the enabled timers' schedules, spread fires placed
    /// as they would be.
    pub async fn forecast(&self, app: Option<&str>, from_ms: i64, seconds: u32) -> Result<Forecast> {
        let from = from_ms - from_ms.rem_euclid(1000);
        let to = from + i64::from(seconds) * 1000;
        let mut per_second: BTreeMap<i64, u64> = BTreeMap::new();
        if let Some(app) = app {
            checks::check_app(app)?;
        }
        per_second.extend(self.0.fires.planned_per_second(app, from, to).await?);
        // Beyond what is planned: each enabled timer's times from its next
        // unexpanded fire on; spread ones placed over every app's load, as
        // they will be.
        let mut load: std::collections::HashMap<i64, u64> =
            self.0.fires.spread_load(from, to).await?.into_iter().collect();
        let mut after_id = 0;
        let mut read = 0;
        while read < MAX_FORECAST_TIMERS {
            let page = self.0.timers.enabled_due_before(app, to, after_id, 1_000).await?;
            let Some((last, _)) = page.last() else { break };
            after_id = last.id;
            read += page.len();
            let mut candidates = Vec::new();
            for (timer, next) in &page {
                let next = *next;
                if next <= 0 {
                    continue;
                }
                let exclusions = self.exclusions(&timer.app, &timer.schedule, &timer.timing).await?;
                let lookback = timer.timing.spread_ms as i64;
                let times = when::fire_times(
                    &timer.schedule,
                    &timer.timing,
                    &exclusions,
                    next.max(from - lookback),
                    to,
                    usize::MAX,
                );
                for t in times {
                    if timer.timing.spread_ms > 0 {
                        candidates.push(xtimer_migrator::spread::Candidate::of(timer, t));
                    } else if t >= from {
                        let second = t - t.rem_euclid(1000);
                        *per_second.entry(second).or_default() += 1;
                        *load.entry(second).or_default() += 1;
                    }
                }
            }
            for (_, _, sent) in xtimer_migrator::spread::choose(&mut candidates, &mut load) {
                if (from..to).contains(&sent) {
                    *per_second.entry(sent - sent.rem_euclid(1000)).or_default() += 1;
                }
            }
        }
        let mut out = vec![0; seconds as usize];
        for (second, n) in per_second {
            if let Some(slot) = usize::try_from((second - from) / 1000).ok().and_then(|i| out.get_mut(i)) {
                *slot += n;
            }
        }
        Ok(Forecast { from_ms: from, per_second: out })
    }

    /// Creates or replaces `app`'s calendar `name`; the app's timers that
    /// exclude it are planned again at once (their fires not yet claimed
    /// follow it).
    pub async fn put_calendar(&self, app: &str, name: &str, spec: CalendarSpec) -> Result<Calendar> {
        checks::check_app(app)?;
        check_calendar_name(name)?;
        spec.compile().map_err(|err| ServiceError::Invalid { field: "calendar".into(), problem: err.to_string() })?;
        let now = self.0.clock.now_ms();
        let calendar = self.0.calendars.put_calendar(app, name, &spec, now).await?;
        self.0.expander.calendars().forget(app, name);
        for timer in self.timers_excluding(app, name).await? {
            let key = TimerKey { id: timer.id, app: app.to_owned(), proven: true, by: Actor::Anonymous };
            match self.update_replanning(&key, |stored, _| Ok::<_, ServiceError>(definition(stored))).await {
                Ok(_) | Err(ServiceError::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(calendar)
    }

    /// `app`'s calendar `name`.
    pub async fn calendar(&self, app: &str, name: &str) -> Result<Calendar> {
        checks::check_app(app)?;
        self.0.calendars.get_calendar(app, name).await?.ok_or_else(|| calendar_not_found(app, name))
    }

    /// `app`'s calendars, by name.
    pub async fn app_calendars(&self, app: &str) -> Result<Vec<Calendar>> {
        checks::check_app(app)?;
        Ok(self.0.calendars.app_calendars(app).await?)
    }

    /// Deletes `app`'s calendar `name`; refused while a timer excludes it.
    pub async fn delete_calendar(&self, app: &str, name: &str) -> Result<()> {
        checks::check_app(app)?;
        let users = self.timers_excluding(app, name).await?;
        if !users.is_empty() {
            let named: Vec<String> = users.iter().take(20).map(|t| format!("{} ({})", t.id, t.name)).collect();
            let more = if users.len() > 20 { format!(" and {} more", users.len() - 20) } else { String::new() };
            return Err(ServiceError::invalid(
                "name",
                format!(
                    "calendar `{name}` is excluded by timers {}{more}: take it out of their excludeCalendars first",
                    named.join(", ")
                ),
            ));
        }
        if !self.0.calendars.delete_calendar(app, name).await? {
            return Err(calendar_not_found(app, name));
        }
        self.0.expander.calendars().forget(app, name);
        Ok(())
    }

    async fn timers_excluding(&self, app: &str, name: &str) -> Result<Vec<Timer>> {
        let timers = self.0.timers.timers_with_timing(app).await?;
        Ok(timers.into_iter().filter(|t| t.timing.exclude_calendars.iter().any(|n| n == name)).collect())
    }
}

/// `timer`'s definition as `createTimer` would take it.
pub(crate) fn definition(timer: &Timer) -> NewTimer {
    let status = match timer.status {
        TimerStatus::Enabled => TimerStatus::Enabled,
        _ => TimerStatus::Disabled,
    };
    NewTimer { status, ..timer.def.clone() }
}

fn check_calendar_name(name: &str) -> Result<()> {
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_CALENDAR_NAME_CHARS {
        return Err(ServiceError::invalid("name", format!("must be 1 to {MAX_CALENDAR_NAME_CHARS} characters")));
    }
    Ok(())
}

fn calendar_not_found(app: &str, name: &str) -> ServiceError {
    ServiceError::CalendarNotFound { app: app.to_owned(), name: name.to_owned() }
}
