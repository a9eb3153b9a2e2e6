//! What the dialects' statements for task queues (holds, tables) share.

use sqlx::{ColumnIndex, Decode, Row, Type};
use xtimer_core::task::{rfc3339, TaskData, TaskStatus};

use crate::sql::text;
use crate::{Error, Result};

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
