//! What each field of a [`TimerSpec`] may hold: [`TimerSpec::validate_with`]
//! checks every field, reports *every* problem (each `"{field}: {what is
//! wrong}"`) and builds the [`NewTimer`] to store.

use std::collections::{BTreeMap, HashSet};

use chrono::DateTime;
use http::{HeaderName, HeaderValue, Uri};
use serde_json::Value;

use super::problems::{check_chars, Problems};
use super::wire::*;
use crate::clock::rfc3339;
use crate::config::LimitsConfig;
use crate::cron::{parse_timezone, CronSchedule};
use crate::task::{check_task_type, MAX_LONG_TEXT, MAX_SHORT_TEXT};
use crate::timer::{
    check_flow_key, AsyncflowNotify, Dedupe, HttpNotify, LateAlert, MisfirePolicy, NewTimer, Notify, OnDuplicate,
    OverlapPolicy, RetryPolicy, Schedule, TimerStatus, Timing,
};

/// Callback headers xtimer sets itself from the request it sends; a timer
/// setting them would corrupt the callback's framing.
const FRAMING_HEADERS: [&str; 8] =
    ["connection", "content-length", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"];

impl TimerSpec {
    /// Checks every field against `now_ms` and the default limits; see
    /// [`CreateTimer::validate_with`].
    pub fn validate(self, now_ms: i64) -> Result<NewTimer, Invalid> {
        self.validate_with(now_ms, &LimitsConfig::default())
    }

    /// Checks every field against `now_ms` and `limits` (callback headers
    /// and body) and builds the timer to store, or a 400 listing every
    /// problem.
    pub fn validate_with(self, now_ms: i64, limits: &LimitsConfig) -> Result<NewTimer, Invalid> {
        let mut p = Problems::default();
        check_chars(&mut p, "app", &self.app, MAX_APP_CHARS);
        check_chars(&mut p, "name", &self.name, MAX_NAME_CHARS);
        let schedule = self.schedule(now_ms, &mut p);
        let timing = self.timing(schedule.as_ref(), &mut p);
        let dedupe = self.dedupe(schedule.as_ref(), &mut p);
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
        if let Err(problem) = crate::labels::check(&labels) {
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
                dedupe,
            }),
            _ => Err(p.into_error()),
        }
    }

    /// `dedupeKey` with `onDuplicate` and `maxDelayMs`: a one-shot's only
    /// (the key's first run time is `schedule`'s), the other two only with
    /// a key, `maxDelayMs` only with `replace`.
    fn dedupe(&self, schedule: Option<&Schedule>, p: &mut Problems) -> Option<Dedupe> {
        let on_duplicate = match self.on_duplicate.as_deref() {
            None => OnDuplicate::default(),
            Some(s) => OnDuplicate::parse(s).unwrap_or_else(|| {
                p.push(ON_DUPLICATE_FIELD, format!("must be one of reject, keep, replace, got `{s}`"));
                OnDuplicate::default()
            }),
        };
        let max_delay_ms = self.max_delay_ms.and_then(|ms| {
            if !(0..=MAX_RUN_AT_MS).contains(&ms) {
                p.push(MAX_DELAY_MS_FIELD, format!("must be 0 to {MAX_RUN_AT_MS} ms, got {ms}"));
            }
            u64::try_from(ms).ok()
        });
        let Some(key) = &self.dedupe_key else {
            let given =
                [(ON_DUPLICATE_FIELD, self.on_duplicate.is_some()), (MAX_DELAY_MS_FIELD, max_delay_ms.is_some())];
            for (field, _) in given.into_iter().filter(|(_, given)| *given) {
                p.push(field, format!("applies only with {DEDUPE_KEY_FIELD}"));
            }
            return None;
        };
        check_chars(p, DEDUPE_KEY_FIELD, key, MAX_DEDUPE_KEY_CHARS);
        if max_delay_ms.is_some() && on_duplicate != OnDuplicate::Replace {
            p.push(MAX_DELAY_MS_FIELD, format!("applies only with {ON_DUPLICATE_FIELD} `replace`"));
        }
        match (schedule, &self.run_at) {
            (Some(Schedule::Once { run_at_ms }), _) => {
                Some(Dedupe { key: key.clone(), first_run_ms: *run_at_ms, on_duplicate, max_delay_ms })
            }
            // A runAt refused already names its own problem.
            (None, Some(_)) => None,
            _ => {
                p.push(DEDUPE_KEY_FIELD, "applies only to a one-shot timer (runAt), not to cron or everyMs");
                None
            }
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
        let description = self.description.clone().filter(|text| !text.is_empty());
        if let Some(text) = &description {
            check_chars(p, "description", text, MAX_DESCRIPTION_CHARS);
        }
        Timing {
            start_at,
            end_at,
            max_fires,
            spread_ms,
            exclude_calendars,
            misfire_threshold_ms,
            last_run: None,
            description,
        }
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
        Err(err @ crate::Error::UnknownTimezone(_)) => {
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
pub fn parse_cron(expr: &str, timezone: Option<&str>, now_ms: i64) -> Result<CronSchedule, Invalid> {
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
pub fn instant_ms(field: &str, value: &Value) -> Result<i64, Invalid> {
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
        let url = if template { crate::template::sample(&self.url) } else { self.url.clone() };
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
            } else if let Err(problem) = check_flow_key(key) {
                p.push(&format!("{field}.flowKey"), problem);
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
            if let Err((part, problem)) = crate::template::check_notify(&notify) {
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
