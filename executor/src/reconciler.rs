//! The reconciler: fires from SQL what the shard index missed.
//!
//! Every `period` (one node at a time, by lock) it reads overdue fires:
//! pending ones past their time by more than `grace` (the index lost them,
//! or every node was down) and running ones whose owner died mid-fire:
//! its node stopped heartbeating for `node_timeout`, or the claim's lease
//! ran out. Running ones are reclaimed and fired again (at-least-once; the
//! idempotency key lets the receiver drop a repeat).
//!
//! A pending fire late by less than its timer's `misfireThresholdMs`, else
//! the node's `misfire_threshold`, always fires: a
//! crash, a takeover or a short outage is not a misfire. Later than that,
//! it follows its timer's misfire policy: `skip` marks it missed,
//! `fire_all` fires it, `fire_once` fires the timer's latest overdue fire
//! (unless a fire within the threshold already goes out) and marks the rest
//! missed. Marking a fire missed owes its timer's `onMissed`, stored
//! with the mark and sent at once.
//!
//! A fire made by `backfillTimer` is past due by design: it waits for its
//! send time (the backfill's pace) and then fires whatever the policy.
//!
//! Overdue fires are read newest first, so the first fire met of a timer is
//! its latest (the one `fire_once` keeps), but they are dispatched oldest
//! first, and the executor sends one timer's late fires one after another:
//! a receiver sees them in run-time order. The fires of a whole pass (up to
//! 100 pages of `page_size`) are sent together once the pass has reclaimed
//! them, so the order holds across pages too.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use xtimer_core::config::ReconcilerConfig;
use xtimer_core::fire::{ClaimedFire, FireStatus};
use xtimer_core::node::{Liveness, NodeContext};
use xtimer_core::period::Period;
use xtimer_core::timer::{MisfirePolicy, TimerStatus};
use xtimer_core::SharedClock;
use xtimer_store::{FireRepo, Overdue, PassLease, Stores, TimerRepo};

use crate::{ExecutorHandle, Result};

/// Most pages one pass works through.
const MAX_PAGES: usize = 100;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Fires reclaimed and handed to the executor.
    pub fired: u64,
    /// Fires marked missed.
    pub missed: u64,
    /// Fires skipped because their timer is not enabled.
    pub skipped: u64,
}

/// Periodic sweep for overdue fires.
pub struct Reconciler {
    config: ReconcilerConfig,
    lease_ms: u64,
    fires: Arc<dyn FireRepo>,
    timers: Arc<dyn TimerRepo>,
    clock: SharedClock,
    executor: ExecutorHandle,
    /// One node a sweep: held for most of a period.
    lease: PassLease,
    liveness: Arc<Liveness>,
    /// Where the last pass's paced claims ended (`i64::MAX`: no pass of
    /// this node's yet, or the lease was elsewhere): the next pass claims
    /// from there, so a pass that comes late leaves no paced fire between
    /// the two windows to the overdue scan (sent a pass later, out of
    /// order).
    paced_until: AtomicI64,
}

impl Reconciler {
    /// A reconciler dispatching through `executor`; `lease_ms` is the
    /// executor's claim lease; `liveness` tells whether this node's own
    /// heartbeats are steady enough to judge others dead.
    pub fn new(
        config: ReconcilerConfig,
        lease_ms: u64,
        stores: &Stores,
        ctx: &NodeContext,
        executor: ExecutorHandle,
        liveness: Arc<Liveness>,
    ) -> Self {
        Self {
            lease_ms,
            fires: stores.fires.clone(),
            timers: stores.timers.clone(),
            clock: ctx.clock.clone(),
            executor,
            lease: PassLease::new(stores.locks.clone(), ctx, "reconciler", config.period_ms * 9 / 10),
            liveness,
            config,
            paced_until: AtomicI64::new(i64::MAX),
        }
    }

