//! Request types of the timer routes, and their validation.
//!
//! Types decide shape (serde: unknown fields refused, camelCase names);
//! [`CreateTimer::validate`] decides meaning and reports *every* problem,
//! each as `"{field}: {what is wrong}"`, in one 400.

use std::collections::{BTreeMap, HashSet};
use std::fmt::{self, Display};
use std::marker::PhantomData;

use axum::http::{HeaderName, HeaderValue, Uri};
use chrono::DateTime;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use xtimer_asyncflow::engine::{MAX_LONG_TEXT, MAX_SHORT_TEXT};
use xtimer_asyncflow::task_id::check_task_type;
use xtimer_core::clock::rfc3339;
use xtimer_core::config::LimitsConfig;
use xtimer_core::cron::{parse_timezone, CronSchedule};
use xtimer_core::timer::{
    AsyncflowNotify, HttpNotify, LateAlert, MisfirePolicy, NewTimer, Notify, OverlapPolicy, RetryPolicy, Schedule,
    TimerStatus, Timing,
};
pub use xtimer_core::when::{
    MAX_FIRES_LIMIT, MAX_MISFIRE_THRESHOLD_MS, MAX_SPREAD_MS, MIN_EVERY_MS, MIN_MISFIRE_THRESHOLD_MS,
};

use crate::ApiError;

mod queries;

pub use queries::{AppTimersQuery, Page, TimerRef, TimerTasksQuery};

crate::of_app!(CreateTimer, TimerRef, AppTimersQuery, TimerTasksQuery);

/// Longest `app`, characters.
pub const MAX_APP_CHARS: usize = xtimer_service::MAX_APP_CHARS;
/// Longest `name`, characters.
pub const MAX_NAME_CHARS: usize = 256;
/// Longest `cron`, characters.
pub const MAX_CRON_CHARS: usize = 256;
/// Longest callback URL, characters.
pub const MAX_URL_CHARS: usize = 2048;
/// Longest callback header name, bytes.
pub const MAX_HEADER_NAME_BYTES: usize = 128;
/// Longest callback header value, bytes.
pub const MAX_HEADER_VALUE_BYTES: usize = 4096;
/// Callback methods accepted.
pub const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
/// How far in the past a `runAt` may be and still be accepted, ms: room for
/// clock skew between caller and server and for the request's own latency.
pub const RUN_AT_PAST_TOLERANCE_MS: i64 = 1_000;
/// Last representable `runAt`: 9999-12-31T23:59:59.999Z.
pub const MAX_RUN_AT_MS: i64 = 253_402_300_799_999;
/// Page size when none is given.
pub const DEFAULT_PAGE_SIZE: i64 = 20;
/// Largest page size.
pub const MAX_PAGE_SIZE: i64 = 500;

