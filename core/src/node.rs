//! A node of the cluster as it reports itself.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::handover::Handover;
use crate::pause::PauseWatch;

/// What every part of a node shares: its clock, its id, the key prefix of
/// its cluster, the [`Handover`] of one-shot definitions, and what the node
/// knows of its own health: its stalls ([`PauseWatch`]) and whether its
/// heartbeats reach the database ([`Liveness`]). Built once at start and
/// passed whole.
#[derive(Clone)]
pub struct NodeContext {
    /// The injected wall clock.
    pub clock: crate::SharedClock,
    /// This node's id (owner tokens start with it).
    pub node_id: String,
    /// Prefix of every shard and lock key (`shard.key_prefix`).
    pub key_prefix: String,
    /// One-shot timers' definitions from their expansion to their fire.
    pub handover: Arc<Handover>,
    /// The node's own stalls (kept by a [`crate::pause::PauseDetector`]
    /// where the node runs one; none seen otherwise).
    pub pause: Arc<PauseWatch>,
    /// Whether this node's heartbeats reach the database steadily (steady
    /// forever where no heartbeat loop runs).
    pub liveness: Arc<Liveness>,
    /// Timers whose fires just ended (results written), so a timer with
    /// nothing left completes within a moment of its last fire.
    pub ended: Arc<EndedFires>,
}

/// The timers of fires whose end was just written, from the recorder to
/// the finisher, which completes those with nothing left.
#[derive(Debug, Default)]
pub struct EndedFires {
    timers: std::sync::Mutex<Vec<i64>>,
    written: tokio::sync::Notify,
}

impl EndedFires {
    /// Notes the timers of fires whose end was just written.
    pub fn ended(&self, timers: impl IntoIterator<Item = i64>) {
        let mut held = self.timers.lock().unwrap_or_else(|e| e.into_inner());
        let before = held.len();
        held.extend(timers);
        if held.len() > before {
            self.written.notify_one();
        }
    }

    /// The timers noted since the last call, each once, waiting for one.
    pub async fn next(&self) -> Vec<i64> {
        loop {
            {
                let mut held = self.timers.lock().unwrap_or_else(|e| e.into_inner());
                if !held.is_empty() {
                    let mut ids = std::mem::take(&mut *held);
                    ids.sort_unstable();
                    ids.dedup();
                    return ids;
                }
            }
            self.written.notified().await;
        }
    }
}

impl NodeContext {
    /// A context for `node_id` in the cluster of `key_prefix`.
    pub fn new(clock: crate::SharedClock, node_id: impl Into<String>, key_prefix: impl Into<String>) -> Self {
        let handover = Arc::new(Handover::new(clock.clone()));
        Self {
            clock,
            node_id: node_id.into(),
            key_prefix: key_prefix.into(),
            handover,
            pause: Arc::new(PauseWatch::default()),
            liveness: Arc::new(Liveness::steady()),
            ended: Arc::new(EndedFires::default()),
        }
    }

    /// The same context with `liveness` fed by the node's heartbeat loop.
    pub fn with_liveness(mut self, liveness: Arc<Liveness>) -> Self {
        self.liveness = liveness;
        self
    }

    /// Now, in Unix milliseconds, by the node's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}

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
/// steadily: one after another, no gap longer than `max_gap`.
///
/// A node may judge another dead (its heartbeat is `node_timeout` old) only
/// while its own heartbeats have been written steadily for at least that
/// long. After an outage of the database every node's heartbeat is stale
/// at once; without this rule the first reconciler to run afterwards would
/// take every node's claims (and send their fires twice). A heartbeat that
/// hung through the outage and then went through counts as a gap, not as
/// steady: the run starts again from it.
#[derive(Debug)]
pub struct Liveness {
    /// Unix ms of the first heartbeat of the current steady run.
    beating_since: AtomicI64,
    /// Unix ms of the last heartbeat written; `i64::MIN` if none.
    last_ok: AtomicI64,
    /// Longest gap between two heartbeats of a steady run, ms.
    max_gap: i64,
    /// The monotonic clock's origin for [`Self::last_ok_mono`].
    base: tokio::time::Instant,
    /// Ms after `base` of the last heartbeat written, by the monotonic
    /// clock: `NEVER`, or `ALWAYS` for a node that is steady by fiat.
    last_ok_mono: AtomicI64,
    /// [`Self::last_ok_mono`] kept through failures: ms after `base` of the
    /// last heartbeat written (0, its creation, before the first).
    last_written_mono: AtomicI64,
    /// How long without a heartbeat written before the node steps back
    /// ([`Self::stepped_back`]), ms; `i64::MAX`: never.
    step_back_after: i64,
}

/// [`Liveness::last_ok_mono`]: no heartbeat written since the last failure.
const NEVER: i64 = -1;
/// [`Liveness::last_ok_mono`]: steady without heartbeats (tests, tools).
const ALWAYS: i64 = i64::MAX;

impl Liveness {
    /// Not beating yet; a gap over `max_gap_ms` between heartbeats breaks the run.
    pub fn new(max_gap_ms: i64) -> Self {
        Self {
            beating_since: AtomicI64::new(i64::MAX),
            last_ok: AtomicI64::new(i64::MIN),
            max_gap: max_gap_ms,
            base: tokio::time::Instant::now(),
            last_ok_mono: AtomicI64::new(NEVER),
            last_written_mono: AtomicI64::new(0),
            step_back_after: i64::MAX,
        }
    }

    /// The same, the node stepping back once no heartbeat has reached the
    /// database for `after_ms` ([`Self::stepped_back`]).
    pub fn stepping_back_after(mut self, after_ms: i64) -> Self {
        self.step_back_after = after_ms;
        self
    }

