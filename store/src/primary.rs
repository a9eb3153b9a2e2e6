//! Following the primary of a replicated database: a `database.url` may
//! name several hosts, as libpq, pgx and JDBC take them
//! (`postgres://h1:5432,h2:5432/xtimer?target_session_attrs=read-write`,
//! `mysql://h1:3306,h2:3306,h3:3306/xtimer`). A node connects to the first
//! host that takes writes, and [`PrimaryWatch`] checks it every second: once
//! it is gone or read-only (a failover: another host was promoted), the
//! hosts are tried again in order, with backoff, new connections go to the
//! one that takes writes, and connections made before the move are dropped
//! as they come back to the pool. Until a primary answers, store calls fail
//! with transient errors (the API's 503 with `Retry-After`); no node exits.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnectionMetadata;
use sqlx::{ConnectOptions, Connection};

use crate::{redact, Result};

/// How often the primary is checked.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long one check, or one host's probe, may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Wait between the first two rounds over the hosts while none takes writes.
const PROBE_EVERY: Duration = Duration::from_millis(250);
/// Longest wait between two rounds over the hosts while none takes writes.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// How long a store call waits for a connection of a pool that follows
/// several hosts: during a failover, the API answers within it (503 with
/// `Retry-After`, or the call's answer once the new primary takes it).
pub(crate) const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// The libpq parameter that asks for a host taking writes: xtimer always
/// needs one, so it is read (and left out of what the driver sees).
const TARGET_SESSION_ATTRS: &str = "target_session_attrs";

/// One URL per host of a `database.url` naming several hosts, in order;
/// `None` for a URL of one host (left as it is).
pub(crate) fn split_hosts(url: &str) -> Option<Vec<String>> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((user, hosts)) => (format!("{user}@"), hosts),
        None => (String::new(), authority),
    };
    if !hosts.contains(',') {
        return None;
    }
    let tail = without_param(tail, TARGET_SESSION_ATTRS);
    Some(
        hosts
            .split(',')
            .map(str::trim)
            .filter(|host| !host.is_empty())
            .map(|host| format!("{scheme}://{userinfo}{host}{tail}"))
            .collect(),
    )
}

/// `tail` (path and query) without the query parameter `name`.
fn without_param(tail: &str, name: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else { return tail.to_owned() };
    let kept: Vec<&str> =
        query.split('&').filter(|pair| pair.split('=').next() != Some(name) && !pair.is_empty()).collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

/// A boxed future, as sqlx's callbacks take them.
pub(crate) type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Whether the server a connection reaches takes writes.
pub(crate) type IsPrimary<DB> =
    for<'c> fn(&'c mut <DB as sqlx::Database>::Connection) -> BoxFuture<'c, sqlx::Result<bool>>;

/// The hosts of one database and which of them the pool connects to.
pub(crate) struct Hosts<DB: sqlx::Database> {
    /// Each host's options and its URL, redacted for logs.
    hosts: Vec<(<DB::Connection as Connection>::Options, String)>,
    is_primary: IsPrimary<DB>,
    /// When the pool last moved to another host: connections older than
    /// this reach the host it left, and are dropped.
    moved_at: Mutex<Option<Instant>>,
}

