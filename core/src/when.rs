//! Saying when beyond the schedule: a timer's bounds (`startAt`, `endAt`),
//! run limit ([`TimerSpec::max_fires`](crate::spec::TimerSpec::max_fires)), spread
//! ([`TimerSpec::spread_ms`](crate::spec::TimerSpec::spread_ms)), excluded calendars and catch-up window
//! (`misfireThresholdMs`), and the times they leave.
//!
//! Every reader of a timer's times (the migrator's expansion, the
//! preview, the forecast, `firesLeft`) goes through [`fire_times`], so
//! they agree on what fires.

use std::sync::Arc;

use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::calendar::CompiledCalendar;
use crate::schedule::Schedule;
/// Shortest interval of an `everyMs` timer.
pub const MIN_EVERY_MS: i64 = 1_000;
/// Widest spread ([`TimerSpec::spread_ms`](crate::spec::TimerSpec::spread_ms)): one hour.
pub const MAX_SPREAD_MS: u64 = 3_600_000;
/// Narrowest `misfireThresholdMs`.
pub const MIN_MISFIRE_THRESHOLD_MS: u64 = 1_000;
/// Widest `misfireThresholdMs`: a week.
pub const MAX_MISFIRE_THRESHOLD_MS: u64 = 604_800_000;
/// Largest run limit ([`TimerSpec::max_fires`](crate::spec::TimerSpec::max_fires)): it is worked out by
/// counting that many times, when a timer is stored and when `firesLeft`
/// is read.
pub const MAX_FIRES_LIMIT: u64 = 100_000;
/// Scheduled times one reading of a timer with calendars looks at, at most
/// (a calendar that excludes everything ends the reading there).
const MAX_SCANNED: usize = 1_000_000;

/// What a timer says about when, beyond its schedule. Stored as JSON
/// beside the timer; the default says nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Timing {
    /// No scheduled fire before this time (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_at: Option<i64>,
    /// No scheduled fire at or after this time (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_at: Option<i64>,
    /// Only the first this many scheduled times from the start fire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fires: Option<u64>,
    /// Each fire is sent in `[scheduled, scheduled + spread_ms)`, at the
    /// second with the fewest fires planned.
    #[serde(skip_serializing_if = "is_zero")]
    pub spread_ms: u64,
    /// Names of the app's calendars whose days and ranges do not fire.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude_calendars: Vec<String>,
    /// This timer's catch-up window, instead of the node's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misfire_threshold_ms: Option<u64>,
    /// The last scheduled time `max_fires` leaves, worked out when the
    /// timer is stored ([`last_run`]); `None`: no such bound (no limit, or
    /// the schedule has fewer times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<i64>,
    /// What the timer is for, in words (`description`). Kept last, so that
    /// in the stored JSON everything after its key is its text (a search
    /// by `q` reads it there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Timing {
    /// Whether it says nothing beyond the schedule (stored as no value).
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }

    /// End of the times it leaves, exclusive: `endAt`, or just after the
    /// last time the run limit leaves, whichever is first.
    pub fn end_ms(&self) -> Option<i64> {
        let limit = self.last_run.map(|t| t.saturating_add(1));
        match (self.end_at, limit) {
            (Some(end), Some(limit)) => Some(end.min(limit)),
            (end, limit) => end.or(limit),
        }
    }

    /// `[from_ms, to_ms)` narrowed to the bounds; `None` when nothing is left.
    pub fn window(&self, from_ms: i64, to_ms: i64) -> Option<(i64, i64)> {
        let from = self.start_at.map_or(from_ms, |start| from_ms.max(start));
        let to = self.end_ms().map_or(to_ms, |end| to_ms.min(end));
        (from < to).then_some((from, to))
    }

    /// The first time of `schedule` at or after `at_ms` within the bounds
    /// (calendars not read: an excluded time is skipped when expanded).
    pub fn next_at_or_after(&self, schedule: &Schedule, at_ms: i64) -> Option<i64> {
        let at = self.start_at.map_or(at_ms, |start| at_ms.max(start));
        let t = schedule.next_fire_at_or_after(at)?;
        self.end_ms().is_none_or(|end| t < end).then_some(t)
    }

    /// Where the run limit counts from: `startAt`, else the creation.
    pub fn counts_from(&self, create_time: i64) -> i64 {
        self.start_at.unwrap_or(create_time)
    }

    /// This timer's catch-up window, or `default_ms`.
    pub fn misfire_threshold_or(&self, default_ms: u64) -> u64 {
        self.misfire_threshold_ms.unwrap_or(default_ms)
    }
}

