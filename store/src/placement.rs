//! Spread fires' send times (`t_fire_placement`) and the planned load per
//! second they are chosen by.
//!
//! A fire of a timer with a spread is sent at a time chosen when it is
//! planned. The choice is written here first, keyed by the fire's
//! identity (timer, scheduled time); whoever plans the same scheduled time
//! again (a second planner, a restart, a re-expansion) is given the time
//! chosen first, so the fire row it makes is the same row: the unique
//! `(timer_id, run_timer)` of `t_timer_task` then keeps a scheduled time
//! fired once, on every dialect (PostgreSQL could not hold a unique key
//! on the scheduled time of a table partitioned by the run time).
//!
//! Every planner records its choices here before any fire row follows, so
//! the load a planner places by ([`spread_load`]) counts placements, not
//! only pending fire rows: two planners one after the other never see the
//! same empty seconds. A timer re-planned (its definition changed) forgets
//! the placements of the fires it deletes ([`FORGET_REPLANNED`]), so its
//! fires are placed anew in the new window.

use std::collections::HashMap;

use sqlx::QueryBuilder;

use crate::db::on_db;
use crate::driver::Dialect;
use crate::sql::{code, push_list};
use crate::{Database, Result};

/// Placements per statement (three parameters each).
const CHUNK: usize = 1_000;

/// Records the proposed send time of each `(timer_id, scheduled_ms,
/// run_ms)` not placed yet, and returns the send time of every one: the
/// proposed time, or the one chosen before.
pub(crate) async fn place(db: &Database, placements: &[(i64, i64, i64)]) -> Result<HashMap<(i64, i64), i64>> {
    let mut placed = HashMap::with_capacity(placements.len());
    for chunk in placements.chunks(CHUNK) {
        let statements = db.statements();
        let insert =
            format!("{} INTO t_fire_placement (timer_id, scheduled_timer, run_timer) ", statements.insert_skipping);
        let conflict = (statements.skip_taken)("timer_id, scheduled_timer");
        on_db!(db, write, pool => {
            let mut qb = QueryBuilder::new(insert.as_str());
            qb.push_values(chunk, |mut b, (timer, scheduled, run)| {
                b.push_bind(*timer).push_bind(*scheduled).push_bind(*run);
            });
            qb.push(&conflict);
            qb.build().execute(pool).await?;
        });
        let (low, high) = chunk.iter().fold((i64::MAX, i64::MIN), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
        let rows: Vec<(i64, i64, i64)> = on_db!(db, write, pool => {
            let mut qb = QueryBuilder::new(
                "SELECT timer_id, scheduled_timer, run_timer FROM t_fire_placement WHERE scheduled_timer >= ",
            );
            qb.push_bind(low).push(" AND scheduled_timer <= ").push_bind(high).push(" AND timer_id IN (");
            let mut ids: Vec<i64> = chunk.iter().map(|p| p.0).collect();
            ids.sort_unstable();
            ids.dedup();
            push_list(&mut qb, ids);
            qb.push(")");
            qb.build_query_as().fetch_all(pool).await?
        });
        placed.extend(rows.into_iter().map(|(timer, scheduled, run)| ((timer, scheduled), run)));
    }
    Ok(placed)
}

/// Pending fires sent in each second of `[from_ms, to_ms)`: `(second's
/// start in Unix ms, fires)`, ascending.
pub(crate) async fn planned_per_second(
    db: &Database,
    app: Option<&str>,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<(i64, u64)>> {
    const SQL: &str = const_format::formatcp!(
        "SELECT run_timer - run_timer % 1000 AS second, COUNT(*) AS fires FROM t_timer_task
         WHERE status = {} AND run_timer >= $1 AND run_timer < $2 AND ($3 IS NULL OR app = $4)
         GROUP BY run_timer - run_timer % 1000 ORDER BY 1",
        code::PENDING
    );
    let rows: Vec<(i64, i64)> = on_db!(db, read, pool => sqlx::query_as(&pool.sql(SQL))
        .bind(from_ms)
        .bind(to_ms)
        .bind(app)
        .bind(app)
        .fetch_all(pool)
        .await?);
    Ok(rows.into_iter().map(|(second, n)| (second, n.max(0) as u64)).collect())
}

/// The load spread fires are placed by, in each second of `[$1, $2)`
/// (every app): each placement (wherever its fire is), and each pending
/// fire with none (sent at its scheduled time).
const SPREAD_LOAD: &str = const_format::formatcp!(
    "SELECT at_second, COUNT(*) AS fires FROM (
         SELECT run_timer - run_timer % 1000 AS at_second FROM t_fire_placement
         WHERE run_timer >= $1 AND run_timer < $2
         UNION ALL
         SELECT f.run_timer - f.run_timer % 1000 AS at_second FROM t_timer_task f
         WHERE f.status = {} AND f.run_timer >= $3 AND f.run_timer < $4
           AND NOT EXISTS (SELECT 1 FROM t_fire_placement p
                           WHERE p.timer_id = f.timer_id AND p.scheduled_timer = COALESCE(f.scheduled_timer, f.run_timer))
     ) planned GROUP BY at_second ORDER BY at_second",
    code::PENDING
);

/// Deletes timer `$1`'s placements of scheduled times from `$2` on whose
/// fire is not stored (run after its pending fires from then on were
/// deleted to be planned again): a claimed or ended fire keeps its own,
/// so its scheduled time is not fired twice.
pub(crate) const FORGET_REPLANNED: &str = "DELETE FROM t_fire_placement WHERE timer_id = $1 AND scheduled_timer >= $2
     AND NOT EXISTS (SELECT 1 FROM t_timer_task f
                     WHERE f.timer_id = $3 AND f.run_timer = t_fire_placement.run_timer)";

/// Fires planned in each second of `[from_ms, to_ms)`, every app, as
/// spread fires are placed by ([`SPREAD_LOAD`]): `(second's start in Unix
/// ms, fires)`, ascending.
pub(crate) async fn spread_load(db: &Database, from_ms: i64, to_ms: i64) -> Result<Vec<(i64, u64)>> {
    let rows: Vec<(i64, i64)> = on_db!(db, read, pool => sqlx::query_as(&pool.sql(SPREAD_LOAD))
        .bind(from_ms)
        .bind(to_ms)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(pool)
        .await?);
    Ok(rows.into_iter().map(|(second, n)| (second, n.max(0) as u64)).collect())
}

/// Deletes the placements of scheduled times before `before_ms` (their
/// fires long ended), at most `limit`; returns how many.
pub(crate) async fn forget(db: &Database, before_ms: i64, limit: u32) -> Result<u64> {
    let limited =
        (db.statements().delete_some)("t_fire_placement", "timer_id, scheduled_timer", "scheduled_timer < $1", limit);
    Ok(on_db!(db, write, pool => sqlx::query(&pool.sql(&limited)).bind(before_ms).execute(pool).await?.rows_affected()))
}
