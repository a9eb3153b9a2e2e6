//! The shard index: which fires are due in each (minute, bucket) shard.
//!
//! An index, not a source of truth: SQL holds every fire, and losing the
//! index delays fires (the reconciler finds them) but loses none.

use async_trait::async_trait;
use xtimer_core::fire::FireKey;
use xtimer_core::shard::{ShardKey, MINUTE_MS};

use crate::Result;

/// How long a shard's entries outlive the end of its minute.
pub const SHARD_TTL_MS: i64 = 10 * MINUTE_MS;

/// A sorted set per shard: member `{timer_id}_{run_ms}`, score `run_ms`.
#[async_trait]
pub trait ShardStore: Send + Sync {
    /// Adds fires to their shards (idempotent). Shards expire
    /// [`SHARD_TTL_MS`] after their minute ends.
    async fn add(&self, fires: &[FireKey]) -> Result<()>;
    /// A shard's fires with run time in `[from_ms, to_ms)`, by run time.
    async fn range(&self, shard: ShardKey, from_ms: i64, to_ms: i64) -> Result<Vec<FireKey>>;
    /// How many fires a shard holds (`ZCARD`): a cheap check for additions.
    async fn count(&self, shard: ShardKey) -> Result<u64>;
    /// The bucket count fires are spread over.
    fn buckets(&self) -> u32;
}
