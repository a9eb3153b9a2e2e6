//! The asyncflow task API, `/v1` (API.md section 2), byte-compatible with
//! Go workers: every reply is HTTP 200 with `code` and `msg` beside the
//! call's fields; a bad request is a non-zero code, never a 4xx.
//!
//! Inputs are read by hand rather than by axum's extractors, so that no
//! rejection can answer anything but the asyncflow reply: bodies are JSON
//! whatever their Content-Type (Go workers may send none); hold_tasks reads
//! its query string first, then a JSON body; get_task also takes `taskId`.
//!
//! With auth on, every call but ping needs a valid bearer token (401
//! otherwise). A type registered with an app's token belongs to that app:
//! another app's token (or the admin's) on it answers 403, still in the
//! asyncflow shape, and the cfg list shows a caller only the types it may
//! use. A type registered with auth off is open to every app.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use xtimer_asyncflow::wire::{
    code, path, CfgBody, CfgListBody, CountsBody, CreateTaskBody, Empty, Reply, TaskDataBody, TaskDataRequest,
    TaskListBody, TaskScheduleCfg,
};
use xtimer_asyncflow::{Error, TaskId, Tasks};

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{AuthContext, AuthError};
use crate::replies::{AnyObject, OK};
use crate::AppState;

/// The `/v1` routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_task))
        .routes(routes!(hold_tasks))
        .routes(routes!(set_task))
        .routes(routes!(get_task))
        .routes(routes!(get_task_list))
        .routes(routes!(get_task_schedule_cfg_list))
        .routes(routes!(get_task_counts_by_type))
        .routes(routes!(register_task))
        .routes(routes!(set_task_schedule_cfg))
        .routes(routes!(ping))
}

/// A failed call: its code and a message a caller can act on (and the
/// HTTP status: 200 but for auth failures).
struct Failure {
    code: i32,
    msg: String,
    status: StatusCode,
}

impl Failure {
    fn new(code: i32, msg: impl Into<String>) -> Self {
        Self { code, msg: msg.into(), status: StatusCode::OK }
    }

    fn denied(err: AuthError) -> Self {
        Self { code: code::INPUT_INVALID, msg: err.to_string(), status: err.status() }
    }

    /// An engine error raised by the call whose own failure code is `call_code`.
    /// Server-side causes are logged, not sent.
    fn engine(call_code: i32, what: &str, err: Error) -> Self {
        if err.is_caller_fault() {
            Self::new(err.code(call_code), format!("{what}: {err}"))
        } else {
            tracing::error!(error = %err, "{what}");
            Self::new(err.code(call_code), format!("{what}: internal error (logged on the server)"))
        }
    }
}

/// The reply of a call: its fields on success, their zero values beside the
/// error code otherwise (as the Go server answers).
fn reply<T: Serialize + Default>(result: Result<T, Failure>) -> Response {
    match result {
        Ok(body) => Json(Reply::ok(body)).into_response(),
        Err(f) => (f.status, Json(Reply { code: f.code, msg: f.msg, body: T::default() })).into_response(),
    }
}

/// Whether the caller may use `task_type`: auth off, a type no app owns,
/// or a token of its owner; else 403. An unknown or malformed type passes,
/// for the call itself to report; a failure to read the owner refuses.
async fn require_owner(tasks: &Tasks, auth: &AuthContext, task_type: &str) -> Result<(), Failure> {
    if !auth.enabled() {
        return Ok(());
    }
    let owner = match tasks.owner_of(task_type).await {
        Ok(owner) => owner,
        Err(err) if err.is_caller_fault() => return Ok(()),
        Err(err) => return Err(Failure::engine(code::GET_TASK_CFG, "read the task type's owner", err)),
    };
    if may_use(auth, owner.as_deref()) {
        Ok(())
    } else {
        Err(not_owner(task_type))
    }
}

fn not_owner(task_type: &str) -> Failure {
    Failure::denied(AuthError::Forbidden(format!("task type `{task_type}` belongs to another app")))
}

/// [`require_owner`] for the type named in a task id.
async fn require_task_owner(tasks: &Tasks, auth: &AuthContext, task_id: &str) -> Result<(), Failure> {
    match TaskId::parse(task_id) {
        Ok(id) => require_owner(tasks, auth, &id.task_type).await,
        Err(_) => Ok(()),
    }
}

