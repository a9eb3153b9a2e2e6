//! MySQL's statements for planned fires.

use sqlx::{MySql, MySqlPool, QueryBuilder};

use crate::repo::{NextRun, PlannedFire};
use crate::sql::padded;
use crate::sql::plan::INSERT_INTO;
use crate::{mysql, Result};

/// Fires per MySQL insert: well inside its packet and range optimizer limits.
pub(crate) const MYSQL_INSERT_ROWS: usize = 500;

/// Most timers of one MySQL next-fire update (a power of two).
pub(crate) const MYSQL_NEXT_ROWS: usize = 1024;

/// Keys in index order, so overlapping inserts cannot deadlock; the
/// transaction runs again if InnoDB undid it as a deadlock's victim anyway
/// (the shared timer locks meet other writers of the timers).
pub(crate) async fn insert_mysql(pool: &MySqlPool, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
    let mut sorted: Vec<&PlannedFire> = fires.iter().collect();
    sorted.sort_by_key(|p| (p.fire.key.timer_id, p.fire.key.run_ms));
    mysql::retry_deadlocks(|| insert_mysql_once(pool, &sorted, now_ms)).await
}

pub(crate) async fn insert_mysql_once(pool: &MySqlPool, sorted: &[&PlannedFire], now_ms: i64) -> Result<u64> {
    let mut inserted = 0;
    let mut tx = pool.begin().await?;
    for chunk in sorted.chunks(MYSQL_INSERT_ROWS) {
        inserted += insert_mysql_statement(chunk, now_ms).build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(inserted)
}

/// One MySQL insert of `chunk`: its rows as a derived table of `UNION ALL`
/// rows (MySQL and MariaDB read their `VALUES` constructors differently)
/// joined to their timers. READ COMMITTED reads the timers without a lock
/// unless told: `LOCK IN SHARE MODE` (both servers' spelling) waits for an
/// update in flight and reads the committed row.
pub(crate) fn insert_mysql_statement<'a>(chunk: &[&'a PlannedFire], now_ms: i64) -> QueryBuilder<'a, MySql> {
    let mut qb = QueryBuilder::<MySql>::new(format!(
        "INSERT IGNORE {INSERT_INTO}SELECT v.timer_id, v.app, v.run_timer, v.scheduled, "
    ));
    qb.push_bind(now_ms).push(", ").push_bind(now_ms).push(" FROM (");
    for (i, p) in chunk.iter().enumerate() {
        let first = i == 0;
        qb.push(if first { "SELECT " } else { " UNION ALL SELECT " });
        qb.push_bind(p.fire.key.timer_id).push(if first { " AS timer_id, " } else { ", " });
        qb.push_bind(&p.fire.app).push(if first { " AS app, " } else { ", " });
        qb.push_bind(p.fire.key.run_ms).push(if first { " AS run_timer, " } else { ", " });
        qb.push_bind(p.timer_modified).push(if first { " AS modified, " } else { ", " });
        qb.push_bind(p.scheduled_ms).push(if first { " AS scheduled" } else { "" });
    }
    qb.push(
        ") v JOIN t_timer t ON t.timer_id = v.timer_id AND t.modify_time = v.modified
         ORDER BY v.timer_id, v.run_timer LOCK IN SHARE MODE",
    );
    qb
}

/// One `UPDATE ... JOIN` on a derived table per [`MYSQL_NEXT_ROWS`]
/// timers, in one transaction; padded, so each shape is prepared once.
/// The update locks the row and compares its committed `modify_time`.
pub(crate) async fn set_next_runs_mysql(pool: &MySqlPool, next: &[NextRun]) -> Result<()> {
    let mut tx = pool.begin().await?;
    for chunk in next.chunks(MYSQL_NEXT_ROWS) {
        let mut qb = QueryBuilder::<MySql>::new("UPDATE t_timer t JOIN (");
        for (i, n) in padded(chunk).enumerate() {
            let first = i == 0;
            qb.push(if first { "SELECT " } else { " UNION ALL SELECT " });
            qb.push_bind(n.timer_id).push(if first { " AS timer_id, " } else { ", " });
            qb.push_bind(n.run_ms).push(if first { " AS next_run, " } else { ", " });
            qb.push_bind(n.timer_modified).push(if first { " AS modified" } else { "" });
        }
        qb.push(") v ON t.timer_id = v.timer_id AND t.modify_time = v.modified SET t.next_run = v.next_run");
        qb.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}
