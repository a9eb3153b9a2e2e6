//! What the dialects' statements for task queues (holds, tables) share.

use const_format::formatcp;
use sqlx::{ColumnIndex, Decode, Row, Type};
use xtimer_core::task::{rfc3339, TaskData, TaskStatus};

use crate::sql::text;
use crate::{Error, Result};

/// Columns of `t_schedule_cfg`, in the order a registration binds them.
pub(crate) const CFG_COLUMNS: &str =
    "task_type, schedule_limit, schedule_interval, max_processing_time, max_retry_num, \
     retry_interval, max_retry_interval, create_time, modify_time, owner_app, fair_by_user";

/// Registers a task type unless it has a cfg row (SQLite, PostgreSQL).
pub(crate) const INSERT_TYPE: &str = formatcp!(
    "INSERT INTO t_schedule_cfg ({CFG_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (task_type) DO NOTHING"
);

/// The start of a type's first positions, (1, 1) (every backend).
pub(crate) const INSERT_POSITIONS_HEAD: &str =
    "INSERT INTO t_schedule_pos (task_type, schedule_begin_pos, schedule_end_pos, create_time, modify_time) \
     VALUES ($1, 1, 1, $2, $3)";

/// A type's first positions unless it has some (SQLite, PostgreSQL).
pub(crate) const INSERT_POSITIONS: &str = formatcp!("{INSERT_POSITIONS_HEAD} ON CONFLICT (task_type) DO NOTHING");

