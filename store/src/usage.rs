//! What each app uses (`t_app_usage`, `t_app_minute`), kept in the same
//! transaction as every timer change, so the create-time limits cost the
//! same whatever the app holds: [`Quota`](crate::repo::Quota) is checked against counters, never
//! by reading the app's timers.
//!
//! An app's usage is its timers that are not deleted, the sum of its
//! enabled cron timers' peak fires per minute, and per minute its enabled
//! one-shot timers due then ([`Load`]). An app without a row (one that
//! predates the counters) is counted from `t_timer` once, the first time a
//! change needs it. On PostgreSQL and MySQL the row is locked for the
//! transaction, so concurrent changes of one app take turns; SQLite has one
//! writer. On MySQL an app's first count starts from a placeholder row the
//! counting transaction holds (see [`AppUsage::read`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use const_format::formatcp;
use sqlx::{QueryBuilder, Row};
use xtimer_core::load::Load;
use xtimer_core::timer::{Schedule, TimerStatus};

use crate::db::{on_tx, Tx};
use crate::driver::{Dialect, TxDriver};
use crate::repo::{Quota, Refusal};
use crate::sql::usage::UNCOUNTED;
use crate::sql::{code, opt_text, peak_column, push_list, text};
use crate::{Database, Result};

const COUNT_TIMERS: &str =
    formatcp!("SELECT COUNT(*) FROM t_timer WHERE app = $1 AND status <> {}", code::TIMER_DELETED);
const ENABLED_CRONS: &str = formatcp!(
    "SELECT timer_id, cron, timezone, peak_fpm FROM t_timer WHERE app = $1 AND status = {} AND kind = 'cron'",
    code::TIMER_ENABLED
);
const SET_PEAK: &str = "UPDATE t_timer SET peak_fpm = $1 WHERE timer_id = $2";
const ADD_USAGE: &str = "UPDATE t_app_usage SET timers = timers + $1, cron_fpm = cron_fpm + $2 WHERE app = $3";
const MINUTE_FIRES: &str = "SELECT fires FROM t_app_minute WHERE app = $1 AND minute = $2";
const FULLEST_MINUTE: &str = "SELECT COALESCE(MAX(fires), 0) FROM t_app_minute WHERE app = $1 AND minute >= $2";
const FORGET_MINUTES: &str = "DELETE FROM t_app_minute WHERE minute < $1";

/// One app's usage, read (and on PostgreSQL and MySQL locked) in a
/// transaction, with the changes to write back.
pub(crate) struct AppUsage {
    app: String,
    now_minute: i64,
    timers: u64,
    cron_fpm: u64,
    /// Fires per minute of one-shots, for the minutes looked at.
    minutes: HashMap<i64, u64>,
    /// The fullest minute of one-shots from now on, once looked at.
    fullest: Option<u64>,
    added_timers: i64,
    added_cron: i64,
    added_minutes: BTreeMap<i64, i64>,
}

impl AppUsage {
    /// Reads `app`'s usage in `tx` (counting it from `t_timer` if it has no
    /// row yet) and locks it on PostgreSQL and MySQL.
    ///
    /// On MySQL an app without a row gets a placeholder row first (locked by
    /// the upsert that makes it, or waited for when another transaction
    /// made it); whoever holds the placeholder counts the app into it.
    pub(crate) async fn read(tx: &mut Tx, app: &str, now_ms: i64) -> Result<Self> {
        let sql = tx.statements().read_usage;
        let read = |row: Option<(i64, i64)>| row.filter(|(timers, _)| *timers != UNCOUNTED);
        let row: Option<(i64, i64)> =
            on_tx!(tx, c => sqlx::query_as(&c.sql(sql)).bind(app).fetch_optional(&mut *c).await?);
        let (timers, cron_fpm) = match read(row) {
            Some(row) => row,
            None => {
                count_app(tx, app, now_ms).await?;
                on_tx!(tx, c => sqlx::query_as(&c.sql(sql)).bind(app).fetch_one(&mut *c).await?)
            }
        };
        Ok(Self::new(app, now_ms, timers, cron_fpm))
    }