/// Callback headers xtimer sets itself from the request it sends; a timer
/// setting them would corrupt the callback's framing.
const FRAMING_HEADERS: [&str; 8] =
    ["connection", "content-length", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"];

/// Body of `createTimer` (see `shared/API.md`).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = Timer)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateTimer {
    /// Owning application, 1..=128 characters.
    pub app: String,
    /// Name, unique per app among timers that are not deleted, 1..=256 characters.
    pub name: String,
    /// Cron expression; exactly one of `cron`, `runAt` and `everyMs`.
    #[serde(default)]
    pub cron: Option<String>,
    /// One-shot time: RFC 3339 with offset, or Unix milliseconds.
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::run_at)]
    pub run_at: Option<Value>,
    /// IANA time zone of `cron`; defaults to UTC. Checked but unused for `runAt`,
    /// whose offset says it all.
    #[serde(default)]
    pub timezone: Option<String>,
    /// 1 (disabled, the default) or 2 (enabled). Read as any JSON value so
    /// that a wrong one (`"2"`) is answered with the valid values.
    #[serde(default)]
    #[schema(value_type = Option<i64>)]
    pub status: Option<Value>,
    /// The callback; exactly one of this and `notifyAsyncflowParam`.
    #[serde(rename = "notifyHTTPParam", default, deserialize_with = "object")]
    pub notify_http_param: Option<NotifyHttpParam>,
    /// The asyncflow task each fire creates, instead of a callback.
    #[serde(rename = "notifyAsyncflowParam", default, deserialize_with = "object")]
    pub notify_asyncflow_param: Option<NotifyAsyncflowParam>,
    /// Retry policy; defaults to [`RetryPolicy::default`].
    #[serde(default, deserialize_with = "object")]
    pub retry: Option<RetryParam>,
    /// `skip`, `fire_once` (the default) or `fire_all`.
    #[serde(default)]
    pub misfire: Option<String>,
    /// This timer's callback timeout, ms, [`MIN_CALLBACK_TIMEOUT_MS`] to
    /// [`MAX_CALLBACK_TIMEOUT_MS`]; the executor's `timeout_ms` when absent.
    #[serde(default)]
    pub callback_timeout_ms: Option<i64>,
    /// One-shot timers only: once its fire has ended the timer is deleted
    /// instead of completed. Defaults to false.
    #[serde(default)]
    pub delete_after_run: Option<bool>,
    /// An HTTP notify called once when a fire ends failed, with a JSON
    /// body naming the timer, the fire, its attempts and last output.
    #[serde(default, deserialize_with = "object")]
    pub on_failure: Option<NotifyHttpParam>,
    /// An HTTP notify called when a fire is recorded missed or skipped,
    /// with the `onFailure` body.
    #[serde(default, deserialize_with = "object")]
    pub on_missed: Option<NotifyHttpParam>,
    /// `{"thresholdMs", "notify"}`: an HTTP notify called once for a fire
    /// sent later than `thresholdMs` after its run time, with the
    /// `onFailure` body.
    #[serde(default, deserialize_with = "object")]
    pub on_late: Option<LateParam>,
    /// Disable the timer after this many consecutive failed fires,
    /// 1..=[`MAX_PAUSE_AFTER_FAILURES`]; never when absent.
    #[serde(default)]
    pub pause_after_failures: Option<i64>,
    /// `allow` (the default), `skip` or `buffer_one`: what a fire does
    /// while the one before it is still running.
    #[serde(default)]
    pub overlap: Option<String>,
    /// Labels (`{"team": "billing"}`), for search and bulk actions: at most
    /// [`xtimer_core::labels::MAX_LABELS`], keys up to
    /// [`xtimer_core::labels::MAX_KEY_CHARS`] characters, values up to
    /// [`xtimer_core::labels::MAX_VALUE_CHARS`]; none by default.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// An interval timer instead of `cron`/`runAt`: every this many ms, at
    /// least [`MIN_EVERY_MS`].
    #[serde(default)]
    pub every_ms: Option<i64>,
    /// Where the interval counts from (RFC 3339 or ms); default `startAt`,
    /// else now.
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::anchor_at)]
    pub anchor_at: Option<Value>,
    /// No scheduled fire before this time (RFC 3339 or ms).
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::start_at)]
    pub start_at: Option<Value>,
    /// No scheduled fire at or after this time (RFC 3339 or ms).
    #[serde(default)]
    #[schema(schema_with = crate::openapi::schemas::end_at)]
    pub end_at: Option<Value>,
    /// Only the first this many scheduled times fire, 1..=[`MAX_FIRES_LIMIT`].
    #[serde(default)]
    pub max_fires: Option<i64>,
    /// Each fire is sent at the least loaded second of `[scheduled,
    /// scheduled + spreadMs)`, 0..=[`MAX_SPREAD_MS`].
    #[serde(default)]
    pub spread_ms: Option<i64>,
    /// Names of the app's calendars whose days and ranges do not fire, at
    /// most [`MAX_EXCLUDED_CALENDARS`]; none by default.
    #[serde(default)]
    pub exclude_calendars: Option<Vec<String>>,
    /// This timer's catch-up window, ms, [`MIN_MISFIRE_THRESHOLD_MS`] to
    /// [`MAX_MISFIRE_THRESHOLD_MS`]: a fire later than this follows
    /// `misfire`; the reconciler's `misfire_threshold_ms` when absent.
    #[serde(default)]
    pub misfire_threshold_ms: Option<i64>,
}

/// Most calendars one timer excludes.
pub const MAX_EXCLUDED_CALENDARS: usize = 16;

/// Largest `pauseAfterFailures`.
pub const MAX_PAUSE_AFTER_FAILURES: i64 = 1000;

/// Shortest `callbackTimeoutMs`.
pub const MIN_CALLBACK_TIMEOUT_MS: i64 = 100;
/// Longest `callbackTimeoutMs`: half the default claim lease, so a slow
/// callback is never taken for a lost one.
pub const MAX_CALLBACK_TIMEOUT_MS: i64 = 30_000;

/// An optional struct read only from a JSON object (or `null`): serde's
/// derive would also read it from an array, field by field.
fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(de: D) -> Result<Option<T>, D::Error> {
    struct ObjectOnly<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
            T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    de.deserialize_any(ObjectOnly(PhantomData))
}

