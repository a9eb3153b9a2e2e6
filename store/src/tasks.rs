//! The asyncflow task tables (`t_schedule_cfg`, `t_schedule_pos` and one
//! table per type and position) on [`Database`]: what the task engine may
//! ask of SQL. The engine keeps the rules; this keeps the statements.
//!
//! Statements are written once (see [`crate::db`]). What differs per
//! dialect is small and named: the DDL of a new task table, `FOR UPDATE
//! SKIP LOCKED` in holds (SQLite needs no lock: every write goes through
//! its one writer connection, so a hold is one atomic statement; MySQL,
//! with no `UPDATE ... RETURNING`, locks, updates and returns in a
//! transaction), the upserts, the batch insert, and PostgreSQL's planner
//! statistics.
//!
//! A hold takes due tasks oldest order_time first, through each table's
//! `(status, order_time)` index. A type whose cfg sets `fair_by_user` is
//! held round-robin across user_ids instead ([`TaskStore::hold_fair_by_user`]):
//! each user's oldest task first, then each user's second, and so on, a
//! round oldest first. That ranks every due task of the table, a sort of
//! them per hold (about 30 ms at 100,000 due tasks on PostgreSQL, 100 ms on
//! SQLite, 300 ms on MariaDB); SQLite ranks on a read connection and
//! claims on the writer, so the writer does not wait for the sort.
//!
//! Table names come only from [`table_name`] over a type the engine checked
//! (`check_task_type`: letters, digits and `_`), and are quoted.

use sqlx::{ColumnIndex, Decode, QueryBuilder, Row, Type};
use xtimer_core::task::{rfc3339, table_name, TaskData, TaskScheduleCfg, TaskStatus};

use crate::db::{on_db, Dialect};
use crate::mysql::tasks::{create_table_mysql, hold_fair_mysql, hold_mysql};
use crate::sql::tasks::{
    fair_candidate_cap, fair_candidates, fair_order, task_from_row, StoredTask, FAIR_ORDER, TASK_COLUMNS,
};
use crate::sql::{opt_text, text};
use crate::sqlite::tasks::hold_fair_sqlite;
use crate::{conflict, Database, Error, Result};

/// Rows per SQLite insert statement: a batch is split greedily into these, so a
/// few statement shapes stay prepared whatever the batch size (a new shape
/// per size would be parsed afresh each time). 14 parameters a row: 512
/// rows stay under both dialects' limits.
const INSERT_SIZES: [usize; 7] = [512, 128, 32, 8, 4, 2, 1];

/// Changed rows after which [`TaskStore::refresh_stats`] re-analyzes a table.
const STATS_MIN_CHANGES: i64 = 10_000;

const CFG_COLUMNS: &str = "task_type, schedule_limit, schedule_interval, max_processing_time, max_retry_num, \
     retry_interval, max_retry_interval, create_time, modify_time, owner_app, fair_by_user";

/// A registered type: its configuration and the app that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeRow {
    /// The configuration, as `/v1` shows it.
    pub cfg: TaskScheduleCfg,
    /// The app that registered it with auth on; `None`: open to every app.
    pub owner: Option<String>,
}

/// What set_task did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOutcome {
    /// The task took the worker's fields.
    Updated,
    /// The task was already final and was left alone.
    AlreadyFinal,
    /// No such task.
    Missing,
}

/// The first and last table positions of a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Positions {
    /// Oldest table that may hold unfinished tasks.
    pub begin: u32,
    /// Table new tasks go to.
    pub end: u32,
}

/// What [`TaskStore::register`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// The type is registered; its table positions.
    Registered(Positions),
    /// The type has a cfg already; nothing was written.
    Exists,
    /// A registered type differs from this one only in letter case (table
    /// names are case-insensitive on SQLite); nothing was written.
    CaseClash {
        /// The registered type.
        existing: String,
    },
}

/// Task configuration, positions and task tables over a [`Database`].
#[derive(Debug, Clone)]
pub struct TaskStore {
    db: Database,
}

