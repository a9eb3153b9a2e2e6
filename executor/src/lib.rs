//! The executor: claims due fires, calls their callbacks on the
//! millisecond, records results, retries failures with backoff.
//!
//! # Layout
//!
//! - [`Executor`]: the claim loop (`run`) fed by the trigger; batches of due
//!   fires are claimed in one transaction (compare-and-set pending ->
//!   running; a fire someone else holds is simply not returned).
//! - [`ExecutorHandle`]: dispatches claimed fires (also used by the
//!   reconciler and by tests) and tracks in-flight work for shutdown.
//! - [`Recorder`]: group-commits results, fenced by each claim's owner
//!   token, and keeps them through a database outage; past a cap of
//!   results not yet written the executor stops claiming.
//! - [`notify`]: the notifications fires owe (`onFailure`, `onMissed`,
//!   `onLate`), stored with their results and sent by the node that
//!   recorded them, or by another's [`NotifySweeper`] after a crash.
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

mod app_pauses;
pub mod bulkhead;
pub mod callback;
pub mod error;
pub mod fire_metrics;
pub mod flows;
pub mod http1;
pub mod notify;
pub mod reconciler;
pub mod recorder;
pub mod resolver;
pub mod secrets;
pub mod status;
pub mod task_creator;
pub mod traces;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use xtimer_core::batch::Gather;
use xtimer_core::config::{ExecutorConfig, ReconcilerConfig};
use xtimer_core::error::error_chain;
use xtimer_core::fire::{ClaimedFire, FireKey, FireStatus};
use xtimer_core::handover::Handover;
use xtimer_core::node::{Liveness, NodeContext};
use xtimer_core::pause::{Mark, PauseWatch};
use xtimer_core::steering::{self, Steering};
use xtimer_core::template::{self, FireFacts};
use xtimer_core::timer::{AsyncflowNotify, MisfirePolicy, Notify, OverlapPolicy, RetryPolicy, Timer, TimerStatus};
use xtimer_core::{SharedClock, TtlCache};
use xtimer_store::{FireRepo, FireResult, Stores, TimerRepo};

use crate::bulkhead::Bulkheads;
use crate::callback::{Answer, Delivery, Endpoints, Target};

pub use error::{Error, Result};
pub use notify::{NotifySweeper, FAILURE_NOTIFY_ATTEMPTS};
pub use reconciler::Reconciler;
pub use recorder::Recorder;
pub use secrets::{AppSecrets, Callbacks, SigningSecret};
pub use task_creator::{CreateTaskError, TaskCreator};

/// Adds `note` to an attempt's output, after its status and before the
/// answer's body (`HTTP 200; note: body`), so a cut output keeps it.
fn annotate(output: &mut String, note: &str) {
    let at = output.find(": ").unwrap_or(output.len());
    output.insert_str(at, &format!("; {note}"));
}

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
enum NotSent {
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
    mark: Mark,
    at_ms: i64,
    /// The same moment on the monotonic clock: the lease is measured from it.
    at: tokio::time::Instant,
    /// Taken by a check of the claim (its lease renewed from then), not by
    /// the claim itself (its lease from the later of the run time and then).
    renewed: bool,
}

impl Held {
    /// The same moment, as a check that renewed the claim's lease.
    fn renewed(self) -> Self {
        Self { renewed: true, ..self }
    }
}

/// Re-sends, at most, of one attempt whose request was cut short by a stall
/// of this node (not the receiver's fault).
const STALL_RESENDS: u32 = 3;

/// What a claim's lease is trusted for less, by this node's clock: a fifth
/// of it, at least 2 s (other nodes judge it by their own clocks).
fn lease_margin_ms(lease_ms: i64) -> i64 {
    (lease_ms / 5).max(2_000).min(lease_ms / 2)
}

/// How long a batch of claim checks waits for more checks to join it.
const CONFIRM_LINGER: Duration = Duration::from_millis(5);

/// First wait before a failed claim check is tried again; it doubles up to
/// [`CONFIRM_BACKOFF_MAX_MS`].
const CONFIRM_BACKOFF_MS: u64 = 100;
const CONFIRM_BACKOFF_MAX_MS: u64 = 2_000;

/// Longest wait for one batch of claim checks.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);

/// How often, at most, one timer's failed fires are logged at `warn`, ms.
pub const FAILURE_LOG_EVERY_MS: i64 = 60_000;

/// Most timers whose last failure log is remembered; past it the oldest is
/// forgotten (and may be logged again within the minute).
const FAILURE_LOG_TIMERS: usize = 10_000;

/// How often a fire waiting under `overlap: buffer_one` looks again.
const OVERLAP_POLL: Duration = Duration::from_millis(100);

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
struct CachedTimer {
    timer: Timer,
    target: Option<Target>,
}

