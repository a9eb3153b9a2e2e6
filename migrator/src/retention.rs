//! Retention: fire records older than `retention.keep_fires_ms` are
//! deleted every `retention.period_ms`, by one node at a time (a
//! cluster-wide lock), in batches of `retention.batch_size` with a pause
//! between them, so the deletes stay off the fire path. Only ended fires
//! go; a pending or running one is the reconciler's.
//!
//! The same pass forgets the per-minute one-shot counts of minutes gone by
//! (`t_app_minute`, kept for the fires-per-minute limit) and the send
//! times of spread fires scheduled before the keep time (`t_fire_placement`).
//!
//! On SQLite the freed pages are reused by later inserts, so at steady
//! state the file stops growing.
//!
//! On PostgreSQL `t_timer_task` is partitioned by UTC day of run time:
//! each pass first makes the next days' partitions and drops whole each
//! expired one that holds no pending or running fire
//! ([`FireRepo::maintain_partitions`]); the batched delete then takes
//! what is left (the default partition, the day that straddles the keep
//! time, a partition kept for a fire still under way).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_core::config::RetentionConfig;
use xtimer_core::node::NodeContext;
use xtimer_core::period::Period;
use xtimer_core::SharedClock;
use xtimer_store::{FireRepo, PassLease, Stores, TimerRepo};

use crate::Result;

/// Pause between two delete batches: the single SQLite writer serves the
/// fire path in between.
const BATCH_PAUSE: Duration = Duration::from_millis(20);

/// The retention loop.
pub struct Retention {
    config: RetentionConfig,
    fires: Arc<dyn FireRepo>,
    timers: Arc<dyn TimerRepo>,
    clock: SharedClock,
    /// One node a pass: held for most of a period.
    lease: PassLease,
}

impl Retention {
    /// Retention over `stores`.
    pub fn new(config: RetentionConfig, stores: &Stores, ctx: &NodeContext) -> Self {
        Self {
            fires: stores.fires.clone(),
            timers: stores.timers.clone(),
            clock: ctx.clock.clone(),
            lease: PassLease::new(stores.locks.clone(), ctx, "retention", config.period_ms * 9 / 10),
            config,
        }
    }

    /// Deletes expired records every period until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let mut period = Period::ms(self.config.period_ms);
        while period.tick(&shutdown).await {
            match self.run_once(&shutdown).await {
                Ok(Some(0)) | Ok(None) => {}
                Ok(Some(deleted)) => tracing::debug!(deleted, "Expired fire records deleted."),
                Err(err) => {
                    tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Retention failed; the next period retries.")
                }
            }
        }
        Ok(())
    }

    /// One pass, if this node wins the retention lock: keeps the
    /// partitions (PostgreSQL) and deletes every record past its keep
    /// time, batch by batch; returns how many records the batches deleted
    /// (a dropped partition's are not counted). `None` when another node
    /// has the lock.
    pub async fn run_once(&self, shutdown: &CancellationToken) -> Result<Option<u64>> {
        if !self.lease.take().await? {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        self.timers.forget_minutes(now.div_euclid(60_000) - 1).await?;
        let keep = i64::try_from(self.config.keep_fires_ms).unwrap_or(i64::MAX);
        // A failure here (a lock wait that timed out) leaves the batched
        // delete to do the work; the next pass tries again.
        match self.fires.maintain_partitions(now, keep).await {
            Ok(report) => {
                if !report.created.is_empty() {
                    tracing::info!(partitions = ?report.created, "Fire partitions created.");
                }
                if !report.dropped.is_empty() {
                    tracing::info!(partitions = ?report.dropped, "Expired fire partitions dropped.");
                }
                if !report.kept.is_empty() {
                    tracing::debug!(partitions = ?report.kept, "Expired fire partitions kept: they hold fires under way.");
                }
            }
            Err(err) => {
                tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Keeping fire partitions failed; the next period retries.")
            }
        }
        let before = now.saturating_sub(keep);
        let mut deleted = 0;
        loop {
            let n = self.fires.delete_ended_before(before, self.config.batch_size).await?;
            deleted += n;
            if n < u64::from(self.config.batch_size) || shutdown.is_cancelled() {
                break;
            }
            tokio::time::sleep(BATCH_PAUSE).await;
        }
        // A deleted timer's history goes with its fire records.
        self.timers.forget_history(before).await?;
        // Spread fires' placements go with the records of their time: a
        // scheduled time that old is never planned again.
        while !shutdown.is_cancelled() {
            if self.fires.forget_placements(before, self.config.batch_size).await? < u64::from(self.config.batch_size) {
                break;
            }
            tokio::time::sleep(BATCH_PAUSE).await;
        }
        // So do the kept attempts and takeovers of fires.
        while !shutdown.is_cancelled() {
            if self.fires.forget_fire_log(before, self.config.batch_size).await? < u64::from(self.config.batch_size) {
                break;
            }
            tokio::time::sleep(BATCH_PAUSE).await;
        }
        Ok(Some(deleted))
    }
}
