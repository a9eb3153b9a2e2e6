//! xtimer's application layer: the timer use cases, each a method of
//! [`TimerService`] with a typed result and a typed [`ServiceError`].
//!
//! A use case that spans crates (store a timer, then plan its fires through
//! the migrator's [`Expander`]) and its undo live here, not in a handler:
//! the HTTP API extracts, authorizes, calls one method and maps its result;
//! any other entry point calls the same method.
//!
//! # Layout
//!
//! - this file: [`TimerService`], how it is built ([`Parts`],
//!   [`ServiceConfig`]), [`TimerKey`], and the reads (`get`, `list`, `fires`).
//! - [`create`] holds [`TimerService::create`] (group-committed, undone
//!   when expansion fails) and [`TimerService::create_timers`] (a batch,
//!   all or none).
//! - [`lifecycle`] holds `enable`, `disable`, `delete`, `update`, `trigger`
//!   and `backfill`.
//! - `steering` implements [`xtimer_core::steering::Steering`] for the
//!   executor: what a receiver's answer asks of its timer (a one-shot's
//!   next run, a pause), carried out as any other change.
//! - [`history`] holds [`Actor`] and the change history every use case
//!   that changes a timer notes (`getTimerHistory`).
//! - [`many`] holds what operates many timers: `search`, `bulk`, `apps`,
//!   `pause_app` and `resume_app` (API 1f).
//! - [`apply`] holds [`TimerService::apply`]: an app's timers made to match
//!   a list (timers as code), with its diff, prune and dry run.
//! - [`explain`] holds what shows inside one timer (API 1h): `explain`
//!   (`explainFire`: why a scheduled time fired as it did, or not) and
//!   `stats` (its figures over the last day).
//! - [`flows`] holds flow control per key: `set_flow_limit`, `flows`,
//!   `delete_flow_limit` (API 1g).
//! - [`reads`] holds what a caller reads in one call: a timer with its
//!   next fire, run limit and figures (`detail`), a page of a search with
//!   each timer's next fire (`page`).
//! - [`checks`] holds [`Targets`] (callback target policy and task types, given
//!   by the server), the limits the store refuses by, the app locks;
//!   [`targets`] holds [`PolicyTargets`], the server's own.
//! - [`tokens`] holds [`Tokens`]: API tokens issued per app and looked up.
//! - [`nodes`] holds [`Nodes`]: the cluster's nodes and which are alive.
//! - [`error`] holds the one error type, [`ServiceError`].
//!
//! A deleted timer is gone from every use case: the store keeps its row
//! and still returns it, and the rule is kept here ([`TimerService::get`]).

pub mod apply;
pub mod checks;
pub mod create;
pub mod error;
pub mod explain;
pub mod flows;
pub mod history;
pub mod lifecycle;
pub mod many;
pub mod nodes;
pub mod reads;
pub mod replay;
mod steering;
pub mod targets;
pub mod tokens;
pub mod when;

use std::sync::Arc;

use xtimer_core::config::{Config, LimitsConfig, RetentionConfig};
use xtimer_core::fire::{Fire, FireStatus};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{Timer, TimerStatus};
use xtimer_core::SharedClock;
use xtimer_migrator::Expander;
use xtimer_store::{AppRepo, CalendarRepo, FireRepo, FireWindow, FlowRepo, FlowTokens, Quota, TimerRepo};

pub use checks::{OpenTargets, Targets, TaskTypeError, MAX_APP_CHARS};
pub use error::{Result, ServiceError};
pub use explain::{Attempt, Claim, Explanation, Moment, TimerStats};
pub use history::Actor;
pub use lifecycle::Backfill;
pub use nodes::{LiveNode, Nodes};
pub use reads::{TimerDetail, TimerPage};
pub use targets::PolicyTargets;
pub use tokens::{IssuedToken, Tokens};
pub use when::Forecast;

/// The timer use cases. Cheap to clone: one `Arc`.
#[derive(Clone)]
pub struct TimerService(Arc<Inner>);

struct Inner {
    timers: Arc<dyn TimerRepo>,
    fires: Arc<dyn FireRepo>,
    calendars: Arc<dyn CalendarRepo>,
    apps: Arc<dyn AppRepo>,
    flows: Arc<dyn FlowRepo>,
    flow_tokens: Arc<dyn FlowTokens>,
    expander: Expander,
    targets: Arc<dyn Targets>,
    clock: SharedClock,
    config: ServiceConfig,
    creates: create::CreateQueue,
    app_locks: checks::AppLocks,
}

/// What the service works with.
pub struct Parts {
    /// Where timers are stored.
    pub timers: Arc<dyn TimerRepo>,
    /// Where fires are stored (read, and cleared on an update).
    pub fires: Arc<dyn FireRepo>,
    /// Where the apps' calendars are stored.
    pub calendars: Arc<dyn CalendarRepo>,
    /// What is kept per app (its pause, its counts).
    pub apps: Arc<dyn AppRepo>,
    /// Where the flows' limits are stored.
    pub flows: Arc<dyn FlowRepo>,
    /// The flows' shared state (their waiting fires and open callbacks).
    pub flow_tokens: Arc<dyn FlowTokens>,
    /// Plans an enabled timer's fires the moment it is created or enabled.
    pub expander: Expander,
    /// Where callbacks may point and which task types an app may use.
    pub targets: Arc<dyn Targets>,
}

