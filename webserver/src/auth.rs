//! Per-app API tokens.
//!
//! `layers::resolve`, a middleware on every route, reads `Authorization: Bearer
//! <token>` and leaves an [`AuthContext`] in the request's extensions: auth
//! is off, no token, an unknown token, the admin token, or a token of one
//! app. It refuses nothing itself; each handler decides, so every API
//! answers in its own format:
//!
//! ```ignore
//! async fn handler(auth: AuthContext, ...) -> Result<..., ApiError> {
//!     auth.require_token()?;       // 401 before reading the body
//!     authorize(&auth, &input.app)?; // 403 when the token is another app's
//! }
//! ```
//!
//! With auth off both calls pass. Tokens come from the configuration
//! (`[auth.apps.<app>]`, `auth.tokens_file`) or from
//! `POST /api/xtimer/admin/issueToken`, which stores only their SHA-256
//! (`t_api_token`); lookups are cached for [`TOKEN_TTL`] (unknown ones for
//! [`UNKNOWN_TOKEN_TTL`], so a flood of made-up tokens does not reach the
//! database at its own rate), at most [`MAX_CACHED`] of each.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use xtimer_core::config::AuthConfig;
use xtimer_core::signature::token_hash;
use xtimer_core::{SharedClock, TtlCache};
use xtimer_service::Tokens;

use crate::error::ApiError;

/// How long a known token's app is reused without asking the database.
pub const TOKEN_TTL: Duration = Duration::from_secs(60);
/// How long an unknown token stays unknown without asking the database.
pub const UNKNOWN_TOKEN_TTL: Duration = Duration::from_secs(5);
/// Most cached token lookups, known and unknown each; past it the oldest
/// (or an expired one) is dropped.
pub const MAX_CACHED: usize = 100_000;

/// Who is calling, as the bearer token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthContext {
    /// Auth is off (`auth.enabled = false`): every call may act on every app.
    Disabled,
    /// Auth is on and the request has no bearer token.
    Missing,
    /// Auth is on and the token is not known.
    Unknown,
    /// The admin token.
    Admin,
    /// A token of this app.
    App(AuthApp),
}

/// The app a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthApp {
    /// The app's name.
    pub app: String,
}

pub use crate::error::AuthError;

impl AuthContext {
    /// Passes when auth is off or the request carries a valid token (any
    /// app's, or the admin's); else 401. Call it first, so a caller with no
    /// valid token learns nothing from validation messages.
    pub fn require_token(&self) -> Result<(), AuthError> {
        match self {
            Self::Missing => Err(AuthError::Missing),
            Self::Unknown => Err(AuthError::Unknown),
            Self::Disabled | Self::Admin | Self::App(_) => Ok(()),
        }
    }

    /// Whether auth is on.
    pub fn enabled(&self) -> bool {
        *self != Self::Disabled
    }

    /// The app of the token, if it is an app's.
    pub fn app(&self) -> Option<&str> {
        match self {
            Self::App(a) => Some(&a.app),
            _ => None,
        }
    }

    /// Who the caller is, as a timer's history names them.
    pub fn actor(&self) -> xtimer_service::Actor {
        match self {
            Self::App(a) => xtimer_service::Actor::App(a.app.clone()),
            Self::Admin => xtimer_service::Actor::Admin,
            _ => xtimer_service::Actor::Anonymous,
        }
    }
}

/// Whether the caller may act on `app`: auth off, or a token of `app`.
/// 401 without a valid token, 403 with another app's (or the admin's:
/// the admin issues tokens, it does not act as the apps).
pub fn authorize(ctx: &AuthContext, app: &str) -> Result<(), AuthError> {
    ctx.require_token()?;
    match ctx {
        AuthContext::App(a) if a.app == app => Ok(()),
        AuthContext::App(a) => Err(AuthError::WrongApp { token_app: a.app.clone(), app: app.to_string() }),
        AuthContext::Admin => {
            Err(AuthError::Forbidden("the admin token issues app tokens; call with a token of the app".into()))
        }
        _ => Ok(()),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for AuthContext {
    type Rejection = ApiError;

    /// The context `layers::resolve` left; without it (the middleware is not on
    /// this route) every call is refused, never let through.
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts.extensions.get::<AuthContext>().cloned().unwrap_or(AuthContext::Missing))
    }
}

