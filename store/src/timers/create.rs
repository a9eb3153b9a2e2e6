//! Creating timers: each checked against its app's usage (read and locked
//! per app), the rows inserted per dialect (`InsertRows`: SQLite and MySQL
//! multi-row `VALUES`, PostgreSQL one `UNNEST`), a taken name refused, and
//! their labels stored.

use std::collections::{BTreeSet, HashMap, HashSet};

use const_format::formatcp;
use sqlx::{MySql, QueryBuilder, Row, Sqlite};
use xtimer_core::load::Load;
use xtimer_core::timer::{NewTimer, TimerStatus};

use super::definition::{bind_definition, json, DEFINITION, INSERT};
use super::labels::write_labels;
use crate::db::{on_tx, Tx};
use crate::repo::{Quota, Refusal};
use crate::sql::{code, push_list, schedule_columns, text, timing_column, MAX_PARAMS};
use crate::usage::{self, peak_column};
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
    let inserted = on_tx!(tx, c => insert_rows(c, &checked, now_ms).await?);
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

/// Rows of the timers: the stored columns (and the load's peak) of each.
trait InsertRows {
    async fn insert_rows(&mut self, timers: &[(&NewTimer, Load)], now_ms: i64) -> Result<Vec<(i64, String, String)>>;
}

/// Inserts `timers` in order, skipping any whose name is taken; returns
/// `(timer_id, app, name)` of each row made.
async fn insert_rows<C: InsertRows>(
    c: &mut C,
    timers: &[(&NewTimer, Load)],
    now_ms: i64,
) -> Result<Vec<(i64, String, String)>> {
    if timers.is_empty() {
        return Ok(Vec::new());
    }
    c.insert_rows(timers, now_ms).await
}

const ON_NAME_TAKEN: &str = formatcp!(
    " ON CONFLICT (app, name) WHERE status <> {} DO NOTHING RETURNING timer_id, app, name",
    code::TIMER_DELETED
);

/// SQLite: multi-row `VALUES` statements.
impl InsertRows for sqlx::SqliteConnection {
    async fn insert_rows(&mut self, timers: &[(&NewTimer, Load)], now_ms: i64) -> Result<Vec<(i64, String, String)>> {
        let mut made = Vec::with_capacity(timers.len());
        for chunk in timers.chunks(MAX_PARAMS / 22) {
            let mut qb = QueryBuilder::<Sqlite>::new(INSERT);
            qb.push_values(chunk, |mut b, (t, load)| {
                b.push_bind(t.app.as_str());
                bind_definition!(b, push_bind, t)
                    .push_bind(now_ms)
                    .push_bind(now_ms)
                    .push_bind(t.first_next_run(now_ms))
                    .push_bind(peak_column(*load));
            });
            qb.push(ON_NAME_TAKEN);
            for row in qb.build().fetch_all(&mut *self).await? {
                made.push((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?));
            }
        }
        Ok(made)
    }
}

