//! SQLite's statements for task queues (holds, tables).

use sqlx::Row;
use xtimer_core::task::{TaskData, TaskStatus};

use crate::sql::tasks::{fair_candidates, fair_order, task_from_row, FAIR_ORDER, TASK_COLUMNS};
use crate::{Error, Result};

/// SQLite: the fair hold of table `t` ([`FAIR_ORDER`]). The ranking, a sort
/// of every due task, is read on a read connection, so the one writer
/// (which every write of the node waits for) is not held while it runs;
/// the writer then claims, in one statement, the ranked tasks still
/// pending and due. This node's holds of a type take turns (the hold
/// combiner), so none ranks while another claims.
pub(crate) async fn hold_fair_sqlite(
    write: &sqlx::SqlitePool,
    read: &sqlx::SqlitePool,
    t: &str,
    want: usize,
    now_ms: i64,
) -> Result<Vec<TaskData>> {
    let now_s = now_ms.div_euclid(1_000);
    let ranked = format!("SELECT h.id FROM {} ORDER BY {FAIR_ORDER} LIMIT $4", fair_candidates(t, ["$1", "$2", "$3"]));
    let ids: Vec<i64> = sqlx::query_scalar(&ranked)
        .bind(now_s)
        .bind(want as i64)
        .bind(want as i64)
        .bind(want as i64)
        .fetch_all(read)
        .await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // The ids as one JSON array: one statement text whatever their number.
    let claim = format!(
        "UPDATE \"{t}\" SET status = {processing}, modify_time = $1 \
         WHERE id IN (SELECT value FROM json_each($2)) AND status = {pending} AND order_time <= $3 \
         RETURNING id, {TASK_COLUMNS}",
        processing = TaskStatus::Processing.code(),
        pending = TaskStatus::Pending.code(),
    );
    let ids = serde_json::to_string(&ids).map_err(|e| Error::Corrupt(format!("task ids as JSON: {e}")))?;
    let rows = sqlx::query(&claim).bind(now_ms).bind(ids).bind(now_s).fetch_all(write).await?;
    Ok(fair_order(rows.iter().map(|row| Ok((row.try_get("id")?, task_from_row(row)?.data))).collect::<Result<_>>()?))
}
