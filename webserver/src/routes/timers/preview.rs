//! `previewCron`: the next fire times of a cron expression in a time zone,
//! without creating a timer.

use axum::extract::State;
use chrono::DateTime;
use serde::Serialize;

use chrono_tz::Tz;
use xtimer_core::cron::CronSchedule;
use xtimer_core::when::NotedTime;

use crate::auth::authorize;
use crate::extract::{ApiQuery, WithToken};
use crate::{ApiError, AppState, Envelope};

pub use xtimer_core::spec::{PreviewQuery, DEFAULT_PREVIEW_COUNT, MAX_PREVIEW_COUNT};

/// One fire time of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewFire {
    /// Unix ms.
    pub run_timer: i64,
    /// RFC 3339 in the expression's time zone (its offset that day).
    pub run_time: String,
    /// `gap` (moved past a spring-forward gap), `overlap` (the first of a
    /// repeated wall time), `excluded:<calendar>` or null.
    pub note: Option<String>,
}

/// `{"list": [...]}` of `previewCron`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = CronPreview)]
pub struct Preview {
    /// The fire times, soonest first.
    pub list: Vec<PreviewFire>,
}

/// `GET previewCron`: the next `count` fire times after `from` of `cron` in
/// `timezone`, each with its note; a bad cron or zone is the same 400 as
/// `createTimer`'s. It reads no app's data, so any valid token may ask.
#[utoipa::path(
    get,
    path = "/previewCron",
    operation_id = "previewCron",
    summary = "The next fire times of a cron in a zone, with daylight-saving notes.",
    params(PreviewQuery),
    responses((status = 200, description = crate::replies::ENVELOPED, body = Preview))
)]
pub async fn cron_preview(
    State(state): State<AppState>,
    WithToken(q, auth): WithToken<ApiQuery<PreviewQuery>>,
) -> Result<Envelope<Preview>, ApiError> {
    let ask = q.ask();
    let plan = ask.plan(state.clock.now_ms())?;
    if let Some(app) = &q.app {
        authorize(&auth, app)?;
    }
    let times =
        state.service.preview(q.app.as_deref(), &plan.schedule, &plan.timing, plan.from_ms + 1, plan.count).await?;
    Ok(Envelope(Preview::of(times, plan.cron.as_ref(), plan.zone)))
}

impl Preview {
    /// The preview of `times` in zone `tz`, each noted with the calendar
    /// excluding it or, for a cron, its daylight saving note.
    pub fn of(times: Vec<NotedTime>, cron: Option<&CronSchedule>, tz: Tz) -> Self {
        let list = times
            .into_iter()
            .map(|t| {
                let at = DateTime::from_timestamp_millis(t.run_ms).unwrap_or_default();
                let note = match (&t.excluded_by, cron) {
                    (Some(name), _) => Some(format!("excluded:{name}")),
                    (None, Some(cron)) => cron.note(at).map(|n| n.as_str().to_owned()),
                    (None, None) => None,
                };
                PreviewFire { run_timer: t.run_ms, run_time: at.with_timezone(&tz).to_rfc3339(), note }
            })
            .collect();
        Self { list }
    }
}

/// An instant given as Unix ms (digits) or RFC 3339 with an offset
/// ([`xtimer_core::spec::parse_instant`]); a 400 naming `field` otherwise.
pub fn parse_instant(field: &str, text: &str) -> Result<i64, ApiError> {
    Ok(xtimer_core::spec::parse_instant(field, text)?)
}

/// A span of time from now as the console and README offer it: a whole
/// number and a unit, `ms`, `s`, `m` (or `min`), `h` or `d`, one or more
/// (`30m`, `2h`, `1h30m`), in milliseconds.
pub fn duration_ms(text: &str) -> Option<i64> {
    let mut rest = text.trim();
    let mut total: i64 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let number: i64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let letters = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit = match &rest[..letters] {
            "ms" => 1,
            "s" => 1000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return None,
        };
        rest = rest[letters..].trim_start();
        total = total.checked_add(number.checked_mul(unit)?)?;
    }
    Some(total)
}

/// A time to come, given as a duration from `now_ms` (`30m`, `2h`), an
/// RFC 3339 time or Unix milliseconds; a 400 naming `field` and the three
/// forms otherwise.
pub fn parse_time_or_duration(field: &str, text: &str, now_ms: i64) -> Result<i64, ApiError> {
    if let Some(ms) = duration_ms(text) {
        if text.trim().parse::<i64>().is_err() {
            return now_ms.checked_add(ms).ok_or_else(|| ApiError::invalid(field, format!("`{text}` is too long")));
        }
    }
    parse_instant(field, text.trim()).map_err(|_| {
        ApiError::invalid(
            field,
            format!(
                "`{}` is neither a duration from now (`30m`, `2h`, `1d`), an RFC 3339 time such as \
                 `2026-12-01T09:00:00Z`, nor Unix milliseconds",
                text.chars().take(64).collect::<String>()
            ),
        )
    })
}

#[cfg(test)]
mod duration_tests {
    use super::duration_ms;

    #[test]
    fn durations_as_the_console_offers_them() {
        assert_eq!(duration_ms("30m"), Some(1_800_000));
        assert_eq!(duration_ms("2h"), Some(7_200_000));
        assert_eq!(duration_ms("1h30m"), Some(5_400_000));
        assert_eq!(duration_ms("1d"), Some(86_400_000));
        assert_eq!(duration_ms("500ms"), Some(500));
        assert_eq!(duration_ms("2 h"), Some(7_200_000));
        assert_eq!(duration_ms("2x"), None);
        assert_eq!(duration_ms(""), None);
        assert_eq!(duration_ms("h"), None);
    }
}
