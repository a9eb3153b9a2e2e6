//! Saying when (API 1d): an app's calendars (`putCalendar`, `getCalendar`,
//! `getAppCalendars`, `delCalendar`) and the forecast of planned fires
//! (`getForecast`).

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtimer_core::calendar::{weekday_code, Calendar, CalendarSpec};
use xtimer_core::clock::rfc3339;
use xtimer_service::when::MAX_FORECAST_SECONDS;

use super::preview::parse_instant;
use crate::auth::authorize;
use crate::extract::{ApiJson, ApiQuery, ForApp, QueryOrJson, WithToken};
use crate::{ApiError, AppState, Envelope};
use xtimer_core::spec::instant_ms as instant_value;

crate::of_app!(AppRef, PutCalendar, CalendarRef);

/// Body of `putCalendar`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutCalendar {
    /// The app the calendar belongs to.
    pub app: String,
    /// Its name, unique in the app.
    pub name: String,
    /// Excluded days, `YYYY-MM-DD`, in the zone of each timer.
    #[serde(default)]
    pub dates: Vec<String>,
    /// Excluded ranges `[from, to)`, each time RFC 3339 or Unix ms.
    #[serde(default)]
    pub ranges: Vec<RangeParam>,
    /// Excluded weekdays (`SAT`, `SUN`, ...), in the zone of each timer.
    #[serde(default)]
    pub weekdays: Vec<String>,
    /// An iCalendar text whose events are excluded days and ranges.
    #[serde(default)]
    pub ics: Option<String>,
}

/// One excluded range of [`PutCalendar`].
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RangeParam {
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub from: Value,
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub to: Value,
}

/// A calendar as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CalendarView {
    pub app: String,
    pub name: String,
    pub dates: Vec<String>,
    pub ranges: Vec<RangeView>,
    pub weekdays: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ics: Option<String>,
    pub create_time: String,
    pub modify_time: String,
}

/// An excluded range, both ends in Unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RangeView {
    pub from: i64,
    pub to: i64,
}

impl From<&Calendar> for CalendarView {
    fn from(c: &Calendar) -> Self {
        Self {
            app: c.app.clone(),
            name: c.name.clone(),
            dates: c.spec.dates.iter().map(|d| d.format("%Y-%m-%d").to_string()).collect(),
            ranges: c.spec.ranges.iter().map(|r| RangeView { from: r.from_ms, to: r.to_ms }).collect(),
            weekdays: c.spec.weekdays.iter().map(|d| weekday_code(*d)).collect(),
            ics: c.spec.ics.clone(),
            create_time: rfc3339(c.create_time),
            modify_time: rfc3339(c.modify_time),
        }
    }
}

/// `{"name"}`: the reply of `putCalendar` and `delCalendar`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CalendarName {
    pub name: String,
}

/// `{"list": [calendar]}` of `getAppCalendars`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CalendarList {
    pub list: Vec<CalendarView>,
}

/// A calendar as a caller names it.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CalendarRef {
    pub app: String,
    pub name: String,
}

/// An app, as `getAppCalendars` takes it.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AppRef {
    pub app: String,
}

/// `POST putCalendar`: creates or replaces a calendar; the app's timers
/// that exclude it follow it at once (their fires not yet claimed are
/// planned again).
#[utoipa::path(
    post,
    path = "/putCalendar",
    operation_id = "putCalendar",
    summary = "Create or replace an app's calendar of excluded days and ranges.",
    request_body = PutCalendar,
    responses((status = 200, description = crate::replies::ENVELOPED, body = CalendarName))
)]
pub async fn calendar_put(
    State(state): State<AppState>,
    ForApp(input, _): ForApp<ApiJson<PutCalendar>>,
) -> Result<Envelope<CalendarName>, ApiError> {
    let mut ranges = Vec::with_capacity(input.ranges.len());
    for (i, r) in input.ranges.iter().enumerate() {
        ranges.push((
            instant_value(&format!("ranges[{i}].from"), &r.from)?,
            instant_value(&format!("ranges[{i}].to"), &r.to)?,
        ));
    }
    let spec = CalendarSpec::from_wire(&input.dates, &ranges, &input.weekdays, input.ics)
        .map_err(|err| ApiError::Invalid(err.to_string()))?;
    let calendar = state.service.put_calendar(&input.app, &input.name, spec).await?;
    Ok(Envelope(CalendarName { name: calendar.name }))
}

