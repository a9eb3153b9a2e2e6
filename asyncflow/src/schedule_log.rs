//! The `schedule_log` of a task, in the shape Go asyncflow workers write and
//! read: `ScheduleLog{LastData, HistoryDatas}` of `ScheduleData{TraceId,
//! ErrMsg, Cost}`, with the stage, the outcome and the times added. The
//! Rust worker SDK writes it; the server's governance appends to it when it
//! takes a task back, so a Go worker decodes every log it meets.

use serde::{Deserialize, Serialize};

/// How many earlier attempts a schedule_log keeps besides the last.
pub const HISTORY_LEN: usize = 9;

/// The `schedule_log` JSON of a task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScheduleLog {
    /// The latest attempt.
    #[serde(rename = "LastData")]
    pub last_data: ScheduleData,
    /// Earlier attempts, newest first, at most [`HISTORY_LEN`].
    #[serde(rename = "HistoryDatas", deserialize_with = "null_as_empty")]
    pub history_datas: Vec<ScheduleData>,
}

/// One attempt at one stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScheduleData {
    /// Identifies the attempt in this worker's logs.
    #[serde(rename = "TraceId")]
    pub trace_id: String,
    /// The error of a `Retry` or `Fatal`; empty on success.
    #[serde(rename = "ErrMsg")]
    pub err_msg: String,
    /// How long the handler ran, e.g. `"12ms"`.
    #[serde(rename = "Cost")]
    pub cost: String,
    /// The stage that ran.
    #[serde(rename = "Stage")]
    pub stage: String,
    /// `next`, `done`, `retry` or `fatal`.
    #[serde(rename = "Outcome")]
    pub outcome: String,
    /// When the handler started (RFC 3339).
    #[serde(rename = "StartTime")]
    pub start_time: String,
    /// When it returned (RFC 3339).
    #[serde(rename = "EndTime")]
    pub end_time: String,
}

impl ScheduleLog {
    /// Parses a task's schedule_log; anything else (empty, another
    /// worker's format) starts a fresh log.
    pub fn parse(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }

    /// Makes `data` the last attempt, moving the previous one to history.
    pub fn push(&mut self, data: ScheduleData) {
        let previous = std::mem::replace(&mut self.last_data, data);
        if previous != ScheduleData::default() {
            self.history_datas.insert(0, previous);
            self.history_datas.truncate(HISTORY_LEN);
        }
    }
}

/// Go encodes an empty history (a nil slice) as `null`.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ScheduleData>, D::Error> {
    Ok(Option::<Vec<ScheduleData>>::deserialize(d)?.unwrap_or_default())
}
