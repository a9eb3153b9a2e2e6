//! A real app (SQLite in a temp dir, in-process shards and locks, a
//! migrator) behind `router(state)`, driven with `oneshot`, and typed
//! request helpers.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use serde_json::{json, Value};
use tempfile::TempDir;
use tower::ServiceExt;
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{
    AuthConfig, CallbackConfig, DatabaseConfig, LimitsConfig, MigratorConfig, ServerConfig, ShardConfig,
};
use xtimer_core::node::NodeContext;
use xtimer_core::SharedClock;
use xtimer_migrator::Migrator;
use xtimer_service::{Parts, PolicyTargets, ServiceConfig, TimerService, Tokens};
use xtimer_store::Database;
use xtimer_store::{FireRepo, MemoryLocks, MemoryShards, Stores, TimerRepo};
use xtimer_webserver::security::Security;
use xtimer_webserver::{router, ApiParts, AppState};

/// The test clock's time: 2030-01-01T00:00:00Z.
pub const NOW_MS: i64 = 1_893_456_000_000;
/// [`NOW_MS`] as the API writes it.
pub const NOW_RFC3339: &str = "2030-01-01T00:00:00.000Z";

/// One app over its own database.
pub struct TestApp {
    pub router: Router,
    pub clock: Arc<ManualClock>,
    /// The database, to arrange fires directly.
    pub repo: Arc<Database>,
    _dir: TempDir,
}

/// Replacements for the real stores, to make them fail, and security settings.
#[derive(Default)]
pub struct Fakes {
    /// Auth, callback policy and limits (with the app's SQLite as the
    /// token store); `None` keeps the defaults (auth off).
    pub security: Option<(AuthConfig, CallbackConfig, LimitsConfig)>,
    /// The timer repo of the handlers and the migrator.
    pub timers: Option<Arc<dyn TimerRepo>>,
    /// The fire repo of the migrator only (the handlers keep SQLite's).
    pub migrator_fires: Option<Arc<dyn FireRepo>>,
}

/// An app with the default server config.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(ServerConfig::default(), Fakes::default()).await
}

/// An app with these security settings and the default server config.
pub async fn spawn_secure(auth: AuthConfig, callback: CallbackConfig, limits: LimitsConfig) -> TestApp {
    spawn_app_with(ServerConfig::default(), Fakes { security: Some((auth, callback, limits)), ..Fakes::default() })
        .await
}

/// An app with `config` and the given fakes.
pub async fn spawn_app_with(config: ServerConfig, fakes: Fakes) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let repo = Arc::new(Database::connect(&DatabaseConfig { url, max_connections: 4 }).await.expect("sqlite"));
    let clock = Arc::new(ManualClock::new(NOW_MS));
    let shared: SharedClock = clock.clone();
    let timers = fakes.timers.unwrap_or_else(|| repo.clone());
    let fires: Arc<dyn FireRepo> = repo.clone();
    let mut stores = Stores::over(
        repo.as_ref().clone(),
        Arc::new(MemoryShards::new(ShardConfig::default(), shared.clone())),
        Arc::new(MemoryLocks::new(shared.clone())),
        "SQLite with the embedded shard index".into(),
    );
    stores.timers = timers.clone();
    if let Some(migrator_fires) = fakes.migrator_fires {
        stores.fires = migrator_fires;
    }
    let ctx = NodeContext::new(shared.clone(), "node-test", "xtimer-test");
    let expander = Migrator::new(MigratorConfig::default(), &stores, &ctx, None).expander();
    let (security, callback, service_config) = match fakes.security {
        Some((auth, callback, limits)) => {
            let tokens = Tokens::new(repo.clone(), shared.clone());
            let security = Security::new(&auth, &limits, Some(tokens), shared).expect("security");
            (security, callback, ServiceConfig { limits, ..ServiceConfig::default() })
        }
        None => (Security::default(), CallbackConfig::default(), ServiceConfig::default()),
    };
    let parts = Parts {
        timers,
        fires,
        calendars: stores.calendars.clone(),
        apps: stores.apps.clone(),
        flows: stores.flows.clone(),
        flow_tokens: stores.flow_tokens.clone(),
        expander,
        targets: Arc::new(PolicyTargets::new(&callback, None).expect("callback target policy")),
    };
    let service = TimerService::new(&ctx, parts, service_config);
    let state = AppState::new(ApiParts::new(service, security), config);
    TestApp { router: router(state), clock, repo, _dir: dir }
}