impl<DB: sqlx::Database> Hosts<DB> {
    /// The hosts of `urls`, each opened with `options_of`.
    pub(crate) fn new(
        urls: &[String],
        options_of: impl Fn(&str) -> Result<<DB::Connection as Connection>::Options>,
        is_primary: IsPrimary<DB>,
    ) -> Result<Arc<Self>> {
        let hosts = urls.iter().map(|url| Ok((options_of(url)?, redact(url)))).collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(Self { hosts, is_primary, moved_at: Mutex::new(None) }))
    }

    /// The first host, in order, that answers and takes writes: its index.
    /// The error of the last host tried when none does.
    pub(crate) async fn find_primary(&self) -> std::result::Result<usize, String> {
        let mut why = String::from("no host given");
        for (index, (options, url)) in self.hosts.iter().enumerate() {
            let probe = async {
                let mut conn = options.connect().await?;
                let primary = (self.is_primary)(&mut conn).await;
                let _ = conn.close().await;
                primary
            };
            match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
                Ok(Ok(true)) => return Ok(index),
                Ok(Ok(false)) => why = format!("{url} is read-only (a replica)"),
                Ok(Err(err)) => why = format!("{url}: {err}"),
                Err(_) => why = format!("{url} did not answer within {PROBE_TIMEOUT:?}"),
            }
        }
        Err(why)
    }

    /// [`Self::find_primary`], tried again for `within` (a failover may be
    /// under way as the node starts); an error naming `url` (redacted) and
    /// why the last host tried was refused.
    pub(crate) async fn wait_for_primary(&self, url: &str, within: Duration) -> Result<usize> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match self.find_primary().await {
                Ok(index) => return Ok(index),
                Err(why) if tokio::time::Instant::now() >= deadline => {
                    let message = format!("no host of {} takes writes: {why}", redact(url));
                    let io = std::io::Error::new(std::io::ErrorKind::NotConnected, message);
                    return Err(crate::Error::Database(sqlx::Error::Io(io)));
                }
                Err(why) => tracing::info!(%why, "No database host takes writes yet; waiting"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The options of host `index`.
    pub(crate) fn options(&self, index: usize) -> <DB::Connection as Connection>::Options {
        self.hosts[index].0.clone()
    }

    /// The pool's `before_acquire` check: a connection made before the
    /// pool last moved to another host is dropped.
    pub(crate) fn keeps(&self, meta: &PoolConnectionMetadata) -> bool {
        let moved_at = *self.moved_at.lock().unwrap_or_else(|e| e.into_inner());
        match (moved_at, Instant::now().checked_sub(meta.age)) {
            (Some(moved), Some(made)) => made >= moved,
            _ => true,
        }
    }
}

/// The hosts of a URL naming several, and the one that takes writes now.
pub(crate) type Following<DB> = Option<(Arc<Hosts<DB>>, usize)>;

/// `pool` dropping the connections made before it last moved to another
/// host, and waiting at most [`ACQUIRE_TIMEOUT`] for a connection.
pub(crate) fn dropping_stale<DB: sqlx::Database>(
    pool: sqlx::pool::PoolOptions<DB>,
    following: &Following<DB>,
) -> sqlx::pool::PoolOptions<DB> {
    let Some((hosts, _)) = following else { return pool };
    let hosts = hosts.clone();
    pool.acquire_timeout(ACQUIRE_TIMEOUT).before_acquire(move |_, meta| {
        let keep = hosts.keeps(&meta);
        Box::pin(async move { Ok(keep) })
    })
}

/// Starts the [`PrimaryWatch`] of `pool`, if it follows several hosts.
pub(crate) fn watch<DB: sqlx::Database>(pool: &sqlx::Pool<DB>, following: Following<DB>) {
    if let Some((hosts, current)) = following {
        tokio::spawn(PrimaryWatch { pool: pool.clone(), hosts, current }.run());
    }
}

/// Checks every second that the pool's host still takes writes, and moves
/// the pool to the host that does when it no longer does. Runs until the
/// pool is closed.
pub(crate) struct PrimaryWatch<DB: sqlx::Database> {
    pub(crate) pool: sqlx::Pool<DB>,
    pub(crate) hosts: Arc<Hosts<DB>>,
    /// The host the pool connects to now.
    pub(crate) current: usize,
}

impl<DB: sqlx::Database> PrimaryWatch<DB> {
    /// Checks until the pool closes.
    pub(crate) async fn run(mut self) {
        let pool = self.pool.clone();
        tokio::select! {
            _ = pool.close_event() => {}
            _ = self.watch() => {}
        }
    }

    async fn watch(&mut self) {
        loop {
            tokio::time::sleep(CHECK_EVERY).await;
            if self.still_primary().await {
                continue;
            }
            // Lost: the hosts are tried in order until one takes writes.
            let mut backoff = PROBE_EVERY;
            let index = loop {
                match self.hosts.find_primary().await {
                    Ok(index) => break index,
                    Err(why) => {
                        tracing::warn!(%why, "No database host takes writes; trying again.");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            };
            if index != self.current {
                let (from, to) = (&self.hosts.hosts[self.current].1, &self.hosts.hosts[index].1);
                tracing::warn!(%from, %to, "The database's primary moved; following it.");
                self.pool.set_connect_options(self.hosts.options(index));
                *self.hosts.moved_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                self.current = index;
            }
        }
    }

    /// Whether the pool's host answers and takes writes, within [`PROBE_TIMEOUT`].
    async fn still_primary(&self) -> bool {
        let check = async {
            let mut conn = self.pool.acquire().await?;
            (self.hosts.is_primary)(&mut conn).await
        };
        matches!(tokio::time::timeout(PROBE_TIMEOUT, check).await, Ok(Ok(true)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_of_several_hosts_is_one_url_per_host_in_order() {
        assert_eq!(split_hosts("postgres://u:p@db1:5432/xtimer"), None, "one host: left as it is");
        assert_eq!(
            split_hosts("postgres://u:p@h1:5432,h2:5433/xtimer?target_session_attrs=read-write&sslmode=disable"),
            Some(vec![
                "postgres://u:p@h1:5432/xtimer?sslmode=disable".to_owned(),
                "postgres://u:p@h2:5433/xtimer?sslmode=disable".to_owned(),
            ])
        );
        assert_eq!(
            split_hosts("mysql://h1:3306,h2:3306,h3:3306/xtimer"),
            Some(vec![
                "mysql://h1:3306/xtimer".to_owned(),
                "mysql://h2:3306/xtimer".to_owned(),
                "mysql://h3:3306/xtimer".to_owned(),
            ])
        );
        assert_eq!(
            split_hosts("postgres://h1,h2?target_session_attrs=read-write"),
            Some(vec!["postgres://h1".to_owned(), "postgres://h2".to_owned()])
        );
    }
}
