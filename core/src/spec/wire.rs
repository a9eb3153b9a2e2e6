//! The declaration: every field a user sets on a timer, by its wire name,
//! with its limits; and [`Invalid`], a refused spec's problems.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schemas;
#[cfg(doc)]
use crate::timer::RetryPolicy;
pub use crate::when::{
    MAX_FIRES_LIMIT, MAX_MISFIRE_THRESHOLD_MS, MAX_SPREAD_MS, MIN_EVERY_MS, MIN_MISFIRE_THRESHOLD_MS,
};

/// Longest `app`, characters.
pub const MAX_APP_CHARS: usize = 128;
/// Longest `name`, characters.
pub const MAX_NAME_CHARS: usize = 256;
/// Longest `description`, characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;
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
/// Most calendars one timer excludes.
pub const MAX_EXCLUDED_CALENDARS: usize = 16;
/// Largest `pauseAfterFailures`.
pub const MAX_PAUSE_AFTER_FAILURES: i64 = 1000;
/// Shortest `callbackTimeoutMs`.
pub const MIN_CALLBACK_TIMEOUT_MS: i64 = 100;
/// Longest `callbackTimeoutMs`: half the default claim lease, so a slow
/// callback is never taken for a lost one.
pub const MAX_CALLBACK_TIMEOUT_MS: i64 = 30_000;
/// Largest `onLate.thresholdMs`: a day.
pub const MAX_LATE_THRESHOLD_MS: i64 = 86_400_000;

/// Longest `dedupeKey`, characters.
pub const MAX_DEDUPE_KEY_CHARS: usize = 128;
/// The wire name of [`TimerSpec::dedupe_key`], for a message that names it.
pub const DEDUPE_KEY_FIELD: &str = "dedupeKey";
/// The wire name of [`TimerSpec::on_duplicate`].
pub const ON_DUPLICATE_FIELD: &str = "onDuplicate";
/// The wire name of [`TimerSpec::max_delay_ms`].
pub const MAX_DELAY_MS_FIELD: &str = "maxDelayMs";
/// Fields only a create takes: what it does when its `dedupeKey` is held.
pub const CREATE_ONLY_FIELDS: [&str; 2] = [ON_DUPLICATE_FIELD, MAX_DELAY_MS_FIELD];

/// The wire name of [`TimerSpec::max_fires`], for a message that names
/// the run limit (a backfill's most fires share it).
pub const MAX_FIRES_FIELD: &str = "maxFires";
/// The wire name of [`TimerSpec::pause_after_failures`], for a message
/// that names it.
pub const PAUSE_AFTER_FAILURES_FIELD: &str = "pauseAfterFailures";