fn may_use(auth: &AuthContext, owner: Option<&str>) -> bool {
    match (auth, owner) {
        (AuthContext::Disabled, _) | (_, None) => true,
        (auth, Some(owner)) => auth.app() == Some(owner),
    }
}

/// The task engine, for a caller with a valid token when auth is on: else
/// 401 (with 403, the only non-200 replies of `/v1`), in the asyncflow
/// shape. Called first, so a caller without a token learns nothing from
/// input checks.
fn engine<'a>(state: &'a AppState, auth: &AuthContext) -> Result<&'a Tasks, Failure> {
    auth.require_token().map_err(Failure::denied)?;
    state.tasks.as_ref().ok_or_else(|| Failure::new(code::INPUT_INVALID, "the task API is not enabled on this server"))
}

/// Decodes a JSON body, whatever its Content-Type.
fn json_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, Failure> {
    let body = body.map_err(|e| Failure::new(code::SHOULD_BIND, format!("request body: {}", e.body_text())))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Failure::new(code::SHOULD_BIND, "request body: a JSON object is required"));
    }
    serde_json::from_slice(&body).map_err(|e| Failure::new(code::SHOULD_BIND, format!("request body: {e}")))
}

/// The query string as name -> value (the last one wins).
fn query(uri: &Uri) -> Result<HashMap<String, String>, Failure> {
    Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|Query(pairs)| pairs.into_iter().collect())
        .map_err(|e| Failure::new(code::SHOULD_BIND, format!("query string: {}", e.body_text())))
}

/// The first of `names` present in `q`.
fn param<'a>(q: &'a HashMap<String, String>, names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|n| q.get(*n)).map(String::as_str)
}

/// A whole-number parameter: 0 when absent or empty.
fn int_param(q: &HashMap<String, String>, names: &[&str]) -> Result<i64, Failure> {
    match param(q, names) {
        None | Some("") => Ok(0),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| Failure::new(code::SHOULD_BIND, format!("{}: {v:?} is not a whole number", names[0]))),
    }
}

/// A required text parameter.
fn required<'a>(q: &'a HashMap<String, String>, names: &[&str]) -> Result<&'a str, Failure> {
    match param(q, names) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(Failure::new(code::INPUT_INVALID, format!("{} is required", names[0]))),
    }
}

#[utoipa::path(
    post,
    path = path::CREATE_TASK,
    operation_id = "_v1_create_task",
    summary = "Create an asyncflow task.",
    request_body = TaskDataRequest,
    responses((status = 200, description = OK, body = Reply<CreateTaskBody>))
)]
async fn create_task(
    State(state): State<AppState>,
    auth: AuthContext,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    reply(
        async {
            let tasks = engine(&state, &auth)?;
            let req: TaskDataRequest = json_body(body)?;
            if req.task_data.task_type.is_empty() {
                return Err(Failure::new(code::INPUT_INVALID, "task_data.task_type is required"));
            }
            require_owner(tasks, &auth, &req.task_data.task_type).await?;
            let task_id =
                tasks.create(req.task_data).await.map_err(|e| Failure::engine(code::CREATE_TASK, "create task", e))?;
            Ok(CreateTaskBody { task_id })
        }
        .await,
    )
}

#[utoipa::path(
    post,
    path = path::HOLD_TASKS,
    operation_id = "_v1_hold_tasks",
    summary = "Claim due tasks of a type.",
    params(("task_type" = String, Query), ("limit" = Option<i64>, Query)),
    responses((status = 200, description = OK, body = Reply<TaskListBody>))
)]
async fn hold_tasks(
    State(state): State<AppState>,
    auth: AuthContext,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    reply(
        async {
            let tasks = engine(&state, &auth)?;
            let mut q = query(&uri)?;
            // A JSON body fills what the query string left out.
            let body = body.map_err(|e| Failure::new(code::SHOULD_BIND, format!("request body: {}", e.body_text())))?;
            if !body.iter().all(u8::is_ascii_whitespace) {
                let fields: HashMap<String, Value> = serde_json::from_slice(&body)
                    .map_err(|e| Failure::new(code::SHOULD_BIND, format!("request body: {e}")))?;
                for (k, v) in fields {
                    let text = match v {
                        Value::String(s) => s,
                        Value::Number(n) => n.to_string(),
                        Value::Null => continue,
                        other => return Err(Failure::new(code::SHOULD_BIND, format!("{k}: unexpected {other}"))),
                    };
                    q.entry(k).or_insert(text);
                }
            }
            let task_type = required(&q, &["task_type", "taskType"])?.to_string();
            let limit = int_param(&q, &["limit"])?;
            require_owner(tasks, &auth, &task_type).await?;
            let list = tasks
                .hold(&task_type, limit)
                .await
                .map_err(|e| Failure::engine(code::GET_TASK_LIST, "hold tasks", e))?;
            Ok(TaskListBody::from_tasks(list))
        }
        .await,
    )
}

