//! The shard index and locks over Redis or Redis Cluster, for clusters of nodes.
//!
//! # Keys
//!
//! - Shard: a sorted set `{prefix}:shard:{<YYYY-MM-DD HH:MM>:<bucket>}`,
//!   e.g. `xtimer:shard:{2026-03-01 12:34:7}` ([`ShardKey::set_key`]),
//!   member `{timer_id}_{run_ms}` ([`FireKey`]'s `Display`), score
//!   `run_ms`. It expires [`SHARD_TTL_MS`] after its minute ends, so keys
//!   clean themselves.
//! - Lock: the caller's key (the scheduler's
//!   `{prefix}:lock:{<YYYY-MM-DD HH:MM>:<bucket>}`, the migrator's and the
//!   reconciler's singletons), holding the owner's token. Taken with
//!   `SET NX PX`; extended and released only by the token's owner, with Lua
//!   scripts that compare the token and act in one step, so a node whose
//!   lease ran out can never touch the lock a newer owner holds.
//!
//! - Flow: `{prefix}:flow:{<hash>}:<app length>:<app>:<key>:state`,
//!   `...:slots` and `...:nodes`, a flow's shared limits state
//!   ([`FlowTokens`], API 1g), written by one script per turn.
//!
//! # Redis Cluster
//!
//! The braces in shard and lock keys are literal, a Redis Cluster hash tag
//! ([`ShardKey::hash_tag`]): only `{<minute>:<bucket>}` picks the slot, so
//! a shard's set and its lock live in one slot, and the shards of a minute
//! (and of every minute) spread over the masters. Every command and script
//! touches one key; the one multi-command write, [`ShardStore::add`], is a
//! `MULTI`/`EXEC` per shard (its members and its TTL, one slot), the
//! shards' transactions sent concurrently. On a single server the same
//! keys and commands apply.
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
//! One connection multiplexes every call: a [`ConnectionManager`] that
//! reconnects after a failure on a single server, a cluster connection
//! that follows the slot map (and reconnects) on a cluster. Connecting and
//! every response are bounded by timeouts, and reconnection retries a few
//! times with a capped backoff, so an unreachable Redis surfaces as
//! [`Error::Redis`](crate::Error::Redis) within seconds instead of hanging
//! a loop.

mod flows;
mod locks;
mod marker;
mod sentinel;
mod shards;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Script, Value};
use xtimer_core::clock::SystemClock;
use xtimer_core::config::{RedisConfig, ShardConfig};
use xtimer_core::shard::ShardKey;
use xtimer_core::SharedClock;

use crate::shard::SHARD_TTL_MS;
use crate::Result;

/// How long one connection attempt may take.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a command (or pipeline) may wait for its reply.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// Reconnection attempts after the first, each after a backoff of about a
/// second (jittered, capped by [`RECONNECT_MAX_DELAY_MS`]).
const RECONNECT_RETRIES: usize = 2;
/// Longest pause between reconnection attempts, ms.
const RECONNECT_MAX_DELAY_MS: u64 = 1_000;

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

/// Shard sorted sets and lock keys in Redis or Redis Cluster, over one
/// multiplexed, reconnecting connection.
#[derive(Clone)]
pub struct RedisStore {
    config: ShardConfig,
    clock: SharedClock,
    conn: Connection,
    scripts: Arc<Scripts>,
}

/// The connection to a single server or to a cluster; commands go through
/// it alike.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(sentinel::SentinelConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
            Self::Sentinel(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Sentinel(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
            Self::Sentinel(conn) => conn.get_db(),
        }
    }
}

/// The seed nodes of a cluster named by `url`: comma-separated
/// `redis://` URLs (a single one is enough: the others are discovered).
pub fn cluster_nodes(url: &str) -> Vec<&str> {
    url.split(',').map(str::trim).filter(|node| !node.is_empty()).collect()
}

/// Whether `redis` names a cluster: `redis.cluster` set, or several URLs
/// (not sentinels).
pub fn is_cluster(redis: &RedisConfig) -> bool {
    !is_sentinel(redis) && (redis.cluster || cluster_nodes(&redis.url).len() > 1)
}

