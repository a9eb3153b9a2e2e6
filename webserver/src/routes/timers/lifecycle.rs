//! Changing a timer after it was made: `updateTimer` (a new definition,
//! history kept) and `triggerTimer` (one extra fire now).

use std::collections::BTreeMap;

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtimer_core::timer::{HttpNotify, Notify, Schedule, Timer, TimerStatus};

use super::input::{CreateTimer, LateParam, NotifyAsyncflowParam, NotifyHttpParam, RetryParam, TimerRef};
use super::timer_key;
use super::view::TimerView;
use crate::extract::{ApiJson, ForApp, QueryOrJson};
use crate::{ApiError, AppState, Envelope};

crate::of_app!(UpdateTimer);

/// Body of `updateTimer`: the timer's `id` and `app`, and any timer field
/// to change. An absent field keeps its value; `null` clears `startAt`,
/// `endAt`, `maxFires`, `misfireThresholdMs`, `onMissed` and `onLate`; an object field
/// (`notifyHTTPParam`, `notifyAsyncflowParam`, `retry`) is replaced whole;
/// giving `cron` makes a one-shot timer a cron timer and `runAt` the reverse.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = TimerUpdate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpdateTimer {
    /// The timer to change.
    pub id: i64,
    /// The app it belongs to (it cannot change).
    pub app: String,
    /// New name, unique in the app.
    #[serde(default)]
    pub name: Option<String>,
    /// New cron expression (the timer becomes a cron timer).
    #[serde(default)]
    pub cron: Option<String>,
    /// New one-shot time (the timer becomes a one-shot timer).
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub run_at: Option<Value>,
    /// New time zone of the cron.
    #[serde(default)]
    pub timezone: Option<String>,
    /// 1 (disabled) or 2 (enabled).
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub status: Option<Value>,
    /// New callback.
    #[serde(rename = "notifyHTTPParam", default)]
    pub notify_http_param: Option<NotifyHttpParam>,
    /// New task each fire creates.
    #[serde(rename = "notifyAsyncflowParam", default)]
    pub notify_asyncflow_param: Option<NotifyAsyncflowParam>,
    /// New retry policy.
    #[serde(default)]
    pub retry: Option<RetryParam>,
    /// New misfire policy.
    #[serde(default)]
    pub misfire: Option<String>,
    /// New callback timeout, ms.
    #[serde(default)]
    pub callback_timeout_ms: Option<i64>,
    /// New `deleteAfterRun` (one-shot timers).
    #[serde(default)]
    pub delete_after_run: Option<bool>,
    /// New failure notify.
    #[serde(default)]
    pub on_failure: Option<NotifyHttpParam>,
    /// New missed notify; `null` removes it.
    #[serde(default, deserialize_with = "nullable")]
    pub on_missed: Option<Option<NotifyHttpParam>>,
    /// New late alert; `null` removes it.
    #[serde(default, deserialize_with = "nullable")]
    pub on_late: Option<Option<LateParam>>,
    /// New `pauseAfterFailures`.
    #[serde(default)]
    pub pause_after_failures: Option<i64>,
    /// New overlap policy.
    #[serde(default)]
    pub overlap: Option<String>,
    /// New labels, replacing the old ones whole (`{}`: none).
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// New interval (the timer becomes an interval timer).
    #[serde(default)]
    pub every_ms: Option<i64>,
    /// New interval anchor.
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub anchor_at: Option<Value>,
    /// New `startAt`.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub start_at: Option<Option<Value>>,
    /// New `endAt`.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub end_at: Option<Option<Value>>,
    /// New `maxFires`.
    #[serde(default, deserialize_with = "nullable")]
    pub max_fires: Option<Option<i64>>,
    /// New `spreadMs` (0: none).
    #[serde(default)]
    pub spread_ms: Option<i64>,
    /// New `excludeCalendars` (`[]`: none).
    #[serde(default)]
    pub exclude_calendars: Option<Vec<String>>,
    /// New `misfireThresholdMs`.
    #[serde(default, deserialize_with = "nullable")]
    pub misfire_threshold_ms: Option<Option<i64>>,
}

