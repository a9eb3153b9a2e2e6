//! The whole HTTP API: its routes ([`crate::api`]) behind its layers and
//! fallbacks.

use axum::extract::{DefaultBodyLimit, Extension};
use axum::{middleware, Router};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

use crate::api::{self, ServedDocument};
use crate::state::AppState;
use crate::{error, fallback, layers, metrics, traces};

/// The whole HTTP API.
///
/// The timer routes answer both under `/api/xtimer/` and `/xtimer/`. Layers,
/// outermost first: panics become a 500 envelope; requests are traced
/// (logged, and a span each when traces are on); requests are counted for `/metrics`; 5xx causes are logged; the bearer token is resolved into an
/// [`crate::auth::AuthContext`]; the caller's request rate is limited (429);
/// bodies are limited to `max_body_bytes` (a 413 envelope when exceeded,
/// which closes the connection); a 405 names the methods its route takes.
pub fn router(state: AppState) -> Router {
    metrics::install();
    let document = api::document().to_json().expect("the document serializes");
    let routes = Router::from(api::routes(&state.config))
        .layer(Extension(ServedDocument(document.into())))
        .route_layer(middleware::from_fn(metrics::tag_route))
        .fallback(fallback::no_route)
        .method_not_allowed_fallback(fallback::method_not_allowed);
    // Outside the routes: their `Allow` header is set by then.
    let api = Router::new()
        .fallback_service(routes.with_state(state.clone()))
        .layer(middleware::from_fn(fallback::name_allowed_methods))
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), layers::close_after_oversized_body))
        .layer(middleware::from_fn_with_state(state.clone(), layers::rate_limit))
        .layer(middleware::from_fn_with_state(state.clone(), layers::resolve))
        .layer(middleware::from_fn(error::log_server_errors))
        .layer(middleware::from_fn(metrics::count_requests));
    // Only with traces on: off, a request pays nothing for them.
    let api = match state.tracer.clone() {
        Some(tracer) => api.layer(middleware::from_fn_with_state(tracer, traces::trace_request)),
        None => api,
    };
    api.layer(TraceLayer::new_for_http()).layer(CatchPanicLayer::custom(error::panic_response)).with_state(state)
}
