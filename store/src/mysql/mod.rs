//! Opening MySQL 8 (or MariaDB 10.11), for clusters that run on it:
//! connecting with clear errors, the session settings every statement
//! relies on, an optional database per connection (tests get a fresh one
//! each), and the schema migration (under a lock row, so nodes starting
//! at once apply it once, on one server or across a Galera cluster: see
//! `migrate_lock`). On a Galera node every session waits for the
//! cluster's writes before it reads (see `galera`). The repositories themselves are
//! written once for every dialect (see [`crate::db`]); [`statement`] is how
//! a shared statement reads on MySQL.
//!
//! Every connection runs with `ANSI_QUOTES` (task tables are named in
//! double quotes, as in the other dialects), `PIPES_AS_CONCAT` (`||` joins
//! strings) and `READ COMMITTED` (claims lock the rows they take and no
//! gaps around them, like PostgreSQL). The SQL is what MySQL 8 and MariaDB
//! both run: `FOR UPDATE SKIP LOCKED`, `INSERT IGNORE`, `ON DUPLICATE KEY
//! UPDATE`; no `RETURNING`.

pub(crate) mod driver;
pub(crate) mod fires;
pub(crate) mod galera;
pub(crate) mod migrate_lock;
pub(crate) mod notify;
pub(crate) mod plan;
pub(crate) mod tasks;
pub(crate) mod timers;
pub(crate) mod usage;

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, MySqlConnection};
use xtimer_core::config::DatabaseConfig;

use crate::{primary, redact, Database, Error, Result};

/// How long connecting may take before the server counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a node waits for another to finish migrating the schema.
const MIGRATE_LOCK_WAIT: Duration = Duration::from_secs(120);

/// Session settings of every connection (see the module doc).
const SESSION: &str = "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES,PIPES_AS_CONCAT'); \
     SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// Runs `transaction`, and runs it again when it lost a conflict and was
/// rolled back whole (a deadlock's victim, a Galera certification
/// failure): see [`crate::conflict::retry`]. Claims lock only the rows
/// they take (`SKIP LOCKED`, `READ COMMITTED`), yet two claims that update
/// the status index at once can still deadlock inside InnoDB; the victim's
/// fires would otherwise wait for the reconciler.
pub async fn retry_deadlocks<T, F, Fut>(transaction: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    crate::conflict::retry(transaction).await
}

/// Connects and applies `migrations/mysql`; with `database`, every
/// connection uses (and the migration first creates) that database: tests
/// get a fresh one each.
///
/// An unreachable server is an [`Error::Database`] naming the (redacted)
/// URL and the cause: at once when refused, after 10 s when nothing answers.
pub async fn connect(config: &DatabaseConfig, database: Option<&str>) -> Result<Database> {
    let hosts = match primary::split_hosts(&config.url) {
        Some(urls) => {
            let hosts = primary::Hosts::new(&urls, options_for, is_primary)?;
            let index = hosts.wait_for_primary(&config.url, CONNECT_TIMEOUT).await?;
            Some((hosts, index))
        }
        None => None,
    };
    let mut options = match &hosts {
        Some((hosts, index)) => hosts.options(*index),
        None => options_for(&config.url)?,
    };
    if let Some(database) = database {
        let mut conn = connect_one(&options, &config.url).await?;
        conn.execute(&*format!("CREATE DATABASE IF NOT EXISTS {}", quote_ident(database))).await?;
        let _ = conn.close().await;
        options = options.database(database);
    }

    let mut conn = connect_one(&options, &config.url).await?;
    conn.execute(SESSION).await?;
    let galera = galera::is_galera(&mut conn).await?;
    if galera {
        tracing::info!("The MySQL server is a Galera node: reads wait for the cluster's writes (wsrep_sync_wait = 1).");
    }
    galera::sync_reads(&mut conn, galera).await?;
    migrate(&mut conn, &options).await?;
    let _ = conn.close().await;

    let pool = MySqlPoolOptions::new().max_connections(config.max_connections).after_connect(move |conn, _| {
        Box::pin(async move {
            conn.execute(SESSION).await?;
            galera::sync_reads(conn, galera).await
        })
    });
    let pool = primary::dropping_stale(pool, &hosts).connect_with(options).await?;
    primary::watch(&pool, hosts);
    Ok(Database::Mysql(pool))
}

