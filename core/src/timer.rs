//! A timer as the user defined it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::labels::Labels;
pub use crate::schedule::Schedule;
pub use crate::when::Timing;

/// Lifecycle of a timer. Numbers are the wire and storage values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerStatus {
    /// Created but not firing (xtimer calls it "unable").
    Disabled = 1,
    /// Firing at every fire time.
    Enabled = 2,
    /// Deleted; kept for its fire history, never fires again.
    Deleted = 3,
    /// A one-shot timer whose fire has ended: never read again by the
    /// migrator. Enabling it again is allowed (its fire does not repeat).
    Completed = 4,
}

impl TimerStatus {
    /// The storage value.
    pub fn code(self) -> i64 {
        self as i64
    }
    /// Parses a storage value.
    pub fn from_code(code: i64) -> Option<Self> {
        match code {
            1 => Some(Self::Disabled),
            2 => Some(Self::Enabled),
            3 => Some(Self::Deleted),
            4 => Some(Self::Completed),
            _ => None,
        }
    }
}

/// The HTTP callback of a timer, stored with its fields' names in
/// camelCase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpNotify {
    /// `http` or `https` URL.
    pub url: String,
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body, sent byte for byte as stored.
    #[serde(default)]
    pub body: Option<String>,
    /// This timer's callback timeout, ms (`callbackTimeoutMs`); the
    /// executor's `timeout_ms` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The URL, header values and body hold `{{placeholders}}` filled in
    /// per fire ([`crate::template`]); otherwise all is sent as stored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub template: bool,
    /// The flow its callbacks belong to within the app (its flow key, API
    /// 1g); the target's `host:port` when absent ([`Self::flow_key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_key: Option<String>,
}

/// Longest flow key ([`NotifyHttpParam::flow_key`](crate::spec::NotifyHttpParam::flow_key)), in chars.
pub const MAX_FLOW_KEY_CHARS: usize = 128;

/// A flow key: 1 to [`MAX_FLOW_KEY_CHARS`] chars, no control characters;
/// the problem otherwise.
pub fn check_flow_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("must not be empty".into());
    }
    if key.chars().count() > MAX_FLOW_KEY_CHARS {
        return Err(format!("must be at most {MAX_FLOW_KEY_CHARS} chars"));
    }
    if key.chars().any(char::is_control) {
        return Err("must not hold control characters".into());
    }
    Ok(())
}

/// A timer's `onLate`: told once for a fire whose first callback left
/// more than `threshold_ms` after its scheduled time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateAlert {
    /// Lateness past which the fire is told, ms.
    #[serde(rename = "thresholdMs")]
    pub threshold_ms: u64,
    /// Where it is told; its body is set per fire.
    pub notify: HttpNotify,
}

impl HttpNotify {
    /// A plain `POST` to `url`: no headers, body, timeout, template or flow key.
    pub fn post(url: impl Into<String>) -> Self {
        HttpNotify {
            url: url.into(),
            method: "POST".into(),
            headers: BTreeMap::new(),
            body: None,
            timeout_ms: None,
            template: false,
            flow_key: None,
        }
    }

    /// The flow its callbacks belong to: its own key, else the URL's
    /// `host:port` (lower case; the scheme's port when none is given).
    pub fn flow_key(&self) -> std::borrow::Cow<'_, str> {
        match &self.flow_key {
            Some(key) => std::borrow::Cow::Borrowed(key),
            None => std::borrow::Cow::Owned(host_port(&self.url)),
        }
    }
}

/// `host:port` of an `http(s)` URL, as its flow's default key.
pub fn host_port(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let authority = authority.to_ascii_lowercase();
    let has_port = match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    };
    if has_port {
        authority
    } else {
        let port = if scheme.eq_ignore_ascii_case("https") { 443 } else { 80 };
        format!("{authority}:{port}")
    }
}

/// What a fire does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Notify {
    /// Call an HTTP endpoint.
    Http(HttpNotify),
    /// Create an asyncflow task (one per fire).
    Asyncflow(AsyncflowNotify),
}

/// The asyncflow task a timer creates at each fire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsyncflowNotify {
    /// A registered task type.
    pub task_type: String,
    /// The task's first stage (empty: the worker's default).
    #[serde(default)]
    pub task_stage: String,
    /// The task's context, stored as given.
    #[serde(default)]
    pub context: String,
}

