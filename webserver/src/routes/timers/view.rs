//! Reply types of the timer routes: what a timer and a fire look like on
//! the wire. Times are RFC 3339 in UTC; run times also Unix milliseconds.

use serde::Serialize;
use serde_json::Value;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use xtimer_core::clock::rfc3339;
use xtimer_core::fire::Fire;
use xtimer_core::spec::TimerSpec;
use xtimer_core::timer::{Schedule, Timer};
use xtimer_service::TimerStats;

/// `{"id": N}`: the reply of create, enable, disable and delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TimerId {
    /// The timer's id.
    pub id: i64,
}

/// `createTimer`'s reply: `{"id": N}` for a timer made; with
/// `"existing": true` when a live timer held the `dedupeKey` and was kept
/// (`onDuplicate: keep`), with `"replaced": true` when it took the
/// create's definition (`onDuplicate: replace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TimerCreated {
    /// The id of the timer made, kept or replaced.
    pub id: i64,
    /// The timer already held the `dedupeKey` and nothing changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing: Option<bool>,
    /// The timer held the `dedupeKey` and took this definition and run time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<bool>,
}

impl TimerCreated {
    /// The reply to what a create did.
    pub fn of(created: &xtimer_service::Created) -> Self {
        use xtimer_service::Created;
        let id = created.id();
        match created {
            Created::New(_) => Self { id, existing: None, replaced: None },
            Created::Kept(_) => Self { id, existing: Some(true), replaced: None },
            Created::Replaced(_) => Self { id, existing: None, replaced: Some(true) },
        }
    }
}

/// `{"list": [...], "total": N}`: one page and the count of all rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct List<T> {
    /// This page.
    pub list: Vec<T>,
    /// Rows on every page.
    pub total: u64,
}

/// A timer as `getTimer` and `getAppTimers` show it: its spec (every
/// field a user sets, as [`TimerSpec::shown`] shows it; `status` also 3,
/// deleted, or 4, completed: a one-shot timer whose fire has ended) and
/// what storing and running it add ([`TimerFacts`]), in one object.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerView {
    /// The fields a user sets.
    pub spec: TimerSpec,
    /// What storing and running it add.
    pub facts: TimerFacts,
}

/// What a [`TimerView`] shows beside the timer's spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimerFacts {
    /// Id.
    pub id: i64,
    /// Time of a one-shot timer, Unix ms, else null.
    pub run_at_ms: Option<i64>,
    /// Why [`TimerSpec::pause_after_failures`] disabled the timer, until it is enabled again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_reason: Option<String>,
    /// Its next fire time, Unix ms: null unless enabled with a fire ahead.
    pub next_run_timer: Option<i64>,
    /// Its next fire time, RFC 3339 UTC.
    pub next_run_time: Option<String>,
    /// Scheduled times the run limit leaves from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fires_left: Option<u64>,
    /// `getTimer` only: its fires of the last 24 hours (API 1h).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<TimerStats>,
    /// Creation time, RFC 3339.
    pub create_time: String,
    /// Last change, RFC 3339.
    pub modify_time: String,
}

impl TimerView {
    /// The view with its next fire time (`TimerService::next_fire`).
    pub fn at(t: &Timer, next_run_ms: Option<i64>) -> Self {
        let run_at_ms = match t.schedule {
            Schedule::Once { run_at_ms } => Some(run_at_ms),
            _ => None,
        };
        let facts = TimerFacts {
            id: t.id,
            run_at_ms,
            pause_reason: t.pause_reason.clone(),
            next_run_timer: next_run_ms,
            next_run_time: next_run_ms.map(rfc3339),
            fires_left: None,
            stats: None,
            create_time: rfc3339(t.create_time),
            modify_time: rfc3339(t.modify_time),
        };
        Self { spec: TimerSpec::shown(t, next_run_ms.or(run_at_ms)), facts }
    }
}

impl Serialize for TimerView {
    /// One object: the spec's fields (`cron`, `runAt` and each notify's
    /// `body` null when unset, as the API has always shown them) and the
    /// facts.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = self.spec.fields();
        for shown_null in ["cron", "runAt"] {
            fields.entry(shown_null).or_insert(Value::Null);
        }
        for name in ["notifyHTTPParam", "onFailure", "onMissed"] {
            if let Some(Value::Object(notify)) = fields.get_mut(name) {
                notify.entry("body").or_insert(Value::Null);
            }
        }
        if let Some(Value::Object(late)) = fields.get_mut("onLate").and_then(|late| late.get_mut("notify")) {
            late.entry("body").or_insert(Value::Null);
        }
        match serde_json::to_value(&self.facts).map_err(serde::ser::Error::custom)? {
            Value::Object(facts) => fields.extend(facts),
            _ => return Err(serde::ser::Error::custom("the facts of a timer are an object")),
        }
        fields.serialize(serializer)
    }
}

impl utoipa::PartialSchema for TimerView {
    /// [`TimerFacts`]' properties and [`TimerSpec`]'s, in one object.
    fn schema() -> RefOr<Schema> {
        let (RefOr::T(Schema::Object(mut view)), RefOr::T(Schema::Object(spec))) =
            (<TimerFacts as utoipa::PartialSchema>::schema(), <TimerSpec as utoipa::PartialSchema>::schema())
        else {
            return <TimerFacts as utoipa::PartialSchema>::schema();
        };
        for (name, property) in spec.properties {
            view.properties.entry(name).or_insert(property);
        }
        view.required.extend(spec.required);
        view.description = Some(
            "A timer as `getTimer` and `getAppTimers` show it: its fields as `createTimer` takes them (`status` \
             also 3, deleted, or 4, completed), and what storing and running it add."
                .into(),
        );
        RefOr::T(Schema::Object(view))
    }
}

impl utoipa::ToSchema for TimerView {
    fn name() -> std::borrow::Cow<'static, str> {
        "TimerView".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        <TimerSpec as utoipa::ToSchema>::schemas(schemas);
        <TimerFacts as utoipa::ToSchema>::schemas(schemas);
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
