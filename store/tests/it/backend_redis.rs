//! The Redis backend: SQLite for the SQL half, [`RedisStore`] for the shard
//! index and locks, and the Redis-specific tests the conformance bodies
//! cannot express.
//!
//! The server comes from `XTIMER_TEST_REDIS_URL` (default
//! `redis://127.0.0.1:16379`); the Redis Cluster backend's from
//! `XTIMER_TEST_REDIS_CLUSTER_URL` (its masters' URLs, comma-separated;
//! `scripts/test` starts a cluster of three). Tests share it, so each one gets its own key
//! prefix (`t{random hex}`) and nothing is ever flushed; every key a test
//! writes carries a TTL, so the server cleans up after it.
//!
//! Redis expires keys on its own clock, not the backend's `ManualClock`, so
//! the conformance bodies that move the clock to expire a lock are ignored
//! for this backend (see `main.rs`); the tests here cover the same behaviour
//! with real leases of a few hundred milliseconds and bounded waits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::aio::MultiplexedConnection;
use ::redis::AsyncCommands;
use async_trait::async_trait;
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{RedisConfig, ShardConfig};
use xtimer_core::fire::FireKey;
use xtimer_core::shard::{ShardKey, MINUTE_MS};
use xtimer_store::redis::RedisStore;
use xtimer_store::shard::SHARD_TTL_MS;
use xtimer_store::{Error, FlowGrant, LockStore, ShardStore};

use crate::helpers::{Backend, T0};

/// The Redis server under test.
fn url() -> String {
    std::env::var("XTIMER_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:16379".into())
}

/// A fresh key prefix, so tests sharing the server never see each other's keys.
fn prefix() -> String {
    format!("t{:016x}", rand::random::<u64>())
}

/// SQLite on a fresh temp file (the embedded backend's SQL half) with the
/// shard index and locks in Redis under a fresh prefix, all on the
/// embedded backend's `ManualClock` at [`T0`].
pub async fn redis() -> Backend {
    let mut backend = crate::helpers::embedded().await;
    let prefix = prefix();
    let config = ShardConfig { key_prefix: prefix.clone(), ..ShardConfig::default() };
    let store = RedisStore::connect(&url(), config).await.expect("redis reachable").with_clock(backend.clock.clone());
    backend.locks = Arc::new(PrefixedLocks { prefix, inner: store.clone() });
    backend.shards = Arc::new(store);
    backend
}

/// The Redis Cluster under test: its masters' URLs, comma-separated.
fn cluster_url() -> String {
    std::env::var("XTIMER_TEST_REDIS_CLUSTER_URL")
        .expect("a Redis Cluster at XTIMER_TEST_REDIS_CLUSTER_URL (scripts/test starts one)")
}

/// [`redis`], with the shard index and locks on the Redis Cluster.
pub async fn redis_cluster() -> Backend {
    let mut backend = crate::helpers::embedded().await;
    let prefix = prefix();
    let config = ShardConfig { key_prefix: prefix.clone(), ..ShardConfig::default() };
    let redis = RedisConfig { url: cluster_url(), cluster: true };
    let store =
        RedisStore::open(&redis, config).await.expect("redis cluster reachable").with_clock(backend.clock.clone());
    backend.locks = Arc::new(PrefixedLocks { prefix, inner: store.clone() });
    backend.shards = Arc::new(store);
    backend
}

/// Puts the test's prefix in front of every lock key. The conformance bodies
/// use fixed lock keys; on a shared server, tests running at the same time
/// would otherwise contend for them.
struct PrefixedLocks {
    prefix: String,
    inner: RedisStore,
}

impl PrefixedLocks {
    fn key(&self, key: &str) -> String {
        format!("{}:{key}", self.prefix)
    }
}

