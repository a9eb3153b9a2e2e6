//! [`Worker`]: the loop that holds tasks, runs their handlers and reports.
//!
//! # How it runs
//!
//! - The cfg list is loaded at start and every
//!   [`cfg_reload`](WorkerConfig::cfg_reload) (20 s): a type's
//!   schedule_interval paces its polls, schedule_limit sizes its holds,
//!   max_retry_interval caps its retry back-off.
//! - Each registered type has its own poller: hold once at start, then
//!   every schedule_interval ±500 ms of jitter. A type the server has no
//!   cfg for is not polled (hold_tasks would answer 8039).
//! - A poll first reserves room in the [`Backlog`]; with none left it is
//!   skipped, so a slow handler cannot make the worker hoard tasks that
//!   other workers could run.
//! - Every held task gets its own tokio task, which waits for one of
//!   [`concurrency`](WorkerConfig::concurrency) permits, runs the handler
//!   in a task of its own (so a panic is caught as a retryable error and
//!   the loop lives on), and reports with set_task.
//! - Shutdown: pollers stop at once; tasks still waiting for a permit are
//!   handed back (pending, same order_time); running handlers get
//!   [`shutdown_grace`](WorkerConfig::shutdown_grace) to finish and report.
//!   Past it they are abandoned, and the server's governance takes their
//!   tasks back after max_processing_time.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{broadcast, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use xtimer_asyncflow::wire::{TaskData, TaskScheduleCfg};

use crate::backlog::Backlog;
use crate::client::Client;
use crate::config::WorkerConfig;
use crate::error::Result;
use crate::handler::{Handler, Outcome, Task};
use crate::report::{hand_back, report, Attempt};

/// Something the worker did, for progress displays and tests (see
/// [`Worker::subscribe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The cfg list was (re)loaded with this many types.
    CfgLoaded {
        /// Types the server knows.
        types: usize,
    },
    /// A poll held tasks.
    Held {
        /// The type polled.
        task_type: String,
        /// Tasks returned (0 when none were due).
        count: usize,
    },
    /// A poll was skipped.
    PollSkipped {
        /// The type not polled.
        task_type: String,
        /// Why.
        reason: SkipReason,
    },
    /// A handler returned (or panicked) and its outcome was reported.
    Reported {
        /// What set_task sent (boxed: it dwarfs the other events).
        task: Box<TaskData>,
        /// What the handler returned.
        outcome: Outcome,
    },
    /// A report could not be delivered; the governance will recover the task.
    ReportFailed {
        /// The task.
        task_id: String,
        /// The last error.
        error: String,
    },
    /// A task held but not started was given back at shutdown.
    HandedBack {
        /// The task.
        task_id: String,
    },
    /// A handler still running when the shutdown grace ran out was dropped.
    Abandoned {
        /// The task.
        task_id: String,
    },
}

/// Why a poll was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The backlog is at its cap.
    BacklogFull,
    /// The server has no cfg for the type (not registered, or the cfg list
    /// has not loaded yet).
    NoCfg,
}

/// An asyncflow worker: handlers per task type, a [`Client`], a pace.
///
/// ```no_run
/// # async fn demo() -> xtimer_worker::Result<()> {
/// use xtimer_worker::{Client, Outcome, Task, Worker, WorkerConfig};
/// let client = Client::new("http://127.0.0.1:8080")?;
/// let worker = Worker::new(client, WorkerConfig::default())
///     .with_handler("email", |task: Task| async move {
///         match task.stage() {
///             "" | "render" => Outcome::next("send", &"rendered body"),
///             _ => Outcome::done(),
///         }
///     });
/// worker.run(tokio_util::sync::CancellationToken::new()).await
/// # }
/// ```
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    config: WorkerConfig,
    handlers: HashMap<String, Arc<dyn Handler>>,
    cfgs: RwLock<HashMap<String, TaskScheduleCfg>>,
    backlog: Backlog,
    permits: Arc<Semaphore>,
    events: broadcast::Sender<Event>,
    tracker: TaskTracker,
    /// Cancelled at shutdown: stop polling, hand back unstarted tasks.
    stop: CancellationToken,
    /// Cancelled when the shutdown grace runs out: abandon handlers.
    abandon: CancellationToken,
}

