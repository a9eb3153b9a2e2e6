//! Timers as code (`applyTimers`, `xtimer apply`): an app's timers made
//! to match a list, matched by name, with a diff of what changed.
//!
//! Each applied timer carries the label `managed-by: <owner>` (replacing
//! a `managed-by` label the item gives); with `prune`, the app's live
//! timers with that label that the list does not name are deleted. A timer
//! without the label (made by `createTimer`, or applied by another owner)
//! is never pruned; applying a list that names it adopts it (it is updated
//! to carry the label).
//!
//! # All or nothing, and where that ends
//!
//! Everything that can be checked before a write is checked first, for
//! every item, and a refusal changes nothing: the items' names, apps and
//! labels, the calendars they exclude, their callback targets and task
//! types. Then the writes go in this order:
//!
//! 1. the new timers, in one transaction (all or none; the store checks
//!    the app's limits in it); if planning their fires fails they are
//!    deleted again, as `createTimers` does;
//! 2. the changed timers, each as `updateTimer` changes one (its own
//!    transaction; the store checks the fires-per-minute limit); if one
//!    fails, the timers changed before it get their old definition back
//!    and the new ones are deleted, then the error is returned;
//! 3. with `prune`, the deletions, last, because a deleted timer cannot be
//!    brought back: if one fails (the store failed), what was created,
//!    changed and deleted before it stays done and the error is returned;
//!    applying again finishes it.
//!
//! Limits of the undo: it is written as further changes (each noted in the
//! history as `apply`), not a rollback, so a reader in between may see the
//! applied state for a moment, and if the store fails during the undo
//! too, what could not be undone is logged and stays. Two applies of one
//! app at the same time are not serialized: each is all or nothing on its
//! own, but their changes may interleave. Since the new timers are stored
//! before the pruned ones are deleted, an app at its `timers_per_app` limit
//! needs room for the new ones first (prune, then add).

use std::collections::{BTreeMap, HashMap};

use xtimer_core::clock::rfc3339;
use xtimer_core::error::error_chain;
use xtimer_core::labels;
use xtimer_core::timer::{NewTimer, Notify, Schedule, Timer, TimerStatus};
use xtimer_store::TimerQuery;

use crate::checks;
use crate::checks::{check_callback, check_task_type, NOTIFY_URL};
use crate::error::{Result, ServiceError};
use crate::history::Changes;
use crate::key::Actor;
use crate::key::TimerKey;
use crate::timer_service::TimerService;

/// The label every applied timer carries: `managed-by: <owner>`.
pub const MANAGED_BY: &str = "managed-by";
/// The owner when none is given.
pub const DEFAULT_OWNER: &str = "apply";
/// Most timers one apply takes.
pub const MAX_APPLY_TIMERS: usize = 10_000;
/// How far in the past a new or changed one-shot's `runAt` may be (as
/// `createTimer` allows). An unchanged one-shot may keep a `runAt` long
/// past: its file still describes it after its fire.
pub const RUN_AT_PAST_TOLERANCE_MS: i64 = 1_000;
/// The history's action of every change an apply makes.
const ACTION: &str = "apply";
/// Timers read per page of the app's listing.
const PAGE: u32 = 500;

/// How an apply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Delete the app's timers labelled `managed-by: <owner>` that the
    /// list does not name.
    pub prune: bool,
    /// Whose timers these are: the value of their `managed-by` label.
    /// Defaults to [`DEFAULT_OWNER`].
    pub owner: String,
    /// Work out the outcome and change nothing.
    pub dry_run: bool,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self { prune: false, owner: DEFAULT_OWNER.into(), dry_run: false }
    }
}

/// One timer of an apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyTimer {
    /// Its definition, as `createTimer` validated it.
    pub timer: NewTimer,
    /// An interval timer whose `anchorAt` was not given (nor `startAt`), so
    /// that validation anchored it at now: a stored timer of its name keeps
    /// its own anchor, or every apply would move it (and report it updated).
    pub anchor_defaulted: bool,
}

impl From<NewTimer> for ApplyTimer {
    fn from(timer: NewTimer) -> Self {
        Self { timer, anchor_defaulted: false }
    }
}