    /// `app`'s usage as read: `timers` and `cron_fpm`, no change counted.
    fn new(app: &str, now_ms: i64, timers: i64, cron_fpm: i64) -> Self {
        Self {
            app: app.to_string(),
            now_minute: now_ms.div_euclid(60_000),
            timers: timers.max(0) as u64,
            cron_fpm: cron_fpm.max(0) as u64,
            minutes: HashMap::new(),
            fullest: None,
            added_timers: 0,
            added_cron: 0,
            added_minutes: BTreeMap::new(),
        }
    }

    /// Counts one more timer (not yet enabled), within `quota`.
    pub(crate) fn add_timer(&mut self, quota: &Quota) -> std::result::Result<(), Refusal> {
        let adding = self.added_timers + 1;
        if self.timers.saturating_add_signed(adding) > quota.timers_per_app {
            return Err(Refusal::TooManyTimers {
                has: self.timers,
                adding: adding.max(1) as u64,
                max: quota.timers_per_app,
            });
        }
        self.added_timers = adding;
        Ok(())
    }

    /// Counts a timer no longer there (deleted).
    pub(crate) fn remove_timer(&mut self) {
        self.added_timers -= 1;
    }

    /// Counts `load` enabled, within `quota`.
    pub(crate) async fn enable(
        &mut self,
        tx: &mut Tx,
        load: Load,
        quota: &Quota,
    ) -> Result<std::result::Result<(), Refusal>> {
        let cron = self.cron_fpm.saturating_add_signed(self.added_cron);
        let max = quota.fires_per_minute_per_app;
        let (fires, own) = match load {
            Load::Cron(0) => return Ok(Ok(())),
            Load::Cron(peak) => (cron + self.fullest_minute(tx).await? + peak, peak),
            Load::Minute(m) => (cron + self.minute(tx, m.max(self.now_minute)).await? + 1, 1),
        };
        if fires > max {
            return Ok(Err(Refusal::TooManyFires { fires, own, max }));
        }
        self.apply(load, 1);
        Ok(Ok(()))
    }

    /// Counts `load` no longer enabled.
    pub(crate) fn disable(&mut self, load: Load) {
        self.apply(load, -1);
    }

    fn apply(&mut self, load: Load, sign: i64) {
        match load {
            Load::Cron(peak) => self.added_cron += sign * peak as i64,
            Load::Minute(m) => {
                let m = m.max(self.now_minute);
                *self.added_minutes.entry(m).or_default() += sign;
                if let Some(n) = self.minutes.get_mut(&m) {
                    *n = n.saturating_add_signed(sign);
                    if let Some(fullest) = &mut self.fullest {
                        *fullest = (*fullest).max(*n);
                    }
                }
            }
        }
    }

    /// One-shot fires in minute `m`, this transaction's changes included.
    async fn minute(&mut self, tx: &mut Tx, m: i64) -> Result<u64> {
        if let Some(n) = self.minutes.get(&m) {
            return Ok(*n);
        }
        let stored: Option<i64> = on_tx!(tx, c => sqlx::query_scalar(&c.sql(MINUTE_FIRES))
            .bind(&self.app)
            .bind(m)
            .fetch_optional(&mut *c)
            .await?);
        let n = stored.unwrap_or(0).saturating_add(self.added_minutes.get(&m).copied().unwrap_or(0)).max(0) as u64;
        self.minutes.insert(m, n);
        Ok(n)
    }

    /// The fullest minute of one-shots from now on, this transaction's
    /// changes included.
    async fn fullest_minute(&mut self, tx: &mut Tx) -> Result<u64> {
        if let Some(n) = self.fullest {
            return Ok(n);
        }
        let stored: i64 = on_tx!(tx, c => sqlx::query_scalar(&c.sql(FULLEST_MINUTE))
            .bind(&self.app)
            .bind(self.now_minute)
            .fetch_one(&mut *c)
            .await?);
        let mut fullest = stored.max(0) as u64;
        for m in self.added_minutes.keys().copied().collect::<Vec<_>>() {
            fullest = fullest.max(self.minute(tx, m).await?);
        }
        self.fullest = Some(fullest);
        Ok(fullest)
    }