impl TaskStore {
    /// The store over `db` (whose cfg and pos tables the migrations made).
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// DDL of a task table and its indexes.
    fn create_table_sql(&self, task_type: &str, pos: u32) -> Vec<String> {
        let t = table_name(task_type, pos);
        let id = match &self.db {
            Database::Postgres(_) => "id BIGSERIAL PRIMARY KEY",
            Database::Sqlite { .. } => "id INTEGER PRIMARY KEY AUTOINCREMENT",
            Database::Mysql(_) => return create_table_mysql(&t),
        };
        vec![
            format!(
                "CREATE TABLE IF NOT EXISTS \"{t}\" (\
                 {id}, user_id TEXT NOT NULL DEFAULT '', task_id TEXT NOT NULL, task_type TEXT NOT NULL, \
                 task_stage TEXT NOT NULL DEFAULT '', status BIGINT NOT NULL, priority BIGINT NOT NULL DEFAULT 0, \
                 crt_retry_num BIGINT NOT NULL DEFAULT 0, max_retry_num BIGINT NOT NULL DEFAULT 0, \
                 max_retry_interval BIGINT NOT NULL DEFAULT 0, schedule_log TEXT NOT NULL DEFAULT '', \
                 task_context TEXT NOT NULL DEFAULT '', order_time BIGINT NOT NULL, \
                 create_time BIGINT NOT NULL, modify_time BIGINT NOT NULL)"
            ),
            format!("CREATE UNIQUE INDEX IF NOT EXISTS \"{t}_task_id\" ON \"{t}\" (task_id)"),
            format!("CREATE INDEX IF NOT EXISTS \"{t}_status_order\" ON \"{t}\" (status, order_time)"),
        ]
    }

    async fn create_table(&self, task_type: &str, pos: u32) -> Result<()> {
        for sql in self.create_table_sql(task_type, pos) {
            on_db!(&self.db, write, pool => sqlx::query(&sql).execute(pool).await?.rows_affected());
        }
        Ok(())
    }