/// `notifyHTTPParam` of [`CreateTimer`].
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifyHttpParam {
    /// `http` or `https` URL with a host.
    pub url: String,
    /// GET, POST, PUT, PATCH or DELETE, any case; defaults to POST.
    #[serde(default)]
    pub method: Option<String>,
    /// Extra request headers.
    #[serde(default)]
    pub header: Option<BTreeMap<String, String>>,
    /// Request body, sent as stored.
    #[serde(default)]
    pub body: Option<String>,
    /// The URL, header values and body hold `{{placeholders}}` filled per fire.
    #[serde(default)]
    pub template: Option<bool>,
    /// The flow its callbacks belong to in the app (API 1g); the URL's
    /// `host:port` when absent.
    #[serde(default, rename = "flowKey")]
    pub flow_key: Option<String>,
}

/// `onLate` of [`CreateTimer`].
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = LateAlert)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LateParam {
    /// Lateness past which a fire is told, 1..=[`MAX_LATE_THRESHOLD_MS`] ms.
    pub threshold_ms: i64,
    /// Where it is told (its body is set by xtimer).
    pub notify: NotifyHttpParam,
}

/// Largest `onLate.thresholdMs`: a day.
pub const MAX_LATE_THRESHOLD_MS: i64 = 86_400_000;

/// `notifyAsyncflowParam` of [`CreateTimer`]: each fire creates one task.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotifyAsyncflowParam {
    /// A task type registered with `/v1/register_task`.
    pub task_type: String,
    /// The task's first stage; empty by default.
    #[serde(default)]
    pub task_stage: Option<String>,
    /// The task's context: a string is stored as is, any other JSON value
    /// as its JSON text.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
}

/// `retry` of [`CreateTimer`]; a missing field takes its default.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryParam {
    /// Attempts in all, 1..=20.
    #[serde(default)]
    pub max_attempts: Option<i64>,
    /// First backoff, 0..=600000 ms.
    #[serde(default)]
    pub backoff_ms: Option<i64>,
    /// Answers that fail the fire at once (300..=599, not 409); `[]`
    /// retries every answer. The defaults when absent.
    #[serde(default)]
    pub no_retry_statuses: Option<Vec<i64>>,
}

/// Problems found so far, each `"{field}: {problem}"`.
#[derive(Debug, Default)]
struct Problems(Vec<String>);

impl Problems {
    fn push(&mut self, field: &str, problem: impl Display) {
        self.0.push(format!("{field}: {problem}"));
    }

    fn into_error(self) -> ApiError {
        ApiError::Invalid(self.0.join("; "))
    }
}

impl CreateTimer {
    /// Checks every field against `now_ms` and the default limits; see
    /// [`CreateTimer::validate_with`].
    pub fn validate(self, now_ms: i64) -> Result<NewTimer, ApiError> {
        self.validate_with(now_ms, &LimitsConfig::default())
    }

