//! xtimer's HTTP API (the timer API of `shared/API.md` section 1).
//!
//! # Layout
//!
//! - [`router()`]: every route and layer, given an [`AppState`]
//!   ([`state`]: what every handler shares); [`fallback`]: the 404 and
//!   405 replies; [`layers`]: the middlewares that read the state.
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
//! - [`metrics`]: `GET /metrics` (Prometheus text) and the request counter;
//!   [`scrape`]: what it reads of the node (timer counts, shards held).
//! - [`traces`]: a span per request when OpenTelemetry traces are on.
//! - [`api`]: every route with its documentation (`#[utoipa::path]` on each
//!   handler), [`prefixes`]: the timer routes' two prefixes,
//!   [`replies`]: how a handler's documentation names its reply.
//! - [`openapi`]: `GET /openapi.json`, the OpenAPI 3.1 document of every
//!   route, made of those routes.
//! - [`ui`]: the web console at `/ui` (embedded assets) and its overview data.
//! - [`auth`]: per-app bearer tokens: [`auth::AuthContext`] (left by the
//!   [`layers::resolve`] middleware) and [`auth::authorize`], for every
//!   API's handlers.
//! - [`limits`]: the per-app request rate limit and the fires-per-minute count.
//! - [`security`]: [`security::Security`], the auth, limits and callback
//!   target policy one server enforces.
//! - [`extract`]: `Json` and `Query` wrappers whose rejections are [`ApiError`]s.
//! - [`serve`]: [`serve::Server`], the accept loop with the `server.*`
//!   connection limits (header, body and idle timeouts, connection cap).
//! - [`envelope`]: the `{"code", "msg", "result"}` envelope of every reply.
//! - [`error`]: [`ApiError`] and [`error::AuthError`], their HTTP mapping,
//!   and the logging of 5xx causes.
//!
//! Every reply, errors included, is the envelope: a success is
//! `{"code": 0, "msg": "ok", "result": ...}`; an error has the HTTP status as
//! `code`, a message naming the field or limit at fault, and `result: null`.

pub mod api;
pub mod auth;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod fallback;
pub mod layers;
pub mod limits;
pub mod metrics;
pub mod openapi;
pub mod prefixes;
pub mod replies;
pub mod router;
pub mod routes;
pub mod scrape;
pub mod security;
pub mod serve;
pub mod state;
pub mod traces;
pub mod ui;

pub use envelope::Envelope;
pub use error::ApiError;
pub use router::router;
pub use state::{ApiParts, AppState, ReadinessCheck, Shared};
