//! Creating timers: each checked against its app's usage (read and locked
//! per app), the rows inserted by the backend's driver
//! (`TxDriver::insert_timer_rows`: SQLite and MySQL multi-row `VALUES`,
//! PostgreSQL one `UNNEST`), a taken name refused, and their labels stored.
//!
//! A one-shot's `dedupeKey` is held by at most one live timer of its app.
//! The key is a column of the timer's row (`dedupe_key`, with the run time
//! its first create asked for in `dedupe_first_run`) under a unique index
//! over the live rows only (disabled or enabled; on MySQL a generated
//! column that is the key while the timer is live): the status write that
//! completes or deletes the holder frees the key in its own transaction,
//! on every path that ends a timer (a delete, a bulk delete, the finisher,
//! the migrator's step, `deleteAfterRun`, the undo of a failed create),
//! with no code of its own there, as names are freed. A separate table of
//! holders would need its row removed on each of those paths. The holder
//! is looked up under the app's usage lock, which every create of the app
//! takes first, so two creates of one key never both find it free; the
//! index stays the last word.

use std::collections::{BTreeSet, HashMap};

use const_format::formatcp;
use xtimer_core::load::Load;
use xtimer_core::timer::{NewTimer, TimerStatus};

use super::labels::write_labels;
use crate::db::{on_tx, Tx};
use crate::driver::{Dialect, TxDriver};
use crate::repo::{Quota, Refusal};
use crate::sql::code;
use crate::usage;
use crate::{Database, Result};

/// The live timer of app `$1` holding `dedupeKey` `$2`, and the run time
/// the key's first create asked for.
const KEY_HOLDER: &str = formatcp!(
    "SELECT timer_id, dedupe_first_run FROM t_timer WHERE app = $1 AND dedupe_key = $2 AND status IN ({}, {})",
    code::TIMER_DISABLED,
    code::TIMER_ENABLED
);

/// Who holds a `dedupeKey` a create of the call gives.
enum Holder {
    /// A live timer stored before: its id and its key's first run time.
    Stored(i64, i64),
    /// The timer of the call at this index, if it is stored.
    Item(usize),
}

