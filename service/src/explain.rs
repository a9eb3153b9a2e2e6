//! Seeing inside one timer (API 1h): why a scheduled time fired as it did
//! or never fired (`explainFire`), and its figures over the last day
//! (`stats` in `getTimer`).
//!
//! Both read only what is already stored: the fire row (its status, the
//! token of the claim that took it last, which names the node, its
//! attempts, lateness and last output), the timer's change history and its
//! definition. Nothing is written per fire for them.

use serde_json::Value;
use xtimer_core::clock::rfc3339;
use xtimer_core::fire::{Fire, FireStatus};
use xtimer_core::timer::{Schedule, Timer, TimerStatus};
use xtimer_store::{FireDetail, HistoryEntry, SKIPPED_OUTPUT};

use crate::error::Result;
use crate::history::MAX_HISTORY;
use crate::{checks, ServiceError, TimerKey, TimerService};

/// The window the per-timer figures cover: the last 24 hours.
pub const STATS_WINDOW_MS: i64 = 86_400_000;
/// Most fires the per-timer figures read: the newest this many of the
/// window (one range of the `(timer_id, run_timer)` index), so a timer
/// firing every second (86,400 a day) costs a bounded read.
pub const STATS_MAX_FIRES: u32 = 10_000;

/// Why a scheduled time fired as it did, or did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The fire record, when there is one.
    pub fire: Option<Fire>,
    /// What happened, oldest first.
    pub timeline: Vec<Moment>,
    /// The answer in one sentence.
    pub verdict: String,
}

/// One event of an [`Explanation`]'s timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moment {
    /// When, Unix ms.
    pub at_ms: i64,
    /// What: `planned`, `claimed`, `sent`, `retried`, `succeeded`, ...,
    /// or a change of the timer (`create`, `disable`, `enable`, ...).
    pub event: String,
    /// The node, where one did it.
    pub node: Option<String>,
    /// More, in words.
    pub detail: Option<String>,
}

impl Moment {
    fn new(at_ms: i64, event: impl Into<String>, node: Option<String>, detail: Option<String>) -> Self {
        Self { at_ms, event: event.into(), node, detail }
    }
}

/// A timer's figures over the last [`STATS_WINDOW_MS`] (at most the
/// newest [`STATS_MAX_FIRES`] fires of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerStats {
    /// Fires due in the window (every status).
    pub fires: u64,
    /// Of them, succeeded.
    pub succeeded: u64,
    /// Failed (every attempt).
    pub failed: u64,
    /// Missed (the misfire policy).
    pub missed: u64,
    /// Median lateness of the fires sent (succeeded or failed), ms.
    pub late_p50_ms: Option<i64>,
    /// 99th percentile of that lateness, ms.
    pub late_p99_ms: Option<i64>,
}

impl TimerService {
    /// Why timer `key`'s scheduled time `scheduled_ms` fired as it did or
    /// did not fire. A deleted timer is explained too, as long as its
    /// records are kept; another app's is [`ServiceError::Forbidden`] to a
    /// caller that proved its app, else not found.
    pub async fn explain(&self, key: &TimerKey, scheduled_ms: i64) -> Result<Explanation> {
        checks::check_app(&key.app)?;
        let timer = match self.0.timers.get_timer(key.id).await? {
            Some(timer) if timer.app == key.app => timer,
            Some(timer) if key.proven => return Err(ServiceError::Forbidden { id: timer.id, app: key.app.clone() }),
            _ => return Err(key.not_found()),
        };
        let mut history = self.0.timers.timer_history(key.id, MAX_HISTORY).await?;
        history.reverse();
        let now = self.0.clock.now_ms();
        match self.0.fires.fire_at(key.id, scheduled_ms).await? {
            Some(detail) => Ok(explain_fire(&timer, &history, detail, now)),
            None => self.explain_absence(&timer, &history, scheduled_ms, now).await,
        }
    }

    /// `timer`'s figures over the last day.
    pub async fn stats(&self, timer: &Timer) -> Result<TimerStats> {
        let now = self.0.clock.now_ms();
        let outcomes = self.0.fires.outcomes_between(timer.id, now - STATS_WINDOW_MS, now, STATS_MAX_FIRES).await?;
        let mut stats = TimerStats { fires: outcomes.len() as u64, ..TimerStats::default() };
        let mut late = Vec::new();
        for o in &outcomes {
            match o.status {
                FireStatus::Succeeded => stats.succeeded += 1,
                FireStatus::Failed => stats.failed += 1,
                FireStatus::Missed => stats.missed += 1,
                _ => {}
            }
            if matches!(o.status, FireStatus::Succeeded | FireStatus::Failed) {
                late.push(o.cost_time.max(0));
            }
        }
        late.sort_unstable();
        stats.late_p50_ms = percentile(&late, 50);
        stats.late_p99_ms = percentile(&late, 99);
        Ok(stats)
    }

