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

use axum::extract::Request;
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiError;

/// Fallback for a path no route has: a 404 envelope.
pub async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::NoRoute { method: method.to_string(), path: uri.path().to_owned() }
}

/// Fallback for a route that exists, called with another method: a 405 envelope.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed { method: method.to_string(), path: uri.path().to_owned(), allow: String::new() }
}

/// Middleware: a 405 names the methods its route takes. axum sets the
/// `Allow` header after the fallback ran, so the message is written here.
pub async fn name_allowed_methods(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
    let response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let Some(allow) = response.headers().get(header::ALLOW).cloned() else { return response };
    let text = allow.to_str().unwrap_or_default().to_owned();
    let mut rewritten = ApiError::MethodNotAllowed { method, path, allow: text }.into_response();
    rewritten.headers_mut().insert(header::ALLOW, allow);
    rewritten
}
