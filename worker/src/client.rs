//! [`Client`]: the asyncflow flowSvr `/v1` API over HTTP (API.md section 2).
//!
//! Requests are shaped the way Go workers send them, so a server that
//! serves Go workers serves this client too: `hold_tasks` is a POST with
//! `task_type` and `limit` in the query string and no body, create and set
//! send `{"task_data": ...}`. Every reply is HTTP 200 with `code` and `msg`
//! at top level; a non-zero code becomes [`Error::Api`].

use std::time::Duration;

use serde::de::DeserializeOwned;
use xtimer_asyncflow::wire::{
    code, path, CfgBody, CfgListBody, CountsBody, CreateTaskBody, Empty, Reply, TaskData, TaskDataBody,
    TaskDataRequest, TaskListBody, TaskScheduleCfg, TaskStatus,
};

use crate::error::{Error, Result};

/// The longest a single call may take unless [`Client::with_http`] says
/// otherwise. Defaults to 10 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A handle on one flowSvr. Cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client for the server at `base` (e.g. `http://127.0.0.1:8080`;
    /// a trailing `/` is ignored), with a [`DEFAULT_TIMEOUT`] per call.
    pub fn new(base: impl Into<String>) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(DEFAULT_TIMEOUT)
            .build()
            .map_err(|source| Error::Http { op: "client", source })?;
        Self::with_http(http, base)
    }

    /// A client for `base` over an existing reqwest client (its timeouts,
    /// proxies and pool).
    pub fn with_http(http: reqwest::Client, base: impl Into<String>) -> Result<Self> {
        let base = base.into().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::BadAddress(base));
        }
        Ok(Self { http, base, token: None })
    }

    /// Sends `Authorization: Bearer <token>` with every call, for a server
    /// with API authentication on.
    pub fn with_bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The server address this client talks to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The URL of a `/v1` call, `path` one of [`path`]'s.
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.auth(self.http.post(self.url(path)))
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.auth(self.http.get(self.url(path)))
    }

    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    /// Creates a task; `task.task_type` is required, `task_stage` and
    /// `context` are the first stage and its context. The server fills in
    /// status, retries and order_time from the type's configuration.
    /// Returns the new task id.
    pub async fn create_task(&self, task: &TaskData) -> Result<String> {
        let body = TaskDataRequest { task_data: task.clone(), task_id: None };
        let req = self.post(path::CREATE_TASK).json(&body);
        let reply: CreateTaskBody = send("create_task", req).await?;
        Ok(reply.task_id)
    }

    /// Claims up to `limit` tasks of `task_type` whose order_time has
    /// passed (0 asks for the type's schedule_limit); each comes back in
    /// status 2 (processing) and is this worker's to report with
    /// [`set_task`](Self::set_task).
    ///
    /// Sent exactly as Go workers send it: a POST with `task_type` and
    /// `limit` in the query string and no body.
    pub async fn hold_tasks(&self, task_type: &str, limit: i64) -> Result<Vec<TaskData>> {
        let req = self.post(path::HOLD_TASKS).query(&[("task_type", task_type), ("limit", &limit.to_string())]);
        let reply: TaskListBody = send("hold_tasks", req).await?;
        Ok(reply.task_list.unwrap_or_default())
    }

    /// Reports on a task: the fields sent replace the stored ones (a zero
    /// or empty value leaves a field unchanged; `priority: None` too).
    /// `task.task_id` is required. A task already final is left alone.
    pub async fn set_task(&self, task: &TaskData) -> Result<()> {
        let body = TaskDataRequest { task_data: task.clone(), task_id: None };
        let req = self.post(path::SET_TASK).json(&body);
        let _: Empty = send("set_task", req).await?;
        Ok(())
    }

    /// One task by id.
    pub async fn get_task(&self, task_id: &str) -> Result<TaskData> {
        let req = self.get(path::GET_TASK).query(&[("task_id", task_id)]);
        let reply: TaskDataBody = send("get_task", req).await?;
        reply.task_data.ok_or(Error::Missing { op: "get_task", field: "task_data" })
    }

    /// Up to `limit` tasks of `task_type`, of one status or (None) any.
    pub async fn get_task_list(
        &self,
        task_type: &str,
        status: Option<TaskStatus>,
        limit: i64,
    ) -> Result<Vec<TaskData>> {
        let mut query = vec![("task_type", task_type.to_string()), ("limit", limit.to_string())];
        if let Some(status) = status {
            query.push(("status", status.code().to_string()));
        }
        let req = self.get(path::GET_TASK_LIST).query(&query);
        let reply: TaskListBody = send("get_task_list", req).await?;
        Ok(reply.task_list.unwrap_or_default())
    }

    /// The scheduling configuration of every registered type.
    pub async fn get_task_schedule_cfg_list(&self) -> Result<Vec<TaskScheduleCfg>> {
        let req = self.get(path::GET_TASK_SCHEDULE_CFG_LIST);
        let reply: CfgListBody = send("get_task_schedule_cfg_list", req).await?;
        Ok(reply.task_schedule_cfg_list.unwrap_or_default())
    }

    /// How many tasks of `task_type` exist, in every table.
    pub async fn get_task_counts_by_type(&self, task_type: &str) -> Result<i64> {
        let req = self.get(path::GET_TASK_COUNTS_BY_TYPE).query(&[("task_type", task_type)]);
        let reply: CountsBody = send("get_task_counts_by_type", req).await?;
        Ok(reply.counts)
    }

    /// Registers a new task type with its scheduling configuration (fields
    /// left at zero get the server's defaults, see
    /// [`TaskScheduleCfg::with_defaults`]). Sent nested as
    /// `{"task_config_data": {...}}`, without the time fields. A type the
    /// server has already answers 8048 ([`Error::Api`]) and keeps its cfg:
    /// change that with [`set_task_schedule_cfg`](Self::set_task_schedule_cfg).
    pub async fn register_task(&self, cfg: &TaskScheduleCfg) -> Result<()> {
        let req = self.post(path::REGISTER_TASK).json(&cfg_body(cfg));
        let _: Empty = send("register_task", req).await?;
        Ok(())
    }

    /// Registers `cfg.task_type` unless the server already has a
    /// configuration for it. Returns whether it registered.
    pub async fn register_task_if_missing(&self, cfg: &TaskScheduleCfg) -> Result<bool> {
        let list = self.get_task_schedule_cfg_list().await?;
        if list.iter().any(|c| c.task_type == cfg.task_type) {
            return Ok(false);
        }
        match self.register_task(cfg).await {
            Ok(()) => Ok(true),
            // Registered by someone else since the list was read.
            Err(err) if err.code() == Some(code::REGISTER_INSERT) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Changes the scheduling configuration of a registered type: fields
    /// left at zero keep their value. Returns the configuration as changed.
    pub async fn set_task_schedule_cfg(&self, cfg: &TaskScheduleCfg) -> Result<TaskScheduleCfg> {
        const OP: &str = "set_task_schedule_cfg";
        let req = self.post(path::SET_TASK_SCHEDULE_CFG).json(&cfg_body(cfg));
        let reply: CfgBody = send(OP, req).await?;
        reply.task_schedule_cfg.ok_or(Error::Missing { op: OP, field: "task_schedule_cfg" })
    }

    /// `GET /v1/ping`: Ok when the server answers `{"message": "pong"}`.
    pub async fn ping(&self) -> Result<()> {
        const OP: &str = "ping";
        let resp = self.get(path::PING).send().await.map_err(|source| Error::Http { op: OP, source })?;
        let bytes = read_ok(OP, resp).await?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|source| Error::Decode { op: OP, source })?;
        if value["message"] == "pong" {
            Ok(())
        } else {
            Err(Error::Missing { op: OP, field: "message" })
        }
    }
}