#[utoipa::path(
    post,
    path = path::SET_TASK,
    operation_id = "_v1_set_task",
    summary = "Report on a task.",
    request_body = TaskDataRequest,
    responses((status = 200, description = OK, body = Reply<Empty>))
)]
async fn set_task(State(state): State<AppState>, auth: AuthContext, body: Result<Bytes, BytesRejection>) -> Response {
    reply::<Empty>(
        async {
            let tasks = engine(&state, &auth)?;
            let req: TaskDataRequest = json_body(body)?;
            let mut task = req.task_data;
            if task.task_id.is_empty() {
                task.task_id = req.task_id.unwrap_or_default();
            }
            require_task_owner(tasks, &auth, &task.task_id).await?;
            tasks.set(task).await.map_err(|e| Failure::engine(code::SET_TASK, "set task", e))?;
            Ok(Empty {})
        }
        .await,
    )
}

#[utoipa::path(
    get,
    path = path::GET_TASK,
    operation_id = "_v1_get_task",
    summary = "One task by id.",
    params(("task_id" = String, Query)),
    responses((status = 200, description = OK, body = Reply<TaskDataBody>))
)]
async fn get_task(State(state): State<AppState>, auth: AuthContext, uri: Uri) -> Response {
    reply(
        async {
            let tasks = engine(&state, &auth)?;
            let q = query(&uri)?;
            let task_id = required(&q, &["task_id", "taskId"])?;
            require_task_owner(tasks, &auth, task_id).await?;
            let task = tasks.get(task_id).await.map_err(|e| Failure::engine(code::GET_TASK_INFO, "get task", e))?;
            Ok(TaskDataBody { task_data: Some(task) })
        }
        .await,
    )
}

#[utoipa::path(
    get,
    path = path::GET_TASK_LIST,
    operation_id = "_v1_get_task_list",
    summary = "Tasks of a type.",
    params(("task_type" = String, Query), ("status" = Option<i64>, Query), ("limit" = Option<i64>, Query)),
    responses((status = 200, description = OK, body = Reply<TaskListBody>))
)]
async fn get_task_list(State(state): State<AppState>, auth: AuthContext, uri: Uri) -> Response {
    reply(
        async {
            let tasks = engine(&state, &auth)?;
            let q = query(&uri)?;
            let task_type = required(&q, &["task_type", "taskType"])?;
            let status = int_param(&q, &["status"])?;
            let status = i32::try_from(status)
                .map_err(|_| Failure::new(code::INPUT_INVALID, format!("status {status} is out of range")))?;
            let limit = int_param(&q, &["limit"])?;
            require_owner(tasks, &auth, task_type).await?;
            let list = tasks
                .list(task_type, status, limit)
                .await
                .map_err(|e| Failure::engine(code::GET_TASK_LIST, "get task list", e))?;
            Ok(TaskListBody::from_tasks(list))
        }
        .await,
    )
}

#[utoipa::path(
    get,
    path = path::GET_TASK_SCHEDULE_CFG_LIST,
    operation_id = "_v1_get_task_schedule_cfg_list",
    summary = "Every task type's configuration.",
    responses((status = 200, description = OK, body = Reply<CfgListBody>))
)]
async fn get_task_schedule_cfg_list(State(state): State<AppState>, auth: AuthContext) -> Response {
    reply(
        async {
            let tasks = engine(&state, &auth)?;
            let rows = tasks.cfgs().await.map_err(|e| Failure::engine(code::GET_TASK_CFG, "get task cfg list", e))?;
            let list: Vec<_> = rows.into_iter().filter(|r| may_use(&auth, r.owner.as_deref())).map(|r| r.cfg).collect();
            Ok(CfgListBody { task_schedule_cfg_list: if list.is_empty() { None } else { Some(list) } })
        }
        .await,
    )
}

