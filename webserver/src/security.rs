//! What the API enforces beyond input shape: who may call ([`Auth`]) and
//! the limits ([`LimitsConfig`], [`RateLimiter`]). One [`Security`] per
//! server, shared by [`crate::AppState`]. Where callbacks may point is the
//! service's to check (`xtimer_service::PolicyTargets`).

use std::sync::Arc;

use xtimer_core::config::{AuthConfig, LimitsConfig};
use xtimer_core::{SharedClock, SystemClock};
use xtimer_service::Tokens;

use crate::auth::Auth;
use crate::limits::RateLimiter;

/// The server's security settings.
pub struct Security {
    /// Tokens.
    pub auth: Auth,
    /// Limit values.
    pub limits: LimitsConfig,
    /// Request rate per app.
    pub rate: RateLimiter,
}

impl Default for Security {
    /// Auth off, default limits.
    fn default() -> Self {
        let limits = LimitsConfig::default();
        Self {
            auth: Auth::default(),
            rate: RateLimiter::new(limits.requests_per_second, limits.request_burst, Arc::new(SystemClock)),
            limits,
        }
    }
}

impl Security {
    /// The settings the configuration names; issued tokens live in `tokens`
    /// (their lookups cached on `clock`).
    pub fn new(
        auth: &AuthConfig,
        limits: &LimitsConfig,
        tokens: Option<Tokens>,
        clock: SharedClock,
    ) -> xtimer_core::Result<Self> {
        Ok(Self {
            rate: RateLimiter::new(limits.requests_per_second, limits.request_burst, clock.clone()),
            auth: Auth::new(auth, tokens, clock)?,
            limits: limits.clone(),
        })
    }
}
