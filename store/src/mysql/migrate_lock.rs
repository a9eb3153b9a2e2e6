//! The schema migration's lock on MySQL: a row of `t_migration_lock`, so
//! it holds across a Galera cluster, where `GET_LOCK` holds on one node
//! only (nodes started together on different Galera nodes then applied the
//! same migration at once: `1062 Duplicate entry` in `_sqlx_migrations`,
//! or `migration N is partially applied`).
//!
//! The row names its owner and an expiry (the server's clock, ms): a node
//! takes it by inserting it, or by taking over one whose expiry has passed
//! (its migrator crashed); it renews the expiry while it migrates (on a
//! connection of its own) and deletes the row at the end. Two nodes that
//! write the row at once never both win: on one server the primary key and
//! the row lock decide, on Galera certification does (the loser's write
//! fails with 1213 and it waits like any other). The table lives in the
//! database it guards and is empty between migrations.

use std::time::Duration;

use sqlx::mysql::MySqlConnectOptions;
use sqlx::{Connection, Executor, MySqlConnection};
use tokio::time::Instant;

use crate::{Error, Result};

/// How long a lock that is not renewed holds: a migrator that crashed
/// blocks the others this long.
pub(crate) const LOCK_TTL: Duration = Duration::from_secs(30);

/// How often the holder renews the lock while it migrates.
const RENEW_EVERY: Duration = Duration::from_secs(5);

const CREATE: &str = "CREATE TABLE IF NOT EXISTS t_migration_lock (
    id INT NOT NULL PRIMARY KEY,
    owner VARCHAR(100) NOT NULL,
    expires_at BIGINT NOT NULL
) ENGINE = InnoDB";

/// The server's clock, ms since the epoch.
const NOW_MS: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";

/// The migration lock, held until [`MigrationLock::release`].
pub(crate) struct MigrationLock {
    owner: String,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

impl MigrationLock {
    /// Takes the lock on `conn`'s database, waiting up to `wait` for
    /// another node's migration to end (or its lock to expire); with
    /// `renew_with`, a connection of its own renews the lock meanwhile.
    pub(crate) async fn take(
        conn: &mut MySqlConnection,
        renew_with: Option<&MySqlConnectOptions>,
        session: &str,
        wait: Duration,
    ) -> Result<Self> {
        create_table(conn).await?;
        let owner = format!("{}:{}:{:016x}", hostname(), std::process::id(), rand::random::<u64>());
        let deadline = Instant::now() + wait;
        let mut logged = false;
        loop {
            match try_take(conn, &owner).await {
                Ok(true) => break,
                Ok(false) => {}
                // Another node's write of the row won (a Galera
                // certification conflict, a deadlock): the lock is theirs.
                Err(err) if crate::conflict::is_conflict(&err) => {}
                Err(err) => return Err(err),
            }
            if Instant::now() >= deadline {
                return Err(Error::io(
                    std::io::ErrorKind::TimedOut,
                    format!("another node held the schema migration lock for over {wait:?}"),
                ));
            }
            if !logged {
                tracing::info!("Another node is migrating the schema; waiting for it.");
                logged = true;
            }
            tokio::time::sleep(Duration::from_millis(rand::random_range(100..=300))).await;
        }
        let renewer =
            renew_with.map(|options| tokio::spawn(renew(options.clone(), session.to_string(), owner.clone())));
        Ok(Self { owner, renewer })
    }

    /// Gives the lock up (deletes the row, if still this node's).
    pub(crate) async fn release(mut self, conn: &mut MySqlConnection) -> Result<()> {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
        sqlx::query("DELETE FROM t_migration_lock WHERE id = 1 AND owner = ?")
            .bind(&self.owner)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

impl Drop for MigrationLock {
    fn drop(&mut self) {
        if let Some(renewer) = self.renewer.take() {
            renewer.abort();
        }
    }
}

/// Creates the lock table unless it exists. Nodes creating it at once is
/// fine (`IF NOT EXISTS`); a Galera node that lost the race for the DDL
/// may answer with a conflict, then the table is there.
async fn create_table(conn: &mut MySqlConnection) -> Result<()> {
    for attempt in 0.. {
        match conn.execute(CREATE).await {
            Ok(_) => return Ok(()),
            Err(err) => {
                let err = Error::from(err);
                if attempt >= 5 || !crate::conflict::is_conflict(&err) {
                    return Err(err);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    unreachable!()
}

/// One try at the lock: the row inserted, or an expired one (or one this
/// owner already holds) taken over. True when the row is now `owner`'s.
async fn try_take(conn: &mut MySqlConnection, owner: &str) -> Result<bool> {
    let ttl = LOCK_TTL.as_millis() as i64;
    let inserted = sqlx::query(&format!(
        "INSERT IGNORE INTO t_migration_lock (id, owner, expires_at) VALUES (1, ?, {NOW_MS} + ?)"
    ))
    .bind(owner)
    .bind(ttl)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(true);
    }
    let taken = sqlx::query(&format!(
        "UPDATE t_migration_lock SET owner = ?, expires_at = {NOW_MS} + ? \
         WHERE id = 1 AND (expires_at < {NOW_MS} OR owner = ?)"
    ))
    .bind(owner)
    .bind(ttl)
    .bind(owner)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if taken == 1 {
        tracing::warn!("Took over the schema migration lock of a node that did not renew it (crashed?).");
    }
    Ok(taken == 1)
}

/// Renews `owner`'s lock every [`RENEW_EVERY`] until aborted; a failed
/// renewal is tried again at the next turn.
async fn renew(options: MySqlConnectOptions, session: String, owner: String) {
    let mut conn: Option<MySqlConnection> = None;
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        if conn.is_none() {
            match MySqlConnection::connect_with(&options).await {
                Ok(mut c) => {
                    if c.execute(&*session).await.is_ok() {
                        conn = Some(c);
                    }
                }
                Err(err) => tracing::warn!(error = %err, "Renewing the schema migration lock: cannot connect."),
            }
        }
        if let Some(c) = conn.as_mut() {
            let renewed = sqlx::query(&format!(
                "UPDATE t_migration_lock SET expires_at = {NOW_MS} + ? WHERE id = 1 AND owner = ?"
            ))
            .bind(LOCK_TTL.as_millis() as i64)
            .bind(&owner)
            .execute(&mut *c)
            .await;
            if let Err(err) = renewed {
                tracing::warn!(error = %err, "Renewing the schema migration lock failed; trying again.");
                conn = None;
            }
        }
    }
}

/// This machine's name, for the lock's owner (who holds it, when looked at).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::env::var("HOSTNAME"))
        .map(|h| h.trim().chars().take(40).collect())
        .unwrap_or_else(|_| "?".into())
}