/// What an apply did (or, dry, would do): timer names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// Timers made, in list order.
    pub created: Vec<String>,
    /// Timers whose definition changed, in list order.
    pub updated: Vec<String>,
    /// Timers already as the list says, in list order.
    pub unchanged: Vec<String>,
    /// Timers pruned, by name.
    pub deleted: Vec<String>,
}

/// A changed timer: its index in the list, as stored, as applied.
struct Change {
    index: usize,
    stored: Timer,
    new: NewTimer,
}

impl TimerService {
    /// Makes `app`'s timers match `timers` (see the module doc): those
    /// not there are created, those that differ updated, and with
    /// `options.prune` the app's timers of the owner that the list does not
    /// name deleted; each change noted in the history as `apply` by `by`.
    /// With `options.dry_run`, the outcome it would have, nothing changed
    /// (the limits the store checks at the write are not checked then).
    /// An item is named by its index in errors (`timers[3].cron`).
    pub async fn apply(
        &self,
        app: &str,
        timers: Vec<ApplyTimer>,
        options: ApplyOptions,
        by: &Actor,
    ) -> Result<ApplyOutcome> {
        checks::check_app(app)?;
        check_owner(&options.owner)?;
        if timers.len() > MAX_APPLY_TIMERS {
            return Err(ServiceError::invalid(
                "timers",
                format!("at most {MAX_APPLY_TIMERS} timers in one apply, got {}", timers.len()),
            ));
        }
        checks::no_dedupe_keys(timers.iter().map(|t| &t.timer))?;
        let timers = label_all(app, timers, &options.owner)?;
        let live = self.live_timers(app).await?;
        let mut by_name: HashMap<&str, &Timer> = live.iter().map(|t| (t.name.as_str(), t)).collect();

        let now = self.0.clock.now_ms();
        let mut outcome = ApplyOutcome::default();
        let mut creates: Vec<(usize, NewTimer)> = Vec::new();
        let mut changes: Vec<Change> = Vec::new();
        for (index, item) in timers.into_iter().enumerate() {
            let mut new = item.timer;
            match by_name.remove(new.name.as_str()) {
                Some(stored) => {
                    if item.anchor_defaulted {
                        keep_anchor(&mut new, stored);
                    }
                    self.settle_timing(&mut new, stored.create_time, Some(index)).await?;
                    if same(stored, &new) {
                        outcome.unchanged.push(new.name);
                        continue;
                    }
                    check_run_at(&new, index, now)?;
                    outcome.updated.push(new.name.clone());
                    changes.push(Change { index, stored: stored.clone(), new });
                }
                None => {
                    self.settle_timing(&mut new, now, Some(index)).await?;
                    check_run_at(&new, index, now)?;
                    outcome.created.push(new.name.clone());
                    creates.push((index, new));
                }
            }
        }
        let mut pruned: Vec<&Timer> = Vec::new();
        if options.prune {
            // What is left in `by_name` is what the list does not name.
            pruned = by_name
                .into_values()
                .filter(|t| t.labels.get(MANAGED_BY).is_some_and(|owner| *owner == options.owner))
                .collect();
            pruned.sort_by(|a, b| a.name.cmp(&b.name));
        }
        outcome.deleted = pruned.iter().map(|t| t.name.clone()).collect();

        let checked = creates
            .iter()
            .map(|(i, new)| (*i, new, None))
            .chain(changes.iter().map(|c| (c.index, &c.new, Some(&c.stored))));
        self.check_applied_targets(app, checked).await?;
        if options.dry_run {
            return Ok(outcome);
        }

        let created = self.create_applied(&creates, by).await?;
        let mut undo = Undo { created, updated: Vec::new() };
        for change in &changes {
            let key = TimerKey { id: change.stored.id, app: app.to_owned(), proven: true, by: by.clone() };
            let new = change.new.clone();
            let done = self.update_planning(&key, move |_, _| Ok::<_, ServiceError>(new), false, ACTION).await;
            if let Err(err) = done {
                self.undo(app, undo, by).await;
                return Err(at_item(change.index, err));
            }
            undo.updated.push(&change.stored);
        }
        let mut deleted = Vec::with_capacity(pruned.len());
        for timer in pruned {
            let key = TimerKey { id: timer.id, app: app.to_owned(), proven: true, by: by.clone() };
            match self.set_status(&key, TimerStatus::Deleted, ACTION).await {
                Ok(()) => deleted.push(timer.name.clone()),
                // Deleted meanwhile: not this apply's deletion.
                Err(ServiceError::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        outcome.deleted = deleted;
        Ok(outcome)
    }

    /// Every timer of `app` that is not deleted, by id.
    async fn live_timers(&self, app: &str) -> Result<Vec<Timer>> {
        let query = TimerQuery::default();
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let page = self.0.timers.find_timer_ids(app, &query, after, PAGE).await?;
            let Some(&(last, _)) = page.last() else { break };
            after = last;
            let ids: Vec<i64> = page.iter().map(|(id, _)| *id).collect();
            let mut timers = self.0.timers.get_timers(&ids).await?;
            timers.retain(|t| t.app == app && t.status != TimerStatus::Deleted);
            timers.sort_by_key(|t| t.id);
            out.extend(timers);
        }
        Ok(out)
    }

    /// The callback targets and task types of the new timers, and of the
    /// changed ones where they changed, each distinct one checked once,
    /// a refusal naming the first item using it
    /// (`timers[3].notifyHTTPParam.url`).
    async fn check_applied_targets<'a>(
        &self,
        app: &str,
        items: impl Iterator<Item = (usize, &'a NewTimer, Option<&'a Timer>)>,
    ) -> Result<()> {
        let mut urls: BTreeMap<(&'static str, &'a str), usize> = BTreeMap::new();
        let mut types: BTreeMap<&'a str, usize> = BTreeMap::new();
        for (i, new, stored) in items {
            match (&new.notify, stored.map(|s| &s.notify)) {
                (Notify::Http(n), Some(Notify::Http(old))) if n.url == old.url => {}
                (Notify::Http(n), _) => {
                    urls.entry((NOTIFY_URL, n.url.as_str())).or_insert(i);
                }
                (Notify::Asyncflow(task), _) => {
                    types.entry(task.task_type.as_str()).or_insert(i);
                }
            }
            let old: Vec<_> =
                stored.map(|s| s.alerts().map(|(f, n)| (f, n.url.as_str())).collect()).unwrap_or_default();
            for (field, n) in new.alerts() {
                if !old.contains(&(field, n.url.as_str())) {
                    urls.entry((field, n.url.as_str())).or_insert(i);
                }
            }
        }
        let targets = &self.0.targets;
        for ((field, url), i) in urls {
            check_callback(targets, field, url).await.map_err(|err| at_item(i, err))?;
        }
        for (task_type, i) in types {
            check_task_type(targets, app, task_type).await.map_err(|err| at_item(i, err))?;
        }
        Ok(())
    }

    /// Stores the new timers of an apply in one transaction, all or none,
    /// and plans the enabled ones' fires (deleting them all again if that
    /// fails); their ids and names.
    async fn create_applied(&self, creates: &[(usize, NewTimer)], by: &Actor) -> Result<Vec<(i64, String)>> {
        if creates.is_empty() {
            return Ok(Vec::new());
        }
        let timers: Vec<NewTimer> = creates.iter().map(|(_, t)| t.clone()).collect();
        let now = self.0.clock.now_ms();
        let ids = self.store_all_or_none(&timers, now, |index| creates.get(index).map(|(i, _)| *i), "apply").await?;
        let noted: Vec<(i64, &str)> = ids.iter().zip(&timers).map(|(id, t)| (*id, t.app.as_str())).collect();
        self.note_all(&noted, ACTION, by, Changes::new()).await;
        Ok(ids.into_iter().zip(timers).map(|(id, t)| (id, t.name)).collect())
    }

    /// Undoes what an apply did before it failed: the changed timers get
    /// their old definitions back (newest change first), the new ones are
    /// deleted. What cannot be undone is logged and stays.
    async fn undo(&self, app: &str, undo: Undo<'_>, by: &Actor) {
        let key = |id: i64| TimerKey { id, app: app.to_owned(), proven: true, by: by.clone() };
        for stored in undo.updated.iter().rev() {
            let old = stored.def.clone();
            let key = key(stored.id);
            let restored = self.update_planning(&key, move |_, _| Ok::<_, ServiceError>(old), false, ACTION);
            if let Err(err) = restored.await {
                tracing::error!(
                    timer_id = stored.id,
                    error = %error_chain(&err),
                    "Restoring a timer of a failed apply failed; it keeps the applied definition."
                );
            }
        }
        for (id, _) in undo.created {
            if let Err(err) = self.set_status(&key(id), TimerStatus::Deleted, ACTION).await {
                tracing::error!(timer_id = id, error = %error_chain(&err), "Deleting a timer of a failed apply failed.");
            }
        }
    }
}

/// What a failed apply has to undo.
struct Undo<'a> {
    /// The timers it created: ids and names.
    created: Vec<(i64, String)>,
    /// The timers it changed, as they were.
    updated: Vec<&'a Timer>,
}

