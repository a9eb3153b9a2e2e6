//! One xtimer node: every part wired together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::sync::{broadcast, mpsc};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use xtimer_asyncflow::{Governor, Tasks};
use xtimer_core::clock::OffsetClock;
use xtimer_core::config::Config;
use xtimer_core::node::{Liveness, NodeContext, NodeInfo};
use xtimer_core::pause::PauseDetector;
use xtimer_core::{SharedClock, SystemClock};
use xtimer_executor::flows::FlowLimitsWatch;
use xtimer_executor::notify::NOTIFY_SWEEP_PERIOD;
use xtimer_executor::traces::FireTraces;
use xtimer_executor::{Callbacks, Executor, ExecutorHandle, NotifySweeper, Reconciler, Wiring};
use xtimer_migrator::{Expander, Finisher, Migrator, Retention, StatsRollup};
use xtimer_scheduler::Scheduler;
use xtimer_service::{Nodes, Parts, PolicyTargets, ServiceConfig, TimerService, Tokens};
use xtimer_store::{ShardLeases, Stores};
use xtimer_trigger::{Trigger, TriggerChannels};
use xtimer_webserver::security::Security;
use xtimer_webserver::{router, ApiParts, AppState};

use crate::heartbeat::{sync_clock, Heartbeat};
use crate::telemetry::Telemetry;
use crate::timer_tasks::TimerTasks;

/// How often SQLite's WAL is copied into the database file. A page written
/// many times between two checkpoints is copied once: at 250 ms the copies
/// cost ~6% of the node's CPU at 2,000 fires a second.
const CHECKPOINT_PERIOD: Duration = Duration::from_millis(1_000);

/// A running node.
pub struct Node {
    /// Where the HTTP API listens.
    pub addr: SocketAddr,
    /// This node's id (host, pid and a random suffix).
    pub node_id: String,
    /// The stores, for tests and tools that look inside.
    pub stores: Stores,
    /// The migrator, for tools that run a step on demand.
    pub migrator: Migrator,
    /// The expander, for tests and tools that expand one timer on demand.
    pub expander: Expander,
    /// The asyncflow task engine.
    pub tasks: Tasks,
    stop_claiming: CancellationToken,
    hard_stop: CancellationToken,
    loops: JoinSet<(&'static str, anyhow::Result<()>)>,
    executor: ExecutorHandle,
    recorder: JoinHandle<()>,
    task_writer: JoinHandle<()>,
    task_writer_stop: CancellationToken,
    grace: Duration,
    telemetry: Telemetry,
}

/// A fresh node id: `{host}-{pid}-{random}`.
pub fn new_node_id() -> String {
    format!("{}-{}-{:04x}", hostname(), std::process::id(), rand_suffix())
}

fn hostname() -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    if host.is_empty() {
        "node".to_string()
    } else {
        host
    }
}

fn rand_suffix() -> u16 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    (nanos ^ (nanos >> 16)) as u16
}