    /// Writes the changes counted since [`AppUsage::read`].
    pub(crate) async fn write(self, tx: &mut Tx) -> Result<()> {
        if self.added_timers != 0 || self.added_cron != 0 {
            on_tx!(tx, c => sqlx::query(&c.sql(ADD_USAGE))
                .bind(self.added_timers)
                .bind(self.added_cron)
                .bind(&self.app)
                .execute(&mut *c)
                .await?
                .rows_affected());
        }
        for (minute, fires) in self.added_minutes.into_iter().filter(|(_, n)| *n != 0) {
            on_tx!(tx, c => c.add_minute_fires(&self.app, minute, fires).await?);
        }
        Ok(())
    }
}

/// Apps per statement of the batched reads and writes below.
const APPS_PER_STATEMENT: usize = 500;

/// Begins a transaction on `db` and reads the usage of every app of `apps`
/// in it, as [`AppUsage::read`] reads one: several apps in a statement per
/// [`APPS_PER_STATEMENT`] apps rather than one per app, on PostgreSQL and
/// MySQL locked in app order, as reading them one by one in that order
/// would. An app not counted yet (no row: its first change since the
/// counters came) is counted, which takes locks of its own; so on
/// PostgreSQL and MySQL that transaction is rolled back, its locks with it,
/// and a new one reads the apps one by one, in app order.
pub(crate) async fn begin_with_usages<'a>(
    db: &Database,
    apps: &BTreeSet<&'a str>,
    now_ms: i64,
) -> Result<(Tx, BTreeMap<&'a str, AppUsage>)> {
    let mut tx = Tx::begin(db).await?;
    let mut usages = BTreeMap::new();
    if apps.len() > 1 {
        usages = read_counted(&mut tx, apps, now_ms).await?;
        if usages.len() < apps.len() && tx.statements().reads_lock {
            tx.rollback().await?;
            tx = Tx::begin(db).await?;
            usages.clear();
        }
    }
    // Apps not read above (one alone; not counted yet).
    for app in apps {
        if !usages.contains_key(app) {
            usages.insert(*app, AppUsage::read(&mut tx, app, now_ms).await?);
        }
    }
    Ok((tx, usages))
}

/// The counted usage rows of `apps`, in a statement per
/// [`APPS_PER_STATEMENT`] apps, locked in app order on PostgreSQL and
/// MySQL; an app without a counted row is left out.
async fn read_counted<'a>(tx: &mut Tx, apps: &BTreeSet<&'a str>, now_ms: i64) -> Result<BTreeMap<&'a str, AppUsage>> {
    let mut usages = BTreeMap::new();
    let lock = tx.statements().lock_usages;
    let list: Vec<&str> = apps.iter().copied().collect();
    for chunk in list.chunks(APPS_PER_STATEMENT) {
        let rows: Vec<(String, i64, i64)> = on_tx!(tx, c => {
            let mut qb = QueryBuilder::new("SELECT app, timers, cron_fpm FROM t_app_usage WHERE app IN (");
            push_list(&mut qb, chunk.iter().copied());
            qb.push(")").push(lock);
            qb.build().fetch_all(&mut *c).await?.iter()
                .map(|r| Ok((text(r, "app")?, r.try_get::<i64, _>("timers")?, r.try_get::<i64, _>("cron_fpm")?)))
                .collect::<Result<_>>()?
        });
        for (app, timers, cron_fpm) in rows.into_iter().filter(|(_, timers, _)| *timers != UNCOUNTED) {
            if let Some(app) = apps.get(app.as_str()) {
                usages.insert(*app, AppUsage::new(app, now_ms, timers, cron_fpm));
            }
        }
    }
    Ok(usages)
}