    /// Checks every field against `now_ms` and `limits` (callback headers
    /// and body) and builds the timer to store, or a 400 listing every
    /// problem.
    pub fn validate_with(self, now_ms: i64, limits: &LimitsConfig) -> Result<NewTimer, ApiError> {
        let mut p = Problems::default();
        check_chars(&mut p, "app", &self.app, MAX_APP_CHARS);
        check_chars(&mut p, "name", &self.name, MAX_NAME_CHARS);
        let schedule = self.schedule(now_ms, &mut p);
        let timing = self.timing(schedule.as_ref(), &mut p);
        let status = match self.status.as_ref().map(|v| (v.as_i64(), v)) {
            None | Some((Some(1), _)) => TimerStatus::Disabled,
            Some((_, Value::Null)) => TimerStatus::Disabled,
            Some((Some(2), _)) => TimerStatus::Enabled,
            Some((_, other)) => {
                p.push("status", format!("must be 1 (disabled) or 2 (enabled), got {other}"));
                TimerStatus::Disabled
            }
        };
        if self.notify_asyncflow_param.is_some() {
            // The app becomes each task's user_id.
            check_task_text(&mut p, "app", &self.app, MAX_SHORT_TEXT, " for a timer that creates tasks");
        }
        let timeout_ms = self.callback_timeout_ms.and_then(|ms| {
            if !(MIN_CALLBACK_TIMEOUT_MS..=MAX_CALLBACK_TIMEOUT_MS).contains(&ms) {
                p.push(
                    "callbackTimeoutMs",
                    format!("must be {MIN_CALLBACK_TIMEOUT_MS} to {MAX_CALLBACK_TIMEOUT_MS} ms, got {ms}"),
                );
            } else if self.notify_http_param.is_none() {
                p.push("callbackTimeoutMs", "applies only to a timer with notifyHTTPParam");
            }
            u64::try_from(ms).ok()
        });
        let notify = match (self.notify_http_param, self.notify_asyncflow_param) {
            (Some(http), None) => {
                http.validate(&mut p, limits).map(|http| Notify::Http(HttpNotify { timeout_ms, ..http }))
            }
            (None, Some(task)) => task.validate(&mut p, limits).map(Notify::Asyncflow),
            (Some(_), Some(_)) => {
                p.push("notifyHTTPParam, notifyAsyncflowParam", "give one of them, not both");
                None
            }
            (None, None) => {
                p.push(
                    "notifyHTTPParam, notifyAsyncflowParam",
                    "one of them is required: a callback, or the task each fire creates",
                );
                None
            }
        };
        let retry = self.retry.map_or(Some(RetryPolicy::default()), |r| r.validate(&mut p));
        let misfire = match self.misfire.as_deref() {
            None => Some(MisfirePolicy::default()),
            Some(s) => MisfirePolicy::parse(s).or_else(|| {
                p.push("misfire", format!("must be one of skip, fire_once, fire_all, got `{s}`"));
                None
            }),
        };
        let on_failure = match self.on_failure {
            None => Some(None),
            Some(notify) => {
                if notify.body.is_some() {
                    p.push("onFailure.body", "is set by xtimer: a JSON description of the failed fire");
                }
                notify.validate_as(&mut p, limits, "onFailure").map(Some)
            }
        };
        let on_missed = match self.on_missed {
            None => Some(None),
            Some(notify) => alert_notify(&mut p, limits, "onMissed", notify).map(Some),
        };
        let on_late = match self.on_late {
            None => Some(None),
            Some(late) => {
                let threshold = late.threshold_ms;
                if !(1..=MAX_LATE_THRESHOLD_MS).contains(&threshold) {
                    p.push("onLate.thresholdMs", format!("must be 1 to {MAX_LATE_THRESHOLD_MS} ms, got {threshold}"));
                }
                alert_notify(&mut p, limits, "onLate.notify", late.notify)
                    .map(|notify| Some(LateAlert { threshold_ms: threshold.max(0) as u64, notify }))
            }
        };
        let pause_after_failures = self.pause_after_failures.and_then(|n| {
            if !(1..=MAX_PAUSE_AFTER_FAILURES).contains(&n) {
                p.push("pauseAfterFailures", format!("must be 1 to {MAX_PAUSE_AFTER_FAILURES}, got {n}"));
            }
            u32::try_from(n).ok()
        });
        let overlap = match self.overlap.as_deref() {
            None => Some(OverlapPolicy::default()),
            Some(s) => OverlapPolicy::parse(s).or_else(|| {
                p.push("overlap", format!("must be one of allow, skip, buffer_one, got `{s}`"));
                None
            }),
        };
        let labels = self.labels.clone().unwrap_or_default();
        if let Err(problem) = xtimer_core::labels::check(&labels) {
            p.push("labels", problem);
        }
        let delete_after_run = self.delete_after_run.unwrap_or(false);
        let ends = self.run_at.is_some() || self.end_at.is_some() || self.max_fires.is_some();
        if delete_after_run && !ends {
            p.push(
                "deleteAfterRun",
                "applies only to a timer that ends: a one-shot (runAt), or one with endAt or maxFires",
            );
        }
        match (schedule, notify, retry, misfire, on_failure, overlap, on_missed, on_late) {
            (
                Some(schedule),
                Some(notify),
                Some(retry),
                Some(misfire),
                Some(on_failure),
                Some(overlap),
                Some(on_missed),
                Some(on_late),
            ) if p.0.is_empty() => Ok(NewTimer {
                app: self.app,
                name: self.name,
                status,
                schedule,
                notify,
                retry,
                misfire,
                delete_after_run,
                on_failure,
                on_missed,
                on_late,
                pause_after_failures,
                overlap,
                timing,
                labels,
            }),
            _ => Err(p.into_error()),
        }
    }