/// Begins a transaction and inserts `timers` in it, each checked against
/// its app's usage (read and locked per app, in app order); the
/// transaction, to commit, and the outcome of each, in input order. A
/// refused timer is not inserted and not counted; the others are.
pub(super) async fn insert_checked(
    db: &Database,
    timers: &[NewTimer],
    now_ms: i64,
    quota: &Quota,
) -> Result<(Tx, Vec<std::result::Result<i64, Refusal>>)> {
    let apps: BTreeSet<&str> = timers.iter().map(|t| t.app.as_str()).collect();
    let (mut begun, mut usages) = usage::begin_with_usages(db, &apps, now_ms).await?;
    let tx = &mut begun;
    if apps.len() > 1 {
        // What each enable would read, read ahead for every app at once.
        let enabled = || timers.iter().filter(|t| t.status == TimerStatus::Enabled);
        let loads = || enabled().map(|t| (t.app.as_str(), Load::of(&t.schedule, now_ms)));
        let crons = loads().filter(|(_, l)| matches!(l, Load::Cron(peak) if *peak > 0)).map(|(app, _)| app).collect();
        let minutes =
            loads().filter_map(|(app, l)| if let Load::Minute(m) = l { Some((app, m)) } else { None }).collect();
        usage::read_ahead(tx, &mut usages, &crons, &minutes).await?;
    }
    let mut checked = Vec::with_capacity(timers.len());
    let mut outcomes: Vec<std::result::Result<i64, Refusal>> = Vec::with_capacity(timers.len());
    let mut holders: HashMap<(&str, &str), Holder> = HashMap::new();
    let mut held_by_item: Vec<(usize, usize)> = Vec::new();
    for (i, t) in timers.iter().enumerate() {
        if let Some(dedupe) = &t.dedupe {
            let key = (t.app.as_str(), dedupe.key.as_str());
            if let std::collections::hash_map::Entry::Vacant(free) = holders.entry(key) {
                let stored = key_holder(tx, key.0, key.1).await?;
                free.insert(stored.map_or(Holder::Item(i), |(id, first)| Holder::Stored(id, first)));
            }
            match holders[&key] {
                Holder::Stored(id, first_run_ms) => {
                    outcomes.push(Err(Refusal::KeyHeld { id, first_run_ms }));
                    continue;
                }
                Holder::Item(holder) if holder != i => {
                    held_by_item.push((i, holder));
                    outcomes.push(Err(Refusal::KeyContended));
                    continue;
                }
                Holder::Item(_) => {}
            }
        }
        let usage = usages.get_mut(t.app.as_str()).expect("every app's usage was read");
        let load = Load::of(&t.schedule, now_ms);
        let mut outcome = usage.add_timer(quota).map(|()| 0);
        if outcome.is_ok() {
            // A disabled timer is checked alone: one that could never be
            // enabled is refused now rather than at its enable.
            let checked = match (t.status, load) {
                (TimerStatus::Enabled, _) => usage.enable(tx, load, quota).await?,
                _ => alone_within(load, quota),
            };
            if let Err(refusal) = checked {
                usage.remove_timer();
                outcome = Err(refusal);
            }
        }
        if outcome.is_ok() {
            checked.push((t, load));
        }
        outcomes.push(outcome);
    }
    let inserted = insert_rows(tx, &checked, now_ms).await?;
    // The first of a name in the call gets its row; a name taken before, or
    // by an earlier item of the call, is refused and uncounted.
    let mut ids: HashMap<(&str, &str), i64> =
        inserted.iter().map(|(id, app, name)| ((app.as_str(), name.as_str()), *id)).collect();
    let mut checked = checked.into_iter();
    for (t, outcome) in timers.iter().zip(outcomes.iter_mut()) {
        if outcome.is_err() {
            continue;
        }
        let (_, load) = checked.next().expect("one checked entry per accepted timer");
        match ids.remove(&(t.app.as_str(), t.name.as_str())) {
            Some(id) => *outcome = Ok(id),
            None => {
                let usage = usages.get_mut(t.app.as_str()).expect("every app's usage was read");
                usage.remove_timer();
                if t.status == TimerStatus::Enabled {
                    usage.disable(load);
                }
                *outcome = Err(Refusal::NameTaken);
            }
        }
    }
    // A key asked for by an earlier timer of the call is held by it, if it was stored.
    for (i, holder) in held_by_item {
        if let (Ok(id), Some(first)) = (&outcomes[holder], &timers[holder].dedupe) {
            outcomes[i] = Err(Refusal::KeyHeld { id: *id, first_run_ms: first.first_run_ms });
        }
    }
    usage::write_all(tx, usages.into_values()).await?;
    for (t, outcome) in timers.iter().zip(&outcomes) {
        if let (Ok(id), false) = (outcome, t.labels.is_empty()) {
            write_labels(tx, *id, &t.app, &t.labels).await?;
        }
    }
    Ok((begun, outcomes))
}

/// The live timer of `app` holding `dedupe_key`: its id and its key's
/// first run time.
async fn key_holder(tx: &mut Tx, app: &str, dedupe_key: &str) -> Result<Option<(i64, i64)>> {
    let row: Option<(i64, Option<i64>)> = on_tx!(tx, c => sqlx::query_as(&c.sql(KEY_HOLDER))
        .bind(app)
        .bind(dedupe_key)
        .fetch_optional(&mut *c)
        .await?);
    Ok(row.map(|(id, first)| (id, first.unwrap_or_default())))
}

/// A timer that is not enabled, checked alone: a cron whose own peak passes
/// the limit could never be enabled, so it is refused now.
pub(super) fn alone_within(load: Load, quota: &Quota) -> std::result::Result<(), Refusal> {
    match load {
        Load::Cron(own) if own > quota.fires_per_minute_per_app => {
            Err(Refusal::TooManyFires { fires: own, own, max: quota.fires_per_minute_per_app })
        }
        _ => Ok(()),
    }
}

/// Inserts `timers` in order, skipping any whose name is taken; returns
/// `(timer_id, app, name)` of each row made.
async fn insert_rows(tx: &mut Tx, timers: &[(&NewTimer, Load)], now_ms: i64) -> Result<Vec<(i64, String, String)>> {
    if timers.is_empty() {
        return Ok(Vec::new());
    }
    on_tx!(tx, c => c.insert_timer_rows(timers, now_ms).await)
}
