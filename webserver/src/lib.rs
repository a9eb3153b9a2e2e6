//! xtimer's HTTP API (the timer API of `shared/API.md` section 1).
//!
//! # Layout
//!
//! - [`router`]: every route and layer, given an [`AppState`].
//! - [`routes`]: handlers, one module per URL tree; a timer handler
//!   extracts, authorizes, calls one [`xtimer_service::TimerService`]
//!   method and maps its result ([`ApiError`] from `ServiceError`):
//!   - [`routes::timers`]: `/api/xtimer/...` and `/xtimer/...` (create,
//!     enable, disable, delete, get, list, list fires), with
//!     [`routes::timers::input`] (request types and their validation) and
//!     [`routes::timers::view`] (reply types);
//!   - [`routes::health`]: `GET /healthz`;
//!   - [`routes::nodes`]: `GET /api/xtimer/nodes`, the cluster's nodes.
//! - [`routes::tasks`]: the asyncflow task API, `/v1/...` (API.md section 2).
//! - [`metrics`]: `GET /metrics` (Prometheus text) and the request counter.
//! - [`traces`]: a span per request when OpenTelemetry traces are on.
//! - [`openapi`]: `GET /openapi.json`, the OpenAPI 3.1 document of every route.
//! - [`ui`]: the web console at `/ui` (embedded assets) and its overview data.
//! - [`auth`]: per-app bearer tokens: the [`auth::resolve`] middleware,
//!   [`auth::AuthContext`] and [`auth::authorize`], for every API's handlers.
//! - [`limits`]: the per-app request rate limit and the fires-per-minute count.
//! - [`security`]: [`security::Security`], the auth, limits and callback
//!   target policy one server enforces.
//! - [`extract`]: `Json` and `Query` wrappers whose rejections are [`ApiError`]s.
//! - [`serve`]: [`serve::Server`], the accept loop with the `server.*`
//!   connection limits (header, body and idle timeouts, connection cap).
//! - [`envelope`]: the `{"code", "msg", "result"}` envelope of every reply.
//! - [`error`]: [`ApiError`], its HTTP mapping, and the logging of 5xx causes.
//!
//! Every reply, errors included, is the envelope: a success is
//! `{"code": 0, "msg": "ok", "result": ...}`; an error has the HTTP status as
//! `code`, a message naming the field or limit at fault, and `result: null`.

pub mod auth;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod limits;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod security;
pub mod serve;
pub mod traces;
pub mod ui;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::{middleware, Router};
use opentelemetry::global::BoxedTracer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use xtimer_asyncflow::Tasks;
use xtimer_core::config::ServerConfig;
use xtimer_core::SharedClock;
use xtimer_service::TimerService;
use xtimer_service::Nodes;

pub use envelope::Envelope;
pub use error::ApiError;

/// What every handler shares: the timer use cases ([`TimerService`]), the
/// clock, the security settings and the server configuration. One `Arc` to
/// clone: axum clones the state for every extractor of every request.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// The fields of [`AppState`].
pub struct Shared {
    service: TimerService,
    clock: SharedClock,
    config: Arc<ServerConfig>,
    nodes: Option<Nodes>,
    tasks: Option<Tasks>,
    security: Arc<security::Security>,
    shards_held: Option<metrics::ShardsHeld>,
    readiness: Option<routes::health::ReadinessCheck>,
    timer_counts: Arc<metrics::TimerCounts>,
    tracer: Option<Arc<BoxedTracer>>,
}

/// What the API is built from: the timer use cases and the security
/// settings, and what else it serves when given.
pub struct ApiParts {
    /// The timer use cases.
    pub service: TimerService,
    /// Auth and limits.
    pub security: security::Security,
    /// Serves `GET /api/xtimer/nodes`.
    pub nodes: Option<Nodes>,
    /// Serves the `/v1` task API.
    pub tasks: Option<Tasks>,
    /// Reports `xtimer_shards_held` (this node's trigger).
    pub shards_held: Option<metrics::ShardsHeld>,
    /// Serves `GET /readyz` (ready always, without it).
    pub readiness: Option<routes::health::ReadinessCheck>,
    /// Sends a span per request (API 1h traces).
    pub tracer: Option<BoxedTracer>,
}

impl ApiParts {
    /// `service` and `security` alone: no nodes, no task API, no shard
    /// gauge, no traces.
    pub fn new(service: TimerService, security: security::Security) -> Self {
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
            timer_counts: Arc::new(metrics::TimerCounts::new(clock.clone())),
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

/// The whole HTTP API.
///
/// The timer routes answer both under `/api/xtimer/` and `/xtimer/`. Layers,
/// outermost first: panics become a 500 envelope; requests are traced
/// (logged, and a span each when traces are on); requests are counted for `/metrics`; 5xx causes are logged; the bearer token is resolved into an
/// [`auth::AuthContext`]; the caller's request rate is limited (429);
/// bodies are limited to `max_body_bytes` (a 413 envelope when exceeded,
/// which closes the connection); a 405 names the methods its route takes.
pub fn router(state: AppState) -> Router {
    metrics::install();
    let routes = Router::new()
        .route("/healthz", get(routes::health::health_check))
        .route("/readyz", get(routes::health::readiness_check))
        .route("/metrics", get(metrics::metrics_get))
        .route("/openapi.json", get(openapi::openapi_get))
        .merge(routes::timers::routes("/api/xtimer", &state.config))
        .merge(routes::timers::routes("/xtimer", &state.config))
        .route("/api/xtimer/nodes", get(routes::nodes::nodes_list))
        .route("/xtimer/nodes", get(routes::nodes::nodes_list))
        .merge(routes::tasks::routes())
        .merge(ui::routes())
        .route_layer(middleware::from_fn(metrics::tag_route))
        .fallback(routes::no_route)
        .method_not_allowed_fallback(routes::method_not_allowed);
    // Outside the routes: their `Allow` header is set by then.
    let api = Router::new()
        .fallback_service(routes.with_state(state.clone()))
        .layer(middleware::from_fn(routes::name_allowed_methods))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), limits::close_after_oversized_body))
        .layer(middleware::from_fn_with_state(state.clone(), limits::rate_limit))
        .layer(middleware::from_fn_with_state(state.clone(), auth::resolve))
        .layer(middleware::from_fn(error::log_server_errors))
        .layer(middleware::from_fn(metrics::count_requests));
    // Only with traces on: off, a request pays nothing for them.
    let api = match state.tracer.clone() {
        Some(tracer) => api.layer(middleware::from_fn_with_state(tracer, traces::trace_request)),
        None => api,
    };
    api.layer(TraceLayer::new_for_http()).layer(CatchPanicLayer::custom(error::panic_response)).with_state(state)
}