    /// Registers a new type: its cfg row, its pos row (1, 1) and the task
    /// table at its end position, owned by `owner`. A type that has a cfg
    /// row already is left as it is ([`Registration::Exists`]); its cfg
    /// changes only through [`set_cfg`](Self::set_cfg).
    pub async fn register(&self, cfg: &TaskScheduleCfg, owner: Option<&str>, now_ms: i64) -> Result<Registration> {
        let clash = on_db!(&self.db, read, pool => sqlx::query(&pool.sql(
            "SELECT task_type FROM t_schedule_cfg WHERE lower(task_type) = lower($1) AND task_type <> $2 LIMIT 1"))
            .bind(&cfg.task_type).bind(&cfg.task_type).fetch_optional(pool).await?
            .as_ref().map(|row| text(row, "task_type")).transpose()?);
        if let Some(existing) = clash {
            return Ok(Registration::CaseClash { existing });
        }
        if self.cfg(&cfg.task_type).await?.is_some() {
            return Ok(Registration::Exists);
        }
        // The table first: the governor sees a type once its pos row exists.
        if self.positions(&cfg.task_type).await?.is_none() {
            self.create_table(&cfg.task_type, 1).await?;
        }
        // Insert-if-absent: a type registered meanwhile keeps its cfg.
        let insert = match &self.db {
            Database::Mysql(_) => format!(
                "INSERT IGNORE INTO t_schedule_cfg ({CFG_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            ),
            _ => format!(
                "INSERT INTO t_schedule_cfg ({CFG_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 ON CONFLICT (task_type) DO NOTHING"
            ),
        };
        let written = on_db!(&self.db, write, pool => sqlx::query(&pool.sql(&insert))
            .bind(&cfg.task_type).bind(cfg.schedule_limit).bind(cfg.schedule_interval)
            .bind(cfg.max_processing_time).bind(cfg.max_retry_num).bind(cfg.retry_interval)
            .bind(cfg.max_retry_interval).bind(now_ms).bind(now_ms).bind(owner).bind(cfg.fair_by_user.unwrap_or(false))
            .execute(pool).await?.rows_affected());
        if written == 0 {
            // Another register of the same type won the race.
            return Ok(Registration::Exists);
        }
        let insert_pos = match &self.db {
            Database::Mysql(_) => {
                "INSERT INTO t_schedule_pos (task_type, schedule_begin_pos, schedule_end_pos, create_time, modify_time) \
                 VALUES ($1, 1, 1, $2, $3) ON DUPLICATE KEY UPDATE task_type = task_type"
            }
            _ => {
                "INSERT INTO t_schedule_pos (task_type, schedule_begin_pos, schedule_end_pos, create_time, modify_time) \
                 VALUES ($1, 1, 1, $2, $3) ON CONFLICT (task_type) DO NOTHING"
            }
        };
        on_db!(&self.db, write, pool => sqlx::query(&pool.sql(insert_pos))
            .bind(&cfg.task_type).bind(now_ms).bind(now_ms).execute(pool).await?.rows_affected());
        let positions = self.positions(&cfg.task_type).await?;
        let positions =
            positions.ok_or_else(|| Error::Corrupt(format!("t_schedule_pos: no row for {}", cfg.task_type)))?;
        Ok(Registration::Registered(positions))
    }

    /// Overwrites the cfg of a registered type with `cfg` (every field as
    /// given; `fair_by_user` `None` keeps it) and stamps its modify_time;
    /// the owner stays. Returns `false`, writing nothing, if the type has
    /// no cfg row.
    pub async fn set_cfg(&self, cfg: &TaskScheduleCfg, now_ms: i64) -> Result<bool> {
        let written = on_db!(&self.db, write, pool => sqlx::query(&pool.sql(
            "UPDATE t_schedule_cfg SET schedule_limit = $1, schedule_interval = $2, max_processing_time = $3, \
             max_retry_num = $4, retry_interval = $5, max_retry_interval = $6, \
             fair_by_user = COALESCE($7, fair_by_user), modify_time = $8 WHERE task_type = $9"))
            .bind(cfg.schedule_limit).bind(cfg.schedule_interval)
            .bind(cfg.max_processing_time).bind(cfg.max_retry_num).bind(cfg.retry_interval)
            .bind(cfg.max_retry_interval).bind(cfg.fair_by_user).bind(now_ms).bind(&cfg.task_type)
            .execute(pool).await?.rows_affected());
        Ok(written > 0)
    }

    /// Every type, by type.
    pub async fn cfgs(&self) -> Result<Vec<TypeRow>> {
        let sql = format!("SELECT {CFG_COLUMNS} FROM t_schedule_cfg ORDER BY task_type");
        on_db!(&self.db, read, pool => sqlx::query(&sql).fetch_all(pool).await?.iter().map(type_from_row).collect())
    }

    /// One type.
    pub async fn cfg(&self, task_type: &str) -> Result<Option<TypeRow>> {
        let sql = format!("SELECT {CFG_COLUMNS} FROM t_schedule_cfg WHERE task_type = $1");
        on_db!(&self.db, read, pool => sqlx::query(&pool.sql(&sql)).bind(task_type).fetch_optional(pool).await?
            .as_ref().map(type_from_row).transpose())
    }

    /// One type's table positions.
    pub async fn positions(&self, task_type: &str) -> Result<Option<Positions>> {
        let sql = "SELECT schedule_begin_pos, schedule_end_pos FROM t_schedule_pos WHERE task_type = $1";
        let row: Option<(i64, i64)> =
            on_db!(&self.db, read, pool => sqlx::query_as(&pool.sql(sql)).bind(task_type).fetch_optional(pool).await?);
        Ok(row.map(|(begin, end)| Positions { begin: begin as u32, end: end as u32 }))
    }

    /// Inserts new tasks of one type into its table at `pos`, in one
    /// transaction; a task whose id exists already is left as it is.
    pub async fn insert(&self, task_type: &str, pos: u32, tasks: &[TaskData], now_ms: i64) -> Result<()> {
        if tasks.is_empty() {
            return Ok(());
        }
        let head = format!(
            "INSERT INTO \"{}\" (user_id, task_id, task_type, task_stage, status, priority, crt_retry_num, \
             max_retry_num, max_retry_interval, schedule_log, task_context, order_time, create_time, modify_time) ",
            table_name(task_type, pos)
        );
        let (head, suffix) = match &self.db {
            Database::Postgres(pool) => return conflict::retry(|| insert_unnest(pool, &head, tasks, now_ms)).await,
            Database::Mysql(_) => (head.replacen("INSERT INTO", "INSERT IGNORE INTO", 1), ""),
            Database::Sqlite { .. } => (head, " ON CONFLICT (task_id) DO NOTHING"),
        };
        // SQLite and MySQL: the batch in one transaction, split into
        // statements of the [`INSERT_SIZES`] shapes; a conflict's loser
        // runs again (PostgreSQL's one statement too).
        conflict::retry(|| async {
            on_db!(&self.db, write, pool => {
                let mut tx = pool.begin().await?;
                let mut rest = tasks;
                while !rest.is_empty() {
                    let size = INSERT_SIZES.into_iter().find(|&n| n <= rest.len()).unwrap_or(1);
                    let (chunk, tail) = rest.split_at(size);
                    rest = tail;
                    let mut qb = QueryBuilder::new(head.as_str());
                    qb.push_values(chunk, |mut b, t| {
                        b.push_bind(&t.user_id)
                            .push_bind(&t.task_id)
                            .push_bind(&t.task_type)
                            .push_bind(&t.task_stage)
                            .push_bind(i64::from(t.status))
                            .push_bind(t.priority.unwrap_or(0))
                            .push_bind(t.crt_retry_num)
                            .push_bind(t.max_retry_num)
                            .push_bind(t.max_retry_interval)
                            .push_bind(&t.schedule_log)
                            .push_bind(&t.context)
                            .push_bind(t.order_time)
                            .push_bind(now_ms)
                            .push_bind(now_ms);
                    });
                    qb.push(suffix);
                    qb.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(())
            })
        })
        .await
    }

    /// Whether the table at `pos` has a pending task due by `now_s`: a
    /// cheap read that spares the writer an empty hold.
    async fn has_due(&self, task_type: &str, pos: u32, now_s: i64) -> Result<bool> {
        let sql = format!(
            "SELECT 1 FROM \"{}\" WHERE status = {} AND order_time <= $1 LIMIT 1",
            table_name(task_type, pos),
            TaskStatus::Pending.code()
        );
        let found: Option<i32> =
            on_db!(&self.db, read, pool => sqlx::query_scalar(&pool.sql(&sql)).bind(now_s).fetch_optional(pool).await?);
        Ok(found.is_some())
    }

    /// Claims up to `limit` due pending tasks from the tables `pos`, oldest
    /// order_time first, and returns them as claimed (status processing).
    pub async fn hold(&self, task_type: &str, pos: Positions, limit: u32, now_ms: i64) -> Result<Vec<TaskData>> {
        self.hold_in_order(task_type, pos, limit, false, now_ms).await
    }

    /// Claims up to `limit` due pending tasks from the tables `pos`
    /// round-robin across user_ids: every user's oldest due task, oldest
    /// first, then every user's second, and so on (a user's k-th task waits
    /// for at most k of each other user's, however many they have queued).
    /// Returns them as claimed, in that order. The tables are taken in turn, as by
    /// [`hold`](Self::hold): the rounds are per table.
    pub async fn hold_fair_by_user(
        &self,
        task_type: &str,
        pos: Positions,
        limit: u32,
        now_ms: i64,
    ) -> Result<Vec<TaskData>> {
        self.hold_in_order(task_type, pos, limit, true, now_ms).await
    }

    async fn hold_in_order(
        &self,
        task_type: &str,
        pos: Positions,
        limit: u32,
        fair: bool,
        now_ms: i64,
    ) -> Result<Vec<TaskData>> {
        let now_s = now_ms.div_euclid(1_000);
        let lock = if matches!(self.db, Database::Postgres(_)) { " FOR UPDATE SKIP LOCKED" } else { "" };
        let mut held = Vec::new();
        for p in pos.begin..=pos.end {
            let want = limit as usize - held.len();
            if want == 0 {
                break;
            }
            // MySQL's oldest-first hold begins with a plain read of what is due.
            let reads_first = matches!(self.db, Database::Mysql(_)) && !fair;
            if !reads_first && !self.has_due(task_type, p, now_s).await? {
                continue;
            }
            let t = table_name(task_type, p);
            match &self.db {
                Database::Mysql(pool) if fair => {
                    held.extend(conflict::retry(|| hold_fair_mysql(pool, &t, want, now_ms)).await?);
                    continue;
                }
                Database::Mysql(pool) => {
                    held.extend(conflict::retry(|| hold_mysql(pool, &t, want, now_ms)).await?);
                    continue;
                }
                Database::Postgres(pool) if fair => {
                    held.extend(conflict::retry(|| hold_fair_postgres(pool, &t, want, now_ms)).await?);
                    continue;
                }
                Database::Sqlite { write, read } if fair => {
                    held.extend(hold_fair_sqlite(write, read, &t, want, now_ms).await?);
                    continue;
                }
                _ => {}
            }
            let sql = format!(
                "UPDATE \"{t}\" SET status = {processing}, modify_time = $1 WHERE id IN (\
                 SELECT id FROM \"{t}\" WHERE status = {pending} AND order_time <= $2 \
                 ORDER BY order_time LIMIT $3{lock}) RETURNING {TASK_COLUMNS}",
                processing = TaskStatus::Processing.code(),
                pending = TaskStatus::Pending.code(),
            );
            let mut rows = conflict::retry(|| async {
                on_db!(&self.db, write, pool => sqlx::query(&sql).bind(now_ms).bind(now_s)
                    .bind(want as i64).fetch_all(pool).await?.iter().map(task_from_row).collect::<Result<Vec<_>>>())
            })
            .await?;
            rows.sort_by_key(|t| t.data.order_time);
            held.extend(rows.into_iter().map(|t| t.data));
        }
        Ok(held)
    }

    /// One task, from the table at `pos`.
    pub async fn get(&self, task_type: &str, pos: u32, task_id: &str) -> Result<Option<StoredTask>> {
        let sql = format!("SELECT {TASK_COLUMNS} FROM \"{}\" WHERE task_id = $1", table_name(task_type, pos));
        on_db!(&self.db, read, pool => sqlx::query(&pool.sql(&sql)).bind(task_id).fetch_optional(pool).await?
            .as_ref().map(task_from_row).transpose())
    }

    /// set_task: writes the fields of `update` that are set (non-zero,
    /// non-empty; `order_time` as sent) unless the task is final.
    pub async fn set(&self, task_type: &str, pos: u32, update: &TaskData, now_ms: i64) -> Result<SetOutcome> {
        let t = table_name(task_type, pos);
        // The builder is dialect-typed: the same statement is built for each.
        // One statement: a conflict's loser runs again.
        let outcome = conflict::retry(|| async {
            Ok(on_db!(&self.db, write, pool => {
                let mut qb = QueryBuilder::new(format!("UPDATE \"{t}\" SET modify_time = "));
                qb.push_bind(now_ms);
                let text = |qb: &mut QueryBuilder<_>, col: &str, v: &String| {
                    if !v.is_empty() {
                        qb.push(format!(", {col} = ")).push_bind(v.clone());
                    }
                };
                text(&mut qb, "user_id", &update.user_id);
                text(&mut qb, "task_stage", &update.task_stage);
                text(&mut qb, "schedule_log", &update.schedule_log);
                text(&mut qb, "task_context", &update.context);
                let num = |qb: &mut QueryBuilder<_>, col: &str, v: i64| {
                    if v != 0 {
                        qb.push(format!(", {col} = ")).push_bind(v);
                    }
                };
                num(&mut qb, "status", i64::from(update.status));
                num(&mut qb, "priority", update.priority.unwrap_or(0));
                num(&mut qb, "crt_retry_num", update.crt_retry_num);
                num(&mut qb, "max_retry_num", update.max_retry_num);
                num(&mut qb, "max_retry_interval", update.max_retry_interval);
                num(&mut qb, "order_time", update.order_time);
                qb.push(" WHERE task_id = ").push_bind(update.task_id.clone());
                qb.push(format!(" AND status NOT IN ({}, {})", TaskStatus::Success.code(), TaskStatus::Failed.code()));
                qb.build().execute(pool).await?.rows_affected()
            }))
        })
        .await?;
        if outcome > 0 {
            return Ok(SetOutcome::Updated);
        }
        Ok(match self.get(task_type, pos, &update.task_id).await? {
            Some(_) => SetOutcome::AlreadyFinal,
            None => SetOutcome::Missing,
        })
    }

    /// Tasks of the tables `pos`, oldest order_time first, with `status` (any when `None`).
    pub async fn list(
        &self,
        task_type: &str,
        pos: Positions,
        status: Option<i32>,
        due_by_s: i64,
        limit: u32,
    ) -> Result<Vec<TaskData>> {
        let mut out = Vec::new();
        for p in pos.begin..=pos.end {
            let want = limit as usize - out.len();
            if want == 0 {
                break;
            }
            let filter = status.map(|s| format!("AND status = {s}")).unwrap_or_default();
            let sql = format!(
                "SELECT {TASK_COLUMNS} FROM \"{}\" WHERE order_time <= $1 {filter} ORDER BY order_time LIMIT $2",
                table_name(task_type, p)
            );
            let rows = on_db!(&self.db, read, pool => sqlx::query(&pool.sql(&sql)).bind(due_by_s).bind(want as i64).fetch_all(pool).await?
                .iter().map(task_from_row).collect::<Result<Vec<_>>>()?);
            out.extend(rows.into_iter().map(|t| t.data));
        }
        Ok(out)
    }

    /// Tasks of a type in every table up to `end`.
    pub async fn count(&self, task_type: &str, end: u32) -> Result<i64> {
        let mut total = 0;
        for p in 1..=end {
            let sql = format!("SELECT COUNT(*) FROM \"{}\"", table_name(task_type, p));
            let n: i64 = on_db!(&self.db, read, pool => sqlx::query_scalar(&sql).fetch_one(pool).await?);
            total += n;
        }
        Ok(total)
    }

    /// Tasks of a type in every table up to `end`, by status code.
    pub async fn count_by_status(&self, task_type: &str, end: u32) -> Result<Vec<(i64, i64)>> {
        let mut counts = std::collections::BTreeMap::new();
        for p in 1..=end {
            let sql = format!("SELECT status, COUNT(*) FROM \"{}\" GROUP BY status", table_name(task_type, p));
            let rows: Vec<(i64, i64)> = on_db!(&self.db, read, pool => sqlx::query_as(&sql).fetch_all(pool).await?);
            for (status, n) in rows {
                *counts.entry(status).or_insert(0) += n;
            }
        }
        Ok(counts.into_iter().collect())
    }

    /// Processing tasks of the table at `pos` last touched before `cutoff_ms`.
    pub async fn timed_out(&self, task_type: &str, pos: u32, cutoff_ms: i64, limit: u32) -> Result<Vec<StoredTask>> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM \"{}\" WHERE status = {} AND modify_time < $1 ORDER BY modify_time LIMIT $2",
            table_name(task_type, pos),
            TaskStatus::Processing.code()
        );
        on_db!(&self.db, read, pool => sqlx::query(&pool.sql(&sql)).bind(cutoff_ms).bind(i64::from(limit)).fetch_all(pool).await?
            .iter().map(task_from_row).collect())
    }