#[utoipa::path(
    get,
    path = path::GET_TASK_COUNTS_BY_TYPE,
    operation_id = "_v1_get_task_counts_by_type",
    summary = "How many tasks a type has.",
    params(("task_type" = String, Query)),
    responses((status = 200, description = OK, body = Reply<CountsBody>))
)]
async fn get_task_counts_by_type(State(state): State<AppState>, auth: AuthContext, uri: Uri) -> Response {
    reply(
        async {
            let tasks = engine(&state, &auth)?;
            let q = query(&uri)?;
            let task_type = required(&q, &["task_type", "taskType"])?;
            require_owner(tasks, &auth, task_type).await?;
            let counts =
                tasks.count(task_type).await.map_err(|e| Failure::engine(code::GET_TASK_COUNT, "count tasks", e))?;
            Ok(CountsBody { counts })
        }
        .await,
    )
}

/// The cfg fields of register_task and set_task_schedule_cfg: nested in
/// `task_config_data` or `task_type_data`, or flat; `task_type` required.
fn cfg_body(body: Result<Bytes, BytesRejection>) -> Result<TaskScheduleCfg, Failure> {
    let mut fields: serde_json::Map<String, Value> = json_body(body)?;
    let inner = ["task_config_data", "task_type_data"].into_iter().find_map(|k| fields.remove(k));
    let cfg_value = match inner {
        Some(Value::Object(o)) => Value::Object(o),
        Some(other) => {
            return Err(Failure::new(code::SHOULD_BIND, format!("task config: expected an object, not {other}")));
        }
        None => Value::Object(fields),
    };
    let cfg: TaskScheduleCfg =
        serde_json::from_value(cfg_value).map_err(|e| Failure::new(code::SHOULD_BIND, format!("task config: {e}")))?;
    if cfg.task_type.is_empty() {
        return Err(Failure::new(code::INPUT_INVALID, "task_type is required"));
    }
    Ok(cfg)
}

#[utoipa::path(
    post,
    path = path::REGISTER_TASK,
    operation_id = "_v1_register_task",
    summary = "Register a task type (8048 if it exists).",
    request_body = TaskScheduleCfg,
    responses((status = 200, description = OK, body = Reply<Empty>))
)]
async fn register_task(
    State(state): State<AppState>,
    auth: AuthContext,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    reply::<Empty>(
        async {
            let tasks = engine(&state, &auth)?;
            let cfg = cfg_body(body)?;
            require_owner(tasks, &auth, &cfg.task_type).await?;
            tasks.register(cfg, auth.app()).await.map_err(|e| {
                let call =
                    if matches!(e, Error::Store(_)) { code::REGISTER_CREATE_TABLE } else { code::REGISTER_INSERT };
                Failure::engine(call, "register task", e)
            })?;
            Ok(Empty {})
        }
        .await,
    )
}

#[utoipa::path(
    post,
    path = path::SET_TASK_SCHEDULE_CFG,
    operation_id = "_v1_set_task_schedule_cfg",
    summary = "Change a task type's configuration.",
    request_body = TaskScheduleCfg,
    responses((status = 200, description = OK, body = Reply<CfgBody>))
)]
async fn set_task_schedule_cfg(
    State(state): State<AppState>,
    auth: AuthContext,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    reply(
        async {
            let tasks = engine(&state, &auth)?;
            let cfg = cfg_body(body)?;
            require_owner(tasks, &auth, &cfg.task_type).await?;
            let task_type = cfg.task_type.clone();
            let cfg = tasks.set_cfg(cfg, auth.app()).await.map_err(|e| match e {
                Error::NotOwner(_) => not_owner(&task_type),
                e => Failure::engine(code::GET_TASK_CFG, "set task schedule cfg", e),
            })?;
            Ok(CfgBody { task_schedule_cfg: Some(cfg) })
        }
        .await,
    )
}

#[utoipa::path(
    get,
    path = path::PING,
    operation_id = "_v1_ping",
    summary = "Liveness of the task API.",
    responses((status = 200, description = OK, body = AnyObject))
)]
async fn ping() -> Json<Value> {
    Json(serde_json::json!({ "message": "pong" }))
}
