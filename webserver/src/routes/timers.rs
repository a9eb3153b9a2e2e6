//! The timer routes, answered under `/api/xtimer/` and `/xtimer/`.
//!
//! A timer is only visible to the app it belongs to: an id of another app
//! answers 404 exactly as an unknown id does, so ids do not leak across
//! apps. A deleted timer is gone from every route: `getTimer`,
//! `enableTimer`, `unableTimer`, `delTimer` and `getTimerTasks` answer the
//! same 404 as for an unknown id, and `getAppTimers` leaves it out. The
//! store keeps its row (and its fires) and still returns it; the rule is
//! kept here, in [`live_timer`].
//!
//! With auth on, every route needs a bearer token (401 without a valid
//! one, before the input is read) of the app it names (403 otherwise), and
//! a timer of another app answers 403 instead of 404: the caller proved
//! who it is, so it is told why. Creating and enabling check the limits
//! (timers per app, fires per minute per app: counters the store keeps and
//! checks in the write's transaction, so concurrent calls on any node
//! cannot overshoot them) and the callback target policy. Concurrent
//! `createTimer` calls share a transaction ([`group_commit`]).

pub mod admin;
pub mod backfill;
pub mod batch;
pub mod group_commit;

pub mod input;
pub mod lifecycle;
pub mod preview;
pub mod view;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::Uri;
use axum::routing::{delete, get, post};
use axum::Router;
use xtimer_core::config::ServerConfig;
use xtimer_core::timer::{Notify, Schedule, Timer, TimerStatus};
use xtimer_store::{FireWindow, Quota, Refusal};

use self::input::{AppTimersQuery, CreateTimer, TimerRef, TimerTasksQuery};
use self::view::{FireView, List, TimerId, TimerView};
use crate::auth::{authorize, AuthContext, AuthError};
use crate::extract::{ApiJson, ApiQuery, QueryOrJson};
use crate::security::CREATE_RESOLVE_TIMEOUT;
use crate::{ApiError, AppState, Envelope};

/// The timer routes under `prefix` (`/api/xtimer` or `/xtimer`); a batch
/// call's body may be up to `config.max_batch_body_bytes`.
pub fn routes(prefix: &str, config: &ServerConfig) -> Router<AppState> {
    let batch_limit = DefaultBodyLimit::max(config.max_batch_body_bytes);
    Router::new()
        .route(&format!("{prefix}/createTimer"), post(timers_create))
        .route(&format!("{prefix}/createTimers"), post(batch::timers_create_batch).layer(batch_limit))
        .route(&format!("{prefix}/enableTimer"), get(timers_enable))
        .route(&format!("{prefix}/unableTimer"), get(timers_disable))
        .route(&format!("{prefix}/delTimer"), delete(timers_delete))
        .route(&format!("{prefix}/getTimer"), get(timers_get))
        .route(&format!("{prefix}/getAppTimers"), get(timers_list))
        .route(&format!("{prefix}/getTimerTasks"), get(timer_tasks_list))
        .route(&format!("{prefix}/updateTimer"), post(lifecycle::timers_update))
        .route(&format!("{prefix}/triggerTimer"), post(lifecycle::timers_trigger))
        .route(&format!("{prefix}/backfillTimer"), post(backfill::timers_backfill))
        .route(&format!("{prefix}/previewCron"), get(preview::cron_preview))
        .route(&format!("{prefix}/admin/issueToken"), post(admin::tokens_issue))
}

/// `POST createTimer`: validates and stores a timer; with `status: 2` it is
/// enabled and expanded into its fires before the reply, so a timer due in
/// a moment fires on time.
pub async fn timers_create(
    State(state): State<AppState>,
    auth: AuthContext,
    input: Result<ApiJson<CreateTimer>, ApiError>,
) -> Result<Envelope<TimerId>, ApiError> {
    auth.require_token()?;
    let ApiJson(input) = input?;
    authorize(&auth, &input.app)?;
    let now = state.clock.now_ms();
    let new = input.validate_with(now, &state.security.limits)?;
    match &new.notify {
        Notify::Http(notify) => check_target(&state, &notify.url).await?,
        Notify::Asyncflow(task) => check_task_type(&state, &new.app, &task.task_type).await?,
    }
    if let Some(notify) = &new.on_failure {
        check_target(&state, &notify.url).await.map_err(lifecycle::on_failure_field)?;
    }
    let timer = state.creates().create(&state, new).await?;
    Ok(Envelope(TimerId { id: timer.id }))
}

