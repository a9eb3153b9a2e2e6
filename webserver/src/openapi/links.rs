//! The document's descriptions come from doc comments, whose rustdoc links
//! (``[`MIN_EVERY_MS`]``) mean nothing to a reader of the API: each is
//! replaced by what it names, a number for a constant (from the constant
//! itself, so it cannot go stale), the wire name for a spec field and the
//! plain name for a type.

use serde_json::Value;
use xtimer_core::timer::RetryPolicy;

/// What each linked constant reads as.
fn constants() -> Vec<(&'static str, String)> {
    use xtimer_core::spec as i;
    use xtimer_core::{labels, when};
    let retry = RetryPolicy::default();
    let statuses = RetryPolicy::NO_RETRY_STATUSES.map(|s| s.to_string()).join(", ");
    vec![
        ("MIN_EVERY_MS", format!("{} ms", when::MIN_EVERY_MS)),
        ("MAX_SPREAD_MS", format!("{} ms", when::MAX_SPREAD_MS)),
        ("MIN_MISFIRE_THRESHOLD_MS", format!("{}", when::MIN_MISFIRE_THRESHOLD_MS)),
        ("MAX_MISFIRE_THRESHOLD_MS", format!("{}", when::MAX_MISFIRE_THRESHOLD_MS)),
        ("MAX_FIRES_LIMIT", when::MAX_FIRES_LIMIT.to_string()),
        ("crate::labels::MAX_LABELS", labels::MAX_LABELS.to_string()),
        ("crate::labels::MAX_KEY_CHARS", labels::MAX_KEY_CHARS.to_string()),
        ("crate::labels::MAX_VALUE_CHARS", labels::MAX_VALUE_CHARS.to_string()),
        ("MAX_EXCLUDED_CALENDARS", i::MAX_EXCLUDED_CALENDARS.to_string()),
        ("MAX_PAUSE_AFTER_FAILURES", i::MAX_PAUSE_AFTER_FAILURES.to_string()),
        ("MIN_CALLBACK_TIMEOUT_MS", i::MIN_CALLBACK_TIMEOUT_MS.to_string()),
        ("MAX_CALLBACK_TIMEOUT_MS", i::MAX_CALLBACK_TIMEOUT_MS.to_string()),
        ("MAX_LATE_THRESHOLD_MS", i::MAX_LATE_THRESHOLD_MS.to_string()),
        ("MAX_DEDUPE_KEY_CHARS", i::MAX_DEDUPE_KEY_CHARS.to_string()),
        ("MAX_FORECAST_SECONDS", xtimer_service::when::MAX_FORECAST_SECONDS.to_string()),
        ("MAX_APPLY_TIMERS", format!("{} timers", xtimer_service::apply::MAX_APPLY_TIMERS)),
        ("RetryPolicy::MAX_BACKOFF_MS", format!("{} ms", RetryPolicy::MAX_BACKOFF_MS)),
        ("RetryPolicy::NO_RETRY_STATUSES", format!("[{statuses}]")),
        (
            "RetryPolicy::default",
            format!("{} attempts in all, the first backoff {} ms", retry.max_attempts, retry.backoff_ms),
        ),
        ("CreateTimer", "`Timer`".into()),
        ("TimerSpec::pause_after_failures", format!("`{}`", i::PAUSE_AFTER_FAILURES_FIELD)),
        ("BackfillTimer::max_fires", format!("`{}`", i::MAX_FIRES_FIELD)),
    ]
}

/// Every description in `doc` with its links replaced: a known constant
/// (the core's and the service's, or one of `more`, the handlers') by its
/// value, any other link by its name in code font.
pub fn resolve(doc: &mut Value, more: &[(&'static str, String)]) {
    let mut table = constants();
    table.extend_from_slice(more);
    walk(doc, &table);
}

fn walk(value: &mut Value, table: &[(&str, String)]) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(text) if key == "description" || key == "summary" => *text = replace(text, table),
                    _ => walk(v, table),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, table)),
        _ => {}
    }
}

/// `text` with each ``[`NAME`]`` replaced.
pub fn replace(text: &str, table: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("`]") {
            Some(end) if !after[..end].contains(['`', '\n']) => {
                let name = &after[..end];
                match table.iter().find(|(n, _)| *n == name) {
                    Some((_, value)) => out.push_str(value),
                    None => {
                        out.push('`');
                        out.push_str(name);
                        out.push('`');
                    }
                }
                rest = &after[end + 2..];
            }
            _ => {
                out.push_str("[`");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_read_as_numbers_and_names() {
        let table = constants();
        assert_eq!(replace("at least [`MIN_EVERY_MS`].", &table), "at least 1000 ms.");
        assert_eq!(replace("of [`TimerView`]", &table), "of `TimerView`");
        assert_eq!(replace("`[scheduled, scheduled + spreadMs)`", &table), "`[scheduled, scheduled + spreadMs)`");
    }
}