    /// The timing fields (bounds, run limit, spread, calendars, catch-up
    /// window), checked against each other and `schedule`.
    fn timing(&self, schedule: Option<&Schedule>, p: &mut Problems) -> Timing {
        let start_at = self.start_at.as_ref().and_then(|v| time_ms("startAt", v, p));
        let end_at = self.end_at.as_ref().and_then(|v| time_ms("endAt", v, p));
        if let (Some(start), Some(end)) = (start_at, end_at) {
            if end <= start {
                p.push("endAt", format!("must be after startAt ({}), got {}", rfc3339(start), rfc3339(end)));
            }
        }
        if let Some(Schedule::Once { run_at_ms }) = schedule {
            if start_at.is_some_and(|start| *run_at_ms < start) || end_at.is_some_and(|end| *run_at_ms >= end) {
                p.push("runAt", format!("{} is outside [startAt, endAt)", rfc3339(*run_at_ms)));
            }
        }
        let max_fires = self.max_fires.and_then(|n| {
            if !(1..=MAX_FIRES_LIMIT as i64).contains(&n) {
                p.push("maxFires", format!("must be 1 to {MAX_FIRES_LIMIT}, got {n}"));
            }
            u64::try_from(n).ok()
        });
        let spread_ms = match self.spread_ms {
            None => 0,
            Some(ms) if (0..=MAX_SPREAD_MS as i64).contains(&ms) => ms as u64,
            Some(ms) => {
                p.push("spreadMs", format!("must be 0 to {MAX_SPREAD_MS} ms, got {ms}"));
                0
            }
        };
        let misfire_threshold_ms = self.misfire_threshold_ms.and_then(|ms| {
            if !(MIN_MISFIRE_THRESHOLD_MS as i64..=MAX_MISFIRE_THRESHOLD_MS as i64).contains(&ms) {
                p.push(
                    "misfireThresholdMs",
                    format!("must be {MIN_MISFIRE_THRESHOLD_MS} to {MAX_MISFIRE_THRESHOLD_MS} ms, got {ms}"),
                );
            }
            u64::try_from(ms).ok()
        });
        let mut exclude_calendars = Vec::new();
        let names = self.exclude_calendars.as_deref().unwrap_or_default();
        if names.len() > MAX_EXCLUDED_CALENDARS {
            p.push("excludeCalendars", format!("at most {MAX_EXCLUDED_CALENDARS} calendars, got {}", names.len()));
        }
        for (i, name) in names.iter().enumerate() {
            check_chars(p, &format!("excludeCalendars[{i}]"), name, MAX_NAME_CHARS);
            if !exclude_calendars.contains(name) {
                exclude_calendars.push(name.clone());
            }
        }
        Timing { start_at, end_at, max_fires, spread_ms, exclude_calendars, misfire_threshold_ms, last_run: None }
    }

    fn schedule(&self, now_ms: i64, p: &mut Problems) -> Option<Schedule> {
        let timezone = self.timezone.as_deref().unwrap_or("UTC");
        let timezone_ok = match parse_timezone(timezone) {
            Ok(_) => true,
            Err(err) => {
                p.push("timezone", err);
                false
            }
        };
        let given = [self.cron.is_some(), self.run_at.is_some(), self.every_ms.is_some()];
        if self.every_ms.is_some() && given.iter().filter(|g| **g).count() > 1 {
            p.push(
                "cron, runAt, everyMs",
                "give exactly one of them: cron or everyMs for a repeating timer, runAt for a one-shot",
            );
            return None;
        }
        if let Some(every_ms) = self.every_ms {
            if every_ms < MIN_EVERY_MS {
                p.push("everyMs", format!("must be at least {MIN_EVERY_MS} ms, got {every_ms}"));
                return None;
            }
            let start = self.start_at.as_ref().and_then(|v| time_ms("startAt", v, &mut Problems::default()));
            let anchor_ms = match &self.anchor_at {
                Some(v) => time_ms("anchorAt", v, p)?,
                None => start.unwrap_or(now_ms),
            };
            return timezone_ok.then(|| Schedule::Every { every_ms, anchor_ms, timezone: timezone.to_owned() });
        }
        if self.anchor_at.is_some() {
            p.push("anchorAt", "applies only to an interval timer (everyMs)");
        }
        match (&self.cron, &self.run_at) {
            (Some(_), Some(_)) => {
                p.push("cron, runAt", "give one of them, not both: cron for a repeating timer, runAt for a one-shot");
                None
            }
            (None, None) => {
                p.push(
                    "cron, runAt, everyMs",
                    "one of them is required: cron or everyMs for a repeating timer, runAt for a one-shot",
                );
                None
            }
            (Some(expr), None) => {
                if !timezone_ok {
                    // Still report what is wrong with the expression itself.
                    check_cron_text(p, expr);
                    return None;
                }
                cron_schedule(p, expr, timezone, now_ms)
                    .map(|_| Schedule::Cron { expr: expr.clone(), timezone: timezone.to_owned() })
            }
            (None, Some(run_at)) => run_at_ms(run_at, now_ms, p).map(|run_at_ms| Schedule::Once { run_at_ms }),
        }
    }
}

/// Checks a cron expression's text alone (empty, too long).
fn check_cron_text(p: &mut Problems, expr: &str) -> bool {
    if expr.trim().is_empty() {
        p.push("cron", "must not be empty");
        return false;
    }
    let chars = expr.chars().count();
    if chars > MAX_CRON_CHARS {
        p.push("cron", format!("must be at most {MAX_CRON_CHARS} characters, got {chars}"));
        return false;
    }
    true
}