    /// Sweeps at once, then every period, until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let mut period = Period::ms(self.config.period_ms);
        while period.tick(&shutdown).await {
            match self.run_once().await {
                Ok(r) if r != ReconcileReport::default() => tracing::info!(
                    fired = r.fired,
                    missed = r.missed,
                    skipped = r.skipped,
                    "Reconciler recovered overdue fires."
                ),
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Reconciler pass failed."),
            }
        }
        Ok(())
    }

    /// One pass, if this node holds the reconciler lock and its recorder
    /// has room for more results.
    pub async fn run_once(&self) -> Result<ReconcileReport> {
        let mut report = ReconcileReport::default();
        // This node's results wait for the database: take on no more fires.
        if self.executor.backlogged() {
            return Ok(report);
        }
        if !self.lease.take().await? {
            self.paced_until.store(i64::MAX, Ordering::Relaxed);
            return Ok(report);
        }
        // Every fire reclaimed by the pass is sent once the pass is over (also
        // when a page failed), so that one timer's late fires leave oldest
        // first across pages, not newest page first.
        let held = self.executor.held_now();
        // The paced claims go on from where the sweep's window began, so a
        // paced fire whose send time comes while the sweep reads is in one of
        // the two (the sweep takes those sent by its own now).
        let started = self.clock.now_ms();
        let mut reclaimed = Vec::new();
        let swept = self.sweep(&mut report, &mut reclaimed).await;
        reclaimed.sort_by_key(|c: &ClaimedFire| (c.key.run_ms, c.key.timer_id));
        self.executor.dispatch(reclaimed, held).await?;
        let paced = self.claim_paced(started, &mut report).await;
        swept.and(paced).map(|()| report)
    }

    /// Claims the paced fires (backfilled, replayed) whose send time comes
    /// before the next pass, and hands each to the executor to send at its
    /// own time: a pace holds to the millisecond, not to the pass. Those
    /// whose send time came after `started` (the pass's start) or after
    /// the last pass's window are claimed too, and sent at once.
    async fn claim_paced(&self, started: i64, report: &mut ReconcileReport) -> Result<()> {
        let now = self.clock.now_ms();
        let pending_before = now - self.config.grace_ms as i64;
        let until = now + self.config.period_ms as i64;
        let after = self.paced_until.load(Ordering::Relaxed).min(started);
        let soon = self.fires.paced_soon(pending_before, after, until, self.config.page_size).await?;
        // A full page: the next pass goes on from its last send time (the
        // ones claimed here are no longer pending).
        let full = soon.len() >= self.config.page_size as usize;
        let reached = if full { soon.last().map_or(until, |(_, at)| at - 1) } else { until };
        if soon.is_empty() {
            self.paced_until.store(until, Ordering::Relaxed);
            return Ok(());
        }
        let held = self.executor.held_now();
        let ids: Vec<i64> = soon.iter().map(|(id, _)| *id).collect();
        let owner = self.executor.owner_token();
        let outcome = self.fires.reclaim(&ids, &owner, self.lease_ms as i64, now, i64::MIN).await?;
        crate::fire_metrics::fires_ended(FireStatus::Skipped, outcome.skipped);
        report.skipped += outcome.skipped;
        report.fired += outcome.claimed.len() as u64;
        self.paced_until.store(reached, Ordering::Relaxed);
        let send_at: HashMap<i64, i64> = soon.into_iter().collect();
        self.executor.dispatch_at(outcome.claimed, &send_at, held).await
    }

    /// Works through the pages of overdue fires (at most [`MAX_PAGES`]):
    /// marks the missed ones, reclaims the others into `reclaimed`.
    async fn sweep(&self, report: &mut ReconcileReport, reclaimed: &mut Vec<ClaimedFire>) -> Result<()> {
        // Timers whose latest overdue fire this pass has already seen.
        let mut seen_latest = HashSet::new();
        for _ in 0..MAX_PAGES {
            let now = self.clock.now_ms();
            let timeout = self.config.node_timeout_ms as i64;
            // Judge others dead only while this node's own heartbeats are steady.
            let alive_since = match self.liveness.steady_for(now) {
                Some(steady) if steady >= timeout => now - timeout,
                _ => i64::MIN,
            };
            let pending_before = now - self.config.grace_ms as i64;
            let overdue = self.fires.overdue(pending_before, now, alive_since, self.config.page_size).await?;
            if overdue.is_empty() {
                break;
            }
            let full = overdue.len() == self.config.page_size as usize;
            let (fire, missed) = self.decide(&overdue, now, &mut seen_latest).await?;
            if !missed.is_empty() {
                let output = "missed: its time passed while no node could fire it (misfire policy)";
                let marked = self.fires.mark_missed(&missed, output, now).await?;
                crate::fire_metrics::fires_ended(FireStatus::Missed, marked);
                report.missed += marked;
                // The onMissed notifications the marks owe were stored with
                // them, held by no one: sent from here at once.
                if marked > 0 {
                    if let Err(err) = self.executor.take_owed().await {
                        tracing::warn!(
                            error = %xtimer_core::error::error_chain(&err),
                            "Sending the onMissed notifies of missed fires failed; a sweep sends them."
                        );
                    }
                }
            }
            let owner = self.executor.owner_token();
            let outcome = self.fires.reclaim(&fire, &owner, self.lease_ms as i64, now, alive_since).await?;
            crate::fire_metrics::fires_ended(FireStatus::Skipped, outcome.skipped);
            report.skipped += outcome.skipped;
            report.fired += outcome.claimed.len() as u64;
            // Backfilled and replayed ones are counted apart when sent.
            let paced: HashSet<i64> = overdue.iter().filter(|o| o.backfill).map(|o| o.task_id).collect();
            if !paced.is_empty() {
                self.executor.note_paced(outcome.claimed.iter().map(|c| c.task_id).filter(|id| paced.contains(id)));
            }
            reclaimed.extend(outcome.claimed);
            if !full {
                break;
            }
        }
        Ok(())
    }

    /// Splits overdue fires (newest first) into (to fire, to mark missed) by
    /// misfire policy. Fires of timers that are not enabled go to the fire
    /// list too: the reclaim marks them skipped, not missed.
    async fn decide(
        &self,
        overdue: &[Overdue],
        now: i64,
        seen_latest: &mut HashSet<i64>,
    ) -> Result<(Vec<i64>, Vec<i64>)> {
        let mut ids: Vec<i64> = overdue.iter().map(|o| o.key.timer_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let default_threshold = self.config.misfire_threshold_ms;
        let timers: HashMap<i64, (TimerStatus, MisfirePolicy, i64)> = self
            .timers
            .get_timers(&ids)
            .await?
            .into_iter()
            .map(|t| (t.id, (t.status, t.misfire, t.timing.misfire_threshold_or(default_threshold) as i64)))
            .collect();
        let (mut fire, mut missed) = (Vec::new(), Vec::new());
        for o in overdue {
            let (status, policy, threshold) = timers.get(&o.key.timer_id).copied().unwrap_or((
                TimerStatus::Deleted,
                MisfirePolicy::Skip,
                default_threshold as i64,
            ));
            // Newest first: the first scheduled fire met of a timer is its
            // latest. A backfilled fire was asked for: it always fires.
            let latest = !o.backfill && seen_latest.insert(o.key.timer_id);
            let fires = o.status == FireStatus::Running
                || o.backfill
                || status != TimerStatus::Enabled
                || now - o.key.run_ms < threshold
                || match policy {
                    MisfirePolicy::FireAll => true,
                    MisfirePolicy::Skip => false,
                    MisfirePolicy::FireOnce => latest,
                };
            if fires {
                fire.push(o.task_id);
            } else {
                missed.push(o.task_id);
            }
        }
        Ok((fire, missed))
    }
}
