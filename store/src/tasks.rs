//! The asyncflow task tables (`t_schedule_cfg`, `t_schedule_pos` and one
//! table per type and position) on [`Database`]: what the task engine may
//! ask of SQL. The engine keeps the rules; this keeps the statements.
//!
//! Statements are written once (see [`crate::db`]). What differs per
//! backend comes from its driver (`crate::driver`): the DDL of a new
//! task table and the insert-if-absent texts (`Statements`), the batch
//! insert and the holds (SQLite needs no lock: every write goes through
//! its one writer connection, so a hold is one atomic statement;
//! PostgreSQL locks with `FOR UPDATE SKIP LOCKED`; MySQL, with no `UPDATE
//! ... RETURNING`, locks, updates and returns in a transaction), and
//! PostgreSQL's planner statistics.
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

use crate::backend::on_driver;
use crate::db::on_db;
use crate::driver::{Dialect, Driver};
use crate::sql::tasks::{task_from_row, StoredTask, CFG_COLUMNS, TASK_COLUMNS};
use crate::sql::{opt_text, text};
use crate::{conflict, Database, Error, Result};

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

    async fn create_table(&self, task_type: &str, pos: u32) -> Result<()> {
        for sql in (self.db.statements().task_table)(&table_name(task_type, pos)) {
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
        let insert = self.db.statements().insert_task_type;
        let written = on_db!(&self.db, write, pool => sqlx::query(&pool.sql(insert))
            .bind(&cfg.task_type).bind(cfg.schedule_limit).bind(cfg.schedule_interval)
            .bind(cfg.max_processing_time).bind(cfg.max_retry_num).bind(cfg.retry_interval)
            .bind(cfg.max_retry_interval).bind(now_ms).bind(now_ms).bind(owner).bind(cfg.fair_by_user.unwrap_or(false))
            .execute(pool).await?.rows_affected());
        if written == 0 {
            // Another register of the same type won the race.
            return Ok(Registration::Exists);
        }
        let insert_pos = self.db.statements().insert_task_positions;
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
        // One statement (PostgreSQL) or one transaction: a conflict's
        // loser runs again.
        let t = table_name(task_type, pos);
        conflict::retry(|| async { on_driver!(&self.db, d => d.insert_tasks(&t, tasks, now_ms).await) }).await
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
        let mut held = Vec::new();
        for p in pos.begin..=pos.end {
            let want = limit as usize - held.len();
            if want == 0 {
                break;
            }
            let t = table_name(task_type, p);
            // One statement or one transaction: a conflict's loser runs again.
            held.extend(
                conflict::retry(|| async { on_driver!(&self.db, d => d.hold_tasks(&t, want, fair, now_ms).await) })
                    .await?,
            );
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

    /// Refreshes the planner's statistics of the table at `pos` when many
    /// rows changed since they were taken (on PostgreSQL); returns whether
    /// it did. Autovacuum does the same, but up to a minute later, and a
    /// burst of creates meanwhile makes the planner trade the hold's index
    /// scan for a sort of the whole table. SQLite's planner needs none.
    pub async fn refresh_stats(&self, task_type: &str, pos: u32) -> Result<bool> {
        let t = table_name(task_type, pos);
        on_driver!(&self.db, d => d.refresh_task_stats(&t).await)
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
