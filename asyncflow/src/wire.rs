//! The `/v1` wire contract (API.md section 2), shared by the server and the
//! worker SDK: what Go workers send and decode, key for key.

use serde::{Deserialize, Serialize};

pub use xtimer_core::task::{rfc3339, TaskData, TaskScheduleCfg, TaskStatus};

/// Reply codes Go workers know. Any non-zero code is an error to them.
pub mod code {
    /// Success (`msg` is "ok").
    pub const OK: i32 = 0;
    /// A field is missing or out of range.
    pub const INPUT_INVALID: i32 = 8020;
    /// The request could not be decoded (bad JSON, wrong types).
    pub const SHOULD_BIND: i32 = 8021;
    /// get_task: the task cannot be read.
    pub const GET_TASK_INFO: i32 = 8035;
    /// create_task failed.
    pub const CREATE_TASK: i32 = 8037;
    /// A task list could not be read (hold_tasks, get_task_list).
    pub const GET_TASK_LIST: i32 = 8038;
    /// The type has no position (not registered).
    pub const GET_TASK_SET_POS: i32 = 8039;
    /// set_task failed.
    pub const SET_TASK: i32 = 8041;
    /// The position of a type could not be read.
    pub const GET_TASK_POS: i32 = 8042;
    /// The type's configuration could not be read.
    pub const GET_TASK_CFG: i32 = 8045;
    /// get_task_counts_by_type failed.
    pub const GET_TASK_COUNT: i32 = 8046;
    /// register_task: the task table could not be created.
    pub const REGISTER_CREATE_TABLE: i32 = 8047;
    /// register_task: the configuration row could not be written, or the
    /// type exists already.
    pub const REGISTER_INSERT: i32 = 8048;
}

/// The path of every `/v1` call: the one route table the server's router,
/// the worker SDK's client and the SDK's test server share, so none of them
/// can name a call the others do not.
pub mod path {
    /// `POST`: create a task.
    pub const CREATE_TASK: &str = "/v1/create_task";
    /// `POST`: claim due tasks of a type (query `task_type`, `limit`).
    pub const HOLD_TASKS: &str = "/v1/hold_tasks";
    /// `POST`: report on a task.
    pub const SET_TASK: &str = "/v1/set_task";
    /// `GET`: one task by id.
    pub const GET_TASK: &str = "/v1/get_task";
    /// `GET`: tasks of a type, of one status or any.
    pub const GET_TASK_LIST: &str = "/v1/get_task_list";
    /// `GET`: every registered type's scheduling configuration.
    pub const GET_TASK_SCHEDULE_CFG_LIST: &str = "/v1/get_task_schedule_cfg_list";
    /// `GET`: how many tasks a type has.
    pub const GET_TASK_COUNTS_BY_TYPE: &str = "/v1/get_task_counts_by_type";
    /// `POST`: register a new type (a type that exists answers 8048).
    pub const REGISTER_TASK: &str = "/v1/register_task";
    /// `POST`: change the configuration of a registered type.
    pub const SET_TASK_SCHEDULE_CFG: &str = "/v1/set_task_schedule_cfg";
    /// `GET`: liveness, `{"message": "pong"}`.
    pub const PING: &str = "/v1/ping";
}

/// `{"task_data": ...}`: the body of create_task and set_task. set_task
/// also takes a top-level `task_id` (older workers send it there).
///
/// The body and its `task_data` are read only from JSON objects, as Go
/// reads them: serde's derive would also take an array, field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TaskDataRequest {
    pub task_data: TaskData,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

impl<'de> Deserialize<'de> for TaskDataRequest {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Fields {
            #[serde(deserialize_with = "object")]
            task_data: TaskData,
            task_id: Option<String>,
        }
        let Fields { task_data, task_id } = object(de)?;
        Ok(Self { task_data, task_id })
    }
}

/// Deserializes a `T` from a JSON object only.
fn object<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(de: D) -> Result<T, D::Error> {
    struct ObjectOnly<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for ObjectOnly<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    de.deserialize_map(ObjectOnly(std::marker::PhantomData))
}

/// A reply: `code` and `msg` flattened beside the call's own fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Reply<T> {
    pub code: i32,
    pub msg: String,
    #[serde(flatten)]
    pub body: T,
}

impl<T> Reply<T> {
    /// A success.
    pub fn ok(body: T) -> Self {
        Self { code: code::OK, msg: "ok".into(), body }
    }
}

/// create_task's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreateTaskBody {
    pub task_id: String,
}

/// hold_tasks' and get_task_list's fields: `null` when empty, as Go encodes a nil slice.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskListBody {
    pub task_list: Option<Vec<TaskData>>,
}

impl TaskListBody {
    /// `null` for no tasks.
    pub fn from_tasks(tasks: Vec<TaskData>) -> Self {
        Self { task_list: if tasks.is_empty() { None } else { Some(tasks) } }
    }
}

/// get_task's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskDataBody {
    pub task_data: Option<TaskData>,
}

/// get_task_schedule_cfg_list's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CfgListBody {
    pub task_schedule_cfg_list: Option<Vec<TaskScheduleCfg>>,
}

/// get_task_counts_by_type's fields: every task of the type, in every table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CountsBody {
    pub counts: i64,
}

/// set_task_schedule_cfg's fields: the type's configuration as changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CfgBody {
    pub task_schedule_cfg: Option<TaskScheduleCfg>,
}

/// A reply with no fields of its own (set_task, register_task, errors).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_words() {
        let words: Vec<String> = (1..=4).map(|c| TaskStatus::from_code(c).unwrap().to_string()).collect();
        assert_eq!(words, ["pending", "processing", "succeeded", "failed"]);
        assert_eq!(TaskStatus::from_code(0), None);
    }

    #[test]
    fn a_request_is_read_from_objects_only() {
        let ok: TaskDataRequest = serde_json::from_str(r#"{"task_data":{"task_type":"lark"},"task_id":"x"}"#).unwrap();
        assert_eq!((ok.task_data.task_type.as_str(), ok.task_id.as_deref()), ("lark", Some("x")));
        assert_eq!(serde_json::from_str::<TaskDataRequest>("{}").unwrap(), TaskDataRequest::default());
        for bad in [r#"[{"task_type":"lark"}]"#, r#"{"task_data":["u1","","lark"]}"#, r#"{"task_data":null}"#, "[]"] {
            assert!(serde_json::from_str::<TaskDataRequest>(bad).is_err(), "{bad} was read");
        }
    }
}
