//! Reply types of the timer routes: what a timer and a fire look like on
//! the wire. Times are RFC 3339 in UTC; run times also Unix milliseconds.

use std::collections::BTreeMap;

use serde::Serialize;
use xtimer_core::clock::rfc3339;
use xtimer_core::fire::Fire;
use xtimer_core::template::{self, FireFacts};
use xtimer_core::timer::{HttpNotify, Notify, OverlapPolicy, RetryPolicy, Schedule, Timer};
use xtimer_service::TimerStats;

/// `{"id": N}`: the reply of create, enable, disable and delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TimerId {
    /// The timer's id.
    pub id: i64,
}

/// `{"list": [...], "total": N}`: one page and the count of all rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct List<T> {
    /// This page.
    pub list: Vec<T>,
    /// Rows on every page.
    pub total: u64,
}

/// A timer as `getTimer` and `getAppTimers` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimerView {
    /// Id.
    pub id: i64,
    /// Owning app.
    pub app: String,
    /// Name, unique in the app among timers that are not deleted.
    pub name: String,
    /// 1 disabled, 2 enabled, 3 deleted, 4 completed (a one-shot timer
    /// whose fire has ended).
    pub status: i64,
    /// Cron expression of a repeating timer, else null.
    pub cron: Option<String>,
    /// Time of a one-shot timer, RFC 3339 UTC, else null.
    pub run_at: Option<String>,
    /// Time of a one-shot timer, Unix ms, else null.
    pub run_at_ms: Option<i64>,
    /// IANA time zone of the cron (`UTC` for one-shot timers).
    pub timezone: String,
    /// The callback, for a timer that calls one.
    #[serde(rename = "notifyHTTPParam", skip_serializing_if = "Option::is_none")]
    pub notify_http_param: Option<NotifyView>,
    /// The task each fire creates, for a timer that creates one.
    #[serde(rename = "notifyAsyncflowParam", skip_serializing_if = "Option::is_none")]
    pub notify_asyncflow_param: Option<AsyncflowView>,
    /// Retry policy (`maxAttempts`, `backoffMs`).
    pub retry: RetryPolicy,
    /// `skip`, `fire_once` or `fire_all`.
    pub misfire: &'static str,
    /// This timer's callback timeout, ms, when it sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_timeout_ms: Option<u64>,
    /// A one-shot timer deleted, not completed, once its fire has ended;
    /// shown only when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub delete_after_run: bool,
    /// Called once when a fire ends failed, when the timer sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<NotifyView>,
    /// Called when a fire is recorded missed or skipped, when the timer sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_missed: Option<NotifyView>,
    /// `{"thresholdMs", "notify"}`: called once for a fire sent later than
    /// that, when the timer sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_late: Option<LateView>,
    /// Disabled after this many consecutive failed fires, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    /// Why `pauseAfterFailures` disabled the timer, until it is enabled again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<String>,
    /// `skip` or `buffer_one`; left out for `allow`, the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<&'static str>,
    /// Its next fire time, Unix ms: null unless enabled with a fire ahead.
    pub next_run_timer: Option<i64>,
    /// Its next fire time, RFC 3339 UTC.
    pub next_run_time: Option<String>,
    /// Interval timers: the interval, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<i64>,
    /// Interval timers: what the interval counts from, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor_at: Option<i64>,
    /// No scheduled fire before this time, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_at: Option<i64>,
    /// No scheduled fire at or after this time, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_at: Option<i64>,
    /// The run limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fires: Option<u64>,
    /// Scheduled times the run limit leaves from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fires_left: Option<u64>,
    /// `getTimer` only: its fires of the last 24 hours (API 1h).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<StatsView>,
    /// The spread of each fire, ms (absent: none).
    #[serde(skip_serializing_if = "is_zero")]
    pub spread_ms: u64,
    /// The app's calendars whose days and ranges do not fire.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclude_calendars: Vec<String>,
    /// This timer's catch-up window, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misfire_threshold_ms: Option<u64>,
    /// Its labels (left out when it has none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Creation time, RFC 3339.
    pub create_time: String,
    /// Last change, RFC 3339.
    pub modify_time: String,
}

/// `onLate` of a [`TimerView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LateView {
    /// Lateness past which a fire is told, ms.
    pub threshold_ms: u64,
    /// Where it is told.
    pub notify: NotifyView,
}

