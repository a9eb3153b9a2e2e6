//! The node's heartbeat: reports this node (id, host, listen address,
//! start, shards held) so operators can see the cluster.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_core::node::NodeInfo;
use xtimer_core::SharedClock;
use xtimer_store::NodeRepo;
use xtimer_trigger::TriggerHandle;

/// How often a node reports itself.
pub const PERIOD: Duration = Duration::from_secs(2);

/// Writes this node's row every [`PERIOD`]; removes it at a clean stop.
pub struct Heartbeat {
    pub nodes: Arc<dyn NodeRepo>,
    pub info: NodeInfo,
    pub trigger: TriggerHandle,
    pub clock: SharedClock,
}

impl Heartbeat {
    /// Reports until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut tick = tokio::time::interval(PERIOD);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(err) = self.run_once().await {
                tracing::warn!(error = %err, "Heartbeat failed.");
            }
        }
        let _ = self.nodes.remove_node(&self.info.id).await;
        Ok(())
    }

    /// One report.
    pub async fn run_once(&mut self) -> xtimer_store::Result<()> {
        self.info.heartbeat_at = self.clock.now_ms();
        self.info.shards = self.trigger.held().iter().map(ToString::to_string).collect();
        self.nodes.heartbeat(&self.info).await
    }
}