/// A cfg as register_task and set_task_schedule_cfg take it:
/// `{"task_config_data": {...}}`, without the time fields.
/// `fair_by_user` is sent only when set, so a cfg without it leaves the
/// type's as it is.
fn cfg_body(cfg: &TaskScheduleCfg) -> serde_json::Value {
    let mut data = serde_json::json!({
        "task_type": cfg.task_type,
        "schedule_limit": cfg.schedule_limit,
        "schedule_interval": cfg.schedule_interval,
        "max_processing_time": cfg.max_processing_time,
        "max_retry_num": cfg.max_retry_num,
        "retry_interval": cfg.retry_interval,
        "max_retry_interval": cfg.max_retry_interval,
    });
    if let Some(fair) = cfg.fair_by_user {
        data["fair_by_user"] = fair.into();
    }
    serde_json::json!({ "task_config_data": data })
}

/// Sends `req` and decodes the reply's fields, turning a non-zero code into
/// [`Error::Api`]. The code is checked before the fields are decoded, since
/// an error reply carries none of them.
async fn send<T: DeserializeOwned>(op: &'static str, req: reqwest::RequestBuilder) -> Result<T> {
    let resp = req.send().await.map_err(|source| Error::Http { op, source })?;
    let bytes = read_ok(op, resp).await?;
    decode(op, &bytes)
}

async fn read_ok(op: &'static str, resp: reqwest::Response) -> Result<Vec<u8>> {
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|source| Error::Http { op, source })?;
    if status != reqwest::StatusCode::OK {
        let body = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned();
        return Err(Error::Status { op, status: status.as_u16(), body });
    }
    Ok(bytes.to_vec())
}

/// Decodes a reply body: first the envelope's code, then the call's fields.
pub(crate) fn decode<T: DeserializeOwned>(op: &'static str, bytes: &[u8]) -> Result<T> {
    let reply: Reply<serde_json::Value> =
        serde_json::from_slice(bytes).map_err(|source| Error::Decode { op, source })?;
    if reply.code != 0 {
        return Err(Error::Api { op, code: reply.code, msg: reply.msg });
    }
    serde_json::from_value(reply.body).map_err(|source| Error::Decode { op, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xtimer_asyncflow::wire::code;

    #[test]
    fn non_zero_code_is_an_error_with_code_and_msg() {
        let err = decode::<TaskListBody>("hold_tasks", br#"{"code":8039,"msg":"no pos for type"}"#).unwrap_err();
        assert_eq!(err.code(), Some(code::GET_TASK_SET_POS));
        assert_eq!(err.to_string(), "hold_tasks: server replied code 8039: no pos for type");
    }

    #[test]
    fn null_task_list_is_no_tasks() {
        let body: TaskListBody = decode("hold_tasks", br#"{"code":0,"msg":"ok","task_list":null}"#).unwrap();
        assert_eq!(body.task_list.unwrap_or_default(), vec![]);
    }

    #[test]
    fn base_must_be_http() {
        assert!(matches!(Client::new("127.0.0.1:8080"), Err(Error::BadAddress(_))));
        assert_eq!(Client::new("http://h:1/").unwrap().url(path::PING), "http://h:1/v1/ping");
    }
}