/// Whether `redis` names a master under Sentinel (`redis+sentinel://`).
pub fn is_sentinel(redis: &RedisConfig) -> bool {
    sentinel::is_sentinel(&redis.url)
}

/// How a connection to one server times out and reconnects.
fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(CONNECTION_TIMEOUT)
        .set_response_timeout(RESPONSE_TIMEOUT)
        .set_number_of_retries(RECONNECT_RETRIES)
        .set_factor(2)
        .set_max_delay(RECONNECT_MAX_DELAY_MS)
}

/// The lock scripts, hashed once; invoked with `EVALSHA`, falling back to
/// `EVAL` when the server does not have them cached yet (after a restart).
struct Scripts {
    extend: Script,
    release: Script,
    flow_take: Script,
    flow_figures: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("config", &self.config).field("clock", &self.clock).finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the server or cluster `redis` names (see [`is_cluster`]);
    /// key names use `config.key_prefix`.
    pub async fn open(redis: &RedisConfig, config: ShardConfig) -> Result<Self> {
        if is_sentinel(redis) {
            let conn = sentinel::SentinelConnection::open(&redis.url, manager_config()).await?;
            Ok(Self::over(Connection::Sentinel(conn), config))
        } else if is_cluster(redis) {
            Self::connect_cluster(&cluster_nodes(&redis.url), config).await
        } else {
            Self::connect(&redis.url, config).await
        }
    }

