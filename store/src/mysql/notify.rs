//! MySQL's statements for owed notifications: owing them with a result,
//! taking them under a lease.

use const_format::formatcp;
use sqlx::{MySqlConnection, QueryBuilder};

use crate::driver::Dialect;
use crate::repo::OwedKind;
use crate::sql::code;
use crate::sql::notify::{bind_owed, owed_for, OwedRow, Owing, Taking, OWED_COLUMNS};
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
        let done = bind_owed!(sqlx::query(OWE_MYSQL), n, owing)
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
pub(crate) async fn take_mysql(pool: &sqlx::MySqlPool, t: &Taking<'_>) -> Result<Vec<OwedRow>> {
    const SQL: &str = formatcp!(
        "SELECT {OWED_COLUMNS} FROM t_notify_owed WHERE send_at <= $1 ORDER BY send_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    );
    let mut tx = pool.begin().await?;
    let rows = sqlx::query(&pool.sql(SQL)).bind(t.now_ms).bind(t.limit).fetch_all(&mut *tx).await?;
    let rows: Vec<OwedRow> = rows.iter().map(OwedRow::from_row).collect::<Result<_>>()?;
    if !rows.is_empty() {
        let mut qb = QueryBuilder::<sqlx::MySql>::new("UPDATE t_notify_owed SET owner = ");
        qb.push_bind(t.owner).push(", send_at = ").push_bind(t.lease_until).push(" WHERE (task_id, kind) IN (");
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
