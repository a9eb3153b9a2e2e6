//! Operating many timers (API 1f): `getApps`, `bulkTimers`, `pauseApp`,
//! `resumeApp`; the search of `getAppTimers` is in [`super::timers_list`].

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtimer_core::clock::rfc3339;
use xtimer_service::many::{AppView, BulkAction, BulkOutcome, Search};
use xtimer_service::replay::Replay;

use super::input::TimerRef;
use super::preview::{parse_instant, parse_time_or_duration};
use crate::auth::AuthContext;
use crate::extract::{ApiJson, ApiQuery, ForApp};
use crate::{ApiError, AppState, Envelope};

crate::of_app!(BulkTimers, PauseApp, ResumeApp, ReplayFires);

/// One app as `getApps` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppEntry {
    /// The app.
    pub app: String,
    /// Its timers that are not deleted.
    pub timers: u64,
    /// Those enabled.
    pub enabled: u64,
    /// Whether it is paused now (`pauseApp`).
    pub paused: bool,
    /// When it resumes by itself, Unix ms; null: at `resumeApp`, or not paused.
    pub paused_until: Option<i64>,
    /// Why it is paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<String>,
}

impl From<AppView> for AppEntry {
    fn from(view: AppView) -> Self {
        Self {
            app: view.summary.app,
            timers: view.summary.timers,
            enabled: view.summary.enabled,
            paused: view.pause.is_some(),
            paused_until: view.pause.as_ref().and_then(|p| p.until_ms),
            pause_reason: view.pause.map(|p| p.reason),
        }
    }
}

/// `{"list": [...]}`: the reply of `getApps`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AppList {
    /// The apps, by name.
    pub list: Vec<AppEntry>,
}

/// `GET getApps`: the apps the caller may see, with their timers counted
/// and their pauses: an app's token sees its app, the admin (or anyone
/// with auth off) every app.
#[utoipa::path(
    get,
    path = "/getApps",
    operation_id = "getApps",
    summary = "The apps the caller may see, their timers counted, their pauses.",
    responses((status = 200, description = crate::replies::ENVELOPED, body = AppList))
)]
pub async fn apps_list(State(state): State<AppState>, auth: AuthContext) -> Result<Envelope<AppList>, ApiError> {
    auth.require_token()?;
    let apps = state.service.apps(auth.app()).await?;
    Ok(Envelope(AppList { list: apps.into_iter().map(AppEntry::from).collect() }))
}

/// Body of `bulkTimers`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BulkTimers {
    /// The app whose timers to act on.
    pub app: String,
    /// `enable`, `disable`, `delete` or `trigger`.
    pub action: String,
    /// A label selector.
    #[serde(default)]
    pub selector: Option<String>,
    /// Name contains.
    #[serde(default)]
    pub q: Option<String>,
    /// Status 1, 2 or 4.
    #[serde(default)]
    pub status: Option<i64>,
    /// These timers.
    #[serde(default)]
    pub ids: Option<Vec<i64>>,
    /// Count only.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// The reply of `bulkTimers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Bulked {
    /// Timers matched.
    pub matched: u64,
    /// Timers changed (0 on a dry run).
    pub changed: u64,
    /// The matched ids (the first 10,000).
    pub ids: Vec<i64>,
}

impl From<BulkOutcome> for Bulked {
    fn from(o: BulkOutcome) -> Self {
        Self { matched: o.matched, changed: o.changed, ids: o.ids }
    }
}

/// `POST bulkTimers`: enable, disable, delete or trigger every timer of
/// the app that the selector, `q`, `status` or `ids` match, each as the
/// single call would; a second run changes nothing more.
#[utoipa::path(
    post,
    path = "/bulkTimers",
    operation_id = "bulkTimers",
    summary = "Enable, disable, delete or trigger every timer a search matches.",
    request_body = BulkTimers,
    responses((status = 200, description = crate::replies::ENVELOPED, body = Bulked))
)]
pub async fn timers_bulk(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<BulkTimers>>,
) -> Result<Envelope<Bulked>, ApiError> {
    let action = BulkAction::parse(&input.action).ok_or_else(|| {
        ApiError::invalid("action", format!("must be enable, disable, delete or trigger, got `{}`", input.action))
    })?;
    let search = Search { q: input.q, status: input.status, selector: input.selector, ids: input.ids };
    let dry_run = input.dry_run.unwrap_or(false);
    let outcome = state.service.bulk(&input.app, action, &search, dry_run, &auth.actor()).await?;
    Ok(Envelope(outcome.into()))
}

