//! The repositories over SQLite, the embedded default.
//!
//! WAL journal, `synchronous = NORMAL` (a committed fire survives a process
//! crash; a power cut may lose the last few milliseconds of commits), and a
//! busy timeout so writers queue instead of failing. Hot paths (insert,
//! claim, record) are one statement per batch: SQLite does ~25k single-row
//! transactions per second here, but ~200k rows per second in batches.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous};
use sqlx::{ConnectOptions, QueryBuilder, Row, Sqlite, SqlitePool};
use xtimer_core::config::DatabaseConfig;
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::node::NodeInfo;
use xtimer_core::timer::{NewTimer, Schedule, Timer, TimerStatus};

use crate::repo::{ClaimOutcome, FireRepo, FireResult, NewFire, NodeRepo, Overdue, TimerRepo};
use crate::rows::{claim_taken_over, name_taken_or, node_from_row, timer_from_row, TIMER_COLUMNS};
use crate::{Error, Result};

/// Bound parameters per statement stay well under SQLite's limit (32766).
const MAX_PARAMS: usize = 30_000;

/// WAL pages after which a commit checkpoints by itself (SQLite's default
/// is 1,000): 40 MB, far above what the [`Checkpointer`] lets the WAL reach.
const AUTOCHECKPOINT_PAGES: &str = "10000";
/// Bytes the WAL file is cut back to after a checkpoint resets it.
const WAL_SIZE_LIMIT: &str = "67108864";

/// Output of a fire skipped because its timer is disabled or deleted.
pub const SKIPPED_OUTPUT: &str = "skipped: the timer is not enabled";

/// Timers and fires in a SQLite file.
///
/// Writes go through a pool of one connection, so writers queue in order
/// instead of colliding on SQLite's file lock and backing off in its busy
/// handler (which costs whole milliseconds per collision); reads use the
/// other pool and never block writers (WAL).
#[derive(Debug, Clone)]
pub struct SqliteRepo {
    pool: SqlitePool,
    write: SqlitePool,
}

impl SqliteRepo {
    /// Opens (creating if missing) the database and applies the schema.
    pub async fn connect(config: &DatabaseConfig) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(&config.url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .pragma("cache_size", "-16384")
            .pragma("temp_store", "memory")
            // The node's Checkpointer keeps the WAL short; this is the backstop.
            .pragma("wal_autocheckpoint", AUTOCHECKPOINT_PAGES)
            .pragma("journal_size_limit", WAL_SIZE_LIMIT)
            .log_slow_statements(log::LevelFilter::Debug, Duration::from_secs(1));
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .after_release(|conn, _| Box::pin(still_in_step(conn)))
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("../migrations/sqlite").run(&write).await?;
        let pool = SqlitePoolOptions::new().max_connections(config.max_connections).connect_with(options).await?;
        Ok(Self { pool, write })
    }

    /// The pool, for tests and tools that inspect the database.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Both pools, for the parts that keep their own tables here.
    pub fn database(&self) -> crate::Database {
        crate::Database::Sqlite { write: self.write.clone(), read: self.pool.clone() }
    }
}

/// Whether the write connection may go back to the pool: it must be outside
/// any transaction, in SQLite's view and in sqlx's.
///
/// A disk-full (or I/O) error inside a transaction makes SQLite roll the
/// whole transaction back on its own. sqlx does not see that: its ROLLBACK
/// then fails, it still counts one transaction open, and from then on it
/// opens transactions with `SAVEPOINT` and rolls them back with `ROLLBACK
/// TO`, which leaves a transaction open that nothing ever commits: every
/// later write would vanish without an error. So a connection that is out
/// of step is closed (its open transaction, if any, rolls back) and the
/// pool opens a fresh one. The probe runs after the rollback sqlx queues on
/// a dropped transaction, so it sees the settled state.
async fn still_in_step(conn: &mut sqlx::SqliteConnection) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::{Connection, Executor};
    if conn.execute("BEGIN").await.is_err() {
        tracing::warn!("A write connection was left inside a transaction (after a disk or I/O error); reopening it.");
        return Ok(false);
    }
    conn.execute("ROLLBACK").await?;
    if conn.is_in_transaction() {
        tracing::warn!("A write connection's transaction count was off (after a disk or I/O error); reopening it.");
        return Ok(false);
    }
    Ok(true)
}