impl Worker {
    /// A worker with no handlers yet.
    pub fn new(client: Client, config: WorkerConfig) -> Self {
        let (events, _) = broadcast::channel(1024);
        let inner = Inner {
            client,
            backlog: Backlog::new(config.backlog_cap),
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            config,
            handlers: HashMap::new(),
            cfgs: RwLock::new(HashMap::new()),
            events,
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
            abandon: CancellationToken::new(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Runs `handler` for tasks of `task_type` (replacing an earlier one).
    pub fn with_handler(mut self, task_type: impl Into<String>, handler: impl Handler) -> Self {
        self.inner_mut().handlers.insert(task_type.into(), Arc::new(handler));
        self
    }

    /// Like [`with_handler`](Self::with_handler) for an already shared handler.
    pub fn with_shared_handler(mut self, task_type: impl Into<String>, handler: Arc<dyn Handler>) -> Self {
        self.inner_mut().handlers.insert(task_type.into(), handler);
        self
    }

    fn inner_mut(&mut self) -> &mut Inner {
        // `inner` is shared only by `run` and the tasks it spawns, and `run`
        // consumes the worker, so while handlers are being added it is unique.
        Arc::get_mut(&mut self.inner).expect("handlers are added before the worker runs")
    }

    /// The task types this worker has handlers for.
    pub fn task_types(&self) -> Vec<String> {
        let mut types: Vec<_> = self.inner.handlers.keys().cloned().collect();
        types.sort();
        types
    }

    /// The client the worker talks through.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// A receiver of the worker's [`Event`]s from now on. Slow receivers
    /// lose the oldest events rather than slowing the worker.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.events.subscribe()
    }

    /// Tasks held and not yet reported.
    pub fn backlog(&self) -> usize {
        self.inner.backlog.len()
    }

    /// Loads the cfg list now; returns how many types it has.
    pub async fn reload_cfg(&self) -> Result<usize> {
        self.inner.reload_cfg().await
    }

    /// One poll of `task_type`, as the loop does it: reserve backlog room,
    /// hold, run every held task and wait for their reports. Returns the
    /// set_task bodies sent. For tests and one-shot tools; [`run`](Self::run)
    /// does this on its own schedule without waiting.
    pub async fn run_once(&self, task_type: &str) -> Result<Vec<TaskData>> {
        let held = self.inner.hold(task_type).await?;
        let mut set = tokio::task::JoinSet::new();
        for task in held {
            set.spawn(self.inner.clone().process(task));
        }
        let mut reports = Vec::new();
        while let Some(done) = set.join_next().await {
            if let Ok(Some(report)) = done {
                reports.push(report);
            }
        }
        Ok(reports)
    }

    /// Runs until `shutdown` is cancelled, then winds down (see the module
    /// docs): stops polling, hands back unstarted tasks, waits up to
    /// `shutdown_grace` for running handlers.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let inner = self.inner;
        let types: Vec<String> = inner.handlers.keys().cloned().collect();
        tracing::info!(types = ?types, server = inner.client.base(), "Worker started.");
        let loaded = match inner.reload_cfg().await {
            Ok(_) => true,
            Err(err) => {
                tracing::warn!(error = %err, "Loading the cfg list failed; retrying.");
                false
            }
        };
        let mut loops = tokio::task::JoinSet::new();
        loops.spawn(inner.clone().reload_loop(loaded));
        for task_type in types {
            loops.spawn(inner.clone().poll_loop(task_type));
        }

        shutdown.cancelled().await;
        tracing::info!(backlog = inner.backlog.len(), "Worker stopping: no more polls.");
        inner.stop.cancel();
        while loops.join_next().await.is_some() {}

        inner.tracker.close();
        if tokio::time::timeout(inner.config.shutdown_grace, inner.tracker.wait()).await.is_err() {
            tracing::warn!(running = inner.tracker.len(), "Shutdown grace ran out; abandoning running handlers.");
            inner.abandon.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(2), inner.tracker.wait()).await;
        }
        tracing::info!("Worker stopped.");
        Ok(())
    }
}

