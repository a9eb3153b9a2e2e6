//! A node of the cluster as it reports itself.

use std::sync::atomic::{AtomicI64, Ordering};

use serde::{Deserialize, Serialize};

/// One node's identity and liveness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// `{host}-{pid}-{random}`.
    pub id: String,
    pub host: String,
    /// Address its HTTP API listens on.
    pub listen: String,
    /// Unix milliseconds.
    pub started_at: i64,
    /// Unix milliseconds of its last heartbeat.
    pub heartbeat_at: i64,
    /// Shards it holds now (`YYYY-MM-DD HH:MM#bucket`).
    pub shards: Vec<String>,
}

/// How long this node's own heartbeats have been reaching the database
/// without a failure.
///
/// A node may judge another dead (its heartbeat is `node_timeout` old) only
/// while its own heartbeats have been written steadily for at least that
/// long. After an outage of the database every node's heartbeat is stale
/// at once; without this rule the first reconciler to run afterwards would
/// take every node's claims (and send their fires twice).
#[derive(Debug)]
pub struct Liveness {
    /// Unix ms of the first heartbeat of the current unbroken run;
    /// `i64::MAX` while not beating.
    beating_since: AtomicI64,
}

impl Liveness {
    /// Not beating yet.
    pub fn new() -> Self {
        Self { beating_since: AtomicI64::new(i64::MAX) }
    }

    /// Beating since forever (tests and tools without a heartbeat loop).
    pub fn steady() -> Self {
        Self { beating_since: AtomicI64::new(i64::MIN) }
    }

    /// A heartbeat was written at `now_ms`.
    pub fn beat_ok(&self, now_ms: i64) {
        let _ = self.beating_since.compare_exchange(i64::MAX, now_ms, Ordering::AcqRel, Ordering::Acquire);
    }

    /// A heartbeat failed: the run is broken.
    pub fn beat_failed(&self) {
        self.beating_since.store(i64::MAX, Ordering::Release);
    }

    /// How long the heartbeats have been steady at `now_ms`; none while failing.
    pub fn steady_for(&self, now_ms: i64) -> Option<i64> {
        match self.beating_since.load(Ordering::Acquire) {
            i64::MAX => None,
            since => Some(now_ms.saturating_sub(since)),
        }
    }
}

impl Default for Liveness {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::Liveness;

    #[test]
    fn steadiness_counts_from_the_first_beat_after_a_failure() {
        let l = Liveness::new();
        assert_eq!(l.steady_for(1_000), None);
        l.beat_ok(1_000);
        l.beat_ok(2_000);
        assert_eq!(l.steady_for(4_000), Some(3_000));
        l.beat_failed();
        assert_eq!(l.steady_for(5_000), None);
        l.beat_ok(6_000);
        assert_eq!(l.steady_for(7_000), Some(1_000));
        assert!(Liveness::steady().steady_for(0).unwrap() > 1_000_000);
    }
}
