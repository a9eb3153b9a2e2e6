//! Shards: a fire belongs to (minute, bucket), and both the shard store and
//! the lock store name things by it.

use std::fmt;

/// One minute in milliseconds.
pub const MINUTE_MS: i64 = 60_000;

/// Truncates Unix milliseconds to the start of their UTC minute.
pub fn minute_of(ms: i64) -> i64 {
    ms.div_euclid(MINUTE_MS) * MINUTE_MS
}

/// The bucket of a timer: a stable hash of its id modulo the bucket count.
///
/// Stable across versions and nodes: every node must agree on it.
pub fn bucket_of(timer_id: i64, buckets: u32) -> u32 {
    // Fibonacci hashing spreads sequential ids evenly over any bucket count.
    let h = (timer_id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    (h % u64::from(buckets.max(1))) as u32
}

/// A (minute, bucket) shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardKey {
    /// Start of the minute, Unix milliseconds (UTC).
    pub minute_ms: i64,
    /// Bucket number, `0..buckets`.
    pub bucket: u32,
}

impl ShardKey {
    /// The shard of a fire of `timer_id` at `run_ms`.
    pub fn of(timer_id: i64, run_ms: i64, buckets: u32) -> Self {
        Self { minute_ms: minute_of(run_ms), bucket: bucket_of(timer_id, buckets) }
    }

    /// End of the minute (exclusive), Unix milliseconds.
    pub fn end_ms(&self) -> i64 {
        self.minute_ms + MINUTE_MS
    }

    /// The minute as `YYYY-MM-DD HH:MM` in UTC.
    pub fn minute_label(&self) -> String {
        chrono::DateTime::from_timestamp_millis(self.minute_ms)
            .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default()
    }

    /// The Redis Cluster hash tag of the shard, `{<YYYY-MM-DD HH:MM>:<bucket>}`
    /// (braces included): a shard's keys share a slot, and shards spread
    /// over the slots.
    pub fn hash_tag(&self) -> String {
        format!("{{{}:{}}}", self.minute_label(), self.bucket)
    }

    /// Sorted-set key: `{prefix}:shard:{<YYYY-MM-DD HH:MM>:<bucket>}`, e.g.
    /// `xtimer:shard:{2026-03-01 12:34:7}` (the braces are literal: the hash tag).
    pub fn set_key(&self, prefix: &str) -> String {
        format!("{prefix}:shard:{}", self.hash_tag())
    }

    /// Lock key: `{prefix}:lock:{<YYYY-MM-DD HH:MM>:<bucket>}`, e.g.
    /// `xtimer:lock:{2026-03-01 12:34:7}`, in its shard's slot.
    pub fn lock_key(&self, prefix: &str) -> String {
        format!("{prefix}:lock:{}", self.hash_tag())
    }
}

impl fmt::Display for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.minute_label(), self.bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_design_format() {
        // 2026-03-01 12:34:56.789 UTC
        let run_ms = 1_772_368_496_789;
        let key = ShardKey { minute_ms: minute_of(run_ms), bucket: 7 };
        assert_eq!(key.set_key("xtimer"), "xtimer:shard:{2026-03-01 12:34:7}");
        assert_eq!(key.lock_key("xtimer"), "xtimer:lock:{2026-03-01 12:34:7}");
        assert_eq!(key.hash_tag(), "{2026-03-01 12:34:7}");
        assert_eq!(key.end_ms() - key.minute_ms, MINUTE_MS);
    }

    #[test]
    fn buckets_spread_sequential_ids() {
        let mut counts = [0u32; 10];
        for id in 1..=10_000 {
            counts[bucket_of(id, 10) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..=1200).contains(&c)), "{counts:?}");
    }
}

/// A shard whose lock this node just won, handed from scheduler to trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLease {
    pub shard: ShardKey,
    /// The lock's owner token; renew, release and mark done only with it.
    pub token: String,
}
