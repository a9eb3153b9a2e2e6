//! `GET /healthz`: the process answers HTTP. `GET /readyz`: and its
//! database answers (its heartbeats reach it).

use serde::Serialize;

use crate::Envelope;

/// The health reply's `result`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Health {
    /// Always `"ok"`.
    pub status: &'static str,
}

/// `GET /healthz`: `{"code": 0, "msg": "ok", "result": {"status": "ok"}}`.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "_healthz",
    summary = "Liveness: the process serves HTTP.",
    responses((status = 200, description = crate::replies::ENVELOPED, body = Health))
)]
pub async fn health_check() -> Envelope<Health> {
    Envelope(Health { status: "ok" })
}

/// The readiness reply's `result`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Readiness {
    /// `"ok"`.
    pub status: &'static str,
    /// `"ok"`: this node's heartbeats reach the database.
    pub database: &'static str,
}

pub use crate::state::ReadinessCheck;

/// `GET /readyz`: 200 `{"status": "ok", "database": "ok"}` while this node's
/// heartbeats reach its database; 503 with `Retry-After: 1` and the reason
/// while they do not (no primary during a failover, a cut, a restart), so a
/// load balancer sends the API's calls to a node that can answer them. The
/// process itself is alive either way (`/healthz`).
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "_readyz",
    summary = "Readiness: this node's heartbeats reach its database; 503 with Retry-After and the reason while they do not.",
    responses((status = 200, description = crate::replies::ENVELOPED, body = Readiness))
)]
pub async fn readiness_check(
    axum::extract::State(state): axum::extract::State<crate::AppState>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match state.readiness.as_ref().and_then(|check| check()) {
        None => Envelope(Readiness { status: "ok", database: "ok" }).into_response(),
        Some(why) => {
            let status = axum::http::StatusCode::SERVICE_UNAVAILABLE;
            let mut response = crate::envelope::error_response(status, &format!("not ready: {why}"));
            let retry = crate::error::UNAVAILABLE_RETRY_AFTER_SECS;
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, retry.into());
            response
        }
    }
}