/// DDL of task table `t` and its indexes, with `id` as the id column's
/// definition (SQLite, PostgreSQL).
pub(crate) fn task_table(t: &str, id: &str) -> Vec<String> {
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

/// The start of an insert into task table `t`: its columns, in the order
/// [`insert_task_chunks!`] binds them.
pub(crate) fn insert_head(t: &str) -> String {
    format!(
        "INSERT INTO \"{t}\" (user_id, task_id, task_type, task_stage, status, priority, crt_retry_num, \
         max_retry_num, max_retry_interval, schedule_log, task_context, order_time, create_time, modify_time) "
    )
}

/// Rows per batch insert statement: a batch is split greedily into these,
/// so a few statement shapes stay prepared whatever the batch size (a new
/// shape per size would be parsed afresh each time). 14 parameters a row:
/// 512 rows stay under every backend's limit.
pub(crate) const INSERT_SIZES: [usize; 7] = [512, 128, 32, 8, 4, 2, 1];

/// Inserts `$tasks` on `$pool` in one transaction, in multi-row `VALUES`
/// statements of the [`INSERT_SIZES`] shapes: `$head` (an
/// [`insert_head`], maybe reworded), the rows, then `$suffix`.
macro_rules! insert_task_chunks {
    ($pool:expr, $head:expr, $suffix:expr, $tasks:expr, $now_ms:expr) => {{
        let (tasks, now_ms): (&[xtimer_core::task::TaskData], i64) = ($tasks, $now_ms);
        let mut tx = $pool.begin().await?;
        let mut rest = tasks;
        while !rest.is_empty() {
            let size = $crate::sql::tasks::INSERT_SIZES.into_iter().find(|&n| n <= rest.len()).unwrap_or(1);
            let (chunk, tail) = rest.split_at(size);
            rest = tail;
            let mut qb = sqlx::QueryBuilder::new($head);
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
            qb.push($suffix);
            qb.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }};
}
pub(crate) use insert_task_chunks;

/// Whether task table `t` has a pending task due by `$1` (Unix s): a cheap
/// read that spares the writer an empty hold.
pub(crate) fn has_due(t: &str) -> String {
    format!("SELECT 1 FROM \"{t}\" WHERE status = {} AND order_time <= $1 LIMIT 1", TaskStatus::Pending.code())
}

/// The oldest-first hold of task table `t` (SQLite, PostgreSQL): binds the
/// modify time, the due time (Unix s) and the limit; `lock` ends the
/// candidates' read.
pub(crate) fn hold_oldest(t: &str, lock: &str) -> String {
    format!(
        "UPDATE \"{t}\" SET status = {processing}, modify_time = $1 WHERE id IN (\
         SELECT id FROM \"{t}\" WHERE status = {pending} AND order_time <= $2 \
         ORDER BY order_time LIMIT $3{lock}) RETURNING {TASK_COLUMNS}",
        processing = TaskStatus::Processing.code(),
        pending = TaskStatus::Pending.code(),
    )
}

/// Columns of a task table every read selects, in order.
pub(crate) const TASK_COLUMNS: &str = "user_id, task_id, task_type, task_stage, status, priority, crt_retry_num, \
     max_retry_num, max_retry_interval, schedule_log, task_context, order_time, create_time, modify_time";

/// The order of a fair hold: by the task's rank among its user's due tasks
/// (1: the user's oldest), then order_time, then id.
pub(crate) const FAIR_ORDER: &str = "c.held_rank, c.held_order, c.held_id";

/// The `FROM` of a fair hold of table `t`: its pending rows `h`, joined to
/// `c`, the first due pending tasks in [`FAIR_ORDER`], each with its rank
/// among its user's (by order_time, then id). The placeholders are of the
/// due time (Unix s), of the highest rank worth reading (the hold's limit:
/// a task of a higher rank comes after `limit` others) and of how many
/// tasks `c` has ([`fair_candidate_cap`]).
///
/// The ranking is a plain read apart from `h`, so that `h` alone is locked
/// (PostgreSQL takes no `FOR UPDATE` with window functions); `h.status` is
/// read again as each row is locked, so a task another hold took meanwhile
/// is skipped, and the next candidate taken instead.
pub(crate) fn fair_candidates(t: &str, [due_by, max_rank, cap]: [&str; 3]) -> String {
    let pending = TaskStatus::Pending.code();
    format!(
        "\"{t}\" h JOIN (SELECT id AS held_id, held_rank, order_time AS held_order FROM (\
         SELECT id, order_time, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY order_time, id) AS held_rank \
         FROM \"{t}\" WHERE status = {pending} AND order_time <= {due_by}) r WHERE held_rank <= {max_rank} \
         ORDER BY held_rank, order_time, id LIMIT {cap}) c ON c.held_id = h.id WHERE h.status = {pending}"
    )
}

/// Candidates a fair hold of `want` tasks ranks: more than it takes, so
/// that holds of other nodes locking some at the same time leave it
/// others (as `SKIP LOCKED` does for an oldest-first hold); few enough to
/// keep the planner's estimate small (a join by id, not a scan of `h`).
pub(crate) fn fair_candidate_cap(want: usize) -> i64 {
    want as i64 * 4
}

/// Claimed tasks (with their row ids) in the order [`FAIR_ORDER`] chose
/// them: `UPDATE ... RETURNING` returns rows in no set order. A task's rank
/// among the claimed tasks of its user is its rank among all its user's due
/// tasks, since a hold takes each user's tasks from the oldest.
pub(crate) fn fair_order(mut rows: Vec<(i64, TaskData)>) -> Vec<TaskData> {
    rows.sort_by(|(a_id, a), (b_id, b)| (&a.user_id, a.order_time, a_id).cmp(&(&b.user_id, b.order_time, b_id)));
    let mut ranked: Vec<(u32, i64, i64, TaskData)> = Vec::with_capacity(rows.len());
    for (id, task) in rows {
        let rank = match ranked.last() {
            Some((rank, .., last)) if last.user_id == task.user_id => rank + 1,
            _ => 1,
        };
        ranked.push((rank, task.order_time, id, task));
    }
    ranked.sort_by_key(|&(rank, order_time, id, _)| (rank, order_time, id));
    ranked.into_iter().map(|(.., task)| task).collect()
}

/// A stored task: its wire form plus the raw times the engine reasons with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTask {
    pub data: TaskData,
    /// Unix ms.
    pub create_ms: i64,
    /// Unix ms.
    pub modify_ms: i64,
}

pub(crate) fn task_from_row<'r, R>(row: &'r R) -> Result<StoredTask>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let create_ms: i64 = row.try_get("create_time")?;
    let modify_ms: i64 = row.try_get("modify_time")?;
    let status: i64 = row.try_get("status")?;
    let data = TaskData {
        user_id: text(row, "user_id")?,
        task_id: text(row, "task_id")?,
        task_type: text(row, "task_type")?,
        task_stage: text(row, "task_stage")?,
        status: i32::try_from(status).map_err(|_| Error::Corrupt(format!("task status {status}")))?,
        priority: Some(row.try_get("priority")?),
        crt_retry_num: row.try_get("crt_retry_num")?,
        max_retry_num: row.try_get("max_retry_num")?,
        max_retry_interval: row.try_get("max_retry_interval")?,
        schedule_log: text(row, "schedule_log")?,
        context: text(row, "task_context")?,
        order_time: row.try_get("order_time")?,
        create_time: Some(rfc3339(create_ms)),
        modify_time: Some(rfc3339(modify_ms)),
    };
    Ok(StoredTask { data, create_ms, modify_ms })
}