/// Reads ahead, in a statement or two per [`APPS_PER_STATEMENT`] apps,
/// what [`AppUsage::enable`] would read one query at a time: the fullest
/// minute of each app of `crons` (apps enabling a cron timer) and the
/// one-shot fires of each `(app, minute)` of `minutes`. Only for usages
/// just read, with no change counted yet.
pub(crate) async fn read_ahead(
    tx: &mut Tx,
    usages: &mut BTreeMap<&str, AppUsage>,
    crons: &BTreeSet<&str>,
    minutes: &BTreeSet<(&str, i64)>,
) -> Result<()> {
    let Some(now_minute) = usages.values().next().map(|u| u.now_minute) else { return Ok(()) };
    let crons: Vec<&str> = crons.iter().copied().filter(|app| usages.contains_key(*app)).collect();
    for chunk in crons.chunks(APPS_PER_STATEMENT) {
        let rows: Vec<(String, i64)> = on_tx!(tx, c => {
            let mut qb = QueryBuilder::new("SELECT app, COALESCE(MAX(fires), 0) AS fullest FROM t_app_minute WHERE minute >= ");
            qb.push_bind(now_minute).push(" AND app IN (");
            push_list(&mut qb, chunk.iter().copied());
            qb.push(") GROUP BY app");
            qb.build().fetch_all(&mut *c).await?.iter()
                .map(|r| Ok((text(r, "app")?, r.try_get::<i64, _>("fullest")?)))
                .collect::<Result<_>>()?
        });
        let found: HashMap<String, i64> = rows.into_iter().collect();
        for app in chunk {
            let usage = usages.get_mut(*app).expect("filtered to the usages read");
            usage.fullest = Some(found.get(*app).copied().unwrap_or(0).max(0) as u64);
        }
    }
    let minutes: Vec<(&str, i64)> = minutes
        .iter()
        .map(|(app, m)| (*app, (*m).max(now_minute)))
        .filter(|(app, _)| usages.contains_key(*app))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for chunk in minutes.chunks(APPS_PER_STATEMENT) {
        let rows: Vec<(String, i64, i64)> = on_tx!(tx, c => {
            let mut qb = QueryBuilder::new("SELECT app, minute, fires FROM t_app_minute WHERE app IN (");
            push_list(&mut qb, chunk.iter().map(|(app, _)| *app).collect::<BTreeSet<_>>());
            qb.push(") AND minute IN (");
            push_list(&mut qb, chunk.iter().map(|(_, m)| *m).collect::<BTreeSet<_>>());
            qb.push(")");
            qb.build().fetch_all(&mut *c).await?.iter()
                .map(|r| Ok((text(r, "app")?, r.try_get::<i64, _>("minute")?, r.try_get::<i64, _>("fires")?)))
                .collect::<Result<_>>()?
        });
        let found: HashMap<(String, i64), i64> = rows.into_iter().map(|(app, m, n)| ((app, m), n)).collect();
        for (app, m) in chunk {
            let stored = found.get(&((*app).to_string(), *m)).copied().unwrap_or(0);
            let usage = usages.get_mut(*app).expect("filtered to the usages read");
            usage.minutes.insert(*m, stored.max(0) as u64);
        }
    }
    Ok(())
}

/// Writes the changes of every usage of `usages`, as [`AppUsage::write`]
/// does for one, in a statement per [`APPS_PER_STATEMENT`] rows.
pub(crate) async fn write_all(tx: &mut Tx, usages: impl IntoIterator<Item = AppUsage>) -> Result<()> {
    let mut counts = Vec::new();
    let mut minutes = Vec::new();
    for usage in usages {
        if usage.added_timers != 0 || usage.added_cron != 0 {
            counts.push((usage.app.clone(), usage.added_timers, usage.added_cron));
        }
        for (minute, fires) in usage.added_minutes.into_iter().filter(|(_, n)| *n != 0) {
            minutes.push((usage.app.clone(), minute, fires));
        }
    }
    let statements = tx.statements();
    upsert(tx, "INSERT INTO t_app_usage (app, timers, cron_fpm) ", &counts, statements.add_usage_counts).await?;
    upsert(tx, "INSERT INTO t_app_minute (app, minute, fires) ", &minutes, statements.add_minute_fires).await
}

