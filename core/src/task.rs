//! The asyncflow task data model: what a task and a task type's
//! configuration are, as Go workers see them on the wire (API.md section 2)
//! and as the task tables store them. Shared by the engine, the store and
//! the worker SDK.

use serde::{Deserialize, Serialize};

/// Longest task type: `t_{type}_task_{pos}` must fit PostgreSQL's 63-byte identifiers.
pub const MAX_TASK_TYPE_LEN: usize = 40;
/// Longest user_id and task_stage, bytes.
pub const MAX_SHORT_TEXT: usize = 256;
/// Longest context and schedule_log, bytes.
pub const MAX_LONG_TEXT: usize = 1 << 20;

/// Checks a task type: it becomes part of a table name, so only
/// `[A-Za-z0-9_]`, 1 to [`MAX_TASK_TYPE_LEN`] characters. The problem
/// otherwise.
pub fn check_task_type(task_type: &str) -> Result<(), String> {
    let ok = !task_type.is_empty()
        && task_type.len() <= MAX_TASK_TYPE_LEN
        && task_type.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        let shown: String = task_type.chars().take(64).collect();
        Err(format!("task_type {shown:?} must be 1 to {MAX_TASK_TYPE_LEN} ASCII letters, digits and underscores"))
    }
}

/// Task status on the wire and in storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Waiting for its order_time and a worker.
    Pending = 1,
    /// Held by a worker.
    Processing = 2,
    /// Final: every stage done.
    Success = 3,
    /// Final: retries spent or a fatal error.
    Failed = 4,
}

impl TaskStatus {
    /// The wire value.
    pub fn code(self) -> i32 {
        self as i32
    }
    /// Parses a wire value.
    pub fn from_code(code: i32) -> Option<Self> {
        match code {
            1 => Some(Self::Pending),
            2 => Some(Self::Processing),
            3 => Some(Self::Success),
            4 => Some(Self::Failed),
            _ => None,
        }
    }
    /// Success or failed: nothing changes it any more.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Success | Self::Failed)
    }
    /// The status in words, as people read it: `pending`, `processing`,
    /// `succeeded`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Processing => "processing",
            Self::Success => "succeeded",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task as Go workers send and decode it. Every key is always present
/// in a reply; on input a missing key is its zero value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct TaskData {
    pub user_id: String,
    pub task_id: String,
    pub task_type: String,
    pub task_stage: String,
    /// 1 pending, 2 processing, 3 success, 4 failed.
    pub status: i32,
    /// Seconds of head start; `null` on set_task means unchanged.
    pub priority: Option<i64>,
    pub crt_retry_num: i64,
    pub max_retry_num: i64,
    /// Seconds; negative means a fixed interval.
    pub max_retry_interval: i64,
    /// JSON text written by the worker.
    pub schedule_log: String,
    /// The task's context (the key is `context`).
    pub context: String,
    /// Unix seconds; tasks are held oldest first once it has passed.
    pub order_time: i64,
    /// RFC 3339 in replies; ignored on input (Go sends its zero time).
    pub create_time: Option<String>,
    /// RFC 3339 in replies; ignored on input.
    pub modify_time: Option<String>,
}

/// The scheduling configuration of one task type (`t_schedule_cfg`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct TaskScheduleCfg {
    pub task_type: String,
    /// Tasks one hold returns when it asks for 0.
    pub schedule_limit: i64,
    /// Seconds between a worker's polls.
    pub schedule_interval: i64,
    /// Seconds a task may stay processing before it is taken back.
    pub max_processing_time: i64,
    pub max_retry_num: i64,
    /// Seconds; a new task's max_retry_interval.
    pub retry_interval: i64,
    /// Seconds; the cap of a doubling retry interval.
    pub max_retry_interval: i64,
    /// Whether hold_tasks takes the type's ready tasks round-robin across
    /// `user_id`s, each user's oldest first, instead of oldest first. Always
    /// set in replies; left out (or `null`) on input: `false` on register,
    /// unchanged on set_task_schedule_cfg. Go workers ignore the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_by_user: Option<bool>,
    pub create_time: Option<String>,
    pub modify_time: Option<String>,
}

impl TaskScheduleCfg {
    /// The configuration a type gets for every field left at zero on register.
    pub fn with_defaults(mut self) -> Self {
        let or = |v: i64, d: i64| if v == 0 { d } else { v };
        self.schedule_limit = or(self.schedule_limit, 100);
        self.schedule_interval = or(self.schedule_interval, 10);
        self.max_processing_time = or(self.max_processing_time, 300);
        self.max_retry_num = or(self.max_retry_num, 3);
        self.retry_interval = or(self.retry_interval, 10);
        self.max_retry_interval = or(self.max_retry_interval, 300);
        self
    }
}

/// RFC 3339 text of a Unix millisecond, as Go's `time.Time` encodes it (UTC).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// The table that holds the tasks of `task_type` at position `pos`.
pub fn table_name(task_type: &str, pos: u32) -> String {
    format!("t_{task_type}_task_{pos}")
}