    /// Writes a timed-out task's retry (status, counts, order_time) if it
    /// is still processing and untouched since `seen_modify_ms`.
    pub async fn requeue(&self, pos: u32, task: &TaskData, seen_modify_ms: i64, now_ms: i64) -> Result<bool> {
        let sql = format!(
            "UPDATE \"{}\" SET status = $1, crt_retry_num = $2, max_retry_interval = $3, order_time = $4, \
             schedule_log = $5, modify_time = $6 WHERE task_id = $7 AND status = {} AND modify_time = $8",
            table_name(&task.task_type, pos),
            TaskStatus::Processing.code()
        );
        let done = on_db!(&self.db, write, pool => sqlx::query(&pool.sql(&sql)).bind(i64::from(task.status))
            .bind(task.crt_retry_num).bind(task.max_retry_interval).bind(task.order_time).bind(&task.schedule_log)
            .bind(now_ms).bind(&task.task_id).bind(seen_modify_ms).execute(pool).await?.rows_affected());
        Ok(done > 0)
    }

    /// Rows ever inserted into the table at `pos` (its highest id): O(1),
    /// and what rolling is about.
    pub async fn rows(&self, task_type: &str, pos: u32) -> Result<i64> {
        let sql = format!("SELECT COALESCE(MAX(id), 0) FROM \"{}\"", table_name(task_type, pos));
        Ok(on_db!(&self.db, read, pool => sqlx::query_scalar::<_, i64>(&sql).fetch_one(pool).await?))
    }

