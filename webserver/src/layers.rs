//! The middlewares that read the server's state, in the order a request
//! meets them: the bearer token resolved ([`resolve`]), the caller's
//! request rate ([`rate_limit`]), a body over its route's limit
//! ([`close_after_oversized_body`]).

use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::extract::BodyLimit;
use crate::limits::rate_key;
use crate::state::AppState;

/// Middleware: resolves the bearer token into an [`AuthContext`] extension.
pub async fn resolve(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let ctx = state.security.auth.context(request.headers()).await;
    request.extensions_mut().insert(ctx);
    next.run(request).await
}

/// Middleware (inside [`resolve`]): 429 when the caller's
/// bucket is empty. The key is the app of the caller's token, else the
/// `app` of the query string, else the caller's address; `/healthz` is
/// not limited.
pub async fn rate_limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    let key = rate_key(&request);
    match state.security.rate.take(&key) {
        Ok(()) => next.run(request).await,
        Err(wait) => {
            let per_second = state.security.limits.requests_per_second;
            ApiError::LimitExceeded {
                msg: format!(
                    "rate limit: {key} may send at most {per_second} requests per second \
                     (limits.requests_per_second); retry in {} ms",
                    wait.as_millis().max(1)
                ),
                retry_after: Some(wait),
            }
            .into_response()
        }
    }
}

/// Middleware (outside the body limit): a body over its route's limit
/// (`server.max_body_bytes`, or `server.max_batch_body_bytes` for a batch)
/// is refused without being read to its end, after which the server closes
/// the connection (a lingering close, see [`crate::serve`]). The reply says
/// so (`Connection: close`), so that a client does not send its next
/// request on that connection and lose it.
pub async fn close_after_oversized_body(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limit = BodyLimit::for_path(&state.config, request.uri().path()).bytes as u64;
    let declared = request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    let oversized = declared.is_some_and(|len| len > limit);
    let mut response = next.run(request).await;
    if oversized || response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