/// A timer as `createTimer` takes it and `getTimer` shows it (see
/// `shared/API.md`): every field a user sets, by its wire name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[schema(as = Timer)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TimerSpec {
    /// Owning application, 1..=128 characters.
    pub app: String,
    /// Name, unique per app among timers that are not deleted, 1..=256 characters.
    pub name: String,
    /// 1 (disabled, the default) or 2 (enabled). Read as any JSON value so
    /// that a wrong one (`"2"`) is answered with the valid values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>)]
    pub status: Option<Value>,
    /// What the timer is for: free text, at most 1000 characters
    /// ([`MAX_DESCRIPTION_CHARS`]); `getAppTimers`' `q` finds it. None by
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Cron expression; exactly one of `cron`, `runAt` and `everyMs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// One-shot time: RFC 3339 with offset, or Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schemas::run_at)]
    pub run_at: Option<Value>,
    /// An interval timer instead of `cron`/`runAt`: every this many ms, at
    /// least [`MIN_EVERY_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<i64>,
    /// Where the interval counts from (RFC 3339 or ms); default `startAt`,
    /// else now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schemas::anchor_at)]
    pub anchor_at: Option<Value>,
    /// IANA time zone of `cron`; defaults to UTC. Checked but unused for `runAt`,
    /// whose offset says it all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The callback; exactly one of this and `notifyAsyncflowParam`.
    #[serde(rename = "notifyHTTPParam", default, deserialize_with = "object", skip_serializing_if = "Option::is_none")]
    pub notify_http_param: Option<NotifyHttpParam>,
    /// The asyncflow task each fire creates, instead of a callback.
    #[serde(
        rename = "notifyAsyncflowParam",
        default,
        deserialize_with = "object",
        skip_serializing_if = "Option::is_none"
    )]
    pub notify_asyncflow_param: Option<NotifyAsyncflowParam>,
    /// Retry policy; defaults to [`RetryPolicy::default`].
    #[serde(default, deserialize_with = "object", skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryParam>,
    /// `skip`, `fire_once` (the default) or `fire_all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire: Option<String>,
    /// This timer's callback timeout, ms, [`MIN_CALLBACK_TIMEOUT_MS`] to
    /// [`MAX_CALLBACK_TIMEOUT_MS`]; the executor's `timeout_ms` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_timeout_ms: Option<i64>,
    /// One-shot timers only: once its fire has ended the timer is deleted
    /// instead of completed. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_after_run: Option<bool>,
    /// An HTTP notify called once when a fire ends failed, with a JSON
    /// body naming the timer, the fire, its attempts and last output.
    #[serde(default, deserialize_with = "object", skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<NotifyHttpParam>,
    /// An HTTP notify called when a fire is recorded missed or skipped,
    /// with the `onFailure` body.
    #[serde(default, deserialize_with = "object", skip_serializing_if = "Option::is_none")]
    pub on_missed: Option<NotifyHttpParam>,
    /// `{"thresholdMs", "notify"}`: an HTTP notify called once for a fire
    /// sent later than `thresholdMs` after its run time, with the
    /// `onFailure` body.
    #[serde(default, deserialize_with = "object", skip_serializing_if = "Option::is_none")]
    pub on_late: Option<LateParam>,
    /// Disable the timer after this many consecutive failed fires,
    /// 1..=[`MAX_PAUSE_AFTER_FAILURES`]; never when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<i64>,
    /// `allow` (the default), `skip` or `buffer_one`: what a fire does
    /// while the one before it is still running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// No scheduled fire before this time (RFC 3339 or ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schemas::start_at)]
    pub start_at: Option<Value>,
    /// No scheduled fire at or after this time (RFC 3339 or ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schemas::end_at)]
    pub end_at: Option<Value>,
    /// Only the first this many scheduled times fire, 1..=[`MAX_FIRES_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fires: Option<i64>,
    /// Each fire is sent at the least loaded second of `[scheduled,
    /// scheduled + spreadMs)`, 0..=[`MAX_SPREAD_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_ms: Option<i64>,
    /// Names of the app's calendars whose days and ranges do not fire, at
    /// most [`MAX_EXCLUDED_CALENDARS`]; none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_calendars: Option<Vec<String>>,
    /// This timer's catch-up window, ms, [`MIN_MISFIRE_THRESHOLD_MS`] to
    /// [`MAX_MISFIRE_THRESHOLD_MS`]: a fire later than this follows
    /// `misfire`; the reconciler's `misfire_threshold_ms` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub misfire_threshold_ms: Option<i64>,
    /// Labels (`{"team": "billing"}`), for search and bulk actions: at most
    /// [`crate::labels::MAX_LABELS`], keys up to
    /// [`crate::labels::MAX_KEY_CHARS`] characters, values up to
    /// [`crate::labels::MAX_VALUE_CHARS`]; none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// A one-shot's key, 1..=[`MAX_DEDUPE_KEY_CHARS`] characters, per app:
    /// while the timer holding it is live (not completed or deleted), a
    /// create giving it does as `onDuplicate` says. `runAt` only; none by
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_key: Option<String>,
    /// What a create does when its `dedupeKey` is held: `reject` (the
    /// default: 409 naming the holder's id), `keep` (the holder's id,
    /// nothing changed: a retried create is safe) or `replace` (the
    /// pending one-shot takes this definition and run time). Taken by
    /// `createTimer` only, never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(write_only)]
    pub on_duplicate: Option<String>,
    /// With `onDuplicate: "replace"`: the run time never moves past the
    /// key's first create's run time plus this, ms (it is clamped to it).
    /// Taken by `createTimer` only, never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(write_only)]
    pub max_delay_ms: Option<i64>,
}

