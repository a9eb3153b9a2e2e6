//! The shard index and locks over Redis, for clusters.
//!
//! # Keys
//!
//! - Shard: a sorted set `{prefix}:shard:{YYYY-MM-DD HH:MM}:{bucket}`
//!   ([`ShardKey::set_key`]), member `{timer_id}_{run_ms}` ([`FireKey`]'s
//!   `Display`), score `run_ms`. It expires [`SHARD_TTL_MS`] after its
//!   minute ends, so keys clean themselves.
//! - Lock: the caller's key (the scheduler's
//!   `{prefix}:lock:{YYYY-MM-DD HH:MM}:{bucket}`, the migrator's and the
//!   reconciler's singletons), holding the owner's token. Taken with
//!   `SET NX PX`; extended and released only by the token's owner, with Lua
//!   scripts that compare the token and act in one step, so a node whose
//!   lease ran out can never touch the lock a newer owner holds.
//!
//! # Time
//!
//! A shard's TTL is computed from the injected [`Clock`](xtimer_core::Clock)
//! (`minute end + SHARD_TTL_MS - now`) and sent as a relative `PEXPIRE`, so
//! the node's idea of "now" decides how long a shard lives, as it does for
//! the embedded store; a fire whose shard has already expired by that clock is
//! not indexed, and reads of such a shard come back empty even if Redis still
//! holds the key. Lock leases, on the other hand, run on the Redis server's
//! clock: it is the one clock every node agrees on, so two nodes with skewed
//! clocks still never both hold a lock.
//!
//! # Failure
//!
//! One [`ConnectionManager`] multiplexes every call and reconnects after a
//! failure. Connecting and every response are bounded by timeouts, and
//! reconnection retries a few times with a capped backoff, so an unreachable
//! Redis surfaces as [`Error::Redis`](crate::Error::Redis) within seconds
//! instead of hanging a loop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};
use xtimer_core::clock::SystemClock;
use xtimer_core::config::ShardConfig;
use xtimer_core::fire::FireKey;
use xtimer_core::shard::ShardKey;
use xtimer_core::SharedClock;

use crate::shard::SHARD_TTL_MS;
use crate::{LockStore, Result, ShardStore};

/// How long one connection attempt may take.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a command (or pipeline) may wait for its reply.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// Reconnection attempts after the first, each after a backoff of about a
/// second (jittered, capped by [`RECONNECT_MAX_DELAY_MS`]).
const RECONNECT_RETRIES: usize = 2;
/// Longest pause between reconnection attempts, ms.
const RECONNECT_MAX_DELAY_MS: u64 = 1_000;
/// Most members per `ZADD`, so one huge batch does not become one huge command.
const ZADD_CHUNK: usize = 1_000;

/// Sets the expiry of `KEYS[1]` to `ARGV[2]` ms if it holds the token `ARGV[1]`.
/// An expired lock is gone, so it cannot be revived (as in the embedded store).
const EXTEND_LUA: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Deletes `KEYS[1]` if it holds the token `ARGV[1]`.
const RELEASE_LUA: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
";

/// Shard sorted sets and lock keys in Redis, over one reconnecting connection manager.
#[derive(Clone)]
pub struct RedisStore {
    config: ShardConfig,
    clock: SharedClock,
    conn: ConnectionManager,
    scripts: Arc<Scripts>,
}