/// The node's background loops, each named, all stopped by one token.
struct Loops {
    set: JoinSet<(&'static str, anyhow::Result<()>)>,
    stop: CancellationToken,
}

impl Loops {
    /// Spawns the loop `run(stop)` under `name`.
    fn spawn<F, E>(&mut self, name: &'static str, run: impl FnOnce(CancellationToken) -> F)
    where
        F: std::future::Future<Output = Result<(), E>> + Send + 'static,
        E: Into<anyhow::Error>,
    {
        let fut = run(self.stop.clone());
        self.set.spawn(async move { (name, fut.await.map_err(Into::into)) });
    }
}

impl Node {
    /// Connects the stores, binds the listener and starts every loop.
    pub async fn start(config: Config) -> anyhow::Result<Self> {
        // Set to the database's clock (at the first heartbeat, before anything
        // is claimed), so every node judges heartbeats and leases alike.
        let db_clock = Arc::new(OffsetClock::new(Arc::new(SystemClock)));
        let clock: SharedClock = db_clock.clone();
        let node_id = new_node_id();
        let telemetry = Telemetry::start(&config.telemetry, &node_id)?;
        let stores = Stores::connect(&config.database, &config.redis, &config.shard, clock.clone()).await?;
        sync_clock(stores.nodes.as_ref(), &db_clock).await?;
        let prefix = config.shard.key_prefix.clone();

        let hard_stop = CancellationToken::new();
        // A hard stop implies a soft one.
        let stop_claiming = hard_stop.child_token();
        let (won_tx, won_rx) = mpsc::channel(1024);
        let (due_tx, due_rx) = mpsc::channel(4096);
        let (feed_tx, feed_rx) = broadcast::channel(1024);

        // Heartbeats come every third of the node timeout; a gap of half of
        // it means this node was not beating steadily. Where nodes share the
        // shards (Redis), one whose heartbeats have not reached the database
        // for the node timeout (the others judge it dead then) gives its
        // shards up to them.
        let node_timeout = config.reconciler.node_timeout_ms as i64;
        let liveness = Liveness::new(node_timeout / 2);
        let liveness =
            Arc::new(if config.redis.url.is_empty() { liveness } else { liveness.stepping_back_after(node_timeout) });
        let ctx = NodeContext::new(clock.clone(), node_id.clone(), prefix.clone()).with_liveness(liveness.clone());
        let migrator = Migrator::new(config.migrator.clone(), &stores, &ctx, Some(feed_tx));
        let expander = migrator.expander();
        let leases =
            ShardLeases::new(stores.locks.clone(), &ctx, config.scheduler.lease_ms, config.scheduler.done_ttl_ms);
        let scheduler = Scheduler::new(config.scheduler.clone(), config.shard.buckets, leases.clone(), &ctx, won_tx);
        let trigger = Trigger::new(
            config.trigger.clone(),
            leases,
            stores.shards.clone(),
            &ctx,
            TriggerChannels { won: won_rx, feed: feed_rx, due: due_tx },
        );
        let (tasks, task_writer) = Tasks::new(stores.tasks.clone(), clock.clone(), &config.asyncflow);
        let governor = Governor::new(config.asyncflow.clone(), &stores, &ctx);
        let callbacks = Callbacks::load(&config.callback, &config.auth, stores.auth.clone(), &clock).await?;
        let tokens = Tokens::new(stores.auth.clone(), clock.clone());
        let security = Security::new(&config.auth, &config.limits, Some(tokens), clock.clone())?;
        let parts = Parts {
            timers: stores.timers.clone(),
            fires: stores.fires.clone(),
            calendars: stores.calendars.clone(),
            apps: stores.apps.clone(),
            flows: stores.flows.clone(),
            flow_tokens: stores.flow_tokens.clone(),
            expander: expander.clone(),
            targets: Arc::new(PolicyTargets::new(&config.callback, Some(tasks.clone()))?),
        };
        let service = TimerService::new(&ctx, parts, ServiceConfig::from_config(&config));
        let wiring = Wiring {
            due: due_rx,
            callbacks,
            tasks: Some(Arc::new(TimerTasks(tasks.clone()))),
            steering: Some(Arc::new(service.clone())),
            stop_claiming: stop_claiming.clone(),
            hard_stop: hard_stop.clone(),
            traces: telemetry.tracer().map(FireTraces::new),
        };
        let (executor, recorder) = Executor::new(config.executor.clone(), &stores, &ctx, wiring)?;
        let handle = executor.handle();
        handle.set_misfire_threshold(config.reconciler.misfire_threshold_ms);
        let reconciler = Reconciler::new(
            config.reconciler.clone(),
            config.executor.lease_ms,
            &stores,
            &ctx,
            handle.clone(),
            liveness.clone(),
        );

        let listener = tokio::net::TcpListener::bind(&config.server.listen)
            .await
            .map_err(|e| anyhow::anyhow!("{}", listen_failure(&config.server.listen, &e)))?;
        let addr = listener.local_addr()?;
        // Replies go out at once instead of waiting on Nagle's algorithm for the client's ACK.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let trigger_handle = trigger.handle();
        let parts = ApiParts {
            nodes: Some(Nodes::new(stores.nodes.clone(), clock.clone())),
            tasks: Some(tasks.clone()),
            shards_held: Some(Arc::new(move || trigger_handle.held().len())),
            readiness: Some(readiness(liveness.clone(), node_timeout)),
            tracer: telemetry.tracer(),
            ..ApiParts::new(service, security)
        };
        let app = router(AppState::new(parts, config.server.clone()));
        if !config.auth.enabled && !addr.ip().is_loopback() {
            tracing::warn!(
                %addr,
                "Auth is off and the API listens beyond loopback: anyone who reaches it can act on every app. \
                 Set auth.enabled = true (and tokens) or listen on 127.0.0.1."
            );
        }
        let mut heartbeat = Heartbeat {
            nodes: stores.nodes.clone(),
            info: NodeInfo {
                id: node_id.clone(),
                host: hostname(),
                listen: addr.to_string(),
                started_at: clock.now_ms(),
                heartbeat_at: clock.now_ms(),
                shards: Vec::new(),
            },
            trigger: trigger.handle(),
            clock: clock.clone(),
            node_timeout: Duration::from_millis(config.reconciler.node_timeout_ms),
            liveness,
            db_clock,
        };
        // Reported before anything is claimed: a node with no row yet would
        // keep its claims for their whole lease if it died now.
        heartbeat.run_once().await?;

        let recorder = tokio::spawn(recorder.run());
        // Task creates are written until the HTTP server has stopped, then drained.
        let task_writer_stop = CancellationToken::new();
        let task_writer = tokio::spawn({
            let stop = task_writer_stop.clone();
            async move {
                if let Err(err) = task_writer.run(stop).await {
                    tracing::error!(error = %xtimer_core::error::error_chain(&err), "The task writer failed.");
                }
            }
        });
        let mut loops = Loops { set: JoinSet::new(), stop: stop_claiming.clone() };
        // Handlers get the peer address (the rate limit keys anonymous callers
        // by it); slow and silent clients are bounded by the `server.*` limits.
        let http = xtimer_webserver::serve::Server::new(listener, app, &config.server);
        loops.spawn("http", |s| async move {
            http.run(s).await;
            Ok::<_, anyhow::Error>(())
        });
        loops.spawn("migrator", |s| migrator.clone().run(s));
        if let Some(rebuild) = xtimer_migrator::IndexRebuild::new(&stores, &ctx, expander.clone()) {
            loops.spawn("index rebuild", |s| rebuild.run(s));
        }
        loops.spawn("heartbeat", |s| heartbeat.run(s));
        let upkeep = xtimer_webserver::metrics::MetricsUpkeep::new();
        loops.spawn("metrics upkeep", |s| async move {
            upkeep.run(s).await;
            Ok::<_, anyhow::Error>(())
        });
        let pause = PauseDetector { watch: ctx.pause.clone() };
        loops.spawn("pause detector", |s| async move {
            pause.run(s).await;
            Ok::<_, anyhow::Error>(())
        });
        loops.spawn("scheduler", |s| scheduler.run(s));
        loops.spawn("trigger", |s| async move {
            trigger.run(s).await;
            Ok::<_, anyhow::Error>(())
        });
        loops.spawn("executor", |s| executor.run(s));
        loops.spawn("reconciler", |s| reconciler.run(s));
        // onFailure notifies left owed by a node that stopped or crashed.
        let notify_sweep = NotifySweeper::new(&handle, NOTIFY_SWEEP_PERIOD);
        loops.spawn("notify sweep", |s| notify_sweep.run(s));
        loops.spawn("asyncflow governor", |s| governor.run(s));
        let retention = Retention::new(config.retention.clone(), &stores, &ctx);
        loops.spawn("retention", |s| retention.run(s));
        let rollup = StatsRollup::new(&stores, &ctx);
        loops.spawn("timer figures", |s| rollup.run(s));
        let finisher = Finisher::new(&stores, &ctx);
        loops.spawn("finisher", |s| async move {
            finisher.run(s).await;
            Ok::<_, anyhow::Error>(())
        });
        let flow_limits = FlowLimitsWatch::new(handle.flows(), stores.flows.clone());
        loops.spawn("flow limits", |s| async move {
            flow_limits.run(s).await;
            Ok::<_, anyhow::Error>(())
        });
        if let Some(checkpointer) = stores.checkpointer(CHECKPOINT_PERIOD) {
            loops.spawn("checkpointer", |s| checkpointer.run(s));
        }
        let loops = loops.set;

        tracing::info!(%addr, node_id, storage = %stores.description, "xtimer is listening.");
        Ok(Self {
            addr,
            node_id,
            stores,
            migrator,
            expander,
            tasks,
            stop_claiming,
            hard_stop,
            loops,
            executor: handle,
            recorder,
            task_writer,
            task_writer_stop,
            grace: Duration::from_millis(config.server.shutdown_grace_ms),
            telemetry,
        })
    }