/// `GET enableTimer`: enables a timer and expands it into its fires before
/// the reply. Enabling an enabled timer is a no-op that succeeds.
pub async fn timers_enable(
    State(state): State<AppState>,
    auth: AuthContext,
    r: Result<ApiQuery<TimerRef>, ApiError>,
) -> Result<Envelope<TimerId>, ApiError> {
    let r = authorized(&auth, r)?;
    let mut timer = live_timer(&state, &auth, &r).await?;
    let now = state.clock.now_ms();
    match state.timers.set_status_within(r.id, TimerStatus::Enabled, now, &quota(&state)).await {
        Ok(true) => {}
        Ok(false) => return Err(not_found(&r)),
        Err(xtimer_store::Error::Refused { app, refusal, .. }) => {
            return Err(refusal_error(&app, refusal, schedule_field(&timer.schedule), None))
        }
        Err(err) => return Err(err.into()),
    }
    // As stored now: a one-shot's definition is handed to its fire as it
    // is, and one older than the stored change would not be used.
    timer.status = TimerStatus::Enabled;
    timer.modify_time = now;
    timer.pause_reason = None;
    state.expander.expand_timer(&timer).await?;
    Ok(Envelope(TimerId { id: timer.id }))
}

/// `GET unableTimer`: disables a timer. Its pending fires are skipped, not
/// fired, when their time comes.
pub async fn timers_disable(
    State(state): State<AppState>,
    auth: AuthContext,
    r: Result<ApiQuery<TimerRef>, ApiError>,
) -> Result<Envelope<TimerId>, ApiError> {
    let r = authorized(&auth, r)?;
    live_timer(&state, &auth, &r).await?;
    set_status(&state, &r, TimerStatus::Disabled).await?;
    Ok(Envelope(TimerId { id: r.id }))
}

/// `DELETE delTimer` (query or JSON body `id`, `app`): deletes a timer; its
/// name is free again. From then on every route answers 404 for it, as
/// for an unknown id (a second delete too).
pub async fn timers_delete(
    State(state): State<AppState>,
    auth: AuthContext,
    r: Result<QueryOrJson<TimerRef>, ApiError>,
) -> Result<Envelope<TimerId>, ApiError> {
    auth.require_token()?;
    let QueryOrJson(r) = r?;
    authorize(&auth, &r.app)?;
    live_timer(&state, &auth, &r).await?;
    set_status(&state, &r, TimerStatus::Deleted).await?;
    Ok(Envelope(TimerId { id: r.id }))
}

/// `GET getTimer`: one timer that is not deleted (status 1 or 2).
pub async fn timers_get(
    State(state): State<AppState>,
    auth: AuthContext,
    r: Result<ApiQuery<TimerRef>, ApiError>,
) -> Result<Envelope<TimerView>, ApiError> {
    let r = authorized(&auth, r)?;
    let timer = live_timer(&state, &auth, &r).await?;
    Ok(Envelope(TimerView::at(&timer, state.clock.now_ms())))
}

/// `GET getAppTimers`: a page of an app's timers that are not deleted, by id.
pub async fn timers_list(
    State(state): State<AppState>,
    auth: AuthContext,
    q: Result<ApiQuery<AppTimersQuery>, ApiError>,
) -> Result<Envelope<List<TimerView>>, ApiError> {
    auth.require_token()?;
    let ApiQuery(q) = q?;
    authorize(&auth, &q.app)?;
    let page = q.validate()?;
    let (timers, total) = state.timers.list_app_timers(&q.app, page.offset, page.limit).await?;
    let now = state.clock.now_ms();
    Ok(Envelope(List { list: timers.iter().map(|t| TimerView::at(t, now)).collect(), total }))
}

/// `GET getTimerTasks`: a page of a timer's fires already due, newest
/// first, or with `upcoming=true` its planned ones, soonest first;
/// optionally of one status; a 404 once the timer is deleted.
pub async fn timer_tasks_list(
    State(state): State<AppState>,
    auth: AuthContext,
    q: Result<ApiQuery<TimerTasksQuery>, ApiError>,
) -> Result<Envelope<List<FireView>>, ApiError> {
    auth.require_token()?;
    let ApiQuery(q) = q?;
    authorize(&auth, &q.app)?;
    let (status, page) = q.validate()?;
    live_timer(&state, &auth, &TimerRef { id: q.id, app: q.app }).await?;
    let now = state.clock.now_ms();
    let window = if q.upcoming == Some(true) { FireWindow::UpcomingAfter(now) } else { FireWindow::DueBy(now) };
    let (fires, total) = state.fires.list_fires_in(q.id, status, window, page.offset, page.limit).await?;
    Ok(Envelope(List { list: fires.iter().map(FireView::from).collect(), total }))
}

/// A timer reference read after the caller showed a valid token (401
/// first), checked to name the caller's app (403).
fn authorized(auth: &AuthContext, r: Result<ApiQuery<TimerRef>, ApiError>) -> Result<TimerRef, ApiError> {
    auth.require_token()?;
    let ApiQuery(r) = r?;
    authorize(auth, &r.app)?;
    Ok(r)
}

/// The timer `r` names, if it is not deleted and belongs to `r.app`. A
/// deleted timer (of any app) and an unknown id are the same 404; another
/// app's timer is that 404 too with auth off (ids do not leak across apps)
/// and a 403 with auth on.
async fn live_timer(state: &AppState, auth: &AuthContext, r: &TimerRef) -> Result<Timer, ApiError> {
    r.validate()?;
    match state.timers.get_timer(r.id).await? {
        Some(timer) if timer.status == TimerStatus::Deleted => Err(not_found(r)),
        Some(timer) if timer.app == r.app => Ok(timer),
        Some(timer) if auth.enabled() => {
            Err(AuthError::Forbidden(format!("timer {} belongs to another app than `{}`", timer.id, r.app)).into())
        }
        _ => Err(not_found(r)),
    }
}