/// The connect options of `url`.
fn options_for(url: &str) -> Result<MySqlConnectOptions> {
    Ok(MySqlConnectOptions::from_str(url)?
        .charset("utf8mb4")
        .timezone(Some("+00:00".into()))
        .log_slow_statements(log::LevelFilter::Debug, Duration::from_secs(1)))
}

/// Whether the server takes writes: `read_only` off (MySQL's
/// `super_read_only` implies it; MariaDB has only `read_only`).
fn is_primary(conn: &mut MySqlConnection) -> primary::BoxFuture<'_, sqlx::Result<bool>> {
    Box::pin(async move {
        let read_only: i64 = sqlx::query_scalar("SELECT CAST(@@global.read_only AS SIGNED)").fetch_one(conn).await?;
        Ok(read_only == 0)
    })
}

/// Applies `migrations/mysql` under the lock row of `migrate_lock` (per
/// database), so nodes starting at once apply each migration once, on one
/// server or on the nodes of a Galera cluster (`GET_LOCK` holds on one
/// Galera node only). The applied migrations are read after the lock is
/// taken, so a node that waited finds those another node applied
/// meanwhile, and applies none twice. `options` open the connection that
/// renews the lock while migrations run.
async fn migrate(conn: &mut MySqlConnection, options: &MySqlConnectOptions) -> Result<()> {
    let lock = migrate_lock::MigrationLock::take(conn, Some(options), SESSION, MIGRATE_LOCK_WAIT).await?;
    let mut migrator = sqlx::migrate!("../migrations/mysql");
    migrator.set_locking(false);
    let applied = migrator.run_direct(&mut *conn).await;
    let released = lock.release(conn).await;
    applied?;
    released
}

/// Opens one connection: a refused or unresolvable server fails now with
/// its cause and the URL; one that does not answer, after [`CONNECT_TIMEOUT`].
async fn connect_one(options: &MySqlConnectOptions, url: &str) -> Result<MySqlConnection> {
    match tokio::time::timeout(CONNECT_TIMEOUT, MySqlConnection::connect_with(options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(sqlx::Error::Io(e))) => {
            Err(Error::io(e.kind(), format!("cannot connect to MySQL at {}: {e}", redact(url))))
        }
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Error::io(
            std::io::ErrorKind::TimedOut,
            format!("connecting to MySQL at {} timed out after {CONNECT_TIMEOUT:?}", redact(url)),
        )),
    }
}

/// `name` as a quoted MySQL identifier (backticks work whatever the sql_mode).
fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A shared statement as MySQL reads it: each `$n` placeholder becomes `?`
/// (MySQL binds by position, so a shared statement uses `$1`, `$2`, ... once
/// each, in order), and `AS BIGINT)` in a cast becomes `AS SIGNED)`, MySQL's
/// name for a 64-bit integer. Text inside single quotes is left alone.
pub(crate) fn statement(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut expected = 1_u32;
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        if c == '\'' {
            quoted = !quoted;
        } else if !quoted && c == '$' {
            let digits = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                let n: u32 = rest[1..=digits].parse().unwrap_or(0);
                debug_assert_eq!(n, expected, "a shared statement uses each $n once, in order: {sql}");
                expected = n + 1;
                out.push('?');
                rest = &rest[1 + digits..];
                continue;
            }
        } else if !quoted && rest.starts_with("AS BIGINT)") {
            out.push_str("AS SIGNED)");
            rest = &rest["AS BIGINT)".len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_positional_and_casts_signed() {
        assert_eq!(
            statement("SELECT CAST(status AS BIGINT) AS s FROM t WHERE a = $1 AND b = '$2' AND c IN ($2, $3)"),
            "SELECT CAST(status AS SIGNED) AS s FROM t WHERE a = ? AND b = '$2' AND c IN (?, ?)"
        );
        assert_eq!(statement("SELECT 'AS BIGINT)' FROM t"), "SELECT 'AS BIGINT)' FROM t");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "once, in order")]
    fn a_repeated_placeholder_is_caught() {
        statement("UPDATE t SET a = $1 WHERE b = $1");
    }

    #[test]
    fn database_names_are_quoted() {
        assert_eq!(quote_ident("it_ab12"), "`it_ab12`");
        assert_eq!(quote_ident("we`ird"), "`we``ird`");
    }
}
