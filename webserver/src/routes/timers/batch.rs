//! `POST createTimers`: up to [`MAX_BATCH_TIMERS`] timers in one call, all
//! or none. Every item is checked as `createTimer` checks one; a bad item
//! is named by its index (`timers[3].cron: ...`), and every bad item is
//! reported in one 400. The batch is stored in one transaction and its
//! enabled timers are expanded together before the reply.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtimer_core::spec;
use xtimer_core::timer::NewTimer;

use crate::auth::authorize;
use crate::extract::{ApiJson, WithToken};
use crate::{ApiError, AppState, Envelope};

/// Most timers in one `createTimers` call.
pub const MAX_BATCH_TIMERS: usize = 1_000;

/// Body of `createTimers`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[schema(as = TimerBatch)]
#[serde(deny_unknown_fields)]
pub struct CreateTimers {
    /// The timers, each as `createTimer` takes it.
    #[schema(value_type = Vec<crate::routes::timers::input::CreateTimer>)]
    pub timers: Vec<Value>,
}

/// `{"ids": [...]}`: the new timers' ids, in input order.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TimerIds {
    /// One id per input timer.
    pub ids: Vec<i64>,
}

/// `POST createTimers`.
#[utoipa::path(
    post,
    path = "/createTimers",
    operation_id = "createTimers",
    summary = "Create up to 1000 timers, all or none.",
    request_body = CreateTimers,
    responses((status = 200, description = crate::replies::ENVELOPED, body = TimerIds))
)]
pub async fn timers_create_batch(
    State(state): State<AppState>,
    WithToken(input, auth): WithToken<ApiJson<CreateTimers>>,
) -> Result<Envelope<TimerIds>, ApiError> {
    let count = input.timers.len();
    if count == 0 || count > MAX_BATCH_TIMERS {
        return Err(ApiError::invalid("timers", format!("must hold 1 to {MAX_BATCH_TIMERS} timers, got {count}")));
    }
    let now = state.clock.now_ms();
    let timers = validate_all(&state, input.timers, now)?;
    for t in &timers {
        authorize(&auth, &t.app)?;
    }
    let ids = state.service.create_timers(&timers, &auth.actor()).await?;
    Ok(Envelope(TimerIds { ids }))
}

/// Every item checked on its own, then names unique within the batch; a
/// 400 naming each bad item by its index.
fn validate_all(state: &AppState, items: Vec<Value>, now: i64) -> Result<Vec<NewTimer>, ApiError> {
    let mut problems = Vec::new();
    let mut timers = Vec::with_capacity(items.len());
    for (i, value) in items.into_iter().enumerate() {
        match spec::read_item(i, value).map(|item| item.validate_with(now, &state.security.limits)) {
            Ok(Ok(timer)) => timers.push(timer),
            Ok(Err(invalid)) => problems.extend(invalid.prefixed(&format!("timers[{i}]."))),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        problems = spec::unique_names(&timers);
    }
    if problems.is_empty() {
        return Ok(timers);
    }
    Err(ApiError::Invalid(spec::listed_problems(problems)))
}
