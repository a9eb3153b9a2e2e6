//! Creating timers: each checked against its app's usage (read and locked
//! per app), the rows inserted by the backend's driver
//! (`TxDriver::insert_timer_rows`: SQLite and MySQL multi-row `VALUES`,
//! PostgreSQL one `UNNEST`), a taken name refused, and their labels stored.

use std::collections::{BTreeSet, HashMap};

use xtimer_core::load::Load;
use xtimer_core::timer::{NewTimer, TimerStatus};

use super::labels::write_labels;
use crate::db::{on_tx, Tx};
use crate::driver::TxDriver;
use crate::repo::{Quota, Refusal};
use crate::usage;
use crate::{Database, Result};

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
    for t in timers {
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
    usage::write_all(tx, usages.into_values()).await?;
    for (t, outcome) in timers.iter().zip(&outcomes) {
        if let (Ok(id), false) = (outcome, t.labels.is_empty()) {
            write_labels(tx, *id, &t.app, &t.labels).await?;
        }
    }
    Ok((begun, outcomes))
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
