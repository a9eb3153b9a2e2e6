//! The migrator: expands enabled timers into fires one step ahead.
//!
//! # Layout
//!
//! - [`Migrator`]: the loop (`run`), one step (`run_once`) and the start-up
//!   catch-up (`catch_up`).
//! - [`expander`]: the [`Expander`], which expands timers into fires and
//!   indexes them; cheap to clone, so request handlers hold one and call
//!   `expand_timer` when a timer is enabled.
//! - [`expand`]: pure fire-time expansion of one timer over a window.
//! - [`spread`]: load-aware placement of spread fires (a timer's spread).
//! - [`calendars`]: the calendars timers exclude, read and compiled for expansion.
//! - [`retention`]: the loop that deletes fire records past their keep time.
//! - [`finisher`]: the loop that completes timers with nothing left as soon as their last fire ends.
//! - [`stats`]: the loop that rolls up the per-timer figures by the hour.
//! - [`rebuild`]: the loop that notices that the shard index (Redis) lost
//!   writes and rebuilds it from the database at once.
//! - [`error`]: this crate's error type.
//!
//! Every step, under a cluster-wide lock, it inserts the fires in
//! `[now, now + 2 * step)` of every enabled timer due before that horizon
//! (idempotent on the unique key) and moves each one's next fire past it,
//! so a timer is read only in the step before it fires: a million timers
//! that fire tomorrow cost a step nothing today. Then it indexes every
//! pending fire of that window into the shard store.
//! Re-indexing from SQL each step makes the shard index self-healing: an
//! index that lost data (restart of the embedded store, a flushed Redis) is
//! whole again within one step; [`IndexRebuild`] notices a Redis that lost
//! writes within a second and rebuilds it at once.
//!
//! A step plans from timers as it read them, and an `updateTimer` may
//! commit before the plan is written. Every fire and next fire position it
//! writes therefore carries the timer's `modify_time` as read, and the
//! store writes it only while the timer still has it
//! ([`FireRepo::insert_planned_fires`], [`TimerRepo::set_planned_next_runs`]):
//! no fire of a replaced definition lands after the update committed, and
//! the new definition's next fire is not moved by the old one's plan (the
//! timer, marked for expansion by the update, is read again as it is now).

pub mod calendars;
pub mod error;
pub mod expand;
pub mod expander;
pub mod finisher;
pub mod rebuild;
pub mod retention;
pub mod spread;
pub mod stats;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use xtimer_core::config::MigratorConfig;
use xtimer_core::fire::FireFeed;
use xtimer_core::node::NodeContext;
use xtimer_core::period::Period;
use xtimer_store::{NextRun, PassLease, Stores, TimerRepo};

pub use calendars::CalendarBook;
pub use error::{Error, Result};
pub use expander::Expander;
pub use finisher::Finisher;
pub use rebuild::IndexRebuild;
pub use retention::Retention;
pub use stats::StatsRollup;

/// The migrator loop: every step, under a cluster-wide lock, expands every
/// enabled timer through its [`Expander`]. Clones share everything.
#[derive(Clone)]
pub struct Migrator {
    config: MigratorConfig,
    timers: Arc<dyn TimerRepo>,
    expander: Expander,
    /// One node a step: held for most of a step.
    lease: PassLease,
}

/// What one step did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// Enabled timers looked at.
    pub timers: u64,
    /// Fires newly inserted.
    pub inserted: u64,
    /// Pending fires (re)indexed into shards.
    pub indexed: u64,
    /// One-shot timers marked completed.
    pub completed: u64,
}

impl Migrator {
    /// A migrator over `stores`; every indexed fire is published to `feed`
    /// as well, when given.
    pub fn new(config: MigratorConfig, stores: &Stores, ctx: &NodeContext, feed: Option<FireFeed>) -> Self {
        let expander = Expander::new(&config, stores, ctx, feed);
        let lease = PassLease::new(stores.locks.clone(), ctx, "migrator", config.step_ms * 9 / 10);
        Self { config, timers: stores.timers.clone(), expander, lease }
    }

    /// The calendar book, for request handlers.
    pub fn calendars(&self) -> CalendarBook {
        self.expander.calendars.clone()
    }

    /// The expander, for request handlers.
    pub fn expander(&self) -> Expander {
        self.expander.clone()
    }

    /// Runs a catch-up step at once, then one step per `step_ms` until
    /// `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        if let Err(err) = self.catch_up().await {
            tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Migrator catch-up failed; the next step retries.");
        }
        let mut period = Period::ms(self.config.step_ms);
        // The first step ran above: the loop starts a period later.
        period.tick(&shutdown).await;
        while period.tick(&shutdown).await {
            // Every node, stepping or not: definitions left for fires
            // another node took are dropped once they have aged out.
            self.expander.handover.purge_expired();
            match self.run_once().await {
                Ok(Some(report)) => tracing::debug!(?report, "Migrator step done."),
                Ok(None) => tracing::debug!("Migrator step taken by another node."),
                Err(err) => {
                    tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Migrator step failed; the next step retries.")
                }
            }
        }
        Ok(())
    }

    /// One step, if this node wins the step lock (held for most of a step,
    /// so one node per step does the work). `None` when another node has it.
    pub async fn run_once(&self) -> Result<Option<StepReport>> {
        if !self.lease.take().await? {
            return Ok(None);
        }
        self.catch_up().await.map(Some)
    }

    /// One step without the lock: expands every enabled timer due before
    /// the horizon (the next-fire index: timers not due soon are not
    /// read), completes one-shot timers whose fire has ended, and indexes
    /// the window. Run at start so a restarted node is whole at once.
    pub async fn catch_up(&self) -> Result<StepReport> {
        let x = &self.expander;
        let now = x.clock.now_ms();
        let to = x.horizon(now);
        let mut report = StepReport::default();
        // Each page moves its timers' next fire to the horizon or beyond,
        // so the next read starts after them; the bound only guards
        // against a store that does not keep what it was told.
        for _ in 0..MAX_PAGES_PER_STEP {
            let page = self.timers.due_timers(to, self.config.page_size).await?;
            if page.is_empty() {
                break;
            }
            report.timers += page.len() as u64;
            let (mut batch, _) = x.plan(&page, now, to, false).await?;
            let next: Vec<NextRun> = page.iter().map(|timer| expander::next_run(timer, to)).collect();
            expander::by_run_time(&mut batch);
            // Timers updated since the page was read write nothing here;
            // the update marked them due, so the next page reads them again.
            report.inserted += x.fires.insert_planned_fires(&batch, now).await?;
            self.timers.set_planned_next_runs(&next).await?;
        }
        report.completed = self.timers.complete_fired_once(now).await?;
        report.indexed = x.index(now, to).await?;
        Ok(report)
    }
}

/// Pages of due timers one step reads at most (with the default page size,
/// ten million timers).
const MAX_PAGES_PER_STEP: usize = 20_000;
