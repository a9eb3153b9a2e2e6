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
//! and still send each callback on its millisecond. The wheel hands them
//! over in windows of a tenth of that (a fire is claimed 450-500 ms ahead
//! at the default), so fires due a few milliseconds apart are claimed
//! together and the wheel wakes once per window, not once per millisecond.

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
use xtimer_core::node::{Liveness, NodeContext};
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
    /// Whether the node has lost its database: it then gives its shards up.
    liveness: Arc<Liveness>,
    wheel: Arc<Wheel<FireKey>>,
    /// Shards this node holds, with the fires already put in the wheel.
    held: DashMap<ShardKey, HeldShard>,
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
            liveness: ctx.liveness.clone(),
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
        let driver = WheelDriver {
            wheel: shared.wheel.clone(),
            clock: shared.clock.clone(),
            out: channels.due,
            window_ms: shared.config.handover_window_ms() as i64,
        };
        tasks.spawn(driver.run(shutdown.clone()));
        let mut feed_open = true;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                lease = channels.won.recv() => match lease {
                    Some(lease) => { tasks.spawn(shared.clone().work(lease, shutdown.clone())); }
                    None => break,
                },
                fed = channels.feed.recv(), if feed_open => match fed {
                    Ok(keys) => shared.offer(&keys),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!(skipped = n, "Trigger feed lagged; the re-poll covers it.");
                    }
                    // No feed any more: the re-polls alone find new fires
                    // (and a closed feed, polled again, would spin).
                    Err(broadcast::error::RecvError::Closed) => feed_open = false,
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        shutdown.cancel();
        while tasks.join_next().await.is_some() {}
    }
}

