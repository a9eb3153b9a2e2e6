//! Handlers, one module per URL tree.
//!
//! - [`timers`]: the timer API, under `/api/xtimer/` and `/xtimer/`.
//! - [`health`]: the `/healthz` probe.
//! - [`nodes`]: the cluster's nodes.
//! - [`tasks`]: the asyncflow task API, under `/v1/`.
//!
//! Plus the fallbacks that keep unknown paths and methods in the envelope.

pub mod health;
pub mod nodes;
pub mod tasks;
pub mod timers;

use axum::http::{Method, Uri};

use crate::ApiError;

/// Fallback for a path no route has: a 404 envelope.
pub async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::NoRoute { method: method.to_string(), path: uri.path().to_owned() }
}

/// Fallback for a route that exists, called with another method: a 405 envelope.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed { method: method.to_string(), path: uri.path().to_owned() }
}
