//! API tokens issued per app (`POST admin/issueToken`): only each token's
//! SHA-256 is stored; the app's callback signing secret is made with its
//! first token and kept for the next ones.

use std::sync::Arc;

use xtimer_core::signature::{random_secret, token_hash};
use xtimer_core::SharedClock;
use xtimer_store::AuthRepo;

use crate::checks::MAX_APP_CHARS;
use crate::error::{Result, ServiceError};

/// The store of issued tokens. Cheap to clone.
#[derive(Clone)]
pub struct Tokens {
    repo: Arc<dyn AuthRepo>,
    clock: SharedClock,
}

/// A token just issued: shown once, then only its hash is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The app it acts for.
    pub app: String,
    /// The bearer token (`xt_` and 64 hex digits).
    pub token: String,
    /// Its SHA-256, as stored and looked up.
    pub hash: String,
    /// The key of the app's `X-Xtimer-Signature` (HMAC-SHA256).
    pub secret: String,
}

impl Tokens {
    /// Tokens kept in `repo`, stamped with `clock`.
    pub fn new(repo: Arc<dyn AuthRepo>, clock: SharedClock) -> Self {
        Self { repo, clock }
    }

    /// A new token for `app` (1 to [`MAX_APP_CHARS`] characters), and the
    /// app's signing secret (made now if it has none).
    pub async fn issue(&self, app: &str) -> Result<IssuedToken> {
        let chars = app.chars().count();
        if chars == 0 || chars > MAX_APP_CHARS {
            return Err(ServiceError::invalid("app", format!("must be 1 to {MAX_APP_CHARS} characters, got {chars}")));
        }
        let token = format!("xt_{}", random_secret().map_err(ServiceError::Randomness)?);
        let hash = token_hash(&token);
        let candidate = random_secret().map_err(ServiceError::Randomness)?;
        let secret = self.repo.issue_token(app, &hash, &candidate, self.clock.now_ms()).await?;
        Ok(IssuedToken { app: app.to_owned(), token, hash, secret })
    }

    /// The app of the token whose SHA-256 is `hash`, if one was issued.
    pub async fn app_of(&self, hash: &str) -> Result<Option<String>> {
        Ok(self.repo.token_app(hash).await?)
    }
}