    /// Why `timer` has no fire record at `t`: each reason tested in turn.
    async fn explain_absence(&self, timer: &Timer, history: &[HistoryEntry], t: i64, now: i64) -> Result<Explanation> {
        let mut timeline = changes_around(history, t);
        let at = rfc3339(t);
        let verdict = if timer.schedule.next_fire_at_or_after(t) != Some(t) {
            let before = timer.schedule.previous_before(t);
            let after = timer.schedule.next_fire_at_or_after(t);
            let near = match (before, after) {
                (Some(b), Some(a)) => {
                    format!("the nearest are {} ({b}) before and {} ({a}) after", rfc3339(b), rfc3339(a))
                }
                (Some(b), None) => format!("the nearest is {} ({b}) before; none after", rfc3339(b)),
                (None, Some(a)) => format!("the nearest is {} ({a}) after", rfc3339(a)),
                (None, None) => "it has no time near it".to_owned(),
            };
            let changed = history
                .iter()
                .find(|e| e.at_ms > t && changed_any(e, &["cron", "timezone", "runAt", "everyMs", "anchorAt"]))
                .map(|e| {
                    format!(" (its schedule changed at {} by {}: this is the schedule now)", rfc3339(e.at_ms), e.by)
                })
                .unwrap_or_default();
            format!("not a scheduled time: {} does not give {at}; {near}{changed}", describe(&timer.schedule))
        } else if let Some(start) = timer.timing.start_at.filter(|start| t < *start) {
            format!("before startAt: the timer fires from {} ({start}) on", rfc3339(start))
        } else if let Some(end) = timer.timing.end_at.filter(|end| t >= *end) {
            format!("after endAt: the timer fires before {} ({end}) only", rfc3339(end))
        } else if let (Some(max), Some(last)) = (timer.timing.max_fires, timer.timing.last_run.filter(|last| t > *last))
        {
            format!("maxFires used: its {max} fires end with the one at {} ({last})", rfc3339(last))
        } else if let Some(calendar) = self.excluding_calendar(timer, t).await? {
            format!("excluded by calendar `{calendar}`: it does not fire on the days and ranges it lists")
        } else if let Some(why) = not_enabled_then(timer, history, t) {
            why
        } else if t < timer.create_time {
            format!("before the timer existed: it was created at {}", rfc3339(timer.create_time))
        } else if t > now {
            match timer.status {
                TimerStatus::Enabled => {
                    "not planned yet: a fire is planned once its time is within the planning horizon".to_owned()
                }
                status => format!("the timer is not enabled now (status {}): nothing ahead is planned", status.code()),
            }
        } else if t < now - self.0.config.keep_fires_ms as i64 {
            format!(
                "no record left: fire records are kept {} ms (retention.keep_fires_ms) and this one is older",
                self.0.config.keep_fires_ms
            )
        } else {
            let replanned = history
                .iter()
                .rev()
                .find(|e| e.at_ms <= t + 1 && e.action == "update")
                .map(|e| format!("; its fires were planned again by an update at {}", rfc3339(e.at_ms)))
                .unwrap_or_default();
            format!("no fire record: it was never planned or its record was removed{replanned}")
        };
        timeline.push(Moment::new(t, "scheduled", None, Some(format!("no fire record at {at}"))));
        timeline.sort_by_key(|m| m.at_ms);
        Ok(Explanation { fire: None, timeline, verdict })
    }

    /// The first of `timer`'s calendars that excludes `t`, if any.
    async fn excluding_calendar(&self, timer: &Timer, t: i64) -> Result<Option<String>> {
        if timer.timing.exclude_calendars.is_empty() {
            return Ok(None);
        }
        let exclusions = self.exclusions(&timer.app, &timer.schedule, &timer.timing).await?;
        Ok(exclusions.excluding(t).map(str::to_owned))
    }
}