#[async_trait]
impl LockStore for PrefixedLocks {
    async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> xtimer_store::Result<bool> {
        self.inner.acquire(&self.key(key), token, ttl_ms).await
    }
    async fn extend(&self, key: &str, token: &str, ttl_ms: u64) -> xtimer_store::Result<bool> {
        self.inner.extend(&self.key(key), token, ttl_ms).await
    }
    async fn release(&self, key: &str, token: &str) -> xtimer_store::Result<bool> {
        self.inner.release(&self.key(key), token).await
    }
}

/// A [`RedisStore`] on a fresh prefix, a plain connection to look at what it
/// wrote, and the clock it computes shard TTLs from.
struct Fixture {
    store: RedisStore,
    raw: MultiplexedConnection,
    prefix: String,
    clock: Arc<ManualClock>,
}

impl Fixture {
    async fn new() -> Self {
        let prefix = prefix();
        let clock = Arc::new(ManualClock::new(T0));
        let config = ShardConfig { key_prefix: prefix.clone(), ..ShardConfig::default() };
        let store = RedisStore::connect(&url(), config).await.expect("redis reachable").with_clock(clock.clone());
        let raw = ::redis::Client::open(url())
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("redis reachable");
        Self { store, raw, prefix, clock }
    }

    /// A lock key under this fixture's prefix.
    fn lock(&self, name: &str) -> String {
        format!("{}:lock:{name}", self.prefix)
    }

    /// The key's remaining time to live, ms (-2: no such key, -1: no TTL).
    async fn pttl(&self, key: &str) -> i64 {
        self.raw.clone().pttl(key).await.unwrap()
    }

    /// The token a lock key holds, if any.
    async fn holder(&self, key: &str) -> Option<String> {
        self.raw.clone().get(key).await.unwrap()
    }
}

