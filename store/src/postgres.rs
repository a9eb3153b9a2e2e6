//! The repositories over PostgreSQL, for clusters.
//!
//! The semantics are those of [`crate::sqlite`], rule for rule (the
//! conformance suite runs against both); what differs is how PostgreSQL is
//! used:
//!
//! - Batches bind one array per column and expand them with `UNNEST`, so a
//!   batch is one statement of a fixed text whatever its size (no parameter
//!   limit, one prepared statement per query).
//! - Claims lock the fires they take with `FOR UPDATE SKIP LOCKED`, so
//!   concurrent claimers over the same keys never wait for each other and
//!   never both win a fire; each claim is a single statement.
//! - Inserts take keys in a fixed order, so concurrent inserts of the same
//!   fires cannot deadlock.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool, Row};
use xtimer_core::config::DatabaseConfig;
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::timer::{NewTimer, Schedule, Timer, TimerStatus};

use crate::repo::{ClaimOutcome, FireRepo, FireResult, NewFire, Overdue, TimerRepo};
use crate::rows::{claim_taken_over, name_taken_or, timer_from_row, TIMER_COLUMNS};
use crate::sqlite::SKIPPED_OUTPUT;
use crate::{redact, Error, Result};

/// How long connecting (TCP, TLS, start-up) may take before it counts as
/// unreachable; also bounds waiting for a server that is still starting up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Timers and fires in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgRepo {
    pool: PgPool,
}

impl PgRepo {
    /// Connects and applies `migrations/postgres`; with `schema`, every
    /// connection uses (and the migration creates) that schema: tests get a
    /// fresh one each.
    ///
    /// Several nodes may start at once: the schema is created only if
    /// missing (a lost race is fine), and the migrator holds a session
    /// advisory lock (keyed on the database name) while it applies
    /// migrations, so each applies once.
    ///
    /// An unreachable server is an [`Error::Database`] naming the (redacted)
    /// URL and the cause: at once when refused, after 10 s
    /// when nothing answers; not a pool's bare "timed out" after retrying a
    /// refused connection for half a minute.
    pub async fn connect(config: &DatabaseConfig, schema: Option<&str>) -> Result<Self> {
        let mut options = PgConnectOptions::from_str(&config.url)?
            .log_slow_statements(log::LevelFilter::Debug, Duration::from_secs(1));
        if let Some(schema) = schema {
            // A start-up parameter, so every pooled connection gets it with no extra round trip.
            options = options.options([("search_path", startup_escape(&quote_ident(schema)))]);
        }

        let mut conn = connect_one(&options, &config.url).await?;
        if let Some(schema) = schema {
            create_schema(&mut conn, schema).await?;
        }
        // `run_direct`: `run(&mut conn)` makes this future not `Send` for
        // spawning ("implementation of `Acquire` is not general enough").
        sqlx::migrate!("../migrations/postgres").run_direct(&mut conn).await?;
        // Closing politely is a courtesy; the migration is committed either way.
        let _ = conn.close().await;

        let pool = PgPoolOptions::new().max_connections(config.max_connections).connect_with(options).await?;
        Ok(Self { pool })
    }

    /// The pool, for tests and tools that inspect the database.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// Opens one connection: a refused or unresolvable server fails now with
/// its cause and the URL; one still starting up is waited for, within
/// [`CONNECT_TIMEOUT`].
async fn connect_one(options: &PgConnectOptions, url: &str) -> Result<PgConnection> {
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    let mut backoff = Duration::from_millis(50);
    loop {
        let error = match tokio::time::timeout_at(deadline, PgConnection::connect_with(options)).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(error)) => error,
            Err(_) => {
                return Err(io_error(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to PostgreSQL at {} timed out after {CONNECT_TIMEOUT:?}", redact(url)),
                ))
            }
        };
        // 57P03 cannot_connect_now: "the database system is starting up".
        let starting = matches!(&error, sqlx::Error::Database(e) if e.code().as_deref() == Some("57P03"));
        if !starting || tokio::time::Instant::now() + backoff >= deadline {
            return Err(match error {
                sqlx::Error::Io(e) => {
                    io_error(e.kind(), format!("cannot connect to PostgreSQL at {}: {e}", redact(url)))
                }
                other => other.into(),
            });
        }
        tracing::info!(url = %redact(url), "PostgreSQL is starting up; waiting");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

fn io_error(kind: std::io::ErrorKind, message: String) -> Error {
    Error::Database(sqlx::Error::Io(std::io::Error::new(kind, message)))
}

/// Creates `schema` unless it exists. Checking first lets a role without
/// CREATE on the database use a schema made for it; a concurrent creation
/// by another node is not an error.
async fn create_schema(conn: &mut PgConnection, schema: &str) -> Result<()> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(&mut *conn)
        .await?;
    if exists {
        return Ok(());
    }
    match sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema))).execute(&mut *conn).await {
        Ok(_) => Ok(()),
        // 42P06 duplicate_schema, or 23505 when the catalog's unique index catches the race.
        Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("42P06" | "23505")) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Escapes a value for the `options` start-up parameter, where spaces
