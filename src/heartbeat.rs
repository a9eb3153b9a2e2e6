//! The node's heartbeat: reports this node (id, host, listen address,
//! start, shards held) so operators can see the cluster, and so the
//! reconciler of any node can tell that this one died (no heartbeat for
//! `reconciler.node_timeout_ms`) and take over the fires it had claimed.
//!
//! Each beat also reads the database's clock and sets the node's clock
//! ([`OffsetClock`]) to it, so every node of a cluster writes heartbeats and
//! leases, and judges them, on that one clock: a node whose own clock runs
//! seconds behind or ahead neither looks dead to the others nor fires off
//! its time.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_core::clock::OffsetClock;
use xtimer_core::node::{Liveness, NodeInfo};
use xtimer_core::period::Period;
use xtimer_core::SharedClock;
use xtimer_store::NodeRepo;
use xtimer_trigger::TriggerHandle;

/// Heartbeats per node timeout: two may be lost (a slow write, a busy
/// pool) before the node counts as dead.
const BEATS_PER_TIMEOUT: u64 = 3;

/// A reading of the database's clock whose round trip took longer is
/// ignored (it could be off by half of it).
const CLOCK_MAX_ROUND_TRIP_MS: i64 = 500;

/// A move of the node's clock by more than this is logged.
const CLOCK_MOVE_LOGGED_MS: i64 = 50;

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
    /// The node's clock, set to the database's at each beat.
    pub db_clock: Arc<OffsetClock>,
}

impl Heartbeat {
    /// Reports until `shutdown`. A report that takes longer than the
    /// period is given up and made afresh at the next tick: a write stuck
    /// in the pool's reconnect back-off (seconds, after a database outage)
    /// would otherwise keep this node's heartbeat stale after the database
    /// is back, and another node would take its claims.
    pub async fn run(mut self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let period = self.node_timeout / BEATS_PER_TIMEOUT as u32;
        let mut beat = Period::new(period);
        while beat.tick(&shutdown).await {
            match tokio::time::timeout(period, self.run_once()).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Heartbeat failed."),
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

    /// One report: the node's clock set to the database's, then its row.
    pub async fn run_once(&mut self) -> xtimer_store::Result<()> {
        if let Err(err) = sync_clock(self.nodes.as_ref(), &self.db_clock).await {
            self.liveness.beat_failed();
            return Err(err);
        }
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

/// Sets `clock` to the database's clock (where it has one for the cluster),
/// logging a move of more than [`CLOCK_MOVE_LOGGED_MS`].
pub async fn sync_clock(nodes: &dyn NodeRepo, clock: &OffsetClock) -> xtimer_store::Result<()> {
    let before = clock.offset_ms();
    let sent = clock.inner_now_ms();
    let Some(database) = nodes.database_now_ms().await? else { return Ok(()) };
    let offset = clock.observe(sent, database, clock.inner_now_ms(), CLOCK_MAX_ROUND_TRIP_MS);
    if (offset - before).abs() > CLOCK_MOVE_LOGGED_MS {
        tracing::info!(
            offset_ms = offset,
            "This node's clock is set to the database's: it differs from the system clock by {offset} ms."
        );
    }
    Ok(())
}
