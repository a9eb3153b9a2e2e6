//! Leases over a [`LockStore`], one type per protocol:
//!
//! - [`ShardLeases`]: a node acquires a shard's lock for a short lease,
//!   renews it while it works the shard, and either finishes it (the lock
//!   stays as the shard's done marker, so nobody works it again) or
//!   releases it (another node may take it at once).
//! - [`PassLease`]: the turn of a singleton pass (the migrator's step,
//!   retention, the reconciler's sweep, the asyncflow governor): one node
//!   at a time runs it, the one holding the pass's lock.

use std::sync::Arc;

use rand::Rng;
use xtimer_core::node::NodeContext;
use xtimer_core::shard::{ShardKey, ShardLease};

use crate::{LockStore, Result};

/// Shard leases over a [`LockStore`].
#[derive(Clone)]
pub struct ShardLeases {
    locks: Arc<dyn LockStore>,
    node_id: String,
    key_prefix: String,
    lease_ms: u64,
    done_ttl_ms: u64,
}

impl ShardLeases {
    /// Leases of `lease_ms`, done markers kept `done_ttl_ms`.
    pub fn new(locks: Arc<dyn LockStore>, ctx: &NodeContext, lease_ms: u64, done_ttl_ms: u64) -> Self {
        Self { locks, node_id: ctx.node_id.clone(), key_prefix: ctx.key_prefix.clone(), lease_ms, done_ttl_ms }
    }

    /// How long a lease lasts unless renewed.
    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// Takes the shard's lock under a fresh owner token; `None` when it is
    /// held or done.
    pub async fn acquire(&self, shard: ShardKey) -> Result<Option<ShardLease>> {
        let token = format!("{}:{:016x}", self.node_id, rand::rng().random::<u64>());
        let won = self.locks.acquire(&shard.lock_key(&self.key_prefix), &token, self.lease_ms).await?;
        Ok(won.then_some(ShardLease { shard, token }))
    }

    /// Extends the lease by a whole lease; false when it was lost (another
    /// node owns the shard now).
    pub async fn renew(&self, lease: &ShardLease) -> Result<bool> {
        self.locks.extend(&lease.shard.lock_key(&self.key_prefix), &lease.token, self.lease_ms).await
    }

    /// Marks the shard done: the lock is kept past its minute, so no node
    /// works it again. False when the lease was lost first.
    pub async fn finish(&self, lease: &ShardLease) -> Result<bool> {
        self.locks.extend(&lease.shard.lock_key(&self.key_prefix), &lease.token, self.done_ttl_ms).await
    }

    /// Gives the shard up unfinished, so another node takes it at once.
    pub async fn release(&self, lease: &ShardLease) -> Result<()> {
        self.locks.release(&lease.shard.lock_key(&self.key_prefix), &lease.token).await?;
        Ok(())
    }
}

/// The turn of a singleton pass: the lock `{prefix}:lock:{name}`, owned by
/// this node, taken for `hold_ms` at each turn. Cheap to clone.
#[derive(Clone)]
pub struct PassLease {
    locks: Arc<dyn LockStore>,
    key: String,
    token: String,
    hold_ms: u64,
}

impl PassLease {
    /// The lease of pass `name` on `ctx`'s node and key prefix, held
    /// `hold_ms` at each turn.
    pub fn new(locks: Arc<dyn LockStore>, ctx: &NodeContext, name: &str, hold_ms: u64) -> Self {
        Self { locks, key: format!("{}:lock:{name}", ctx.key_prefix), token: ctx.node_id.clone(), hold_ms }
    }

    /// Whether this node has the turn: the lock taken now, or extended
    /// when this node holds it already. False while another node holds it.
    pub async fn take(&self) -> Result<bool> {
        if self.locks.acquire(&self.key, &self.token, self.hold_ms).await? {
            return Ok(true);
        }
        self.locks.extend(&self.key, &self.token, self.hold_ms).await
    }
}

#[cfg(test)]
mod tests {
    use xtimer_core::clock::ManualClock;

    use super::*;
    use crate::MemoryLocks;

    #[tokio::test]
    async fn one_node_has_a_pass_at_a_time_and_keeps_it_while_it_renews() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let locks: Arc<dyn LockStore> = Arc::new(MemoryLocks::new(clock.clone()));
        let ctx = |node: &str| NodeContext::new(clock.clone(), node.to_string(), "p".to_string());
        let a = PassLease::new(locks.clone(), &ctx("a"), "migrator", 900);
        let b = PassLease::new(locks.clone(), &ctx("b"), "migrator", 900);
        let other_pass = PassLease::new(locks.clone(), &ctx("b"), "retention", 900);
        assert!(a.take().await.unwrap());
        assert!(!b.take().await.unwrap(), "held by a");
        assert!(other_pass.take().await.unwrap(), "another pass has its own lock");
        clock.advance(800);
        assert!(a.take().await.unwrap(), "a's turn again: extended");
        clock.advance(800);
        assert!(!b.take().await.unwrap(), "still a's: extended at its last turn");
        clock.advance(200);
        assert!(b.take().await.unwrap(), "lapsed: b's now");
        assert!(!a.take().await.unwrap());
    }
}
