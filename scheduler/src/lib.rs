//! The scheduler: every tick, tries the lock of each shard that is due or
//! about to be, and hands won shards to the trigger.
//!
//! # Layout
//!
//! - [`Scheduler`]: the loop (`run`) and one tick (`run_once`).
//! - [`due_minutes`]: which minutes a tick looks at (pure).
//! - [`error`]: this crate's error type.
//!
//! A tick looks at the previous minute (a shard nobody finished: its owner
//! died, or the node was down), the current one, and, `lookahead` before a
//! boundary, the next one, so the first second of a minute fires on time.
//! Locks are short leases (`lease_ms`) that the trigger renews while it
//! works, so a dead node's shards are taken over within seconds; a finished
//! shard's lock is kept past two minutes as its done marker, so the
//! previous-minute pass skips it. A node that has lost its database
//! ([`Liveness::stepped_back`]) takes no shard until it reaches it again.

pub mod error;

use rand::seq::SliceRandom;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use xtimer_core::config::SchedulerConfig;

use xtimer_core::node::{Liveness, NodeContext};
use xtimer_core::period::Period;
use xtimer_core::shard::{minute_of, ShardKey, ShardLease, MINUTE_MS};
use xtimer_core::SharedClock;
use xtimer_store::ShardLeases;

pub use error::{Error, Result};

/// Minutes a tick at `now_ms` looks at: previous, current and, within
/// `lookahead_ms` of the boundary, next.
pub fn due_minutes(now_ms: i64, lookahead_ms: u64) -> Vec<i64> {
    let current = minute_of(now_ms);
    let mut minutes = vec![current - MINUTE_MS, current];
    if now_ms + lookahead_ms as i64 >= current + MINUTE_MS {
        minutes.push(current + MINUTE_MS);
    }
    minutes
}

/// Tries shard locks every tick and sends won shards to the trigger.
pub struct Scheduler {
    config: SchedulerConfig,
    buckets: u32,
    leases: ShardLeases,
    clock: SharedClock,
    liveness: Arc<Liveness>,
    /// Whether the last tick found the node stepped back (logged once).
    stepped_back: AtomicBool,
    won: mpsc::Sender<ShardLease>,
}

impl Scheduler {
    /// A scheduler for `buckets` buckets that takes shards through
    /// `leases` and sends won shards on `won`.
    pub fn new(
        config: SchedulerConfig,
        buckets: u32,
        leases: ShardLeases,
        ctx: &NodeContext,
        won: mpsc::Sender<ShardLease>,
    ) -> Self {
        Self {
            config,
            buckets,
            leases,
            clock: ctx.clock.clone(),
            liveness: ctx.liveness.clone(),
            stepped_back: AtomicBool::new(false),
            won,
        }
    }

    /// Ticks until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let mut period = Period::ms(self.config.tick_ms);
        while period.tick(&shutdown).await {
            if let Err(err) = self.run_once().await {
                tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Scheduler tick failed.");
            }
        }
        Ok(())
    }

    /// Most shards of one minute taken in one tick: enough for one node to
    /// take a whole minute within the lookahead, few enough that the nodes
    /// of a cluster, ticking at different moments, share a minute's shards.
    pub fn per_tick(&self) -> usize {
        let ticks = (self.config.lookahead_ms / self.config.tick_ms.max(1)).max(1);
        (u64::from(self.buckets).div_ceil(ticks) + 1) as usize
    }

    /// One tick: returns the shards won. Buckets are tried in random order;
    /// at most [`Scheduler::per_tick`] of the next minute's. None while the
    /// node has lost its database: the nodes that reach it take them.
    pub async fn run_once(&self) -> Result<Vec<ShardKey>> {
        let now = self.clock.now_ms();
        let mut won = Vec::new();
        let stepped_back = self.liveness.stepped_back();
        if stepped_back != self.stepped_back.swap(stepped_back, Ordering::Relaxed) {
            match stepped_back {
                true => tracing::warn!(
                    "No heartbeat reaches the database: this node gives its shards up and takes none until one does."
                ),
                false => tracing::info!("Heartbeats reach the database again: this node takes shards again."),
            }
        }
        if stepped_back {
            return Ok(won);
        }
        let mut buckets: Vec<u32> = (0..self.buckets).collect();
        let current = minute_of(now);
        for minute_ms in due_minutes(now, self.config.lookahead_ms) {
            buckets.shuffle(&mut rand::rng());
            // Shards due now (or overdue) are all taken at once; only the
            // next minute's, taken ahead, are shared out tick by tick.
            let cap = if minute_ms > current { self.per_tick() } else { buckets.len() };
            let mut taken = 0;
            for &bucket in &buckets {
                if taken == cap {
                    break;
                }
                let shard = ShardKey { minute_ms, bucket };
                if let Some(lease) = self.leases.acquire(shard).await? {
                    tracing::debug!(%shard, "Shard claimed.");
                    self.won.send(lease).await.map_err(|_| Error::TriggerGone)?;
                    won.push(shard);
                    taken += 1;
                }
            }
        }
        Ok(won)
    }
}

