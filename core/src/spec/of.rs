//! A stored definition as its spec: what `getTimer` shows, what an update
//! patches, what the history compares and what the CLI exports.

use serde_json::Value;

use super::wire::{ExampleRequest, LateParam, NotifyAsyncflowParam, NotifyHttpParam, RetryParam, TimerSpec};
use crate::clock::rfc3339;
use crate::template::{self, FireFacts};
use crate::timer::{HttpNotify, NewTimer, Notify, OverlapPolicy, Schedule, Timer, TimerStatus};

impl TimerSpec {
    /// The spec `def` was made from, each field as the API names it: a
    /// one-shot's `runAt` in RFC 3339, other times in Unix ms, defaults
    /// spelled out where the view always shows them (`status`,
    /// `timezone`, `retry`, `misfire`) and left out where it shows them
    /// only when set. A disabled, completed or deleted timer's status is 1.
    pub fn of(def: &NewTimer) -> Self {
        let (cron, run_at, every_ms, anchor_at, timezone) = match &def.schedule {
            Schedule::Cron { expr, timezone } => (Some(expr.clone()), None, None, None, timezone.clone()),
            Schedule::Once { run_at_ms } => (None, Some(Value::from(rfc3339(*run_at_ms))), None, None, "UTC".into()),
            Schedule::Every { every_ms, anchor_ms, timezone } => {
                (None, None, Some(*every_ms), Some(Value::from(*anchor_ms)), timezone.clone())
            }
        };
        let (http, task, timeout) = match &def.notify {
            Notify::Http(http) => (Some(NotifyHttpParam::of(http)), None, http.timeout_ms),
            Notify::Asyncflow(task) => (
                None,
                Some(NotifyAsyncflowParam {
                    task_type: task.task_type.clone(),
                    task_stage: Some(task.task_stage.clone()),
                    context: Some(Value::String(task.context.clone())),
                }),
                None,
            ),
        };
        let t = &def.timing;
        Self {
            app: def.app.clone(),
            name: def.name.clone(),
            description: t.description.clone(),
            cron,
            run_at,
            timezone: Some(timezone),
            status: Some(Value::from(if def.status == TimerStatus::Enabled { 2 } else { 1 })),
            notify_http_param: http,
            notify_asyncflow_param: task,
            retry: Some(RetryParam {
                max_attempts: Some(i64::from(def.retry.max_attempts)),
                backoff_ms: Some(def.retry.backoff_ms as i64),
                no_retry_statuses: def.retry.no_retry_statuses.as_ref().map(|s| s.iter().map(|&n| n.into()).collect()),
            }),
            misfire: Some(def.misfire.as_str().to_owned()),
            callback_timeout_ms: timeout.map(|ms| ms as i64),
            delete_after_run: def.delete_after_run.then_some(true),
            on_failure: def.on_failure.as_ref().map(NotifyHttpParam::alert),
            on_missed: def.on_missed.as_ref().map(NotifyHttpParam::alert),
            on_late: def.on_late.as_ref().map(|late| LateParam {
                threshold_ms: late.threshold_ms as i64,
                notify: NotifyHttpParam::alert(&late.notify),
            }),
            pause_after_failures: def.pause_after_failures.map(i64::from),
            overlap: (def.overlap != OverlapPolicy::Allow).then(|| def.overlap.as_str().to_owned()),
            labels: (!def.labels.is_empty()).then(|| def.labels.clone()),
            every_ms,
            anchor_at,
            start_at: t.start_at.map(Value::from),
            end_at: t.end_at.map(Value::from),
            max_fires: t.max_fires.map(|n| n as i64),
            spread_ms: (t.spread_ms > 0).then_some(t.spread_ms as i64),
            exclude_calendars: (!t.exclude_calendars.is_empty()).then(|| t.exclude_calendars.clone()),
            misfire_threshold_ms: t.misfire_threshold_ms.map(|ms| ms as i64),
            dedupe_key: def.dedupe.as_ref().map(|d| d.key.clone()),
            on_duplicate: None,
            max_delay_ms: None,
        }
    }

    /// The spec as `getTimer` shows `timer`: [`Self::of`] with its real
    /// status (3 deleted, 4 completed), its callback's flow (its `flowKey`,
    /// else the URL's `host:port`) and, for a templated callback, the
    /// request of its fire at `example_at`.
    pub fn shown(timer: &Timer, example_at: Option<i64>) -> Self {
        let mut spec = Self::of(timer);
        spec.status = Some(Value::from(timer.status.code()));
        if let (Notify::Http(notify), Some(shown)) = (&timer.notify, &mut spec.notify_http_param) {
            shown.flow_key = Some(notify.flow_key().into_owned());
            if notify.template {
                shown.example = example_at.map(|at| ExampleRequest::of(timer, notify, at));
            }
        }
        spec
    }

    /// Its fields by their wire names, those set.
    pub fn fields(&self) -> serde_json::Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(fields)) => fields,
            _ => serde_json::Map::new(),
        }
    }
}

impl NotifyHttpParam {
    /// A stored callback as the API takes it.
    fn of(n: &HttpNotify) -> Self {
        Self {
            url: n.url.clone(),
            method: Some(n.method.clone()),
            header: Some(n.headers.clone()),
            body: n.body.clone(),
            template: n.template.then_some(true),
            flow_key: n.flow_key.clone(),
            example: None,
        }
    }

    /// An alert's notify (`onFailure`, `onMissed`, `onLate.notify`): its
    /// body is xtimer's.
    fn alert(n: &HttpNotify) -> Self {
        Self { body: None, template: None, flow_key: None, ..Self::of(n) }
    }
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