/// How failed callbacks are retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Retry)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Delay before the second attempt; it doubles for each later one, up to [`RetryPolicy::MAX_BACKOFF_MS`].
    pub backoff_ms: u64,
    /// Answers that fail the fire at once, without another attempt
    /// (`noRetryStatuses`); [`RetryPolicy::NO_RETRY_STATUSES`] when absent,
    /// and an empty list retries every status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_retry_statuses: Option<Vec<u16>>,
}

impl RetryPolicy {
    /// Upper bound of attempts a timer may ask for.
    pub const MAX_ATTEMPTS: u32 = 20;
    /// Upper bound of one backoff delay (10 minutes).
    pub const MAX_BACKOFF_MS: u64 = 600_000;
    /// Answers no retry can change, by default: the request itself is
    /// wrong or refused (a 404 is retried: often a receiver mid-deploy).
    pub const NO_RETRY_STATUSES: [u16; 7] = [400, 401, 403, 405, 410, 413, 422];
    /// Most entries of `noRetryStatuses`.
    pub const MAX_NO_RETRY_STATUSES: usize = 64;

    /// Whether an answer with `status` ends the fire failed at once.
    pub fn gives_up_on(&self, status: u16) -> bool {
        match &self.no_retry_statuses {
            Some(statuses) => statuses.contains(&status),
            None => Self::NO_RETRY_STATUSES.contains(&status),
        }
    }

    /// Delay after failed attempt number `attempt` (1-based), or `None` when
    /// the attempts are spent.
    pub fn backoff_after(&self, attempt: u32) -> Option<u64> {
        if attempt >= self.max_attempts {
            return None;
        }
        let factor = 1u64 << (attempt.saturating_sub(1)).min(30);
        Some(self.backoff_ms.saturating_mul(factor).min(Self::MAX_BACKOFF_MS))
    }

    /// Most a retry's delay is lengthened to spread retries that failed
    /// together (a receiver down for many timers): a fifth of it.
    pub const JITTER: f64 = 0.2;

    /// `backoff_ms` lengthened by `unit` (0 to 1, drawn at random by the
    /// caller) of [`Self::JITTER`]: never sooner than the backoff asked for.
    pub fn jittered(backoff_ms: u64, unit: f64) -> u64 {
        let extra = backoff_ms as f64 * Self::JITTER * unit.clamp(0.0, 1.0);
        backoff_ms.saturating_add(extra as u64)
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 3, backoff_ms: 1_000, no_retry_statuses: None }
    }
}

/// What to do with fires whose time passed while nobody could run them
/// (every node down, the shard index lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MisfirePolicy {
    /// Mark them missed.
    Skip,
    /// Fire the latest one if it is at most the misfire window late; mark the rest missed.
    #[default]
    FireOnce,
    /// Fire every one of them, however late.
    FireAll,
}

impl MisfirePolicy {
    /// The storage value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::FireOnce => "fire_once",
            Self::FireAll => "fire_all",
        }
    }
    /// Parses a storage value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "skip" => Some(Self::Skip),
            "fire_once" => Some(Self::FireOnce),
            "fire_all" => Some(Self::FireAll),
            _ => None,
        }
    }
}

/// What a fire does while the fire before it of the same timer is still
/// running (claimed, its callback or its retries not over).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlapPolicy {
    /// Fire anyway.
    #[default]
    Allow,
    /// Record it skipped.
    Skip,
    /// Wait for that one to end; a fire finding one already waiting is skipped.
    BufferOne,
}

impl OverlapPolicy {
    /// The storage and wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Skip => "skip",
            Self::BufferOne => "buffer_one",
        }
    }
    /// Parses a storage or wire value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Self::Allow),
            "skip" => Some(Self::Skip),
            "buffer_one" => Some(Self::BufferOne),
            _ => None,
        }
    }
}

