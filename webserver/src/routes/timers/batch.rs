//! `POST createTimers`: up to [`MAX_BATCH_TIMERS`] timers in one call, all
//! or none. Every item is checked as `createTimer` checks one; a bad item
//! is named by its index (`timers[3].cron: ...`), and every bad item is
//! reported in one 400. The batch is stored in one transaction and its
//! enabled timers are expanded together before the reply.

use std::collections::{BTreeMap, HashMap};

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtimer_core::timer::{NewTimer, Notify, TimerStatus};

use super::input::CreateTimer;
use super::{check_target, check_task_type, quota, refusal_error, schedule_field};
use crate::auth::{authorize, AuthContext};
use crate::error::error_chain;
use crate::extract::ApiJson;
use crate::{ApiError, AppState, Envelope};

/// Most timers in one `createTimers` call.
pub const MAX_BATCH_TIMERS: usize = 1_000;

/// Most item problems one 400 lists.
const MAX_LISTED_PROBLEMS: usize = 20;

/// Body of `createTimers`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTimers {
    /// The timers, each as `createTimer` takes it.
    pub timers: Vec<Value>,
}

/// `{"ids": [...]}`: the new timers' ids, in input order.
#[derive(Debug, Serialize)]
pub struct TimerIds {
    /// One id per input timer.
    pub ids: Vec<i64>,
}

/// `POST createTimers`.
pub async fn timers_create_batch(
    State(state): State<AppState>,
    auth: AuthContext,
    input: Result<ApiJson<CreateTimers>, ApiError>,
) -> Result<Envelope<TimerIds>, ApiError> {
    auth.require_token()?;
    let ApiJson(input) = input?;
    let count = input.timers.len();
    if count == 0 || count > MAX_BATCH_TIMERS {
        return Err(ApiError::invalid("timers", format!("must hold 1 to {MAX_BATCH_TIMERS} timers, got {count}")));
    }
    let now = state.clock.now_ms();
    let timers = validate_all(&state, input.timers, now)?;
    for t in &timers {
        authorize(&auth, &t.app)?;
    }
    check_targets(&state, &timers).await?;

    let ids = match state.timers.create_timers_within(&timers, now, &quota(&state)).await {
        Ok(ids) => ids,
        Err(xtimer_store::Error::Refused { app, index, refusal }) => {
            return Err(refusal_error(&app, refusal, schedule_field(&timers[index].schedule), Some(index)))
        }
        Err(err) => return Err(err.into()),
    };
    let enabled: Vec<_> = timers
        .iter()
        .zip(&ids)
        .filter(|(t, _)| t.status == TimerStatus::Enabled)
        .map(|(t, id)| t.stored(*id, now))
        .collect();
    if let Err(err) = state.expander.expand_created(&enabled).await {
        // As createTimer: answer as if nothing was created, and make that true.
        for id in &ids {
            if let Err(undo) = state.timers.set_timer_status(*id, TimerStatus::Deleted, state.clock.now_ms()).await {
                tracing::error!(timer_id = id, error = %error_chain(&undo), "Deleting a timer of a failed batch failed.");
            }
        }
        return Err(err.into());
    }
    Ok(Envelope(TimerIds { ids }))
}

/// Every item checked on its own, then names unique within the batch; a
/// 400 naming each bad item by its index.
fn validate_all(state: &AppState, items: Vec<Value>, now: i64) -> Result<Vec<NewTimer>, ApiError> {
    let mut problems = Vec::new();
    let mut timers = Vec::with_capacity(items.len());
    for (i, value) in items.into_iter().enumerate() {
        if !value.is_object() {
            problems.push(format!("timers[{i}]: must be a JSON object (a timer as createTimer takes it)"));
            continue;
        }
        let item = match serde_json::from_value::<CreateTimer>(value) {
            Ok(item) => item,
            Err(err) => {
                problems.push(format!("timers[{i}]: {err}"));
                continue;
            }
        };
        match item.validate_with(now, &state.security.limits) {
            Ok(timer) => timers.push(timer),
            Err(ApiError::Invalid(msg)) => problems.extend(msg.split("; ").map(|m| format!("timers[{i}].{m}"))),
            Err(other) => return Err(other),
        }
    }
    if problems.is_empty() {
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, t) in timers.iter().enumerate() {
            if let Some(j) = first.insert((t.app.as_str(), t.name.as_str()), i) {
                problems
                    .push(format!("timers[{i}].name: `{}` is also the name of timers[{j}] in app `{}`", t.name, t.app));
            }
        }
    }
    if problems.is_empty() {
        return Ok(timers);
    }
    let more = problems.len().saturating_sub(MAX_LISTED_PROBLEMS);
    problems.truncate(MAX_LISTED_PROBLEMS);
    if more > 0 {
        problems.push(format!("and {more} more problems"));
    }
    Err(ApiError::Invalid(problems.join("; ")))
}

/// The callback target policy for each distinct URL, and the task type of
/// each distinct (app, type), naming the first item that uses it.
async fn check_targets(state: &AppState, timers: &[NewTimer]) -> Result<(), ApiError> {
    let mut urls: BTreeMap<&str, usize> = BTreeMap::new();
    let mut types: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (i, t) in timers.iter().enumerate() {
        match &t.notify {
            Notify::Http(n) => {
                urls.entry(n.url.as_str()).or_insert(i);
            }
            Notify::Asyncflow(task) => {
                types.entry((t.app.as_str(), task.task_type.as_str())).or_insert(i);
            }
        }
    }
    let at = |i: usize| {
        move |err: ApiError| match err {
            ApiError::Invalid(msg) => ApiError::Invalid(format!("timers[{i}].{msg}")),
            other => other,
        }
    };
    for (url, i) in urls {
        check_target(state, url).await.map_err(at(i))?;
    }
    for ((app, task_type), i) in types {
        check_task_type(state, app, task_type).await.map_err(at(i))?;
    }
    Ok(())
}
