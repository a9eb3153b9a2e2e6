//! The trigger: for each shard the scheduler won, loads its fires into the
//! node's timer wheel, wakes each `claim_ahead` before its time and hands it
//! to the executor, re-polls for late additions, renews the shard's lease
//! while it works and marks the shard done when its minute is over.
//!
//! # Layout
//!
//! - [`Trigger`]: the loop taking won shards and fed fires (`run`).
//! - [`wheel`]: the millisecond timer wheel and its driver.
//!
//! The trigger has no error type: a shard it cannot load, renew or finish
//! is logged and left to its lease, so its loop never fails.
//!
//! Fires wake `claim_ahead` early so the executor can claim them in a batch
//! and still send each callback on its millisecond.

pub mod wheel;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use xtimer_core::config::TriggerConfig;
use xtimer_core::fire::FireKey;
use xtimer_core::node::NodeContext;
use xtimer_core::shard::{ShardKey, ShardLease};
use xtimer_core::SharedClock;
use xtimer_store::{ShardLeases, ShardStore};

pub use wheel::{Wheel, WheelDriver};

/// Channels the trigger reads and writes.
pub struct TriggerChannels {
    /// Shards won by the scheduler.
    pub won: mpsc::Receiver<ShardLease>,
    /// Fires just indexed on this node (late additions).
    pub feed: broadcast::Receiver<Arc<[FireKey]>>,
    /// Batches of fires due for claiming, to the executor.
    pub due: mpsc::Sender<Vec<FireKey>>,
}

/// Loads held shards into the wheel and hands due fires to the executor.
pub struct Trigger {
    shared: Arc<Shared>,
    channels: TriggerChannels,
}

struct Shared {
    config: TriggerConfig,
    leases: ShardLeases,
    shards: Arc<dyn ShardStore>,
    clock: SharedClock,
    wheel: Arc<Wheel<FireKey>>,
    /// Shards this node holds, with the fires already put in the wheel.
    held: DashMap<ShardKey, HashSet<FireKey>>,
}

impl Trigger {
    /// A trigger that renews and finishes the shards it works through
    /// `leases`.
    pub fn new(
        config: TriggerConfig,
        leases: ShardLeases,
        shards: Arc<dyn ShardStore>,
        ctx: &NodeContext,
        channels: TriggerChannels,
    ) -> Self {
        let shared = Shared {
            config,
            leases,
            shards,
            clock: ctx.clock.clone(),
            wheel: Arc::new(Wheel::new()),
            held: DashMap::new(),
        };
        Self { shared: Arc::new(shared), channels }
    }

    /// The wheel, for inspection.
    pub fn wheel(&self) -> Arc<Wheel<FireKey>> {
        self.shared.wheel.clone()
    }

    /// A handle that reports which shards this node holds.
    pub fn handle(&self) -> TriggerHandle {
        TriggerHandle { shared: self.shared.clone() }
    }

    /// Works shards until `shutdown`; then releases the shards it holds so
    /// another node (or this one restarted) takes them at once.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self { shared, mut channels } = self;
        let mut tasks = JoinSet::new();
        let driver = WheelDriver { wheel: shared.wheel.clone(), clock: shared.clock.clone(), out: channels.due };
        tasks.spawn(driver.run(shutdown.clone()));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                lease = channels.won.recv() => match lease {
                    Some(lease) => { tasks.spawn(shared.clone().work(lease, shutdown.clone())); }
                    None => break,
                },
                fed = channels.feed.recv() => match fed {
                    Ok(keys) => shared.offer(&keys),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!(skipped = n, "Trigger feed lagged; the re-poll covers it.");
                    }
                    Err(broadcast::error::RecvError::Closed) => {}
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        shutdown.cancel();
        while tasks.join_next().await.is_some() {}
    }
}

/// What the trigger holds, for the node's heartbeat.
#[derive(Clone)]
pub struct TriggerHandle {
    shared: Arc<Shared>,
}

impl TriggerHandle {
    /// The shards held now, in order.
    pub fn held(&self) -> Vec<ShardKey> {
        let mut held: Vec<ShardKey> = self.shared.held.iter().map(|e| *e.key()).collect();
        held.sort();
        held
    }
}

impl Shared {
    fn deadline(&self, key: &FireKey) -> i64 {
        key.run_ms - self.config.claim_ahead_ms as i64
    }

    /// Puts fires of held shards that are not yet in the wheel into it.
    fn offer(&self, keys: &[FireKey]) {
        let buckets = self.shards.buckets();
        let mut new = Vec::new();
        for key in keys {
            if let Some(mut seen) = self.held.get_mut(&ShardKey::of(key.timer_id, key.run_ms, buckets)) {
                if seen.insert(*key) {
                    new.push((self.deadline(key), *key));
                }
            }
        }
        if !new.is_empty() {
            self.wheel.insert_many(new);
        }
    }

    /// Puts the shard's fires that are not yet in the wheel into it. Shards
    /// only grow within their minute, so an unchanged count means nothing new
    /// and the (large) range read is skipped.
    async fn load(&self, shard: ShardKey) -> xtimer_store::Result<()> {
        let known = self.held.get(&shard).map_or(0, |seen| seen.len() as u64);
        if known > 0 && self.shards.count(shard).await? <= known {
            return Ok(());
        }
        let keys = self.shards.range(shard, shard.minute_ms, shard.end_ms()).await?;
        self.offer(&keys);
        Ok(())
    }

    /// Loads the shard now and every `repoll_ms` until its minute is over,
    /// renewing the lease; then marks it done.
    async fn work(self: Arc<Self>, lease: ShardLease, shutdown: CancellationToken) {
        let shard = lease.shard;
        // Renewed every third of the lease (and every loop that finds half
        // of that passed), so one late renewal still leaves a third.
        let renew_every = (self.leases.lease_ms() / 3) as i64;
        let repoll = self.config.repoll_ms as i64;
        self.held.insert(shard, HashSet::new());
        let mut renewed_at = self.clock.now_ms();
        let finished = loop {
            if let Err(err) = self.load(shard).await {
                tracing::warn!(%shard, error = %err, "Shard load failed; retrying.");
            }
            let now = self.clock.now_ms();
            // One last poll after the minute catches additions of its last second.
            if now >= shard.end_ms() + repoll {
                break true;
            }
            if now - renewed_at >= renew_every / 2 {
                match self.leases.renew(&lease).await {
                    Ok(true) => renewed_at = now,
                    Ok(false) => {
                        tracing::warn!(%shard, "Shard lease lost; another node owns it now.");
                        break false;
                    }
                    Err(err) => tracing::warn!(%shard, error = %err, "Shard lease renewal failed; retrying."),
                }
            }
            let wait = repoll.min(renew_every).min(shard.end_ms() + repoll - now).max(1) as u64;
            tokio::select! {
                _ = shutdown.cancelled() => {
                    let _ = self.leases.release(&lease).await;
                    self.held.remove(&shard);
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        };
        self.held.remove(&shard);
        if finished {
            match self.leases.finish(&lease).await {
                Ok(true) => tracing::debug!(%shard, "Shard done."),
                Ok(false) => tracing::warn!(%shard, "Shard lease lost before it was marked done."),
                Err(err) => tracing::warn!(%shard, error = %err, "Marking the shard done failed."),
            }
        }
    }
}