/// A timer to create: validated input, no id yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTimer {
    pub app: String,
    pub name: String,
    pub status: TimerStatus,
    pub schedule: Schedule,
    pub notify: Notify,
    pub retry: RetryPolicy,
    pub misfire: MisfirePolicy,
    /// A one-shot timer whose fire has ended is deleted, not completed.
    pub delete_after_run: bool,
    /// Called once when a fire ends failed (`onFailure`); its body is set
    /// per failure.
    pub on_failure: Option<HttpNotify>,
    /// Called when a fire is recorded missed or skipped (`onMissed`); its
    /// body is set per fire.
    pub on_missed: Option<HttpNotify>,
    /// Called once for a fire sent later than its threshold (`onLate`).
    pub on_late: Option<LateAlert>,
    /// Disable the timer after this many consecutive failed fires.
    pub pause_after_failures: Option<u32>,
    /// What a fire does while the one before it is still running.
    pub overlap: OverlapPolicy,
    /// Bounds, run limit, spread, calendars and catch-up window.
    pub timing: Timing,
    /// Its labels, for search and bulk actions.
    pub labels: Labels,
    /// The key that makes it the app's one pending one-shot of that key
    /// (`dedupeKey`), and what a create of a held key does.
    pub dedupe: Option<Dedupe>,
}

/// A one-shot's `dedupeKey`: while its timer is live (disabled or enabled,
/// not completed or deleted) no other timer of the app holds the key, and
/// a create giving it does as `on_duplicate` says instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedupe {
    /// The key, 1 to 128 characters, per app.
    pub key: String,
    /// The run time the key's first create asked for, Unix ms: a replace
    /// never moves the run time past it plus `max_delay_ms`. Kept from the
    /// first create through every replace.
    pub first_run_ms: i64,
    /// What a create does when the key is held (`onDuplicate`). Asked by
    /// the create, not stored: a stored timer reads it back as the default.
    pub on_duplicate: OnDuplicate,
    /// With [`OnDuplicate::Replace`], the most a replace may put the run
    /// time past `first_run_ms` (`maxDelayMs`); not stored either.
    pub max_delay_ms: Option<u64>,
}

impl Dedupe {
    /// A stored key first asked for a run at `first_run_ms`.
    pub fn stored(key: impl Into<String>, first_run_ms: i64) -> Self {
        Self { key: key.into(), first_run_ms, on_duplicate: OnDuplicate::default(), max_delay_ms: None }
    }

    /// The run time a replace asking for `run_at_ms` gets: at most
    /// `first_run_ms + max_delay_ms` of the key's holder (`holder_first_ms`).
    pub fn clamped(&self, holder_first_ms: i64, run_at_ms: i64) -> i64 {
        match self.max_delay_ms {
            Some(most) => run_at_ms.min(holder_first_ms.saturating_add(i64::try_from(most).unwrap_or(i64::MAX))),
            None => run_at_ms,
        }
    }
}

/// What a create giving a held `dedupeKey` does (`onDuplicate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDuplicate {
    /// Refused: 409 naming the holder.
    #[default]
    Reject,
    /// Nothing changes; the holder's id is the answer (a retried create).
    Keep,
    /// The holder takes the new definition and run time (a debounce).
    Replace,
}

impl OnDuplicate {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reject => "reject",
            Self::Keep => "keep",
            Self::Replace => "replace",
        }
    }
    /// Parses a wire value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "reject" => Some(Self::Reject),
            "keep" => Some(Self::Keep),
            "replace" => Some(Self::Replace),
            _ => None,
        }
    }
}

/// The URL fields of a timer's alerts (`onFailure`, `onMissed`, `onLate`),
/// in that order, as [`NewTimer::alerts`] lists them.
pub const ALERT_URL_FIELDS: [&str; 3] = ["onFailure.url", "onMissed.url", "onLate.notify.url"];

impl NewTimer {
    /// The notifies of its alerts it sets (`onFailure`, `onMissed`,
    /// `onLate`), each with its URL's field name (`onLate.notify.url`).
    pub fn alerts(&self) -> impl Iterator<Item = (&'static str, &HttpNotify)> {
        let notifies = [self.on_failure.as_ref(), self.on_missed.as_ref(), self.on_late.as_ref().map(|l| &l.notify)];
        ALERT_URL_FIELDS.into_iter().zip(notifies).filter_map(|(field, n)| n.map(|n| (field, n)))
    }

    /// Its `next_run` when stored at `now_ms` (the first fire time not yet
    /// expanded into fires): an enabled timer's first fire at or after now,
    /// or a one-shot's own time even if past (it still fires once);
    /// `Some(0)` for a disabled one, since enabling starts it over; `None`
    /// when it never fires.
    pub fn first_next_run(&self, now_ms: i64) -> Option<i64> {
        match (&self.status, &self.schedule) {
            (TimerStatus::Enabled, Schedule::Once { run_at_ms }) => Some(*run_at_ms),
            (TimerStatus::Enabled, schedule) => self.timing.next_at_or_after(schedule, now_ms),
            _ => Some(0),
        }
    }

