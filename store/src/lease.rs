//! The shard lease protocol, owned by one type: a node acquires a shard's
//! lock for a short lease, renews it while it works the shard, and either
//! finishes it (the lock stays as the shard's done marker, so nobody works
//! it again) or releases it (another node may take it at once).

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
