//! What a timer adds to its app's fires per minute, the unit of the
//! `limits.fires_per_minute_per_app` check.
//!
//! A cron timer adds its peak: the fires in one minute it fires in (every
//! such minute matches the same seconds, so one minute tells). A one-shot
//! timer adds one fire to the minute it is due in. The app's busiest
//! minute is then at most the sum of its enabled cron timers' peaks plus
//! its fullest minute of one-shots: counters kept as timers change, so the
//! check costs the same with ten timers or a million.

use chrono::DateTime;

use crate::cron::CronSchedule;
use crate::timer::Schedule;

/// A timer's share of its app's fires per minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// A cron timer firing at most this many times in any minute.
    Cron(u64),
    /// A one-shot timer due in this minute (Unix minutes).
    Minute(i64),
}

impl Load {
    /// The load of `schedule` from `now_ms` on. A cron that never fires
    /// again (a past year) adds nothing.
    pub fn of(schedule: &Schedule, now_ms: i64) -> Self {
        match schedule {
            Schedule::Once { run_at_ms } => Self::Minute(run_at_ms.div_euclid(60_000)),
            Schedule::Cron { expr, timezone } => Self::Cron(cron_peak(expr, timezone, now_ms)),
            // An interval fires at most this often in any minute.
            Schedule::Every { every_ms, .. } => {
                Self::Cron((60_000 + every_ms.max(&1) - 1).div_euclid(*every_ms.max(&1)) as u64)
            }
        }
    }
}

/// Fires of the cron in a minute it fires in, if it fires after `now_ms`.
fn cron_peak(expr: &str, timezone: &str, now_ms: i64) -> u64 {
    let Some(now) = DateTime::from_timestamp_millis(now_ms) else { return 0 };
    let Ok(cron) = CronSchedule::parsed(expr, timezone) else { return 0 };
    match cron.next_after(now) {
        Some(_) => cron.fires_per_minute(),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expr: &str) -> Schedule {
        Schedule::Cron { expr: expr.into(), timezone: "UTC".into() }
    }

    const NOW: i64 = 1_790_000_000_000;

    #[test]
    fn a_cron_adds_the_fires_of_a_minute_it_fires_in() {
        assert_eq!(Load::of(&cron("* * * * * *"), NOW), Load::Cron(60));
        assert_eq!(Load::of(&cron("*/5 * * * * *"), NOW), Load::Cron(12));
        assert_eq!(Load::of(&cron("0 30 2 * * ?"), NOW), Load::Cron(1));
        // Every second, but only in one hour of the day: still 60 then.
        assert_eq!(Load::of(&cron("* * 3 * * *"), NOW), Load::Cron(60));
        assert_eq!(Load::of(&cron("0-9 * * * *"), NOW), Load::Cron(1));
    }

    #[test]
    fn the_peak_is_the_fires_of_the_first_minute_it_fires_in() {
        for expr in [
            "* * * * * *",
            "*/7 * * * * *",
            "0,15,30 * * * * *",
            "5-9 */2 * * * *",
            "@hourly",
            "0 0 * * *",
            "30 0 12 L * ?",
        ] {
            let cron = CronSchedule::parsed(expr, "Europe/Berlin").unwrap();
            let first = cron.next_after(DateTime::from_timestamp_millis(NOW).unwrap()).unwrap();
            let minute = first.timestamp_millis().div_euclid(60_000) * 60_000;
            let scanned = cron.fires_between(minute, minute + 60_000, 60).len() as u64;
            assert_eq!(Load::of(&cron_in(expr, "Europe/Berlin"), NOW), Load::Cron(scanned), "{expr}");
        }
    }

    fn cron_in(expr: &str, timezone: &str) -> Schedule {
        Schedule::Cron { expr: expr.into(), timezone: timezone.into() }
    }

    #[test]
    fn a_cron_that_never_fires_again_adds_nothing() {
        assert_eq!(Load::of(&cron("0 0 0 1 1 ? 2020"), NOW), Load::Cron(0));
    }

    #[test]
    fn a_one_shot_adds_one_fire_to_its_minute() {
        assert_eq!(Load::of(&Schedule::Once { run_at_ms: 125_000 }, NOW), Load::Minute(2));
        assert_eq!(Load::of(&Schedule::Once { run_at_ms: -1 }, NOW), Load::Minute(-1));
    }
}