/// Polls `acquire(key, token)` until it succeeds, for at most `limit`;
/// returns how long that took.
async fn acquire_when_free(locks: &RedisStore, key: &str, token: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    while !locks.acquire(key, token, 10_000).await.unwrap() {
        assert!(start.elapsed() < limit, "{key} still held after {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

#[tokio::test]
async fn only_the_token_holder_extends_or_releases() {
    let f = Fixture::new().await;
    let key = f.lock("2026-03-01 12:34:3");
    assert!(f.store.acquire(&key, "a", 60_000).await.unwrap());
    assert!(!f.store.acquire(&key, "b", 60_000).await.unwrap());

    assert!(!f.store.extend(&key, "b", 600_000).await.unwrap(), "the script compares the token");
    assert!(f.pttl(&key).await <= 60_000, "b's extend left the expiry alone");
    assert!(!f.store.release(&key, "b").await.unwrap());
    assert_eq!(f.holder(&key).await.as_deref(), Some("a"), "b's release left a's lock in place");

    assert!(f.store.extend(&key, "a", 90_000).await.unwrap());
    assert!(f.pttl(&key).await > 60_000, "a's extend moved the expiry");
    assert!(f.store.release(&key, "a").await.unwrap());
    assert_eq!(f.pttl(&key).await, -2, "released: the key is gone");
    assert!(!f.store.release(&key, "a").await.unwrap(), "released once");
}

#[tokio::test]
async fn extend_with_a_long_ttl_is_the_done_marker() {
    let f = Fixture::new().await;
    let key = f.lock("2026-03-01 12:34:5");
    assert!(f.store.acquire(&key, "a", 100).await.unwrap());
    assert!(f.store.extend(&key, "a", 130_000).await.unwrap());
    let ttl = f.pttl(&key).await;
    assert!((129_000..=130_000).contains(&ttl), "marker TTL {ttl}");
    tokio::time::sleep(Duration::from_millis(200)).await; // past the first lease
    assert!(!f.store.acquire(&key, "b", 10_000).await.unwrap(), "a finished shard is not taken again");
    assert!(!f.store.extend(&key, "b", 10_000).await.unwrap());
    assert!(!f.store.release(&key, "b").await.unwrap());
    assert_eq!(f.holder(&key).await.as_deref(), Some("a"));
    assert!(f.store.release(&key, "a").await.unwrap(), "clean up the shared server");
}

#[tokio::test]
async fn leases_and_the_done_marker_expire_on_the_server_clock() {
    // The conformance bodies `acquire_is_exclusive_until_the_lease_expires`
    // and `extend_with_a_long_ttl_is_the_done_marker`, on real time.
    let f = Fixture::new().await;
    let key = f.lock("2026-03-01 12:34:6");
    let taken = Instant::now();
    assert!(f.store.acquire(&key, "a", 150).await.unwrap());
    assert!(!f.store.acquire(&key, "a", 150).await.unwrap(), "not re-entrant: NX even for the holder");
    assert!(!f.store.acquire(&key, "b", 150).await.unwrap());
    let waited = taken.elapsed() + acquire_when_free(&f.store, &key, "b", Duration::from_secs(5)).await;
    assert!(waited >= Duration::from_millis(140), "free only once the lease ran out, after {waited:?}");
    assert!(!f.store.acquire(&key, "a", 150).await.unwrap(), "and now b's");

    let other = f.lock("2026-03-01 12:34:7");
    assert!(f.store.acquire(&other, "a", 100).await.unwrap());
    assert!(f.store.extend(&other, "a", 400).await.unwrap());
    let marked = Instant::now();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!f.store.acquire(&other, "b", 10_000).await.unwrap(), "the marker outlives the first lease");
    let waited = marked.elapsed() + acquire_when_free(&f.store, &other, "b", Duration::from_secs(5)).await;
    assert!(waited >= Duration::from_millis(380), "the marker expires like any lease, after {waited:?}");
}

#[tokio::test]
async fn expired_lock_cannot_be_extended_or_released() {
    let f = Fixture::new().await;
    let key = f.lock("2026-03-01 12:34:8");
    assert!(f.store.acquire(&key, "a", 100).await.unwrap());
    let start = Instant::now();
    while f.pttl(&key).await != -2 {
        assert!(start.elapsed() < Duration::from_secs(5), "the lease never expired");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!f.store.extend(&key, "a", 10_000).await.unwrap(), "an expired lease is not revived");
    assert_eq!(f.pttl(&key).await, -2, "nor recreated");
    assert!(!f.store.release(&key, "a").await.unwrap());
    assert!(f.store.acquire(&key, "b", 1_000).await.unwrap());
    assert!(!f.store.extend(&key, "a", 10_000).await.unwrap());
    assert_eq!(f.holder(&key).await.as_deref(), Some("b"));
}

#[tokio::test]
async fn locks_on_different_keys_expire_independently() {
    let f = Fixture::new().await;
    let (short, long) = (f.lock("2026-03-01 12:34:3"), f.lock("2026-03-01 12:34:4"));
    assert!(f.store.acquire(&short, "a", 100).await.unwrap());
    assert!(f.store.acquire(&long, "b", 30_000).await.unwrap());
    assert!(!f.store.release(&long, "a").await.unwrap());
    assert!(!f.store.release(&short, "b").await.unwrap());
    acquire_when_free(&f.store, &short, "c", Duration::from_secs(5)).await;
    assert!(!f.store.acquire(&long, "c", 1_000).await.unwrap(), "the second did not expire");
    assert!(f.store.release(&long, "b").await.unwrap());
    assert!(f.store.release(&short, "c").await.unwrap());
}

#[tokio::test]
async fn add_writes_the_design_keys_with_a_ttl_from_the_injected_clock() {
    let f = Fixture::new().await;
    let now = T0 + 12_345;
    f.clock.set(now);
    let (this, next) =
        (FireKey { timer_id: 42, run_ms: T0 + 30_000 }, FireKey { timer_id: 42, run_ms: T0 + MINUTE_MS + 1 });
    f.store.add(&[this, next]).await.unwrap();

    let shard = ShardKey::of(42, this.run_ms, f.store.buckets());
    let key = shard.set_key(&f.prefix);
    assert_eq!(key, format!("{}:shard:{{2026-03-01 12:34:{}}}", f.prefix, shard.bucket));
    let members: Vec<(String, i64)> = f.raw.clone().zrange_withscores(&key, 0, -1).await.unwrap();
    assert_eq!(
        members,
        vec![(format!("42_{}", this.run_ms), this.run_ms)],
        "member {{timer_id}}_{{run_ms}}, score run_ms"
    );

    // The TTL runs to the minute's end plus SHARD_TTL_MS, counted from the
    // clock's now, not the server's (the clock is months in the past).
    let expected = T0 + MINUTE_MS + SHARD_TTL_MS - now;
    let ttl = f.pttl(&key).await;
    assert!((expected - 2_000..=expected).contains(&ttl), "PTTL {ttl}, expected about {expected}");
    let next_key = ShardKey::of(42, next.run_ms, f.store.buckets()).set_key(&f.prefix);
    let ttl = f.pttl(&next_key).await;
    assert!((expected + MINUTE_MS - 2_000..=expected + MINUTE_MS).contains(&ttl), "next minute PTTL {ttl}");

    // Adding later recomputes the TTL from the later now.
    f.clock.advance(300_000);
    f.store.add(&[this]).await.unwrap();
    let ttl = f.pttl(&key).await;
    assert!((expected - 302_000..=expected - 300_000).contains(&ttl), "re-added PTTL {ttl}");

    // A fire whose shard expired by the clock writes nothing: the previous
    // minute's shard ran out its TTL at T0 + SHARD_TTL_MS.
    f.clock.set(T0 + SHARD_TTL_MS);
    let stale = FireKey { timer_id: 42, run_ms: T0 - 1 };
    f.store.add(&[stale]).await.unwrap();
    let stale_key = ShardKey::of(42, stale.run_ms, f.store.buckets()).set_key(&f.prefix);
    assert_eq!(f.pttl(&stale_key).await, -2, "no key for an expired shard");

    // A shard expired by the clock reads empty, though the server keeps the
    // key until the TTL it was given runs out in real time.
    f.clock.set(T0 + MINUTE_MS + SHARD_TTL_MS);
    assert!(f.pttl(&key).await > 0);
    assert!(f.store.range(shard, T0, T0 + MINUTE_MS).await.unwrap().is_empty(), "an expired shard reads empty");
    assert_eq!(f.store.count(shard).await.unwrap(), 0);
}

#[tokio::test]
async fn large_adds_spread_over_many_shards_read_back_whole() {
    let f = Fixture::new().await;
    let fires: Vec<FireKey> =
        (1..=2_500).map(|id| FireKey { timer_id: id, run_ms: T0 + (id * 37) % (3 * MINUTE_MS) }).collect();
    f.store.add(&fires).await.unwrap();
    let mut read = Vec::new();
    for minute in 0..3 {
        for bucket in 0..f.store.buckets() {
            let shard = ShardKey { minute_ms: T0 + minute * MINUTE_MS, bucket };
            let keys = f.store.range(shard, shard.minute_ms, shard.end_ms()).await.unwrap();
            assert_eq!(f.store.count(shard).await.unwrap(), keys.len() as u64);
            assert!(keys.iter().all(|k| ShardKey::of(k.timer_id, k.run_ms, f.store.buckets()) == shard));
            read.extend(keys);
        }
    }
    read.sort();
    let mut expected = fires;
    expected.sort();
    assert_eq!(read, expected);
}

#[tokio::test]
async fn unreachable_redis_is_an_error_not_a_hang() {
    // A port nobody listens on: the listener is dropped before connecting.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let connected = tokio::time::timeout(
        Duration::from_secs(20),
        RedisStore::connect(&format!("redis://127.0.0.1:{port}"), ShardConfig::default()),
    )
    .await
    .expect("connect gives up within its timeouts");
    assert!(matches!(connected, Err(Error::Redis(_))), "{:?}", connected.map(|_| ()));
    assert!(started.elapsed() < Duration::from_secs(10), "gave up after {:?}", started.elapsed());
}

#[tokio::test]
async fn silent_redis_is_an_error_not_a_hang() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let outcome = tokio::time::timeout(Duration::from_secs(30), async {
        let store = RedisStore::connect(&format!("redis://127.0.0.1:{port}"), ShardConfig::default()).await?;
        store.acquire("k", "a", 1_000).await
    })
    .await
    .expect("the response timeout ends the wait");
    assert!(matches!(outcome, Err(Error::Redis(_))), "{outcome:?}");
    silent.abort();
}