impl UpdateTimer {
    /// The whole timer as `createTimer` would take it: these changes over
    /// `stored`.
    fn merged_with(self, stored: &Timer) -> CreateTimer {
        let stored_zone = match &stored.schedule {
            Schedule::Cron { timezone, .. } | Schedule::Every { timezone, .. } => Some(timezone.clone()),
            Schedule::Once { .. } => None,
        };
        let zone = self.timezone.clone().or(stored_zone);
        let changes_schedule = self.cron.is_some() || self.run_at.is_some() || self.every_ms.is_some();
        let (cron, run_at, every_ms, anchor_at) = match &stored.schedule {
            _ if changes_schedule => (self.cron.clone(), self.run_at.clone(), self.every_ms, self.anchor_at.clone()),
            Schedule::Cron { expr, .. } => (Some(expr.clone()), None, None, self.anchor_at.clone()),
            Schedule::Once { run_at_ms } => (None, Some(Value::from(*run_at_ms)), None, self.anchor_at.clone()),
            Schedule::Every { every_ms, anchor_ms, .. } => {
                (None, None, Some(*every_ms), Some(self.anchor_at.clone().unwrap_or(Value::from(*anchor_ms))))
            }
        };
        let timezone = if run_at.is_some() && !changes_schedule { self.timezone.clone() } else { zone };
        let one_shot = run_at.is_some();
        let t = &stored.timing;
        let ms = |v: Option<i64>| v.map(Value::from);
        let (http, task) = match (self.notify_http_param, self.notify_asyncflow_param) {
            (None, None) => match &stored.notify {
                Notify::Http(http) => (
                    Some(NotifyHttpParam {
                        url: http.url.clone(),
                        method: Some(http.method.clone()),
                        header: Some(http.headers.clone()),
                        body: http.body.clone(),
                        template: Some(http.template),
                        flow_key: http.flow_key.clone(),
                    }),
                    None,
                ),
                Notify::Asyncflow(task) => (
                    None,
                    Some(NotifyAsyncflowParam {
                        task_type: task.task_type.clone(),
                        task_stage: Some(task.task_stage.clone()),
                        context: Some(Value::String(task.context.clone())),
                    }),
                ),
            },
            given => given,
        };
        let stored_timeout = match &stored.notify {
            Notify::Http(stored) => stored.timeout_ms.and_then(|ms| i64::try_from(ms).ok()),
            Notify::Asyncflow(_) => None,
        };
        let stored_status = match stored.status {
            TimerStatus::Enabled => 2,
            // A completed one-shot timer is disabled until enabled again.
            _ => 1,
        };
        CreateTimer {
            app: self.app,
            name: self.name.unwrap_or_else(|| stored.name.clone()),
            cron,
            run_at,
            every_ms,
            anchor_at,
            start_at: self.start_at.unwrap_or(ms(t.start_at)),
            end_at: self.end_at.unwrap_or(ms(t.end_at)),
            max_fires: self.max_fires.unwrap_or(t.max_fires.map(|n| n as i64)),
            spread_ms: self.spread_ms.or(Some(t.spread_ms as i64)),
            exclude_calendars: self.exclude_calendars.or(Some(t.exclude_calendars.clone())),
            misfire_threshold_ms: self.misfire_threshold_ms.unwrap_or(t.misfire_threshold_ms.map(|n| n as i64)),
            timezone,
            status: Some(self.status.unwrap_or(Value::from(stored_status))),
            callback_timeout_ms: self.callback_timeout_ms.or(if http.is_some() { stored_timeout } else { None }),
            notify_http_param: http,
            notify_asyncflow_param: task,
            retry: Some(self.retry.unwrap_or(RetryParam {
                max_attempts: Some(i64::from(stored.retry.max_attempts)),
                backoff_ms: i64::try_from(stored.retry.backoff_ms).ok(),
                no_retry_statuses:
                    stored.retry.no_retry_statuses.as_ref().map(|s| s.iter().map(|&n| n.into()).collect()),
            })),
            misfire: Some(self.misfire.unwrap_or_else(|| stored.misfire.as_str().to_owned())),
            delete_after_run: self
                .delete_after_run
                .or((one_shot || stored.delete_after_run).then_some(stored.delete_after_run)),
            on_failure: self.on_failure.or_else(|| stored.on_failure.as_ref().map(alert_param)),
            on_missed: self.on_missed.unwrap_or_else(|| stored.on_missed.as_ref().map(alert_param)),
            on_late: self.on_late.unwrap_or_else(|| {
                stored.on_late.as_ref().map(|late| LateParam {
                    threshold_ms: i64::try_from(late.threshold_ms).unwrap_or(i64::MAX),
                    notify: alert_param(&late.notify),
                })
            }),
            pause_after_failures: self.pause_after_failures.or(stored.pause_after_failures.map(i64::from)),
            overlap: Some(self.overlap.unwrap_or_else(|| stored.overlap.as_str().to_owned())),
            labels: Some(self.labels.unwrap_or_else(|| stored.labels.clone())),
        }
    }
}

