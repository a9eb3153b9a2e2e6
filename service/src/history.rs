//! Every change to a timer, who made it, and what it changed
//! (`getTimerHistory`): noted beside each use case that changes a timer.

use serde_json::{json, Map, Value};
use xtimer_core::spec::TimerSpec;
use xtimer_core::timer::{NewTimer, Timer};
use xtimer_store::HistoryEntry;

use crate::error::Result;
use crate::key::Actor;
use crate::key::TimerKey;
use crate::timer_service::TimerService;

/// Most entries `history` returns.
pub const MAX_HISTORY: u32 = 1_000;

/// The changed fields of a change, `{"field": [old, new]}`.
pub type Changes = Map<String, Value>;

impl TimerService {
    /// Timer `key`'s changes, newest first: a deleted timer's too, as long
    /// as its fire records are kept.
    pub async fn history(&self, key: &TimerKey) -> Result<Vec<HistoryEntry>> {
        crate::checks::check_app(&key.app)?;
        let created = match self.0.timers.get_timer(key.id).await? {
            Some(timer) if timer.app == key.app => timer.create_time,
            Some(timer) if key.proven => {
                return Err(crate::ServiceError::Forbidden { id: timer.id, app: key.app.clone() })
            }
            _ => return Err(key.not_found()),
        };
        let mut entries = self.0.timers.timer_history(key.id, MAX_HISTORY).await?;
        // The app's pauses and resumes since the timer was made, in time order with its own.
        let app_wide = self.0.timers.app_history(&key.app, created, MAX_HISTORY).await?;
        if !app_wide.is_empty() {
            entries.extend(app_wide);
            entries.sort_by_key(|e| std::cmp::Reverse(e.at_ms));
            entries.truncate(MAX_HISTORY as usize);
        }
        Ok(entries)
    }

    /// Notes a change to timer `id` of `app`. A failure to note it is
    /// logged, not returned: the change itself is made.
    pub(crate) async fn note(&self, id: i64, app: &str, action: &str, by: &Actor, changes: Changes) {
        self.note_all(&[(id, app)], action, by, changes).await;
    }

    /// Notes the same change to several timers.
    pub(crate) async fn note_all(&self, timers: &[(i64, &str)], action: &str, by: &Actor, changes: Changes) {
        let changes = Value::Object(changes).to_string();
        let notes: Vec<(i64, &str, &Actor)> = timers.iter().map(|(id, app)| (*id, *app, by)).collect();
        self.note_each(&notes, action, &changes).await;
    }

    /// Notes the same change (`changes`, as JSON text) to several timers,
    /// each by its own actor, in one write.
    pub(crate) async fn note_each(&self, timers: &[(i64, &str, &Actor)], action: &str, changes: &str) {
        if timers.is_empty() {
            return;
        }
        let at_ms = self.0.clock.now_ms();
        let entries: Vec<HistoryEntry> = timers
            .iter()
            .map(|(id, app, by)| HistoryEntry {
                timer_id: *id,
                app: (*app).to_owned(),
                at_ms,
                action: action.to_owned(),
                by: by.name(),
                changes: changes.to_owned(),
            })
            .collect();
        if let Err(err) = self.0.timers.record_history(&entries).await {
            tracing::warn!(action, timers = entries.len(), error = %xtimer_core::error::error_chain(&err), "Noting a timer change failed.");
        }
    }
}

/// The fields `new` changes of `old`, as the API names them
/// ([`TimerSpec::of`]), each `[old, new]`.
pub(crate) fn diff(old: &Timer, new: &NewTimer) -> Changes {
    let before = TimerSpec::of(&old.def).fields();
    let after = TimerSpec::of(new).fields();
    let mut changes = Changes::new();
    for (name, was) in &before {
        let now = after.get(name).unwrap_or(&Value::Null);
        if was != now {
            changes.insert(name.clone(), json!([was, now]));
        }
    }
    for (name, now) in after.iter().filter(|(name, _)| !before.contains_key(*name)) {
        changes.insert(name.clone(), json!([Value::Null, now]));
    }
    changes
}
