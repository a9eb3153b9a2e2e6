//! `explainFire` (API 1h): why a scheduled time of a timer fired as it did,
//! or never fired, from what is already stored.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use xtimer_core::clock::rfc3339;
use xtimer_service::Explanation;

use super::input::TimerRef;
use super::key::timer_key;
use super::view::FireView;
use crate::extract::ApiQuery;
use crate::extract::ForApp;
use crate::{ApiError, AppState, Envelope};

crate::of_app!(ExplainQuery);

/// Query of `explainFire`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExplainQuery {
    /// The timer.
    pub id: i64,
    /// The app it belongs to.
    pub app: String,
    /// The scheduled time: Unix ms or RFC 3339 (read here, so a bad one is named).
    pub run_timer: String,
}

/// The reply of `explainFire`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = Explanation)]
pub struct ExplainView {
    /// The fire record, or null when there is none.
    pub fire: Option<FireView>,
    /// What happened, oldest first.
    pub timeline: Vec<MomentView>,
    /// The answer in one sentence.
    pub verdict: String,
    /// Every attempt kept, oldest first.
    pub attempts: Vec<AttemptView>,
    /// Every claim known, oldest first.
    pub claims: Vec<ClaimView>,
}

/// One attempt of the fire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    /// Its number, 1 first (a replay continues the count).
    pub attempt: u32,
    /// The node that made it (null when not known).
    pub node: Option<String>,
    /// When it was sent, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
    /// When its answer (or its end) was recorded, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<String>,
    /// The HTTP status it got, when it got one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// `succeeded`, `failed`, `skipped` or `missed`.
    pub outcome: String,
    /// Its answer, as recorded.
    pub output: String,
}

/// One claim of the fire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView {
    /// The node that held it.
    pub node: String,
    /// When, RFC 3339.
    pub at: String,
    /// The node it was taken over from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_over_from: Option<String>,
}

/// One event of the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MomentView {
    /// When, RFC 3339.
    pub at: String,
    /// When, Unix ms.
    #[serde(rename = "atMs")]
    pub at_ms: i64,
    /// What happened.
    pub event: String,
    /// The node that did it, where one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// More, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl From<Explanation> for ExplainView {
    fn from(e: Explanation) -> Self {
        Self {
            fire: e.fire.as_ref().map(FireView::from),
            timeline: e
                .timeline
                .into_iter()
                .map(|m| MomentView {
                    at: rfc3339(m.at_ms),
                    at_ms: m.at_ms,
                    event: m.event,
                    node: m.node,
                    detail: m.detail,
                })
                .collect(),
            verdict: e.verdict,
            attempts: e
                .attempts
                .into_iter()
                .map(|a| AttemptView {
                    attempt: a.attempt,
                    node: a.node,
                    sent_at: a.sent_at.map(rfc3339),
                    answered_at: a.answered_at.map(rfc3339),
                    http_status: a.http_status,
                    outcome: a.outcome,
                    output: a.output,
                })
                .collect(),
            claims: e
                .claims
                .into_iter()
                .map(|c| ClaimView { node: c.node, at: rfc3339(c.at_ms), taken_over_from: c.taken_over_from })
                .collect(),
        }
    }
}

/// `GET explainFire`: the fire of timer `id` at scheduled time `runTimer`
/// (Unix ms or RFC 3339), its attempts, claims and timeline and a verdict; for a time with no fire, why
/// not. Another app's timer is a 403 to an app token, an unknown one a 404.
#[utoipa::path(
    get,
    path = "/explainFire",
    operation_id = "explainFire",
    summary = "Why a scheduled time of a timer fired as it did, or did not: the fire, its timeline, a verdict.",
    params(ExplainQuery),
    responses((status = 200, description = crate::replies::ENVELOPED, body = ExplainView))
)]
pub async fn fire_explain(
    State(state): State<AppState>,
    ForApp(q, auth): ForApp<ApiQuery<ExplainQuery>>,
) -> Result<Envelope<ExplainView>, ApiError> {
    let text = q.run_timer.trim();
    let run_ms = super::preview::parse_instant("runTimer", text).map_err(|_| {
        ApiError::Invalid(format!(
            "runTimer: must be the scheduled time, in Unix milliseconds or RFC 3339 (`2026-12-01T09:00:00Z`), not `{}`",
            text.chars().take(64).collect::<String>()
        ))
    })?;
    let key = timer_key(&auth, TimerRef { id: q.id, app: q.app });
    Ok(Envelope(state.service.explain(&key, run_ms).await?.into()))
}
