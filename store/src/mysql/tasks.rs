//! MySQL's statements for task queues (holds, tables).

use sqlx::{MySql, QueryBuilder, Row};
use xtimer_core::task::{rfc3339, TaskData, TaskStatus};

use crate::sql::push_list;
use crate::sql::tasks::{fair_candidate_cap, fair_candidates, task_from_row, FAIR_ORDER, TASK_COLUMNS};
use crate::Result;

/// MySQL: DDL of a task table. Indexed text is `VARCHAR` (MySQL indexes no
/// whole `TEXT`), index names are the table's own (MySQL's are per table and
/// at most 64 characters), text compares byte for byte.
pub(crate) fn create_table_mysql(t: &str) -> Vec<String> {
    vec![format!(
        "CREATE TABLE IF NOT EXISTS \"{t}\" (\
         id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, user_id VARCHAR(255) NOT NULL DEFAULT '', \
         task_id VARCHAR(255) NOT NULL, task_type VARCHAR(64) NOT NULL, \
         task_stage VARCHAR(255) NOT NULL DEFAULT '', status BIGINT NOT NULL, priority BIGINT NOT NULL DEFAULT 0, \
         crt_retry_num BIGINT NOT NULL DEFAULT 0, max_retry_num BIGINT NOT NULL DEFAULT 0, \
         max_retry_interval BIGINT NOT NULL DEFAULT 0, schedule_log MEDIUMTEXT NOT NULL DEFAULT (''), \
         task_context MEDIUMTEXT NOT NULL DEFAULT (''), order_time BIGINT NOT NULL, \
         create_time BIGINT NOT NULL, modify_time BIGINT NOT NULL, \
         UNIQUE KEY task_id (task_id), KEY status_order (status, order_time)\
         ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"
    )]
}

/// MySQL: claims up to `want` due pending tasks of table `t` in one
/// transaction: locks them (`FOR UPDATE SKIP LOCKED`, so concurrent holds
/// never wait for each other nor share a task), marks them processing, and
/// returns them as they now are, oldest order_time first (`fair`: in the
/// round-robin order of [`FAIR_ORDER`]).
pub(crate) async fn hold_mysql(
    pool: &sqlx::MySqlPool,
    t: &str,
    want: usize,
    fair: bool,
    now_ms: i64,
) -> Result<Vec<TaskData>> {
    let now_s = now_ms.div_euclid(1_000);
    let mut tx = pool.begin().await?;
    let rows = if fair {
        // The ranking is a plain read; only the rows of `h` are locked.
        let select = format!(
            "SELECT h.id, {TASK_COLUMNS} FROM {from} ORDER BY {FAIR_ORDER} LIMIT ? FOR UPDATE SKIP LOCKED",
            from = fair_candidates(t, ["?", "?", "?"]),
        );
        sqlx::query(&select)
            .bind(now_s)
            .bind(want as i64)
            .bind(fair_candidate_cap(want))
            .bind(want as i64)
            .fetch_all(&mut *tx)
            .await?
    } else {
        let select = format!(
            "SELECT id, {TASK_COLUMNS} FROM \"{t}\" WHERE status = ? AND order_time <= ? \
             ORDER BY order_time LIMIT ? FOR UPDATE SKIP LOCKED"
        );
        sqlx::query(&select)
            .bind(i64::from(TaskStatus::Pending.code()))
            .bind(now_s)
            .bind(want as i64)
            .fetch_all(&mut *tx)
            .await?
    };
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut ids = Vec::with_capacity(rows.len());
    let mut held = Vec::with_capacity(rows.len());
    for row in &rows {
        ids.push(row.try_get::<i64, _>("id")?);
        let mut task = task_from_row(row)?.data;
        task.status = TaskStatus::Processing.code();
        task.modify_time = Some(rfc3339(now_ms));
        held.push(task);
    }
    let mut qb = QueryBuilder::<MySql>::new(format!("UPDATE \"{t}\" SET status = "));
    qb.push_bind(i64::from(TaskStatus::Processing.code())).push(", modify_time = ").push_bind(now_ms);
    qb.push(" WHERE id IN (");
    push_list(&mut qb, ids);
    qb.push(")");
    qb.build().execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(held)
}
