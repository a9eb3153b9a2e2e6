//! The executor: claims due fires, calls their callbacks on the
//! millisecond, records results, retries failures with backoff.
//!
//! # Layout
//!
//! - [`Executor`]: the claim loop (`run`) fed by the trigger, and its
//!   wiring ([`Wiring`]).
//! - [`ExecutorHandle`] (`handle`): the shared state every room of a
//!   fire's path works on; it dispatches claimed fires (also for the
//!   reconciler and tests) and tracks in-flight work for shutdown.
//!
//! A fire's path, one room (module) each, one entry each:
//!
//! - `claim`: batches of due fires are claimed in one transaction
//!   (compare-and-set pending -> running; a fire someone else holds is
//!   simply not returned); late ones follow their misfire policy; a claim
//!   held across a stall is checked before it is sent.
//! - `dispatch`: each fire leaves at its time (late ones in run-time
//!   order per timer), retries at theirs.
//! - `admission`: the app's pause, the timer's overlap policy, its flow's
//!   turn, the bulkheads and the executor's concurrency.
//! - `attempt`: the callback (or the asyncflow task) of one attempt.
//! - `outcome`: the answer settled: recorded, retried or failed, with
//!   the notifications it owes and what the receiver asked.
//!
//! Around them:
//!
//! - [`Recorder`]: group-commits results, fenced by each claim's owner
//!   token, and keeps them through a database outage; past a cap of
//!   results not yet written the executor stops claiming.
//! - [`notify`]: the notifications fires owe (`onFailure`, `onMissed`,
//!   `onLate`), stored with their results and sent by the node that
//!   recorded them, or by another's [`NotifySweeper`] (`notify_sweeper`)
//!   after a crash.
//! - [`Reconciler`]: sweeps SQL for fires the shard index missed.
//! - [`callback`]: the HTTP request of a fire, its signature and target check.
//! - [`http1`]: plain-HTTP/1.1 callbacks on kept-alive connections, driven
//!   in the fire's own task.
//! - [`resolver`]: the callbacks' DNS resolver, which applies the target policy.
//! - [`bulkhead`]: per-host and per-app caps on callbacks in flight, and
//!   per-host circuit breakers, so a hung receiver stalls no one else.
//! - [`secrets`]: each app's signing secret, and [`Callbacks`] (policy and secrets).
//! - [`task_creator`]: fires that create an asyncflow task instead of a callback.
//! - [`status`]: timer status reads for retries, gathered into few queries.
//! - [`traces`]: OpenTelemetry spans of callback attempts, and their `traceparent`.
//! - [`error`]: this crate's error type.
//!
//! # Shutdown
//!
//! `stop_claiming` stops the claim loop and parks retries (they are given
//! back: running -> pending). Fires already claimed and due within
//! `claim_ahead` still go out; the caller waits for [`ExecutorHandle::idle`]
//! with a deadline, then cancels `hard_stop` (a child-independent token)
//! and finally lets the recorder flush on a path nothing cancels (with
//! the database unreachable it gives up after
//! [`recorder::SHUTDOWN_DEADLINE`], logging how many results it kept).

mod admission;
mod app_pauses;
mod attempt;
pub mod bulkhead;
pub mod callback;
mod claim;
mod dispatch;
pub mod error;
pub mod fire_metrics;
pub mod flows;
mod handle;
pub mod http1;
pub mod notify;
mod notify_sweeper;
mod outcome;
pub mod reconciler;
pub mod recorder;
pub mod resolver;
pub mod secrets;
pub mod status;
pub mod task_creator;
pub mod traces;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use xtimer_core::batch::Gather;
use xtimer_core::config::{ExecutorConfig, ReconcilerConfig};
use xtimer_core::error::error_chain;
use xtimer_core::fire::FireKey;
use xtimer_core::node::NodeContext;
use xtimer_core::steering::Steering;
use xtimer_core::TtlCache;
use xtimer_store::Stores;

use crate::bulkhead::Bulkheads;
use crate::callback::Endpoints;
use crate::handle::Inner;

pub use error::{Error, Result};
pub use handle::{ExecutorHandle, FireOutcome, Held, TIMER_CACHE_CAPACITY, TIMER_CACHE_TTL};
pub use notify::FAILURE_NOTIFY_ATTEMPTS;
pub use notify_sweeper::NotifySweeper;
pub use outcome::FAILURE_LOG_EVERY_MS;
pub use reconciler::Reconciler;
pub use recorder::Recorder;
pub use secrets::{AppSecrets, Callbacks, SigningSecret};
pub use task_creator::{CreateTaskError, TaskCreator};

/// Claims fires handed over by the trigger and dispatches them.
pub struct Executor {
    handle: ExecutorHandle,
    due: Gather<Vec<FireKey>>,
}

