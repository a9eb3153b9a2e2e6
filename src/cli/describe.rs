//! How the command line shows a timer: its schedule in words, whatever its
//! kind (`cron ...`, `once at ...`, `every 5m`), for `timer list`, and
//! every field `getTimer` answers, one `key  value` line each, for `timer
//! get` and `timer update` (the timer's spec read as the spec declares
//! it, [`TimerSpec`]). A field this file does not know yet is still shown,
//! as its JSON, so nothing the server says is left out.

use serde_json::Value;
use xtimer_core::spec::{NotifyHttpParam, TimerSpec};

use super::table::text;

/// A timer status code as a word.
pub fn timer_status(code: &Value) -> &'static str {
    match code.as_i64() {
        Some(1) => "disabled",
        Some(2) => "enabled",
        Some(3) => "deleted",
        Some(4) => "completed",
        _ => "unknown",
    }
}

/// A fire status code as a word.
pub fn fire_status(code: &Value) -> &'static str {
    match code.as_i64() {
        Some(0) => "pending",
        Some(1) => "running",
        Some(2) => "succeeded",
        Some(3) => "failed",
        Some(4) => "skipped",
        Some(5) => "missed",
        _ => "unknown",
    }
}

/// `n thing` or `n things`.
pub fn plural(n: i64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A span of milliseconds as people write it: `5s`, `1h30m`, `1500ms`.
pub fn span(ms: i64) -> String {
    if ms <= 0 || ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let mut secs = ms / 1000;
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// Unix milliseconds as RFC 3339 UTC (`-` when absent).
pub fn time(ms: &Value) -> String {
    ms.as_i64()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| text(ms))
}

/// A timer's schedule in one cell: its cron expression (`0 9 * * *`),
/// `once at 2030-01-01T00:00:00.000Z` or `every 5m`.
pub fn schedule(t: &Value) -> String {
    if let Some(expr) = t["cron"].as_str() {
        expr.to_owned()
    } else if let Some(every) = t["everyMs"].as_i64() {
        format!("every {}", span(every))
    } else if t["runAt"].is_string() {
        format!("once at {}", text(&t["runAt"]))
    } else {
        "-".into()
    }
}

/// What `getTimer` adds to a timer's spec (and its `status`, read as
/// shown: 3 deleted, 4 completed), as far as [`describe`] knows it.
const FACTS: &[&str] = &[
    "id",
    "status",
    "runAtMs",
    "firesLeft",
    "pauseReason",
    "nextRunTimer",
    "nextRunTime",
    "stats",
    "createTime",
    "modifyTime",
];

/// A notify (`notifyHTTPParam`, `onFailure`, ...) in one line: `POST
/// http://host/path`, its headers and body when it has them.
fn notify(n: &NotifyHttpParam) -> String {
    let mut out = format!("{} {}", n.method.as_deref().unwrap_or("-"), n.url);
    if let Some(headers) = n.header.as_ref().filter(|h| !h.is_empty()) {
        let list: Vec<String> = headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        out.push_str(&format!(", headers {}", list.join("; ")));
    }
    if let Some(body) = &n.body {
        out.push_str(&format!(", body {body}"));
    }
    if n.template == Some(true) {
        out.push_str(", templated");
    }
    out
}

/// An optional number as text (`-` when absent).
fn number(n: Option<i64>) -> String {
    n.map_or_else(|| "-".into(), |n| n.to_string())
}

/// A timer as `key  value` lines: every field `getTimer` answers. Its
/// spec is read as the spec it is ([`TimerSpec::from_shown`]), each field
/// taken from it as it is shown; what is left of it, and any field this
/// build does not know, is shown as its JSON. A spec this build cannot
/// read is shown field by field, as JSON.
pub fn describe(t: &Value) -> String {
    let Ok(mut spec) = TimerSpec::from_shown(t) else {
        return lines(t.as_object().into_iter().flatten().map(|(k, v)| (k.clone(), text(v))).collect());
    };
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut row = |key: &str, value: String| rows.push((key.to_owned(), value));
    row("id", text(&t["id"]));
    row("app", std::mem::take(&mut spec.app));
    row("name", std::mem::take(&mut spec.name));
    spec.status = None;
    row("status", timer_status(&t["status"]).into());
    let (cron, every, anchor, run_at) =
        (spec.cron.take(), spec.every_ms.take(), spec.anchor_at.take(), spec.run_at.take());
    if let Some(expr) = cron {
        row("cron", expr);
    } else if let Some(every) = every {
        let anchor = time(&anchor.unwrap_or_default());
        row("every", format!("{} ({every} ms), counted from {anchor}", span(every)));
    } else {
        row("run at", text(&run_at.unwrap_or_default()));
    }
    row("timezone", spec.timezone.take().unwrap_or_else(|| "-".into()));
    if let Some(start) = spec.start_at.take() {
        row("starts", time(&start));
    }
    if let Some(end) = spec.end_at.take() {
        row("ends", format!("{} (excluded)", time(&end)));
    }
    if let Some(max) = spec.max_fires.take() {
        let left =
            t["firesLeft"].as_i64().map(|n| format!(", {} left", plural(n, "fire", "fires"))).unwrap_or_default();
        row("max fires", format!("{}{left}", plural(max, "fire", "fires")));
    }
    if let Some(spread) = spec.spread_ms.take() {
        row("spread", format!("each fire within {} ({spread} ms) of its time", span(spread)));
    }
    if let Some(calendars) = spec.exclude_calendars.take().filter(|c| !c.is_empty()) {
        row("excluded", format!("calendars {}", calendars.join(", ")));
    }
    let window = spec.misfire_threshold_ms.take().map(|ms| format!(", within {} ({ms} ms)", span(ms)));
    row("misfire", format!("{}{}", spec.misfire.take().unwrap_or_else(|| "-".into()), window.unwrap_or_default()));
    if let Some(overlap) = spec.overlap.take() {
        row("overlap", overlap);
    }
    let timeout = spec.callback_timeout_ms.take();
    if let Some(http) = spec.notify_http_param.take() {
        let mut callback = notify(&http);
        if let Some(ms) = timeout {
            callback.push_str(&format!(", timeout {ms} ms"));
        }
        row("callback", callback);
        if let Some(flow) = http.flow_key {
            row("flow", flow);
        }
        if let Some(example) = t["notifyHTTPParam"]["example"].as_object() {
            row("next call", format!("{} {}", text(&example["method"]), text(&example["url"])));
        }
    } else {
        let task = spec.notify_asyncflow_param.take();
        let (task_type, stage, context) = match &task {
            Some(task) => (task.task_type.as_str(), task.task_stage.as_deref(), task.context.as_ref()),
            None => ("-", None, None),
        };
        let stage = stage.filter(|s| !s.is_empty()).map(|s| format!(", stage {s}")).unwrap_or_default();
        row("task", format!("asyncflow task {task_type}{stage}"));
        if let Some(context) = context.and_then(Value::as_str).filter(|c| !c.is_empty()) {
            row("context", context.to_owned());
        }
    }
    let retry = spec.retry.take().unwrap_or_default();
    let attempts = retry.max_attempts.map_or_else(|| "-".into(), |n| plural(n, "attempt", "attempts"));
    let mut retries = format!("{attempts}, {} ms backoff", number(retry.backoff_ms));
    if let Some(statuses) = retry.no_retry_statuses {
        let list: Vec<String> = statuses.iter().map(i64::to_string).collect();
        retries.push_str(&format!(", no retry on {}", if list.is_empty() { "none".into() } else { list.join(", ") }));
    }
    row("retry", retries);
    if let Some(on_failure) = spec.on_failure.take() {
        row("on failure", notify(&on_failure));
    }
    if let Some(on_missed) = spec.on_missed.take() {
        row("on missed", notify(&on_missed));
    }
    if let Some(late) = spec.on_late.take() {
        row("on late", format!("over {} ms: {}", late.threshold_ms, notify(&late.notify)));
    }
    if let Some(n) = spec.pause_after_failures.take() {
        row("pause after", format!("{} in a row", plural(n, "failed fire", "failed fires")));
    }
    if !t["pauseReason"].is_null() {
        row("paused", text(&t["pauseReason"]));
    }
    if spec.delete_after_run.take() == Some(true) {
        row("after run", "deleted".into());
    }
    if let Some(labels) = spec.labels.take().filter(|l| !l.is_empty()) {
        row("labels", labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "));
    }
    let next = match (&t["nextRunTime"], t["status"].as_i64()) {
        (Value::Null, Some(1)) => "- (disabled: enable it to fire)".to_owned(),
        (next, _) => text(next),
    };
    row("next fire", next);
    if let Some(stats) = t["stats"].as_object() {
        let n = |key: &str| stats.get(key).and_then(Value::as_i64).unwrap_or(0);
        let mut line = format!(
            "{}: {} succeeded, {} failed, {} missed",
            plural(n("fires"), "fire", "fires"),
            n("succeeded"),
            n("failed"),
            n("missed")
        );
        if let (Some(p50), Some(p99)) = (stats.get("lateP50Ms"), stats.get("lateP99Ms")) {
            if !p50.is_null() {
                line.push_str(&format!(", late p50 {} ms, p99 {} ms", text(p50), text(p99)));
            }
        }
        row("last 24 h", line);
    }
    row("created", text(&t["createTime"]));
    row("modified", text(&t["modifyTime"]));
    let unshown = TimerSpec::default().fields();
    for (key, value) in spec.fields().into_iter().filter(|(key, value)| unshown.get(key) != Some(value)) {
        row(&key, text(&value));
    }
    let known = TimerSpec::field_names();
    let unknown =
        t.as_object().into_iter().flatten().filter(|(key, _)| !FACTS.contains(&key.as_str()) && !known.contains(key));
    for (key, value) in unknown {
        row(key, text(value));
    }
    lines(rows)
}

/// `key  value` lines, the values in one column.
fn lines(rows: Vec<(String, String)>) -> String {
    let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    rows.iter().map(|(k, v)| format!("{k:<width$}  {v}\n")).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;
    use xtimer_core::spec::{NotifyHttpParam, RetryParam, TimerSpec};
    use xtimer_webserver::routes::timers::view::{TimerFacts, TimerView};

    use super::{describe, plural, schedule, span};

    #[test]
    fn every_kind_of_schedule_reads_as_words() {
        assert_eq!(schedule(&json!({"cron": "0 9 * * *"})), "0 9 * * *");
        assert_eq!(schedule(&json!({"everyMs": 300_000})), "every 5m");
        assert_eq!(schedule(&json!({"runAt": "2030-01-01T00:00:00.000Z"})), "once at 2030-01-01T00:00:00.000Z");
        assert_eq!(span(5_400_000), "1h30m");
        assert_eq!(span(1500), "1500ms");
        assert_eq!(plural(1, "attempt", "attempts"), "1 attempt");
        assert_eq!(plural(3, "attempt", "attempts"), "3 attempts");
    }

    #[test]
    fn every_field_is_shown_and_an_unknown_one_too() {
        let spec = TimerSpec {
            app: "a".into(),
            name: "n".into(),
            status: Some(json!(2)),
            every_ms: Some(60_000),
            anchor_at: Some(json!(1_893_456_000_000_i64)),
            timezone: Some("UTC".into()),
            start_at: Some(json!(1_893_456_000_000_i64)),
            end_at: Some(json!(1_893_542_400_000_i64)),
            max_fires: Some(10),
            spread_ms: Some(30_000),
            exclude_calendars: Some(vec!["holidays".into()]),
            misfire: Some("skip".into()),
            misfire_threshold_ms: Some(5000),
            notify_http_param: Some(NotifyHttpParam {
                method: Some("POST".into()),
                url: "http://h/x".into(),
                header: Some(BTreeMap::new()),
                ..NotifyHttpParam::default()
            }),
            retry: Some(RetryParam { max_attempts: Some(1), backoff_ms: Some(0), no_retry_statuses: None }),
            labels: Some(BTreeMap::from([("team".into(), "billing".into())])),
            ..TimerSpec::default()
        };
        let facts = TimerFacts {
            id: 7,
            run_at_ms: None,
            pause_reason: None,
            next_run_timer: Some(1_893_456_060_000),
            next_run_time: Some("2030-01-01T00:01:00.000Z".into()),
            fires_left: Some(1),
            stats: None,
            create_time: "c".into(),
            modify_time: "m".into(),
        };
        // The view as `getTimer` shows it, and a field this build does not know.
        let mut timer = serde_json::to_value(TimerView { spec, facts }).unwrap();
        timer["brandNew"] = json!(5);
        let text = describe(&timer);
        for (key, value) in [
            ("every", "1m (60000 ms), counted from 2030-01-01T00:00:00.000Z"),
            ("starts", "2030-01-01T00:00:00.000Z"),
            ("ends", "2030-01-02T00:00:00.000Z (excluded)"),
            ("max fires", "10 fires, 1 fire left"),
            ("spread", "each fire within 30s"),
            ("excluded", "calendars holidays"),
            ("misfire", "skip, within 5s"),
            ("retry", "1 attempt, 0 ms backoff"),
            ("labels", "team=billing"),
            ("brandNew", "5"),
        ] {
            let found = text.lines().any(|l| l.strip_prefix(key).is_some_and(|v| v.trim_start().starts_with(value)));
            assert!(found, "{key}: {value:?} in\n{text}");
        }
        assert!(!text.contains("run at"), "{text}");
    }

    #[test]
    fn a_spec_field_not_described_is_shown_as_is_and_an_unreadable_spec_field_by_field() {
        let spec = TimerSpec { app: "a".into(), description: Some("nightly".into()), ..TimerSpec::default() };
        let text = describe(&serde_json::to_value(spec).unwrap());
        assert!(text.lines().any(|l| l.split_whitespace().eq(["description", "nightly"])), "{text}");
        let text = describe(&json!({"id": 7, "app": "a", "retry": "often"}));
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["app    a", "id     7", "retry  often"]);
    }
}
