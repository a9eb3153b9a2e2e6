//! SQLite's statements for owed notifications: owing them with a result,
//! taking them under a lease.

use const_format::formatcp;
use sqlx::SqliteConnection;

use crate::sql::notify::{bind_owed, OwedRow, Owing, Taking, OWE, OWED_COLUMNS};
use crate::Result;

/// Stores each notification of `owing` in the transaction `conn`; whether
/// each was stored, in order.
pub(crate) async fn owe_sqlite(conn: &mut SqliteConnection, owing: &Owing<'_>) -> Result<Vec<bool>> {
    let mut stored = Vec::with_capacity(owing.owed.len());
    for n in owing.owed {
        let done = bind_owed!(sqlx::query(OWE), n, owing).execute(&mut *conn).await?;
        stored.push(done.rows_affected() == 1);
    }
    Ok(stored)
}

/// SQLite's one writer makes the read and the update one step.
pub(crate) async fn take_sqlite(write: &sqlx::SqlitePool, t: &Taking<'_>) -> Result<Vec<OwedRow>> {
    const SQL: &str = formatcp!(
        "UPDATE t_notify_owed SET owner = $1, send_at = $2
         WHERE rowid IN (SELECT rowid FROM t_notify_owed WHERE send_at <= $3 ORDER BY send_at LIMIT $4)
         RETURNING {OWED_COLUMNS}"
    );
    let rows = sqlx::query(SQL).bind(t.owner).bind(t.lease_until).bind(t.now_ms).bind(t.limit).fetch_all(write).await?;
    rows.iter().map(OwedRow::from_row).collect()
}
