//! What the API enforces beyond input shape: who may call ([`Auth`]),
//! the limits ([`LimitsConfig`], [`RateLimiter`]) and where callbacks may
//! point ([`TargetPolicy`]). One [`Security`] per server, shared by
//! [`crate::AppState`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::Uri;
use xtimer_asyncflow::Tasks;
use xtimer_core::config::{AuthConfig, CallbackConfig, LimitsConfig};
use xtimer_core::target_policy::TargetPolicy;
use xtimer_core::{SharedClock, SystemClock};
use xtimer_service::{Targets, TaskTypeError};
use xtimer_store::AuthRepo;

use crate::auth::Auth;
use crate::limits::RateLimiter;

/// How long `createTimer` waits for a callback host to resolve.
pub const CREATE_RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The server's security settings.
pub struct Security {
    /// Tokens.
    pub auth: Auth,
    /// Limit values.
    pub limits: LimitsConfig,
    /// Request rate per app.
    pub rate: RateLimiter,
    /// Where callbacks may point.
    pub policy: Arc<TargetPolicy>,
    /// Whether `createTimer` resolves callback hosts to check them.
    pub resolve_at_create: bool,
}

impl Default for Security {
    /// Auth off, default limits, the default target policy.
    fn default() -> Self {
        let limits = LimitsConfig::default();
        let callback = CallbackConfig::default();
        Self {
            auth: Auth::default(),
            rate: RateLimiter::new(limits.requests_per_second, limits.request_burst, Arc::new(SystemClock)),
            limits,
            policy: Arc::new(TargetPolicy::default()),
            resolve_at_create: callback.resolve_at_create,
        }
    }
}

impl Security {
    /// The settings the configuration names; issued tokens live in `repo`
    /// (their lookups cached on `clock`).
    pub fn new(
        auth: &AuthConfig,
        callback: &CallbackConfig,
        limits: &LimitsConfig,
        repo: Option<Arc<dyn AuthRepo>>,
        clock: SharedClock,
    ) -> xtimer_core::Result<Self> {
        let policy = callback.target_policy()?;
        Ok(Self {
            rate: RateLimiter::new(limits.requests_per_second, limits.request_burst, clock.clone()),
            auth: Auth::new(auth, repo, clock)?,
            limits: limits.clone(),
            policy: Arc::new(policy),
            resolve_at_create: callback.resolve_at_create,
        })
    }
}

impl Security {
    /// The checks the timer service makes of a timer's targets: this
    /// server's callback target policy, and the task types of `tasks` (none:
    /// the task API is off, and a task notify is refused).
    pub fn targets(&self, tasks: Option<Tasks>) -> Arc<dyn Targets> {
        Arc::new(ServerTargets { policy: self.policy.clone(), resolve_at_create: self.resolve_at_create, tasks })
    }
}

/// [`Targets`] as this server enforces them.
struct ServerTargets {
    policy: Arc<TargetPolicy>,
    resolve_at_create: bool,
    tasks: Option<Tasks>,
}

#[async_trait]
impl Targets for ServerTargets {
    /// Refused when the URL's host is, or resolves to, an address the
    /// target policy refuses (a name is resolved only with
    /// `callback.resolve_at_create`).
    async fn check_callback(&self, url: &str) -> Result<(), String> {
        let Some(host) = url.parse::<Uri>().ok().and_then(|u| u.host().map(str::to_owned)) else { return Ok(()) };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if self.resolve_at_create || bare.parse::<std::net::IpAddr>().is_ok() {
            self.policy.check_host(&host, CREATE_RESOLVE_TIMEOUT).await.map_err(|refusal| refusal.to_string())
        } else {
            Ok(())
        }
    }

    async fn task_type_owner(&self, task_type: &str) -> Result<Option<String>, TaskTypeError> {
        let tasks = self.tasks.as_ref().ok_or_else(|| TaskTypeError::Refused("the task API is not enabled".into()))?;
        match tasks.owner_of(task_type).await {
            Ok(owner) => Ok(owner),
            Err(err) if err.is_caller_fault() => Err(TaskTypeError::Refused(err.to_string())),
            Err(err) => Err(TaskTypeError::Failed(Box::new(err))),
        }
    }
}