/// `GET getCalendar`: one calendar.
#[utoipa::path(
    get,
    path = "/getCalendar",
    operation_id = "getCalendar",
    summary = "One calendar.",
    params(CalendarRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = CalendarView))
)]
pub async fn calendar_get(
    State(state): State<AppState>,
    ForApp(q, _): ForApp<ApiQuery<CalendarRef>>,
) -> Result<Envelope<CalendarView>, ApiError> {
    let calendar = state.service.calendar(&q.app, &q.name).await?;
    Ok(Envelope(CalendarView::from(&calendar)))
}

/// `GET getAppCalendars`: an app's calendars, by name.
#[utoipa::path(
    get,
    path = "/getAppCalendars",
    operation_id = "getAppCalendars",
    summary = "An app's calendars.",
    params(AppRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = CalendarList))
)]
pub async fn calendars_list(
    State(state): State<AppState>,
    ForApp(q, _): ForApp<ApiQuery<AppRef>>,
) -> Result<Envelope<CalendarList>, ApiError> {
    let calendars = state.service.app_calendars(&q.app).await?;
    Ok(Envelope(CalendarList { list: calendars.iter().map(CalendarView::from).collect() }))
}

/// `DELETE delCalendar` (query or JSON body `app`, `name`): refused with a
/// 400 naming the timers while any timer excludes it.
#[utoipa::path(
    delete,
    path = "/delCalendar",
    operation_id = "delCalendar",
    summary = "Delete a calendar no timer excludes.",
    params(CalendarRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = CalendarName))
)]
pub async fn calendar_delete(
    State(state): State<AppState>,
    ForApp(r, _): ForApp<QueryOrJson<CalendarRef>>,
) -> Result<Envelope<CalendarName>, ApiError> {
    state.service.delete_calendar(&r.app, &r.name).await?;
    Ok(Envelope(CalendarName { name: r.name }))
}

/// Query of `getForecast`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ForecastQuery {
    /// One app; every app the token may see when absent.
    #[serde(default)]
    pub app: Option<String>,
    /// Start of the window (RFC 3339 or ms); now when absent.
    #[serde(default)]
    pub from: Option<String>,
    /// Seconds in the window, 1 to [`MAX_FORECAST_SECONDS`]; 600 when absent.
    #[serde(default)]
    pub seconds: Option<i64>,
}

/// The reply of `getForecast`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForecastView {
    /// Start of the window, Unix ms (a whole second).
    pub from: i64,
    /// Fires to be sent in each second of the window.
    pub per_second: Vec<u64>,
    /// The busiest second.
    pub peak: Peak,
    /// Fires in the window.
    pub total: u64,
}

/// The busiest second of a forecast (the earliest of equals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Peak {
    pub run_timer: i64,
    pub fires: u64,
}

/// `GET getForecast`: the fires that will be sent in each second of the
/// window as planned now (stored fires, and beyond them the enabled
/// timers' schedules, spread included), its peak and total.
#[utoipa::path(
    get,
    path = "/getForecast",
    operation_id = "getForecast",
    summary = "Fires to be sent in each second of a window, as planned now, with the peak.",
    params(ForecastQuery),
    responses((status = 200, description = crate::replies::ENVELOPED, body = ForecastView))
)]
pub async fn forecast(
    State(state): State<AppState>,
    WithToken(q, auth): WithToken<ApiQuery<ForecastQuery>>,
) -> Result<Envelope<ForecastView>, ApiError> {
    let app = match (&q.app, auth.app()) {
        (Some(app), _) => {
            authorize(&auth, app)?;
            Some(app.as_str())
        }
        // A token of one app sees that app.
        (None, Some(own)) => Some(own),
        (None, None) => None,
    };
    let seconds = q.seconds.unwrap_or(600);
    if !(1..=i64::from(MAX_FORECAST_SECONDS)).contains(&seconds) {
        return Err(ApiError::invalid("seconds", format!("must be 1 to {MAX_FORECAST_SECONDS}, got {seconds}")));
    }
    let from = match q.from.as_deref() {
        None => state.clock.now_ms(),
        Some(text) => parse_instant("from", text)?,
    };
    let forecast = state.service.forecast(app, from, seconds as u32).await?;
    let (mut peak_at, mut peak) = (forecast.from_ms, 0);
    for (i, n) in forecast.per_second.iter().enumerate() {
        if *n > peak {
            (peak_at, peak) = (forecast.from_ms + i as i64 * 1000, *n);
        }
    }
    Ok(Envelope(ForecastView {
        from: forecast.from_ms,
        total: forecast.per_second.iter().sum(),
        peak: Peak { run_timer: peak_at, fires: peak },
        per_second: forecast.per_second,
    }))
}
