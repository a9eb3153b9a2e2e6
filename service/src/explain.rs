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
use xtimer_core::spec::MAX_FIRES_FIELD;
use xtimer_core::timer::{Schedule, Timer, TimerStatus};
use xtimer_store::{FireDetail, FireLog, HistoryEntry, SKIPPED_OUTPUT};

use crate::checks;
use crate::error::Result;
use crate::error::ServiceError;
use crate::history::MAX_HISTORY;
use crate::key::TimerKey;
use crate::timer_service::TimerService;

/// The window the per-timer figures cover: the last 24 hours, from the
/// start of the hour they began in (the figures are kept by the hour), so
/// 24 to 25 hours. Their read costs the same at any rate: at most an
/// hour row per hour rolled up, and the fires of the hour or two not
/// rolled up yet ([`xtimer_store::FireRepo::timer_figures`]).
pub const STATS_WINDOW_MS: i64 = 86_400_000;

/// Why a scheduled time fired as it did, or did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The fire record, when there is one.
    pub fire: Option<Fire>,
    /// What happened, oldest first.
    pub timeline: Vec<Moment>,
    /// The answer in one sentence.
    pub verdict: String,
    /// Every attempt kept, oldest first.
    pub attempts: Vec<Attempt>,
    /// Every claim known, oldest first: the first, and each that took the
    /// fire over from another node or sent it again.
    pub claims: Vec<Claim>,
}

/// One attempt of a fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Its number, 1 first (a replay continues the count).
    pub attempt: u32,
    /// The node that made it.
    pub node: Option<String>,
    /// When it was sent, Unix ms (unknown for records from before it was kept).
    pub sent_at: Option<i64>,
    /// When its answer (or its end) was recorded, Unix ms.
    pub answered_at: Option<i64>,
    /// The HTTP status it got, when it got one.
    pub http_status: Option<u16>,
    /// `succeeded`, `failed`, `skipped`, `missed`, or `sending` while under way.
    pub outcome: String,
    /// Its answer, as recorded.
    pub output: String,
}

/// One claim of a fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The node that held it.
    pub node: String,
    /// When, Unix ms (for a first claim: when its first attempt went out).
    pub at_ms: i64,
    /// The node it was taken over from, when it was.
    pub taken_over_from: Option<String>,
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