impl NotifyView {
    /// An alert's notify (`onFailure`, `onMissed`, `onLate.notify`): its
    /// body is xtimer's.
    fn alert(n: &HttpNotify) -> Self {
        Self {
            url: n.url.clone(),
            method: n.method.clone(),
            header: n.headers.clone(),
            body: None,
            template: false,
            flow_key: None,
            example: None,
        }
    }
}

/// `notifyHTTPParam` of a [`TimerView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = Notify)]
pub struct NotifyView {
    /// Callback URL.
    pub url: String,
    /// Upper-case method.
    pub method: String,
    /// Extra headers.
    pub header: BTreeMap<String, String>,
    /// Body, or null.
    pub body: Option<String>,
    /// Its placeholders are filled per fire.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub template: bool,
    /// The flow its callbacks belong to (API 1g): its `flowKey`, else the
    /// URL's `host:port`.
    #[serde(rename = "flowKey", skip_serializing_if = "Option::is_none")]
    pub flow_key: Option<String>,
    /// A templated callback's next request, rendered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<ExampleRequest>,
}

/// The request a templated callback's next fire sends (its signature
/// left out: it is made when sent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ExampleRequest {
    /// Upper-case method.
    pub method: String,
    /// The URL, placeholders filled.
    pub url: String,
    /// Every header the fire sends but the signature.
    pub headers: BTreeMap<String, String>,
    /// The body, placeholders filled.
    pub body: Option<String>,
}

impl ExampleRequest {
    /// The request of `timer`'s fire at `run_ms`, its first attempt.
    fn of(timer: &Timer, notify: &HttpNotify, run_ms: i64) -> Self {
        let key = format!("{}_{run_ms}", timer.id);
        let facts = FireFacts { timer, run_ms, scheduled_ms: run_ms, fire_key: &key, attempt: 1 };
        let sent = template::render(notify, &facts);
        let mut headers = sent.headers;
        if !headers.keys().any(|name| name.eq_ignore_ascii_case("content-type")) {
            headers.insert("Content-Type".into(), "application/json".into());
        }
        headers.insert("X-Xtimer-Timer-Id".into(), timer.id.to_string());
        headers.insert("X-Xtimer-Run-Time".into(), run_ms.to_string());
        headers.insert("X-Xtimer-Scheduled-Time".into(), run_ms.to_string());
        headers.insert("Idempotency-Key".into(), key);
        Self { method: sent.method, url: sent.url, headers, body: sent.body }
    }
}

/// `notifyAsyncflowParam` of a [`TimerView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AsyncflowView {
    /// The task type.
    pub task_type: String,
    /// The task's first stage.
    pub task_stage: String,
    /// The task's context.
    pub context: String,
}

impl TimerView {
    /// The view with its next fire time (`TimerService::next_fire`).
    pub fn at(t: &Timer, next_run_ms: Option<i64>) -> Self {
        let mut view = Self::from(t);
        view.next_run_timer = next_run_ms;
        view.next_run_time = next_run_ms.map(rfc3339);
        let example_at = next_run_ms.or(match t.schedule {
            Schedule::Once { run_at_ms } => Some(run_at_ms),
            _ => None,
        });
        if let (Notify::Http(notify), Some(view), Some(at)) = (&t.notify, &mut view.notify_http_param, example_at) {
            if notify.template {
                view.example = Some(ExampleRequest::of(t, notify, at));
            }
        }
        view
    }
}

