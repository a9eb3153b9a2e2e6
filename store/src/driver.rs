//! The driver interface: what each SQL backend does its own way.
//!
//! The repositories (`timers`, `fires`, `tasks`, ...) are written once and
//! never ask which database they run on. A statement that reads the same
//! everywhere is run through [`on_db!`](crate::db::on_db) or `on_tx!`,
//! its text passed through [`Dialect::sql`]. What differs comes from the
//! backend, in three parts, each implemented once per backend folder
//! (`sqlite`, `postgres`, `mysql`):
//!
//! - [`Dialect`], on the backend's pool and connection types: how it reads
//!   a shared statement, and its [`Statements`]: the texts that differ
//!   (an insert-or-ignore, a lock clause, an upsert).
//! - [`Driver`], on the backend's driver (its pools): whole operations
//!   written its own way (a batch insert, a claim, a hold).
//! - [`TxDriver`], on the backend's connection: the same inside a
//!   transaction the repository holds.
//!
//! `backend` hands a repository the driver of its [`Database`](crate::Database)
//! (`on_driver!`); the conformance suite (`store/tests/it`) runs every
//! repository on every backend.

use std::borrow::Cow;

use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::load::Load;
use xtimer_core::node::NodeInfo;
use xtimer_core::task::TaskData;
use xtimer_core::timer::{NewTimer, Timer};

use crate::change::HistoryEntry;
use crate::repo::{ClaimOutcome, FireResult, NewFire, NextRun, PartitionReport, PlannedFire};
use crate::sql::notify::{OwedRow, Owing, Taking};
use crate::sql::{self, Claimant};
use crate::Result;

/// How a backend reads a shared statement, and its own statement texts.
/// Implemented on each backend's pool and connection types.
pub(crate) trait Dialect {
    /// `text` (with `$n` placeholders) as this backend reads it.
    fn sql<'s>(&self, text: &'s str) -> Cow<'s, str>;

    /// This backend's texts of the statements that differ.
    fn statements(&self) -> &'static Statements;
}

/// Implements [`Dialect`] on a backend's pool and connection types:
/// `$read` makes a shared statement's text this backend's (`Cow::Borrowed`
/// where it reads them as written), `$statements` its [`Statements`].
macro_rules! dialect {
    ($read:expr, $statements:path => $($t:ty),+) => {$(
        impl $crate::driver::Dialect for $t {
            fn sql<'s>(&self, text: &'s str) -> std::borrow::Cow<'s, str> {
                $read(text)
            }

            fn statements(&self) -> &'static $crate::driver::Statements {
                &$statements
            }
        }
    )+};
}
pub(crate) use dialect;

/// The statement texts (and text builders) that differ between backends,
/// one value per backend (`sqlite::STATEMENTS`, ...). A text shared by two
/// backends is written once in `sql` and named by both.
pub(crate) struct Statements {
    /// Starts an insert that skips a row whose unique key is taken:
    /// `INSERT`, ended by [`skip_taken`](Self::skip_taken), or MySQL's
    /// `INSERT IGNORE`.
    pub(crate) insert_skipping: &'static str,
    /// Ends an insert begun with [`insert_skipping`](Self::insert_skipping),
    /// on the unique key of the columns given: ` ON CONFLICT (...) DO
    /// NOTHING`, or nothing on MySQL.
    pub(crate) skip_taken: fn(&str) -> String,
    /// An app's usage row, locked for the transaction where reads lock.
    pub(crate) read_usage: &'static str,
    /// Ends the read of many apps' usage rows: in app order and locked,
    /// where reads lock.
    pub(crate) lock_usages: &'static str,
    /// Whether reads lock rows (`FOR UPDATE`); SQLite's do not: its one
    /// writer keeps every other out.
    pub(crate) reads_lock: bool,
    /// Ends a batch insert of usage counts: a taken app's go up by the row's.
    pub(crate) add_usage_counts: &'static str,
    /// Ends a batch insert of minute fires: a taken minute's go up by the
    /// row's.
    pub(crate) add_minute_fires: &'static str,
    /// Whether an upsert binds the values it updates again after its
    /// row's (MySQL 8 and MariaDB share no other way to name the new row).
    pub(crate) upsert_rebinds: bool,
    /// Gives an app a secret unless it has one: binds app, secret, time.
    pub(crate) insert_secret: &'static str,
    /// Creates or replaces a calendar: binds app, name, spec, create and
    /// modify times (and, where [`upsert_rebinds`](Self::upsert_rebinds),
    /// spec and modify time again).
    pub(crate) upsert_calendar: &'static str,
    /// Sets a flow's limits, replacing its row: binds app, key, rate,
    /// parallelism, paused, modify time (and, where
    /// [`upsert_rebinds`](Self::upsert_rebinds), the last four again).
    pub(crate) upsert_flow_limit: &'static str,
    /// Deletes at most `limit` rows of `table` that meet `condition`
    /// (binding `$1` at most), by their unique `key`: MySQL's `DELETE ...
    /// LIMIT`, elsewhere a bounded subquery of keys.
    pub(crate) delete_some: fn(table: &str, key: &str, condition: &str, limit: u32) -> String,
    /// Ends the insert of a `t_timer_stats` row marked stale: on a taken
    /// key, the stored row's `stale` goes up by one.
    pub(crate) mark_hour_stale: &'static str,
    /// A manual fire (triggerTimer) unless the timer has a fire at that
    /// time: binds the timer, its app, the run time and the create and
    /// modify times.
    pub(crate) insert_manual_fire: &'static str,
    /// DDL of task table `t` and its indexes.
    pub(crate) task_table: fn(&str) -> Vec<String>,
    /// Registers a task type unless it has a cfg row: binds
    /// `sql::tasks::CFG_COLUMNS` in order.
    pub(crate) insert_task_type: &'static str,
    /// A type's first positions (1, 1) unless it has some: binds the type
    /// and the create and modify times.
    pub(crate) insert_task_positions: &'static str,
}