/// The calendars a timer excludes, compiled, and the zone their days are
/// read in. Empty: nothing excluded.
#[derive(Clone, Default)]
pub struct Exclusions {
    tz: Option<Tz>,
    calendars: Vec<(String, Arc<CompiledCalendar>)>,
}

impl Exclusions {
    /// Nothing excluded.
    pub fn none() -> Self {
        Self::default()
    }

    /// `calendars` (name, compiled) read in `tz`.
    pub fn new(tz: Tz, calendars: Vec<(String, Arc<CompiledCalendar>)>) -> Self {
        Self { tz: Some(tz), calendars }
    }

    /// Whether it excludes nothing.
    pub fn is_empty(&self) -> bool {
        self.calendars.is_empty()
    }

    /// The first calendar that excludes `t_ms`, if any.
    pub fn excluding(&self, t_ms: i64) -> Option<&str> {
        let tz = self.tz?;
        self.calendars.iter().find(|(_, c)| c.excludes(t_ms, tz)).map(|(name, _)| name.as_str())
    }
}

/// One scheduled time and, when a calendar excludes it, that calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotedTime {
    pub run_ms: i64,
    pub excluded_by: Option<String>,
}

/// The scheduled times of `schedule` in `[from_ms, to_ms)` that `timing`
/// leaves (bounds, run limit), each with the calendar excluding it, if
/// any; at most `limit` times, excluded ones among them when `with_excluded`.
pub fn noted_times(
    schedule: &Schedule,
    timing: &Timing,
    exclusions: &Exclusions,
    from_ms: i64,
    to_ms: i64,
    limit: usize,
    with_excluded: bool,
) -> Vec<NotedTime> {
    let Some((from, to)) = timing.window(from_ms, to_ms) else { return Vec::new() };
    if exclusions.is_empty() {
        let times = schedule.times_between(from, to, limit);
        return times.into_iter().map(|run_ms| NotedTime { run_ms, excluded_by: None }).collect();
    }
    let chunk = limit.clamp(64, 10_000);
    let (mut out, mut cursor, mut scanned) = (Vec::new(), from, 0usize);
    while out.len() < limit && scanned < MAX_SCANNED {
        let times = schedule.times_between(cursor, to, chunk);
        scanned += times.len();
        for &run_ms in &times {
            let excluded_by = exclusions.excluding(run_ms).map(str::to_owned);
            if excluded_by.is_none() || with_excluded {
                out.push(NotedTime { run_ms, excluded_by });
                if out.len() == limit {
                    return out;
                }
            }
        }
        match times.last() {
            Some(&last) if times.len() == chunk => cursor = last + 1,
            _ => break,
        }
    }
    out
}

/// The times of `schedule` in `[from_ms, to_ms)` that fire: within the
/// bounds and run limit, not excluded; at most `limit`.
pub fn fire_times(
    schedule: &Schedule,
    timing: &Timing,
    exclusions: &Exclusions,
    from_ms: i64,
    to_ms: i64,
    limit: usize,
) -> Vec<i64> {
    noted_times(schedule, timing, exclusions, from_ms, to_ms, limit, false).into_iter().map(|t| t.run_ms).collect()
}

/// The last time `timing.max_fires` leaves: the N-th time that fires from
/// its start (`startAt`, else `create_time`), bounds and calendars
/// applied; `None` when there is no limit or the schedule has fewer.
pub fn last_run(schedule: &Schedule, timing: &Timing, exclusions: &Exclusions, create_time: i64) -> Option<i64> {
    let n = usize::try_from(timing.max_fires?).ok()?;
    if !schedule.repeats() || n == 0 {
        return None;
    }
    let unlimited = Timing { last_run: None, ..timing.clone() };
    let times = fire_times(schedule, &unlimited, exclusions, timing.counts_from(create_time), i64::MAX, n);
    (times.len() == n).then(|| times.last().copied()).flatten()
}