impl From<&Timer> for TimerView {
    fn from(t: &Timer) -> Self {
        let (cron, run_at_ms, timezone, every) = match &t.schedule {
            Schedule::Cron { expr, timezone } => (Some(expr.clone()), None, timezone.clone(), None),
            Schedule::Once { run_at_ms } => (None, Some(*run_at_ms), "UTC".to_owned(), None),
            Schedule::Every { every_ms, anchor_ms, timezone } => {
                (None, None, timezone.clone(), Some((*every_ms, *anchor_ms)))
            }
        };
        let (http, task) = match &t.notify {
            Notify::Http(http) => (
                Some(NotifyView {
                    url: http.url.clone(),
                    method: http.method.clone(),
                    header: http.headers.clone(),
                    body: http.body.clone(),
                    template: http.template,
                    flow_key: Some(http.flow_key().into_owned()),
                    example: None,
                }),
                None,
            ),
            Notify::Asyncflow(task) => (
                None,
                Some(AsyncflowView {
                    task_type: task.task_type.clone(),
                    task_stage: task.task_stage.clone(),
                    context: task.context.clone(),
                }),
            ),
        };
        Self {
            id: t.id,
            app: t.app.clone(),
            name: t.name.clone(),
            status: t.status.code(),
            cron,
            run_at: run_at_ms.map(rfc3339),
            run_at_ms,
            timezone,
            notify_http_param: http,
            notify_asyncflow_param: task,
            retry: t.retry.clone(),
            misfire: t.misfire.as_str(),
            callback_timeout_ms: match &t.notify {
                Notify::Http(http) => http.timeout_ms,
                Notify::Asyncflow(_) => None,
            },
            delete_after_run: t.delete_after_run,
            on_failure: t.on_failure.as_ref().map(NotifyView::alert),
            on_missed: t.on_missed.as_ref().map(NotifyView::alert),
            on_late: t
                .on_late
                .as_ref()
                .map(|late| LateView { threshold_ms: late.threshold_ms, notify: NotifyView::alert(&late.notify) }),
            pause_after_failures: t.pause_after_failures,
            pause_reason: t.pause_reason.clone(),
            overlap: (t.overlap != OverlapPolicy::Allow).then_some(t.overlap.as_str()),
            next_run_timer: None,
            next_run_time: None,
            every_ms: every.map(|e| e.0),
            anchor_at: every.map(|e| e.1),
            start_at: t.timing.start_at,
            end_at: t.timing.end_at,
            max_fires: t.timing.max_fires,
            fires_left: None,
            stats: None,
            spread_ms: t.timing.spread_ms,
            exclude_calendars: t.timing.exclude_calendars.clone(),
            misfire_threshold_ms: t.timing.misfire_threshold_ms,
            labels: t.labels.clone(),
            create_time: rfc3339(t.create_time),
            modify_time: rfc3339(t.modify_time),
        }
    }
}

/// A fire as `getTimerTasks` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = Fire)]
#[serde(rename_all = "camelCase")]
pub struct FireView {
    /// Fire id.
    pub task_id: i64,
    /// Its timer.
    pub timer_id: i64,
    /// Scheduled time, Unix ms.
    pub run_timer: i64,
    /// Scheduled time, RFC 3339.
    pub run_time: String,
    /// Its scheduled time, Unix ms: `runTimer` unless the timer spreads
    /// its fires (then it is sent later, at `runTimer`).
    pub scheduled_timer: i64,
    /// 0 pending, 1 running, 2 succeeded, 3 failed, 4 skipped, 5 missed.
    pub status: i64,
    /// HTTP attempts made.
    pub attempt: u32,
    /// Response status and the first bytes of the body, or the error.
    pub output: String,
    /// How late the first attempt was sent, ms.
    pub cost_time: i64,
    /// Made by `triggerTimer`, not by the schedule.
    pub manual: bool,
    /// Sent again by `replayFires` (left out when not).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    /// Creation time, RFC 3339.
    pub create_time: String,
    /// Last change, RFC 3339.
    pub modify_time: String,
}

impl From<&Fire> for FireView {
    fn from(f: &Fire) -> Self {
        Self {
            task_id: f.task_id,
            timer_id: f.timer_id,
            run_timer: f.run_ms,
            run_time: rfc3339(f.run_ms),
            scheduled_timer: f.scheduled_ms,
            status: f.status.code(),
            attempt: f.attempt,
            output: f.output.clone(),
            cost_time: f.cost_time,
            manual: f.manual,
            replayed: f.replayed,
            create_time: rfc3339(f.create_time),
            modify_time: rfc3339(f.modify_time),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `stats` of `getTimer`: the last 24 hours of the timer's fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = TimerStats)]
#[serde(rename_all = "camelCase")]
pub struct StatsView {
    /// Fires due in the window, every status.
    pub fires: u64,
    /// Succeeded.
    pub succeeded: u64,
    /// Failed.
    pub failed: u64,
    /// Missed by the misfire policy.
    pub missed: u64,
    /// Median lateness of the fires sent, ms (null: none sent).
    pub late_p50_ms: Option<i64>,
    /// 99th percentile of that lateness, ms.
    pub late_p99_ms: Option<i64>,
}

impl From<TimerStats> for StatsView {
    fn from(s: TimerStats) -> Self {
        Self {
            fires: s.fires,
            succeeded: s.succeeded,
            failed: s.failed,
            missed: s.missed,
            late_p50_ms: s.late_p50_ms,
            late_p99_ms: s.late_p99_ms,
        }
    }
}