/// A TCP proxy to the Redis under test, listening on `port` (0: any), to
/// pull the plug on a connected store: aborting the task closes the listener
/// and every proxied connection. Returns the URL through the proxy and its port.
async fn proxy(port: u16) -> (String, u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let info = ::redis::IntoConnectionInfo::into_connection_info(url().as_str()).unwrap();
    let upstream = match info.addr {
        ::redis::ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
        other => panic!("the proxy speaks plain TCP, not {other:?}"),
    };
    // Same credentials and database, through the proxy.
    let via = url().replacen(&upstream, &format!("127.0.0.1:{port}"), 1);
    assert_ne!(via, url(), "XTIMER_TEST_REDIS_URL names its port");
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            connections.spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    (via, port, task)
}

#[tokio::test]
async fn redis_going_away_is_an_error_and_coming_back_is_reconnected() {
    let (via, port, plug) = proxy(0).await;
    let config = ShardConfig { key_prefix: prefix(), ..ShardConfig::default() };
    let key = format!("{}:lock:reconnect", config.key_prefix);
    let store = RedisStore::connect(&via, config).await.unwrap();
    assert!(store.acquire(&key, "a", 10_000).await.unwrap());

    plug.abort();
    let _ = plug.await;
    let outcome = tokio::time::timeout(Duration::from_secs(20), store.extend(&key, "a", 10_000))
        .await
        .expect("a call to a gone server ends within its timeouts");
    assert!(matches!(outcome, Err(Error::Redis(_))), "{outcome:?}");

    let (_, _, plug) = proxy(port).await;
    let start = Instant::now();
    loop {
        match store.release(&key, "a").await {
            Ok(released) => {
                assert!(released, "the lock survived on the server");
                break;
            }
            Err(err) => assert!(start.elapsed() < Duration::from_secs(20), "not reconnected: {err:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    plug.abort();
}

/// On a cluster, a shard's set and its lock share a slot (one hash tag),
/// while the shards of a few minutes spread over every master; fires added
/// across many shards (one transaction per shard) read back whole.
#[tokio::test]
async fn on_a_cluster_a_shard_keeps_to_one_slot_and_shards_spread_over_the_masters() {
    let prefix = prefix();
    let config = ShardConfig { key_prefix: prefix.clone(), ..ShardConfig::default() };
    let redis = RedisConfig { url: cluster_url(), cluster: false };
    let masters: Vec<String> = redis.url.split(',').map(|u| u.trim().to_string()).collect();
    assert!(masters.len() >= 3, "XTIMER_TEST_REDIS_CLUSTER_URL names the masters: {}", redis.url);
    // Several URLs name a cluster without the switch.
    let store = RedisStore::open(&redis, config).await.expect("redis cluster reachable");
    let clock = Arc::new(ManualClock::new(T0));
    let store = store.with_clock(clock.clone());

    let mut raw = Vec::new();
    for master in &masters {
        let client = ::redis::Client::open(master.as_str()).unwrap();
        raw.push(client.get_multiplexed_async_connection().await.unwrap());
    }
    let slot = |conn: &MultiplexedConnection, key: String| {
        let mut conn = conn.clone();
        async move { ::redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async::<i64>(&mut conn).await.unwrap() }
    };
    let shard = ShardKey { minute_ms: T0, bucket: 7 };
    assert_eq!(slot(&raw[0], shard.set_key(&prefix)).await, slot(&raw[0], shard.lock_key(&prefix)).await);
    assert_ne!(
        slot(&raw[0], shard.set_key(&prefix)).await,
        slot(&raw[0], ShardKey { minute_ms: T0, bucket: 8 }.set_key(&prefix)).await,
        "buckets of one minute hash apart"
    );

    let fires: Vec<FireKey> =
        (1..=2_000).map(|id| FireKey { timer_id: id, run_ms: T0 + (id * 37) % (3 * MINUTE_MS) }).collect();
    store.add(&fires).await.unwrap();
    let mut read = Vec::new();
    let mut shards = 0;
    for minute in 0..3 {
        for bucket in 0..store.buckets() {
            let shard = ShardKey { minute_ms: T0 + minute * MINUTE_MS, bucket };
            let keys = store.range(shard, shard.minute_ms, shard.end_ms()).await.unwrap();
            assert_eq!(store.count(shard).await.unwrap(), keys.len() as u64);
            shards += usize::from(!keys.is_empty());
            read.extend(keys);
        }
    }
    read.sort();
    let mut expected = fires;
    expected.sort();
    assert_eq!(read, expected, "every fire read back from its shard");

    // Each master holds some of the shards, and together exactly them.
    let mut per_master = Vec::new();
    for conn in &raw {
        let keys: Vec<String> = conn.clone().keys(format!("{prefix}:shard:*")).await.unwrap();
        per_master.push(keys.len());
    }
    assert!(per_master.iter().all(|&n| n > 0), "shards per master: {per_master:?}");
    assert_eq!(per_master.iter().sum::<usize>(), shards, "shards per master: {per_master:?}");

    // A lock on a shard: token-checked extend and release by Lua, in the shard's slot.
    let lock = shard.lock_key(&prefix);
    assert!(store.acquire(&lock, "a", 10_000).await.unwrap());
    assert!(!store.acquire(&lock, "b", 10_000).await.unwrap());
    assert!(!store.extend(&lock, "b", 10_000).await.unwrap());
    assert!(!store.release(&lock, "b").await.unwrap());
    assert!(store.extend(&lock, "a", 130_000).await.unwrap());
    assert!(store.release(&lock, "a").await.unwrap());
}

#[tokio::test]
async fn unreachable_cluster_is_an_error_not_a_hang() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let redis = RedisConfig { url: format!("redis://127.0.0.1:{port}"), cluster: true };
    let connected = tokio::time::timeout(Duration::from_secs(20), RedisStore::open(&redis, ShardConfig::default()))
        .await
        .expect("connect gives up within its timeouts");
    assert!(matches!(connected, Err(Error::Redis(_))), "{:?}", connected.map(|_| ()));
    assert!(started.elapsed() < Duration::from_secs(10), "gave up after {:?}", started.elapsed());
}

/// One turn at a flow, as an executor's driver takes it.
fn flow_turn<'a>(node: &'a str, head: Option<i64>, slots: &'a [String]) -> xtimer_store::FlowTurn<'a> {
    xtimer_store::FlowTurn {
        app: "billing}{",
        key: "api.example.com:443",
        node,
        head_ms: head,
        waiting: u64::from(head.is_some()),
        rate_per_sec: None,
        burst: 1,
        parallelism: None,
        paused: false,
        slots,
        done: &[],
        holding: 0,
        slot_ttl_ms: 30_000,
    }
}

/// The flows' shared state in Redis: a rate of 20 a second never lets
/// more than 21 go in any one second (the server's clock), parallelism
/// counts open slots until given back, and an older fire on another node
/// goes first. On one server and on a cluster (the flow's keys hash to one
/// slot whatever braces its app holds).
async fn flows_share_rate_parallelism_and_order(store: RedisStore) {
    use xtimer_store::FlowTokens;
    let ids: Vec<String> = (0..4).map(|i| format!("n1:{i}")).collect();
    // Rate: ask every 2 ms for 1.1 s; grants are spaced by the interval.
    let mut sent = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1_100) {
        let mut turn = flow_turn("n1", Some(1), &ids);
        turn.rate_per_sec = Some(20.0);
        turn.key = "rated";
        let grant = store.take(&turn).await.unwrap();
        assert!(grant.granted <= 1, "a burst of one");
        if grant.granted == 1 {
            sent.push(started.elapsed());
        } else {
            assert!(grant.retry_in_ms.is_some_and(|ms| ms <= 50), "the next token within the interval: {grant:?}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for (i, at) in sent.iter().enumerate() {
        let within = sent[i..].iter().take_while(|later| **later - *at < Duration::from_millis(1_000)).count();
        assert!(within <= 21, "{within} sends within one second of send {i}: {sent:?}");
    }
    assert!(sent.len() >= 15, "about 22 sends in 1.1 s, got {}", sent.len());

    // Parallelism: two open at once until one is given back.
    let mut turn = flow_turn("n1", Some(1), &ids[..3]);
    turn.parallelism = Some(2);
    assert_eq!(store.take(&turn).await.unwrap().granted, 2);
    let figures = store.figures(turn.app, turn.key).await.unwrap();
    assert_eq!(figures, xtimer_store::FlowFigures { waiting: 1, in_flight: 2 });
    turn.slots = &ids[2..3];
    assert_eq!(store.take(&turn).await.unwrap().granted, 0, "at its parallelism");
    let done = vec![ids[0].clone()];
    turn.done = &done;
    assert_eq!(store.take(&turn).await.unwrap().granted, 1, "a slot given back frees its place");

    // Order across nodes: n2's fire at 100 goes before n1's at 200.
    let other = vec!["n2:0".to_owned()];
    let mut older = flow_turn("n2", Some(100), &[]);
    older.key = "ordered";
    store.take(&older).await.unwrap();
    let mut newer = flow_turn("n1", Some(200), &ids[..1]);
    newer.key = "ordered";
    let behind = store.take(&newer).await.unwrap();
    assert_eq!(behind, FlowGrant { granted: 0, retry_in_ms: None, behind: true }, "n2 holds an older fire");
    older.slots = &other;
    assert_eq!(store.take(&older).await.unwrap().granted, 1);
    older.slots = &[];
    older.head_ms = None;
    older.waiting = 0;
    store.take(&older).await.unwrap();
    assert_eq!(store.take(&newer).await.unwrap().granted, 1, "n2 has none waiting now");
    let mut paused = newer.clone();
    paused.paused = true;
    assert_eq!(store.take(&paused).await.unwrap().granted, 0);
    store.forget(newer.app, newer.key).await.unwrap();
}

/// A node's slots last while it renews its report (a turn a second, as
/// a driver holding slots takes); once it stops (killed), they are freed
/// when its report lapses, `NODE_TTL_MS` after its last turn, not at the
/// slots' own TTL (a minute here).
async fn a_dead_nodes_slots_are_freed_when_its_report_lapses(store: RedisStore) {
    use xtimer_store::flow_tokens::NODE_TTL_MS;
    use xtimer_store::FlowTokens;
    let (mine, theirs) = (vec!["n1:0".to_owned()], vec!["n2:0".to_owned()]);
    let mut n1 = flow_turn("n1", Some(1), &mine);
    n1.key = "dead";
    n1.parallelism = Some(1);
    n1.slot_ttl_ms = 60_000;
    assert_eq!(store.take(&n1).await.unwrap().granted, 1);
    let mut renew = flow_turn("n1", None, &[]);
    renew.key = "dead";
    renew.parallelism = Some(1);
    renew.holding = 1;
    renew.slot_ttl_ms = 60_000;
    // Its fire went: it reports none waiting, one slot held.
    store.take(&renew).await.unwrap();
    let mut n2 = flow_turn("n2", Some(2), &theirs);
    n2.key = "dead";
    n2.parallelism = Some(1);
    n2.slot_ttl_ms = 60_000;
    // Alive past a report's TTL: n1 renews every half second.
    let alive = Instant::now();
    while alive.elapsed() < Duration::from_millis(NODE_TTL_MS as u64 + 500) {
        let refused = store.take(&n2).await.unwrap();
        assert_eq!(refused, FlowGrant { granted: 0, retry_in_ms: None, behind: false }, "n1 is alive: its slot holds");
        tokio::time::sleep(Duration::from_millis(500)).await;
        store.take(&renew).await.unwrap();
    }
    let last_renewal = Instant::now();
    // n1 dies. Its slot shows open until its report lapses, then it is free.
    let figures = store.figures(n2.app, n2.key).await.unwrap();
    assert_eq!(figures, xtimer_store::FlowFigures { waiting: 1, in_flight: 1 });
    let granted = loop {
        let grant = store.take(&n2).await.unwrap();
        if grant.granted == 1 {
            break last_renewal.elapsed();
        }
        assert!(last_renewal.elapsed() < Duration::from_secs(10), "n1's slot is never freed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ttl = Duration::from_millis(NODE_TTL_MS as u64);
    assert!(granted >= ttl - Duration::from_millis(200), "freed {granted:?} after n1's last turn: too soon");
    assert!(granted <= ttl + Duration::from_millis(1_000), "freed {granted:?} after n1's last turn");
    let figures = store.figures(n2.app, n2.key).await.unwrap();
    assert_eq!(figures, xtimer_store::FlowFigures { waiting: 1, in_flight: 1 }, "n2's slot alone");
    // A report that holds nothing and waits for nothing is dropped at once.
    let done = theirs.clone();
    let mut ended = flow_turn("n2", None, &[]);
    ended.key = "dead";
    ended.done = &done;
    store.take(&ended).await.unwrap();
    assert_eq!(store.figures(n2.app, n2.key).await.unwrap(), xtimer_store::FlowFigures::default());
}

#[tokio::test]
async fn a_dead_nodes_flow_slots_are_freed_when_its_report_lapses_on_redis() {
    let config = ShardConfig { key_prefix: prefix(), ..ShardConfig::default() };
    a_dead_nodes_slots_are_freed_when_its_report_lapses(RedisStore::connect(&url(), config).await.unwrap()).await;
}

#[tokio::test]
async fn redis_cluster_a_dead_nodes_flow_slots_are_freed_when_its_report_lapses() {
    let config = ShardConfig { key_prefix: prefix(), ..ShardConfig::default() };
    let redis = RedisConfig { url: cluster_url(), cluster: true };
    a_dead_nodes_slots_are_freed_when_its_report_lapses(RedisStore::open(&redis, config).await.unwrap()).await;
}

#[tokio::test]
async fn flows_share_rate_parallelism_and_order_on_redis() {
    let config = ShardConfig { key_prefix: prefix(), ..ShardConfig::default() };
    flows_share_rate_parallelism_and_order(RedisStore::connect(&url(), config).await.unwrap()).await;
}

#[tokio::test]
async fn redis_cluster_flows_share_rate_parallelism_and_order() {
    let config = ShardConfig { key_prefix: prefix(), ..ShardConfig::default() };
    let redis = RedisConfig { url: cluster_url(), cluster: true };
    flows_share_rate_parallelism_and_order(RedisStore::open(&redis, config).await.unwrap()).await;
}