    /// The timer as stored under `id` at `now_ms`.
    pub fn stored(&self, id: i64, now_ms: i64) -> Timer {
        Timer { id, def: self.clone(), pause_reason: None, create_time: now_ms, modify_time: now_ms }
    }

    /// An enabled timer with the given schedule and notify and every other
    /// field at its default (retries, misfire, overlap, timing, no alerts).
    pub fn enabled(app: impl Into<String>, name: impl Into<String>, schedule: Schedule, notify: Notify) -> Self {
        NewTimer {
            app: app.into(),
            name: name.into(),
            status: TimerStatus::Enabled,
            schedule,
            notify,
            retry: RetryPolicy::default(),
            misfire: MisfirePolicy::default(),
            delete_after_run: false,
            on_failure: None,
            on_missed: None,
            on_late: None,
            pause_after_failures: None,
            overlap: OverlapPolicy::default(),
            timing: Timing::default(),
            labels: Labels::default(),
            dedupe: None,
        }
    }
}

/// A stored timer: its definition (read through it: `timer.name`) and
/// what storing adds. A field of a timer is declared once, in [`NewTimer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    pub id: i64,
    /// Its definition, as created or last updated.
    pub def: NewTimer,
    /// Why its pause after failures ([`TimerSpec::pause_after_failures`](crate::spec::TimerSpec::pause_after_failures))
    /// disabled the timer; cleared when enabled.
    pub pause_reason: Option<String>,
    /// Unix milliseconds.
    pub create_time: i64,
    /// Unix milliseconds.
    pub modify_time: i64,
}

impl std::ops::Deref for Timer {
    type Target = NewTimer;
    fn deref(&self) -> &NewTimer {
        &self.def
    }
}

impl std::ops::DerefMut for Timer {
    fn deref_mut(&mut self) -> &mut NewTimer {
        &mut self.def
    }
}

impl Timer {
    /// Its scheduled fire time before `before_ms`, not before it could
    /// first fire (its creation, its `startAt`); `None` for a one-shot and
    /// for its first fire.
    pub fn previous_fire(&self, before_ms: i64) -> Option<i64> {
        let first = self.timing.start_at.map_or(self.create_time, |start| start.max(self.create_time));
        self.schedule.previous_before(before_ms).filter(|t| *t >= first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_until_attempts_are_spent() {
        let p = RetryPolicy { max_attempts: 4, backoff_ms: 100, no_retry_statuses: None };
        assert_eq!(p.backoff_after(1), Some(100));
        assert_eq!(p.backoff_after(2), Some(200));
        assert_eq!(p.backoff_after(3), Some(400));
        assert_eq!(p.backoff_after(4), None);
        let big = RetryPolicy { max_attempts: 20, backoff_ms: 60_000, no_retry_statuses: None };
        assert_eq!(big.backoff_after(19), Some(RetryPolicy::MAX_BACKOFF_MS));
        // Jitter only lengthens, by at most a fifth.
        assert_eq!(RetryPolicy::jittered(1_000, 0.0), 1_000);
        assert_eq!(RetryPolicy::jittered(1_000, 0.5), 1_100);
        assert_eq!(RetryPolicy::jittered(1_000, 1.0), 1_200);
        assert_eq!(RetryPolicy::jittered(1_000, 7.0), 1_200);
        assert_eq!(RetryPolicy::jittered(0, 1.0), 0);
    }

    #[test]
    fn a_refusal_is_not_retried_unless_the_timer_says_so() {
        let default = RetryPolicy::default();
        for status in [400, 401, 403, 405, 410, 413, 422] {
            assert!(default.gives_up_on(status), "{status}");
        }
        for status in [404, 408, 429, 500, 502, 503, 504] {
            assert!(!default.gives_up_on(status), "{status}");
        }
        let none = RetryPolicy { no_retry_statuses: Some(Vec::new()), ..default.clone() };
        assert!(!none.gives_up_on(401));
        let own = RetryPolicy { no_retry_statuses: Some(vec![404]), ..default };
        assert!(own.gives_up_on(404) && !own.gives_up_on(401));
    }
}