    /// On PostgreSQL, refreshes the planner's statistics of the table at
    /// `pos` when many rows changed since they were taken; returns whether
    /// it did. Autovacuum does the same, but up to a minute later, and a
    /// burst of creates meanwhile makes the planner trade the hold's index
    /// scan for a sort of the whole table. SQLite's planner needs none.
    pub async fn refresh_stats(&self, task_type: &str, pos: u32) -> Result<bool> {
        let Database::Postgres(pool) = &self.db else { return Ok(false) };
        let t = table_name(task_type, pos);
        let stale: Option<bool> = sqlx::query_scalar(
            "SELECT n_mod_since_analyze > $2 AND n_mod_since_analyze > n_live_tup / 5 \
             FROM pg_stat_user_tables WHERE relname = $1 AND schemaname = current_schema()",
        )
        .bind(&t)
        .bind(STATS_MIN_CHANGES)
        .fetch_optional(pool)
        .await?;
        if stale != Some(true) {
            return Ok(false);
        }
        // SKIP_LOCKED: a table a VACUUM holds is analyzed on a later pass.
        sqlx::query(&format!("ANALYZE (SKIP_LOCKED) \"{t}\"")).execute(pool).await?;
        Ok(true)
    }

    /// Rolls a type to a new table after `end`: creates it, then moves the
    /// end position if it is still `end`.
    pub async fn roll(&self, task_type: &str, end: u32, now_ms: i64) -> Result<bool> {
        self.create_table(task_type, end + 1).await?;
        let sql = "UPDATE t_schedule_pos SET schedule_end_pos = $1, modify_time = $2 \
                   WHERE task_type = $3 AND schedule_end_pos = $4";
        let done = on_db!(&self.db, write, pool => sqlx::query(&pool.sql(sql)).bind(i64::from(end) + 1).bind(now_ms)
            .bind(task_type).bind(i64::from(end)).execute(pool).await?.rows_affected());
        Ok(done > 0)
    }