/// `expr` parsed in `timezone`, if it is valid and fires after `now_ms`.
fn cron_schedule(p: &mut Problems, expr: &str, timezone: &str, now_ms: i64) -> Option<CronSchedule> {
    if !check_cron_text(p, expr) {
        return None;
    }
    let now = DateTime::from_timestamp_millis(now_ms).unwrap_or_default();
    match CronSchedule::parse(expr, timezone, now) {
        Ok(schedule) => Some(schedule),
        Err(err @ xtimer_core::Error::UnknownTimezone(_)) => {
            p.push("timezone", err);
            None
        }
        // Already names the field: "cron `...` is invalid: ...".
        Err(err) => {
            p.0.push(err.to_string());
            None
        }
    }
}

/// `cron` in `timezone` (UTC when absent), checked exactly as `createTimer`
/// checks it: the schedule, or the same 400.
pub fn parse_cron(expr: &str, timezone: Option<&str>, now_ms: i64) -> Result<CronSchedule, ApiError> {
    let mut p = Problems::default();
    match cron_schedule(&mut p, expr, timezone.unwrap_or("UTC"), now_ms) {
        Some(schedule) if p.0.is_empty() => Ok(schedule),
        _ => Err(p.into_error()),
    }
}

/// `runAt` as Unix milliseconds, if it is a time that is not past.
fn run_at_ms(value: &Value, now_ms: i64, p: &mut Problems) -> Option<i64> {
    const FIELD: &str = "runAt";
    let ms = match value {
        Value::String(s) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => t.timestamp_millis(),
            Err(_) => {
                p.push(
                    FIELD,
                    format!(
                        "`{s}` is not an RFC 3339 time with an offset, such as `2026-12-01T09:00:00Z` or \
                         `2026-12-01T17:00:00+08:00`"
                    ),
                );
                return None;
            }
        },
        Value::Number(n) => match n.as_i64() {
            Some(ms) => ms,
            None => {
                p.push(FIELD, format!("{n} is not a whole number of Unix milliseconds"));
                return None;
            }
        },
        other => {
            p.push(FIELD, format!("must be an RFC 3339 time string or Unix milliseconds, got {}", json_kind(other)));
            return None;
        }
    };
    if ms > MAX_RUN_AT_MS {
        p.push(FIELD, "must be before the year 10000");
        return None;
    }
    if ms < now_ms - RUN_AT_PAST_TOLERANCE_MS {
        let hint = if value.is_number() && ms.unsigned_abs() < 100_000_000_000 {
            " (a number is read as Unix milliseconds, not seconds)"
        } else {
            ""
        };
        p.push(FIELD, format!("{} is in the past: the server's time is {}{hint}", rfc3339(ms), rfc3339(now_ms)));
        return None;
    }
    Some(ms)
}

/// A time field (`startAt`, `endAt`, `anchorAt`) as Unix milliseconds: an
/// RFC 3339 time with an offset, or a whole number of ms.
fn time_ms(field: &str, value: &Value, p: &mut Problems) -> Option<i64> {
    let ms = match value {
        Value::String(s) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => t.timestamp_millis(),
            Err(_) => {
                p.push(field, format!("`{s}` is not an RFC 3339 time with an offset, such as `2026-12-01T09:00:00Z`"));
                return None;
            }
        },
        Value::Number(n) => match n.as_i64() {
            Some(ms) => ms,
            None => {
                p.push(field, format!("{n} is not a whole number of Unix milliseconds"));
                return None;
            }
        },
        other => {
            p.push(field, format!("must be an RFC 3339 time string or Unix milliseconds, got {}", json_kind(other)));
            return None;
        }
    };
    if !(0..=MAX_RUN_AT_MS).contains(&ms) {
        p.push(field, "must be between 1970 and the year 10000");
        return None;
    }
    Some(ms)
}