/// The token store: configured tokens, the admin token, issued tokens.
pub struct Auth {
    enabled: bool,
    admin_hash: Option<String>,
    configured: HashMap<String, String>,
    issued: Option<IssuedTokens>,
}

/// The store of issued tokens and what was read of it, by token hash.
struct IssuedTokens {
    tokens: Tokens,
    /// Hash -> app, for [`TOKEN_TTL`].
    known: TtlCache<String, String>,
    /// Hashes the store did not know, for [`UNKNOWN_TOKEN_TTL`].
    unknown: TtlCache<String, ()>,
}

impl Default for Auth {
    /// Auth off, no admin token.
    fn default() -> Self {
        Self { enabled: false, admin_hash: None, configured: HashMap::new(), issued: None }
    }
}

impl Auth {
    /// The tokens `config` names; issued tokens are looked up in `tokens`,
    /// and the lookups cached on `clock`.
    pub fn new(config: &AuthConfig, tokens: Option<Tokens>, clock: SharedClock) -> xtimer_core::Result<Self> {
        let configured = config
            .credentials()?
            .into_iter()
            .filter(|(_, c)| !c.token.is_empty())
            .map(|(app, c)| (token_hash(c.token.expose()), app))
            .collect();
        let admin_hash = (!config.admin_token.is_empty()).then(|| token_hash(config.admin_token.expose()));
        let issued = tokens.map(|tokens| IssuedTokens {
            tokens,
            known: TtlCache::new(MAX_CACHED, TOKEN_TTL, clock.clone()),
            unknown: TtlCache::new(MAX_CACHED, UNKNOWN_TOKEN_TTL, clock),
        });
        Ok(Self { enabled: config.enabled, admin_hash, configured, issued })
    }

    /// Whether calls need a token.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The store of issued tokens, if any.
    pub fn tokens(&self) -> Option<&Tokens> {
        self.issued.as_ref().map(|issued| &issued.tokens)
    }

    /// Whether `headers` carry the admin token (with auth on or off).
    pub fn is_admin(&self, headers: &HeaderMap) -> bool {
        match (&self.admin_hash, bearer(headers)) {
            (Some(admin), Some(token)) => constant_time_eq(admin.as_bytes(), token_hash(token).as_bytes()),
            _ => false,
        }
    }

    /// Whether admin endpoints are on (an admin token is configured).
    pub fn admin_enabled(&self) -> bool {
        self.admin_hash.is_some()
    }

    /// Remembers a token just issued, so this node knows it at once.
    pub fn remember(&self, hash: String, app: String) {
        if let Some(issued) = &self.issued {
            issued.unknown.invalidate(&hash);
            issued.known.insert(hash, app);
        }
    }

    /// Who `headers` say is calling.
    pub async fn context(&self, headers: &HeaderMap) -> AuthContext {
        if !self.enabled {
            return AuthContext::Disabled;
        }
        let Some(credentials) = credentials(headers) else { return AuthContext::Missing };
        let hash = token_hash(&credentials.token);
        if self.admin_hash.as_deref().is_some_and(|admin| constant_time_eq(admin.as_bytes(), hash.as_bytes())) {
            return AuthContext::Admin;
        }
        let app = match self.configured.get(&hash) {
            Some(app) => Some(app.clone()),
            None => self.lookup(hash).await,
        };
        match app {
            // Basic credentials name the app as their user: a token of
            // another app is not these credentials.
            Some(app) if credentials.user.as_ref().is_none_or(|user| *user == app) => AuthContext::App(AuthApp { app }),
            _ => AuthContext::Unknown,
        }
    }