/// A timer's figures over the last [`STATS_WINDOW_MS`] (fires sent: those
/// that succeeded or failed).
pub use xtimer_core::fire::TimerStats;

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
            Some(detail) => {
                let log = self.0.fires.fire_log(detail.fire.task_id).await?;
                Ok(explain_fire(&timer, &history, detail, log, now))
            }
            None => self.explain_absence(&timer, &history, scheduled_ms, now).await,
        }
    }

    /// `timer`'s figures over the last day: every fire counted by status
    /// (paced ones too: backfilled or replayed), the lateness of those
    /// sent that were not paced (late by design, they would drown it). Its
    /// percentiles are nearest-rank over the fixed buckets of
    /// [`xtimer_store::LATE_BUCKET_BOUNDS_MS`], each reported as the upper
    /// bound of its bucket (never more than the largest lateness seen).
    pub async fn stats(&self, timer: &Timer) -> Result<TimerStats> {
        let now = self.0.clock.now_ms();
        let figures = self.0.fires.timer_figures(timer.id, now - STATS_WINDOW_MS, now).await?;
        Ok(TimerStats {
            fires: figures.fires,
            succeeded: figures.succeeded,
            failed: figures.failed,
            missed: figures.missed,
            late_p50_ms: figures.late_percentile(50),
            late_p99_ms: figures.late_percentile(99),
        })
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
            format!("{MAX_FIRES_FIELD} used: its {max} fires end with the one at {} ({last})", rfc3339(last))
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
        Ok(Explanation { fire: None, timeline, verdict, attempts: Vec::new(), claims: Vec::new() })
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
fn explain_fire(timer: &Timer, history: &[HistoryEntry], detail: FireDetail, log: FireLog, now: i64) -> Explanation {
    let attempts = attempts_of(&detail, &log);
    let claims = claims_of(&detail, &log, &attempts);
    let FireDetail { fire, owner, lease_until, backfill_at, .. } = detail;
    let node = owner.as_deref().map(node_of);
    let by = node.clone().unwrap_or_else(|| "no node".into());
    let mut timeline = Vec::new();
    let planned = match (fire.manual, fire.run_ms != fire.scheduled_ms) {
        (true, _) => "triggered by triggerTimer (manual)".to_owned(),
        (false, true) => format!("scheduled for {}, spread to {}", rfc3339(fire.scheduled_ms), rfc3339(fire.run_ms)),
        (false, false) => format!("scheduled for {}", rfc3339(fire.scheduled_ms)),
    };
    timeline.push(Moment::new(fire.create_time, "planned", None, Some(planned)));
    for claim in &claims {
        let lost = claims.iter().any(|c| c.taken_over_from.as_deref() == Some(claim.node.as_str()));
        let (event, detail) = match &claim.taken_over_from {
            Some(from) => {
                ("claimed", format!("taken over from {from}, whose claim lapsed (stopped, killed or cut off)"))
            }
            None if lost => ("held", "claimed; the node stopped holding it before its answer was recorded".to_owned()),
            None => ("claimed", "the first claim".to_owned()),
        };
        timeline.push(Moment::new(claim.at_ms, event, Some(claim.node.clone()), Some(detail)));
    }
    for (i, a) in attempts.iter().enumerate() {
        if let Some(sent) = a.sent_at {
            let detail = format!("attempt {}", a.attempt);
            timeline.push(Moment::new(sent, "sent", a.node.clone(), Some(detail)));
        }
        if let Some(answered) = a.answered_at {
            let detail = format!("attempt {}: {}", a.attempt, a.output);
            timeline.push(Moment::new(answered, "answered", a.node.clone(), Some(detail)));
            if a.outcome == "failed" && i + 1 < attempts.len() {
                let detail = format!("attempt {} failed; attempt {} follows", a.attempt, attempts[i + 1].attempt);
                timeline.push(Moment::new(answered, "retried", a.node.clone(), Some(detail)));
            }
        }
    }
    let ended = fire.status.is_final();
    if let (false, Some(retry_at), true) = (ended, lease_until, fire.attempt > 0) {
        timeline.push(Moment::new(retry_at, "retry due", node.clone(), None));
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
    let why_late = why_late(&fire, backfill_at, &claims);
    let failed_before = attempts.iter().filter(|a| a.outcome == "failed" && a.attempt < fire.attempt).count();
    let verdict = match fire.status {
        FireStatus::Pending if fire.replayed => format!(
            "replayed: it is to be sent again at {}",
            backfill_at.map(rfc3339).unwrap_or_else(|| "once a node takes it".into())
        ),
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
            let retried = match failed_before {
                0 => String::new(),
                1 => "; 1 attempt failed before".to_owned(),
                n => format!("; {n} attempts failed before"),
            };
            let replayed = if fire.replayed { "; sent again by a replay (replayFires)" } else { "" };
            format!("succeeded on attempt {}: claimed by {by}, sent {late}{why_late}{retried}{replayed}", fire.attempt)
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
    Explanation { fire: Some(fire), timeline, verdict, attempts, claims }
}

/// Every attempt of a fire: those kept in its log, then the one its row
/// holds (unless the log has it already, with the node that made it).
fn attempts_of(detail: &FireDetail, log: &FireLog) -> Vec<Attempt> {
    let mut attempts: Vec<Attempt> = log
        .attempts
        .iter()
        .map(|a| Attempt {
            attempt: a.attempt,
            node: a.owner.as_deref().map(node_of),
            sent_at: a.sent_at,
            answered_at: Some(a.answered_at),
            http_status: http_status(&a.output),
            outcome: outcome(a.status).to_owned(),
            output: a.output.clone(),
        })
        .collect();
    let fire = &detail.fire;
    let kept = attempts.iter().any(|a| a.attempt == fire.attempt);
    if fire.attempt > 0 && !kept && fire.status != FireStatus::Pending {
        let sent_at = detail.sent_at.or((fire.attempt == 1).then_some(fire.run_ms + fire.cost_time.max(0)));
        attempts.push(Attempt {
            attempt: fire.attempt,
            node: detail.owner.as_deref().map(node_of),
            sent_at,
            answered_at: Some(fire.modify_time),
            http_status: http_status(&fire.output),
            outcome: outcome(fire.status).to_owned(),
            output: fire.output.clone(),
        });
    }
    attempts.sort_by_key(|a| a.attempt);
    attempts
}

/// Every claim known of a fire: one per run of attempts by the same
/// node, and each takeover kept in its log (a node that took the fire
/// over from a stopped one, whether or not it sent it since).
fn claims_of(detail: &FireDetail, log: &FireLog, attempts: &[Attempt]) -> Vec<Claim> {
    let mut claims: Vec<Claim> = Vec::new();
    let first_node = log.claims.first().and_then(|c| c.taken_over_from.as_deref()).map(node_of);
    for a in attempts {
        let Some(node) = &a.node else { continue };
        if claims.last().is_some_and(|c| &c.node == node) {
            continue;
        }
        let at_ms = a.sent_at.or(a.answered_at).unwrap_or(detail.fire.run_ms);
        claims.push(Claim { node: node.clone(), at_ms, taken_over_from: None });
    }
    for c in &log.claims {
        let node = node_of(&c.owner);
        let from = c.taken_over_from.as_deref().map(node_of);
        match claims.iter_mut().find(|k| k.node == node && k.taken_over_from.is_none() && k.at_ms >= c.at_ms) {
            Some(known) => {
                known.at_ms = c.at_ms;
                known.taken_over_from = from;
            }
            None => claims.push(Claim { node, at_ms: c.at_ms, taken_over_from: from }),
        }
    }
    // A node that held the fire and was taken over before it sent anything.
    if let Some(first) = first_node.filter(|n| !claims.iter().any(|c| &c.node == n)) {
        let at_ms = detail.fire.run_ms.min(claims.first().map_or(i64::MAX, |c| c.at_ms));
        claims.push(Claim { node: first, at_ms, taken_over_from: None });
    }
    if claims.is_empty() {
        if let Some(owner) = &detail.owner {
            let at_ms = detail.fire.modify_time.min(detail.fire.run_ms.max(detail.fire.create_time));
            claims.push(Claim { node: node_of(owner), at_ms, taken_over_from: None });
        }
    }
    claims.sort_by_key(|c| c.at_ms);
    claims
}

/// An attempt's outcome, from the fire status it left.
fn outcome(status: FireStatus) -> &'static str {
    match status {
        FireStatus::Pending | FireStatus::Running | FireStatus::Failed => "failed",
        FireStatus::Succeeded => "succeeded",
        FireStatus::Skipped => "skipped",
        FireStatus::Missed => "missed",
    }
}

/// The HTTP status an output begins with (`HTTP 500 ...`), if any.
fn http_status(output: &str) -> Option<u16> {
    let rest = output.strip_prefix("HTTP ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|s| (100..600).contains(s))
}

/// A word on why a fire was sent over a second late.
fn why_late(fire: &Fire, backfill_at: Option<i64>, claims: &[Claim]) -> String {
    if fire.cost_time <= 1_000 {
        return String::new();
    }
    if fire.replayed {
        return " (a replay: sent again when asked, at the replay's pace)".to_owned();
    }
    if backfill_at.is_some() {
        return " (a backfill: sent when asked, at the backfill's pace)".to_owned();
    }
    if let Some(from) = claims.iter().find_map(|c| c.taken_over_from.as_deref()) {
        return format!(" (taken over from {from}, whose claim lapsed: it stopped, was killed or cut off)");
    }
    lateness(fire.cost_time).to_owned()
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
        " (over a second late: the node was backlogged, waited for the fire's flow or bulkhead, or \
         found it late after a restart)"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_token_names_its_node() {
        assert_eq!(node_of("host-12-ab01:7"), "host-12-ab01");
        assert_eq!(node_of("a:b:3"), "a:b");
        assert_eq!(node_of("plain"), "plain");
    }
}