/// A scheduler of node `node` in cluster `prefix` over `locks`, for tests.
#[cfg(test)]
fn scheduler(
    config: &SchedulerConfig,
    buckets: u32,
    prefix: &str,
    node: &str,
    locks: &std::sync::Arc<dyn xtimer_store::LockStore>,
    clock: &std::sync::Arc<xtimer_core::clock::ManualClock>,
    won: mpsc::Sender<ShardLease>,
) -> Scheduler {
    let ctx = NodeContext::new(clock.clone(), node, prefix);
    let leases = ShardLeases::new(locks.clone(), &ctx, config.lease_ms, config.done_ttl_ms);
    Scheduler::new(config.clone(), buckets, leases, &ctx, won)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xtimer_core::clock::ManualClock;
    use xtimer_store::{LockStore, MemoryLocks};

    use super::*;

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    #[test]
    fn next_minute_only_within_lookahead() {
        assert_eq!(due_minutes(T0 + 30_000, 5_000), vec![T0 - MINUTE_MS, T0]);
        assert_eq!(due_minutes(T0 + 55_000, 5_000), vec![T0 - MINUTE_MS, T0, T0 + MINUTE_MS]);
    }

    #[tokio::test]
    async fn a_held_or_done_shard_is_not_taken_twice_and_a_dead_lease_is() {
        let clock = Arc::new(ManualClock::new(T0 + 10_000));
        let locks: Arc<dyn LockStore> = Arc::new(MemoryLocks::new(clock.clone()));
        let (tx, mut rx) = mpsc::channel(64);
        let config = SchedulerConfig::default();
        let a = scheduler(&config, 2, "t", "a", &locks, &clock, tx.clone());
        let b = scheduler(&config, 2, "t", "b", &locks, &clock, tx);
        assert_eq!(a.per_tick(), 2, "two buckets over five ticks of lookahead: one per tick, plus one");
        assert_eq!(a.run_once().await.unwrap().len(), 4, "previous and current minute, two buckets");
        assert!(b.run_once().await.unwrap().is_empty(), "held by a");
        // a finishes the previous minute's shards: done markers.
        let mut leases = Vec::new();
        while let Ok(l) = rx.try_recv() {
            leases.push(l);
        }
        for l in leases.iter().filter(|l| l.shard.minute_ms < T0) {
            assert!(locks.extend(&l.shard.lock_key("t"), &l.token, config.done_ttl_ms).await.unwrap());
        }
        // a dies: its current-minute leases run out, the done markers do not.
        clock.advance(config.lease_ms as i64 + 1);
        let mut taken = b.run_once().await.unwrap();
        taken.sort();
        assert_eq!(taken, vec![ShardKey { minute_ms: T0, bucket: 0 }, ShardKey { minute_ms: T0, bucket: 1 }]);
    }
}

#[cfg(test)]
mod stepping_back {
    use std::sync::Arc;

    use xtimer_core::clock::ManualClock;
    use xtimer_store::{LockStore, MemoryLocks};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_node_without_its_database_takes_no_shard_until_a_heartbeat_goes_through() {
        let clock = Arc::new(ManualClock::new(1_767_225_600_000 + 10_000));
        let locks: Arc<dyn LockStore> = Arc::new(MemoryLocks::new(clock.clone()));
        let (tx, _rx) = mpsc::channel(64);
        let config = SchedulerConfig::default();
        let liveness = Arc::new(Liveness::new(1_500).stepping_back_after(3_000));
        let ctx = NodeContext::new(clock.clone(), "a", "t").with_liveness(liveness.clone());
        let leases = ShardLeases::new(locks, &ctx, config.lease_ms, config.done_ttl_ms);
        let node = Scheduler::new(config, 2, leases, &ctx, tx);
        tokio::time::advance(std::time::Duration::from_millis(3_100)).await;
        assert!(node.run_once().await.unwrap().is_empty(), "no heartbeat written for 3.1 s");
        liveness.beat_ok(1_767_225_600_000 + 10_000);
        assert_eq!(node.run_once().await.unwrap().len(), 4, "previous and current minute, two buckets");
    }
}

#[cfg(test)]
mod spread {
    use std::sync::Arc;

    use xtimer_core::clock::ManualClock;
    use xtimer_store::{LockStore, MemoryLocks};

    use super::*;

    #[tokio::test]
    async fn nodes_ticking_in_turn_share_a_minute_and_one_node_alone_takes_it_all() {
        let t0 = 1_767_225_600_000 + 55_000; // 5 s before a minute
        let clock = Arc::new(ManualClock::new(t0));
        let locks: Arc<dyn LockStore> = Arc::new(MemoryLocks::new(clock.clone()));
        let (tx, _rx) = mpsc::channel(1024);
        // No trigger renews the leases here: make them outlast the lookahead.
        let config = SchedulerConfig { lease_ms: 10_000, ..SchedulerConfig::default() };
        let nodes: Vec<Scheduler> =
            ["a", "b", "c"].iter().map(|n| scheduler(&config, 16, "t", n, &locks, &clock, tx.clone())).collect();
        let next = t0 + 5_000;
        let mut per_node = [0; 3];
        for _ in 0..5 {
            for (i, node) in nodes.iter().enumerate() {
                per_node[i] += node.run_once().await.unwrap().iter().filter(|s| s.minute_ms == next).count();
            }
            clock.advance(1_000);
        }
        assert_eq!(per_node.iter().sum::<usize>(), 16, "{per_node:?}");
        assert!(per_node.iter().all(|&n| n >= 4), "shared: {per_node:?}");

        let alone = scheduler(&config, 16, "u", "d", &locks, &clock, tx);
        clock.set(t0);
        let mut taken = 0;
        for _ in 0..5 {
            taken += alone.run_once().await.unwrap().iter().filter(|s| s.minute_ms == next).count();
            clock.advance(1_000);
        }
        assert_eq!(taken, 16, "one node takes a whole minute within the lookahead");
    }
}
