//! Task ids: `{uuid}_{task_type with '_' as '-'}_{pos}`. The id names the
//! table its task lives in, so get_task and set_task need nothing else.

use std::fmt;

pub use xtimer_core::task::MAX_TASK_TYPE_LEN;
/// Longest uuid part of a task id.
const MAX_UUID_LEN: usize = 64;

/// A decoded task id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskId {
    /// The unique part (a UUID as text).
    pub uuid: String,
    /// The task type, with its underscores.
    pub task_type: String,
    /// The position of its task table (1 and up).
    pub pos: u32,
}

/// Why a task id or task type is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskIdError {
    #[error("task_id {0:?} is not {{uuid}}_{{task_type}}_{{pos}}")]
    Shape(String),
    #[error("task_id {0:?}: the uuid part must be 1 to 64 hex digits and dashes")]
    Uuid(String),
    #[error("task_id {0:?}: the table position must be a whole number from 1")]
    Pos(String),
    #[error("task_type {0:?} must be 1 to 40 ASCII letters, digits and underscores")]
    TaskType(String),
}

/// Checks a task type: it becomes part of a table name, so only
/// `[A-Za-z0-9_]`, 1 to 40 characters.
pub fn check_task_type(task_type: &str) -> Result<(), TaskIdError> {
    xtimer_core::task::check_task_type(task_type)
        .map_err(|_| TaskIdError::TaskType(task_type.chars().take(64).collect()))
}

/// The table of `task_type`'s tasks at `pos`. `task_type` must have passed [`check_task_type`].
pub use xtimer_core::task::table_name;

impl TaskId {
    /// A fresh id for a task of `task_type` stored at `pos`. The uuid is a
    /// version 7 (time-ordered, same text shape as the v4 Go servers
    /// issue), so new ids land at the end of the table's task_id index
    /// instead of dirtying pages all over it.
    #[cfg(feature = "server")]
    pub fn generate(task_type: &str, pos: u32) -> Self {
        Self { uuid: uuid::Uuid::now_v7().to_string(), task_type: task_type.to_string(), pos }
    }

    /// Decodes an id; never panics, whatever the input.
    pub fn parse(text: &str) -> Result<Self, TaskIdError> {
        let shown = || text.chars().take(128).collect::<String>();
        let (uuid, rest) = text.split_once('_').ok_or_else(|| TaskIdError::Shape(shown()))?;
        let (kind, pos) = rest.rsplit_once('_').ok_or_else(|| TaskIdError::Shape(shown()))?;
        if uuid.is_empty() || uuid.len() > MAX_UUID_LEN || !uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(TaskIdError::Uuid(shown()));
        }
        if kind.contains('_') {
            return Err(TaskIdError::Shape(shown()));
        }
        let task_type = kind.replace('-', "_");
        check_task_type(&task_type)?;
        let pos = match pos.parse::<u32>() {
            Ok(p) if p >= 1 && !pos.starts_with(['+', '0']) => p,
            _ => return Err(TaskIdError::Pos(shown())),
        };
        Ok(Self { uuid: uuid.to_string(), task_type, pos })
    }

    /// The table this task lives in.
    pub fn table(&self) -> String {
        table_name(&self.task_type, self.pos)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}_{}", self.uuid, self.task_type.replace('_', "-"), self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_the_go_shape() {
        let id = TaskId::parse("6f1c2a9e-0b7d-4c1e-9a55-3b2f0e6d7c81_lark-video_3").unwrap();
        assert_eq!(id.task_type, "lark_video");
        assert_eq!(id.pos, 3);
        assert_eq!(id.table(), "t_lark_video_task_3");
        assert_eq!(id.to_string(), "6f1c2a9e-0b7d-4c1e-9a55-3b2f0e6d7c81_lark-video_3");
    }

    #[test]
    fn refuses_broken_ids() {
        for bad in [
            "",
            "abc",
            "abc_lark",
            "_lark_1",
            "abc_lark_0",
            "abc_lark_01",
            "abc_lark_+1",
            "abc_lark_-1",
            "abc_lark_x",
            "abc_lark_99999999999",
            "abc__1",
            "abc_la;rk_1",
            "abc_la_rk_1",
            "zz_lark_1",
            "abc_lark\"; DROP TABLE t_timer; --_1",
            "abc_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_1",
        ] {
            assert!(TaskId::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn task_types_are_table_safe() {
        assert!(check_task_type("lark_video2").is_ok());
        for bad in ["", "a-b", "a b", "é", "x\"", &"a".repeat(41)] {
            assert!(check_task_type(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in ".{0,200}") {
            let _ = TaskId::parse(&text);
        }

        #[test]
        fn parse_then_print_round_trips(text in "[0-9a-f-]{1,40}_[A-Za-z0-9-]{1,40}_[0-9]{1,10}") {
            if let Ok(id) = TaskId::parse(&text) {
                prop_assert_eq!(id.to_string(), text);
                prop_assert!(check_task_type(&id.task_type).is_ok());
            }
        }

        #[test]
        fn print_then_parse_round_trips(uuid in "[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}",
                                        kind in "[A-Za-z0-9_]{1,40}", pos in 1u32..) {
            let id = TaskId { uuid, task_type: kind, pos };
            prop_assert_eq!(TaskId::parse(&id.to_string()).unwrap(), id);
        }
    }
}