/// separate arguments and backslash escapes.
fn startup_escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace(' ', "\\ ")
}

/// Clamps a page bound to what `LIMIT` / `OFFSET` take.
fn page_bound(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const FIRE_COLUMNS: &str =
    "task_id, timer_id, app, run_timer, status, attempt, output, cost_time, create_time, modify_time";

fn fire_status(row: &PgRow, task_id: i64) -> Result<FireStatus> {
    FireStatus::from_code(i64::from(row.try_get::<i16, _>("status")?))
        .ok_or_else(|| Error::Corrupt(format!("t_timer_task {task_id}: status")))
}

fn fire_from_row(row: &PgRow) -> Result<Fire> {
    let task_id: i64 = row.try_get("task_id")?;
    Ok(Fire {
        task_id,
        timer_id: row.try_get("timer_id")?,
        app: row.try_get("app")?,
        run_ms: row.try_get("run_timer")?,
        status: fire_status(row, task_id)?,
        attempt: row.try_get::<i32, _>("attempt")? as u32,
        output: row.try_get("output")?,
        cost_time: row.try_get("cost_time")?,
        create_time: row.try_get("create_time")?,
        modify_time: row.try_get("modify_time")?,
    })
}

fn key_from_row(row: &PgRow) -> Result<FireKey> {
    Ok(FireKey { timer_id: row.try_get("timer_id")?, run_ms: row.try_get("run_timer")? })
}

/// Splits the rows a claim statement returned into fires won (running) and
/// a count of fires skipped.
fn claim_outcome(rows: &[PgRow], owner: &str) -> Result<ClaimOutcome> {
    let mut out = ClaimOutcome::default();
    for row in rows {
        let task_id: i64 = row.try_get("task_id")?;
        match fire_status(row, task_id)? {
            FireStatus::Running => out.claimed.push(ClaimedFire {
                task_id,
                key: key_from_row(row)?,
                attempt: row.try_get::<i32, _>("attempt")? as u32,
                owner: owner.to_string(),
            }),
            _ => out.skipped += 1,
        }
    }
    Ok(out)
}

/// The fire's timer is enabled (a fire of a missing timer counts as not enabled).
const TIMER_ENABLED: &str = "EXISTS (SELECT 1 FROM t_timer t WHERE t.timer_id = f.timer_id AND t.status = 2)";

/// The UPDATE after a claim's CTE `c` (the locked fires: `task_id`,
/// `enabled`): a fire whose timer is enabled becomes running under `owner`
/// until `lease`; any other becomes skipped (its owner set to
/// `skipped_owner`). Returns each fire with its new status. Arguments are
/// SQL expressions.
fn claim_update(owner: &str, lease: &str, skipped_owner: &str, now: &str, skipped_output: &str) -> String {
    format!(
        "UPDATE t_timer_task f SET
             status = CASE WHEN c.enabled THEN 1 ELSE 4 END,
             owner = CASE WHEN c.enabled THEN {owner} ELSE {skipped_owner} END,
             lease_until = CASE WHEN c.enabled THEN {lease} ELSE f.lease_until END,
             output = CASE WHEN c.enabled THEN f.output ELSE {skipped_output} END,
             modify_time = {now}
         FROM c WHERE f.task_id = c.task_id
         RETURNING f.task_id, f.timer_id, f.run_timer, f.attempt, f.status"
    )
}

#[async_trait]
impl TimerRepo for PgRepo {
    async fn create_timers(&self, timers: &[NewTimer], now_ms: i64) -> Result<Vec<i64>> {
        if timers.is_empty() {
            return Ok(Vec::new());
        }
        let schedules: Vec<_> = timers.iter().map(|t| schedule_columns(&t.schedule)).collect();
        // One statement, so all or nothing. Rows are inserted in input order,
        // so their ids, drawn from the sequence one after another, ascend in
        // input order too.
        let res = sqlx::query_scalar::<_, i64>(
            "INSERT INTO t_timer (app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, create_time, modify_time)
             SELECT app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, $11, $11
             FROM UNNEST($1::text[], $2::text[], $3::smallint[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                         $8::text[], $9::text[], $10::text[])
                  WITH ORDINALITY AS v(app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, ord)
             ORDER BY ord
             RETURNING timer_id",
        )
        .bind(timers.iter().map(|t| t.app.as_str()).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| t.name.as_str()).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| t.status.code() as i16).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.0).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.1).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.2).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.3).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| serde_json::to_string(&t.notify).expect("notify serializes")).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| serde_json::to_string(&t.retry).expect("retry serializes")).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| t.misfire.as_str()).collect::<Vec<_>>())
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await;
        match res {
            Ok(mut ids) => {
                ids.sort_unstable();
                Ok(ids)
            }
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(Error::NameTaken { app: timers[0].app.clone(), name: "(one of the batch)".into() })
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn create_timer(&self, t: &NewTimer, now_ms: i64) -> Result<Timer> {
        let (kind, cron, timezone, run_at) = schedule_columns(&t.schedule);
        let notify = serde_json::to_string(&t.notify).expect("notify serializes");
        let retry = serde_json::to_string(&t.retry).expect("retry serializes");
        let res = sqlx::query_scalar::<_, i64>(
            "INSERT INTO t_timer (app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, create_time, modify_time)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
             RETURNING timer_id",
        )
        .bind(&t.app)
        .bind(&t.name)
        .bind(t.status.code() as i16)
        .bind(kind)
        .bind(cron)
        .bind(timezone)
        .bind(run_at)
        .bind(notify)
        .bind(retry)
        .bind(t.misfire.as_str())
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await;
        match res {
            Ok(id) => Ok(t.stored(id, now_ms)),
            Err(e) => Err(name_taken_or(e, &t.app, &t.name)),
        }
    }

    async fn get_timer(&self, id: i64) -> Result<Option<Timer>> {
        let row = sqlx::query(&format!("SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(timer_from_row).transpose()
    }

    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(&format!(
            "SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id = ANY($1::bigint[]) ORDER BY timer_id"
        ))
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(timer_from_row).collect()
    }

    async fn list_app_timers(&self, app: &str, offset: u64, limit: u64) -> Result<(Vec<Timer>, u64)> {
        let rows = sqlx::query(&format!(
            "SELECT {TIMER_COLUMNS} FROM t_timer WHERE app = $1 AND status <> 3 ORDER BY timer_id LIMIT $2 OFFSET $3"
        ))
        .bind(app)
        .bind(page_bound(limit))
        .bind(page_bound(offset))
        .fetch_all(&self.pool)
        .await?;
        let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t_timer WHERE app = $1 AND status <> 3")
            .bind(app)
            .fetch_one(&self.pool)
            .await?;
        let timers = rows.iter().map(timer_from_row).collect::<Result<_>>()?;
        Ok((timers, total as u64))
    }

    async fn set_timer_status(&self, id: i64, status: TimerStatus, now_ms: i64) -> Result<bool> {
        let done = sqlx::query("UPDATE t_timer SET status = $1, modify_time = $2 WHERE timer_id = $3 AND status <> 3")
            .bind(status.code() as i16)
            .bind(now_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn enabled_timers(&self, after_id: i64, limit: u32) -> Result<Vec<Timer>> {
        let rows = sqlx::query(&format!(
            "SELECT {TIMER_COLUMNS} FROM t_timer WHERE status = 2 AND timer_id > $1 ORDER BY timer_id LIMIT $2"
        ))
        .bind(after_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(timer_from_row).collect()
    }
}

#[async_trait]
impl FireRepo for PgRepo {
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64> {
        if fires.is_empty() {
            return Ok(0);
        }
        let timer_ids: Vec<i64> = fires.iter().map(|f| f.key.timer_id).collect();
        let apps: Vec<&str> = fires.iter().map(|f| f.app.as_str()).collect();
        let runs: Vec<i64> = fires.iter().map(|f| f.key.run_ms).collect();
        // Keys in index order: two inserts of overlapping batches wait for
        // each other's rows in the same order, so they cannot deadlock.
        let done = sqlx::query(
            "INSERT INTO t_timer_task (timer_id, app, run_timer, create_time, modify_time)
             SELECT timer_id, app, run_timer, $4, $4
             FROM UNNEST($1::bigint[], $2::text[], $3::bigint[]) AS v(timer_id, app, run_timer)
             ORDER BY timer_id, run_timer
             ON CONFLICT (timer_id, run_timer) DO NOTHING",
        )
        .bind(timer_ids)
        .bind(apps)
        .bind(runs)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn pending_between(
        &self,
        timer_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<FireKey>> {
        // Two texts rather than `$3 IS NULL OR timer_id = $3`, so each gets a
        // plan on its own index (a cached generic plan would serve both badly).
        let rows = match timer_id {
            None => {
                sqlx::query(
                    "SELECT timer_id, run_timer FROM t_timer_task
                     WHERE status = 0 AND run_timer >= $1 AND run_timer < $2
                     ORDER BY run_timer LIMIT $3",
                )
                .bind(from_ms)
                .bind(to_ms)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?
            }
            Some(id) => {
                sqlx::query(
                    "SELECT timer_id, run_timer FROM t_timer_task
                     WHERE timer_id = $1 AND status = 0 AND run_timer >= $2 AND run_timer < $3
                     ORDER BY run_timer LIMIT $4",
                )
                .bind(id)
                .bind(from_ms)
                .bind(to_ms)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?
            }
        };
        rows.iter().map(key_from_row).collect()
    }

    async fn claim(&self, keys: &[FireKey], owner: &str, lease_ms: i64, now_ms: i64) -> Result<ClaimOutcome> {
        if keys.is_empty() {
            return Ok(ClaimOutcome::default());
        }
        let timer_ids: Vec<i64> = keys.iter().map(|k| k.timer_id).collect();
        let runs: Vec<i64> = keys.iter().map(|k| k.run_ms).collect();
        // Compare-and-set on status = 0, joined to the timer's status. Rows
        // another claimer holds are skipped rather than waited for: it holds
        // them only to take them. A fire claimed after its time still gets a
        // whole lease.
        let sql = format!(
            "WITH k AS (
                 SELECT DISTINCT timer_id, run_timer FROM UNNEST($1::bigint[], $2::bigint[]) AS k(timer_id, run_timer)
             ), c AS MATERIALIZED (
                 SELECT f.task_id, {TIMER_ENABLED} AS enabled
                 FROM t_timer_task f JOIN k ON f.timer_id = k.timer_id AND f.run_timer = k.run_timer
                 WHERE f.status = 0
                 FOR UPDATE OF f SKIP LOCKED
             )
             {}",
            claim_update("$3", "GREATEST(f.run_timer, $5) + $4", "f.owner", "$5", "$6")
        );
        let rows = sqlx::query(&sql)
            .bind(timer_ids)
            .bind(runs)
            .bind(owner)
            .bind(lease_ms)
            .bind(now_ms)
            .bind(SKIPPED_OUTPUT)
            .fetch_all(&self.pool)
            .await?;
        claim_outcome(&rows, owner)
    }

    async fn reclaim(
        &self,
        task_ids: &[i64],
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome> {
        if task_ids.is_empty() {
            return Ok(ClaimOutcome::default());
        }
        let sql = format!(
            "WITH c AS MATERIALIZED (
                 SELECT f.task_id, {TIMER_ENABLED} AS enabled
                 FROM t_timer_task f
                 WHERE f.task_id = ANY($1::bigint[]) AND (f.status = 0 OR (f.status = 1 AND {}))
                 FOR UPDATE OF f SKIP LOCKED
             )
             {}",
            claim_taken_over("f.owner", "$4", "$6"),
            claim_update("$2", "$3", "NULL", "$4", "$5")
        );
        let rows = sqlx::query(&sql)
            .bind(task_ids)
            .bind(owner)
            .bind(now_ms + lease_ms)
            .bind(now_ms)
            .bind(SKIPPED_OUTPUT)
            .bind(alive_since_ms)
            .fetch_all(&self.pool)
            .await?;
        claim_outcome(&rows, owner)
    }

    async fn record(&self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        const RECORD: &str = "UPDATE t_timer_task f SET status = v.status, attempt = v.attempt, output = v.output,
                 cost_time = CASE WHEN f.attempt = 0 THEN v.cost_time ELSE f.cost_time END,
                 lease_until = v.lease_until, modify_time = $8
             FROM UNNEST($1::bigint[], $2::text[], $3::smallint[], $4::integer[], $5::text[], $6::bigint[], $7::bigint[])
                  AS v(task_id, owner, status, attempt, output, cost_time, lease_until)
             WHERE f.task_id = v.task_id AND f.owner = v.owner AND f.status = 1";
        fn bind_round<'q>(
            round: &'q [&'q FireResult],
            now_ms: i64,
        ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
            sqlx::query(RECORD)
                .bind(round.iter().map(|r| r.task_id).collect::<Vec<_>>())
                .bind(round.iter().map(|r| r.owner.as_str()).collect::<Vec<_>>())
                .bind(round.iter().map(|r| r.status.code() as i16).collect::<Vec<_>>())
                .bind(round.iter().map(|r| i32::try_from(r.attempt).unwrap_or(i32::MAX)).collect::<Vec<_>>())
                .bind(round.iter().map(|r| r.output.as_str()).collect::<Vec<_>>())
                .bind(round.iter().map(|r| r.cost_time).collect::<Vec<_>>())
                .bind(round.iter().map(|r| r.lease_until).collect::<Vec<_>>())
                .bind(now_ms)
        }

        // One statement joins each fire once: results of the same fire go in
        // later rounds, in the order they were given, all in one transaction.
        // A final fire keeps its owner token: it names the node that fired it.
        let rounds = rounds_by_task(results);
        match rounds.as_slice() {
            [] => Ok(0),
            [round] => Ok(bind_round(round, now_ms).execute(&self.pool).await?.rows_affected()),
            _ => {
                let mut written = 0;
                let mut tx = self.pool.begin().await?;
                for round in &rounds {
                    written += bind_round(round, now_ms).execute(&mut *tx).await?.rows_affected();
                }
                tx.commit().await?;
                Ok(written)
            }
        }
    }

    async fn release(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
        if claims.is_empty() {
            return Ok(0);
        }
        let ids: Vec<i64> = claims.iter().map(|c| c.task_id).collect();
        let owners: Vec<&str> = claims.iter().map(|c| c.owner.as_str()).collect();
        let done = sqlx::query(
            "UPDATE t_timer_task f SET status = 0, owner = NULL, lease_until = NULL, modify_time = $3
             FROM UNNEST($1::bigint[], $2::text[]) AS v(task_id, owner)
             WHERE f.task_id = v.task_id AND f.owner = v.owner AND f.status = 1",
        )
        .bind(ids)
        .bind(owners)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn mark_missed(&self, task_ids: &[i64], output: &str, now_ms: i64) -> Result<u64> {
        if task_ids.is_empty() {
            return Ok(0);
        }
        let done = sqlx::query(
            "UPDATE t_timer_task SET status = 5, output = $2, modify_time = $3
             WHERE status = 0 AND task_id = ANY($1::bigint[])",
        )
        .bind(task_ids)
        .bind(output)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn overdue(
        &self,
        pending_before_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
        limit: u32,
    ) -> Result<Vec<Overdue>> {
        // Two ranges of (status, run_timer), merged newest first.
        let sql = format!(
            "SELECT task_id, timer_id, run_timer, status FROM (
                 SELECT task_id, timer_id, run_timer, status FROM t_timer_task
                 WHERE status = 0 AND run_timer < $1
                 UNION ALL
                 SELECT task_id, timer_id, run_timer, status FROM t_timer_task f
                 WHERE status = 1 AND run_timer < $2 AND {}
             ) o ORDER BY run_timer DESC LIMIT $4",
            claim_taken_over("f.owner", "$2", "$3")
        );
        let rows = sqlx::query(&sql)
            .bind(pending_before_ms)
            .bind(now_ms)
            .bind(alive_since_ms)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Overdue {
                    task_id: r.try_get("task_id")?,
                    key: key_from_row(r)?,
                    status: FireStatus::from_code(i64::from(r.try_get::<i16, _>("status")?))
                        .unwrap_or(FireStatus::Pending),
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
        let status = status.map(|s| s.code() as i16);
        let rows = sqlx::query(&format!(
            "SELECT {FIRE_COLUMNS} FROM t_timer_task WHERE timer_id = $1 AND ($2::smallint IS NULL OR status = $2)
             ORDER BY run_timer DESC LIMIT $3 OFFSET $4"
        ))
        .bind(timer_id)
        .bind(status)
        .bind(page_bound(limit))
        .bind(page_bound(offset))
        .fetch_all(&self.pool)
        .await?;
        let total: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM t_timer_task WHERE timer_id = $1 AND ($2::smallint IS NULL OR status = $2)",
        )
        .bind(timer_id)
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
    let mut next_round: HashMap<i64, usize> = HashMap::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_quoted_and_escaped_for_the_startup_options() {
        assert_eq!(quote_ident("t_ab12"), "\"t_ab12\"");
        assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
        assert_eq!(startup_escape(&quote_ident("my schema\\x")), "\"my\\ schema\\\\x\"");
    }
}