    /// Whether every task in the table at `pos` is final.
    pub async fn all_final(&self, task_type: &str, pos: u32) -> Result<bool> {
        let sql = format!(
            "SELECT 1 FROM \"{}\" WHERE status IN ({}, {}) LIMIT 1",
            table_name(task_type, pos),
            TaskStatus::Pending.code(),
            TaskStatus::Processing.code()
        );
        let open: Option<i32> = on_db!(&self.db, read, pool => sqlx::query_scalar(&sql).fetch_optional(pool).await?);
        Ok(open.is_none())
    }

    /// Moves a type's begin position from `begin` to `begin + 1` if it is still `begin`.
    pub async fn advance_begin(&self, task_type: &str, begin: u32, now_ms: i64) -> Result<bool> {
        let sql = "UPDATE t_schedule_pos SET schedule_begin_pos = $1, modify_time = $2 \
                   WHERE task_type = $3 AND schedule_begin_pos = $4 AND schedule_end_pos > $5";
        let done = on_db!(&self.db, write, pool => sqlx::query(&pool.sql(sql)).bind(i64::from(begin) + 1).bind(now_ms)
            .bind(task_type).bind(i64::from(begin)).bind(i64::from(begin)).execute(pool).await?.rows_affected());
        Ok(done > 0)
    }
}

