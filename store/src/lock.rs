//! Leased locks with owner tokens (`SET NX PX` semantics).
//!
//! A lock is a key holding its owner's random token until it expires. Only
//! the token's owner may extend or release it, so a node that lost its
//! lease (paused, partitioned) can never release a lock someone else now
//! holds. Extending with a long TTL doubles as the scheduler's "shard done"
//! marker.

use async_trait::async_trait;

use crate::Result;

/// A store of leased locks.
#[async_trait]
pub trait LockStore: Send + Sync {
    /// Takes `key` for `token` for `ttl_ms` if nobody holds it.
    async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool>;
    /// Sets the expiry of `key` to `ttl_ms` from now if `token` holds it.
    async fn extend(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool>;
    /// Deletes `key` if `token` holds it.
    async fn release(&self, key: &str, token: &str) -> Result<bool>;
}