/// The settings the use cases follow.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The limits (timers per app, fires per minute, backfill).
    pub limits: LimitsConfig,
    /// How long fire records are kept (`retention.keep_fires_ms`): a
    /// backfill may not reach further back.
    pub keep_fires_ms: u64,
    /// How far ahead the reconciler claims paced fires
    /// (`reconciler.period_ms`): a replay's first fire is due that far
    /// ahead, so every one of them is claimed before its time and the pace
    /// holds from the first.
    pub paced_lead_ms: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            limits: LimitsConfig::default(),
            keep_fires_ms: RetentionConfig::default().keep_fires_ms,
            paced_lead_ms: xtimer_core::config::ReconcilerConfig::default().period_ms,
        }
    }
}

impl ServiceConfig {
    /// The settings `config` names.
    pub fn from_config(config: &Config) -> Self {
        Self {
            limits: config.limits.clone(),
            keep_fires_ms: config.retention.keep_fires_ms,
            paced_lead_ms: config.reconciler.period_ms,
        }
    }
}

/// A timer as a caller names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerKey {
    /// The timer's id.
    pub id: i64,
    /// The app the caller says it belongs to.
    pub app: String,
    /// Whether the caller proved it acts for `app` (a token of that app):
    /// another app's timer is then [`ServiceError::Forbidden`] rather than
    /// [`ServiceError::NotFound`].
    pub proven: bool,
    /// Who asks: the timer's history names them.
    pub by: Actor,
}

impl TimerKey {
    /// The one error of a timer that is unknown, deleted or (not proven)
    /// another app's.
    pub(crate) fn not_found(&self) -> ServiceError {
        ServiceError::NotFound { id: self.id, app: self.app.clone() }
    }
}

/// A page of a listing: rows to skip and to return at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Rows skipped.
    pub offset: u64,
    /// Rows returned at most.
    pub limit: u64,
}

impl TimerService {
    /// The service over `parts`, on `ctx`'s clock, following `config`.
    pub fn new(ctx: &NodeContext, parts: Parts, config: ServiceConfig) -> Self {
        Self(Arc::new(Inner {
            timers: parts.timers,
            fires: parts.fires,
            calendars: parts.calendars,
            apps: parts.apps,
            flows: parts.flows,
            flow_tokens: parts.flow_tokens,
            expander: parts.expander,
            targets: parts.targets,
            clock: ctx.clock.clone(),
            config,
            creates: create::CreateQueue::default(),
            app_locks: checks::AppLocks::default(),
        }))
    }

    /// The clock the service runs on.
    pub fn clock(&self) -> &SharedClock {
        &self.0.clock
    }

    /// The settings it follows.
    pub fn config(&self) -> &ServiceConfig {
        &self.0.config
    }

    /// The timer `key` names, if it is not deleted and belongs to
    /// `key.app`. A deleted timer (of any app) and an unknown id are
    /// [`ServiceError::NotFound`]; so is another app's timer unless the
    /// caller proved its app ([`ServiceError::Forbidden`] then).
    pub async fn get(&self, key: &TimerKey) -> Result<Timer> {
        checks::check_app(&key.app)?;
        match self.0.timers.get_timer(key.id).await? {
            Some(timer) if timer.status == TimerStatus::Deleted => Err(key.not_found()),
            Some(timer) if timer.app == key.app => Ok(timer),
            Some(timer) if key.proven => Err(ServiceError::Forbidden { id: timer.id, app: key.app.clone() }),
            _ => Err(key.not_found()),
        }
    }

    /// A page of `app`'s timers that are not deleted, by id, and how many
    /// there are.
    pub async fn list(&self, app: &str, page: Page) -> Result<(Vec<Timer>, u64)> {
        Ok(self.0.timers.list_app_timers(app, page.offset, page.limit).await?)
    }

    /// A page of the fires of the timer `key` names (as [`Self::get`] finds
    /// it), optionally of one `status`, and how many there are: those due
    /// by now, newest first, or with `upcoming` the planned ones, soonest
    /// first.
    pub async fn fires(
        &self,
        key: &TimerKey,
        status: Option<FireStatus>,
        upcoming: bool,
        page: Page,
    ) -> Result<(Vec<Fire>, u64)> {
        self.get(key).await?;
        let now = self.0.clock.now_ms();
        let window = if upcoming { FireWindow::UpcomingAfter(now) } else { FireWindow::DueBy(now) };
        Ok(self.0.fires.list_fires_in(key.id, status, window, page.offset, page.limit).await?)
    }

    /// The fires that ended since `since_ms`, at most `limit`, newest first
    /// (the console's overview), each with whether it was paced
    /// (backfilled or replayed: late by design).
    pub async fn ended_fires(&self, since_ms: i64, limit: u32) -> Result<Vec<(Fire, bool)>> {
        Ok(self.0.fires.ended_since_paced(since_ms, limit).await?)
    }

    /// The timers of `ids` that exist, deleted ones included (to name the
    /// timers of fires).
    pub async fn timers_named(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        Ok(self.0.timers.get_timers(ids).await?)
    }

    /// How many timers there are of each status.
    pub async fn count_timers(&self) -> Result<Vec<(TimerStatus, u64)>> {
        Ok(self.0.timers.count_timers_by_status().await?)
    }

    /// A timer [`Self::get`] found that must be enabled to `verb` it
    /// (trigger, backfill): an invalid `id` otherwise.
    async fn enabled(&self, key: &TimerKey, verb: &str) -> Result<Timer> {
        let timer = self.get(key).await?;
        if timer.status != TimerStatus::Enabled {
            return Err(ServiceError::invalid(
                "id",
                format!("timer {} is not enabled (status {}): enable it to {verb} it", timer.id, timer.status.code()),
            ));
        }
        Ok(timer)
    }

    /// The create-time limits as the store checks them.
    fn quota(&self) -> Quota {
        let limits = &self.0.config.limits;
        Quota { timers_per_app: limits.timers_per_app, fires_per_minute_per_app: limits.fires_per_minute_per_app }
    }
}