/// The timeline and verdict of a fire that has a record.
fn explain_fire(timer: &Timer, history: &[HistoryEntry], detail: FireDetail, now: i64) -> Explanation {
    let FireDetail { fire, owner, lease_until } = detail;
    let node = owner.as_deref().map(node_of);
    let by = node.clone().unwrap_or_else(|| "no node".into());
    let mut timeline = Vec::new();
    let planned = match (fire.manual, fire.run_ms != fire.scheduled_ms) {
        (true, _) => "triggered by triggerTimer (manual)".to_owned(),
        (false, true) => format!("scheduled for {}, spread to {}", rfc3339(fire.scheduled_ms), rfc3339(fire.run_ms)),
        (false, false) => format!("scheduled for {}", rfc3339(fire.scheduled_ms)),
    };
    timeline.push(Moment::new(fire.create_time, "planned", None, Some(planned)));
    let sent_at = fire.run_ms + fire.cost_time.max(0);
    let ended = fire.status.is_final();
    if let Some(token) = &owner {
        let at = if fire.attempt > 0 { sent_at } else { fire.modify_time };
        let detail = format!("claim {token} (the last claim: a fire taken over names the node that took it)");
        timeline.push(Moment::new(at, "claimed", node.clone(), Some(detail)));
    }
    if fire.attempt > 0 {
        let detail = format!("attempt 1, {} ms late", fire.cost_time);
        timeline.push(Moment::new(sent_at, "sent", node.clone(), Some(detail)));
        if fire.attempt > 1 {
            let detail = format!("{} attempts in all; the record keeps the last answer only", fire.attempt);
            timeline.push(Moment::new(fire.modify_time, "retried", node.clone(), Some(detail)));
        }
        timeline.push(Moment::new(fire.modify_time, "answered", node.clone(), Some(fire.output.clone())));
        if let (false, Some(retry_at)) = (ended, lease_until) {
            timeline.push(Moment::new(retry_at, "retry due", node.clone(), None));
        }
    }
    let result = match fire.status {
        FireStatus::Pending | FireStatus::Running => None,
        FireStatus::Succeeded => Some("succeeded"),
        FireStatus::Failed => Some("failed"),
        FireStatus::Skipped => Some("skipped"),
        FireStatus::Missed => Some("missed"),
    };
    if let Some(result) = result {
        let output = (fire.attempt == 0).then(|| fire.output.clone());
        timeline.push(Moment::new(fire.modify_time, result, node.clone(), output));
    }
    let late = format!("{} ms late", fire.cost_time);
    let verdict = match fire.status {
        FireStatus::Pending if fire.run_ms > now => format!("planned: it is due at {}", rfc3339(fire.run_ms)),
        FireStatus::Pending => format!(
            "overdue and not yet claimed ({} ms past its time): the reconciler takes such a fire over",
            now - fire.run_ms
        ),
        FireStatus::Running if fire.attempt == 0 => format!("claimed by {by}: being sent"),
        FireStatus::Running => format!(
            "claimed by {by}: attempt {} answered `{}`, its retry is due at {}",
            fire.attempt,
            fire.output,
            lease_until.map(rfc3339).unwrap_or_default()
        ),
        FireStatus::Succeeded => {
            format!("succeeded on attempt {}: claimed by {by}, sent {late}{}", fire.attempt, lateness(fire.cost_time))
        }
        FireStatus::Failed => {
            format!(
                "failed after {} attempts: claimed by {by}, sent {late}; last answer `{}`",
                fire.attempt, fire.output
            )
        }
        FireStatus::Skipped => skipped_verdict(timer, history, &fire),
        FireStatus::Missed => format!(
            "missed by the misfire policy (`{}`, past its catch-up window): {}",
            timer.misfire.as_str(),
            fire.output
        ),
    };
    timeline.sort_by_key(|m| m.at_ms);
    Explanation { fire: Some(fire), timeline, verdict }
}

/// Why a fire recorded skipped was, from its output.
fn skipped_verdict(timer: &Timer, history: &[HistoryEntry], fire: &Fire) -> String {
    let output = fire.output.as_str();
    if let Some(reason) = output.strip_prefix("app paused: ") {
        format!("skipped: app `{}` was paused ({reason})", timer.app)
    } else if output.contains("overlap") {
        format!("skipped by overlap `{}`: {output}", timer.overlap.as_str())
    } else if output == SKIPPED_OUTPUT {
        match not_enabled_then(timer, history, fire.run_ms) {
            Some(why) => format!("skipped: {why}"),
            None => format!("skipped: the timer was not enabled when the fire came due ({output})"),
        }
    } else {
        format!("skipped: {output}")
    }
}

