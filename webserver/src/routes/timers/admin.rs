//! `POST admin/issueToken`: issues an API token for an app.
//!
//! Needs `Authorization: Bearer <auth.admin_token>` (with auth on or off,
//! so tokens can be handed out before auth is switched on); without an
//! admin token configured the endpoint is off (403). The reply shows the
//! token once: only its SHA-256 is stored. It also shows the app's
//! callback signing secret, created with the app's first token and kept
//! for the next ones.

use axum::extract::State;
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};

use crate::auth::AuthError;
use crate::extract::ApiJson;
use crate::{ApiError, AppState, Envelope};

/// Body of `issueToken`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IssueToken {
    /// The app the token acts for, 1..=128 characters.
    pub app: String,
}

/// Reply of `issueToken`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct IssuedToken {
    /// The app.
    pub app: String,
    /// The bearer token; shown only now.
    pub token: String,
    /// The key of the app's `X-Xtimer-Signature` (HMAC-SHA256).
    pub secret: String,
}

/// `POST admin/issueToken`: a new token for `app`.
#[utoipa::path(
    post,
    path = "/admin/issueToken",
    operation_id = "admin_issueToken",
    summary = "Issue an app's API token (admin token only).",
    request_body = IssueToken,
    responses((status = 200, description = crate::replies::ENVELOPED, body = IssuedToken))
)]
pub async fn tokens_issue(
    State(state): State<AppState>,
    headers: HeaderMap,
    input: Result<ApiJson<IssueToken>, ApiError>,
) -> Result<Envelope<IssuedToken>, ApiError> {
    let auth = &state.security.auth;
    if !auth.admin_enabled() {
        return Err(AuthError::Forbidden("admin endpoints are off: set auth.admin_token to use them".into()).into());
    }
    if crate::auth::bearer(&headers).is_none() {
        return Err(AuthError::Missing.into());
    }
    if !auth.is_admin(&headers) {
        return Err(AuthError::Forbidden("issuing tokens needs the admin token".into()).into());
    }
    let ApiJson(input) = input?;
    let Some(tokens) = auth.tokens() else {
        return Err(ApiError::Invalid("this server keeps no token store: configure tokens in [auth.apps]".into()));
    };
    let issued = tokens.issue(&input.app).await?;
    auth.remember(issued.hash, issued.app.clone());
    tracing::info!(app = %issued.app, "API token issued.");
    Ok(Envelope(IssuedToken { app: issued.app, token: issued.token, secret: issued.secret }))
}