/// Copies the WAL into the database file off the write path. SQLite's
/// auto-checkpoint runs inside a committing write, so the one writer would
/// wait for the copy and its fsyncs (a quarter of a busy writer's time);
/// this runs a passive checkpoint on a read connection every `period`
/// instead, which never blocks the writer.
pub struct Checkpointer {
    pool: SqlitePool,
    period: Duration,
}

impl Checkpointer {
    /// A checkpointer over `pool` (any connection to the file).
    pub fn new(pool: SqlitePool, period: Duration) -> Self {
        Self { pool, period }
    }

    /// Checkpoints every `period` until `shutdown`, then once more.
    pub async fn run(self, shutdown: tokio_util::sync::CancellationToken) -> Result<()> {
        loop {
            let stop = tokio::select! {
                _ = shutdown.cancelled() => true,
                _ = tokio::time::sleep(self.period) => false,
            };
            if let Err(err) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&self.pool).await {
                tracing::warn!(error = %err, "WAL checkpoint failed; the next one retries.");
            }
            if stop {
                return Ok(());
            }
        }
    }
}

fn fire_from_row(row: &SqliteRow) -> Result<Fire> {
    let task_id: i64 = row.try_get("task_id")?;
    Ok(Fire {
        task_id,
        timer_id: row.try_get("timer_id")?,
        app: row.try_get("app")?,
        run_ms: row.try_get("run_timer")?,
        status: FireStatus::from_code(row.try_get("status")?)
            .ok_or_else(|| Error::Corrupt(format!("t_timer_task {task_id}: status")))?,
        attempt: row.try_get::<i64, _>("attempt")? as u32,
        output: row.try_get("output")?,
        cost_time: row.try_get("cost_time")?,
        create_time: row.try_get("create_time")?,
        modify_time: row.try_get("modify_time")?,
    })
}

/// Appends `(VALUES (?, ?), ...) AS k`: fire keys to join on the unique
/// index (an `IN (VALUES ...)` would scan the status index instead).
fn push_key_values(qb: &mut QueryBuilder<'_, Sqlite>, keys: &[FireKey]) {
    qb.push("(VALUES ");
    let mut sep = qb.separated(", ");
    for key in keys {
        sep.push("(").push_bind_unseparated(key.timer_id).push_unseparated(", ");
        sep.push_bind_unseparated(key.run_ms).push_unseparated(")");
    }
    qb.push(") AS k");
}

/// Joins `t_timer_task` to the keys of [`push_key_values`].
const ON_KEYS: &str = "t_timer_task.timer_id = k.column1 AND t_timer_task.run_timer = k.column2";

/// Appends `task_id IN (?, ...)`.
fn push_id_list(qb: &mut QueryBuilder<'_, Sqlite>, ids: &[i64]) {
    qb.push("task_id IN (");
    let mut sep = qb.separated(", ");
    for id in ids {
        sep.push_bind(*id);
    }
    qb.push(")");
}

/// The fire's timer is enabled (a primary-key probe per row).
const TIMER_ENABLED: &str =
    "EXISTS (SELECT 1 FROM t_timer t WHERE t.timer_id = t_timer_task.timer_id AND t.status = 2)";

