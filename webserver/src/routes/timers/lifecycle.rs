//! Changing a timer after it was made: `updateTimer` (a new definition,
//! history kept) and `triggerTimer` (one extra fire now).

use axum::extract::State;
use serde::{Deserialize, Serialize};
use xtimer_core::spec::TimerPatch;

use super::input::TimerRef;
use super::timer_key;
use super::view::TimerView;
use crate::extract::{ApiJson, ForApp, QueryOrJson};
use crate::{ApiError, AppState, Envelope};

crate::of_app!(UpdateTimer);

/// Body of `updateTimer`: the timer's `id` and `app`, and the fields to
/// change ([`TimerPatch`]: an absent field keeps its value, `null` clears
/// an optional one, an object field is replaced whole; giving `cron`,
/// `runAt` or `everyMs` changes the kind of schedule).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[schema(as = TimerUpdate)]
pub struct UpdateTimer {
    /// The timer to change.
    pub id: i64,
    /// The app it belongs to (it cannot change).
    pub app: String,
    /// The fields to change.
    #[serde(flatten)]
    pub patch: TimerPatch,
}

/// `POST updateTimer`: changes any of a timer's fields, validated as
/// `createTimer` validates them, and answers the timer as it is now. Its
/// scheduled fires not yet claimed are made again from the new definition
/// before the reply (none fires at an old time after it, none is lost at a
/// new time); fires already made, manual ones and the history stay.
#[utoipa::path(
    post,
    path = "/updateTimer",
    operation_id = "updateTimer",
    summary = "Change a timer's fields (absent ones keep their value); fires not yet claimed follow the new definition.",
    request_body = UpdateTimer,
    responses((status = 200, description = crate::replies::ENVELOPED, body = super::view::TimerView))
)]
pub async fn timers_update(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<UpdateTimer>>,
) -> Result<Envelope<TimerView>, ApiError> {
    let key = timer_key(&auth, TimerRef { id: input.id, app: input.app.clone() });
    let timer = state.service.update_with(&key, &input.patch, &state.security.limits).await?;
    let next = state.service.next_fire(&timer, state.clock.now_ms()).await?;
    Ok(Envelope(TimerView::at(&timer, next)))
}

/// `{"runTimer": ms}`: the reply of `triggerTimer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Triggered {
    /// The run time of the manual fire, Unix ms.
    pub run_timer: i64,
}

/// `POST triggerTimer` (query or JSON body `id`, `app`): one extra fire of
/// an enabled timer, now, recorded like any other with `manual: true` and
/// sent with its own `Idempotency-Key` (`{id}_{runTimer}_manual`). The
/// schedule is left as it is.
#[utoipa::path(
    post,
    path = "/triggerTimer",
    operation_id = "triggerTimer",
    summary = "One extra fire now, marked manual.",
    params(super::input::TimerRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = Triggered))
)]
pub async fn timers_trigger(
    State(state): State<AppState>,
    ForApp(r, auth): ForApp<QueryOrJson<TimerRef>>,
) -> Result<Envelope<Triggered>, ApiError> {
    let run_timer = state.service.trigger(&timer_key(&auth, r)).await?;
    Ok(Envelope(Triggered { run_timer }))
}