/// The lock scripts, hashed once; invoked with `EVALSHA`, falling back to
/// `EVAL` when the server does not have them cached yet (after a restart).
struct Scripts {
    extend: Script,
    release: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("config", &self.config).field("clock", &self.clock).finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url`; key names use `config.key_prefix`. Shard TTLs run
    /// on the system clock until [`with_clock`](Self::with_clock) says otherwise.
    ///
    /// Fails with [`Error::Redis`](crate::Error::Redis) if the URL is invalid
    /// or the server cannot be reached within a few seconds.
    pub async fn connect(url: &str, config: ShardConfig) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(CONNECTION_TIMEOUT)
            .set_response_timeout(RESPONSE_TIMEOUT)
            .set_number_of_retries(RECONNECT_RETRIES)
            .set_factor(2)
            .set_max_delay(RECONNECT_MAX_DELAY_MS);
        let conn = ConnectionManager::new_with_config(client, manager_config).await?;
        let scripts = Scripts { extend: Script::new(EXTEND_LUA), release: Script::new(RELEASE_LUA) };
        Ok(Self { config, clock: Arc::new(SystemClock), conn, scripts: Arc::new(scripts) })
    }

    /// Computes shard TTLs and expiry from `clock`, the node's injected clock
    /// (a test's `ManualClock`, say) instead of the system clock.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Whether `shard` has expired by the injected clock; such a shard reads
    /// empty, as the embedded store's does.
    fn expired(&self, shard: ShardKey) -> bool {
        shard.end_ms() + SHARD_TTL_MS <= self.clock.now_ms()
    }
}

#[async_trait]
impl ShardStore for RedisStore {
    async fn add(&self, fires: &[FireKey]) -> Result<()> {
        let now = self.clock.now_ms();
        // (score, member) per live shard; a fire whose shard has expired by
        // now would only recreate a dead key, so it is left out.
        let mut shards: BTreeMap<ShardKey, Vec<(i64, String)>> = BTreeMap::new();
        for fire in fires {
            let shard = ShardKey::of(fire.timer_id, fire.run_ms, self.config.buckets);
            if shard.end_ms() + SHARD_TTL_MS > now {
                shards.entry(shard).or_default().push((fire.run_ms, fire.to_string()));
            }
        }
        if shards.is_empty() {
            return Ok(());
        }
        // One round trip. MULTI/EXEC so a shard never gets members without
        // its TTL (a connection lost between the two would leak the key).
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (shard, members) in &shards {
            let key = shard.set_key(&self.config.key_prefix);
            for chunk in members.chunks(ZADD_CHUNK) {
                pipe.zadd_multiple(&key, chunk).ignore();
            }
            pipe.pexpire(&key, shard.end_ms() + SHARD_TTL_MS - now).ignore();
        }
        pipe.exec_async(&mut self.conn.clone()).await?;
        Ok(())
    }

    async fn range(&self, shard: ShardKey, from_ms: i64, to_ms: i64) -> Result<Vec<FireKey>> {
        if from_ms >= to_ms || self.expired(shard) {
            return Ok(Vec::new());
        }
        let key = shard.set_key(&self.config.key_prefix);
        // `(to` makes the upper bound exclusive; Redis orders by score, then member.
        let members: Vec<String> = self.conn.clone().zrangebyscore(&key, from_ms, format!("({to_ms}")).await?;
        Ok(members
            .iter()
            .filter_map(|member| {
                let fire = FireKey::parse_member(member);
                if fire.is_none() {
                    // An index, not the truth: skip it and let the reconciler
                    // find the fire in SQL rather than block the whole shard.
                    tracing::warn!(key = %key, member = %member, "Skipped a shard member that does not parse.");
                }
                fire
            })
            .collect())
    }

    async fn count(&self, shard: ShardKey) -> Result<u64> {
        if self.expired(shard) {
            return Ok(0);
        }
        let count: u64 = self.conn.clone().zcard(shard.set_key(&self.config.key_prefix)).await?;
        Ok(count)
    }

    fn buckets(&self) -> u32 {
        self.config.buckets
    }
}

#[async_trait]
impl LockStore for RedisStore {
    async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool> {
        // `PX 0` is an error in Redis; a 1 ms lease is as good as none.
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms.max(1))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(set.is_some())
    }

    async fn extend(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool> {
        let extended: i64 =
            self.scripts.extend.key(key).arg(token).arg(ttl_ms.max(1)).invoke_async(&mut self.conn.clone()).await?;
        Ok(extended == 1)
    }

    async fn release(&self, key: &str, token: &str) -> Result<bool> {
        let released: i64 = self.scripts.release.key(key).arg(token).invoke_async(&mut self.conn.clone()).await?;
        Ok(released == 1)
    }
}
