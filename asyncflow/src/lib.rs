//! The asyncflow task engine: a durable multi-stage task queue that speaks
//! the asyncflow flowSvr `/v1` wire contract (API.md section 2).
//!
//! # Layout
//!
//! Always (the wire contract, which the worker SDK shares):
//! - [`wire`]: TaskData, TaskScheduleCfg, the replies and their codes.
//! - [`task_id`]: `{uuid}_{type}_{pos}` ids and the tables they name.
//! - [`retry`]: order_time and the retry rule.
//! - [`schedule_log`]: a task's `schedule_log`, as Go workers shape it.
//!
//! With the `server` feature (default), the engine itself:
//! - [`engine`]: [`Tasks`], the `/v1` operations with their rules, and the
//!   [`engine::CreateBatcher`] that writes concurrent creates together.
//! - [`governor`]: the loop that takes timed-out tasks back, rolls full
//!   tables and advances begin_pos, on one node at a time.
//! - [`holds`]: concurrent holds of a type combined into one claim.
//! - [`error`]: this crate's error type, with the wire code of each case.

pub mod retry;
pub mod schedule_log;
pub mod task_id;
pub mod wire;

#[cfg(feature = "server")]
pub mod engine;
#[cfg(feature = "server")]
pub mod error;
#[cfg(feature = "server")]
pub mod governor;
#[cfg(feature = "server")]
pub mod holds;

#[cfg(feature = "server")]
pub use engine::Tasks;
#[cfg(feature = "server")]
pub use error::{Error, Result};
#[cfg(feature = "server")]
pub use governor::Governor;
pub use task_id::TaskId;
pub use wire::{TaskData, TaskScheduleCfg, TaskStatus};
