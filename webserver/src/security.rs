//! What the API enforces beyond input shape: who may call ([`Auth`]),
//! the limits ([`LimitsConfig`], [`RateLimiter`]) and where callbacks may
//! point ([`TargetPolicy`]). One [`Security`] per server, shared by
//! [`crate::AppState`].

use std::sync::Arc;
use std::time::Duration;
use xtimer_core::config::{AuthConfig, CallbackConfig, LimitsConfig};
use xtimer_core::target_policy::TargetPolicy;
use xtimer_core::SharedClock;
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
    /// Serializes the updates of each app's timers.
    pub app_locks: AppLocks,
}

/// Locks over apps, held by an update from its read of the timer to its
/// re-expansion, so that two updates of one timer on this node cannot
/// interleave their fires. (The limits need no lock: the store checks them
/// in the write's transaction.)
/// A fixed set of stripes (an app's name picks one), so that unknown app
/// names cannot grow it.
pub struct AppLocks(Vec<Arc<tokio::sync::Mutex<()>>>);

/// Stripes of [`AppLocks`]: apps that share one wait for each other.
const APP_LOCK_STRIPES: usize = 256;

impl Default for AppLocks {
    fn default() -> Self {
        Self((0..APP_LOCK_STRIPES).map(|_| Arc::default()).collect())
    }
}

impl AppLocks {
    /// Waits for `app`'s lock.
    pub async fn lock(&self, app: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.0[self.stripe(app)].clone().lock_owned().await
    }

    fn stripe(&self, app: &str) -> usize {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(app);
        hash as usize % self.0.len()
    }
}

impl Default for Security {
    /// Auth off, default limits, the default target policy.
    fn default() -> Self {
        let limits = LimitsConfig::default();
        let callback = CallbackConfig::default();
        Self {
            auth: Auth::default(),
            rate: RateLimiter::new(limits.requests_per_second, limits.request_burst),
            limits,
            policy: Arc::new(TargetPolicy::default()),
            app_locks: AppLocks::default(),
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
        let policy = TargetPolicy::from_config(callback)?;
        Ok(Self {
            auth: Auth::new(auth, repo, clock)?,
            rate: RateLimiter::new(limits.requests_per_second, limits.request_burst),
            limits: limits.clone(),
            policy: Arc::new(policy),
            app_locks: AppLocks::default(),
            resolve_at_create: callback.resolve_at_create,
        })
    }
}
