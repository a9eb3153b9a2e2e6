//! A shown timer as a spec again, for timers as code (`xtimer export`):
//! what the view adds left out, and every default left out too.

use serde_json::Value;

use super::wire::{Invalid, NotifyHttpParam, RetryParam, TimerSpec};
use crate::clock::rfc3339;
use crate::timer::{host_port, RetryPolicy};

impl TimerSpec {
    /// The spec of a timer as `getTimer` or `getAppTimers` shows it: the
    /// view's fields that a spec has (its id, times and figures left
    /// out; a one-shot's time from `runAtMs` where `runAt` is absent), a
    /// completed one-shot's status as it was set (2).
    pub fn from_shown(view: &Value) -> Result<Self, Invalid> {
        let known = Self::field_names();
        let mut fields: serde_json::Map<String, Value> = view
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(name, value)| known.contains(name) && !value.is_null())
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        if let (false, Some(ms)) = (fields.contains_key("runAt"), view.get("runAtMs").filter(|ms| ms.is_i64())) {
            fields.insert("runAt".into(), ms.clone());
        }
        if let Some(Value::Object(notify)) = fields.get_mut("notifyHTTPParam") {
            notify.remove("example");
        }
        if fields.get("status").and_then(Value::as_i64).is_some_and(|code| code != 1) {
            fields.insert("status".into(), Value::from(2));
        }
        serde_json::from_value(Value::Object(fields))
            .map_err(|err| Invalid(vec![crate::suggest::serde_in_words(&err.to_string())]))
    }

    /// This spec with every field at its default left out, and times in
    /// RFC 3339: the shortest text that makes the same timer. A one-shot's
    /// dedupe key is left out too: it guards creates, and timers as code
    /// are matched by name (`applyTimers` takes no key).
    pub fn minimal(mut self) -> Self {
        self.dedupe_key = None;
        self.on_duplicate = None;
        self.max_delay_ms = None;
        let time = |v: Option<Value>| v.map(|v| v.as_i64().map_or(v.clone(), |ms| Value::from(rfc3339(ms))));
        let repeats = self.cron.is_some() || self.every_ms.is_some();
        self.timezone = self.timezone.filter(|tz| repeats && tz != "UTC");
        self.run_at = time(self.run_at);
        self.anchor_at = time(self.anchor_at);
        self.start_at = time(self.start_at);
        self.end_at = time(self.end_at);
        let default = RetryPolicy::default();
        let default_retry = RetryParam {
            max_attempts: Some(default.max_attempts.into()),
            backoff_ms: Some(default.backoff_ms as i64),
            no_retry_statuses: None,
        };
        self.retry = self.retry.filter(|r| *r != default_retry);
        self.misfire = self.misfire.filter(|m| m != "fire_once");
        self.overlap = self.overlap.filter(|o| o != "allow");
        self.delete_after_run = self.delete_after_run.filter(|d| *d);
        self.spread_ms = self.spread_ms.filter(|ms| *ms != 0);
        self.exclude_calendars = self.exclude_calendars.filter(|c| !c.is_empty());
        self.labels = self.labels.filter(|l| !l.is_empty());
        self.notify_http_param = self.notify_http_param.map(NotifyHttpParam::minimal);
        self.on_failure = self.on_failure.map(NotifyHttpParam::minimal_alert);
        self.on_missed = self.on_missed.map(NotifyHttpParam::minimal_alert);
        if let Some(late) = &mut self.on_late {
            late.notify = std::mem::take(&mut late.notify).minimal_alert();
        }
        if let Some(task) = &mut self.notify_asyncflow_param {
            task.task_stage = task.task_stage.take().filter(|s| !s.is_empty());
            task.context = task.context.take().filter(|c| c.as_str() != Some(""));
        }
        self
    }
}

impl TimerSpec {
    /// The wire names of a spec's fields, from its schema (read once).
    pub fn field_names() -> &'static [String] {
        static KNOWN: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        KNOWN.get_or_init(|| match <TimerSpec as utoipa::PartialSchema>::schema() {
            utoipa::openapi::RefOr::T(utoipa::openapi::schema::Schema::Object(o)) => {
                o.properties.keys().cloned().collect()
            }
            _ => Vec::new(),
        })
    }
}

impl NotifyHttpParam {
    /// Its defaults left out: no headers, no template, the flow of its
    /// URL's `host:port`; the method always said.
    fn minimal(mut self) -> Self {
        self.method = Some(self.method.unwrap_or_else(|| "POST".into()));
        self.header = self.header.filter(|h| !h.is_empty());
        self.template = self.template.filter(|t| *t);
        self.flow_key = self.flow_key.filter(|key| *key != host_port(&self.url));
        self.example = None;
        self
    }

    /// [`Self::minimal`] for an alert: its body is xtimer's.
    fn minimal_alert(self) -> Self {
        Self { body: None, ..self.minimal() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exported_one_shot_leaves_its_dedupe_key_out_so_apply_takes_it() {
        let spec = TimerSpec {
            run_at: Some(Value::from(1_893_456_000_000_i64)),
            dedupe_key: Some("order-7".into()),
            ..TimerSpec::default()
        };
        let exported = spec.minimal();
        assert_eq!(exported.dedupe_key, None);
        assert_eq!(exported.run_at, Some(Value::from(rfc3339(1_893_456_000_000))));
    }
}