/// `err` naming item `i` of the list (`timers[3].cron`) when it names a field.
fn at_item(i: usize, err: ServiceError) -> ServiceError {
    match err {
        ServiceError::Invalid { field, problem } => {
            ServiceError::Invalid { field: format!("timers[{i}].{field}"), problem }
        }
        other => other,
    }
}

/// Refused unless `owner` can be a label value that a selector reads back
/// (`managed-by=<owner>`): 1 to 128 characters, no space, control
/// character or `, ( ) = !`.
pub fn check_owner(owner: &str) -> Result<()> {
    let chars = owner.chars().count();
    if chars == 0 || chars > labels::MAX_VALUE_CHARS {
        return Err(ServiceError::invalid(
            "owner",
            format!("must be 1 to {} characters, got {chars}", labels::MAX_VALUE_CHARS),
        ));
    }
    if let Some(c) =
        owner.chars().find(|c| c.is_whitespace() || c.is_control() || matches!(c, ',' | '(' | ')' | '=' | '!'))
    {
        return Err(ServiceError::invalid(
            "owner",
            format!(
                "{c:?} cannot be in it: the owner is the value of the label `{MANAGED_BY}` and must read as one \
                 in a selector (`{MANAGED_BY}=<owner>`)"
            ),
        ));
    }
    Ok(())
}