/// Body of `pauseApp`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PauseApp {
    /// The app.
    pub app: String,
    /// When it resumes by itself: a duration from now (`30m`, `2h`, `1d`),
    /// RFC 3339 or Unix ms; absent: at `resumeApp`.
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub until: Option<Value>,
    /// Why (shown in the fires' output).
    #[serde(default)]
    pub reason: Option<String>,
}

/// The reply of `pauseApp` and `resumeApp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppPaused {
    /// The app.
    pub app: String,
    /// Whether it is paused now.
    pub paused: bool,
    /// When it resumes by itself, Unix ms.
    pub paused_until: Option<i64>,
    /// The same, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_until_time: Option<String>,
    /// Why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `POST pauseApp`: every fire of the app due while it is paused is
/// recorded skipped (`app paused: <reason>`) and not sent; at `until` it
/// resumes by itself.
#[utoipa::path(
    post,
    path = "/pauseApp",
    operation_id = "pauseApp",
    summary = "Pause an app: its fires due meanwhile are skipped.",
    request_body = PauseApp,
    responses((status = 200, description = crate::replies::ENVELOPED, body = AppPaused))
)]
pub async fn app_pause(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<PauseApp>>,
) -> Result<Envelope<AppPaused>, ApiError> {
    let until = match &input.until {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(parse_time_or_duration("until", text, state.clock.now_ms())?),
        Some(Value::Number(n)) => Some(parse_instant("until", &n.to_string())?),
        Some(_) => {
            return Err(ApiError::invalid(
                "until",
                "must be a duration from now (`30m`, `2h`), an RFC 3339 time string or Unix milliseconds",
            ))
        }
    };
    let pause = state.service.pause_app(&input.app, until, input.reason, &auth.actor()).await?;
    Ok(Envelope(AppPaused {
        app: pause.app,
        paused: true,
        paused_until: pause.until_ms,
        paused_until_time: pause.until_ms.map(rfc3339),
        reason: Some(pause.reason),
    }))
}

/// Body of `resumeApp`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeApp {
    /// The app.
    pub app: String,
}

/// `POST resumeApp`: the app's fires go out again from now on.
#[utoipa::path(
    post,
    path = "/resumeApp",
    operation_id = "resumeApp",
    summary = "Resume a paused app.",
    request_body = ResumeApp,
    responses((status = 200, description = crate::replies::ENVELOPED, body = AppPaused))
)]
pub async fn app_resume(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<ResumeApp>>,
) -> Result<Envelope<AppPaused>, ApiError> {
    state.service.resume_app(&input.app, &auth.actor()).await?;
    Ok(Envelope(AppPaused { app: input.app, paused: false, paused_until: None, paused_until_time: None, reason: None }))
}

/// One change as `getTimerHistory` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HistoryView {
    /// When, RFC 3339.
    pub at: String,
    /// What: `create`, `update`, `enable`, `disable`, `delete`, `trigger`,
    /// `backfill`, `replay`, `bulk`, `apply`, `pause`, `complete`,
    /// `app-pause`, `app-resume`.
    pub action: String,
    /// Who: `app:<name>`, `admin`, `anonymous`, `receiver`, `system`.
    pub by: String,
    /// The changed fields, each `[old, new]`.
    #[schema(value_type = Object)]
    pub changes: Value,
}

/// `{"list": [...]}`: the reply of `getTimerHistory`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct HistoryList {
    /// Newest first.
    pub list: Vec<HistoryView>,
}

