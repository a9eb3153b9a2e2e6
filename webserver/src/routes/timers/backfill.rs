//! `backfillTimer`: fire the scheduled times of a past window that have no
//! fire record (the timer was disabled, or every node was down past the
//! misfire threshold), oldest first, at a bounded pace.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtimer_service::Backfill;

use super::input::TimerRef;
use super::key::timer_key;
use super::preview::parse_instant;
use crate::extract::ApiJson;
use crate::extract::ForApp;
use crate::{ApiError, AppState, Envelope};

crate::of_app!(BackfillTimer);

/// Body of `backfillTimer`.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[schema(as = Backfill)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackfillTimer {
    /// The timer.
    pub id: i64,
    /// The app it belongs to.
    pub app: String,
    /// Start of the window (included): RFC 3339 with an offset, or Unix ms.
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub from: Value,
    /// End of the window (excluded); times after now are left to the
    /// schedule.
    #[schema(schema_with = crate::openapi::schemas::time)]
    pub to: Value,
    /// Most fires to make; `limits.backfill_max_fires` when absent, and at
    /// most that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fires: Option<i64>,
}

/// `{"count": N}`: the reply of `backfillTimer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Backfilled {
    /// Fires made.
    pub count: u64,
}

/// `POST backfillTimer`: every scheduled time of an enabled timer in
/// `[from, to)` that has no fire record gets one (the oldest first, at most
/// [`BackfillTimer::max_fires`]), sent at `limits.backfill_fires_per_second` whatever the
/// timer's misfire policy. Each is a fire like any other: its record, its
/// `Idempotency-Key` (`{id}_{runTimer}`, the key it would have had on
/// time), retries and overlap policy. The window must lie within
/// `retention.keep_fires_ms`: older records are deleted, so older times
/// could not be told apart from missed ones.
#[utoipa::path(
    post,
    path = "/backfillTimer",
    operation_id = "backfillTimer",
    summary = "Fire every scheduled time in [from, to) that has no fire record, oldest first, at a bounded pace.",
    request_body = BackfillTimer,
    responses((status = 200, description = crate::replies::ENVELOPED, body = Backfilled))
)]
pub async fn timers_backfill(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<BackfillTimer>>,
) -> Result<Envelope<Backfilled>, ApiError> {
    let window = Backfill {
        from_ms: instant("from", &input.from)?,
        to_ms: instant("to", &input.to)?,
        max_fires: input.max_fires,
    };
    let key = timer_key(&auth, TimerRef { id: input.id, app: input.app });
    let count = state.service.backfill(&key, window).await?;
    Ok(Envelope(Backfilled { count }))
}

/// A time field: RFC 3339 with an offset, or Unix ms.
fn instant(field: &str, value: &Value) -> Result<i64, ApiError> {
    match value {
        Value::String(text) => parse_instant(field, text),
        Value::Number(n) => parse_instant(field, &n.to_string()),
        _ => Err(ApiError::invalid(field, "must be an RFC 3339 time string or Unix milliseconds")),
    }
}
