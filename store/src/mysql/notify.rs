//! MySQL's statements for owed notifications: owing them with a result,
//! taking them under a lease.

use const_format::formatcp;
use sqlx::{MySqlConnection, QueryBuilder};

use crate::db::Dialect;
use crate::repo::OwedKind;
use crate::sql::code;

use crate::sql::notify::{owed_for, OwedRow, Owing, OWED_COLUMNS};
use crate::Result;

/// [`OWE`] on MySQL: each placeholder once, in order.
pub(crate) const OWE_MYSQL: &str = formatcp!(
    "INSERT IGNORE INTO t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, owner,
                                       send_at, create_time)
     SELECT ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ? FROM DUAL
     WHERE EXISTS (SELECT 1 FROM t_timer_task f WHERE f.task_id = ? AND f.owner = ? AND {})",
    owed_for!("?")
);

/// [`owe_sqlite`] on MySQL.
pub(crate) async fn owe_mysql(conn: &mut MySqlConnection, owing: &Owing<'_>) -> Result<Vec<bool>> {
    let mut stored = Vec::with_capacity(owing.owed.len());
    for n in owing.owed {
        let done = sqlx::query(OWE_MYSQL)
            .bind(n.task_id)
            .bind(n.kind.code())
            .bind(n.key.timer_id)
            .bind(n.key.run_ms)
            .bind(i64::from(n.manual))
            .bind(i64::from(n.attempt))
            .bind(&n.output)
            .bind(&n.owner)
            .bind(owing.lease_until)
            .bind(owing.now_ms)
            .bind(n.task_id)
            .bind(&n.owner)
            .bind(n.kind.code())
            .execute(&mut *conn)
            .await?;
        stored.push(done.rows_affected() == 1);
    }
    Ok(stored)
}

/// MySQL has no `UPDATE ... RETURNING`: the due rows are locked (skipping
/// those another taker holds), then leased by key, in one transaction.
pub(crate) async fn take_mysql(
    pool: &sqlx::MySqlPool,
    owner: &str,
    lease_until: i64,
    now_ms: i64,
    limit: u32,
) -> Result<Vec<OwedRow>> {
    const SQL: &str = formatcp!(
        "SELECT {OWED_COLUMNS} FROM t_notify_owed WHERE send_at <= $1 ORDER BY send_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    );
    let mut tx = pool.begin().await?;
    let rows = sqlx::query(&pool.sql(SQL)).bind(now_ms).bind(i64::from(limit)).fetch_all(&mut *tx).await?;
    let rows: Vec<OwedRow> = rows.iter().map(OwedRow::from_row).collect::<Result<_>>()?;
    if !rows.is_empty() {
        let mut qb = QueryBuilder::<sqlx::MySql>::new("UPDATE t_notify_owed SET owner = ");
        qb.push_bind(owner).push(", send_at = ").push_bind(lease_until).push(" WHERE (task_id, kind) IN (");
        let mut sep = qb.separated(", ");
        for r in &rows {
            sep.push("(").push_bind_unseparated(r.task_id).push_unseparated(", ");
            sep.push_bind_unseparated(r.kind).push_unseparated(")");
        }
        qb.push(")");
        qb.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(rows)
}
