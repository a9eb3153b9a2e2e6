//! Which secret signs an app's callbacks, and the callback policy bundle.
//!
//! An app's secret is, first found: its `secret` in the static credentials
//! (`[auth.apps.<app>]` or `auth.tokens_file`); the secret stored with its
//! issued tokens (`t_app_secret`); the server-wide secret
//! (`callback.signing_secret`, or one generated at first start and kept in
//! the database so every node signs alike). Stored secrets are cached for
//! [`SECRET_TTL`] (at most [`SECRET_CACHE_CAPACITY`] apps), so a secret
//! issued on another node is used within that.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use xtimer_core::config::{AuthConfig, CallbackConfig};
use xtimer_core::signature::random_secret;
use xtimer_core::target_policy::TargetPolicy;
use xtimer_core::{SharedClock, TtlCache};
use xtimer_store::auth::SERVER_SECRET_APP;
use xtimer_store::AuthRepo;

use crate::{Error, Result};

/// How long a secret read from the database is reused.
pub const SECRET_TTL: Duration = Duration::from_secs(30);

/// Most apps whose stored secret is cached; past it the oldest is read
/// again at its next callback.
pub const SECRET_CACHE_CAPACITY: usize = 10_000;

/// The signing secrets of every app.
pub struct AppSecrets {
    configured: HashMap<String, SigningSecret>,
    default: SigningSecret,
    stored: Option<StoredSecrets>,
}

/// Where issued secrets are stored, and what was read of them per app
/// (`None`: the app has no stored secret).
type StoredSecrets = (Arc<dyn AuthRepo>, TtlCache<String, Option<SigningSecret>>);

/// A signing secret, shared by every callback that signs with it (a fire
/// takes a reference, not a copy).
pub type SigningSecret = Arc<str>;

impl AppSecrets {
    /// Every app signs with `default`.
    pub fn fixed(default: impl Into<String>) -> Self {
        Self { configured: HashMap::new(), default: Arc::from(default.into()), stored: None }
    }

    /// The secrets the configuration and the database name; generates and
    /// stores the server-wide secret when neither sets one. Stored secrets
    /// are cached on `clock`.
    pub async fn load(
        callback: &CallbackConfig,
        auth: &AuthConfig,
        repo: Arc<dyn AuthRepo>,
        clock: &SharedClock,
    ) -> Result<Self> {
        let configured = auth
            .credentials()
            .map_err(Error::CallbackConfig)?
            .into_iter()
            .filter(|(_, c)| !c.secret.is_empty())
            .map(|(app, c)| (app, SigningSecret::from(c.secret.expose())))
            .collect();
        let default = if callback.signing_secret.is_empty() {
            let candidate = random_secret().map_err(Error::SecretGeneration)?;
            SigningSecret::from(repo.ensure_secret(SERVER_SECRET_APP, &candidate, clock.now_ms()).await?)
        } else {
            SigningSecret::from(callback.signing_secret.expose())
        };
        let cache = TtlCache::new(SECRET_CACHE_CAPACITY, SECRET_TTL, clock.clone());
        Ok(Self { configured, default, stored: Some((repo, cache)) })
    }

    /// The server-wide secret.
    pub fn default_secret(&self) -> &str {
        &self.default
    }

    /// The secret of `app`'s callbacks.
    pub async fn secret_for(&self, app: &str) -> SigningSecret {
        if let Some(secret) = self.configured.get(app) {
            return secret.clone();
        }
        let Some((repo, cache)) = &self.stored else { return self.default.clone() };
        if let Some(found) = cache.get(app) {
            return found.unwrap_or_else(|| self.default.clone());
        }
        match repo.app_secret(app).await {
            Ok(found) => {
                let found = found.map(SigningSecret::from);
                cache.insert(app.to_string(), found.clone());
                found.unwrap_or_else(|| self.default.clone())
            }
            Err(err) => {
                // Keep signing with what we knew; a receiver refusing a
                // wrong signature makes the fire fail and retry anyway.
                tracing::warn!(app, error = %xtimer_core::error::error_chain(&err), "Reading an app's signing secret failed; using the last known one.");
                cache.get_stale(app).flatten().unwrap_or_else(|| self.default.clone())
            }
        }
    }
}

/// What every callback of an executor obeys: where it may go, and how it is signed.
#[derive(Clone)]
pub struct Callbacks {
    /// Addresses callbacks may reach.
    pub policy: Arc<TargetPolicy>,
    /// Signing secrets per app.
    pub secrets: Arc<AppSecrets>,
}

impl Default for Callbacks {
    /// The default policy, and a random server-wide secret for this process
    /// only (every callback is signed; receivers can verify nothing until a
    /// real secret is configured with [`Callbacks::load`]).
    fn default() -> Self {
        let secret = random_secret().unwrap_or_default();
        Self { policy: Arc::new(TargetPolicy::default()), secrets: Arc::new(AppSecrets::fixed(secret)) }
    }
}

impl Callbacks {
    /// The policy and secrets of the configuration (see [`AppSecrets::load`]).
    pub async fn load(
        callback: &CallbackConfig,
        auth: &AuthConfig,
        repo: Arc<dyn AuthRepo>,
        clock: &SharedClock,
    ) -> Result<Self> {
        let policy = callback.target_policy().map_err(Error::CallbackConfig)?;
        let secrets = AppSecrets::load(callback, auth, repo, clock).await?;
        Ok(Self { policy: Arc::new(policy), secrets: Arc::new(secrets) })
    }
}
