//! [`CalendarRepo`] on [`Database`]: `t_calendar`, an app's calendars by
//! name, each spec stored as JSON and compiled by whoever reads it.

use async_trait::async_trait;
use sqlx::Row;
use xtimer_core::calendar::{Calendar, CalendarSpec};

use crate::db::on_db;
use crate::driver::Dialect;
use crate::sql::text;
use crate::{Database, Error, Result};

/// What calendars ask of SQL.
#[async_trait]
pub trait CalendarRepo: Send + Sync {
    /// Creates calendar `name` of `app`, or replaces its spec (keeping its
    /// create time); the calendar as stored.
    async fn put_calendar(&self, app: &str, name: &str, spec: &CalendarSpec, now_ms: i64) -> Result<Calendar>;
    /// Calendar `name` of `app`, if there is one.
    async fn get_calendar(&self, app: &str, name: &str) -> Result<Option<Calendar>>;
    /// Every calendar of `app`, by name (byte order).
    async fn app_calendars(&self, app: &str) -> Result<Vec<Calendar>>;
    /// Deletes calendar `name` of `app`; whether there was one.
    async fn delete_calendar(&self, app: &str, name: &str) -> Result<bool>;
}

const COLUMNS: &str = "app, name, spec, create_time, modify_time";

const SELECT_ONE: &str = const_format::concatcp!("SELECT ", COLUMNS, " FROM t_calendar WHERE app = $1 AND name = $2");
const SELECT_APP: &str = const_format::concatcp!("SELECT ", COLUMNS, " FROM t_calendar WHERE app = $1 ORDER BY name");
const DELETE: &str = "DELETE FROM t_calendar WHERE app = $1 AND name = $2";

#[async_trait]
impl CalendarRepo for Database {
    async fn put_calendar(&self, app: &str, name: &str, spec: &CalendarSpec, now_ms: i64) -> Result<Calendar> {
        let json = serde_json::to_string(spec)
            .map_err(|e| Error::Corrupt(format!("calendar {app}/{name}: spec does not encode: {e}")))?;
        // Read back in the same transaction: the row as this put left it.
        on_db!(self, write, pool => {
            let mut tx = pool.begin().await?;
            let statement = pool.sql(pool.statements().upsert_calendar);
            let mut upsert = sqlx::query(&statement)
                .bind(app)
                .bind(name)
                .bind(&json)
                .bind(now_ms)
                .bind(now_ms);
            if pool.statements().upsert_rebinds {
                upsert = upsert.bind(&json).bind(now_ms);
            }
            upsert.execute(&mut *tx).await?;
            let row = sqlx::query(&pool.sql(SELECT_ONE)).bind(app).bind(name).fetch_one(&mut *tx).await?;
            let calendar = calendar_from_row(&row)?;
            tx.commit().await?;
            Ok(calendar)
        })
    }

    async fn get_calendar(&self, app: &str, name: &str) -> Result<Option<Calendar>> {
        on_db!(self, read, pool => sqlx::query(&pool.sql(SELECT_ONE))
            .bind(app)
            .bind(name)
            .fetch_optional(pool)
            .await?
            .as_ref()
            .map(calendar_from_row)
            .transpose())
    }

    async fn app_calendars(&self, app: &str) -> Result<Vec<Calendar>> {
        let mut list = on_db!(self, read, pool => sqlx::query(&pool.sql(SELECT_APP))
            .bind(app)
            .fetch_all(pool)
            .await?
            .iter()
            .map(calendar_from_row)
            .collect::<Result<Vec<_>>>()?);
        // Byte order in every dialect, whatever the server's collation.
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(list)
    }

    async fn delete_calendar(&self, app: &str, name: &str) -> Result<bool> {
        let deleted = on_db!(self, write, pool => sqlx::query(&pool.sql(DELETE))
            .bind(app)
            .bind(name)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(deleted > 0)
    }
}

/// A `t_calendar` row as a [`Calendar`].
fn calendar_from_row<'r, R>(row: &'r R) -> Result<Calendar>
where
    R: Row,
    &'r str: sqlx::ColumnIndex<R>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database>,
{
    let app = text(row, "app")?;
    let name = text(row, "name")?;
    let spec = serde_json::from_str(&text(row, "spec")?)
        .map_err(|e| Error::Corrupt(format!("t_calendar {app}/{name}: spec: {e}")))?;
    Ok(Calendar { spec, create_time: row.try_get("create_time")?, modify_time: row.try_get("modify_time")?, app, name })
}
