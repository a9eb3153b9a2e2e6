//! Which secret signs an app's callbacks, and the callback policy bundle.
//!
//! An app's secret is, first found: its `secret` in the static credentials
//! (`[auth.apps.<app>]` or `auth.tokens_file`); the secret stored with its
//! issued tokens (`t_app_secret`); the server-wide secret
//! (`callback.signing_secret`, or one generated at first start and kept in
//! the database so every node signs alike). Stored secrets are cached for
//! [`SECRET_TTL`], so a secret issued on another node is used within that.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use xtimer_core::config::{AuthConfig, CallbackConfig};
use xtimer_core::signature::random_secret;
use xtimer_core::target_policy::TargetPolicy;
use xtimer_store::auth::SERVER_SECRET_APP;
use xtimer_store::AuthRepo;

use crate::{Error, Result};

/// How long a secret read from the database is reused.
pub const SECRET_TTL: Duration = Duration::from_secs(30);

/// The signing secrets of every app.
pub struct AppSecrets {
    configured: HashMap<String, String>,
    default: String,
    repo: Option<Arc<dyn AuthRepo>>,
    cache: DashMap<String, (Option<String>, Instant)>,
}

impl AppSecrets {
    /// Every app signs with `default`.
    pub fn fixed(default: impl Into<String>) -> Self {
        Self { configured: HashMap::new(), default: default.into(), repo: None, cache: DashMap::new() }
    }

    /// The secrets the configuration and the database name; generates and
    /// stores the server-wide secret when neither sets one.
    pub async fn load(
        callback: &CallbackConfig,
        auth: &AuthConfig,
        repo: Arc<dyn AuthRepo>,
        now_ms: i64,
    ) -> Result<Self> {
        let configured = auth
            .credentials()
            .map_err(|e| Error::CallbackSetup(e.to_string()))?
            .into_iter()
            .filter(|(_, c)| !c.secret.is_empty())
            .map(|(app, c)| (app, c.secret.expose().to_string()))
            .collect();
        let default = if callback.signing_secret.is_empty() {
            let candidate = random_secret().map_err(|e| Error::CallbackSetup(format!("generating a secret: {e}")))?;
            repo.ensure_secret(SERVER_SECRET_APP, &candidate, now_ms).await?
        } else {
            callback.signing_secret.expose().to_string()
        };
        Ok(Self { configured, default, repo: Some(repo), cache: DashMap::new() })
    }

    /// The server-wide secret.
    pub fn default_secret(&self) -> &str {
        &self.default
    }

    /// The secret of `app`'s callbacks.
    pub async fn secret_for(&self, app: &str) -> String {
        if let Some(secret) = self.configured.get(app) {
            return secret.clone();
        }
        let Some(repo) = &self.repo else { return self.default.clone() };
        if let Some(entry) = self.cache.get(app) {
            if entry.1.elapsed() < SECRET_TTL {
                return entry.0.clone().unwrap_or_else(|| self.default.clone());
            }
        }
        match repo.app_secret(app).await {
            Ok(found) => {
                self.cache.insert(app.to_string(), (found.clone(), Instant::now()));
                found.unwrap_or_else(|| self.default.clone())
            }
            Err(err) => {
                // Keep signing with what we knew; a receiver refusing a
                // wrong signature makes the fire fail and retry anyway.
                tracing::warn!(app, error = %err, "Reading an app's signing secret failed; using the last known one.");
                self.cache.get(app).and_then(|e| e.0.clone()).unwrap_or_else(|| self.default.clone())
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
        now_ms: i64,
    ) -> Result<Self> {
        let policy = TargetPolicy::from_config(callback).map_err(Error::CallbackSetup)?;
        let secrets = AppSecrets::load(callback, auth, repo, now_ms).await?;
        Ok(Self { policy: Arc::new(policy), secrets: Arc::new(secrets) })
    }
}
