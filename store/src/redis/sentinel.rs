//! Redis under Sentinel: `redis.url = "redis+sentinel://h1:26379,h2:26379/mymaster"`
//! names the sentinels and the master's service name. [`SentinelConnection`]
//! asks the sentinels for the master, connects to it, and follows a
//! failover: once a call fails as a master that is gone or demoted fails
//! (the connection lost or refused, a timeout, `READONLY`), it asks the
//! sentinels again and moves to the master they name, for the next call.
//! The failed call returns its error (it may have run), so the loops retry
//! it as they retry any Redis error.

use std::sync::{Arc, Mutex};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::Sentinel;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};

use crate::Result;

/// The URL scheme that names sentinels.
pub(crate) const SCHEME: &str = "redis+sentinel://";

/// Whether `url` names sentinels.
pub(crate) fn is_sentinel(url: &str) -> bool {
    url.starts_with(SCHEME)
}

/// The sentinels (`redis://host:port` each) and the service name of a
/// `redis+sentinel://h1:26379,h2:26379/mymaster` URL; the name defaults to
/// `mymaster`.
pub(crate) fn parse(url: &str) -> (Vec<String>, String) {
    let rest = url.strip_prefix(SCHEME).unwrap_or(url);
    let (hosts, service) = rest.split_once('/').unwrap_or((rest, ""));
    let service = service.split(['?', '/']).next().filter(|s| !s.is_empty()).unwrap_or("mymaster");
    let sentinels = hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(|h| format!("redis://{h}")).collect();
    (sentinels, service.to_owned())
}

/// A connection to the master that the sentinels name, which follows a
/// failover. Clones share it: one move moves them all.
#[derive(Clone)]
pub(crate) struct SentinelConnection {
    inner: Arc<Inner>,
}

struct Inner {
    sentinel: tokio::sync::Mutex<Sentinel>,
    service: String,
    config: ConnectionManagerConfig,
    /// The master's connection now, and how many moves made it.
    current: Mutex<(ConnectionManager, u64)>,
}

impl SentinelConnection {
    /// Connects to the master the sentinels of `url` name.
    pub(crate) async fn open(url: &str, config: ConnectionManagerConfig) -> Result<Self> {
        let (sentinels, service) = parse(url);
        let mut sentinel = Sentinel::build(sentinels)?;
        let client = sentinel.async_master_for(&service, None).await?;
        let conn = ConnectionManager::new_with_config(client, config.clone()).await?;
        let inner =
            Inner { sentinel: tokio::sync::Mutex::new(sentinel), service, config, current: Mutex::new((conn, 0)) };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The master's connection now, and its move count.
    fn current(&self) -> (ConnectionManager, u64) {
        self.inner.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// After a call on connection `seen` failed with `err`: moves to the
    /// master the sentinels name now, unless another caller moved already.
    async fn follow(&self, seen: u64, err: &RedisError) {
        if !left_master(err) {
            return;
        }
        let mut sentinel = self.inner.sentinel.lock().await;
        if self.current().1 != seen {
            return;
        }
        let moved = async {
            let client = sentinel.async_master_for(&self.inner.service, None).await?;
            ConnectionManager::new_with_config(client, self.inner.config.clone()).await
        };
        match moved.await {
            Ok(conn) => {
                let mut current = self.inner.current.lock().unwrap_or_else(|e| e.into_inner());
                *current = (conn, seen + 1);
                tracing::warn!(error = %err, "Redis failed as a master that is gone fails; following the master Sentinel names.");
            }
            Err(why) => tracing::warn!(error = %why, "Asking Sentinel for the Redis master failed; trying again."),
        }
    }
}

/// Whether `err` is how a master that is gone or demoted fails a call.
fn left_master(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || err.kind() == ErrorKind::ReadOnly
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (mut conn, seen) = self.current();
            let result = conn.req_packed_command(cmd).await;
            if let Err(err) = &result {
                self.follow(seen, err).await;
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (mut conn, seen) = self.current();
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            if let Err(err) = &result {
                self.follow(seen, err).await;
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.current().0.get_db()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_names_its_sentinels_and_its_master() {
        assert_eq!(
            parse("redis+sentinel://h1:26379,h2:26380/orders"),
            (vec!["redis://h1:26379".to_owned(), "redis://h2:26380".to_owned()], "orders".to_owned())
        );
        assert_eq!(parse("redis+sentinel://h1:26379"), (vec!["redis://h1:26379".to_owned()], "mymaster".to_owned()));
        assert!(is_sentinel("redis+sentinel://h1:26379/mymaster"));
        assert!(!is_sentinel("redis://h1:6379"));
    }
}
