//! MySQL's statements for task queues (holds, tables).

use std::collections::HashSet;

use sqlx::mysql::MySqlRow;
use sqlx::{Executor, MySql, Row};
use xtimer_core::task::{rfc3339, TaskData, TaskStatus};

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

/// Plain reads of candidates a MySQL hold makes at most.
const READ_ROUNDS: usize = 3;
/// How much further each plain read after the first reads.
const WINDOW_GROWTH: usize = 8;
/// The most candidates a plain read reads.
const MAX_WINDOW: usize = 50_000;

/// MySQL: claims up to `want` due pending tasks of table `t` in one
/// transaction: locks them (`FOR UPDATE SKIP LOCKED`, so concurrent holds
/// never wait for each other nor share a task), marks them processing, and
/// returns them as they now are, oldest order_time first.
///
/// It finds its candidates with a plain read first and
/// then locks them by id. A locking scan of the `status_order` index from
/// its start would lock and visit the row of every entry that earlier
/// holds left delete-marked there (InnoDB purges them only later, and
/// under a steady drain they run to tens of thousands); a plain read steps
/// over them. Candidates that another node's hold has locked meanwhile
/// are skipped by the lock; if the hold is still short, the next read
/// reads [`WINDOW_GROWTH`] times further and the hold locks what is free
/// there, lowest id first. After [`READ_ROUNDS`] reads it returns what it
/// has (fewer than `want` only while other holds have the oldest locked).
pub(crate) async fn hold_mysql(pool: &sqlx::MySqlPool, t: &str, want: usize, now_ms: i64) -> Result<Vec<TaskData>> {
    let now_s = now_ms.div_euclid(1_000);
    let pending = i64::from(TaskStatus::Pending.code());
    let mut tx: Option<sqlx::Transaction<'_, MySql>> = None;
    let mut held = Vec::with_capacity(want);
    // Candidates tried so far; read again, they are left out.
    let mut tried = HashSet::new();
    let mut window = want;
    for _ in 0..READ_ROUNDS {
        let read: Vec<i64> = sqlx::query_scalar(&format!(
            "SELECT id FROM \"{t}\" WHERE status = ? AND order_time <= ? ORDER BY order_time, id LIMIT ?"
        ))
        .bind(pending)
        .bind(now_s)
        .bind(window as i64)
        .fetch_all(pool)
        .await?;
        let all_due = read.len() < window;
        let candidates: Vec<i64> = read.into_iter().filter(|id| !tried.contains(id)).collect();
        if candidates.is_empty() {
            break;
        }
        let tx = match &mut tx {
            Some(tx) => tx,
            None => tx.insert(pool.begin().await?),
        };
        // Ids read from the table: written into the text, so that a batch
        // of any size is one statement, not one prepared per list length.
        // At the session's read committed, a range locks only its own rows
        // (repeatable read would lock the row after it too, maybe another
        // node's, and wait).
        let by_id = format!(
            "SELECT id, {TASK_COLUMNS} FROM \"{t}\" FORCE INDEX (PRIMARY) WHERE {ids} AND status = {pending} \
             AND order_time <= {now_s} ORDER BY id LIMIT {short} FOR UPDATE SKIP LOCKED",
            ids = ids_condition(&candidates),
            short = want - held.len(),
        );
        let rows = (&mut **tx).fetch_all(sqlx::raw_sql(&by_id)).await?;
        held.extend(mark_held(tx, t, &rows, now_ms).await?);
        if held.len() == want || all_due {
            break;
        }
        // Other holds have the rest locked: read further past them.
        tried.extend(candidates);
        window = (window * WINDOW_GROWTH).min(MAX_WINDOW.max(want));
    }
    let Some(tx) = tx else { return Ok(Vec::new()) };
    tx.commit().await?;
    held.sort_by_key(|(id, task)| (task.order_time, *id));
    Ok(held.into_iter().map(|(_, task)| task).collect())
}

/// MySQL: as [`hold_mysql`], in the round-robin order of [`FAIR_ORDER`]
/// (a locking read of the ranked candidates).
pub(crate) async fn hold_fair_mysql(
    pool: &sqlx::MySqlPool,
    t: &str,
    want: usize,
    now_ms: i64,
) -> Result<Vec<TaskData>> {
    let now_s = now_ms.div_euclid(1_000);
    let mut tx = pool.begin().await?;
    // The ranking is a plain read; only the rows of `h` are locked.
    let select = format!(
        "SELECT h.id, {TASK_COLUMNS} FROM {from} ORDER BY {FAIR_ORDER} LIMIT ? FOR UPDATE SKIP LOCKED",
        from = fair_candidates(t, ["?", "?", "?"]),
    );
    let rows = sqlx::query(&select)
        .bind(now_s)
        .bind(want as i64)
        .bind(fair_candidate_cap(want))
        .bind(want as i64)
        .fetch_all(&mut *tx)
        .await?;
    let held = mark_held(&mut tx, t, &rows, now_ms).await?;
    tx.commit().await?;
    Ok(held.into_iter().map(|(_, task)| task).collect())
}

/// Marks the locked `rows` of table `t` processing as of `now_ms`; returns
/// each row's id and task as it now is, in the rows' order.
async fn mark_held(
    tx: &mut sqlx::Transaction<'_, MySql>,
    t: &str,
    rows: &[MySqlRow],
    now_ms: i64,
) -> Result<Vec<(i64, TaskData)>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut held = Vec::with_capacity(rows.len());
    for row in rows {
        let mut task = task_from_row(row)?.data;
        task.status = TaskStatus::Processing.code();
        task.modify_time = Some(rfc3339(now_ms));
        held.push((row.try_get::<i64, _>("id")?, task));
    }
    let update = format!(
        "UPDATE \"{t}\" SET status = {processing}, modify_time = {now_ms} WHERE {ids}",
        processing = TaskStatus::Processing.code(),
        ids = ids_condition(held.iter().map(|(id, _)| id)),
    );
    (&mut **tx).execute(sqlx::raw_sql(&update)).await?;
    Ok(held)
}

/// `ids` (in any order, each once) as a condition on `id`: runs of
/// consecutive ids as ranges, the rest as a list, e.g. `(id BETWEEN 1 AND
/// 500 OR id IN (503, 507))`. Claimed tasks are mostly runs, and InnoDB
/// reads a range several times faster than as many listed keys.
fn ids_condition<'a>(ids: impl IntoIterator<Item = &'a i64>) -> String {
    let mut sorted: Vec<i64> = ids.into_iter().copied().collect();
    sorted.sort_unstable();
    let (mut ranges, mut singles) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if j > i {
            ranges.push(format!("id BETWEEN {} AND {}", sorted[i], sorted[j]));
        } else {
            singles.push(sorted[i].to_string());
        }
        i = j + 1;
    }
    if !singles.is_empty() {
        ranges.push(format!("id IN ({})", singles.join(", ")));
    }
    format!("({})", ranges.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::ids_condition;

    #[test]
    fn runs_of_ids_become_ranges_and_the_rest_a_list() {
        assert_eq!(
            ids_condition(&[7, 3, 1, 2, 9, 10, 5]),
            "(id BETWEEN 1 AND 3 OR id BETWEEN 9 AND 10 OR id IN (5, 7))"
        );
        assert_eq!(ids_condition(&[4]), "(id IN (4))");
        assert_eq!(ids_condition(&[5, 6]), "(id BETWEEN 5 AND 6)");
    }
}
