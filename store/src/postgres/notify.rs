//! PostgreSQL's statements for owed notifications: owing them with a result,
//! taking them under a lease.

use const_format::formatcp;
use sqlx::{PgConnection, Row};

use crate::postgres::fires::bind_pg_texts;
use crate::repo::OwedKind;
use crate::sql::code;
use crate::sql::notify::{owed_for, OwedRow, Owing, Taking};
use crate::Result;

/// SQLite's `owe_sqlite` on PostgreSQL: one statement for the batch.
pub(crate) async fn owe_pg(conn: &mut PgConnection, owing: &Owing<'_>) -> Result<Vec<bool>> {
    const SQL: &str = formatcp!(
        "INSERT INTO t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, owner, send_at,
                                    create_time)
         SELECT v.task_id, v.kind, v.timer_id, v.run_timer, v.manual, v.attempt, v.output, 0, v.owner, $9, $10
         FROM UNNEST($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[], $5::smallint[], $6::integer[],
                     $7::text[], $8::text[])
              AS v(task_id, kind, timer_id, run_timer, manual, attempt, output, owner)
         WHERE EXISTS (SELECT 1 FROM t_timer_task f WHERE f.task_id = v.task_id AND f.run_timer = v.run_timer
                       AND f.owner = v.owner AND {})
         ON CONFLICT (task_id, kind) DO NOTHING
         RETURNING task_id, kind",
        owed_for!("v.kind")
    );
    let owed = owing.owed;
    let query = sqlx::query(SQL)
        .bind(owed.iter().map(|n| n.task_id).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| n.kind.code() as i16).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| n.key.timer_id).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| n.key.run_ms).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| i16::from(n.manual)).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| i32::try_from(n.attempt).unwrap_or(i32::MAX)).collect::<Vec<_>>());
    let query = bind_pg_texts(query, owed.iter().map(|n| n.output.as_str()));
    let rows = query
        .bind(owed.iter().map(|n| n.owner.as_str()).collect::<Vec<_>>())
        .bind(owing.lease_until)
        .bind(owing.now_ms)
        .fetch_all(&mut *conn)
        .await?;
    let mut stored = std::collections::HashSet::with_capacity(rows.len());
    for row in &rows {
        stored.insert((row.try_get::<i64, _>("task_id")?, i64::from(row.try_get::<i16, _>("kind")?)));
    }
    Ok(owed.iter().map(|n| stored.contains(&(n.task_id, n.kind.code()))).collect())
}

/// Rows another taker holds are skipped, not waited for.
pub(crate) async fn take_pg(pool: &sqlx::PgPool, t: &Taking<'_>) -> Result<Vec<OwedRow>> {
    const SQL: &str = formatcp!(
        "UPDATE t_notify_owed n SET owner = $1, send_at = $2
         FROM (SELECT task_id, kind FROM t_notify_owed WHERE send_at <= $3 ORDER BY send_at LIMIT $4
               FOR UPDATE SKIP LOCKED) d
         WHERE n.task_id = d.task_id AND n.kind = d.kind
         RETURNING n.task_id, CAST(n.kind AS BIGINT) AS kind, n.timer_id, n.run_timer,
                   CAST(n.manual AS BIGINT) AS manual, CAST(n.attempt AS BIGINT) AS attempt, n.output,
                   CAST(n.sends AS BIGINT) AS sends"
    );
    let rows = sqlx::query(SQL).bind(t.owner).bind(t.lease_until).bind(t.now_ms).bind(t.limit).fetch_all(pool).await?;
    rows.iter().map(OwedRow::from_row).collect()
}