/// A time field on its own, as [`time_ms`] reads it; a 400 naming `field`.
pub(super) fn instant_value(field: &str, value: &Value) -> Result<i64, ApiError> {
    let mut p = Problems::default();
    time_ms(field, value, &mut p).ok_or_else(|| p.into_error())
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_chars(p: &mut Problems, field: &str, value: &str, max: usize) {
    let chars = value.chars().count();
    if chars == 0 {
        p.push(field, "must not be empty");
    } else if chars > max {
        p.push(field, format!("must be at most {max} characters, got {chars}"));
    }
}

/// An alert's notify given as `field` (`onMissed`, `onLate.notify`),
/// checked as `onFailure` is: xtimer sets its body.
fn alert_notify(p: &mut Problems, limits: &LimitsConfig, field: &str, notify: NotifyHttpParam) -> Option<HttpNotify> {
    if notify.body.is_some() {
        p.push(&format!("{field}.body"), "is set by xtimer: a JSON description of the fire");
    }
    notify.validate_as(p, limits, field)
}

impl NotifyHttpParam {
    fn validate(self, p: &mut Problems, limits: &LimitsConfig) -> Option<HttpNotify> {
        self.validate_as(p, limits, "notifyHTTPParam")
    }

    /// Checks the callback given as `field` (`notifyHTTPParam`, `onFailure`).
    fn validate_as(self, p: &mut Problems, limits: &LimitsConfig, field: &str) -> Option<HttpNotify> {
        let before = p.0.len();
        let template = self.template.unwrap_or(false);
        if template && field != "notifyHTTPParam" {
            p.push(&format!("{field}.template"), "applies only to notifyHTTPParam");
        }
        let url = if template { xtimer_core::template::sample(&self.url) } else { self.url.clone() };
        check_url(p, &url, &format!("{field}.url"));
        let method = self.method.as_deref().unwrap_or("POST").to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            p.push(
                &format!("{field}.method"),
                format!("must be one of {}, got `{}`", METHODS.join(", "), self.method.unwrap_or_default()),
            );
        }
        let headers = self.header.unwrap_or_default();
        check_headers(p, &headers, limits, &format!("{field}.header"));
        if let Some(body) = &self.body {
            let max = limits.callback_max_body_bytes;
            if body.len() > max {
                p.push(
                    &format!("{field}.body"),
                    format!("must be at most {max} bytes (limits.callback_max_body_bytes), got {}", body.len()),
                );
            }
        }
        if let Some(key) = &self.flow_key {
            if field != "notifyHTTPParam" {
                p.push(&format!("{field}.flowKey"), "applies only to notifyHTTPParam");
            } else if let Err(err) = xtimer_service::flows::check_flow_key(&format!("{field}.flowKey"), key) {
                p.0.push(err.to_string());
            }
        }
        let notify = HttpNotify {
            url: self.url,
            method,
            headers,
            body: self.body,
            timeout_ms: None,
            template,
            flow_key: self.flow_key,
        };
        if template && p.0.len() == before {
            if let Err((part, problem)) = xtimer_core::template::check_notify(&notify) {
                p.push(&format!("{field}.{part}"), problem);
            }
        }
        (p.0.len() == before).then_some(notify)
    }
}

impl NotifyAsyncflowParam {
    fn validate(self, p: &mut Problems, limits: &LimitsConfig) -> Option<AsyncflowNotify> {
        let before = p.0.len();
        if let Err(err) = check_task_type(&self.task_type) {
            p.push("notifyAsyncflowParam.taskType", err);
        }
        let task_stage = self.task_stage.unwrap_or_default();
        check_task_text(p, "notifyAsyncflowParam.taskStage", &task_stage, MAX_SHORT_TEXT, "");
        let context = match self.context {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
        };
        let max = limits.callback_max_body_bytes.min(MAX_LONG_TEXT);
        check_task_text(p, "notifyAsyncflowParam.context", &context, max, " (limits.callback_max_body_bytes)");
        (p.0.len() == before).then_some(AsyncflowNotify { task_type: self.task_type, task_stage, context })
    }
}

/// A text a fire puts into a task: the task engine's own limits, so that a
/// timer it accepts never makes a task the engine refuses.
fn check_task_text(p: &mut Problems, field: &str, value: &str, max: usize, key: &str) {
    if value.len() > max {
        p.push(field, format!("must be at most {max} bytes{key}, got {}", value.len()));
    }
    if value.contains('\0') {
        p.push(field, "must not contain NUL characters");
    }
}

