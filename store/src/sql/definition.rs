//! A timer's definition as `t_timer` stores it: its columns listed once
//! ([`timer_definition!`]: each column's name, its PostgreSQL type, whether
//! reads widen it), from which every column list of a timer is made
//! ([`DEFINITION`], [`TIMER_COLUMNS`],
//! [`PG_TYPES`]), bound in that order ([`bind_definition!`]) by every
//! write of a timer (the insert in each backend, the update).

use const_format::{concatcp, formatcp};

use crate::sql::code;

/// The one list of a timer's definition columns, in the order
/// [`bind_definition!`] binds them: each column's name and PostgreSQL type
/// (a create there binds one array per column), `as bigint` where reads
/// widen a small integer. Passes the list to `$then!`.
macro_rules! timer_definition {
    ($then:ident) => {
        $then! {
            name: text,
            status: smallint as bigint,
            kind: text,
            cron: text,
            timezone: text,
            run_at: bigint,
            notify: text,
            retry: text,
            misfire: text,
            delete_after_run: smallint as bigint,
            on_failure: text,
            pause_after_failures: integer as bigint,
            overlap: text,
            every_ms: bigint,
            timing: text,
            on_missed: text,
            on_late: text,
            dedupe_key: text,
            dedupe_first_run: bigint,
        }
    };
}

/// The names of [`timer_definition!`]'s columns, comma-separated.
macro_rules! names {
    ($first:ident: $ft:ident $(as $fw:ident)? $(, $col:ident: $t:ident $(as $w:ident)?)* $(,)?) => {
        concatcp!(stringify!($first) $(, ", ", stringify!($col))*)
    };
}

/// A column as reads select it: small integers widened to 64 bits.
macro_rules! read_as {
    ($col:ident, $wide:ident) => {
        concatcp!("CAST(", stringify!($col), " AS BIGINT) AS ", stringify!($col))
    };
    ($col:ident,) => {
        stringify!($col)
    };
}

/// [`timer_definition!`]'s columns as reads select them, comma-separated.
macro_rules! reads {
    ($first:ident: $ft:ident $(as $fw:ident)? $(, $col:ident: $t:ident $(as $w:ident)?)* $(,)?) => {
        concatcp!(read_as!($first, $($fw)?) $(, ", ", read_as!($col, $($w)?))*)
    };
}

/// [`timer_definition!`]'s PostgreSQL types, in order.
macro_rules! pg_types {
    ($($col:ident: $t:ident $(as $w:ident)?),* $(,)?) => {
        [$(stringify!($t)),*]
    };
}

/// The columns of a timer's definition, in the order [`bind_definition!`]
/// binds them: every write of a timer (create in each backend, update) sets
/// them from this one list.
pub(crate) const DEFINITION: &str = timer_definition!(names);

/// [`DEFINITION`] as reads select it (small integers as 64 bits).
pub(crate) const DEFINITION_READ: &str = timer_definition!(reads);

/// The `t_timer` columns every timer query selects: the definition's
/// ([`DEFINITION_READ`]) and what the store keeps beside it.
/// Small integers are read as 64-bit in every dialect.
pub(crate) const TIMER_COLUMNS: &str =
    formatcp!("timer_id, app, {}, pause_reason, create_time, modify_time, labels", DEFINITION_READ);

/// The PostgreSQL type of each column of [`DEFINITION`], in order.
pub(crate) const PG_TYPES: &[&str] = &timer_definition!(pg_types);

/// A create's end on SQLite and PostgreSQL: a name taken by a live timer
/// of the app skips its row; the rows made are returned.
pub(crate) const ON_NAME_TAKEN: &str = formatcp!(
    " ON CONFLICT (app, name) WHERE status <> {} DO NOTHING RETURNING timer_id, app, name",
    code::TIMER_DELETED
);
/// Binds `$t`'s definition in [`DEFINITION`] order with `$q.$bind(..)`:
/// `bind` on a query, `push_bind` on a `VALUES` row.
macro_rules! bind_definition {
    ($q:expr, $bind:ident, $t:expr) => {{
        use $crate::sql::definition::json;
        use $crate::sql::{schedule_columns, timing_column};
        let t: &xtimer_core::timer::NewTimer = $t;
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
            .$bind(t.dedupe.as_ref().map(|d| d.key.as_str()))
            .$bind(t.dedupe.as_ref().map(|d| d.first_run_ms))
    }};
}
pub(crate) use bind_definition;

// `next_run` starts at the timer's first fire (`NewTimer::first_next_run`):
// a timer due before the migrator's horizon is expanded at its next step at
// the latest (its creator normally expands it at once); one due later is
// not read until then.
pub(crate) const INSERT: &str =
    formatcp!("INSERT INTO t_timer (app, {DEFINITION}, create_time, modify_time, next_run, peak_fpm) ");

/// Pushes a `VALUES` row per `(timer, load)` of `$rows` on `$qb`, in
/// [`INSERT`]'s column order: the app, the definition
/// ([`bind_definition!`]), made and modified at `$now_ms`, the timer's first
/// fire and its peak load. SQLite's and MySQL's multi-row creates.
macro_rules! push_timer_rows {
    ($qb:expr, $rows:expr, $now_ms:expr) => {{
        let now_ms: i64 = $now_ms;
        $qb.push_values($rows, |mut b, (t, load)| {
            b.push_bind(t.app.as_str());
            $crate::sql::definition::bind_definition!(b, push_bind, t)
                .push_bind(now_ms)
                .push_bind(now_ms)
                .push_bind(t.first_next_run(now_ms))
                .push_bind($crate::sql::peak_column(*load));
        });
    }};
}
pub(crate) use push_timer_rows;

/// Stores a timer's new definition: [`DEFINITION`] as `$1` to `$n`, then
/// the modify time, its peak load, its status again (enabling, or keeping
/// enabled, marks it for expansion at once) and its id.
pub(crate) static UPDATE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
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
pub(crate) fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a timer's definition serializes")
}
