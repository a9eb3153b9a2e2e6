//! The shard index in Redis: a sorted set per (minute, bucket) shard.

use std::collections::BTreeMap;

use async_trait::async_trait;
use redis::AsyncCommands;
use xtimer_core::fire::FireKey;
use xtimer_core::shard::ShardKey;

use super::RedisStore;
use crate::shard::SHARD_TTL_MS;
use crate::{Result, ShardStore};

/// Most members per `ZADD`, so one huge batch does not become one huge command.
const ZADD_CHUNK: usize = 1_000;

#[async_trait]
impl ShardStore for RedisStore {
    async fn add(&self, fires: &[FireKey]) -> Result<()> {
        let now = self.clock.now_ms();
        // (score, member) per live shard; a fire whose shard has expired by
        // now would only recreate a dead key, so it is left out.
        let mut shards: BTreeMap<ShardKey, Vec<(i64, String)>> = BTreeMap::new();
        for fire in fires {
            let shard = ShardKey::of(fire.timer_id, fire.run_ms, self.config.buckets);
            if shard.end_ms() + SHARD_TTL_MS > now {
                shards.entry(shard).or_default().push((fire.run_ms, fire.to_string()));
            }
        }
        if shards.is_empty() {
            return Ok(());
        }
        // One MULTI/EXEC per shard, so a shard never gets members without
        // its TTL (a connection lost between the two would leak the key);
        // each touches one key, hence one cluster slot. Sent concurrently
        // over the multiplexed connection: about one round trip in all.
        let mut writes = tokio::task::JoinSet::new();
        for (shard, members) in shards {
            let key = shard.set_key(&self.config.key_prefix);
            let mut pipe = redis::pipe();
            pipe.atomic();
            for chunk in members.chunks(ZADD_CHUNK) {
                pipe.zadd_multiple(&key, chunk).ignore();
            }
            pipe.pexpire(&key, shard.end_ms() + SHARD_TTL_MS - now).ignore();
            let mut conn = self.conn.clone();
            writes.spawn(async move { pipe.exec_async(&mut conn).await });
        }
        while let Some(written) = writes.join_next().await {
            match written {
                Ok(result) => result?,
                Err(stopped) => std::panic::resume_unwind(stopped.into_panic()),
            }
        }
        Ok(())
    }

    async fn range(&self, shard: ShardKey, from_ms: i64, to_ms: i64) -> Result<Vec<FireKey>> {
        if from_ms >= to_ms || self.expired(shard) {
            return Ok(Vec::new());
        }
        let key = shard.set_key(&self.config.key_prefix);
        // `(to` makes the upper bound exclusive; Redis orders by score, then member.
        let members: Vec<String> = self.conn.clone().zrangebyscore(&key, from_ms, format!("({to_ms}")).await?;
        Ok(members
            .iter()
            .filter_map(|member| {
                let fire = FireKey::parse_member(member);
                if fire.is_none() {
                    // An index, not the truth: skip it and let the reconciler
                    // find the fire in SQL rather than block the whole shard.
                    tracing::warn!(key = %key, member = %member, "Skipped a shard member that does not parse.");
                }
                fire
            })
            .collect())
    }

    async fn count(&self, shard: ShardKey) -> Result<u64> {
        if self.expired(shard) {
            return Ok(0);
        }
        let count: u64 = self.conn.clone().zcard(shard.set_key(&self.config.key_prefix)).await?;
        Ok(count)
    }

    fn buckets(&self) -> u32 {
        self.config.buckets
    }
}