/// A shard this node holds: the lease it works it under, and the fires
/// already put in the wheel.
struct HeldShard {
    /// The token of the lease whose work owns the entry: a shard taken
    /// again while an older lease's work still runs (its lock vanished
    /// from Redis) passes to the newer work, and the older one's end
    /// leaves it alone.
    token: String,
    seen: HashSet<FireKey>,
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
            if let Some(mut held) = self.held.get_mut(&ShardKey::of(key.timer_id, key.run_ms, buckets)) {
                if held.seen.insert(*key) {
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
        let known = self.held.get(&shard).map_or(0, |held| held.seen.len() as u64);
        if known > 0 && self.shards.count(shard).await? <= known {
            return Ok(());
        }
        let keys = self.shards.range(shard, shard.minute_ms, shard.end_ms()).await?;
        self.offer(&keys);
        Ok(())
    }

    /// Loads the shard now and every `repoll_ms` until its minute is over,
    /// renewing the lease; then marks it done. A shard whose lease is lost,
    /// or could not be renewed before it may have passed to another node
    /// (a cut from Redis, a stall of this node), is dropped: its fires
    /// leave the wheel. So is one held while the node has lost its
    /// database (its lease released, so another node takes it at once).
    async fn work(self: Arc<Self>, lease: ShardLease, shutdown: CancellationToken) {
        let shard = lease.shard;
        let lease_ms = self.leases.lease_ms() as i64;
        // Renewed every third of the lease (and every loop that finds half
        // of that passed), so one late renewal still leaves a third.
        let renew_every = lease_ms / 3;
        let repoll = self.config.repoll_ms as i64;
        // A shard still held under an older lease (its lock vanished, and
        // it was taken again) keeps the fires already in the wheel.
        self.held
            .entry(shard)
            .and_modify(|held| held.token.clone_from(&lease.token))
            .or_insert_with(|| HeldShard { token: lease.token.clone(), seen: HashSet::new() });
        let mut renewed_at = self.clock.now_ms();
        let finished = loop {
            if let Err(err) = self.load(shard).await {
                tracing::warn!(%shard, error = %xtimer_core::error::error_chain(&err), "Shard load failed; retrying.");
            }
            let now = self.clock.now_ms();
            // One last poll after the minute catches additions of its last second.
            if now >= shard.end_ms() + repoll {
                break true;
            }
            if self.liveness.stepped_back() {
                tracing::debug!(%shard, "Shard given up: no heartbeat reaches the database; the other nodes take it.");
                let budget = Duration::from_millis(renew_every.max(1) as u64);
                let _ = tokio::time::timeout(budget, self.leases.release(&lease)).await;
                break false;
            }
            // The lease may lapse from `renewed_at + lease_ms` on: the shard
            // is given up half a renewal period before that.
            let give_up_at = renewed_at + lease_ms - renew_every / 2;
            if now - renewed_at >= renew_every / 2 {
                let budget = Duration::from_millis((give_up_at - now).max(1) as u64);
                match tokio::time::timeout(budget, self.leases.renew(&lease)).await {
                    Ok(Ok(true)) => renewed_at = now,
                    Ok(Ok(false)) => {
                        tracing::warn!(%shard, "Shard lease lost; another node owns it now.");
                        break false;
                    }
                    Ok(Err(err)) => {
                        tracing::warn!(%shard, error = %xtimer_core::error::error_chain(&err), "Shard lease renewal failed; retrying.")
                    }
                    Err(_) => tracing::warn!(%shard, "Shard lease renewal timed out; retrying."),
                }
                if renewed_at != now && self.clock.now_ms() >= give_up_at {
                    tracing::warn!(%shard, "Shard dropped: its lease could not be renewed before it may lapse.");
                    break false;
                }
            }
            let give_up_at = renewed_at + lease_ms - renew_every / 2;
            let wait = repoll.min(renew_every).min(shard.end_ms() + repoll - now).min(give_up_at - now).max(1) as u64;
            tokio::select! {
                _ = shutdown.cancelled() => {
                    let _ = self.leases.release(&lease).await;
                    self.drop_shard(&lease);
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        };
        if finished {
            // Every fire of the minute has left the wheel already.
            self.held.remove_if(&shard, |_, held| held.token == lease.token);
            match self.leases.finish(&lease).await {
                Ok(true) => tracing::debug!(%shard, "Shard done."),
                Ok(false) => tracing::warn!(%shard, "Shard lease lost before it was marked done."),
                Err(err) => {
                    tracing::warn!(%shard, error = %xtimer_core::error::error_chain(&err), "Marking the shard done failed.")
                }
            }
        } else {
            self.drop_shard(&lease);
        }
    }

    /// Stops holding `lease`'s shard, unless a newer lease's work owns it
    /// now: its fires still waiting leave the wheel.
    fn drop_shard(&self, lease: &ShardLease) {
        if let Some((_, held)) = self.held.remove_if(&lease.shard, |_, held| held.token == lease.token) {
            self.wheel.remove_many(held.seen.into_iter().map(|key| (self.deadline(&key), key)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use async_trait::async_trait;
    use xtimer_core::clock::TokioClock;
    use xtimer_core::config::ShardConfig;
    use xtimer_store::{LockStore, MemoryLocks, MemoryShards};

    use super::*;

    /// In-process locks that stop answering (as a silent cut from Redis)
    /// while `cut` is set.
    struct Cuttable {
        locks: MemoryLocks,
        cut: AtomicBool,
    }

    impl Cuttable {
        async fn unless_cut<T>(&self, call: impl std::future::Future<Output = T>) -> T {
            if self.cut.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            call.await
        }
    }

    #[async_trait]
    impl LockStore for Cuttable {
        async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> xtimer_store::Result<bool> {
            self.unless_cut(self.locks.acquire(key, token, ttl_ms)).await
        }
        async fn extend(&self, key: &str, token: &str, ttl_ms: u64) -> xtimer_store::Result<bool> {
            self.unless_cut(self.locks.extend(key, token, ttl_ms)).await
        }
        async fn release(&self, key: &str, token: &str) -> xtimer_store::Result<bool> {
            self.unless_cut(self.locks.release(key, token)).await
        }
    }

    /// 12:00:00.000 UTC; the fires are due 40 s into the minute.
    const T0: i64 = 1_767_268_800_000;

    /// A running trigger of `ctx`'s node over `locks` and a one-bucket
    /// shard index holding three fires due at `T0 + 40 s`, with the
    /// shard's first lease taken and handed to it.
    struct Running {
        wheel: Arc<Wheel<FireKey>>,
        held: TriggerHandle,
        won: mpsc::Sender<ShardLease>,
        due: mpsc::Receiver<Vec<FireKey>>,
        leases: ShardLeases,
        shard: ShardKey,
        lease: ShardLease,
        stop: CancellationToken,
        running: tokio::task::JoinHandle<()>,
    }

    async fn running(clock: &SharedClock, ctx: &NodeContext, locks: Arc<dyn LockStore>) -> Running {
        let config = ShardConfig { buckets: 1, ..ShardConfig::default() };
        let shards = Arc::new(MemoryShards::new(config, clock.clone()));
        let keys: Vec<FireKey> = (1..=3).map(|timer_id| FireKey { timer_id, run_ms: T0 + 40_000 }).collect();
        shards.add(&keys).await.unwrap();
        let leases = ShardLeases::new(locks, ctx, 3_000, 130_000);
        let shard = ShardKey::of(1, T0 + 40_000, 1);
        let lease = leases.acquire(shard).await.unwrap().expect("the shard is free");
        let (won, won_rx) = mpsc::channel(4);
        let (_feed_tx, feed_rx) = broadcast::channel(4);
        let (due_tx, due) = mpsc::channel(4);
        let channels = TriggerChannels { won: won_rx, feed: feed_rx, due: due_tx };
        let trigger = Trigger::new(TriggerConfig::default(), leases.clone(), shards, ctx, channels);
        let (wheel, held) = (trigger.wheel(), trigger.handle());
        let stop = CancellationToken::new();
        let running = tokio::spawn(trigger.run(stop.clone()));
        won.send(lease.clone()).await.unwrap();
        Running { wheel, held, won, due, leases, shard, lease, stop, running }
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_whose_lease_cannot_be_renewed_leaves_the_wheel_before_the_lease_can_lapse() {
        let clock: SharedClock = Arc::new(TokioClock::new(T0));
        let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test");
        let locks = Arc::new(Cuttable { locks: MemoryLocks::new(clock.clone()), cut: AtomicBool::new(false) });
        let mut t = running(&clock, &ctx, locks.clone()).await;
        tokio::time::sleep(Duration::from_millis(5_000)).await;
        assert_eq!((t.wheel.len(), t.held.held()), (3, vec![t.shard]), "renewed while Redis answers");

        // Redis goes silent 5 s in: the last renewal was at most a second
        // before, so the lease may lapse from 8 s on.
        let cut_at = clock.now_ms();
        locks.cut.store(true, Ordering::SeqCst);
        let mut dropped_at = None;
        for _ in 0..400 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if t.wheel.is_empty() {
                dropped_at = Some(clock.now_ms());
                break;
            }
        }
        let dropped_at = dropped_at.expect("the shard was dropped");
        assert!(dropped_at < cut_at + 3_000, "dropped {} ms after the cut", dropped_at - cut_at);
        assert!(t.held.held().is_empty());
        assert!(t.due.try_recv().is_err(), "none of its fires went to the executor");
        t.stop.cancel();
        locks.cut.store(false, Ordering::SeqCst);
        t.running.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_that_lost_its_database_gives_its_shards_up_and_another_takes_them_at_once() {
        let clock: SharedClock = Arc::new(TokioClock::new(T0));
        // Heartbeats every second, stepping back after 3 s without one written.
        let liveness = Arc::new(Liveness::new(1_500).stepping_back_after(3_000));
        let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test").with_liveness(liveness.clone());
        let locks = Arc::new(MemoryLocks::new(clock.clone()));
        let mut t = running(&clock, &ctx, locks.clone()).await;
        // Heartbeats go through for 5 s, then fail (the database is gone;
        // Redis still answers).
        for second in 1..=5 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            liveness.beat_ok(T0 + second * 1_000);
        }
        assert_eq!((t.wheel.len(), t.held.held()), (3, vec![t.shard]), "held while the database answers");
        let lost_at = clock.now_ms();
        let mut given_up_at = None;
        for _ in 0..1_000 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            liveness.beat_failed();
            if t.held.held().is_empty() {
                given_up_at = Some(clock.now_ms());
                break;
            }
        }
        let after = given_up_at.expect("the shard was given up") - lost_at;
        assert!((3_000..=4_100).contains(&after), "given up {after} ms after the last heartbeat");
        assert!(t.wheel.is_empty(), "its fires left the wheel");
        assert!(t.due.try_recv().is_err(), "none of its fires went to the executor");
        let other = NodeContext::new(clock.clone(), "node-b", "xtimer-test");
        let taken = ShardLeases::new(locks.clone(), &other, 3_000, 130_000).acquire(t.shard).await.unwrap();
        assert!(taken.is_some(), "released, not left to lapse: another node takes it at once");
        t.stop.cancel();
        t.running.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_shard_taken_again_while_its_older_lease_still_works_keeps_its_fires() {
        let clock: SharedClock = Arc::new(TokioClock::new(T0));
        let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test");
        let locks = Arc::new(MemoryLocks::new(clock.clone()));
        let t = running(&clock, &ctx, locks.clone()).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(t.wheel.len(), 3);

        // The lock vanishes from Redis (a flush, a failover that lost it) and
        // this node's scheduler takes the shard again, under a new lease.
        assert!(locks.release(&t.shard.lock_key("xtimer-test"), &t.lease.token).await.unwrap());
        let new = t.leases.acquire(t.shard).await.unwrap().expect("free again");
        t.won.send(new).await.unwrap();
        // The older lease's work finds its lease lost at its next renewal and ends.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(t.held.held(), vec![t.shard], "the newer lease's work holds it");
        assert_eq!(t.wheel.len(), 3, "the fires stay in the wheel, once each");
        t.stop.cancel();
        t.running.await.unwrap();
    }
}