/// A reply: its status and its JSON body.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Reply {
    /// The `result` of a success envelope; panics on anything else.
    pub fn ok(&self) -> &Value {
        assert_eq!(self.status, StatusCode::OK, "{}", self.body);
        assert_eq!(self.body["code"], 0, "{}", self.body);
        assert_eq!(self.body["msg"], "ok", "{}", self.body);
        &self.body["result"]
    }

    /// The `msg` of an error envelope with `status`; panics on anything else.
    pub fn err(&self, status: StatusCode) -> &str {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(self.body["code"], status.as_u16(), "{}", self.body);
        assert!(self.body["result"].is_null(), "{}", self.body);
        let keys: Vec<_> = self.body.as_object().expect("object").keys().cloned().collect();
        assert_eq!(keys, ["code", "msg", "result"], "{}", self.body);
        self.body["msg"].as_str().expect("msg is a string")
    }
}

impl TestApp {
    /// Sends `request` through the router.
    pub async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.to_str().unwrap_or_default().starts_with("application/json"));
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
        assert!(is_json, "reply is not JSON: {status} {}", String::from_utf8_lossy(&bytes));
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
        Reply { status, body }
    }

    /// `GET uri`.
    pub async fn get(&self, uri: &str) -> Reply {
        self.send(Request::get(uri).body(Body::empty()).unwrap()).await
    }

    /// `method uri` with a body and an optional content type.
    pub async fn raw(&self, method: Method, uri: &str, content_type: Option<&str>, body: impl Into<Body>) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        self.send(request.body(body.into()).unwrap()).await
    }

    /// `method uri` with `Authorization: Bearer {token}` when given, and a JSON body when given.
    pub async fn call(&self, method: Method, uri: &str, token: Option<&str>, json: Option<&Value>) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match json {
            Some(json) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        self.send(request.body(body).unwrap()).await
    }

    /// `POST uri` with a JSON body.
    pub async fn post_json(&self, uri: &str, body: &Value) -> Reply {
        self.raw(Method::POST, uri, Some("application/json"), body.to_string()).await
    }

    /// `POST /api/xtimer/createTimer`.
    pub async fn create(&self, body: &Value) -> Reply {
        self.post_json("/api/xtimer/createTimer", body).await
    }

    /// Creates a timer that must be accepted; its id.
    pub async fn create_ok(&self, body: &Value) -> i64 {
        self.create(body).await.ok()["id"].as_i64().expect("id")
    }

    /// `GET /api/xtimer/{route}?id=..&app=..`.
    pub async fn by_id(&self, route: &str, id: i64, app: &str) -> Reply {
        self.get(&format!("/api/xtimer/{route}?id={id}&app={app}")).await
    }

    /// `DELETE /api/xtimer/delTimer?id=..&app=..`.
    pub async fn delete(&self, id: i64, app: &str) -> Reply {
        self.raw(Method::DELETE, &format!("/api/xtimer/delTimer?id={id}&app={app}"), None, Body::empty()).await
    }

    /// The `result` of `getTimer`.
    pub async fn timer(&self, id: i64, app: &str) -> Value {
        self.by_id("getTimer", id, app).await.ok().clone()
    }

    /// The `result` of `getTimerTasks` with extra query `extra` (`&status=0`...).
    pub async fn tasks(&self, id: i64, app: &str, extra: &str) -> Value {
        self.tasks_reply(id, app, extra).await.ok().clone()
    }

    /// The reply of `getTimerTasks` with extra query `extra`.
    pub async fn tasks_reply(&self, id: i64, app: &str, extra: &str) -> Reply {
        self.get(&format!("/api/xtimer/getTimerTasks?id={id}&app={app}{extra}")).await
    }
}

/// The smallest valid body of a cron timer.
pub fn cron_timer(app: &str, name: &str) -> Value {
    json!({
        "app": app,
        "name": name,
        "cron": "0 0 * * * *",
        "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"},
    })
}

/// The smallest valid body of a one-shot timer at `run_at_ms`.
pub fn once_timer(app: &str, name: &str, run_at_ms: i64) -> Value {
    json!({
        "app": app,
        "name": name,
        "runAt": run_at_ms,
        "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"},
    })
}

/// `value` with the member at `path` (`/a/b`) set, or removed when `new` is `None`.
pub fn patched(value: &Value, path: &str, new: Option<Value>) -> Value {
    let mut value = value.clone();
    let (parent, key) = path.rsplit_once('/').expect("path starts with /");
    let object = value.pointer_mut(parent).and_then(Value::as_object_mut).expect("parent is an object");
    match new {
        Some(new) => object.insert(key.to_owned(), new),
        None => object.remove(key),
    };
    value
}
