//! [`TimerRepo`] on [`Database`]: `t_timer`, written once for every backend;
//! only the batch insert, the completion of one-shots (MySQL has no
//! `RETURNING`), the read by many ids, the due page and the batch move of
//! next fire times differ: they come from the backend's driver
//! (`crate::driver`; each backend's `timers` module). A timer's columns
//! are listed once, in `sql::definition`; the usage checks of a create are
//! in `create`, labels are written in `labels`, searches built in `search`.

mod create;
mod labels;
mod search;

use std::collections::BTreeMap;

use async_trait::async_trait;
use const_format::formatcp;
use sqlx::Row;
use xtimer_core::load::Load;
use xtimer_core::timer::{NewTimer, Timer, TimerStatus};

use crate::backend::on_driver;
use crate::db::on_db;
use crate::db::{on_tx, Tx};
use crate::driver::{Dialect, Driver, TxDriver};
use crate::history::{self, Change, HistoryEntry};
use crate::repo::{Quota, Refusal};
use crate::repo::{TimerQuery, TimerRepo};
use crate::sql::definition::TIMER_COLUMNS;
use crate::sql::peak_column;
use crate::sql::timers::DUE_WINDOW_MS;
use crate::sql::{code, page_bound, timer_from_row};
use crate::usage::{self, counts_as_timer, load_of, AppUsage};
use crate::{conflict, Database, Error, Result};

use crate::sql::definition::{bind_definition, UPDATE};
use create::{alone_within, insert_checked};
use labels::write_labels;
use search::Search;

const GET: &str = formatcp!("SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id = $1");
const GET_WITH_PEAK: &str = formatcp!("SELECT {TIMER_COLUMNS}, peak_fpm FROM t_timer WHERE timer_id = $1");
const COUNT_BY_STATUS: &str = formatcp!(
    "SELECT CAST(status AS BIGINT), COUNT(*) FROM t_timer WHERE status <> {} GROUP BY status",
    code::TIMER_DELETED
);
// The new status is bound three times ($1, $3, $4): MySQL assigns left to
// right, so a `status` read after `SET status` would be the new one.
const SET_STATUS: &str = formatcp!(
    "UPDATE t_timer SET status = $1, modify_time = $2, next_run = CASE WHEN $3 = {enabled} THEN 0 ELSE next_run END,
         pause_reason = CASE WHEN $4 = {enabled} THEN NULL ELSE pause_reason END, peak_fpm = $5
     WHERE timer_id = $6 AND status <> {deleted}",
    enabled = code::TIMER_ENABLED,
    deleted = code::TIMER_DELETED
);
// The timer ($3, $4) and the count of earlier fires ($7, $8) are bound twice.
const PAUSE_IF_FAILING: &str = formatcp!(
    "UPDATE t_timer SET status = {disabled}, pause_reason = $1, modify_time = $2
     WHERE timer_id = $3 AND status = {enabled}
       AND (SELECT COUNT(*) FROM (SELECT f.status FROM t_timer_task f
                                  WHERE f.timer_id = $4 AND f.task_id <> $5 AND f.run_timer >= $6
                                    AND f.status IN ({succeeded}, {failed})
                                  ORDER BY f.run_timer DESC LIMIT $7) AS recent
            WHERE recent.status = {failed}) >= $8",
    disabled = code::TIMER_DISABLED,
    enabled = code::TIMER_ENABLED,
    succeeded = code::SUCCEEDED,
    failed = code::FAILED
);
const ENABLED: &str = formatcp!(
    "SELECT {TIMER_COLUMNS} FROM t_timer WHERE status = {} AND timer_id > $1 ORDER BY timer_id LIMIT $2",
    code::TIMER_ENABLED
);

