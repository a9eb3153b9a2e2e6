//! Operating many timers (API 1f): search by name, status and labels,
//! bulk actions over a search, the apps and their pauses.

use serde_json::json;
use xtimer_core::labels::Selector;
use xtimer_core::timer::{Timer, TimerStatus};
use xtimer_store::history::APP_WIDE;
use xtimer_store::{AppPause, AppSummary, TimerQuery};

use crate::error::{Result, ServiceError};
use crate::history::Changes;
use crate::key::Actor;
use crate::key::Page;
use crate::key::TimerKey;
use crate::timer_service::TimerService;

/// A search of one app's timers as a caller words it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// The name contains this, any case.
    pub q: Option<String>,
    /// In this status (1 disabled, 2 enabled, 4 completed).
    pub status: Option<i64>,
    /// A label selector (`team=a,tier in (gold,silver)`).
    pub selector: Option<String>,
    /// One of these ids (bulk actions).
    pub ids: Option<Vec<i64>>,
}

impl Search {
    /// Whether it narrows the app's timers at all.
    pub fn is_empty(&self) -> bool {
        self.q.as_deref().is_none_or(str::is_empty)
            && self.status.is_none()
            && self.selector.as_deref().is_none_or(|s| s.trim().is_empty())
            && self.ids.is_none()
    }

    /// The store's query, each part checked.
    pub(crate) fn query(&self) -> Result<TimerQuery> {
        let status = match self.status {
            None => None,
            Some(code) => match TimerStatus::from_code(code) {
                Some(status) if status != TimerStatus::Deleted => Some(status),
                _ => return Err(ServiceError::invalid("status", format!("must be 1, 2 or 4, got {code}"))),
            },
        };
        let selector = Selector::parse(self.selector.as_deref().unwrap_or_default())
            .map_err(|err| ServiceError::invalid("selector", err))?;
        if let Some(ids) = &self.ids {
            if ids.len() > MAX_BULK_IDS {
                return Err(ServiceError::invalid("ids", format!("at most {MAX_BULK_IDS} ids, got {}", ids.len())));
            }
        }
        Ok(TimerQuery { q: self.q.clone(), status, selector, ids: self.ids.clone() })
    }
}

/// What a bulk action does to each timer it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    /// `enableTimer` each.
    Enable,
    /// `unableTimer` each.
    Disable,
    /// `delTimer` each.
    Delete,
    /// `triggerTimer` each (enabled ones).
    Trigger,
}

impl BulkAction {
    /// Parses the wire name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "enable" => Some(Self::Enable),
            "disable" => Some(Self::Disable),
            "delete" => Some(Self::Delete),
            "trigger" => Some(Self::Trigger),
            _ => None,
        }
    }

    /// Whether a timer in `status` would change (a trigger changes every
    /// enabled timer; the others only a timer not already so).
    fn changes(self, status: TimerStatus) -> bool {
        match self {
            Self::Enable => status != TimerStatus::Enabled,
            Self::Disable => status == TimerStatus::Enabled,
            Self::Delete => true,
            Self::Trigger => status == TimerStatus::Enabled,
        }
    }
}

/// What a bulk action did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    /// Timers the search matched.
    pub matched: u64,
    /// Timers the action changed (0 on a dry run).
    pub changed: u64,
    /// The matched ids, the first [`MAX_LISTED_IDS`].
    pub ids: Vec<i64>,
}

/// Most ids a bulk outcome lists.
pub const MAX_LISTED_IDS: usize = 10_000;
/// Most ids a bulk action may name.
pub const MAX_BULK_IDS: usize = 10_000;
/// Timers read per page of a bulk action: each page is its own short
/// read (a search of the app, so fewer pages cost less: 5,000 ids are
/// 40 KB), and each timer changes in its own transaction, so a bulk over
/// 100,000 timers holds no long transaction and no lock the fires need.
const BULK_PAGE: u32 = 5_000;

/// An app as `getApps` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppView {
    /// Its timers counted.
    pub summary: AppSummary,
    /// Its pause, when paused now.
    pub pause: Option<AppPause>,
}

impl TimerService {
    /// A page of `app`'s timers that are not deleted and match `search`,
    /// by id, and how many match.
    pub async fn search(&self, app: &str, search: &Search, page: Page) -> Result<(Vec<Timer>, u64)> {
        crate::checks::check_app(app)?;
        let query = search.query()?;
        Ok(self.0.timers.find_timers(app, &query, page.offset, page.limit).await?)
    }