impl CachedTimer {
    fn new(timer: Timer, callbacks: &Callbacks) -> Arc<Self> {
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
type Due = (ClaimedFire, Option<Arc<CachedTimer>>);

/// Claims waiting to be checked in one batch, each with where its answer goes.
type Confirming = Vec<(ClaimedFire, tokio::sync::oneshot::Sender<bool>)>;

/// Claims fires handed over by the trigger and dispatches them.
pub struct Executor {
    handle: ExecutorHandle,
    due: Gather<Vec<FireKey>>,
}

/// Shared, cloneable access to the executor's dispatching.
#[derive(Clone)]
pub struct ExecutorHandle {
    inner: Arc<Inner>,
}

struct Inner {
    config: ExecutorConfig,
    /// The node's catch-up window (`reconciler.misfire_threshold_ms`), for
    /// timers without their own.
    misfire_threshold_ms: AtomicU64,
    node_id: String,
    fires: Arc<dyn FireRepo>,
    timers: Arc<dyn TimerRepo>,
    clock: SharedClock,
    http: callback::Client,
    callbacks: Callbacks,
    tasks: Option<Arc<dyn TaskCreator>>,
    traces: Option<traces::FireTraces>,
    /// Carries out what receivers ask of their timers.
    steering: Option<Arc<dyn Steering>>,
    /// The apps paused now (`pauseApp`).
    app_pauses: app_pauses::AppPauses,
    /// The flows' limits and this node's fires waiting on them.
    flows: flows::Flows,
    cache: TtlCache<i64, Arc<CachedTimer>>,
    /// One-shot definitions left by their expansion on this node.
    handover: Arc<Handover>,
    /// One-shot timers' callback endpoints, shared by those that call alike.
    endpoints: Endpoints,
    permits: Arc<Semaphore>,
    bulkheads: Bulkheads,
    statuses: status::StatusReader,
    /// Timers whose failed fire was logged within [`FAILURE_LOG_EVERY_MS`].
    failure_logged: TtlCache<i64, ()>,
    /// Results on their way to the recorder, and how many wait.
    results: recorder::Results,
    /// Sends the notifications fires owe (also the sweep's).
    notifier: notify::Notifier,
    metrics: fire_metrics::FireMetrics,
    /// Paced fires (backfilled, replayed) claimed and not sent yet.
    paced: fire_metrics::PacedFires,
    claim_seq: AtomicU64,
    /// This node's stalls.
    pause: Arc<PauseWatch>,
    /// Whether this node's heartbeats reach the database steadily.
    liveness: Arc<Liveness>,
    /// Claims held across a stall, waiting to be checked in one batch.
    confirming: std::sync::Mutex<Confirming>,
    tracker: TaskTracker,
    stop_claiming: CancellationToken,
    hard_stop: CancellationToken,
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
                FAILURE_LOG_TIMERS,
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

    /// Claims `keys` and dispatches what was won; returns how many were won.
    /// Claims nothing while the recorder holds its cap of results not yet
    /// written ([`ExecutorHandle::backlogged`]): the fires stay pending for
    /// the reconciler.
    pub async fn claim_and_dispatch(&self, keys: &[FireKey]) -> Result<usize> {
        let inner = &self.inner;
        if self.backlogged() {
            return Ok(0);
        }
        let owner = self.owner_token();
        let held = self.held_now();
        let outcome = inner.fires.claim(keys, &owner, inner.config.lease_ms as i64, inner.clock.now_ms()).await?;
        let won = outcome.claimed.len();
        inner.metrics.fires_ended(FireStatus::Skipped, outcome.skipped);
        let timers = self.load_timers(&outcome.claimed).await?;
        let claimed = self.past_their_window(outcome.claimed, &timers).await;
        self.dispatch_loaded(claimed, timers, held);
        Ok(won)
    }

    /// Sets the node's catch-up window (`reconciler.misfire_threshold_ms`)
    /// for timers without their own `misfireThresholdMs`.
    pub fn set_misfire_threshold(&self, ms: u64) {
        self.inner.misfire_threshold_ms.store(ms, Ordering::Relaxed);
    }

    /// Of fires just claimed from the index (found late: the node was down,
    /// a shard was taken over), those later than their catch-up window
    /// (the timer's `misfireThresholdMs`, else the node's) follow their
    /// timer's misfire policy, as the reconciler's do: `skip` marks them
    /// missed, `fire_all` fires them, `fire_once` fires only one whose next
    /// scheduled time has not come. The fires that go out.
    async fn past_their_window(
        &self,
        claimed: Vec<ClaimedFire>,
        timers: &HashMap<i64, Arc<CachedTimer>>,
    ) -> Vec<ClaimedFire> {
        let now = self.inner.clock.now_ms();
        let narrowest = xtimer_core::when::MIN_MISFIRE_THRESHOLD_MS as i64;
        if claimed.iter().all(|f| f.manual || now - f.key.run_ms < narrowest) {
            return claimed;
        }
        let default = self.inner.misfire_threshold_ms.load(Ordering::Relaxed);
        let mut going = Vec::with_capacity(claimed.len());
        for fire in claimed {
            let late = now - fire.key.run_ms;
            let missed = timers.get(&fire.key.timer_id).filter(|_| !fire.manual).and_then(|cached| {
                let timer = &cached.timer;
                let window = timer.timing.misfire_threshold_or(default) as i64;
                let next_has_come = || {
                    timer
                        .timing
                        .next_at_or_after(&timer.schedule, fire.scheduled_ms + 1)
                        .is_some_and(|next| next <= now)
                };
                let missed = late >= window
                    && match timer.misfire {
                        MisfirePolicy::FireAll => false,
                        MisfirePolicy::Skip => true,
                        MisfirePolicy::FireOnce => next_has_come(),
                    };
                missed.then_some((window, cached))
            });
            match missed {
                Some((window, cached)) => {
                    let output =
                        format!("missed: {late} ms late, past its catch-up window of {window} ms (misfire policy)");
                    self.send_missed(&cached.timer, &fire, FireStatus::Missed, &output, late).await;
                }
                None => going.push(fire),
            }
        }
        going
    }

    /// Fires claimed fires, each at its run time (at once when past), in
    /// any order they come.
    ///
    /// Fires already due (late: an outage, a takeover, the reconciler)
    /// leave in run-time order per timer: several late fires of one timer
    /// go out one after another, oldest first, each once the one before it
    /// has its answer, so a receiver sees `:30` before `:35`. A retry of
    /// one of them waits on its own and holds up none of the later ones.
    ///
    /// `held`: when the claims were taken ([`ExecutorHandle::held_now`],
    /// read before the claim's statement). A fire this node held across a
    /// stall of its own is checked again before it is sent.
    pub async fn dispatch(&self, claimed: Vec<ClaimedFire>, held: Held) -> Result<()> {
        if claimed.is_empty() {
            return Ok(());
        }
        let timers = self.load_timers(&claimed).await?;
        self.dispatch_loaded(claimed, timers, held);
        Ok(())
    }

    /// [`Self::dispatch`] for paced fires (backfilled, replayed): each is
    /// sent at its time in `send_at` (by task id; at once when absent or past).
    pub async fn dispatch_at(&self, claimed: Vec<ClaimedFire>, send_at: &HashMap<i64, i64>, held: Held) -> Result<()> {
        if claimed.is_empty() {
            return Ok(());
        }
        self.note_paced(claimed.iter().map(|c| c.task_id));
        let timers = self.load_timers(&claimed).await?;
        self.dispatch_timed(claimed, timers, held, |fire| send_at.get(&fire.task_id).copied().unwrap_or(i64::MIN));
        Ok(())
    }

    /// Notes claimed fires `task_ids` as paced (backfilled, replayed):
    /// their first send is counted apart, not in the lateness.
    pub fn note_paced(&self, task_ids: impl IntoIterator<Item = i64>) {
        self.inner.paced.note(task_ids);
    }

    /// [`Self::dispatch`] with the fires' timers already read.
    fn dispatch_loaded(&self, claimed: Vec<ClaimedFire>, timers: HashMap<i64, Arc<CachedTimer>>, held: Held) {
        self.dispatch_timed(claimed, timers, held, |fire| fire.key.run_ms);
    }

    /// Sends each fire at `at(fire)`: those already due in run-time order
    /// per timer, the others in groups by that time.
    fn dispatch_timed(
        &self,
        claimed: Vec<ClaimedFire>,
        timers: HashMap<i64, Arc<CachedTimer>>,
        held: Held,
        at: impl Fn(&ClaimedFire) -> i64,
    ) {
        let now = self.inner.clock.now_ms();
        let mut groups: BTreeMap<i64, Vec<Due>> = BTreeMap::new();
        let mut late: BTreeMap<i64, Vec<Due>> = BTreeMap::new();
        for fire in claimed {
            let timer = timers.get(&fire.key.timer_id).cloned();
            let send_at = at(&fire);
            if send_at <= now {
                late.entry(fire.key.timer_id).or_default().push((fire, timer));
            } else {
                groups.entry(send_at).or_default().push((fire, timer));
            }
        }
        for (_, mut fires) in late {
            fires.sort_by_key(|(f, _)| f.key.run_ms);
            let this = self.clone();
            self.inner.tracker.spawn(async move { this.fire_in_order(fires, held).await });
        }
        for (send_at, group) in groups {
            let this = self.clone();
            self.inner.tracker.spawn(async move { this.fire_group_at(send_at, group, held).await });
        }
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
    /// [`flows::FlowLimitsWatch`] over it to keep the limits read.
    pub fn flows(&self) -> flows::Flows {
        self.inner.flows.clone()
    }

    /// Fires dispatched and not finished.
    pub fn in_flight(&self) -> usize {
        self.inner.tracker.len()
    }

    /// The definitions of the claimed fires' timers: kept ones, one-shots'
    /// handed over by their expansion, and the others read in one query.
    /// Cron timers are kept for their next fires; a one-shot timer's
    /// definition lives as long as its fire's work.
    async fn load_timers(&self, claimed: &[ClaimedFire]) -> Result<HashMap<i64, Arc<CachedTimer>>> {
        let inner = &self.inner;
        let mut found = HashMap::with_capacity(claimed.len());
        let mut missing = Vec::new();
        for c in claimed {
            let id = c.key.timer_id;
            if found.contains_key(&id) {
                continue;
            }
            // A definition from before the timer's last change (updateTimer) is read again.
            if let Some(kept) = inner.cache.get(&id).filter(|t| t.timer.modify_time >= c.timer_modified) {
                found.insert(id, kept);
            } else if let Some(timer) = inner.handover.take(id).filter(|t| t.modify_time >= c.timer_modified) {
                found.insert(id, CachedTimer::new(timer, &inner.callbacks));
            } else {
                missing.push(id);
            }
        }
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            for timer in self.inner.timers.get_timers(&missing).await? {
                let cached = CachedTimer::new(timer, &self.inner.callbacks);
                self.keep(&cached);
                found.insert(cached.timer.id, cached);
            }
        }
        Ok(found)
    }

    /// Keeps a cron timer's definition for its next fires.
    fn keep(&self, cached: &Arc<CachedTimer>) {
        if cached.timer.schedule.repeats() {
            self.inner.cache.insert(cached.timer.id, cached.clone());
        }
    }

    async fn fire_group_at(&self, send_at: i64, group: Vec<Due>, held: Held) {
        let wait = send_at - self.inner.clock.now_ms();
        if wait > 0 {
            tokio::select! {
                _ = self.inner.hard_stop.cancelled() => {
                    let group: Vec<ClaimedFire> = group.into_iter().map(|(fire, _)| fire).collect();
                    self.release(&group).await;
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(wait as u64)) => {}
            }
        }
        let mut group = group.into_iter().peekable();
        while let Some((fire, timer)) = group.next() {
            if self.inner.hard_stop.is_cancelled() {
                self.release(std::slice::from_ref(&fire)).await;
                continue;
            }
            // Each fire waits for its own slots (host, app, executor) in its
            // own task, so a hung host's queue holds up no other fire; the
            // last one has none behind it and goes in this task (one spawn,
            // and one wake-up of another worker, fewer per group).
            let this = self.clone();
            let work = async move {
                let mut held = held;
                let (outcome, timer) = this.attempt_with(&fire, fire.attempt + 1, timer, &mut held).await;
                if let FireOutcome::RetryAt(at) = outcome {
                    this.retry_at(fire, at, timer, held).await;
                }
            };
            if group.peek().is_none() {
                work.await;
            } else {
                self.inner.tracker.spawn(work);
            }
        }
    }

    /// Fires `fires` (due, of one timer, oldest first) one after another:
    /// each first attempt waits for the one before to end, so they leave in
    /// run-time order. Retries go on in their own tasks.
    async fn fire_in_order(&self, fires: Vec<Due>, held: Held) {
        for (fire, timer) in fires {
            if self.inner.hard_stop.is_cancelled() {
                self.release(std::slice::from_ref(&fire)).await;
                continue;
            }
            let mut held = held;
            let (outcome, timer) = self.attempt_with(&fire, fire.attempt + 1, timer, &mut held).await;
            if let FireOutcome::RetryAt(at) = outcome {
                let this = self.clone();
                self.inner.tracker.spawn(async move { this.retry_at(fire, at, timer, held).await });
            }
        }
    }

    /// Waits for a retry's time, then tries again (and again, per policy).
    async fn retry_at(&self, fire: ClaimedFire, mut at: i64, mut timer: Option<Arc<CachedTimer>>, mut held: Held) {
        let mut attempt = fire.attempt + 2;
        loop {
            let wait = (at - self.inner.clock.now_ms()).max(0) as u64;
            tokio::select! {
                _ = self.inner.stop_claiming.cancelled() => {
                    self.release(std::slice::from_ref(&fire)).await;
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
            // A retry reads the timer's status afresh: disabling stops
            // retries too, except a replay's (sent whatever the status,
            // unless deleted). A failed read retries anyway (at-least-once).
            let enabled = match self.inner.statuses.status(fire.key.timer_id).await {
                Ok(Some(TimerStatus::Enabled)) => true,
                Ok(Some(TimerStatus::Deleted) | None) => false,
                Ok(Some(_)) => fire.replay,
                Err(_) => true,
            };
            if !enabled {
                self.send_result(&fire, FireStatus::Skipped, attempt - 1, "skipped: the timer is not enabled", 0, None)
                    .await;
                return;
            }
            let claimed = ClaimedFire { attempt: attempt - 1, ..fire.clone() };
            let (outcome, used) = self.attempt_with(&claimed, attempt, timer, &mut held).await;
            timer = used;
            match outcome {
                FireOutcome::RetryAt(next) => {
                    at = next;
                    attempt += 1;
                }
                _ => return,
            }
        }
    }

    /// Makes attempt number `attempt` (1-based) of a claimed fire with its
    /// timer's definition (`timer`, else the kept one, else read now);
    /// returns how it ended and the definition, for the next attempt. Its
    /// lateness is recorded; the store keeps the first attempt's.
    async fn attempt_with(
        &self,
        fire: &ClaimedFire,
        attempt: u32,
        timer: Option<Arc<CachedTimer>>,
        held: &mut Held,
    ) -> (FireOutcome, Option<Arc<CachedTimer>>) {
        let inner = &self.inner;
        let cached = match timer.or_else(|| inner.cache.get(&fire.key.timer_id)) {
            Some(cached) => cached,
            None => match inner.timers.get_timer(fire.key.timer_id).await {
                Ok(Some(timer)) => {
                    let cached = CachedTimer::new(timer, &inner.callbacks);
                    self.keep(&cached);
                    cached
                }
                _ => {
                    self.send_result(fire, FireStatus::Skipped, attempt - 1, "skipped: the timer is gone", 0, None)
                        .await;
                    return (FireOutcome::Skipped, None);
                }
            },
        };
        let outcome = self.attempt_of(fire, attempt, &cached, held).await;
        (outcome, Some(cached))
    }

    async fn attempt_of(&self, fire: &ClaimedFire, attempt: u32, cached: &CachedTimer, held: &mut Held) -> FireOutcome {
        let inner = &self.inner;
        let timer = &cached.timer;
        // Every attempt, a retry's and a replay's too: a paused app sends nothing.
        if let Some(reason) = inner.app_pauses.reason(&timer.app, fire.key.run_ms).await {
            let output = format!("app paused: {reason}");
            self.send_missed(timer, fire, FireStatus::Skipped, &output, 0).await;
            return FireOutcome::Skipped;
        }
        if attempt == 1 && timer.overlap != OverlapPolicy::Allow {
            if let Some(outcome) = self.overlap_gate(timer, fire).await {
                return outcome;
            }
        }
        let slot = match self.flow_turn(timer, fire, attempt, held).await {
            Ok(slot) => slot,
            Err(not_sent) => return self.not_sent(timer, fire, not_sent).await,
        };
        // A fire that waited for its flow may come out into a pause of its app.
        if slot.is_some() {
            if let Some(reason) = inner.app_pauses.reason(&timer.app, fire.key.run_ms).await {
                drop(slot);
                let output = format!("app paused: {reason}");
                self.send_missed(timer, fire, FireStatus::Skipped, &output, 0).await;
                return FireOutcome::Skipped;
            }
        }
        let answer = match (&timer.notify, &cached.target) {
            (Notify::Http(notify), _) if notify.template => {
                let key = fire.idempotency_key();
                let facts = FireFacts {
                    timer,
                    run_ms: fire.key.run_ms,
                    scheduled_ms: fire.scheduled_ms,
                    fire_key: &key,
                    attempt,
                };
                let target = Target::new(&template::render(notify, &facts), Some(&inner.callbacks.policy));
                self.call(&timer.app, &target, fire, attempt, held).await
            }
            (Notify::Http(_), Some(target)) => self.call(&timer.app, target, fire, attempt, held).await,
            (Notify::Http(notify), None) => {
                self.call(&timer.app, &inner.endpoints.target(notify), fire, attempt, held).await
            }
            (Notify::Asyncflow(task), _) => self.create_task_held(&timer.app, task, fire, held).await,
        };
        drop(slot);
        let (mut answer, cost) = match answer {
            Ok(sent) => sent,
            Err(not_sent) => return self.not_sent(timer, fire, not_sent).await,
        };
        // A paced fire's first send (a backfilled fire's first attempt, a
        // replay's) is counted apart: it is late by design.
        let paced = inner.paced.take(fire.task_id);
        if paced || attempt == 1 {
            inner.metrics.first_send(paced || fire.replay, cost);
        }
        // The first attempt's lateness owes the timer's onLate, with that
        // attempt's result whatever it is (a paced fire is late by design).
        let late = (attempt == 1 && !paced && !fire.replay && notify::is_late(timer, cost)).then_some(cost);
        if !answer.asked.is_empty() {
            // Before the result: a one-shot moved on must not look ended.
            self.steer(timer, &mut answer).await;
        }
        if let Delivery::Rejected { status, .. } = answer.delivery {
            if timer.retry.gives_up_on(status) {
                annotate(&mut answer.output, &format!("not retried: {status} fails at once (retry.noRetryStatuses)"));
                answer.delivery = Delivery::NotSent { permanent: true };
            }
        }
        if answer.delivery.delivered() {
            let result = self.result_of(fire, FireStatus::Succeeded, attempt, &answer.output, cost, None);
            let owed = late.and_then(|ms| notify::owed_late(timer, fire, ms, &answer.output)).into_iter().collect();
            self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
            return FireOutcome::Fired;
        }
        if answer.delivery.permanent() {
            // Every retry would fail the same way (the policy refuses the
            // target, or the task engine refuses the task as it is).
            self.warn_failed(timer, attempt, &answer.output);
            self.send_failed(timer, fire, attempt, &answer.output, cost, late).await;
            self.pause_if_failing(timer, fire).await;
            return FireOutcome::Failed;
        }
        match timer.retry.backoff_after(attempt) {
            Some(backoff) => {
                // Spread: timers that failed together do not retry together.
                let backoff = RetryPolicy::jittered(backoff, rand::random::<f64>());
                // A 429 or 503 with Retry-After waits as long as it asks.
                let asked = match answer.delivery {
                    Delivery::Rejected { retry_after_ms: Some(ms), .. } => ms,
                    _ => 0,
                };
                let at = inner.clock.now_ms() + backoff.max(asked) as i64;
                let lease = at + inner.config.lease_ms as i64;
                let result = self.result_of(fire, FireStatus::Running, attempt, &answer.output, cost, Some(lease));
                let owed = late.and_then(|ms| notify::owed_late(timer, fire, ms, &answer.output)).into_iter().collect();
                self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
                FireOutcome::RetryAt(at)
            }
            None => {
                self.warn_failed(timer, attempt, &answer.output);
                self.send_failed(timer, fire, attempt, &answer.output, cost, late).await;
                self.pause_if_failing(timer, fire).await;
                FireOutcome::Failed
            }
        }
    }

    /// What became of a fire of `timer` that did not go out.
    async fn not_sent(&self, timer: &Timer, fire: &ClaimedFire, why: NotSent) -> FireOutcome {
        match why {
            NotSent::Stopped => {
                // Stopping before it went out: give the claim back.
                self.release(std::slice::from_ref(fire)).await;
                FireOutcome::Released
            }
            NotSent::TakenOver => FireOutcome::TakenOver,
            NotSent::Missed => {
                let late = self.inner.clock.now_ms() - fire.key.run_ms;
                let output =
                    format!("missed: {late} ms late, waited for its flow past its catch-up window (misfire policy)");
                self.send_missed(timer, fire, FireStatus::Missed, &output, late).await;
                FireOutcome::Skipped
            }
        }
    }

    /// Waits for the fire's turn in its flow when the flow has limits
    /// (API 1g), holding no callback slot; returns the flow's slot to hold
    /// while the callback is open. While it waits, its claim is renewed
    /// (a third of the lease at a time, in the batches of claim checks),
    /// so no other node takes it over; a claim found taken over is not
    /// sent. A node that stops gives its waiting fires back (pending again
    /// for another node, or for itself after a restart). A first attempt past its catch-up window meanwhile is missed
    /// when its timer's misfire policy says so.
    async fn flow_turn(
        &self,
        timer: &Timer,
        fire: &ClaimedFire,
        attempt: u32,
        held: &mut Held,
    ) -> Result<Option<flows::FlowSlot>, NotSent> {
        let inner = &self.inner;
        let Notify::Http(notify) = &timer.notify else { return Ok(None) };
        if !inner.flows.any_limited(&timer.app) {
            return Ok(None);
        }
        let key = notify.flow_key();
        if !inner.flows.limited(&timer.app, &key) {
            return Ok(None);
        }
        let missed_at = if attempt == 1 && !fire.manual { self.missed_at(timer, fire) } else { None };
        let mut turn = inner.flows.join(&timer.app, &key, fire.key.run_ms, fire.task_id, missed_at);
        let renew = Duration::from_millis(inner.config.lease_ms / 3);
        loop {
            tokio::select! {
                turn = &mut turn => return match turn {
                    Ok(flows::Turn::Go(slot)) => Ok(Some(slot)),
                    Ok(flows::Turn::Missed) => Err(NotSent::Missed),
                    Err(_) => Ok(None),
                },
                // A node that stops gives its waiting fires back at once.
                _ = inner.stop_claiming.cancelled() => return Err(NotSent::Stopped),
                _ = tokio::time::sleep(renew) => {
                    let checked = self.held_now();
                    match self.confirm(fire).await {
                        Some(true) => *held = checked.renewed(),
                        Some(false) => return Err(NotSent::TakenOver),
                        None => {}
                    }
                }
            }
        }
    }

    /// When a fire waiting for its flow is past its catch-up window and its
    /// timer's misfire policy says missed: `skip` at the window's end,
    /// `fire_once` once its next scheduled time has come too, `fire_all`
    /// never.
    fn missed_at(&self, timer: &Timer, fire: &ClaimedFire) -> Option<i64> {
        let default = self.inner.misfire_threshold_ms.load(Ordering::Relaxed);
        let window_end = fire.key.run_ms + timer.timing.misfire_threshold_or(default) as i64;
        match timer.misfire {
            MisfirePolicy::FireAll => None,
            MisfirePolicy::Skip => Some(window_end),
            MisfirePolicy::FireOnce => {
                let next = timer.timing.next_at_or_after(&timer.schedule, fire.scheduled_ms + 1)?;
                Some(window_end.max(next))
            }
        }
    }

    /// Carries out what the receiver asked of `timer` in its answer's
    /// headers, noting in the answer's output what was done: a pause (on
    /// any answer), and on a one-shot's delivered answer its next run
    /// (not in the past; the service checks the app's limits).
    async fn steer(&self, timer: &Timer, answer: &mut Answer) {
        let Some(steering) = &self.inner.steering else {
            return annotate(&mut answer.output, "reply headers ignored: nothing here carries them out");
        };
        let asked = std::mem::take(&mut answer.asked);
        if let Some(value) = asked.pause {
            let reason = steering::pause_reason(&value);
            let note = match steering.pause(timer, &reason).await {
                Ok(()) => format!("paused: {reason} (X-Xtimer-Pause)"),
                Err(why) => format!("X-Xtimer-Pause not done: {why}"),
            };
            annotate(&mut answer.output, &note);
            if asked.next_run_at.is_some() {
                annotate(&mut answer.output, "X-Xtimer-Next-Run-At ignored: the timer is paused");
            }
            return;
        }
        let Some(value) = asked.next_run_at else { return };
        let now = self.inner.clock.now_ms();
        let note = match (steering::parse_next_run_at(&value), &timer.schedule) {
            _ if !answer.delivery.delivered() => "X-Xtimer-Next-Run-At ignored: the answer failed".to_owned(),
            (_, schedule) if schedule.repeats() => "X-Xtimer-Next-Run-At ignored: not a one-shot timer".to_owned(),
            (None, _) => format!("X-Xtimer-Next-Run-At ignored: `{value}` is neither RFC 3339 nor Unix ms"),
            (Some(at), _) if at <= now => {
                format!("X-Xtimer-Next-Run-At ignored: {} is in the past", xtimer_core::clock::rfc3339(at))
            }
            (Some(at), _) => match steering.run_again_at(timer, at).await {
                Ok(()) => format!("next run at {} (X-Xtimer-Next-Run-At)", xtimer_core::clock::rfc3339(at)),
                Err(why) => format!("X-Xtimer-Next-Run-At not done: {why}"),
            },
        };
        annotate(&mut answer.output, &note);
    }

    /// Logs a fire that ended failed at `warn`, at most once per
    /// [`FAILURE_LOG_EVERY_MS`] per timer, so a failing receiver is seen at
    /// the default log level without a line per fire.
    fn warn_failed(&self, timer: &Timer, attempts: u32, output: &str) {
        let logged = &self.inner.failure_logged;
        if !logged.contains(&timer.id) {
            logged.insert(timer.id, ());
            tracing::warn!(
                timer_id = timer.id,
                app = %timer.app,
                attempts,
                output,
                "A fire failed after its attempts; this timer's next failures are logged at most once a minute."
            );
        }
    }

    /// Applies the timer's overlap policy before a fire's first attempt:
    /// with fires of the timer due before it still running, `skip` records
    /// it skipped; `buffer_one` waits for the one running to end (up to
    /// half the claim lease, then fires anyway) and records it skipped when
    /// another is already waiting. `None`: go ahead (also when the count
    /// cannot be read: at-least-once).
    async fn overlap_gate(&self, timer: &Timer, fire: &ClaimedFire) -> Option<FireOutcome> {
        let inner = &self.inner;
        let give_up_at = inner.clock.now_ms() + inner.config.lease_ms as i64 / 2;
        loop {
            let running = match inner.fires.running_before(timer.id, fire.task_id, fire.key.run_ms).await {
                Ok(n) => n,
                Err(err) => {
                    tracing::warn!(timer_id = timer.id, error = %xtimer_core::error::error_chain(&err), "Reading overlapping fires failed; firing.");
                    return None;
                }
            };
            let skip = match (timer.overlap, running) {
                (_, 0) | (OverlapPolicy::Allow, _) => return None,
                (OverlapPolicy::Skip, _) => "skipped: the fire before is still running (overlap: skip)",
                (OverlapPolicy::BufferOne, 1) if inner.clock.now_ms() >= give_up_at => return None,
                (OverlapPolicy::BufferOne, 1) => {
                    tokio::select! {
                        _ = inner.hard_stop.cancelled() => {
                            self.release(std::slice::from_ref(fire)).await;
                            return Some(FireOutcome::Released);
                        }
                        _ = tokio::time::sleep(OVERLAP_POLL) => continue,
                    }
                }
                (OverlapPolicy::BufferOne, _) => {
                    "skipped: a fire is already waiting for the one running (overlap: buffer_one)"
                }
            };
            self.send_missed(timer, fire, FireStatus::Skipped, skip, 0).await;
            return Some(FireOutcome::Skipped);
        }
    }

    /// Disables the timer when this failed fire makes its
    /// `pauseAfterFailures` consecutive failures (counted since the timer
    /// was last changed or enabled), recording why.
    /// A replayed fire counts toward no streak: the timer is often
    /// disabled by the very failures it resends.
    async fn pause_if_failing(&self, timer: &Timer, fire: &ClaimedFire) {
        let Some(n) = timer.pause_after_failures.filter(|_| !fire.replay) else { return };
        let reason = format!(
            "disabled after {n} consecutive failed fires (pauseAfterFailures), the last due at {}",
            xtimer_core::clock::rfc3339(fire.key.run_ms)
        );
        let now = self.inner.clock.now_ms();
        match self.inner.timers.pause_if_failing(timer.id, fire.task_id, n, timer.modify_time, &reason, now).await {
            Ok(true) => tracing::warn!(timer_id = timer.id, app = %timer.app, %reason, "Timer disabled."),
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(timer_id = timer.id, error = %xtimer_core::error::error_chain(&err), "Checking pauseAfterFailures failed.")
            }
        }
    }

    /// A slot of the executor's whole concurrency; none once the node
    /// stops hard.
    async fn executor_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if self.inner.hard_stop.is_cancelled() {
            return None;
        }
        // A free slot is taken without waiting on the stop token (each wait
        // on it registers with the token, shared by every fire).
        if let Ok(permit) = self.inner.permits.clone().try_acquire_owned() {
            return Some(permit);
        }
        tokio::select! {
            _ = self.inner.hard_stop.cancelled() => None,
            permit = self.inner.permits.clone().acquire_owned() => Some(permit.expect("semaphore never closes")),
        }
    }

    /// Sends one HTTP callback through its host's and app's bulkheads and
    /// the executor's concurrency; returns the answer and its lateness (ms
    /// from the run time to the request leaving), or why it did not go out:
    /// the node stopped hard, or it stood still while holding the claim
    /// and another node took the fire over.
    ///
    /// Time this node stood still is never the receiver's fault: a wait
    /// for a slot, or a request whose answer did not come, across a stall
    /// is made again (the claim checked first) and not counted against the
    /// host's circuit breaker.
    async fn call(
        &self,
        app: &str,
        target: &Target,
        fire: &ClaimedFire,
        attempt: u32,
        held: &mut Held,
    ) -> Result<(Answer, i64), NotSent> {
        let inner = &self.inner;
        let key = fire.key;
        let timeout = target.timeout().unwrap_or(Duration::from_millis(inner.config.timeout_ms));
        let mut stalls = 0;
        loop {
            if inner.hard_stop.is_cancelled() {
                return Err(NotSent::Stopped);
            }
            // Checked before the slots are taken too: a check waiting for an
            // unreachable database holds no host's or app's slot.
            self.still_ours(fire, held).await?;
            let entering = inner.pause.mark();
            // Biased: entering is tried first, so a fire whose slots are free
            // never waits on the stop token (each wait registers with it).
            let entered = tokio::select! {
                biased;
                entered = inner.bulkheads.enter(app, target.host(), timeout) => entered,
                _ = inner.hard_stop.cancelled() => return Err(NotSent::Stopped),
            };
            let pass = match entered {
                Ok(pass) => pass,
                Err(_) if stalls < STALL_RESENDS && inner.pause.crossed(entering) => {
                    stalls += 1;
                    continue;
                }
                Err(refusal) => {
                    let output = callback::truncate(format!("not sent: {refusal}"), inner.config.max_output_bytes);
                    let answer = Answer::new(Delivery::NotSent { permanent: false }, output);
                    return Ok((answer, inner.clock.now_ms() - key.run_ms));
                }
            };
            let _permit = self.executor_permit().await.ok_or(NotSent::Stopped)?;
            let secret = inner.callbacks.secrets.secret_for(app).await;
            // Again at the last moment (no database round trip unless the
            // node stood still, its heartbeats failed, or the claim's lease
            // could have lapsed by the monotonic clock).
            self.still_ours(fire, held).await?;
            let sending = self.held_now();
            let signing = callback::Signing { secret: secret.as_bytes(), t: sending.at_ms.div_euclid(1000) };
            let idempotency_key = fire.idempotency_key();
            let span = inner.traces.as_ref().map(|traces| {
                let facts =
                    traces::AttemptFacts { key, scheduled_ms: fire.scheduled_ms, app, attempt, host: target.host() };
                traces.start(facts)
            });
            let id = callback::FireId {
                key,
                scheduled_ms: fire.scheduled_ms,
                idempotency_key: &idempotency_key,
                replay: fire.replay,
                attempt,
                traceparent: span.as_ref().map(traces::AttemptSpan::traceparent),
            };
            let answer =
                callback::call_checked(&inner.http, target, id, inner.config.max_output_bytes, Some(signing)).await;
            if let Some(span) = span {
                span.end(&answer, sending.at_ms - key.run_ms);
            }
            let answered = !matches!(answer.delivery, Delivery::Unanswered);
            if !answered && stalls < STALL_RESENDS && inner.pause.crossed(sending.mark) {
                // Cut short by this node's own stall: sent again once the
                // claim is checked (the receiver may have it: it was in flight).
                tracing::info!(
                    task_id = fire.task_id,
                    "A callback was cut short by a stall of this node; sending it again."
                );
                drop(pass);
                stalls += 1;
                *held = Held { at_ms: sending.at_ms, ..*held };
                continue;
            }
            pass.report(&inner.bulkheads, answered);
            return Ok((answer, sending.at_ms - key.run_ms));
        }
    }

    /// Whether this node may send `fire`: yes at once unless it may have
    /// stood still since it took the claim (`held`): a stall of the
    /// process, or a gap in its heartbeats. Then the claim is checked in
    /// the database (in a batch with the other checks of the moment, which
    /// also writes this node's heartbeat and extends the lease, so no other
    /// node can take it from here): still its own, go on; taken over, not
    /// sent. A check that fails is tried again until it answers: the
    /// fire is not sent meanwhile, and if the claim lapses another node
    /// sends it.
    async fn still_ours(&self, fire: &ClaimedFire, held: &mut Held) -> Result<(), NotSent> {
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        let gap = inner.liveness.steady_since(now).is_none_or(|since| since > held.at_ms) || inner.liveness.stale();
        if !gap && !inner.pause.crossed(held.mark) && !self.lease_may_have_lapsed(fire, held) {
            return Ok(());
        }
        let checked = self.held_now();
        let mut backoff = CONFIRM_BACKOFF_MS;
        loop {
            match self.confirm(fire).await {
                Some(true) => {
                    *held = checked.renewed();
                    return Ok(());
                }
                Some(false) => {
                    tracing::info!(
                        task_id = fire.task_id,
                        timer_id = fire.key.timer_id,
                        run_ms = fire.key.run_ms,
                        "Not sent: another node took this fire over while this one stood still."
                    );
                    return Err(NotSent::TakenOver);
                }
                None => {
                    let wait = rand::random_range(backoff / 2..=backoff);
                    tokio::select! {
                        _ = inner.hard_stop.cancelled() => return Err(NotSent::Stopped),
                        _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                    }
                    backoff = (backoff * 2).min(CONFIRM_BACKOFF_MAX_MS);
                }
            }
        }
    }

    /// Whether the claim's lease could have lapsed by now, by this node's
    /// monotonic clock (which a stop of the process does not stop),
    /// less a margin for other nodes' clocks: measured from when the claim
    /// was taken (its lease runs from the later of the run time and then)
    /// or last renewed by a check.
    fn lease_may_have_lapsed(&self, fire: &ClaimedFire, held: &Held) -> bool {
        let lease = self.inner.config.lease_ms as i64;
        let head_start = if held.renewed { 0 } else { (fire.key.run_ms - held.at_ms).max(0) };
        let valid_for = head_start + lease - lease_margin_ms(lease);
        held.at.elapsed().as_millis() as i64 >= valid_for
    }

    /// Checks one claim in the database, in a batch with the checks asked
    /// within [`CONFIRM_LINGER`]: the first asker waits the linger, then
    /// checks them all. `None` when the check failed.
    async fn confirm(&self, fire: &ClaimedFire) -> Option<bool> {
        let inner = &self.inner;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let leader = {
            let mut waiting = inner.confirming.lock().expect("confirm lock");
            waiting.push((fire.clone(), tx));
            waiting.len() == 1
        };
        if leader {
            tokio::time::sleep(CONFIRM_LINGER).await;
            let batch = std::mem::take(&mut *inner.confirming.lock().expect("confirm lock"));
            let claims: Vec<ClaimedFire> = batch.iter().map(|(c, _)| c.clone()).collect();
            let lease_ms = inner.config.lease_ms as i64;
            let check = inner.fires.confirm_claims(&inner.node_id, &claims, lease_ms, inner.clock.now_ms());
            // A silent cut would hold the check (and these fires) until TCP gives up.
            match tokio::time::timeout(CONFIRM_TIMEOUT, check).await {
                Ok(Ok(held)) => {
                    let held: std::collections::HashSet<i64> = held.into_iter().collect();
                    for (claim, answer) in batch {
                        let _ = answer.send(held.contains(&claim.task_id));
                    }
                }
                Ok(Err(err)) => tracing::warn!(
                    claims = claims.len(),
                    "Checking claims held across a stall failed: {}; retrying.",
                    error_chain(&err)
                ),
                Err(_) => tracing::warn!(
                    claims = claims.len(),
                    timeout_ms = CONFIRM_TIMEOUT.as_millis() as u64,
                    "Checking claims held across a stall timed out; retrying."
                ),
            }
        }
        rx.await.ok()
    }

    /// [`ExecutorHandle::create_task`] in a slot of the executor, the claim
    /// checked as a callback's is (before the slot and at the last moment).
    async fn create_task_held(
        &self,
        app: &str,
        task: &AsyncflowNotify,
        fire: &ClaimedFire,
        held: &mut Held,
    ) -> Result<(Answer, i64), NotSent> {
        self.still_ours(fire, held).await?;
        let _permit = self.executor_permit().await.ok_or(NotSent::Stopped)?;
        self.still_ours(fire, held).await?;
        Ok(self.create_task(app, task, fire.key).await)
    }

    /// The fire of a timer that creates a task: success is the task
    /// created; a task the engine refuses as it is (an unknown type, another
    /// app's type, invalid input) fails the fire at once, a storage failure
    /// is retried.
    async fn create_task(&self, app: &str, task: &AsyncflowNotify, key: FireKey) -> (Answer, i64) {
        let cost = self.inner.clock.now_ms() - key.run_ms;
        let created = match &self.inner.tasks {
            Some(tasks) => tasks.create_task(app, task, key).await,
            None => Err(CreateTaskError::NoEngine),
        };
        let answer = match created {
            Ok(task_id) => Answer::new(Delivery::Delivered, format!("created task {task_id}")),
            Err(err) => Answer::new(
                Delivery::NotSent { permanent: err.is_permanent() },
                callback::truncate(
                    format!("creating the task failed: {}", error_chain(&err)),
                    self.inner.config.max_output_bytes,
                ),
            ),
        };
        (answer, cost)
    }

    /// Hands the result of one attempt to the recorder.
    async fn send_result(
        &self,
        fire: &ClaimedFire,
        status: FireStatus,
        attempt: u32,
        output: &str,
        cost_time: i64,
        lease_until: Option<i64>,
    ) {
        let result = self.result_of(fire, status, attempt, output, cost_time, lease_until);
        self.record(recorder::Pending { result, owed: Vec::new(), may_end: self.may_end(fire) });
    }

    /// Hands the missed or skipped result of `fire` (no attempt made) to
    /// the recorder, with the `onMissed` notification it owes if `timer`
    /// has one, written in one transaction as [`Self::send_failed`] does.
    async fn send_missed(&self, timer: &Timer, fire: &ClaimedFire, status: FireStatus, output: &str, cost_time: i64) {
        let result = self.result_of(fire, status, fire.attempt, output, cost_time, None);
        let owed = notify::owed_missed(timer, fire, status, fire.attempt, output).into_iter().collect();
        self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
    }

    /// Hands the failed result of `fire`'s last attempt to the recorder,
    /// with the `onFailure` notification it owes if the timer has one (and
    /// its `onLate`, when this first attempt left `late` ms late): both
    /// are written in one transaction, then the notification is sent (see
    /// [`notify`]), so a crash in between loses neither.
    async fn send_failed(
        &self,
        timer: &Timer,
        fire: &ClaimedFire,
        attempt: u32,
        output: &str,
        cost_time: i64,
        late: Option<i64>,
    ) {
        let result = self.result_of(fire, FireStatus::Failed, attempt, output, cost_time, None);
        let mut owed: Vec<_> = notify::owed_failure(timer, fire, attempt, output).into_iter().collect();
        owed.extend(late.and_then(|ms| notify::owed_late(timer, fire, ms, output)));
        self.record(recorder::Pending { result, owed, may_end: self.may_end(fire) });
    }

    /// `fire`'s timer, unless it is known to go on after this fire (a cron
    /// or interval timer kept here with no end): the finisher then need not
    /// look at it.
    fn may_end(&self, fire: &ClaimedFire) -> Option<i64> {
        let goes_on = self
            .inner
            .cache
            .get(&fire.key.timer_id)
            .is_some_and(|cached| cached.timer.schedule.repeats() && cached.timer.timing.end_ms().is_none());
        (!goes_on).then_some(fire.key.timer_id)
    }

    fn result_of(
        &self,
        fire: &ClaimedFire,
        status: FireStatus,
        attempt: u32,
        output: &str,
        cost_time: i64,
        lease_until: Option<i64>,
    ) -> FireResult {
        self.inner.metrics.fires_ended(status, 1);
        FireResult {
            task_id: fire.task_id,
            run_ms: fire.key.run_ms,
            owner: fire.owner.clone(),
            status,
            attempt,
            output: output.to_string(),
            cost_time,
            lease_until,
        }
    }

    fn record(&self, pending: recorder::Pending) {
        let task_id = pending.result.task_id;
        if !self.inner.results.send(pending) {
            tracing::error!(task_id, "Recorder is gone; the result is lost and the lease will expire.");
        }
    }

    async fn release(&self, fires: &[ClaimedFire]) {
        if let Err(err) = self.inner.fires.release(fires, self.inner.clock.now_ms()).await {
            tracing::warn!(fires = fires.len(), error = %xtimer_core::error::error_chain(&err), "Releasing claims failed; their leases will expire.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::annotate;

    #[test]
    fn a_note_goes_after_the_status_and_before_the_body() {
        let mut output = "HTTP 200: {\"ok\":true}".to_owned();
        annotate(&mut output, "paused: quota (X-Xtimer-Pause)");
        assert_eq!(output, "HTTP 200; paused: quota (X-Xtimer-Pause): {\"ok\":true}");
        let mut bare = "HTTP 401".to_owned();
        annotate(&mut bare, "not retried");
        assert_eq!(bare, "HTTP 401; not retried");
    }
}
