//! What every handler shares ([`AppState`]) and what it is built from
//! ([`ApiParts`]).

use std::sync::Arc;

use opentelemetry::global::BoxedTracer;
use xtimer_asyncflow::Tasks;
use xtimer_core::config::ServerConfig;
use xtimer_core::SharedClock;
use xtimer_service::{Nodes, TimerService};

use crate::scrape::{ShardsHeld, TimerCounts};
use crate::security::Security;

/// Why a node is not ready, or `None` when it is: a check of its own state,
/// cheap enough for every probe (`GET /readyz`).
pub type ReadinessCheck = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// What every handler shares: the timer use cases ([`TimerService`]), the
/// clock, the security settings and the server configuration. One `Arc` to
/// clone: axum clones the state for every extractor of every request.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// The fields of [`AppState`].
pub struct Shared {
    pub(crate) service: TimerService,
    pub(crate) clock: SharedClock,
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) nodes: Option<Nodes>,
    pub(crate) tasks: Option<Tasks>,
    pub(crate) security: Arc<Security>,
    pub(crate) shards_held: Option<ShardsHeld>,
    pub(crate) readiness: Option<ReadinessCheck>,
    pub(crate) timer_counts: Arc<TimerCounts>,
    pub(crate) tracer: Option<Arc<BoxedTracer>>,
}

/// What the API is built from: the timer use cases and the security
/// settings, and what else it serves when given.
pub struct ApiParts {
    /// The timer use cases.
    pub service: TimerService,
    /// Auth and limits.
    pub security: Security,
    /// Serves `GET /api/xtimer/nodes`.
    pub nodes: Option<Nodes>,
    /// Serves the `/v1` task API.
    pub tasks: Option<Tasks>,
    /// Reports `xtimer_shards_held` (this node's trigger).
    pub shards_held: Option<ShardsHeld>,
    /// Serves `GET /readyz` (ready always, without it).
    pub readiness: Option<ReadinessCheck>,
    /// Sends a span per request (API 1h traces).
    pub tracer: Option<BoxedTracer>,
}

impl ApiParts {
    /// `service` and `security` alone: no nodes, no task API, no shard
    /// gauge, no traces.
    pub fn new(service: TimerService, security: Security) -> Self {
        Self { service, security, nodes: None, tasks: None, shards_held: None, readiness: None, tracer: None }
    }
}

impl AppState {
    /// The API over `parts`, with `config` (`config.max_body_bytes` limits
    /// request bodies).
    pub fn new(parts: ApiParts, config: ServerConfig) -> Self {
        let ApiParts { service, security, nodes, tasks, shards_held, readiness, tracer } = parts;
        let clock = service.clock().clone();
        Self(Arc::new(Shared {
            timer_counts: Arc::new(TimerCounts::new(clock.clone())),
            clock,
            service,
            config: Arc::new(config),
            nodes,
            tasks,
            security: Arc::new(security),
            shards_held,
            readiness,
            tracer: tracer.map(Arc::new),
        }))
    }

    /// The timer use cases.
    pub fn service(&self) -> &TimerService {
        &self.service
    }

    /// The server configuration this state was built with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}