/// `GET getTimerHistory`: every change to a timer, newest first, who made
/// it and the changed fields' old and new values; a deleted timer's as long
/// as its fire records are kept.
#[utoipa::path(
    get,
    path = "/getTimerHistory",
    operation_id = "getTimerHistory",
    summary = "Every change to a timer, newest first, and who made it.",
    params(super::input::TimerRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = HistoryList))
)]
pub async fn timer_history(
    State(state): State<AppState>,
    ForApp(r, auth): ForApp<ApiQuery<TimerRef>>,
) -> Result<Envelope<HistoryList>, ApiError> {
    let key = super::key::timer_key(&auth, r);
    let entries = state.service.history(&key).await?;
    let list = entries
        .into_iter()
        .map(|e| HistoryView {
            at: rfc3339(e.at_ms),
            action: e.action,
            by: e.by,
            changes: serde_json::from_str(&e.changes).unwrap_or(Value::Null),
        })
        .collect();
    Ok(Envelope(HistoryList { list }))
}

/// Body of `replayFires`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReplayFires {
    /// The app.
    pub app: String,
    /// One timer; else the timers `selector` (or none: every timer) matches.
    #[serde(default)]
    pub id: Option<i64>,
    /// A label selector.
    #[serde(default)]
    pub selector: Option<String>,
    /// Fire statuses to replay; default `[3, 5]` (failed and missed).
    #[serde(default)]
    pub status: Option<Vec<i64>>,
    /// Scheduled from (RFC 3339 or Unix ms), included.
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub from: Option<Value>,
    /// Scheduled until (RFC 3339 or Unix ms), excluded; at most 7 days after `from`.
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub to: Option<Value>,
    /// Fires sent per second, 1 to 10,000; default 100.
    #[serde(default)]
    pub rate_per_sec: Option<i64>,
    /// Count only.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// `{"count": N}`: the reply of `replayFires`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Replayed {
    /// Fires sent again (or, on a dry run, that would be), whatever their
    /// timer's status now (disabled, completed, paused by failures).
    pub count: u64,
    /// Matching fires of deleted timers, left out (for one timer, or for
    /// the whole app when no selector narrows it).
    #[serde(rename = "leftOutDeleted")]
    pub left_out_deleted: u64,
}

/// `POST replayFires`: the failed and missed fires (or the statuses asked)
/// scheduled in `[from, to)`, of a timer or the timers a selector matches,
/// sent again oldest first at `ratePerSec`, with their original
/// `Idempotency-Key` and `X-Xtimer-Replay: 1`; each record takes the new
/// outcome. The replay is stored: it goes on after a node crash.
#[utoipa::path(
    post,
    path = "/replayFires",
    operation_id = "replayFires",
    summary = "Send again the failed and missed fires of a time range, oldest first, at a bounded rate.",
    request_body = ReplayFires,
    responses((status = 200, description = crate::replies::ENVELOPED, body = Replayed))
)]
pub async fn fires_replay(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<ReplayFires>>,
) -> Result<Envelope<Replayed>, ApiError> {
    let time = |field: &str, value: &Option<Value>| -> Result<i64, ApiError> {
        match value {
            Some(Value::String(text)) => parse_instant(field, text),
            Some(Value::Number(n)) => parse_instant(field, &n.to_string()),
            None | Some(Value::Null) => Err(ApiError::invalid(field, "is required: a replay names its time range")),
            Some(_) => Err(ApiError::invalid(field, "must be an RFC 3339 time string or Unix milliseconds")),
        }
    };
    let replay = Replay {
        id: input.id,
        search: Search { selector: input.selector, ..Search::default() },
        statuses: input.status.unwrap_or_default(),
        from_ms: time("from", &input.from)?,
        to_ms: time("to", &input.to)?,
        rate_per_sec: input.rate_per_sec,
        dry_run: input.dry_run.unwrap_or(false),
    };
    let done = state.service.replay(&input.app, &replay, &auth.actor()).await?;
    Ok(Envelope(Replayed { count: done.count, left_out_deleted: done.left_out }))
}