/// The list checked (every item of `app`, no name twice) and each item
/// labelled `managed-by: <owner>` (replacing a `managed-by` it gave).
fn label_all(app: &str, mut timers: Vec<ApplyTimer>, owner: &str) -> Result<Vec<ApplyTimer>> {
    let mut first: HashMap<String, usize> = HashMap::with_capacity(timers.len());
    for (i, item) in timers.iter_mut().enumerate() {
        let timer = &mut item.timer;
        if timer.app != app {
            return Err(ServiceError::invalid(
                format!("timers[{i}].app"),
                format!("must be `{app}`, the app applied to, got `{}`", timer.app),
            ));
        }
        if let Some(j) = first.insert(timer.name.clone(), i) {
            return Err(ServiceError::invalid(
                "timers",
                format!("timers[{j}] and timers[{i}] are both named `{}`: a name is unique in an app", timer.name),
            ));
        }
        timer.labels.insert(MANAGED_BY.to_owned(), owner.to_owned());
        labels::check(&timer.labels).map_err(|problem| {
            ServiceError::invalid(
                format!("timers[{i}].labels"),
                format!("{problem} (with the label `{MANAGED_BY}: {owner}` that apply adds)"),
            )
        })?;
    }
    Ok(timers)
}

/// An interval timer given without an anchor keeps `stored`'s, when that
/// is an interval timer too.
fn keep_anchor(new: &mut NewTimer, stored: &Timer) {
    if let (Schedule::Every { anchor_ms, .. }, Schedule::Every { anchor_ms: kept, .. }) =
        (&mut new.schedule, &stored.schedule)
    {
        *anchor_ms = *kept;
    }
}

/// Whether `new` is `stored`'s definition: all a caller can give is
/// equal. What the server settles is left out: the last time a run limit
/// leaves (worked out from the definition), and a one-shot's completion
/// (`status: 4` is what became of `status: 2`).
fn same(stored: &Timer, new: &NewTimer) -> bool {
    let mut old = stored.def.clone();
    if old.status == TimerStatus::Completed && new.status == TimerStatus::Enabled {
        old.status = TimerStatus::Enabled;
    }
    old.timing.last_run = new.timing.last_run;
    old == *new
}

