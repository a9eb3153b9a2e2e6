//! Decoding rows shared by the SQL dialects: one place knows how a
//! `t_timer` or `t_node` row becomes a domain value.

use sqlx::{ColumnIndex, Decode, Row, Type};
use xtimer_core::node::NodeInfo;
use xtimer_core::timer::{MisfirePolicy, Notify, RetryPolicy, Schedule, Timer, TimerStatus};

use crate::{Error, Result};

/// The `t_timer` columns every timer query selects, in order. `status` is
/// read as a 64-bit integer in every dialect.
pub(crate) const TIMER_COLUMNS: &str = "timer_id, app, name, CAST(status AS BIGINT) AS status, kind, cron, \
     timezone, run_at, notify, retry, misfire, create_time, modify_time";

/// A `t_timer` row ([`TIMER_COLUMNS`]) as a [`Timer`].
pub(crate) fn timer_from_row<'r, R>(row: &'r R) -> Result<Timer>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: i64 = row.try_get("timer_id")?;
    let corrupt = |what: &str| Error::Corrupt(format!("t_timer {id}: {what}"));
    let status = TimerStatus::from_code(row.try_get("status")?).ok_or_else(|| corrupt("status"))?;
    let kind: String = row.try_get("kind")?;
    let schedule = match kind.as_str() {
        "cron" => Schedule::Cron {
            expr: row.try_get::<Option<String>, _>("cron")?.ok_or_else(|| corrupt("cron"))?,
            timezone: row.try_get("timezone")?,
        },
        "once" => {
            Schedule::Once { run_at_ms: row.try_get::<Option<i64>, _>("run_at")?.ok_or_else(|| corrupt("run_at"))? }
        }
        _ => return Err(corrupt("kind")),
    };
    let notify: Notify =
        serde_json::from_str(&row.try_get::<String, _>("notify")?).map_err(|e| corrupt(&format!("notify: {e}")))?;
    let retry: RetryPolicy =
        serde_json::from_str(&row.try_get::<String, _>("retry")?).map_err(|e| corrupt(&format!("retry: {e}")))?;
    let misfire = MisfirePolicy::parse(&row.try_get::<String, _>("misfire")?).ok_or_else(|| corrupt("misfire"))?;
    Ok(Timer {
        id,
        app: row.try_get("app")?,
        name: row.try_get("name")?,
        status,
        schedule,
        notify,
        retry,
        misfire,
        create_time: row.try_get("create_time")?,
        modify_time: row.try_get("modify_time")?,
    })
}

/// A `t_node` row as a [`NodeInfo`].
pub(crate) fn node_from_row<'r, R>(row: &'r R) -> Result<NodeInfo>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.try_get("node_id")?;
    let shards = serde_json::from_str(&row.try_get::<String, _>("shards")?)
        .map_err(|e| Error::Corrupt(format!("t_node {id}: shards: {e}")))?;
    Ok(NodeInfo {
        id,
        host: row.try_get("host")?,
        listen: row.try_get("listen")?,
        started_at: row.try_get("started_at")?,
        heartbeat_at: row.try_get("heartbeat_at")?,
        shards,
    })
}

/// Maps a unique-index violation on insert to [`Error::NameTaken`] for `app`/`name`.
pub(crate) fn name_taken_or(err: sqlx::Error, app: &str, name: &str) -> Error {
    match err {
        sqlx::Error::Database(e) if e.is_unique_violation() => Error::NameTaken { app: app.into(), name: name.into() },
        e => e.into(),
    }
}

/// SQL true when the claim of a running fire may be taken over: its lease
/// ended before `now`, or the node named by its owner token
/// (`{node_id}:{seq}`) has a `t_node` row with no heartbeat since
/// `alive_since`: it died, and waiting for the lease would make a takeover
/// a minute long. An owner with no row at all (a node that never reported)
/// waits for its lease.
/// `owner` is the owner column as the statement names it; `now` and
/// `alive_since` are placeholders. The same text in every dialect.
pub(crate) fn claim_taken_over(owner: &str, now: &str, alive_since: &str) -> String {
    format!(
        "(lease_until < {now} OR EXISTS (SELECT 1 FROM t_node n WHERE n.heartbeat_at < {alive_since} \
         AND substr({owner}, 1, length(n.node_id) + 1) = n.node_id || ':'))"
    )
}