    /// Applies `action` to every timer of `app` that `search` matches, page
    /// by page, each as the single call would (a second run changes
    /// nothing more); with `dry_run` only counts. A search over the whole
    /// app must be asked for with a filter.
    pub async fn bulk(
        &self,
        app: &str,
        action: BulkAction,
        search: &Search,
        dry_run: bool,
        by: &Actor,
    ) -> Result<BulkOutcome> {
        crate::checks::check_app(app)?;
        if search.is_empty() {
            return Err(ServiceError::invalid(
                "selector",
                "give a selector, q, status or ids: a bulk action over a whole app must be asked for with a filter",
            ));
        }
        let query = search.query()?;
        let mut outcome = BulkOutcome::default();
        let mut after = 0;
        loop {
            let page = self.0.timers.find_timer_ids(app, &query, after, BULK_PAGE).await?;
            let Some(&(last, _)) = page.last() else { break };
            after = last;
            for (id, status) in page {
                outcome.matched += 1;
                if outcome.ids.len() < MAX_LISTED_IDS {
                    outcome.ids.push(id);
                }
                if dry_run || !action.changes(status) {
                    continue;
                }
                let key = TimerKey { id, app: app.to_owned(), proven: true, by: by.clone() };
                let done = match action {
                    BulkAction::Enable => self.enable_as(&key, "bulk").await.map(drop),
                    BulkAction::Disable => self.set_status(&key, TimerStatus::Disabled, "bulk").await,
                    BulkAction::Delete => self.set_status(&key, TimerStatus::Deleted, "bulk").await,
                    BulkAction::Trigger => self.trigger_as(&key, "bulk").await.map(drop),
                };
                match done {
                    Ok(()) => outcome.changed += 1,
                    // Deleted or changed meanwhile: nothing to do to it now.
                    Err(ServiceError::NotFound { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(outcome)
    }

    /// The apps with timers (only `only` when given), by name, with their
    /// counts and their pauses.
    pub async fn apps(&self, only: Option<&str>) -> Result<Vec<AppView>> {
        let now = self.0.clock.now_ms();
        let mut pauses = self.0.apps.paused_apps(now).await?;
        let summaries = self.0.apps.app_summaries(only).await?;
        let mut apps: Vec<AppView> = summaries
            .into_iter()
            .map(|summary| {
                let pause = pauses.iter().position(|p| p.app == summary.app).map(|i| pauses.swap_remove(i));
                AppView { summary, pause }
            })
            .collect();
        // A paused app with no timer left is listed too.
        for pause in pauses.into_iter().filter(|p| only.is_none_or(|app| app == p.app)) {
            apps.push(AppView {
                summary: AppSummary { app: pause.app.clone(), timers: 0, enabled: 0 },
                pause: Some(pause),
            });
        }
        apps.sort_by(|a, b| a.summary.app.cmp(&b.summary.app));
        Ok(apps)
    }

    /// Pauses `app` until `until_ms` (or `resume_app`): its fires due
    /// meanwhile are recorded skipped, `app paused: <reason>`, not sent.
    /// The pause is noted once, app-wide, in every timer's history of the app.
    pub async fn pause_app(
        &self,
        app: &str,
        until_ms: Option<i64>,
        reason: Option<String>,
        by: &Actor,
    ) -> Result<AppPause> {
        crate::checks::check_app(app)?;
        let now = self.0.clock.now_ms();
        if let Some(until) = until_ms.filter(|until| *until <= now) {
            return Err(ServiceError::invalid(
                "until",
                format!("must be after now, got {}", xtimer_core::clock::rfc3339(until)),
            ));
        }
        let reason = reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).unwrap_or_else(|| "paused".into());
        if reason.chars().count() > MAX_REASON_CHARS {
            return Err(ServiceError::invalid("reason", format!("must be at most {MAX_REASON_CHARS} characters")));
        }
        let pause = AppPause { app: app.to_owned(), until_ms, reason, paused_at: now };
        self.0.apps.pause_app(&pause).await?;
        let mut changes = Changes::new();
        changes.insert("paused".into(), json!([false, true]));
        changes.insert("reason".into(), json!([null, pause.reason]));
        if let Some(until) = until_ms {
            changes.insert("until".into(), json!([null, xtimer_core::clock::rfc3339(until)]));
        }
        self.note(APP_WIDE, app, "app-pause", by, changes).await;
        Ok(pause)
    }

    /// Resumes `app`; whether it was paused (noted app-wide when it was).
    pub async fn resume_app(&self, app: &str, by: &Actor) -> Result<bool> {
        crate::checks::check_app(app)?;
        let resumed = self.0.apps.resume_app(app).await?;
        if resumed {
            let mut changes = Changes::new();
            changes.insert("paused".into(), json!([true, false]));
            self.note(APP_WIDE, app, "app-resume", by, changes).await;
        }
        Ok(resumed)
    }
}

/// Most characters of an app pause's reason.
pub const MAX_REASON_CHARS: usize = 256;