#[async_trait]
impl TimerRepo for SqliteRepo {
    async fn create_timers(&self, timers: &[NewTimer], now_ms: i64) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(timers.len());
        let mut tx = self.write.begin().await?;
        for chunk in timers.chunks(MAX_PARAMS / 12) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO t_timer (app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, create_time, modify_time) ",
            );
            qb.push_values(chunk, |mut b, t| {
                let (kind, cron, timezone, run_at) = schedule_columns(&t.schedule);
                b.push_bind(t.app.clone())
                    .push_bind(t.name.clone())
                    .push_bind(t.status.code())
                    .push_bind(kind)
                    .push_bind(cron.map(str::to_string))
                    .push_bind(timezone.to_string())
                    .push_bind(run_at)
                    .push_bind(serde_json::to_string(&t.notify).expect("notify serializes"))
                    .push_bind(serde_json::to_string(&t.retry).expect("retry serializes"))
                    .push_bind(t.misfire.as_str())
                    .push_bind(now_ms)
                    .push_bind(now_ms);
            });
            qb.push(" RETURNING timer_id");
            match qb.build().fetch_all(&mut *tx).await {
                Ok(rows) => {
                    for row in rows {
                        ids.push(row.try_get("timer_id")?);
                    }
                }
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(Error::NameTaken { app: chunk[0].app.clone(), name: "(one of the batch)".into() });
                }
                Err(e) => return Err(e.into()),
            }
        }
        tx.commit().await?;
        Ok(ids)
    }

    async fn create_timer(&self, t: &NewTimer, now_ms: i64) -> Result<Timer> {
        let (kind, cron, timezone, run_at) = schedule_columns(&t.schedule);
        let notify = serde_json::to_string(&t.notify).expect("notify serializes");
        let retry = serde_json::to_string(&t.retry).expect("retry serializes");
        let res = sqlx::query(
            "INSERT INTO t_timer (app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, create_time, modify_time)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&t.app)
        .bind(&t.name)
        .bind(t.status.code())
        .bind(kind)
        .bind(cron)
        .bind(timezone)
        .bind(run_at)
        .bind(notify)
        .bind(retry)
        .bind(t.misfire.as_str())
        .bind(now_ms)
        .bind(now_ms)
        .execute(&self.write)
        .await;
        match res {
            Ok(done) => Ok(t.stored(done.last_insert_rowid(), now_ms)),
            Err(e) => Err(name_taken_or(e, &t.app, &t.name)),
        }
    }

    async fn get_timer(&self, id: i64) -> Result<Option<Timer>> {
        let row = sqlx::query(&format!("SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(timer_from_row).transpose()
    }

    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_PARAMS) {
            let mut qb = QueryBuilder::new(format!("SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id IN ("));
            let mut sep = qb.separated(", ");
            for id in chunk {
                sep.push_bind(*id);
            }
            qb.push(")");
            for row in qb.build().fetch_all(&self.pool).await? {
                out.push(timer_from_row(&row)?);
            }
        }
        Ok(out)
    }

    async fn list_app_timers(&self, app: &str, offset: u64, limit: u64) -> Result<(Vec<Timer>, u64)> {
        let rows = sqlx::query(&format!(
            "SELECT {TIMER_COLUMNS} FROM t_timer WHERE app = ? AND status <> 3 ORDER BY timer_id LIMIT ? OFFSET ?"
        ))
        .bind(app)
        .bind(limit as i64)
        .bind(offset as i64)
        .fetch_all(&self.pool)
        .await?;
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t_timer WHERE app = ? AND status <> 3")
            .bind(app)
            .fetch_one(&self.pool)
            .await?;
        let timers = rows.iter().map(timer_from_row).collect::<Result<_>>()?;
        Ok((timers, total as u64))
    }

    async fn set_timer_status(&self, id: i64, status: TimerStatus, now_ms: i64) -> Result<bool> {
        let done = sqlx::query("UPDATE t_timer SET status = ?, modify_time = ? WHERE timer_id = ? AND status <> 3")
            .bind(status.code())
            .bind(now_ms)
            .bind(id)
            .execute(&self.write)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn enabled_timers(&self, after_id: i64, limit: u32) -> Result<Vec<Timer>> {
        let rows = sqlx::query(&format!(
            "SELECT {TIMER_COLUMNS} FROM t_timer WHERE status = 2 AND timer_id > ? ORDER BY timer_id LIMIT ?"
        ))
        .bind(after_id)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(timer_from_row).collect()
    }
}

#[async_trait]
impl FireRepo for SqliteRepo {
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64> {
        let mut inserted = 0;
        let mut tx = self.write.begin().await?;
        for chunk in fires.chunks(MAX_PARAMS / 5) {
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO t_timer_task (timer_id, app, run_timer, create_time, modify_time) ",
            );
            qb.push_values(chunk, |mut b, f| {
                b.push_bind(f.key.timer_id)
                    .push_bind(&f.app)
                    .push_bind(f.key.run_ms)
                    .push_bind(now_ms)
                    .push_bind(now_ms);
            });
            qb.push(" ON CONFLICT (timer_id, run_timer) DO NOTHING");
            inserted += qb.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(inserted)
    }

    async fn pending_between(
        &self,
        timer_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<FireKey>> {
        let rows = sqlx::query(
            "SELECT timer_id, run_timer FROM t_timer_task
             WHERE status = 0 AND run_timer >= ? AND run_timer < ? AND (? IS NULL OR timer_id = ?)
             ORDER BY run_timer LIMIT ?",
        )
        .bind(from_ms)
        .bind(to_ms)
        .bind(timer_id)
        .bind(timer_id)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(FireKey { timer_id: r.try_get("timer_id")?, run_ms: r.try_get("run_timer")? })).collect()
    }

    async fn claim(&self, keys: &[FireKey], owner: &str, lease_ms: i64, now_ms: i64) -> Result<ClaimOutcome> {
        let mut out = ClaimOutcome::default();
        let mut tx = self.write.begin().await?;
        for chunk in keys.chunks(MAX_PARAMS / 2) {
            let mut qb = QueryBuilder::<Sqlite>::new("UPDATE t_timer_task SET status = 1, owner = ");
            // A fire claimed after its time still gets a whole lease.
            qb.push_bind(owner)
                .push(", lease_until = MAX(run_timer, ")
                .push_bind(now_ms)
                .push(") + ")
                .push_bind(lease_ms);
            qb.push(", modify_time = ").push_bind(now_ms).push(" FROM ");
            push_key_values(&mut qb, chunk);
            qb.push(format!(" WHERE {ON_KEYS} AND t_timer_task.status = 0 AND {TIMER_ENABLED}"));
            qb.push(" RETURNING task_id, timer_id, run_timer, attempt");
            for row in qb.build().fetch_all(&mut *tx).await? {
                out.claimed.push(claimed_from_row(&row, owner)?);
            }
            let mut qb = QueryBuilder::<Sqlite>::new("UPDATE t_timer_task SET status = 4, output = ");
            qb.push_bind(SKIPPED_OUTPUT).push(", modify_time = ").push_bind(now_ms).push(" FROM ");
            push_key_values(&mut qb, chunk);
            qb.push(format!(" WHERE {ON_KEYS} AND t_timer_task.status = 0 AND NOT {TIMER_ENABLED}"));
            out.skipped += qb.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn reclaim(
        &self,
        task_ids: &[i64],
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome> {
        let mut out = ClaimOutcome::default();
        // Literal integers, not binds: the id lists already use the binds.
        let claimable = format!(
            "(status = 0 OR (status = 1 AND {}))",
            claim_taken_over("t_timer_task.owner", &now_ms.to_string(), &alive_since_ms.to_string())
        );
        let mut tx = self.write.begin().await?;
        for chunk in task_ids.chunks(MAX_PARAMS / 2) {
            let mut qb = QueryBuilder::<Sqlite>::new("UPDATE t_timer_task SET status = 1, owner = ");
            qb.push_bind(owner).push(", lease_until = ").push_bind(now_ms + lease_ms);
            qb.push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
            push_id_list(&mut qb, chunk);
            qb.push(" AND ").push(&claimable);
            qb.push(format!(" AND {TIMER_ENABLED} RETURNING task_id, timer_id, run_timer, attempt"));
            for row in qb.build().fetch_all(&mut *tx).await? {
                out.claimed.push(claimed_from_row(&row, owner)?);
            }
            let mut qb = QueryBuilder::<Sqlite>::new("UPDATE t_timer_task SET status = 4, owner = NULL, output = ");
            qb.push_bind(SKIPPED_OUTPUT).push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
            push_id_list(&mut qb, chunk);
            qb.push(" AND ").push(&claimable);
            qb.push(format!(" AND NOT {TIMER_ENABLED}"));
            out.skipped += qb.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn record(&self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        let mut written = 0;
        let mut tx = self.write.begin().await?;
        // One statement joins each fire once: results of the same fire go in
        // later rounds, in the order they were given.
        for round in rounds_by_task(results) {
            for chunk in round.chunks(MAX_PARAMS / 8) {
                // VALUES columns: 1 task_id, 2 owner, 3 status, 4 attempt, 5 output, 6 cost_time, 7 lease_until
                let mut qb = QueryBuilder::<Sqlite>::new(
                    "UPDATE t_timer_task SET status = v.column3, attempt = v.column4, output = v.column5,
                     cost_time = CASE WHEN t_timer_task.attempt = 0 THEN v.column6 ELSE t_timer_task.cost_time END,
                     lease_until = v.column7, modify_time = ",
                );
                qb.push_bind(now_ms).push(" FROM (VALUES ");
                let mut sep = qb.separated(", ");
                for r in chunk {
                    sep.push("(").push_bind_unseparated(r.task_id);
                    sep.push_unseparated(", ").push_bind_unseparated(&r.owner);
                    sep.push_unseparated(", ").push_bind_unseparated(r.status.code());
                    sep.push_unseparated(", ").push_bind_unseparated(i64::from(r.attempt));
                    sep.push_unseparated(", ").push_bind_unseparated(&r.output);
                    sep.push_unseparated(", ").push_bind_unseparated(r.cost_time);
                    sep.push_unseparated(", ").push_bind_unseparated(r.lease_until);
                    sep.push_unseparated(")");
                }
                qb.push(
                    ") AS v WHERE t_timer_task.task_id = v.column1 AND t_timer_task.owner = v.column2
                     AND t_timer_task.status = 1",
                );
                written += qb.build().execute(&mut *tx).await?.rows_affected();
            }
        }
        tx.commit().await?;
        Ok(written)
    }

    async fn release(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
        let mut released = 0;
        let mut tx = self.write.begin().await?;
        for c in claims {
            released += sqlx::query(
                "UPDATE t_timer_task SET status = 0, owner = NULL, lease_until = NULL, modify_time = ?
                 WHERE task_id = ? AND owner = ? AND status = 1",
            )
            .bind(now_ms)
            .bind(c.task_id)
            .bind(&c.owner)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(released)
    }

    async fn mark_missed(&self, task_ids: &[i64], output: &str, now_ms: i64) -> Result<u64> {
        let mut marked = 0;
        let mut tx = self.write.begin().await?;
        for chunk in task_ids.chunks(MAX_PARAMS / 2) {
            let mut qb = QueryBuilder::<Sqlite>::new("UPDATE t_timer_task SET status = 5, output = ");
            qb.push_bind(output).push(", modify_time = ").push_bind(now_ms).push(" WHERE status = 0 AND ");
            push_id_list(&mut qb, chunk);
            marked += qb.build().execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(marked)
    }

    async fn overdue(
        &self,
        pending_before_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
        limit: u32,
    ) -> Result<Vec<Overdue>> {
        let sql = format!(
            "SELECT task_id, timer_id, run_timer, status FROM (
                 SELECT task_id, timer_id, run_timer, status FROM t_timer_task
                 WHERE status = 0 AND run_timer < ?1
                 UNION ALL
                 SELECT task_id, timer_id, run_timer, status FROM t_timer_task
                 WHERE status = 1 AND run_timer < ?2 AND {}
             ) ORDER BY run_timer DESC LIMIT ?4",
            claim_taken_over("t_timer_task.owner", "?2", "?3")
        );
        let rows = sqlx::query(&sql)
            .bind(pending_before_ms)
            .bind(now_ms)
            .bind(alive_since_ms)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Overdue {
                    task_id: r.try_get("task_id")?,
                    key: FireKey { timer_id: r.try_get("timer_id")?, run_ms: r.try_get("run_timer")? },
                    status: FireStatus::from_code(r.try_get("status")?).unwrap_or(FireStatus::Pending),
                })
            })
            .collect()
    }

    async fn list_fires(
        &self,
        timer_id: i64,
        status: Option<FireStatus>,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Fire>, u64)> {
        let status = status.map(FireStatus::code);
        let rows = sqlx::query(
            "SELECT task_id, timer_id, app, run_timer, status, attempt, output, cost_time, create_time, modify_time
             FROM t_timer_task WHERE timer_id = ? AND (? IS NULL OR status = ?)
             ORDER BY run_timer DESC LIMIT ? OFFSET ?",
        )
        .bind(timer_id)
        .bind(status)
        .bind(status)
        .bind(limit as i64)
        .bind(offset as i64)
        .fetch_all(&self.pool)
        .await?;
        let total: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM t_timer_task WHERE timer_id = ? AND (? IS NULL OR status = ?)")
                .bind(timer_id)
                .bind(status)
                .bind(status)
                .fetch_one(&self.pool)
                .await?;
        let fires = rows.iter().map(fire_from_row).collect::<Result<_>>()?;
        Ok((fires, total as u64))
    }
}

/// Splits results into rounds in which each fire appears at most once,
/// keeping each fire's results in order across rounds.
fn rounds_by_task(results: &[FireResult]) -> Vec<Vec<&FireResult>> {
    let mut rounds: Vec<Vec<&FireResult>> = Vec::new();
    let mut next_round: std::collections::HashMap<i64, usize> = std::collections::HashMap::new();
    for r in results {
        let round = next_round.entry(r.task_id).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(r);
        *round += 1;
    }
    rounds
}

/// (kind, cron, timezone, run_at) columns of a schedule.
fn schedule_columns(schedule: &Schedule) -> (&'static str, Option<&str>, &str, Option<i64>) {
    match schedule {
        Schedule::Cron { expr, timezone } => ("cron", Some(expr.as_str()), timezone.as_str(), None),
        Schedule::Once { run_at_ms } => ("once", None, "UTC", Some(*run_at_ms)),
    }
}

fn claimed_from_row(row: &SqliteRow, owner: &str) -> Result<ClaimedFire> {
    Ok(ClaimedFire {
        task_id: row.try_get("task_id")?,
        key: FireKey { timer_id: row.try_get("timer_id")?, run_ms: row.try_get("run_timer")? },
        attempt: row.try_get::<i64, _>("attempt")? as u32,
        owner: owner.to_string(),
    })
}

#[async_trait]
impl NodeRepo for SqliteRepo {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<()> {
        sqlx::query(
            "INSERT INTO t_node (node_id, host, listen, started_at, heartbeat_at, shards) VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, shards = excluded.shards,
             listen = excluded.listen",
        )
        .bind(&node.id)
        .bind(&node.host)
        .bind(&node.listen)
        .bind(node.started_at)
        .bind(node.heartbeat_at)
        .bind(serde_json::to_string(&node.shards).expect("strings serialize"))
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn list_nodes(&self, since_ms: i64) -> Result<Vec<NodeInfo>> {
        let rows = sqlx::query(
            "SELECT node_id, host, listen, started_at, heartbeat_at, shards FROM t_node WHERE heartbeat_at >= ? ORDER BY node_id",
        )
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(node_from_row).collect()
    }

    async fn remove_node(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM t_node WHERE node_id = ?").bind(id).execute(&self.write).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of `t_timer` in the database file alone, WAL ignored.
    async fn timers_in_main_file(path: &std::path::Path) -> i64 {
        let url = format!("sqlite://{}?immutable=1", path.display());
        let mut conn = SqliteConnectOptions::from_str(&url).unwrap().read_only(true).connect().await.unwrap();
        let count = sqlx::query_scalar("SELECT COUNT(*) FROM t_timer").fetch_one(&mut conn).await;
        count.unwrap_or(0)
    }

    #[tokio::test]
    async fn the_checkpointer_moves_commits_from_the_wal_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let config = DatabaseConfig { url: format!("sqlite://{}", path.display()), max_connections: 2 };
        let repo = SqliteRepo::connect(&config).await.unwrap();
        for i in 0..3 {
            let sql = "INSERT INTO t_timer (app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, \
                       create_time, modify_time) VALUES ('a', $1, 1, 1, '* * * * *', 'UTC', NULL, '{}', '{}', 1, 0, 0)";
            sqlx::query(sql).bind(format!("t{i}")).execute(&repo.write).await.unwrap();
        }
        assert_eq!(timers_in_main_file(&path).await, 0, "commits wait in the WAL (no auto-checkpoint yet)");

        let stop = tokio_util::sync::CancellationToken::new();
        stop.cancel();
        Checkpointer::new(repo.pool.clone(), Duration::from_secs(60)).run(stop).await.unwrap();
        assert_eq!(timers_in_main_file(&path).await, 3, "the checkpoint copied them into the file");
    }
}
