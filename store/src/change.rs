//! A change to a timer as its history keeps it ([`HistoryEntry`]), and
//! who makes it ([`Change`]): the types the repositories' interface names;
//! the rows are written and read in [`crate::history`].

/// One change to a timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The timer.
    pub timer_id: i64,
    /// Its app.
    pub app: String,
    /// When, Unix ms.
    pub at_ms: i64,
    /// `create`, `update`, `enable`, `disable`, `delete`, `trigger`,
    /// `backfill`, `bulk`, `pause`, `complete`, `app-pause`, ...
    pub action: String,
    /// Who: `app:<name>`, `admin`, `anonymous`, `receiver`, `system`.
    pub by: String,
    /// The changed fields' old and new values, a JSON object of pairs.
    pub changes: String,
}

/// Who the history names for a change xtimer made on its own.
pub const BY_SYSTEM: &str = "system";

/// The timer id of an app-wide entry (`pauseApp`, `resumeApp`).
pub const APP_WIDE: i64 = 0;

/// Who makes a change to a timer, and how the history names it: the
/// store writes the entry in the change's own transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change<'a> {
    /// `enable`, `disable`, `delete`, `update`, `pause`, `bulk`, ...
    pub action: &'a str,
    /// `app:<name>`, `admin`, `anonymous`, `receiver` or [`BY_SYSTEM`].
    pub by: &'a str,
}

impl<'a> Change<'a> {
    /// A change xtimer makes on its own (`by: "system"`).
    pub fn system(action: &'a str) -> Self {
        Self { action, by: BY_SYSTEM }
    }

    /// The history entry of this change to timer `timer_id` of `app`.
    pub(crate) fn entry(self, timer_id: i64, app: &str, at_ms: i64, changes: &serde_json::Value) -> HistoryEntry {
        HistoryEntry {
            timer_id,
            app: app.to_owned(),
            at_ms,
            action: self.action.to_owned(),
            by: self.by.to_owned(),
            changes: changes.to_string(),
        }
    }
}

/// The action a status change is named by when no caller names it.
pub fn status_action(status: xtimer_core::timer::TimerStatus) -> &'static str {
    use xtimer_core::timer::TimerStatus;
    match status {
        TimerStatus::Enabled => "enable",
        TimerStatus::Disabled => "disable",
        TimerStatus::Deleted => "delete",
        TimerStatus::Completed => "complete",
    }
}
