//! How the command line shows a timer: its schedule in words, whatever its
//! kind (`cron ...`, `once at ...`, `every 5m`), for `timer list`, and
//! every field `getTimer` answers, one `key  value` line each, for `timer
//! get` and `timer update`. A field this file does not know yet is still
//! shown, as its JSON, so nothing the server says is left out.

use serde_json::Value;

use super::text;

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

/// The keys [`describe`] shows in its own words.
const DESCRIBED: &[&str] = &[
    "id",
    "app",
    "name",
    "status",
    "cron",
    "runAt",
    "runAtMs",
    "everyMs",
    "anchorAt",
    "timezone",
    "startAt",
    "endAt",
    "maxFires",
    "firesLeft",
    "spreadMs",
    "excludeCalendars",
    "misfire",
    "misfireThresholdMs",
    "overlap",
    "notifyHTTPParam",
    "notifyAsyncflowParam",
    "callbackTimeoutMs",
    "retry",
    "onFailure",
    "onMissed",
    "onLate",
    "pauseAfterFailures",
    "pauseReason",
    "deleteAfterRun",
    "labels",
    "nextRunTimer",
    "nextRunTime",
    "stats",
    "createTime",
    "modifyTime",
];

/// A notify (`notifyHTTPParam`, `onFailure`, ...) in one line: `POST
/// http://host/path`, its headers and body when it has them.
fn notify(n: &Value) -> String {
    let mut out = format!("{} {}", text(&n["method"]), text(&n["url"]));
    if let Some(headers) = n["header"].as_object().filter(|h| !h.is_empty()) {
        let list: Vec<String> = headers.iter().map(|(k, v)| format!("{k}: {}", text(v))).collect();
        out.push_str(&format!(", headers {}", list.join("; ")));
    }
    if let Some(body) = n["body"].as_str() {
        out.push_str(&format!(", body {body}"));
    }
    if n["template"] == true {
        out.push_str(", templated");
    }
    out
}

/// A timer as `key  value` lines: every field `getTimer` answers.
pub fn describe(t: &Value) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut row = |key: &str, value: String| rows.push((key.to_owned(), value));
    row("id", text(&t["id"]));
    row("app", text(&t["app"]));
    row("name", text(&t["name"]));
    row("status", timer_status(&t["status"]).into());
    if let Some(expr) = t["cron"].as_str() {
        row("cron", expr.to_owned());
    } else if let Some(every) = t["everyMs"].as_i64() {
        row("every", format!("{} ({every} ms), counted from {}", span(every), time(&t["anchorAt"])));
    } else {
        row("run at", text(&t["runAt"]));
    }
    row("timezone", text(&t["timezone"]));
    if !t["startAt"].is_null() {
        row("starts", time(&t["startAt"]));
    }
    if !t["endAt"].is_null() {
        row("ends", format!("{} (excluded)", time(&t["endAt"])));
    }
    if let Some(max) = t["maxFires"].as_i64() {
        let left =
            t["firesLeft"].as_i64().map(|n| format!(", {} left", plural(n, "fire", "fires"))).unwrap_or_default();
        row("max fires", format!("{}{left}", plural(max, "fire", "fires")));
    }
    if let Some(spread) = t["spreadMs"].as_i64() {
        row("spread", format!("each fire within {} ({spread} ms) of its time", span(spread)));
    }
    if let Some(calendars) = t["excludeCalendars"].as_array().filter(|c| !c.is_empty()) {
        row("excluded", format!("calendars {}", calendars.iter().map(text).collect::<Vec<_>>().join(", ")));
    }
    let window = t["misfireThresholdMs"].as_i64().map(|ms| format!(", within {} ({ms} ms)", span(ms)));
    row("misfire", format!("{}{}", text(&t["misfire"]), window.unwrap_or_default()));
    if !t["overlap"].is_null() {
        row("overlap", text(&t["overlap"]));
    }
    if t["notifyHTTPParam"].is_object() {
        let n = &t["notifyHTTPParam"];
        let mut callback = notify(n);
        if let Some(ms) = t["callbackTimeoutMs"].as_i64() {
            callback.push_str(&format!(", timeout {ms} ms"));
        }
        row("callback", callback);
        if !n["flowKey"].is_null() {
            row("flow", text(&n["flowKey"]));
        }
        if let Some(example) = n["example"].as_object() {
            row("next call", format!("{} {}", text(&example["method"]), text(&example["url"])));
        }
    } else {
        let task = &t["notifyAsyncflowParam"];
        let stage = task["taskStage"].as_str().filter(|s| !s.is_empty());
        let stage = stage.map(|s| format!(", stage {s}")).unwrap_or_default();
        row("task", format!("asyncflow task {}{stage}", text(&task["taskType"])));
        if let Some(context) = task["context"].as_str().filter(|c| !c.is_empty()) {
            row("context", context.to_owned());
        }
    }
    let retry = &t["retry"];
    let attempts =
        retry["maxAttempts"].as_i64().map_or_else(|| text(&retry["maxAttempts"]), |n| plural(n, "attempt", "attempts"));
    let mut retries = format!("{attempts}, {} ms backoff", text(&retry["backoffMs"]));
    if let Some(statuses) = retry["noRetryStatuses"].as_array() {
        let list: Vec<String> = statuses.iter().map(text).collect();
        retries.push_str(&format!(", no retry on {}", if list.is_empty() { "none".into() } else { list.join(", ") }));
    }
    row("retry", retries);
    if t["onFailure"].is_object() {
        row("on failure", notify(&t["onFailure"]));
    }
    if t["onMissed"].is_object() {
        row("on missed", notify(&t["onMissed"]));
    }
    if t["onLate"].is_object() {
        row("on late", format!("over {} ms: {}", text(&t["onLate"]["thresholdMs"]), notify(&t["onLate"]["notify"])));
    }
    if let Some(n) = t["pauseAfterFailures"].as_i64() {
        row("pause after", format!("{} in a row", plural(n, "failed fire", "failed fires")));
    }
    if !t["pauseReason"].is_null() {
        row("paused", text(&t["pauseReason"]));
    }
    if t["deleteAfterRun"] == true {
        row("after run", "deleted".into());
    }
    if let Some(labels) = t["labels"].as_object().filter(|l| !l.is_empty()) {
        row("labels", labels.iter().map(|(k, v)| format!("{k}={}", text(v))).collect::<Vec<_>>().join(", "));
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
    if let Some(map) = t.as_object() {
        for (key, value) in map.iter().filter(|(key, _)| !DESCRIBED.contains(&key.as_str())) {
            row(key, text(value));
        }
    }
    let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    rows.iter().map(|(k, v)| format!("{k:<width$}  {v}\n")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
        let timer = json!({
            "id": 7, "app": "a", "name": "n", "status": 2, "cron": null, "runAt": null, "everyMs": 60_000,
            "anchorAt": 1_893_456_000_000_i64, "timezone": "UTC", "startAt": 1_893_456_000_000_i64,
            "endAt": 1_893_542_400_000_i64, "maxFires": 10, "firesLeft": 1, "spreadMs": 30_000,
            "excludeCalendars": ["holidays"], "misfire": "skip", "misfireThresholdMs": 5000,
            "notifyHTTPParam": {"method": "POST", "url": "http://h/x", "header": {}, "body": null},
            "retry": {"maxAttempts": 1, "backoffMs": 0}, "labels": {"team": "billing"},
            "nextRunTime": "2030-01-01T00:01:00.000Z", "createTime": "c", "modifyTime": "m", "brandNew": 5
        });
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
}
