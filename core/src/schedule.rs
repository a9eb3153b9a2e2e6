//! When a timer fires: a cron expression in a zone, one moment, or a
//! fixed interval from an anchor.

/// When a timer fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// A cron expression evaluated in an IANA time zone.
    Cron { expr: String, timezone: String },
    /// Exactly once, at a Unix millisecond.
    Once { run_at_ms: i64 },
    /// Every `every_ms` from `anchor_ms` (`anchorAt + k * everyMs`, k whole),
    /// whatever the zone; `timezone` only says which day a calendar reads.
    Every { every_ms: i64, anchor_ms: i64, timezone: String },
}

impl Schedule {
    /// The first fire time at or after `at_ms`; `None` when there is none
    /// (a one-shot whose time is before `at_ms`, or a cron that does not
    /// parse or never fires again).
    pub fn next_fire_at_or_after(&self, at_ms: i64) -> Option<i64> {
        match self {
            Self::Once { run_at_ms } => (*run_at_ms >= at_ms).then_some(*run_at_ms),
            Self::Cron { expr, timezone } => {
                let schedule = crate::cron::CronSchedule::parsed(expr, timezone).ok()?;
                let before = chrono::DateTime::from_timestamp_millis(at_ms - 1)?;
                schedule.next_after(before).map(|t| t.timestamp_millis())
            }
            Self::Every { every_ms, anchor_ms, .. } => {
                let every = (*every_ms).max(1);
                if at_ms <= *anchor_ms {
                    return Some(*anchor_ms);
                }
                let steps =
                    (at_ms - anchor_ms).div_euclid(every) + i64::from((at_ms - anchor_ms).rem_euclid(every) != 0);
                anchor_ms.checked_add(steps.checked_mul(every)?)
            }
        }
    }

    /// Its times in `[from_ms, to_ms)`, at most `limit`; a one-shot's time
    /// when it falls there.
    pub fn times_between(&self, from_ms: i64, to_ms: i64, limit: usize) -> Vec<i64> {
        match self {
            Self::Once { run_at_ms } => {
                if (from_ms..to_ms).contains(run_at_ms) && limit > 0 {
                    vec![*run_at_ms]
                } else {
                    Vec::new()
                }
            }
            Self::Cron { expr, timezone } => match crate::cron::CronSchedule::parsed(expr, timezone) {
                Ok(cron) => cron.fires_between(from_ms, to_ms, limit),
                Err(_) => Vec::new(),
            },
            Self::Every { every_ms, .. } => {
                let mut out = Vec::new();
                let mut next = self.next_fire_at_or_after(from_ms);
                while let Some(t) = next.filter(|t| *t < to_ms && out.len() < limit) {
                    out.push(t);
                    next = t.checked_add(*every_ms);
                }
                out
            }
        }
    }

    /// The last fire time before `before_ms`; `None` for a one-shot, and
    /// when there is none within [`Self::LOOK_BACK_MS`].
    pub fn previous_before(&self, before_ms: i64) -> Option<i64> {
        match self {
            Self::Once { .. } => None,
            Self::Every { every_ms, anchor_ms, .. } => {
                let every = (*every_ms).max(1);
                (before_ms > *anchor_ms).then(|| anchor_ms + (before_ms - 1 - anchor_ms).div_euclid(every) * every)
            }
            Self::Cron { .. } => {
                // Windows before it, doubling, until one holds a fire time.
                let mut width = 2_000;
                while width <= Self::LOOK_BACK_MS {
                    let times = self.times_between(before_ms.saturating_sub(width), before_ms, usize::MAX);
                    if let Some(last) = times.last() {
                        return Some(*last);
                    }
                    width *= 2;
                }
                None
            }
        }
    }

    /// How far back [`Self::previous_before`] looks: a little over a year.
    pub const LOOK_BACK_MS: i64 = 400 * 86_400_000;

    /// The IANA zone its days are read in (UTC for a one-shot).
    pub fn timezone(&self) -> &str {
        match self {
            Self::Cron { timezone, .. } | Self::Every { timezone, .. } => timezone,
            Self::Once { .. } => "UTC",
        }
    }

    /// Whether it fires more than once.
    pub fn repeats(&self) -> bool {
        !matches!(self, Self::Once { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_fire_time_of_each_kind() {
        let cron = Schedule::Cron { expr: "*/5 * * * * *".into(), timezone: "Asia/Shanghai".into() };
        assert_eq!(cron.previous_before(1_767_225_610_000), Some(1_767_225_605_000));
        assert_eq!(cron.previous_before(1_767_225_611_000), Some(1_767_225_610_000));
        let yearly = Schedule::Cron { expr: "0 0 1 1 *".into(), timezone: "UTC".into() };
        // 2026-01-01T00:00:00Z, found from mid-2026.
        assert_eq!(yearly.previous_before(1_782_000_000_000), Some(1_767_225_600_000));
        let every = Schedule::Every { every_ms: 1_000, anchor_ms: 10_000, timezone: "UTC".into() };
        assert_eq!(every.previous_before(10_000), None);
        assert_eq!(every.previous_before(10_001), Some(10_000));
        assert_eq!(every.previous_before(12_000), Some(11_000));
        assert_eq!(Schedule::Once { run_at_ms: 5 }.previous_before(10), None);
    }
}