#[async_trait]
impl TimerRepo for Database {
    async fn create_each(
        &self,
        timers: &[NewTimer],
        now_ms: i64,
        quota: &Quota,
    ) -> Result<Vec<std::result::Result<i64, Refusal>>> {
        // One transaction: a conflict's loser (a deadlock, a Galera
        // certification failure) was rolled back whole and runs again.
        conflict::retry(|| async {
            let (tx, outcomes) = insert_checked(self, timers, now_ms, quota).await?;
            tx.commit().await?;
            Ok(outcomes)
        })
        .await
    }

    async fn create_timers_within(&self, timers: &[NewTimer], now_ms: i64, quota: &Quota) -> Result<Vec<i64>> {
        if timers.is_empty() {
            return Ok(Vec::new());
        }
        // One transaction: a conflict's loser runs again.
        conflict::retry(|| async {
            let (tx, outcomes) = insert_checked(self, timers, now_ms, quota).await?;
            let mut ids = Vec::with_capacity(outcomes.len());
            for (index, outcome) in outcomes.into_iter().enumerate() {
                match outcome {
                    Ok(id) => ids.push(id),
                    // Dropping the transaction rolls the whole batch back.
                    Err(Refusal::NameTaken) => {
                        return Err(Error::NameTaken {
                            app: timers[index].app.clone(),
                            name: timers[index].name.clone(),
                        })
                    }
                    Err(refusal) => return Err(Error::Refused { app: timers[index].app.clone(), index, refusal }),
                }
            }
            tx.commit().await?;
            Ok(ids)
        })
        .await
    }

