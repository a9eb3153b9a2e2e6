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

/// What a check of the shard index's marker found ([`IndexMarks::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexMark {
    /// The epoch the last rebuild wrote; `None` when the marker is gone
    /// (the index was flushed, or its server restarted empty).
    pub epoch: Option<String>,
    /// This node's checks as the index counts them: one more than at the
    /// node's previous check, unless the index lost that check's write
    /// (it failed over to a replica that had not received it), and with
    /// it whatever was written just before.
    pub seq: i64,
}

/// The marker by which nodes notice that a shard index which can lose
/// writes (Redis: a `FLUSHALL`, a restart without persistence, a failover
/// to a replica that missed the last writes) has lost some, so that one of
/// them rebuilds it from the database. The embedded index never loses a
/// write while its process lives, and has none.
#[async_trait]
pub trait IndexMarks: Send + Sync {
    /// Reads the epoch and counts this check of `node_id` (the count
    /// outlives a silent node by minutes, not forever).
    async fn check(&self, node_id: &str) -> Result<IndexMark>;
    /// Writes `epoch`: the index has just been rebuilt whole.
    async fn set_epoch(&self, epoch: &str) -> Result<()>;
}