impl Inner {
    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    fn cfg(&self, task_type: &str) -> Option<TaskScheduleCfg> {
        self.cfgs.read().unwrap_or_else(|e| e.into_inner()).get(task_type).cloned()
    }

    async fn reload_cfg(&self) -> Result<usize> {
        let list = self.client.get_task_schedule_cfg_list().await?;
        let map: HashMap<_, _> = list.into_iter().map(|c| (c.task_type.clone(), c)).collect();
        let types = map.len();
        *self.cfgs.write().unwrap_or_else(|e| e.into_inner()) = map;
        self.emit(Event::CfgLoaded { types });
        Ok(types)
    }

    /// Reloads every `cfg_reload`, or every second while loads fail (a
    /// worker started before its server should not wait 20 s to begin).
    async fn reload_loop(self: Arc<Self>, loaded: bool) {
        let retry = self.config.cfg_reload.min(Duration::from_secs(1));
        let mut wait = if loaded { self.config.cfg_reload } else { retry };
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = match self.reload_cfg().await {
                Ok(_) => self.config.cfg_reload,
                Err(err) => {
                    tracing::warn!(error = %err, "Reloading the cfg list failed.");
                    retry
                }
            };
        }
    }

    async fn poll_loop(self: Arc<Self>, task_type: String) {
        loop {
            if let Err(err) = self.clone().poll(&task_type).await {
                tracing::warn!(task_type = %task_type, error = %err, "Poll failed.");
            }
            let wait = self.config.next_poll_interval(self.cfg(&task_type).as_ref());
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Holds and hands each task to its own tracked tokio task.
    async fn poll(self: Arc<Self>, task_type: &str) -> Result<usize> {
        let held = self.hold(task_type).await?;
        let count = held.len();
        for task in held {
            self.tracker.spawn(self.clone().process(task));
        }
        Ok(count)
    }

    /// Reserves backlog room and holds; every returned task owns one slot.
    async fn hold(&self, task_type: &str) -> Result<Vec<TaskData>> {
        let Some(cfg) = self.cfg(task_type) else {
            self.emit(Event::PollSkipped { task_type: task_type.into(), reason: SkipReason::NoCfg });
            return Ok(Vec::new());
        };
        let reserved = self.backlog.reserve(self.config.hold_want(&cfg));
        if reserved == 0 {
            tracing::debug!(task_type, backlog = self.backlog.len(), "Backlog full; poll skipped.");
            self.emit(Event::PollSkipped { task_type: task_type.into(), reason: SkipReason::BacklogFull });
            return Ok(Vec::new());
        }
        let held = match self.client.hold_tasks(task_type, reserved as i64).await {
            Ok(held) => held,
            Err(err) => {
                self.backlog.release(reserved);
                return Err(err);
            }
        };
        // A server may return more than asked (one that ignores the query
        // string's limit); those tasks count against the backlog too.
        if held.len() >= reserved {
            self.backlog.add(held.len() - reserved);
        } else {
            self.backlog.release(reserved - held.len());
        }
        tracing::debug!(task_type, count = held.len(), "Held tasks.");
        self.emit(Event::Held { task_type: task_type.into(), count: held.len() });
        Ok(held)
    }

    /// Runs one held task to its report. Returns the report sent, or None
    /// when the task was handed back, abandoned or could not be reported.
    async fn process(self: Arc<Self>, held: TaskData) -> Option<TaskData> {
        let result = self.process_inner(held).await;
        self.backlog.release(1);
        result
    }

    async fn process_inner(&self, held: TaskData) -> Option<TaskData> {
        let task_id = held.task_id.clone();
        // Waiting for a permit is cancel-safe; a task still waiting at
        // shutdown has not started, so it goes back untouched.
        let permit = tokio::select! {
            biased;
            _ = self.stop.cancelled() => None,
            permit = self.permits.clone().acquire_owned() => permit.ok(),
        };
        let Some(permit) = permit else {
            match self.client.set_task(&hand_back(&held)).await {
                Ok(()) => self.emit(Event::HandedBack { task_id }),
                Err(err) => tracing::warn!(task_id = %task_id, error = %err, "Handing back a task failed."),
            }
            return None;
        };

        let Some(handler) = self.handlers.get(&held.task_type).cloned() else {
            // hold_tasks returned another type than asked: leave it to the governance.
            tracing::warn!(task_id = %task_id, task_type = %held.task_type, "No handler for a held task.");
            return None;
        };
        let trace_id = format!("{:016x}", rand::random::<u64>());
        let start_ms = now_ms();
        tracing::debug!(task_id = %task_id, stage = %held.task_stage, trace_id = %trace_id, "Stage started.");
        // The handler runs in a task of its own: a panic there ends that task
        // only, and comes back here as a JoinError.
        let task = Task::new(held.clone());
        let mut running = tokio::spawn(async move { handler.handle(task).await });
        let outcome = tokio::select! {
            joined = &mut running => match joined {
                Ok(outcome) => outcome,
                Err(err) if err.is_panic() => Outcome::Retry(format!("handler panicked: {}", panic_text(err.into_panic()))),
                Err(err) => Outcome::Retry(format!("handler cancelled: {err}")),
            },
            _ = self.abandon.cancelled() => {
                running.abort();
                tracing::warn!(task_id = %task_id, "Handler abandoned at shutdown.");
                self.emit(Event::Abandoned { task_id });
                return None;
            }
        };
        drop(permit);
        let end_ms = now_ms();
        let cfg_max = self.cfg(&held.task_type).map_or(0, |c| c.max_retry_interval);
        let attempt = Attempt { trace_id, start_ms, end_ms };
        let body = report(&held, &outcome, cfg_max, end_ms.div_euclid(1000), &attempt);
        if let Some(err) = outcome.error() {
            tracing::info!(task_id = %task_id, stage = %held.task_stage, status = body.status, crt_retry_num = body.crt_retry_num, error = %err, "Stage failed.");
        } else {
            tracing::debug!(task_id = %task_id, stage = %held.task_stage, status = body.status, "Stage done.");
        }
        match self.send_report(&body).await {
            Ok(()) => {
                self.emit(Event::Reported { task: Box::new(body.clone()), outcome });
                Some(body)
            }
            Err(err) => {
                tracing::warn!(task_id = %task_id, error = %err, "Reporting a task failed; the server will take it back.");
                self.emit(Event::ReportFailed { task_id, error: err.to_string() });
                None
            }
        }
    }

    /// set_task, retried a few times on transport errors. A reply with a
    /// code is final: the server saw the report and said no.
    async fn send_report(&self, body: &TaskData) -> Result<()> {
        let mut delay = Duration::from_millis(200);
        let mut tries = 1;
        loop {
            let err = match self.client.set_task(body).await {
                Ok(()) => return Ok(()),
                Err(err) if err.code().is_some() || tries >= self.config.report_attempts => return Err(err),
                Err(err) => err,
            };
            tracing::debug!(task_id = %body.task_id, error = %err, "set_task failed; retrying.");
            tries += 1;
            tokio::select! {
                _ = self.abandon.cancelled() => return Err(err),
                _ = tokio::time::sleep(delay) => {}
            }
            delay *= 2;
        }
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

/// Now, Unix milliseconds.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
