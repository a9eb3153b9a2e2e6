//! The state a flow's limits share across the nodes (API 1g): its token
//! bucket, its callbacks open now, and each node's waiting fires. In Redis
//! on a cluster ([`crate::redis::RedisStore`]), in process when embedded
//! ([`MemoryFlowTokens`]).
//!
//! # The rate
//!
//! A generic cell rate algorithm: the flow keeps its theoretical arrival
//! time (`tat`); a callback may leave when `tat - now` is within the burst
//! tolerance, and moves `tat` one emission interval (`1 / rate`) on. With
//! a burst of one, any one-second window holds at most `rate + 1` sends.
//!
//! # Order across nodes
//!
//! Each node that has fires of a flow waiting reports its oldest one's run
//! time (its head) with each turn it asks for. A node whose head is newer
//! than another live node's is refused ([`FlowGrant::behind`], with the wait
//! until the next token where the flow has a rate), so the flow's fires
//! leave in run-time order across the cluster, not only within a node.
//!
//! # Nodes that die
//!
//! A node's report also says how many of the flow's slots it holds open;
//! it is renewed with each turn, and a node holding slots or with fires
//! waiting takes a turn at least once a second. A report not renewed for
//! [`NODE_TTL_MS`] (as long as the default `reconciler.node_timeout_ms`:
//! the node is dead) lapses, and with it every slot of that node (slot ids
//! start with the node's id and `:`): a killed node's place in the flow's
//! parallelism is freed within seconds, not after the slots' own TTL (the
//! callback timeout and a margin), which stays as the last resort.

use async_trait::async_trait;

use crate::Result;

/// How long a node's report (its waiting fires, the slots it holds) counts
/// without being renewed; then the node is taken for dead and its slots
/// are freed. Nodes with fires waiting or slots open ask at least once a
/// second.
pub const NODE_TTL_MS: i64 = 3_000;

/// One turn of a node at a flow: what it reports and what it asks.
#[derive(Debug, Clone)]
pub struct FlowTurn<'a> {
    /// The flow's app.
    pub app: &'a str,
    /// The flow's key.
    pub key: &'a str,
    /// The asking node.
    pub node: &'a str,
    /// The run time of the node's oldest waiting fire, ms; `None`: none waits.
    pub head_ms: Option<i64>,
    /// How many of the node's fires wait.
    pub waiting: u64,
    /// Callbacks per second across the cluster; `None`: no rate.
    pub rate_per_sec: Option<f64>,
    /// Sends allowed back to back before the rate applies (at least 1).
    pub burst: u32,
    /// Callbacks open at once across the cluster; `None`: no cap.
    pub parallelism: Option<u32>,
    /// Whether the flow is paused: nothing is granted.
    pub paused: bool,
    /// One id per send wanted now (none: only report); a granted send
    /// holds its id's slot until [`FlowTokens::take`] gives it back in
    /// `done`, until `slot_ttl_ms` has passed, or until the node's report
    /// lapses. Each id starts with the node's id and `:`.
    pub slots: &'a [String],
    /// Slots of this node's sends that ended, given back.
    pub done: &'a [String],
    /// How many slots of the flow this node holds open besides `done` (the
    /// ids asked now not counted): while any, its report is kept alive.
    pub holding: u64,
    /// How long a slot lasts if never given back, ms.
    pub slot_ttl_ms: u64,
}

/// What a turn got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowGrant {
    /// How many of the ids asked for may go (the first ones).
    pub granted: usize,
    /// When those not granted may ask again, ms from now: the next token of
    /// the flow's rate; `None`: no time is known (the flow is at its
    /// parallelism, paused, or behind another node's older fires without a
    /// rate).
    pub retry_in_ms: Option<u64>,
    /// Refused because an older fire waits on another node: it goes first.
    pub behind: bool,
}

/// A flow's figures across the cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowFigures {
    /// Fires waiting on every node.
    pub waiting: u64,
    /// Callbacks open now.
    pub in_flight: u64,
}

/// The emission interval of a rate, µs (at least 1).
pub fn interval_us(rate_per_sec: f64) -> i64 {
    ((1_000_000.0 / rate_per_sec).round() as i64).max(1)
}

/// The flows' shared state.
#[async_trait]
pub trait FlowTokens: Send + Sync {
    /// Reports this node's waiting fires of a flow, gives back the slots
    /// of its sends that ended, and takes what is free of the flow's rate
    /// and parallelism for the ids it asks.
    async fn take(&self, turn: &FlowTurn<'_>) -> Result<FlowGrant>;
    /// The flow's waiting fires and open callbacks now.
    async fn figures(&self, app: &str, key: &str) -> Result<FlowFigures>;
    /// Forgets a flow's state (its limits were removed).
    async fn forget(&self, app: &str, key: &str) -> Result<()>;
}