/// Why `timer` was not enabled at `t`, per its history (a disable before
/// it and no enable between; or created disabled and enabled only after).
fn not_enabled_then(timer: &Timer, history: &[HistoryEntry], t: i64) -> Option<String> {
    let changes: Vec<(&HistoryEntry, i64, i64)> = history
        .iter()
        .filter_map(|e| {
            let pair = status_pair(e)?;
            Some((e, pair.0, pair.1))
        })
        .collect();
    let before = changes.iter().rev().find(|(e, _, _)| e.at_ms <= t);
    let after = changes.iter().find(|(e, _, _)| e.at_ms > t);
    let (status, since) = match (before, after) {
        (Some((e, _, new)), _) => (*new, Some(*e)),
        (None, Some((_, old, _))) => (*old, None),
        (None, None) => (timer.status.code(), None),
    };
    if status == TimerStatus::Enabled.code() {
        return None;
    }
    let name = match TimerStatus::from_code(status) {
        Some(TimerStatus::Deleted) => "deleted",
        Some(TimerStatus::Completed) => "completed",
        _ => "disabled",
    };
    let mut why = format!("timer {name} then: {name}");
    if let Some(e) = since {
        why.push_str(&format!(" at {} by {} ({})", rfc3339(e.at_ms), e.by, e.action));
    } else {
        why.push_str(" from its creation");
    }
    match after {
        Some((e, _, new)) if *new == TimerStatus::Enabled.code() => {
            why.push_str(&format!(", enabled again at {} by {}", rfc3339(e.at_ms), e.by));
        }
        _ => why.push_str(", and not enabled again before it"),
    }
    Some(why)
}

/// A change's `{"status": [old, new]}`, if it changed the status.
fn status_pair(e: &HistoryEntry) -> Option<(i64, i64)> {
    let changes: Value = serde_json::from_str(&e.changes).ok()?;
    let pair = changes.get("status")?.as_array()?;
    Some((pair.first()?.as_i64()?, pair.get(1)?.as_i64()?))
}

/// Whether change `e` changed one of `fields`.
fn changed_any(e: &HistoryEntry, fields: &[&str]) -> bool {
    serde_json::from_str::<Value>(&e.changes)
        .ok()
        .and_then(|v| v.as_object().map(|o| fields.iter().any(|f| o.contains_key(*f))))
        .unwrap_or(false)
}

/// The timer's changes around `t` as timeline events: the last few before
/// it and the first after it.
fn changes_around(history: &[HistoryEntry], t: i64) -> Vec<Moment> {
    let split = history.partition_point(|e| e.at_ms <= t);
    let from = split.saturating_sub(3);
    let to = (split + 1).min(history.len());
    history[from..to]
        .iter()
        .map(|e| {
            let detail = format!("by {}: {}", e.by, e.changes);
            Moment::new(e.at_ms, format!("timer {}", e.action), None, Some(detail))
        })
        .collect()
}

/// The node a claim token (`{node_id}:{seq}`) names.
pub fn node_of(owner: &str) -> String {
    owner.rsplit_once(':').map_or(owner, |(node, _)| node).to_owned()
}

/// A word on a fire's lateness beyond a second.
fn lateness(cost_time: i64) -> &'static str {
    if cost_time > 1_000 {
        " (over a second late: typically its first node stopped or was killed and this one took it over, or \
         the node was backlogged)"
    } else {
        ""
    }
}

/// A schedule in words.
fn describe(schedule: &Schedule) -> String {
    match schedule {
        Schedule::Cron { expr, timezone } => format!("cron `{expr}` ({timezone})"),
        Schedule::Once { run_at_ms } => format!("the one-shot time {} ({run_at_ms})", rfc3339(*run_at_ms)),
        Schedule::Every { every_ms, anchor_ms, .. } => {
            format!("every {every_ms} ms from {} ({anchor_ms})", rfc3339(*anchor_ms))
        }
    }
}

/// The nearest-rank `p`th percentile of sorted `values`.
fn percentile(values: &[i64], p: usize) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    let rank = (values.len() * p).div_ceil(100).max(1);
    values.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[7], 99), Some(7));
        let hundred: Vec<i64> = (1..=100).collect();
        assert_eq!((percentile(&hundred, 50), percentile(&hundred, 99)), (Some(50), Some(99)));
        assert_eq!(percentile(&[1, 2, 3], 50), Some(2));
    }

    #[test]
    fn a_claim_token_names_its_node() {
        assert_eq!(node_of("host-12-ab01:7"), "host-12-ab01");
        assert_eq!(node_of("a:b:3"), "a:b");
        assert_eq!(node_of("plain"), "plain");
    }
}