/// PostgreSQL: the batch as one column array per field, in one statement
/// of one shape whatever the batch size (one round trip, one plan).
async fn insert_unnest(pool: &sqlx::PgPool, head: &str, tasks: &[TaskData], now_ms: i64) -> Result<()> {
    let text = |f: fn(&TaskData) -> &String| tasks.iter().map(|t| f(t).clone()).collect::<Vec<_>>();
    let int = |f: fn(&TaskData) -> i64| tasks.iter().map(f).collect::<Vec<_>>();
    let sql = format!(
        "{head}SELECT u.*, $13, $13 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
         $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::bigint[]) AS u \
         ON CONFLICT (task_id) DO NOTHING"
    );
    sqlx::query(&sql)
        .bind(text(|t| &t.user_id))
        .bind(text(|t| &t.task_id))
        .bind(text(|t| &t.task_type))
        .bind(text(|t| &t.task_stage))
        .bind(int(|t| i64::from(t.status)))
        .bind(int(|t| t.priority.unwrap_or(0)))
        .bind(int(|t| t.crt_retry_num))
        .bind(int(|t| t.max_retry_num))
        .bind(int(|t| t.max_retry_interval))
        .bind(text(|t| &t.schedule_log))
        .bind(text(|t| &t.context))
        .bind(int(|t| t.order_time))
        .bind(now_ms)
        .execute(pool)
        .await?;
    Ok(())
}

