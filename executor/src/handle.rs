//! The executor's shared state and its handle: what every room of a
//! fire's path (claim, dispatch, admission, attempt, outcome) works on, the
//! claim's moment ([`Held`]), a timer's kept definition, and how an attempt
//! ended ([`FireOutcome`]). Each room adds its own methods to
//! [`ExecutorHandle`] in its module; this one holds the small ones the
//! node and the tests call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use xtimer_core::config::ExecutorConfig;
use xtimer_core::fire::ClaimedFire;
use xtimer_core::handover::Handover;
use xtimer_core::node::Liveness;
use xtimer_core::pause::{Mark, PauseWatch};
use xtimer_core::steering::Steering;
use xtimer_core::timer::{Notify, Timer};
use xtimer_core::{SharedClock, TtlCache};
use xtimer_store::{FireRepo, TimerRepo};

use crate::app_pauses::AppPauses;
use crate::bulkhead::Bulkheads;
use crate::callback::{self, Endpoints, Target};
use crate::fire_metrics::{FireMetrics, PacedFires};
use crate::flows::Flows;
use crate::notify::Notifier;
use crate::recorder::Results;
use crate::secrets::Callbacks;
use crate::status::StatusReader;
use crate::task_creator::TaskCreator;
use crate::traces::FireTraces;

/// How one attempt of a fire ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireOutcome {
    /// The callback answered 2xx.
    Fired,
    /// The timer is no longer enabled.
    Skipped,
    /// Failed; the next attempt is at this Unix millisecond.
    RetryAt(i64),
    /// Failed with no attempts left.
    Failed,
    /// The node stopped before it went out; the claim was given back.
    Released,
    /// This node stood still (a pause, a cut from the database) while it
    /// held the claim, and another node took the fire over meanwhile: not
    /// sent here, nothing recorded.
    TakenOver,
}

/// Why a callback did not go out.
pub(crate) enum NotSent {
    /// The node is stopping hard.
    Stopped,
    /// The claim passed to another node while this one stood still.
    TakenOver,
    /// It waited for its flow past its catch-up window, and its timer's
    /// misfire policy says missed.
    Missed,
}

/// When a fire's claim was taken: to tell later whether this node stood
/// still since (a stall, a gap in its heartbeats), and so must check that
/// the claim is still its own before it sends the fire.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    pub(crate) mark: Mark,
    pub(crate) at_ms: i64,
    /// The same moment on the monotonic clock: the lease is measured from it.
    pub(crate) at: tokio::time::Instant,
    /// Taken by a check of the claim (its lease renewed from then), not by
    /// the claim itself (its lease from the later of the run time and then).
    pub(crate) renewed: bool,
}

impl Held {
    /// The same moment, as a check that renewed the claim's lease.
    pub(crate) fn renewed(self) -> Self {
        Self { renewed: true, ..self }
    }
}

/// Most cron timers whose definition the executor keeps between their
/// fires (a one-shot timer's is read with its fire and dropped with it).
/// Past it the oldest is dropped and read again at its next fire, so the
/// cache follows the timers that are due, not every timer registered.
pub const TIMER_CACHE_CAPACITY: usize = 100_000;

/// How long a timer's definition is reused. What a fire reads from it
/// (app, notify, retry policy) does not change after create, and its status
/// is read apart, so this only lets a timer that stopped firing leave the
/// cache.
pub const TIMER_CACHE_TTL: Duration = Duration::from_secs(600);

/// A timer's definition as the executor keeps it between fires. A cron
/// timer's callback request is kept prepared (URL parsed, headers built,
/// the target checked), so that each fire only adds what is its own; a
/// one-shot timer's is made at its fire (it would be used once).
pub(crate) struct CachedTimer {
    pub(crate) timer: Timer,
    pub(crate) target: Option<Target>,
}

impl CachedTimer {
    pub(crate) fn new(timer: Timer, callbacks: &Callbacks) -> Arc<Self> {
        let target = match &timer.notify {
            Notify::Http(notify) if timer.schedule.repeats() && !notify.template => {
                Some(Target::new(notify, Some(&callbacks.policy)))
            }
            _ => None,
        };
        Arc::new(Self { timer, target })
    }
}

/// A claimed fire with its timer's definition, when at hand.
pub(crate) type Due = (ClaimedFire, Option<Arc<CachedTimer>>);

/// Claims waiting to be checked in one batch, each with where its answer goes.
pub(crate) type Confirming = Vec<(ClaimedFire, tokio::sync::oneshot::Sender<bool>)>;

