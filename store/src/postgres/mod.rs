//! Opening PostgreSQL, for clusters: connecting with clear errors, an
//! optional schema per connection (tests get a fresh one each), the
//! schema migration under an advisory lock, and the first daily partitions
//! of `t_timer_task` (see `partition`). The repositories themselves
//! are written once for every dialect (see [`crate::db`]).

pub(crate) mod driver;
pub(crate) mod fires;
pub(crate) mod notify;
pub mod partition;
pub(crate) mod plan;
pub(crate) mod stats;
pub(crate) mod tasks;
pub(crate) mod timers;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection};
use xtimer_core::config::DatabaseConfig;

use crate::{primary, redact, Database, Error, Result};

/// How long connecting (TCP, TLS, start-up) may take before it counts as
/// unreachable; also bounds waiting for a server that is still starting up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects and applies `migrations/postgres`; with `schema`, every
/// connection uses (and the migration creates) that schema: tests get a
/// fresh one each.
///
/// Several nodes may start at once: the schema is created only if
/// missing (a lost race is fine), and the migrator holds a session
/// advisory lock (keyed on the database name) while it applies
/// migrations, so each applies once.
///
/// An unreachable server is an [`Error::Database`] naming the (redacted)
/// URL and the cause: at once when refused, after 10 s
/// when nothing answers; not a pool's bare "timed out" after retrying a
/// refused connection for half a minute.
pub async fn connect(config: &DatabaseConfig, schema: Option<&str>) -> Result<Database> {
    let options_of = |url: &str| options_for(url, schema);
    let hosts = match primary::split_hosts(&config.url) {
        Some(urls) => {
            let hosts = primary::Hosts::new(&urls, options_of, is_primary)?;
            let index = hosts.wait_for_primary(&config.url, CONNECT_TIMEOUT).await?;
            Some((hosts, index))
        }
        None => None,
    };
    let options = match &hosts {
        Some((hosts, index)) => hosts.options(*index),
        None => options_of(&config.url)?,
    };

    // The migration's connection hears warnings, not notices: each start
    // would log sqlx's `CREATE TABLE IF NOT EXISTS _sqlx_migrations` answer,
    // NOTICE "relation \"_sqlx_migrations\" already exists, skipping".
    let quiet = options.clone().options([("client_min_messages", "warning")]);
    let mut conn = connect_one(&quiet, &config.url).await?;
    if let Some(schema) = schema {
        create_schema(&mut conn, schema).await?;
    }
    // `run_direct`: `run(&mut conn)` makes this future not `Send` for
    // spawning ("implementation of `Acquire` is not general enough").
    sqlx::migrate!("../migrations/postgres").run_direct(&mut conn).await?;
    // Today's partition and the next days' before the first fire is
    // inserted. The wall clock: the node's clock reaches the store only
    // through its loops; the retention loop keeps partitions up on it.
    // Not fatal: until they exist, fires go to the default partition.
    let now_ms = chrono::Utc::now().timestamp_millis();
    match partition::maintain_on(&mut conn, now_ms, None).await {
        Ok(report) if !report.created.is_empty() => {
            tracing::info!(partitions = ?report.created, "Fire partitions created.")
        }
        Ok(_) => {}
        Err(err) => tracing::warn!(error = %err, "Creating fire partitions failed; the retention loop retries."),
    }
    // Closing politely is a courtesy; the migration is committed either way.
    let _ = conn.close().await;

    let pool = PgPoolOptions::new().max_connections(config.max_connections);
    let pool = primary::dropping_stale(pool, &hosts).connect_with(options).await?;
    primary::watch(&pool, hosts);
    Ok(Database::Postgres(pool))
}

/// The connect options of `url`; with `schema`, every connection uses it.
fn options_for(url: &str, schema: Option<&str>) -> Result<PgConnectOptions> {
    let mut options =
        PgConnectOptions::from_str(url)?.log_slow_statements(log::LevelFilter::Debug, Duration::from_secs(1));
    if let Some(schema) = schema {
        // A start-up parameter, so every pooled connection gets it with no extra round trip.
        options = options.options([("search_path", startup_escape(&quote_ident(schema)))]);
    }
    Ok(options)
}

/// Whether the server takes writes (it is not a standby in recovery).
fn is_primary(conn: &mut PgConnection) -> primary::BoxFuture<'_, sqlx::Result<bool>> {
    Box::pin(sqlx::query_scalar("SELECT NOT pg_is_in_recovery()").fetch_one(conn))
}

/// Opens one connection: a refused or unresolvable server fails now with
/// its cause and the URL; one still starting up is waited for, within
/// [`CONNECT_TIMEOUT`].
async fn connect_one(options: &PgConnectOptions, url: &str) -> Result<PgConnection> {
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    let mut backoff = Duration::from_millis(50);
    loop {
        let error = match tokio::time::timeout_at(deadline, PgConnection::connect_with(options)).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(error)) => error,
            Err(_) => {
                return Err(Error::io(
                    std::io::ErrorKind::TimedOut,
                    format!("connecting to PostgreSQL at {} timed out after {CONNECT_TIMEOUT:?}", redact(url)),
                ))
            }
        };
        // 57P03 cannot_connect_now: "the database system is starting up".
        let starting = matches!(&error, sqlx::Error::Database(e) if e.code().as_deref() == Some("57P03"));
        if !starting || tokio::time::Instant::now() + backoff >= deadline {
            return Err(match error {
                sqlx::Error::Io(e) => {
                    Error::io(e.kind(), format!("cannot connect to PostgreSQL at {}: {e}", redact(url)))
                }
                other => other.into(),
            });
        }
        tracing::info!(url = %redact(url), "PostgreSQL is starting up; waiting");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Creates `schema` unless it exists. Checking first lets a role without
/// CREATE on the database use a schema made for it; a concurrent creation
/// by another node is not an error.
async fn create_schema(conn: &mut PgConnection, schema: &str) -> Result<()> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(&mut *conn)
        .await?;
    if exists {
        return Ok(());
    }
    match sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema))).execute(&mut *conn).await {
        Ok(_) => Ok(()),
        // 42P06 duplicate_schema, or 23505 when the catalog's unique index catches the race.
        Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("42P06" | "23505")) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// `name` as a quoted SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Escapes a value for the `options` start-up parameter, where spaces
/// separate arguments and backslash escapes.
fn startup_escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace(' ', "\\ ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_quoted_and_escaped_for_the_startup_options() {
        assert_eq!(quote_ident("t_ab12"), "\"t_ab12\"");
        assert_eq!(quote_ident("we\"ird"), "\"we\"\"ird\"");
        assert_eq!(startup_escape(&quote_ident("my schema\\x")), "\"my\\ schema\\\\x\"");
    }
}
