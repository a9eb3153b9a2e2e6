//! `POST applyTimers`: timers as code. An app's timers made to match a
//! list, matched by name: the reply says which were created, updated,
//! unchanged and (with `prune`) deleted; `dryRun` says it and changes
//! nothing. Every item is checked as `createTimer` checks one, a bad item
//! named by its index (`timers[3].cron: ...`), every bad item in one 400;
//! then the service applies the list all or nothing
//! ([`xtimer_service::TimerService::apply`]).

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use xtimer_service::apply::{ApplyOptions, ApplyOutcome, ApplyTimer, DEFAULT_OWNER, MAX_APPLY_TIMERS};

use crate::extract::ApiJson;
use crate::extract::ForApp;
use crate::{ApiError, AppState, Envelope};
use xtimer_core::spec;

crate::of_app!(ApplyTimers);

/// Body of `applyTimers`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApplyTimers {
    /// The app whose timers to apply; every item is of it (an item
    /// without `app` takes this one).
    pub app: String,
    /// The timers, each as `createTimer` takes it; at most
    /// [`MAX_APPLY_TIMERS`].
    #[schema(value_type = Vec<crate::routes::timers::input::CreateTimer>)]
    pub timers: Vec<Value>,
    /// Delete the app's timers labelled `managed-by: <owner>` that the
    /// list does not name. Defaults to false.
    #[serde(default)]
    pub prune: Option<bool>,
    /// The value of the `managed-by` label of the applied timers.
    /// Defaults to `apply`.
    #[serde(default)]
    pub owner: Option<String>,
    /// Answer what would change, and change nothing. Defaults to false.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// The reply of `applyTimers`: timer names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Applied {
    /// Timers created, in list order.
    pub created: Vec<String>,
    /// Timers whose definition changed, in list order.
    pub updated: Vec<String>,
    /// Timers already as listed, in list order.
    pub unchanged: Vec<String>,
    /// Timers pruned, by name.
    pub deleted: Vec<String>,
}

impl From<ApplyOutcome> for Applied {
    fn from(o: ApplyOutcome) -> Self {
        Self { created: o.created, updated: o.updated, unchanged: o.unchanged, deleted: o.deleted }
    }
}

/// `POST applyTimers`.
#[utoipa::path(
    post,
    path = "/applyTimers",
    operation_id = "applyTimers",
    summary = "Make an app's timers match a list (by name), all or nothing: created, updated, unchanged, pruned.",
    request_body = ApplyTimers,
    responses((status = 200, description = crate::replies::ENVELOPED, body = Applied))
)]
pub async fn timers_apply(
    State(state): State<AppState>,
    ForApp(input, auth): ForApp<ApiJson<ApplyTimers>>,
) -> Result<Envelope<Applied>, ApiError> {
    let count = input.timers.len();
    if count > MAX_APPLY_TIMERS {
        return Err(ApiError::invalid("timers", format!("must hold at most {MAX_APPLY_TIMERS} timers, got {count}")));
    }
    let timers = validate_all(&state, &input.app, input.timers, state.clock.now_ms())?;
    let options = ApplyOptions {
        prune: input.prune.unwrap_or(false),
        owner: input.owner.unwrap_or_else(|| DEFAULT_OWNER.into()),
        dry_run: input.dry_run.unwrap_or(false),
    };
    let outcome = state.service.apply(&input.app, timers, options, &auth.actor()).await?;
    Ok(Envelope(outcome.into()))
}

/// Every item checked on its own, as `createTimer` checks one, but for a
/// one-shot's `runAt` in the past: that is left to the service, which
/// takes it from a timer stored exactly so (a file still describes a
/// one-shot after its fire). A 400 naming each bad item by its index.
fn validate_all(state: &AppState, app: &str, items: Vec<Value>, now: i64) -> Result<Vec<ApplyTimer>, ApiError> {
    let mut problems = Vec::new();
    let mut timers = Vec::with_capacity(items.len());
    for (i, mut value) in items.into_iter().enumerate() {
        let Some(fields) = value.as_object_mut() else {
            problems.extend(spec::read_item(i, value).err());
            continue;
        };
        match fields.get("app") {
            None => {
                fields.insert("app".into(), Value::String(app.to_owned()));
            }
            Some(Value::String(own)) if own != app => {
                problems.push(format!("timers[{i}].app: must be `{app}`, the app applied to, got `{own}`"));
                continue;
            }
            Some(_) => {}
        }
        let item = match spec::read_item(i, value) {
            Ok(item) => item,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        let anchor_defaulted = item.every_ms.is_some() && item.anchor_at.is_none() && item.start_at.is_none();
        let past_run_at = item.run_at.as_ref().and_then(|v| spec::instant_ms("runAt", v).ok()).filter(|ms| *ms < now);
        let again = past_run_at.map(|run_at| (item.clone(), run_at));
        let limits = &state.security.limits;
        match item.validate_with(now, limits) {
            Ok(timer) => timers.push(ApplyTimer { timer, anchor_defaulted }),
            Err(invalid) => match again.map(|(item, run_at)| item.validate_with(run_at, limits)) {
                // Its only fault is a past runAt.
                Some(Ok(timer)) => timers.push(ApplyTimer { timer, anchor_defaulted }),
                _ => problems.extend(invalid.prefixed(&format!("timers[{i}]."))),
            },
        }
    }
    if problems.is_empty() {
        return Ok(timers);
    }
    Err(ApiError::Invalid(spec::listed_problems(problems)))
}
