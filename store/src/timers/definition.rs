//! A timer's definition as `t_timer` stores it: its columns listed once
//! ([`DEFINITION`]), bound in that order ([`bind_definition!`]) by every
//! write of a timer (the insert per dialect, the update).

use const_format::formatcp;

use crate::sql::code;

/// The columns of a timer's definition, in the order [`bind_definition!`]
/// binds them: every write of a timer (create in each dialect, update) sets
/// them from this one list.
pub(super) const DEFINITION: &str =
    "name, status, kind, cron, timezone, run_at, notify, retry, misfire, delete_after_run, \
     on_failure, pause_after_failures, overlap, every_ms, timing, on_missed, on_late";
/// Binds `$t`'s definition in [`DEFINITION`] order with `$q.$bind(..)`:
/// `bind` on a query, `push_bind` on a `VALUES` row.
macro_rules! bind_definition {
    ($q:expr, $bind:ident, $t:expr) => {{
        let t: &NewTimer = $t;
        let (kind, cron, timezone, run_at, every_ms) = schedule_columns(&t.schedule);
        $q.$bind(t.name.as_str())
            .$bind(t.status.code())
            .$bind(kind)
            .$bind(cron)
            .$bind(timezone)
            .$bind(run_at)
            .$bind(json(&t.notify))
            .$bind(json(&t.retry))
            .$bind(t.misfire.as_str())
            .$bind(i64::from(t.delete_after_run))
            .$bind(t.on_failure.as_ref().map(json))
            .$bind(t.pause_after_failures.map(i64::from))
            .$bind(t.overlap.as_str())
            .$bind(every_ms)
            .$bind(timing_column(&t.timing))
            .$bind(t.on_missed.as_ref().map(json))
            .$bind(t.on_late.as_ref().map(json))
    }};
}
pub(super) use bind_definition;

// `next_run` starts at the timer's first fire (`NewTimer::first_next_run`):
// a timer due before the migrator's horizon is expanded at its next step at
// the latest (its creator normally expands it at once); one due later is
// not read until then.
pub(super) const INSERT: &str =
    formatcp!("INSERT INTO t_timer (app, {DEFINITION}, create_time, modify_time, next_run, peak_fpm) ");

/// Stores a timer's new definition: [`DEFINITION`] as `$1` to `$n`, then
/// the modify time, its peak load, its status again (enabling, or keeping
/// enabled, marks it for expansion at once) and its id.
pub(super) static UPDATE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let set: Vec<String> = DEFINITION.split(", ").enumerate().map(|(i, c)| format!("{c} = ${}", i + 1)).collect();
    let n = set.len();
    format!(
        "UPDATE t_timer SET {}, modify_time = ${}, peak_fpm = ${}, pause_reason = NULL,
             next_run = CASE WHEN ${} = {enabled} THEN 0 ELSE next_run END
         WHERE timer_id = ${} AND status <> {deleted}",
        set.join(", "),
        n + 1,
        n + 2,
        n + 3,
        n + 4,
        enabled = code::TIMER_ENABLED,
        deleted = code::TIMER_DELETED
    )
});

/// A definition's JSON column.
pub(super) fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a timer's definition serializes")
}