/// Shared, cloneable access to the executor's dispatching.
#[derive(Clone)]
pub struct ExecutorHandle {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: ExecutorConfig,
    /// The node's catch-up window (`reconciler.misfire_threshold_ms`), for
    /// timers without their own.
    pub(crate) misfire_threshold_ms: AtomicU64,
    pub(crate) node_id: String,
    pub(crate) fires: Arc<dyn FireRepo>,
    pub(crate) timers: Arc<dyn TimerRepo>,
    pub(crate) clock: SharedClock,
    pub(crate) http: callback::Client,
    pub(crate) callbacks: Callbacks,
    pub(crate) tasks: Option<Arc<dyn TaskCreator>>,
    pub(crate) traces: Option<FireTraces>,
    /// Carries out what receivers ask of their timers.
    pub(crate) steering: Option<Arc<dyn Steering>>,
    /// The apps paused now (`pauseApp`).
    pub(crate) app_pauses: AppPauses,
    /// The flows' limits and this node's fires waiting on them.
    pub(crate) flows: Flows,
    pub(crate) cache: TtlCache<i64, Arc<CachedTimer>>,
    /// One-shot definitions left by their expansion on this node.
    pub(crate) handover: Arc<Handover>,
    /// One-shot timers' callback endpoints, shared by those that call alike.
    pub(crate) endpoints: Endpoints,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) bulkheads: Bulkheads,
    pub(crate) statuses: StatusReader,
    /// Timers whose failed fire was logged within [`FAILURE_LOG_EVERY_MS`](crate::FAILURE_LOG_EVERY_MS).
    pub(crate) failure_logged: TtlCache<i64, ()>,
    /// Results on their way to the recorder, and how many wait.
    pub(crate) results: Results,
    /// Sends the notifications fires owe (also the sweep's).
    pub(crate) notifier: Notifier,
    pub(crate) metrics: FireMetrics,
    /// Paced fires (backfilled, replayed) claimed and not sent yet.
    pub(crate) paced: PacedFires,
    pub(crate) claim_seq: AtomicU64,
    /// This node's stalls.
    pub(crate) pause: Arc<PauseWatch>,
    /// Whether this node's heartbeats reach the database steadily.
    pub(crate) liveness: Arc<Liveness>,
    /// Claims held across a stall, waiting to be checked in one batch.
    pub(crate) confirming: std::sync::Mutex<Confirming>,
    pub(crate) tracker: TaskTracker,
    pub(crate) stop_claiming: CancellationToken,
    pub(crate) hard_stop: CancellationToken,
}

impl ExecutorHandle {
    /// A fresh owner token for one claim.
    pub fn owner_token(&self) -> String {
        let seq = self.inner.claim_seq.fetch_add(1, Ordering::Relaxed);
        format!("{}:{seq}", self.inner.node_id)
    }

    /// Now, as the moment a claim is taken: call it before the claim's
    /// statement, and pass it to [`ExecutorHandle::dispatch`].
    pub fn held_now(&self) -> Held {
        Held {
            mark: self.inner.pause.mark(),
            at_ms: self.inner.clock.now_ms(),
            at: tokio::time::Instant::now(),
            renewed: false,
        }
    }

    /// Sets the node's catch-up window (`reconciler.misfire_threshold_ms`)
    /// for timers without their own `misfireThresholdMs`.
    pub fn set_misfire_threshold(&self, ms: u64) {
        self.inner.misfire_threshold_ms.store(ms, Ordering::Relaxed);
    }

    /// Notes claimed fires `task_ids` as paced (backfilled, replayed):
    /// their first send is counted apart, not in the lateness.
    pub fn note_paced(&self, task_ids: impl IntoIterator<Item = i64>) {
        self.inner.paced.note(task_ids);
    }

    /// Whether the recorder holds its cap of results not yet written (the
    /// database is down or slow): claim nothing more until it has room.
    pub fn backlogged(&self) -> bool {
        self.inner.results.backlog().is_full(self.inner.clock.now_ms())
    }

    /// Resolves when no dispatched fire is waiting, in flight or retrying.
    pub async fn idle(&self) {
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
        self.inner.tracker.reopen();
    }

    /// The flows' limits and this node's fires waiting on them; run a
    /// [`FlowLimitsWatch`](crate::flows::FlowLimitsWatch) over it to keep the limits read.
    pub fn flows(&self) -> Flows {
        self.inner.flows.clone()
    }

    /// Fires dispatched and not finished.
    pub fn in_flight(&self) -> usize {
        self.inner.tracker.len()
    }

    /// Keeps a cron timer's definition for its next fires.
    pub(crate) fn keep(&self, cached: &Arc<CachedTimer>) {
        if cached.timer.schedule.repeats() {
            self.inner.cache.insert(cached.timer.id, cached.clone());
        }
    }
}