/// Writes `rows` (an app and two numbers each) with `insert` and
/// `on_conflict`, in a statement per [`APPS_PER_STATEMENT`] rows.
async fn upsert(tx: &mut Tx, insert: &str, rows: &[(String, i64, i64)], on_conflict: &str) -> Result<()> {
    for chunk in rows.chunks(APPS_PER_STATEMENT) {
        on_tx!(tx, c => {
            let mut qb = QueryBuilder::new(insert);
            qb.push_values(chunk, |mut row, (app, a, b)| {
                row.push_bind(app.as_str()).push_bind(*a).push_bind(*b);
            });
            qb.push(on_conflict);
            qb.build().execute(&mut *c).await?.rows_affected()
        });
    }
    Ok(())
}

/// A timer's share of its app's usage while it has `status`: whether it
/// counts as a timer, and the load it adds when enabled.
pub(crate) fn counts_as_timer(status: TimerStatus) -> bool {
    status != TimerStatus::Deleted
}

/// The load a timer adds while enabled: its stored peak for a cron (or
/// computed now, for a timer stored before peaks were kept).
pub(crate) fn load_of(schedule: &Schedule, stored_peak: Option<i64>, now_ms: i64) -> Load {
    match (schedule, stored_peak) {
        (Schedule::Cron { .. }, Some(peak)) => Load::Cron(peak.max(0) as u64),
        _ => Load::of(schedule, now_ms),
    }
}

/// Counts `app` from `t_timer` into a new usage row (and its minutes); a
/// no-op when a concurrent transaction made the row first. On MySQL the
/// row is the placeholder, made (or waited for) and locked first; it is
/// counted unless a concurrent transaction counted it meanwhile.
async fn count_app(tx: &mut Tx, app: &str, now_ms: i64) -> Result<()> {
    if !on_tx!(tx, c => c.hold_uncounted_usage(app).await?) {
        return Ok(());
    }
    let timers: i64 = on_tx!(tx, c => sqlx::query_scalar(&c.sql(COUNT_TIMERS)).bind(app).fetch_one(&mut *c).await?);
    let crons = on_tx!(tx, c => sqlx::query(&c.sql(ENABLED_CRONS)).bind(app).fetch_all(&mut *c).await?
        .iter()
        .map(|r| Ok((r.try_get::<i64, _>("timer_id")?, opt_text(r, "cron")?, text(r, "timezone")?,
                     r.try_get::<Option<i64>, _>("peak_fpm")?)))
        .collect::<Result<Vec<_>>>()?);
    let mut cron_fpm = 0_i64;
    for (id, expr, timezone, peak) in crons {
        let peak = match peak {
            Some(peak) => peak,
            None => {
                let schedule = Schedule::Cron { expr: expr.unwrap_or_default(), timezone };
                let peak = peak_column(Load::of(&schedule, now_ms)).unwrap_or(0);
                on_tx!(tx, c => sqlx::query(&c.sql(SET_PEAK)).bind(peak).bind(id).execute(&mut *c).await?
                    .rows_affected());
                peak
            }
        };
        cron_fpm += peak;
    }
    on_tx!(tx, c => c.store_usage(app, timers, cron_fpm, now_ms.div_euclid(60_000) * 60_000).await?);
    Ok(())
}

/// Counts `n` timers of `app` gone (deleted by the store itself); an app
/// without a row yet is counted from `t_timer` when first needed.
pub(crate) async fn remove_timers(tx: &mut Tx, app: &str, n: i64) -> Result<()> {
    on_tx!(tx, c => sqlx::query(&c.sql(ADD_USAGE)).bind(-n).bind(0_i64).bind(app).execute(&mut *c).await?
        .rows_affected());
    Ok(())
}

/// Deletes the one-shot counts of minutes before `before_minute` (Unix
/// minutes); returns how many.
pub(crate) async fn forget_minutes(db: &Database, before_minute: i64) -> Result<u64> {
    Ok(crate::db::on_db!(db, write, pool => sqlx::query(&pool.sql(FORGET_MINUTES))
        .bind(before_minute)
        .execute(pool)
        .await?
        .rows_affected()))
}