/// What an executor is wired to besides its configuration and the stores.
pub struct Wiring {
    /// Batches of due fires, from the trigger.
    pub due: mpsc::Receiver<Vec<FireKey>>,
    /// The callback target policy (in the HTTP client's resolver and for
    /// literal addresses) and the signing secrets.
    pub callbacks: Callbacks,
    /// Creates the task of a timer whose notify is an asyncflow task;
    /// without it such fires fail.
    pub tasks: Option<Arc<dyn TaskCreator>>,
    /// Carries out what receivers ask of their timers in their answers'
    /// headers (API 1e); without it those headers are ignored.
    pub steering: Option<Arc<dyn Steering>>,
    /// Cancelled to stop claiming new fires.
    pub stop_claiming: CancellationToken,
    /// Cancelled to abandon in-flight callbacks (their claims are given back).
    pub hard_stop: CancellationToken,
    /// Where callback attempts' spans go; `None`: traces are off.
    pub traces: Option<traces::FireTraces>,
}

impl Executor {
    /// An executor over `stores` and the [`Recorder`] that writes its
    /// results (run both).
    pub fn new(config: ExecutorConfig, stores: &Stores, ctx: &NodeContext, wiring: Wiring) -> Result<(Self, Recorder)> {
        let Wiring { due, callbacks, tasks, steering, stop_claiming, hard_stop, traces } = wiring;
        let clock = ctx.clock.clone();
        let http = callback::client_with_policy(config.timeout_ms, config.concurrency, callbacks.policy.clone())
            .map_err(Error::Client)?
            .with_clock(clock.clone());
        let tracker = TaskTracker::new();
        let notifier = notify::Notifier::new(notify::NotifierParts {
            notes: stores.notifications.clone(),
            timers: stores.timers.clone(),
            clock: clock.clone(),
            http: http.clone(),
            callbacks: callbacks.clone(),
            max_output: config.max_output_bytes,
            timeout_ms: config.timeout_ms,
            tracker: tracker.clone(),
            hard_stop: hard_stop.clone(),
        });
        let (results, recorder) = recorder::channel(recorder::RecorderParts {
            fires: stores.fires.clone(),
            notes: stores.notifications.clone(),
            notifier: notifier.clone(),
            clock: clock.clone(),
            batch_size: config.batch_size,
            linger: Duration::from_millis(config.record_linger_ms),
            ended: Some(ctx.ended.clone()),
        });
        let lease_ms = config.lease_ms;
        let inner = Inner {
            permits: Arc::new(Semaphore::new(config.concurrency)),
            bulkheads: Bulkheads::new(&config, clock.clone()),
            statuses: status::StatusReader::spawn(stores.timers.clone()),
            failure_logged: TtlCache::new(
                outcome::FAILURE_LOG_TIMERS,
                Duration::from_millis(FAILURE_LOG_EVERY_MS as u64),
                clock.clone(),
            ),
            config,
            misfire_threshold_ms: AtomicU64::new(ReconcilerConfig::default().misfire_threshold_ms),
            node_id: ctx.node_id.clone(),
            fires: stores.fires.clone(),
            timers: stores.timers.clone(),
            cache: TtlCache::new(TIMER_CACHE_CAPACITY, TIMER_CACHE_TTL, clock.clone()),
            handover: ctx.handover.clone(),
            endpoints: Endpoints::new(callbacks.policy.clone(), clock.clone()),
            clock,
            http,
            callbacks,
            tasks,
            steering,
            traces,
            app_pauses: app_pauses::AppPauses::new(stores.apps.clone(), ctx.clock.clone()),
            flows: flows::Flows::new(&ctx.node_id, ctx.clock.clone(), stores.flow_tokens.clone(), lease_ms),
            results,
            notifier,
            metrics: fire_metrics::FireMetrics::default(),
            paced: fire_metrics::PacedFires::new(ctx.clock.clone()),
            claim_seq: AtomicU64::new(0),
            pause: ctx.pause.clone(),
            liveness: ctx.liveness.clone(),
            confirming: std::sync::Mutex::new(Vec::new()),
            tracker,
            stop_claiming,
            hard_stop,
        };
        let linger = Duration::from_millis(inner.config.claim_linger_ms);
        let due = Gather::sized(due, inner.config.batch_size, linger, Vec::len);
        Ok((Self { handle: ExecutorHandle { inner: Arc::new(inner) }, due }, recorder))
    }

    /// A handle for dispatching and for waiting on in-flight work.
    pub fn handle(&self) -> ExecutorHandle {
        self.handle.clone()
    }

    /// Claims batches of due fires until `shutdown` (the stop-claiming token).
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<()> {
        let max = self.handle.inner.config.batch_size;
        // Group commit: what arrives within the claim linger, up to a batch.
        let mut batches = Vec::new();
        while self.due.next_until(&mut batches, &shutdown).await {
            let keys: Vec<FireKey> = batches.drain(..).flatten().collect();
            for chunk in keys.chunks(max) {
                if let Err(err) = self.handle.claim_and_dispatch(chunk).await {
                    // The fires stay pending in SQL; the reconciler fires them.
                    tracing::warn!(
                        fires = chunk.len(),
                        "Claim failed: {}; the reconciler will retry.",
                        error_chain(&err)
                    );
                }
            }
        }
        Ok(())
    }
}
