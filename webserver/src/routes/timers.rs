//! The timer routes, answered under `/api/xtimer/` and `/xtimer/`.
//!
//! Each handler extracts its input, authorizes the caller, calls one
//! method of the [`xtimer_service::TimerService`] and maps its result to
//! the envelope (its errors through `From<ServiceError> for ApiError`).
//!
//! A timer is only visible to the app it belongs to: an id of another app
//! answers 404 exactly as an unknown id does, so ids do not leak across
//! apps. A deleted timer is gone from every route: `getTimer`,
//! `enableTimer`, `unableTimer`, `delTimer` and `getTimerTasks` answer the
//! same 404 as for an unknown id, and `getAppTimers` leaves it out. The
//! store keeps its row (and its fires) and still returns it; the rule is
//! kept in the service ([`xtimer_service::TimerService::get`]).
//!
//! With auth on, every route needs a bearer token (401 without a valid
//! one, before the input is read) of the app it names (403 otherwise), and
//! a timer of another app answers 403 instead of 404: the caller proved
//! who it is, so it is told why. Creating and enabling check the limits
//! (timers per app, fires per minute per app: counters the store keeps and
//! checks in the write's transaction, so concurrent calls on any node
//! cannot overshoot them) and the callback target policy. Concurrent
//! `createTimer` calls share a transaction (the service's group commit).

pub mod admin;
pub mod apply;
pub mod backfill;
pub mod batch;
pub mod explain;
pub mod flows;

pub mod input;
mod key;
pub mod lifecycle;
pub mod many;
pub mod preview;
pub mod view;
pub mod when;

use axum::extract::{DefaultBodyLimit, State};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;
use xtimer_core::config::ServerConfig;
use xtimer_service::many::Search;

use self::input::{AppTimersQuery, CreateTimer, TimerRef, TimerTasksQuery};
pub(crate) use self::key::timer_key;
use self::view::{FireView, List, TimerCreated, TimerId, TimerView};
use crate::extract::{ApiJson, ApiQuery, ForApp, QueryOrJson};
use crate::prefixes::under;
use crate::{ApiError, AppState, Envelope};

/// The timer routes under `prefix` (`/api/xtimer` or `/xtimer`, the
/// `alias`: see [`crate::prefixes::under`]); a batch call's body may be up to
/// `config.max_batch_body_bytes`.
pub fn routes(prefix: &str, alias: bool, config: &ServerConfig) -> OpenApiRouter<AppState> {
    let batch_limit = DefaultBodyLimit::max(config.max_batch_body_bytes);
    let at = |routes| under(prefix, alias, routes);
    OpenApiRouter::new()
        .routes(at(routes!(timers_create)))
        .routes(at(routes!(batch::timers_create_batch)).layer(batch_limit))
        .routes(at(routes!(apply::timers_apply)).layer(batch_limit))
        .routes(at(routes!(timers_enable)))
        .routes(at(routes!(timers_disable)))
        .routes(at(routes!(timers_delete)))
        .routes(at(routes!(timers_get)))
        .routes(at(routes!(timers_list)))
        .routes(at(routes!(timer_tasks_list)))
        .routes(at(routes!(lifecycle::timers_update)))
        .routes(at(routes!(lifecycle::timers_trigger)))
        .routes(at(routes!(backfill::timers_backfill)))
        .routes(at(routes!(preview::cron_preview)))
        .routes(at(routes!(admin::tokens_issue)))
        .routes(at(routes!(when::calendar_put)))
        .routes(at(routes!(when::calendar_get)))
        .routes(at(routes!(when::calendars_list)))
        .routes(at(routes!(when::calendar_delete)))
        .routes(at(routes!(when::forecast)))
        .routes(at(routes!(many::apps_list)))
        .routes(at(routes!(many::timers_bulk)))
        .routes(at(routes!(many::app_pause)))
        .routes(at(routes!(many::app_resume)))
        .routes(at(routes!(many::timer_history)))
        .routes(at(routes!(explain::fire_explain)))
        .routes(at(routes!(many::fires_replay)))
        .routes(at(routes!(flows::flow_set)))
        .routes(at(routes!(flows::flows_list)))
        .routes(at(routes!(flows::flow_delete)))
}

/// `POST createTimer`: validates and stores a timer; with `status: 2` it is
/// enabled and expanded into its fires before the reply, so a timer due in
/// a moment fires on time. A one-shot whose `dedupeKey` a live timer of
/// the app holds does as its `onDuplicate` says: 409 with the holder's id
/// (`reject`), the holder's id (`keep`), or the holder made of this
/// definition (`replace`).
#[utoipa::path(
    post,
    path = "/createTimer",
    operation_id = "createTimer",
    summary = "Create a timer (status 2: enabled at once).",
    request_body = input::CreateTimer,
    responses((status = 200, description = crate::replies::ENVELOPED, body = view::TimerCreated))
)]
pub async fn timers_create(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<CreateTimer>>,
) -> Result<Envelope<TimerCreated>, ApiError> {
    let new = input.validate_with(state.clock.now_ms(), &state.security.limits)?;
    let created = state.service.create_or_dedupe(new, &auth.actor()).await?;
    Ok(Envelope(TimerCreated::of(&created)))
}

