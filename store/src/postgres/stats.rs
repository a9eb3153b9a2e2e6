//! Fresh planner statistics for `t_timer` after bulk changes.
//!
//! PostgreSQL plans from statistics that autovacuum refreshes at most once
//! a minute (`autovacuum_naptime`). Right after 100,000 one-shots are
//! created in seconds, `t_timer`'s still say enabled timers with nothing
//! left to plan are rare, and the finisher's statement (complete the timers
//! whose fires just ended, by id) is planned as a scan of every such timer,
//! filtered by the 1,000 ids, instead of 1,000 key lookups: 3.7 s a pass
//! instead of milliseconds, minutes of the server's CPU for one burst.

use sqlx::PgPool;

/// Analyzes `t_timer` when more of its rows changed since its statistics
/// were taken than autovacuum would let pass (a tenth of the table, and at
/// least 1,000 rows). One catalog read when they are fresh.
const ANALYZE_IF_STALE: &str = "
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
             WHERE s.relid = 't_timer'::regclass
               AND s.n_mod_since_analyze > 1000 + 0.1 * GREATEST(c.reltuples, 0)) THEN
    ANALYZE t_timer;
  END IF;
END $$";

/// Refreshes `t_timer`'s statistics if bulk changes left them stale. A
/// failure is only logged: the statement it guards still runs, maybe slower.
pub(crate) async fn refresh_if_stale(pool: &PgPool) {
    if let Err(err) = sqlx::raw_sql(ANALYZE_IF_STALE).execute(pool).await {
        tracing::debug!(error = %err, "Refreshing t_timer's statistics failed; autovacuum will.");
    }
}
