//! A scripted flowSvr: serves a queue of tasks and records every request.
//!
//! Not the real `/v1` router on purpose: these tests need a server that
//! answers as told (a cfg list that fails once, tasks with chosen ids, a
//! call it does not serve) and records the raw bytes it gets. The SDK
//! against the real server is tested end to end in the root
//! `tests/it/worker_sdk.rs`. Its routes are the real ones, by name:
//! [`path`] is the one table the server's router and the client use too.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;
use xtimer_asyncflow::wire::{
    path, CfgListBody, CreateTaskBody, Empty, Reply, TaskData, TaskDataBody, TaskDataRequest, TaskListBody,
    TaskScheduleCfg,
};
use xtimer_worker::{Client, WorkerConfig};

/// One request as the fake server received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

impl Seen {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// The server's state.
#[derive(Default)]
pub struct Fake {
    /// Tasks hold_tasks hands out, front first.
    pub queue: Mutex<VecDeque<TaskData>>,
    /// The cfg list.
    pub cfgs: Mutex<Vec<TaskScheduleCfg>>,
    /// Every request, in order.
    pub seen: Mutex<Vec<Seen>>,
    /// get_task_schedule_cfg_list answers 8045 this many more times.
    pub cfg_failures: std::sync::atomic::AtomicU32,
}

impl Fake {
    /// Requests to `path` (e.g. `hold_tasks`).
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        self.seen.lock().unwrap().iter().filter(|s| s.path == format!("/v1/{path}")).cloned().collect()
    }
}

/// A running fake server and a client for it.
pub struct FakeServer {
    pub state: Arc<Fake>,
    pub client: Client,
}

impl FakeServer {
    /// Starts a server with `cfgs` and no tasks.
    pub async fn start(cfgs: Vec<TaskScheduleCfg>) -> Self {
        let state = Arc::new(Fake::default());
        *state.cfgs.lock().unwrap() = cfgs;
        let app = Router::new()
            .route(path::GET_TASK_SCHEDULE_CFG_LIST, get(cfg_list))
            .route(path::HOLD_TASKS, post(hold))
            .route(path::SET_TASK, post(ok_empty))
            .route(path::REGISTER_TASK, post(ok_empty))
            .route(path::CREATE_TASK, post(create))
            .route(path::GET_TASK, get(get_task))
            .layer(axum::middleware::from_fn_with_state(state.clone(), record))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = Client::new(format!("http://{addr}")).unwrap();
        Self { state, client }
    }

    /// Queues `tasks` for hold_tasks.
    pub fn push(&self, tasks: impl IntoIterator<Item = TaskData>) {
        self.state.queue.lock().unwrap().extend(tasks);
    }
}

async fn record(
    State(state): State<Arc<Fake>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    state.seen.lock().unwrap().push(Seen {
        method: parts.method.clone(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        content_type: parts.headers.get("content-type").map(|v| v.to_str().unwrap().to_string()),
        authorization: parts.headers.get("authorization").map(|v| v.to_str().unwrap().to_string()),
        body: bytes.to_vec(),
    });
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

async fn cfg_list(State(state): State<Arc<Fake>>) -> Json<Reply<CfgListBody>> {
    use std::sync::atomic::Ordering;
    if state.cfg_failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
        return Json(Reply { code: 8045, msg: "get task cfg failed".into(), body: CfgListBody::default() });
    }
    let list = state.cfgs.lock().unwrap().clone();
    Json(Reply::ok(CfgListBody { task_schedule_cfg_list: Some(list) }))
}

async fn hold(State(state): State<Arc<Fake>>, uri: Uri) -> Json<Reply<TaskListBody>> {
    let q: Vec<(String, String)> = serde_urlencoded_pairs(uri.query().unwrap_or_default());
    let limit: usize = q.iter().find(|(k, _)| k == "limit").map_or(0, |(_, v)| v.parse().unwrap());
    let mut queue = state.queue.lock().unwrap();
    let n = limit.min(queue.len());
    let tasks: Vec<TaskData> = queue.drain(..n).map(|t| TaskData { status: 2, ..t }).collect();
    Json(Reply::ok(TaskListBody::from_tasks(tasks)))
}

fn serde_urlencoded_pairs(query: &str) -> Vec<(String, String)> {
    query.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn ok_empty(_headers: HeaderMap, _body: Bytes) -> Json<Reply<Empty>> {
    Json(Reply::ok(Empty {}))
}

async fn create(body: Bytes) -> Json<Reply<CreateTaskBody>> {
    let req: TaskDataRequest = serde_json::from_slice(&body).unwrap();
    Json(Reply::ok(CreateTaskBody { task_id: format!("id_{}_0", req.task_data.task_type) }))
}

async fn get_task() -> Json<Reply<TaskDataBody>> {
    Json(Reply { code: 8035, msg: "get task: no such task".into(), body: TaskDataBody::default() })
}

/// The cfg of type `t` used by these tests.
pub fn cfg(task_type: &str) -> TaskScheduleCfg {
    TaskScheduleCfg { task_type: task_type.into(), schedule_limit: 10, max_retry_interval: 60, ..Default::default() }
}

/// A pending task of type `t`.
pub fn task(task_type: &str, id: &str) -> TaskData {
    TaskData {
        task_id: id.into(),
        task_type: task_type.into(),
        task_stage: "a".into(),
        status: 1,
        max_retry_num: 3,
        max_retry_interval: 10,
        ..Default::default()
    }
}

/// A worker pace for tests: polls every 20 ms.
pub fn fast() -> WorkerConfig {
    WorkerConfig {
        poll_interval: Some(Duration::from_millis(20)),
        jitter: Duration::from_millis(5),
        min_poll_interval: Duration::from_millis(5),
        shutdown_grace: Duration::from_secs(5),
        ..WorkerConfig::default()
    }
}

/// Generous wait for an event.
pub const PATIENCE: Duration = Duration::from_secs(10);