/// A stored alert's notify as `createTimer` takes it.
fn alert_param(n: &HttpNotify) -> NotifyHttpParam {
    NotifyHttpParam {
        url: n.url.clone(),
        method: Some(n.method.clone()),
        header: Some(n.headers.clone()),
        body: None,
        template: None,
        flow_key: None,
    }
}

/// `POST updateTimer`: changes any of a timer's fields, validated as
/// `createTimer` validates them, and answers the timer as it is now. Its
/// scheduled fires not yet claimed are made again from the new definition
/// before the reply (none fires at an old time after it, none is lost at a
/// new time); fires already made, manual ones and the history stay.
#[utoipa::path(
    post,
    path = "/updateTimer",
    operation_id = "updateTimer",
    summary = "Change a timer's fields (absent ones keep their value); fires not yet claimed follow the new definition.",
    request_body = UpdateTimer,
    responses((status = 200, description = crate::replies::ENVELOPED, body = super::view::TimerView))
)]
pub async fn timers_update(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<UpdateTimer>>,
) -> Result<Envelope<TimerView>, ApiError> {
    let key = timer_key(&auth, TimerRef { id: input.id, app: input.app.clone() });
    let limits = &state.security.limits;
    let timer = state
        .service
        .update(&key, |stored, now| {
            // A one-shot time kept as it was may be past by now: it stays valid.
            let keeps_past_run_at = input.cron.is_none() && input.run_at.is_none();
            let check_at = match stored.schedule {
                Schedule::Once { run_at_ms } if keeps_past_run_at => now.min(run_at_ms),
                _ => now,
            };
            input.merged_with(stored).validate_with(check_at, limits)
        })
        .await?;
    let next = state.service.next_fire(&timer, state.clock.now_ms()).await?;
    Ok(Envelope(TimerView::at(&timer, next)))
}

/// `{"runTimer": ms}`: the reply of `triggerTimer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Triggered {
    /// The run time of the manual fire, Unix ms.
    pub run_timer: i64,
}

/// `POST triggerTimer` (query or JSON body `id`, `app`): one extra fire of
/// an enabled timer, now, recorded like any other with `manual: true` and
/// sent with its own `Idempotency-Key` (`{id}_{runTimer}_manual`). The
/// schedule is left as it is.
#[utoipa::path(
    post,
    path = "/triggerTimer",
    operation_id = "triggerTimer",
    summary = "One extra fire now, marked manual.",
    params(super::input::TimerRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = Triggered))
)]
pub async fn timers_trigger(
    State(state): State<AppState>,
    ForApp(r, auth): ForApp<QueryOrJson<TimerRef>>,
) -> Result<Envelope<Triggered>, ApiError> {
    let run_timer = state.service.trigger(&timer_key(&auth, r)).await?;
    Ok(Envelope(Triggered { run_timer }))
}

/// A field that may be absent (`None`: keep), `null` (`Some(None)`: clear)
/// or a value.
fn nullable<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(de: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(de).map(Some)
}