/// PostgreSQL: one `INSERT ... SELECT FROM UNNEST` of one array per column,
/// rows in input order.
impl InsertRows for sqlx::PgConnection {
    async fn insert_rows(&mut self, timers: &[(&NewTimer, Load)], now_ms: i64) -> Result<Vec<(i64, String, String)>> {
        let schedules: Vec<_> = timers.iter().map(|(t, _)| schedule_columns(&t.schedule)).collect();
        // One array per column: app, then [`DEFINITION`] in its order.
        let sql = formatcp!(
            "{INSERT} SELECT app, {DEFINITION}, $21, $21, next_run, peak
             FROM UNNEST($1::text[], $2::text[], $3::smallint[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                         $8::text[], $9::text[], $10::text[], $11::smallint[], $12::text[], $13::integer[],
                         $14::text[], $15::bigint[], $16::text[], $17::text[], $18::text[], $19::bigint[],
                         $20::bigint[])
                  WITH ORDINALITY AS v(app, {DEFINITION}, next_run, peak, ord)
             ORDER BY ord{ON_NAME_TAKEN}"
        );
        // The nullable text columns.
        let column = |f: fn(&NewTimer) -> Option<String>| timers.iter().map(|(t, _)| f(t)).collect::<Vec<_>>();
        let rows = sqlx::query_as::<_, (i64, String, String)>(sql)
            .bind(timers.iter().map(|(t, _)| t.app.as_str()).collect::<Vec<_>>())
            .bind(timers.iter().map(|(t, _)| t.name.as_str()).collect::<Vec<_>>())
            .bind(timers.iter().map(|(t, _)| t.status.code() as i16).collect::<Vec<_>>())
            .bind(schedules.iter().map(|s| s.0).collect::<Vec<_>>())
            .bind(schedules.iter().map(|s| s.1).collect::<Vec<_>>())
            .bind(schedules.iter().map(|s| s.2).collect::<Vec<_>>())
            .bind(schedules.iter().map(|s| s.3).collect::<Vec<_>>())
            .bind(timers.iter().map(|(t, _)| json(&t.notify)).collect::<Vec<_>>())
            .bind(timers.iter().map(|(t, _)| json(&t.retry)).collect::<Vec<_>>())
            .bind(timers.iter().map(|(t, _)| t.misfire.as_str()).collect::<Vec<_>>())
            .bind(timers.iter().map(|(t, _)| i16::from(t.delete_after_run)).collect::<Vec<_>>())
            .bind(column(|t| t.on_failure.as_ref().map(json)))
            .bind(timers.iter().map(|(t, _)| t.pause_after_failures.map(|n| n as i32)).collect::<Vec<_>>())
            .bind(timers.iter().map(|(t, _)| t.overlap.as_str()).collect::<Vec<_>>())
            .bind(schedules.iter().map(|s| s.4).collect::<Vec<_>>())
            .bind(column(|t| timing_column(&t.timing)))
            .bind(column(|t| t.on_missed.as_ref().map(json)))
            .bind(column(|t| t.on_late.as_ref().map(json)))
            .bind(timers.iter().map(|(t, _)| t.first_next_run(now_ms)).collect::<Vec<_>>())
            .bind(timers.iter().map(|(_, load)| peak_column(*load)).collect::<Vec<_>>())
            .bind(now_ms)
            .fetch_all(&mut *self)
            .await?;
        Ok(rows)
    }
}

/// MySQL: multi-row `INSERT IGNORE` statements (a taken name skips its row,
/// as `ON CONFLICT DO NOTHING` does). With no `RETURNING`, each statement's
/// rows are read back by app from the first id it drew on, and kept by
/// name: the caller holds the usage lock of every app in the batch, so no
/// other transaction adds a timer of these apps meanwhile, and a name taken
/// before has a smaller id.
impl InsertRows for sqlx::MySqlConnection {
    async fn insert_rows(&mut self, timers: &[(&NewTimer, Load)], now_ms: i64) -> Result<Vec<(i64, String, String)>> {
        let mut made = Vec::with_capacity(timers.len());
        for chunk in timers.chunks(500) {
            let mut qb = QueryBuilder::<MySql>::new(INSERT.replacen("INSERT", "INSERT IGNORE", 1));
            qb.push_values(chunk, |mut b, (t, load)| {
                b.push_bind(t.app.as_str());
                bind_definition!(b, push_bind, t)
                    .push_bind(now_ms)
                    .push_bind(now_ms)
                    .push_bind(t.first_next_run(now_ms))
                    .push_bind(peak_column(*load));
            });
            let done = qb.build().execute(&mut *self).await?;
            if done.rows_affected() == 0 {
                continue;
            }
            // By app, not by (app, name) pairs: an `OR` of 500 pairs cost the
            // server ~9 ms to plan and run. The rows of these apps from the
            // statement's first id on are its own (and this transaction's
            // earlier chunks', left out by name).
            let apps: BTreeSet<&str> = chunk.iter().map(|(t, _)| t.app.as_str()).collect();
            let mut qb = QueryBuilder::<MySql>::new("SELECT timer_id, app, name FROM t_timer WHERE timer_id >= ");
            qb.push_bind(done.last_insert_id() as i64).push(" AND app IN (");
            push_list(&mut qb, apps);
            qb.push(") ORDER BY timer_id");
            let names: HashSet<(&str, &str)> = chunk.iter().map(|(t, _)| (t.app.as_str(), t.name.as_str())).collect();
            for row in qb.build().fetch_all(&mut *self).await? {
                let (app, name) = (text(&row, "app")?, text(&row, "name")?);
                if names.contains(&(app.as_str(), name.as_str())) {
                    made.push((row.try_get("timer_id")?, app, name));
                }
            }
        }
        Ok(made)
    }
}