    async fn set_status_within(
        &self,
        id: i64,
        status: TimerStatus,
        now_ms: i64,
        quota: &Quota,
        change: Change<'_>,
    ) -> Result<bool> {
        // One transaction: a conflict's loser runs again.
        conflict::retry(|| async {
            let mut tx = Tx::begin(self).await?;
            let Some((timer, peak, mut usage)) = locked_timer(&mut tx, id, now_ms).await? else { return Ok(false) };
            if timer.status == TimerStatus::Deleted {
                return Ok(false);
            }
            let load = load_of(&timer.schedule, peak, now_ms);
            if timer.status != status {
                if counts_as_timer(timer.status) && !counts_as_timer(status) {
                    usage.remove_timer();
                }
                if timer.status == TimerStatus::Enabled {
                    usage.disable(load);
                }
                if status == TimerStatus::Enabled {
                    if let Err(refusal) = usage.enable(&mut tx, load, quota).await? {
                        return Err(Error::Refused { app: timer.def.app, index: 0, refusal });
                    }
                }
            }
            on_tx!(&mut tx, c => sqlx::query(&c.sql(SET_STATUS))
                .bind(status.code())
                .bind(now_ms)
                .bind(status.code())
                .bind(status.code())
                .bind(peak_column(load))
                .bind(id)
                .execute(&mut *c)
                .await?
                .rows_affected());
            usage.write(&mut tx).await?;
            if timer.status != status {
                let changes = serde_json::json!({ "status": [timer.status.code(), status.code()] });
                history::record_in(&mut tx, &[change.entry(id, &timer.app, now_ms, &changes)]).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn update_timer(
        &self,
        id: i64,
        t: &NewTimer,
        now_ms: i64,
        quota: &Quota,
        change: Change<'_>,
        changes: &serde_json::Value,
    ) -> Result<bool> {
        // One transaction: a conflict's loser runs again.
        conflict::retry(|| async {
            let mut tx = Tx::begin(self).await?;
            let Some((old, old_peak, mut usage)) = locked_timer(&mut tx, id, now_ms).await? else { return Ok(false) };
            if old.status == TimerStatus::Deleted {
                return Ok(false);
            }
            let load = Load::of(&t.schedule, now_ms);
            if old.status == TimerStatus::Enabled {
                usage.disable(load_of(&old.schedule, old_peak, now_ms));
            }
            if t.status == TimerStatus::Enabled {
                if let Err(refusal) = usage.enable(&mut tx, load, quota).await? {
                    return Err(Error::Refused { app: old.def.app, index: 0, refusal });
                }
            } else if let Err(refusal) = alone_within(load, quota) {
                return Err(Error::Refused { app: old.def.app, index: 0, refusal });
            }
            let res = on_tx!(&mut tx, c => bind_definition!(sqlx::query(&c.sql(&UPDATE)), bind, t)
                .bind(now_ms)
                .bind(peak_column(load))
                .bind(t.status.code())
                .bind(id)
                .execute(&mut *c)
                .await
                .map(|done| done.rows_affected()));
            match res {
                Ok(1) => {}
                Ok(_) => return Ok(false),
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(Error::NameTaken { app: old.def.app, name: t.name.clone() })
                }
                Err(e) => return Err(e.into()),
            }
            usage.write(&mut tx).await?;
            if old.labels != t.labels {
                write_labels(&mut tx, id, &old.app, &t.labels).await?;
            }
            if changes.as_object().is_some_and(|fields| !fields.is_empty()) {
                history::record_in(&mut tx, &[change.entry(id, &old.app, now_ms, changes)]).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn release_dedupe_key(&self, timer_id: i64) -> Result<bool> {
        // The definition's change time is left: the fire under way keeps
        // the definition it was handed.
        const SQL: &str =
            "UPDATE t_timer SET dedupe_key = NULL, dedupe_first_run = NULL WHERE timer_id = $1 AND dedupe_key IS NOT NULL";
        let done = on_db!(self, write, pool => sqlx::query(&pool.sql(SQL))
            .bind(timer_id)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(done == 1)
    }

    async fn record_history(&self, entries: &[HistoryEntry]) -> Result<()> {
        Database::record_history(self, entries).await
    }

    async fn timer_history(&self, timer_id: i64, limit: u32) -> Result<Vec<HistoryEntry>> {
        Database::timer_history(self, timer_id, limit).await
    }

    async fn app_history(&self, app: &str, since_ms: i64, limit: u32) -> Result<Vec<HistoryEntry>> {
        Database::app_history(self, app, since_ms, limit).await
    }

    async fn forget_history(&self, before_ms: i64) -> Result<u64> {
        Database::forget_history(self, before_ms).await
    }

    async fn pause_if_failing_as(
        &self,
        timer_id: i64,
        task_id: i64,
        n: u32,
        since_ms: i64,
        reason: &str,
        now_ms: i64,
        change: Change<'_>,
    ) -> Result<bool> {
        // One transaction: a conflict's loser runs again.
        conflict::retry(|| async {
            let mut tx = Tx::begin(self).await?;
            let Some((timer, peak, mut usage)) = locked_timer(&mut tx, timer_id, now_ms).await? else {
                return Ok(false);
            };
            let earlier = i64::from(n.saturating_sub(1));
            let done = on_tx!(&mut tx, c => sqlx::query(&c.sql(PAUSE_IF_FAILING))
                .bind(reason)
                .bind(now_ms)
                .bind(timer_id)
                .bind(timer_id)
                .bind(task_id)
                .bind(since_ms)
                .bind(earlier)
                .bind(earlier)
                .execute(&mut *c)
                .await?
                .rows_affected());
            if done != 1 {
                return Ok(false);
            }
            usage.disable(load_of(&timer.schedule, peak, now_ms));
            usage.write(&mut tx).await?;
            let changes = serde_json::json!({
                "status": [code::TIMER_ENABLED, code::TIMER_DISABLED],
                "pauseReason": [null, reason],
            });
            history::record_in(&mut tx, &[change.entry(timer_id, &timer.app, now_ms, &changes)]).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn forget_minutes(&self, before_minute: i64) -> Result<u64> {
        usage::forget_minutes(self, before_minute).await
    }

    async fn timers_with_timing(&self, app: &str) -> Result<Vec<Timer>> {
        const SQL: &str = formatcp!(
            "SELECT {TIMER_COLUMNS} FROM t_timer WHERE app = $1 AND status <> {} AND timing IS NOT NULL ORDER BY timer_id",
            code::TIMER_DELETED
        );
        on_db!(self, read, pool => sqlx::query(&pool.sql(SQL)).bind(app).fetch_all(pool).await?
            .iter().map(timer_from_row).collect())
    }

    async fn enabled_due_before(
        &self,
        app: Option<&str>,
        before_ms: i64,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<(Timer, i64)>> {
        const SQL: &str = formatcp!(
            "SELECT {TIMER_COLUMNS}, next_run FROM t_timer
             WHERE status = {} AND ($1 IS NULL OR app = $2) AND next_run < $3 AND timer_id > $4
             ORDER BY timer_id LIMIT $5",
            code::TIMER_ENABLED
        );
        on_db!(self, read, pool => sqlx::query(&pool.sql(SQL))
            .bind(app)
            .bind(app)
            .bind(before_ms)
            .bind(after_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .iter().map(|row| Ok((timer_from_row(row)?, row.try_get::<Option<i64>, _>("next_run")?.unwrap_or(0))))
            .collect())
    }

    async fn get_timer(&self, id: i64) -> Result<Option<Timer>> {
        let row = on_db!(self, read, pool => sqlx::query(&pool.sql(GET)).bind(id).fetch_optional(pool).await?
            .as_ref().map(timer_from_row).transpose());
        row
    }

    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        on_driver!(self, d => d.get_timers(ids).await)
    }

    async fn find_timers(&self, app: &str, query: &TimerQuery, offset: u64, limit: u64) -> Result<(Vec<Timer>, u64)> {
        let search = Search::new(app, query);
        let list = format!(
            "SELECT {TIMER_COLUMNS} FROM t_timer WHERE {} ORDER BY timer_id LIMIT {} OFFSET {}",
            search.sql,
            page_bound(limit),
            page_bound(offset)
        );
        let count = format!("SELECT COUNT(*) FROM t_timer WHERE {}", search.sql);
        let (timers, total) = on_db!(self, read, pool => {
            let (list, count) = (pool.sql(&list), pool.sql(&count));
            let mut rows = sqlx::query(&list);
            let mut total = sqlx::query_scalar::<_, i64>(&count);
            for value in &search.binds {
                rows = rows.bind(value);
                total = total.bind(value);
            }
            let rows = rows.fetch_all(pool).await?;
            (rows.iter().map(timer_from_row).collect::<Result<Vec<_>>>()?, total.fetch_one(pool).await?)
        });
        Ok((timers, total as u64))
    }

    async fn find_timer_ids(
        &self,
        app: &str,
        query: &TimerQuery,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<(i64, TimerStatus)>> {
        let search = Search::new(app, query);
        let sql = format!(
            "SELECT timer_id, CAST(status AS BIGINT) FROM t_timer WHERE {} AND timer_id > {after_id}
             ORDER BY timer_id LIMIT {limit}",
            search.sql
        );
        let rows: Vec<(i64, i64)> = on_db!(self, read, pool => {
            let sql = pool.sql(&sql);
            let mut rows = sqlx::query_as(&sql);
            for value in &search.binds {
                rows = rows.bind(value);
            }
            rows.fetch_all(pool).await?
        });
        Ok(rows.into_iter().filter_map(|(id, status)| Some((id, TimerStatus::from_code(status)?))).collect())
    }

    async fn count_timers_by_status(&self) -> Result<Vec<(TimerStatus, u64)>> {
        let rows: Vec<(i64, i64)> =
            on_db!(self, read, pool => sqlx::query_as(&pool.sql(COUNT_BY_STATUS)).fetch_all(pool).await?);
        Ok(rows.into_iter().filter_map(|(status, n)| TimerStatus::from_code(status).map(|s| (s, n as u64))).collect())
    }

    async fn due_timers(&self, before_ms: i64, limit: u32) -> Result<Vec<Timer>> {
        let window = before_ms.div_euclid(DUE_WINDOW_MS) + 1;
        on_driver!(self, d => d.due_timers(window, before_ms, limit).await)
    }

    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> Result<()> {
        if next.is_empty() {
            return Ok(());
        }
        on_driver!(self, d => d.set_next_runs(next).await)
    }

    async fn set_planned_next_runs(&self, next: &[crate::repo::NextRun]) -> Result<()> {
        crate::plan::set_next_runs(self, next).await
    }

    async fn complete_fired_once(&self, now_ms: i64) -> Result<u64> {
        complete_finished(self, None, now_ms).await
    }

    async fn complete_ended(&self, timers: &[i64], now_ms: i64) -> Result<u64> {
        let mut completed = 0;
        for chunk in timers.chunks(1_000) {
            completed += complete_finished(self, Some(chunk), now_ms).await?;
        }
        Ok(completed)
    }

    async fn enabled_timers(&self, after_id: i64, limit: u32) -> Result<Vec<Timer>> {
        on_db!(self, read, pool => sqlx::query(&pool.sql(ENABLED))
            .bind(after_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .iter()
            .map(timer_from_row)
            .collect())
    }
}

/// Ends the enabled timers with nothing left ([`FINISHED`]), of `scope`
/// only when given; returns how many. A one-shot timer's load (its minute)
/// is past by now; one deleted (deleteAfterRun) no longer counts as a
/// timer of its app.
async fn complete_finished(db: &Database, scope: Option<&[i64]>, now_ms: i64) -> Result<u64> {
    on_driver!(db, d => d.refresh_planner_stats().await);
    let mut tx = Tx::begin(db).await?;
    // The apps' usage locked first (where reads lock), then the timers.
    let apps = on_tx!(&mut tx, c => c.deleting_once_apps(scope).await?);
    for app in apps {
        AppUsage::read(&mut tx, &app, now_ms).await?;
    }
    let ended = on_tx!(&mut tx, c => c.complete_fired_once(scope, now_ms).await?);
    let mut deleted: BTreeMap<&str, i64> = BTreeMap::new();
    for (_, app, status) in &ended {
        if *status == code::TIMER_DELETED {
            *deleted.entry(app.as_str()).or_default() += 1;
        }
    }
    for (app, n) in deleted {
        usage::remove_timers(&mut tx, app, n).await?;
    }
    let notes: Vec<HistoryEntry> =
        ended.iter().map(|(id, app, status)| ended_entry(*id, app, *status, now_ms)).collect();
    history::record_in(&mut tx, &notes).await?;
    tx.commit().await?;
    Ok(ended.len() as u64)
}

/// The history entry of a timer that ended on its own: `complete`, or
/// `delete` with `deleteAfterRun`.
fn ended_entry(id: i64, app: &str, status: i64, now_ms: i64) -> HistoryEntry {
    let (action, reason) =
        if status == code::TIMER_DELETED { ("delete", "deleteAfterRun") } else { ("complete", "no fire left to send") };
    let changes = serde_json::json!({ "status": [code::TIMER_ENABLED, status], "reason": [null, reason] });
    Change::system(action).entry(id, app, now_ms, &changes)
}

/// A timer, its stored peak and its app's usage, read in `tx`: the app
/// first, to lock its usage, then the row as it is under that lock.
async fn locked_timer(tx: &mut Tx, id: i64, now_ms: i64) -> Result<Option<(Timer, Option<i64>, AppUsage)>> {
    let Some((timer, _)) = timer_with_peak(tx, id).await? else { return Ok(None) };
    let usage = AppUsage::read(tx, &timer.app, now_ms).await?;
    Ok(timer_with_peak(tx, id).await?.map(|(timer, peak)| (timer, peak, usage)))
}

/// A timer and its stored peak, read in `tx`.
async fn timer_with_peak(tx: &mut Tx, id: i64) -> Result<Option<(Timer, Option<i64>)>> {
    let row = on_tx!(tx, c => sqlx::query(&c.sql(GET_WITH_PEAK)).bind(id).fetch_optional(&mut *c).await?
        .map(|row| Ok::<_, Error>((timer_from_row(&row)?, row.try_get::<Option<i64>, _>("peak_fpm")?)))
        .transpose()?);
    Ok(row)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bench;
