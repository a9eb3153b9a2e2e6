use super::*;
use crate::sql::timers::{COMPLETE_FIRED_ONCE, DELETING_ONCE_APPS, DUE};
use crate::sqlite::timers::{timers_as_json, GET_MANY_SQLITE};
use xtimer_core::config::DatabaseConfig;

/// SQLite's plan for `statement` (with every parameter bound to 1).
async fn plan(read: &sqlx::SqlitePool, statement: &str, params: usize) -> Vec<String> {
    let explain = format!("EXPLAIN QUERY PLAN {statement}");
    let query = (0..params).fold(sqlx::query(&explain), |q, _| q.bind(1_i64));
    query.fetch_all(read).await.unwrap().iter().map(|row| row.get("detail")).collect()
}

/// The migrator's per-step reads must walk the due index's few entries,
/// not every enabled timer's: SQLite uses an expression index only
/// where a query names the expression exactly as the migration does.
#[tokio::test]
async fn the_steps_queries_search_the_due_index_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("x.db").display());
    let db = Database::connect(&DatabaseConfig { url, max_connections: 1 }).await.unwrap();
    let Database::Sqlite { read, .. } = db else { unreachable!() };
    // Read as rows, and as the one JSON row SQLite's steps read.
    for due in [DUE.to_owned(), timers_as_json(DUE)] {
        let due = plan(&read, &due, 3).await;
        assert!(due.iter().any(|l| l.contains("USING INDEX idx_timer_due (status=? AND <expr><?)")), "{due:?}");
        assert!(!due.iter().any(|l| l.contains("TEMP B-TREE")), "{due:?}");
    }
    let many = plan(&read, &timers_as_json(GET_MANY_SQLITE), 1).await;
    assert!(many.iter().any(|l| l.contains("USING INTEGER PRIMARY KEY (rowid=?)")), "{many:?}");
    for (statement, params) in [(COMPLETE_FIRED_ONCE, 1), (DELETING_ONCE_APPS, 0)] {
        let ended = plan(&read, statement, params).await;
        let hit = ended.iter().any(|l| l.contains("USING INDEX idx_timer_due (status=? AND <expr>=?)"));
        assert!(hit, "{statement}: {ended:?}");
    }
}
