//! The governance loop (API.md): takes timed-out tasks back, rolls full
//! tables, advances begin positions. It runs on one node at a time: each
//! pass first takes a cluster-wide lease.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_core::config::AsyncflowConfig;
use xtimer_core::node::NodeContext;
use xtimer_core::SharedClock;
use xtimer_store::{PassLease, Stores, TaskStore};

use crate::retry::apply_failure;
use crate::schedule_log::{ScheduleData, ScheduleLog};
use crate::wire::{TaskScheduleCfg, TaskStatus};
use crate::Result;

/// Timed-out tasks taken back per table per pass.
const TIMEOUT_PAGE: u32 = 1_000;

/// What one pass changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Timed-out tasks sent back to pending (or failed, retries spent).
    pub requeued: u64,
    /// Tables rolled.
    pub rolled: u32,
    /// Begin positions advanced.
    pub advanced: u32,
    /// Tables whose planner statistics were refreshed (PostgreSQL).
    pub analyzed: u32,
}

/// The governance loop.
pub struct Governor {
    store: TaskStore,
    clock: SharedClock,
    /// One node at a time: held for ten periods (at least 10 s), renewed each pass.
    lease: PassLease,
    config: AsyncflowConfig,
}

impl Governor {
    /// A governor over `stores`' task tables, on `ctx`'s clock; its
    /// cluster-wide lease is named by `ctx`'s key prefix and owned by its node.
    pub fn new(config: AsyncflowConfig, stores: &Stores, ctx: &NodeContext) -> Self {
        let hold_ms = (config.governor_period_ms * 10).max(10_000);
        Self {
            store: stores.tasks.clone(),
            clock: ctx.clock.clone(),
            lease: PassLease::new(stores.locks.clone(), ctx, "asyncflow-governor", hold_ms),
            config,
        }
    }

    /// Runs a pass every `governor_period_ms` until `shutdown`. A failed
    /// pass is logged and the next one tries again.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let period = Duration::from_millis(self.config.governor_period_ms);
        loop {
            match self.pass().await {
                Ok(Some(r)) if r != PassReport::default() => tracing::info!(?r, "asyncflow governance pass."),
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "asyncflow governance pass failed; retrying next period."),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(period) => {}
            }
        }
    }

    /// One pass over every type, if this node holds the lease (`None` if another does).
    pub async fn pass(&self) -> Result<Option<PassReport>> {
        match self.lease.take().await {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(err) => {
                tracing::warn!(error = %err, "asyncflow governor cannot reach the lock store.");
                return Ok(None);
            }
        }
        let mut report = PassReport::default();
        for row in self.store.cfgs().await? {
            self.govern(&row.cfg, &mut report).await?;
        }
        Ok(Some(report))
    }

    async fn govern(&self, cfg: &TaskScheduleCfg, report: &mut PassReport) -> Result<()> {
        let t = &cfg.task_type;
        let Some(pos) = self.store.positions(t).await? else { return Ok(()) };
        let now = self.clock.now_ms();
        let cutoff = now - cfg.max_processing_time.saturating_mul(1_000);
        for p in pos.begin..=pos.end {
            for stale in self.store.timed_out(t, p, cutoff, TIMEOUT_PAGE).await? {
                let mut task = stale.data;
                apply_failure(&mut task, cfg.max_retry_interval, now.div_euclid(1_000));
                // Appended to the worker's log in the shape Go workers read.
                let mut log = ScheduleLog::parse(&task.schedule_log);
                log.push(ScheduleData {
                    err_msg: format!(
                        "processing for over {} s (max_processing_time); taken back",
                        cfg.max_processing_time
                    ),
                    stage: task.task_stage.clone(),
                    outcome: if task.status == TaskStatus::Failed.code() { "fatal" } else { "retry" }.into(),
                    start_time: crate::wire::rfc3339(stale.modify_ms),
                    end_time: crate::wire::rfc3339(now),
                    ..ScheduleData::default()
                });
                task.schedule_log = serde_json::to_string(&log).unwrap_or_default();
                if self.store.requeue(p, &task, stale.modify_ms, now).await? {
                    report.requeued += 1;
                }
            }
        }
        match self.store.refresh_stats(t, pos.end).await {
            Ok(analyzed) => report.analyzed += u32::from(analyzed),
            // Only the planner's estimates wait; the rest of the pass goes on.
            Err(err) => tracing::warn!(task_type = %t, error = %err, "Refreshing task table statistics failed."),
        }
        if self.store.rows(t, pos.end).await? >= self.config.table_row_limit as i64
            && self.store.roll(t, pos.end, now).await?
        {
            report.rolled += 1;
        }
        let mut begin = pos.begin;
        while begin < pos.end
            && self.store.all_final(t, begin).await?
            && self.store.advance_begin(t, begin, now).await?
        {
            report.advanced += 1;
            begin += 1;
        }
        Ok(())
    }
}