/// A timer [`live_timer`] found that must be enabled to `verb` it
/// (trigger, backfill): a 400 naming its status otherwise.
async fn enabled_timer(state: &AppState, auth: &AuthContext, r: &TimerRef, verb: &str) -> Result<Timer, ApiError> {
    let timer = live_timer(state, auth, r).await?;
    if timer.status != TimerStatus::Enabled {
        return Err(ApiError::invalid(
            "id",
            format!("timer {} is not enabled (status {}): enable it to {verb} it", timer.id, timer.status.code()),
        ));
    }
    Ok(timer)
}

/// The one 404 of a timer that is unknown, deleted or (auth off) another app's.
fn not_found(r: &TimerRef) -> ApiError {
    ApiError::TimerNotFound { id: r.id, app: r.app.clone() }
}

/// Sets the status of a timer [`live_timer`] found; a 404 if it was deleted
/// in between (the store refuses to change a deleted timer).
async fn set_status(state: &AppState, r: &TimerRef, status: TimerStatus) -> Result<(), ApiError> {
    if state.timers.set_timer_status(r.id, status, state.clock.now_ms()).await? {
        Ok(())
    } else {
        Err(not_found(r))
    }
}

/// 400 when the callback URL's host is, or resolves to, an address the
/// target policy refuses.
pub(crate) async fn check_target(state: &AppState, url: &str) -> Result<(), ApiError> {
    let Some(host) = url.parse::<Uri>().ok().and_then(|u| u.host().map(str::to_owned)) else { return Ok(()) };
    let policy = &state.security.policy;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let checked = if state.security.resolve_at_create || bare.parse::<std::net::IpAddr>().is_ok() {
        policy.check_host(&host, CREATE_RESOLVE_TIMEOUT).await
    } else {
        Ok(())
    };
    checked.map_err(|refusal| ApiError::invalid("notifyHTTPParam.url", refusal))
}

/// 400 unless `task_type` is registered with the task API and owned by
/// `app` or by no app.
pub(crate) async fn check_task_type(state: &AppState, app: &str, task_type: &str) -> Result<(), ApiError> {
    const FIELD: &str = "notifyAsyncflowParam.taskType";
    let tasks = state.tasks.as_ref().ok_or_else(|| ApiError::invalid(FIELD, "the task API is not enabled"))?;
    match tasks.owner_of(task_type).await {
        Ok(Some(owner)) if owner != app => {
            Err(ApiError::invalid(FIELD, format!("task type `{task_type}` belongs to another app than `{app}`")))
        }
        Ok(_) => Ok(()),
        Err(err) if err.is_caller_fault() => Err(ApiError::invalid(FIELD, err)),
        Err(err) => Err(ApiError::Tasks(err)),
    }
}

/// The create-time limits as the store checks them.
pub(crate) fn quota(state: &AppState) -> Quota {
    let limits = &state.security.limits;
    Quota { timers_per_app: limits.timers_per_app, fires_per_minute_per_app: limits.fires_per_minute_per_app }
}

/// The input field a schedule came from.
pub(crate) fn schedule_field(schedule: &Schedule) -> &'static str {
    match schedule {
        Schedule::Once { .. } => "runAt",
        Schedule::Cron { .. } => "cron",
    }
}

/// The reply to a limit the store refused a timer by: 429 for the timers
/// per app, 400 naming `field` for the fires per minute; `item` is the
/// timer's index in a batch.
pub(crate) fn refusal_error(app: &str, refusal: Refusal, field: &str, item: Option<usize>) -> ApiError {
    let at = item.map(|i| format!("timers[{i}].")).unwrap_or_default();
    match refusal {
        Refusal::NameTaken => {
            ApiError::Invalid(format!("{at}name: another timer of app `{app}` has this name (or an earlier item)"))
        }
        Refusal::TooManyTimers { has, max, .. } if item.is_none() => ApiError::LimitExceeded {
            msg: format!(
                "app `{app}` has {has} timers, the most it may have (limits.timers_per_app = {max}): delete some first"
            ),
            retry_after: None,
        },
        Refusal::TooManyTimers { has, adding, max } => ApiError::LimitExceeded {
            msg: format!(
                "app `{app}` has {has} timers and this batch adds {adding}, more than it may have \
                 (limits.timers_per_app = {max}): delete some first or send fewer"
            ),
            retry_after: None,
        },
        Refusal::TooManyFires { fires, own, max } => {
            let whose = if own > max {
                format!("this timer alone would fire {own} times in a minute")
            } else {
                format!("this timer with the app's enabled timers would fire up to {fires} times in a minute")
            };
            ApiError::Invalid(format!(
                "{at}{field}: {whose}, more than app `{app}` may (limits.fires_per_minute_per_app = {max})"
            ))
        }
    }
}
