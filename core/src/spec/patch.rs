//! An update: the fields to change, over the stored timer's spec.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;

use super::wire::{Invalid, TimerSpec, CREATE_ONLY_FIELDS};

/// The fields an update changes, by their wire names (every field of
/// [`TimerSpec`] but `app`, all optional). An absent field keeps its value
/// and `null` clears an optional one; an object field (`notifyHTTPParam`,
/// `retry`, `labels`, ...) is replaced whole. Giving `cron`, `runAt` or
/// `everyMs` changes the kind of schedule (the others and `anchorAt` are
/// dropped); giving `notifyHTTPParam` or `notifyAsyncflowParam` drops the
/// other (and `callbackTimeoutMs` with a callback). `dedupeKey` is kept
/// (or dropped with `null`), never changed; what a create does with a held
/// key (`onDuplicate`, `maxDelayMs`) is not an update's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct TimerPatch(pub Map<String, Value>);

/// Fields that say when a timer fires; giving one replaces them all.
const SCHEDULE_FIELDS: [&str; 4] = ["cron", "runAt", "everyMs", "anchorAt"];

impl TimerPatch {
    /// Whether the patch gives a new kind of schedule (`cron`, `runAt` or
    /// `everyMs`).
    pub fn changes_schedule(&self) -> bool {
        SCHEDULE_FIELDS[..3].iter().any(|f| self.0.contains_key(*f))
    }
}

impl TimerSpec {
    /// This spec with `patch`'s changes, read as a spec again (so a
    /// misspelled field is refused, with the name meant); its meaning is
    /// checked by [`Self::validate_with`], as a created timer's is.
    pub fn apply(self, patch: &TimerPatch) -> Result<TimerSpec, Invalid> {
        let mut fields = self.fields();
        if patch.changes_schedule() {
            for field in SCHEDULE_FIELDS {
                fields.remove(field);
            }
        }
        if patch.0.contains_key("notifyAsyncflowParam") {
            fields.remove("notifyHTTPParam");
            fields.remove("callbackTimeoutMs");
        }
        if patch.0.contains_key("notifyHTTPParam") {
            fields.remove("notifyAsyncflowParam");
        }
        for (name, value) in &patch.0 {
            match value {
                Value::Null => fields.remove(name),
                value => fields.insert(name.clone(), value.clone()),
            };
        }
        serde_json::from_value(Value::Object(fields))
            .map_err(|err| Invalid(vec![crate::suggest::serde_in_words(&err.to_string())]))
    }
}

impl utoipa::PartialSchema for TimerPatch {
    /// [`TimerSpec`]'s schema with no field required.
    fn schema() -> RefOr<Schema> {
        match <TimerSpec as utoipa::PartialSchema>::schema() {
            RefOr::T(Schema::Object(mut object)) => {
                object.required.clear();
                object.properties.remove("app");
                for field in CREATE_ONLY_FIELDS {
                    object.properties.remove(field);
                }
                object.description = Some("The fields to change; an absent one keeps its value.".into());
                RefOr::T(Schema::Object(object))
            }
            other => other,
        }
    }
}

impl utoipa::ToSchema for TimerPatch {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("TimerPatch")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        <TimerSpec as utoipa::ToSchema>::schemas(schemas);
    }
}
