//! The shard index and locks over Redis, for clusters. (Being written.)

use async_trait::async_trait;
use xtimer_core::config::ShardConfig;
use xtimer_core::fire::FireKey;
use xtimer_core::shard::ShardKey;

use crate::{LockStore, Result, ShardStore};

/// Shard sorted sets and lock keys in Redis, over one reconnecting connection manager.
#[derive(Clone)]
pub struct RedisStore {
    config: ShardConfig,
}

impl RedisStore {
    /// Connects to `url`; key names use `config.key_prefix`.
    pub async fn connect(url: &str, config: ShardConfig) -> Result<Self> {
        let _ = url;
        Ok(Self { config })
    }
}

#[async_trait]
impl ShardStore for RedisStore {
    async fn add(&self, _fires: &[FireKey]) -> Result<()> { todo!() }
    async fn range(&self, _shard: ShardKey, _from_ms: i64, _to_ms: i64) -> Result<Vec<FireKey>> { todo!() }
    async fn count(&self, _shard: ShardKey) -> Result<u64> { todo!() }
    fn buckets(&self) -> u32 {
        self.config.buckets
    }
}

#[async_trait]
impl LockStore for RedisStore {
    async fn acquire(&self, _key: &str, _token: &str, _ttl_ms: u64) -> Result<bool> { todo!() }
    async fn extend(&self, _key: &str, _token: &str, _ttl_ms: u64) -> Result<bool> { todo!() }
    async fn release(&self, _key: &str, _token: &str) -> Result<bool> { todo!() }
}
