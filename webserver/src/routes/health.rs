//! `GET /healthz`: the process answers HTTP.

use serde::Serialize;

use crate::Envelope;

/// The health reply's `result`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Health {
    /// Always `"ok"`.
    pub status: &'static str,
}

/// `GET /healthz`: `{"code": 0, "msg": "ok", "result": {"status": "ok"}}`.
pub async fn health_check() -> Envelope<Health> {
    Envelope(Health { status: "ok" })
}
