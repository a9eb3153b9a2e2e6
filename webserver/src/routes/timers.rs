//! The timer routes, answered under `/api/xtimer/` and `/xtimer/`.
//!
//! A timer is only visible to the app it belongs to: an id of another app
//! answers 404 exactly as an unknown id does, so ids do not leak across
//! apps. Deleted timers stay readable (`getTimer`, `getTimerTasks`: their
//! fire history is kept) but can no longer change (404).

pub mod input;
pub mod view;

use axum::extract::State;
use axum::routing::{delete, get, post};
use axum::Router;
use xtimer_core::timer::{Timer, TimerStatus};

use self::input::{AppTimersQuery, CreateTimer, TimerRef, TimerTasksQuery};
use self::view::{FireView, List, TimerId, TimerView};
use crate::error::error_chain;
use crate::extract::{ApiJson, ApiQuery, QueryOrJson};
use crate::{ApiError, AppState, Envelope};

/// The timer routes under `prefix` (`/api/xtimer` or `/xtimer`).
pub fn routes(prefix: &str) -> Router<AppState> {
    Router::new()
        .route(&format!("{prefix}/createTimer"), post(timers_create))
        .route(&format!("{prefix}/enableTimer"), get(timers_enable))
        .route(&format!("{prefix}/unableTimer"), get(timers_disable))
        .route(&format!("{prefix}/delTimer"), delete(timers_delete))
        .route(&format!("{prefix}/getTimer"), get(timers_get))
        .route(&format!("{prefix}/getAppTimers"), get(timers_list))
        .route(&format!("{prefix}/getTimerTasks"), get(timer_tasks_list))
}

/// `POST createTimer`: validates and stores a timer; with `status: 2` it is
/// enabled and expanded into its fires before the reply, so a timer due in
/// a moment fires on time.
pub async fn timers_create(
    State(state): State<AppState>,
    ApiJson(input): ApiJson<CreateTimer>,
) -> Result<Envelope<TimerId>, ApiError> {
    let now = state.clock.now_ms();
    let new = input.validate(now)?;
    let timer = state.timers.create_timer(&new, now).await?;
    if timer.status == TimerStatus::Enabled {
        if let Err(err) = state.migrator.expand_timer(&timer).await {
            // Answer as if nothing was created, and make that true: a
            // caller seeing a 500 retries, and a kept timer would turn the
            // retry into a 409 while this one (say, a one-shot whose time
            // passes before the migrator's next step) might never fire.
            let undo = state.timers.set_timer_status(timer.id, TimerStatus::Deleted, state.clock.now_ms()).await;
            if let Err(undo) = undo {
                tracing::error!(
                    timer_id = timer.id,
                    error = %error_chain(&undo),
                    "Deleting a timer whose expansion failed failed too; the migrator's next step expands it."
                );
            }
            return Err(err.into());
        }
    }
    Ok(Envelope(TimerId { id: timer.id }))
}

/// `GET enableTimer`: enables a timer and expands it into its fires before
/// the reply. Enabling an enabled timer is a no-op that succeeds.
pub async fn timers_enable(
    State(state): State<AppState>,
    ApiQuery(r): ApiQuery<TimerRef>,
) -> Result<Envelope<TimerId>, ApiError> {
    let mut timer = live_timer(&state, &r).await?;
    set_status(&state, &r, TimerStatus::Enabled).await?;
    timer.status = TimerStatus::Enabled;
    state.migrator.expand_timer(&timer).await?;
    Ok(Envelope(TimerId { id: timer.id }))
}

/// `GET unableTimer`: disables a timer. Its pending fires are skipped, not
/// fired, when their time comes.
pub async fn timers_disable(
    State(state): State<AppState>,
    ApiQuery(r): ApiQuery<TimerRef>,
) -> Result<Envelope<TimerId>, ApiError> {
    live_timer(&state, &r).await?;
    set_status(&state, &r, TimerStatus::Disabled).await?;
    Ok(Envelope(TimerId { id: r.id }))
}

/// `DELETE delTimer` (query or JSON body `id`, `app`): deletes a timer; its
/// name is free again, its fire history is kept.
pub async fn timers_delete(
    State(state): State<AppState>,
    QueryOrJson(r): QueryOrJson<TimerRef>,
) -> Result<Envelope<TimerId>, ApiError> {
    live_timer(&state, &r).await?;
    set_status(&state, &r, TimerStatus::Deleted).await?;
    Ok(Envelope(TimerId { id: r.id }))
}

/// `GET getTimer`: one timer, deleted ones included (status 3).
pub async fn timers_get(
    State(state): State<AppState>,
    ApiQuery(r): ApiQuery<TimerRef>,
) -> Result<Envelope<TimerView>, ApiError> {
    let timer = owned_timer(&state, &r).await?;
    Ok(Envelope(TimerView::from(&timer)))
}

/// `GET getAppTimers`: a page of an app's timers that are not deleted, by id.
pub async fn timers_list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<AppTimersQuery>,
) -> Result<Envelope<List<TimerView>>, ApiError> {
    let page = q.validate()?;
    let (timers, total) = state.timers.list_app_timers(&q.app, page.offset, page.limit).await?;
    Ok(Envelope(List { list: timers.iter().map(TimerView::from).collect(), total }))
}

/// `GET getTimerTasks`: a page of a timer's fires, latest run time first,
/// optionally of one status.
pub async fn timer_tasks_list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<TimerTasksQuery>,
) -> Result<Envelope<List<FireView>>, ApiError> {
    let (status, page) = q.validate()?;
    owned_timer(&state, &TimerRef { id: q.id, app: q.app }).await?;
    let (fires, total) = state.fires.list_fires(q.id, status, page.offset, page.limit).await?;
    Ok(Envelope(List { list: fires.iter().map(FireView::from).collect(), total }))
}

/// The timer `r` names, if it belongs to `r.app`; deleted ones included.
async fn owned_timer(state: &AppState, r: &TimerRef) -> Result<Timer, ApiError> {
    r.validate()?;
    match state.timers.get_timer(r.id).await? {
        Some(timer) if timer.app == r.app => Ok(timer),
        _ => Err(ApiError::TimerNotFound { id: r.id, app: r.app.clone() }),
    }
}

/// The timer `r` names, if it belongs to `r.app` and is not deleted.
async fn live_timer(state: &AppState, r: &TimerRef) -> Result<Timer, ApiError> {
    let timer = owned_timer(state, r).await?;
    if timer.status == TimerStatus::Deleted {
        return Err(ApiError::TimerDeleted { id: r.id, app: r.app.clone() });
    }
    Ok(timer)
}

/// Sets the status of a timer [`live_timer`] found; a 404 if it was deleted
/// in between (the store refuses to change a deleted timer).
async fn set_status(state: &AppState, r: &TimerRef, status: TimerStatus) -> Result<(), ApiError> {
    if state.timers.set_timer_status(r.id, status, state.clock.now_ms()).await? {
        Ok(())
    } else {
        Err(ApiError::TimerDeleted { id: r.id, app: r.app.clone() })
    }
}
