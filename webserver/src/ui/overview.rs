//! `GET /ui/api/overview`: what the console's lateness page shows, from
//! the fire records of the last hour (every node's): p50 and p99 lateness
//! per minute, and the timers whose fires failed, most failures first.
//! Paced fires (backfilled or replayed) are late by design: the lateness
//! leaves them out and counts them on their own (`paced`); their failures
//! count among the failing timers'.
//! With `?app=`, only that app's fires count (the console marks the
//! failing timers of an app's list with it).
//!
//! It reads at most [`MAX_FIRES`] fires, newest first; past that the
//! oldest minutes are left out and `sampled` says so.

use std::collections::{BTreeMap, HashMap};

use axum::extract::State;
use serde::{Deserialize, Serialize};
use xtimer_core::clock::rfc3339;
use xtimer_core::fire::{Fire, FireStatus};

use crate::auth::authorize;
use crate::extract::{ApiQuery, WithToken};
use crate::{ApiError, AppState, Envelope};

/// How far back the overview looks.
pub const WINDOW_MS: i64 = 60 * 60 * 1000;
/// Most fire records one overview reads.
pub const MAX_FIRES: u32 = 50_000;
/// Most failing timers listed.
pub const MAX_FAILING: usize = 50;

/// The reply's `result`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// Start of the window, Unix ms.
    pub from_ms: i64,
    /// One entry per minute that had fires, oldest first.
    pub minutes: Vec<MinuteLateness>,
    /// Timers with failed fires in the window, most failures first.
    pub failing: Vec<FailingTimer>,
    /// True when the window held more than [`MAX_FIRES`] fires.
    pub sampled: bool,
    /// Paced fires (backfilled or replayed) in the window, left out of
    /// `minutes`.
    pub paced: usize,
}

/// Lateness of the fires of one minute (by run time).
#[derive(Debug, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MinuteLateness {
    /// The minute's start, Unix ms.
    pub minute_ms: i64,
    pub fires: usize,
    pub failed: usize,
    pub p50_ms: i64,
    pub p99_ms: i64,
}

/// A timer whose fires failed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailingTimer {
    pub timer_id: i64,
    pub app: String,
    pub name: String,
    pub failed: usize,
    pub fires: usize,
    pub last_failed_at: String,
    pub last_output: String,
    /// Whether the timer's newest fire in the window failed: it is
    /// failing now, not only earlier in the hour.
    pub last_failed: bool,
}

/// Query of `GET /ui/api/overview`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverviewQuery {
    /// Only this app's fires.
    #[serde(default)]
    pub app: Option<String>,
}

/// `GET /ui/api/overview`. With auth on, an app's token sees its app's
/// fires only (another `app` is a 403); the admin token sees every app.
#[utoipa::path(
    get,
    path = "/ui/api/overview",
    operation_id = "_ui_api_overview",
    summary = "Lateness per minute and failing timers, last hour.",
    responses((status = 200, description = crate::replies::ENVELOPED, body = Overview))
)]
pub async fn overview_get(
    State(state): State<AppState>,
    WithToken(query, auth): WithToken<ApiQuery<OverviewQuery>>,
) -> Result<Envelope<Overview>, ApiError> {
    if let Some(app) = &query.app {
        authorize(&auth, app)?;
    }
    let now = state.clock.now_ms();
    let from_ms = now - WINDOW_MS;
    let fires = state.service.ended_fires(from_ms, MAX_FIRES).await?;
    let sampled = fires.len() == MAX_FIRES as usize;
    let fires: Vec<(Fire, bool)> = fires
        .into_iter()
        .filter(|(f, _)| authorize(&auth, &f.app).is_ok() && query.app.as_ref().is_none_or(|app| *app == f.app))
        .collect();
    let (minutes, paced) = lateness_on_schedule(&fires);
    let fires: Vec<Fire> = fires.into_iter().map(|(f, _)| f).collect();
    let mut failing = failing_timers(&fires);
    let ids: Vec<i64> = failing.iter().map(|f| f.timer_id).collect();
    let names: HashMap<i64, String> =
        state.service.timers_named(&ids).await?.into_iter().map(|t| (t.id, t.def.name)).collect();
    for f in &mut failing {
        f.name = names.get(&f.timer_id).cloned().unwrap_or_default();
    }
    Ok(Envelope(Overview { from_ms, minutes, failing, sampled, paced }))
}

/// [`per_minute`] of the fires on their schedule, and how many paced
/// ones (backfilled or replayed, marked `true`) were left out.
pub fn lateness_on_schedule(fires: &[(Fire, bool)]) -> (Vec<MinuteLateness>, usize) {
    let paced = fires.iter().filter(|(_, paced)| *paced).count();
    (per_minute(fires.iter().filter(|(_, paced)| !paced).map(|(f, _)| f)), paced)
}

