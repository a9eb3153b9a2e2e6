//! `previewCron`: the next fire times of a cron expression in a time zone,
//! without creating a timer.

use axum::extract::State;
use chrono::DateTime;
use serde::{Deserialize, Serialize};

use super::input::parse_cron;
use crate::auth::AuthContext;
use crate::extract::ApiQuery;
use crate::{ApiError, AppState, Envelope};

/// Fire times listed when `count` is not given.
pub const DEFAULT_PREVIEW_COUNT: i64 = 10;
/// Most fire times one preview lists.
pub const MAX_PREVIEW_COUNT: i64 = 1000;

/// Query of `previewCron`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewQuery {
    /// The expression, as `createTimer` takes it.
    pub cron: String,
    /// IANA time zone; UTC when absent.
    #[serde(default)]
    pub timezone: Option<String>,
    /// List fire times after this instant: RFC 3339 with offset, or Unix
    /// ms; now when absent.
    #[serde(default)]
    pub from: Option<String>,
    /// How many, 1 to [`MAX_PREVIEW_COUNT`]; [`DEFAULT_PREVIEW_COUNT`] when absent.
    #[serde(default)]
    pub count: Option<i64>,
}

/// One fire time of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewFire {
    /// Unix ms.
    pub run_timer: i64,
    /// RFC 3339 in the expression's time zone (its offset that day).
    pub run_time: String,
    /// `gap` (moved past a spring-forward gap), `overlap` (the first of a
    /// repeated wall time) or null.
    pub note: Option<&'static str>,
}

/// `{"list": [...]}` of `previewCron`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preview {
    /// The fire times, soonest first.
    pub list: Vec<PreviewFire>,
}

/// `GET previewCron`: the next `count` fire times after `from` of `cron` in
/// `timezone`, each with its note; a bad cron or zone is the same 400 as
/// `createTimer`'s. It reads no app's data, so any valid token may ask.
pub async fn cron_preview(
    State(state): State<AppState>,
    auth: AuthContext,
    q: Result<ApiQuery<PreviewQuery>, ApiError>,
) -> Result<Envelope<Preview>, ApiError> {
    auth.require_token()?;
    let ApiQuery(q) = q?;
    let count = q.count.unwrap_or(DEFAULT_PREVIEW_COUNT);
    if !(1..=MAX_PREVIEW_COUNT).contains(&count) {
        return Err(ApiError::invalid("count", format!("must be 1 to {MAX_PREVIEW_COUNT}, got {count}")));
    }
    let from_ms = match q.from.as_deref() {
        None => state.clock.now_ms(),
        Some(text) => parse_instant("from", text)?,
    };
    let schedule = parse_cron(&q.cron, q.timezone.as_deref(), from_ms)?;
    let tz = schedule.timezone();
    let mut list = Vec::with_capacity(count as usize);
    let mut after = DateTime::from_timestamp_millis(from_ms).unwrap_or_default();
    while list.len() < count as usize {
        let Some(at) = schedule.next_after(after) else { break };
        list.push(PreviewFire {
            run_timer: at.timestamp_millis(),
            run_time: at.with_timezone(&tz).to_rfc3339(),
            note: schedule.note(at).map(|n| n.as_str()),
        });
        after = at;
    }
    Ok(Envelope(Preview { list }))
}

/// An instant given as Unix ms (digits) or RFC 3339 with an offset; a 400
/// naming `field` otherwise.
pub(super) fn parse_instant(field: &str, text: &str) -> Result<i64, ApiError> {
    let parsed = match text.parse::<i64>() {
        Ok(ms) => DateTime::from_timestamp_millis(ms).map(|t| t.timestamp_millis()),
        Err(_) => DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_millis()),
    };
    parsed.ok_or_else(|| {
        ApiError::invalid(
            field,
            format!("`{text}` is neither Unix milliseconds nor an RFC 3339 time such as `2026-12-01T09:00:00Z`"),
        )
    })
}