/// `notifyHTTPParam` of a timer (and its alerts' notifies).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[schema(as = Notify)]
#[serde(deny_unknown_fields)]
pub struct NotifyHttpParam {
    /// `http` or `https` URL with a host.
    pub url: String,
    /// GET, POST, PUT, PATCH or DELETE, any case; defaults to POST.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Extra request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<BTreeMap<String, String>>,
    /// Request body, sent as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The URL, header values and body hold `{{placeholders}}` filled per fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<bool>,
    /// The flow its callbacks belong to in the app (API 1g); the URL's
    /// `host:port` when absent.
    #[serde(default, rename = "flowKey", skip_serializing_if = "Option::is_none")]
    pub flow_key: Option<String>,
    /// Shown only: a templated callback's next request, rendered.
    #[serde(default, deserialize_with = "shown_only", skip_serializing_if = "Option::is_none")]
    #[schema(read_only)]
    pub example: Option<ExampleRequest>,
}

/// `onLate` of a timer.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[schema(as = LateAlert)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LateParam {
    /// Lateness past which a fire is told, 1..=[`MAX_LATE_THRESHOLD_MS`] ms.
    pub threshold_ms: i64,
    /// Where it is told (its body is set by xtimer).
    pub notify: NotifyHttpParam,
}

/// `notifyAsyncflowParam` of a timer: each fire creates one task.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NotifyAsyncflowParam {
    /// A task type registered with `/v1/register_task`.
    pub task_type: String,
    /// The task's first stage; empty by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_stage: Option<String>,
    /// The task's context: a string is stored as is, any other JSON value
    /// as its JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
}

/// `retry` of a timer; a missing field takes its default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[schema(as = Retry)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryParam {
    /// Attempts in all, 1..=20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<i64>,
    /// First backoff, 0..=600000 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<i64>,
    /// Answers that fail the fire at once (300..=599, not 409); `[]`
    /// retries every answer. The defaults when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_retry_statuses: Option<Vec<i64>>,
}

/// A spec refused: every problem found, each `"{field}: {what is wrong}"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub Vec<String>);

impl Invalid {
    /// One problem of `field`.
    pub fn field(field: &str, problem: impl fmt::Display) -> Self {
        Self(vec![format!("{field}: {problem}")])
    }

    /// Each problem with `prefix` before its field (`timers[3].`).
    pub fn prefixed(self, prefix: &str) -> Vec<String> {
        self.0.into_iter().map(|p| format!("{prefix}{p}")).collect()
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("; "))
    }
}

impl std::error::Error for Invalid {}

/// A field the API shows but never takes: refused when given.
fn shown_only<'de, D: serde::Deserializer<'de>, T>(_: D) -> Result<Option<T>, D::Error> {
    Err(serde::de::Error::custom("`example` is shown by xtimer, not set: leave it out"))
}

/// An optional struct read only from a JSON object (or `null`): serde's
/// derive would also read it from an array, field by field.
fn object<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(de: D) -> Result<Option<T>, D::Error> {
    use serde::de::{self, MapAccess, Visitor};
    use std::marker::PhantomData;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_field_is_spelled_as_the_declaration_spells_it() {
        let spec = TimerSpec {
            max_fires: Some(1),
            pause_after_failures: Some(1),
            max_delay_ms: Some(1),
            ..TimerSpec::default()
        };
        let fields = serde_json::to_value(&spec).unwrap();
        for name in [MAX_FIRES_FIELD, PAUSE_AFTER_FAILURES_FIELD, MAX_DELAY_MS_FIELD] {
            assert_eq!(fields[name], 1, "{name} in {fields}");
        }
        let spec = TimerSpec { dedupe_key: Some("k".into()), on_duplicate: Some("k".into()), ..TimerSpec::default() };
        let fields = serde_json::to_value(&spec).unwrap();
        for name in [DEDUPE_KEY_FIELD, ON_DUPLICATE_FIELD] {
            assert_eq!(fields[name], "k", "{name} in {fields}");
        }
    }
}
