//! Confirming claims held across a stall ([`FireRepo::confirm_claims`]):
//! a node that stood still (a pause, a cut from the database) asks which of
//! the fires it claimed before are still its own before it sends them.
//!
//! One transaction: the node's heartbeat is written first, so no node can
//! judge it dead for a node timeout from here; then each fire still running
//! under its claim's owner token is locked and its lease extended (a fire
//! another node took over is not returned). A reclaim that raced the check
//! either committed first (the lock then reads its new owner) or comes
//! after it and finds the heartbeat fresh and the lease renewed.
//!
//! SQLite and MySQL confirm with [`confirm_by_select!`]; PostgreSQL in one
//! statement (`crate::postgres::fires::confirm_pg`).
//!
//! [`FireRepo::confirm_claims`]: crate::FireRepo::confirm_claims

use std::collections::HashSet;

use xtimer_core::fire::ClaimedFire;

use crate::Result;

/// `$2`'s heartbeat, set to `$1` unless it is later already (`$3`).
pub(crate) const BEAT: &str = "UPDATE t_node SET heartbeat_at = $1 WHERE node_id = $2 AND heartbeat_at < $3";

/// MySQL and SQLite, which lack `UPDATE ... RETURNING` on every supported
/// version: the heartbeat, then the running fires read (and locked, with
/// `$lock`), then the leases of the ones still owned extended by id.
macro_rules! confirm_by_select {
    ($pool:expr, $node_id:expr, $claims:expr, $lease_until:expr, $now_ms:expr, $lock:expr) => {{
        use const_format::formatcp;
        use sqlx::{QueryBuilder, Row};
        use $crate::driver::Dialect;
        use $crate::sql::fence::{still_owned, BEAT};
        use $crate::sql::{code, opt_text, push_id_list, MAX_PARAMS};
        let mut tx = $pool.begin().await?;
        sqlx::query(&$pool.sql(BEAT)).bind($now_ms).bind($node_id).bind($now_ms).execute(&mut *tx).await?;
        let mut held = Vec::new();
        for chunk in $claims.chunks(MAX_PARAMS / 2) {
            let mut qb = QueryBuilder::new(formatcp!(
                "SELECT task_id, owner FROM t_timer_task WHERE status = {} AND ",
                code::RUNNING
            ));
            push_id_list(&mut qb, chunk.iter().map(|c| c.task_id));
            qb.push($lock);
            let rows = qb.build().fetch_all(&mut *tx).await?;
            held.extend(still_owned(
                chunk,
                rows.iter().map(|r| (r.try_get("task_id").map_err(Into::into), opt_text(r, "owner"))),
            )?);
        }
        for chunk in held.chunks(MAX_PARAMS / 2) {
            let mut qb = QueryBuilder::new("UPDATE t_timer_task SET lease_until = CASE WHEN lease_until < ");
            qb.push_bind($lease_until).push(" THEN ").push_bind($lease_until).push(" ELSE lease_until END WHERE ");
            push_id_list(&mut qb, chunk.iter().copied());
            qb.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(held)
    }};
}
pub(crate) use confirm_by_select;

/// Of `rows` (task id, owner) read for `claims`, the ids whose owner is
/// still the claim's.
pub(crate) fn still_owned(
    claims: &[ClaimedFire],
    rows: impl Iterator<Item = (Result<i64>, Result<Option<String>>)>,
) -> Result<Vec<i64>> {
    let mine: HashSet<(i64, &str)> = claims.iter().map(|c| (c.task_id, c.owner.as_str())).collect();
    let mut held = Vec::new();
    for (id, owner) in rows {
        let (id, owner) = (id?, owner?);
        if owner.as_deref().is_some_and(|o| mine.contains(&(id, o))) {
            held.push(id);
        }
    }
    Ok(held)
}
