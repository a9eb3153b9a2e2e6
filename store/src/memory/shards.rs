//! The in-process shard index of the embedded default.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use async_trait::async_trait;
use xtimer_core::config::ShardConfig;
use xtimer_core::fire::FireKey;
use xtimer_core::shard::{ShardKey, MINUTE_MS};
use xtimer_core::SharedClock;

use crate::shard::{ShardStore, SHARD_TTL_MS};
use crate::Result;

/// The in-process shard index of the embedded default.
#[derive(Debug)]
pub struct MemoryShards {
    config: ShardConfig,
    clock: SharedClock,
    sets: Mutex<BTreeMap<ShardKey, BTreeSet<(i64, i64)>>>,
}

impl MemoryShards {
    /// An empty index.
    pub fn new(config: ShardConfig, clock: SharedClock) -> Self {
        Self { config, clock, sets: Mutex::new(BTreeMap::new()) }
    }
}

#[async_trait]
impl ShardStore for MemoryShards {
    async fn add(&self, fires: &[FireKey]) -> Result<()> {
        // A shard expires SHARD_TTL_MS after its minute ends.
        let expired_before = self.clock.now_ms() - SHARD_TTL_MS - MINUTE_MS + 1;
        let mut sets = self.sets.lock().expect("shard index lock");
        for fire in fires {
            let key = ShardKey::of(fire.timer_id, fire.run_ms, self.config.buckets);
            if key.minute_ms >= expired_before {
                sets.entry(key).or_default().insert((fire.run_ms, fire.timer_id));
            }
        }
        // Expire whole shards the way Redis TTLs would.
        while let Some(entry) = sets.first_entry() {
            if entry.key().minute_ms >= expired_before {
                break;
            }
            entry.remove();
        }
        Ok(())
    }

    async fn range(&self, shard: ShardKey, from_ms: i64, to_ms: i64) -> Result<Vec<FireKey>> {
        if shard.end_ms() + SHARD_TTL_MS <= self.clock.now_ms() {
            return Ok(Vec::new());
        }
        let sets = self.sets.lock().expect("shard index lock");
        Ok(sets
            .get(&shard)
            .map(|set| {
                set.range((from_ms, i64::MIN)..(to_ms, i64::MIN))
                    .map(|&(run_ms, timer_id)| FireKey { timer_id, run_ms })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn count(&self, shard: ShardKey) -> Result<u64> {
        if shard.end_ms() + SHARD_TTL_MS <= self.clock.now_ms() {
            return Ok(0);
        }
        let sets = self.sets.lock().expect("shard index lock");
        Ok(sets.get(&shard).map_or(0, |set| set.len() as u64))
    }

    fn buckets(&self) -> u32 {
        self.config.buckets
    }
}
