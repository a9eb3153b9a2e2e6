//! Handlers, one module per URL tree.
//!
//! - [`timers`]: `/api/xtimer/...` and `/xtimer/...`.
//! - [`health`]: `/healthz`.

pub mod health;
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