/// Refused if `new` (to be created or changed) is a one-shot whose time
/// has passed.
fn check_run_at(new: &NewTimer, index: usize, now: i64) -> Result<()> {
    match new.schedule {
        Schedule::Once { run_at_ms } if run_at_ms < now - RUN_AT_PAST_TOLERANCE_MS => Err(ServiceError::invalid(
            format!("timers[{index}].runAt"),
            format!(
                "{} is in the past: the server's time is {}; only a one-shot timer stored exactly so may keep \
                 a past runAt",
                rfc3339(run_at_ms),
                rfc3339(now)
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use xtimer_core::timer::HttpNotify;

    use super::*;

    fn timer(name: &str) -> NewTimer {
        NewTimer::enabled("a", name, Schedule::Once { run_at_ms: 1_000 }, Notify::Http(HttpNotify::post("http://h/")))
    }

    #[test]
    fn a_list_names_each_timer_once_in_its_app_and_is_labelled() {
        let list = |names: &[&str]| names.iter().map(|n| ApplyTimer::from(timer(n))).collect::<Vec<_>>();
        let err = label_all("a", list(&["x", "y", "x"]), "ci").unwrap_err();
        assert_eq!(err.to_string(), "timers: timers[0] and timers[2] are both named `x`: a name is unique in an app");
        let mut other = list(&["x"]);
        other[0].timer.app = "b".into();
        let err = label_all("a", other, "ci").unwrap_err();
        assert_eq!(err.to_string(), "timers[0].app: must be `a`, the app applied to, got `b`");
        let mut given = list(&["x"]);
        given[0].timer.labels.insert(MANAGED_BY.into(), "someone".into());
        let labelled = label_all("a", given, "ci").unwrap();
        assert_eq!(labelled[0].timer.labels[MANAGED_BY], "ci", "the owner's label replaces one given");
        let mut full = list(&["x"]);
        full[0].timer.labels = (0..16).map(|i| (format!("k{i}"), "v".into())).collect();
        let err = label_all("a", full, "ci").unwrap_err();
        assert!(err.to_string().starts_with("timers[0].labels: at most 16 labels, got 17"), "{err}");
    }

    #[test]
    fn an_owner_reads_back_in_a_selector() {
        assert!(check_owner("apply").is_ok() && check_owner("team/ci-2.prod_x").is_ok());
        for bad in ["", "a b", "a,b", "a=b", "(a)", "a!", "a\tb"] {
            assert!(check_owner(bad).is_err(), "{bad:?}");
        }
        assert!(check_owner(&"x".repeat(129)).is_err());
    }

    #[test]
    fn what_the_server_settles_is_not_a_change() {
        let new = timer("x");
        let mut stored = new.stored(7, 500);
        stored.status = TimerStatus::Completed;
        stored.timing.last_run = Some(900);
        stored.modify_time = 2_000;
        assert!(same(&stored, &new), "completed is what became of enabled; last_run is worked out");
        let disabled = NewTimer { status: TimerStatus::Disabled, ..new.clone() };
        assert!(!same(&stored, &disabled));
        let mut other = new.clone();
        other.labels.insert("team".into(), "b".into());
        assert!(!same(&stored, &other));
        assert!(check_run_at(&new, 0, 1_999).is_ok() && check_run_at(&new, 3, 2_001).is_err());
    }

    #[test]
    fn an_interval_given_no_anchor_keeps_the_stored_one() {
        let every = |anchor_ms| Schedule::Every { every_ms: 60_000, anchor_ms, timezone: "UTC".into() };
        let stored = NewTimer { schedule: every(5), ..timer("x") }.stored(1, 0);
        let mut new = NewTimer { schedule: every(99), ..timer("x") };
        keep_anchor(&mut new, &stored);
        assert_eq!(new.schedule, every(5));
        let mut once = timer("x");
        keep_anchor(&mut once, &stored);
        assert_eq!(once.schedule, Schedule::Once { run_at_ms: 1_000 });
    }
}