    /// Resolves when any loop exits on its own (a failure), naming it.
    pub async fn exited(&mut self) -> String {
        match self.loops.join_next().await {
            Some(Ok((name, Ok(())))) => format!("{name} stopped"),
            Some(Ok((name, Err(err)))) => format!("{name} failed: {err:#}"),
            Some(Err(err)) => format!("a loop panicked: {err}"),
            None => std::future::pending().await,
        }
    }

    /// Stops in order: stop claiming (and serving), let in-flight callbacks
    /// finish within the grace period, cancel what is left (its claims are
    /// given back), then flush recorded results.
    ///
    /// The whole stop is bounded: `server.shutdown_grace_ms` plus
    /// [`SHUTDOWN_AFTER_GRACE`], whatever its database or Redis does (a
    /// node that lost its database stops as quickly as one that did not;
    /// what it could not record is taken over by the others, as after a
    /// kill).
    pub async fn shutdown(mut self) {
        let deadline = tokio::time::Instant::now() + self.grace + SHUTDOWN_AFTER_GRACE;
        let grace_end = tokio::time::Instant::now() + self.grace;
        self.stop_claiming.cancel();
        let loops = async { while self.loops.join_next().await.is_some() {} };
        if tokio::time::timeout_at(grace_end, loops).await.is_err() {
            tracing::warn!("Some loops did not stop within the grace period; left behind.");
            self.loops.abort_all();
        }
        self.task_writer_stop.cancel();
        let _ = tokio::time::timeout_at(deadline, self.task_writer).await;
        if tokio::time::timeout_at(grace_end, self.executor.idle()).await.is_err() {
            tracing::warn!(in_flight = self.executor.in_flight(), "Grace period over; cancelling in-flight fires.");
        }
        self.hard_stop.cancel();
        let idle_by = deadline.min(tokio::time::Instant::now() + Duration::from_secs(5));
        let _ = tokio::time::timeout_at(idle_by, self.executor.idle()).await;
        drop(self.executor);
        if tokio::time::timeout_at(deadline, self.recorder).await.is_err() {
            tracing::warn!("Results not recorded by the shutdown bound; other nodes take those fires over.");
        }
        let close_by = deadline.max(tokio::time::Instant::now() + Duration::from_secs(1));
        let _ = tokio::time::timeout_at(close_by, self.stores.close()).await;
        self.telemetry.shutdown().await;
        tracing::info!(node_id = self.node_id, "xtimer stopped.");
    }
}

/// `GET /readyz`'s check: ready while a heartbeat has reached the database
/// within the node timeout (the time after which the other nodes judge this
/// one dead).
fn readiness(liveness: Arc<Liveness>, node_timeout_ms: i64) -> xtimer_webserver::routes::health::ReadinessCheck {
    Arc::new(move || {
        let silent = liveness.silent_for_ms();
        (silent > node_timeout_ms).then(|| format!("no heartbeat has reached the database for {silent} ms"))
    })
}

/// How long a stop may take beyond `server.shutdown_grace_ms`: to record
/// the results of the fires cancelled at its end and close the stores.
pub const SHUTDOWN_AFTER_GRACE: Duration = Duration::from_secs(5);

/// Why `serve` cannot listen on `addr`, and how to pick another address:
/// `--listen`, `XTIMER_LISTEN` or `server.listen` in the config file.
pub fn listen_failure(addr: &str, err: &std::io::Error) -> String {
    let why = match err.kind() {
        std::io::ErrorKind::AddrInUse => format!("{err}: the port is taken (another xtimer, or another program?)"),
        _ => err.to_string(),
    };
    format!(
        "cannot listen on {addr}: {why}; listen elsewhere with `--listen 127.0.0.1:8181` (or XTIMER_LISTEN, or \
         `listen` under [server] in the config file)"
    )
}