/// Scheduled times the run limit leaves from `now_ms` on: the limit less
/// the times already due since the start; `None` without a limit.
pub fn fires_left(
    schedule: &Schedule,
    timing: &Timing,
    exclusions: &Exclusions,
    create_time: i64,
    now_ms: i64,
) -> Option<u64> {
    let n = timing.max_fires?;
    let unlimited = Timing { last_run: None, ..timing.clone() };
    let from = timing.counts_from(create_time);
    let due = fire_times(schedule, &unlimited, exclusions, from, now_ms, usize::try_from(n).unwrap_or(usize::MAX));
    Some(n.saturating_sub(due.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_790_000_000_000;

    fn every(ms: i64) -> Schedule {
        Schedule::Every { every_ms: ms, anchor_ms: T0, timezone: "UTC".into() }
    }

    #[test]
    fn an_interval_counts_from_its_anchor_whatever_the_window() {
        let s = every(90 * 60_000);
        assert_eq!(s.next_fire_at_or_after(T0 - 5), Some(T0));
        assert_eq!(s.next_fire_at_or_after(T0 + 1), Some(T0 + 5_400_000));
        assert_eq!(s.next_fire_at_or_after(T0 + 5_400_000), Some(T0 + 5_400_000));
        assert_eq!(
            s.times_between(T0 + 1, T0 + 3 * 5_400_000 + 1, 10),
            vec![T0 + 5_400_000, T0 + 10_800_000, T0 + 16_200_000]
        );
    }

    #[test]
    fn an_interval_ignores_its_zones_daylight_saving() {
        // New York springs forward at 2026-03-08T07:00Z: an hourly interval
        // from midnight local keeps its real spacing through it.
        let anchor = 1_772_946_000_000; // 2026-03-08T05:00:00Z, 00:00 in New York
        let s = Schedule::Every { every_ms: 3_600_000, anchor_ms: anchor, timezone: "America/New_York".into() };
        let times = fire_times(&s, &Timing::default(), &Exclusions::none(), anchor, anchor + 5 * 3_600_000, 10);
        assert_eq!(times, (0..5).map(|k| anchor + k * 3_600_000).collect::<Vec<_>>());
    }

    #[test]
    fn bounds_narrow_the_times_and_the_next_one() {
        let s = every(1_000);
        let t = Timing { start_at: Some(T0 + 2_500), end_at: Some(T0 + 5_000), ..Timing::default() };
        assert_eq!(fire_times(&s, &t, &Exclusions::none(), T0, T0 + 60_000, 100), vec![T0 + 3_000, T0 + 4_000]);
        assert_eq!(t.next_at_or_after(&s, T0), Some(T0 + 3_000));
        assert_eq!(t.next_at_or_after(&s, T0 + 4_001), None, "nothing at or after endAt");
    }

    #[test]
    fn max_fires_leaves_the_first_n_times_from_the_start() {
        let s = every(1_000);
        let mut t = Timing { max_fires: Some(3), ..Timing::default() };
        t.last_run = last_run(&s, &t, &Exclusions::none(), T0 - 10);
        assert_eq!(t.last_run, Some(T0 + 2_000));
        assert_eq!(fire_times(&s, &t, &Exclusions::none(), T0, T0 + 60_000, 100), vec![T0, T0 + 1_000, T0 + 2_000]);
        assert_eq!(fires_left(&s, &t, &Exclusions::none(), T0 - 10, T0 + 1_500), Some(1));
        assert_eq!(fires_left(&s, &t, &Exclusions::none(), T0 - 10, T0 + 9_000), Some(0));
        assert_eq!(t.next_at_or_after(&s, T0 + 2_001), None);
        let once = Schedule::Once { run_at_ms: T0 };
        assert_eq!(last_run(&once, &t, &Exclusions::none(), T0), None, "a one-shot has no run limit to work out");
    }
}