/// Whole operations a backend writes its own way, on its pools.
pub(crate) trait Driver {
    /// Inserts pending fires, skipping keys that exist; how many it made.
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64>;

    /// Claims the pending fires of `keys` for `claimant` (running, leased),
    /// skipping those of timers not enabled; see `FireRepo::claim`.
    async fn claim_fires(&self, keys: &[FireKey], claimant: Claimant<'_>) -> Result<ClaimOutcome>;

    /// Takes over the fires `task_ids` whose claim ended (see
    /// `FireRepo::reclaim`).
    async fn reclaim_fires(
        &self,
        task_ids: &[i64],
        claimant: Claimant<'_>,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome>;

    /// Writes `results` (each fire at most once, none keeping an earlier
    /// attempt) in one statement with no transaction, where the backend can;
    /// `None` where it needs [`TxDriver::record_rows`] in a transaction.
    async fn record_alone(&self, results: &[FireResult], now_ms: i64) -> Result<Option<u64>>;

    /// Gives `claims` back (pending, no owner) where their owner still holds
    /// them, in one statement or one transaction; how many.
    async fn release_fires(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64>;

    /// Writes `node_id`'s heartbeat, then extends to `lease_until` the
    /// leases of `claims` still running under their owner token, in one
    /// transaction; their ids (see `FireRepo::confirm_claims`).
    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Vec<i64>>;

    /// Inserts a plan's fires whose timer still has the `modify_time` the
    /// plan read (see `crate::plan`); how many it made.
    async fn insert_planned_fires(&self, fires: &[PlannedFire], now_ms: i64) -> Result<u64>;

    /// Moves a plan's next fire positions, of timers that still have the
    /// `modify_time` the plan read.
    async fn set_planned_next_runs(&self, next: &[NextRun]) -> Result<()>;

    /// The timers of `ids` (not empty) that exist, in any order.
    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>>;

    /// A page of at most `limit` enabled timers due before `before_ms`
    /// (`window`: the due index's window after `before_ms`'s), see
    /// `sql::timers::DUE`.
    async fn due_timers(&self, window: i64, before_ms: i64, limit: u32) -> Result<Vec<Timer>>;

    /// Moves the next fire positions of timers (not empty) as given.
    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> Result<()>;

    /// Refreshes the planner's statistics of `t_timer` when they are stale,
    /// before a completion pass (PostgreSQL); nothing elsewhere.
    async fn refresh_planner_stats(&self) {}

    /// Takes the notifications owed whose lease lapsed (see
    /// `NotifyRepo::take_owed`).
    async fn take_owed(&self, taking: &Taking<'_>) -> Result<Vec<OwedRow>>;

    /// Writes `node`'s row (`shards`: its shards as JSON), made or updated.
    async fn heartbeat(&self, node: &NodeInfo, shards: &str) -> Result<()>;

    /// The database server's clock (Unix ms, UTC), where nodes share a
    /// server; `None` on SQLite.
    async fn database_now_ms(&self) -> Result<Option<i64>>;

    /// Writes history `entries` (not empty) on their own, in one statement
    /// or one transaction.
    async fn record_history(&self, entries: &[HistoryEntry]) -> Result<()>;

    /// Makes the partitions of `t_timer_task` ahead of `now_ms` and drops
    /// those older than `keep_ms`, where the backend partitions it
    /// (PostgreSQL); elsewhere `t_timer_task` is one table.
    async fn maintain_partitions(&self, _now_ms: i64, _keep_ms: i64) -> Result<PartitionReport> {
        Ok(PartitionReport::default())
    }

    /// Inserts `tasks` into task table `t` (quoted name, as
    /// `xtimer_core::task::table_name` makes it) in one statement or one
    /// transaction; a task whose id exists already is left as it is.
    async fn insert_tasks(&self, t: &str, tasks: &[TaskData], now_ms: i64) -> Result<()>;

    /// Claims up to `want` due pending tasks of table `t`, oldest
    /// order_time first, or round-robin across user_ids when `fair`
    /// (`sql::tasks::FAIR_ORDER`); returns them as claimed, in that order.
    async fn hold_tasks(&self, t: &str, want: usize, fair: bool, now_ms: i64) -> Result<Vec<TaskData>>;

    /// Refreshes the planner's statistics of task table `t` when many rows
    /// changed since they were taken; whether it did (a backend whose
    /// planner needs none never does).
    async fn refresh_task_stats(&self, _t: &str) -> Result<bool> {
        Ok(false)
    }
}

/// Operations a backend writes its own way inside a transaction the
/// repository holds; implemented on the backend's connection type.
pub(crate) trait TxDriver {
    /// Inserts `timers` (not empty; each with its load) in order, skipping
    /// any whose name a live timer of its app has; `(timer_id, app, name)`
    /// of each row made.
    async fn insert_timer_rows(
        &mut self,
        timers: &[(&NewTimer, Load)],
        now_ms: i64,
    ) -> Result<Vec<(i64, String, String)>>;

    /// Writes history `entries` inside the transaction of the change they
    /// note.
    async fn insert_history(&mut self, entries: &[HistoryEntry]) -> Result<()>;

    /// Stores the notifications `owing` owes; whether each was stored (one
    /// owed already is not).
    async fn owe_notifications(&mut self, owing: &Owing<'_>) -> Result<Vec<bool>>;

    /// Adds `fires` to `app`'s one-shot fires in `minute`.
    async fn add_minute_fires(&mut self, app: &str, minute: i64, fires: i64) -> Result<()>;

    /// Before `app`'s first count: whether this transaction is to count
    /// it. MySQL makes a placeholder row (or waits for another's) and
    /// holds it, and counts unless another transaction counted meanwhile;
    /// elsewhere always.
    async fn hold_uncounted_usage(&mut self, _app: &str) -> Result<bool> {
        Ok(true)
    }

    /// Stores `app`'s first counts (and its one-shots' minutes from
    /// `minute_from`), unless another transaction stored them first.
    async fn store_usage(&mut self, app: &str, timers: i64, cron_fpm: i64, minute_from: i64) -> Result<()>;

    /// The apps with an enabled deleteAfterRun one-shot that
    /// [`complete_fired_once`](Self::complete_fired_once) would delete, of
    /// `scope` when given: their usage is locked before the timers are.
    /// None where reads lock nothing (SQLite: one writer).
    async fn deleting_once_apps(&mut self, scope: Option<&[i64]>) -> Result<Vec<String>>;

    /// Ends the enabled timers with nothing left (`sql::timers::FINISHED`),
    /// of `scope` when given: completed, or deleted with deleteAfterRun;
    /// `(timer_id, app, new status)` of each.
    async fn complete_fired_once(&mut self, scope: Option<&[i64]>, now_ms: i64) -> Result<Vec<(i64, String, i64)>>;

    /// Writes `results` (each fire at most once) under their claims' owners.
    async fn record_rows(&mut self, results: &[FireResult], now_ms: i64) -> Result<u64>;
}

/// The statement texts of a backend that ends its inserts with
/// `ON CONFLICT` and names the new row `excluded` (SQLite, PostgreSQL):
/// `reads_lock`, whether its reads lock rows (`FOR UPDATE`, PostgreSQL);
/// `task_table`, the DDL of its task tables.
pub(crate) const fn on_conflict_statements(reads_lock: bool, task_table: fn(&str) -> Vec<String>) -> Statements {
    Statements {
        insert_skipping: "INSERT",
        skip_taken: sql::on_conflict_do_nothing,
        read_usage: if reads_lock { sql::usage::READ_USAGE_LOCKED } else { sql::usage::READ_USAGE },
        lock_usages: if reads_lock { " ORDER BY app FOR UPDATE" } else { "" },
        reads_lock,
        add_usage_counts: sql::usage::ADD_USAGE_COUNTS,
        add_minute_fires: sql::usage::ADD_MINUTE_FIRES,
        upsert_rebinds: false,
        insert_secret: "INSERT INTO t_app_secret (app, secret, create_time) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        upsert_calendar:
            "INSERT INTO t_calendar (app, name, spec, create_time, modify_time) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (app, name) DO UPDATE SET spec = excluded.spec, modify_time = excluded.modify_time",
        upsert_flow_limit: "INSERT INTO t_flow_limit (app, flow_key, rate_per_sec, parallelism, paused, modify_time)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (app, flow_key) DO UPDATE SET rate_per_sec = excluded.rate_per_sec,
             parallelism = excluded.parallelism, paused = excluded.paused, modify_time = excluded.modify_time",
        delete_some: sql::delete_by_key,
        mark_hour_stale: sql::MARK_HOUR_STALE,
        insert_manual_fire: sql::fires::INSERT_MANUAL,
        task_table,
        insert_task_type: sql::tasks::INSERT_TYPE,
        insert_task_positions: sql::tasks::INSERT_POSITIONS,
    }
}