/// `GET enableTimer`: enables a timer and expands it into its fires before
/// the reply. Enabling an enabled timer is a no-op that succeeds.
#[utoipa::path(
    get,
    path = "/enableTimer",
    operation_id = "enableTimer",
    summary = "Enable a timer.",
    params(input::TimerRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = view::TimerId))
)]
pub async fn timers_enable(
    State(state): State<AppState>,
    ForApp(r, auth): ForApp<ApiQuery<TimerRef>>,
) -> Result<Envelope<TimerId>, ApiError> {
    let key = timer_key(&auth, r);
    let timer = state.service.enable(&key).await?;
    Ok(Envelope(TimerId { id: timer.id }))
}

/// `GET unableTimer`: disables a timer. Its pending fires are skipped, not
/// fired, when their time comes.
#[utoipa::path(
    get,
    path = "/unableTimer",
    operation_id = "unableTimer",
    summary = "Disable a timer.",
    params(input::TimerRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = view::TimerId))
)]
pub async fn timers_disable(
    State(state): State<AppState>,
    ForApp(r, auth): ForApp<ApiQuery<TimerRef>>,
) -> Result<Envelope<TimerId>, ApiError> {
    let key = timer_key(&auth, r);
    state.service.disable(&key).await?;
    Ok(Envelope(TimerId { id: key.id }))
}

/// `DELETE delTimer` (query or JSON body `id`, `app`): deletes a timer; its
/// name is free again. From then on every route answers 404 for it, as
/// for an unknown id (a second delete too).
#[utoipa::path(
    delete,
    path = "/delTimer",
    operation_id = "delTimer",
    summary = "Delete a timer.",
    params(input::TimerRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = view::TimerId))
)]
pub async fn timers_delete(
    State(state): State<AppState>,
    ForApp(r, auth): ForApp<QueryOrJson<TimerRef>>,
) -> Result<Envelope<TimerId>, ApiError> {
    let key = timer_key(&auth, r);
    state.service.delete(&key).await?;
    Ok(Envelope(TimerId { id: key.id }))
}

/// `GET getTimer`: one timer that is not deleted (status 1 or 2), with its
/// `stats` over the last 24 hours.
#[utoipa::path(
    get,
    path = "/getTimer",
    operation_id = "getTimer",
    summary = "One timer, with its next fire when enabled.",
    params(input::TimerRef),
    responses((status = 200, description = crate::replies::ENVELOPED, body = view::TimerView))
)]
pub async fn timers_get(
    State(state): State<AppState>,
    ForApp(r, auth): ForApp<ApiQuery<TimerRef>>,
) -> Result<Envelope<TimerView>, ApiError> {
    let detail = state.service.detail(&timer_key(&auth, r)).await?;
    let mut view = TimerView::at(&detail.timer, detail.next_fire);
    view.facts.fires_left = detail.fires_left;
    view.facts.stats = Some(detail.stats);
    Ok(Envelope(view))
}

/// `GET getAppTimers`: a page of an app's timers that are not deleted and
/// match the search (`q` in the name, `status`, a label `selector`), by
/// id; `total` counts the matches.
#[utoipa::path(
    get,
    path = "/getAppTimers",
    operation_id = "getAppTimers",
    summary = "A page of an app's timers matching a search (name, status, label selector).",
    params(input::AppTimersQuery),
    responses((status = 200, description = crate::replies::ENVELOPED, body = view::List<view::TimerView>))
)]
pub async fn timers_list(
    State(state): State<AppState>,
    ForApp(q, _): ForApp<ApiQuery<AppTimersQuery>>,
) -> Result<Envelope<List<TimerView>>, ApiError> {
    let page = q.validate()?;
    let search = Search { q: q.q.clone(), status: q.status, selector: q.selector.clone(), ids: None };
    let found = state.service.page(&q.app, &search, page).await?;
    let list = found.timers.iter().map(|(timer, next)| TimerView::at(timer, *next)).collect();
    Ok(Envelope(List { list, total: found.total }))
}

/// `GET getTimerTasks`: a page of a timer's fires already due, newest
/// first, or with `upcoming=true` its planned ones, soonest first;
/// optionally of one status; a 404 once the timer is deleted.
#[utoipa::path(
    get,
    path = "/getTimerTasks",
    operation_id = "getTimerTasks",
    summary = "A timer's fires: due ones newest first, or upcoming ones soonest first.",
    params(input::TimerTasksQuery),
    responses((status = 200, description = crate::replies::ENVELOPED, body = view::List<view::FireView>))
)]
pub async fn timer_tasks_list(
    State(state): State<AppState>,
    ForApp(q, auth): ForApp<ApiQuery<TimerTasksQuery>>,
) -> Result<Envelope<List<FireView>>, ApiError> {
    let (status, page) = q.validate()?;
    let upcoming = q.upcoming == Some(true);
    let key = timer_key(&auth, TimerRef { id: q.id, app: q.app });
    let (fires, total) = state.service.fires(&key, status, upcoming, page).await?;
    Ok(Envelope(List { list: fires.iter().map(FireView::from).collect(), total }))
}