    /// Beating steadily since forever (tests and tools without a heartbeat loop).
    pub fn steady() -> Self {
        Self {
            beating_since: AtomicI64::new(i64::MIN),
            last_ok: AtomicI64::new(i64::MAX),
            max_gap: i64::MAX,
            base: tokio::time::Instant::now(),
            last_ok_mono: AtomicI64::new(ALWAYS),
            last_written_mono: AtomicI64::new(0),
            step_back_after: i64::MAX,
        }
    }

    /// A heartbeat was written at `now_ms`.
    pub fn beat_ok(&self, now_ms: i64) {
        let mono = self.base.elapsed().as_millis() as i64;
        self.last_ok_mono.store(mono, Ordering::Release);
        self.last_written_mono.store(mono, Ordering::Release);
        let last = self.last_ok.swap(now_ms, Ordering::AcqRel);
        if last == i64::MIN || now_ms.saturating_sub(last) > self.max_gap {
            self.beating_since.store(now_ms, Ordering::Release);
        }
    }

    /// A heartbeat failed: the run is broken.
    pub fn beat_failed(&self) {
        self.last_ok_mono.store(NEVER, Ordering::Release);
        self.last_ok.store(i64::MIN, Ordering::Release);
        self.beating_since.store(i64::MAX, Ordering::Release);
    }

    /// Whether the last heartbeat written is older than the allowed gap
    /// by the monotonic clock, which runs on while the process is stopped
    /// and which no wall-clock step can fool: past it, other nodes may
    /// soon judge this one dead and take its claims over.
    pub fn stale(&self) -> bool {
        match self.last_ok_mono.load(Ordering::Acquire) {
            NEVER => true,
            ALWAYS => false,
            last => self.base.elapsed().as_millis() as i64 - last > self.max_gap,
        }
    }

    /// How long since the last heartbeat written, by the monotonic clock
    /// (since the node started, before the first); 0 when steady by fiat.
    pub fn silent_for_ms(&self) -> i64 {
        if self.last_ok_mono.load(Ordering::Acquire) == ALWAYS {
            return 0;
        }
        self.base.elapsed().as_millis() as i64 - self.last_written_mono.load(Ordering::Acquire)
    }

    /// Whether this node has lost its database: no heartbeat written for
    /// longer than its step-back time, by the monotonic clock. Such a node
    /// holds no shard (it renews none and takes none), so their fires go
    /// out on time from the nodes that still reach it, instead of late
    /// through their reconcilers; it takes shards again once a heartbeat
    /// goes through. Never, unless set ([`Self::stepping_back_after`]).
    pub fn stepped_back(&self) -> bool {
        self.step_back_after != i64::MAX && self.silent_for_ms() > self.step_back_after
    }

    /// When the current steady run of heartbeats began, at `now_ms`; none
    /// while failing, or when the last one is older than the allowed gap. A
    /// claim taken before it was held across a gap in the heartbeats.
    pub fn steady_since(&self, now_ms: i64) -> Option<i64> {
        self.steady_for(now_ms).map(|steady| now_ms.saturating_sub(steady))
    }

    /// How long the heartbeats have been steady at `now_ms`; none while
    /// failing, or when the last one is older than the allowed gap.
    pub fn steady_for(&self, now_ms: i64) -> Option<i64> {
        let last = self.last_ok.load(Ordering::Acquire);
        if last == i64::MIN || (last != i64::MAX && now_ms.saturating_sub(last) > self.max_gap) {
            return None;
        }
        match self.beating_since.load(Ordering::Acquire) {
            i64::MAX => None,
            since => Some(now_ms.saturating_sub(since)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Liveness;

    #[test]
    fn steadiness_counts_from_the_first_beat_after_a_failure_or_a_gap() {
        let l = Liveness::new(1_500);
        assert_eq!(l.steady_for(1_000), None);
        l.beat_ok(1_000);
        l.beat_ok(2_000);
        l.beat_ok(3_000);
        assert_eq!(l.steady_for(3_500), Some(2_500));
        assert_eq!(l.steady_for(5_000), None, "the last beat is too old");
        l.beat_failed();
        assert_eq!(l.steady_for(5_000), None);
        l.beat_ok(6_000);
        assert_eq!(l.steady_for(7_000), Some(1_000));
        // A beat that hung through an outage went through late: a gap.
        l.beat_ok(7_000);
        l.beat_ok(10_500);
        assert_eq!(l.steady_for(10_600), Some(100));
        assert!(Liveness::steady().steady_for(0).unwrap() > 1_000_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_steps_back_after_its_step_back_time_without_a_heartbeat_and_returns_with_one() {
        let l = Liveness::new(1_500).stepping_back_after(3_000);
        let never = Liveness::new(1_500);
        assert!(!l.stepped_back(), "a node just started has time for its first heartbeat");
        tokio::time::advance(std::time::Duration::from_millis(2_000)).await;
        l.beat_ok(2_000);
        tokio::time::advance(std::time::Duration::from_millis(2_900)).await;
        l.beat_failed();
        assert!(!l.stepped_back(), "a failed heartbeat alone is not enough: 2.9 s since the last written");
        tokio::time::advance(std::time::Duration::from_millis(200)).await;
        assert!(l.stepped_back(), "3.1 s without a heartbeat written");
        l.beat_ok(5_100);
        assert!(!l.stepped_back(), "back with the first heartbeat written");
        tokio::time::advance(std::time::Duration::from_secs(3_600)).await;
        assert!(!never.stepped_back(), "never, unless set");
        assert!(never.silent_for_ms() > 3_000_000, "silent since it started: {}", never.silent_for_ms());
        assert_eq!(Liveness::steady().silent_for_ms(), 0);
        assert!(!Liveness::steady().stepped_back());
    }
}