    /// Connects to the single server at `url`; key names use
    /// `config.key_prefix`. Shard TTLs run on the system clock until
    /// [`with_clock`](Self::with_clock) says otherwise.
    ///
    /// Fails with [`Error::Redis`](crate::Error::Redis) if the URL is invalid
    /// or the server cannot be reached within a few seconds.
    pub async fn connect(url: &str, config: ShardConfig) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new_with_config(client, manager_config()).await?;
        Ok(Self::over(Connection::Single(conn), config))
    }

    /// Connects to the Redis Cluster that `nodes` (`redis://` URLs, one or
    /// more of its masters) belong to, as [`connect`](Self::connect) does
    /// to a single server.
    pub async fn connect_cluster(nodes: &[&str], config: ShardConfig) -> Result<Self> {
        let client = ClusterClient::builder(nodes.iter().copied())
            .connection_timeout(CONNECTION_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(RECONNECT_RETRIES as u32)
            .max_retry_wait(RECONNECT_MAX_DELAY_MS)
            .build()?;
        let conn = client.get_async_connection().await?;
        Ok(Self::over(Connection::Cluster(conn), config))
    }

    fn over(conn: Connection, config: ShardConfig) -> Self {
        let scripts = Scripts {
            extend: Script::new(EXTEND_LUA),
            release: Script::new(RELEASE_LUA),
            flow_take: Script::new(FLOW_TAKE_LUA),
            flow_figures: Script::new(FLOW_FIGURES_LUA),
        };
        Self { config, clock: Arc::new(SystemClock), conn, scripts: Arc::new(scripts) }
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

/// One turn of a node at a flow ([`FlowTokens::take`]), the same steps as
/// the embedded store's in one script. `KEYS`: the flow's state hash
/// (`tat`, µs), its open slots (sorted set, score: when each lapses, ms;
/// members start with their node's id and `:`) and its nodes (hash: node
/// -> `lapses_ms:head_ms:waiting`, head 2^53 - 1 when none waits).
/// `ARGV`: node, head (-1: none), waiting, interval µs (0: no rate),
/// burst, parallelism (0: no cap), paused (0/1), slot TTL ms, node TTL ms,
/// slots held, number of slots given back, those slots, then the ids
/// asked for. A lapsed report is a dead node: its slots go with it. Runs
/// on the server's clock, the one every node agrees on. Returns `{granted,
/// retry_ms, behind}` with `retry_ms` -1 for "no time known" and `behind`
/// 1 when an older fire waits on another node.
const FLOW_TAKE_LUA: &str = const_format::concatcp!(
    r"
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local node = ARGV[1]
local head = tonumber(ARGV[2])
local waiting = tonumber(ARGV[3])
local interval = tonumber(ARGV[4])
local burst = tonumber(ARGV[5])
local parallelism = tonumber(ARGV[6])
local paused = ARGV[7] == '1'
local slot_ttl = tonumber(ARGV[8])
local node_ttl = tonumber(ARGV[9])
local holding = tonumber(ARGV[10])
local ndone = tonumber(ARGV[11])
local first_id = 12 + ndone
local keep = node_ttl + slot_ttl + 60000
local no_head = 9007199254740991
if waiting <= 0 or head < 0 then head = no_head end
local SLOTS, NODES = KEYS[2], KEYS[3]
",
    FLOW_SWEEP_LUA,
    r"
local others_older = false
for other, their in pairs(heads) do
    if other ~= node and their < head then others_older = true end
end
local report = string.format('%d:%d:%d', now + node_ttl, head, waiting)
if head < no_head or holding > 0 then
    redis.call('HSET', KEYS[3], node, report)
    redis.call('PEXPIRE', KEYS[3], keep)
else
    redis.call('HDEL', KEYS[3], node)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
for i = 12, first_id - 1 do
    redis.call('ZREM', KEYS[2], ARGV[i])
end
local want = #ARGV - first_id + 1
if paused or want <= 0 then
    return {0, -1, 0}
end
local tat = tonumber(redis.call('HGET', KEYS[1], 'tat') or '0')
local tolerance = interval * (math.max(burst, 1) - 1)
local function next_ms()
    local wait = math.max(tat, now_us) - now_us - tolerance
    if wait < 0 then wait = 0 end
    return math.max(math.ceil(wait / 1000), 1)
end
if others_older then
    if interval > 0 then return {0, next_ms(), 1} end
    return {0, -1, 1}
end
local room = want
if parallelism > 0 then
    room = math.min(want, parallelism - redis.call('ZCARD', KEYS[2]))
end
local granted = 0
local retry = -1
while granted < room do
    if interval > 0 then
        local from = math.max(tat, now_us)
        if from - now_us > tolerance then
            retry = next_ms()
            break
        end
        tat = from + interval
    end
    redis.call('ZADD', KEYS[2], now + slot_ttl, ARGV[first_id + granted])
    granted = granted + 1
end
if granted > 0 then
    redis.call('PEXPIRE', KEYS[2], keep)
    -- It holds slots now: its report stays alive with them.
    redis.call('HSET', KEYS[3], node, report)
    redis.call('PEXPIRE', KEYS[3], keep)
end
if interval > 0 then
    redis.call('HSET', KEYS[1], 'tat', string.format('%d', tat))
    redis.call('PEXPIRE', KEYS[1], keep)
end
return {granted, retry, 0}
"
);

/// The start of both flow scripts: forgets the lapsed reports of the
/// nodes hash `NODES` and, their nodes dead, those nodes' slots in the
/// sorted set `SLOTS`; leaves each live node's head in `heads` and the
/// fires waiting on every live node in `waiting_all`. Needs `now` (ms).
const FLOW_SWEEP_LUA: &str = r"
local heads = {}
local waiting_all = 0
local dead = {}
local reports = redis.call('HGETALL', NODES)
for i = 1, #reports, 2 do
    local lapses, their, count = string.match(reports[i + 1], '^(%-?%d+):(%-?%d+):(%d+)$')
    if tonumber(lapses) <= now then
        redis.call('HDEL', NODES, reports[i])
        dead[reports[i] .. ':'] = true
    else
        heads[reports[i]] = tonumber(their)
        waiting_all = waiting_all + tonumber(count)
    end
end
if next(dead) ~= nil then
    for _, id in ipairs(redis.call('ZRANGE', SLOTS, 0, -1)) do
        for prefix in pairs(dead) do
            if string.sub(id, 1, #prefix) == prefix then
                redis.call('ZREM', SLOTS, id)
                break
            end
        end
    end
end
";

/// A flow's waiting fires and open slots, as [`FLOW_TAKE_LUA`] keeps them
/// (dead nodes' slots freed first). `KEYS`: as there, but the state hash.
/// Returns `{waiting, in_flight}`.
const FLOW_FIGURES_LUA: &str = const_format::concatcp!(
    r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local SLOTS, NODES = KEYS[1], KEYS[2]
",
    FLOW_SWEEP_LUA,
    r"
return {waiting_all, redis.call('ZCOUNT', SLOTS, '(' .. now, '+inf')}
"
);