    async fn lookup(&self, hash: String) -> Option<String> {
        let issued = self.issued.as_ref()?;
        if let Some(app) = issued.known.get(&hash) {
            return Some(app);
        }
        if issued.unknown.contains(&hash) {
            return None;
        }
        match issued.tokens.app_of(&hash).await {
            Ok(Some(app)) => {
                issued.known.insert(hash, app.clone());
                Some(app)
            }
            Ok(None) => {
                issued.known.invalidate(&hash);
                issued.unknown.insert(hash, ());
                None
            }
            Err(err) => {
                // Fail closed: an unreadable token store lets no one in.
                tracing::warn!(error = %err, "Looking up an API token failed; the call is refused.");
                None
            }
        }
    }
}

/// The token of `Authorization: Bearer <token>` (scheme in any case).
/// The token a request carries: `Authorization: Bearer TOKEN`, or
/// `Authorization: Basic` of `APP:TOKEN` (what a Go asyncflow worker sends
/// when its server address is `http://APP:TOKEN@host:port`).
pub struct Credentials {
    /// The API token.
    pub token: String,
    /// The app named as the Basic user, if Basic.
    pub user: Option<String>,
}

/// The [`Credentials`] of `headers`, if any.
pub fn credentials(headers: &HeaderMap) -> Option<Credentials> {
    if let Some(token) = bearer(headers) {
        return Some(Credentials { token: token.to_string(), user: None });
    }
    use base64::Engine;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let (user, token) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    (!token.is_empty()).then(|| Credentials { token: token.to_string(), user: Some(user.to_string()) })
}

/// The bearer token of `headers`, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use xtimer_core::config::{AppCredentials, Secret};

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, auth.parse().unwrap());
        h
    }

    fn auth() -> Auth {
        let mut config = AuthConfig { enabled: true, admin_token: Secret::new("adm"), ..AuthConfig::default() };
        config.apps.insert("billing".into(), AppCredentials { token: Secret::new("tb"), secret: Secret::default() });
        Auth::new(&config, None, std::sync::Arc::new(xtimer_core::SystemClock)).unwrap()
    }

    #[tokio::test]
    async fn tokens_resolve_to_their_app() {
        let a = auth();
        assert_eq!(a.context(&HeaderMap::new()).await, AuthContext::Missing);
        assert_eq!(a.context(&headers("Bearer nope")).await, AuthContext::Unknown);
        assert_eq!(a.context(&headers("Basic tb")).await, AuthContext::Missing, "not base64 of user:token");
        // Basic of `billing:tb` (a Go worker at http://billing:tb@host:port).
        let basic = |pair: &str| {
            use base64::Engine;
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
        };
        assert_eq!(
            a.context(&headers(&basic("billing:tb"))).await,
            AuthContext::App(AuthApp { app: "billing".into() })
        );
        assert_eq!(a.context(&headers(&basic("ops:tb"))).await, AuthContext::Unknown, "the user must be the app");
        assert_eq!(a.context(&headers(&basic("billing:nope"))).await, AuthContext::Unknown);
        assert_eq!(a.context(&headers(&basic("billing:"))).await, AuthContext::Missing);
        assert_eq!(a.context(&headers("bearer  tb ")).await, AuthContext::App(AuthApp { app: "billing".into() }));
        assert_eq!(a.context(&headers("Bearer adm")).await, AuthContext::Admin);
        assert!(a.is_admin(&headers("Bearer adm")));
        assert!(!a.is_admin(&headers("Bearer tb")));
        assert_eq!(Auth::default().context(&headers("Bearer x")).await, AuthContext::Disabled);
    }

    #[test]
    fn authorize_checks_the_app() {
        let billing = AuthContext::App(AuthApp { app: "billing".into() });
        assert_eq!(authorize(&billing, "billing"), Ok(()));
        assert_eq!(authorize(&billing, "ops").unwrap_err().status(), StatusCode::FORBIDDEN);
        assert_eq!(authorize(&AuthContext::Missing, "ops").unwrap_err().status(), StatusCode::UNAUTHORIZED);
        assert_eq!(authorize(&AuthContext::Unknown, "ops").unwrap_err().status(), StatusCode::UNAUTHORIZED);
        assert_eq!(authorize(&AuthContext::Admin, "ops").unwrap_err().status(), StatusCode::FORBIDDEN);
        assert_eq!(authorize(&AuthContext::Disabled, "anything"), Ok(()));
    }
}