fn check_url(p: &mut Problems, url: &str, field: &str) {
    let chars = url.chars().count();
    if chars == 0 {
        return p.push(field, "must not be empty");
    }
    if chars > MAX_URL_CHARS {
        return p.push(field, format!("must be at most {MAX_URL_CHARS} characters, got {chars}"));
    }
    // `host:port/path` reads as a URL whose scheme is the host: say what to add.
    let no_scheme = !url.contains("://");
    if no_scheme && format!("http://{url}").parse::<Uri>().is_ok_and(|u| u.host().is_some()) {
        return p.push(field, format!("`{url}` has no scheme: add `http://`: `http://{url}`"));
    }
    // Another scheme (`file:///etc/passwd`) is named before the URL is
    // parsed: the parser refuses some of them (no host) as a bad format.
    let scheme = url.split_once(':').map(|(s, _)| s).filter(|s| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    if let Some(s) = scheme.filter(|s| !no_scheme || !url[s.len() + 1..].starts_with(|c: char| c.is_ascii_digit())) {
        if !s.eq_ignore_ascii_case("http") && !s.eq_ignore_ascii_case("https") {
            return p.push(field, wrong_scheme(s));
        }
    }
    let uri = match url.parse::<Uri>() {
        Ok(uri) => uri,
        Err(err) => return p.push(field, format!("`{url}` is not a valid URL: {err}")),
    };
    match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https") => {}
        Some(s) => return p.push(field, wrong_scheme(s)),
        None => {
            return p.push(field, format!("`{url}` is not an absolute http or https URL such as `http://host/path`"))
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        p.push(field, format!("`{url}` names no host"));
    }
}

/// The problem of a callback URL of scheme `scheme`.
fn wrong_scheme(scheme: &str) -> String {
    format!("must use http or https, got `{scheme}`: only http and https URLs can be called")
}

fn check_headers(p: &mut Problems, headers: &BTreeMap<String, String>, limits: &LimitsConfig, field: &str) {
    let max = limits.callback_max_headers;
    if headers.len() > max {
        p.push(field, format!("at most {max} headers (limits.callback_max_headers), got {}", headers.len()));
    }
    let total: usize = headers.iter().map(|(k, v)| k.len() + v.len()).sum();
    let max = limits.callback_max_header_bytes;
    if total > max {
        p.push(
            field,
            format!("names and values must total at most {max} bytes (limits.callback_max_header_bytes), got {total}"),
        );
    }
    let mut seen = HashSet::new();
    for (name, value) in headers {
        if name.len() > MAX_HEADER_NAME_BYTES {
            let start: String = name.chars().take(32).collect();
            p.push(field, format!("header name `{start}...` is longer than {MAX_HEADER_NAME_BYTES} bytes"));
            continue;
        }
        let field = format!("{field}.{name}");
        match HeaderName::from_bytes(name.as_bytes()) {
            Err(_) => p.push(&field, format!("`{name}` is not a valid HTTP header name")),
            Ok(parsed) => {
                if FRAMING_HEADERS.contains(&parsed.as_str()) {
                    p.push(&field, "cannot be set: xtimer frames the callback request itself");
                } else if !seen.insert(parsed) {
                    p.push(&field, "is given twice (header names are case-insensitive)");
                }
            }
        }
        if value.len() > MAX_HEADER_VALUE_BYTES {
            p.push(&field, format!("value must be at most {MAX_HEADER_VALUE_BYTES} bytes, got {}", value.len()));
        } else if HeaderValue::from_str(value).is_err() {
            p.push(&field, "value is not a valid HTTP header value (no line breaks or control characters)");
        }
    }
}

impl RetryParam {
    fn validate(self, p: &mut Problems) -> Option<RetryPolicy> {
        let default = RetryPolicy::default();
        let max = RetryPolicy::MAX_ATTEMPTS;
        let max_attempts = match self.max_attempts {
            None => Some(default.max_attempts),
            Some(n) if (1..=i64::from(max)).contains(&n) => Some(n as u32),
            Some(n) => {
                p.push("retry.maxAttempts", format!("must be 1 to {max}, got {n}"));
                None
            }
        };
        let max = RetryPolicy::MAX_BACKOFF_MS;
        let backoff_ms = match self.backoff_ms {
            None => Some(default.backoff_ms),
            Some(n) if (0..=max as i64).contains(&n) => Some(n as u64),
            Some(n) => {
                p.push("retry.backoffMs", format!("must be 0 to {max}, got {n}"));
                None
            }
        };
        let no_retry_statuses = match self.no_retry_statuses {
            None => Some(None),
            Some(list) => no_retry_statuses(p, list).map(Some),
        };
        Some(RetryPolicy {
            max_attempts: max_attempts?,
            backoff_ms: backoff_ms?,
            no_retry_statuses: no_retry_statuses?,
        })
    }
}

/// Checks `retry.noRetryStatuses`: HTTP statuses 300 to 599 but 409 (an
/// answer that counts as succeeded), at most
/// [`RetryPolicy::MAX_NO_RETRY_STATUSES`]; sorted, repeats dropped.
fn no_retry_statuses(p: &mut Problems, list: Vec<i64>) -> Option<Vec<u16>> {
    const FIELD: &str = "retry.noRetryStatuses";
    let max = RetryPolicy::MAX_NO_RETRY_STATUSES;
    if list.len() > max {
        p.push(FIELD, format!("must list at most {max} statuses, got {}", list.len()));
        return None;
    }
    let mut statuses = Vec::with_capacity(list.len());
    for status in list {
        match status {
            409 => {
                p.push(FIELD, "409 counts as succeeded (already done) and cannot fail a fire");
                return None;
            }
            300..=599 => statuses.push(status as u16),
            _ => {
                p.push(FIELD, format!("must hold HTTP statuses 300 to 599, got {status}"));
                return None;
            }
        }
    }
    statuses.sort_unstable();
    statuses.dedup();
    Some(statuses)
}
