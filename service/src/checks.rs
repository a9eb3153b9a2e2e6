//! What a timer is checked against besides its own fields: where its
//! callbacks may point and which task types its app may use
//! ([`Targets`], supplied by the server), and the limits the store
//! refused it by.

use std::sync::Arc;

use async_trait::async_trait;
use xtimer_core::spec::DEDUPE_KEY_FIELD;
use xtimer_core::timer::{NewTimer, Schedule};
use xtimer_store::Refusal;

use crate::error::{Result, ServiceError};

/// Most characters of an app's name.
pub const MAX_APP_CHARS: usize = 128;

/// The checks of a timer's targets that need the server's security state:
/// the callback target policy and the task API's registry. Given to the
/// service when it is built.
#[async_trait]
pub trait Targets: Send + Sync {
    /// Why the callback target policy refuses `url` (its host is, or
    /// resolves to, an address it refuses), or `Ok`.
    async fn check_callback(&self, url: &str) -> Result<(), String>;

    /// The app that owns the registered `task_type` (`None`: every app may
    /// use it).
    async fn task_type_owner(&self, task_type: &str) -> Result<Option<String>, TaskTypeError>;
}

/// Why a task type's owner is not known.
#[derive(Debug, thiserror::Error)]
pub enum TaskTypeError {
    /// The caller is at fault (an unknown type, no task API): the message
    /// says why.
    #[error("{0}")]
    Refused(String),
    /// The lookup failed.
    #[error("the task engine failed")]
    Failed(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// [`Targets`] that refuse nothing and know no task API.
#[derive(Debug, Default, Clone, Copy)]
pub struct OpenTargets;

#[async_trait]
impl Targets for OpenTargets {
    async fn check_callback(&self, _url: &str) -> Result<(), String> {
        Ok(())
    }

    async fn task_type_owner(&self, _task_type: &str) -> Result<Option<String>, TaskTypeError> {
        Err(TaskTypeError::Refused("the task API is not enabled".into()))
    }
}

/// The field a callback URL is checked as.
pub(crate) const NOTIFY_URL: &str = "notifyHTTPParam.url";
/// The field of an asyncflow notify's task type.
const TASK_TYPE: &str = "notifyAsyncflowParam.taskType";

/// `url` against the target policy; a refusal names `field`.
pub(crate) async fn check_callback(targets: &Arc<dyn Targets>, field: &str, url: &str) -> Result<()> {
    targets.check_callback(url).await.map_err(|refusal| ServiceError::invalid(field, refusal))
}

/// Refused unless `task_type` is registered with the task API and owned by
/// `app` or by no app.
pub(crate) async fn check_task_type(targets: &Arc<dyn Targets>, app: &str, task_type: &str) -> Result<()> {
    match targets.task_type_owner(task_type).await {
        Ok(Some(owner)) if owner != app => Err(ServiceError::invalid(
            TASK_TYPE,
            format!("task type `{task_type}` belongs to another app than `{app}`"),
        )),
        Ok(_) => Ok(()),
        Err(TaskTypeError::Refused(why)) => Err(ServiceError::invalid(TASK_TYPE, why)),
        Err(TaskTypeError::Failed(err)) => Err(ServiceError::TaskEngine(err)),
    }
}

/// Refused unless `app` is 1 to [`MAX_APP_CHARS`] characters.
pub(crate) fn check_app(app: &str) -> Result<()> {
    let chars = app.chars().count();
    if chars == 0 {
        Err(ServiceError::invalid("app", "must not be empty"))
    } else if chars > MAX_APP_CHARS {
        Err(ServiceError::invalid("app", format!("must be at most {MAX_APP_CHARS} characters, got {chars}")))
    } else {
        Ok(())
    }
}

/// The input field a schedule came from.
pub(crate) fn schedule_field(schedule: &Schedule) -> &'static str {
    match schedule {
        Schedule::Once { .. } => "runAt",
        Schedule::Cron { .. } => "cron",
        Schedule::Every { .. } => "everyMs",
    }
}

/// A limit the store refused a timer by: the timers per app are a limit
/// exceeded, the fires per minute an invalid `field`; `item` is the
/// timer's index in a batch.
pub(crate) fn refused(app: &str, refusal: Refusal, field: &str, item: Option<usize>) -> ServiceError {
    let at = item.map(|i| format!("timers[{i}].")).unwrap_or_default();
    match refusal {
        // Answered by the create of one timer (`TimerService::create`), which sees them first.
        Refusal::KeyHeld { .. } | Refusal::KeyContended => ServiceError::invalid(
            format!("{at}{DEDUPE_KEY_FIELD}"),
            format!("is held by another live timer of app `{app}` (or an earlier item)"),
        ),
        Refusal::NameTaken => ServiceError::invalid(
            format!("{at}name"),
            format!("another timer of app `{app}` has this name (or an earlier item)"),
        ),
        Refusal::TooManyTimers { has, max, .. } if item.is_none() => ServiceError::LimitExceeded {
            msg: format!(
                "app `{app}` has {has} timers, the most it may have (limits.timers_per_app = {max}): delete some first"
            ),
            retry_after: None,
        },
        Refusal::TooManyTimers { has, adding, max } => ServiceError::LimitExceeded {
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
            ServiceError::invalid(
                format!("{at}{field}"),
                format!("{whose}, more than app `{app}` may (limits.fires_per_minute_per_app = {max})"),
            )
        }
    }
}

/// None of a batch's timers gives a `dedupeKey`: only `createTimer` takes
/// one, since what a held key does is the answer of one create.
pub(crate) fn no_dedupe_keys<'a>(timers: impl IntoIterator<Item = &'a NewTimer>) -> Result<()> {
    match timers.into_iter().position(|t| t.dedupe.is_some()) {
        Some(i) => Err(ServiceError::invalid(
            format!("timers[{i}].{DEDUPE_KEY_FIELD}"),
            "is taken by createTimer only (one timer a call): create this timer on its own",
        )),
        None => Ok(()),
    }
}

/// Locks over apps, held by an update from its read of the timer to its
/// re-expansion, so that two updates of one timer on this node cannot
/// interleave their fires. (The limits need no lock: the store checks them
/// in the write's transaction.) A fixed set of stripes (an app's name
/// picks one), so that unknown app names cannot grow it.
pub(crate) struct AppLocks(Vec<Arc<tokio::sync::Mutex<()>>>);

/// Stripes of [`AppLocks`]: apps that share one wait for each other.
const APP_LOCK_STRIPES: usize = 256;

impl Default for AppLocks {
    fn default() -> Self {
        Self((0..APP_LOCK_STRIPES).map(|_| Arc::default()).collect())
    }
}

impl AppLocks {
    /// Waits for `app`'s lock.
    pub(crate) async fn lock(&self, app: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.0[self.stripe(app)].clone().lock_owned().await
    }

    fn stripe(&self, app: &str) -> usize {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(app);
        hash as usize % self.0.len()
    }
}