/// PostgreSQL: the fair hold of table `t` ([`FAIR_ORDER`]), one statement.
/// Only the rows of `h` are locked (`SKIP LOCKED`, as an oldest-first hold).
async fn hold_fair_postgres(pool: &sqlx::PgPool, t: &str, want: usize, now_ms: i64) -> Result<Vec<TaskData>> {
    let sql = format!(
        "UPDATE \"{t}\" SET status = {processing}, modify_time = $1 WHERE id IN (\
         SELECT h.id FROM {from} ORDER BY {FAIR_ORDER} LIMIT $5 FOR UPDATE OF h SKIP LOCKED) \
         RETURNING id, {TASK_COLUMNS}",
        processing = TaskStatus::Processing.code(),
        from = fair_candidates(t, ["$2", "$3", "$4"]),
    );
    let rows = sqlx::query(&sql)
        .bind(now_ms)
        .bind(now_ms.div_euclid(1_000))
        .bind(want as i64)
        .bind(fair_candidate_cap(want))
        .bind(want as i64)
        .fetch_all(pool)
        .await?;
    Ok(fair_order(rows.iter().map(|row| Ok((row.try_get("id")?, task_from_row(row)?.data))).collect::<Result<_>>()?))
}

fn type_from_row<'r, R>(row: &'r R) -> Result<TypeRow>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let cfg = TaskScheduleCfg {
        task_type: text(row, "task_type")?,
        schedule_limit: row.try_get("schedule_limit")?,
        schedule_interval: row.try_get("schedule_interval")?,
        max_processing_time: row.try_get("max_processing_time")?,
        max_retry_num: row.try_get("max_retry_num")?,
        retry_interval: row.try_get("retry_interval")?,
        max_retry_interval: row.try_get("max_retry_interval")?,
        fair_by_user: Some(row.try_get("fair_by_user")?),
        create_time: Some(rfc3339(row.try_get("create_time")?)),
        modify_time: Some(rfc3339(row.try_get("modify_time")?)),
    };
    Ok(TypeRow { cfg, owner: opt_text(row, "owner_app")? })
}