/// p50 and p99 of `cost_time` per minute of run time, oldest first (of
/// fires on their schedule: the caller leaves paced ones out).
pub fn per_minute<'a>(fires: impl IntoIterator<Item = &'a Fire>) -> Vec<MinuteLateness> {
    let mut by_minute: BTreeMap<i64, (Vec<i64>, usize)> = BTreeMap::new();
    for f in fires {
        let entry = by_minute.entry(f.run_ms.div_euclid(60_000) * 60_000).or_default();
        entry.0.push(f.cost_time.max(0));
        entry.1 += usize::from(f.status == FireStatus::Failed);
    }
    by_minute
        .into_iter()
        .map(|(minute_ms, (mut late, failed))| {
            late.sort_unstable();
            MinuteLateness {
                minute_ms,
                fires: late.len(),
                failed,
                p50_ms: percentile(&late, 0.50),
                p99_ms: percentile(&late, 0.99),
            }
        })
        .collect()
}

/// The nearest-rank percentile `q` of sorted `values`.
fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Timers with at least one failed fire (newest-first input), most failures
/// first, at most [`MAX_FAILING`], each saying whether its newest fire
/// failed; names are filled in by the caller.
fn failing_timers(fires: &[Fire]) -> Vec<FailingTimer> {
    let mut by_timer: HashMap<i64, FailingTimer> = HashMap::new();
    for f in fires {
        let entry = by_timer.entry(f.timer_id).or_insert_with(|| FailingTimer {
            timer_id: f.timer_id,
            app: f.app.clone(),
            name: String::new(),
            failed: 0,
            fires: 0,
            last_failed_at: String::new(),
            last_output: String::new(),
            last_failed: f.status == FireStatus::Failed,
        });
        entry.fires += 1;
        if f.status == FireStatus::Failed {
            if entry.failed == 0 {
                entry.last_failed_at = rfc3339(f.run_ms);
                entry.last_output = f.output.clone();
            }
            entry.failed += 1;
        }
    }
    let mut list: Vec<FailingTimer> = by_timer.into_values().filter(|t| t.failed > 0).collect();
    list.sort_by(|a, b| b.failed.cmp(&a.failed).then(a.timer_id.cmp(&b.timer_id)));
    list.truncate(MAX_FAILING);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(timer_id: i64, run_ms: i64, status: FireStatus, cost_time: i64) -> Fire {
        Fire {
            task_id: run_ms,
            timer_id,
            app: "a".into(),
            run_ms,
            scheduled_ms: run_ms,
            status,
            attempt: 1,
            output: format!("out {run_ms}"),
            cost_time,
            manual: false,
            replayed: false,
            create_time: 0,
            modify_time: 0,
        }
    }

    #[test]
    fn percentiles_per_minute_and_failures_per_timer() {
        // Minute 0: lateness 1..=100 ms; minute 1: one failed fire, 7 ms.
        let mut fires: Vec<Fire> = (1..=100).map(|n| fire(1, n * 100, FireStatus::Succeeded, n)).collect();
        fires.push(fire(2, 60_500, FireStatus::Failed, 7));
        fires.push(fire(2, 60_000, FireStatus::Failed, 9));
        fires.sort_by_key(|f| std::cmp::Reverse(f.run_ms));
        let minutes = per_minute(&fires);
        assert_eq!(
            minutes,
            [
                MinuteLateness { minute_ms: 0, fires: 100, failed: 0, p50_ms: 50, p99_ms: 99 },
                MinuteLateness { minute_ms: 60_000, fires: 2, failed: 2, p50_ms: 7, p99_ms: 9 },
            ]
        );
        let failing = failing_timers(&fires);
        assert_eq!(failing.len(), 1);
        assert_eq!((failing[0].timer_id, failing[0].failed, failing[0].fires), (2, 2, 2));
        assert_eq!(failing[0].last_output, "out 60500", "the newest failure's output");
        assert!(failing[0].last_failed, "its newest fire failed");
    }

    #[test]
    fn paced_fires_are_left_out_of_the_lateness_and_counted() {
        let mut backfilled = fire(1, 30_000, FireStatus::Succeeded, 3_600_000);
        backfilled.task_id = 1;
        let mut replayed = fire(1, 90_000, FireStatus::Succeeded, 7_200_000);
        replayed.replayed = true;
        let fires = vec![
            (replayed, true),
            (fire(1, 60_000, FireStatus::Succeeded, 4), false),
            (backfilled, true),
            (fire(1, 20_000, FireStatus::Succeeded, 2), false),
        ];
        let (minutes, paced) = lateness_on_schedule(&fires);
        assert_eq!(paced, 2);
        assert_eq!(
            minutes,
            [
                MinuteLateness { minute_ms: 0, fires: 1, failed: 0, p50_ms: 2, p99_ms: 2 },
                MinuteLateness { minute_ms: 60_000, fires: 1, failed: 0, p50_ms: 4, p99_ms: 4 },
            ],
            "the hours-late paced fires are not in the chart"
        );
    }

    #[test]
    fn a_timer_that_failed_then_succeeded_is_not_failing_now() {
        let mut fires = vec![
            fire(3, 1_000, FireStatus::Failed, 1),
            fire(3, 2_000, FireStatus::Failed, 1),
            fire(3, 3_000, FireStatus::Succeeded, 1),
        ];
        fires.sort_by_key(|f| std::cmp::Reverse(f.run_ms));
        let failing = failing_timers(&fires);
        assert_eq!((failing[0].failed, failing[0].fires, failing[0].last_failed), (2, 3, false));
        assert_eq!(failing[0].last_output, "out 2000", "the newest failure's output");
    }
}
