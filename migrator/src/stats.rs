//! The roll-up of the per-timer figures (`getTimer`'s `stats`): every
//! [`PERIOD_MS`], one node at a time (a [`PassLease`]), rolls up each hour
//! of fires that has settled ([`SETTLE_MS`] after its end) into a row per
//! timer ([`FireRepo::roll_up_hour`]: one statement an hour), rolls up
//! again the timer hours a replay or a backfill made stale (or that had
//! fires under way when rolled), and forgets the hours no read covers any
//! more. The read sums a timer's rows of the last day and counts only its
//! fires of the hour or two not rolled up yet, so it costs the same for a
//! timer that fires once a day and one that fires every second.
//!
//! An hour it has not rolled up (no node ran the loop, or it is behind) is
//! counted from the fires by the read: late roll-ups cost reads, never
//! figures.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use xtimer_core::node::NodeContext;
use xtimer_core::period::Period;
use xtimer_core::SharedClock;
use xtimer_store::{FireRepo, PassLease, Stores, STATS_HOUR_MS};

use crate::Result;

/// Time between two passes.
pub const PERIOD_MS: u64 = 60_000;
/// How long after its end an hour is rolled up: its fires have ended by
/// then, but for retries and paced ones (which leave their rows stale).
pub const SETTLE_MS: i64 = 10 * 60_000;
/// Hours back from the current one the loop keeps rolled up: the 24 the
/// figures read, and one more for nodes whose clocks differ a little.
pub const ROLLED_HOURS: i64 = 25;
/// Rolled hours kept: a day more than the figures read.
pub const KEPT_HOURS: i64 = 48;
/// Most stale timer hours rolled up again in a pass.
const STALE_PER_PASS: u32 = 500;
/// Rows forgotten per statement.
const FORGET_BATCH: u32 = 5_000;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RollupPass {
    /// The hours rolled up (their starts, Unix ms), oldest first.
    pub hours: Vec<i64>,
    /// Stale timer hours rolled up again.
    pub rerolled: u64,
    /// Rolled rows forgotten.
    pub forgotten: u64,
}

/// The roll-up loop.
pub struct StatsRollup {
    fires: Arc<dyn FireRepo>,
    clock: SharedClock,
    /// One node a pass: held for most of a period.
    lease: PassLease,
}

impl StatsRollup {
    /// The roll-up over `stores`.
    pub fn new(stores: &Stores, ctx: &NodeContext) -> Self {
        Self {
            fires: stores.fires.clone(),
            clock: ctx.clock.clone(),
            lease: PassLease::new(stores.locks.clone(), ctx, "timer-stats", PERIOD_MS * 9 / 10),
        }
    }

    /// A pass every [`PERIOD_MS`] until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let mut period = Period::ms(PERIOD_MS);
        while period.tick(&shutdown).await {
            match self.run_once(&shutdown).await {
                Ok(Some(pass)) if !pass.hours.is_empty() || pass.rerolled > 0 => {
                    tracing::debug!(hours = ?pass.hours, rerolled = pass.rerolled, forgotten = pass.forgotten, "Timer figures rolled up.")
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(
                    error = %xtimer_core::error::error_chain(&err),
                    "Rolling up the timers' figures failed; the next pass retries (reads count the fires meanwhile)."
                ),
            }
        }
        Ok(())
    }

    /// One pass, if this node has the turn (`None` when another node has
    /// it): every settled hour not rolled up yet (from [`ROLLED_HOURS`]
    /// back), then the stale ones, then what is past [`KEPT_HOURS`].
    pub async fn run_once(&self, shutdown: &CancellationToken) -> Result<Option<RollupPass>> {
        if !self.lease.take().await? {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        let hour = now.div_euclid(STATS_HOUR_MS) * STATS_HOUR_MS;
        let oldest = hour - ROLLED_HOURS * STATS_HOUR_MS;
        let mut pass = RollupPass::default();
        while !shutdown.is_cancelled() {
            match self.fires.roll_up_hour(now - SETTLE_MS, oldest).await? {
                Some(rolled) => pass.hours.push(rolled),
                None => break,
            }
        }
        pass.rerolled = self.fires.reroll_stale_hours(oldest, STALE_PER_PASS).await?;
        let before = hour - KEPT_HOURS * STATS_HOUR_MS;
        while !shutdown.is_cancelled() {
            let n = self.fires.forget_rolled_hours(before, FORGET_BATCH).await?;
            pass.forgotten += n;
            if n == 0 {
                break;
            }
        }
        Ok(Some(pass))
    }
}
