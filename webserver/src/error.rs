//! The API's one error type, mapped to HTTP in one place.
//!
//! Modelled on axum's `examples/error-handling`: each variant picks its
//! status; a 4xx carries its message to the caller; a 5xx answers a generic
//! message and carries the real error, in a response extension, to
//! [`log_server_errors`], which logs its whole cause chain.

use std::any::Any;
use std::fmt::Display;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use xtimer_service::error::Cause;
use xtimer_service::ServiceError;

use crate::envelope::{error_response, error_response_with};

/// An error and each of its causes, joined by `": "` (logs name every cause).
pub use xtimer_core::error::error_chain;

/// What a 5xx reply says; the cause goes to the log, not to the caller.
pub const INTERNAL_ERROR_MSG: &str = "internal error: the server failed to handle the request; it has been logged";

/// The message of a 503 while the database or Redis is out of reach.
pub const UNAVAILABLE_MSG: &str =
    "the database or Redis cannot be reached for now (a failover or restart under way?): retry in a moment";

/// The `Retry-After` of [`ApiError::Unavailable`], seconds.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 1;

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Input that fails validation or does not parse; the message names
    /// the field at fault and says what is wrong. 400.
    #[error("{0}")]
    Invalid(String),
    /// The request body exceeds the route's limit (`server.max_body_bytes`,
    /// or `server.max_batch_body_bytes` for a batch). 413.
    #[error("request body is larger than the limit of {limit} bytes ({setting})")]
    BodyTooLarge {
        /// The limit, bytes.
        limit: usize,
        /// The setting that sets it.
        setting: &'static str,
    },
    /// The request body did not arrive in full within
    /// `ServerConfig::body_read_timeout_ms` of its head. 408, and the
    /// connection is closed (`Connection: close`): the rest of the body may
    /// still be on its way, so nothing after it can be read as a request.
    #[error(
        "request body: not received in full within {timeout_ms} ms of the request head \
         (server.body_read_timeout_ms); the connection is closed"
    )]
    BodyReadTimeout {
        /// The timeout, ms.
        timeout_ms: u64,
    },
    /// A refusal the service words itself: no timer with this id in this
    /// app (unknown, deleted, or another app's; one message for all three,
    /// so a caller cannot tell them apart) or no such calendar, 404;
    /// another timer that is not deleted has the name, 409; a create
    /// stopped before its answer (it may or may not be stored: a retry
    /// answers 409 if it was), 503; a `dedupeKey` held by a live timer,
    /// 409 with the holder's `{"id"}` as its result; creates of one key
    /// that did not settle, 503.
    #[error(transparent)]
    Refused(ServiceError),
    /// No route has this path. 404.
    #[error("no route for {method} {path}{hint}")]
    NoRoute {
        /// The request method.
        method: String,
        /// The request path.
        path: String,
        /// `: did you mean ...?` when a route is near, else empty.
        hint: String,
    },
    /// The path exists but not with this method. 405.
    #[error("method {method} is not allowed on {path}{}", allow_hint(allow))]
    MethodNotAllowed {
        /// The request method.
        method: String,
        /// The request path.
        path: String,
        /// The methods the path takes (its `Allow` header), when known.
        allow: String,
    },
    /// No valid bearer token (401), or one of another app (403).
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// A quota or rate limit is reached; the message names it and its
    /// configuration key. 429, with `Retry-After` when known.
    #[error("{msg}")]
    LimitExceeded {
        /// What limit, and what to do.
        msg: String,
        /// When to try again, if it is a rate.
        retry_after: Option<std::time::Duration>,
    },
    /// The task engine failed (reading a task type's owner). 500.
    #[error("the task engine failed")]
    Tasks(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The system's randomness failed (issuing a token). 500.
    #[error("no randomness")]
    Randomness(#[source] std::io::Error),
    /// The timer or fire store failed. 500.
    #[error("the timer store failed")]
    Store(#[source] Cause),
    /// The database or Redis cannot be reached for now (a failover, a
    /// restart, no connection free): the same request may succeed in a
    /// moment. 503 with `Retry-After`.
    #[error("{UNAVAILABLE_MSG}")]
    Unavailable(#[source] Cause),
    /// Expanding an enabled timer into its fires failed. 500.
    #[error("expanding the timer into fires failed")]
    Expand(#[source] Cause),
}

/// Why a call is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token. 401.
    #[error("authentication required: send `Authorization: Bearer <token>` with a token of your app")]
    Missing,
    /// A token that is not known. 401.
    #[error("the bearer token is not valid")]
    Unknown,
    /// A token of another app than the one the call acts on. 403.
    #[error("forbidden: the token is for app `{token_app}`, not for `{app}`")]
    WrongApp {
        /// The token's app.
        token_app: String,
        /// The app the call acts on.
        app: String,
    },
    /// The admin token used on an app's call, or an app token on an admin call. 403.
    #[error("forbidden: {0}")]
    Forbidden(String),
}

impl AuthError {
    /// 401 or 403.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Missing | Self::Unknown => StatusCode::UNAUTHORIZED,
            Self::WrongApp { .. } | Self::Forbidden(_) => StatusCode::FORBIDDEN,
        }
    }
}

impl ApiError {
    /// A validation error: `"{field}: {problem}"`, so every message starts
    /// with the field at fault (as serde's path-prefixed messages do).
    pub fn invalid(field: &str, problem: impl Display) -> Self {
        Self::Invalid(format!("{field}: {problem}"))
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Invalid(_) => StatusCode::BAD_REQUEST,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyReadTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::Refused(ServiceError::NotFound { .. } | ServiceError::CalendarNotFound { .. })
            | Self::NoRoute { .. } => StatusCode::NOT_FOUND,
            Self::Refused(ServiceError::NameTaken { .. } | ServiceError::KeyHeld { .. }) => StatusCode::CONFLICT,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::Auth(err) => err.status(),
            Self::LimitExceeded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Refused(ServiceError::Interrupted | ServiceError::KeyBusy { .. }) | Self::Unavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Refused(_) | Self::Store(_) | Self::Expand(_) | Self::Tasks(_) | Self::Randomness(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl From<ServiceError> for ApiError {
    /// The reply to each refusal of a use case: not found 404, another
    /// app's timer 403, an invalid field 400, a taken name 409, a limit
    /// 429, an interrupted create or a store out of reach 503, a failure
    /// 500.
    fn from(err: ServiceError) -> Self {
        match err {
            refused @ (ServiceError::NotFound { .. }
            | ServiceError::CalendarNotFound { .. }
            | ServiceError::NameTaken { .. }
            | ServiceError::KeyHeld { .. }
            | ServiceError::KeyBusy { .. }
            | ServiceError::Interrupted) => Self::Refused(refused),
            forbidden @ ServiceError::Forbidden { .. } => Self::Auth(AuthError::Forbidden(forbidden.to_string())),
            invalid @ (ServiceError::Invalid { .. } | ServiceError::Spec(_)) => Self::Invalid(invalid.to_string()),
            ServiceError::LimitExceeded { msg, retry_after } => Self::LimitExceeded { msg, retry_after },
            ServiceError::Unavailable(err) => Self::Unavailable(err),
            ServiceError::Store(err) => Self::Store(err),
            ServiceError::Expand(err) => Self::Expand(err),
            ServiceError::TaskEngine(err) => Self::Tasks(err),
            ServiceError::Randomness(err) => Self::Randomness(err),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let Self::Unavailable(_) = &self {
            let mut response = error_response(status, UNAVAILABLE_MSG);
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, UNAVAILABLE_RETRY_AFTER_SECS.into());
            response.extensions_mut().insert(Arc::new(self));
            response
        } else if status.is_server_error() {
            let mut response = error_response(status, INTERNAL_ERROR_MSG);
            response.extensions_mut().insert(Arc::new(self));
            response
        } else {
            let mut response = match &self {
                Self::Refused(ServiceError::KeyHeld { id, .. }) => {
                    error_response_with(status, &self.to_string(), serde_json::json!({ "id": id }))
                }
                _ => error_response(status, &self.to_string()),
            };
            if let Self::LimitExceeded { retry_after: Some(wait), .. } = &self {
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                response.headers_mut().insert(axum::http::header::RETRY_AFTER, secs.max(1).into());
            }
            if let Self::BodyReadTimeout { .. } = &self {
                let close = axum::http::HeaderValue::from_static("close");
                response.headers_mut().insert(axum::http::header::CONNECTION, close);
            }
            response
        }
    }
}

/// Middleware: logs the cause chain of every 5xx [`ApiError`] a handler
/// answered with (the caller only got [`INTERNAL_ERROR_MSG`]).
pub async fn log_server_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    if let Some(err) = response.extensions().get::<Arc<ApiError>>() {
        tracing::error!(%method, %path, error = %error_chain(err.as_ref()), "Request failed.");
    }
    response
}

/// For `CatchPanicLayer`: logs the panic and answers a 500 envelope.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(a panic payload that is not a string)");
    tracing::error!(panic = detail, "Request handler panicked.");
    error_response(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_ERROR_MSG)
}

/// `; use GET, HEAD` after a 405's message, from the route's `Allow` header.
fn allow_hint(allow: &str) -> String {
    if allow.is_empty() {
        String::new()
    } else {
        format!("; use {allow}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the service answers when the store fails as `err` does.
    fn from_store(err: xtimer_store::Error) -> ApiError {
        ServiceError::from(err).into()
    }

    #[test]
    fn chain_names_every_cause() {
        let planned = xtimer_migrator::Error::Store(xtimer_store::Error::Corrupt("t_timer 7".into()));
        let err = ApiError::from(ServiceError::from(planned));
        assert!(matches!(err, ApiError::Expand(_)), "{err:?}");
        assert_eq!(error_chain(&err), "expanding the timer into fires failed: corrupt row: t_timer 7");
    }

    #[test]
    fn a_store_out_of_reach_is_a_503_with_retry_after_not_a_500() {
        let cut = xtimer_store::Error::Connect {
            setting: "database.url",
            url: "postgres://db:5432/xtimer".into(),
            source: Box::new(xtimer_store::Error::Corrupt("connection refused".into())),
        };
        let response = from_store(cut).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "1");
        let carried = response.extensions().get::<Arc<ApiError>>().expect("cause carried for the log");
        assert!(error_chain(carried.as_ref()).contains("connection refused"), "{}", error_chain(carried.as_ref()));
        let broken = xtimer_store::Error::Corrupt("t_timer 7".into());
        assert_eq!(
            from_store(broken).into_response().status(),
            StatusCode::INTERNAL_SERVER_ERROR,
            "a defect stays a 500"
        );
    }

    #[test]
    fn server_errors_hide_their_cause_and_carry_it_for_the_log() {
        let response = from_store(xtimer_store::Error::Corrupt("secret".into())).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let carried = response.extensions().get::<Arc<ApiError>>().expect("cause carried");
        assert!(error_chain(carried.as_ref()).contains("secret"));

        let response = ApiError::invalid("app", "must not be empty").into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert!(response.extensions().get::<Arc<ApiError>>().is_none());
    }

    #[tokio::test]
    async fn a_held_dedupe_key_is_a_conflict_naming_its_holder() {
        let held = ServiceError::KeyHeld { app: "a".into(), key: "k".into(), id: 42 };
        let response = ApiError::from(held).into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["code"], 409);
        assert_eq!(body["result"], serde_json::json!({ "id": 42 }));
        assert!(body["msg"].as_str().unwrap().starts_with("dedupeKey `k` is held by timer 42"), "{body}");
    }

    #[test]
    fn name_taken_from_the_store_is_a_conflict() {
        let err = from_store(xtimer_store::Error::NameTaken { app: "a".into(), name: "n".into() });
        assert_eq!(err.status(), StatusCode::CONFLICT);
    }
}
