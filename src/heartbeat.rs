//! The node's heartbeat: reports this node (id, host, listen address,
//! start, shards held) so operators can see the cluster, and so the
//! reconciler of any node can tell that this one died (no heartbeat for
//! `reconciler.node_timeout_ms`) and take over the fires it had claimed.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_core::node::{Liveness, NodeInfo};
use xtimer_core::SharedClock;
use xtimer_store::NodeRepo;
use xtimer_trigger::TriggerHandle;

/// Heartbeats per node timeout: two may be lost (a slow write, a busy
/// pool) before the node counts as dead.
const BEATS_PER_TIMEOUT: u64 = 3;

/// Writes this node's row every third of the node timeout; removes it at a clean stop.
pub struct Heartbeat {
    /// Where the row goes.
    pub nodes: Arc<dyn NodeRepo>,
    /// This node, as reported.
    pub info: NodeInfo,
    /// Tells which shards the node holds.
    pub trigger: TriggerHandle,
    /// The node's clock.
    pub clock: SharedClock,
    /// `reconciler.node_timeout_ms`: after this long without a heartbeat
    /// the node counts as dead.
    pub node_timeout: Duration,
    /// Where the reconciler reads whether these heartbeats are steady.
    pub liveness: Arc<Liveness>,
}

impl Heartbeat {
    /// Reports until `shutdown`. A report that takes longer than the
    /// period is given up and made afresh at the next tick: a write stuck
    /// in the pool's reconnect back-off (seconds, after a database outage)
    /// would otherwise keep this node's heartbeat stale after the database
    /// is back, and another node would take its claims.
    pub async fn run(mut self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let period = self.node_timeout / BEATS_PER_TIMEOUT as u32;
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            match tokio::time::timeout(period, self.run_once()).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(error = %err, "Heartbeat failed."),
                Err(_) => {
                    self.liveness.beat_failed();
                    tracing::warn!(
                        period_ms = period.as_millis() as u64,
                        "Heartbeat took longer than its period; retrying."
                    );
                }
            }
        }
        let _ = self.nodes.remove_node(&self.info.id).await;
        Ok(())
    }

    /// One report.
    pub async fn run_once(&mut self) -> xtimer_store::Result<()> {
        let now = self.clock.now_ms();
        self.info.heartbeat_at = now;
        self.info.shards = self.trigger.held().iter().map(ToString::to_string).collect();
        let written = self.nodes.heartbeat(&self.info).await;
        match &written {
            Ok(()) => self.liveness.beat_ok(now),
            Err(_) => self.liveness.beat_failed(),
        }
        written
    }
}
